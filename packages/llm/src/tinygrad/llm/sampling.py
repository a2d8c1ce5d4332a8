"""Sampling the next token on the device, as Tensor ops with fixed shapes (so a TinyJit can replay it every step).

temperature 0 is greedy (argmax). Otherwise top-k and top-p keep the tokens at or above a threshold found by a search over
candidate values (no sort): the k-th largest logit, then the smallest probability whose tokens still hold top_p of the mass. Each
search round tests 64 evenly spaced candidates at once in one reduction, and narrows the interval 64-fold. The draw itself is the Gumbel-max
trick, argmax(logits / temperature + Gumbel noise), with noise from a counter-based hash of (seed, step, token index).
Without top-k or top-p (`sample_temperature`, what the server does by default) the draw is that argmax alone: the same token
`sample` draws with the filters off, without the searches.
"""
from __future__ import annotations

import math
from typing import Any

from tinygrad import Tensor, dtypes
from tinygrad.helpers import ContextVar

SEARCH_POINTS, SEARCH_ROUNDS = 64, 4  # 64**4 = 2**24 steps: float32 precision of the threshold
PARTS = 256  # a long row's sums in this many partial sums first
# 1: a row's argmax as one max over (value, index) keys (one_pass_argmax: one reduction, two kernels on a GPU) instead of
# Tensor.argmax's max and then the first index holding it (two reductions, four kernels). Off: Llama-1B's decode step on an H100
# 959.0 against 959.3 us (bench/README.md, session 37), two small kernels fewer are worth less than 1 us.
ARGMAX_ONE_PASS = ContextVar("ARGMAX_ONE_PASS", 0)


def hash_uniform(key: Tensor, n: int) -> Tensor:
  """(n,) float32 uniform in (0, 1) from a (2,) uint32 key (seed, step): a few rounds of multiply-xorshift hashing per index."""
  idx = Tensor.arange(n, dtype=dtypes.int32, device=key.device).cast(dtypes.uint32)
  x = idx * 0x9E3779B9 + key[0:1] * 0x85EBCA6B + key[1:2] * 0xC2B2AE35
  for mult in (0x7FEB352D, 0x846CA68B, 0x7FEB352D):
    x = (x ^ (x >> 16)) * mult
  x = x ^ (x >> 15)
  return ((x >> 8).cast(dtypes.float32) + 0.5) * (1.0 / (1 << 24))


def _sum_last(t: Tensor) -> Tensor:
  """Sum over the last axis, keepdim, as partial sums of PARTS slices first (long rows: a vocabulary of 128k). One reduction over
  the whole row gave one small thread group per candidate, a long serial loop each."""
  n = t.shape[-1]
  if n < 8 * PARTS: return t.sum(-1, keepdim=True)
  m = -(-n // PARTS)
  t = t.pad(((0, 0),) * (t.ndim - 1) + ((0, PARTS * m - n),))  # zeros: they add nothing to a count or a mass
  return t.reshape(*t.shape[:-1], PARTS, m).sum(-1).contiguous().sum(-1, keepdim=True)


def _search(lo: Tensor, hi: Tensor, ok_at) -> Tensor:
  """The largest v in [lo, hi] (both (1, 1)) with ok_at(v), for ok_at monotone (true at lo, false above some point).
  ok_at takes candidates (1, C, 1) and returns (1, C, 1) bools."""
  steps = Tensor.arange(SEARCH_POINTS + 1, dtype=dtypes.float32, device=lo.device).reshape(1, -1, 1) * (1.0 / SEARCH_POINTS)
  for _ in range(SEARCH_ROUNDS):
    width = hi - lo
    ok = ok_at(lo.reshape(1, 1, 1) + width.reshape(1, 1, 1) * steps)
    best = (ok.cast(dtypes.float32).sum(1) - 1).maximum(0).reshape(1, 1)  # index of the last candidate that passes
    # the new interval stored as one (1, 2) tensor: one kernel a round for it, not one per end
    iv = (lo + width * best * (1.0 / SEARCH_POINTS)).cat((lo + width * (best + 1) * (1.0 / SEARCH_POINTS)).minimum(hi), dim=1).contiguous()
    lo, hi = iv[:, 0:1], iv[:, 1:2]
  return lo


def sample(logits: Tensor, temperature: Tensor, top_k: Tensor, top_p: Tensor, key: Tensor) -> Tensor:
  """logits (1, V); temperature (1,) float (> 0), top_k (1,) int (0: off), top_p (1,) float (1: off), key (2,) uint32 -> (1,) int32."""
  V = logits.shape[-1]
  x = logits.reshape(1, V).cast(dtypes.float32) / temperature.reshape(1, 1)
  # top-k: the k-th largest value is the largest v with count(x >= v) >= k
  k = (top_k.reshape(1, 1) <= 0).where(V, top_k.reshape(1, 1).minimum(V)).cast(dtypes.float32)
  lo, hi = x.min(-1, keepdim=True), x.max(-1, keepdim=True)
  x = x.contiguous()  # read by every search round: computed once
  kth = _search(lo, hi, lambda v: _sum_last((x.reshape(1, 1, V) >= v).cast(dtypes.float32)) >= k.reshape(1, 1, 1))
  x = (x >= kth).where(x, -math.inf)
  # top-p: keep probabilities >= t for the largest t whose kept mass is still >= top_p
  p = x.softmax(-1).contiguous()
  tp = top_p.reshape(1, 1).cast(dtypes.float32)
  pv = p.reshape(1, 1, V)
  t = _search(p.min(-1, keepdim=True) * 0, p.max(-1, keepdim=True), lambda v: _sum_last((pv >= v).where(pv, 0.0)) >= tp.reshape(1, 1, 1))
  return _gumbel_argmax((p >= t).where(x, -math.inf), key)


def sample_temperature(logits: Tensor, temperature: Tensor, key: Tensor) -> Tensor:
  """`sample` with top-k and top-p off: logits (1, V); temperature (1,) float (> 0); key (2,) uint32 -> (1,) int32."""
  V = logits.shape[-1]
  return _gumbel_argmax(logits.reshape(1, V).cast(dtypes.float32) / temperature.reshape(1, 1), key)


def gumbel_noise(key: Tensor, n: int) -> Tensor:
  """(n,) float32 Gumbel noise, a function of (key, token index)."""
  return -(-hash_uniform(key, n).log()).log()


def _gumbel_argmax(x: Tensor, key: Tensor) -> Tensor:
  """The Gumbel-max draw from (1, V) scaled logits: argmax(x + Gumbel noise), the noise a function of (key, token index)."""
  return noisy_argmax(x, gumbel_noise(key, x.shape[-1]))


def noisy_argmax(x: Tensor, noise: Tensor) -> Tensor:
  """argmax(x + noise) of (1, V) scaled logits and (V,) noise, as (1,) int32."""
  V = x.shape[-1]
  if ARGMAX_ONE_PASS.value: return one_pass_argmax(x + noise.reshape(1, V))  # each noisy logit computed once, in the one pass
  # noisy logits stored once: argmax reads them twice (the max, then its index), each pass would hash and take two logs again
  return (x + noise.reshape(1, V)).contiguous().argmax(-1).cast(dtypes.int32)


def greedy(logits: Tensor) -> Tensor:
  if ARGMAX_ONE_PASS.value: return one_pass_argmax(logits)
  return logits.reshape(1, -1).argmax(-1).cast(dtypes.int32)


def order_key(x: Any) -> Any:
  """A float32's order as a uint32's, for a Tensor or a kernel's UOp alike: -0.0 as 0.0, every NaN as one NaN above +inf (one
  NaN and one zero: their keys then compare as the values do, as Tensor.argmax and numpy order them)."""
  x = x.ne(x).where(math.nan, x.eq(0.0).where(0.0, x))
  bits = x.bitcast(dtypes.uint32)
  return (bits < 0x80000000).where(bits | 0x80000000, bits ^ 0xFFFFFFFF)  # float order as unsigned order


def one_pass_argmax(x: Tensor) -> Tensor:
  """Tensor.argmax of a (1, V) or (V,) row of floats as (1,) int32, in one reduction: the largest of 64-bit keys that hold the
  value's order in the high half and the complement of its index in the low half, so a tie goes to the first index. -0.0 counts
  as 0.0 and any NaN as the largest value (the first NaN wins), as Tensor.argmax and numpy do."""
  if not dtypes.is_float(x.dtype) or x.dtype.itemsize > 4:
    raise TypeError(f"one_pass_argmax takes float32 or narrower floats (its keys hold a float32's bits), not {x.dtype.name}: "
                    "use Tensor.argmax")
  V = x.shape[-1]
  ordered = order_key(x.reshape(1, V).cast(dtypes.float32))
  index = Tensor.arange(V, dtype=dtypes.uint32, device=x.device).reshape(1, V)
  best = ((ordered.cast(dtypes.uint64) << 32) | (index ^ 0xFFFFFFFF).cast(dtypes.uint64)).max(-1)
  return ((best & 0xFFFFFFFF).cast(dtypes.uint32) ^ 0xFFFFFFFF).cast(dtypes.int32)
