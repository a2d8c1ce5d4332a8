"""Movement ops: reshape, permute, expand, pad, shrink, flip and what is built from them. All are views (no copies)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tinygrad.dtype import dtypes
from tinygrad.helpers import argfix, prod
from tinygrad.uop.ops import Ops, UOp

if TYPE_CHECKING:
  from tinygrad.tensor import Tensor


class MovementMixin:
  __slots__ = ()

  # ---- movement (views: never copy)
  def _view(self, op: Ops, arg: Any) -> Tensor: return type(self)(UOp(op, self.dtype, (self.uop,), arg), requires_grad=self.requires_grad)

  def reshape(self, shape: int | Sequence[int], *args: int) -> Tensor:
    new = list(argfix(shape, *args))
    if new.count(-1) > 1: raise ValueError(f"only one -1 allowed in reshape, got {tuple(new)}")
    if -1 in new:
      known = prod(s for s in new if s != -1)
      if known == 0 or self.numel() % known: raise ValueError(f"can't reshape {self.shape} to {tuple(new)}")
      new[new.index(-1)] = self.numel() // known
    if any(s < 0 for s in new): raise ValueError(f"reshape sizes must be >= 0 (or one -1), got {tuple(new)}")
    if prod(new) != self.numel(): raise ValueError(f"can't reshape {self.shape} ({self.numel()} elements) to {tuple(new)} ({prod(new)} elements)")
    return self if tuple(new) == self.shape else self._view(Ops.RESHAPE, tuple(new))

  def view(self, *shape: int) -> Tensor: return self.reshape(argfix(*shape))

  def permute(self, order: int | Sequence[int], *args: int) -> Tensor:
    axes = tuple(self._axis(a) for a in argfix(order, *args))
    if sorted(axes) != list(range(self.ndim)): raise ValueError(f"permute needs each of the {self.ndim} axes once, got {axes}")
    return self if axes == tuple(range(self.ndim)) else self._view(Ops.PERMUTE, axes)

  def expand(self, shape: int | Sequence[int], *args: int) -> Tensor:
    new = argfix(shape, *args)
    if len(new) < self.ndim: raise ValueError(f"can't expand {self.shape} to fewer dims {new}")
    base = (1,) * (len(new) - self.ndim) + self.shape
    target = tuple(b if n == -1 else n for b, n in zip(base, new))
    for b, n in zip(base, target):
      if b != n and b != 1: raise ValueError(f"can't expand {self.shape} to {tuple(new)}: only size-1 axes can grow")
    t = self.reshape(base) if base != self.shape else self
    return t if target == t.shape else t._view(Ops.EXPAND, target)

  def pad(self, padding: Sequence[tuple[int, int] | None] | Sequence[int], value: float = 0.0) -> Tensor:
    """Pad with a constant. `padding` per axis as (before, after) pairs, or torch-style flat ints from the last axis."""
    if padding and isinstance(padding[0], int):
      flat = list(padding)
      if len(flat) % 2: raise ValueError("flat padding needs pairs of ints")
      pairs = [(0, 0)] * (self.ndim - len(flat) // 2) + [(flat[i], flat[i + 1]) for i in range(len(flat) - 2, -1, -2)]
    else: pairs = [p if p is not None else (0, 0) for p in padding]  # type: ignore[misc]
    if len(pairs) != self.ndim: raise ValueError(f"padding has {len(pairs)} axes, tensor has {self.ndim}")
    if all(p == (0, 0) for p in pairs): return self
    if any(b < 0 or a < 0 for b, a in pairs):  # negative padding shrinks
      t = self.shrink(tuple((max(0, -b), s - max(0, -a)) for (b, a), s in zip(pairs, self.shape)))
      return t.pad(tuple((max(0, b), max(0, a)) for b, a in pairs), value)
    out = self._view(Ops.PAD, tuple((int(b), int(a)) for b, a in pairs))
    if value == 0: return out
    mask = type(self).ones(*self.shape, dtype=dtypes.bool, device=self.device)._view(Ops.PAD, tuple(pairs))
    return mask.where(out, value)

  def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
    bounds = tuple(a if a is not None else (0, s) for a, s in zip(arg, self.shape))
    if len(bounds) != self.ndim: raise ValueError(f"shrink has {len(bounds)} axes, tensor has {self.ndim}")
    for (b, e), s in zip(bounds, self.shape):
      if not 0 <= b <= e <= s: raise ValueError(f"shrink {bounds} is out of bounds for shape {self.shape}")
    return self if all(b == (0, s) for b, s in zip(bounds, self.shape)) else self._view(Ops.SHRINK, bounds)

  def flip(self, axis: int | Sequence[int], *args: int) -> Tensor:
    axes = {self._axis(a) for a in argfix(axis, *args)}
    return self._view(Ops.FLIP, tuple(i in axes for i in range(self.ndim))) if axes else self

  def _axis(self, axis: int) -> int:
    n = max(self.ndim, 1)
    if not -n <= axis < n: raise IndexError(f"axis {axis} is out of range for a tensor with {self.ndim} dims")
    return axis % n

  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    order = list(range(self.ndim))
    a, b = self._axis(dim0), self._axis(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)

  @property
  def T(self) -> Tensor: return self.permute(tuple(reversed(range(self.ndim))))

  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._axis(start_dim), self._axis(end_dim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  def unsqueeze(self, dim: int) -> Tensor:
    dim = dim % (self.ndim + 1)
    return self.reshape(self.shape[:dim] + (1,) + self.shape[dim:])

  def squeeze(self, dim: int | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dim = self._axis(dim)
    return self if self.shape[dim] != 1 else self.reshape(self.shape[:dim] + self.shape[dim + 1:])

  def __getitem__(self, index: Any) -> Tensor:
    """Basic indexing: ints, slices (with steps), None and Ellipsis."""
    idx = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for i in idx if i is Ellipsis) > 1: raise IndexError("an index can only have one Ellipsis")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise IndexError(f"too many indices ({n_real}) for a tensor with {self.ndim} dims")
    if Ellipsis in idx:
      at = idx.index(Ellipsis)
      idx = idx[:at] + [slice(None)] * (self.ndim - n_real) + idx[at + 1:]
    idx += [slice(None)] * (self.ndim - sum(1 for i in idx if i is not None))
    t, axis, new_shape_ops = self, 0, []
    shrink, flips, steps, squeeze_axes = [], [], [], []
    for i in idx:
      if i is None:
        new_shape_ops.append(("new", len(shrink)))
        continue
      size = self.shape[axis]
      if isinstance(i, bool) or not isinstance(i, (int, slice)): raise TypeError(f"unsupported index {i!r}: use ints, slices, None or ...")
      if isinstance(i, int):
        if not -size <= i < size: raise IndexError(f"index {i} is out of bounds for axis {axis} with size {size}")
        i %= size
        shrink.append((i, i + 1))
        flips.append(False)
        steps.append(1)
        squeeze_axes.append(len(shrink) - 1)
      else:
        start, stop, step = i.indices(size)
        if step > 0: lo, hi = start, max(start, stop)
        else: lo, hi = max(stop + 1, 0) if stop < start else start + 1, start + 1
        if step < 0 and stop >= start: lo = hi = 0
        shrink.append((lo, hi))
        flips.append(step < 0)
        steps.append(abs(step))
      axis += 1
    t = t.shrink(tuple(shrink))
    if any(flips): t = t.flip(tuple(a for a, f in enumerate(flips) if f))
    if any(s != 1 for s in steps): t = t._strided(steps)
    # drop int-indexed axes and insert None axes
    shape, out = list(t.shape), []
    none_positions = [p for kind, p in new_shape_ops]
    for a in range(len(shape) + 1):
      out.extend([1] * none_positions.count(a))
      if a < len(shape) and a not in squeeze_axes: out.append(shape[a])
    return t.reshape(tuple(out))

  def _strided(self, steps: list[int]) -> Tensor:
    """Every steps[i]-th element along each axis: pad up to a multiple, reshape, take index 0."""
    t = self
    for axis, step in enumerate(steps):
      if step == 1: continue
      size = t.shape[axis]
      n = -(-size // step)
      pads = [(0, 0)] * t.ndim
      pads[axis] = (0, n * step - size)
      t = t.pad(pads)
      t = t.reshape(t.shape[:axis] + (n, step) + t.shape[axis + 1:])
      t = t.shrink(tuple((0, 1) if a == axis + 1 else None for a in range(t.ndim)))  # type: ignore[misc]
      t = t.reshape(t.shape[:axis + 1] + t.shape[axis + 2:])
    return t
