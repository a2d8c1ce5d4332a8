"""Source -> GPU binary: CUDA C through NVRTC to a cubin, and PTX text through nvJitLink to a cubin.

Everything here works without a GPU or a driver (NVRTC and nvJitLink are plain libraries shipped in the
nvidia-cuda-nvrtc / nvidia-nvjitlink wheels), which is how CI compiles for NVIDIA on the NULL device.

Why cubins: NVRTC 13.x emits PTX of ISA 9.x, which an older driver's JIT rejects (the H200's CUDA 13.0 driver takes
<= 9.0). A cubin for the exact sm_XX runs on any driver that knows the arch. Our own PTX declares `.version 8.0`.
"""
from __future__ import annotations

import functools
import os
import re

from tinygrad.device.plugin import CompileError, Compiler

# archs both renderers accept; sm_90a is sm_90 with the arch-specific (wgmma, setmaxnreg) instructions
ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
DEFAULT_ARCH = "sm_90"
# SMs of each arch's datacenter part (T4, A100, A10, L40S, H100/H200 SXM): the renderers' compute_units, which core's tensor-core
# heuristic uses to count waves of blocks; a smaller part of the same arch only shifts where smaller tiles start to win
SM_COUNT = {75: 40, 80: 108, 86: 72, 89: 142, 90: 132}
# threads per block. Core's codegen launches every kernel with local_max[0] threads per block, and __launch_bounds__ /
# .maxntid of that size caps registers per thread (65536 / 1024 = 64 at 1024): register-blocked kernels (matmul) then
# spill. 256 leaves 255. NV_LOCAL_SIZE=1024 (the hardware maximum) restores the largest blocks.
LOCAL_SIZE = int(os.environ.get("NV_LOCAL_SIZE", "256"))
_ARCH_RE = re.compile(r"sm_(\d+)(a?)")


def arch_number(arch: str) -> int:
  """'sm_86' -> 86 (ValueError for anything that isn't sm_NN[a])."""
  if (m := _ARCH_RE.fullmatch(arch)) is None: raise ValueError(f"bad NVIDIA arch {arch!r}: expected sm_NN, one of {', '.join(ARCHS)}")
  return int(m.group(1))


def _import_nvrtc():
  try:
    from cuda.bindings import nvrtc
  except ImportError as e: raise RuntimeError(f"NVRTC bindings are missing ({e}): pip install cuda-bindings nvidia-cuda-nvrtc") from e
  return nvrtc


@functools.cache
def nvrtc_version() -> str:
  """'13.5' (raises RuntimeError with a hint when libnvrtc can't be loaded)."""
  nvrtc = _import_nvrtc()
  try: err, major, minor = nvrtc.nvrtcVersion()
  except Exception as e: raise RuntimeError(f"libnvrtc could not be loaded ({type(e).__name__}: {e}): pip install nvidia-cuda-nvrtc") from e  # noqa: BLE001
  if err != nvrtc.nvrtcResult.NVRTC_SUCCESS: raise RuntimeError(f"nvrtcVersion failed: {err}")
  return f"{major}.{minor}"


def nvrtc_available() -> str | None:
  try: nvrtc_version()
  except RuntimeError as e: return str(e)
  return None


def _nvrtc_check(nvrtc, res, what: str) -> None:
  if res != nvrtc.nvrtcResult.NVRTC_SUCCESS: raise RuntimeError(f"{what} failed: {nvrtc.nvrtcGetErrorString(res)[1]!r}")


def _nvrtc_log(nvrtc, prog) -> str:
  _, size = nvrtc.nvrtcGetProgramLogSize(prog)
  buf = bytearray(size)
  nvrtc.nvrtcGetProgramLog(prog, buf)
  return bytes(buf).rstrip(b"\x00 ").decode(errors="replace")


class NVRTCCompiler(Compiler):
  """CUDA C -> cubin for one sm_XX, with NVRTC. `--fmad=false` so a*b+c is two roundings, as tinygrad.uop.alu has it
  (the renderer writes fmaf() where the IR asks for MULACC)."""

  def __init__(self, arch: str = DEFAULT_ARCH, extra_opts: tuple[str, ...] = ()):
    arch_number(arch)  # validates
    self.arch = arch
    self.opts = (f"--gpu-architecture={arch}", "--fmad=false", "--std=c++17", *extra_opts)

  @property
  def cachekey(self) -> str:  # type: ignore[override]
    return f"nvrtc_{nvrtc_version()}_{self.arch}_{'_'.join(self.opts)}"

  def compile(self, src: str) -> bytes:
    try: nvrtc_version()
    except RuntimeError as e: raise CompileError("NVRTC", src, str(e)) from e
    nvrtc = _import_nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"tinygrad_kernel.cu", 0, [], [])
    _nvrtc_check(nvrtc, err, "nvrtcCreateProgram")
    try:
      opts = [o.encode() for o in self.opts]
      (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
      if err != nvrtc.nvrtcResult.NVRTC_SUCCESS: raise CompileError(f"NVRTC {nvrtc_version()} ({self.arch})", src, _nvrtc_log(nvrtc, prog))
      err, size = nvrtc.nvrtcGetCUBINSize(prog)
      _nvrtc_check(nvrtc, err, "nvrtcGetCUBINSize")
      cubin = bytearray(size)  # a fresh writable buffer: the library writes into it
      (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
      _nvrtc_check(nvrtc, err, "nvrtcGetCUBIN")
      return bytes(cubin)
    finally:
      nvrtc.nvrtcDestroyProgram(prog)

  def compile_log(self, src: str) -> str:
    """NVRTC's log for `src` (with --ptxas-options=-v in extra_opts: registers, spills and shared memory per kernel)."""
    nvrtc = _import_nvrtc()
    _, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"tinygrad_kernel.cu", 0, [], [])
    try:
      opts = [o.encode() for o in self.opts]
      (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
      if err != nvrtc.nvrtcResult.NVRTC_SUCCESS: raise CompileError("NVRTC", src, _nvrtc_log(nvrtc, prog))
      return _nvrtc_log(nvrtc, prog)
    finally:
      nvrtc.nvrtcDestroyProgram(prog)

  def ptx(self, src: str) -> str:
    """The PTX NVRTC makes of `src` (for reading only: its ISA version may be newer than the driver takes)."""
    nvrtc = _import_nvrtc()
    _, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"tinygrad_kernel.cu", 0, [], [])
    try:
      opts = [o.replace("sm_", "compute_").encode() if o.startswith("--gpu-architecture") else o.encode() for o in self.opts]
      (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
      if err != nvrtc.nvrtcResult.NVRTC_SUCCESS: raise CompileError("NVRTC", src, _nvrtc_log(nvrtc, prog))
      _, size = nvrtc.nvrtcGetPTXSize(prog)
      buf = bytearray(size)
      nvrtc.nvrtcGetPTX(prog, buf)
      return bytes(buf).rstrip(b"\x00").decode()
    finally:
      nvrtc.nvrtcDestroyProgram(prog)

  def disassemble(self, lib: bytes) -> str: return disassemble_cubin(lib)


# ---------------------------------------------------------------- PTX

def _import_nvjitlink():
  try:
    from cuda.bindings import nvjitlink
  except ImportError as e: raise RuntimeError(f"nvJitLink bindings are missing ({e}): pip install cuda-bindings nvidia-nvjitlink") from e
  return nvjitlink


@functools.cache
def nvjitlink_version() -> str | None:
  """'13.5', or None when libnvJitLink can't be loaded (then PTX goes to the driver's JIT as text)."""
  try:
    major, minor = _import_nvjitlink().version()
    return f"{major}.{minor}"
  except Exception:  # noqa: BLE001  missing wheel, missing library, too old bindings: all mean "not available"
    return None


def ptx_to_cubin(ptx: str, arch: str) -> bytes:
  """Assemble PTX into a cubin for `arch` with nvJitLink (CompileError with its log on failure)."""
  nvjitlink = _import_nvjitlink()
  opts = [f"-arch={arch}", "-O3"]
  handle = nvjitlink.create(len(opts), opts)
  try:
    data = ptx.encode() + b"\x00"
    try:
      nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "tinygrad_kernel.ptx")
      nvjitlink.complete(handle)
    except nvjitlink.nvJitLinkError as e:
      log = bytearray(nvjitlink.get_error_log_size(handle))
      nvjitlink.get_error_log(handle, log)
      raise CompileError(f"nvJitLink {nvjitlink_version()} ({arch})", ptx, f"{e}\n{bytes(log).rstrip(bytes(1)).decode(errors='replace')}") from e
    cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
    nvjitlink.get_linked_cubin(handle, cubin)
    return bytes(cubin)
  finally:
    nvjitlink.destroy(handle)


class PTXCompiler(Compiler):
  """PTX text -> cubin through nvJitLink when it is installed, else the PTX itself (NUL-terminated), which the
  driver JIT-compiles at cuModuleLoadData. `use_nvjitlink=False` forces the driver JIT path."""

  def __init__(self, arch: str = DEFAULT_ARCH, use_nvjitlink: bool | None = None):
    arch_number(arch)
    self.arch = arch
    self.use_nvjitlink = nvjitlink_version() is not None if use_nvjitlink is None else use_nvjitlink

  @property
  def cachekey(self) -> str:  # type: ignore[override]
    return f"ptx_{self.arch}_" + (f"nvjitlink_{nvjitlink_version()}" if self.use_nvjitlink else "text")

  def compile(self, src: str) -> bytes:
    if self.use_nvjitlink: return ptx_to_cubin(src, self.arch)
    return src.encode() + b"\x00"

  def disassemble(self, lib: bytes) -> str:
    return lib.rstrip(b"\x00").decode() if not lib.startswith(b"\x7fELF") else disassemble_cubin(lib)


def disassemble_cubin(lib: bytes) -> str:
  """SASS through cuobjdump when it is on PATH (it comes with a CUDA toolkit), else a size note."""
  import shutil
  import subprocess
  import tempfile
  if (tool := shutil.which("cuobjdump")) is None: return f"<cubin, {len(lib)} bytes; install a CUDA toolkit for cuobjdump>"
  with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(lib)
    f.flush()
    return subprocess.run([tool, "-sass", f.name], capture_output=True, text=True, check=False).stdout
