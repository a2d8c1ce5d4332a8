"""The linearizer: a lowered kernel graph -> a flat list of UOps with properly nested loops.

Each node's *context* is the ordered set of loops it lives in: the union of its sources' contexts,
plus itself for a RANGE, minus the closed loop for an END. Loops nest in range-id order (output loops
first, then reduce loops, inner reduces last). A node is emitted only when the open loops are exactly
its context, so loop-invariant work is hoisted out of inner loops automatically.
"""
from __future__ import annotations

import heapq

from tinygrad.uop.ops import Ops, UOp


def _context_of(nodes: list[UOp]) -> dict[UOp, tuple[UOp, ...]]:
  ctx: dict[UOp, tuple[UOp, ...]] = {}
  # output loops nest in id order, and every reduce loop sits inside all of them; a row kernel's loops over its outputs
  # (kind "row", codegen/rows.py) nest in id order inside them too
  output_loops = [n for n in nodes if n.op is Ops.RANGE and n.arg[1] == "global"]
  row_loops = [n for n in nodes if n.op is Ops.RANGE and n.arg[1] == "row"]
  for n in nodes:
    loops: set[UOp] = set()
    for s in n.src: loops.update(ctx[s])
    if n.op is Ops.RANGE:
      outside = output_loops + row_loops if n.arg[1] == "row" else output_loops
      loops.update([n, *(g for g in outside if g.arg[0] < n.arg[0])])
    if n.op is Ops.END: loops.discard(n.src[0])
    ctx[n] = tuple(sorted(loops, key=lambda r: r.arg[0]))
  return ctx


def _priority(u: UOp) -> int:
  """Among ready nodes of the same context: definitions first, then constants, then the rest in order."""
  if u.op is Ops.DEFINE_VAR and u.arg[0] == "core_id": return 1  # the thread index is the last parameter
  if u.op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR): return 0
  if u.op in (Ops.DEFINE_REG, Ops.DEFINE_LOCAL): return 2
  if u.op is Ops.CONST: return 3
  return 4


class LinearizeError(RuntimeError): pass


def linearize(sink: UOp) -> list[UOp]:
  nodes = sink.toposort()
  order = {n: i for i, n in enumerate(nodes)}
  ctx = _context_of(nodes)
  waiting = {n: len(set(n.src)) for n in nodes}
  users: dict[UOp, list[UOp]] = {n: [] for n in nodes}
  for n in nodes:
    for s in set(n.src): users[s].append(n)
  # ready nodes bucketed by the loop stack they need: plain nodes by their context, a RANGE by its parent's
  # context, an END by the context it closes
  ready: dict[tuple[UOp, ...], list[tuple[int, int, UOp]]] = {}
  ready_ranges: dict[tuple[UOp, ...], list[tuple[int, int, UOp]]] = {}
  ready_ends: dict[UOp, UOp] = {}

  # a loop whose END waits for a sibling loop's result must open after it: count what each loop waits for
  ends = {n.src[0]: n for n in nodes if n.op is Ops.END}
  waits_for = {r: sum(1 for x in end.toposort() if x.op is Ops.RANGE and x is not r) for r, end in ends.items()}

  def make_ready(n: UOp) -> None:
    if n.op is Ops.RANGE: heapq.heappush(ready_ranges.setdefault(ctx[n][:-1], []), (waits_for.get(n, 0), n.arg[0], n))
    elif n.op is Ops.END: ready_ends[n.src[0]] = n
    else: heapq.heappush(ready.setdefault(ctx[n], []), (_priority(n), order[n], n))

  for n in nodes:
    if waiting[n] == 0: make_ready(n)
  out: list[UOp] = []
  stack: tuple[UOp, ...] = ()

  def emit(n: UOp) -> None:
    out.append(n)
    for u in users[n]:
      waiting[u] -= 1
      if waiting[u] == 0: make_ready(u)

  while len(out) < len(nodes):
    if ready.get(stack):
      emit(heapq.heappop(ready[stack])[2])
    elif ready_ranges.get(stack):
      r = heapq.heappop(ready_ranges[stack])[2]
      emit(r)
      stack = ctx[r]
    elif stack and stack[-1] in ready_ends:
      emit(ready_ends.pop(stack[-1]))
      stack = stack[:-1]
    else:
      stuck = [n for n in nodes if n not in set(out)][:5]
      raise LinearizeError(f"can't order the kernel: open loops {[r.arg for r in stack]}, next waiting: {[(n.op, ctx[n]) for n in stuck]}")
  return out
