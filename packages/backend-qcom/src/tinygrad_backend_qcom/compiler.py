"""OpenCL C -> a program binary, built by an OpenCL implementation (the device's own compiler, as on Adreno).

The compiler builds on the first CL device (`CL_PLATFORM` picks the platform): PoCL from PyPI on a machine without a
GPU, so `NULL:QCOMCL:a630` checks every kernel with a real OpenCL C front end. The binary it returns is that
implementation's (PoCL's: LLVM bitcode); the CL device loads it with clCreateProgramWithBinary.
"""
from __future__ import annotations

import functools
import json
import os
import re
from typing import Any

from tinygrad.device.plugin import CompileError, Compiler

from tinygrad_backend_qcom.opencl import cl_devices, cl_status, device_info, import_pyopencl

# OpenCL allows 2.5 ulp division and 3 ulp sqrt by default; tinygrad.uop.alu rounds them correctly
BUILD_OPTIONS = ("-cl-fp32-correctly-rounded-divide-sqrt",)
# a kernel with image parameters (qcomcl.py, IMAGE=1/2): its binary is prefixed by IMAGES_MAGIC, a JSON list of
# [buffer position, "r" or "w", height, width, "f" or "h"], and a newline, which the CL device reads (runtime.py)
IMAGES_MAGIC = b"TGIMG1"
_IMAGE_LINE = re.compile(r"^// tg\.image (\d+) ([rw]) (\d+) (\d+) ([fh])$", re.M)


def split_images(lib: bytes) -> tuple[list[tuple[int, str, int, int, str]], bytes]:
  """(the image parameters, the program binary) of what CLCompiler.compile returned."""
  if not lib.startswith(IMAGES_MAGIC): return [], lib
  header, _, binary = lib[len(IMAGES_MAGIC):].partition(b"\n")
  return [tuple(x) for x in json.loads(header)], binary


@functools.cache
def build_options(dev: Any) -> tuple[str, ...]:
  """On a CPU OpenCL (PoCL) LLVM's optimizer takes most of each kernel's compile time (about 4x): it is off there unless
  CL_OPT=1, which keeps the test suites fast and changes no result (the same IEEE operations, no contraction either way)."""
  cl = import_pyopencl()
  cpu = bool(dev.type & cl.device_type.CPU)
  return BUILD_OPTIONS + (("-cl-opt-disable",) if cpu and os.environ.get("CL_OPT", "0") == "0" else ())


@functools.cache
def compile_context() -> tuple[Any, Any]:
  """(context, device) of the first OpenCL device: where kernels are compiled."""
  count, why = cl_status()
  if why is not None: raise RuntimeError(f"the QCOMCL compiler needs an OpenCL implementation: {why}")
  cl = import_pyopencl()
  dev = cl_devices()[0]
  return cl.Context(devices=[dev]), dev


def build(ctx: Any, dev: Any, src: str | None = None, binary: bytes | None = None) -> Any:
  """A built cl.Program from source or from a binary of this device; CompileError with the build log on failure."""
  cl = import_pyopencl()
  prg = cl.Program(ctx, src) if src is not None else cl.Program(ctx, [dev], [binary])
  try: return prg.build(options=list(build_options(dev)))
  except cl.Error as e:
    log = ""
    try: log = prg.get_build_info(dev, cl.program_build_info.LOG)
    except cl.Error: pass
    raise CompileError("QCOMCL", src or f"<{len(binary or b'')} byte binary>", (log or str(e)).strip()) from e


class CLCompiler(Compiler):
  """Builds OpenCL C with the first CL device's compiler and returns the program binary."""

  @property
  def cachekey(self) -> str:  # type: ignore[override]
    info = device_info(compile_context()[1])
    return f"qcomcl_{info['platform']}_{info['name']}_{info['driver']}_{'_'.join(build_options(compile_context()[1]))}".replace(" ", "_")

  def compile(self, src: str) -> bytes:
    ctx, dev = compile_context()
    if "cl_khr_fp16 : enable" in src and not device_info(dev)["fp16"]:
      raise CompileError("QCOMCL", src, f"this kernel computes in half (cl_khr_fp16, as Adreno archs do), which the OpenCL device that "
                         f"compiles it ({device_info(dev)['name']}) lacks. Such kernels compile only where an OpenCL has cl_khr_fp16; "
                         "an arch without _fp16 (e.g. DEV=NULL:QCOMCL:cl_fp64) stores half as 16 bits and computes in float")
    prg = build(ctx, dev, src=src)
    binaries = prg.get_info(import_pyopencl().program_info.BINARIES)
    if not binaries or not binaries[0]: raise CompileError("QCOMCL", src, f"{device_info(dev)['name']} returned no program binary")
    images = [[int(p), a, int(h), int(w), f] for p, a, h, w, f in _IMAGE_LINE.findall(src)]
    return (IMAGES_MAGIC + json.dumps(images).encode() + b"\n" if images else b"") + bytes(binaries[0])
