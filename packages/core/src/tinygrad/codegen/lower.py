"""Lowering passes from a kernel AST (ranges, REDUCE, loads, stores) towards a program:

- `lower_reduces`: each REDUCE becomes an accumulator (DEFINE_REG), initialised before its loops,
  updated inside them and read after their END.
- `close_loops`: the output STOREs get the ENDs of the loops around them.
- `pm_cleanup`: rules run after lowering (gated-load folding and symbolic simplification).
"""
from __future__ import annotations

import itertools

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp, identity_element
from tinygrad.uop.rewrite import PatternMatcher, UPat, graph_rewrite
from tinygrad.uop.symbolic import symbolic


def live_ranges(u: UOp) -> set[UOp]:
  """Loop ranges that `u` depends on and that are still open at `u` (not closed by an END inside it)."""
  nodes = u.toposort()
  ranges = {n for n in nodes if n.op is Ops.RANGE}
  closed = {n.src[0] for n in nodes if n.op is Ops.END}
  return ranges - closed


def range_id(r: UOp) -> int: return r.arg[0]


def lower_reduces(sink: UOp) -> UOp:
  """REDUCE(value, *ranges) -> an accumulator. Innermost reduces are lowered first."""
  reg_ids = itertools.count()
  output_loops = {n for n in sink.toposort() if n.op is Ops.RANGE and n.arg[1] == "global"}
  while True:
    reduces = [n for n in sink.toposort() if n.op is Ops.REDUCE]
    # a reduce whose value holds no other REDUCE can be lowered now
    ready = next((r for r in reduces if not any(n.op is Ops.REDUCE for n in r.src[0].toposort())), None)
    if ready is None: return sink
    sink = sink.substitute({ready: _lower_one(ready, next(reg_ids), output_loops)})


def _lower_one(red: UOp, reg_id: int, output_loops: set[UOp]) -> UOp:
  value, ranges, op = red.src[0], red.src[1:], red.arg
  dt = red.dtype
  acc = UOp(Ops.DEFINE_REG, dt.ptr(1, "reg"), (), reg_id).index(UOp.const(dtypes.int32, 0))
  # the init runs once per iteration of the loops outside this reduce (every output loop: the kernel
  # computes one reduction per output element)
  outer = sorted((live_ranges(value) | output_loops) - set(ranges), key=range_id)
  init_ptr = UOp(Ops.AFTER, acc.dtype, (acc, *outer)) if outer else acc
  init = init_ptr.store(UOp.const(dt, identity_element(op, dt)))
  # loop ranges of the reduce, re-made so they start after the init
  # (the first after the init, each next one inside the previous: the loops nest)
  new_ranges: list[UOp] = []
  for r in sorted(ranges, key=range_id): new_ranges.append(r.replace(src=(r.src[0], new_ranges[-1] if new_ranges else init)))
  value = value.substitute(dict(zip(sorted(ranges, key=range_id), new_ranges)))
  inner_ptr = UOp(Ops.AFTER, acc.dtype, (acc, *new_ranges))
  update = inner_ptr.store(UOp(op, dt, (inner_ptr.load(), value)))
  end: UOp = update
  for r in reversed(new_ranges): end = UOp(Ops.END, dtypes.void, (r, end))
  return UOp(Ops.AFTER, acc.dtype, (acc, end)).load()


def close_loops(sink: UOp) -> UOp:
  """Wrap each STORE in the ENDs of the loops it sits in, innermost first."""
  new_src = []
  for s in sink.src:
    if s.op is not Ops.STORE:
      new_src.append(s)
      continue
    end = s
    for r in sorted(live_ranges(s), key=range_id, reverse=True): end = UOp(Ops.END, dtypes.void, (r, end))
    new_src.append(end)
  return sink.replace(src=tuple(new_src))


def _fold_gated_where(c: UOp, load: UOp, zero: UOp) -> UOp | None:
  """valid ? load(p, gate=valid, alt=0) : 0 is just the gated load."""
  if len(load.src) == 3 and load.src[1] is c and load.src[2] is zero: return load
  return None


pm_cleanup = symbolic + PatternMatcher([
  (UPat(Ops.WHERE, src=(UPat.var("c"), UPat(Ops.LOAD, name="load"), UPat(Ops.CONST, name="zero"))), _fold_gated_where),
  # a load gated by a condition that is always true needs no gate
  (UPat(Ops.LOAD, src=(UPat.var("p"), UPat.const(dtypes.bool, True), UPat.var("alt"))), lambda p, alt: p.load()),
  (UPat(Ops.STORE, src=(UPat.var("p"), UPat.var("v"), UPat.const(dtypes.bool, True))), lambda p, v: p.store(v)),
])


def cleanup(sink: UOp) -> UOp: return graph_rewrite(sink, pm_cleanup)
