"""The output loops of a row kernel (schedule/rows.py: a reduction, then a loop over the row writing f(x[r, c], red[r])).

In the AST those loops are RANGEs of kind "row" that no REDUCE reads, numbered after the reduce loops, so the linearizer
opens them after the reductions closed: the reductions run once per row.

- `row_loop_opts`: each such loop is UPCAST by 4 where it divides: four neighbouring outputs per step, one 16-byte access
  on renderers with vector types (codegen/vectorize.py), four independent chains of work on the others.
- `spread_over_lanes`: on a GPU with GROUP (codegen/group.py) every lane of a row's group holds the reduced values after the
  final combine, so the loop is shared between the lanes: c = k*G + lane, neighbouring lanes write neighbouring outputs
  (coalesced), and each lane stores its own; a lane past the row's end reads a clamped element and stores nothing.
"""
from __future__ import annotations

from tinygrad.codegen.opt import Opt, OptOps, range_size
from tinygrad.uop.ops import Ops, UOp

ROW_VECTOR = 4


def row_loops(sink: UOp) -> list[UOp]:
  return sorted((n for n in sink.toposort() if n.op is Ops.RANGE and n.arg[1] == "row"), key=lambda r: r.arg[0])


def row_loop_opts(ast: UOp) -> list[Opt]:
  """UPCAST by ROW_VECTOR of each row loop whose (constant) size it divides."""
  return [Opt(OptOps.UPCAST, r.arg[0], ROW_VECTOR) for r in row_loops(ast) if (n := range_size(r)) is not None and n % ROW_VECTOR == 0]


def spread_over_lanes(sink: UOp, lane: UOp, g: int) -> UOp:
  """Each row loop c of size n -> k*g + lane with k a loop of ceil(n/g) steps; where g doesn't divide n, the steps past the
  end read element 0 and their stores are gated off. `lane`: the lane's thread index (a SPECIAL of size g)."""
  for r in row_loops(sink):
    n = r.src[0]
    exact = (size := range_size(r)) is not None and size % g == 0
    steps = UOp.const(r.dtype, size // g) if exact and size is not None else (n + (g - 1)) // g
    k = r.replace(src=(steps, *r.src[1:]))
    c = k * g + lane.cast(r.dtype)
    if exact:
      sink = sink.substitute({r: c})
      continue
    valid = c < n
    sink = sink.substitute({r: valid.where(c, UOp.const(r.dtype, 0))})
    gated = {s: s.replace(src=(s.src[0], s.src[1], valid if len(s.src) == 2 else s.src[2] & valid)) for s in sink.toposort()
             if s.op is Ops.STORE and k in s.toposort()}
    sink = sink.substitute(gated)
  return sink
