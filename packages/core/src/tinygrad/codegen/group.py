"""Block-cooperative reductions (OptOps.GROUP) on GPU-style renderers.

A kernel with few outputs and long reductions (a matrix-vector product in decode, a norm) leaves most of a GPU idle
when one thread computes one output. GROUP(r, G) gives every output G threads of a block instead. After `opt.group`
the AST reads REDUCE(REDUCE(x', r_outer), lane) with `lane` a "group" RANGE; this pass lowers it:

  lidx0 = lane (0..G-1), lidx1 = output within the block, gidx0 = block   (gpudims.to_thread_indices with group=G)
  partial = REDUCE(x', r_outer)            each thread: elements lane, lane+G, lane+2G, ... (neighbours read neighbours)
  smem[lidx1*G + lane] = partial           one DEFINE_LOCAL per grouped REDUCE (the copies UPCAST makes; an UNROLL's
                                           copies are first combined in registers: merge_lane_reduces)
  BARRIER                                  one per group range, after every partial of it is stored
  final = REDUCE(smem[lidx1*G + k], k)     every thread of the group reads all G partials (the same address for the
                                           whole group: a broadcast, no bank conflicts), 4 accumulators where G allows
  epilogue, global stores gated by lane == 0 (a row kernel's loop over its outputs: spread over the lanes, each
                                           storing its own, codegen/rows.py)

Every lane computes the final value, not just lane 0, so a reduction whose body uses it (a fused softmax: the sum of
exp(x - max) with both grouped) sees it in every thread, and no thread branches around a BARRIER.

A renderer with warp shuffles (`Renderer.shuffle_lanes` W > 0: CUDA's shfl.sync) combines 32-bit partials without the
shared array where the lanes of a group lie in whole warps (G a power of two, the block whole warps):
  partial = op(partial, SHUFFLE(partial, m))  for m = G/2 .. 1 (G <= W), or W/2 .. 1: a butterfly, every lane ends with the sum
  G <= W: that is the final value: no shared memory, no BARRIER (a warp finishes without waiting for the block's others)
  G > W:  lane % W == 0 stores its warp's sum into smem[lidx1*(G/W) + lane/W], BARRIER, every lane combines the G/W sums
"""
from __future__ import annotations

import itertools

from tinygrad.codegen.gpudims import to_thread_indices
from tinygrad.codegen.opt import KernelOptError, range_size
from tinygrad.codegen.rows import spread_over_lanes
from tinygrad.dtype import dtypes
from tinygrad.helpers import ContextVar
from tinygrad.uop.ops import Ops, UOp

# 0: grouped reductions combine through shared memory alone, even where the renderer has warp shuffles (an A/B switch; measured
# on the H200: bench/README.md, "warp shuffles")
WARP_SHUFFLE = ContextVar("WARP_SHUFFLE", 1)
FINAL_ACCS = 4  # independent accumulators of the final combine (a G-long chain of dependent adds otherwise)


def lane_ranges(sink: UOp) -> list[UOp]:
  return sorted((n for n in sink.toposort() if n.op is Ops.RANGE and n.arg[1] == "group"), key=lambda r: r.arg[0])


def merge_lane_reduces(sink: UOp) -> UOp:
  """op(REDUCE(a, lane), REDUCE(b, lane)) -> REDUCE(op(a, b), lane) for the reduce's own op: the copies an UNROLL before
  GROUP makes (each lane reads 4 neighbours, one wide load) are combined in registers, and share one array and combine."""
  while True:
    merged = {n: UOp(Ops.REDUCE, n.dtype, (UOp(n.op, n.dtype, (n.src[0].src[0], n.src[1].src[0])), n.src[0].src[1]), n.op)
              for n in sink.toposort() if n.op in (Ops.ADD, Ops.MUL, Ops.MAX) and len(n.src) == 2 and _lane_reduce(n.src[0], n.op)
              and _lane_reduce(n.src[1], n.op) and n.src[0].src[1:] == n.src[1].src[1:]}
    if not merged: return sink
    sink = sink.substitute(merged)


def _lane_reduce(u: UOp, op: Ops) -> bool:
  return u.op is Ops.REDUCE and u.arg is op and len(u.src) == 2 and u.src[1].op is Ops.RANGE and u.src[1].arg[1] == "group"


def lower_groups(sink: UOp, max_local: int, shared_max: int, shuffle_lanes: int = 0) -> tuple[UOp, tuple, tuple]:
  """Thread indices for a kernel with grouped reductions, and their exchange through warp shuffles and shared memory.
  Returns (sink, global_size, local_size) like to_thread_indices."""
  lanes = lane_ranges(sink)
  if not lanes: return to_thread_indices(sink, max_local)
  sizes = {range_size(r) for r in lanes}
  if len(sizes) != 1 or (g := sizes.pop()) is None: raise KernelOptError(f"grouped reductions need one constant group size, got {sizes}")
  if g > max_local: raise KernelOptError(f"GROUP by {g}: more than the {max_local} threads a block may have")
  next_id = max(n.arg[0] for n in sink.toposort() if n.op is Ops.RANGE) + 1
  lane_idx = UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx0", g))
  sink = spread_over_lanes(sink, lane_idx, g)  # a row kernel's outputs: shared between the lanes (codegen/rows.py)
  sink, global_size, local_size = to_thread_indices(sink, max_local, group=g)
  per_block = local_size[1]
  out_idx = UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx1", per_block)) if per_block > 1 else UOp.const(dtypes.int32, 0)
  # the lanes of a group in whole warps (threads are numbered lane-fastest): a butterfly over m < min(G, W) stays in the group
  warp = shuffle_lanes if shuffle_lanes and WARP_SHUFFLE.value and _pow2(g) and _pow2(shuffle_lanes) and (g * per_block) % shuffle_lanes == 0 else 0
  smem_ids, smem_bytes = itertools.count(), 0
  sink = merge_lane_reduces(sink)
  for lane in lanes:  # one at a time: a grouped reduce may use another's result, whose nodes change as it is lowered
    reds = [n for n in sink.toposort() if n.op is Ops.REDUCE and n.src[1:] == (lane,)]
    if not reds: continue
    shuffled = warp > 0 and all(r.dtype.count == 1 and r.dtype.itemsize == 4 for r in reds)  # shfl moves 32-bit registers
    # what each lane puts into the exchange, and how many values per output go through shared memory (0: none)
    parts = [_butterfly(r.src[0], r.arg, min(g, warp)) for r in reds] if shuffled else [r.src[0] for r in reds]
    n = g if not shuffled else 0 if g <= warp else g // warp
    finals: dict[UOp, UOp] = dict(zip(reds, parts)) if n == 0 else {}
    if n:
      bufs = [UOp(Ops.DEFINE_LOCAL, red.dtype.ptr(n * per_block, "local"), (), next(smem_ids)) for red in reds]
      smem_bytes += sum(n * per_block * red.dtype.itemsize for red in reds)
      base = out_idx * n if per_block > 1 else out_idx
      at, gate = (base + lane_idx // warp, (lane_idx % warp).eq(0)) if shuffled else (base + lane_idx, None)
      bar = UOp(Ops.BARRIER, dtypes.void, tuple(buf.index(at).store(p, *([gate] if gate is not None else [])) for buf, p in zip(bufs, parts)))
      k = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, n // _final_accs(n)),), (next_id, "reduce"))
      next_id += 1
      for buf, red in zip(bufs, reds): finals[red] = _combine(UOp(Ops.AFTER, buf.dtype, (buf, bar)), base, k, n, red)
    sink = sink.substitute(finals).substitute({lane: lane_idx.cast(lane.dtype)})  # int64 lanes in a kernel that indexes in int64
  if smem_bytes > shared_max: raise KernelOptError(f"grouped reductions need {smem_bytes} bytes of shared memory, the block has {shared_max}")
  return sink, global_size, local_size


def _pow2(n: int) -> bool: return n > 0 and n & (n - 1) == 0


def _final_accs(n: int) -> int: return FINAL_ACCS if n % FINAL_ACCS == 0 and n >= 4 * FINAL_ACCS else 1


def _butterfly(x: UOp, op: Ops, width: int) -> UOp:
  """Every lane of each aligned run of `width` lanes ends with op over the run's x: log2(width) exchanges with lane ^ m."""
  m = width // 2
  while m:
    x = UOp(op, x.dtype, (x, UOp(Ops.SHUFFLE, x.dtype, (x,), m)))
    m //= 2
  return x


def _combine(smem: UOp, base: UOp, k: UOp, n: int, red: UOp) -> UOp:
  """op over smem[base .. base+n-1], read by every lane (one address for the whole group: a broadcast), in _final_accs
  independent accumulators (an n-long chain of dependent ops otherwise)."""
  accs = _final_accs(n)
  parts = [UOp(Ops.REDUCE, red.dtype, (smem.index(base + (k * accs + c if accs > 1 else k)).load(), k), red.arg) for c in range(accs)]
  final = parts[0]
  for p in parts[1:]: final = UOp(red.arg, red.dtype, (final, p))
  return final
