"""The part of a GPU runtime's real kernel-driver interface that every vendor shares: opening device files, ioctls on
ctypes objects filled in place, and mmap/munmap at chosen addresses through libc (Python's mmap module can't map at a
fixed address). A backend's interface (KFD for AMD, NVK for NVIDIA) subclasses `OSDriver` and adds its own few calls
(doorbell stores, sysfs reads); its mock implements the same methods in Python."""
from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import mmap
import os

PROT_NONE, PROT_READ, PROT_WRITE = 0, mmap.PROT_READ, mmap.PROT_WRITE
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS = mmap.MAP_SHARED, mmap.MAP_PRIVATE, 0x10, mmap.MAP_ANONYMOUS
MAP_NORESERVE = 0x4000


class OSDriver:
  """The real thing: os.open, fcntl.ioctl on a ctypes structure or array (filled in place), libc mmap/munmap."""
  name = "OS"

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
