"""fp8 (OCP e4m3fn / e5m2) for targets without an fp8 type: every fp8 value becomes its byte (uint8) and every conversion
becomes integer bit manipulation on float32, rendered by any C-style or LLVM renderer like other arithmetic.

A renderer opts in by putting `pm_fp8_as_bytes` into its extra_matcher. The rewrite is one walk over the whole kernel (a
rule on the SINK), because a CAST from fp8 must be known as such after its source has already been retyped to uint8.
  fp8 buffers, loads, stores, WHEREs, VECTORIZE/GEP  -> the same on uint8 (the bytes are the bits)
  CAST(fp8 -> T)        decode to float32 (exact), then to T
  CAST(T -> fp8)        to float32, then encode: round to nearest even, e4m3 saturates at +-448 and has no inf
                        (inf -> NaN), e5m2 overflows to inf, NaN -> 0x7F; exactly dtype.truncate_fp8 / alu.fp8_to_bits
  other ALU ops on fp8  decode the operands, compute in float32, encode the result
A float64 source is rounded to float32 first (double rounding: it can differ from truncate_fp8 by one fp8 step in rare
ties; the frontend casts through float32 anyway).
"""
from __future__ import annotations

from tinygrad.dtype import DType, PtrDType, dtypes
from tinygrad.uop.alu import fp8_to_bits
from tinygrad.uop.ops import GroupOp, Ops, UOp
from tinygrad.uop.rewrite import PatternMatcher, UPat

FP8 = (dtypes.fp8e4m3, dtypes.fp8e5m2)
_F32, _U32, _I32 = dtypes.float32, dtypes.uint32, dtypes.int32


def is_fp8(dt: DType) -> bool: return (dt.base if isinstance(dt, PtrDType) else dt).scalar() in FP8


def as_bytes(dt: DType) -> DType:
  """fp8 -> uint8 in a (pointer, vector) dtype; other dtypes unchanged."""
  if isinstance(dt, PtrDType): return as_bytes(dt.base).ptr(dt.size, dt.addrspace) if is_fp8(dt) else dt
  return dtypes.uint8.vec(dt.count) if dt.scalar() in FP8 else dt


def _u(v: int) -> UOp: return UOp.const(_U32, v)


def _shl(x: UOp, s: UOp) -> UOp: return x.alu(Ops.SHL, s)


def _shr(x: UOp, s: UOp) -> UOp: return x.alu(Ops.SHR, s)


def fp8_decode(byte: UOp, dt: DType) -> UOp:
  """float32 value of the fp8 bits in `byte` (uint8), as alu.fp8_from_bits."""
  exp_bits, man_bits = dtypes.finfo(dt)
  bias = (1 << (exp_bits - 1)) - 1
  b = byte.cast(_U32)
  e = _shr(b, _u(man_bits)) & _u((1 << exp_bits) - 1)
  m = b & _u((1 << man_bits) - 1)
  normal = (_shl(e + _u(127 - bias), _u(23)) | _shl(m, _u(23 - man_bits))).bitcast(_F32)
  subnormal = m.cast(_F32) * UOp.const(_F32, 2.0 ** (1 - bias - man_bits))
  mag = e.eq(_u(0)).where(subnormal, normal)
  if dt == dtypes.fp8e4m3: mag = (b & _u(0x7F)).eq(_u(0x7F)).where(UOp.const(_F32, float("nan")), mag)
  else: mag = e.eq(_u(0x1F)).where(m.eq(_u(0)).where(UOp.const(_F32, float("inf")), UOp.const(_F32, float("nan"))), mag)
  return (b & _u(0x80)).ne(_u(0)).where(mag.neg(), mag)


def _rne_shift(x: UOp, s: UOp | int) -> UOp:
  """x >> s rounded to nearest, ties to even (uint32; 1 <= s <= 31)."""
  su = s if isinstance(s, UOp) else _u(s)
  half_minus_one = _shl(_u(1), su - _u(1)) - _u(1)
  return _shr(x + half_minus_one + (_shr(x, su) & _u(1)), su)


def fp8_encode(x: UOp, dt: DType) -> UOp:
  """uint8 fp8 bits of float32 `x`, as alu.fp8_to_bits(truncate_fp8(x))."""
  exp_bits, man_bits = dtypes.finfo(dt)
  bias = (1 << (exp_bits - 1)) - 1
  u = x.bitcast(_U32)
  a = u & _u(0x7FFFFFFF)
  # normal results: drop 23-man_bits mantissa bits with rounding (a carry moves into the exponent), then rebias
  normal = _rne_shift(a, 23 - man_bits) - _u((127 - bias) << man_bits)
  # subnormal results: round(|x| * 2**(bias-1+man_bits)) from the float's mantissa with its hidden bit; the shift is
  # kept within [24-man_bits, 25] so it is always defined (25 and more round everything to 0)
  e = _shr(a, _u(23))
  top = 127 - bias  # the largest float32 exponent field below fp8's smallest normal
  e_c = (e < _u(top)).where(e, _u(top))
  shift = _u(151 - bias - man_bits) - e_c
  shift = (shift < _u(25)).where(shift, _u(25))
  subnormal = _rne_shift((a & _u(0x7FFFFF)) | _u(0x800000), shift)
  mag = (e < _u(top + 1)).where(subnormal, normal)
  # overflow: e4m3 saturates at 448 (0x7E), e5m2 goes to inf (0x7C); inf input: e4m3 NaN, e5m2 inf
  limit = 0x7E if dt == dtypes.fp8e4m3 else 0x7C
  mag = (mag < _u(limit)).where(mag, _u(limit))
  nan = a > _u(0x7F800000) if dt == dtypes.fp8e5m2 else a > _u(0x7F7FFFFF)  # e4m3 has no inf: +-inf -> NaN
  bits = nan.where(_u(0x7F), (_shr(u, _u(24)) & _u(0x80)) | mag)  # NaN -> 0x7F, no sign
  return bits.cast(dtypes.uint8)


def _scalarwise(u: UOp, src: tuple[UOp, ...], fn) -> UOp:
  """fn on every lane of vector operands (the conversions are written on scalars)."""
  n = u.dtype.count
  if n == 1: return fn(src)
  return UOp(Ops.VECTORIZE, as_bytes(u.dtype) if is_fp8(u.dtype) else u.dtype,
             tuple(fn(tuple(UOp(Ops.GEP, s.dtype.scalar(), (s,), (i,)) for s in src)) for i in range(n)))


def _lower(u: UOp, src: tuple[UOp, ...]) -> UOp:
  old = [s.dtype for s in u.src]
  if u.op is Ops.CONST and is_fp8(u.dtype): return UOp.const(dtypes.uint8, fp8_to_bits(float(u.arg), u.dtype))
  if u.op is Ops.CAST and (is_fp8(u.dtype) or is_fp8(old[0])):
    def cast(s: tuple[UOp, ...]) -> UOp:
      v = fp8_decode(s[0], old[0].scalar()) if is_fp8(old[0]) else s[0].cast(_F32)
      return fp8_encode(v, u.dtype.scalar()) if is_fp8(u.dtype) else v.cast(u.dtype.scalar())
    return _scalarwise(u, src, cast)
  if u.op in GroupOp.ALU and u.op is not Ops.WHERE and any(is_fp8(d) for d in old):
    def alu(s: tuple[UOp, ...]) -> UOp:
      ins = [fp8_decode(x, d.scalar()) if is_fp8(d) else x for x, d in zip(s, old)]
      out = UOp(u.op, _F32 if is_fp8(u.dtype) else u.dtype.scalar(), tuple(ins), u.arg)
      return fp8_encode(out, u.dtype.scalar()) if is_fp8(u.dtype) else out
    return _scalarwise(u, src, alu)
  if u.op is Ops.BITCAST and is_fp8(old[0]) and not is_fp8(u.dtype): return UOp(Ops.BITCAST, u.dtype, src, u.arg)
  return u.replace(dtype=as_bytes(u.dtype), src=src) if (is_fp8(u.dtype) or src != u.src) else u


def fp8_as_bytes(sink: UOp) -> UOp | None:
  """The kernel with fp8 values as bytes and conversions as integer arithmetic; None when it has no fp8."""
  nodes = sink.toposort()
  if not any(is_fp8(n.dtype) for n in nodes): return None
  new: dict[UOp, UOp] = {}
  for n in nodes: new[n] = _lower(n, tuple(new[s] for s in n.src))
  return new[sink]


pm_fp8_as_bytes = PatternMatcher([(UPat(Ops.SINK, name="sink"), fp8_as_bytes)])
