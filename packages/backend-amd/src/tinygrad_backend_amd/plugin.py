"""Registers AMD's device, renderers and tensor cores with tinygrad (entry point `tinygrad.backends: amd`).

Device `AMD`: no runtime interface yet (the KFD ioctl runtime and its mock are still to come), so `DEV=AMD` is an
error that says so, and DEV=AMD is never picked as the default. Its renderers compile without a GPU, for the NULL
device (`DEV=NULL:HIP:gfx1100`, `NULL:LLVM:gfx942`) and the PYTHON device's tensor-core emulation (`PYTHON::gfx950`):
- `HIP` (default): HIP C through Debian's clang (>= 19; gfx950 >= 22), device-only, straight to a code object;
- `LLVM`: our LLVM IR for `amdgcn-amd-amdhsa` through llvmlite, linked by the ziglang wheel's ld.lld (PyPI only).
Archs: gfx1100, gfx1101, gfx1201 (RDNA3/4, wave32) and gfx942, gfx950 (CDNA3/4, wave64); default gfx1100.
"""
from __future__ import annotations

from tinygrad.device.plugin import DeviceSpec, RegisterDevice, RegisterRenderer, RegisterTensorCores, RendererSpec, Target, hookimpl

from tinygrad_backend_amd.archs import ARCHS, DEFAULT_ARCH

PACKAGE = "tinygrad-backend-amd"
NO_RUNTIME = ("no AMD runtime interface is available: tinygrad-backend-amd compiles for AMD GPUs (DEV=NULL:HIP:gfx1100, "
              "NULL:LLVM:gfx942) and emulates their tensor cores (DEV=PYTHON::gfx1100), but its KFD runtime (/dev/kfd) is not "
              "written yet, and the PCI/USB interfaces are not provided")


def _available() -> str | None: return NO_RUNTIME


def _open_amd(index: int, target: Target):
  raise RuntimeError(NO_RUNTIME)


def _make_hip(target: Target):
  from tinygrad_backend_amd.hip import HIPRenderer
  return HIPRenderer(target)


def _make_llvm(target: Target):
  from tinygrad_backend_amd.llvmir import AMDLLVMRenderer
  return AMDLLVMRenderer(target)


def _hip_available() -> str | None:
  from tinygrad_backend_amd.hip import hip_available
  return hip_available()


def _llvm_available() -> str | None:
  from tinygrad_backend_amd.llvmir import amd_llvm_available
  return amd_llvm_available()


def _default_arch() -> str: return DEFAULT_ARCH


@hookimpl
def register_devices(register: RegisterDevice) -> None:
  # rank 2: a working AMD GPU would be the default device, after NVIDIA's; today available() always says why not
  register(DeviceSpec("AMD", {"": _open_amd}, count=lambda: 0, available=_available, package=PACKAGE, default_rank=2))


@hookimpl
def register_renderers(register: RegisterRenderer) -> None:
  archs = tuple(ARCHS)
  register(RendererSpec(device="AMD", name="HIP", make=_make_hip, default=True, archs=archs, default_arch=_default_arch,
                        available=_hip_available, package=PACKAGE))
  register(RendererSpec(device="AMD", name="LLVM", make=_make_llvm, archs=archs, default_arch=_default_arch,
                        available=_llvm_available, package=PACKAGE))


@hookimpl
def register_tensor_cores(register: RegisterTensorCores) -> None:
  from tinygrad_backend_amd.tensor_cores import SPECS
  for pattern, make in SPECS.items(): register(pattern, make())
