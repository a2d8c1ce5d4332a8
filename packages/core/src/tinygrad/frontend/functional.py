"""Linear algebra and neural-network functions: matmul, einsum, normalization, dropout, attention, losses.
(Convolution, pooling and interpolation live in conv.py, whose mixin this one extends.)"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Self, TypeVar

from tinygrad.dtype import DType, dtypes, least_upper_dtype, to_dtype
from tinygrad.frontend.movement import _diagonal
from tinygrad.frontend.reduce import ReduceMixin, _acc_dtype, _widen_int_operands
from tinygrad.helpers import InvalidArgumentError, InvalidDTypeError

TensorT = TypeVar("TensorT", bound="FunctionalMixin")  # a Tensor, in the helpers of the mixin

REDUCTIONS = ("mean", "sum", "none")


def _reduce(x: TensorT, reduction: str) -> TensorT:
  if reduction not in REDUCTIONS: raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
  return x.mean() if reduction == "mean" else x.sum() if reduction == "sum" else x


def _one_hot(y: TensorT, n: int, dim: int) -> TensorT:
  """Boolean one-hot of integer labels y along a new axis `dim` of size n."""
  # float or bool labels are a mistake (class probabilities have the logits' shape): tinygrad and torch raise RuntimeError
  if not dtypes.is_int(y.dtype): raise InvalidDTypeError(f"class labels must have an integer dtype, got {y.dtype}")
  y = y.unsqueeze(dim)
  shape = [1] * y.ndim
  shape[dim] = n
  return type(y).arange(n, dtype=dtypes.int32, device=y.device).reshape(shape).eq(y.cast(dtypes.int32))


def _smoothed(picked: TensorT, log_probs: TensorT, dim: int, eps: float) -> TensorT:
  """(1 - eps) * picked + eps * mean(log_probs): the mean only with smoothing (0 * -inf would be NaN)."""
  return picked if eps == 0 else (1 - eps) * picked + eps * log_probs.mean(dim)


def _logsigmoid(x: TensorT) -> TensorT:
  """log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|)), stable for large |x|."""
  return x.minimum(0) - (-x.abs()).exp().add(1).log()


def _tril_mask(r: int, c: int, like: TensorT) -> TensorT:
  """Boolean (r, c) causal mask on like's device: True on and below the diagonal."""
  arange = type(like).arange
  return arange(r, dtype=dtypes.int32, device=like.device).reshape(r, 1) >= arange(c, dtype=dtypes.int32, device=like.device).reshape(1, c)


def _repeat_heads(x: TensorT, n: int) -> TensorT:
  """repeat_interleave(n, dim=-3): every head n times in a row."""
  if n == 1: return x
  return x.unsqueeze(-3).expand(*x.shape[:-3], x.shape[-3], n, *x.shape[-2:]).reshape(*x.shape[:-3], x.shape[-3] * n, *x.shape[-2:])


class FunctionalMixin(ReduceMixin):
  __slots__ = ()

  # ---- linear algebra
  def dot(self, w: Self, dtype: DType | str | None = None) -> Self:
    if self.ndim == 0 or w.ndim == 0: raise InvalidArgumentError(f"matmul needs at least 1 dim on both sides, got {self.shape} and {w.shape}")
    x, w_ = self, w
    k_x = x.shape[-1]
    k_w = w_.shape[-2] if w_.ndim > 1 else w_.shape[0]
    if k_x != k_w: raise InvalidArgumentError(f"matmul shape mismatch: {self.shape} @ {w.shape} (inner sizes {k_x} and {k_w} differ)")
    dt = least_upper_dtype(x.dtype, w_.dtype)
    x, w_ = x.cast(dt), w_.cast(dt)
    n_mid = min(x.ndim - 1, w_.ndim - 1, 1)
    x = x.reshape(*x.shape[:-1], *([1] * n_mid), x.shape[-1])
    w_ = w_.reshape(*w_.shape[:-2], *([1] * n_mid), *w_.shape[-min(w_.ndim, 2):]).transpose(-1, -min(w_.ndim, 2))
    out_dt = to_dtype(dtype) if dtype is not None else dt
    acc = to_dtype(dtype) if dtype is not None else _acc_dtype(dt)
    # halves multiply and accumulate in float32 (like torch's CPU GEMM and tensor cores, which match CAST(load) operands),
    # then round once to the output dtype
    if dtypes.is_float(acc) and acc.itemsize > dt.itemsize: x, w_ = x.cast(acc), w_.cast(acc)
    elif dtype is not None: x, w_ = _widen_int_operands((x, w_), acc)  # int8 @ int8 with dtype=int32 doesn't wrap
    return (x * w_).sum(-1, dtype=acc).cast(out_dt)
  def matmul(self, x: Self, reverse: bool = False, dtype: DType | str | None = None) -> Self:
    return x.dot(self, dtype=dtype) if reverse else self.dot(x, dtype=dtype)
  def linear(self, weight: Self, bias: Self | None = None, dtype: DType | str | None = None) -> Self:
    """self @ weight + bias (self * weight for a 1-D weight). With `dtype` the product is computed in it and the bias is cast
    to it, so the result has that dtype (tinygrad's accumulation dtype)."""
    if dtype is None:
      out = self * weight if weight.ndim == 1 else self.dot(weight)
      return out + bias if bias is not None else out
    dt = to_dtype(dtype)
    out = self.cast(dt) * weight.cast(dt) if weight.ndim == 1 else self.dot(weight, dtype=dt)
    return out + bias.cast(dt) if bias is not None else out

  @staticmethod
  def einsum(formula: str, *operands: TensorT | Sequence[TensorT], dtype: DType | str | None = None) -> TensorT:
    """Einstein summation: 'ij,jk->ik', repeated indices ('ii->i' takes a diagonal), '...' broadcasting, implicit output."""
    xs: list[TensorT] = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)  # type: ignore[arg-type]
    formula = formula.replace(" ", "")
    lhs, rhs = formula.split("->") if "->" in formula else (formula, None)
    specs = lhs.split(",")
    if len(specs) != len(xs): raise InvalidArgumentError(f"einsum {formula!r} names {len(specs)} operands, got {len(xs)}")
    # '...' becomes private letters, right-aligned like broadcasting
    ell_n = max([x.ndim - (len(s) - 3) for s, x in zip(specs, xs) if "..." in s], default=0)
    ell = [chr(0x3b1 + i) for i in range(ell_n)]
    for n, (s, x) in enumerate(zip(specs, xs)):
      if "..." in s: specs[n] = s.replace("...", "".join(ell[ell_n - (x.ndim - (len(s) - 3)):]))
      if len(specs[n]) != x.ndim: raise InvalidArgumentError(f"einsum operand {n} has {x.ndim} dims but its spec {s!r} names {len(specs[n])}")
    letters = [c for s in specs for c in s]
    if rhs is None: rhs = "".join(ell) + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    else: rhs = rhs.replace("...", "".join(ell))
    if len(set(rhs)) != len(rhs) or any(c not in letters for c in rhs): raise InvalidArgumentError(f"bad einsum output spec in {formula!r}")
    # repeated letters inside one operand: take the diagonal
    for n in range(len(xs)):
      while len(set(specs[n])) != len(specs[n]):
        s = specs[n]
        c = next(c for c in s if s.count(c) > 1)
        a, b = s.index(c), s.index(c, s.index(c) + 1)
        if xs[n].shape[a] != xs[n].shape[b]: raise InvalidArgumentError(f"einsum: repeated index {c!r} has sizes {xs[n].shape[a]} and {xs[n].shape[b]}")
        xs[n], specs[n] = _diagonal(xs[n], a, b), s[:b] + s[b + 1:]
    sizes: dict[str, int] = {}
    for s, x in zip(specs, xs):
      for c, d in zip(s, x.shape):
        if c in sizes and sizes[c] not in (1, d) and d != 1: raise InvalidArgumentError(f"einsum: index {c!r} has sizes {sizes[c]} and {d}")
        if d != 1 or c not in sizes: sizes[c] = d
    order = list(rhs) + sorted(set(letters) - set(rhs))
    aligned = []
    for s, x in zip(specs, xs):
      present = [c for c in order if c in s]
      x = x.permute([s.index(c) for c in present]) if present else x
      aligned.append(x.reshape([x.shape[present.index(c)] if c in s else 1 for c in order]).expand([sizes[c] for c in order]))
    red = tuple(range(len(rhs), len(order)))
    out_dt: DType | None = None
    want = to_dtype(dtype) if dtype is not None else None
    # int operands of a sum, or of any dtype=, in the wider dtype first (numpy casts the operands to dtype= first): uint8 products
    # wrapped before a cast to float32
    if red or want is not None: aligned = _widen_int_operands(aligned, want)
    work = dt = least_upper_dtype(*(x.dtype for x in aligned))
    # as matmul: halves (or a wider float dtype=) multiply and accumulate in the wider float, one rounding at the end (torch,
    # numpy's dtype=): products rounded to half first lose digits
    acc = want or (_acc_dtype(dt) if red else dt)
    if dtypes.is_float(acc) and acc.itemsize > dt.itemsize: work, out_dt = acc, want or dt
    # every operand in the common dtype before any product (numpy casts them all first): of half, half and float32 operands
    # the first product was rounded to half
    aligned = [x if x.dtype == work else x.cast(work) for x in aligned]
    prod_ = aligned[0]
    for x in aligned[1:]: prod_ = prod_ * x
    if out_dt is not None: return (prod_.sum(red) if red else prod_).cast(out_dt)
    return prod_.sum(red, dtype=dtype) if red else prod_.cast(to_dtype(dtype)) if dtype is not None else prod_

  # ---- normalization
  def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Self:
    """x / max(||x||_p along dim, eps) (torch.nn.functional.normalize, tinygrad's Tensor.normalize). Halves compute in
    float32: a float16 square over- or underflows (60000 ** 2, 1e-6 ** 2) and eps is 0 in float16."""
    x, out = self._work()
    a = x.abs()
    if p == 0: norm = (a != 0).cast(a.dtype).sum(dim, keepdim=True)  # the "0-norm" counts the nonzero entries (torch's vector_norm)
    elif p == 2: norm = a.square().sum(dim, keepdim=True).sqrt()
    elif p == math.inf: norm = a.max(dim, keepdim=True)
    elif p == -math.inf: norm = a.min(dim, keepdim=True)
    else: norm = (a ** p).sum(dim, keepdim=True) ** (1 / p)
    return (x / norm.maximum(eps)).cast(out)

  def layernorm(self, axis: int | Sequence[int] = -1, eps: float = 1e-5) -> Self:
    y = self - self.mean(axis, keepdim=True)
    return y * (y * y).mean(axis, keepdim=True).add(eps).rsqrt()
  def rms_norm(self, axis: int | Sequence[int] = -1, eps: float = 1e-6) -> Self:
    return self * self.square().mean(axis, keepdim=True).add(eps).rsqrt()
  def rmsnorm(self, axis: int | Sequence[int] = -1, eps: float = 1e-6) -> Self: return self.rms_norm(axis, eps)
  def batchnorm(self, weight: Self | None, bias: Self | None, mean: Self, invstd: Self, axis: int | Sequence[int] = 1) -> Self:
    """(x - mean) * weight * invstd + bias, with the 1-d statistics broadcast along `axis`."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % self.ndim for a in axes)
    shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
    x = self - mean.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    out = x * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
    return out + bias.reshape(shape) if bias is not None else out

  # ---- regularization
  def dropout(self, p: float = 0.5) -> Self:
    """Zero each element with probability p and scale the rest by 1/(1-p); only when Tensor.training."""
    if not 0 <= p <= 1: raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not type(self).training or p == 0: return self
    if p == 1: return self.zeros_like()
    keep = type(self).rand(*self.shape, device=self.device) >= p
    return keep.where(self, 0) * (1.0 / (1.0 - p))

  # ---- attention
  def scaled_dot_product_attention(self, key: Self, value: Self, attn_mask: Self | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, enable_gqa: bool = False) -> Self:
    """softmax(q @ k^T / sqrt(d) + mask) @ v over (..., heads, seq, dim) tensors; bool masks keep where True."""
    if enable_gqa:
      key = _repeat_heads(key, self.shape[-3] // key.shape[-3])
      value = _repeat_heads(value, self.shape[-3] // value.shape[-3])
    qk = self.matmul(key.transpose(-2, -1), dtype=least_upper_dtype(self.dtype, key.dtype, dtypes.float32)) * (1 / math.sqrt(self.shape[-1]))
    if is_causal:
      if attn_mask is not None: raise InvalidArgumentError("attn_mask and is_causal=True can't both be set")
      attn_mask = _tril_mask(qk.shape[-2], qk.shape[-1], self)
    # float inputs: the softmax runs on the float32 scores and its weights take the inputs' dtype after (torch): float16 scores
    # past 65,504 would be inf, and a row's inf - inf NaN
    def softmax(scores: Self) -> Self:
      return scores.softmax(-1).cast(self.dtype) if dtypes.is_float(self.dtype) else scores.cast(self.dtype).softmax(-1)
    if attn_mask is None: return softmax(qk).dropout(dropout_p) @ value
    qk = qk + (attn_mask.where(0.0, -math.inf) if attn_mask.dtype == dtypes.bool else attn_mask)
    # a row masked everywhere attends to nothing: weights 0, not NaN (torch's safe softmax, since 2.5); its softmax runs on
    # zeros, so that no NaN reaches the gradient either
    dead = qk._amax(-1, True).eq(-math.inf)
    weights = dead.where(0.0, softmax(dead.where(0.0, qk)))
    return weights.dropout(dropout_p) @ value

  # ---- losses
  def binary_crossentropy(self, Y: Self, reduction: str = "mean") -> Self:
    """self holds probabilities; logs are clamped at -100 like torch, and the gradient is torch's
    (self - Y) / max(self * (1 - self), 1e-12): at 0 and 1 the clamped logs' own is 0 * inf = NaN."""
    x = self.detach()
    loss = -(Y * x.log().maximum(-100.0) + (1 - Y) * (1 - x).log().maximum(-100.0))
    xf = x.cast(dtypes.float32) if x.dtype.itemsize < 4 else x  # 1e-12 is 0 in float16
    slope = (xf - Y) / (xf * (1 - xf)).maximum(1e-12)
    # the value is loss; the gradient of self - x (0 in value) carries the slope
    return _reduce(loss + ((self - x).cast(slope.dtype) * slope.detach()).cast(loss.dtype), reduction)
  def binary_crossentropy_logits(self, Y: Self, reduction: str = "mean", pos_weight: Self | None = None) -> Self:
    log_p, log_1mp = _logsigmoid(self), _logsigmoid(-self)
    return _reduce(-((Y if pos_weight is None else pos_weight * Y) * log_p + (1 - Y) * log_1mp), reduction)

  def sparse_categorical_crossentropy(self, Y: Self, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean") -> Self:
    """Cross entropy of logits (..., classes) against integer labels (...); labels equal to ignore_index count for
    nothing (ignore_index=-1 means none are ignored, as in tinygrad)."""
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if reduction not in REDUCTIONS: raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    log_probs = self.log_softmax(-1)
    mask = Y.ne(ignore_index) if ignore_index != -1 else Y.ones_like(dtype=dtypes.bool)
    # picked and masked with where(), not by multiplying with 0/1: a -inf log-probability of another class (or in an ignored
    # row) must not make 0 * -inf = NaN (torch picks)
    picked = _one_hot(Y, self.shape[-1], -1).where(log_probs, 0).sum(-1)
    per = mask.where(-_smoothed(picked, log_probs, -1, label_smoothing), 0)
    return per.sum() / mask.sum() if reduction == "mean" else per.sum() if reduction == "sum" else per

  def cross_entropy(self, Y: Self, reduction: str = "mean", label_smoothing: float = 0.0, ignore_index: int = -100) -> Self:
    """torch's cross_entropy: logits with classes at dim 1 (dim 0 for 1-d), targets as class indices or probabilities."""
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if reduction not in REDUCTIONS: raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    cdim = 0 if self.ndim == 1 else 1
    n = self.shape[cdim]
    log_probs = self.log_softmax(cdim)
    if self.shape == Y.shape:  # class probabilities
      return _reduce(-(log_probs * ((1 - label_smoothing) * Y + label_smoothing / n)).sum(cdim), reduction)
    mask = Y.ne(ignore_index)
    picked = _one_hot(Y, n, cdim).where(log_probs, 0).sum(cdim)  # where(), not * 0/1: see sparse_categorical_crossentropy
    per = mask.where(-_smoothed(picked, log_probs, cdim, label_smoothing), 0)
    return per.sum() / mask.sum() if reduction == "mean" else per.sum() if reduction == "sum" else per

  def nll_loss(self, Y: Self, weight: Self | None = None, ignore_index: int | None = None, reduction: str = "mean") -> Self:
    """Negative log likelihood of log-probabilities (N, C, ...) against class indices (N, ...)."""
    if reduction not in REDUCTIONS: raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    cdim = 0 if self.ndim == 1 else 1
    hot = _one_hot(Y, self.shape[cdim], cdim if self.ndim > 1 else 0)
    if ignore_index is not None: hot = hot & Y.ne(ignore_index).unsqueeze(cdim)
    w = hot.cast(self.dtype) if weight is None else hot.where(weight.reshape(-1, *[1] * (self.ndim - cdim - 1)), 0.0)
    nll = -hot.where(self * w, 0).sum(cdim)  # picked with where(): another class's -inf doesn't make 0 * -inf = NaN (torch)
    if reduction == "mean" and weight is None and ignore_index is None: return nll.mean()  # an out-of-range label counts as 0 (tinygrad)
    return nll.sum() / w.sum() if reduction == "mean" else _reduce(nll, reduction)
