"""The PYTHON device: a pure-Python interpreter of linearized programs, the executable definition of every op.

The renderer serializes a program (see docs/linear-ir.md) into plain data: per uop (op name, dtype name, source
positions, arg). The program decodes it once into a tree of small closures (straight-line steps, and loops that
run their body) and runs that tree over a list holding the value of every uop by position. Elementwise ops go
through `tinygrad.uop.alu` (exec_alu, cast_scalar, to_bits/from_bits), so the results are the reference ones.

Vectors are tuples. Programs with BARRIER, WMMA or SHUFFLE run the threads of a block in lockstep: each thread is a
generator that yields at those points; a BARRIER resumes when every thread of the block reached it, a SHUFFLE with
thread (t ^ mask)'s value, a WMMA when the whole warp did, with D = A*B + C computed from the lanes' fragments through
the TensorCore's layout tables (in double, rounded once to the accumulator dtype). DEFINE_LOCAL arrays are shared by the
threads of one block.
"""
from __future__ import annotations

import base64
import itertools
import pickle
import time
from collections.abc import Callable, Generator
from typing import Any

from tinygrad.device.devstring import Target, instance_name
from tinygrad.device.plugin import TensorCore, python_interpreter
from tinygrad.device.runtime import Allocator, Compiled
from tinygrad.dtype import DTYPES_BY_NAME, DType, PtrDType, dtypes
from tinygrad.renderer import Renderer
from tinygrad.uop.alu import alu_fn, bits_reader, bits_writer, cast_scalar, caster, fp8_fnuz_from_bits, from_bits, to_bits
from tinygrad.uop.dsl import GRID_WAIT
from tinygrad.uop.ops import STORE_ADD, GroupOp, Ops, UOp

# one encoded uop: (op name, dtype name ("float", or "float*" for a pointer), source positions, plain-data arg)
Encoded = tuple[str, str, tuple[int, ...], Any]
Step = Callable[[list], None]

_MAGIC = "PYTHONv1 "
_DTYPES: dict[str, DType] = {dt.name: dt for dt in DTYPES_BY_NAME.values()} | {"void": dtypes.void}
# the ops a linearized program may hold (docs/linear-ir.md); AFTER and NOOP are folded away by render
_CONTROL = {Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_REG, Ops.DEFINE_LOCAL, Ops.CONST, Ops.SPECIAL, Ops.RANGE, Ops.END,
            Ops.INDEX, Ops.LOAD, Ops.STORE, Ops.CAST, Ops.BITCAST, Ops.SINK, Ops.VECTORIZE, Ops.GEP, Ops.BARRIER, Ops.WMMA,
            Ops.SHUFFLE}
_SUPPORTED = frozenset(_CONTROL | GroupOp.ALU)
# memoryview.cast knows these struct chars; other dtypes (half, bfloat16, fp8) are stored as raw unsigned ints
_CASTABLE = frozenset("?bBhHiIqQfd")


# ---- encoding

def _enc_dtype(dt: DType) -> str:
  """"float", "half@8" for a vector, a trailing "*" for a pointer."""
  if isinstance(dt, PtrDType): return _enc_dtype(dt.base) + "*"
  return dt.name if dt.count == 1 else f"{dt.name}@{dt.count}"


def _dec_dtype(name: str) -> DType:
  """The element dtype (pointers decode to what they point at), a vector for "name@count"."""
  base, _, count = name.rstrip("*").partition("@")
  if base not in _DTYPES: raise ValueError(f"unknown dtype {name!r} in a PYTHON program")
  return _DTYPES[base].vec(int(count)) if count else _DTYPES[base]


def _enc_arg(u: UOp, tcs: dict[str, TensorCore]) -> Any:
  """Only what the interpreter needs, as plain data (no UOp/Ops/DType objects at run time)."""
  if u.op is Ops.CONST:
    if u.dtype.count != 1: raise ValueError(f"PYTHON has no vector constants ({u.dtype!r}): build them with VECTORIZE")
    return cast_scalar(u.arg, u.dtype) if u.dtype != dtypes.void else u.arg
  if u.op is Ops.DEFINE_GLOBAL: return int(u.arg)
  if u.op is Ops.DEFINE_VAR: return (str(u.arg[0]), int(u.arg[1]), int(u.arg[2]))
  if u.op in (Ops.DEFINE_REG, Ops.DEFINE_LOCAL): return int(u.dtype.size)  # type: ignore[attr-defined]
  if u.op is Ops.SPECIAL: return (str(u.arg[0]), u.arg[1] if isinstance(u.arg[1], int) else None)
  if u.op is Ops.GEP: return int(u.arg[0])
  if u.op is Ops.SHUFFLE: return int(u.arg)
  if u.op is Ops.LOAD and u.arg is not None: return tuple(u.arg)  # ("matrix", matrices, trans)
  if u.op is Ops.STORE and u.arg == STORE_ADD:
    if u.src[1].dtype.count != 1: raise ValueError(f"PYTHON runs no vector atomic adds ({u.src[1].dtype!r})")
    return STORE_ADD
  if u.op is Ops.BARRIER and isinstance(u.arg, tuple): return tuple(u.arg)  # (copy groups, smem-operand batches) left in flight
  if u.op is Ops.WMMA:  # the layout tables travel with the program: the interpreter needs no plugin
    if (tc := tcs.get(u.arg[0])) is None: raise ValueError(f"PYTHON has no tensor core {u.arg[0]!r} for this arch (known: {sorted(tcs)})")
    # (reader, A's and B's layout, first and last of its batch); the reader pickles by reference (its module)
    smem = ("smem", tc.smem_reader, *u.arg[4:8]) if tc.smem_operands else None
    return (tc.dims, tc.threads, tc.a_layout, tc.b_layout, tc.c_layout, tc.dtype_in.name, tc.dtype_out.name, tc.fp8_fnuz, smem)
  return None


def _grid_wait(u: UOp) -> bool: return u.op is Ops.BARRIER and u.arg == GRID_WAIT


def encode(uops: list[UOp], tensor_cores: tuple[TensorCore, ...] = ()) -> list[Encoded]:
  tcs = {tc.name: tc for tc in tensor_cores}
  pos: dict[UOp, int] = {}
  out: list[Encoded] = []
  for n, u in enumerate(uops):
    if u.op in (Ops.AFTER, Ops.NOOP):  # only orders things: its value is its first source's
      pos[u] = pos[u.src[0]]
      continue
    if _grid_wait(u): continue  # a GPU's wait for the kernel before (uop.dsl.GRID_WAIT): kernels run one after another here
    if u.op not in _SUPPORTED: raise ValueError(f"PYTHON can't run {u.op} (uop {n}); linearized programs hold only the ops in docs/linear-ir.md")
    missing = [s.op.name for s in u.src if s not in pos and not _grid_wait(s)]
    if missing: raise ValueError(f"uop {n} ({u.op.name}) uses sources {missing} that don't come before it in the program")
    pos[u] = len(out)
    out.append((u.op.name, _enc_dtype(u.dtype), tuple(pos[s] for s in u.src if s in pos), _enc_arg(u, tcs)))
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
  runs_blocks = True  # its threads run in lockstep: a hand-written kernel's LOCAL ranges and barriers run here
  shuffle_lanes = 32  # as CUDA's warps: a grouped reduction told it runs on a GPU (has_local) combines by SHUFFLE here too
  atomic_add = (*dtypes.ints, *dtypes.floats)  # threads run one step at a time: any scalar add is indivisible
  shared_max = 227 * 1024  # emulation has no limit of its own: sm_90's, so every tensor-core tile config runs here

  def __init__(self, target: Target | None = None):
    self.arch = target.arch if target is not None else ""

  @property
  def tensor_cores(self) -> tuple[TensorCore, ...]:  # type: ignore[override]
    """The arch's tensor cores from the plugins (`PYTHON::sm_80`), emulated from their layout tables."""
    if not self.arch: return ()
    from tinygrad.device.registry import registry
    return tuple(registry.tensor_cores(self.arch))

  def render(self, name: str, uops: list[UOp]) -> str:
    return serialize(name, encode(uops, self.tensor_cores if any(u.op is Ops.WMMA for u in uops) else ()))


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
  cast = caster(dt)
  def step(v: list) -> None: v[i] = cast(v[a])
  return step


def _bitcast(i: int, dt: DType, src_dt: DType, a: int) -> Step:
  read, write = bits_reader(dt), bits_writer(src_dt)
  def step(v: list) -> None: v[i] = read(write(v[a]))
  return step


def _loop(r: int, end: int, body: list[Step]) -> Step:
  """RANGE..END: the loop var counts 0..end-1; end <= 0 skips the body (range() is empty)."""
  def step(v: list) -> None:
    for x in range(v[end]):
      v[r] = x
      for f in body: f(v)
  return step


_COLLECTIVE = {"barrier": "BARRIER", "shuffle": "SHUFFLE", "matrix": "collective LOAD"}  # the op each lockstep event comes from
# lockstep programs: a body is a list of (is_generator, step); generator steps yield at BARRIER/WMMA/SHUFFLE/collective LOAD
GenBody = list[tuple[bool, Callable]]


def _run_gen(body: GenBody, v: list) -> Generator[Any, Any, None]:
  for is_gen, f in body:
    if is_gen: yield from f(v)
    else: f(v)


def _loop_gen(r: int, end: int, body: GenBody) -> Callable[[list], Generator[Any, Any, None]]:
  def step(v: list) -> Generator[Any, Any, None]:
    for x in range(v[end]):
      v[r] = x
      yield from _run_gen(body, v)
  return step


def _barrier(i: int) -> Callable[[list], Generator[Any, Any, None]]:
  def step(v: list) -> Generator[Any, Any, None]: yield ("barrier", i)
  return step


def _wmma(i: int, a: int, b: int, c: int) -> Callable[[list], Generator[Any, Any, None]]:
  def step(v: list) -> Generator[Any, Any, None]: v[i] = yield ("wmma", i, v[a], v[b], v[c])
  return step


def _wmma_smem(i: int, a: tuple[int, int], b: tuple[int, int], c: int) -> Callable[[list], Generator[Any, Any, None]]:
  """A and B are (index, shared array) slots: the instruction reads its operands from shared memory itself."""
  def step(v: list) -> Generator[Any, Any, None]: v[i] = yield ("wmma", i, (v[a[0]], v[a[1]]), (v[b[0]], v[b[1]]), v[c])
  return step


def _matrix_load(i: int, x: int, buf: int) -> Callable[[list], Generator[Any, Any, None]]:
  def step(v: list) -> Generator[Any, Any, None]: v[i] = yield ("matrix", i, v[x], v[buf])
  return step


def matrix_load_emulator(matrices: int, trans: bool, dt: DType, raw: bool) -> Callable[[list[int], Any], list[tuple]]:
  """fn(each lane's address, the shared array) -> each lane's registers: lane l gives row l&7 of matrix l>>3 (8 elements
  from its address); register j of lane l is matrix j's elements (l>>2, 2*(l&3) + {0, 1}), or transposed
  (2*(l&3) + {0, 1}, l>>2)."""
  read = bits_reader(dt)
  def run(addrs: list[int], buf: Any) -> list[tuple]:
    rows = [[[read(e) if raw else e for e in buf[addrs[8 * j + r]:addrs[8 * j + r] + 8]] for r in range(8)] for j in range(matrices)]
    out = []
    for lane in range(32):
      g, t = lane >> 2, lane & 3
      out.append(tuple(x for j in range(matrices) for x in ((rows[j][2 * t][g], rows[j][2 * t + 1][g]) if trans else rows[j][g][2 * t:2 * t + 2])))
    return out
  return run


def _shuffle(i: int, x: int) -> Callable[[list], Generator[Any, Any, None]]:
  def step(v: list) -> Generator[Any, Any, None]: v[i] = yield ("shuffle", i, v[x], None)
  return step


def _shuffle_emulator(kernel: str, mask: int) -> Callable[[list[Any], Any], list[Any]]:
  """fn(each thread's value, None) -> each thread's result: thread t gets thread t ^ mask's value. The interpreter's warp is
  the block, so any warp size a renderer has (Renderer.shuffle_lanes) runs here; the mask must stay inside the block."""
  def run(values: list[Any], _: Any) -> list[Any]:
    if len(values) % (2 * mask):
      raise RuntimeError(f"kernel {kernel!r}: SHUFFLE with lane mask {mask} in a block of {len(values)} threads (not a multiple of {2 * mask})")
    return [values[t ^ mask] for t in range(len(values))]
  return run


def _vectorize(i: int, src: tuple[int, ...]) -> Step:
  def step(v: list) -> None: v[i] = tuple(v[s] for s in src)
  return step


def _gep(i: int, a: int, lane: int) -> Step:
  def step(v: list) -> None: v[i] = v[a][lane]
  return step


def smem_wmma_emulator(arg: tuple, raw: bool) -> Callable[[list[tuple], list[tuple], list[tuple]], list[tuple]]:
  """fn((index, shared array) per lane for A and B, c per lane) -> d per lane for an instruction that reads A and B from
  shared memory (TensorCore.smem_operands): the spec's reader turns each operand's byte address (element index times
  itemsize; every shared array starts 1024-byte aligned, as the GPU renderers place them) into a matrix."""
  (M, N, K), threads, _, _, c_layout, din_name, dout_name = arg[:7]
  _, reader, a_op, b_op = arg[8][:4]
  din, dout = _DTYPES[din_name], _DTYPES[dout_name]
  cast_d, read_bits = caster(dout), bits_reader(din)
  reads: set[tuple[int, int]] = set()  # (shared array, element) read since the program last took them (_Batches)
  def operand(lanes: list[tuple], rows: int, op: tuple) -> list[list[Any]]:
    idx, buf = lanes[0]
    if any(x != idx for x, _ in lanes): raise RuntimeError(f"WMMA: the lanes of one instruction name different operand addresses: {sorted({x for x, _ in lanes})}")
    def read(addr: int) -> Any:
      if addr % din.itemsize or not 0 <= addr // din.itemsize < len(buf):
        raise IndexError(f"WMMA operand read at byte {addr} outside its shared array ({len(buf)} elements of {din.name})")
      reads.add((id(buf.obj), addr // din.itemsize))
      e = buf[addr // din.itemsize]
      return read_bits(e) if raw else e
    return reader(read, idx * din.itemsize, rows, K, *op, din.itemsize)
  def run(a: list[tuple], b: list[tuple], c: list[tuple]) -> list[tuple]:
    A, B = operand(a, M, a_op), operand(b, N, b_op)  # M x K and N x K
    C = [[0.0] * N for _ in range(M)]
    for lane in range(threads):
      for e, (r, col) in enumerate(c_layout[lane]): C[r][col] = c[lane][e]
    D = [[cast_d(sum(x * y for x, y in zip(A[r], B[col])) + C[r][col]) for col in range(N)] for r in range(M)]
    return [tuple(D[r][col] for r, col in c_layout[lane]) for lane in range(threads)]
  def take() -> set[tuple[int, int]]:
    out = set(reads)
    reads.clear()
    return out
  run.take_reads = take  # type: ignore[attr-defined]
  return run


class _Batches:
  """Smem-operand instructions run asynchronously on the GPU: a batch (first..last WMMA) may read shared memory until a
  BARRIER with arg (groups, b) has retired all but the newest b batches. The interpreter computes each WMMA at once, so
  this keeps what the unretired batches read and fails a store into it (a pipeline that refills a buffer too early)."""

  def __init__(self) -> None:
    self.open: set[tuple[int, int]] = set()
    self.committed: list[set[tuple[int, int]]] = []

  def issued(self, reads: set[tuple[int, int]], last: bool) -> None:
    self.open |= reads
    if last: self.committed, self.open = [*self.committed, self.open], set()

  def retire(self, keep: int) -> None: self.committed = self.committed[len(self.committed) - keep:] if keep else []

  def check(self, kernel: str, buf: Any, lo: int, hi: int) -> None:
    key = id(buf.obj)
    for batch in (self.open, *self.committed):
      if any((key, e) in batch for e in range(lo, hi)):
        raise RuntimeError(f"kernel {kernel!r}: a store into shared memory (elements {lo}..{hi - 1}) that a WMMA batch still in flight "
                           "reads: a BARRIER must retire the batch first (its arg: (copy groups, batches) left in flight)")


def wmma_emulator(arg: tuple) -> Callable[[list[tuple], list[tuple], list[tuple]], list[tuple]]:
  """fn(a per lane, b per lane, c per lane) -> d per lane for one TensorCore, from its layout tables."""
  (M, N, K), threads, a_layout, b_layout, c_layout, din_name, dout_name = arg[:7]
  fnuz = len(arg) > 7 and arg[7]  # TensorCore.fp8_fnuz
  din, dout = _DTYPES[din_name], _DTYPES[dout_name]
  cast_d = caster(dout)
  # tf32 operands (f32 registers): the instruction reads the top 19 bits. fp8 operands of a renderer that keeps fp8 as
  # bytes (codegen/fp8.py) arrive as ints: their bits, in the FNUZ flavour where the instruction reads that
  def rd(x: Any) -> Any:
    if din == dtypes.float32: return from_bits(to_bits(x, din) & 0xFFFFE000, din)
    if din not in (dtypes.fp8e4m3, dtypes.fp8e5m2) or not isinstance(x, int): return x
    return fp8_fnuz_from_bits(x, din) if fnuz else from_bits(x, din)
  def run(a: list[tuple], b: list[tuple], c: list[tuple]) -> list[tuple]:
    A = [[0.0] * K for _ in range(M)]
    B = [[0.0] * N for _ in range(K)]
    C = [[0.0] * N for _ in range(M)]
    seen: dict[tuple[str, int, int], Any] = {}
    def put(which: str, m: list[list[float]], i: int, j: int, v: Any) -> None:
      # a layout may give one element to several lanes (RDNA3 WMMA repeats A and B in lanes 16..31): they must agree
      if seen.setdefault((which, i, j), v) != v and v == v:
        raise RuntimeError(f"WMMA: lanes hold different values for {which}[{i}][{j}] ({seen[(which, i, j)]!r} and {v!r})")
      m[i][j] = v
    for lane in range(threads):
      for e, (r, k) in enumerate(a_layout[lane]): put("A", A, r, k, rd(a[lane][e]))
      for e, (k, col) in enumerate(b_layout[lane]): put("B", B, k, col, rd(b[lane][e]))
      for e, (r, col) in enumerate(c_layout[lane]): put("C", C, r, col, c[lane][e])
    Bt = list(zip(*B))
    D = [[cast_d(sum(x * y for x, y in zip(A[r], Bt[col])) + C[r][col]) for col in range(N)] for r in range(M)]
    return [tuple(D[r][col] for r, col in c_layout[lane]) for lane in range(threads)]
  return run


class _Mem:
  """What LOAD/STORE need about the buffer behind an INDEX: where it lives, how it is read, how to name it, and how
  many of its elements one access covers (a half8 access of a half buffer: 8)."""

  def __init__(self, slot: int, dt: DType, raw: bool, label: str, width: int = 1):
    self.slot, self.dt, self.raw, self.label, self.width = slot, dt, raw, label, width


def _oob(kernel: str, mem: _Mem, idx: int, buf: Any) -> None:
  raise IndexError(f"kernel {kernel!r}: index {idx} is out of bounds for {mem.label} ({len(buf)} elements of {mem.dt.name})")


def _load_vec(kernel: str, i: int, mem: _Mem, x: int) -> Step:
  b, w, raw, read = mem.slot, mem.width, mem.raw, bits_reader(mem.dt)
  def step(v: list) -> None:
    idx, buf = v[x], v[b]
    if idx < 0 or idx + w > len(buf): _oob(kernel, mem, idx if idx < 0 else idx + w - 1, buf)
    v[i] = tuple(read(e) for e in buf[idx:idx + w]) if raw else tuple(buf[idx:idx + w])
  return step


def _store_vec(kernel: str, mem: _Mem, x: int, val: int) -> Step:
  b, w, raw, write = mem.slot, mem.width, mem.raw, bits_writer(mem.dt)
  def step(v: list) -> None:
    idx, buf = v[x], v[b]
    if idx < 0 or idx + w > len(buf): _oob(kernel, mem, idx if idx < 0 else idx + w - 1, buf)
    for n, e in enumerate(v[val]): buf[idx + n] = write(e) if raw else e
  return step


def _load(kernel: str, i: int, mem: _Mem, x: int) -> Step:
  if mem.width > 1: return _load_vec(kernel, i, mem, x)
  b, read = mem.slot, bits_reader(mem.dt)
  if mem.raw:
    def step(v: list) -> None:
      idx, buf = v[x], v[b]
      if idx < 0: _oob(kernel, mem, idx, buf)
      try: v[i] = read(buf[idx])
      except IndexError: _oob(kernel, mem, idx, buf)
  else:
    def step(v: list) -> None:
      idx, buf = v[x], v[b]
      if idx < 0: _oob(kernel, mem, idx, buf)
      try: v[i] = buf[idx]
      except IndexError: _oob(kernel, mem, idx, buf)
  return step


def _store(kernel: str, mem: _Mem, x: int, val: int) -> Step:
  if mem.width > 1: return _store_vec(kernel, mem, x, val)
  b, write = mem.slot, bits_writer(mem.dt)
  if mem.raw:
    def step(v: list) -> None:
      idx, buf = v[x], v[b]
      if idx < 0: _oob(kernel, mem, idx, buf)
      try: buf[idx] = write(v[val])
      except IndexError: _oob(kernel, mem, idx, buf)
  else:
    def step(v: list) -> None:
      idx, buf = v[x], v[b]
      if idx < 0: _oob(kernel, mem, idx, buf)
      try: buf[idx] = v[val]
      except IndexError: _oob(kernel, mem, idx, buf)
  return step


def _atomic_add(kernel: str, mem: _Mem, x: int, val: int) -> Step:
  """*ptr += value (STORE_ADD): threads run one step at a time here, so the read and the write are one step"""
  b, dt = mem.slot, mem.dt
  def step(v: list) -> None:
    idx, buf = v[x], v[b]
    if idx < 0: _oob(kernel, mem, idx, buf)
    try:
      if mem.raw: buf[idx] = to_bits(cast_scalar(from_bits(buf[idx], dt) + v[val], dt), dt)
      else: buf[idx] = cast_scalar(buf[idx] + v[val], dt)
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
    self.locals: list[tuple[int, int, str, int]] = []   # (slot, size, view format, itemsize): one array per block
    self.specials: list[tuple[int, str, int]] = []      # (slot, 'g' or 'l', dim)
    self.mems: dict[int, _Mem] = {}                     # INDEX position -> its buffer
    self.wmmas: dict[int, Callable] = {}                # WMMA / collective LOAD / SHUFFLE position -> its emulator
    self.lanes: dict[int, int] = {}                     # ... -> lanes per instruction (0: the whole block, a SHUFFLE)
    # BARRIER/WMMA/SHUFFLE make the threads of a block run in lockstep (generators); other programs run thread after thread
    self.lockstep = any(op in ("BARRIER", "WMMA", "DEFINE_LOCAL", "SHUFFLE") for op, _, _, _ in self.prog)
    if any(op == "LOAD" and arg is not None for op, _, _, arg in self.prog) and not self.lockstep:
      raise ValueError(f"kernel {name!r}: a collective LOAD outside a lockstep (shared-memory) program")
    # smem-operand WMMAs: their batches' reads are tracked (per block) against shared-memory stores, see _Batches
    self.smem_last: dict[int, bool] = {i: bool(arg[8][5]) for i, (op, _, _, arg) in enumerate(self.prog) if op == "WMMA" and len(arg) > 8 and arg[8]}
    self.barrier_batches: dict[int, int] = {i: arg[1] for i, (op, _, _, arg) in enumerate(self.prog) if op == "BARRIER" and arg is not None}
    self.batches = _Batches()
    self.gen_body: GenBody = []
    self.body: list[Step] = []
    if self.lockstep: self.gen_body = self._build()
    else: self.body = [f for _, f in self._build()]
    self.nbufs = max((p for _, p, _, _ in self.globals), default=-1) + 1
    # a buffer that no access reaches is no parameter (codegen/program.py's globals): the engine then passes just the used
    # ones, in order, as the compiled renderers number their parameters; a caller may also pass every buffer by its number
    self.used_position = {p: i for i, p in enumerate(sorted({p for _, p, _, _ in self.globals}))}

  # ---- decoding into closures
  def _build(self) -> GenBody:
    root: GenBody = []
    stack: list[tuple[int, int, GenBody]] = [(-1, -1, root)]  # (RANGE position, its end's position, body being filled)
    for i, (op_name, dt_name, src, arg) in enumerate(self.prog):
      op, dt = Ops[op_name], _dec_dtype(dt_name)
      if op is Ops.RANGE: stack.append((i, src[0], []))
      elif op is Ops.END:
        if stack[-1][0] != src[0]:
          raise ValueError(f"kernel {self.name!r}: END at {i} closes the RANGE at {src[0]}, but the innermost open loop is at {stack[-1][0]}")
        r, end, body = stack.pop()
        if any(g for g, _ in body): stack[-1][2].append((True, _loop_gen(r, end, body)))
        else: stack[-1][2].append((False, _loop(r, end, [f for _, f in body])))
      elif op is Ops.BARRIER: stack[-1][2].append((True, _barrier(i)))
      elif op is Ops.WMMA and len(arg) > 8 and arg[8] is not None:  # A and B read from shared memory by the instruction
        (ma, xa), (mb, xb) = self._index(i, src[0]), self._index(i, src[1])
        if ma.raw != mb.raw: raise ValueError(f"kernel {self.name!r}: WMMA operands at {i} are stored differently")
        self.wmmas[i], self.lanes[i] = smem_wmma_emulator(arg, ma.raw), int(arg[1])
        stack[-1][2].append((True, _wmma_smem(i, (xa, ma.slot), (xb, mb.slot), src[2])))
      elif op is Ops.WMMA:
        self.wmmas[i], self.lanes[i] = wmma_emulator(arg), int(arg[1])  # arg[1]: the TensorCore's threads (32, or AMD's wave64)
        stack[-1][2].append((True, _wmma(i, *src)))
      elif op is Ops.LOAD and arg is not None:  # a warp-collective matrix load (NVIDIA's ldmatrix): runs in lockstep like WMMA
        if arg[0] != "matrix" or len(src) != 1: raise ValueError(f"kernel {self.name!r}: unknown collective LOAD {arg!r} at {i}")
        mem, x = self._index(i, src[0])
        self.wmmas[i], self.lanes[i] = matrix_load_emulator(arg[1], arg[2], mem.dt, mem.raw), 32
        stack[-1][2].append((True, _matrix_load(i, x, mem.slot)))
      elif op is Ops.SHUFFLE:  # a butterfly exchange between the lanes: runs in lockstep, over the whole block (see _shuffle)
        self.wmmas[i], self.lanes[i] = _shuffle_emulator(self.name, arg), 0
        stack[-1][2].append((True, _shuffle(i, src[0])))
      elif (step := self._step(i, op, dt, src, arg)) is not None: stack[-1][2].append((False, step))
    if len(stack) > 1: raise ValueError(f"kernel {self.name!r}: the RANGE at {stack[-1][0]} has no END")
    return root

  def _step(self, i: int, op: Ops, dt: DType, src: tuple[int, ...], arg: Any) -> Step | None:
    """The closure for one uop, or None for uops whose value is set up once per call (or that have none)."""
    if op is Ops.CONST: self.init[i] = arg
    elif op is Ops.DEFINE_GLOBAL: self.globals.append((i, arg, _view_fmt(dt)[0], dt.itemsize))
    elif op is Ops.DEFINE_VAR: self.vars.append((i, *arg))
    elif op is Ops.DEFINE_REG:
      zero = cast_scalar(0, dt.scalar())
      self.regs.append((i, arg, zero if dt.count == 1 else (zero,) * dt.count))
    elif op is Ops.DEFINE_LOCAL: self.locals.append((i, arg, _view_fmt(dt)[0], dt.itemsize))
    elif op is Ops.SPECIAL: self.specials.append((i, *self._special(arg[0])))
    elif op is Ops.INDEX: self.mems[i] = self._mem(src[0], dt)
    elif op is Ops.LOAD: return self._load_step(i, src)
    elif op is Ops.STORE: return self._store_step(i, src, add=arg == STORE_ADD)
    elif op is Ops.CAST: return _cast(i, dt, src[0])
    elif op is Ops.BITCAST: return _bitcast(i, dt, _dec_dtype(self.prog[src[0]][1]), src[0])
    elif op is Ops.VECTORIZE: return _vectorize(i, src)
    elif op is Ops.GEP: return _gep(i, src[0], arg)
    elif op in GroupOp.ALU:
      if dt.count != 1: raise ValueError(f"kernel {self.name!r}: PYTHON runs no vector {op.name} (at {i})")
      if len(src) not in (1, 2, 3): raise ValueError(f"kernel {self.name!r}: {op.name} at {i} has {len(src)} sources")
      return (_alu1, _alu2, _alu3)[len(src) - 1](i, op, dt, *src)
    elif op is not Ops.SINK: raise ValueError(f"kernel {self.name!r}: PYTHON can't run {op.name} (at {i})")
    return None

  def _special(self, name: str) -> tuple[str, int]:
    if name[:4] in ("gidx", "lidx") and name[4:].isdigit(): return name[0], int(name[4:])
    raise ValueError(f"kernel {self.name!r}: unknown SPECIAL {name!r}; expected gidxN or lidxN")

  def _mem(self, buf: int, access: DType) -> _Mem:
    op_name, dt_name, _, arg = self.prog[buf]
    dt = _dec_dtype(dt_name)
    if access.count % dt.count: raise ValueError(f"kernel {self.name!r}: a {access!r} access into a buffer of {dt!r}")
    width = access.count // dt.count  # elements of the buffer one access covers
    if op_name == "DEFINE_GLOBAL": return _Mem(buf, dt, _view_fmt(dt)[1], f"buffer {arg}", width)
    if op_name == "DEFINE_LOCAL": return _Mem(buf, dt, _view_fmt(dt)[1], f"shared array at {buf}", width)
    if op_name == "DEFINE_REG": return _Mem(buf, dt, False, f"register array at {buf}", width)  # a list of Python scalars
    raise ValueError(f"kernel {self.name!r}: INDEX into {op_name}; only DEFINE_GLOBAL, DEFINE_LOCAL and DEFINE_REG can be indexed")

  def _index(self, at: int, x: int) -> tuple[_Mem, int]:
    if x not in self.mems: raise ValueError(f"kernel {self.name!r}: uop {at} needs an INDEX as its address, got {self.prog[x][0]}")
    return self.mems[x], self.prog[x][2][1]

  def _checked_store(self, inner: Step, mem: _Mem, x: int) -> Step:
    slot, width = mem.slot, mem.width
    def step(v: list) -> None:
      self.batches.check(self.name, v[slot], v[x], v[x] + width)
      inner(v)
    return step

  def _load_step(self, i: int, src: tuple[int, ...]) -> Step:
    mem, x = self._index(i, src[0])
    step = _load(self.name, i, mem, x)
    return step if len(src) == 1 else _gated_load(i, step, src[1], src[2])

  def _store_step(self, i: int, src: tuple[int, ...], add: bool = False) -> Step:
    mem, x = self._index(i, src[0])
    step = _atomic_add(self.name, mem, x, src[1]) if add else _store(self.name, mem, x, src[1])
    if self.smem_last and self.prog[mem.slot][0] == "DEFINE_LOCAL": step = self._checked_store(step, mem, x)
    return step if len(src) == 2 else _gated_store(step, src[2])

  # ---- running
  def _values(self, bufs: tuple[Any, ...], vals: tuple[int, ...]) -> list[Any]:
    compact = len(bufs) < self.nbufs and len(bufs) - len(self.vars) * (not vals) == len(self.used_position)
    if len(bufs) < self.nbufs and not compact: raise TypeError(f"kernel {self.name!r} takes {self.nbufs} buffers, got {len(bufs)}")
    given = len(self.used_position) if compact else self.nbufs
    vals = tuple(vals) or tuple(bufs[given:])  # vars may also come positionally, after the buffers
    if len(vals) != len(self.vars): raise TypeError(f"kernel {self.name!r} takes {len(self.vars)} int vars, got {len(vals)}")
    v = self.init.copy()
    for slot, p, fmt, itemsize in self.globals: v[slot] = typed_view(bufs[self.used_position[p] if compact else p], fmt, itemsize)
    for (slot, name, lo, hi), val in zip(self.vars, vals, strict=True):
      if not lo <= val <= hi: raise ValueError(f"kernel {self.name!r}: var {name}={val} is outside its range [{lo}, {hi}]")
      v[slot] = val
    return v

  def _run(self, v: list[Any]) -> None:
    for slot, size, zero in self.regs: v[slot] = [zero] * size  # registers are fresh per run (per thread)
    for f in self.body: f(v)

  def _run_threads(self, v: list[Any], global_size: tuple[int, ...], local_size: tuple[int, ...]) -> None:
    # no barriers or shared memory in the program, so threads may run one after another
    sizes = {"g": tuple(global_size) + (1, 1, 1), "l": tuple(local_size) + (1, 1, 1)}
    for gid in itertools.product(*(range(s) for s in sizes["g"][:3])):
      for lid in itertools.product(*(range(s) for s in sizes["l"][:3])):
        ids = {"g": gid, "l": lid}
        for slot, kind, dim in self.specials: v[slot] = ids[kind][dim]
        self._run(v)

  def _run_lockstep(self, v0: list[Any], global_size: tuple[int, ...], local_size: tuple[int, ...]) -> None:
    gs, ls = tuple(global_size) + (1, 1, 1), tuple(local_size) + (1, 1, 1)
    nthreads = ls[0] * ls[1] * ls[2]
    for gid in itertools.product(*(range(s) for s in gs[:3])):
      self.batches = _Batches()
      shared = [(slot, typed_view(bytearray(max(size, 1) * itemsize), fmt, itemsize)) for slot, size, fmt, itemsize in self.locals]
      threads = []
      for flat in range(nthreads):  # x fastest, as CUDA numbers threads (warp = flat // 32)
        lid = (flat % ls[0], flat // ls[0] % ls[1], flat // (ls[0] * ls[1]))
        v = v0.copy()
        for slot, size, zero in self.regs: v[slot] = [zero] * size
        for slot, buf in shared: v[slot] = buf
        for slot, kind, dim in self.specials: v[slot] = (gid if kind == "g" else lid)[dim]
        threads.append(_run_gen(self.gen_body, v))
      self._lockstep(threads)

  def _lockstep(self, threads: list[Generator[Any, Any, None]]) -> None:
    """Runs a block's threads to their collectives and does each once every thread it joins is there: a barrier, the whole
    block; a warp-level one (a shuffle, a tensor-core matrix op), that warp's lanes alone, so that warps may take different
    paths between barriers (a loop of data-dependent length) as on the GPU."""
    n = len(threads)
    events: list[Any] = [None] * n
    finished = [False] * n
    def advance(ids: range | list[int], sends: list[Any]) -> None:
      for i, send in zip(ids, sends):
        try: events[i] = threads[i].send(send)
        except StopIteration: events[i], finished[i] = None, True
    advance(range(n), [None] * n)
    while not all(finished):
      waiting = [e for e in events if e is not None]
      first = waiting[0]
      if all(e is not None and e[:2] == first[:2] for e in events) and first[0] == "barrier":
        if (keep := self.barrier_batches.get(first[1])) is not None: self.batches.retire(keep)
        advance(range(n), [None] * n)
        continue
      progressed = False
      for at in range(n):
        e = events[at]
        if e is None or e[0] == "barrier": continue
        warp = self.lanes[e[1]] or self._shuffle_group(n, e)
        if n % warp: raise RuntimeError(f"kernel {self.name!r}: {e[0]} needs whole warps, the block has {n} threads")
        w = at - at % warp
        lanes = events[w:w + warp]
        if any(x is None or x[:2] != e[:2] for x in lanes): continue
        emulate = self.wmmas[e[1]]
        if e[0] in ("matrix", "shuffle"): sends = emulate([x[2] for x in lanes], lanes[0][3])
        else: sends = emulate([x[2] for x in lanes], [x[3] for x in lanes], [x[4] for x in lanes])
        if e[1] in self.smem_last: self.batches.issued(emulate.take_reads(), self.smem_last[e[1]])  # type: ignore[attr-defined]
        advance(range(w, w + warp), sends)
        progressed = True
      if not progressed:
        raise RuntimeError(f"kernel {self.name!r}: the threads of a block diverged at a {_COLLECTIVE.get(first[0], 'WMMA')}")

  def _shuffle_group(self, n: int, e: Any) -> int:
    """The threads a SHUFFLE joins: a warp of 32 (as CUDA's; wider where its lane mask reaches further, as AMD's wave64), or
    the whole block when it is not made of warps."""
    mask = self.prog[e[1]][3]
    group = max(32, 2 * int(mask))
    return group if n % group == 0 else n

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    start = time.perf_counter()
    v = self._values(bufs, vals)
    if self.lockstep: self._run_lockstep(v, global_size, local_size)
    elif self.specials: self._run_threads(v, global_size, local_size)
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


python_interpreter.encode = lambda name, uops, tcs: serialize(name, encode(uops, tuple(tcs))).encode()
python_interpreter.load = PythonProgram
