"""Parity with torch at the edges: NaN, +-inf, signed zeros, huge and denormal values (NaN and inf in the same places), ops
with a zero-sized dim (forward and backward), tensors that don't reach the loss, result dtypes, and the exception types
raised for invalid arguments."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

from .helpers import check, compare, torch

F = torch.nn.functional
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1e38, -1e38, 1e-45, 3.0, 88.0, -104.0],
                   np.float32)

UNARY = {
  "exp": None, "log": None, "sqrt": None, "sin": None, "cos": None, "tan": None, "asin": None, "acos": None, "atan": None,
  "sinh": None, "cosh": None, "tanh": None, "asinh": None, "acosh": None, "atanh": None, "erf": None, "log1p": None, "expm1": None,
  "rsqrt": None, "reciprocal": None, "log2": None, "exp2": None, "sigmoid": None, "relu": None, "abs": None, "sign": None,
  "floor": None, "ceil": None, "round": None, "trunc": None, "square": None,
  "softplus": F.softplus, "silu": F.silu, "elu": F.elu, "logsigmoid": F.logsigmoid, "softsign": F.softsign, "hardswish": F.hardswish,
  "hardsigmoid": F.hardsigmoid, "relu6": F.relu6, "mish": F.mish, "gelu": lambda x: F.gelu(x, approximate="tanh"),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_special_values(name):
  check(lambda x: getattr(x, name)(), [], torch_fn=UNARY[name], grad=False, inputs=[SPECIAL])


def test_pow_special_grid():
  b, e = (a.ravel() for a in np.meshgrid(SPECIAL, SPECIAL))
  check(lambda x, y: x ** y, [], grad=False, inputs=[b, e])


@pytest.mark.parametrize("e", [0, 0.5, 2, 3, -1, -2, -0.5, 1.5, 2.5, float("inf"), -float("inf"), float("nan")])
def test_pow_scalar_special(e):
  check(lambda x: x ** e, [], grad=False, inputs=[SPECIAL])
  check(lambda x: e ** x, [], grad=False, inputs=[SPECIAL])


def test_domain_edges_are_nan():
  x = np.array([-2.0, 0.5, 0.99, 1.0, 1.01, 3.0, -1.0, -0.99, np.inf, -np.inf], np.float32)
  for name in ("acosh", "atanh", "asin", "acos", "log", "sqrt", "log1p"):
    check(lambda t, name=name: getattr(t, name)(), [], grad=False, inputs=[x])


def test_sigmoid_extremes():
  x = np.array([-1e30, -1000.0, -104.0, -88.0, 0.0, 88.0, 1000.0, 1e30, np.inf, -np.inf], np.float32)
  check(lambda t: t.sigmoid(), [], inputs=[x])


NAN_ROWS = np.array([[1.0, np.nan, 2.0], [3.0, 4.0, 5.0], [np.inf, 1.0, 2.0], [-np.inf, np.inf, 0.0]], np.float32)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("name", ["sum", "mean", "std", "var", "prod", "max", "min", "logsumexp", "cumsum", "softmax", "log_softmax"])
def test_reductions_with_nan_inf(name, axis):
  if axis is None and name in ("cumsum", "softmax", "log_softmax"): pytest.skip("needs an axis")
  def theirs(t):
    if name in ("max", "min") and axis is not None: return getattr(t, name)(axis).values
    if name == "logsumexp": return t.logsumexp((0, 1) if axis is None else axis)
    return getattr(t, name)() if axis is None else getattr(t, name)(axis)
  check(lambda t: getattr(t, name)() if axis is None else getattr(t, name)(axis), [], torch_fn=theirs, grad=False, inputs=[NAN_ROWS])


# ---- a zero-sized dim: forward values and gradients (empty, or zeros for the non-empty inputs)
ZERO = [
  ("cat_first", lambda a, b: a.cat(b), lambda a, b: torch.cat([a, b]), [(0, 3), (2, 3)]),
  ("cat_both", lambda a, b: a.cat(b, dim=1), lambda a, b: torch.cat([a, b], 1), [(2, 0), (2, 0)]),
  ("stack", lambda a, b: a.stack(b), lambda a, b: torch.stack([a, b]), [(0, 2), (0, 2)]),
  ("cumsum_empty_axis", lambda a: a.cumsum(0), None, [(0, 3)]), ("cumsum_other_axis", lambda a: a.cumsum(1), None, [(0, 3)]),
  ("cumprod", lambda a: a.cumprod(0), None, [(0, 3)]), ("tril", lambda a: a.tril(), None, [(0, 3)]), ("triu", lambda a: a.triu(), None, [(3, 0)]),
  ("pad_constant", lambda a: a.pad((1, 1)), lambda a: F.pad(a, (1, 1)), [(2, 0, 3)]),
  ("pad_circular", lambda a: a.pad((1, 1), mode="circular"), lambda a: F.pad(a, (1, 1), mode="circular"), [(2, 0, 3)]),
  *[(f"pad_{m}_empty_batch", lambda a, m=m: a.pad((1, 1), mode=m), lambda a, m=m: F.pad(a, (1, 1), mode=m), [(0, 2, 3)])
    for m in ("reflect", "replicate", "circular")],
  ("matmul_k0", lambda a, b: a @ b, None, [(2, 0), (0, 3)]), ("matmul_m0", lambda a, b: a @ b, None, [(0, 4), (4, 3)]),
  ("matmul_n0", lambda a, b: a @ b, None, [(2, 4), (4, 0)]), ("broadcast_mul", lambda a, b: (a * b).exp() + a.sigmoid(), None, [(0, 3), (1, 3)]),
  ("reshape", lambda a: a.reshape(3, 0, 2), None, [(0, 6)]), ("expand", lambda a: a.expand(0, 3), None, [(1, 3)]),
  ("flip", lambda a: a.flip(0), None, [(0, 2)]), ("slice", lambda a: a[1:1], None, [(3, 2)]), ("repeat", lambda a: a.repeat(0, 2), None, [(2, 2)]),
  ("sort", lambda a: a.sort(0)[0], lambda a: a.sort(0).values, [(0, 2)]),
  ("conv2d", lambda a, w: a.conv2d(w), F.conv2d, [(0, 1, 4, 4), (2, 1, 3, 3)]),
  ("max_pool2d", lambda a: a.max_pool2d(2), lambda a: F.max_pool2d(a, 2), [(0, 1, 4, 4)]),
  ("layernorm", lambda a: a.layernorm(), lambda a: F.layer_norm(a, (3,), eps=1e-5), [(0, 3)]),
]
for _name in ("sum", "mean", "prod", "std", "var", "logsumexp", "softmax", "log_softmax"):
  for _axis, _shape in ((0, (0, 3)), (1, (0, 3)), (1, (3, 0))):
    ZERO.append((f"{_name}_axis{_axis}_{_shape[0]}x{_shape[1]}", lambda a, n=_name, ax=_axis: getattr(a, n)(ax), None, [_shape]))
ZERO += [("sum_all", lambda a: a.sum(), None, [(0, 3)]), ("mean_all", lambda a: a.mean(), None, [(0, 3)])]


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch warns about std/var with no degrees of freedom
@pytest.mark.parametrize("name,fn,torch_fn,shapes", ZERO, ids=[z[0] for z in ZERO])
def test_zero_sized(name, fn, torch_fn, shapes):
  check(fn, shapes, torch_fn=torch_fn)


def test_unused_input_gets_zero_gradient():
  x, y = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0], requires_grad=True)
  gx, gy = (x * 2).sum().gradient(x, y)
  compare(gx, torch.tensor([2.0, 2.0]), 0, 0, "used")
  compare(gy, torch.zeros(2), 0, 0, "unused")
  (y.sign() * x).sum().backward()  # torch: sign has a zero gradient
  compare(y.grad, torch.zeros(2), 0, 0, "through sign")


# ---- result dtypes
def test_result_dtypes():
  assert (Tensor([2, 3]) ** 0.5).dtype == dtypes.float32 and (torch.tensor([2, 3]) ** 0.5).dtype == torch.float32
  assert (Tensor([2, 3]) ** 2).dtype == dtypes.int32
  assert Tensor.arange(5).dtype == dtypes.int32  # tinygrad's default int (torch: int64)
  assert Tensor([1, 2]).sum(dtype=dtypes.int64).dtype == dtypes.int64 and Tensor([1.0, 2.0]).sum(dtype="float16").dtype == dtypes.float16
  assert Tensor([1, 2]).prod(dtype=dtypes.float32).dtype == dtypes.float32
  check(lambda x: x.sum(dtype=dtypes.float64) if isinstance(x, Tensor) else x.sum(dtype=torch.float64), [(3, 4)])
  check(lambda x: x.prod(1, dtype=dtypes.float64) if isinstance(x, Tensor) else x.prod(1, dtype=torch.float64), [(3, 4)])


# ---- exception types: ours must be catchable as torch's
ERRORS = [
  ("reshape_two_neg", lambda x: x.reshape(-1, -1)), ("reshape_size", lambda x: x.reshape(4, 2)), ("permute_dup", lambda x: x.permute(0, 0)),
  ("dim_out_of_range", lambda x: x.sum(5)), ("index_out_of_range", lambda x: x[5]), ("too_many_indices", lambda x: x[0, 0, 0]),
  ("matmul_mismatch", lambda x: x @ x), ("broadcast", lambda x: x + x.reshape(3, 2)), ("expand", lambda x: x.expand(4, 3)),
  ("flip_dup", lambda x: x.flip(0, 0)), ("unsqueeze", lambda x: x.unsqueeze(5)), ("transpose", lambda x: x.transpose(0, 4)),
  ("topk", lambda x: x.topk(5)), ("item", lambda x: x.item()), ("chunk", lambda x: x.chunk(0)), ("repeat_few", lambda x: x.repeat(2)),
  ("split_sum", lambda x: x.split([1, 1], dim=1)), ("tril_1d", lambda x: x[0].tril()), ("diagonal_same", lambda x: x.diagonal(0, 1, 1)),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_error_types(name, fn):
  with pytest.raises(Exception) as theirs: fn(torch.ones(2, 3))
  with pytest.raises(Exception) as ours: fn(Tensor.ones(2, 3))
  assert isinstance(ours.value, type(theirs.value)), f"we raise {type(ours.value).__name__}, torch {type(theirs.value).__name__}"


def test_one_hot_linspace_meshgrid_errors():
  with pytest.raises(RuntimeError): Tensor([1.0]).one_hot(3)
  with pytest.raises(RuntimeError): torch.linspace(0, 1, -1)
  with pytest.raises(RuntimeError): Tensor.linspace(0, 1, -1)
  with pytest.raises(RuntimeError): torch.meshgrid(torch.ones(2), indexing="zz")
  with pytest.raises(RuntimeError): Tensor.ones(2).meshgrid(indexing="zz")


# ---- accuracy: float16 GEMM on every device multiplies and accumulates in float32; uint8 bilinear rounds like torch
def test_float16_matmul_matches_torch():
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((32, 512)).astype(np.float16), rng.standard_normal((512, 24)).astype(np.float16)
  ours, theirs = (Tensor(a) @ Tensor(b)).numpy(), (torch.tensor(a) @ torch.tensor(b)).numpy()
  assert ours.dtype == np.float16
  np.testing.assert_allclose(ours.astype(np.float32), theirs.astype(np.float32), rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("align_corners", [False, True])
def test_uint8_bilinear_interpolate_rounds_like_torch(align_corners):
  for seed in range(3):
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (2, 3, int(rng.integers(2, 9)), int(rng.integers(2, 9)))).astype(np.uint8)
    size = (int(rng.integers(2, 16)), int(rng.integers(2, 16)))
    theirs = F.interpolate(torch.tensor(img), size=size, mode="bilinear", align_corners=align_corners)
    compare(Tensor(img).interpolate(size, mode="linear", align_corners=align_corners), theirs, 0, 0, f"seed {seed}")
