"""The DISK device: a file seen as device memory, memory-mapped, so reading one tensor touches only its bytes.

    t = Tensor.empty(n, dtype=dtypes.uint8, device="DISK:/path/to/file")   # the file's first n bytes (or disk_file(path))
    w = disk_view(t, offset, dtypes.float32, (3, 4))                       # bytes offset.. as a (3, 4) float32 tensor
    w.to("CPU")                                                            # a COPY: reads just those 48 bytes

Every DISK:path is its own device instance. A buffer maps the file lazily, on its first read or write, and keeps
that mapping (so a file replaced later is not seen by tensors made before). Making a tensor on DISK never writes:
the file is opened read-only until something is written to it, and that happens only by
- `x.to("DISK:path")` (or `Tensor(data, device="DISK:path")`, the same thing): when realized, writes x's bytes from
  the start of the file, creating or growing it;
- `t.assign(x)` for a DISK tensor t that is a contiguous part of its file (`t[4:8]`, `t.reshape(4, 16)[1]`,
  `disk_view(...)`): writes exactly t's bytes, at once.
DISK runs no kernels: computing on a DISK tensor (math, or a movement op that is not a contiguous byte range) is an
error that says to `.to()` a compute device first. A contiguous range (slices along the first axes, reshapes) is read
directly; `disk_view` takes byte ranges and reinterprets them as another dtype without computing.
"""
from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING, Any

from tinygrad.device.devstring import Target
from tinygrad.device.runtime import Allocator, Compiled
from tinygrad.dtype import DType, dtypes, to_dtype
from tinygrad.helpers import all_int, prod
from tinygrad.uop.ops import Ops, UOp

if TYPE_CHECKING:
  from tinygrad.tensor import Tensor


class DiskFile:
  """One open mapping of a file, shared by a buffer and all views of it. Opened on first use, read-only unless written."""

  def __init__(self, path: str):
    self.path = path
    self.fd: int | None = None
    self.mm: mmap.mmap | None = None
    self.writable = False

  def _mapped(self, end: int, write: bool) -> mmap.mmap:
    """The mapping, covering at least bytes [0, end) of the file (grown when writing, an error when reading past the end)."""
    if self.fd is None or (write and not self.writable):
      self.close()
      self.fd = os.open(self.path, (os.O_RDWR | os.O_CREAT) if write else os.O_RDONLY, 0o644)
      self.writable = write
    if self.mm is not None and len(self.mm) >= end: return self.mm
    size = os.fstat(self.fd).st_size
    if size < end:
      if not write: raise EOFError(f"DISK:{self.path} has {size} bytes, but a tensor on it reads up to byte {end}: the file is shorter than expected")
      os.ftruncate(self.fd, end)
      size = end
    if self.mm is not None: self.mm.close()
    self.mm = mmap.mmap(self.fd, size, access=mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ)
    return self.mm

  def read(self, offset: int, dest: memoryview) -> None:
    if dest.nbytes == 0: return
    mm = self._mapped(offset + dest.nbytes, write=False)
    with memoryview(mm) as mv: dest[:] = mv[offset:offset + dest.nbytes]  # only these pages are touched

  def write(self, offset: int, src: memoryview) -> None:
    if src.nbytes == 0: return
    mm = self._mapped(offset + src.nbytes, write=True)
    with memoryview(mm) as mv: mv[offset:offset + src.nbytes] = src

  def close(self) -> None:
    if self.mm is not None:
      try: self.mm.close()
      except BufferError: return  # a memoryview of it is still alive somewhere: leave it to the garbage collector
      self.mm = None
    if self.fd is not None:
      os.close(self.fd)
      self.fd = None

  def __repr__(self) -> str: return f"<DiskFile {self.path}{' mapped' if self.mm is not None else ''}>"


class DiskBuffer:
  """Device memory on DISK: `size` bytes at byte `offset` of a file."""
  __slots__ = ("file", "offset", "size")

  def __init__(self, file: DiskFile, offset: int, size: int): self.file, self.offset, self.size = file, offset, size
  def __repr__(self) -> str: return f"<DiskBuffer {self.file.path} bytes {self.offset}..{self.offset + self.size}>"


class DiskAllocator(Allocator):
  """No caching of freed blocks: a freed DISK buffer closes its mapping."""

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
  # the registry hands a DISK:path instance its path as target.arch (see PATH_DEVICES in device/registry.py)
  if not target.arch: raise ValueError("DISK needs a file path: use device='DISK:/path/to/file'")
  return DiskDevice(target.arch)


# ---- tensors on DISK

def is_storage_device(device: Any) -> bool:
  """A device whose instances are files (DISK:path): it stores bytes and runs no kernels."""
  from tinygrad.device.registry import split_path_instance
  return isinstance(device, str) and split_path_instance(device) is not None


def element_range(u: UOp) -> tuple[UOp, int] | None:
  """(buffer, first element) when the view `u` is one run of consecutive elements of a BUFFER in row-major order
  (reshapes and shrinks that keep the order: a slice along the leading axes), else None."""
  chain: list[UOp] = []
  while u.op in (Ops.RESHAPE, Ops.SHRINK):
    chain.append(u)
    u = u.src[0]
  if u.op is not Ops.BUFFER or not isinstance(u.arg[1], int): return None
  shape: tuple[int, ...] = (u.arg[1],)
  strides: tuple[int, ...] = (1,)
  first = 0
  for v in reversed(chain):
    if not all_int(v.shape): return None
    if v.op is Ops.RESHAPE:
      if not _row_major(shape, strides): return None
      shape, strides = v.shape, tuple(prod(v.shape[i + 1:]) for i in range(len(v.shape)))
    else:
      first += sum(b * st for (b, _), st in zip(v.arg, strides))
      shape = v.shape
  return (u, first) if _row_major(shape, strides) else None


def _row_major(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
  expect = 1
  for s, st in zip(reversed(shape), reversed(strides)):
    if s != 1 and st != expect: return False
    expect *= s
  return True


def range_view(t: Tensor) -> Tensor | None:
  """`t` as a tensor over its own buffer (a view of its bytes, nothing read) when it is a contiguous range of a realized
  buffer on a device that makes views (element_range), else None."""
  if (r := element_range(t.uop)) is None: return None
  from tinygrad.tensor import Tensor
  buf, first = r
  return disk_view(Tensor(buf), first * buf.dtype.itemsize, buf.dtype, t.shape)


def assign_bytes(t: Tensor, x: Tensor) -> None:
  """Write x's values into the bytes of the DISK tensor t (t.assign(x) on DISK): exactly t's byte range of the file."""
  if (view := range_view(t)) is None:
    raise ValueError(f"assign to {t} needs a contiguous part of its file (a slice along the leading axes, a reshape, a disk_view); "
                     "this view's elements are not consecutive bytes")
  from tinygrad.engine.realize import buffer_of
  data = x.data().cast("B")  # computed where x lives, before anything is written: x may read this file
  buffer_of(view.uop.base).copyin(data)

def disk_file(path: str | os.PathLike) -> Tensor:
  """The whole file as a uint8 DISK tensor; nothing is read until a part of it is used."""
  from tinygrad.tensor import Tensor
  path = os.path.abspath(os.fspath(path))
  return Tensor.empty(os.stat(path).st_size, dtype=dtypes.uint8, device=f"DISK:{path}")


def disk_view(t: Tensor, offset: int, dtype: DType | str, shape: tuple[int, ...]) -> Tensor:
  """The bytes of `t` from byte `offset` on, reinterpreted as a `shape` tensor of `dtype`: a new buffer that is a
  view of t's (nothing is read or computed). `t` must be a realized contiguous tensor on a device whose allocator
  can make views (DISK, PYTHON), e.g. a DISK file or another view. `.to(device)` on the result copies only its bytes.
  This is the byte-range slicing that tinygrad spells `t[a:b].bitcast(dtype).reshape(shape)` on a uint8 DISK tensor."""
  from tinygrad.device.registry import Device
  from tinygrad.device.runtime import Buffer
  from tinygrad.engine.realize import buffer_of, buffers
  from tinygrad.schedule.kernelize import buffer_view, is_contiguous_buffer, new_buffer
  from tinygrad.tensor import Tensor
  dt, shape = to_dtype(dtype), tuple(int(s) for s in shape)
  if any(s < 0 for s in shape): raise ValueError(f"disk_view shape must be non-negative, got {shape}")
  if not is_contiguous_buffer(t.uop):
    raise ValueError(f"disk_view needs a realized contiguous tensor (a file or a view of one), got {t}: views of views go through disk_view itself")
  allocator = Device[t.device].allocator
  if not hasattr(allocator, "view"): raise ValueError(f"{t.device} can't make buffer views; disk_view works on DISK (and PYTHON) tensors")
  nbytes = prod(shape) * dt.itemsize
  if offset < 0 or offset + nbytes > t.nbytes():
    raise ValueError(f"disk_view of bytes {offset}..{offset + nbytes} ({shape} x {dt!r}) is out of bounds for {t} ({t.nbytes()} bytes)")
  src = buffer_of(t.uop.base).ensure_allocated()
  node = new_buffer(t.device, prod(shape), dt)
  # the view's Buffer holds its root buffer (so the file stays mapped while the view lives) and its own byte range
  buffers[node] = Buffer(t.device, prod(shape), dt, opaque=allocator.view(src.opaque, offset, nbytes), base=src.base or src)
  return Tensor(buffer_view(node, shape))
