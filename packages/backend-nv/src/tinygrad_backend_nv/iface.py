"""The surface the NVK+NV runtime touches the NVIDIA kernel driver through, and its real implementation, `NVK`.

The runtime (nvruntime.py) is written once against `Interface`; `MOCK` (mocknv.py) implements the same methods in
Python, so the same RM object, memory, channel and launch code runs on both. The doorbell is a 32-bit store to the
usermode page mapped from the GPU: it goes through `write_doorbell` so the mock sees it (on NVK it is a plain store), and
the runtime shows each cubin it loads to `program` (nothing on NVK; the mock learns what the kernel computes).
"""
from __future__ import annotations

import ctypes
import os
from typing import Protocol

from tinygrad.device.plugin import MAP_ANONYMOUS, MAP_FIXED, MAP_PRIVATE, MAP_SHARED, PROT_NONE, PROT_READ, PROT_WRITE, OSDriver

__all__ = ["MAP_ANONYMOUS", "MAP_FIXED", "MAP_PRIVATE", "MAP_SHARED", "PROT_NONE", "PROT_READ", "PROT_WRITE", "NVIDIACTL", "NVIDIA_UVM", "NVK",
           "Interface", "nvk_present"]

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


class NVK(OSDriver):
  """The real thing: core's OSDriver (open, ioctl on ctypes objects, libc mmap) and the NVIDIA-specific stores."""
  name = "NVK"

  def exists(self, path: str) -> bool: return os.path.exists(path)
  def write_doorbell(self, addr: int, value: int) -> None: ctypes.c_uint32.from_address(addr).value = value
  def program(self, lib: bytes, name: str, va: int) -> None: pass


def nvk_present() -> bool: return os.path.exists(NVIDIACTL)
