"""A CPU matmul's small, narrow operand copied into the layout its kernel vectorizes.

The CPU kernels vectorize a matmul one of two ways (codegen/heuristics.py): the register block puts B's columns (N) in the
vector lanes, which wants B contiguous along N and N a multiple of the lanes; the few-vectors form puts the reduction (K) in
the lanes, which wants both operands contiguous along K. A classifier's last layer fits neither: x @ W with W (512, 10) is
contiguous along a 10-wide N, and its input gradient g @ W.T reads W.T along a 10-long K. Both ran scalar at 3-4 GFLOP/s
(the MLP training step of bench/mlp_step.py, one thread: 434 and 207 us of its 4.8 ms), while the same products with W
stored the other way round took 37 and 31 us. Such an operand is small (N or K is narrow), so one copy into the other layout
(a kernel of its own, one read and one write of it) costs little:
  narrow N (fewer than LANES columns, contiguous along them): copied contiguous along K, for the few-vectors form; the other
    operand too where it is read across K (a weight gradient's x.T);
  short K (fewer than LANES, B contiguous along it), N at least LANES: copied contiguous along N, for the register block.
An operand that is computed (a relu(h + b), a softmax's gradient) is computed into its copy: once, in the layout wanted (one
thread, us: relu(x + b) @ W 410 -> 52, relu(x + b).T @ softmax(y) 197 -> 84).
Applied by pack.py's rewrite_cpu_reduce where panel packing doesn't apply.
"""
from __future__ import annotations

from collections.abc import Callable

from tinygrad.dtype import dtypes
from tinygrad.helpers import ContextVar, prod
from tinygrad.uop.ops import Ops, UOp

RELAYOUT_NARROW = ContextVar("RELAYOUT_NARROW", 1)  # 0: narrow operands are read in place
LANES = 16  # a vector register of floats (AVX-512); narrower N or shorter K than this is "narrow"
MIN_ROWS = 16  # outputs that reuse the copied operand (rows of the other one): fewer don't pay for the copy
MAX_BYTES = 1 << 20  # the copied operand at most this big (a narrow one is small)
MAX_OTHER_BYTES = 8 << 20  # ... and the other one, where it is copied too

Strides = Callable[[UOp], tuple[UOp, list[int]]]


def relayout_narrow(r: UOp, axis_strides: Strides) -> UOp | None:
  """REDUCE_AXIS(ADD, MUL(a, b)) over one axis with b small and narrow (see the module's docstring): the same reduction over a
  copy of b laid out for the kernel, else None. axis_strides(x): the buffer under x's views and x's step in it per axis."""
  if not RELAYOUT_NARROW.value or r.arg[0] is not Ops.ADD or (x := r.src[0]).op is not Ops.MUL or not dtypes.is_float(x.dtype):
    return None
  if not all(isinstance(s, int) for s in x.shape): return None
  shape: tuple[int, ...] = x.shape
  reds = [a for a in r.arg[1] if shape[a] > 1]
  outs = [a for a in range(len(shape)) if a not in r.arg[1] and shape[a] > 1]
  if len(reds) != 1 or len(outs) < 2: return None
  k, j = reds[0], outs[-1]
  views = [axis_strides(op) for op in x.src]
  for i, (_, steps) in enumerate(views):
    osteps = views[1 - i][1]
    # (a computed operand, a weight gradient's relu(h) or softmax grad, is computed into the copy: once, in the layout wanted)
    if steps[k] == 0 or steps[j] == 0 or osteps[j] != 0 or osteps[k] == 0: continue
    if prod(shape[a] for a in outs if steps[a] == 0) < MIN_ROWS: continue
    if bytes_read(x.src[i], steps) > MAX_BYTES: continue
    srcs = list(x.src)
    # (N from 16 up vectorizes in place well enough: 128x512 @ (512x24) 52 -> 83 us copied, one thread; 512x100 558 -> 501)
    if abs(steps[j]) == 1 and shape[j] < LANES and shape[k] >= LANES and abs(steps[k]) != 1:
      srcs[i] = copied_with_axes_last(x.src[i], steps, (j, k))  # narrow N: contiguous along K
      if abs(osteps[k]) != 1 and bytes_read(x.src[1 - i], osteps) <= MAX_OTHER_BYTES: srcs[1 - i] = copied_with_axes_last(x.src[1 - i], osteps, (k,))
    elif abs(steps[k]) == 1 and shape[k] < LANES and shape[j] >= LANES and abs(steps[j]) != 1:
      srcs[i] = copied_with_axes_last(x.src[i], steps, (k, j))  # short K: contiguous along N
    else: continue
    return r.replace(src=(x.replace(src=tuple(srcs)),))
  return None


def bytes_read(op: UOp, steps: list[int]) -> int:
  """The bytes of the elements op reads (the axes it moves along; steps: its step per axis in its buffer)."""
  return prod(s for s, st in zip(op.shape, steps) if st != 0) * op.dtype.itemsize


def copied_with_axes_last(b: UOp, steps: list[int], last: tuple[int, ...]) -> UOp:
  """b (expanded over the axes it doesn't read) as a view of a contiguous copy of what it reads, the axes `last` innermost."""
  shape: tuple[int, ...] = b.shape
  dep = [a for a in range(len(shape)) if steps[a] != 0]  # the axes b reads, in order
  order = [a for a in dep if a not in last] + list(last)
  flat = UOp(Ops.SHRINK, b.dtype, (b,), tuple((0, s if a in dep else 1) for a, s in enumerate(shape)))
  small = UOp(Ops.RESHAPE, b.dtype, (flat,), tuple(shape[a] for a in dep))
  copy = UOp(Ops.CONTIGUOUS, b.dtype, (UOp(Ops.PERMUTE, b.dtype, (small,), tuple(dep.index(a) for a in order)),))
  back = UOp(Ops.PERMUTE, b.dtype, (copy,), tuple(order.index(a) for a in dep))
  back = UOp(Ops.RESHAPE, b.dtype, (back,), tuple(s if a in dep else 1 for a, s in enumerate(shape)))
  return UOp(Ops.EXPAND, b.dtype, (back,), shape)
