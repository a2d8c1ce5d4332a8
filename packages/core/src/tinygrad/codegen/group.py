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
"""
from __future__ import annotations

import itertools

from tinygrad.codegen.gpudims import to_thread_indices
from tinygrad.codegen.opt import KernelOptError, range_size
from tinygrad.codegen.rows import spread_over_lanes
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp

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


def lower_groups(sink: UOp, max_local: int, shared_max: int) -> tuple[UOp, tuple, tuple]:
  """Thread indices for a kernel with grouped reductions, and their exchange through shared memory.
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
  slot = UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx1", per_block)) * g if per_block > 1 else UOp.const(dtypes.int32, 0)
  smem_ids, smem_bytes = itertools.count(), 0
  sink = merge_lane_reduces(sink)
  for lane in lanes:  # one at a time: a grouped reduce may use another's result, whose nodes change as it is lowered
    reds = [n for n in sink.toposort() if n.op is Ops.REDUCE and n.src[1:] == (lane,)]
    if not reds: continue
    bufs = [UOp(Ops.DEFINE_LOCAL, red.dtype.ptr(g * per_block, "local"), (), next(smem_ids)) for red in reds]
    smem_bytes += sum(g * per_block * red.dtype.itemsize for red in reds)
    bar = UOp(Ops.BARRIER, dtypes.void, tuple(buf.index(slot + lane_idx).store(red.src[0]) for buf, red in zip(bufs, reds)))
    accs = FINAL_ACCS if g % FINAL_ACCS == 0 and g >= 4 * FINAL_ACCS else 1
    k = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, g // accs),), (next_id, "reduce"))
    next_id += 1
    finals: dict[UOp, UOp] = {}
    for buf, red in zip(bufs, reds):
      rd = UOp(Ops.AFTER, buf.dtype, (buf, bar))
      parts = [UOp(Ops.REDUCE, red.dtype, (rd.index(slot + (k * accs + c if accs > 1 else k)).load(), k), red.arg) for c in range(accs)]
      final = parts[0]
      for p in parts[1:]: final = UOp(red.arg, red.dtype, (final, p))
      finals[red] = final
    sink = sink.substitute(finals).substitute({lane: lane_idx.cast(lane.dtype)})  # int64 lanes in a kernel that indexes in int64
  if smem_bytes > shared_max: raise KernelOptError(f"grouped reductions need {smem_bytes} bytes of shared memory, the block has {shared_max}")
  return sink, global_size, local_size
