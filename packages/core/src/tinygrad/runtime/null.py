"""The NULL device: kernels compile with any installed renderer but never run, and there is no data to read.

Useful to check that everything compiles, and to count kernels and ops, without a device to run on."""
from __future__ import annotations

from typing import Any

from tinygrad.device.devstring import Target, instance_name
from tinygrad.device.runtime import Allocator, Compiled

NO_DATA = ("the NULL device compiles kernels but does not run them, so it has no data to read back; "
           "use DEV=CPU or DEV=PYTHON to get values")


class NullBuffer:
  """Stands in for memory: only the size is kept."""
  __slots__ = ("size",)

  def __init__(self, size: int): self.size = size
  def __repr__(self) -> str: return f"<NullBuffer {self.size} bytes>"


class NullAllocator(Allocator):
  def _alloc(self, size: int, options: Any) -> NullBuffer: return NullBuffer(size)
  def _copyin(self, dest: Any, src: memoryview) -> None: pass  # accepted and dropped: nothing will read it
  def _copyout(self, dest: memoryview, src: Any) -> None: raise RuntimeError(NO_DATA)
  def view(self, opaque: Any, offset: int, size: int) -> NullBuffer: return NullBuffer(size)


class NullProgram:
  """A loaded kernel that does nothing when called."""

  def __init__(self, name: str, lib: bytes): self.name, self.lib = name, lib

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    return 0.0 if wait else None


def open_null(index: int, target: Target) -> Compiled:
  return Compiled(instance_name("NULL", index), NullAllocator(), NullProgram, runs_kernels=False)
