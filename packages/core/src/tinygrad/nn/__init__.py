"""Neural-network layers with tinygrad's names, arguments and parameter initialisation.

A layer is a plain object whose Tensor attributes are its parameters (`weight`, `bias`, ...); calling it applies it."""
from __future__ import annotations

import math
from collections.abc import Sequence

from tinygrad.dtype import dtypes
from tinygrad.helpers import InvalidDTypeError, make_tuple, prod
from tinygrad.tensor import Tensor


# ---- initialisers (Tensor's own are used when it has them)
def _glorot_uniform(*shape: int, **kwargs) -> Tensor:
  if hasattr(Tensor, "glorot_uniform"): return Tensor.glorot_uniform(*shape, **kwargs)
  bound = math.sqrt(6.0 / (shape[0] + prod(shape[1:])))
  return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)


def _normal(*shape: int, mean: float = 0.0, std: float = 1.0, **kwargs) -> Tensor:
  if hasattr(Tensor, "normal"): return Tensor.normal(*shape, mean=mean, std=std, **kwargs)
  rg = kwargs.pop("requires_grad", None)
  return (Tensor.randn(*shape, **kwargs) * std + mean).requires_grad_(rg)


def _kaiming_normal(*shape: int, a: float = 0.01, **kwargs) -> Tensor:
  if hasattr(Tensor, "kaiming_normal"): return Tensor.kaiming_normal(*shape, a=a, **kwargs)
  std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
  return _normal(*shape, mean=0.0, std=std, **kwargs)


def _uniform(*shape: int, bound: float) -> Tensor: return Tensor.uniform(*shape, low=-bound, high=bound)


def _filled(*shape: int, value: float = 0.0, dtype=dtypes.float32, requires_grad: bool | None = None) -> Tensor:
  """A constant-filled tensor with a buffer of its own. (Two `Tensor.zeros(n).contiguous()` are one graph node, so
  they would share one buffer once realized.)"""
  return Tensor.empty(*shape, dtype=dtype, requires_grad=requires_grad).assign(Tensor.full(shape, value, dtype=dtype))


# ---- dense and convolutional layers
class Linear:
  """y = x @ weight.T + bias; weight (out_features, in_features), both uniform in +-1/sqrt(in_features) like torch."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    bound = 1 / math.sqrt(in_features)
    self.weight = _uniform(out_features, in_features, bound=bound)
    self.bias: Tensor | None = _uniform(out_features, bound=bound) if bias else None

  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight.transpose(), self.bias)


class Conv2d:
  """N-d convolution (the kernel's length sets N): weight (out, in/groups, *kernel), uniform in +-1/sqrt(fan_in)."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: int | tuple[int, ...] = 1,
               padding: int | tuple[int, ...] | str = 0, dilation: int | tuple[int, ...] = 1, groups: int = 1, bias: bool = True):
    # (torch's check; the weight would get a zero-sized dim: ConvTranspose2d(2, 1, 1, groups=2) gave 0 output channels)
    if groups < 1 or in_channels % groups or out_channels % groups:
      raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by groups ({groups})")
    self.kernel_size = make_tuple(kernel_size, 2)
    if isinstance(padding, str):
      if padding.lower() == "valid": padding = 0
      elif padding.lower() == "same":
        if any(s != 1 for s in make_tuple(stride, len(self.kernel_size))): raise ValueError("padding='same' needs stride 1")
        d_ = make_tuple(dilation, len(self.kernel_size))
        padding = tuple(p for d, k in zip(reversed(d_), reversed(self.kernel_size)) for p in (d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2))
      else: raise ValueError(f"padding string must be 'same' or 'valid', got {padding!r}")
    self.stride, self.dilation, self.groups, self.padding = stride, dilation, groups, padding
    bound = 1 / math.sqrt(in_channels * prod(self.kernel_size))
    self.weight = _uniform(out_channels, in_channels // groups, *self.kernel_size, bound=bound)
    self.bias: Tensor | None = _uniform(out_channels, bound=bound) if bias else None

  def __call__(self, x: Tensor) -> Tensor: return x.conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding)


def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int | str = 0, dilation: int = 1, groups: int = 1,
           bias: bool = True) -> Conv2d:
  return Conv2d(in_channels, out_channels, (kernel_size,), stride, padding, dilation, groups, bias)


def Conv3d(in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: int | tuple[int, ...] = 1,
           padding: int | tuple[int, ...] | str = 0, dilation: int | tuple[int, ...] = 1, groups: int = 1, bias: bool = True) -> Conv2d:
  return Conv2d(in_channels, out_channels, make_tuple(kernel_size, 3), stride, padding, dilation, groups, bias)


class ConvTranspose2d(Conv2d):
  """Transposed N-d convolution: weight (in, out/groups, *kernel)."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: int | tuple[int, ...] = 1,
               padding: int | tuple[int, ...] = 0, output_padding: int | tuple[int, ...] = 0, dilation: int | tuple[int, ...] = 1,
               groups: int = 1, bias: bool = True):
    super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
    bound = 1 / math.sqrt(in_channels * prod(self.kernel_size))
    self.weight = _uniform(in_channels, out_channels // groups, *self.kernel_size, bound=bound)
    self.output_padding = output_padding

  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding, self.output_padding)


def ConvTranspose1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, output_padding: int = 0,
                    dilation: int = 1, groups: int = 1, bias: bool = True) -> ConvTranspose2d:
  return ConvTranspose2d(in_channels, out_channels, (kernel_size,), stride, padding, output_padding, dilation, groups, bias)


# ---- normalization
class BatchNorm:
  """Batch normalization over all axes but 1 (channels). Training uses batch statistics and updates the running ones."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float = 0.1):
    self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
    self.weight: Tensor | None = _filled(sz, value=1.0) if affine else None
    self.bias: Tensor | None = _filled(sz) if affine else None
    # a 0-d int64, as torch's and tinygrad's, so their checkpoints load as they are
    self.num_batches_tracked = _filled(value=0, dtype=dtypes.int64, requires_grad=False)
    if track_running_stats:
      self.running_mean = _filled(sz, requires_grad=False)
      self.running_var = _filled(sz, value=1.0, requires_grad=False)

  def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
    """(mean, biased variance) per channel: the batch's in training, the running ones otherwise."""
    if self.track_running_stats and not Tensor.training: return self.running_mean, self.running_var
    # torch's check (tinygrad 0.14: ZeroDivisionError): the variance of one value is 0, and its unbiased running update 0/0
    if x.ndim >= 2 and x.numel() == x.shape[1]: raise ValueError(f"BatchNorm needs more than 1 value per channel for batch statistics, got {x.shape}")
    axes = tuple(a for a in range(x.ndim) if a != 1)
    mean = x.mean(axes)
    y = x - mean.detach().reshape(1, -1, *[1] * (x.ndim - 2))  # d(var)/d(mean) is 0
    return mean, (y * y).mean(axes)

  def __call__(self, x: Tensor) -> Tensor:
    mean, var = self.calc_stats(x)
    if self.track_running_stats and Tensor.training:
      n = x.numel() // x.shape[1]
      self.running_mean.assign((1 - self.momentum) * self.running_mean + self.momentum * mean.detach())
      self.running_var.assign((1 - self.momentum) * self.running_var + self.momentum * n / max(n - 1, 1) * var.detach())
      self.num_batches_tracked.assign(self.num_batches_tracked + 1)
    return x.batchnorm(self.weight, self.bias, mean, var.add(self.eps).rsqrt())


BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm


class LayerNorm:
  """Normalize over the trailing `normalized_shape` dims, then scale and shift elementwise."""
  def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True):
    self.normalized_shape: tuple[int, ...] = make_tuple(normalized_shape, 1)
    self.axis, self.eps, self.elementwise_affine = tuple(-1 - i for i in range(len(self.normalized_shape))), eps, elementwise_affine
    self.weight: Tensor | None = _filled(*self.normalized_shape, value=1.0) if elementwise_affine else None
    self.bias: Tensor | None = _filled(*self.normalized_shape) if elementwise_affine else None

  def __call__(self, x: Tensor) -> Tensor:
    if x.shape[-len(self.normalized_shape):] != self.normalized_shape:
      raise ValueError(f"LayerNorm{self.normalized_shape} got input of shape {x.shape}")
    x = x.layernorm(eps=self.eps, axis=self.axis)
    if self.weight is None or self.bias is None: return x
    return x * self.weight + self.bias


class LayerNorm2d(LayerNorm):
  """LayerNorm over the channels of (N, C, H, W)."""
  def __call__(self, x: Tensor) -> Tensor: return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class RMSNorm:
  """x / sqrt(mean(x^2) + eps) over the last dim, times a weight; computed in float32."""
  def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
    self.eps = eps
    self.weight: Tensor | None = _filled(dim, value=1.0) if elementwise_affine else None

  def _norm(self, x: Tensor) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()

  def __call__(self, x: Tensor) -> Tensor:
    x = self._norm(x.float()).cast(x.dtype)
    return x if self.weight is None else x * self.weight


class GroupNorm:
  """Normalize each group of channels of (N, C, *); per-channel affine."""
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight: Tensor | None = _filled(num_channels, value=1.0) if affine else None
    self.bias: Tensor | None = _filled(num_channels) if affine else None

  def __call__(self, x: Tensor) -> Tensor:
    x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
    if self.weight is None or self.bias is None: return x
    return x * self.weight.reshape(1, -1, *[1] * (x.ndim - 2)) + self.bias.reshape(1, -1, *[1] * (x.ndim - 2))


class InstanceNorm:
  """Normalize every channel of every sample of (N, C, *) on its own; per-channel affine."""
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight: Tensor | None = _filled(num_features, value=1.0) if affine else None
    self.bias: Tensor | None = _filled(num_features) if affine else None

  def __call__(self, x: Tensor) -> Tensor:
    x = x.reshape(x.shape[0], self.num_features, -1).layernorm(eps=self.eps).reshape(x.shape)
    if self.weight is None or self.bias is None: return x
    return x * self.weight.reshape(1, -1, *[1] * (x.ndim - 2)) + self.bias.reshape(1, -1, *[1] * (x.ndim - 2))


# ---- embeddings and recurrent cells
class Embedding:
  """A lookup table (vocab_size, embed_size), glorot-uniform; indices select rows (as a one-hot product, so it has a gradient)."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_sz, self.embed_sz = vocab_size, embed_size
    self.weight = _glorot_uniform(vocab_size, embed_size)

  def __call__(self, idx: Tensor) -> Tensor:
    # float or bool indices: tinygrad raises TypeError, torch RuntimeError
    if not dtypes.is_int(idx.dtype): raise InvalidDTypeError(f"Embedding needs integer indices, got {idx.dtype}")
    hot = Tensor.arange(self.vocab_sz, dtype=dtypes.int32, device=self.weight.device).eq(idx.cast(dtypes.int32).unsqueeze(-1))  # (*idx, vocab)
    # where, not a product: the kernel builder folds a masked sum with one equality into a direct load of the row
    # (schedule/indexing.py collapse_one_hot), and another row's inf or nan can't leak in as 0 * inf
    return hot.unsqueeze(-1).where(self.weight, 0).sum(-2, dtype=self.weight.dtype)


class LSTMCell:
  """One LSTM step: (x, (h, c)) -> (h', c'); gates in torch's i, f, g, o order."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    bound = 1.0 / math.sqrt(hidden_size)
    self.weight_ih = _uniform(hidden_size * 4, input_size, bound=bound)
    self.weight_hh = _uniform(hidden_size * 4, hidden_size, bound=bound)
    self.bias_ih: Tensor | None = _filled(hidden_size * 4) if bias else None
    self.bias_hh: Tensor | None = _filled(hidden_size * 4) if bias else None

  def __call__(self, x: Tensor, hc: Sequence[Tensor] | None = None) -> tuple[Tensor, Tensor]:
    hidden = self.weight_hh.shape[1]
    if hc is None: hc = (Tensor.zeros(x.shape[0], hidden, dtype=x.dtype, device=x.device),) * 2
    gates = x.linear(self.weight_ih.T, self.bias_ih) + hc[0].linear(self.weight_hh.T, self.bias_hh)
    i, f, g, o = (gates.shrink(((0, gates.shape[0]), (k * hidden, (k + 1) * hidden))) for k in range(4))
    new_c = f.sigmoid() * hc[1] + i.sigmoid() * g.tanh()
    new_h = o.sigmoid() * new_c.tanh()
    return new_h, new_c


from tinygrad.nn import optim  # noqa: E402,F401  (tinygrad.nn.optim, as in tinygrad)

try:
  from tinygrad.nn import state  # noqa: E402,F401
except ImportError:  # pragma: no cover - nn.state is built separately
  pass

__all__ = ["Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "BatchNorm", "BatchNorm1d", "BatchNorm2d",
           "BatchNorm3d", "LayerNorm", "LayerNorm2d", "RMSNorm", "GroupNorm", "InstanceNorm", "Embedding", "LSTMCell"]
