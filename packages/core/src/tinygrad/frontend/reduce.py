"""Reductions: sum, prod, max/min, mean/var/std, any/all, arg-reductions, the softmax family, cumulative ops, sorting.

Cumulative ops reduce a masked window: element i of the scan reduces x[j] for j <= i, one (n, n) reduce per block of
_SCAN_BLOCK elements, and blocks are chained by scanning their totals (so the work is O(n * _SCAN_BLOCK), exact for ints).
Sorting ranks every element by counting the elements that come before it (ties keep their order, NaN sorts as the
largest value), then selects output k as the element of rank k: two (n, n) reductions, no data-dependent control
flow, and gradients reach exactly the element that was selected. Long rows (sort_network.uses_network) sort through a bitonic
network instead (frontend/sort_network.py: the same order, O(n log^2 n) work), the values gathered by its indices.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Self, TypeVar

from tinygrad.dtype import DType, dtypes, least_upper_dtype, least_upper_float, to_dtype
from tinygrad.frontend.movement import MovementMixin
from tinygrad.frontend.sort_network import sort_permutation, uses_network
from tinygrad.helpers import InvalidArgumentError, OutOfRangeError, prod
from tinygrad.uop.ops import Ops, UOp, identity_element

# 16: each element reduces a window of at most 16 (n * 16 operations), a few more levels of block totals. On 2 CPU cores,
# cumsum of 2048x2048 along rows: 53 ms with 128, 18 with 32, 2.2 with 16 (numpy 8.8); of 1M elements 13.0 -> 0.71 ms (numpy 2.5)
_SCAN_BLOCK = 16
_HALVES = (dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)
TensorT = TypeVar("TensorT", bound="ReduceMixin")


def _sum_dtype(dt: DType) -> DType:
  """Result dtype of sum like tinygrad/torch: small ints and bool sum as int32 (uints as uint32), floats as themselves."""
  if dt == dtypes.bool or (dtypes.is_int(dt) and dt.itemsize < 4): return dtypes.uint32 if dtypes.is_unsigned(dt) else dtypes.int32
  return dt


def _acc_dtype(dt: DType) -> DType:
  """The dtype a sum accumulates in: _sum_dtype, but float32 for the 8- and 16-bit floats."""
  return dtypes.float32 if dt in _HALVES else _sum_dtype(dt)


def _widen_int_operands(ts: Sequence[TensorT], sum_dtype: DType | None) -> list[TensorT]:
  """Int factors of a sum of products (matmul, einsum, conv) whose sum is a wider int dtype (int8 -> int32, or a dtype=), or a
  float dtype=, cast to it before multiplying: the products don't wrap in the narrow dtype (tinygrad; numpy's dtype=). Half
  operands of an int dtype= go to float32, so their products don't overflow."""
  wide = sum_dtype or _sum_dtype(least_upper_dtype(*(t.dtype for t in ts)))
  # a float dtype= of int (or bool) operands at least as wide as they are: cast to it first, as numpy's dtype=, so int32 products
  # don't wrap before the cast (a narrower float, float16 of int32, keeps the int products: the operands would overflow it)
  if sum_dtype is not None and dtypes.is_float(wide) and not any(dtypes.is_float(t.dtype) for t in ts) \
      and wide.itemsize >= max(t.dtype.itemsize for t in ts): return [t.cast(wide) for t in ts]
  # half operands of an int dtype= multiply in float32: a float16 product past 65504 is inf, and inf cast to int32 is 0
  # (tinygrad 0.14 gives 90000 for 300 * 300 there)
  if sum_dtype is not None and dtypes.is_int(wide) and any(t.dtype in _HALVES for t in ts):
    return [t.cast(dtypes.float32) if t.dtype in _HALVES else t for t in ts]
  # bool factors too (einsum keeps each operand's dtype): bool * uint8 * uint8 is a uint8 product otherwise
  if dtypes.is_int(wide) and all(t.dtype == dtypes.bool or (dtypes.is_int(t.dtype) and t.dtype.itemsize < wide.itemsize) for t in ts):
    return [t.cast(wide) for t in ts]
  return list(ts)


class ReduceMixin(MovementMixin):
  __slots__ = ()

  # ---- the reduce primitive
  def _reduce_axes(self, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = [self._axis(a) for a in ((axis,) if isinstance(axis, int) else axis)]
    if len(set(axes)) != len(axes): raise InvalidArgumentError(f"axis {axis} names a dim more than once (torch and tinygrad raise too)")
    return tuple(sorted(axes))

  def _reduce(self, op: Ops, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self:
    axes = self._reduce_axes(axis)
    if self.ndim == 0 or not axes: return self
    shape: tuple[int, ...] = self.shape
    if any(shape[a] == 0 for a in axes):  # reducing nothing gives the identity
      out_shape = tuple(1 if i in axes else s for i, s in enumerate(shape))
      t = type(self).full(out_shape, identity_element(op, self.dtype), dtype=self.dtype, device=self.device)
      if self.requires_grad is not False:  # keep self in the graph: its (empty) gradient, not "not part of it"
        t = t + self.shrink(tuple((0, 0) if i in axes else None for i in range(self.ndim))).pad(
          tuple((0, 1) if i in axes else None for i in range(self.ndim)))
    else:
      t = type(self)(UOp(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, axes)), requires_grad=self.requires_grad)
    return t if keepdim else t.reshape(tuple(s for i, s in enumerate(shape) if i not in axes))

  def _reduced_count(self, axis: int | Sequence[int] | None) -> int:
    return prod(self.shape[a] for a in self._reduce_axes(axis)) if self.ndim else 1

  # ---- sums and extremes
  def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None) -> Self:
    """Sum over axis (None: all). Bools and small ints sum as int32 (uint32 for unsigned), halves accumulate in float32."""
    if dtype is not None: return self.cast(to_dtype(dtype))._reduce(Ops.ADD, axis, keepdim)
    ret = self.cast(_acc_dtype(self.dtype))._reduce(Ops.ADD, axis, keepdim)
    return ret.cast(self.dtype) if self.dtype in _HALVES else ret

  def prod(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None) -> Self:
    """Product over axis, in self's dtype (or dtype)."""
    return self.cast(to_dtype(dtype) if dtype is not None else self.dtype)._reduce(Ops.MUL, axis, keepdim)

  def _check_nonempty(self, name: str, axis: int | Sequence[int] | None) -> None:
    """max/min of nothing has no value (no identity to start from): an error, as in torch, not -inf/+inf."""
    if self.ndim and any(self.shape[a] == 0 for a in self._reduce_axes(axis)):
      raise RuntimeError(f"{name}(): the reduced axes of a tensor of shape {self.shape} are empty, and {name} of an empty tensor has no "
                         "identity; reduce only over non-empty axes")

  def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self:
    """Largest value (NaN wins); the gradient is shared evenly between tied maxima."""
    self._check_nonempty("max", axis)
    return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self:
    self._check_nonempty("min", axis)
    return self._inverse().max(axis, keepdim)._inverse()

  # max/min without the empty check, for ops that are defined over an empty axis (softmax, scatter with no sources)
  def _amax(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self: return self._reduce(Ops.MAX, axis, keepdim)
  def _amin(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self:
    return self._inverse()._amax(axis, keepdim)._inverse()

  def any(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self:
    return self.cast(dtypes.bool)._reduce(Ops.MAX, axis, keepdim)  # of nothing: False
  def all(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self:
    return self.logical_not().any(axis, keepdim).logical_not()

  # ---- moments
  def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self:
    """Mean over axis; ints give float32, halves stay halves (accumulated in float32). Empty: NaN."""
    out_dt = least_upper_float(self.dtype)
    total = self.sum(axis, keepdim, dtype=_acc_dtype(self.dtype))
    return total.div(self._reduced_count(axis)).cast(out_dt)
  def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Self:
    """sum((x - mean)^2) / max(0, n - correction)."""
    n = self._reduced_count(axis) - correction
    degenerate = isinstance(n, int) and n <= 0
    mean = self.mean(axis, keepdim=True)
    # a correction of the count or beyond (n <= 0): the gradient is torch's closed form 2 (x - mean) / n, through a detached
    # mean (its own term sums to 0): at n == 0 the 1/0 reaches x - mean only (+-inf, NaN where x == mean), not inf - inf
    # through the mean, which made every element NaN
    dev = (self - (mean.detach() if degenerate else mean)).square()
    # narrow floats (half, bfloat16, fp8) sum the squares in float32 and divide there, then cast back (torch, tinygrad): the sum
    # of squares can pass 65504 where the variance doesn't (half arange(200): 666,650 / 199 = 3350), and so can the count
    out_dt = dev.dtype
    sq = dev.sum(axis, keepdim, dtype=_acc_dtype(out_dt))  # (the sum's own accumulation dtype, not cast back to half)
    if degenerate and n < 0:
      # a correction beyond the count: the value is sq / 0 (inf, or NaN) as torch, the gradient torch's finite sq' / n (sq' / 0
      # would be inf * 0 = NaN where x - mean is 0)
      return (sq.detach().div(0) + (sq - sq.detach()).div(n)).cast(out_dt)
    # (a symbolic count (x[:v]) is at least its Variable's min.)
    return sq.div(max(0, n) if isinstance(n, int) else n).cast(out_dt)
  def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Self:
    # at var == 0 (all values equal) sqrt's slope is inf and var's 0: the gradient is 0 there (torch), not inf * 0 = NaN
    v = self.var(axis, keepdim, correction)
    zero = v.eq(0)
    return zero.where(0.0, zero.where(1.0, v).sqrt())
  def var_mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> tuple[Self, Self]:
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> tuple[Self, Self]:
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

  # ---- softmax family
  def _softmax_parts(self, axis: int, dtype: DType | str | None) -> tuple[Self, Self, Self]:
    # ints and bools compute in float: x - max in their own dtype wraps (uint8) or is a XOR (bool)
    x = self.cast(to_dtype(dtype) if dtype is not None else least_upper_float(self.dtype))
    # the stabilizing max, unchecked: over an empty axis softmax is empty and logsumexp -inf (torch), not max's error
    m = x - x._amax(axis, True).detach()
    e = m.exp()
    return m, e, e.sum(axis, keepdim=True)
  def softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Self:
    _, e, s = self._softmax_parts(axis, dtype)
    # times 1/sum, once per row: e / s divides every element (an IEEE division: ~10 instructions on a GPU, one slow vector
    # divide on a CPU); softmax over 1024-column rows on the H200 ran at 0.67x torch with it, log_softmax at 1.0x
    return e * s.reciprocal()
  def softmin(self, axis: int = -1, dtype: DType | str | None = None) -> Self:
    """softmax of -x (torch.nn.functional.softmin, tinygrad's Tensor.softmin); ints and bools are negated as floats."""
    return (-self.cast(to_dtype(dtype) if dtype is not None else least_upper_float(self.dtype))).softmax(axis)
  def log_softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Self:
    m, _, s = self._softmax_parts(axis, dtype)
    return m - s.log()
  def logsumexp(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self:
    """log(sum(exp(x))) without overflow; all -inf gives -inf, any +inf gives +inf. Ints and bools compute in float."""
    x = self.cast(least_upper_float(self.dtype))
    m = x._amax(axis, True)  # unchecked, as in _softmax_parts
    m = m.isinf().where(0, m).detach()
    out = (x - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.reshape(tuple(s for i, s in enumerate(out.shape) if i not in self._reduce_axes(axis)))

  # ---- arg reductions (not differentiable: they return int32 indices)
  def argmax(self, axis: int | None = None, keepdim: bool = False) -> Self:
    """Index of the first maximum (the first NaN if there is one), as int32."""
    if axis is None:
      idx = self.flatten().argmax(0)
      return idx.reshape((1,) * self.ndim) if keepdim else idx
    axis = self._axis(axis)
    n = self.shape[axis] if self.ndim else 1
    if n == 0: raise OutOfRangeError("argmax of an empty axis: it has no maximum")
    if self.ndim == 0: return type(self).full((), 0, dtype=dtypes.int32, device=self.device)
    hit = self.eq(self.max(axis, keepdim=True))
    if dtypes.is_float(self.dtype): hit = hit | self.isnan()
    rev = (n - type(self).arange(n, dtype=dtypes.int32, device=self.device)).reshape(tuple(n if i == axis else 1 for i in range(self.ndim)))
    return (n - hit.where(rev, 0).max(axis, keepdim)).cast(dtypes.int32)
  def argmin(self, axis: int | None = None, keepdim: bool = False) -> Self:
    """Index of the first minimum, as int32."""
    return self._inverse().argmax(axis, keepdim)

  # ---- cumulative ops
  def _along_last(self, axis: int, fn: Callable[[Self], Self]) -> Self:
    """fn applied with `axis` moved last, then moved back."""
    axis = self._axis(axis)
    order = [i for i in range(self.ndim) if i != axis] + [axis]
    back = [order.index(i) for i in range(len(order))]
    return fn(self.permute(order)).permute(back)

  def _scan(self, axis: int, direct: Callable[[Self], Self], combine: Callable[[Self, Self], Self], identity: float | int) -> Self:
    """Inclusive scan along axis: `direct` scans the last axis of a block, `combine(block_scan, prefix)` adds the
    total of the blocks before it."""
    def scan_last(x: Self) -> Self:
      n = x.shape[-1]
      if isinstance(n, UOp) or n <= _SCAN_BLOCK: return direct(x)  # a symbolic length: one block (n*n work, as tinygrad's)
      m, b = -(-n // _SCAN_BLOCK), _SCAN_BLOCK
      lead = x.shape[:-1]
      xp = x.pad(((0, 0),) * len(lead) + ((0, m * b - n),), value=identity) if m * b != n else x
      inner = direct(xp.reshape(*lead, m, b))  # (..., m, b)
      # what the blocks before block k add: the scan of the totals of blocks 0..k-1 (block 0 gets the identity)
      totals = inner.shrink(tuple((0, s) for s in lead) + ((0, m - 1), (b - 1, b))).reshape(*lead, m - 1)
      before = scan_last(totals).pad(((0, 0),) * len(lead) + ((1, 0),), value=identity)
      out = combine(inner, before.reshape(*lead, m, 1)).reshape(*lead, m * b)
      return out.shrink(tuple((0, s) for s in lead) + ((0, n),)) if m * b != n else out
    if self.ndim == 0:
      self._axis(axis)  # a 0-d tensor scans along dim 0 or -1 only (torch, tinygrad: IndexError otherwise)
      return self
    return self._along_last(axis, scan_last)

  def _window(self) -> Self:
    """(..., n) -> (..., n, n) view with [..., i, j] = x[..., j], and the mask j <= i."""
    n = self.shape[-1]
    idx = type(self).arange(n, dtype=dtypes.int32, device=self.device)
    return idx.reshape(1, n) <= idx.reshape(n, 1)

  def _cum_reduce(self, axis: int, op: Ops) -> Self:
    ident = identity_element(op, self.dtype)
    def direct(x: Self) -> Self:
      w = x.unsqueeze(-2).expand(*x.shape[:-1], x.shape[-1], x.shape[-1])
      return x._window().where(w, ident)._reduce(op, -1)
    combine = {Ops.ADD: lambda a, b: a + b, Ops.MUL: lambda a, b: a * b, Ops.MAX: lambda a, b: a.maximum(b)}[op]
    return self._scan(axis, direct, combine, ident)

  def cumsum(self, axis: int = 0) -> Self:
    """Running sum along axis (dtype like sum: small ints give int32)."""
    ret = self.cast(_acc_dtype(self.dtype))._cum_reduce(axis, Ops.ADD)
    return ret.cast(self.dtype) if self.dtype in _HALVES else ret
  def cumprod(self, axis: int = 0) -> Self:
    """Running product along axis, in self's dtype (bools too, as prod and tinygrad's cumprod)."""
    ret = self._cum_reduce(axis, Ops.MUL)
    return ret.cast(self.dtype) if ret.dtype != self.dtype else ret
  def _running_max(self, axis: int) -> tuple[Self, Self]:
    """Running maximum along axis and, as int32, the first index where each running maximum was reached."""
    values = self._cum_reduce(axis, Ops.MAX)
    if self.ndim == 0: return values, type(self).full((), 0, dtype=dtypes.int32, device=self.device)  # (axis checked by the scan)
    ax, n = self._axis(axis), self.shape[self._axis(axis)]
    if n == 0: return values, type(self).full(self.shape, 0, dtype=dtypes.int32, device=self.device)
    # an element starts a new running maximum when it beats the running maximum before it (ties keep the earlier
    # index); a NaN starts one once, as the maximum stays NaN from there on
    before = values.shrink(tuple((0, n - 1) if i == ax else (0, s) for i, s in enumerate(self.shape)))
    before = before.pad(tuple((1, 0) if i == ax else (0, 0) for i in range(self.ndim)))
    pos = type(self).arange(n, dtype=dtypes.int32, device=self.device).reshape(tuple(n if i == ax else 1 for i in range(self.ndim)))
    new = (self > before) | pos.eq(0)
    if dtypes.is_float(self.dtype): new = new | (self.isnan() & before.isnan().logical_not())
    return values, new.where(pos, 0)._cum_reduce(axis, Ops.MAX)
  def cummax(self, axis: int = 0) -> tuple[Self, Self]:
    """Running maximum along axis and the (int32) index where each was first reached: `values, indices = x.cummax(0)`,
    as tinygrad 0.14 and torch."""
    return self._running_max(axis)
  def cummin(self, axis: int = 0) -> tuple[Self, Self]:
    """Running minimum along axis and the (int32) index where each was first reached, as `cummax`."""
    values, indices = self._inverse()._running_max(axis)
    return values._inverse(), indices

  def logcumsumexp(self, axis: int = 0) -> Self:
    """log(cumsum(exp(x))) without overflow: each prefix is shifted by its running maximum."""
    x = self.cast(least_upper_float(self.dtype))
    def direct(t: Self) -> Self:
      c = t._cum_reduce(-1, Ops.MAX)
      c = c.isinf().where(0, c).detach()
      w = t.unsqueeze(-2).expand(*t.shape[:-1], t.shape[-1], t.shape[-1]) - c.unsqueeze(-1)
      return t._window().where(w, -math.inf).exp().sum(-1).log() + c
    return x._scan(axis, direct, lambda a, b: a.logaddexp(b), -math.inf)

  # ---- sorting
  def _rank(self, descending: bool) -> Self:
    """For x of shape (..., n): the position of each element in the stably sorted last axis (int32)."""
    n = self.shape[-1]
    xi, xj = self.unsqueeze(-1), self.unsqueeze(-2)  # [..., i, j]
    if dtypes.is_float(self.dtype):  # NaN orders above everything and ties with NaN
      ni, nj = xi.isnan(), xj.isnan()
      before = ((xi < xj) | (nj & ni.logical_not())) if descending else ((xj < xi) | (ni & nj.logical_not()))
      tie = xj.eq(xi) | (ni & nj)
    else:
      before = (xi < xj) if descending else (xj < xi)
      tie = xj.eq(xi)
    idx = type(self).arange(n, dtype=dtypes.int32, device=self.device)
    earlier = idx.reshape(1, n) < idx.reshape(n, 1)  # j < i
    return (before | (tie & earlier)).sum(-1, dtype=dtypes.int32)

  def _select_ranked(self, rank: Self, k: int) -> tuple[Self, Self]:
    """Elements of rank 0..k-1 and their indices, along the last axis."""
    n = self.shape[-1]
    dev = self.device
    onehot = rank.unsqueeze(-2).eq(type(self).arange(k, dtype=dtypes.int32, device=dev).reshape(k, 1))  # [..., k, i]
    values = onehot.where(self.unsqueeze(-2), 0).sum(-1, dtype=self.dtype)
    indices = onehot.where(type(self).arange(n, dtype=dtypes.int32, device=dev).reshape(1, n), 0).sum(-1, dtype=dtypes.int32)
    return values, indices

  def _sorted(self, dim: int, descending: bool, k: int | None) -> tuple[Self, Self]:
    if self.ndim == 0: return self, type(self).full((), 0, dtype=dtypes.int32, device=self.device)
    dim = self._axis(dim)
    n = self.shape[dim]
    if isinstance(n, UOp): raise NotImplementedError(f"sort/topk along a symbolic dim ({n}) is not supported: sort a fixed-size tensor "
                                                     "(pad or mask the rows past the Variable's value to -inf / +inf first)")
    kk = n if k is None else k
    order = [i for i in range(self.ndim) if i != dim] + [dim]
    back = [order.index(i) for i in range(len(order))]
    x = self.permute(order)
    if n == 0 or kk == 0:
      shape = x.shape[:-1] + (kk,)
      vals = type(self).full(shape, 0, dtype=self.dtype, device=self.device)
      if self.requires_grad is not False: vals = vals + x.shrink_to(shape)  # zeros linked to self: its gradient is zeros
      return (vals.permute(back),
              type(self).full(shape, 0, dtype=dtypes.int32, device=self.device).permute(back))
    if uses_network(n, x.device) and (dtypes.is_float(x.dtype) or dtypes.is_int(x.dtype)):
      indices = sort_permutation(x, descending)  # long rows: a bitonic network, O(n log^2 n) (the rank sort is O(n^2))
      if kk != n: indices = indices[..., :kk]
      values = x.gather(-1, indices)  # type: ignore[attr-defined]
    else: values, indices = x._select_ranked(x._rank(descending), kk)
    return values.permute(back), indices.permute(back)

  def sort(self, dim: int = -1, descending: bool = False) -> tuple[Self, Self]:
    """(values, int32 indices) sorted along dim; equal values keep their order, NaN sorts as the largest value."""
    return self._sorted(dim, descending, None)
  def argsort(self, dim: int = -1, descending: bool = False) -> Self:
    return self._sorted(dim, descending, None)[1]
  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Self, Self]:
    """The k largest (or smallest) values along dim and their int32 indices, in sorted order (also for sorted_=False)."""
    n = self.shape[self._axis(dim)] if self.ndim else 1
    if isinstance(n, UOp): return self._sorted(dim, largest, k)  # (raises: a symbolic dim)
    if not 0 <= k <= n: raise InvalidArgumentError(f"topk: k={k} is out of range for dim {dim} of size {n}")
    return self._sorted(dim, largest, k)
