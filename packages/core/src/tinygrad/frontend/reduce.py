"""Reductions: sum, prod, max, min, mean, var/std, softmax family, argmax."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tinygrad.dtype import DType, dtypes, least_upper_float, to_dtype
from tinygrad.helpers import prod
from tinygrad.uop.ops import Ops, UOp, identity_element

if TYPE_CHECKING:
  from tinygrad.tensor import Tensor


def _sum_dtype(dt: DType) -> DType:
  """Accumulation dtype of sum like tinygrad/torch: small ints and bool sum as int32 (uints as uint32), halves as themselves."""
  if dt == dtypes.bool or (dtypes.is_int(dt) and dt.itemsize < 4): return dtypes.uint32 if dtypes.is_unsigned(dt) else dtypes.int32
  return dt


class ReduceMixin:
  __slots__ = ()

  # ---- reductions
  def _reduce(self, op: Ops, axis: int | Sequence[int] | None, keepdim: bool) -> Tensor:
    axes = tuple(range(self.ndim)) if axis is None else tuple(sorted({self._axis(a) for a in ((axis,) if isinstance(axis, int) else axis)}))
    if self.ndim == 0: return self
    if any(self.shape[a] == 0 for a in axes):  # reducing nothing gives the identity
      out_shape = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
      t = type(self).full(out_shape, identity_element(op, self.dtype), dtype=self.dtype, device=self.device)
    else:
      t = type(self)(UOp(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, axes)), requires_grad=self.requires_grad)
    return t if keepdim else t.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

  def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else _sum_dtype(self.dtype)
    return self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
  def prod(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else _sum_dtype(self.dtype)
    return self.cast(acc)._reduce(Ops.MUL, axis, keepdim)
  def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor: return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    if dtypes.is_unsigned(self.dtype): return dtypes.max(self.dtype) - (dtypes.max(self.dtype) - self).max(axis, keepdim)
    if self.dtype == dtypes.bool: return self.logical_not().max(axis, keepdim).logical_not()
    return -((-self).max(axis, keepdim))
  def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    out_dt = least_upper_float(self.dtype)
    total = self.cast(out_dt).sum(axis, keepdim)
    count = prod(self.shape) // max(prod(total.shape), 1) if self.numel() else 0
    return total.div(count) if count else total * float("nan")
  def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    sq = (self - self.mean(axis, keepdim=True)).square().sum(axis, keepdim)
    n = self.numel() // max(sq.numel(), 1)
    return sq.div(max(n - correction, 0))
  def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    return self.var(axis, keepdim, correction).sqrt()

  def softmax(self, axis: int = -1) -> Tensor:
    e = (self - self.max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)
  def log_softmax(self, axis: int = -1) -> Tensor:
    m = self - self.max(axis, keepdim=True)
    return m - m.exp().sum(axis, keepdim=True).log()
  def logsumexp(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    m = self.max(axis, keepdim=True)
    out = (self - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.squeeze(axis) if axis is not None else out.reshape(())
  def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    if axis is None: return self.flatten().argmax(0)
    axis = self._axis(axis)
    n = self.shape[axis]
    is_max = self.eq(self.max(axis, keepdim=True))
    idx_shape = tuple(n if i == axis else 1 for i in range(self.ndim))
    rev = (n - type(self).arange(n, dtype=dtypes.int32, device=self.device)).reshape(idx_shape)
    return (n - (is_max.cast(dtypes.int32) * rev).max(axis, keepdim)).cast(dtypes.int32)
  def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor: return (-self).argmax(axis, keepdim)
