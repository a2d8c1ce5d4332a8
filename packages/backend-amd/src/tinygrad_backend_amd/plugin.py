"""Registers AMD's device, renderers and tensor cores with tinygrad (entry point `tinygrad.backends: amd`).

Device `AMD`, through one of two interfaces (runtime.py is the same code on both):
- `KFD` (`DEV=AMD`, `KFD+AMD`): the kernel's /dev/kfd. Written, never run on an AMD GPU (see README.md). Without /dev/kfd,
  `DEV=AMD` is an error that names MOCKKFD+AMD; the registry never falls back to the mock on its own.
- `MOCKKFD` (`DEV=MOCKKFD+AMD`, `MOCKKFD+AMD::gfx950`, `MOCKKFD+AMD:LLVM`): the KFD ioctls, the AQL packet processor and
  the SDMA engine in Python (mockkfd.py, mockgpu.py, mocksdma.py); each dispatch is checked and run by core's PYTHON
  interpreter on the mock's memory, each copy checked and done. One mock per process and arch, like /dev/kfd.
Renderers (they also compile without a GPU, for `DEV=NULL:HIP:gfx1100`, `NULL:LLVM:gfx942`, and `PYTHON::gfx950`):
- `HIP` (default): HIP C through Debian's clang (>= 19; gfx950 >= 22), device-only, straight to a code object;
- `LLVM`: our LLVM IR for `amdgcn-amd-amdhsa` through llvmlite, linked by the ziglang wheel's ld.lld (PyPI only).
Archs: gfx1100, gfx1101, gfx1201 (RDNA3/4, wave32) and gfx942, gfx950 (CDNA3/4, wave64); default gfx1100.
"""
from __future__ import annotations

from typing import Any

from tinygrad.device.plugin import DeviceSpec, RegisterDevice, RegisterRenderer, RegisterTensorCores, RendererSpec, Target, hookimpl

from tinygrad_backend_amd.archs import ARCHS, DEFAULT_ARCH

PACKAGE = "tinygrad-backend-amd"
NO_KFD = ("no /dev/kfd here (no AMD GPU with the amdgpu driver): DEV=MOCKKFD+AMD runs the AMD runtime on a mock KFD without a GPU; "
          "DEV=NULL:HIP:gfx1100 only compiles, DEV=PYTHON::gfx1100 emulates the tensor cores. The PCI/USB interfaces are not provided")


def _available() -> str | None:
  from tinygrad_backend_amd.iface import kfd_present
  return None if kfd_present() else NO_KFD


def _count() -> int:
  if _available() is not None: return 0
  from tinygrad_backend_amd.iface import KFD
  from tinygrad_backend_amd.runtime import gpu_nodes
  return len(gpu_nodes(KFD()))


def _open_kfd(index: int, target: Target):
  from tinygrad_backend_amd.iface import KFD, kfd_present
  from tinygrad_backend_amd.runtime import AMDDevice
  if not kfd_present(): raise RuntimeError(NO_KFD)
  return AMDDevice(KFD(), index, target.arch)


_MOCKS: dict[str, Any] = {}  # arch -> the process's MockKFD: like /dev/kfd, one per process, its GPUs share a VA space


def _open_mock(index: int, target: Target):
  from tinygrad_backend_amd.mockkfd import MockKFD
  from tinygrad_backend_amd.runtime import AMDDevice
  arch = target.arch or DEFAULT_ARCH
  if arch not in _MOCKS: _MOCKS[arch] = MockKFD(arch=arch)
  return AMDDevice(_MOCKS[arch], index, target.arch)


def _not_provided(name: str):
  def open_(index: int, target: Target):
    raise RuntimeError(f"the {name} interface (tinygrad's userspace driver) is not provided by {PACKAGE}: use DEV=AMD (KFD) on a "
                       "machine with the amdgpu driver, or DEV=MOCKKFD+AMD without a GPU")
  return open_


def _make_hip(target: Target):
  if target.interface == "MOCKKFD":
    from tinygrad_backend_amd.mockprograms import MockHIPRenderer
    return MockHIPRenderer(target)
  from tinygrad_backend_amd.hip import HIPRenderer
  return HIPRenderer(target)


def _make_llvm(target: Target):
  if target.interface == "MOCKKFD":
    from tinygrad_backend_amd.mockprograms import MockLLVMRenderer
    return MockLLVMRenderer(target)
  from tinygrad_backend_amd.llvmir import AMDLLVMRenderer
  return AMDLLVMRenderer(target)


def _hip_available() -> str | None:
  from tinygrad_backend_amd.hip import hip_available
  return hip_available()


def _llvm_available() -> str | None:
  from tinygrad_backend_amd.llvmir import amd_llvm_available
  return amd_llvm_available()


def _default_arch() -> str:
  """The first GPU's arch where KFD is present (DEV=AMD), else gfx1100."""
  if _available() is not None: return DEFAULT_ARCH
  from tinygrad_backend_amd.iface import KFD
  from tinygrad_backend_amd.runtime import gpu_nodes
  nodes = gpu_nodes(KFD())
  return nodes[0].arch if nodes and nodes[0].arch in ARCHS else DEFAULT_ARCH


@hookimpl
def register_devices(register: RegisterDevice) -> None:
  # rank 2: a working AMD GPU is the default device, after NVIDIA's; MOCKKFD only when DEV names it
  # PCI and USB (userspace drivers) are listed so DEV=PCI+AMD says they are not provided; tried after KFD, they never open
  register(DeviceSpec("AMD", {"KFD": _open_kfd, "MOCKKFD": _open_mock, "PCI": _not_provided("PCI"), "USB": _not_provided("USB")}, count=_count, available=_available, package=PACKAGE, default_rank=2,
                      mock_interfaces=("MOCKKFD",)))


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
