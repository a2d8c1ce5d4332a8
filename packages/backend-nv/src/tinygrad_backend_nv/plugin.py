"""Registers NVIDIA devices, renderers and tensor cores with tinygrad (entry point `tinygrad.backends: nv`).

Devices: `CUDA` (the driver API through cuda-bindings) and `NV`, through one of three interfaces:
- `NVK` (`DEV=NV`, `NVK+NV`; tried first): the kernel driver's ioctls on /dev/nvidiactl, /dev/nvidia0, /dev/nvidia-uvm
  without libcuda (nvruntime.py: RM objects, GPFIFO channel, QMD launches). Where it can't open (no /dev/nvidiactl, an
  ioctl refused), `DEV=NV` falls back to `CUDA` with a one-line note on stderr; never to the mock;
- `CUDA` (`CUDA+NV`): the driver API, as the `CUDA` device;
- `MOCK` (`DEV=MOCK+NV`, only when DEV names it): the ioctls and the GPFIFO/QMD processor in Python (mocknv.py,
  mockgpfifo.py); each launch is checked and its kernel run by core's PYTHON interpreter on the mock's memory. Renderers, for both: `CUDA` (default: CUDA C -> NVRTC -> cubin) and `PTX` (our own
PTX -> nvJitLink cubin, or the driver's JIT). Archs: sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a; the default is the
GPU's own compute capability (sm_90a on Hopper: wgmma), or sm_90 without a GPU (so `DEV=NULL:CUDA` compiles for Hopper).
"""
from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable

from tinygrad.device.plugin import (
  CollectiveSpec,
  DeviceSpec,
  OpenDevice,
  RegisterDevice,
  RegisterRenderer,
  RegisterTensorCores,
  RendererSpec,
  Target,
  hookimpl,
)

from tinygrad_backend_nv.compiler import ARCHS, DEFAULT_ARCH

PACKAGE = "tinygrad-backend-nv"
DEVICES = ("CUDA", "NV")


def _status() -> tuple[int, str | None]:
  # imported lazily: loading the plugin must not touch the driver
  if not _libcuda_loads(): return 0, "no NVIDIA driver on this machine (libcuda.so.1 not found)"
  from tinygrad_backend_nv.runtime import driver_status
  return driver_status()


@functools.cache
def _libcuda_loads() -> bool:
  """Whether the dynamic loader finds the driver library: a dlopen (well under a millisecond) rather than importing
  cuda-bindings (~0.2 s) on a machine without an NVIDIA driver, where choosing the default device asks CUDA first."""
  if sys.platform != "linux": return True  # the bindings know where to look elsewhere
  try: ctypes.CDLL("libcuda.so.1")
  except OSError: return False
  return True


def _count() -> int: return _status()[0]
def _available() -> str | None: return _status()[1]


def _nv_count() -> int:
  """GPUs for NV: the driver API's count, else the /dev/nvidiaN nodes (NVK needs no libcuda)."""
  if (n := _status()[0]): return n
  import os
  import re
  return len([f for f in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", f)]) if os.path.exists("/dev/nvidiactl") else 0


def _nv_available() -> str | None:
  from tinygrad_backend_nv.iface import nvk_present
  if nvk_present() or (why := _status()[1]) is None: return None
  return f"no /dev/nvidiactl here for NVK+NV, and for CUDA+NV: {why}. DEV=MOCK+NV runs NVK+NV's runtime on a mock driver"


_nvk_failed: dict[int, str] = {}  # NV instance -> why NVK did not open it (the CUDA interface notes the fallback)


def _open_nvk(index: int, target: Target):
  from tinygrad_backend_nv.iface import NVK, nvk_present
  from tinygrad_backend_nv.nvruntime import NVKDevice
  try:
    if not nvk_present(): raise RuntimeError("no /dev/nvidiactl here (no NVIDIA kernel driver): DEV=MOCK+NV runs NVK+NV's runtime on a mock")
    return NVKDevice(NVK(), index, target.arch)
  except Exception as e:
    _nvk_failed[index] = f"{type(e).__name__}: {e}"
    raise


def _open_nv_cuda(index: int, target: Target):
  import sys

  from tinygrad_backend_nv.runtime import open_cuda
  dev = open_cuda("NV", index)
  if not target.interface and index in _nvk_failed:
    print(f"NV:{index}: NVK+NV did not open ({_nvk_failed[index]}); using the CUDA driver API interface (CUDA+NV)", file=sys.stderr)
  return dev


def _open_mock(index: int, target: Target):
  from tinygrad_backend_nv.mocknv import MockNV
  from tinygrad_backend_nv.nvruntime import NVKDevice
  return NVKDevice(MockNV(arch=target.arch or DEFAULT_ARCH), index, target.arch)


def _default_arch() -> str:
  """The first GPU's arch when it is one we render for, else sm_90. A Hopper GPU (sm_90) gets sm_90a: its arch-specific
  instructions (wgmma) exist on exactly that compute capability, and the tensor cores use them (H200: fp16 8192^3 444 -> 574
  TFLOP/s, bench/README.md); `DEV=CUDA::sm_90` keeps the portable target."""
  if _count() == 0: return DEFAULT_ARCH
  from tinygrad_backend_nv.runtime import device_arch
  arch = device_arch(0)
  if arch == "sm_90": return "sm_90a"
  return arch if arch in ARCHS else DEFAULT_ARCH


def _opener(kind: str) -> OpenDevice:
  def open_device(index: int, target: Target):
    from tinygrad_backend_nv.runtime import open_cuda
    return open_cuda(kind, index)
  return open_device


def _make_cuda(target: Target):
  if target.interface == "MOCK":
    from tinygrad_backend_nv.mockprograms import MockCUDARenderer
    return MockCUDARenderer(target)
  from tinygrad_backend_nv.cuda import CUDARenderer
  renderer = CUDARenderer(target)
  if (units := _local_sm_count(renderer.arch)): renderer.compute_units = units
  return renderer


def _local_sm_count(arch: str) -> int:
  """The SM count of this machine's first GPU where it is of `arch` (0: no GPU, or another arch: the renderer keeps its arch's
  datacenter count, compiler.SM_COUNT). The rules that fit a grid to the GPU (one wave of registers, a block an SM, products
  spread over the SMs: cuda.py) then count the SMs the kernels will run on: an H100 PCIe has 114, not the SXM part's 132."""
  if _count() == 0: return 0
  from tinygrad_backend_nv.runtime import device_arch, device_sm_count
  return device_sm_count(0) if (device_arch(0) or "") == arch.rstrip("a") else 0


def _make_ptx(target: Target):
  if target.interface == "MOCK":
    raise RuntimeError("MOCK+NV runs kernels rendered by CUDA (its renderer records their uops for the mock); PTX is not supported there: "
                       "use DEV=MOCK+NV or MOCK+NV:CUDA")
  from tinygrad_backend_nv.ptx import PTXRenderer
  return PTXRenderer(target)


def _nvrtc_available() -> str | None:
  from tinygrad_backend_nv.compiler import nvrtc_available
  return nvrtc_available()


@hookimpl
def register_devices(register: RegisterDevice) -> None:
  # a working GPU is the default device (before any CPU)
  register(DeviceSpec("CUDA", {"": _opener("CUDA")}, count=_count, available=_available, package=PACKAGE, default_rank=0))
  register(DeviceSpec("NV", {"NVK": _open_nvk, "CUDA": _open_nv_cuda, "MOCK": _open_mock}, count=_nv_count, available=_nv_available,
                      package=PACKAGE, default_rank=1, mock_interfaces=("MOCK",)))


@hookimpl
def register_renderers(register: RegisterRenderer) -> None:
  for kind in DEVICES:
    register(RendererSpec(device=kind, name="CUDA", make=_make_cuda, default=True, archs=ARCHS, default_arch=_default_arch,
                          available=_nvrtc_available, package=PACKAGE))
    register(RendererSpec(device=kind, name="PTX", make=_make_ptx, archs=ARCHS, default_arch=_default_arch, package=PACKAGE))


@hookimpl
def register_tensor_cores(register: RegisterTensorCores) -> None:
  from tinygrad_backend_nv.tensor_cores import SPECS
  for pattern, make in SPECS.items(): register(pattern, make())


def _make_nccl(init):
  from tinygrad_backend_nv.nccl import make_nccl  # loads libnccl only when a process group asks for NCCL
  return make_nccl(init)


def _nccl_available() -> str | None:
  from tinygrad_backend_nv.nccl import nccl_available
  return nccl_available()


@hookimpl
def register_collectives(register: Callable[..., None]) -> None:
  register(CollectiveSpec("nccl", _make_nccl, devices=DEVICES, available=_nccl_available, package=PACKAGE + "[nccl]"))
