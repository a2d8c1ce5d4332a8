"""Registers NVIDIA devices, renderers and tensor cores with tinygrad (entry point `tinygrad.backends: nv`).

Devices: `CUDA` (the driver API through cuda-bindings) and `NV` (the same driver-API interface for now, so `DEV=NV`
works wherever `DEV=CUDA` does). Renderers, for both: `CUDA` (default: CUDA C -> NVRTC -> cubin) and `PTX` (our own
PTX -> nvJitLink cubin, or the driver's JIT). Archs: sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a; the default is the
GPU's own compute capability, or sm_90 without a GPU (so `DEV=NULL:CUDA` compiles for Hopper).
"""
from __future__ import annotations

from collections.abc import Callable

from tinygrad.device.plugin import CollectiveSpec, DeviceSpec, RegisterDevice, RegisterRenderer, RegisterTensorCores, RendererSpec, Target, hookimpl

from tinygrad_backend_nv.compiler import ARCHS, DEFAULT_ARCH

PACKAGE = "tinygrad-backend-nv"
DEVICES = ("CUDA", "NV")


def _status() -> tuple[int, str | None]:
  # imported lazily: loading the plugin must not touch the driver
  from tinygrad_backend_nv.runtime import driver_status
  return driver_status()


def _count() -> int: return _status()[0]
def _available() -> str | None: return _status()[1]


def _default_arch() -> str:
  """The first GPU's arch when it is one we render for, else sm_90."""
  if _count() == 0: return DEFAULT_ARCH
  from tinygrad_backend_nv.runtime import device_arch
  arch = device_arch(0)
  return arch if arch in ARCHS else DEFAULT_ARCH


def _opener(kind: str) -> Callable[[int, Target], object]:
  def open_device(index: int, target: Target):
    from tinygrad_backend_nv.runtime import open_cuda
    return open_cuda(kind, index)
  return open_device


def _make_cuda(target: Target):
  from tinygrad_backend_nv.cuda import CUDARenderer
  return CUDARenderer(target)


def _make_ptx(target: Target):
  from tinygrad_backend_nv.ptx import PTXRenderer
  return PTXRenderer(target)


def _nvrtc_available() -> str | None:
  from tinygrad_backend_nv.compiler import nvrtc_available
  return nvrtc_available()


@hookimpl
def register_devices(register: RegisterDevice) -> None:
  for rank, kind in enumerate(DEVICES):  # a working GPU is the default device (before any CPU)
    register(DeviceSpec(kind, {"": _opener(kind)}, count=_count, available=_available, package=PACKAGE, default_rank=rank))


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
