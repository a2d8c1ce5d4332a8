"""Images (IMAGE=1/2) on QCOMCL: which buffers become image2d_t, the OpenCL C that reads and writes them, and the same
numbers as without images on the CL device (PoCL in CI) and as the PYTHON reference."""
from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from tinygrad import Context, Tensor, dtypes
from tinygrad.codegen.program import lower_kernel
from tinygrad.device.devstring import Target
from tinygrad.dtype import ImageDType
from tinygrad.renderer import UnsupportedDTypeError
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_qcom.images import image_shape
from tinygrad_backend_qcom.opencl import cl_status
from tinygrad_backend_qcom.qcomcl import QCOMCLRenderer

needs_cl = pytest.mark.skipif(cl_status()[1] is not None, reason=f"no OpenCL device: {cl_status()[1]}")
RNG = np.random.default_rng(0)


def sources(t: Tensor, image: int, device: str = "CL") -> list[str]:
  """Each kernel of t's schedule rendered by QCOMCL for `device` at IMAGE=image."""
  r = QCOMCLRenderer(Target(device, "QCOMCL", "cl"))
  with Context(IMAGE=image):
    return [r.render(f"k{i}", lower_kernel(item.ast, r)) for i, item in enumerate(t.schedule()) if item.ast.op.name == "SINK"]


def data(*shape: int) -> np.ndarray: return RNG.standard_normal(shape).astype(np.float32)


def run(fn: Callable[[], Tensor], dev: str, image: int = 0) -> np.ndarray:
  with Context(DEV=dev, IMAGE=image): return fn().numpy()


# ---- the dtypes

def test_image_dtypes() -> None:
  f, h = dtypes.imagef((2, 8, 4)), dtypes.imageh((3, 5, 4))
  assert isinstance(f, ImageDType) and f.shape == (2, 8, 4) and f.base == dtypes.float32 and f.size == 64 and f.itemsize == 4
  assert h.base == dtypes.float16 and h.itemsize == 2 and repr(h) == "dtypes.imageh((3, 5, 4))"
  assert f == dtypes.imagef((2, 8, 4)) and f != dtypes.imagef((8, 2, 4)) and hash(f) == hash(dtypes.imagef((2, 8, 4)))
  with pytest.raises(ValueError, match="height, width, 4"): dtypes.imagef((4, 4, 3))


def test_image_shape() -> None:
  assert image_shape(64) == (1, 16, 4) and image_shape(4 * 16384 * 3) == (3, 16384, 4)
  assert image_shape(6) is None and image_shape(0) is None
  assert image_shape(4 * 16411 * 16411, (16384, 16384)) is None  # a prime number of texels above the width limit: no image
  assert image_shape(4 * 33280, (8192, 8192)) == (5, 6656, 4)  # a device with 8192 texels a side: 8320 x 4 won't do


@needs_cl
def test_images_fit_the_cl_devices() -> None:
  """The CL renderer sizes images by what the OpenCL devices here take (PoCL's limit differs between machines: 8192 or 16384)."""
  from tinygrad_backend_qcom.opencl import cl_devices
  w, h = QCOMCLRenderer(Target("CL", "QCOMCL", "cl")).image_max
  assert all(w <= int(d.image2d_max_width) and h <= int(d.image2d_max_height) for d in cl_devices())


def test_renderers_without_images_reject_them() -> None:
  from tinygrad.renderer.cstyle import CStyleRenderer

  class Plain(CStyleRenderer):
    name = "PLAIN"

  buf = UOp(Ops.DEFINE_GLOBAL, dtypes.imagef((1, 4, 4)), (), 0)
  with pytest.raises(UnsupportedDTypeError, match="no image types"): Plain().render("k", [buf])


# ---- what is rendered

def test_image0_renders_no_images() -> None:
  for image in (0,):
    for src in sources(Tensor.empty(16, 32) @ Tensor.empty(32, 8), image): assert "image2d_t" not in src and "float4" not in src


def test_image1_matmul_reads_its_inputs_as_images() -> None:
  (src,) = sources(Tensor.empty(16, 32) @ Tensor.empty(32, 8), 1)
  assert "read_only image2d_t data1" in src and "read_only image2d_t data2" in src and "__global float* restrict data0" in src
  assert "read_imagef(data1, tg_smp, " in src and "write_imagef" not in src
  assert "// tg.image 1 r 1 128 f" in src and "// tg.image 2 r 1 64 f" in src


def test_image1_leaves_elementwise_kernels_alone() -> None:
  (src,) = sources(Tensor.empty(64) * 2 + 1, 1)
  assert "image2d_t" not in src


def test_image2_elementwise_reads_and_writes_images() -> None:
  (src,) = sources(Tensor.empty(64) * Tensor.empty(64) + 1, 2)
  assert "write_only image2d_t data0" in src and "read_only image2d_t data1" in src and "read_only image2d_t data2" in src
  assert "write_imagef(data0, " in src and "read_imagef(data1, tg_smp, " in src


def test_fallbacks_stay_buffers() -> None:
  (src,) = sources(Tensor.empty(7) * 2, 2)  # 7 floats: no whole number of texels
  assert "image2d_t" not in src
  (src,) = sources(Tensor.empty(10, 4).sum(axis=1), 2)  # 10 outputs written one at a time: no float4 store, so no image
  assert "__global float* restrict data0" in src and "read_only image2d_t data1" in src
  (src,) = sources(Tensor.empty(64, dtype=dtypes.int32) + 1, 2)  # ints are no image
  assert "image2d_t" not in src
  a = Tensor.zeros(64).contiguous().realize()
  (src,) = sources(a.assign(a * 2 + 1), 2)  # read and written by one kernel
  assert "image2d_t" not in src and "__global float* restrict data0" in src


@needs_cl
def test_in_place_updates_with_images_on() -> None:
  with Context(DEV="CL:QCOMCL", IMAGE=2):
    b = Tensor.arange(64).float().contiguous().realize()
    b.assign(b * 2 + 1).realize()
    b[3:7].assign(Tensor.ones(4) * 9).realize()
    got = b.numpy()
  want = np.arange(64, dtype=np.float32) * 2 + 1
  want[3:7] = 9
  np.testing.assert_array_equal(got, want)


def test_the_kgsl_device_has_no_images() -> None:
  for src in sources(Tensor.empty(16, 32) @ Tensor.empty(32, 8), 2, device="QCOM"): assert "image2d_t" not in src


# ---- the numbers, on PoCL

CASES: dict[str, Callable[[], Callable[[], Tensor]]] = {
  "matmul": lambda: (lambda a, b: lambda: Tensor(a) @ Tensor(b))(data(16, 32), data(32, 8)),
  "matmul_odd": lambda: (lambda a, b: lambda: Tensor(a) @ Tensor(b))(data(5, 12), data(12, 3)),
  "conv2d": lambda: (lambda x, w: lambda: Tensor(x).conv2d(Tensor(w), padding=1).relu())(data(2, 4, 9, 9), data(8, 4, 3, 3)),
  "elementwise": lambda: (lambda a, b: lambda: (Tensor(a) * Tensor(b) + 1).exp2())(data(8, 16), data(8, 16)),
  "broadcast": lambda: (lambda a, b: lambda: Tensor(a) + Tensor(b))(data(6, 8), data(1, 8)),
  "softmax": lambda: (lambda a: lambda: Tensor(a).softmax(axis=1))(data(12, 20)),
  "tall_images": lambda: (lambda a, b: lambda: Tensor(a) * 2 - Tensor(b))(data(256, 520), data(256, 520)),  # 8320x4 texels
  "matmul_tall": lambda: (lambda a, b: lambda: Tensor(a) @ Tensor(b))(data(8, 1100), data(1100, 64)),  # b: 8800x2 texels
  "odd_sizes": lambda: (lambda a: lambda: Tensor(a).sum(axis=0) * 3)(data(7, 5)),
}


@needs_cl
@pytest.mark.parametrize("image", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_images_give_the_same_numbers(case: str, image: int) -> None:
  fn = CASES[case]()
  ref, plain, got = run(fn, "PYTHON"), run(fn, "CL:QCOMCL"), run(fn, "CL:QCOMCL", image)
  # long sums may add in another order (the float4 opts differ): a wrong texel is off by O(1), not 1e-4
  np.testing.assert_allclose(plain, ref, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(got, plain, rtol=1e-4, atol=1e-4)


@needs_cl
def test_half_inputs_read_as_images() -> None:
  a, b = data(8, 16).astype(np.float16), data(16, 4).astype(np.float16)
  fn = lambda: (Tensor(a) @ Tensor(b)).float()  # noqa: E731
  srcs = sources(fn(), 1)
  assert any(re.search(r"^// tg\.image \d+ r \d+ \d+ h$", s, re.M) and "read_only image2d_t" in s for s in srcs)
  np.testing.assert_array_equal(run(fn, "CL:QCOMCL:cl", 1), run(fn, "CL:QCOMCL:cl", 0))
