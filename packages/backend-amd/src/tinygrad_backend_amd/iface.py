"""The surface the AMD runtime touches the kernel through, and its real implementation, `KFD` (/dev/kfd).

The runtime (runtime.py) is written once against `Interface`; `MOCKKFD` (mockkfd.py) implements the same methods in
Python, so the same queue, allocator and loader code runs on both. A doorbell write is a store to an MMIO page: it goes
through `write_doorbell` so that the mock sees it (on KFD it is a plain 64-bit store to the mapped doorbell page), and
the runtime shows each code object it loads to `code_object` (nothing on KFD; the mock reads the program attached to it).
Never run on an AMD GPU: see the package README.
"""
from __future__ import annotations

import ctypes
import os
from typing import Protocol

from tinygrad.device.plugin import MAP_ANONYMOUS, MAP_FIXED, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED, PROT_NONE, PROT_READ, PROT_WRITE, OSDriver

__all__ = ["MAP_ANONYMOUS", "MAP_FIXED", "MAP_NORESERVE", "MAP_PRIVATE", "MAP_SHARED", "PROT_NONE", "PROT_READ", "PROT_WRITE", "TOPOLOGY", "KFD",
           "Interface", "kfd_present"]

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


class KFD(OSDriver):
  """The real thing: core's OSDriver (open, ioctl on ctypes structures, libc mmap at fixed addresses) and sysfs reads."""
  name = "KFD"

  def listdir(self, path: str) -> list[str]: return os.listdir(path)

  def read_text(self, path: str) -> str:
    with open(path) as f: return f.read()

  def write_doorbell(self, addr: int, value: int) -> None: ctypes.c_uint64.from_address(addr).value = value
  def code_object(self, lib: bytes) -> None: pass


def kfd_present() -> bool: return os.path.exists("/dev/kfd")
