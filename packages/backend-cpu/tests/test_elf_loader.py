"""elf.py: relocatable objects loaded without LLVM (constants, pointers in data, calls into libm), its refusals, the MCJIT
fallback, and the point of it: a process that runs only cached kernels never imports llvmlite."""
from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys

import pytest
from tinygrad_backend_cpu import runtime
from tinygrad_backend_cpu.elf import UnsupportedObject, load_object
from tinygrad_backend_cpu.llvmir import LLVMCompiler, llvm_available

pytestmark = [pytest.mark.skipif(llvm_available() is not None, reason=str(llvm_available())),
              pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="the loader handles x86-64 objects")]

# a constant table (rodata, PC-relative), a global pointer to it (in data: an absolute 64-bit relocation; read through the GOT)
# and a call to libm's exp2f
IR = """
@tbl = private unnamed_addr constant [4 x float] [float 1.0, float 2.5, float -3.0, float 4.25], align 16
@ptr = global ptr @tbl, align 8
declare float @exp2f(float)
define void @kern(ptr noalias %out, i32 %i) {
  %t = load ptr, ptr @ptr
  %p = getelementptr [4 x float], ptr %t, i32 0, i32 %i
  %v = load float, ptr %p
  %e = call float @exp2f(float %v)
  %s = fadd float %e, %v
  store float %s, ptr %out
  ret void
}
"""


@pytest.fixture(scope="module")
def obj() -> bytes: return LLVMCompiler().compile(IR)


def _run(addr: int, i: int) -> float:
  out = ctypes.c_float()
  ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32)(addr)(ctypes.addressof(out), i)
  return out.value


def test_loads_and_runs_constants_data_pointers_and_libm_calls(obj: bytes):
  image = load_object(obj)
  for i, v in enumerate([1.0, 2.5, -3.0, 4.25]): assert _run(image.address("kern"), i) == pytest.approx(2 ** v + v, rel=1e-6)
  with pytest.raises(KeyError, match="not defined"): image.address("nope")


def test_refuses_what_it_does_not_handle(obj: bytes):
  with pytest.raises(UnsupportedObject, match="ELF64"): load_object(b"not an object at all")
  arm = bytearray(obj)
  arm[18:20] = (183).to_bytes(2, "little")  # e_machine: AArch64
  with pytest.raises(UnsupportedObject, match="x86-64"): load_object(bytes(arm))


def test_cpu_program_falls_back_to_mcjit(obj: bytes, monkeypatch: pytest.MonkeyPatch):
  def refuse(lib: bytes): raise UnsupportedObject("not today")
  monkeypatch.setattr(runtime, "load_object", refuse)
  prog = runtime.CPUProgram("kern", obj)
  assert prog._image is None
  out = runtime.CPUAllocator().alloc(4)
  prog(out, vals=(1,))
  assert ctypes.c_float.from_address(out.addr).value == pytest.approx(2 ** 2.5 + 2.5, rel=1e-6)


def test_cached_kernels_run_without_llvmlite(tmp_path):
  script = ("import sys\nfrom tinygrad import Tensor\n"
            "x = Tensor.arange(64).float()\n"
            "print(((x * 0.1).exp2() + x.sin()).sum().item())\n"
            "print('llvmlite' in sys.modules)\n")
  env = {**os.environ, "DEV": "CPU:LLVM", "CACHEDB": str(tmp_path / "cache.db")}
  first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout.split()
  second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout.split()
  assert first == [first[0], "True"]  # compiled: LLVM was needed
  assert second == [first[0], "False"]  # every kernel came from the cache: loaded without it
