"""Registers the CPU device and its two renderers with tinygrad (entry point `tinygrad.backends: cpu`)."""
from __future__ import annotations

import os

from tinygrad.device.plugin import DeviceSpec, RegisterDevice, RegisterRenderer, RendererSpec, Target, hookimpl

PACKAGE = "tinygrad-backend-cpu"


def _open_cpu(index: int, target: Target):  # the runtime imports llvmlite: load it only when the device opens
  from tinygrad_backend_cpu.runtime import open_cpu
  return open_cpu(index, target)


def _make_clang(target: Target):
  from tinygrad_backend_cpu.clang import ClangRenderer
  return ClangRenderer(target)


def _make_llvm(target: Target):
  from tinygrad_backend_cpu.llvmir import LLVMRenderer
  return LLVMRenderer(target)


def _clang_available() -> str | None:
  from tinygrad_backend_cpu.clang import clang_available
  return clang_available()


def _llvm_available() -> str | None:
  from tinygrad_backend_cpu.llvmir import llvm_available
  return llvm_available()


def _host_arch() -> str: return "native"  # the CPU this runs on; both renderers detect its features


@hookimpl
def register_devices(register: RegisterDevice) -> None:
  # the default device where no GPU backend has a working device (GPU backends rank below 100)
  register(DeviceSpec("CPU", {"": _open_cpu}, count=lambda: os.cpu_count() or 1, package=PACKAGE, default_rank=100))


@hookimpl
def register_renderers(register: RegisterRenderer) -> None:
  # LLVM is the default: it needs nothing but the llvmlite wheel
  register(RendererSpec(device="CPU", name="LLVM", make=_make_llvm, default=True, archs=("*",), default_arch=_host_arch,
                        available=_llvm_available, package=PACKAGE))
  register(RendererSpec(device="CPU", name="CLANG", make=_make_clang, archs=("*",), default_arch=_host_arch,
                        available=_clang_available, package=PACKAGE))
