"""Multithreaded CPU kernels: an output loop (the outermost, unless THREAD names another) is split into one chunk per thread.

The chunk a thread runs is chosen by `core_id`, an int parameter (a DEFINE_VAR, passed last); the device
runs the kernel once per thread with core_id = 0..n-1 (ProgramSpec.global_size[0] = n). When n does not
divide the loop, the last chunk's extra iterations compute a clamped element and skip their stores.
"""
from __future__ import annotations

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp

CORE_ID = "core_id"


def split_for_threads(sink: UOp, n: int, axis: int = 0) -> tuple[UOp, int]:
  """Split a constant-size output loop across up to n threads: the one whose id is `axis` where there is one (THREAD(axis, n)),
  else the outermost. Returns (sink, threads used)."""
  loops = sorted((u for u in sink.toposort() if u.op is Ops.RANGE and u.arg[1] == "global"), key=lambda r: r.arg[0])
  r = next((u for u in loops if u.arg[0] == axis), loops[0] if loops else None)
  if r is None or r.src[0].op is not Ops.CONST or n <= 1: return sink, 1
  size = r.src[0].arg
  n = min(n, size)
  if n <= 1: return sink, 1
  chunk = -(-size // n)
  core = UOp(Ops.DEFINE_VAR, dtypes.int32, (), (CORE_ID, 0, n - 1)).cast(r.dtype)  # the index math's dtype (int64 in big kernels)
  inner = r.replace(src=(UOp.const(r.dtype, chunk), *r.src[1:]))
  idx = core * chunk + inner
  if size % n == 0: return sink.substitute({r: idx}), n
  in_bounds = idx < size
  new = sink.substitute({r: in_bounds.where(idx, UOp.const(r.dtype, 0))})
  gated = {s: s.replace(src=(*s.src[:2], in_bounds)) for s in new.toposort()
           if s.op is Ops.STORE and len(s.src) == 2 and s.src[0].op is Ops.INDEX and s.src[0].src[0].op is Ops.DEFINE_GLOBAL}
  return new.substitute(gated), n
