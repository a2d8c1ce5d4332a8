"""Integer dot products as one CPU instruction (renderer.dot_products; CPU renderers, after the opts, before `keep_lanes`).

A quantized matrix-vector product with integer x (llm's block_dot) sums, per weight block, int32 products of the weight's
integers (nibbles, bytes) and x's: SUM_i(q_i * x_i). x86's AVX-512 VNNI (and AVX-VNNI) adds such products into int32 lanes,
4 of an unsigned and a signed byte a lane (vpdpbusd) or 2 of int16s (vpdpwssd), 16 to 64 products an instruction, where
LLVM compiles the plain sum to widening multiplies and a horizontal sum per block. Here such a sum (a REDUCE over one loop of
known size, or the parts UNROLL made of it) is written out: its products, the loop index a constant in each, go in order
into the instruction's operands, `group` neighbours a lane, and the sum becomes the sum of the lanes:

  SUM_i(a_i * b_i)  ->  GEP(d, 0) + ... + GEP(d, L-1),  d = WMMA(VECTORIZE(a's), VECTORIZE(b's), 0)

which codegen/lanes.py keeps through the sum around it (each lane a whole number below 2^24, so exact in float32). A product
qualifies for an instruction when its factors' value ranges (uop/symbolic.py value_range) fit the instruction's element
types, so the narrowed elements hold the very same values. `DOT=0` keeps the plain sums.
"""
from __future__ import annotations

from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import ContextVar
from tinygrad.renderer import DotProduct
from tinygrad.uop.ops import Ops, UOp

DOT = ContextVar("DOT", 1)
EXACT_FLOAT_INT = 1 << 24  # ints up to this magnitude convert to float32 exactly
MAX_PRODUCTS = 256  # a longer sum (an integer matmul's) stays a loop: written out, each product is a node to build and compile


def _terms(u: UOp) -> list[UOp]:
  return [t for s in u.src for t in _terms(s)] if u.op is Ops.ADD else [u]


def _fits(x: UOp, dt: DType) -> bool: return dtypes.min(dt) <= x.vmin and x.vmax <= dtypes.max(dt)


def _factors(v: UOp, dp: DotProduct) -> tuple[UOp, UOp] | None:
  """A product's factors as (A's, B's) of the instruction dp, or None when they don't fit its element types."""
  if v.op is not Ops.MUL or v.dtype != dtypes.int32: return None
  a, b = v.src
  if _fits(a, dp.dtype_a) and _fits(b, dp.dtype_b): return a, b
  if _fits(b, dp.dtype_a) and _fits(a, dp.dtype_b): return b, a
  return None


def _narrow(x: UOp, dt: DType) -> UOp:
  """x (an int32 whose value fits dt) as a dt: the narrower int it was widened from where there is one."""
  if x.op is Ops.CAST and dtypes.is_int(x.src[0].dtype) and x.src[0].dtype.itemsize <= dt.itemsize and _fits(x.src[0], dt): x = x.src[0]
  return x.cast(dt)


def _sum_parts(u: UOp) -> list[UOp] | None:
  """The REDUCEs of an int32 sum over one loop of known size (UNROLL's parts: an ADD tree of them over the same loop)."""
  parts = _terms(u)
  r = parts[0].src[1:] if parts[0].op is Ops.REDUCE else ()
  if len(r) != 1 or r[0].src[0].op is not Ops.CONST: return None
  if any(p.op is not Ops.REDUCE or p.arg is not Ops.ADD or p.dtype != dtypes.int32 or p.src[1:] != r for p in parts): return None
  return parts


def _lane_bound(a: UOp, b: UOp) -> int: return int(max(abs(x * y) for x in (a.vmin, a.vmax) for y in (b.vmin, b.vmax)))


def _dot(u: UOp, dots: tuple[DotProduct, ...]) -> UOp | None:
  """The sum u as the lanes of chained dot-product instructions, or None when it isn't a sum of products that one of `dots`
  takes (each lane then a whole number below 2^24: exact in float32, for codegen/lanes.py)."""
  if (parts := _sum_parts(u)) is None or parts[0].src[1].src[0].arg * len(parts) > MAX_PRODUCTS: return None
  r = parts[0].src[1]
  for dp in dots:
    if any((f := _factors(p.src[0], dp)) is None for p in parts): continue
    factors = [f for p in parts if (f := _factors(p.src[0], dp)) is not None]
    n = r.src[0].arg * len(factors)
    if n % (dp.lanes * dp.group) or n // dp.lanes * max(_lane_bound(a, b) for a, b in factors) >= EXACT_FLOAT_INT: continue
    # element i*k + c of the sum UNROLL(k) split is its part c at index i: this order keeps neighbouring elements neighbours
    at = [r.const_like(i) for i in range(r.src[0].arg)]
    pairs = [(a.substitute({r: i}).simplify(), b.substitute({r: i}).simplify()) for i in at for a, b in factors]
    return _lanes_of(pairs, dp)
  return None


def _lanes_of(pairs: list[tuple[UOp, UOp]], dp: DotProduct) -> UOp:
  n = dp.lanes * dp.group
  acc = UOp(Ops.VECTORIZE, dtypes.int32.vec(dp.lanes), tuple(UOp.const(dtypes.int32, 0) for _ in range(dp.lanes)))
  for s in range(0, len(pairs), n):
    a = UOp(Ops.VECTORIZE, dp.dtype_a.vec(n), tuple(_narrow(x, dp.dtype_a) for x, _ in pairs[s:s + n]))
    b = UOp(Ops.VECTORIZE, dp.dtype_b.vec(n), tuple(_narrow(y, dp.dtype_b) for _, y in pairs[s:s + n]))
    acc = UOp(Ops.WMMA, acc.dtype, (a, b, acc), (dp.name, (dp.lanes, 1, dp.group), dp.dtype_a.name, dtypes.int32.name))
  lanes = [UOp(Ops.GEP, dtypes.int32, (acc,), (j,)) for j in range(dp.lanes)]
  out = lanes[0]
  for lane in lanes[1:]: out = out + lane
  return out


def dot_lanes(u: UOp) -> list[UOp] | None:
  """The lanes of a sum `byte_dots` made (an ADD tree of every lane of one dot-product chain), else None."""
  terms = _terms(u)
  d = terms[0].src[0] if terms[0].op is Ops.GEP else None
  if d is None or d.op is not Ops.WMMA or not dtypes.is_int(d.src[0].dtype.scalar()) or len(terms) != d.dtype.count: return None
  if any(t.op is not Ops.GEP or t.src[0] is not d for t in terms) or {t.arg for t in terms} != {(j,) for j in range(len(terms))}: return None
  return terms


def byte_dots(sink: UOp, dots: tuple[DotProduct, ...]) -> UOp:
  """Every int32 sum of byte products as dot-product instructions, where the renderer has them (see the module docstring)."""
  if not dots or not DOT.value: return sink
  replace: dict[UOp, UOp] = {}
  for u in sink.toposort():
    if u.op is Ops.CAST and u.src[0].dtype == dtypes.int32 and u.src[0] not in replace and (d := _dot(u.src[0], dots)) is not None:
      replace[u.src[0]] = d
  return sink.substitute(replace) if replace else sink
