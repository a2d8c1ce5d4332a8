"""Sliding-window ops: pooling, convolution, transposed convolution and interpolation.

Everything here is movement views (pad, a strided window view made of reshape/expand/shrink/permute) followed by
elementwise and reduce ops, so a convolution is one fused kernel and autograd comes from the ops' own rules, except a
stride-1 conv2d's input gradient: a transposed convolution (gradient.GRAD_OVERRIDES, _input_gradient), not the adjoint of
the windows."""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, Self, TypeVar

from tinygrad.dtype import DType, dtypes, to_dtype
from tinygrad.frontend.reduce import ReduceMixin, _widen_int_operands
from tinygrad.gradient import GRAD_OVERRIDES
from tinygrad.helpers import ContextVar, InvalidArgumentError, flatten, getenv, make_tuple, prod
from tinygrad.uop.ops import Ops, UOp

TensorT = TypeVar("TensorT", bound="ConvMixin")  # a Tensor, in the helpers of the mixin

Pairs = list[tuple[int, int]]
CONV_INPUT_GRAD = ContextVar("CONV_INPUT_GRAD", 1)  # 0: a conv2d's input gradient through the windows' adjoint (autograd's rules)


def _pad_pairs(padding: int | Sequence[int], nd: int) -> Pairs:
  """tinygrad padding forms -> one (before, after) pair per spatial dim, first dim first.
  An int pads every side; `nd` ints pad both sides of each dim; `2*nd` ints are torch-style flat pairs from the last dim."""
  if isinstance(padding, int): return [(padding, padding)] * nd
  p = [int(x) for x in padding]
  if len(p) == nd: return [(x, x) for x in p]
  if len(p) == 2 * nd: return [(p[2 * i], p[2 * i + 1]) for i in reversed(range(nd))]
  raise InvalidArgumentError(f"padding must be an int, {nd} ints or {2 * nd} ints for {nd} spatial dims, got {tuple(p)}")


def _conv_pad_pairs(padding: int | Sequence[int] | str, k_: Sequence[int], s_: Sequence[int], d_: Sequence[int]) -> Pairs:
  if not isinstance(padding, str): return _pad_pairs(padding, len(k_))
  if padding.lower() == "valid": return [(0, 0)] * len(k_)
  if padding.lower() != "same": raise ValueError(f"padding string must be 'same' or 'valid', got {padding!r}")
  if any(s != 1 for s in s_): raise ValueError("padding='same' needs stride 1")
  return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(k_, d_)]


def _pad_spatial(x: TensorT, pairs: Pairs, value: float = 0.0) -> TensorT:
  return x.pad(((0, 0),) * (x.ndim - len(pairs)) + tuple(pairs), value=value) if any(p != (0, 0) for p in pairs) else x


def _ceil_div_pos(a: Any, i: Any, at_most_one: bool) -> Any:
  """max(0, ceil(a / i)) for an input length i > 0. A symbolic i (a bound Variable's size) gives symbolic quotients that the
  shape can't branch on; where the answer is known from the bounds (0 < a <= i: 1; a <= 0: 0) it is a plain int."""
  if isinstance(a, int) and isinstance(i, int): return max(0, -(-a // i))
  lo, hi = (a, a) if isinstance(a, int) else (a.vmin, a.vmax)
  if hi <= 0: return 0
  if lo > 0 and (at_most_one or (hi <= (i if isinstance(i, int) else i.vmin))): return 1
  return max(0, -(-a // i))


def _windows(x: TensorT, k_: Sequence[int], s_: Sequence[int], d_: Sequence[int]) -> TensorT:
  """(..., *i) -> (..., *o, *k): the sliding windows over the last len(k_) dims, as a view.

  Windows that overlap (k > s) or are dilated come from repeating the input: a row of the repeated data of length
  L = i*f + d starts d elements later in x than the row before, so reshaping it into (k, L) rows lines window
  offset j up with row j; stride is then a reshape (o, s) keeping index 0."""
  nd = len(k_)
  lead, i_ = x.shape[:-nd], x.shape[-nd:]
  for i, k, d in zip(i_, k_, d_):
    if d * (k - 1) + 1 > i: raise InvalidArgumentError(f"kernel {tuple(k_)} (dilation {tuple(d_)}) is larger than the input {tuple(i_)}")
  o_ = [(i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(i_, k_, s_, d_)]
  keep = [None] * len(lead)
  if all(k <= s for k, s in zip(k_, s_)) and all(d == 1 for d in d_):
    # disjoint windows: cut to o*s, reshape (o, s), keep the first k of every s
    x = x.pad(keep + [(0, max(0, o * s - i)) for i, o, s in zip(i_, o_, s_)])
    x = x.shrink(keep + [(0, o * s) for o, s in zip(o_, s_)])
    x = x.reshape(*lead, *flatten((o, s) for o, s in zip(o_, s_)))
    x = x.shrink(keep + flatten(((0, o), (0, k)) for o, k in zip(o_, k_)))
    return x.permute(*range(len(lead)), *[len(lead) + 2 * j for j in range(nd)], *[len(lead) + 2 * j + 1 for j in range(nd)])
  # f = max(0, ceil((o*s - d) / i)) rows of i per repeat (o*s - d <= i when s <= d*k + 1: f is 0 or 1)
  f_ = [_ceil_div_pos(o * s - d, i, d * k + 1 >= s) for i, o, s, d, k in zip(i_, o_, s_, d_, k_)]
  L_ = [i * f + d for i, f, d in zip(i_, f_, d_)]
  r_ = [k * f + _ceil_div_pos(k * d, i, False) for k, f, i, d in zip(k_, f_, i_, d_)]  # ceil(k * L / i)
  x = x.reshape(*lead, *flatten((1, i) for i in i_)).expand(*lead, *flatten((r, i) for r, i in zip(r_, i_)))
  x = x.reshape(*lead, *[r * i for r, i in zip(r_, i_)])
  x = x.shrink(keep + [(0, k * L) for k, L in zip(k_, L_)]).reshape(*lead, *flatten((k, L) for k, L in zip(k_, L_)))
  x = x.shrink(keep + flatten(((0, k), (0, o * s)) for k, o, s in zip(k_, o_, s_)))
  x = x.reshape(*lead, *flatten((k, o, s) for k, o, s in zip(k_, o_, s_)))
  x = x.shrink(keep + flatten(((0, k), (0, o), (0, 1)) for k, o in zip(k_, o_))).reshape(*lead, *flatten((k, o) for k, o in zip(k_, o_)))
  return x.permute(*range(len(lead)), *[len(lead) + 2 * j + 1 for j in range(nd)], *[len(lead) + 2 * j for j in range(nd)])


def _ceil_pairs(i_: Sequence[int], pairs: Pairs, k_: Sequence[int], s_: Sequence[int], d_: Sequence[int]) -> Pairs:
  """Extra right padding so the last, partial window is kept (ceil_mode), unless it would start in the right padding."""
  out = []
  for i, (pb, pa), k, s, d in zip(i_, pairs, k_, s_, d_):
    span, ke = i + pb + pa, d * (k - 1) + 1
    o = -(-(span - ke) // s) + 1
    if (o - 1) * s >= i + pb: o -= 1
    out.append((pb, pa + (o - 1) * s + ke - span))  # negative (less padding) when the last window would start in it
  return out


def _interp_matrix(n_in: int, n_out: int, mode: str, align_corners: bool, like: TensorT) -> TensorT:
  """(n_out, n_in) weights on like's device: row j mixes the inputs that output j samples."""
  device = like.device
  dst = type(like).arange(n_out, dtype=dtypes.float32, device=device)
  src_i = type(like).arange(n_in, dtype=dtypes.int32, device=device).reshape(1, n_in)
  if mode == "linear":
    if align_corners: pos = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else: pos = ((dst + 0.5) * (n_in / n_out) - 0.5).maximum(0.0).minimum(float(n_in - 1))
    lo = pos.floor()
    frac = (pos - lo).reshape(n_out, 1)
    lo_i = lo.cast(dtypes.int32).reshape(n_out, 1)
    hi_i = (lo_i + 1).minimum(n_in - 1)
    return src_i.eq(lo_i).where(1.0 - frac, 0.0) + src_i.eq(hi_i).where(frac, 0.0)
  shift = 0.5 if mode == "nearest-exact" else 0.0
  idx = ((dst + shift) * (n_in / n_out)).floor().cast(dtypes.int32).minimum(n_in - 1).reshape(n_out, 1)
  return src_i.eq(idx).cast(dtypes.float32)


def _max_linear_weight(n_in: int, n_out: int, align_corners: bool) -> float:
  """The largest weight of the linear interpolation matrix (computed on the host: it sets the fixed-point precision)."""
  best = 0.0
  for j in range(n_out):
    pos = j * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0) if align_corners else min(max((j + 0.5) * (n_in / n_out) - 0.5, 0.0), n_in - 1)
    frac = pos - math.floor(pos)
    best = max(best, frac if math.floor(pos) + 1 <= n_in - 1 else 1.0, 1.0 - frac)
  return best


def _weight_precision(max_weight: float) -> int:
  p = 0
  while p < 15 and int(0.5 + max_weight * (1 << (p + 1))) < (1 << 15): p += 1
  return p


def _input_gradient(x: TensorT, weight: TensorT, groups: int, s_: Sequence[int], d_: Sequence[int], pairs: Pairs,
                    out_shape: tuple[int, ...]) -> Callable[[UOp], tuple[set[int], dict[UOp, UOp]] | None]:
  """conv2d's input gradient for gradient.GRAD_OVERRIDES: given the gradient of the products (the output's, expanded over the
  input channels and taps), the transposed convolution of the output's gradient with the weight, as convolutions: the
  output's gradient, padded by the taps' reach, with the weight flipped and its in/out channels swapped in each group. At
  stride s, one such convolution per phase (the input positions s*q + r take the taps r, r + s, ...), interleaved. Then cut
  to the input (its padding dropped). The windows' own adjoint is a buffer of the input times the taps (9x for 3x3) and a
  masked sum of 16 taps over it (ResNet's 3x3 64x56 layer, batch 8: 9 GFLOP/s against torch's 320)."""
  nd, k_ = len(d_), weight.shape[2:]
  # the graph's nodes as they are now: a realize or an assign between this forward and the backward rebinds the Tensors to
  # other nodes, and the gradient must go to the one in this graph
  x_node, weight = x.uop, type(weight)(weight.uop, requires_grad=False)
  def given(g: UOp) -> tuple[set[int], dict[UOp, UOp]] | None:
    if g.op is not Ops.EXPAND: return None  # not the sum's plain broadcast (another use of the products): the rules decide
    go = type(x)(g.src[0], requires_grad=False).reshape(*out_shape)
    cout, cin = weight.shape[:2]
    w = weight.reshape(groups, cout // groups, cin, *k_).transpose(1, 2).reshape(groups * cin, cout // groups, *k_).flip(*range(2, 2 + nd))
    sp, lp = x.shape[2:], [pb + i + pa for (pb, pa), i in zip(pairs, x.shape[2:])]
    if all(s == 1 for s in s_):  # one phase: the padding is cut by padding the gradient less
      reach = [d * (k - 1) for k, d in zip(k_, d_)]
      dx = go.conv2d(w, groups=groups, dilation=d_, padding=flatten(reversed([(r - pb, r - pa) for r, (pb, pa) in zip(reach, pairs)])))
    else:
      q_ = [-(-n // s) for n, s in zip(lp, s_)]  # positions per phase
      # the gradient padded once by the most taps a phase has, less one: each phase reads its own padding out of it (one copy of
      # the padded gradient on a CPU, not one per phase: ResNet's 3x3 stride-2 128x28 layer, batch 8, dx 5.7 -> 4.9 ms of kernels)
      reach = [-(-k // s) - 1 for k, s in zip(k_, s_)]
      padded = go.pad(((0, 0), (0, 0), *[(r, r) for r in reach]))
      phases = []
      for r_ in itertools.product(*[range(s) for s in s_]):
        # the flipped kernel's taps for phase r: the original taps r, r + s, ... (flip: counted from the end)
        wr = w.shrink(((0, w.shape[0]), (0, w.shape[1]), *[(k - 1 - r - s * ((k - 1 - r) // s), k - r) for k, r, s in zip(k_, r_, s_)]))
        wr = wr[(slice(None), slice(None), *[slice(None, None, s) for s in s_])]  # a view: conv_lanes reads it through the slice
        kr = wr.shape[2:]
        # length o + kr - 1; a buffer of its own, else the interleave fuses all the phases' sums, each masked, into one kernel
        gr = padded.shrink(((0, go.shape[0]), (0, go.shape[1]), *[(r - k + 1, n + r + k - 1) for r, k, n in zip(reach, kr, go.shape[2:])]))
        full = gr.conv2d(wr, groups=groups).contiguous()
        phases.append(full.pad(((0, 0), (0, 0), *[(0, max(q - f, 0)) for q, f in zip(q_, full.shape[2:])]))
                      .shrink(((0, full.shape[0]), (0, full.shape[1]), *[(0, q) for q in q_])))
      st = phases[0].stack(*phases[1:], dim=2).reshape(go.shape[0], cin * groups, *s_, *q_)
      perm = (0, 1, *flatten((2 + nd + a, 2 + a) for a in range(nd)))
      dx = st.permute(*perm).reshape(go.shape[0], cin * groups, *[q * s for q, s in zip(q_, s_)])
      dx = dx.shrink(((0, dx.shape[0]), (0, dx.shape[1]), *[(pb, pb + i) for (pb, _), i in zip(pairs, sp)]))
    return {0}, {x_node: (dx.cast(x.dtype) if dx.dtype != x.dtype else dx).uop}
  return given



# a strided transposed convolution with at least this many multiply-adds (counted over its zero-inserted input) runs as one
# stride-1 convolution per output phase (below: fewer, bigger kernels aren't worth the launches)
PHASES_MIN_WORK = getenv("CONVT_PHASES_MIN_WORK", 1 << 20)


def _phases_pay(xs: Sequence[int], ws: Sequence[int], s_: Sequence[int]) -> bool:
  return all(isinstance(v, int) for v in (*xs, *ws)) and prod(xs) * prod(s_) * prod(ws[1:]) >= PHASES_MIN_WORK


def _conv_transpose_phases(x: Any, weight: Any, bias: Any, groups: int, s_: Sequence[int], pads: Pairs, op_: Sequence[int]) -> Any:
  """conv_transpose with stride s (dilation 1) as s**nd stride-1 convolutions, one per output phase r (the outputs o with
  o % s == r), interleaved. Output o = i*s + k - pb takes the taps k = (r + pb) % s + s*j, so phase r is a convolution of x
  with those taps, flipped: no multiply-adds by the zeros that the zero-inserted form puts between the inputs (3 in 4 at
  stride 2), and no per-tap gate. Measured under TinyJit (2 loaded cores), stride 2, padding 1, 4x4 taps, zero-inserted ->
  phases: (16, 16, 8, 8) -> 1 channel 0.99 -> 0.14 ms, (16, 32, 8, 8) -> 16 channels 2.85 -> 0.20 ms, (8, 64, 16, 16) -> 32
  channels 48 -> 0.70 ms (the zero-inserted conv was one scalar kernel gated per tap)."""
  nd, cin, rcout, k_ = len(s_), weight.shape[0], weight.shape[1], weight.shape[2:]
  w = weight.reshape(groups, cin // groups, rcout, *k_).transpose(1, 2).reshape(groups * rcout, cin // groups, *k_)
  outs = [(i - 1) * s - pb - pa + k + op for i, s, (pb, pa), k, op in zip(x.shape[2:], s_, pads, k_, op_)]
  qmax = [-(-o // s) for o, s in zip(outs, s_)]
  phases = []
  for r in itertools.product(*[range(s) for s in s_]):
    c = [(ri + pb) % s for ri, (pb, _), s in zip(r, pads, s_)]
    taps = [len(range(ci, k, s)) for ci, k, s in zip(c, k_, s_)]
    q = [-(-(o - ri) // s) for o, ri, s in zip(outs, r, s_)]  # outputs of this phase along each dim
    if min(taps) == 0 or min(q) <= 0:  # no tap lands here (or no output): only the bias
      y = type(x).zeros(x.shape[0], groups * rcout, *[max(qi, 0) for qi in q], dtype=x.dtype, device=x.device)
    else:
      sub = w.shrink(((0, w.shape[0]), (0, w.shape[1]), *[(ci, k) for ci, k in zip(c, k_)]))
      if any(s > 1 for s in s_): sub = sub[(slice(None), slice(None), *[slice(None, None, s) for s in s_])]
      sub = sub.flip(*range(2, 2 + nd)).contiguous()  # (small) read by every output: its slicing's index math computed once
      t_ = [(ri + pb - ci) // s for ri, (pb, _), ci, s in zip(r, pads, c, s_)]
      lo = [j - 1 - t for j, t in zip(taps, t_)]
      hi = [qi - i - left + j - 1 for qi, i, left, j in zip(q, x.shape[2:], lo, taps)]
      xp = x.pad(((0, 0), (0, 0), *[(max(a, 0), max(b, 0)) for a, b in zip(lo, hi)]))
      xp = xp.shrink(((0, xp.shape[0]), (0, xp.shape[1]), *[(max(-a, 0), n - max(-b, 0)) for a, b, n in zip(lo, hi, xp.shape[2:])]))
      y = xp.conv2d(sub, None, groups)  # a kernel each: padded into the interleave, it gets a buffer (kernelize.PAD_REALIZES)
    phases.append(y.pad(((0, 0), (0, 0), *[(0, m - n) for m, n in zip(qmax, y.shape[2:])])).cast(x.dtype))
  # (phases in row-major order of r) -> (bs, c, q0, s0, q1, s1, ...) -> (bs, c, q0*s0, ...), cut to the output size
  st = phases[0].stack(*phases[1:], dim=2).reshape(x.shape[0], groups * rcout, *s_, *qmax)
  st = st.permute(0, 1, *flatten((2 + nd + i, 2 + i) for i in range(nd))).reshape(x.shape[0], groups * rcout, *[m * s for m, s in zip(qmax, s_)])
  out = st.shrink(((0, st.shape[0]), (0, st.shape[1]), *[(0, o) for o in outs]))
  return out if bias is None else out + bias.reshape(1, -1, *[1] * nd)

class ConvMixin(ReduceMixin):
  __slots__ = ()

  def _pool(self, k_: Sequence[int], stride: int | Sequence[int] = 1, dilation: int | Sequence[int] = 1) -> Self:
    """The sliding windows of size k_ over the last len(k_) dims: (..., *i) -> (..., *o, *k_)."""
    return _windows(self, tuple(k_), make_tuple(stride, len(k_)), make_tuple(dilation, len(k_)))

  # ---- pooling
  def avg_pool2d(self, kernel_size: int | Sequence[int] = (2, 2), stride: int | Sequence[int] | None = None, dilation: int | Sequence[int] = 1,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> Self:
    k_ = make_tuple(kernel_size, 2)
    s_, d_ = make_tuple(stride if stride is not None else k_, len(k_)), make_tuple(dilation, len(k_))
    axes = tuple(range(-len(k_), 0))
    pairs = _pad_pairs(padding, len(k_))
    full = _ceil_pairs(self.shape[-len(k_):], pairs, k_, s_, d_) if ceil_mode else pairs
    total = _windows(_pad_spatial(self, full), k_, s_, d_).sum(axes)
    if count_include_pad and not ceil_mode: return total / prod(k_)
    # divisor: the window positions that are input (or explicit padding, with count_include_pad)
    ones = self.ones_like() if not count_include_pad else _pad_spatial(self.ones_like(), pairs, 1.0)
    extra = full if not count_include_pad else [(0, a - pa) for (_, a), (_, pa) in zip(full, pairs)]
    return total / _windows(_pad_spatial(ones, extra), k_, s_, d_).sum(axes)

  def max_pool2d(self, kernel_size: int | Sequence[int] = (2, 2), stride: int | Sequence[int] | None = None, dilation: int | Sequence[int] = 1,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, return_indices: bool = False) -> Self | tuple[Self, Self]:
    k_ = make_tuple(kernel_size, 2)
    s_, d_ = make_tuple(stride if stride is not None else k_, len(k_)), make_tuple(dilation, len(k_))
    axes = tuple(range(-len(k_), 0))
    pairs = _pad_pairs(padding, len(k_))
    if ceil_mode: pairs = _ceil_pairs(self.shape[-len(k_):], pairs, k_, s_, d_)
    win = _windows(_pad_spatial(self, pairs, dtypes.min(self.dtype)), k_, s_, d_)
    out = win.max(axes)
    if not return_indices: return out
    # flat index (into the spatial dims) of the first maximum of each window
    sp = self.shape[-len(k_):]
    n = prod(sp)
    rev = type(self).arange(n, 0, -1, dtype=dtypes.int32, device=self.device).reshape(sp)
    rev_win = _windows(_pad_spatial(rev, pairs), k_, s_, d_)
    hit = win.eq(out.reshape(*out.shape, *[1] * len(k_)))
    return out, (n - (hit.where(rev_win, 0)).max(axes)).cast(dtypes.int32)

  def max_unpool2d(self, indices: Self, kernel_size: int | Sequence[int] = (2, 2), stride: int | Sequence[int] | None = None,
                   dilation: int | Sequence[int] = 1, padding: int | Sequence[int] = 0, output_size: Sequence[int] | None = None) -> Self:
    """Inverse of max_pool2d(return_indices=True): each value goes to its flat spatial index (output_size or the size the
    pooling came from), the rest is zero."""
    bs, c, *sp = self.shape
    if output_size is None:
      k_ = make_tuple(kernel_size, len(sp))
      s_, d_ = make_tuple(stride if stride is not None else k_, len(sp)), make_tuple(dilation, len(sp))
      output_size = [(i - 1) * s - (pb + pa) + d * (k - 1) + 1 for i, k, s, d, (pb, pa) in zip(sp, k_, s_, d_, _pad_pairs(padding, len(sp)))]
    out_sp = tuple(output_size)[-len(sp):]
    n = prod(out_sp)
    hot = type(self).arange(n, dtype=dtypes.int32, device=self.device).reshape(1, 1, 1, n).eq(indices.cast(dtypes.int32).reshape(bs, c, -1, 1))
    total = hot.where(self.reshape(bs, c, -1, 1), 0).sum(2)
    # overlapping windows can send one input to a position several times: keep the value once (like torch), while every
    # copy still gets the position's whole gradient
    hits = hot.sum(2).maximum(1).cast(total.dtype)
    # (only there: where a value came once the detached term would be inf - inf = NaN for an infinite value)
    return (hits > 1).where(total - (total - total / hits).detach(), total).reshape(bs, c, *out_sp)

  # ---- convolution
  def conv2d(self, weight: Self, bias: Self | None = None, groups: int = 1, stride: int | Sequence[int] = 1, dilation: int | Sequence[int] = 1,
             padding: int | Sequence[int] | str = 0, dtype: DType | None = None) -> Self:
    """N-d convolution (cross-correlation like torch): input (bs, groups*cin, *spatial), weight (cout, cin, *kernel)."""
    if self.ndim != weight.ndim or self.ndim < 3:
      raise InvalidArgumentError(f"conv needs input (bs, cin, *spatial) and weight (cout, cin, *kernel) of one rank, got {self.shape} and {weight.shape}")
    (bs, cin_), (cout, cin), k_ = self.shape[:2], weight.shape[:2], weight.shape[2:]
    if groups * cin != cin_: raise InvalidArgumentError(f"input has {cin_} channels but weight {weight.shape} with groups={groups} needs {groups * cin}")
    if cout % groups: raise InvalidArgumentError(f"out channels {cout} must divide into groups={groups}")
    nd = len(k_)
    s_, d_ = make_tuple(stride, nd), make_tuple(dilation, nd)
    pairs = _conv_pad_pairs(padding, k_, s_, d_)
    src, weight = _widen_int_operands((self, weight), to_dtype(dtype) if dtype is not None else None)
    x = _windows(_pad_spatial(src, pairs), k_, s_, d_)  # (bs, cin_, *o, *k)
    rcout, o_ = cout // groups, x.shape[2:2 + nd]
    x = x.reshape(bs, groups, 1, cin, *o_, *k_).permute(0, 1, 2, *range(4, 4 + nd), 3, *range(4 + nd, 4 + 2 * nd))
    w = weight.reshape(1, groups, rcout, *[1] * nd, cin, *k_)
    products = x * w
    # overlapping windows (a kernel of 2+ taps) at stride 1: a stride-2 input gradient as a transposed convolution reads a
    # zero-stuffed output gradient (ResNet's 3x3 s2 layer: 1.2 GFLOP/s, against 10.8 through the windows' adjoint)
    if CONV_INPUT_GRAD.value and dtype is None and products.uop.op is Ops.MUL and prod(k_) > 1 \
       and all(0 <= pb <= d * (k - 1) and 0 <= pa <= d * (k - 1) for (pb, pa), k, d in zip(pairs, k_, d_)) \
       and all(s == 1 or (d == 1 and k >= s) for k, s, d in zip(k_, s_, d_)):
      GRAD_OVERRIDES[products.uop] = _input_gradient(self, weight, groups, s_, d_, pairs, (bs, cout, *o_))
    out = products.sum(tuple(range(-1 - nd, 0)), dtype=dtype).reshape(bs, cout, *o_)
    return out if bias is None else out + bias.reshape(1, -1, *[1] * nd)

  def conv_transpose2d(self, weight: Self, bias: Self | None = None, groups: int = 1, stride: int | Sequence[int] = 1,
                       dilation: int | Sequence[int] = 1, padding: int | Sequence[int] = 0, output_padding: int | Sequence[int] = 0) -> Self:
    """Transposed convolution: input (bs, cin, *spatial), weight (cin, cout/groups, *kernel), torch's output size."""
    if self.ndim != weight.ndim or self.ndim < 3: raise InvalidArgumentError(f"conv_transpose needs inputs of one rank >= 3, got {self.shape} and {weight.shape}")
    cin, rcout, k_ = weight.shape[0], weight.shape[1], weight.shape[2:]
    if cin != self.shape[1] or cin % groups: raise InvalidArgumentError(f"input has {self.shape[1]} channels, weight {weight.shape} with groups={groups}")
    nd = len(k_)
    s_, d_, op_ = make_tuple(stride, nd), make_tuple(dilation, nd), make_tuple(output_padding, nd)
    # the equivalent conv: flipped, in/out-swapped weight over the input with s-1 zeros between elements
    w = weight.reshape(groups, cin // groups, rcout, *k_).transpose(1, 2).reshape(groups * rcout, cin // groups, *k_).flip(*range(2, 2 + nd))
    x = self
    pairs_in = _pad_pairs(padding, nd)
    out_ = [(i - 1) * s - pb - pa + d * (k - 1) + op + 1 for i, s, (pb, pa), d, k, op in zip(self.shape[2:], s_, pairs_in, d_, k_, op_)]
    if min(out_) == 0:  # an empty output (torch returns it), still in the graph: its inputs' gradients are zeros
      tied = self.sum() * 0 + weight.sum() * 0 + (bias.sum() * 0 if bias is not None else 0)
      return tied.reshape(*[1] * self.ndim).expand(self.shape[0], groups * rcout, *out_)
    if any(s > 1 for s in s_) and all(d == 1 for d in d_) and _phases_pay(self.shape, weight.shape, s_):
      return _conv_transpose_phases(self, weight, bias, groups, s_, pairs_in, op_)
    if any(s > 1 for s in s_):
      lead = x.shape[:2]
      x = x.reshape(*lead, *flatten((i, 1) for i in x.shape[2:])).pad(((0, 0), (0, 0), *flatten(((0, 0), (0, s - 1)) for s in s_)))
      x = x.reshape(*lead, *[i * s for i, s in zip(self.shape[2:], s_)]).shrink(((0, lead[0]), (0, lead[1]),
                                                                                *[(0, (i - 1) * s + 1) for i, s in zip(self.shape[2:], s_)]))
    pairs = [(d * (k - 1) - pb, d * (k - 1) - pa + op) for (pb, pa), k, d, op in zip(pairs_in, k_, d_, op_)]
    return x.conv2d(w, bias, groups, 1, d_, flatten(reversed(pairs)))

  # ---- resampling
  def interpolate(self, size: Sequence[int], mode: str = "linear", align_corners: bool = False) -> Self:
    """Resize the last len(size) dims to `size`: mode 'linear' (also 'bilinear'/'trilinear'), 'nearest' or 'nearest-exact'."""
    mode = {"bilinear": "linear", "trilinear": "linear"}.get(mode, mode)
    if mode not in ("linear", "nearest", "nearest-exact"): raise ValueError(f"interpolate mode must be linear, nearest or nearest-exact, got {mode!r}")
    if align_corners and mode != "linear": raise ValueError("align_corners only goes with mode='linear'")
    size = tuple(size)
    if not 0 < len(size) <= self.ndim or any(not isinstance(s, int) or s <= 0 for s in size): raise InvalidArgumentError(f"invalid size {size}")
    x = self.cast(dtypes.float32) if not dtypes.is_float(self.dtype) else self
    # ints (torch's uint8 kernels): one pass per axis, the last axis first, each rounded to nearest (half up) integers
    round_ints = mode == "linear" and dtypes.is_int(self.dtype)
    axes = range(self.ndim - len(size), self.ndim)
    for ax in reversed(axes) if round_ints else axes:
      n_in, n_out = x.shape[ax], size[ax - (self.ndim - len(size))]
      if n_in == n_out: continue
      m = _interp_matrix(n_in, n_out, mode, align_corners, self).cast(x.dtype)  # (n_out, n_in)
      if round_ints:  # torch's fixed-point weights: round(w * 2^p) with p as large as int16 allows for the largest weight
        p = _weight_precision(_max_linear_weight(n_in, n_out, align_corners))
        m = (m * 2.0 ** p + 0.5).floor()
      xe = x.unsqueeze(ax)  # (..., 1, n_in, ...)
      me = m.reshape(*[1] * ax, n_out, n_in, *[1] * (x.ndim - ax - 1))
      x = (xe * me).sum(ax + 1)
      if round_ints: x = (x * 2.0 ** -p + 0.5).floor()  # exact: the integer sums stay below 2^24
    return x.cast(self.dtype) if x.dtype != self.dtype else x

