"""Parity with torch for elementwise ops: unary math and activations, broadcasting binary ops, python scalars (reflected
operators), int/bool ops and result dtypes. Forward values and gradients of sum(out * upstream) w.r.t. every float input.
Run with the system python, where torch is installed:
  cd packages/core/tests && DEV=CPU:LLVM python -m pytest parity/test_parity_elementwise.py -q"""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

from .helpers import check, make_inputs, torch

F = torch.nn.functional
SHAPES = [(3, 4), (2, 1, 3)]


# (id, ours (or both), torch or None, low, high)
UNARY = [
  ("exp", lambda x: x.exp(), None, -3, 3), ("exp2", lambda x: x.exp2(), None, -3, 3), ("expm1", lambda x: x.expm1(), None, -2, 2),
  ("log", lambda x: x.log(), None, 0.1, 5), ("log2", lambda x: x.log2(), None, 0.1, 5), ("log10", lambda x: x.log10(), None, 0.1, 5),
  ("log1p", lambda x: x.log1p(), None, -0.9, 3), ("sqrt", lambda x: x.sqrt(), None, 0.1, 5), ("rsqrt", lambda x: x.rsqrt(), None, 0.1, 5),
  ("sin", lambda x: x.sin(), None, -4, 4), ("cos", lambda x: x.cos(), None, -4, 4), ("tan", lambda x: x.tan(), None, -1.3, 1.3),
  ("asin", lambda x: x.asin(), None, -0.95, 0.95), ("acos", lambda x: x.acos(), None, -0.95, 0.95), ("atan", lambda x: x.atan(), None, -5, 5),
  ("sinh", lambda x: x.sinh(), None, -4, 4), ("cosh", lambda x: x.cosh(), None, -4, 4), ("tanh", lambda x: x.tanh(), None, -3, 3),
  ("asinh", lambda x: x.asinh(), None, -5, 5), ("acosh", lambda x: x.acosh(), None, 1.1, 6), ("atanh", lambda x: x.atanh(), None, -0.9, 0.9),
  ("erf", lambda x: x.erf(), None, -3, 3), ("sigmoid", lambda x: x.sigmoid(), None, -8, 8),
  ("logsigmoid", lambda x: x.logsigmoid(), F.logsigmoid, -8, 8), ("relu", lambda x: x.relu(), None, -2, 2),
  ("relu6", lambda x: x.relu6(), F.relu6, -8, 8), ("leaky_relu", lambda x: x.leaky_relu(), F.leaky_relu, -2, 2),
  ("leaky_relu_0.2", lambda x: x.leaky_relu(0.2), lambda x: F.leaky_relu(x, 0.2), -2, 2),
  ("elu", lambda x: x.elu(), F.elu, -3, 3), ("elu_0.5", lambda x: x.elu(0.5), lambda x: F.elu(x, 0.5), -3, 3),
  ("celu_2", lambda x: x.celu(2.0), lambda x: F.celu(x, 2.0), -3, 3), ("selu", lambda x: x.selu(), torch.selu, -3, 3),
  ("gelu", lambda x: x.gelu(), lambda x: F.gelu(x, approximate="tanh"), -4, 4),
  ("quick_gelu", lambda x: x.quick_gelu(), lambda x: x * torch.sigmoid(1.702 * x), -4, 4),
  ("silu", lambda x: x.silu(), F.silu, -4, 4), ("swish", lambda x: x.swish(), F.silu, -4, 4), ("mish", lambda x: x.mish(), F.mish, -4, 4),
  ("softplus", lambda x: x.softplus(), F.softplus, -8, 8), ("softplus_beta", lambda x: x.softplus(2.0), lambda x: F.softplus(x, beta=2.0), -4, 4),
  ("softsign", lambda x: x.softsign(), F.softsign, -4, 4), ("hardsigmoid", lambda x: x.hardsigmoid(), F.hardsigmoid, -5, 5),
  ("hardswish", lambda x: x.hardswish(), F.hardswish, -5, 5), ("hardtanh", lambda x: x.hardtanh(), F.hardtanh, -2, 2),
  ("hardtanh_args", lambda x: x.hardtanh(-0.5, 1.5), lambda x: F.hardtanh(x, -0.5, 1.5), -2, 2),
  ("square", lambda x: x.square(), None, -3, 3), ("reciprocal", lambda x: x.reciprocal(), None, 0.3, 3), ("neg", lambda x: x.neg(), None, -3, 3),
  ("abs", lambda x: x.abs(), None, -3, 3), ("sign", lambda x: x.sign(), None, -3, 3), ("trunc", lambda x: x.trunc(), None, -4, 4),
  ("floor", lambda x: x.floor(), None, -4, 4), ("ceil", lambda x: x.ceil(), None, -4, 4), ("round", lambda x: x.round(), None, -4, 4),
  ("clamp", lambda x: x.clamp(-0.5, 0.8), None, -2, 2), ("clip_min", lambda x: x.clip(-0.5), lambda x: x.clip(-0.5), -2, 2),
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name,fn,torch_fn,low,high", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, torch_fn, low, high, shape):
  check(fn, [shape], torch_fn=torch_fn, low=low, high=high)


def _pair(shapes, lo_a=-2.0, hi_a=2.0, lo_b=-2.0, hi_b=2.0, away=0.0, seed=0):
  """Two float inputs; b's magnitude stays >= away (divisors)."""
  a = make_inputs([shapes[0]], lo_a, hi_a, seed=seed)[0]
  b = make_inputs([shapes[1]], lo_b, hi_b, seed=seed + 1)[0]
  if away: b = (np.sign(b) * np.maximum(np.abs(b), away)).astype(np.float32)
  return [a, b]


BIN_SHAPES = [[(3, 4), (3, 4)], [(3, 4), (4,)], [(2, 1, 3), (4, 1)]]
# (id, fn, torch fn or None, input maker)
BINARY = [
  ("add", lambda a, b: a + b, None, _pair), ("sub", lambda a, b: a - b, None, _pair), ("mul", lambda a, b: a * b, None, _pair),
  ("div", lambda a, b: a / b, None, lambda s: _pair(s, away=0.5)),
  ("pow", lambda a, b: a ** b, None, lambda s: _pair(s, 0.5, 2.0)),
  ("maximum", lambda a, b: a.maximum(b), None, _pair), ("minimum", lambda a, b: a.minimum(b), None, _pair),
  ("logaddexp", lambda a, b: a.logaddexp(b), None, _pair), ("atan2", lambda a, b: a.atan2(b), None, lambda s: _pair(s, away=0.2)), ("copysign", lambda a, b: a.copysign(b), None, _pair),
  ("fmod", lambda a, b: a.fmod(b), None, lambda s: _pair(s, -5, 5, away=0.5)),
  ("remainder", lambda a, b: a % b, None, lambda s: _pair(s, -5, 5, away=0.5)),
  ("div_floor", lambda a, b: a.div(b, rounding_mode="floor"), None, lambda s: _pair(s, -5, 5, away=0.5)),
  ("div_trunc", lambda a, b: a.div(b, rounding_mode="trunc"), None, lambda s: _pair(s, -5, 5, away=0.5)),
  ("where", lambda a, b: (a > b).where(a * 2, b - 1), lambda a, b: torch.where(a > b, a * 2, b - 1), _pair),
  ("clamp_tensors", lambda a, b: a.clamp(b - 0.5, b + 0.5), None, _pair),
  ("lerp", lambda a, b: a.lerp(b, 0.3), None, _pair),
]


@pytest.mark.parametrize("shapes", BIN_SHAPES, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("name,fn,torch_fn,make", BINARY, ids=[b[0] for b in BINARY])
def test_binary_broadcast(name, fn, torch_fn, make, shapes):
  check(fn, shapes, torch_fn=torch_fn, inputs=make(shapes))


def test_lerp_tensor_weight():
  check(lambda a, b, w: a.lerp(b, w), [(3, 4), (3, 4), (4,)], inputs=make_inputs([(3, 4), (3, 4)]) + make_inputs([(4,)], 0, 1, seed=2))


# python scalars on either side (reflected operators), incl. negative bases with integral exponents
SCALAR = [
  ("add", lambda x: x + 2), ("radd", lambda x: 2 + x), ("sub", lambda x: x - 1.5), ("rsub", lambda x: 1.5 - x), ("mul", lambda x: x * 2.5),
  ("rmul", lambda x: -3 * x), ("div", lambda x: x / 4), ("rdiv", lambda x: 3 / x), ("pow2", lambda x: x ** 2), ("pow3", lambda x: x ** 3),
  ("pow_neg1", lambda x: x ** -1), ("pow_neg2", lambda x: x ** -2), ("pow0", lambda x: x ** 0), ("pow1", lambda x: x ** 1),
  ("pow5", lambda x: x ** 5), ("pow_2.0", lambda x: x ** 2.0), ("rpow", lambda x: 2 ** x), ("rpow_float", lambda x: 0.5 ** x),
  ("mod", lambda x: x % 1.5), ("maximum", lambda x: x.maximum(0.5)), ("minimum", lambda x: x.minimum(-0.25)),
  ("lt_where", lambda x: (x < 0.5).where(x, 0.0)), ("ge_where", lambda x: (0.5 >= x).where(1.0, x * x)),
]
TORCH_SCALAR = {"maximum": lambda x: torch.maximum(x, torch.tensor(0.5)), "minimum": lambda x: torch.minimum(x, torch.tensor(-0.25)),
                "lt_where": lambda x: torch.where(x < 0.5, x, 0.0), "ge_where": lambda x: torch.where(0.5 >= x, 1.0, x * x)}


@pytest.mark.parametrize("name,fn", SCALAR, ids=[s[0] for s in SCALAR])
def test_scalar_ops(name, fn):
  x = make_inputs([(3, 4)])[0]
  x = (np.sign(x) * np.maximum(np.abs(x), 0.3)).astype(np.float32)  # away from 0 (reciprocals, powers)
  check(fn, [(3, 4)], torch_fn=TORCH_SCALAR.get(name), inputs=[x])


@pytest.mark.parametrize("name,fn", [("rmod", lambda t: 2.5 % t), ("floordiv", lambda t: t // 0.7), ("rfloordiv", lambda t: 2.5 // t)])
def test_forward_only_scalar_ops(name, fn):  # torch has no gradient for these
  x = make_inputs([(3, 4)])[0]
  check(fn, [], grad=False, inputs=[(np.sign(x) * np.maximum(np.abs(x), 0.3)).astype(np.float32)])


@pytest.mark.parametrize("name,fn", [("pow_half", lambda x: x ** 0.5), ("pow_1.5", lambda x: x ** 1.5), ("pow_2.3", lambda x: x ** 2.3),
                                     ("pow_neg_half", lambda x: x ** -0.5), ("log_of_pow", lambda x: (x ** 1.7).log())])
def test_fractional_powers(name, fn):
  check(fn, [(3, 4)], low=0.2, high=3)


def test_negative_base_fractional_power_is_nan():
  check(lambda x: x ** 0.5, [(4,)], low=-3, high=-0.5, grad=False)


def _ints(shape, low, high, dtype=np.int32, seed=0, nonzero=False):
  x = np.random.default_rng(seed).integers(low, high, size=shape).astype(dtype)
  if nonzero: x[x == 0] = 1
  return x


INT_DTYPES = [np.int32, np.int8, np.int64]
# (id, fn, torch fn or None); b is never 0
INT_BINARY = [
  ("add", lambda a, b: a + b, None), ("sub", lambda a, b: a - b, None), ("mul", lambda a, b: a * b, None), ("truediv", lambda a, b: a / b, None),
  ("floordiv", lambda a, b: a // b, None), ("idiv", lambda a, b: a.idiv(b), lambda a, b: torch.div(a, b, rounding_mode="trunc")),
  ("div_floor", lambda a, b: a.div(b, rounding_mode="floor"), None), ("mod", lambda a, b: a % b, None), ("fmod", lambda a, b: a.fmod(b), None),
  ("and", lambda a, b: a & b, None), ("or", lambda a, b: a | b, None), ("xor", lambda a, b: a ^ b, None),
  ("maximum", lambda a, b: a.maximum(b), None), ("minimum", lambda a, b: a.minimum(b), None),
  ("lt", lambda a, b: a < b, None), ("le", lambda a, b: a <= b, None), ("eq", lambda a, b: a == b, None), ("ne", lambda a, b: a != b, None),
  ("where", lambda a, b: (a > b).where(a, b), lambda a, b: torch.where(a > b, a, b)),
]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,torch_fn", INT_BINARY, ids=[b[0] for b in INT_BINARY])
def test_int_binary(name, fn, torch_fn, dtype):
  check(fn, [(3, 4), (4,)], torch_fn=torch_fn, grad=False, inputs=[_ints((3, 4), -20, 20, dtype), _ints((4,), -6, 6, dtype, seed=1, nonzero=True)])


INT_UNARY = [
  ("neg", lambda x: -x, None), ("abs", lambda x: x.abs(), None), ("invert", lambda x: ~x, None), ("sign", lambda x: x.sign(), None),
  ("lshift", lambda x: x << 2, None), ("rshift", lambda x: x >> 1, None), ("scalar_floordiv", lambda x: x // 3, None),
  ("rfloordiv", lambda x: 7 // x, None),
  ("scalar_mod", lambda x: x % 3, None), ("rmod", lambda x: 7 % x, None), ("pow2", lambda x: x ** 2, None), ("pow3", lambda x: x ** 3, None),
  ("rpow", lambda x: 2 ** x.abs(), None), ("relu", lambda x: x.relu(), None), ("clamp", lambda x: x.clamp(-3, 4), None),
  ("add_float", lambda x: x + 0.5, None), ("mul_bool", lambda x: x * True, None), ("sqrt_float", lambda x: x.abs().sqrt(), None),
]


@pytest.mark.parametrize("dtype", [np.int32, np.int8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,torch_fn", INT_UNARY, ids=[u[0] for u in INT_UNARY])
def test_int_unary(name, fn, torch_fn, dtype):
  check(fn, [(3, 4)], torch_fn=torch_fn, grad=False, inputs=[_ints((3, 4), -5, 6, dtype, nonzero=True)])


def test_int_pow_tensor_exponent():
  b, e = _ints((3, 4), -4, 5), _ints((3, 4), 0, 7, seed=1)
  check(lambda a, x: a ** x, [], grad=False, inputs=[b, e])


BOOL_OPS = [("logical_and", lambda a, b: a.logical_and(b)), ("logical_or", lambda a, b: a.logical_or(b)), ("logical_xor", lambda a, b: a.logical_xor(b)),
            ("and", lambda a, b: a & b), ("or", lambda a, b: a | b), ("xor", lambda a, b: a ^ b), ("not", lambda a, b: ~a | b),
            ("logical_not", lambda a, b: a.logical_not()), ("where", lambda a, b: a.where(b, ~b)), ("add_int", lambda a, b: a + 1)]


@pytest.mark.parametrize("name,fn", BOOL_OPS, ids=[b[0] for b in BOOL_OPS])
def test_bool_ops(name, fn):
  check(fn, [(3, 4), (4,)], torch_fn=(lambda a, b: torch.where(a, b, ~b)) if name == "where" else None, grad=False, dtype=np.bool_)


def test_comparisons_with_nan_and_inf():
  a = np.array([1.0, np.nan, -np.inf, 2.0, np.inf, 0.0], np.float32)
  b = np.array([1.0, 1.0, -np.inf, np.nan, 3.0, -0.0], np.float32)
  for fn in (lambda x, y: x < y, lambda x, y: x <= y, lambda x, y: x > y, lambda x, y: x >= y, lambda x, y: x == y, lambda x, y: x != y,
             lambda x, y: x.maximum(y), lambda x, y: x.minimum(y), lambda x, y: x.isnan(), lambda x, y: x.isinf(), lambda x, y: x.isfinite(),
             lambda x, y: x.relu(), lambda x, y: x.sigmoid(), lambda x, y: x.tanh(), lambda x, y: x.exp(), lambda x, y: x.clamp(-1, 1)):
    check(fn, [], grad=False, inputs=[a, b])


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "int32", "int64", "float16", "float32", "bool"])
def test_result_dtypes_match_torch(dt):
  """Promotion with python scalars and between tensors, where tinygrad and torch agree."""
  x = torch.ones(2, dtype=getattr(torch, dt))
  t = Tensor.ones(2, dtype=getattr(dtypes, dt))
  cases = [lambda a: a * 2.5, lambda a: a / a, lambda a: a == a, lambda a: a.exp()]
  if dt != "bool": cases += [lambda a: a + 1, lambda a: 3 - a, lambda a: a * a]
  for fn in cases:
    assert str(fn(t).dtype).replace("dtypes.", "") == {"torch.float32": "float", "torch.float16": "half", "torch.bool": "bool",
      "torch.int8": "char", "torch.uint8": "uchar", "torch.int16": "short", "torch.int32": "int", "torch.int64": "long"}[str(fn(x).dtype)]


# ---- Python int scalars outside an int tensor's dtype (issue 20)

_NP_INTS = {dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.int32: np.int32, dtypes.int64: np.int64}


def _outcome(fn):
  """('ok', values) or ('raises', None): torch, numpy and we may each refuse a scalar."""
  try: r = fn()
  except (RuntimeError, ValueError, OverflowError): return ("raises", None)
  return ("ok", r.tolist() if hasattr(r, "tolist") else r)


def _bound_cases(tt, nt, ours, s: int, fits: bool) -> list[tuple[str, object, object]]:
  """(name, reference outcome, our outcome) for clamp/maximum/minimum with bound s: torch's answer where s fits the dtype;
  beyond it numpy 2's clip (np.maximum/minimum refuse any out-of-range int, so their exact answer is np.clip's too)."""
  refs = {"clip_lo": (lambda: tt.clip(s, None), lambda: np.clip(nt, s, None)), "clip_hi": (lambda: tt.clip(None, s), lambda: np.clip(nt, None, s)),
          "maximum": (lambda: torch.maximum(tt, torch.tensor(s, dtype=tt.dtype)), lambda: np.clip(nt, s, None)),
          "minimum": (lambda: torch.minimum(tt, torch.tensor(s, dtype=tt.dtype)), lambda: np.clip(nt, None, s))}
  got = {"clip_lo": lambda: ours.clip(s, None), "clip_hi": lambda: ours.clip(None, s), "maximum": lambda: ours.maximum(s), "minimum": lambda: ours.minimum(s)}
  return [(k, _outcome(refs[k][0] if fits else refs[k][1]), _outcome(got[k])) for k in refs]


@pytest.mark.parametrize("dt", list(_NP_INTS), ids=lambda d: d.name)
@pytest.mark.parametrize("which", ["lo-1", "hi+1", "lo-2**40", "hi+2**40", "-1", "0", "hi", "lo", "-hi", "-hi-1"])
def test_out_of_range_scalars_torch_and_numpy(dt, which):
  """where: exactly torch (raises where torch does). clamp/maximum/minimum: torch's answer where it has one; where torch
  refuses a bound beyond the dtype, numpy 2's (the bound saturates; raises when no result is representable). Comparisons:
  torch's where the scalar fits; beyond the dtype numpy 2's exact answer (torch compares with the wrapped scalar)."""
  lo, hi = int(np.iinfo(_NP_INTS[dt]).min), int(np.iinfo(_NP_INTS[dt]).max)
  s = eval(which, {"lo": lo, "hi": hi})  # noqa: S307  a fixed expression from the parametrize list
  vals = sorted({lo, lo + 1, 0, 1, hi - 1, hi})
  tt, nt, ours = torch.tensor(vals, dtype=getattr(torch, np.dtype(_NP_INTS[dt]).name)), np.array(vals, dtype=_NP_INTS[dt]), Tensor(vals, dtype=dt)
  cond = [i % 2 == 0 for i in range(len(vals))]
  assert _outcome(lambda: Tensor(cond).where(ours, s)) == _outcome(lambda: torch.where(torch.tensor(cond), tt, s)), "where"
  fits = lo <= s <= hi
  for name, ref, got in _bound_cases(tt, nt, ours, s, fits): assert got == ref, name
  for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    ref = _outcome(lambda op=op: getattr(tt, op)(s)) if fits else _outcome(lambda op=op: getattr(nt, op)(s))
    assert _outcome(lambda op=op: getattr(ours, op)(s)) == ref, op
