"""Behaviour that tinygrad's own test suite (test/backend/test_ops.py, test_tensor.py, ...) expects and tinygrad 0.14 has, found by
running that suite against this package: each case failed here before its fix. References are numpy, torch where installed."""
import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Device, Tensor, dtypes

pytestmark = pytest.mark.skipif(is_null_device(), reason="reads values back")


def test_matmul_with_heads_repeated_by_a_merging_reshape():
  """(G, S, D) expanded to (G, R, S, D) and reshaped to (G*R, S, D) (GQA's repeated heads) then multiplied: the merged axis
  moves the read position by no single step, and the CPU layout rewrites took its first step (0) for a broadcast."""
  rng = np.random.default_rng(0)
  k, q = rng.standard_normal((2, 16, 4), np.float32), rng.standard_normal((4, 16, 4), np.float32)
  rep = Tensor(k).unsqueeze(1).expand(2, 2, 16, 4).reshape(4, 16, 4)
  ref = np.repeat(k, 2, axis=0)
  np.testing.assert_allclose((Tensor(q).unsqueeze(2) * rep.unsqueeze(1)).sum(-1).numpy(), (q[:, :, None] * ref[:, None]).sum(-1),
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose((Tensor(q) @ rep.transpose(-2, -1)).numpy(), q @ ref.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def test_sdpa_enable_gqa():
  rng = np.random.default_rng(1)
  q, k, v = (rng.standard_normal(s, np.float32) for s in [(1, 8, 16, 64), (1, 2, 16, 64), (1, 2, 16, 64)])
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), enable_gqa=True).numpy()
  # reference: each kv head serves 4 query heads in a row (repeat_interleave)
  kr, vr = np.repeat(k, 4, axis=1), np.repeat(v, 4, axis=1)
  s = q @ kr.transpose(0, 1, 3, 2) / 8.0
  w = np.exp(s - s.max(-1, keepdims=True))
  np.testing.assert_allclose(out, (w / w.sum(-1, keepdims=True)) @ vr, rtol=1e-4, atol=1e-5)


def test_dtype_module_interop_names():
  """tinygrad.dtype's numpy/torch helpers and dtype table, which tinygrad programs import (tinygrad.tensor re-exports _to_np_dtype)."""
  from tinygrad.dtype import DTYPES_DICT, _from_np_dtype, _to_np_dtype
  from tinygrad.tensor import _to_np_dtype as from_tensor
  assert from_tensor is _to_np_dtype
  assert DTYPES_DICT["float32"] is dtypes.float32 and DTYPES_DICT["half"] is dtypes.float16 and "void" not in DTYPES_DICT
  assert np.dtype(_to_np_dtype(dtypes.int64)) == np.int64 and _to_np_dtype(dtypes.bfloat16) is np.float32
  assert _from_np_dtype(np.float16) is dtypes.float16 and _from_np_dtype(np.dtype("uint8")) is dtypes.uint8
  # .numpy()'s dtype is the one _to_np_dtype names
  for dt in (dtypes.bool, dtypes.int8, dtypes.uint16, dtypes.int64, dtypes.float16, dtypes.bfloat16, dtypes.float64):
    assert Tensor([1, 0], dtype=dt).numpy().dtype == np.dtype(_to_np_dtype(dt))


def test_dtype_groups_and_contextvar_tolist():
  from tinygrad.helpers import Context, ContextVar
  assert dtypes.fp8s == (dtypes.fp8e4m3, dtypes.fp8e5m2) == dtypes.fp8_ocp
  assert dtypes.int8s == (dtypes.uint8, dtypes.int8) and dtypes.int64s == (dtypes.uint64, dtypes.int64)
  v = ContextVar._registry["EMULATED_DTYPES"]
  with Context(EMULATED_DTYPES="half,bfloat16"): assert v.tolist() == ["half", "bfloat16"] and v.tolist(dtypes) == [dtypes.half, dtypes.bfloat16]
  with Context(EMULATED_DTYPES=""): assert v.tolist() == []


def test_slice_of_a_file_tensor_not_written_yet(tmp_path):
  """x.to("disk:f")[10:20] before x is written: the file is written, then the slice read from it (DISK runs no kernels)."""
  x = Tensor.arange(30, dtype=dtypes.float32) * 2
  t = x.to(f"disk:{tmp_path / 'f'}")
  a = t[10:20]
  np.testing.assert_equal(a.to(Device.DEFAULT).numpy(), np.arange(10, 20) * 2.0)
  np.testing.assert_equal(a.numpy(), np.arange(10, 20) * 2.0)
  np.testing.assert_equal(t.numpy(), np.arange(30) * 2.0)
  b = (Tensor.arange(12) + 1).to(f"disk:{tmp_path / 'g'}")[6:].reshape(2, 3)
  assert b.tolist() == [[7, 8, 9], [10, 11, 12]]


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float32])
def test_rand_low_precision_stays_below_one(dt):
  """rand in [0, 1) also in narrow floats: a float32 draw near 1 rounded up to 1.0 in the cast to float16/bfloat16."""
  if dt not in Device[Device.DEFAULT].renderer.supported_dtypes(): pytest.skip(f"{dt} not supported here")
  Tensor.manual_seed(0)
  x = Tensor.rand(2, 128, 128, dtype=dt).float().numpy()
  assert x.min() >= 0.0 and x.max() < 1.0
  assert 0.4 < x.mean() < 0.6 and len(np.unique(x)) > 3


def test_setitem_value_gets_its_gradient():
  """z[:] = x; z.sum().backward(): x's gradient is 1 where it was written (torch's CopySlices, tinygrad's STORE gradient), not 0."""
  z = Tensor.ones(4, 4).contiguous()
  x = Tensor.rand(4, 4)
  z[:] = x
  z.sum().backward()
  np.testing.assert_equal(x.grad.numpy(), np.ones((4, 4)))
  z2 = Tensor.zeros(3, 4).contiguous()
  y = Tensor([1.0, 2.0, 3.0, 4.0])
  z2[1] = y
  (z2 * Tensor([[1.0], [2.0], [3.0]])).sum().backward()
  np.testing.assert_equal(y.grad.numpy(), [2.0, 2.0, 2.0, 2.0])
