"""Tensors on the DISK device (runtime/disk.py): a whole file as a tensor, byte ranges of one reinterpreted as tensors of
any dtype and shape without computing (what nn/state.py and gguf loading read weights with), and the contiguous ranges
Tensor reads and assigns directly. Results are built with type(t): this module never names Tensor (a whole file as a
tensor, `disk_file`, is made in nn/state.py, which has the class)."""
from __future__ import annotations

from typing import Any, TypeVar

from tinygrad.device.registry import Device, registry
from tinygrad.device.runtime import Buffer, Views
from tinygrad.dtype import DType, to_dtype
from tinygrad.engine.buffers import buffer_of, buffers
from tinygrad.frontend.base import TensorBase
from tinygrad.helpers import InvalidArgumentError, all_int, prod
from tinygrad.schedule.kernelize import buffer_view, is_contiguous_buffer, new_buffer
from tinygrad.uop.ops import Ops, UOp

TensorT = TypeVar("TensorT", bound=TensorBase)


def is_storage_device(device: Any) -> bool:
  """A device whose instances are files (DISK:path): it stores bytes and runs no kernels."""
  return isinstance(device, str) and registry.split_path_instance(device) is not None


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


def range_view(t: TensorT) -> TensorT | None:
  """`t` as a tensor over its own buffer (a view of its bytes, nothing read) when it is a contiguous range of a realized
  buffer on a device that makes views (element_range), else None."""
  if (r := element_range(t.uop)) is None: return None
  buf, first = r
  return disk_view(type(t)(buf), first * buf.dtype.itemsize, buf.dtype, t.shape)


def assign_bytes(t: TensorBase, x: TensorBase) -> None:
  """Write x's values into the bytes of the DISK tensor t (t.assign(x) on DISK): exactly t's byte range of the file."""
  if (view := range_view(t)) is None:
    # (a ValueError, and tinygrad's RuntimeError and words)
    raise InvalidArgumentError(f"assign to {t} needs a contiguous part of its file (a slice along the leading axes, a reshape, a "
                               "disk_view): a non-contiguous view is not supported, this view's elements are not consecutive bytes")
  data = x.data().cast("B")  # computed where x lives, before anything is written: x may read this file
  buffer_of(view.uop.base).copyin(data)


def disk_view(t: TensorT, offset: int, dtype: DType | str, shape: tuple[int, ...]) -> TensorT:
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
  # the view's Buffer holds its root buffer (so the file stays open while the view lives) and its own byte range
  buffers[node] = Buffer(t.device, prod(shape), dt, opaque=allocator.view(src.opaque, offset, nbytes), base=src.base or src)
  return type(t)(buffer_view(node, shape))
