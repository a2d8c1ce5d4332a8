"""The output loops of a row kernel (schedule/rows.py: a reduction, then a loop over the row writing f(x[r, c], red[r])).

In the AST those loops are RANGEs of kind "row" that no REDUCE reads, numbered after the reduce loops, so the linearizer
opens them after the reductions closed: the reductions run once per row.

- `row_loop_opts`: each such loop is UPCAST by 4 where it divides: four neighbouring outputs per step, one 16-byte access
  on renderers with vector types (codegen/vectorize.py), four independent chains of work on the others.
- `gpu_row_opts`: on a GPU, the row's lanes and unrolling chosen so that the row is read once (below).
- `spread_over_lanes`: on a GPU with GROUP (codegen/group.py) every lane of a row's group holds the reduced values after the
  final combine, so the loop is shared between the lanes: c = k*G + lane, neighbouring lanes write neighbouring outputs
  (coalesced), and each lane stores its own; a lane past the row's end reads a clamped element and stores nothing.
"""
from __future__ import annotations

from tinygrad.codegen.opt import Opt, OptOps, range_size
from tinygrad.helpers import ContextVar
from tinygrad.uop.ops import Ops, UOp

ROW_VECTOR = 4
ROW_UNROLL_MAX = ContextVar("ROW_UNROLL_MAX", 16)  # a lane's share of a row up to 16 vectors (64 float32 registers) is unrolled and kept in registers
ROW_SHORT_STEPS = ContextVar("ROW_SHORT_STEPS", 8)  # vectors a lane keeps of a short row (row_lanes)
ROW_SHORT_LANES = 64  # ... up to this many lanes (more lanes: more partials every lane reads in the combine)
ROW_MIN_STEPS = 4  # ... and at least 4 vectors, so the block's lanes are not too many for a short row


def row_loops(sink: UOp) -> list[UOp]:
  return sorted((n for n in sink.toposort() if n.op is Ops.RANGE and n.arg[1] == "row"), key=lambda r: r.arg[0])


def row_loop_opts(ast: UOp) -> list[Opt]:
  """UPCAST by ROW_VECTOR of each row loop whose (constant) size it divides."""
  return [Opt(OptOps.UPCAST, r.arg[0], ROW_VECTOR) for r in row_loops(ast) if (n := range_size(r)) is not None and n % ROW_VECTOR == 0]


def row_lanes(n: int) -> int:
  """Lanes a GPU gives a row of n elements (gpu_row_opts), 0 where its fast path doesn't fit. Every lane reads all G partials
  of each reduction in the final combine (codegen/group.py), so G lanes cost G shared-memory reads a reduction per lane; a
  lane's share of the row lives in registers, 4 per vector (a softmax row of 16 vectors a lane took 166 registers a thread
  on the H200: one block an SM). So: the fewest lanes (up to ROW_SHORT_LANES) that keep a lane's share within
  ROW_SHORT_STEPS vectors, else the fewest within ROW_UNROLL_MAX. H200, softmax (bench/README.md): 1024 and 2048 columns
  0.78 / 0.85x torch with 16 vectors a lane, 0.94-1.03 / 0.99x with 8; 4096 columns 1.33x with 16, 1.22x with 8."""
  def fits(g: int, most: int) -> bool: return n % (ROW_VECTOR * g) == 0 and ROW_MIN_STEPS <= n // (ROW_VECTOR * g) <= most
  short = next((g for g in (16, 32, 64) if g <= ROW_SHORT_LANES and fits(g, ROW_SHORT_STEPS.value)), 0)
  return short or next((g for g in (16, 32, 64, 128, 256) if fits(g, ROW_UNROLL_MAX.value)), 0)


def gpu_row_opts(ast: UOp) -> list[Opt]:
  """A GPU row kernel whose reductions all read the row over the row loop's length n: G lanes per row (row_lanes), each lane
  reading 4 neighbours at a time (UNROLL 4: one 16-byte load where the renderer has them), the rest of its loop unrolled
  whole, and the row loop UPCAST by 4 (spread_over_lanes unrolls what is left of it). Every pass over the row (max, sum, the
  outputs) then reads the same elements through the same loads, which become one: the row is read from memory once and
  kept in registers. Measured on the H200 (bench/README.md): softmax over 16384 x 4096 223 us, as torch; 297 us with the
  heuristics' GROUP of 32 lanes, each pass reading the row again. [] where that doesn't fit (the heuristics serve those)."""
  loops = row_loops(ast)
  reds = [n for n in ast.toposort() if n.op is Ops.REDUCE]
  if len(loops) != 1 or not reds or (n := range_size(loops[0])) is None: return []
  inners = []
  for red in reds:
    rs = [r for r in red.src[1:] if r.op is Ops.RANGE]
    if len(rs) != 1 or range_size(rs[0]) != n: return []
    if rs[0] not in inners: inners.append(rs[0])
  if not (g := row_lanes(n)): return []
  steps = n // (ROW_VECTOR * g)
  opts = [o for r in sorted(inners, key=lambda r: r.arg[0]) for o in (Opt(OptOps.UNROLL, r.arg[0], ROW_VECTOR), Opt(OptOps.GROUP, r.arg[0], g),
                                                                      Opt(OptOps.UNROLL, r.arg[0], steps))]
  return opts + [Opt(OptOps.UPCAST, loops[0].arg[0], ROW_VECTOR)]


def spread_over_lanes(sink: UOp, lane: UOp, g: int) -> UOp:
  """Each row loop c of size n -> k*g + lane with k a loop of ceil(n/g) steps, unrolled where g divides n into at most
  ROW_UNROLL_MAX steps (the copies' loads then match the reductions' unrolled ones); where g doesn't divide n, the steps past
  the end read element 0 and their stores are gated off. `lane`: the lane's thread index (a SPECIAL of size g)."""
  for r in row_loops(sink):
    n = r.src[0]
    exact = (size := range_size(r)) is not None and size % g == 0
    steps = UOp.const(r.dtype, size // g) if exact and size is not None else (n + (g - 1)) // g
    k = r.replace(src=(steps, *r.src[1:]))
    if exact and size is not None and size // g <= ROW_UNROLL_MAX.value:
      copies: list[UOp] = []
      for st in sink.src:
        copies.extend([st.substitute({r: UOp.const(r.dtype, i * g) + lane.cast(r.dtype)}) for i in range(size // g)] if r in st.toposort() else [st])
      sink = sink.replace(src=tuple(copies))
      continue
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
