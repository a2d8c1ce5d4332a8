"""Tensors on the DISK device (runtime/disk.py): a whole file as a tensor, and byte ranges of one reinterpreted as
tensors of any dtype and shape without computing (what nn/state.py and gguf loading read weights with)."""
from __future__ import annotations

import os

from tinygrad.device.registry import Device
from tinygrad.device.runtime import Buffer, Views
from tinygrad.dtype import DType, dtypes, to_dtype
from tinygrad.engine.buffers import buffer_of, buffers
from tinygrad.helpers import prod
from tinygrad.schedule.kernelize import buffer_view, is_contiguous_buffer, new_buffer
from tinygrad.tensor import Tensor


def disk_file(path: str | os.PathLike) -> Tensor:
  """The whole file as a uint8 DISK tensor; nothing is read until a part of it is used."""
  path = os.path.abspath(os.fspath(path))
  return Tensor.empty(os.stat(path).st_size, dtype=dtypes.uint8, device=f"DISK:{path}")


def disk_view(t: Tensor, offset: int, dtype: DType | str, shape: tuple[int, ...]) -> Tensor:
  """The bytes of `t` from byte `offset` on, reinterpreted as a `shape` tensor of `dtype`: a new buffer that is a
  view of t's (nothing is read or computed). `t` must be a realized contiguous tensor on a device whose allocator
  can make views (DISK, PYTHON), e.g. a DISK file or another view. `.to(device)` on the result copies only its bytes.
  This is the byte-range slicing that tinygrad spells `t[a:b].bitcast(dtype).reshape(shape)` on a uint8 DISK tensor."""
  dt, shape = to_dtype(dtype), tuple(int(s) for s in shape)
  if any(s < 0 for s in shape): raise ValueError(f"disk_view shape must be non-negative, got {shape}")
  if not is_contiguous_buffer(t.uop):
    raise ValueError(f"disk_view needs a realized contiguous tensor (a file or a view of one), got {t}: views of views go through disk_view itself")
  allocator = Device[t.device].allocator
  if not isinstance(allocator, Views): raise ValueError(f"{t.device} can't make buffer views; disk_view works on DISK (and PYTHON) tensors")
  nbytes = prod(shape) * dt.itemsize
  if offset < 0 or offset + nbytes > t.nbytes():
    raise ValueError(f"disk_view of bytes {offset}..{offset + nbytes} ({shape} x {dt!r}) is out of bounds for {t} ({t.nbytes()} bytes)")
  src = buffer_of(t.uop.base).ensure_allocated()
  node = new_buffer(t.device, prod(shape), dt)
  # the view's Buffer holds its root buffer (so the file stays mapped while the view lives) and its own byte range
  buffers[node] = Buffer(t.device, prod(shape), dt, opaque=allocator.view(src.opaque, offset, nbytes), base=src.base or src)
  return Tensor(buffer_view(node, shape))
