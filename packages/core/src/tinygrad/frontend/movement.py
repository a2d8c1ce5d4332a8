"""Movement ops: reshape, permute, expand, pad, shrink, flip and what is built from them (cat, stack, split, repeat, roll,
meshgrid, tril/triu). The six primitives are views (no copies); the rest are compositions of them and elementwise ops."""
from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Any, Self, TypeVar

from tinygrad.dtype import dtypes, least_upper_dtype
from tinygrad.frontend.elementwise import ElementwiseMixin
from tinygrad.helpers import FormulaError, InvalidArgumentError, InvalidDTypeError, OutOfRangeError, all_int, argfix, ceildiv, make_tuple, prod
from tinygrad.uop.ops import Ops, UOp
from tinygrad.uop.symbolic import sint_div, sint_eq, sint_le, sint_prod, sint_simplify

TensorT = TypeVar("TensorT", bound="MovementMixin")  # a Tensor, in the helpers of the mixin

PAD_MODES = ("constant", "reflect", "replicate", "circular")


class _ZeroDimCatError(InvalidArgumentError, IndexError):
  """cat of a 0-d tensor: torch raises RuntimeError, tinygrad IndexError; this is both (and a ValueError)."""


def _flat_pads_to_pairs(flat: Sequence[int], ndim: int) -> list[tuple[int, int]]:
  """torch-style flat padding (last axis first: (left, right, top, bottom, ...)) -> one (before, after) pair per axis."""
  if len(flat) % 2: raise InvalidArgumentError(f"flat padding needs an even number of ints (before, after per axis), got {len(flat)}: {tuple(flat)}")
  if len(flat) // 2 > ndim: raise InvalidArgumentError(f"flat padding {tuple(flat)} covers {len(flat) // 2} axes, the tensor has only {ndim}")
  return [(0, 0)] * (ndim - len(flat) // 2) + [(flat[i], flat[i + 1]) for i in range(len(flat) - 2, -1, -2)]


def _pad_edge(x: TensorT, d: int, n: int, mode: str, before: bool) -> TensorT | None:
  """The n elements that reflect/replicate/circular padding puts before (or after) axis d of x; None when n is 0."""
  if n == 0: return None
  s = x.shape[d]
  def part(lo: int, hi: int) -> TensorT: return x.shrink(tuple((lo, hi) if i == d else None for i in range(x.ndim)))
  if mode == "reflect": return part(1, n + 1).flip(d) if before else part(s - 1 - n, s - 1).flip(d)
  if mode == "circular": return part(s - n, s) if before else part(0, n)
  return (part(0, 1) if before else part(s - 1, s)).expand(tuple(n if i == d else x.shape[i] for i in range(x.ndim)))


def _parse_rearrange_side(side: str, formula: str) -> list[tuple[list[str], bool]]:
  """'b (h w) 1 ...' -> [(['b'], False), (['h', 'w'], True), ([], True), (['...'], False)]: names per axis, and whether in parentheses."""
  groups: list[tuple[list[str], bool]] = []
  current: list[str] | None = None
  for tok in side.replace("(", " ( ").replace(")", " ) ").replace("…", "...").split():
    if tok == "(":
      if current is not None: raise FormulaError(f"rearrange can't nest parentheses in {formula!r}")
      current = []
    elif tok == ")":
      if current is None: raise FormulaError(f"unbalanced ')' in rearrange formula {formula!r}")
      groups.append((current, True))
      current = None
    elif tok == "1":
      if current is None: groups.append(([], True))
    elif tok == "..." or (tok.isidentifier() and not tok.startswith("_") and not tok.endswith("_")):  # einops' axis names
      if current is None: groups.append(([tok], False))
      else: current.append(tok)
    else: raise FormulaError(f"invalid axis name {tok!r} in rearrange formula {formula!r}")
  if current is not None: raise FormulaError(f"unbalanced '(' in rearrange formula {formula!r}")
  return groups



def _diagonal(x: TensorT, a: int, b: int) -> TensorT:
  """The diagonal of axes a < b (equal sizes), placed where axis a was; axis b goes away."""
  n = x.shape[a]
  order = [i for i in range(x.ndim) if i not in (a, b)] + [a, b]
  y = x.permute(order).reshape(*[x.shape[i] for i in order[:-2]], n * n)
  y = y.pad([None] * (y.ndim - 1) + [(0, n)]).reshape(*y.shape[:-1], n, n + 1)
  y = y.shrink([None] * (y.ndim - 1) + [(0, 1)]).reshape(*y.shape[:-2], n)
  back = list(range(y.ndim - 1))
  back.insert(a, y.ndim - 1)
  return y.permute(back)


def _pad_amount(x: Any) -> Any:
  """A pad size: an int, or a symbolic size (an int expression of bound Variables)."""
  if isinstance(x, UOp):
    if not dtypes.is_int(x.dtype): raise TypeError(f"a pad size must be an int or a symbolic int, got a {x.dtype!r} UOp")
    return sint_simplify(x)
  return int(x)


class MovementMixin(ElementwiseMixin):
  """Views and their compositions; indexing (getitem/setitem, gather, scatter, ...) comes from IndexingMixin."""
  __slots__ = ()

  # ---- the view primitives
  def _view(self, op: Ops, arg: Any) -> Self: return type(self)(UOp(op, self.dtype, (self.uop,), arg), requires_grad=self.requires_grad)

  def _axis(self, axis: int) -> int:
    n = max(self.ndim, 1)
    if not -n <= axis < n: raise OutOfRangeError(f"axis {axis} is out of range for a tensor with {self.ndim} dims (valid: {-n}..{n - 1})")
    return axis % n

  def _resolve_dim(self, dim: int, *, extra: bool = False) -> int:
    """A dim in [-n, n) as a non-negative int; `extra` allows one more (where a new axis is inserted)."""
    if isinstance(dim, bool) or not isinstance(dim, int): raise TypeError(f"dim must be an int, got {type(dim).__name__} {dim!r}")
    n = max(1, self.ndim + int(extra))
    if not -n <= dim < n: raise OutOfRangeError(f"dim {dim} is out of range for a tensor with {self.ndim} dims (valid: {-n}..{n - 1})")
    return dim + self.ndim + int(extra) if dim < 0 else dim

  def reshape(self, shape: int | Sequence[int], *args: int) -> Self:
    new = [s if s is not None else self.shape[i] for i, s in enumerate(argfix(shape, *args))]
    if not all_int(new) or not all_int(self.shape): return self._reshape_symbolic(new)
    if new.count(-1) > 1: raise InvalidArgumentError(f"only one -1 allowed in reshape, got {tuple(new)}")
    if -1 in new:
      known = prod(s for s in new if s != -1)
      if known == 0 or self.numel() % known: raise InvalidArgumentError(f"can't reshape {self.shape} to {tuple(new)}")
      new[new.index(-1)] = self.numel() // known
    if any(s < 0 for s in new): raise InvalidArgumentError(f"reshape sizes must be >= 0 (or one -1), got {tuple(new)}")
    if prod(new) != self.numel(): raise InvalidArgumentError(f"can't reshape {self.shape} ({self.numel()} elements) to {tuple(new)} ({prod(new)} elements)")
    return self if tuple(new) == self.shape else self._view(Ops.RESHAPE, tuple(new))

  def _reshape_symbolic(self, new: list) -> Self:
    """reshape where a size is symbolic: the element counts must be equal for every value of the Variables."""
    if any(not isinstance(s, (int, UOp)) or isinstance(s, bool) for s in new): raise InvalidDTypeError(f"reshape sizes must be ints, got {tuple(new)}")
    if sum(1 for s in new if isinstance(s, int) and s == -1) > 1: raise InvalidArgumentError(f"only one -1 allowed in reshape, got {tuple(new)}")
    numel = sint_prod(self.shape)
    if any(isinstance(s, int) and s == -1 for s in new):
      at = next(i for i, s in enumerate(new) if isinstance(s, int) and s == -1)
      known = sint_prod(s for i, s in enumerate(new) if i != at)
      if (inferred := None if isinstance(known, int) and known == 0 else sint_div(numel, known)) is None:
        raise InvalidArgumentError(f"can't reshape {self.shape} to {tuple(new)}: {known} doesn't divide {numel} for every value of its Variables")
      new[at] = inferred
    if any(isinstance(s, int) and s < 0 for s in new): raise InvalidArgumentError(f"reshape sizes must be >= 0 (or one -1), got {tuple(new)}")
    new = [sint_simplify(s) for s in new]
    if not sint_eq(sint_prod(new), numel):
      raise InvalidArgumentError(f"can't reshape {self.shape} ({numel} elements) to {tuple(new)} ({sint_prod(new)} elements) for every "
                                 "value of its Variables: keep each symbolic size in one dim (or merged with int dims)")
    if len(new) == self.ndim: new = [o if sint_eq(n, o) else n for n, o in zip(new, self.shape)]  # v+1 built twice: the old node
    return self if tuple(new) == self.shape else self._view(Ops.RESHAPE, tuple(new))

  def view(self, shape: int | Sequence[int], *args: int) -> Self: return self.reshape(shape, *args)

  def permute(self, order: int | Sequence[int], *args: int) -> Self:
    axes = tuple(self._axis(a) for a in argfix(order, *args))
    if sorted(axes) != list(range(self.ndim)): raise InvalidArgumentError(f"permute needs each of the {self.ndim} axes once, got {axes}")
    return self if axes == tuple(range(self.ndim)) else self._view(Ops.PERMUTE, axes)

  def expand(self, shape: int | Sequence[int], *args: int) -> Self:
    new = argfix(shape, *args)
    if len(new) < self.ndim: raise InvalidArgumentError(f"can't expand {self.shape} to fewer dims {new}")
    base = (1,) * (len(new) - self.ndim) + self.shape
    target = tuple(b if n is None or (isinstance(n, int) and n == -1) or (isinstance(n, UOp) and sint_eq(b, n)) else n for b, n in zip(base, new))
    for b, n in zip(base, target):
      if b is not n and not (isinstance(b, int) and b == 1) and not sint_eq(b, n): raise InvalidArgumentError(f"can't expand {self.shape} to {tuple(new)}: only size-1 axes can grow")
      if isinstance(n, int) and n < 0: raise InvalidArgumentError(f"can't expand {self.shape} to {tuple(new)}: negative size")  # symbolic sizes are >= 0
    t = self.reshape(base) if base != self.shape else self
    return t if target == t.shape else t._view(Ops.EXPAND, target)

  def pad(self, padding: Sequence[tuple[int, int] | None] | Sequence[int], mode: str = "constant", value: float = 0.0) -> Self:
    """Pad with `mode` "constant" (with `value`), "reflect", "replicate" or "circular". `padding` is one (before, after) pair
    (or None) per axis, or torch-style flat ints starting from the last axis. Negative pads remove elements."""
    if mode not in PAD_MODES: raise NotImplementedError(f"pad mode {mode!r} is not supported, use one of {PAD_MODES}")
    if len(padding) and all(p is not None and not isinstance(p, (tuple, list)) for p in padding):
      pairs = _flat_pads_to_pairs([_pad_amount(p) for p in padding], self.ndim)
    else: pairs = [(0, 0) if p is None else (_pad_amount(p[0]), _pad_amount(p[1])) for p in padding]  # type: ignore[index]
    if len(pairs) != self.ndim: raise InvalidArgumentError(f"padding has {len(pairs)} axes, tensor has {self.ndim} (padding={tuple(padding)})")
    if any(isinstance(x, UOp) for p in pairs for x in p):  # pad by a symbolic amount (cat along a symbolic dim)
      if mode != "constant": raise NotImplementedError(f"pad by a symbolic amount takes mode='constant', got {mode!r}")
      if not all(sint_le(0, x) for p in pairs for x in p): raise NotImplementedError(f"pad by a symbolic amount must be >= 0, got {tuple(pairs)}")
      pairs = [tuple(0 if isinstance(x, int) and x == 0 else x for x in p) for p in pairs]  # type: ignore[misc]
    # a constant pad with a value keeps the dtype of its fill (where(mask, x, value)) also when nothing is filled in
    if all(p == (0, 0) for p in pairs) and (mode != "constant" or value == 0): return self
    if mode == "constant":
      if any(isinstance(x, int) and x < 0 for p in pairs for x in p):  # negative padding shrinks
        for (b, a), s in zip(pairs, self.shape):
          if max(0, -b) + max(0, -a) > s: raise InvalidArgumentError(f"negative padding {tuple(pairs)} removes more than the {self.shape} tensor has")
        t = self.shrink(tuple((max(0, -b), s - max(0, -a)) for (b, a), s in zip(pairs, self.shape)))
        return t.pad(tuple((max(0, b), max(0, a)) for b, a in pairs), value=value)
      padded = any(p != (0, 0) for p in pairs)
      out = self._view(Ops.PAD, tuple(pairs)) if padded else self
      if value == 0: return out
      mask = type(self).ones(*self.shape, dtype=dtypes.bool, device=self.device)
      if padded: mask = mask._view(Ops.PAD, tuple(pairs))
      filled = mask.where(out, value)
      # nothing filled in (pool/conv with padding 0): a cast at most, no where over the whole tensor
      return filled if padded else self if filled.dtype == self.dtype else self.cast(filled.dtype)
    x = self
    if mode == "circular" and any(b < 0 or a < 0 for b, a in pairs):  # torch/tinygrad: shrink first, then wrap what is left
      x = x.shrink(tuple((max(0, -b), s - max(0, -a)) for (b, a), s in zip(pairs, x.shape)))
      pairs = [(max(0, b), max(0, a)) for b, a in pairs]
    for d, (b, a) in enumerate(pairs):
      b, a, s = max(b, 0), max(a, 0), x.shape[d]
      if b == 0 and a == 0: continue
      if mode == "reflect" and (b >= s or a >= s):
        raise InvalidArgumentError(f"reflect padding ({b}, {a}) must be less than the size {s} of dim {d}")
      if mode == "replicate" and s == 0: raise InvalidArgumentError(f"replicate padding of dim {d} needs a non-empty axis")
      if mode == "circular" and (b > s or a > s):
        raise InvalidArgumentError(f"circular padding ({b}, {a}) of dim {d} (size {s}) would wrap around more than once")
      pieces = [p for p in (_pad_edge(x, d, b, mode, True), x, _pad_edge(x, d, a, mode, False)) if p is not None]
      x = pieces[0].cat(*pieces[1:], dim=d)
    # negative pads (reflect/replicate) shrink at the end
    return x.shrink(tuple((max(0, -b), s - max(0, -a)) for (b, a), s in zip(pairs, x.shape)))

  def shrink(self, arg: Sequence[tuple[int | UOp, int | UOp] | None]) -> Self:
    if len(arg) != self.ndim: raise InvalidArgumentError(f"shrink has {len(arg)} axes, tensor has {self.ndim}")
    bounds = tuple(a if a is not None else (0, s) for a, s in zip(arg, self.shape))
    for (b, e), s in zip(bounds, self.shape):
      # bounds may be symbolic (bound Variables): then their value ranges must fit
      if not (sint_le(0, b) and sint_le(b, e) and sint_le(e, s)): raise InvalidArgumentError(f"shrink {bounds} is out of bounds for shape {self.shape}")
    return self if all(b == (0, s) for b, s in zip(bounds, self.shape)) else self._view(Ops.SHRINK, bounds)

  def pad_to(self, shape: int | Sequence[int | None], *args: int | None, value: float = 0.0) -> Self:
    """Pad with `value` (zeros) at the end of each axis up to `shape` (None keeps an axis)."""
    new = argfix(shape, *args)
    if len(new) != self.ndim: raise InvalidArgumentError(f"pad_to shape {tuple(new)} needs {self.ndim} dims")
    # a smaller size would shrink through a negative pad: tinygrad raises (ValueError), as shrink_to does for a larger one
    if any(isinstance(n, int) and isinstance(s, int) and n < s for s, n in zip(self.shape, new)):
      raise InvalidArgumentError(f"pad_to shape {tuple(new)} is smaller than {self.shape}: use shrink_to")
    return self.pad(tuple(None if n is None else (0, n - s) for s, n in zip(self.shape, new)), value=value)

  def unfold(self, dim: int, size: int, step: int) -> Self:
    """Windows of `size` elements every `step` along dim, as a new last dim (torch.Tensor.unfold, tinygrad's unfold)."""
    d = self._resolve_dim(dim)
    n = self.shape[d] if self.ndim else 1
    if size < 0 or size > n: raise InvalidArgumentError(f"unfold size {size} must be in [0, {n}] for dim {dim} of {self.shape}")
    if step <= 0: raise InvalidArgumentError(f"unfold step must be > 0, got {step}")
    count = (n - size) // step + 1
    idx = (type(self).arange(count, device=self.device).reshape(count, 1) * step + type(self).arange(size, device=self.device).reshape(1, size))
    x = self.reshape(1) if self.ndim == 0 else self
    out = x.transpose(d, -1)[..., idx.flatten()] if count * size else x.transpose(d, -1).shrink_to(*x.transpose(d, -1).shape[:-1], 0)
    out = out.reshape(*out.shape[:-1], count, size)
    return out.transpose(d, -2) if self.ndim else out.reshape(count, size)

  def shrink_to(self, shape: int | Sequence[int | None], *args: int | None) -> Self:
    """Keep the first `shape[i]` elements of each axis (None keeps an axis)."""
    new = argfix(shape, *args)
    if len(new) != self.ndim: raise InvalidArgumentError(f"shrink_to shape {tuple(new)} needs {self.ndim} dims")
    return self.shrink(tuple(None if n is None else (0, n) for n in new))

  def flip(self, axis: int | Sequence[int], *args: int) -> Self:
    axes = [self._axis(a) for a in argfix(axis, *args)]
    if len(set(axes)) != len(axes): raise InvalidArgumentError(f"flip got a dim twice: {tuple(argfix(axis, *args))}")
    return self._view(Ops.FLIP, tuple(i in axes for i in range(self.ndim))) if axes and self.ndim else self

  # ---- axes
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Self:
    order = list(range(self.ndim))
    a, b = self._axis(dim0), self._axis(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)

  @property
  def T(self) -> Self: return self.permute(tuple(reversed(range(self.ndim))))

  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Self:
    s, e = self._resolve_dim(start_dim), self._resolve_dim(end_dim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  def unflatten(self, dim: int, sizes: Sequence[int]) -> Self:
    d = self._resolve_dim(dim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

  def unsqueeze(self, dim: int) -> Self:
    d = self._resolve_dim(dim, extra=True)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

  def squeeze(self, dim: int | Sequence[int] | None = None) -> Self:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dims = {self._resolve_dim(d) for d in make_tuple(dim, 1)}
    if self.ndim == 0: return self
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1)))

  # ---- compositions
  def repeat(self, repeats: int | Sequence[int], *args: int) -> Self:
    reps = argfix(repeats, *args)
    if len(reps) < self.ndim: raise InvalidArgumentError(f"repeat needs at least one count per dim: {len(reps)} counts {reps} for shape {self.shape}")
    if any(r < 0 for r in reps): raise InvalidArgumentError(f"repeat counts must be >= 0, got {reps}")
    base = (1,) * (len(reps) - self.ndim) + self.shape
    unsqueezed = tuple(itertools.chain.from_iterable((1, s) for s in base))
    expanded = tuple(itertools.chain.from_iterable((r, s) for r, s in zip(reps, base)))
    return self.reshape(unsqueezed).expand(expanded).reshape(tuple(r * s for r, s in zip(reps, base)))

  def repeat_interleave(self, repeats: int, dim: int | None = None) -> Self:
    if isinstance(repeats, bool) or not isinstance(repeats, int): raise TypeError(f"repeat_interleave takes an int count, got {type(repeats).__name__}")
    if repeats < 0: raise InvalidArgumentError(f"repeat_interleave count must be >= 0, got {repeats}")
    x, d = (self.flatten(), 0) if dim is None else (self, self._resolve_dim(dim))
    shp = x.shape
    return x.reshape(shp[:d + 1] + (1,) + shp[d + 1:]).expand(shp[:d + 1] + (repeats,) + shp[d + 1:]).reshape(
      shp[:d] + (shp[d] * repeats,) + shp[d + 1:])

  def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Self:
    if dims is None:
      # (a one-element sequence is that shift: torch and tinygrad take roll(x, (1,)))
      if not isinstance(shifts, int) and len(shifts_seq := tuple(shifts)) == 1 and isinstance(shifts_seq[0], int): shifts = shifts_seq[0]
      if not isinstance(shifts, int): raise InvalidArgumentError(f"roll without dims takes one int shift, got {shifts}")
      return self.flatten().roll(shifts, 0).reshape(self.shape)
    dims_t, shifts_t = tuple(self._resolve_dim(d) for d in make_tuple(dims, 1)), make_tuple(shifts, 1)
    if len(dims_t) != len(shifts_t): raise InvalidArgumentError(f"roll needs one shift per dim, got shifts={shifts_t} dims={dims_t}")
    x = self
    for d, shift in zip(dims_t, shifts_t):
      n = x.shape[d]
      if n == 0 or shift % n == 0: continue
      k = n - shift % n
      x = x.shrink(tuple((k, n) if i == d else None for i in range(x.ndim))).cat(
        x.shrink(tuple((0, k) if i == d else None for i in range(x.ndim))), dim=d)
    return x

  def cat(self, *args: Self, dim: int = 0) -> Self:
    if isinstance(self, (tuple, list)):  # Tensor.cat((a, b)) as in torch.cat
      if args: raise InvalidArgumentError("cat takes the tensors either as one sequence or one by one, not both")
      return self[0].cat(*self[1:], dim=dim)
    tensors = [self, *args]
    if any(t.ndim == 0 for t in tensors): raise _ZeroDimCatError("cat can't join 0-d tensors: unsqueeze them first (or use stack)")
    d = self._resolve_dim(dim)
    for i, t in enumerate(args, 1):
      if t.ndim != self.ndim: raise InvalidArgumentError(f"cat needs tensors with the same number of dims: tensor 0 has shape {self.shape}, tensor {i} has {t.shape}")
      if any(not sint_eq(a, b) for j, (a, b) in enumerate(zip(self.shape, t.shape)) if j != d):
        raise InvalidArgumentError(f"cat along dim {d}: shapes must match except in that dim, tensor 0 has {self.shape}, tensor {i} has {t.shape}")
    dt = least_upper_dtype(*(t.dtype for t in tensors))
    # tensors empty along dim add nothing (and padding an empty buffer gives a kernel with a stray buffer argument)
    if any(t.shape[d] == 0 and t.requires_grad is not False for t in tensors):  # they still get a (zero) gradient
      nonempty = [t for t in tensors if t.shape[d] != 0] or tensors[:1]
      out = nonempty[0].cat(*nonempty[1:], dim=d) if len(nonempty) > 1 else nonempty[0].cast(dt)
      pads = tuple((0, out.shape[d]) if j == d else None for j in range(self.ndim))
      empties = [t.cast(dt).pad(pads) for t in tensors if t.shape[d] == 0]
      return functools.reduce(lambda a, b: a.logical_or(b) if dt == dtypes.bool else a + b, empties, out)
    if len(tensors := [t for t in tensors if t.shape[d] != 0] or tensors[:1]) == 1: return tensors[0].cast(dt)
    offsets = list(itertools.accumulate((t.shape[d] for t in tensors), initial=0))
    parts = [t.cast(dt).pad(tuple((offsets[i], offsets[-1] - offsets[i + 1]) if j == d else None for j in range(t.ndim)))
             for i, t in enumerate(tensors)]
    return functools.reduce(lambda a, b: a.logical_or(b) if dt == dtypes.bool else a + b, parts)

  def stack(self, *args: Self, dim: int = 0) -> Self:
    if isinstance(self, (tuple, list)):  # Tensor.stack((a, b)) as in torch.stack
      if args: raise InvalidArgumentError("stack takes the tensors either as one sequence or one by one, not both")
      return self[0].stack(*self[1:], dim=dim)
    for i, t in enumerate(args, 1):
      if t.shape != self.shape: raise InvalidArgumentError(f"stack needs tensors of one shape: tensor 0 has {self.shape}, tensor {i} has {t.shape}")
    d = self._resolve_dim(dim, extra=True)
    return self.unsqueeze(d).cat(*[t.unsqueeze(d) for t in args], dim=d)

  def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Self, ...]:
    d = self._resolve_dim(dim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0: raise InvalidArgumentError(f"split size must be > 0, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, max(1, n), sizes)]
    if any(s < 0 for s in sizes): raise InvalidArgumentError(f"split sizes must be >= 0, got {tuple(sizes)}")
    if sum(sizes) != n: raise InvalidArgumentError(f"split sizes {tuple(sizes)} must sum to the size {n} of dim {d}, they sum to {sum(sizes)}")
    offsets = list(itertools.accumulate(sizes, initial=0))
    return tuple(self.shrink(tuple((offsets[i], offsets[i + 1]) if j == d else None for j in range(self.ndim))) for i in range(len(sizes)))

  def chunk(self, chunks: int, dim: int = 0) -> list[Self]:
    if chunks <= 0: raise InvalidArgumentError(f"chunk needs chunks > 0, got {chunks}")
    d = self._resolve_dim(dim)
    return list(self.split(ceildiv(self.shape[d], chunks) if self.shape[d] else [0] * chunks, dim=d))

  def meshgrid(self, *args: Self, indexing: str = "ij") -> tuple[Self, ...]:
    if indexing not in ("ij", "xy"): raise InvalidArgumentError(f"meshgrid indexing must be 'ij' or 'xy', got {indexing!r}")
    tensors = (self, *args)
    if len(tensors) == 1: return tensors
    order = list(range(len(tensors)))
    if indexing == "xy": order[0], order[1] = 1, 0
    shape = [0] * len(tensors)
    for pos, t in zip(order, tensors): shape[pos] = t.numel()
    return tuple(t.reshape(tuple(-1 if i == pos else 1 for i in range(len(tensors)))).expand(tuple(shape)) for pos, t in zip(order, tensors))

  def rearrange(self, formula: str, **sizes: int) -> Self:
    """einops-style axis rearrangement: `x.rearrange("b (h w) c -> b c h w", h=2)`. Names group with parentheses, `...`
    stands for the axes not named, `1` or `()` is an axis of size 1."""
    if formula.count("->") != 1: raise FormulaError(f"rearrange formula needs exactly one '->', got {formula!r}")
    lhs_p, rhs_p = (_parse_rearrange_side(side, formula) for side in formula.split("->"))
    names_l, names_r = [n for g, _ in lhs_p for n in g], [n for g, _ in rhs_p for n in g]
    if sorted(names_l) != sorted(names_r) or len(set(names_l)) != len(names_l):
      raise FormulaError(f"rearrange needs the same axis names once on each side of {formula!r}: {names_l} vs {names_r}")
    for name in sizes:
      if name not in names_l: raise FormulaError(f"rearrange size given for axis {name!r}, which {formula!r} does not use")
    if any("..." in g and paren for g, paren in lhs_p): raise FormulaError(f"rearrange can't have '...' inside parentheses on the left of {formula!r}")
    n_ell = self.ndim - len(lhs_p) + 1 if "..." in names_l else 0
    ell = [f"...{i}" for i in range(max(n_ell, 0))]
    # a bare ... is one axis per unnamed axis; inside parentheses (right side only) they merge into one
    lhs = [new for g, _ in lhs_p for new in ([[e] for e in ell] if g == ["..."] else [g])]
    rhs = [new for g, paren in rhs_p for new in ([[e] for e in ell] if g == ["..."] and not paren else [[e for n in g for e in (ell if n == "..." else [n])]])]
    if n_ell < 0 or len(lhs) != self.ndim: raise FormulaError(f"rearrange: the left of {formula!r} names {len(lhs)} axes, the tensor has {self.ndim}")
    known: dict[str, int] = {}
    for g, dim in zip(lhs, self.shape):
      unknown = [n for n in g if n not in sizes]
      fixed = prod(sizes[n] for n in g if n in sizes)
      if len(unknown) > 1: raise InvalidArgumentError(f"rearrange can't infer the sizes of {unknown} in {formula!r}: give all but one as keyword args")
      if (unknown and (fixed == 0 or dim % fixed)) or (not unknown and fixed != dim):
        raise FormulaError(f"rearrange: an axis of size {dim} can't be split into {g or '()'} with sizes {[sizes.get(n) for n in g]}")
      known.update({n: sizes[n] if n in sizes else dim // fixed for n in g})
    names = [n for g in lhs for n in g]
    t = self.reshape(tuple(known[n] for n in names)).permute([names.index(n) for g in rhs for n in g])
    return t.reshape(tuple(prod(known[n] for n in g) for g in rhs))

  @classmethod
  def _tri(cls, r: int, c: int, diagonal: int = 0, device: str | None = None) -> Self:
    """Boolean (r, c) mask of the elements on or above `diagonal` (col - row >= diagonal)."""
    return (cls.arange(r, dtype=dtypes.int32, device=device).reshape(r, 1) + diagonal) <= cls.arange(c, dtype=dtypes.int32, device=device)

  def triu(self, diagonal: int = 0) -> Self:
    if self.ndim < 2: raise InvalidArgumentError(f"triu needs a tensor with at least 2 dims, got shape {self.shape}")
    return self._tri(self.shape[-2], self.shape[-1], diagonal, self.device).where(self, self.zeros_like())

  def tril(self, diagonal: int = 0) -> Self:
    if self.ndim < 2: raise InvalidArgumentError(f"tril needs a tensor with at least 2 dims, got shape {self.shape}")
    return self._tri(self.shape[-2], self.shape[-1], diagonal + 1, self.device).where(self.zeros_like(), self)

  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Self:
    """The diagonal of dims dim1 and dim2 (shifted right by offset > 0, down by offset < 0) as a new last dim (torch.diagonal)."""
    a, b = self._resolve_dim(dim1), self._resolve_dim(dim2)
    if a == b: raise InvalidArgumentError(f"diagonal needs two different dims, got dim1={dim1} and dim2={dim2} (both {a}) for shape {self.shape}")
    n = max(0, min(self.shape[a] - max(-offset, 0), self.shape[b] - max(offset, 0)))
    # the square block whose main diagonal is the one asked for, then that diagonal moved to the end
    lo_a, lo_b = min(max(-offset, 0), self.shape[a]), min(max(offset, 0), self.shape[b])
    x = self.shrink(tuple((lo_a, lo_a + n) if i == a else (lo_b, lo_b + n) if i == b else None for i in range(self.ndim)))
    lo, hi = min(a, b), max(a, b)
    d = _diagonal(x, lo, hi) if n else x.shrink(tuple((0, 0) if i == hi else None for i in range(x.ndim))).reshape(
      tuple(s for i, s in enumerate(x.shape) if i != hi))
    return d.permute(tuple(i for i in range(d.ndim) if i != lo) + (lo,))

  def diag(self, diagonal: int = 0) -> Self:
    """1-d input: the square matrix with it on the diagonal; 2-d input: its diagonal (torch.diag; tinygrad takes 1-d only)."""
    if self.ndim == 2: return self.diagonal(diagonal)
    if self.ndim != 1: raise InvalidArgumentError(f"diag needs a 1-d or 2-d tensor, got shape {self.shape}")
    n, k = self.shape[0], abs(diagonal)
    eye = type(self).eye(n, dtype=dtypes.bool, device=self.device)
    out = eye.where(self.reshape(1, n), type(self).zeros(1, dtype=self.dtype, device=self.device))
    if k == 0: return out
    return out.pad(((0, k), (k, 0)) if diagonal > 0 else ((k, 0), (0, k)))

  def sequential(self, ll: Sequence[Any]) -> Self:
    """Apply the callables in ll one after another (tinygrad's Tensor.sequential)."""
    return functools.reduce(lambda x, f: f(x), ll, self)

  def _strided(self, steps: Sequence[int]) -> Self:
    """Every steps[i]-th element along each axis: pad up to a multiple, reshape, take index 0."""
    t = self
    for axis, step in enumerate(steps):
      if step == 1: continue
      size = t.shape[axis]
      n = ceildiv(size, step)
      t = t.pad(tuple((0, n * step - size) if a == axis else None for a in range(t.ndim)))
      t = t.reshape(t.shape[:axis] + (n, step) + t.shape[axis + 1:])
      t = t.shrink(tuple((0, 1) if a == axis + 1 else None for a in range(t.ndim)))
      t = t.reshape(t.shape[:axis + 1] + t.shape[axis + 2:])
    return t

  def _unstrided(self, steps: Sequence[int], sizes: Sequence[int]) -> Self:
    """The inverse of _strided: element i of each axis goes to i*steps[axis], zeros between; axis length becomes sizes[axis]."""
    t = self
    for axis, (step, size) in enumerate(zip(steps, sizes)):
      if step == 1: continue
      n = t.shape[axis]
      t = t.reshape(t.shape[:axis + 1] + (1,) + t.shape[axis + 1:])
      t = t.pad(tuple((0, step - 1) if a == axis + 1 else None for a in range(t.ndim)))
      t = t.reshape(t.shape[:axis] + (n * step,) + t.shape[axis + 2:])
      t = t.shrink(tuple((0, size) if a == axis else None for a in range(t.ndim)))
    return t
