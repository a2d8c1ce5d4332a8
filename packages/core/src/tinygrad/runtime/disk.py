"""The DISK device: a file seen as device memory, read and written with pread/pwrite, so reading one tensor touches only its bytes.

    t = Tensor.empty(n, dtype=dtypes.uint8, device="DISK:/path/to/file")   # the file's first n bytes (or disk_file(path))
    w = disk_view(t, offset, dtypes.float32, (3, 4))                       # bytes offset.. as a (3, 4) float32 tensor
    w.to("CPU")                                                            # a COPY: reads just those 48 bytes

Every DISK:path is its own device instance. A buffer opens the file lazily, on its first read or write, and keeps
that descriptor (so a file replaced later is not seen by tensors made before; one truncated meanwhile reads as an EOFError). Making a tensor on DISK never writes:
the file is opened read-only until something is written to it, and that happens only by
- `x.to("DISK:path")` (or `Tensor(data, device="DISK:path")`, the same thing): when realized, writes x's bytes from
  the start of the file, creating or growing it;
- `t.assign(x)` for a DISK tensor t that is a contiguous part of its file (`t[4:8]`, `t.reshape(4, 16)[1]`,
  `disk_view(...)`): writes exactly t's bytes, at once.
DISK runs no kernels: computing on a DISK tensor (math, or a movement op that is not a contiguous byte range) is an
error that says to `.to()` a compute device first. A contiguous range (slices along the first axes, reshapes) is read
directly; `disk_view` takes byte ranges and reinterprets them as another dtype without computing.
(`disk_view` and the DISK-tensor helpers make tensors, so they live above the runtime, in frontend/disk.py; `disk_file` is in nn/state.py.)
"""
from __future__ import annotations

import os
from typing import Any

from tinygrad.device.devstring import Target
from tinygrad.device.runtime import Allocator, Compiled


class DiskFile:
  """One open file, shared by a buffer and all views of it. Opened on first use, read-only unless written.

  Reads and writes go through pread/pwrite, not a memory map: a file truncated by someone else while its tensors exist
  (between any size check and the copy) makes a mapped copy touch pages past the end, and the process dies with SIGBUS.
  pread comes back short instead, which is an EOFError naming the file. (Either way the bytes are copied once.)"""

  def __init__(self, path: str):
    self.path = path
    self.fd: int | None = None
    self.writable = False

  def _open(self, write: bool) -> int:
    if self.fd is None or (write and not self.writable):
      self.close()
      self.fd = os.open(self.path, (os.O_RDWR | os.O_CREAT) if write else os.O_RDONLY, 0o644)
      self.writable = write
    return self.fd

  def read(self, offset: int, dest: memoryview) -> None:
    if dest.nbytes == 0: return
    fd, end = self._open(write=False), offset + dest.nbytes
    with dest.cast("B") if dest.format != "B" or dest.ndim != 1 else dest[:] as out:
      done = 0
      while done < len(out):
        if (got := os.preadv(fd, [out[done:]], offset + done)) == 0:
          size = os.fstat(fd).st_size
          raise EOFError(f"DISK:{self.path} has {size} bytes, but a tensor on it reads up to byte {end}: the file is shorter than expected "
                         "(truncated or rewritten while in use?)")
        done += got

  def write(self, offset: int, src: memoryview) -> None:
    if src.nbytes == 0: return
    fd = self._open(write=True)
    with src.cast("B") if src.format != "B" or src.ndim != 1 else src[:] as data:
      done = 0
      while done < len(data): done += os.pwrite(fd, data[done:], offset + done)  # writing past the end grows the file

  def close(self) -> None:
    if self.fd is not None:
      os.close(self.fd)
      self.fd = None

  def __repr__(self) -> str: return f"<DiskFile {self.path}{' open' if self.fd is not None else ''}>"


class DiskBuffer:
  """Device memory on DISK: `size` bytes at byte `offset` of a file."""
  __slots__ = ("file", "offset", "size")

  def __init__(self, file: DiskFile, offset: int, size: int): self.file, self.offset, self.size = file, offset, size
  def __repr__(self) -> str: return f"<DiskBuffer {self.file.path} bytes {self.offset}..{self.offset + self.size}>"


class DiskAllocator(Allocator):
  """No caching of freed blocks: a freed DISK buffer closes its file."""

  def __init__(self, device: DiskDevice):
    super().__init__()
    self.device = device

  def alloc(self, size: int, options: Any = None) -> DiskBuffer: return DiskBuffer(DiskFile(os.path.abspath(self.device.path)), 0, size)
  def free(self, opaque: Any, size: int, options: Any = None) -> None: opaque.file.close()

  def _copyout(self, dest: memoryview, src: DiskBuffer) -> None:
    if dest.nbytes > src.size: raise ValueError(f"copyout of {dest.nbytes} bytes from {src}")
    src.file.read(src.offset, dest)

  def _copyin(self, dest: DiskBuffer, src: memoryview) -> None:
    if src.nbytes > dest.size: raise ValueError(f"copyin of {src.nbytes} bytes into {dest}")
    dest.file.write(dest.offset, src)

  def view(self, opaque: DiskBuffer, offset: int, size: int) -> DiskBuffer:
    if offset < 0 or size < 0 or offset + size > opaque.size:
      raise ValueError(f"a view of bytes {offset}..{offset + size} is out of bounds for {opaque} ({opaque.size} bytes)")
    return DiskBuffer(opaque.file, opaque.offset + offset, size)


class DiskDevice(Compiled):
  """DISK:path. Storage only: no renderer, no programs."""

  def __init__(self, path: str):
    self.path = path
    super().__init__(f"DISK:{path}", DiskAllocator(self), None, runs_kernels=False)


def open_disk(index: int, target: Target) -> Compiled:
  # the registry hands a DISK:path instance its path as target.arch (DeviceSpec.path_instances)
  if not target.arch: raise ValueError("DISK needs a file path: use device='DISK:/path/to/file'")
  return DiskDevice(target.arch)
