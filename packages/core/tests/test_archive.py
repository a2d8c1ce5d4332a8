"""Archives in tensors (nn/archive.py, tinygrad's `nn.state` names): TensorIO as a file object, zip and tar members as
tensors (stored members as lazy DISK views, compressed ones decompressed), and clear errors for what is not an archive."""
from __future__ import annotations

import io
import pickle
import tarfile
import zipfile

import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Tensor, dtypes
from tinygrad.nn import state
from tinygrad.nn.state import TensorIO, accept_filename, disk_file, tar_extract, zip_extract

pytestmark = pytest.mark.skipif(is_null_device(), reason="the NULL device has no data to read back")

MEMBERS = {"a.bin": bytes(range(256)) * 3, "dir/b.txt": b"hello world " * 50, "empty": b""}


def as_tensor(data: bytes) -> Tensor: return Tensor(np.frombuffer(data, np.uint8).copy())


def zip_bytes(compression: int) -> bytes:
  out = io.BytesIO()
  with zipfile.ZipFile(out, "w") as zf:
    for name, data in MEMBERS.items(): zf.writestr(name, data, compress_type=compression)
  return out.getvalue()


def tar_bytes(mode: str) -> bytes:
  out = io.BytesIO()
  with tarfile.open(fileobj=out, mode=mode) as tf:
    dir_info = tarfile.TarInfo("dir")
    dir_info.type = tarfile.DIRTYPE
    tf.addfile(dir_info)
    for name, data in MEMBERS.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tf.addfile(info, io.BytesIO(data))
  return out.getvalue()


def contents(members: dict[str, Tensor]) -> dict[str, bytes]:
  return {name: bytes(t.numpy()) for name, t in members.items()}


def test_tensor_io_reads_seeks_and_feeds_pickle():
  payload = pickle.dumps({"x": [1, 2, 3], "y": "text"})
  f = TensorIO(as_tensor(payload))
  assert f.readable() and f.seekable() and not f.writable() and f.mode == "rb"
  assert f.read(2) == payload[:2] and f.tell() == 2
  assert f.seek(-3, io.SEEK_END) == len(payload) - 3 and f.read() == payload[-3:]
  f.seek(1)
  buf = bytearray(4)
  assert f.readinto(buf) == 4 and bytes(buf) == payload[1:5]
  f.seek(0)
  assert pickle.load(io.BufferedReader(f)) == {"x": [1, 2, 3], "y": "text"}


@pytest.mark.parametrize("bad", [Tensor([1.0, 2.0]), Tensor.zeros(2, 2, dtype=dtypes.uint8)])
def test_tensor_io_refuses_other_tensors(bad):
  with pytest.raises(ValueError, match="1-D uint8"): TensorIO(bad)


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_zip_extract_from_a_tensor(compression):
  assert contents(zip_extract(as_tensor(zip_bytes(compression)))) == MEMBERS


def test_zip_extract_from_a_path_views_stored_members_on_disk(tmp_path):
  path = tmp_path / "w.zip"
  path.write_bytes(zip_bytes(zipfile.ZIP_STORED))
  members = zip_extract(path)
  assert all(t.device.startswith("DISK:") for t in members.values())
  assert contents(members) == MEMBERS
  assert contents(zip_extract(str(path))) == MEMBERS
  assert TensorIO(disk_file(path)).name == str(path)
  # the view is of the member's bytes: a float32 view of a.bin is numpy's of the same bytes
  view = members["a.bin"][:16].to(None).bitcast(dtypes.float32)
  np.testing.assert_array_equal(view.numpy(), np.frombuffer(MEMBERS["a.bin"][:16], np.float32))


def test_zip_extract_keeps_directory_entries_empty():
  out = io.BytesIO()
  with zipfile.ZipFile(out, "w") as zf:
    zf.writestr("d/", b"")
    zf.writestr("d/x", b"abc")
  members = zip_extract(as_tensor(out.getvalue()))
  assert list(members) == ["d/", "d/x"] and members["d/"].shape == (0,) and bytes(members["d/x"].numpy()) == b"abc"


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:bz2", "w:xz"])
def test_tar_extract(mode):
  members = tar_extract(as_tensor(tar_bytes(mode)))
  assert contents(members) == MEMBERS  # the directory is left out
  assert all(t.dtype == dtypes.uint8 and t.ndim == 1 for t in members.values())


def test_tar_extract_from_a_path_views_members_on_disk(tmp_path):
  path = tmp_path / "a.tar"
  path.write_bytes(tar_bytes("w"))
  members = tar_extract(path)
  assert all(t.device.startswith("DISK:") for t in members.values() if t.shape[0])
  assert contents(members) == MEMBERS


def test_not_an_archive_says_which_file(tmp_path):
  path = tmp_path / "junk.bin"
  path.write_bytes(b"\x01" * 1000)
  with pytest.raises(zipfile.BadZipFile, match="junk.bin is not a zip file"): zip_extract(path)
  with pytest.raises(tarfile.ReadError, match="junk.bin is not a tar archive"): tar_extract(path)
  with pytest.raises(FileNotFoundError): zip_extract(tmp_path / "missing.zip")


def test_truncated_archives_raise():
  data = tar_bytes("w")
  with pytest.raises(tarfile.TarError): tar_extract(as_tensor(data[:1500]))  # ends inside a.bin's bytes
  with pytest.raises(zipfile.BadZipFile): zip_extract(as_tensor(zip_bytes(zipfile.ZIP_STORED)[:-30]))


def test_accept_filename(tmp_path):
  @accept_filename
  def first_byte(t: Tensor) -> int: return int(t[0].item())
  path = tmp_path / "f.bin"
  path.write_bytes(b"\x07\x08")
  assert first_byte(path) == 7 and first_byte(str(path)) == 7 and first_byte(disk_file(path)) == 7
  assert first_byte(as_tensor(b"\x09")) == 9
  assert first_byte.__name__ == "first_byte"


def test_reached_from_nn_state():
  for name in ("TensorIO", "accept_filename", "zip_extract", "tar_extract"): assert name in state.__all__ and hasattr(state, name)
