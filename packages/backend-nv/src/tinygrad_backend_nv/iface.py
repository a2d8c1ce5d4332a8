"""The surface the NVK+NV runtime touches the NVIDIA kernel driver through, and its real implementation, `NVK`.

The runtime (nvruntime.py) is written once against `Interface`; `MOCK` (mocknv.py) implements the same methods in
Python, so the same RM object, memory, channel and launch code runs on both. The doorbell is a 32-bit store to the
usermode page mapped from the GPU: it goes through `write_doorbell` so the mock sees it (on NVK it is a plain store), and
the runtime shows each cubin it loads to `program` (nothing on NVK; the mock learns what the kernel computes).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import mmap
import os
from typing import Protocol

PROT_NONE, PROT_READ, PROT_WRITE = 0, mmap.PROT_READ, mmap.PROT_WRITE
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS = mmap.MAP_SHARED, mmap.MAP_PRIVATE, 0x10, mmap.MAP_ANONYMOUS
NVIDIACTL, NVIDIA_UVM = "/dev/nvidiactl", "/dev/nvidia-uvm"


class Interface(Protocol):
  name: str
  def open(self, path: str) -> int: ...
  def close(self, fd: int) -> None: ...
  def ioctl(self, fd: int, request: int, arg: ctypes.Structure | ctypes.Array) -> None: ...
  def mmap(self, addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int: ...
  def munmap(self, addr: int, size: int) -> None: ...
  def exists(self, path: str) -> bool: ...
  def write_doorbell(self, addr: int, value: int) -> None: ...
  def program(self, lib: bytes, name: str, va: int) -> None: ...  # kernel `name` of cubin `lib` was loaded at GPU VA `va` (the mock learns what it computes)


class NVK:
  """The real thing: os.open, fcntl.ioctl on a ctypes structure (filled in place), libc mmap."""
  name = "NVK"

  def __init__(self) -> None:
    self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    self.libc.mmap.restype, self.libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

  def open(self, path: str) -> int: return os.open(path, os.O_RDWR | os.O_CLOEXEC)
  def close(self, fd: int) -> None: os.close(fd)

  def ioctl(self, fd: int, request: int, arg: ctypes.Structure | ctypes.Array) -> None:
    fcntl.ioctl(fd, request, arg)  # type: ignore[call-overload]  # a ctypes object is a writable buffer

  def mmap(self, addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int:
    out = self.libc.mmap(addr, size, prot, flags, fd, offset)
    if out in (None, ctypes.c_void_p(-1).value): raise OSError(ctypes.get_errno(), f"mmap of {size:#x} bytes at {addr:#x} (fd {fd}, offset {offset:#x}) failed")
    return int(out)

  def munmap(self, addr: int, size: int) -> None: self.libc.munmap(addr, size)
  def exists(self, path: str) -> bool: return os.path.exists(path)
  def write_doorbell(self, addr: int, value: int) -> None: ctypes.c_uint32.from_address(addr).value = value
  def program(self, lib: bytes, name: str, va: int) -> None: pass


def nvk_present() -> bool: return os.path.exists(NVIDIACTL)
