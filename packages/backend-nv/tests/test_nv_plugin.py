"""backend-nv's registrations: devices, DEV strings, renderers/archs, availability, and the tensor-core tables."""
from __future__ import annotations

import pytest
from nv_harness import HAS_GPU, NO_GPU_REASON, needs_gpu
from tinygrad import Device
from tinygrad.device.registry import DeviceNotFound, registry
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad_backend_nv.compiler import ARCHS, LOCAL_SIZE
from tinygrad_backend_nv.cuda import CUDARenderer
from tinygrad_backend_nv.ptx import PTXRenderer
from tinygrad_backend_nv.tensor_cores import SPECS, tensor_cores_for


def test_devices_registered() -> None:
  for kind in ("CUDA", "NV"):
    spec = registry.load().devices[kind]
    assert spec.package == "tinygrad-backend-nv"
    names = {r.name for r in registry.renderers_for(kind)}
    assert names == {"CUDA", "PTX"}
    assert (spec.count() > 0) == HAS_GPU
    why = spec.available()
    assert (why is None) == HAS_GPU
    if not HAS_GPU: assert why and ("driver" in why or "GPU" in why), why


@pytest.mark.parametrize("dev,device,renderer,cls,arch", [
  ("CUDA", "CUDA", "CUDA", CUDARenderer, None), ("CUDA:PTX", "CUDA", "PTX", PTXRenderer, None),
  ("CUDA:CUDA:sm_90", "CUDA", "CUDA", CUDARenderer, "sm_90"), ("NV:CUDA:sm_90", "NV", "CUDA", CUDARenderer, "sm_90"),
  ("NULL:CUDA:sm_90", "NULL", "CUDA", CUDARenderer, "sm_90"), ("NULL:PTX:sm_80", "NULL", "PTX", PTXRenderer, "sm_80"),
  ("NV", "NV", "CUDA", CUDARenderer, None), ("NV:PTX:sm_86", "NV", "PTX", PTXRenderer, "sm_86"), ("cuda::sm_75", "CUDA", "CUDA", CUDARenderer, "sm_75"),
  ("NULL:CUDA:sm_90a", "NULL", "CUDA", CUDARenderer, "sm_90a"), ("NULL:PTX:sm_89", "NULL", "PTX", PTXRenderer, "sm_89")])
def test_dev_strings_resolve(dev: str, device: str, renderer: str, cls: type, arch: str | None) -> None:
  with Context(DEV=dev):
    assert Device.DEFAULT == device
    r = Device.renderer(Device.DEFAULT)
    assert isinstance(r, cls) and r.name == renderer
    assert r.arch == (arch or registry.resolve(Device.targets()[0]).renderer.default_arch())
    assert r.has_local and r.local_max == (LOCAL_SIZE,) and LOCAL_SIZE <= 1024


@pytest.mark.parametrize("local_arch,want", [("sm_90", 114), ("sm_80", 132), (None, 132)])
def test_the_cuda_renderer_counts_this_machines_sms(monkeypatch, local_arch: str | None, want: int) -> None:
  """A GPU of the renderer's arch gives its SM count (an H100 PCIe: 114); another arch or no GPU keeps the arch's table (132)."""
  import tinygrad_backend_nv.plugin as plugin
  import tinygrad_backend_nv.runtime as runtime
  from tinygrad.device.devstring import Target
  monkeypatch.setattr(plugin, "_count", lambda: 0 if local_arch is None else 1)
  monkeypatch.setattr(runtime, "device_arch", lambda index=0: local_arch)
  monkeypatch.setattr(runtime, "device_sm_count", lambda index=0: 114)
  renderer = plugin._make_cuda(Target("CUDA", "CUDA", "sm_90a"))
  assert renderer.compute_units == want
  import pickle
  assert pickle.loads(pickle.dumps(renderer)).compute_units == want  # the compile pool's workers render with the same count


@needs_gpu  # (a skipif with reason=None errors where there is a GPU: NO_GPU_REASON is None there)
def test_the_cuda_renderer_on_this_gpu_has_its_sm_count() -> None:
  from tinygrad_backend_nv.runtime import device_sm_count
  assert Device.renderer("CUDA").compute_units == device_sm_count(0) > 0


def test_default_arch_without_gpu_is_sm90() -> None:
  if HAS_GPU: pytest.skip("a GPU is present: the default arch is its compute capability")
  with Context(DEV="CUDA"):
    assert Device.renderer("CUDA").arch == "sm_90"


@pytest.mark.parametrize("dev,match", [("CUDA:CUDA:sm_70", "unknown arch 'sm_70'"), ("CUDA:PTXX", "did you mean 'PTX'"),
                                       ("NV:CUDA:gfx1100", "accepted: sm_75")])
def test_bad_renderer_or_arch(dev: str, match: str) -> None:
  with Context(DEV=dev), pytest.raises(DeviceNotFound, match=match):
    Device.renderer(Device.DEFAULT)


def test_opening_without_gpu_says_why() -> None:
  if HAS_GPU: pytest.skip("there is a GPU")
  for name in ("CUDA", "NV", "CUDA:1"):
    with pytest.raises(RuntimeError, match=f"{name.split(':')[0]}.* is not available here: .*{NO_GPU_REASON.split(' (')[0]}"):
      Device[name]


def test_null_compiles_without_gpu() -> None:
  from tinygrad import Tensor
  for dev in ("NULL:CUDA:sm_90", "NULL:PTX:sm_80", "NULL:CUDA:sm_75", "NULL:PTX:sm_75"):
    with Context(DEV=dev):
      t = ((Tensor.arange(64).float().reshape(8, 8) @ Tensor.ones(8, 8).half().float()).exp2().sum(1) + 1).realize()
      assert t.device == "NULL"


# ---- tensor cores

def _bijective(layout, rows: int, cols: int, threads: int) -> None:
  cells = [cell for lane in layout for cell in lane]
  assert len(layout) == threads
  assert len({len(lane) for lane in layout}) == 1, "every lane holds the same number of elements"
  assert len(cells) == rows * cols, f"{len(cells)} elements for a {rows}x{cols} matrix"
  assert set(cells) == {(r, c) for r in range(rows) for c in range(cols)}, "each element of the matrix is held by exactly one lane"


@pytest.mark.parametrize("arch", ARCHS)
def test_tensor_core_layouts_are_bijections(arch: str) -> None:
  tcs = tensor_cores_for(arch)
  assert tcs, f"no tensor cores for {arch}"
  for tc in tcs:
    m, n, k = tc.dims
    if tc.smem_operands:  # wgmma (sm_90a): A and B come from shared memory; a warpgroup's 128 lanes hold the accumulators
      _bijective(tc.c_layout, m, n, 128)
      assert tc.threads == 128 and tc.dtype_out == dtypes.float32 and not tc.a_layout and not tc.b_layout and tc.opt_in is not None
      continue
    if tc.fma:  # core's outer product of FFMAs (float32 without tf32): a lane's rows/columns are shared by its row/column group
      _bijective(tc.c_layout, m, n, tc.threads)
      assert tc.dtype_in == tc.dtype_out == dtypes.float32 and tc.opt_in is not None and k == 1
      continue
    _bijective(tc.a_layout, m, k, tc.threads)
    _bijective(tc.b_layout, k, n, tc.threads)
    _bijective(tc.c_layout, m, n, tc.threads)
    assert tc.threads == 32 and tc.dtype_out == dtypes.float32
    assert tc.extra["ptx"].startswith(f"mma.sync.aligned.m{m}n{n}k{k}.row.col.f32.")
    # every operand register is a full 32 bits
    for name, layout in (("a", tc.a_layout), ("b", tc.b_layout)):
      assert len(layout[0]) * tc.dtype_in.itemsize == 4 * tc.extra["regs_b32"][name]


def test_tensor_core_sets_per_arch() -> None:
  def kinds(arch: str) -> set[tuple]: return {(tc.dims, tc.dtype_in) for tc in tensor_cores_for(arch)}
  assert kinds("sm_75") == {((16, 8, 8), dtypes.float16)}
  sm80 = {((16, 8, 16), dtypes.float16), ((16, 8, 16), dtypes.bfloat16), ((16, 8, 8), dtypes.float32), ((16, 32, 1), dtypes.float32)}
  assert kinds("sm_80") == kinds("sm_86") == sm80
  fp8 = {((16, 8, 32), dtypes.fp8e4m3), ((16, 8, 32), dtypes.fp8e5m2)}
  assert kinds("sm_89") == kinds("sm_90") == sm80 | fp8
  wgmma = {((64, n, 16), dt) for n in (64, 128, 256) for dt in (dtypes.float16, dtypes.bfloat16)}
  assert kinds("sm_90a") == sm80 | fp8 | wgmma
  assert all("wgmma" in tc.extra for tc in tensor_cores_for("sm_90"))
  assert set(SPECS) == {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"}


def test_tensor_cores_reach_core_and_renderers() -> None:
  assert Device.tensor_cores("sm_80") == list(tensor_cores_for("sm_80"))
  with Context(DEV="NULL:PTX:sm_89"):
    assert Device.renderer("NULL").tensor_cores == tuple(tensor_cores_for("sm_89"))


def test_m16n8k16_layout_spot_checks() -> None:
  """Lane 5 (groupID 1, threadID_in_group 1), from the PTX ISA's m16n8k16 fragment figures."""
  tc = next(tc for tc in tensor_cores_for("sm_80") if tc.dims == (16, 8, 16) and tc.dtype_in == dtypes.float16)
  assert tc.a_layout[5] == ((1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11))
  assert tc.b_layout[5] == ((2, 1), (3, 1), (10, 1), (11, 1))
  assert tc.c_layout[5] == ((1, 2), (1, 3), (9, 2), (9, 3))
  tf32 = next(tc for tc in tensor_cores_for("sm_80") if tc.dtype_in == dtypes.float32)
  assert tf32.a_layout[5] == ((1, 1), (9, 1), (1, 5), (9, 5)) and tf32.b_layout[5] == ((1, 1), (5, 1))


def test_no_driver_means_no_bindings_import() -> None:
  """Where the loader finds no libcuda.so.1, choosing the default device answers "no driver" without importing
  cuda-bindings (~0.2 s of every CPU user's start-up, for a driver that isn't there)."""
  import os
  import subprocess
  import sys
  code = ("import sys\nfrom tinygrad_backend_nv.plugin import _libcuda_loads\n"
          "from tinygrad import Device\nDevice.DEFAULT\n"
          "print(_libcuda_loads(), 'cuda.bindings.driver' in sys.modules)")
  env = {k: v for k, v in os.environ.items() if k != "DEV"}
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout.split()
  if out[0] == "True": pytest.skip("libcuda.so.1 loads here")
  assert out == ["False", "False"]
