"""The elementwise Tensor API against numpy (float64 references): values, result dtypes, python-scalar broadcasting and
reflected operators, special values, gradients of the numerically delicate functions, and errors. Runs on every DEV;
tensors stay tiny for the PYTHON interpreter."""
import math

import numpy as np
import pytest
from tinygrad import Tensor, dtypes

_erf = np.vectorize(math.erf)


def same(t: Tensor, expected, dtype=None, rtol=2e-6, atol=0.0):
  """Values (NaN where expected has NaN) and, when given, the dtype."""
  if dtype is not None: assert t.dtype == dtype, f"dtype {t.dtype!r}, expected {dtype!r}"
  out, exp = t.numpy(), np.asarray(expected)
  assert out.shape == exp.shape, f"shape {out.shape}, expected {exp.shape}"
  if out.dtype == np.bool_ or np.issubdtype(out.dtype, np.integer): np.testing.assert_array_equal(out, exp)
  else: np.testing.assert_allclose(out.astype(np.float64), exp.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def spread(lo: float, hi: float, n: int = 12) -> np.ndarray:
  """n float32 values log-spaced on both sides of 0 when lo > 0 (so small magnitudes are covered), else linear."""
  if lo > 0:
    m = np.exp(np.linspace(np.log(lo), np.log(hi), n // 2))
    return np.concatenate([m, -m]).astype(np.float32)
  return np.linspace(lo, hi, n).astype(np.float32)


def sigmoid(x): return 1 / (1 + np.exp(-x))
def softplus(x): return np.logaddexp(0, x)
def gelu_tanh(x): return x * sigmoid(2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))


# name, numpy reference (float64), inputs: every value inside the function's domain
UNARY = [
  ("exp", np.exp, spread(-20, 20)), ("exp2", np.exp2, spread(-30, 30)), ("log", np.log, np.abs(spread(1e-6, 1e6))),
  ("log2", np.log2, np.abs(spread(1e-6, 1e6))), ("log10", np.log10, np.abs(spread(1e-3, 1e6))), ("sqrt", np.sqrt, np.abs(spread(1e-4, 1e4))),
  ("rsqrt", lambda x: 1 / np.sqrt(x), np.abs(spread(1e-4, 1e4))), ("expm1", np.expm1, spread(1e-7, 15)), ("log1p", np.log1p, spread(1e-7, 0.9)),
  ("sin", np.sin, spread(-9, 9)), ("cos", np.cos, np.array([0, 0.1, 0.5, 1, 2, 3, -3, 4, 6, -6, 10, 1e-4], np.float32)),
  ("tan", np.tan, spread(-1.4, 1.4)), ("asin", np.arcsin, spread(1e-7, 1)), ("acos", np.arccos, spread(1e-7, 1)), ("atan", np.arctan, spread(1e-7, 1e8)),
  ("sinh", np.sinh, spread(1e-7, 80)), ("cosh", np.cosh, spread(1e-7, 80)), ("tanh", np.tanh, spread(1e-7, 20)),
  ("asinh", np.arcsinh, spread(1e-7, 1e8)), ("acosh", np.arccosh, np.array([1, 1 + 1e-6, 1.001, 1.5, 2, 3, 10, 100, 5000, 1e8], np.float32)),
  ("atanh", np.arctanh, spread(1e-7, 0.999)), ("erf", _erf, spread(1e-7, 6)),
  ("sigmoid", sigmoid, spread(-80, 80)), ("logsigmoid", lambda x: -softplus(-x), spread(-80, 80)), ("softplus", softplus, spread(-80, 80)),
  ("silu", lambda x: x * sigmoid(x), spread(-40, 40)), ("swish", lambda x: x * sigmoid(x), spread(-5, 5)),
  ("gelu", gelu_tanh, spread(-8, 8), 4e-6),  # its inner polynomial of float32 x is only that well conditioned for x << 0 ("quick_gelu", lambda x: x * sigmoid(1.702 * x), spread(-8, 8)),
  ("mish", lambda x: x * np.tanh(softplus(x)), spread(-20, 20)), ("softsign", lambda x: x / (1 + np.abs(x)), spread(-9, 9)),
  ("relu", lambda x: np.maximum(x, 0), spread(-3, 3)), ("relu6", lambda x: np.clip(x, 0, 6), spread(-9, 9)),
  ("elu", lambda x: np.where(x > 0, x, np.expm1(x)), spread(1e-6, 9)), ("celu", lambda x: np.where(x > 0, x, np.expm1(x)), spread(1e-6, 9)),
  ("selu", lambda x: 1.0507 * np.where(x > 0, x, 1.67326 * np.expm1(x)), spread(1e-6, 9)),
  ("leaky_relu", lambda x: np.where(x > 0, x, 0.01 * x), spread(-3, 3)), ("hardtanh", lambda x: np.clip(x, -1, 1), spread(-3, 3)),
  ("hardsigmoid", lambda x: np.clip(x / 6 + 0.5, 0, 1), spread(-5, 5)), ("hardswish", lambda x: x * np.clip(x + 3, 0, 6) / 6, spread(-5, 5)),
  ("square", np.square, spread(-9, 9)), ("reciprocal", lambda x: 1 / x, spread(1e-3, 1e3)), ("neg", np.negative, spread(-9, 9)),
  ("abs", np.abs, spread(-9, 9)), ("sign", np.sign, np.array([-2, -0.5, 0, 0.5, 3], np.float32)),
  ("trunc", np.trunc, spread(-4.5, 4.5, 10)), ("floor", np.floor, spread(-4.5, 4.5, 10)), ("ceil", np.ceil, spread(-4.5, 4.5, 10)),
  ("round", np.round, np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -2.6, 2.4, 1e9 + 0.5, 8388609], np.float32)),
]


@pytest.mark.parametrize("case", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float32(case):
  """Every value within 1e-6 relative of the float64 result."""
  name, ref, x, rtol = (*case, 1e-6)[:4]
  with np.errstate(all="ignore"): expected = ref(x.astype(np.float64))
  same(getattr(Tensor(x), name)(), expected, dtypes.float32, rtol=rtol, atol=1e-37)


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e30, -1e30, 88.6, -88.6, 1.0], np.float32)
SPECIAL_REF = {
  "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "asin": np.arcsin,
  "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
  "atanh": np.arctanh, "erf": _erf, "sigmoid": sigmoid, "softplus": softplus, "relu": lambda x: np.where(x > 0, x, np.where(np.isnan(x), x, 0)),
  "trunc": np.trunc, "floor": np.floor, "ceil": np.ceil, "round": np.round, "abs": np.abs, "sign": lambda x: np.where(np.isnan(x), 0, np.sign(x)),  # torch.sign(NaN) is 0
}


@pytest.mark.parametrize("name", sorted(SPECIAL_REF))
def test_special_values(name):
  """inf, -inf, NaN, signed zeros, tiny and huge: the same as numpy (relu keeps NaN like torch)."""
  with np.errstate(all="ignore"): expected = SPECIAL_REF[name](SPECIAL.astype(np.float64)).astype(np.float32)
  same(getattr(Tensor(SPECIAL), name)(), expected, rtol=1e-6)


def test_cos_tan_near_the_zeros_of_cos():
  """cos reduces x by n pi/2 first: relative accuracy next to its zeros (tan(11) was 1.5e-5 off), up to x of about 6400 in
  float32, and in float64; beyond, and for NaN/inf, as before."""
  x = np.array([11, 33, 55, 344, 355, 710, 1.5707964, -4.712389, 6433.0, 1e-4, 0.5, -3.0], np.float32)
  same(Tensor(x).cos(), np.cos(x.astype(np.float64)), dtypes.float32, rtol=1e-6)
  same(Tensor(x).tan(), np.tan(x.astype(np.float64)), dtypes.float32, rtol=1e-6)
  same(Tensor([11, 33, 710]).tan(), np.tan(np.float64([11, 33, 710])), dtypes.float32, rtol=1e-6)  # ints compute in float32
  xd = np.array([11, 1e6, 7.0e8, 1.5707963267948966, 0.1], np.float64)
  same(Tensor(xd).cos(), np.cos(xd), dtypes.float64, rtol=1e-14)
  same(Tensor(np.array([11, 33], np.float16)).cos(), np.cos(np.float64([11, 33])).astype(np.float16), dtypes.float16, rtol=1e-3)
  same(Tensor(np.float32([1e6, 3e30])).cos(), np.cos(np.float64(np.float32([1e6, 3e30]))), dtypes.float32, atol=1e-6)
  assert np.isnan(Tensor([np.nan, np.inf, -np.inf]).cos().numpy()).all()


def test_isnan_isinf_isfinite():
  x = Tensor(SPECIAL)
  same(x.isnan(), np.isnan(SPECIAL), dtypes.bool)
  same(x.isinf(), np.isinf(SPECIAL), dtypes.bool)
  same(x.isinf(detect_negative=False), np.isposinf(SPECIAL))
  same(x.isinf(detect_positive=False), np.isneginf(SPECIAL))
  same(x.isfinite(), np.isfinite(SPECIAL), dtypes.bool)
  same(Tensor([1, 2]).isnan(), [False, False], dtypes.bool)
  same(Tensor([1, 2]).isinf(), [False, False], dtypes.bool)


def test_unary_of_ints_gives_float():
  for name in ("exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "erf", "atan", "reciprocal", "expm1", "log1p"):
    assert getattr(Tensor([1, 2]), name)().dtype == dtypes.float32, name
  same(Tensor([1, 4, 9]).sqrt(), [1, 2, 3], dtypes.float32)
  for name in ("abs", "neg", "floor", "ceil", "round", "trunc", "sign", "relu", "square"):
    assert getattr(Tensor([1, -2]), name)().dtype == dtypes.int32, name
  same(Tensor([-3, 0, 5]).abs(), [3, 0, 5], dtypes.int32)
  same(Tensor([-3, 0, 5]).sign(), [-1, 0, 1], dtypes.int32)
  same(Tensor([-3, 0, 5]).relu(), [0, 0, 5], dtypes.int32)


def test_half_math_rounds_once():
  x = np.array([-3, -0.5, 0.25, 1, 2.5], np.float16)
  out = Tensor(x).tanh()
  assert out.dtype == dtypes.float16
  np.testing.assert_allclose(out.numpy().astype(np.float64), np.tanh(x.astype(np.float64)), rtol=1e-3)
  np.testing.assert_allclose(Tensor(x).erf().numpy().astype(np.float64), _erf(x.astype(np.float64)), rtol=1e-3, atol=1e-4)


# ---- binary arithmetic and python scalars

def test_scalar_dtype_rules():
  i8, u8, f16 = Tensor([1, 2], dtype=dtypes.int8), Tensor([1, 2], dtype=dtypes.uint8), Tensor([1, 2], dtype=dtypes.float16)
  b = Tensor([True, False])
  assert (i8 + 1).dtype == dtypes.int8 and (1 + i8).dtype == dtypes.int8
  assert (i8 + 1.5).dtype == dtypes.float32 and (i8 * True).dtype == dtypes.int8
  assert (u8 - 1).dtype == dtypes.uint8 and (f16 * 2).dtype == dtypes.float16 and (f16 + 2.5).dtype == dtypes.float16
  assert (b + 1).dtype == dtypes.int32 and (b * 1.5).dtype == dtypes.float32 and (b & True).dtype == dtypes.bool
  assert (i8 / 2).dtype == dtypes.float32 and (Tensor([1, 2]) / Tensor([2, 4])).dtype == dtypes.float32
  assert (i8 + Tensor([1, 2], dtype=dtypes.int16)).dtype == dtypes.int16
  assert (u8 + i8).dtype == dtypes.int16 and (f16 + Tensor([1.0, 2.0])).dtype == dtypes.float32
  assert (Tensor([1, 2]) + Tensor([1.0, 2.0], dtype=dtypes.float16)).dtype == dtypes.float16
  same(u8 - 3, [254, 255], dtypes.uint8)
  same(Tensor([100, 120], dtype=dtypes.int8) + 100, [-56, -36], dtypes.int8)


def test_reflected_operators():
  a = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
  t = Tensor(a)
  same(2 + t, 2 + a); same(2 - t, 2 - a); same(2 * t, 2 * a); same(2 / t, 2 / a)
  same(2 ** t, 2.0 ** a); same(2.5 % t, np.mod(2.5, a)); same(-t, -a)
  i = Tensor([[1, 2, 3], [4, 5, 6]])
  same(7 // i, [[7, 3, 2], [1, 1, 1]], dtypes.int32)
  same(7 % i, [[0, 1, 1], [3, 2, 1]], dtypes.int32)
  same(6 & i, [[0, 2, 2], [4, 4, 6]]); same(6 | i, [[7, 6, 7], [6, 7, 6]]); same(6 ^ i, [[7, 4, 5], [2, 3, 0]])
  same(1 << i, [[2, 4, 8], [16, 32, 64]]); same(256 >> i, [[128, 64, 32], [16, 8, 4]])
  same(2 ** i, [[2, 4, 8], [16, 32, 64]], dtypes.int32)
  same(abs(Tensor([-1.5, 2.0])), [1.5, 2.0])


def test_broadcasting():
  a, b = np.arange(6, dtype=np.float32).reshape(2, 3, 1), np.arange(4, dtype=np.float32).reshape(4) + 1
  same(Tensor(a) * Tensor(b), a * b)
  same(Tensor(a) - Tensor(b), a - b)
  same(Tensor(a).maximum(Tensor(b)), np.maximum(a, b))
  same((Tensor(a) < Tensor(b)), a < b, dtypes.bool)
  with pytest.raises(ValueError): Tensor.ones(2, 3) + Tensor.ones(4)


def test_division_modes():
  a = np.array([-7, -6, -5, -1, 0, 1, 5, 6, 7], np.int32)
  b = np.array([2, -2, 3, -3, 5, 4, -4, 3, -2], np.int32)
  ta, tb = Tensor(a), Tensor(b)
  trunc = (np.trunc(a / b)).astype(np.int32)
  same(ta // tb, np.floor_divide(a, b), dtypes.int32)  # python's //
  same(ta.idiv(tb), trunc, dtypes.int32)  # tinygrad's idiv truncates toward zero (like C)
  same(ta.div(tb, rounding_mode="trunc"), trunc, dtypes.int32)
  same(ta.div(tb, rounding_mode="floor"), np.floor_divide(a, b), dtypes.int32)
  same(ta % tb, np.mod(a, b), dtypes.int32)  # python's %: the sign of the divisor
  same(ta.fmod(tb), np.fmod(a, b), dtypes.int32)
  same(ta / tb, a / b, dtypes.float32)
  same(ta.div(tb), a / b, dtypes.float32)
  fa, fb = a.astype(np.float32) + 0.5, b.astype(np.float32)
  same(Tensor(fa) // Tensor(fb), np.floor(fa / fb), dtypes.float32)
  same(Tensor(fa).idiv(Tensor(fb)), np.trunc(fa / fb), dtypes.float32)
  same(-7 // Tensor([2, -2]), [-4, 3], dtypes.int32)
  same(Tensor(fa).div(Tensor(fb), rounding_mode="floor"), np.floor(fa / fb), dtypes.float32)
  same(Tensor(fa) % Tensor(fb), np.mod(fa, fb), dtypes.float32)
  same(Tensor(fa).fmod(Tensor(fb)), np.fmod(fa, fb), dtypes.float32)
  same(Tensor([5.0, -5.0, 0.0]) / 0, [np.inf, -np.inf, np.nan])
  same(Tensor([250, 7], dtype=dtypes.uint8) // 3, [83, 2], dtypes.uint8)
  same(Tensor([250, 7], dtype=dtypes.uint8) % 3, [1, 1], dtypes.uint8)
  with pytest.raises(RuntimeError): ta.div(tb, rounding_mode="round")


def test_float_floor_division_of_an_underflowing_quotient():
  # x // inf and tiny // huge: a/b rounds to +-0, but the exact quotient of a negative one floors to -1 (numpy, torch, Python)
  a = np.array([-2.0, 0.5, -1e-30, 1e-30, 3.0], np.float32)
  for b in (np.inf, -np.inf, 1e30, -1e30):
    same(Tensor(a) // float(b), np.floor_divide(a.astype(np.float64), np.float32(b)).astype(np.float32), dtypes.float32)
  same(Tensor(a).div(Tensor(np.full(5, np.inf, np.float32)), rounding_mode="floor"), [-1.0, 0.0, -1.0, 0.0, 0.0], dtypes.float32)
  same(Tensor([-2.0, 2.0], dtype=dtypes.float16) // 1e10, [-1.0, 0.0], dtypes.float16)  # 1e10 is inf in float16


def test_float_floor_division_of_an_infinite_dividend():
  # inf // finite is NaN (numpy, torch: fmod(inf, b) is NaN); inf // 0 stays inf and x // inf is untouched
  a = np.array([np.inf, -np.inf, np.inf, -np.inf, np.inf, -2.0, 2.0], np.float32)
  b = np.array([2.0, -3.0, 0.0, 0.0, np.inf, np.inf, -np.inf], np.float32)
  with np.errstate(all="ignore"): ref = np.floor_divide(a, b)
  same(Tensor(a) // Tensor(b), ref, dtypes.float32)
  same(Tensor([np.inf, -np.inf], dtype=dtypes.float16) // 2, [np.nan, np.nan], dtypes.float16)


def test_mod_float_exactness():
  a = np.array([5.3, -5.3, 0.3, 7.0, -7.0, 1e6 + 0.25], np.float32)
  b = np.array([2.0, 2.0, 0.1, -0.5, 0.5, 3.0], np.float32)
  same(Tensor(a).fmod(Tensor(b)), np.fmod(a, b), rtol=1e-5, atol=1e-6)
  same(Tensor(a) % Tensor(b), np.mod(a, b), rtol=1e-5, atol=1e-6)


def test_pow():
  x = np.array([-3.0, -2.0, -0.5, 0.0, 0.5, 2.0, 3.0], np.float32)
  t = Tensor(x)
  for e in (0, 1, 2, 3, -1, -2, 5, 0.5, 1.5, 2.5, -0.5, 2.3, 0.0, 2.0):
    with np.errstate(all="ignore"): same(t ** e, np.power(x.astype(np.float64), e), rtol=2e-6)
  with np.errstate(all="ignore"):
    e = np.array([2.0, 3.0, 0.5, 0.0, -1.0, 2.5, -2.0], np.float32)
    same(t ** Tensor(e), np.power(x.astype(np.float64), e.astype(np.float64)), rtol=2e-6)
  same(Tensor([0.0, np.nan, 1.0]) ** Tensor([0.0, 0.0, np.nan]), [1.0, 1.0, 1.0])  # 0**0, nan**0, 1**nan
  same(Tensor([-8.0]) ** (1 / 3), [np.nan])


def test_int_pow_is_exact_and_stays_int():
  b = np.array([-3, -2, 0, 1, 2, 7, 13], np.int32)
  same(Tensor(b) ** 3, b ** 3, dtypes.int32)
  same(Tensor(b) ** 9, b ** 9, dtypes.int32)  # 7**9 needs more than float32's 24 bits
  e = np.array([0, 1, 2, 3, 9, 5, 8], np.int32)
  same(Tensor(b) ** Tensor(e), (b.astype(np.int64) ** e).astype(np.int32), dtypes.int32)
  same(Tensor([2, 3, 4]) ** 0.5, np.sqrt(np.array([2, 3, 4], np.float32)), dtypes.float32)  # int ** float is float (torch, tinygrad)
  same(Tensor([2, 3]) ** Tensor([2.0, 0.5]), np.array([4, 3 ** 0.5], np.float32), dtypes.float32)
  same(Tensor([1, -1, 2, -1]) ** Tensor([-1, -1, -1, -2]), [1, -1, 0, 1], dtypes.int32)
  with pytest.raises(RuntimeError): Tensor([2, 3]) ** -1  # a negative Python int exponent: torch and tinygrad 0.14 raise
  same(Tensor([1, 2, 3], dtype=dtypes.uint8) ** 2, [1, 4, 9], dtypes.uint8)
  same(2.0 ** Tensor([1, 3]), [2.0, 8.0], dtypes.float32)


def test_maximum_minimum_clamp():
  a = np.array([-3, -1, 0, 2, 5], np.float32)
  t = Tensor(a)
  same(t.maximum(1), np.maximum(a, 1)); same(t.minimum(1), np.minimum(a, 1))
  same(t.clamp(-1, 2), np.clip(a, -1, 2)); same(t.clip(max_=0), np.minimum(a, 0)); same(t.clamp(min_=0), np.maximum(a, 0))
  same(t.clamp(Tensor([-1.0, 0, 0, 0, 0]), Tensor([0.0, 0, 1, 1, 3])), [-1, 0, 0, 1, 3])
  same(Tensor([np.nan, 1.0]).maximum(0), [np.nan, 1.0])
  same(Tensor([np.nan, 5.0]).clamp(0, 1), [np.nan, 1.0])
  i = Tensor([-2**31, 0, 2**31 - 1])
  same(i.minimum(Tensor([0, 0, 0])), [-2**31, 0, 0], dtypes.int32)  # no overflow in the negation trick
  u = Tensor([0, 200, 255], dtype=dtypes.uint8)
  same(u.minimum(100), [0, 100, 100], dtypes.uint8); same(u.maximum(100), [100, 200, 255], dtypes.uint8)
  same(Tensor([True, False]).minimum(Tensor([True, True])), [True, False], dtypes.bool)
  with pytest.raises(RuntimeError): t.clamp()


def test_comparisons_and_nan():
  a = Tensor([1.0, np.nan, 3.0, 2.0])
  same(a < 2, [True, False, False, False]); same(a <= 2, [True, False, False, True])
  same(a > 2, [False, False, True, False]); same(a >= 2, [False, False, True, True])
  same(a == 2, [False, False, False, True]); same(a != 2, [True, True, True, False])
  same(2 < a, [False, False, True, False]); same(2 >= a, [True, False, False, True])
  same(Tensor([1, 2, 3]) >= Tensor([3, 2, 1]), [False, True, True])
  same(Tensor([1, 2, 3]).eq(2), [False, True, False], dtypes.bool)


def test_where():
  c = Tensor([True, False, True])
  same(c.where(1, 2), [1, 2, 1], dtypes.int32)
  same(c.where(1.5, 2), [1.5, 2, 1.5], dtypes.float32)
  same(c.where(Tensor([1, 2, 3], dtype=dtypes.int8), 100), [1, 100, 3], dtypes.int8)
  same(c.where(0.5, Tensor([1, 2, 3])), [0.5, 2, 0.5], dtypes.float32)
  same(Tensor([0.0, 2.0, -1.0]).where(Tensor([1.0, 1, 1]), 0.0), [0, 1, 1])
  same(Tensor([[True], [False]]).where(Tensor([1, 2, 3]), Tensor([[7], [8]])), [[1, 2, 3], [8, 8, 8]])


def test_logic_and_bits():
  a, b = np.array([0b1100, 0b1010, -1, 0], np.int32), np.array([0b1010, 0b0110, 5, 0], np.int32)
  same(Tensor(a) & Tensor(b), a & b); same(Tensor(a) | Tensor(b), a | b); same(Tensor(a) ^ Tensor(b), a ^ b); same(~Tensor(a), ~a)
  same(Tensor(a).bitwise_and(6), a & 6); same(Tensor(a).bitwise_not(), ~a)
  same(~Tensor([0, 255], dtype=dtypes.uint8), [255, 0], dtypes.uint8)
  same(Tensor(a) << 3, a << 3); same(Tensor(a) >> 1, a >> 1)  # arithmetic shift for signed
  same(Tensor([0x80000000, 6], dtype=dtypes.uint32) >> 4, [0x08000000, 0], dtypes.uint32)
  same(Tensor([1, 2]) << Tensor([3, 4]), [8, 32])
  p, q = Tensor([True, True, False, False]), Tensor([True, False, True, False])
  same(p & q, [True, False, False, False], dtypes.bool); same(p | q, [True, True, True, False]); same(p ^ q, [False, True, True, False])
  same(~p, [False, False, True, True], dtypes.bool); same(p.logical_not(), [False, False, True, True])
  same(p.logical_and(q), [True, False, False, False]); same(p.logical_or(q), [True, True, True, False]); same(p.logical_xor(q), [False, True, True, False])
  same(Tensor([0.0, 2.0, -1.0]).logical_not(), [True, False, False], dtypes.bool)
  same(Tensor([0, 3]).logical_and(Tensor([1.5, 2.0])), [False, True], dtypes.bool)
  with pytest.raises(RuntimeError): Tensor([1.0]) & Tensor([2.0])
  with pytest.raises(RuntimeError): ~Tensor([1.0])
  with pytest.raises(RuntimeError): Tensor([1.0]) << 1
  # a negative int amount is out of range as a tensor one is (torch): 0, or the sign for >> of a signed int
  same(Tensor([1, -8]) << -1, [0, 0]); same(Tensor([1, -8]) >> -1, [0, -1]); same(Tensor([1, -8]) >> Tensor([-1, -1]), [0, -1])
  same(Tensor([200], dtype=dtypes.uint8) >> -2, [0], dtypes.uint8)
  with pytest.raises(RuntimeError): Tensor([1]) << 1.0


def test_lerp_copysign_logaddexp_isclose():
  a, b = np.array([0.0, 1, -2, 5], np.float32), np.array([10.0, -1, 2, 5], np.float32)
  w = np.array([0.0, 0.25, 1.0, 0.7], np.float32)
  same(Tensor(a).lerp(Tensor(b), Tensor(w)), a + (b - a) * w)
  same(Tensor(a).lerp(Tensor(b), 0.5), (a + b) / 2)
  same(Tensor([1.0, -2.0, 3.0, 4.0]).copysign(Tensor([-1.0, 2.0, -0.0, 0.0])), [-1, 2, -3, 4])
  same(Tensor(a).logaddexp(Tensor(b)), np.logaddexp(a, b))
  same(Tensor([-np.inf, 1000.0]).logaddexp(Tensor([-np.inf, 1000.0])), [-np.inf, 1000 + np.log(2)])
  x, y = np.array([1.0, 1.0, np.nan, np.inf, 0.0], np.float32), np.array([1.0 + 1e-6, 1.1, np.nan, np.inf, 1e-9], np.float32)
  same(Tensor(x).isclose(Tensor(y)), np.isclose(x, y), dtypes.bool)
  same(Tensor(x).isclose(Tensor(y), equal_nan=True), np.isclose(x, y, equal_nan=True))


def test_atan2():
  v = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-30], np.float32)
  y, x = np.meshgrid(v, v)
  out = Tensor(y).atan2(Tensor(x))
  same(out, np.arctan2(y, x), dtypes.float32)
  assert (np.signbit(out.numpy()) == np.signbit(np.arctan2(y, x)))[~np.isnan(np.arctan2(y, x))].all()  # signed zeros and pi
  a, b = spread(1e-3, 1e3), spread(1e-3, 1e3)[::-1].copy()
  same(Tensor(a).atan2(Tensor(b)), np.arctan2(a.astype(np.float64), b), rtol=1e-6)
  same(Tensor([1, -1]).atan2(0), [np.pi / 2, -np.pi / 2], dtypes.float32)


def test_softplus_beta_and_params():
  x = spread(-30, 30)
  same(Tensor(x).softplus(beta=2.0), np.logaddexp(0, 2.0 * x.astype(np.float64)) / 2.0, rtol=1e-6)
  same(Tensor(x).leaky_relu(0.2), np.where(x > 0, x, 0.2 * x))
  same(Tensor(x).elu(0.5), np.where(x > 0, x, 0.5 * np.expm1(x.astype(np.float64))), rtol=1e-6)
  same(Tensor(x).celu(2.0), np.where(x > 0, x, 2.0 * np.expm1(x.astype(np.float64) / 2)), rtol=1e-6)
  same(Tensor(x).hardtanh(-2, 3), np.clip(x, -2, 3))
  same(Tensor(x).hardsigmoid(0.2, 0.4), np.clip(0.2 * x + 0.4, 0, 1), rtol=1e-6, atol=1e-7)


def test_bitcast():
  a = np.array([[1.0, -2.5], [3.25, -0.0]], np.float32)
  same(Tensor(a).bitcast(dtypes.int32), a.view(np.int32), dtypes.int32)
  same(Tensor(a).bitcast(dtypes.uint16), a.view(np.uint16), dtypes.uint16)
  same(Tensor(a).bitcast(dtypes.uint8), a.view(np.uint8), dtypes.uint8)
  b = np.arange(16, dtype=np.uint8).reshape(2, 8) * 17
  same(Tensor(b).bitcast(dtypes.int32), b.view(np.int32), dtypes.int32)
  same(Tensor(b).bitcast(dtypes.float16), b.view(np.float16), dtypes.float16)
  same(Tensor(b.view(np.int16)).bitcast(dtypes.uint32), b.view(np.uint32), dtypes.uint32)
  with pytest.raises(RuntimeError): Tensor(np.zeros(3, np.uint8)).bitcast(dtypes.int32)
  with pytest.raises(RuntimeError): Tensor([1.0], requires_grad=True).bitcast(dtypes.int32)


def test_cast_helpers():
  t = Tensor([1.7, -1.7])
  same(t.int(), [1, -1], dtypes.int32); same(t.half(), [1.7, -1.7], dtypes.float16, rtol=1e-3); same(t.bool(), [True, True], dtypes.bool)
  same(Tensor([1, 2]).float(), [1.0, 2.0], dtypes.float32)


# ---- gradients (hand-derived, float64 numpy)

def grad_of(fn, x: np.ndarray) -> np.ndarray:
  t = Tensor(x, requires_grad=True)
  fn(t).sum().backward()
  return t.grad.numpy()


GRADS = [
  ("exp", lambda x: np.exp(x), spread(-5, 5)),
  ("sigmoid", lambda x: sigmoid(x) * (1 - sigmoid(x)), spread(-200, 200)),  # finite (0) far out, no 0 * inf
  ("tanh", lambda x: 1 - np.tanh(x) ** 2, np.concatenate([spread(-30, 30), [0.0]]).astype(np.float32)),
  ("softplus", sigmoid, spread(-100, 100)),
  ("logsigmoid", lambda x: sigmoid(-x), spread(-100, 100)),
  ("erf", lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x), np.concatenate([spread(-4, 4), [0.0]]).astype(np.float32)),
  ("asin", lambda x: 1 / np.sqrt(1 - x * x), np.concatenate([spread(-0.99, 0.99), [0.0]]).astype(np.float32)),
  ("acos", lambda x: -1 / np.sqrt(1 - x * x), spread(-0.99, 0.99)),
  ("atan", lambda x: 1 / (1 + x * x), np.concatenate([spread(-50, 50), [0.0]]).astype(np.float32)),
  ("sinh", np.cosh, np.concatenate([spread(-5, 5), [0.0]]).astype(np.float32)),
  ("cosh", np.sinh, spread(-5, 5)),
  ("asinh", lambda x: 1 / np.sqrt(x * x + 1), np.concatenate([spread(-1e4, 1e4, 14), [0.0]]).astype(np.float32)),
  ("acosh", lambda x: 1 / np.sqrt(x * x - 1), np.array([1.01, 1.5, 2.5, 50, 5000], np.float32)),
  ("atanh", lambda x: 1 / (1 - x * x), np.concatenate([spread(-0.9, 0.9), [0.0]]).astype(np.float32)),
  ("expm1", np.exp, spread(-3, 3)),
  ("log1p", lambda x: 1 / (1 + x), np.array([-0.5, -1e-4, 0, 1e-4, 0.5, 3], np.float32)),
  ("elu", lambda x: np.where(x > 0, 1, np.exp(x)), spread(-5, 5)),
  ("gelu", None, spread(-5, 5)),
  ("relu", lambda x: (x > 0).astype(np.float64), np.array([-1, 0, 1], np.float32)),
  ("abs", np.sign, np.array([-1, 0, 1], np.float32)),
  ("sign", np.zeros_like, np.array([-1, 0, 1], np.float32)),
  ("round", np.zeros_like, np.array([-1.5, 0.2, 1], np.float32)),
  ("floor", np.zeros_like, np.array([-1.5, 0.2, 1], np.float32)),
]


@pytest.mark.parametrize("name,deriv,x", GRADS, ids=[g[0] for g in GRADS])
def test_gradients(name, deriv, x):
  g = grad_of(lambda t: getattr(t, name)(), x)
  assert np.isfinite(g).all(), f"non-finite gradient {g}"
  if deriv is None:  # central differences in float64
    f = {"gelu": gelu_tanh}[name]
    x64, eps = x.astype(np.float64), 1e-6
    expected = (f(x64 + eps) - f(x64 - eps)) / (2 * eps)
  else: expected = deriv(x.astype(np.float64))
  np.testing.assert_allclose(g, expected, rtol=2e-5, atol=1e-6)


def test_pow_gradients():
  x = np.array([-2.0, -0.5, 0.5, 1.5, 3.0], np.float32)
  np.testing.assert_allclose(grad_of(lambda t: t ** 3, x), 3 * x.astype(np.float64) ** 2, rtol=1e-6)
  np.testing.assert_allclose(grad_of(lambda t: t ** -2, x), -2 * x.astype(np.float64) ** -3, rtol=1e-6)
  np.testing.assert_allclose(grad_of(lambda t: t ** 0, x), np.zeros_like(x))
  pos = np.abs(x)
  np.testing.assert_allclose(grad_of(lambda t: t ** 2.5, pos), 2.5 * pos.astype(np.float64) ** 1.5, rtol=1e-6)
  np.testing.assert_allclose(grad_of(lambda t: 3.0 ** t, x), np.log(3) * 3.0 ** x.astype(np.float64), rtol=1e-6)
  b, e = Tensor(pos, requires_grad=True), Tensor(x, requires_grad=True)
  (b ** e).sum().backward()
  np.testing.assert_allclose(b.grad.numpy(), x * pos ** (x - 1.0), rtol=2e-6)
  np.testing.assert_allclose(e.grad.numpy(), np.log(pos) * pos ** x, rtol=2e-6)


def test_mod_and_clamp_gradients():
  a, b = Tensor([5.5, -5.5, 3.2], requires_grad=True), Tensor([2.0, 2.0, -1.5], requires_grad=True)
  (a % b).sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [1, 1, 1])
  np.testing.assert_allclose(b.grad.numpy(), -np.floor(np.array([5.5, -5.5, 3.2]) / np.array([2.0, 2.0, -1.5])))
  x = Tensor([-2.0, -1.0, 0.0, 1.0, 2.0], requires_grad=True)
  x.clamp(-1, 1).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [0, 1, 1, 1, 0])  # like torch.clamp: the bounds pass the gradient


def test_comparisons_have_no_gradient():
  x = Tensor([1.0, 2.0], requires_grad=True)
  y = (x > 1).where(x * 3, x * 5)
  y.sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [5, 3])
