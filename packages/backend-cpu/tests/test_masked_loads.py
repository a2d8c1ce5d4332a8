"""The LLVM renderer's masked vector loads (masked_loads.py) and nsw index math: a padded convolution's border lanes become
one llvm.masked.load per group and the kernel is SIMD code; results equal the reference at every border; ints that may
overflow still wrap."""
import numpy as np
import pytest
from tinygrad import Context, Device, Tensor, dtypes
from tinygrad.codegen.program import get_program


def _src(t: Tensor) -> str:
  (item,) = [it for it in t.schedule() if it.ast.op.name == "SINK"]
  return get_program(item.ast, Device.renderer("CPU")).src


def test_padded_conv_loads_its_lanes_as_one_masked_load():
  with Context(DEV="CPU:LLVM"):
    src = _src(Tensor.empty(2, 8, 16, 16).conv2d(Tensor.empty(16, 8, 3, 3), padding=1))
  assert "@llvm.masked.load.v" in src and "label %G" not in src, src  # no branch around a gated load is left


@pytest.mark.parametrize("shape,pad,stride", [((2, 3, 17, 19), 1, 1), ((1, 4, 16, 16), 2, 1), ((2, 5, 15, 16), 1, 2), ((1, 2, 9, 40), 3, 1)])
def test_padded_conv_matches_numpy(shape, pad, stride):
  rng = np.random.default_rng(sum(shape))
  x, w = rng.standard_normal(shape, np.float32), rng.standard_normal((6, shape[1], 3, 3), np.float32)
  with Context(DEV="CPU:LLVM"): got = Tensor(x).conv2d(Tensor(w), padding=pad, stride=stride).numpy()
  xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
  oh, ow = (xp.shape[2] - 3) // stride + 1, (xp.shape[3] - 3) // stride + 1
  want = np.zeros((shape[0], 6, oh, ow), np.float32)
  for ky in range(3):
    for kx in range(3):
      patch = xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
      want += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_gated_loads_of_other_shapes_still_work():
  """A gather-like gate (from loaded data) and a pad on a non-contiguous axis: no grouping, same values as numpy."""
  x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
  with Context(DEV="CPU:LLVM"):
    a = Tensor(x).pad(((1, 1), (0, 2), (2, 0))).numpy()
    b = Tensor(x).permute(2, 0, 1).pad(((1, 0), (0, 1), (3, 3))).contiguous().numpy()
  np.testing.assert_array_equal(a, np.pad(x, ((1, 1), (0, 2), (2, 0))))
  np.testing.assert_array_equal(b, np.pad(x.transpose(2, 0, 1), ((1, 0), (0, 1), (3, 3))))


def test_index_math_is_nsw_and_user_ints_still_wrap():
  with Context(DEV="CPU:LLVM"):
    src = _src(Tensor.empty(64, 64) @ Tensor.empty(64, 64))
    assert "add nsw i32" in src or "mul nsw i32" in src
    big = Tensor([2**31 - 1, -2**31], dtype=dtypes.int32)
    np.testing.assert_array_equal((big + 1).numpy(), np.array([-2**31, -2**31 + 1], np.int32))
    np.testing.assert_array_equal((big * 3).numpy(), (np.array([2**31 - 1, -2**31], np.int32) * np.int32(3)))
