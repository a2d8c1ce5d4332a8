"""ctypes bindings for the few kgsl ioctls the QCOM runtime uses, and the interfaces that carry them.

Written from the msm kgsl uapi header `msm_kgsl.h` as freedreno keeps a copy of it: github:freedreno/freedreno
`includes/msm_kgsl.h` (commit aa1e03a4, "sync msm_kgsl.h to latest", 2016-2018). kgsl is not in mainline Linux; it is
Qualcomm's downstream driver for Adreno GPUs under Android/Linux, reached through `/dev/kgsl-3d0`.

An *interface* is an object with `open(path)`, `ioctl(request, struct)`, `mmap(size, offset)` and `close()`. The runtime
(qcom.py) is written once against it: `KgslInterface` forwards to the kernel driver (`KGSL+QCOM`), and
`mockkgsl.MockKgsl` implements the same calls in Python (`MOCKKGSL+QCOM`).
"""
from __future__ import annotations

import ctypes
import mmap
import os
from typing import Any, Protocol

u32, u64 = ctypes.c_uint32, ctypes.c_uint64

# <asm-generic/ioctl.h>: dir(2) | size(14) | type(8) | nr(8)
_IOC_WRITE, _IOC_READ = 1, 2


def _ioc(direction: int, nr: int, size: int) -> int: return (direction << 30) | (size << 16) | (KGSL_IOC_TYPE << 8) | nr


KGSL_IOC_TYPE = 0x09

# flags (msm_kgsl.h)
KGSL_CONTEXT_NO_GMEM_ALLOC = 0x00000002
KGSL_CONTEXT_PREAMBLE = 0x00000010
KGSL_CONTEXT_NO_FAULT_TOLERANCE = 0x00000200
KGSL_CONTEXT_PRIORITY_SHIFT = 12
KGSL_CONTEXT_TYPE_SHIFT = 20
KGSL_CONTEXT_TYPE_CL = 2
KGSL_CONTEXT_INVALID = 0xffffffff
KGSL_CMDBATCH_SUBMIT_IB_LIST = 0x00000004  # = KGSL_CONTEXT_SUBMIT_IB_LIST
KGSL_CMDLIST_IB = 0x00000001
KGSL_MEMFLAGS_USE_CPU_MAP = 0x10000000
KGSL_CACHEMODE_SHIFT = 26
KGSL_CACHEMODE_WRITECOMBINE, KGSL_CACHEMODE_UNCACHED, KGSL_CACHEMODE_WRITETHROUGH, KGSL_CACHEMODE_WRITEBACK = 0, 1, 2, 3
KGSL_MEMTYPE_SHIFT = 8
KGSL_MEMTYPE_OBJECTANY = 0
KGSL_MEMTYPE_COMMAND = 16
KGSL_MEMALIGN_SHIFT = 16
PAGE_SHIFT = 12  # kgsl maps GPU object `id` at mmap offset id << PAGE_SHIFT


class kgsl_drawctxt_create(ctypes.Structure):
  _fields_ = [("flags", u32), ("drawctxt_id", u32)]


class kgsl_drawctxt_destroy(ctypes.Structure):
  _fields_ = [("drawctxt_id", u32)]


class kgsl_device_waittimestamp_ctxtid(ctypes.Structure):
  _fields_ = [("context_id", u32), ("timestamp", u32), ("timeout", u32)]  # timeout in milliseconds


class kgsl_gpuobj_alloc(ctypes.Structure):
  _fields_ = [("size", u64), ("flags", u64), ("va_len", u64), ("mmapsize", u64), ("id", u32), ("metadata_len", u32),
              ("metadata", u64)]


class kgsl_gpuobj_free(ctypes.Structure):
  _fields_ = [("flags", u64), ("priv", u64), ("id", u32), ("type", u32), ("len", u32)]


class kgsl_gpuobj_info(ctypes.Structure):
  _fields_ = [("gpuaddr", u64), ("flags", u64), ("size", u64), ("va_len", u64), ("va_addr", u64), ("id", u32)]


class kgsl_command_object(ctypes.Structure):
  _fields_ = [("offset", u64), ("gpuaddr", u64), ("size", u64), ("flags", u32), ("id", u32)]


class kgsl_gpu_command(ctypes.Structure):
  _fields_ = [("flags", u64), ("cmdlist", u64), ("cmdsize", u32), ("numcmds", u32), ("objlist", u64), ("objsize", u32),
              ("numobjs", u32), ("synclist", u64), ("syncsize", u32), ("numsyncs", u32), ("context_id", u32), ("timestamp", u32)]


IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID = _ioc(_IOC_WRITE, 0x7, ctypes.sizeof(kgsl_device_waittimestamp_ctxtid))
IOCTL_KGSL_DRAWCTXT_CREATE = _ioc(_IOC_READ | _IOC_WRITE, 0x13, ctypes.sizeof(kgsl_drawctxt_create))
IOCTL_KGSL_DRAWCTXT_DESTROY = _ioc(_IOC_WRITE, 0x14, ctypes.sizeof(kgsl_drawctxt_destroy))
IOCTL_KGSL_GPUOBJ_ALLOC = _ioc(_IOC_READ | _IOC_WRITE, 0x45, ctypes.sizeof(kgsl_gpuobj_alloc))
IOCTL_KGSL_GPUOBJ_FREE = _ioc(_IOC_WRITE, 0x46, ctypes.sizeof(kgsl_gpuobj_free))
IOCTL_KGSL_GPUOBJ_INFO = _ioc(_IOC_READ | _IOC_WRITE, 0x47, ctypes.sizeof(kgsl_gpuobj_info))
IOCTL_KGSL_GPU_COMMAND = _ioc(_IOC_READ | _IOC_WRITE, 0x4A, ctypes.sizeof(kgsl_gpu_command))

# request number -> the struct it carries, so an interface can check what it is given
IOCTL_STRUCTS: dict[int, type[ctypes.Structure]] = {
  IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID: kgsl_device_waittimestamp_ctxtid, IOCTL_KGSL_DRAWCTXT_CREATE: kgsl_drawctxt_create,
  IOCTL_KGSL_DRAWCTXT_DESTROY: kgsl_drawctxt_destroy, IOCTL_KGSL_GPUOBJ_ALLOC: kgsl_gpuobj_alloc,
  IOCTL_KGSL_GPUOBJ_FREE: kgsl_gpuobj_free, IOCTL_KGSL_GPUOBJ_INFO: kgsl_gpuobj_info, IOCTL_KGSL_GPU_COMMAND: kgsl_gpu_command}


class Interface(Protocol):
  """What the QCOM runtime needs from below: the kgsl device file's calls."""
  name: str
  def open(self, path: str) -> None: ...
  def ioctl(self, request: int, arg: ctypes.Structure) -> None: ...
  def mmap(self, size: int, offset: int) -> Any: ...  # a writable buffer of `size` bytes (mmap.mmap)
  def close(self) -> None: ...


class KgslInterface:
  """The kernel driver: `os.open` of the device node, `fcntl.ioctl` on ctypes structs (the kernel writes results back
  into them), `mmap` of a GPU object at offset id << PAGE_SHIFT."""
  name = "KGSL"

  def __init__(self) -> None: self.fd = -1

  def open(self, path: str) -> None: self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)

  def ioctl(self, request: int, arg: ctypes.Structure) -> None:
    import fcntl
    fcntl.ioctl(self.fd, request, arg, True)

  def mmap(self, size: int, offset: int) -> Any:
    return mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)

  def close(self) -> None:
    if self.fd >= 0: os.close(self.fd)
    self.fd = -1
