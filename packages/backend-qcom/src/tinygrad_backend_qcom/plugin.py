"""Registers the Qualcomm backend with tinygrad (entry point `tinygrad.backends: qcom`).

Devices:
  CL    any OpenCL device through pyopencl (PoCL from PyPI on a machine without a GPU): runs QCOMCL kernels for real.
        Its default arch describes the device (cl, cl_fp16, cl_fp64, cl_fp16_fp64: see qcomcl.py).
  QCOM  an Adreno GPU through the kgsl kernel driver (qcom.py), with two interfaces: KGSL (/dev/kgsl-3d0, the default) and
        MOCKKGSL (mockkgsl.py: the ioctls and the command processor in Python, executing on PoCL). The mock is opened
        only when DEV names it (DEV=MOCKKGSL+QCOM), never as a fallback.
Renderer, for both: QCOMCL (OpenCL C; archs a6xx/a7xx for Adreno, default a630, and the cl* archs), with KEY=VALUE
options after the arch: `NULL:QCOMCL:a630,IMAGE_PITCH_ALIGNMENT=64`.
"""
from __future__ import annotations

import os

from tinygrad.device.plugin import DeviceSpec, RegisterDevice, RegisterRenderer, RendererSpec, Target, hookimpl

from tinygrad_backend_qcom.qcomcl import ARCHS, DEFAULT_ADRENO_ARCH

PACKAGE = "tinygrad-backend-qcom"
KGSL_PATH = "/dev/kgsl-3d0"  # = qcom.KGSL_PATH (not imported: loading the plugin stays cheap)


def _cl_status() -> tuple[int, str | None]:
  from tinygrad_backend_qcom.opencl import cl_status  # lazily: loading the plugin must not load OpenCL
  return cl_status()


def _cl_default_arch() -> str:
  """The first OpenCL device's arch (what its OpenCL supports), or plain `cl` without one."""
  if _cl_status()[0] == 0: return "cl"
  from tinygrad_backend_qcom.opencl import cl_devices, generic_arch
  return generic_arch(cl_devices()[0])


def _open_cl(index: int, target: Target):
  from tinygrad_backend_qcom.runtime import open_cl
  return open_cl(index)


def _kgsl_available() -> str | None:
  if not os.path.exists(KGSL_PATH):
    return (f"no kgsl device is available ({KGSL_PATH} not found: QCOM needs an Adreno GPU under Linux/Android); "
            "DEV=MOCKKGSL+QCOM runs the kgsl runtime on a mock of the driver, DEV=CL runs QCOMCL kernels on any OpenCL device")
  return None


def _open_kgsl(index: int, target: Target):
  from tinygrad_backend_qcom.kgsl import KgslInterface
  from tinygrad_backend_qcom.qcom import open_qcom
  if (why := _kgsl_available()) is not None: raise RuntimeError(why)
  return open_qcom(index, KgslInterface())


def _open_mockkgsl(index: int, target: Target):
  # (a mock interface: the registry opens it only when DEV names it, DeviceSpec.mock_interfaces)
  from tinygrad_backend_qcom.mockkgsl import MockKgsl
  from tinygrad_backend_qcom.qcom import open_qcom
  return open_qcom(index, MockKgsl())


def _make_qcomcl(target: Target):
  from tinygrad_backend_qcom.qcomcl import QCOMCLRenderer
  return QCOMCLRenderer(target)


def _compiler_available() -> str | None:
  return _cl_status()[1]


@hookimpl
def register_devices(register: RegisterDevice) -> None:
  # CL is never the default device (DEV=CL asks for it): on most machines it is PoCL, OpenCL on the CPU the CPU device has already
  register(DeviceSpec("CL", {"": _open_cl}, count=lambda: _cl_status()[0], available=lambda: _cl_status()[1], package=PACKAGE))
  # available() speaks for the default interface (KGSL); DEV=MOCKKGSL+QCOM opens the mock without the device node.
  # Never the default device: it has run on no Adreno yet (docs/backends.md)
  register(DeviceSpec("QCOM", {"KGSL": _open_kgsl, "MOCKKGSL": _open_mockkgsl}, count=lambda: 1, available=_kgsl_available,
                      package=PACKAGE, mock_interfaces=("MOCKKGSL",)))


@hookimpl
def register_renderers(register: RegisterRenderer) -> None:
  register(RendererSpec(device="QCOM", name="QCOMCL", make=_make_qcomcl, default=True, archs=ARCHS,
                        default_arch=lambda: DEFAULT_ADRENO_ARCH, available=_compiler_available, package=PACKAGE))
  register(RendererSpec(device="CL", name="QCOMCL", make=_make_qcomcl, default=True, archs=ARCHS, default_arch=_cl_default_arch,
                        available=_compiler_available, package=PACKAGE))
