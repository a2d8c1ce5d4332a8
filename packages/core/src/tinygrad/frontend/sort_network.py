"""Sorting long rows with a bitonic network: O(n log^2 n) work instead of the rank sort's O(n^2) (frontend/reduce.py).

The rank sort counts, for every element, the elements that come before it: one (n, n) reduction, the fastest way for short
rows, but a row of 65536 floats took 0.6 s and one of a million would take minutes. Here the row is padded to a power of two m
and a permutation of it goes through the network's log2(m) * (log2(m) + 1) / 2 stages. Stage (k, j) compare-exchanges positions
p and p ^ j: the pair is ordered ascending where p & k == 0, else descending. Each stage is one kernel that reads the
permutation at p and p ^ j and the values at both, so the order stays the rank sort's exactly: key (class, value, index),
class 0 for a number, 1 for NaN (it sorts as the largest value) and 2 for the padding; the index makes equal values keep
their order (a stable sort), as the rank sort does.

j and k are bound Variables: every stage is the same kernel, compiled once per row shape, and a TinyJit replays it (a stage
scheduled anew cost ~4 ms, replayed ~40 us). Two TinyJits take turns, so no replay reads the buffer it writes; the final
permutation is copied out, since the next sort of that shape refills the TinyJits' outputs. Measured on the 2-core VM
(bench/README.md, session 13): argsort of 65536 floats 0.60 s -> 0.018 s (numpy 0.009); under a TinyJit, whose replay
runs the stages as one graph, 4.0 ms (numpy 3.5).
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from tinygrad.dtype import dtypes
from tinygrad.engine import realize
from tinygrad.helpers import ContextVar
from tinygrad.uop.ops import Variable

# rows at least this long sort through the network, shorter ones rank (0: by device, below). On 2 CPU cores, argsort steady /
# first call: 1 row of 512 rank 1.8 ms / 0.57 s, network 2.4 ms / 0.14 s; 64 rows of 1024 25 / 15 ms; 4 rows of 8192 66 / 11 ms.
# A GPU runs the rank sort's n^2 comparisons in parallel, and each of the network's stages is a launch
SORT_NETWORK_MIN = ContextVar("SORT_NETWORK_MIN", 0)
CPU_NETWORK_MIN, GPU_NETWORK_MIN = 512, 16384


def uses_network(n: int, device: str | tuple[str, ...]) -> bool:
  """Whether rows of n elements on device sort through the network."""
  if (at := SORT_NETWORK_MIN.value) <= 0:
    from tinygrad.device.registry import Device
    at = GPU_NETWORK_MIN if Device.renderer(device if isinstance(device, str) else device[0]).has_local else CPU_NETWORK_MIN
  return n >= at
_CACHE_SIZE = 16  # row shapes whose TinyJits are kept (each holds its compiled stage and two permutation buffers)
_stages: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()
# TinyJit, set by tinygrad/jit.py when it is imported: the frontend sits below jit (which imports Tensor and so the frontend), so
# the capture mechanism is handed down rather than imported. Without it the stages run as plain code
JIT: Callable[[Callable], Any] | None = None


def _stage(perm: Any, values: Any, n: int, j: Any, k: Any, descending: bool) -> Any:
  """One compare-exchange stage over the last axis of perm (m positions, the first n real)."""
  T, m, lead, dev = type(perm), perm.shape[-1], perm.shape[:-1], perm.device  # T: Tensor (the frontend doesn't import it)
  pos = T.arange(m, dtype=dtypes.int32, device=dev)
  jt, kt = T(j, dtype=dtypes.int32, device=dev), T(k, dtype=dtypes.int32, device=dev)
  partner = (pos ^ jt).reshape(*(1,) * len(lead), m).expand(*lead, m)
  ia, ib = perm, perm.gather(-1, partner)
  va, vb = values.gather(-1, ia), values.gather(-1, ib)
  def cls(i: Any, v: Any) -> Any:
    nan = (v != v) if not descending else (v == v)  # descending: NaN first, so the numbers take the later class
    return (i >= n).cast(dtypes.int32) * 2 + nan.cast(dtypes.int32)
  ca, cb = cls(ia, va), cls(ib, vb)
  # within a class: numbers by value, then index; NaNs and padding by index alone (NaN != NaN)
  same_class = ca == cb
  by_value = ((va > vb) if descending else (va < vb)) & ((ca & 1) == (1 if descending else 0))
  tie = (va == vb) | ((ca & 1) != (1 if descending else 0)) | (ca >= 2)
  a_first = (ca < cb) | (same_class & (by_value | (tie & (ia < ib))))
  keep_first = ((pos & jt) == 0) == ((pos & kt) == 0)  # the lower of the pair, in an ascending block (or the upper, descending)
  return keep_first.eq(a_first).where(ia, ib).contiguous()


def sort_permutation(x: Any, descending: bool) -> Any:
  """int32 indices that sort x (any float or int Tensor) along its last axis, stably, NaN as the largest value: the rank
  sort's order. x is read, not differentiated (the caller gathers the values from it)."""
  n, lead, dev = x.shape[-1], x.shape[:-1], x.device
  m = 1 << max(0, (n - 1).bit_length())
  values = x.detach()
  if m != n: values = values.pad(((0, 0),) * len(lead) + ((0, m - n),))
  values = values.contiguous().realize()
  perm = type(x).arange(m, dtype=dtypes.int32, device=dev).reshape(*(1,) * len(lead), m).expand(*lead, m).contiguous().realize()
  key = (tuple(lead), n, x.dtype, dev, descending)
  def stage(perm: Any, values: Any, j: Any, k: Any) -> Any: return _stage(perm, values, n, j, k, descending).realize()
  jits: tuple[Any, Any] = (stage, stage)
  if JIT is not None:
    if key not in _stages:
      _stages[key] = (JIT(stage), JIT(stage))
      if len(_stages) > _CACHE_SIZE: _stages.popitem(last=False)
    _stages.move_to_end(key)
    jits = _stages[key]
  vj, vk = Variable("sort_j", 1, max(1, m // 2)), Variable("sort_k", 2, max(2, m))
  turn, size = 0, 2
  while size <= m:
    j = size // 2
    while j >= 1:
      perm = jits[turn](perm, values, vj.bind(j), vk.bind(size))
      turn, j = 1 - turn, j // 2
    size *= 2
  # a copy: the TinyJits refill their outputs on the next sort of this shape (inside another TinyJit's capture they run as
  # plain code, and the copy is one more captured kernel)
  out = perm[..., :n] if m != n else perm
  return (out + 0).realize() if not any(c.jit for c in realize.capturing) else out + 0
