"""Transcendental functions as plain arithmetic, for renderers whose native ones are library calls.

A CPU renderer's EXP2 and LOG2 are calls to libm's exp2f and log2f: one element per call, so a loop holding them never
becomes SIMD code, and softmax, SiLU or a log-softmax run at a fraction of what the memory allows. `pm_fast_transcendentals`
rewrites float32 EXP2 and LOG2 into polynomials plus exponent-bit arithmetic (adds, multiplies, FMAs, compares, integer
shifts and masks, bitcasts; no float<->int conversion, which ours makes exact over int64 and AVX2 cannot vectorize).

exp2(x) = 2**k * 2**f with k = round(x) and f = x - k in [-0.5, 0.5]; 2**f is a degree-6 polynomial (Cephes' exp2f
coefficients); 2**k is applied in two halves 2**(k>>1) * 2**(k-(k>>1)) so that every k whose result is finite or
subnormal needs no special case: x is clamped to [-150, 128] first (below -150 the result rounds to 0, at 128 it overflows
to inf, exactly as exp2 does). log2(x) = e + log2(m) with x = m * 2**e, m in [sqrt(1/2), sqrt(2)) read from the bits
(subnormals scaled by 2**23 first), and ln(m) = f - f*f/2 + f**3 * P(f), f = m - 1 (Cephes' logf). Both are within 1 ulp
of the correctly rounded result on float32 (tests/test_fast_transcendentals.py in backend-cpu checks the whole range);
NaN, infinities, zeros and negative inputs give what libm gives.
"""
from __future__ import annotations

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp
from tinygrad.uop.rewrite import PatternMatcher, UPat

# 2**f - 1 = f * P(f) on [-0.5, 0.5], P's coefficients highest power first (Cephes exp2f.c)
EXP2_POLY = (1.535336188319500e-4, 1.339887440266574e-3, 9.618437357674640e-3, 5.550332471162809e-2, 2.402264791363012e-1,
             6.931472028550421e-1)


MAGIC = 12582912.0  # 1.5 * 2**23: adding it rounds a float32 of magnitude < 2**22 to an integer, held in the low mantissa bits
MAGIC_BITS = 0x4B400000  # the bits of MAGIC


def _f32(v: float) -> UOp: return UOp.const(dtypes.float32, v)
def _i32(v: int) -> UOp: return UOp.const(dtypes.int32, v)


def _round(x: UOp) -> tuple[UOp, UOp]:
  """(round(x) as float32, as int32) for |x| < 2**22, without a float->int conversion (ours is exact over int64, which AVX2
  cannot vectorize): x + MAGIC rounds x to an integer (to even), whose bits are MAGIC_BITS + round(x)."""
  t = x + _f32(MAGIC)
  return t - _f32(MAGIC), UOp(Ops.SUB, dtypes.int32, (t.bitcast(dtypes.int32), _i32(MAGIC_BITS)))


def _scale(p: UOp, k: UOp) -> UOp:
  """p * 2**k for an int32 k in [-150, 128]: two multiplies by normal floats 2**(k>>1) and 2**(k-(k>>1)) (exponents in
  [-75, 64]), p first, so a subnormal result rounds once and only a result past the float range becomes inf."""
  def normal(e: UOp) -> UOp: return UOp(Ops.SHL, dtypes.int32, (e + 127, _i32(23))).bitcast(dtypes.float32)
  k_lo = UOp(Ops.SHR, dtypes.int32, (k, _i32(1)))
  return p * normal(k_lo) * normal(UOp(Ops.SUB, dtypes.int32, (k, k_lo)))


def _clamp(x: UOp) -> UOp:
  # below -150 the result rounds to 0, from 128 it is inf; NaN compares false and stays NaN (the caller passes it through)
  return (x < -150.0).where(_f32(-150.0), (x > 128.0).where(_f32(128.0), x))


def exp2_f32(x: UOp) -> UOp:
  """exp2 of a scalar float32 UOp, in arithmetic only (see the module doc)."""
  kf, k = _round(_clamp(x))
  f = _clamp(x) - kf
  p = _f32(EXP2_POLY[0])
  for c in (*EXP2_POLY[1:], 1.0): p = UOp(Ops.MULACC, dtypes.float32, (p, f, _f32(c)))
  return x.ne(x).where(x, _scale(p, k))


def exp2_integral_f32(x: UOp) -> UOp:
  """exp2 of a float32 that holds an integer (exp's 2**n): the exponent bits alone, exactly."""
  return x.ne(x).where(x, _scale(_f32(1.0), _round(_clamp(x))[1]))


def is_integral(u: UOp) -> bool:
  """u's value is always an integer (or inf/NaN): a TRUNC, an int converted to float, integral constants, a choice of those."""
  if u.op is Ops.TRUNC or (u.op is Ops.CAST and dtypes.is_int(u.src[0].dtype)): return True
  if u.op is Ops.CONST: return isinstance(u.arg, (int, float)) and float(u.arg).is_integer()
  if u.op is Ops.WHERE: return is_integral(u.src[1]) and is_integral(u.src[2])
  return False


def _rewrite_exp2(e: UOp) -> UOp: return exp2_integral_f32(e.src[0]) if is_integral(e.src[0]) else exp2_f32(e.src[0])


# ln(1+f) = f - f*f/2 + f**3 * P(f) for f in [sqrt(1/2)-1, sqrt(2)-1), P's coefficients highest power first (Cephes logf.c)
LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
            2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
LOG2E = 1.4426950408889634
SQRT_HALF = 0.70710678118654752440
MIN_NORMAL = 1.17549435e-38


def _bits_op(op: Ops, a: UOp, b: int) -> UOp: return UOp(op, dtypes.int32, (a, _i32(b)))


def log2_f32(x: UOp) -> UOp:
  """log2 of a scalar float32 UOp, in arithmetic only (see the module doc)."""
  sub = x < MIN_NORMAL  # (also true for 0 and negatives: replaced at the end)
  xs = sub.where(x * _f32(8388608.0), x)  # 2**23: a subnormal becomes normal, exactly
  bits = xs.bitcast(dtypes.int32)
  e = _bits_op(Ops.SUB, _bits_op(Ops.AND, _bits_op(Ops.SHR, bits, 23), 0xFF), 126)  # x = m * 2**e with m in [0.5, 1)
  e = UOp(Ops.SUB, dtypes.int32, (e, sub.where(_i32(23), _i32(0))))
  m = _bits_op(Ops.OR, _bits_op(Ops.AND, bits, 0x007FFFFF), 0x3F000000).bitcast(dtypes.float32)
  low = m < SQRT_HALF  # m in [sqrt(1/2), sqrt(2)) instead: f = m - 1 stays small on both sides of 1
  f = low.where(m + m, m) - _f32(1.0)
  e = UOp(Ops.SUB, dtypes.int32, (e, low.where(_i32(1), _i32(0))))
  p = _f32(LOG_POLY[0])
  for c in LOG_POLY[1:]: p = UOp(Ops.MULACC, dtypes.float32, (p, f, _f32(c)))
  z = f * f
  y = UOp(Ops.MULACC, dtypes.float32, (z * f, p, z * _f32(-0.5)))  # ln(m) = f + y, y = f**3 P(f) - f*f/2
  # log2(m) = (f + y) * log2(e) = (f + y) + (f + y) * (log2(e) - 1): the small products first, then y, f and e, biggest last
  out = UOp(Ops.MULACC, dtypes.float32, (y, _f32(LOG2E - 1), f * _f32(LOG2E - 1))) + y + f + _bits_to_float(e)
  inf = _f32(float("inf"))
  out = x.eq(inf).where(inf, out)
  out = x.eq(_f32(0.0)).where(_f32(float("-inf")), out)
  return (x.ne(x) | (x < 0.0)).where(_f32(float("nan")), out)


def _bits_to_float(e: UOp) -> UOp:
  """An int32 of small magnitude as a float32, exactly, without a conversion: (MAGIC + e) - MAGIC in float arithmetic."""
  return UOp(Ops.ADD, dtypes.int32, (e, _i32(MAGIC_BITS))).bitcast(dtypes.float32) - _f32(MAGIC)


pm_fast_transcendentals = PatternMatcher([
  (UPat(Ops.EXP2, dtype=dtypes.float32, name="e"), _rewrite_exp2),
  (UPat(Ops.LOG2, dtype=dtypes.float32, name="e"), lambda e: log2_f32(e.src[0])),
])
