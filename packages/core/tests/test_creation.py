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


# ---- zero fills: a fresh buffer filled with 0 is zeroed memory where the allocator has it (engine/realize.py)

def test_zeros_are_zero_in_memory_that_held_other_data():
  from tinygrad import Device
  for _ in range(2):  # the second round's buffers may come from the allocator's cache of the first's
    junk = (Tensor.arange(4096).float() + 1).contiguous().realize()
    del junk
    z = Tensor.zeros(64, 64).contiguous().realize()
    assert not z.numpy().any()
  if hasattr(Device[Device.DEFAULT].allocator, "alloc_zeroed"):
    from tinygrad import GlobalCounters
    GlobalCounters.reset()
    Tensor.zeros(3, 5, dtype=dtypes.float16).contiguous().realize()
    assert GlobalCounters.kernel_count == 0  # an allocation, no kernel


def test_zeros_then_writes_and_assign_of_zeros_into_a_buffer():
  z = Tensor.zeros(4, 6).contiguous().realize()
  z[1:3, 2:4].assign(Tensor.ones(2, 2)).realize()
  expect = np.zeros((4, 6), np.float32)
  expect[1:3, 2:4] = 1
  np.testing.assert_array_equal(z.numpy(), expect)
  z.assign(Tensor.zeros(4, 6)).realize()  # an allocated buffer: the fill runs as a kernel
  assert not z.numpy().any()


def test_zeros_inside_a_jit_are_filled_on_every_replay():
  from tinygrad import TinyJit
  @TinyJit
  def f(x: Tensor) -> Tensor:
    acc = Tensor.zeros(8).contiguous().realize()
    acc.assign(acc + x).realize()
    return (acc * 2).contiguous()
  for i in range(4): np.testing.assert_array_equal(f(Tensor.full((8,), float(i)).contiguous().realize()).numpy(), np.full(8, 2.0 * i))


def test_negative_zero_fill_keeps_its_sign():
  z = Tensor.full((16,), -0.0).contiguous().realize()
  assert (1 / z).numpy().tolist() == [-np.inf] * 16


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (2, 0), (0, 3), (2, 0, 3), (2, 3, 4), (1, 1, 1), (3, 1, 2, 2)])
def test_tolist_nests_like_numpy(shape):
  a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
  assert Tensor(a).tolist() == a.tolist()


@pytest.mark.parametrize("npdt, dt", [(np.longlong, dtypes.int64), (np.ulonglong, dtypes.uint64), (np.intc, dtypes.int32), (">i4", dtypes.int32),
                                      (">f8", dtypes.float64), ("<u2", dtypes.uint16)])
def test_from_numpy_every_int_spelling_and_byte_order(npdt, dt):
  """numpy has two int64 types on Linux (np.int64 'l' and np.longlong 'q', what .numpy() of an int64 tensor gives); both are
  int64, and big-endian arrays keep their values (Tensor(t.numpy()) raised for int64 before; found by api_fuzz seed 79)."""
  a = np.array([[1, 2, 3], [7, 0, 5]], dtype=npdt)
  t = Tensor(a)
  assert t.dtype == dt and t.tolist() == a.tolist()
  back = Tensor(t.numpy())
  assert back.dtype == dt and back.tolist() == a.tolist()
