"""Archives held in tensors: a file-like view of a uint8 tensor (`TensorIO`) and the members of a zip or tar file as
tensors (`zip_extract`, `tar_extract`), tinygrad's `nn.state` names.

A member stored without compression is a lazy view of the archive (on DISK nothing is read until it is used); a
compressed one is decompressed on the host and its bytes put on the default device. Re-exported by `nn.state`.
"""
from __future__ import annotations

import functools
import os
import tarfile
import zipfile
from collections.abc import Callable
from typing import TypeVar

from tinygrad.dtype import dtypes
from tinygrad.nn.state import FileLike, _name, _RawReader, _Source, _stored_entry_offset
from tinygrad.tensor import Tensor

__all__ = ["TensorIO", "accept_filename", "zip_extract", "tar_extract"]

T = TypeVar("T")


class TensorIO(_RawReader):
  """A read-only, seekable binary file over a 1-D uint8 tensor (for `zipfile`, `tarfile`, `pickle`, ...):

  ```python
  f = TensorIO(Tensor(list(b"hello"), dtype="uint8"))
  assert f.read(4) == b"hell"
  ```
  A tensor that is not a DISK view of a file is read into host memory once, when the TensorIO is made."""

  def __init__(self, t: Tensor):
    if not isinstance(t, Tensor) or t.ndim != 1 or t.dtype != dtypes.uint8:
      raise ValueError(f"TensorIO needs a 1-D uint8 tensor of a file's bytes, got {t!r}; view other tensors as bytes with "
                       f"t.flatten().bitcast(dtypes.uint8)")
    super().__init__(_Source(t))

  @property
  def mode(self) -> str: return "rb"

  @property
  def name(self) -> str:
    """The file's path where the tensor is a DISK view of one, else the tensor's description."""
    return self.src.t.device.split(":", 1)[1] if self.src.t.device.startswith("DISK:") else repr(self.src.t)


def accept_filename(func: Callable[[Tensor], T]) -> Callable[[Tensor | str | os.PathLike], T]:
  """Lets a function of a file's bytes (a 1-D uint8 tensor) also take a path, opened as a lazy DISK tensor."""
  @functools.wraps(func)
  def wrapper(fn: Tensor | str | os.PathLike) -> T: return func(fn if isinstance(fn, Tensor) else _Source(fn).t)
  return wrapper


def zip_extract(fn: FileLike) -> dict[str, Tensor]:
  """The members of a zip file (a path or its bytes as a 1-D uint8 tensor), name -> uint8 tensor of the member's bytes
  (a directory entry: an empty tensor). Raises `zipfile.BadZipFile` naming the file where it is not a zip file.

  ```python
  members = nn.state.zip_extract("weights.zip")
  ```"""
  src, name = _Source(fn), _name(fn)
  try: zf = zipfile.ZipFile(src.reader())
  except zipfile.BadZipFile as e: raise zipfile.BadZipFile(f"{name} is not a zip file ({e})") from None
  out: dict[str, Tensor] = {}
  with zf:
    for info in zf.infolist():
      if info.compress_type == zipfile.ZIP_STORED:
        out[info.filename] = src.tensor(_stored_entry_offset(src, info, name, zipfile.BadZipFile), dtypes.uint8, (info.file_size,))
      else:
        with zf.open(info) as member: out[info.filename] = _host_bytes(member.read())
  return out


def tar_extract(fn: FileLike) -> dict[str, Tensor]:
  """The regular files of a tar archive (a path or its bytes as a 1-D uint8 tensor; gzip, bz2 and xz compressed archives
  too), name -> uint8 tensor of the file's bytes; directories and links are left out. Raises `tarfile.ReadError` naming
  the file where it is not a tar archive.

  ```python
  members = nn.state.tar_extract("images.tar")
  ```"""
  src, name = _Source(fn), _name(fn)
  reader = src.reader()
  try: tf = tarfile.open(fileobj=reader, mode="r:*")
  except tarfile.ReadError: raise tarfile.ReadError(f"{name} is not a tar archive (plain, gzip, bz2 or xz compressed)") from None
  with tf:
    # offset_data counts bytes of the archive only where no decompressing stream sits between it and tarfile
    uncompressed = tf.fileobj is reader
    out: dict[str, Tensor] = {}
    for member in tf:
      if not member.isfile(): continue
      if member.offset_data + member.size > src.size and uncompressed:
        raise tarfile.ReadError(f"{name} is truncated: member {member.name} ends past the end of the file")
      if uncompressed: out[member.name] = src.tensor(member.offset_data, dtypes.uint8, (member.size,))
      else:
        data = tf.extractfile(member)
        assert data is not None  # a regular file always has its bytes
        out[member.name] = _host_bytes(data.read())
  return out


def _host_bytes(data: bytes) -> Tensor:
  return Tensor(data, dtype=dtypes.uint8) if data else Tensor.empty(0, dtype=dtypes.uint8)
