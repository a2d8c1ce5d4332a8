"""backend-amd's registrations: DEV strings, renderers per arch, the missing runtime, toolchain errors."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from amd_harness import needs_hip
from tinygrad import Device, Tensor
from tinygrad.helpers import Context
from tinygrad_backend_amd.archs import ARCHS, ToolchainError, check_llvm_version


def _renderer(dev: str):
  with Context(DEV=dev): return Device.renderer(Device.DEFAULT)


def test_registered():
  reg = Device.registry
  assert "amd" in reg.plugin_names and "AMD" in reg.devices
  assert {(r.name, r.default) for r in reg.renderers_for("AMD")} == {("HIP", True), ("LLVM", False)}
  for arch in ARCHS: assert Device.tensor_cores(arch)


@pytest.mark.parametrize("dev, kind, arch", [("NULL:LLVM:gfx942", "AMDLLVMRenderer", "gfx942"), ("NULL:LLVM:gfx1100", "AMDLLVMRenderer", "gfx1100"),
                                             ("AMD:LLVM", "AMDLLVMRenderer", "gfx1100")])
def test_llvm_dev_strings(dev, kind, arch):
  r = _renderer(dev)
  assert (type(r).__name__, r.arch, r.device) == (kind, arch, "AMD")


@needs_hip
@pytest.mark.parametrize("dev, arch", [("NULL:HIP:gfx1100", "gfx1100"), ("NULL:HIP:gfx950", "gfx950"), ("AMD::gfx950", "gfx950"), ("AMD", "gfx1100")])
def test_hip_dev_strings(dev, arch):
  r = _renderer(dev)
  assert (type(r).__name__, r.arch) == ("HIPRenderer", arch)


def test_cpu_llvm_still_the_cpu_one():
  """Two plugins register an LLVM renderer: an AMD arch picks AMD's, the host's (or none) the CPU's."""
  assert type(_renderer("NULL:LLVM")).__name__ == "LLVMRenderer"
  assert type(_renderer("NULL:LLVM:gfx950")).__name__ == "AMDLLVMRenderer"


def test_python_arch_emulates_amd_tensor_cores():
  r = _renderer("PYTHON::gfx950")
  assert [tc.name for tc in r.tensor_cores] == ["mfma_f32_16x16x32_f16", "mfma_f32_16x16x32_bf16", "mfma_f32_16x16x16_f16", "mfma_f32_16x16x16_bf16",
                                                "mfma_f32_32x32x8_f16", "mfma_f32_32x32x8_bf16", "mfma_i32_16x16x32_i8", "mfma_i32_32x32x16_i8",
                                                "mfma_f32_32x32x16_f16", "mfma_f32_32x32x16_bf16",
                                                "mfma_f32_16x16x32_fp8_fp8", "mfma_f32_16x16x32_bf8_bf8", "mfma_f32_32x32x16_fp8_fp8",
                                                "mfma_f32_32x32x16_bf8_bf8"]
  assert {tc.threads for tc in r.tensor_cores} == {64}
  assert {tc.threads for tc in _renderer("PYTHON::gfx1100").tensor_cores} == {32}


def test_unknown_arch_is_clear():
  with pytest.raises(Exception, match="unknown arch 'gfx9000'.*accepted: gfx1100"): _renderer("NULL:HIP:gfx9000")


@pytest.mark.skipif(os.path.exists("/dev/kfd"), reason="this machine has /dev/kfd")
@pytest.mark.parametrize("dev", ["AMD", "AMD:LLVM", "KFD+AMD", "PCI+AMD"])
def test_amd_without_kfd_names_the_mock(dev):
  """Without /dev/kfd, DEV=AMD is an error that names MOCKKFD+AMD: the registry never falls back to the mock by itself."""
  with Context(DEV=dev), pytest.raises(RuntimeError, match=r"no /dev/kfd here.*DEV=MOCKKFD\+AMD runs the AMD runtime on a mock KFD") as e:
    Tensor([1.0, 2.0]).realize()
  assert "not installed" not in str(e.value)
  assert Device.registry.default_device() != "AMD"  # never the default without a GPU


def test_toolchain_too_old():
  check_llvm_version("gfx950", "clang-22", 22, "fix")
  with pytest.raises(ToolchainError, match=r"gfx950 needs LLVM >= 20, but clang-19 is LLVM 19; apt-get install clang-22"):
    check_llvm_version("gfx950", "clang-19", 19, "apt-get install clang-22")
  with pytest.raises(ValueError, match="unknown AMD arch 'gfx908'"): check_llvm_version("gfx908", "clang-22", 22, "")


def test_hip_compiler_refuses_old_clang(monkeypatch):
  """What a machine with only clang-19 gets for gfx950: a clear error naming the package, not a clang crash."""
  import tinygrad_backend_amd.hip as hip
  from tinygrad_backend_amd.toolchain import Clang
  monkeypatch.setattr(hip, "find_clang", lambda: Clang("/usr/bin/clang-19", 19))
  with pytest.raises(ToolchainError, match="gfx950 needs LLVM >= 20.*clang-22 lld-22"): hip.HIPCompiler("gfx950")
  hip.HIPCompiler("gfx942")  # clang-19 does gfx942


def test_hip_missing_clang_names_the_package(monkeypatch):
  import tinygrad_backend_amd.toolchain as tc
  tc.find_clang.cache_clear()
  monkeypatch.setenv("PATH", "/nonexistent")
  monkeypatch.delenv("AMD_CLANG", raising=False)
  try:
    with pytest.raises(ToolchainError, match="apt-get install clang-22 lld-22"): tc.find_clang()
  finally: tc.find_clang.cache_clear()


def test_device_listing_says_what_is_missing():
  """On a machine without clang the listing says so next to the HIP renderer, with the apt command; LLVM still works."""
  env = {k: v for k, v in os.environ.items() if k not in ("AMD_CLANG", "PATH")}
  out = subprocess.run([sys.executable, "-m", "tinygrad.device"], capture_output=True, text=True, check=True, env={**env, "PATH": "/nonexistent"}).stdout
  amd = out[out.index("AMD:"):]
  hip, llvm = (next(line for line in amd.splitlines() if f"renderer {name}" in line) for name in ("HIP", "LLVM"))
  assert "needs clang >= 19" in hip and "apt-get install clang-22 lld-22" in hip, hip
  assert "LLVM: ok" in llvm, llvm


def test_device_listing():
  out = subprocess.run([sys.executable, "-m", "tinygrad.device"], capture_output=True, text=True, check=True).stdout
  amd = out[out.index("AMD"):]
  assert "no /dev/kfd here" in amd and "MOCKKFD (a mock: only when DEV names it)" in amd and "HIP" in amd and "LLVM" in amd
