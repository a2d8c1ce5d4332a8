"""The PYTHON device: a pure-Python interpreter of linearized programs, the executable definition of every op.

The renderer serializes a program (see docs/linear-ir.md) into plain data: per uop (op name, dtype name, source
positions, arg). The program decodes it once into a tree of small closures (straight-line steps, and loops that
run their body) and runs that tree over a list holding the value of every uop by position. Elementwise ops go
through `tinygrad.uop.alu` (exec_alu, cast_scalar, to_bits/from_bits), so the results are the reference ones.
"""
from __future__ import annotations

import base64
import itertools
import pickle
import time
from collections.abc import Callable
from typing import Any

from tinygrad.device.devstring import Target, instance_name
from tinygrad.device.runtime import Allocator, Compiled
from tinygrad.dtype import DTYPES_BY_NAME, DType, PtrDType, dtypes
from tinygrad.renderer import Renderer
from tinygrad.uop.alu import alu_fn, cast_scalar, from_bits, to_bits
from tinygrad.uop.ops import GroupOp, Ops, UOp

# one encoded uop: (op name, dtype name ("float", or "float*" for a pointer), source positions, plain-data arg)
Encoded = tuple[str, str, tuple[int, ...], Any]
Step = Callable[[list], None]

_MAGIC = "PYTHONv1 "
_DTYPES: dict[str, DType] = {dt.name: dt for dt in DTYPES_BY_NAME.values()} | {"void": dtypes.void}
# the ops a linearized program may hold (docs/linear-ir.md); AFTER and NOOP are folded away by render
_CONTROL = {Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_REG, Ops.CONST, Ops.SPECIAL, Ops.RANGE, Ops.END, Ops.INDEX,
            Ops.LOAD, Ops.STORE, Ops.CAST, Ops.BITCAST, Ops.SINK}
_SUPPORTED = frozenset(_CONTROL | GroupOp.ALU)
# the elementwise ops named in the linear IR contract; SUB and POW are left for codegen to decompose
_NATIVE = frozenset({Ops.NEG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.ADD, Ops.MUL, Ops.FDIV,
                     Ops.MAX, Ops.IDIV, Ops.MOD, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR,
                     Ops.WHERE, Ops.MULACC})
# memoryview.cast knows these struct chars; other dtypes (half, bfloat16, fp8) are stored as raw unsigned ints
_CASTABLE = frozenset("?bBhHiIqQfd")


# ---- encoding

def _enc_dtype(dt: DType) -> str:
  if isinstance(dt, PtrDType): return _enc_dtype(dt.base) + "*"
  if dt.count != 1: raise ValueError(f"the PYTHON renderer has no vector types, got {dt!r}")
  return dt.name


def _dec_dtype(name: str) -> DType:
  """The element dtype (pointers decode to what they point at)."""
  if (base := name.rstrip("*")) not in _DTYPES: raise ValueError(f"unknown dtype {name!r} in a PYTHON program")
  return _DTYPES[base]


def _enc_arg(u: UOp) -> Any:
  """Only what the interpreter needs, as plain data (no UOp/Ops/DType objects at run time)."""
  if u.op is Ops.CONST: return cast_scalar(u.arg, u.dtype) if u.dtype != dtypes.void else u.arg
  if u.op is Ops.DEFINE_GLOBAL: return int(u.arg)
  if u.op is Ops.DEFINE_VAR: return (str(u.arg[0]), int(u.arg[1]), int(u.arg[2]))
  if u.op is Ops.DEFINE_REG: return int(u.dtype.size)  # type: ignore[attr-defined]
  if u.op is Ops.SPECIAL: return (str(u.arg[0]), u.arg[1] if isinstance(u.arg[1], int) else None)
  return None


def encode(uops: list[UOp]) -> list[Encoded]:
  pos: dict[UOp, int] = {}
  out: list[Encoded] = []
  for n, u in enumerate(uops):
    if u.op in (Ops.AFTER, Ops.NOOP):  # only orders things: its value is its first source's
      pos[u] = pos[u.src[0]]
      continue
    if u.op not in _SUPPORTED: raise ValueError(f"PYTHON can't run {u.op} (uop {n}); linearized programs hold only the ops in docs/linear-ir.md")
    missing = [s.op.name for s in u.src if s not in pos]
    if missing: raise ValueError(f"uop {n} ({u.op.name}) uses sources {missing} that don't come before it in the program")
    pos[u] = len(out)
    out.append((u.op.name, _enc_dtype(u.dtype), tuple(pos[s] for s in u.src), _enc_arg(u)))
  return out


def _listing(name: str, prog: list[Encoded]) -> str:
  """A readable form of the program, for DEBUG output of the rendered source."""
  lines = [f"# PYTHON kernel {name}"]
  lines += [f"# {i:4d} {op:<13} {dt:<10} {list(src)!s:<16} {'' if arg is None else repr(arg)}".rstrip() for i, (op, dt, src, arg) in enumerate(prog)]
  return "\n".join(lines)


def serialize(name: str, prog: list[Encoded]) -> str:
  return _listing(name, prog) + "\n" + _MAGIC + base64.b64encode(pickle.dumps(prog, protocol=4)).decode()


def deserialize(lib: bytes | str) -> list[Encoded]:
  text = lib.decode() if isinstance(lib, (bytes, bytearray)) else lib
  last = text.rsplit("\n", 1)[-1]
  if not last.startswith(_MAGIC): raise ValueError("not a PYTHON program: render it with PythonRenderer")
  return pickle.loads(base64.b64decode(last[len(_MAGIC):]))


class PythonRenderer(Renderer):
  """Serializes the program for the interpreter. `arch` is kept for tensor-core emulation."""
  device = "PYTHON"
  name = "PYTHON"
  native_ops = _NATIVE

  def __init__(self, target: Target | None = None):
    self.arch = target.arch if target is not None else ""

  def render(self, name: str, uops: list[UOp]) -> str: return serialize(name, encode(uops))


# ---- step builders: each returns a closure f(values) made once per program

def _alu1(i: int, op: Ops, dt: DType, a: int) -> Step:
  fn = alu_fn(op, dt)
  def step(v: list) -> None: v[i] = fn(v[a])
  return step


def _alu2(i: int, op: Ops, dt: DType, a: int, b: int) -> Step:
  fn = alu_fn(op, dt)
  def step(v: list) -> None: v[i] = fn(v[a], v[b])
  return step


def _alu3(i: int, op: Ops, dt: DType, a: int, b: int, c: int) -> Step:
  fn = alu_fn(op, dt)
  def step(v: list) -> None: v[i] = fn(v[a], v[b], v[c])
  return step


def _cast(i: int, dt: DType, a: int) -> Step:
  def step(v: list) -> None: v[i] = cast_scalar(v[a], dt)
  return step


def _bitcast(i: int, dt: DType, src_dt: DType, a: int) -> Step:
  def step(v: list) -> None: v[i] = from_bits(to_bits(v[a], src_dt), dt)
  return step


def _loop(r: int, end: int, body: list[Step]) -> Step:
  """RANGE..END: the loop var counts 0..end-1; end <= 0 skips the body (range() is empty)."""
  def step(v: list) -> None:
    for x in range(v[end]):
      v[r] = x
      for f in body: f(v)
  return step


class _Mem:
  """What LOAD/STORE need about the buffer behind an INDEX: where it lives, how it is read, how to name it."""

  def __init__(self, slot: int, dt: DType, raw: bool, label: str):
    self.slot, self.dt, self.raw, self.label = slot, dt, raw, label


def _oob(kernel: str, mem: _Mem, idx: int, buf: Any) -> None:
  raise IndexError(f"kernel {kernel!r}: index {idx} is out of bounds for {mem.label} ({len(buf)} elements of {mem.dt.name})")


def _load(kernel: str, i: int, mem: _Mem, x: int) -> Step:
  b, dt = mem.slot, mem.dt
  if mem.raw:
    def step(v: list) -> None:
      idx, buf = v[x], v[b]
      if idx < 0: _oob(kernel, mem, idx, buf)
      try: v[i] = from_bits(buf[idx], dt)
      except IndexError: _oob(kernel, mem, idx, buf)
  else:
    def step(v: list) -> None:
      idx, buf = v[x], v[b]
      if idx < 0: _oob(kernel, mem, idx, buf)
      try: v[i] = buf[idx]
      except IndexError: _oob(kernel, mem, idx, buf)
  return step


def _store(kernel: str, mem: _Mem, x: int, val: int) -> Step:
  b, dt = mem.slot, mem.dt
  if mem.raw:
    def step(v: list) -> None:
      idx, buf = v[x], v[b]
      if idx < 0: _oob(kernel, mem, idx, buf)
      try: buf[idx] = to_bits(v[val], dt)
      except IndexError: _oob(kernel, mem, idx, buf)
  else:
    def step(v: list) -> None:
      idx, buf = v[x], v[b]
      if idx < 0: _oob(kernel, mem, idx, buf)
      try: buf[idx] = v[val]
      except IndexError: _oob(kernel, mem, idx, buf)
  return step


def _gated_load(i: int, inner: Step, gate: int, alt: int) -> Step:
  # a false gate must not touch memory: the index may well be out of bounds then
  def step(v: list) -> None:
    if v[gate]: inner(v)
    else: v[i] = v[alt]
  return step


def _gated_store(inner: Step, gate: int) -> Step:
  def step(v: list) -> None:
    if v[gate]: inner(v)
  return step


def _view_fmt(dt: DType) -> tuple[str, bool]:
  """(memoryview format, raw?): raw buffers hold the bits and are converted with from_bits/to_bits."""
  if dt.fmt is not None and dt.fmt in _CASTABLE: return dt.fmt, False
  return {1: "B", 2: "H", 4: "I", 8: "Q"}[dt.itemsize], True


def typed_view(buf: Any, fmt: str, itemsize: int) -> memoryview:
  mv = memoryview(buf).cast("B")
  if mv.nbytes % itemsize: mv = mv[:mv.nbytes - mv.nbytes % itemsize]  # a 0-element buffer is allocated as 1 byte
  return mv.cast(fmt)  # type: ignore[call-overload]  # fmt is one of _CASTABLE, checked by _view_fmt


class PythonProgram:
  """Decodes a PYTHON program once; calling it interprets it on bytearray/memoryview buffers."""

  def __init__(self, name: str, lib: bytes):
    self.name = name
    self.prog = deserialize(lib)
    self.init: list[Any] = [None] * len(self.prog)
    self.globals: list[tuple[int, int, str, int]] = []  # (slot, param number, view format, itemsize)
    self.vars: list[tuple[int, str, int, int]] = []     # (slot, name, min, max)
    self.regs: list[tuple[int, int, Any]] = []          # (slot, size, zero)
    self.specials: list[tuple[int, str, int]] = []      # (slot, 'g' or 'l', dim)
    self.mems: dict[int, _Mem] = {}                     # INDEX position -> its buffer
    self.body = self._build()
    self.nbufs = max((p for _, p, _, _ in self.globals), default=-1) + 1

  # ---- decoding into closures
  def _build(self) -> list[Step]:
    root: list[Step] = []
    stack: list[tuple[int, list[Step]]] = [(-1, root)]  # (RANGE position, body being filled)
    for i, (op_name, dt_name, src, arg) in enumerate(self.prog):
      op, dt = Ops[op_name], _dec_dtype(dt_name)
      if op is Ops.RANGE:
        body: list[Step] = []
        stack[-1][1].append(_loop(i, src[0], body))
        stack.append((i, body))
      elif op is Ops.END:
        if stack[-1][0] != src[0]:
          raise ValueError(f"kernel {self.name!r}: END at {i} closes the RANGE at {src[0]}, but the innermost open loop is at {stack[-1][0]}")
        stack.pop()
      elif (step := self._step(i, op, dt, src, arg)) is not None: stack[-1][1].append(step)
    if len(stack) > 1: raise ValueError(f"kernel {self.name!r}: the RANGE at {stack[-1][0]} has no END")
    return root

  def _step(self, i: int, op: Ops, dt: DType, src: tuple[int, ...], arg: Any) -> Step | None:
    """The closure for one uop, or None for uops whose value is set up once per call (or that have none)."""
    if op is Ops.CONST: self.init[i] = arg
    elif op is Ops.DEFINE_GLOBAL: self.globals.append((i, arg, _view_fmt(dt)[0], dt.itemsize))
    elif op is Ops.DEFINE_VAR: self.vars.append((i, *arg))
    elif op is Ops.DEFINE_REG: self.regs.append((i, arg, cast_scalar(0, dt)))
    elif op is Ops.SPECIAL: self.specials.append((i, *self._special(arg[0])))
    elif op is Ops.INDEX: self.mems[i] = self._mem(src[0])
    elif op is Ops.LOAD: return self._load_step(i, src)
    elif op is Ops.STORE: return self._store_step(i, src)
    elif op is Ops.CAST: return _cast(i, dt, src[0])
    elif op is Ops.BITCAST: return _bitcast(i, dt, _dec_dtype(self.prog[src[0]][1]), src[0])
    elif op in GroupOp.ALU:
      if len(src) not in (1, 2, 3): raise ValueError(f"kernel {self.name!r}: {op.name} at {i} has {len(src)} sources")
      return (_alu1, _alu2, _alu3)[len(src) - 1](i, op, dt, *src)
    elif op is not Ops.SINK: raise ValueError(f"kernel {self.name!r}: PYTHON can't run {op.name} (at {i})")
    return None

  def _special(self, name: str) -> tuple[str, int]:
    if name[:4] in ("gidx", "lidx") and name[4:].isdigit(): return name[0], int(name[4:])
    raise ValueError(f"kernel {self.name!r}: unknown SPECIAL {name!r}; expected gidxN or lidxN")

  def _mem(self, buf: int) -> _Mem:
    op_name, dt_name, _, arg = self.prog[buf]
    dt = _dec_dtype(dt_name)
    if op_name == "DEFINE_GLOBAL": return _Mem(buf, dt, _view_fmt(dt)[1], f"buffer {arg}")
    if op_name == "DEFINE_REG": return _Mem(buf, dt, False, f"register array at {buf}")  # a list of Python scalars
    raise ValueError(f"kernel {self.name!r}: INDEX into {op_name}; only DEFINE_GLOBAL and DEFINE_REG can be indexed")

  def _index(self, at: int, x: int) -> tuple[_Mem, int]:
    if x not in self.mems: raise ValueError(f"kernel {self.name!r}: uop {at} needs an INDEX as its address, got {self.prog[x][0]}")
    return self.mems[x], self.prog[x][2][1]

  def _load_step(self, i: int, src: tuple[int, ...]) -> Step:
    mem, x = self._index(i, src[0])
    step = _load(self.name, i, mem, x)
    return step if len(src) == 1 else _gated_load(i, step, src[1], src[2])

  def _store_step(self, i: int, src: tuple[int, ...]) -> Step:
    mem, x = self._index(i, src[0])
    step = _store(self.name, mem, x, src[1])
    return step if len(src) == 2 else _gated_store(step, src[2])

  # ---- running
  def _values(self, bufs: tuple[Any, ...], vals: tuple[int, ...]) -> list[Any]:
    if len(bufs) < self.nbufs: raise TypeError(f"kernel {self.name!r} takes {self.nbufs} buffers, got {len(bufs)}")
    vals = tuple(vals) or tuple(bufs[self.nbufs:])  # vars may also come positionally, after the buffers
    if len(vals) != len(self.vars): raise TypeError(f"kernel {self.name!r} takes {len(self.vars)} int vars, got {len(vals)}")
    v = self.init.copy()
    for slot, p, fmt, itemsize in self.globals: v[slot] = typed_view(bufs[p], fmt, itemsize)
    for (slot, name, lo, hi), val in zip(self.vars, vals, strict=True):
      if not lo <= val <= hi: raise ValueError(f"kernel {self.name!r}: var {name}={val} is outside its range [{lo}, {hi}]")
      v[slot] = val
    return v

  def _run(self, v: list[Any]) -> None:
    for slot, size, zero in self.regs: v[slot] = [zero] * size  # registers are fresh per run (per thread)
    for f in self.body: f(v)

  def _run_threads(self, v: list[Any], global_size: tuple[int, ...], local_size: tuple[int, ...]) -> None:
    # no barriers or shared memory in the IR, so threads may run one after another
    sizes = {"g": tuple(global_size) + (1, 1, 1), "l": tuple(local_size) + (1, 1, 1)}
    for gid in itertools.product(*(range(s) for s in sizes["g"][:3])):
      for lid in itertools.product(*(range(s) for s in sizes["l"][:3])):
        ids = {"g": gid, "l": lid}
        for slot, kind, dim in self.specials: v[slot] = ids[kind][dim]
        self._run(v)

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    start = time.perf_counter()
    v = self._values(bufs, vals)
    if self.specials: self._run_threads(v, global_size, local_size)
    else: self._run(v)
    return time.perf_counter() - start if wait else None


# ---- memory and the device

class PythonAllocator(Allocator):
  """Host memory as bytearrays; views are memoryview slices of them."""

  def _alloc(self, size: int, options: Any) -> bytearray: return bytearray(size)
  def _copyin(self, dest: Any, src: memoryview) -> None: memoryview(dest).cast("B")[:src.nbytes] = src
  def _copyout(self, dest: memoryview, src: Any) -> None: dest[:] = memoryview(src).cast("B")[:dest.nbytes]
  def view(self, opaque: Any, offset: int, size: int) -> memoryview: return memoryview(opaque).cast("B")[offset:offset + size]
  def as_memoryview(self, opaque: Any) -> memoryview: return memoryview(opaque).cast("B")


def open_python(index: int, target: Target) -> Compiled:
  return Compiled(instance_name("PYTHON", index), PythonAllocator(), PythonProgram)
