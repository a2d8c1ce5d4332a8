"""Kernels written by hand in UOps: the few names a person needs (tinygrad's), and the pass that turns what they wrote into
an ordinary kernel AST.

    i = UOp.range(n, 0, AxisType.GLOBAL)                 a loop (GPU: a thread index), id 0
    acc = UOp.placeholder((1,), dtypes.float, 0)         a private array (AddrSpace.LOCAL: shared by a block's threads)
    acc.after(i)[0].store(0.0)                           acc[0], ordered inside loop i; a STORE of 0.0
    x = A[i, k]                                          an element of a buffer (a LOAD where it is used as a value)
    st.end(k)  st.barrier()                              close loop k after st; all threads of the block wait for st
    sink = st.end(i).sink(arg=KernelInfo("my_kernel"))   the kernel; KernelInfo names it and lists the opts to apply

What a person writes differs from the AST codegen takes in three ways, all fixed by `finalize_kernel`: buffers carry
their shape (a RESHAPE over the DEFINE_*), so that `A[i, k]` can flatten the index; an indexed element is a value
(INDEX of the element dtype), which becomes INDEX of a pointer plus a LOAD, or the STORE's pointer; and `x.after(...)`
sits on the buffer, which moves onto each INDEX of it. A RANGE listed in an AFTER next to side effects (`acc.after(init,
k)`) also starts after them, as codegen's own reductions do.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tinygrad.dtype import DType, PtrDType, dtypes
from tinygrad.helpers import prod
from tinygrad.uop.ops import Ops, UOp


class AxisType(Enum):
  """What a loop becomes. GLOBAL: GPU block index (gidx), a loop on CPUs; LOCAL: a thread of the block (lidx; GPU renderers
  only); REDUCE and LOOP: a loop everywhere (REDUCE marks it as reducing, for opts such as UNROLL)."""
  GLOBAL = "global"; LOCAL = "local"; REDUCE = "reduce"; LOOP = "loop"  # noqa: E702


class AddrSpace(Enum):
  """Where a placeholder lives: REG, private to a thread; LOCAL, shared by the threads of a block (GPU shared memory)."""
  REG = "reg"; LOCAL = "local"  # noqa: E702


# a BARRIER with this arg, where the renderer has `grid_wait` (CUDA sm_90+): the wait for the grids before this kernel (which the
# renderer otherwise puts first), after the BARRIER's sources. A hand-written kernel loads what no kernel before it in a graph
# writes first, and orders every other global access after it (`buf.after(wait)`)
GRID_WAIT = ("grid_wait",)


@dataclass(frozen=True)
class KernelInfo:
  """The SINK's arg of a hand-written kernel: its name (None: the usual r_/E_ name) and the opts to apply. Codegen applies
  exactly these (no heuristics, no BEAM): a hand-written kernel is optimized only when asked.

  `spread=True`: each block gets a compute unit (SM) of its own, for a latency-bound kernel of few blocks. Where a GPU may
  schedule a kernel's blocks while the kernel before it drains (CUDA sm_90+ graphs), they would otherwise land packed on the few
  SMs with room left behind a kernel that fills the GPU; the CUDA renderer reserves more than half an SM's shared memory."""
  name: str | None = None
  opts_to_apply: tuple[Any, ...] = ()
  spread: bool = False

  def __post_init__(self) -> None:
    if self.name is not None and not (isinstance(self.name, str) and self.name.isidentifier() and self.name.isascii()):
      raise ValueError(f"KernelInfo name {self.name!r}: a kernel's name must be an ASCII identifier (letters, digits, _)")
    object.__setattr__(self, "opts_to_apply", tuple(self.opts_to_apply))


_call_ids = itertools.count()


@dataclass(frozen=True)
class CustomKernel:
  """The arg of a tensor-graph CALL made by `Tensor.custom_kernel`: the kernel AST (parameter i is the CALL's source i), the
  gradient function and the bound Variables the kernel takes (BIND nodes: their values are the launch's). `uid` keeps two
  calls distinct (each runs: a kernel may accumulate into its buffers)."""
  ast: UOp
  grad_fxn: Callable[..., Any] | None = None
  binds: tuple[UOp, ...] = ()
  uid: int = field(default_factory=lambda: next(_call_ids))


@dataclass(frozen=True)
class ProgramInfo:
  """The arg of a PROGRAM: the kernel's symbol name, its launch dims, and how many buffer parameters it takes (custom_kernel
  fills that in: one per tensor)."""
  name: str
  global_size: tuple[int, int, int] = (1, 1, 1)
  local_size: tuple[int, int, int] = (1, 1, 1)
  n_params: int | None = None


def program(name: str, src: str | None = None, binary: bytes | None = None, global_size: tuple[int, ...] = (1, 1, 1),
            local_size: tuple[int, ...] = (1, 1, 1)) -> UOp:
  """A kernel as the backend's source (compiled by the device's compiler) or binary (loaded as it is): PROGRAM(SOURCE?, BINARY?).
  It takes the buffers as parameters 0.. in order (then nothing else) under the symbol `name`."""
  if src is None and binary is None: raise ValueError(f"program {name!r}: give its source (src=) or its binary (binary=)")
  if not name.isidentifier(): raise ValueError(f"program name {name!r} must be the kernel's symbol, an identifier")
  def dims(d: tuple[int, ...]) -> tuple[int, int, int]:
    if not (1 <= len(d) <= 3 and all(isinstance(x, int) and x >= 1 for x in d)): raise ValueError(f"program {name!r}: launch dims {d} must be 1-3 ints >= 1")
    return (*d, *(1,) * (3 - len(d)))  # type: ignore[return-value]
  parts = ((UOp(Ops.SOURCE, arg=src),) if src is not None else ()) + ((UOp(Ops.BINARY, arg=bytes(binary)),) if binary is not None else ())
  return UOp(Ops.PROGRAM, src=parts, arg=ProgramInfo(name, dims(tuple(global_size)), dims(tuple(local_size))))


# ---- constructors (UOp.range, UOp.placeholder, ... call these)

def make_range(end: int | UOp, rid: int, kind: AxisType | str = AxisType.LOOP) -> UOp:
  kind_name = kind.value if isinstance(kind, AxisType) else AxisType(kind).value
  if not isinstance(rid, int): raise TypeError(f"UOp.range needs an int id (its nesting order), got {rid!r}")
  size = end if isinstance(end, UOp) else UOp.const(dtypes.int32, end)
  return UOp(Ops.RANGE, dtypes.int32, (size,), (rid, kind_name))


def shaped(buf: UOp, shape: tuple[int, ...]) -> UOp:
  """A DEFINE_GLOBAL/REG/LOCAL that knows its shape (for `buf[i, j]` and `buf.shape`)."""
  return UOp(Ops.RESHAPE, buf.dtype, (buf,), tuple(shape))


def placeholder(shape: int | tuple[int, ...], dtype: DType, slot: int, addrspace: AddrSpace | str = AddrSpace.REG) -> UOp:
  shape = (shape,) if isinstance(shape, int) else tuple(shape)
  space = addrspace.value if isinstance(addrspace, AddrSpace) else AddrSpace(addrspace).value
  op = Ops.DEFINE_REG if space == "reg" else Ops.DEFINE_LOCAL
  return shaped(UOp(op, dtype.ptr(prod(shape), space), (), slot), shape)


def param(slot: int, shape: tuple[int, ...], dtype: DType, size: int | None = None) -> UOp:
  """Kernel parameter `slot`: a buffer of `dtype` elements seen with `shape` (its size `size`, default the shape's)."""
  return shaped(UOp(Ops.DEFINE_GLOBAL, dtype.ptr(prod(shape) if size is None else size), (), slot), shape)


def buffer_of(x: UOp) -> tuple[UOp, tuple[int, ...] | None]:
  """The DEFINE_* under AFTER/RESHAPE wrappers, and the shape a RESHAPE gave it."""
  shape = None
  while x.op in (Ops.AFTER, Ops.RESHAPE):
    if x.op is Ops.RESHAPE and shape is None: shape = tuple(x.arg)
    x = x.src[0]
  return x, shape


def index(buf: UOp, idx: Any) -> UOp:
  """buf[i, j, ...] (row-major in the buffer's shape) or buf[flat]: the element, usable as a value or as a STORE target."""
  base, shape = buffer_of(buf)
  if not isinstance(base.dtype, PtrDType):
    raise TypeError(f"only a buffer can be indexed (a kernel parameter or a placeholder), not a {buf.op.name} of {buf.dtype!r}")
  idxs = idx if isinstance(idx, tuple) else (idx,)
  if len(idxs) != 1:
    if shape is None or len(shape) != len(idxs): raise IndexError(f"{len(idxs)} indices for a buffer of shape {shape}: give one per axis")
    flat: UOp | int = 0
    for i, n in zip(idxs, shape): flat = flat * n + i
    idxs = (flat,)
  i = idxs[0] if isinstance(idxs[0], UOp) else UOp.const(dtypes.int32, idxs[0])
  if i.op is Ops.INDEX: i = i.load()  # an index read from a buffer (counts[labels[i]]): its element's value
  return UOp(Ops.INDEX, base.dtype.base, (buf, i))


def end(x: UOp, ranges: tuple[UOp, ...]) -> UOp:
  """Close `ranges` after x (innermost first: the highest id is closed first)."""
  if not ranges: raise ValueError("end() needs the ranges to close")
  if (bad := next((r for r in ranges if r.op is not Ops.RANGE), None)) is not None: raise TypeError(f"end() closes RANGEs, got a {bad.op.name}")
  for r in sorted(ranges, key=lambda r: r.arg[0], reverse=True): x = UOp(Ops.END, dtypes.void, (r, x))
  return x


# ---- the pass: hand-written kernel -> kernel AST

def finalize_kernel(sink: UOp) -> UOp:
  """The kernel a person wrote with this module's names, as codegen's AST (see the module docstring)."""
  if sink.op is not Ops.SINK: raise TypeError(f"a kernel is a SINK of stores (`.sink()`), got a {sink.op.name}")
  # a RANGE listed next to side effects in an AFTER starts after them. One range at a time, first in graph order: the side
  # effects a later range starts after may hold an earlier one (a loop after a loop), which must be the rewritten one
  while (r_deps := _first_range_start(sink)) is not None:
    r, deps = r_deps
    sink = sink.substitute({r: r.replace(src=(*r.src, *deps))})
  # an element INDEX: the pointer where a STORE or LOAD takes it, a LOAD where it is a value
  new: dict[UOp, UOp] = {}
  ptrs: dict[UOp, UOp] = {}
  for n in sink.toposort():
    if n.op is Ops.INDEX and not isinstance(n.dtype, PtrDType):
      ptrs[n] = _pointer(new[n.src[0]], new[n.src[1]])
      continue
    src = tuple((ptrs[s] if j == 0 and n.op in (Ops.STORE, Ops.LOAD) else ptrs[s].load()) if s in ptrs else new[s] for j, s in enumerate(n.src))
    new[n] = n if src == n.src else n.replace(src=src)
  return new[sink]


def _first_range_start(sink: UOp) -> tuple[UOp, tuple[UOp, ...]] | None:
  """The first RANGE (in graph order) listed in an AFTER next to side effects it doesn't start after yet, and those."""
  starts: dict[UOp, list[UOp]] = {}
  for n in sink.toposort():
    if n.op is not Ops.AFTER: continue
    for r in (d for d in n.src[1:] if d.op is Ops.RANGE):
      starts.setdefault(r, []).extend(d for d in n.src[1:] if d.op is not Ops.RANGE and d not in r.src and r not in d.toposort())
  return next(((r, tuple(dict.fromkeys(ds))) for r, ds in starts.items() if ds), None)


def _pointer(buf: UOp, i: UOp) -> UOp:
  """INDEX(AFTER(RESHAPE(DEFINE), deps), i) -> AFTER(INDEX(DEFINE, i), deps)."""
  deps: list[UOp] = []
  while buf.op in (Ops.AFTER, Ops.RESHAPE):
    if buf.op is Ops.AFTER: deps.extend(buf.src[1:])
    buf = buf.src[0]
  ptr = buf.index(i)
  return UOp(Ops.AFTER, ptr.dtype, (ptr, *dict.fromkeys(deps))) if deps else ptr
