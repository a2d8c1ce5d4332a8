"""The CPU renderers' exp2 and log2 as arithmetic (core codegen/transcendental.py): within 1 ulp of the correctly rounded
result over the whole float32 range, exact special values, and no libm call left in the kernel (so the loop vectorizes)."""
import numpy as np
import pytest
from tinygrad import Context, Device, Tensor
from tinygrad.codegen.transcendental import is_integral
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp

RENDERERS = ["CPU:LLVM", "CPU:CLANG"]


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  return np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))


def _reference(fn, x: np.ndarray) -> np.ndarray:
  with np.errstate(over="ignore", under="ignore"): return fn(x.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("dev", RENDERERS)
def test_exp2_within_one_ulp_everywhere(dev):
  x = np.concatenate([np.linspace(-160, 140, 300_001, dtype=np.float32), np.random.default_rng(0).standard_normal(100_000, np.float32)])
  with Context(DEV=dev): got = Tensor(x).exp2().numpy()
  want = _reference(np.exp2, x)
  normal = np.isfinite(want) & (want != 0)
  assert _ulps(got[normal], want[normal]).max() <= 1
  np.testing.assert_array_equal(got[~normal], want[~normal])  # 0 and inf exactly where the rounded result is


@pytest.mark.parametrize("dev", RENDERERS)
def test_exp2_special_values(dev):
  x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 127.0, 127.99999, 128.0, -126.0, -126.5, -149.0, -149.5, -150.0,
                -151.0, 0.5, -0.5, 1e-30], np.float32)
  with Context(DEV=dev): got = Tensor(x).exp2().numpy()
  want = _reference(np.exp2, x)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
  ok = ~np.isnan(want)
  assert (_ulps(got[ok], want[ok]) <= 1).all(), list(zip(x[ok], got[ok], want[ok]))
  np.testing.assert_array_equal(got[[3, 4, 5, 7, 10, 12]], want[[3, 4, 5, 7, 10, 12]])  # powers of two are exact


@pytest.mark.parametrize("dev", RENDERERS)
def test_log2_within_one_ulp_everywhere(dev):
  rng = np.random.default_rng(2)
  every_positive = rng.integers(1, 0x7F800000, 400_000, dtype=np.int64).astype(np.int32).view(np.float32)  # subnormals too
  x = np.concatenate([every_positive, np.linspace(0.5, 2, 100_001, dtype=np.float32)])
  with Context(DEV=dev): got = Tensor(x).log2().numpy()
  assert _ulps(got, _reference(np.log2, x)).max() <= 1


@pytest.mark.parametrize("dev", RENDERERS)
def test_log2_special_values(dev):
  x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -1e-45, 1.0, 2.0, 0.5, 1024.0, 1e-45, 1.17549435e-38, 3.4028235e38,
                1.0000001, 0.99999994], np.float32)
  with Context(DEV=dev): got = Tensor(x).log2().numpy()
  with np.errstate(divide="ignore", invalid="ignore"): want = np.log2(x.astype(np.float64)).astype(np.float32)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
  ok = ~np.isnan(want)
  np.testing.assert_array_equal(got[ok][:9], want[ok][:9])  # infinities and powers of two exactly
  assert (_ulps(got[ok], want[ok]) <= 1).all(), list(zip(x[ok], got[ok], want[ok]))


@pytest.mark.parametrize("dev", RENDERERS)
def test_exp_and_softmax_match_numpy(dev):
  x = np.random.default_rng(1).standard_normal((64, 257), np.float32) * 20
  with Context(DEV=dev):
    e, s = Tensor(x).exp().numpy(), Tensor(x).softmax(-1).numpy()
  want = _reference(np.exp, x)
  ok = np.isfinite(want) & (want > 1e-37)
  assert _ulps(e[ok], want[ok]).max() <= 2
  ref = np.exp(x - x.max(-1, keepdims=True))
  np.testing.assert_allclose(s, ref / ref.sum(-1, keepdims=True), rtol=2e-6, atol=1e-30)


@pytest.mark.parametrize("dev", RENDERERS)
def test_no_library_call_in_the_kernel(dev):
  """The point of the rewrite: the rendered kernel computes exp2 itself (a libm call is one element per call)."""
  from tinygrad.codegen.program import get_program

  with Context(DEV=dev):
    srcs = [get_program(item.ast, Device.renderer("CPU")).src for f in ("exp2", "log2") for item in getattr(Tensor.empty(1024), f)().schedule()]
  assert len(srcs) == 2 and not any(fn in src.lower() for src in srcs for fn in ("exp2", "log2", "trunc")), srcs


def test_is_integral():
  x = UOp(Ops.DEFINE_VAR, dtypes.float32, arg=("x", -10.0, 10.0))
  t = UOp(Ops.TRUNC, dtypes.float32, (x,))
  assert is_integral(t) and is_integral(UOp.const(dtypes.float32, 3.0)) and is_integral(UOp.const(dtypes.int32, 3).cast(dtypes.float32))
  assert is_integral((t < 2.0).where(t, UOp.const(dtypes.float32, 127.0)))
  assert not is_integral(x) and not is_integral(UOp.const(dtypes.float32, 0.5)) and not is_integral((t < 2.0).where(t, x))
