"""Checks on UOp graphs, run after each pipeline stage when VERIFY=1: types, shapes, and loop structure."""
from __future__ import annotations

from tinygrad.dtype import PtrDType, dtypes
from tinygrad.uop.ops import GroupOp, Ops, UOp


class VerifyError(AssertionError):
  def __init__(self, stage: str, node: UOp, why: str):
    super().__init__(f"invalid UOp after {stage}: {why}\n  node: {node.op} {node.dtype!r} arg={node.arg!r} "
                     f"src=[{', '.join(f'{s.op.name}:{s.dtype!r}' for s in node.src)}]")


def _check_node(u: UOp, stage: str) -> None:
  def fail(why: str) -> None: raise VerifyError(stage, u, why)
  if u.op in GroupOp.Comparison:
    if u.dtype != dtypes.bool: fail("a comparison must produce bool")
    if u.src[0].dtype != u.src[1].dtype: fail("compared values must have one dtype")
  elif u.op is Ops.WHERE:
    if u.src[0].dtype != dtypes.bool: fail("WHERE's condition must be bool")
    if not (u.dtype == u.src[1].dtype == u.src[2].dtype): fail("WHERE's branches must match its dtype")
  elif u.op in (Ops.SHL, Ops.SHR):
    if u.src[0].dtype != u.dtype: fail("shift value must match the result dtype")
  elif u.op in GroupOp.ALU:
    if any(s.dtype != u.dtype for s in u.src): fail(f"{u.op.name} sources must all be {u.dtype!r}")
  elif u.op is Ops.INDEX:
    if not isinstance(u.src[0].dtype, PtrDType): fail("INDEX needs a pointer")
    if not dtypes.is_int(u.src[1].dtype): fail("an index must be an int")
  elif u.op is Ops.LOAD:
    ptr = u.src[0].dtype
    if not isinstance(ptr, PtrDType) or ptr.base != u.dtype: fail("LOAD dtype must be the pointer's element dtype")
    if len(u.src) == 3 and (u.src[1].dtype != dtypes.bool or u.src[2].dtype != u.dtype): fail("gated LOAD: (ptr, bool gate, alt)")
  elif u.op is Ops.STORE:
    ptr = u.src[0].dtype
    if not isinstance(ptr, PtrDType) or ptr.base != u.src[1].dtype: fail("STORE value must have the pointer's element dtype")
  elif u.op is Ops.RANGE:
    if not dtypes.is_int(u.src[0].dtype): fail("a RANGE end must be an int")
  elif u.op is Ops.END:
    if u.src[0].op is not Ops.RANGE: fail("END must close a RANGE")
  elif u.op is Ops.DEFINE_LOCAL:
    if not isinstance(u.dtype, PtrDType) or u.dtype.addrspace != "local" or u.dtype.size <= 0: fail("DEFINE_LOCAL needs a sized local PtrDType")
  elif u.op is Ops.BARRIER:
    if u.dtype != dtypes.void: fail("BARRIER has no value")
    arg = u.arg if isinstance(u.arg, tuple) and len(u.arg) == 2 else (u.arg,)  # smem-operand kernels: (copy groups, instruction batches)
    named = isinstance(u.arg, tuple) and bool(u.arg) and isinstance(u.arg[0], str)  # a renderer's kind (uop.dsl.GRID_WAIT, "mbar_wait", ...)
    if u.arg is not None and not named and not all(isinstance(a, int) and a >= 0 for a in arg):
      fail("BARRIER's arg: async copy groups left in flight (int >= 0), or (groups, smem-operand instruction batches)")
  elif u.op is Ops.WMMA:
    if len(u.src) != 3 or u.src[2].dtype != u.dtype: fail("WMMA: (A, B, C) with C of the result's dtype")
    if u.dtype.count < 2 or u.src[0].dtype.count < 1: fail("WMMA works on fragment vectors")
  elif u.op is Ops.SHUFFLE:
    if len(u.src) != 1 or u.src[0].dtype != u.dtype: fail("SHUFFLE: (x,) with x of the result's dtype")
    if u.dtype.count != 1 or u.dtype.itemsize != 4: fail("SHUFFLE exchanges 32-bit scalars")
    if not isinstance(u.arg, int) or u.arg <= 0: fail("SHUFFLE's arg: the lane mask (int > 0)")
  elif u.op is Ops.REDUCE:
    if any(r.op is not Ops.RANGE for r in u.src[1:]): fail("REDUCE reduces over RANGEs")
    if u.arg not in GroupOp.Reduce: fail(f"{u.arg} is not a reduce op")


def verify_kernel(sink: UOp, stage: str = "kernel") -> None:
  for u in sink.toposort(): _check_node(u, stage)


def verify_linear(uops: list[UOp], stage: str = "linearize") -> None:
  """Every source is defined earlier, loops nest, and no value is used outside the loop that defines it."""
  position: dict[UOp, int] = {}
  scope: dict[UOp, tuple[UOp, ...]] = {}
  open_loops: list[UOp] = []
  for i, u in enumerate(uops):
    _check_node(u, stage)
    for s in u.src:
      if s not in position: raise VerifyError(stage, u, f"source {s.op} is used before it is defined")
      if scope[s] != tuple(open_loops[:len(scope[s])]): raise VerifyError(stage, u, f"source {s.op} is used outside its loop")
    if u.op is Ops.END:
      if not open_loops or open_loops[-1] is not u.src[0]: raise VerifyError(stage, u, "END does not close the innermost loop")
      open_loops.pop()
    position[u] = i
    scope[u] = tuple(open_loops)
    if u.op is Ops.RANGE: open_loops.append(u)
  if open_loops: raise VerifyError(stage, uops[-1], f"{len(open_loops)} loop(s) never closed")


def verify_tensor_graph(sink: UOp) -> None:
  """Shapes of elementwise sources agree (the Tensor layer broadcasts before building nodes)."""
  for u in sink.toposort(gate=lambda x: x.op is not Ops.BUFFER):
    if u.op in GroupOp.ALU:
      shapes = {s.shape for s in u.src}
      if len(shapes) > 1: raise VerifyError("tensor graph", u, f"elementwise sources have different shapes {sorted(shapes)}")
