"""fp8 tensors (OCP e4m3fn and e5m2) on the session's device: every bit pattern decoded, and float32/float16 values (every
fp8 value, the midpoints between neighbours, values just off them, overflow, inf, NaN, -0) encoded, against a reference
written here from the formats' definitions (not from dtype.py/alu.py, which the PYTHON device itself uses).
CLANG/LLVM/HIP run the kernels of codegen/fp8.py (bytes and integer code); PYTHON interprets fp8 directly."""
import math
import struct

import pytest
from conftest import is_null_device
from tinygrad import Device, Tensor, dtypes
from tinygrad.renderer import UnsupportedDTypeError

FP8 = [dtypes.fp8e4m3, dtypes.fp8e5m2]
FORMAT = {dtypes.fp8e4m3: (4, 3, 7), dtypes.fp8e5m2: (5, 2, 15)}  # exponent bits, mantissa bits, bias


def has_fp8() -> bool: return dtypes.fp8e4m3 in Device.renderer(Device.DEFAULT).supported_dtypes


needs_fp8 = pytest.mark.skipif(is_null_device() or not has_fp8(), reason="the NULL device, or a renderer without fp8")


def ref_decode(bits: int, dt) -> float:
  e_bits, m_bits, bias = FORMAT[dt]
  sign = -1.0 if bits & 0x80 else 1.0
  e, m = (bits >> m_bits) & ((1 << e_bits) - 1), bits & ((1 << m_bits) - 1)
  if dt == dtypes.fp8e4m3 and bits & 0x7F == 0x7F: return math.nan  # e4m3fn: only S.1111.111 is NaN, no inf
  if dt == dtypes.fp8e5m2 and e == 31: return sign * math.inf if m == 0 else math.nan
  return sign * (m * 2.0 ** (1 - bias - m_bits) if e == 0 else (1 + m / (1 << m_bits)) * 2.0 ** (e - bias))


def ref_encode(x: float, dt) -> int:
  """Round to nearest, ties to the even bit pattern. e4m3 saturates at +-448 and maps +-inf to NaN; e5m2 overflows to inf
  (65536 stands in for inf as the next value after 57344); NaN is 0x7F; the sign of a zero result is kept."""
  if math.isnan(x) or (dt == dtypes.fp8e4m3 and math.isinf(x)): return 0x7F
  sign = 0x80 if math.copysign(1.0, x) < 0 else 0
  top = 0x7E if dt == dtypes.fp8e4m3 else 0x7B
  grid = [(ref_decode(b, dt), b) for b in range(top + 1)]
  if dt == dtypes.fp8e5m2: grid.append((65536.0, 0x7C))
  a = abs(x)
  if a >= grid[-1][0]: return sign | grid[-1][1]
  best = min(grid, key=lambda vb: (abs(vb[0] - a), vb[1] & 1))
  return sign | best[1]


def f32(x: float) -> float: return struct.unpack("f", struct.pack("f", x))[0] if abs(x) < 3.4e38 or not math.isfinite(x) else x


def probe_values(dt) -> list[float]:
  finite = sorted({ref_decode(b, dt) for b in range(256)} - {math.inf, -math.inf}, key=lambda v: (math.isnan(v), v))
  finite = [v for v in finite if not math.isnan(v)]
  xs = finite + [(a + b) / 2 for a, b in zip(finite, finite[1:])]
  xs += [v * (1 + 2 ** -20) for v in finite] + [v * (1 - 2 ** -20) for v in finite]
  xs += [1e-30, -1e-30, 2.0 ** -17, 2.0 ** -10, 464.0, 470.0, 480.0, 1000.0, 60000.0, 61440.0, 65536.0, 1e30, -1e30, 3e38]
  return [f32(x) for x in xs] + [math.inf, -math.inf, math.nan, -0.0]


@needs_fp8
@pytest.mark.parametrize("dt", FP8, ids=str)
def test_decode_every_bit_pattern(dt):
  got = Tensor(list(range(256)), dtype=dtypes.uint8).bitcast(dt).cast(dtypes.float32).tolist()
  for b, g in enumerate(got):
    want = ref_decode(b, dt)
    assert (math.isnan(g) and math.isnan(want)) or (g == want and math.copysign(1, g) == math.copysign(1, want)), (hex(b), g, want)


@needs_fp8
@pytest.mark.parametrize("dt", FP8, ids=str)
def test_encode_rounds_to_nearest_even_and_saturates(dt):
  xs = probe_values(dt)
  got = Tensor(xs, dtype=dtypes.float32).cast(dt).bitcast(dtypes.uint8).tolist()
  bad = [(x, hex(g), hex(ref_encode(x, dt))) for x, g in zip(xs, got) if g != ref_encode(x, dt)]
  assert not bad, f"{len(bad)} of {len(xs)} differ, first: {bad[:5]}"


@needs_fp8
@pytest.mark.parametrize("dt", FP8, ids=str)
def test_half_through_fp8_and_stored(dt):
  xs = [1.5, -3.25, 1e-3, 300.0, -0.0, 7.0]
  t = Tensor(xs, dtype=dtypes.float16).cast(dt).contiguous().realize()  # stored as fp8 in a buffer, loaded back below
  assert t.dtype == dt and t.nbytes() == len(xs) and len(t.bitcast(dtypes.uint8).tolist()) == len(xs)
  got = (t.cast(dtypes.float16) * 2).tolist()
  assert got == [2 * ref_decode(ref_encode(x, dt), dt) for x in xs]
  assert Tensor(xs).cast(dt).tolist() == [ref_decode(ref_encode(x, dt), dt) for x in xs]  # tolist of fp8 gives floats


@pytest.mark.compile_only
def test_renderers_without_fp8_say_so():
  """A renderer that can't express fp8 raises UnsupportedDTypeError naming it: never wrong numbers."""
  try: Tensor.empty(8).cast(dtypes.fp8e4m3).contiguous().realize()
  except UnsupportedDTypeError as e: assert "fp8" in str(e)


@needs_fp8
@pytest.mark.parametrize("dt", FP8, ids=str)
def test_math_movement_and_reduce_on_fp8(dt):
  """Ops on fp8 tensors compute in float32 and round the result back to fp8 (sums of a few fp8 values are exact in float32)."""
  xs = [0.3 * i - 5 for i in range(40)]
  q = [ref_decode(ref_encode(f32(x), dt), dt) for x in xs]
  a, b = Tensor(xs).cast(dt).contiguous().realize(), Tensor(xs[::-1]).cast(dt).contiguous().realize()
  rt = lambda v: ref_decode(ref_encode(v, dt), dt)  # noqa: E731
  assert (a + b).tolist() == [rt(x + y) for x, y in zip(q, q[::-1])]
  assert (a < b).tolist() == [x < y for x, y in zip(q, q[::-1])] and a.max().item() == max(q)
  assert a.pad((2, 3)).tolist() == [0.0] * 2 + q + [0.0] * 3
  assert (a > 0).where(a, b).tolist() == [x if x > 0 else y for x, y in zip(q, q[::-1])]
  assert a.reshape(5, 8).T.contiguous().flatten().tolist() == [q[r * 8 + c] for c in range(8) for r in range(5)]
