"""The surface the AMD runtime touches the kernel through, and its real implementation, `KFD` (/dev/kfd).

The runtime (runtime.py) is written once against `Interface`; `MOCKKFD` (mockkfd.py) implements the same methods in
Python, so the same queue, allocator and loader code runs on both. A doorbell write is a store to an MMIO page: it goes
through `write_doorbell` so that the mock sees it (on KFD it is a plain 64-bit store to the mapped doorbell page), and
the runtime shows each code object it loads to `code_object` (nothing on KFD; the mock reads the program attached to it).
Never run on an AMD GPU: see the package README.
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
MAP_NORESERVE = 0x4000
TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"


class Interface(Protocol):
  name: str
  def open(self, path: str) -> int: ...
  def close(self, fd: int) -> None: ...
  def ioctl(self, fd: int, request: int, arg: ctypes.Structure) -> None: ...
  def mmap(self, addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int: ...
  def munmap(self, addr: int, size: int) -> None: ...
  def listdir(self, path: str) -> list[str]: ...
  def read_text(self, path: str) -> str: ...
  def write_doorbell(self, addr: int, value: int) -> None: ...
  def code_object(self, lib: bytes) -> None: ...  # a program is being loaded from `lib` (the mock learns what it computes)


class KFD:
  """The real thing: os.open, fcntl.ioctl on a ctypes structure (filled in place), libc mmap at fixed addresses."""
  name = "KFD"

  def __init__(self) -> None:
    self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    self.libc.mmap.restype, self.libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

  def open(self, path: str) -> int: return os.open(path, os.O_RDWR | os.O_CLOEXEC)
  def close(self, fd: int) -> None: os.close(fd)

  def ioctl(self, fd: int, request: int, arg: ctypes.Structure) -> None:
    fcntl.ioctl(fd, request, arg)  # type: ignore[call-overload]  # a ctypes structure is a writable buffer

  def mmap(self, addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int:
    out = self.libc.mmap(addr, size, prot, flags, fd, offset)
    if out in (None, ctypes.c_void_p(-1).value): raise OSError(ctypes.get_errno(), f"mmap of {size:#x} bytes at {addr:#x} (fd {fd}, offset {offset:#x}) failed")
    return int(out)

  def munmap(self, addr: int, size: int) -> None: self.libc.munmap(addr, size)
  def listdir(self, path: str) -> list[str]: return os.listdir(path)

  def read_text(self, path: str) -> str:
    with open(path) as f: return f.read()

  def write_doorbell(self, addr: int, value: int) -> None: ctypes.c_uint64.from_address(addr).value = value
  def code_object(self, lib: bytes) -> None: pass


def kfd_present() -> bool: return os.path.exists("/dev/kfd")
