"""Creation functions beyond the basics: normal, randint, linspace, *_like, size()."""
import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Tensor, dtypes

pytestmark = pytest.mark.skipif(is_null_device(), reason="NULL runs no kernels: nothing to read back")


def test_randint_range_and_dtype():
  Tensor.manual_seed(1)
  r = Tensor.randint(500, low=3, high=7).numpy()
  assert r.dtype == np.int32 and r.min() >= 3 and r.max() <= 6 and len(set(r.tolist())) == 4


def test_randint_rejects_empty_range():
  with pytest.raises(ValueError, match="low < high"): Tensor.randint(3, low=5, high=5)


@pytest.mark.parametrize("start,stop,steps", [(0, 1, 5), (-2, 3, 7), (1, 1, 3), (4, 0, 2), (0, 5, 1)])
def test_linspace_matches_numpy(start, stop, steps):
  np.testing.assert_allclose(Tensor.linspace(start, stop, steps).numpy(), np.linspace(start, stop, steps, dtype=np.float32), atol=1e-6)


def test_normal_moments():
  Tensor.manual_seed(2)
  n = Tensor.normal(2000, mean=2.0, std=0.5).numpy()
  assert abs(n.mean() - 2.0) < 0.05 and abs(n.std() - 0.5) < 0.05


def test_like_and_size():
  x = Tensor.ones(3, 4, dtype=dtypes.float16)
  assert x.size() == (3, 4) and x.size(-1) == 4
  assert x.rand_like().shape == (3, 4) and x.rand_like().dtype == dtypes.float16
  assert x.randn_like().dtype == dtypes.float16
