"""Split-K: a matmul whose output is a handful of tiles for a big GPU (a 64-token prefill chunk times a weight: 64 x 2048 outputs
are 32 tiles of 64x64 for 132 SMs) runs as a batch of K slices, so more of the chip works on it, then one small kernel sums the
slices' partial products.

    out[..., m, n] = sum_k a[m, k] b[k, n]
 -> partial[s, ..., m, n] = sum_{k in slice s} a[m, k] b[k, n]     (one batched matmul: the slice is a batch axis)
    out[..., m, n] = sum_s partial[s, ..., m, n]                   (a column sum: neighbouring threads, neighbouring outputs)

The scheduler recognizes the matmul on the lazy graph (`matmul_shape`: a sum over one axis of a product of two operands, each
broadcast along one of the output axes) and asks its SplitPolicy how many slices the device wants (`matmul_split`; codegen's
`tensor_core.split_k_slices` answers for tensor-core matmuls from the renderer's compute units). The sum of the slices is the
reduction's new value: what consumed the matmul (a bias, a residual add) fuses into that small kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

from tinygrad.codegen.tensor_core import strip_casts
from tinygrad.dtype import DType
from tinygrad.helpers import prod
from tinygrad.uop.ops import Ops, UOp


@dataclass(frozen=True)
class MatmulShape:
  """A matmul found in the graph: `batch` x (`m` x `k`) @ (`k` x `n`), operands stored as `dtype_in` (before any cast)."""
  m: int
  n: int
  batch: int
  k: int
  dtype_in: DType


def _broadcast_axes(operand: UOp, shape: tuple[int, ...]) -> set[int] | None:
  """The axes along which `operand` (an EXPAND to `shape`, under casts) repeats its values, or None if it is not one."""
  u = strip_casts(operand)
  if u.op is not Ops.EXPAND or u.shape != shape: return None
  inner = u.src[0].shape
  return {i for i, (a, b) in enumerate(zip(inner, shape)) if a == 1 and b > 1}


def _stored_dtype(operand: UOp) -> DType:
  """The dtype an operand is read as before casts and movement ops (a half weight multiplied in float32 reads halves)."""
  u = operand
  while u.op in (Ops.CAST, Ops.EXPAND, Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK, Ops.PAD): u = u.src[0]
  return u.dtype


def matmul_shape(r: UOp) -> MatmulShape | None:
  """`r` (a REDUCE_AXIS) as a matmul: an ADD over one axis of MUL(a, b) where a repeats along output axes that b doesn't and
  the other way round (a's own rows are m, b's columns n; axes neither repeats are batch). None for anything else."""
  op, axes = r.arg
  x = strip_casts(r.src[0])
  if op is not Ops.ADD or len(axes) != 1 or x.op is not Ops.MUL or len(x.src) != 2: return None
  shape = x.shape
  if not all(isinstance(s, int) for s in shape): return None
  a_rep, b_rep = _broadcast_axes(x.src[0], shape), _broadcast_axes(x.src[1], shape)
  if a_rep is None or b_rep is None or (a_rep & b_rep) or axes[0] in a_rep | b_rep: return None
  if not a_rep or not b_rep: return None  # an elementwise product summed (a dot along rows): no matmul
  dtypes_in = {_stored_dtype(x.src[0]), _stored_dtype(x.src[1])}
  if len(dtypes_in) != 1: return None
  kept = [i for i in range(len(shape)) if i != axes[0]]
  n, m = prod(shape[i] for i in a_rep), prod(shape[i] for i in b_rep)
  batch = prod(shape[i] for i in kept if i not in a_rep | b_rep)
  return MatmulShape(m, n, batch, shape[axes[0]], dtypes_in.pop())


def split_k(r: UOp, slices: int) -> UOp:
  """`r` as `slices` partial sums over contiguous chunks of its axis, laid out (slices, outputs...) and stored, then their sum."""
  x, (op, (axis,)) = r.src[0], r.arg
  n = x.shape[axis]
  assert n % slices == 0, f"split_k: {slices} slices don't divide the reduced axis of {n}"
  keep = [i for i in range(len(x.shape)) if i != axis]
  kept = tuple(x.shape[i] for i in keep)
  order = tuple(keep + [axis])
  xp = x if order == tuple(range(len(order))) else UOp(Ops.PERMUTE, x.dtype, (x,), order)
  xr = UOp(Ops.RESHAPE, x.dtype, (xp,), kept + (slices, n // slices))
  xs = UOp(Ops.PERMUTE, x.dtype, (xr,), (len(kept), *range(len(kept)), len(kept) + 1))  # (slices, kept..., chunk)
  partial = UOp(Ops.CONTIGUOUS, x.dtype, (UOp(Ops.REDUCE_AXIS, x.dtype, (xs,), (op, (len(kept) + 1,))),))
  total = UOp(Ops.REDUCE_AXIS, x.dtype, (partial,), (op, (0,)))
  return UOp(Ops.RESHAPE, x.dtype, (total,), r.shape)
