"""The OpenCL platforms this process can use, through pyopencl: discovery, and the error a missing one gives.

On a machine without a GPU driver, the `pocl-binary-distribution` wheel (a dependency of this package) provides PoCL,
OpenCL on the CPU, which pyopencl finds by itself. `CL_PLATFORM=name` (a case-insensitive substring, e.g. `pocl`,
`nvidia`) limits the CL device to the matching platform(s).
"""
from __future__ import annotations

import functools
import os
from typing import Any


def import_pyopencl() -> Any:
  try:
    import pyopencl
  except ImportError as e:
    raise RuntimeError(f"pyopencl is not installed ({e}): pip install pyopencl pocl-binary-distribution") from e
  return pyopencl


@functools.cache
def cl_devices() -> tuple[Any, ...]:
  """Every OpenCL device of every platform (those of CL_PLATFORM only, when set), in platform order: instance i is CL:i."""
  cl = import_pyopencl()
  want = os.environ.get("CL_PLATFORM", "").lower()
  try: platforms = cl.get_platforms()
  except cl.Error as e: raise RuntimeError(f"no OpenCL platform found ({e}): pip install pocl-binary-distribution for OpenCL on the CPU") from e
  out = []
  for p in platforms:
    if want and want not in p.name.lower(): continue
    try: out.extend(p.get_devices())
    except cl.Error: continue  # a platform with no device of any type
  return tuple(out)


def cl_status() -> tuple[int, str | None]:
  """(number of OpenCL devices, None) when there is one, else (0, why not)."""
  try: devices = cl_devices()
  except RuntimeError as e: return 0, str(e)
  if not devices:
    only = os.environ.get("CL_PLATFORM")
    return 0, f"no OpenCL device on platform(s) matching CL_PLATFORM={only!r}" if only else "no OpenCL device found"
  return len(devices), None


def device_info(dev: Any) -> dict[str, Any]:
  """What the renderer needs to know about an OpenCL device."""
  ext = set(dev.extensions.split())
  return {"name": dev.name.strip(), "platform": dev.platform.name.strip(), "version": dev.version.strip(),
          "driver": dev.driver_version.strip(), "fp16": "cl_khr_fp16" in ext, "fp64": "cl_khr_fp64" in ext,
          "max_work_group_size": int(dev.max_work_group_size), "local_mem_size": int(dev.local_mem_size)}


def generic_arch(dev: Any) -> str:
  """The QCOMCL arch that describes a non-Adreno OpenCL device: 'cl', plus '_fp16' / '_fp64' for what it supports."""
  info = device_info(dev)
  return "cl" + ("_fp16" if info["fp16"] else "") + ("_fp64" if info["fp64"] else "")


@functools.cache
def image_max() -> tuple[int, int] | None:
  """The largest 2D image (width, height in texels) every OpenCL device here takes, or None without one. PoCL's limit depends on
  the machine: 16384 on one, 8192 on another (its CL_DEVICE_IMAGE2D_MAX_WIDTH/HEIGHT)."""
  try: devices = cl_devices()
  except RuntimeError: return None
  if not devices: return None
  return min(int(d.image2d_max_width) for d in devices), min(int(d.image2d_max_height) for d in devices)
