"""Keep an unrolled inner sum's lanes through the sum around it (CPU renderers, after the opts, before `lower_reduces`).

A quantized matrix-vector product scales each block's dot product once (llm's linear): out = SUM_b(d_b * SUM_i(q_bi * x_bi)).
UNROLL(i, k) makes the inner sum k independent partial sums P_0..P_k-1 (the vector lanes), combined by k-1 adds per block,
a horizontal sum that the CPU does once for every block of 32 weights. By distributivity

  SUM_b(d_b * (P_0 + ... + P_k-1) + t_b)  ==  SUM_b(d_b * P_0) + ... + SUM_b(d_b * P_k-1) + SUM_b(t_b)

so here each lane gets an outer accumulator of its own (one multiply-add per lane and block, which vectorizes) and the lanes
are added once per output. Only the order of the float additions changes.
"""
from __future__ import annotations

from tinygrad.codegen.dot import dot_lanes
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp


def _terms(u: UOp) -> list[UOp]:
  """The summands of an ADD tree."""
  return [t for s in u.src for t in _terms(s)] if u.op is Ops.ADD else [u]


def _lanes(u: UOp) -> list[UOp] | None:
  """The partial sums of an unrolled inner sum (an ADD tree of two or more ADD-REDUCEs over the same loops), or the lanes of
  a byte dot product converted to float (codegen/dot.py: each lane, and their sum, below 2^24, so converting them one by one
  is exact), else None."""
  if u.op is Ops.CAST and dtypes.is_float(u.dtype) and (dots := dot_lanes(u.src[0])) is not None: return [d.cast(u.dtype) for d in dots]
  parts = _terms(u)
  if len(parts) < 2 or any(p.op is not Ops.REDUCE or p.arg is not Ops.ADD or p.src[1:] != parts[0].src[1:] for p in parts): return None
  return parts


def _split_term(t: UOp) -> tuple[UOp | None, list[UOp]] | None:
  """A summand as (scale, lanes): the lanes alone (scale None) or times one factor."""
  if (lanes := _lanes(t)) is not None: return None, lanes
  if t.op is Ops.MUL:
    for i in (0, 1):
      if (lanes := _lanes(t.src[i])) is not None: return t.src[1 - i], lanes
  return None


def _distribute(red: UOp) -> UOp | None:
  """SUM over red's loops of (scale * lanes + rest) as one sum per lane plus the sum of the rest; None if nothing to do."""
  if red.arg is not Ops.ADD or red.src[0].dtype.count != 1: return None
  split, rest = None, []
  for t in _terms(red.src[0]):
    if split is None and (s := _split_term(t)) is not None: split = s
    else: rest.append(t)
  if split is None: return None
  scale, lanes = split
  ranges = red.src[1:]
  sums = [UOp(Ops.REDUCE, red.dtype, (lane if scale is None else scale * lane, *ranges), Ops.ADD) for lane in lanes]
  if rest:
    value = rest[0]
    for r in rest[1:]: value = value + r
    rest_sum = UOp(Ops.REDUCE, red.dtype, (value, *ranges), Ops.ADD)
    # a dot product's lanes after the rest, the float lanes before it: the order LLVM's SLP vectorizer packed best (it put the rest
    # in one 16-wide vector with 15 of vpdpwssd's 16 lanes through permutes; form 2's lanes: 1536x576 Q4_1 64 vs 78 us the other way)
    if lanes[0].op is Ops.CAST: sums.insert(0, rest_sum)
    else: sums.append(rest_sum)
  out = sums[0]
  for lane_sum in sums[1:]: out = out + lane_sum
  return out


def keep_lanes(sink: UOp) -> UOp:
  """Every sum whose value holds an unrolled inner sum (see the module docstring) distributed over that sum's lanes."""
  replace = {red: new for red in sink.toposort() if red.op is Ops.REDUCE and (new := _distribute(red)) is not None}
  return sink.substitute(replace) if replace else sink
