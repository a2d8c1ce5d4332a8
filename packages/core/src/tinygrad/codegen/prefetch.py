"""Software prefetches for loads that the CPU's own prefetchers miss (CPU renderers with `prefetch_ahead`, last pass before
linearize).

A reduce loop that steps through memory by a page or more per iteration (a 1x1 convolution's sum over input channels: each
channel a 12.5 KB plane apart) reads a new line of another page at every step. The L1's stride prefetcher follows strides
up to ~2 KB and the L2's streamer follows a few dozen pages, so each of those lines is a demand miss, and the loop runs at
memory latency. Its outer loop, though, walks the same planes forward (the next block of pixels), so the lines the next outer
iterations read are known: each such load gets LOAD arg ("prefetch", n), and the renderer emits a prefetch of the element n
past it (a hint: it never faults, so n may run past the buffer). One prefetch covers a buffer's loads in one loop that lie
within a line or two of each other (the unrolled pixels), not one each.
"""
from __future__ import annotations

from collections import defaultdict

from tinygrad.codegen.heuristics import INDEX_OPS
from tinygrad.dtype import PtrDType
from tinygrad.helpers import ContextVar
from tinygrad.uop.alu import eval_scalar
from tinygrad.uop.ops import Ops, UOp

SW_PREFETCH = ContextVar("SW_PREFETCH", 1)  # 0: no software prefetches
FAR_STRIDE = 2048  # bytes a reduce step moves at least: below it the L1's stride prefetcher keeps up
MIN_TRIPS = 32     # reduce steps at least: fewer pages than that, the L2's streamer tracks them
LINE = 64          # bytes of a cache line
MAX_LINES = 4      # prefetches per (buffer, loop) at most: a wider footprint is read as whole vectors, left to the hardware
SWEEP_BYTES = 32 << 10  # bytes a far loop's sweep may fetch ahead (within L1: 48 KB on the Xeon measured)


def _index_nodes(idx: UOp) -> list[UOp]:
  """idx's expression, down to its loops (a RANGE's own sources order it after other work: they are not index math)."""
  return idx.toposort(gate=lambda u: u.op is not Ops.RANGE)


def _strides(idx: UOp, loops: list[UOp]) -> dict[UOp, int]:
  """How far idx moves when one of `loops` steps by one, for those where that is the same at a few sample points (an index
  with divisions, a convolution's windows, is linear in a loop only piecewise; symbolic differences don't fold there)."""
  nodes = _index_nodes(idx)
  leaves = [n for n in nodes if n.op in (Ops.RANGE, Ops.DEFINE_VAR)]
  # only loop arithmetic: an index read from memory (a gather) or a symbolic loop size has no stride to find
  if any(n.op not in INDEX_OPS or (n.op is Ops.RANGE and n.src[0].op is not Ops.CONST) for n in nodes): return {}
  def at(f: float) -> dict[UOp, int]:  # every loop a fraction f of its way (leaving room for one more step); variables at their least
    return {n: int((n.src[0].arg - 2) * f) if n.op is Ops.RANGE and n.src[0].arg > 1 else 0 if n.op is Ops.RANGE else n.arg[1] for n in leaves}
  found: dict[UOp, set[int]] = {r: set() for r in loops}
  for env in (at(0.0), at(0.37), at(1.0)):
    base = eval_scalar(idx, env)
    for r in loops: found[r].add(eval_scalar(idx, env | {r: env[r] + 1}) - base)
  return {r: next(iter(d)) for r, d in found.items() if len(d) == 1}


def _far_loop(idx: UOp, item: int) -> tuple[UOp, int, dict[UOp, int]] | None:
  """(the reduce loop that moves idx by FAR_STRIDE bytes or more a step, that stride, idx's strides in every loop), else None."""
  ranges = [r for r in _index_nodes(idx) if r.op is Ops.RANGE and r.src[0].op is Ops.CONST]
  # one reduce loop only: a load inside more (a 3x3 window's taps) would prefetch at every inner step, not once a far step
  reduces = [r for r in ranges if r.arg[1] == "reduce" and r.src[0].arg > 1]
  if len(reduces) != 1 or reduces[0].src[0].arg < MIN_TRIPS: return None
  strides = _strides(idx, ranges)
  if abs(s := strides.get(reduces[0], 0)) * item < FAR_STRIDE: return None
  return reduces[0], s, strides


def _offset(a: UOp, b: UOp) -> int | None:
  d = (a - b).simplify()
  return d.arg if d.op is Ops.CONST else None


def mark_prefetches(sink: UOp, ahead: int) -> UOp:
  """`sink` with a prefetch `ahead` bytes past the footprint of each group of far-striding loads (see the module doc)."""
  if not SW_PREFETCH.value or ahead <= 0: return sink
  groups: dict[tuple, list[tuple[UOp, dict[UOp, int]]]] = defaultdict(list)
  for u in sink.toposort():
    if u.op is not Ops.LOAD or u.arg is not None or len(u.src) != 1 or u.src[0].op is not Ops.INDEX: continue
    buf, idx = u.src[0].src[0], u.src[0].src[1]
    if buf.op is not Ops.DEFINE_GLOBAL or not isinstance(buf.dtype, PtrDType) or (far := _far_loop(idx, buf.dtype.base.itemsize)) is None: continue
    groups[(buf, far[0], far[1])].append((u, far[2]))
  marks: dict[UOp, UOp] = {}
  for (buf, r, _), loads in groups.items():
    item = buf.dtype.base.itemsize
    first = loads[0][0].src[0].src[1]
    offs = [(o, u) for u, _ in loads if (o := _offset(u.src[0].src[1], first)) is not None]
    lo, hi = min(o for o, _ in offs), max(o + u.dtype.count for o, u in offs)
    foot = -(-(hi - lo) * item // LINE) * LINE  # bytes the group reads a far step, in whole lines
    # worth it only where an outer loop reads on right past the footprint: what its next steps read is what gets fetched
    walks = any(q is not r and 0 < s * item <= foot for q, s in loads[0][1].items())
    # and only where those lines are read again soon: a far loop's sweep fetches foot bytes at each of its steps, all of which
    # must stay in L1 until the next sweep (a 4096-row column sum's 1 MB sweep ran 15 -> 10 GB/s with prefetches)
    if not walks or foot > MAX_LINES * LINE or foot * r.src[0].arg > SWEEP_BYTES: continue
    head = next(u for o, u in offs if o == lo)
    # one prefetch per line of the footprint, `ahead` bytes past it (the lowest load carries them all)
    marks[head] = head.replace(arg=("prefetch", tuple((foot + ahead + k * LINE) // item for k in range(foot // LINE))))
  return sink.substitute(marks) if marks else sink
