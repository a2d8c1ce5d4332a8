"""Lowering passes from a kernel AST (ranges, REDUCE, loads, stores) towards a program:

- `lower_reduces`: each REDUCE becomes an accumulator (DEFINE_REG), initialised before its loops,
  updated inside them and read after their END.
- `close_loops`: the output STOREs get the ENDs of the loops around them.
- `pm_cleanup`: rules run after lowering (gated-load folding, indices simplified under their gates (codegen/gated.py),
  symbolic simplification).
"""
from __future__ import annotations

import itertools

from tinygrad.codegen.gated import pm_gated
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp, identity_element
from tinygrad.uop.rewrite import PatternMatcher, UPat, graph_rewrite
from tinygrad.uop.symbolic import symbolic


def live_ranges(u: UOp) -> set[UOp]:
  """Loop ranges that `u` depends on and that are still open at `u` (not closed by an END inside it)."""
  return set(live_range_map(u)[u])


def live_range_map(root: UOp) -> dict[UOp, frozenset[UOp]]:
  """live_ranges of every node under root, in one bottom-up pass."""
  live: dict[UOp, frozenset[UOp]] = {}
  for n in root.toposort():
    s: frozenset[UOp] = frozenset().union(*(live[x] for x in n.src)) if n.src else frozenset()
    if n.op is Ops.RANGE: s = s | {n}
    elif n.op is Ops.END: s = s - {n.src[0]}
    live[n] = s
  return live


def range_id(r: UOp) -> int: return r.arg[0]


def lower_reduces(sink: UOp) -> UOp:
  """REDUCE(value, *ranges) -> accumulators. Innermost reduces are lowered first; reduces over the same loops
  (e.g. the copies an UPCAST makes) share one loop with one accumulator each."""
  reg_ids = itertools.count()
  output_loops = {n for n in sink.toposort() if n.op is Ops.RANGE and n.arg[1] == "global"}
  while True:
    nodes = sink.toposort()
    holds_reduce: dict[UOp, bool] = {}
    for n in nodes: holds_reduce[n] = any(holds_reduce[s] or s.op is Ops.REDUCE for s in n.src)
    # a reduce whose value holds no other REDUCE can be lowered now
    ready = [n for n in nodes if n.op is Ops.REDUCE and not holds_reduce[n.src[0]] and n.src[0].op is not Ops.REDUCE]
    if not ready: return sink
    first = ready[0]
    group = [r for r in ready if r.src[1:] == first.src[1:]]
    sink = sink.substitute(_lower_group(group, reg_ids, output_loops, live_range_map(sink)))


def _lower_group(group: list[UOp], reg_ids: itertools.count, output_loops: set[UOp], live: dict[UOp, frozenset[UOp]]) -> dict[UOp, UOp]:
  ranges = sorted(group[0].src[1:], key=range_id)
  # the inits run once per iteration of the loops outside these reduces (every output loop: the kernel
  # computes one reduction per output element)
  outer = sorted((set().union(*(live[r.src[0]] for r in group)) | output_loops) - set(ranges), key=range_id)
  accs = [UOp(Ops.DEFINE_REG, r.dtype.ptr(1, "reg"), (), next(reg_ids)).index(UOp.const(dtypes.int32, 0)) for r in group]
  inits = [(UOp(Ops.AFTER, acc.dtype, (acc, *outer)) if outer else acc).store(UOp.const(r.dtype, identity_element(r.arg, r.dtype)))
           for acc, r in zip(accs, group)]
  # loop ranges re-made so they start after the inits (the first), each next one inside the previous: they nest
  new_ranges: list[UOp] = []
  for r in ranges: new_ranges.append(r.replace(src=(r.src[0], *(new_ranges[-1:] or inits))))
  remap = dict(zip(ranges, new_ranges))
  updates = []
  for acc, red in zip(accs, group):
    ptr = UOp(Ops.AFTER, acc.dtype, (acc, *new_ranges))
    updates.append(ptr.store(_accumulate(red.arg, ptr.load(), red.src[0].substitute(remap))))
  end: UOp = UOp(Ops.END, dtypes.void, (new_ranges[-1], *updates))
  for r in reversed(new_ranges[:-1]): end = UOp(Ops.END, dtypes.void, (r, end))
  return {red: UOp(Ops.AFTER, acc.dtype, (acc, end)).load() for acc, red in zip(accs, group)}


def _accumulate(op: Ops, acc: UOp, value: UOp) -> UOp:
  """acc op value; a float sum of products becomes one fused multiply-add."""
  if op is Ops.ADD and value.op is Ops.MUL and dtypes.is_float(value.dtype): return UOp(Ops.MULACC, value.dtype, (*value.src, acc))
  return UOp(op, acc.dtype, (acc, value))


def close_loops(sink: UOp) -> UOp:
  """Close every loop the STOREs sit in with one END per loop, innermost first: stores in the same loops
  (the copies an UPCAST makes) share their ENDs."""
  live = live_range_map(sink)
  items: list[tuple[UOp, set[UOp]]] = [(s, set(live[s])) for s in sink.src]
  while any(live for _, live in items):
    innermost = max((r for _, live in items for r in live), key=range_id)
    inside = [(u, live) for u, live in items if innermost in live]
    items = [(u, live) for u, live in items if innermost not in live]
    end = UOp(Ops.END, dtypes.void, (innermost, *(u for u, _ in inside)))
    items.append((end, set().union(*(live for _, live in inside)) - {innermost}))
  return sink.replace(src=tuple(u for u, _ in items))


def _fold_gated_where(c: UOp, load: UOp, zero: UOp) -> UOp | None:
  """valid ? load(p, gate=valid, alt=0) : 0 is just the gated load."""
  if len(load.src) == 3 and load.src[1] is c and load.src[2] is zero: return load
  return None


_UNSIGNED_OF = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}


def _defined_shift(sh: UOp, x: UOp, s: UOp) -> UOp | None:
  """x << s and x >> s as torch defines them for every s: a shift by s < 0 or s >= the bit width gives 0 (`>>` of a negative
  signed value: -1). C and LLVM leave those undefined (they returned stale memory), so such an amount is kept in range here
  and the result chosen; amounts known to be in range (constants, masked values) stay a plain shift."""
  bits = x.dtype.itemsize * 8
  if not dtypes.is_int(x.dtype) or x.dtype.count != 1 or s.dtype.count != 1 or (0 <= s.vmin and s.vmax < bits): return None
  ok = (s if dtypes.is_unsigned(s.dtype) else s.cast(_UNSIGNED_OF[s.dtype.itemsize])) < bits  # negative -> huge
  amount = s & (bits - 1)  # in range: no undefined shift is ever executed
  if sh.op is Ops.SHR and not dtypes.is_unsigned(x.dtype): return x.alu(Ops.SHR, ok.where(amount, s.const_like(bits - 1)))
  return ok.where(x.alu(sh.op, amount), x.const_like(0))


pm_cleanup_plain = symbolic + PatternMatcher([
  (UPat((Ops.SHL, Ops.SHR), src=(UPat.var("x"), UPat.var("s")), name="sh"), _defined_shift),
  (UPat(Ops.WHERE, src=(UPat.var("c"), UPat(Ops.LOAD, name="load"), UPat(Ops.CONST, name="zero"))), _fold_gated_where),
  # a load gated by a condition that is always true needs no gate
  (UPat(Ops.LOAD, src=(UPat.var("p"), UPat.const(dtypes.bool, True), UPat.var("alt"))), lambda p, alt: p.load()),
  (UPat(Ops.STORE, src=(UPat.var("p"), UPat.var("v"), UPat.const(dtypes.bool, True)), name="st"), lambda p, v, st: p.store(v, arg=st.arg)),
])


pm_cleanup = pm_cleanup_plain + pm_gated


def cleanup(sink: UOp, gated: bool = True) -> UOp:
  """pm_cleanup; gated=False leaves out codegen/gated.py (elementwise kernels: see lower_kernel_with_dims)."""
  return graph_rewrite(sink, pm_cleanup if gated else pm_cleanup_plain)
