"""Behaviour that tinygrad's own test suite (test/backend/test_ops.py, test_tensor.py, ...) expects and tinygrad 0.14 has, found by
running that suite against this package: each case failed here before its fix. References are numpy, torch where installed."""
import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes

from conftest import is_null_device

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
