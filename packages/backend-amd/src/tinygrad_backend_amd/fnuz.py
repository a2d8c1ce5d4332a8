"""OCP e4m3 operands on gfx942's fp8 MFMA, which reads its bytes as e4m3fnuz (AMD CDNA3; ROCm's Matrix Instruction
Calculator lists its v_mfma_*_fp8 inputs as 'AMD fp8', not OCP).

An OCP e4m3fn byte b that is neither -0 (0x80) nor NaN (0x7F/0xFF) means exactly twice what the same byte means in
e4m3fnuz (bias 8 instead of 7, same subnormal spacing relative to it). So with -0 -> 0x00 and NaN -> 0x80 (FNUZ's only
NaN), the instruction reads A/2 and B/2, and
    D = 4 * mfma(fnuz(A), fnuz(B), C / 4)
is the OCP result: scaling by powers of two commutes with float32 rounding here, since the partial sums are multiples of
2**-18 (products of e4m3 values), far from float32's subnormals, and below its overflow. e5m2 is not offered this way:
FNUZ has no inf to map OCP's inf to.

The rewrite runs after codegen/fp8.py made fp8 values bytes (both are the AMD renderers' extra_matcher); the rewritten
WMMA's arg gains a marker so that it is rewritten once.
"""
from __future__ import annotations

from tinygrad.device.plugin import Ops, PatternMatcher, TensorCore, UOp, UPat, dtypes, pm_fp8_as_bytes

_DONE = "fnuz"


def _lane(x: UOp, i: int) -> UOp: return UOp(Ops.GEP, x.dtype.scalar(), (x,), (i,))


def fnuz_bytes(x: UOp) -> UOp:
  """The uint8 vector of OCP e4m3 bytes as e4m3fnuz bytes of half the value: -0 -> 0, NaN -> 0x80, the rest unchanged."""
  def one(b: UOp) -> UOp:
    nan = (b & UOp.const(dtypes.uint8, 0x7F)).eq(UOp.const(dtypes.uint8, 0x7F))
    return nan.where(UOp.const(dtypes.uint8, 0x80), b.eq(UOp.const(dtypes.uint8, 0x80)).where(UOp.const(dtypes.uint8, 0), b))
  return UOp(Ops.VECTORIZE, x.dtype, tuple(one(_lane(x, i)) for i in range(x.dtype.count)))


def _scaled(x: UOp, k: float) -> UOp:
  return UOp(Ops.VECTORIZE, x.dtype, tuple(_lane(x, i) * UOp.const(dtypes.float32, k) for i in range(x.dtype.count)))


def _ocp_on_fnuz(ctx, w: UOp) -> UOp | None:
  tcs: dict[str, TensorCore] = {tc.name: tc for tc in ctx.tensor_cores}
  tc = tcs.get(w.arg[0])
  if tc is None or not tc.fp8_fnuz or len(w.arg) != 4 or w.src[0].dtype.scalar() != dtypes.uint8: return None
  a, b, c = w.src
  inner = UOp(Ops.WMMA, w.dtype, (fnuz_bytes(a), fnuz_bytes(b), _scaled(c, 0.25)), (*w.arg, _DONE))
  return _scaled(inner, 4.0)


pm_amd_fp8 = pm_fp8_as_bytes + PatternMatcher([(UPat(Ops.WMMA, name="w"), _ocp_on_fnuz)])
