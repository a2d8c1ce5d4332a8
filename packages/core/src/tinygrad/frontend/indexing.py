"""Indexing: __getitem__ / __setitem__ (ints, slices with steps, None, Ellipsis, and Tensor/list indices), gather, scatter,
scatter_reduce, masked_fill, masked_select and one_hot.

Basic indices are views (shrink, flip, a strided reshape, reshape). Tensor indices have no gather primitive behind them:
each one is compared against an arange of its axis (a one-hot mask), and a masked sum over the axis picks the element.
Only one element of each sum is non-zero, so the result is exact for every dtype, and gradients flow through `where`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Self, TypeVar

from tinygrad.dtype import ConstType, dtypes
from tinygrad.frontend.base import TensorBase
from tinygrad.frontend.elementwise import _broadcast_shape, data_free
from tinygrad.frontend.reduce import ReduceMixin
from tinygrad.helpers import InvalidArgumentError, InvalidDTypeError, OutOfRangeError, prod
from tinygrad.uop.ops import Ops, UOp
from tinygrad.uop.symbolic import sint_le, sint_simplify

TensorT = TypeVar("TensorT", bound="IndexingMixin")  # a Tensor, in the helpers of the mixin


@dataclass
class _IndexPlan(Generic[TensorT]):
  """What an index does: shrink to `bounds`, flip `flips`, take every `steps`-th element (giving `strided` shape), reshape
  to `shape` (dropping int-indexed axes, adding None axes). `adv` lists (axis of `shape`, index tensor) for tensor indices."""
  bounds: tuple[tuple[int, int], ...]
  flips: tuple[int, ...]
  steps: tuple[int, ...]
  strided: tuple[int, ...]
  shape: tuple[int, ...]
  adv: list[tuple[int, TensorT]]


def _on_device_of(self: Any, t: TensorT, what: str) -> TensorT:
  """t (an index or src tensor) for an op on self: an error when both are on single devices that differ, as in torch and
  tinygrad (the data would move silently), unless t is computed from constants alone (an arange: tinygrad's are device-less);
  for a sharded self, t goes to its devices."""
  if t.device != self.device and isinstance(t.device, str) and isinstance(self.device, str) and not data_free(t):
    raise InvalidArgumentError(f"{what} is on {t.device} but the tensor is on {self.device}; move it with .to()")
  return t.to(self.device)


def _is_int(x: Any) -> bool:
  if isinstance(x, bool): return False
  if isinstance(x, int): return True
  # numpy integer scalars and other objects that are ints by __index__ (but not arrays)
  return hasattr(x, "__index__") and getattr(x, "shape", ()) == () and type(x).__name__ != "Tensor" and not isinstance(x, UOp)


def _symbolic_at(i: Any, size: Any, dim: int) -> tuple[Any, Any]:
  """The (start, end) of an int index where the index (a bound Variable) or the dim's size is symbolic."""
  if not isinstance(i, UOp): i = int(i.__index__())
  if not isinstance(i, UOp) and i < 0: i = sint_simplify(size + i)
  if not (sint_le(0, i) and sint_le(i + 1, size)): raise OutOfRangeError(f"index {i} is out of bounds for dim {dim} with size {size}")
  return i, sint_simplify(i + 1)


def _symbolic_slice(i: slice, size: Any, dim: int) -> tuple[Any, Any]:
  """The (start, end) of a step-1 slice where a bound or the dim's size is symbolic. Negative ints count from the end; no
  clamping (the result's size is hi - lo), so the bounds must lie in the dim (checked with the Variables' bound values)."""
  def at(b: Any, default: Any) -> Any:
    if b is None: return default
    if isinstance(b, UOp): return b
    if not _is_int(b): raise OutOfRangeError(f"slice bounds must be ints or bound Variables, got {b!r}")
    b = int(b.__index__())
    return sint_simplify(size + b) if b < 0 else b if isinstance(size, UOp) else min(b, size)
  lo, hi = at(i.start, 0), at(i.stop, size)
  if not (sint_le(0, lo) and sint_le(lo, hi) and sint_le(hi, size)):
    raise OutOfRangeError(f"slice {lo}:{hi} is out of bounds for dim {dim} with size {size} (a slice with a symbolic bound or "
                          "of a symbolic size is not clamped)")
  return lo, hi


def _select(mask: TensorT, x: TensorT, axis: int | tuple[int, ...]) -> TensorT:
  """Reduce `axis` of mask.where(x, 0) where mask has at most one True along it: that element, or 0. Exact for every dtype."""
  if x.dtype == dtypes.bool: return mask.logical_and(x)._amax(axis)
  return mask.where(x, 0).sum(axis, dtype=x.dtype)


class IndexingMixin(ReduceMixin):
  __slots__ = ()

  # ---- index parsing
  def _index_plan(self, index: Any) -> _IndexPlan[Self]:
    # a list of ints with bools among them is int indices (torch, tinygrad: x[[True, False, 2]] is x[[1, 0, 2]])
    if isinstance(index, list) and index and all(_is_int(i) or isinstance(i, bool) for i in index) and any(_is_int(i) for i in index):
      index = [int(i) for i in index]
    if (isinstance(index, list) and all(_is_int(i) for i in index)) or not isinstance(index, (tuple, list)): idx = [index]
    else: idx = list(index)
    if sum(1 for i in idx if i is Ellipsis) > 1: raise OutOfRangeError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise OutOfRangeError(f"too many indices for a tensor with {self.ndim} dims: {n_real} were given")
    at = next((k for k, i in enumerate(idx) if i is Ellipsis), len(idx))
    idx[at:at + 1] = [slice(None)] * (self.ndim - n_real)
    bounds: list[tuple[int, int]] = []
    flips: list[int] = []
    steps: list[int] = []
    plan: list[int | None] = []  # per output axis: the input axis it comes from, or None for a new axis
    adv: list[tuple[int, Self]] = []
    dim = 0
    i: Any  # an index item, then what it becomes (a Tensor for lists, an int)
    for i in idx:
      if i is None:
        plan.append(None)
        continue
      size = self.shape[dim]
      if isinstance(i, (list, tuple)) or (type(i).__module__ == "numpy" and hasattr(i, "shape") and not _is_int(i)):
        i = type(self)(i, device=self.device, dtype=dtypes.int32 if isinstance(i, (list, tuple)) and len(i) == 0 else None)
      if isinstance(i, type(self)):
        if not dtypes.is_int(i.dtype): raise OutOfRangeError(f"tensors used as indices must have an integer dtype, got {i.dtype!r}")
        i = _on_device_of(self, i, "a tensor index")
        if not dtypes.is_unsigned(i.dtype): i = (i < 0).where(i + size, i)  # negative indices count from the end
        bounds.append((0, size))
        steps.append(1)
        plan.append(dim)
        adv.append((len(plan) - 1, i))
      elif isinstance(i, UOp) or (isinstance(size, UOp) and _is_int(i)):  # x[:, v] with a bound Variable, or x[:, :v][:, -1]
        bounds.append(_symbolic_at(i, size, dim))
        steps.append(1)
      elif _is_int(i):
        i = int(i.__index__())
        if not -size <= i < size: raise OutOfRangeError(f"index {i} is out of bounds for dim {dim} with size {size}")
        i %= size
        bounds.append((i, i + 1))
        steps.append(1)
      elif isinstance(i, slice) and any(isinstance(b, UOp) for b in (i.start, i.stop, i.step, size)):  # x[:v], x[v:v+1], x[:, :v][:, 1:]
        if i.step == -1 and i.start is None and i.stop is None: flips.append(dim)  # x[:, :v][:, ::-1]: a flip
        elif i.step not in (None, 1): raise NotImplementedError(f"a slice of a symbolic size or with a symbolic bound takes step 1 (or is ::-1), got {i}: "
                                                              "slice with step 1 first, then take every n-th element of a fixed-size result")
        bounds.append(_symbolic_slice(slice(i.start, i.stop), size, dim))
        steps.append(1)
        plan.append(dim)
      elif isinstance(i, slice):
        if i.step == 0: raise ValueError("slice step cannot be zero")
        start, stop, step = i.indices(size)
        if step > 0: lo, hi = start, max(start, stop)
        else: lo, hi = (stop + 1, start + 1) if start > stop else (0, 0)
        if step < 0: flips.append(dim)
        bounds.append((lo, hi))
        steps.append(abs(step))
        plan.append(dim)
      else: raise OutOfRangeError(f"unsupported index {i!r} of type {type(i).__name__}: use ints, slices, None, ..., lists or integer Tensors")
      dim += 1
    strided = tuple(sint_simplify(hi - lo) if st == 1 else -(-(hi - lo) // st) for (lo, hi), st in zip(bounds, steps))
    shape = tuple(1 if p is None else strided[p] for p in plan)
    return _IndexPlan(tuple(bounds), tuple(flips), tuple(steps), strided, shape, adv)

  def _basic_view(self, p: _IndexPlan[Self]) -> Self:
    x = self.shrink(p.bounds)
    if p.flips: x = x.flip(p.flips)
    return x._strided(p.steps).reshape(p.shape)

  def _basic_unview(self, p: _IndexPlan[Self], full: tuple[int, ...]) -> Self:
    """The inverse of _basic_view: a tensor of the view's shape placed where the view reads from, zeros elsewhere."""
    x = self.reshape(p.strided)._unstrided(p.steps, tuple(hi - lo for lo, hi in p.bounds))
    if p.flips: x = x.flip(p.flips)
    return x.pad(tuple((lo, s - hi) for (lo, hi), s in zip(p.bounds, full)))

  @staticmethod
  def _adv_masks(x: TensorT, adv: list[tuple[int, TensorT]]) -> tuple[TensorT, tuple[int, ...], list[int]]:
    """The one-hot mask for tensor indices `adv` on x, of shape x.shape[:d0] + big + x.shape[d0:] (d0: the first indexed
    axis, big: the broadcast shape of the index tensors): True where the index tensors pick that element."""
    dims, tensors = [d for d, _ in adv], [t for _, t in adv]
    try: big = _broadcast_shape(*(t.shape for t in tensors))
    except ValueError as e: raise OutOfRangeError(f"index tensors of shapes {[t.shape for t in tensors]} can't be broadcast together") from e
    d0, nb = dims[0], len(big)
    mask: TensorT | None = None
    for d, t in zip(dims, tensors):
      t = t.reshape((1,) * (nb - t.ndim) + t.shape + (1,) * (x.ndim - d0))
      # (an axis longer than int32 counts numbers its positions in int64: x.expand(2**31 + 3)[Tensor([2**31 + 2])])
      n = x.shape[d]
      classes = type(x).arange(n, dtype=dtypes.int64 if isinstance(n, int) and n > 2**31 else dtypes.int32, device=x.device)
      classes = classes.reshape((n,) + (1,) * (x.ndim - d - 1))
      hit = t.eq(classes)
      mask = hit if mask is None else mask.logical_and(hit)
    assert mask is not None
    return mask.expand(x.shape[:d0] + big + x.shape[d0:]), big, dims

  @staticmethod
  def _adv_permuted(dims: list[int]) -> bool:
    """torch/numpy rule: tensor indices separated by other indices put their axes first."""
    return dims[0] != 0 and dims != list(range(dims[0], dims[0] + len(dims)))

  # ---- __getitem__ / __setitem__
  def __getitem__(self, index: Any) -> Self:
    """x[ints, slices (any step), None, ..., lists / integer Tensors (negative values count from the end)]."""
    p = self._index_plan(index)
    x = self._basic_view(p)
    if not p.adv: return x
    adv = p.adv
    dims0 = [d for d, _ in adv]
    if len(adv) > 1 and dims0 == list(range(dims0[0], dims0[0] + len(adv))) and all(isinstance(x.shape[d], int) for d in dims0):
      # consecutive tensor indices select through one flat index over the merged dims: one equality per element, which the
      # kernel builder turns into a direct load (schedule/indexing.py), where a mask per index tensor costs (index x source)
      # elements (x[0, i, j] of a (100, 200) slice: 270M ops -> 2M). An index out of its dim still selects nothing (0)
      d0, k = dims0[0], len(adv)
      sizes = [x.shape[d] for d in dims0]
      try: _broadcast_shape(*(t.shape for _, t in adv))
      except ValueError as e: raise OutOfRangeError(f"index tensors of shapes {[t.shape for _, t in adv]} can't be broadcast together") from e
      it = dtypes.int64 if prod(sizes) > 2**31 - 1 else dtypes.int32
      flat, ok = None, None
      for i, (_, t) in enumerate(adv):
        term = t.cast(it) * prod(sizes[i + 1:])
        inside = t < sizes[i] if dtypes.is_unsigned(t.dtype) else (t >= 0).logical_and(t < sizes[i])
        flat, ok = (term, inside) if flat is None or ok is None else (flat + term, ok.logical_and(inside))
      assert flat is not None and ok is not None
      x = x.reshape(x.shape[:d0] + (prod(sizes),) + x.shape[d0 + k:])
      adv = [(d0, ok.where(flat, -1))]
    mask, big, dims = self._adv_masks(x, adv)
    d0, nb = dims[0], len(big)
    out = _select(mask, x.reshape(x.shape[:d0] + (1,) * nb + x.shape[d0:]), tuple(d + nb for d in dims))
    if self._adv_permuted(dims): out = out.permute(*range(d0, d0 + nb), *range(d0), *range(d0 + nb, out.ndim))
    return out

  def __delitem__(self, index: Any) -> None:
    # (with __setitem__ defined and no __delitem__, Python raises AttributeError: __delitem__)
    raise TypeError(f"'{type(self).__name__}' object doesn't support item deletion")

  def __setitem__(self, index: Any, v: Self | ConstType) -> None:
    """Write v (broadcast to self[index]) into this tensor's buffer, via assign. With repeated tensor indices the last write wins."""
    from tinygrad.schedule.kernelize import is_buffer_view, is_contiguous_buffer, is_strided_view, is_writable_view
    if self.requires_grad or (isinstance(v, type(self)) and v.requires_grad): raise NotImplementedError("setitem on a tensor that requires grad is not supported")
    # on DISK the selected part of the file is written (its bytes: DISK runs no kernels), as tinygrad's setitem of a file
    from tinygrad.frontend.disk import is_storage_device
    if is_storage_device(self.device):
      self[index].assign(v)
      return
    # a detached buffer (x.detach()[i] = v) writes x's buffer, as torch's detach shares storage: the write runs now
    if (inner := getattr(self, "_detached_buffer", lambda: None)()) is not None:
      inner[index] = v
      inner.realize()
      return
    # a view of another tensor's buffer (row = x[1]; row[0] = 5) is written through: the assign of the whole view
    # reaches the buffer (Tensor.assign), as in tinygrad and torch
    if not is_contiguous_buffer(self.uop) and not is_writable_view(self.uop) and hasattr(self, "_rebase_view"): self._rebase_view()
    # (a strided view, v = t[::2], is written through too: Tensor.assign maps its elements to the buffer's)
    through = not is_contiguous_buffer(self.uop) and (is_writable_view(self.uop) or is_strided_view(self.uop))
    if not is_contiguous_buffer(self.uop) and is_buffer_view(self.uop) and not through:
      raise RuntimeError(f"setitem can't write through this {self.shape} view of another tensor's buffer: a strided (x[::2]), "
                         "expanded or padded view has no buffer element per element of its own. Index the base tensor in one "
                         "subscript (x[:, ::2][1] = v -> x[1, ::2] = v), or make a copy with .contiguous() first")
    parts = list(index) if isinstance(index, (tuple, list)) else [index]
    inputs = [t for t in (v, *parts) if isinstance(t, type(self))]
    # realize self together with what the value and the index read: a pending assign on self then runs once, before them
    if not is_contiguous_buffer(self.uop) and not through: self.realize(*inputs)
    # the write kernel must not read self's buffer except at the element it writes: copy inputs that read it elsewhere
    copies = {id(t): t.contiguous().realize() for t in inputs if self.uop.base in t.uop.toposort(gate=lambda u: u.op is not Ops.BUFFER)}
    if copies:
      v = copies.get(id(v), v)
      parts = [copies.get(id(i), i) for i in parts]
      index = type(index)(parts) if isinstance(index, (tuple, list)) else parts[0]
    if (new := self._setitem_result(index, v)) is not None: self.assign(new)

  def _setitem_result(self, index: Any, v: Self | ConstType) -> Self | None:
    """The whole tensor with self[index] replaced by v (None when the index selects nothing)."""
    v = (v if isinstance(v, type(self)) else type(self)(v, device=self.device, dtype=self.dtype)).cast(self.dtype).to(self.device)
    p = self._index_plan(index)
    x = self._basic_view(p)
    target = x.shape
    if p.adv:
      _, big, dims = self._adv_masks(x, p.adv)
      rest = tuple(s for i, s in enumerate(x.shape) if i not in dims)
      d0 = dims[0]
      target = big + x.shape[:d0] + rest[d0:] if self._adv_permuted(dims) else x.shape[:d0] + big + rest[d0:]
    while v.ndim > len(target) and v.shape[0] == 1: v = v.reshape(v.shape[1:])
    try: v = v.expand(target)
    except ValueError as e: raise InvalidArgumentError(f"setitem value of shape {v.shape} can't be broadcast to the indexed shape {target}") from e
    if 0 in target: return None  # an empty selection writes nothing
    if p.adv:
      mask, big, dims = self._adv_masks(x, p.adv)
      d0, nb = dims[0], len(big)
      if self._adv_permuted(dims): v = v.permute(*range(nb, nb + d0), *range(nb), *range(nb + d0, v.ndim))
      # back to the mask's frame x.shape[:d0] + big + x.shape[d0:], with size 1 on the indexed axes
      pre_shape = list(v.shape)
      for d in dims: pre_shape.insert(d + nb, 1)
      v = v.reshape(tuple(pre_shape))
      big_axes = tuple(range(d0, d0 + nb))
      # when index tensors repeat an element, the last write (in row-major order over `big`) wins
      order = type(self).arange(max(prod(big), 1), dtype=dtypes.int32, device=self.device).reshape(big + (1,) * (x.ndim - d0))
      last = mask.where(order, -1)._amax(big_axes, keepdim=True)
      hit = mask.logical_and(order.eq(last))
      vals, written = _select(hit, v, big_axes), (last >= 0).reshape(x.shape)
    else: vals, written = v, type(self).ones(*x.shape, dtype=dtypes.bool, device=self.device)
    return written._basic_unview(p, self.shape).where(vals._basic_unview(p, self.shape), self)

  # ---- gather / scatter
  def _one_hot_along_dim(self, num_classes: int, dim: int = -1) -> Self:
    offset = self.ndim - self._resolve_dim(dim) - 1
    return self.eq(type(self).arange(num_classes, dtype=dtypes.int32, device=self.device).reshape((num_classes,) + (1,) * offset))

  def one_hot(self, num_classes: int = -1) -> Self:
    """An int tensor with one more axis of size num_classes (-1: max + 1), 1 where the axis index equals the element."""
    if not dtypes.is_int(self.dtype): raise InvalidDTypeError(f"one_hot needs an integer tensor, got {self.dtype!r}")
    if num_classes < -1: raise InvalidArgumentError(f"one_hot num_classes must be >= 0 (or -1: max + 1), got {num_classes}")
    if num_classes == -1:
      if self.numel() == 0: raise InvalidArgumentError("one_hot of an empty tensor needs num_classes")
      num_classes = int(self.max().item()) + 1
    return self.unsqueeze(-1)._one_hot_along_dim(num_classes).where(1, 0)

  def gather(self, dim: int, index: Self) -> Self:
    """out[i][j][k] = self[index[i][j][k]][j][k] (for dim=0): picks along dim by index."""
    if index.ndim != self.ndim: raise InvalidArgumentError(f"gather needs index with as many dims as self: index {index.shape}, self {self.shape}")
    if not dtypes.is_int(index.dtype): raise InvalidDTypeError(f"gather index must have an integer dtype, got {index.dtype!r}")
    d = self._resolve_dim(dim)
    if any(n > s for i, (s, n) in enumerate(zip(self.shape, index.shape)) if i != d):
      raise InvalidArgumentError(f"gather index {index.shape} can't be larger than self {self.shape} outside dim {d}")
    x = self.shrink(tuple(None if i == d else (0, n) for i, n in enumerate(index.shape))).unsqueeze(-1).transpose(-1, d)
    return _select(_on_device_of(self, index, "gather's index").unsqueeze(-1)._one_hot_along_dim(self.shape[d]), x, -1)

  def _pre_scatter(self, dim: int, index: Self, src: Self | ConstType) -> tuple[Self, Self]:
    """src and the one-hot mask in the frame self.shape + (index.shape[dim],): mask[..., j] says whether the j-th index along
    dim points at this element of self."""
    d = self._resolve_dim(dim)
    if not isinstance(src, TensorBase): src = type(self).full(index.shape, src, dtype=self.dtype, device=self.device)
    else: src = _on_device_of(self, src, "scatter's src")
    if not index.ndim == self.ndim == src.ndim:
      raise InvalidArgumentError(f"scatter needs self, index and src with one number of dims, got {self.shape}, {index.shape}, {src.shape}")
    if not dtypes.is_int(index.dtype): raise InvalidDTypeError(f"scatter index must have an integer dtype, got {index.dtype!r}")
    if src.dtype != self.dtype: raise RuntimeError(f"scatter needs src with self's dtype {self.dtype!r}, got {src.dtype!r}")
    for i, (s, n, r) in enumerate(zip(self.shape, index.shape, src.shape)):
      if n > r or (i != d and n > s): raise InvalidArgumentError(f"scatter index {index.shape} must fit in src {src.shape} and, outside dim {d}, in self {self.shape}")
    src = src.shrink(tuple((0, n) for n in index.shape))
    src = src.unsqueeze(-1).expand(src.shape + (self.shape[d],)).transpose(-1, d)
    mask = _on_device_of(self, index, "scatter's index").unsqueeze(-1)._one_hot_along_dim(self.shape[d]).transpose(-1, d)
    pads = tuple(None if i == d else (0, self.shape[i] - mask.shape[i]) for i in range(self.ndim)) + (None,)
    return src.pad(pads), mask.pad(pads)

  def scatter(self, dim: int, index: Self, src: Self | ConstType, reduce: str | None = None) -> Self:
    """self with self[index[i][j]][j] = src[i][j] (for dim=0). reduce 'add' / 'multiply' combine with self instead."""
    if reduce not in (None, "add", "multiply"): raise TypeError(f"scatter reduce must be None, 'add' or 'multiply', got {reduce!r}")
    if reduce == "add": return self.scatter_reduce(dim, index, src, "sum")
    if reduce == "multiply": return self.scatter_reduce(dim, index, src, "prod")
    src, mask = self._pre_scatter(dim, index, src)
    k = mask.shape[-1]
    order = type(self).arange(max(k, 1), dtype=dtypes.int32, device=self.device)[:k]
    last = mask.where(order, -1)._amax(-1, keepdim=True)  # repeated indices: the last one wins
    return (last >= 0).squeeze(-1).where(_select(mask.logical_and(order.eq(last)), src, -1), self)

  def scatter_reduce(self, dim: int, index: Self, src: Self | ConstType, reduce: str, include_self: bool = True) -> Self:
    """Combine src into self at index along dim with reduce 'sum', 'prod', 'mean', 'amax' or 'amin'; include_self=False
    leaves self's value out of the reduction where something is scattered."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise RuntimeError(f"scatter_reduce reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got {reduce!r}")
    src, mask = self._pre_scatter(dim, index, src)
    untouched = mask._amax(-1).logical_not()
    def base(identity: ConstType) -> Any: return self if include_self else untouched.where(self, identity)
    if reduce == "sum": return mask.where(src, 0).sum(-1).add(base(0))
    if reduce == "prod": return mask.where(src, 1).prod(-1).mul(base(1))
    if reduce == "amax": return mask.where(src, m := dtypes.min(src.dtype))._amax(-1).maximum(base(m))
    if reduce == "amin": return mask.where(src, m := dtypes.max(src.dtype))._amin(-1).minimum(base(m))
    count = mask.where(1, 0).sum(-1).add(1 if include_self else untouched.where(1, 0))
    return mask.where(src, 0).sum(-1).add(base(0)).div(count)

  # ---- masks
  def masked_fill(self, mask: Self, value: Self | ConstType) -> Self:
    """self with value where mask is True."""
    if mask.dtype != dtypes.bool: raise InvalidDTypeError(f"masked_fill needs a bool mask, got {mask.dtype!r} (torch and tinygrad raise too): pass mask != 0")
    return mask.where(value, self)

  def masked_select(self, mask: Self, size: int | None = None, fill_value: ConstType = 0) -> Self:
    """The elements of self where mask (broadcast together with self) is True, as a 1-d tensor. Without `size` it reads the
    mask's count; with it (tinygrad's signature) the result has `size` elements, cut or filled with fill_value, and nothing is read."""
    if mask.dtype != dtypes.bool: raise TypeError(f"masked_select needs a bool mask, got {mask.dtype!r}")
    shape = _broadcast_shape(self.shape, mask.shape)
    x, m = self.expand(shape).flatten(), mask.expand(shape).flatten()
    n = m.shape[0]
    count = int(m.cast(dtypes.int32).sum().item()) if size is None else size
    if size is not None and size < 0: raise ValueError(f"masked_select size must be >= 0, got {size}")
    # rank[j]: how many selected elements come before element j (an exclusive prefix sum, by a triangular mask)
    before = type(self)._tri(n, n, 1, self.device).logical_and(m.reshape(n, 1))
    rank = before.cast(dtypes.int32).sum(0)
    out_pos = type(self).arange(max(count, 1), dtype=dtypes.int32, device=self.device)[:count].reshape(count, 1)
    sel = m.logical_and(rank.eq(out_pos))
    if size is None: return _select(sel, x, 1)
    return sel.any(1).where(_select(sel, x, 1), type(self)(fill_value, dtype=self.dtype, device=self.device))

  def nonzero(self, size: int | None = None, fill_value: ConstType = 0) -> Self:
    """The int32 indices of the nonzero elements, one row each in row-major order (torch.nonzero, tinygrad's Tensor.nonzero).
    Without `size` it reads the count; with it, `size` rows, cut or filled with fill_value."""
    mask = self.ne(0) if self.dtype != dtypes.bool else self
    if self.ndim == 0: mask = mask.reshape(1)
    cols = [type(self).arange(s, dtype=dtypes.int32, device=self.device).reshape(tuple(s if i == d else 1 for i in range(mask.ndim)))
            .expand(mask.shape).masked_select(mask, size=size, fill_value=fill_value) for d, s in enumerate(mask.shape)]
    if self.ndim == 0: return cols[0].reshape(-1, 1).shrink((None, (0, 0)))
    return type(self).stack(*cols, dim=1)
