"""Linear algebra and neural-network functions: matmul, linear, losses."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tinygrad.dtype import dtypes, least_upper_dtype
from tinygrad.frontend.reduce import _sum_dtype

if TYPE_CHECKING:
  from tinygrad.tensor import Tensor


class FunctionalMixin:
  __slots__ = ()

  # ---- linear algebra
  def dot(self, w: Tensor) -> Tensor:
    if self.ndim == 0 or w.ndim == 0: raise ValueError(f"matmul needs at least 1 dim on both sides, got {self.shape} and {w.shape}")
    x, w_ = self, w
    k_x = x.shape[-1]
    k_w = w_.shape[-2] if w_.ndim > 1 else w_.shape[0]
    if k_x != k_w: raise ValueError(f"matmul shape mismatch: {self.shape} @ {w.shape} (inner sizes {k_x} and {k_w} differ)")
    dt = least_upper_dtype(x.dtype, w_.dtype)
    x, w_ = x.cast(dt), w_.cast(dt)
    n_mid = min(x.ndim - 1, w_.ndim - 1, 1)
    x = x.reshape(*x.shape[:-1], *([1] * n_mid), x.shape[-1])
    w_ = w_.reshape(*w_.shape[:-2], *([1] * n_mid), *w_.shape[-min(w_.ndim, 2):]).transpose(-1, -min(w_.ndim, 2))
    return (x * w_).sum(-1, dtype=_sum_dtype(dt)).cast(dt) if dtypes.is_float(dt) else (x * w_).sum(-1).cast(dt)
  def matmul(self, x: Tensor, reverse: bool = False) -> Tensor: return x.dot(self) if reverse else self.dot(x)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    out = self * weight if weight.ndim == 1 else self.dot(weight)
    return out + bias if bias is not None else out

  # ---- losses used by training loops
  def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0) -> Tensor:
    log_probs = self.log_softmax(-1)
    classes = self.shape[-1]
    y = Y.reshape(-1, 1)
    counter = type(self).arange(classes, dtype=dtypes.int32, device=self.device).reshape(1, classes)
    one_hot = counter.eq(y.cast(dtypes.int32))
    valid = y.ne(ignore_index)
    loss = -(log_probs.reshape(-1, classes) * one_hot).sum(-1, keepdim=True) * valid
    if label_smoothing: loss = (1 - label_smoothing) * loss - label_smoothing * log_probs.reshape(-1, classes).mean(-1, keepdim=True) * valid
    return loss.sum() / valid.sum()
  def cross_entropy(self, Y: Tensor, label_smoothing: float = 0.0) -> Tensor:
    return self.sparse_categorical_crossentropy(Y, label_smoothing=label_smoothing)
