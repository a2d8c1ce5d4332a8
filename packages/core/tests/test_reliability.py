"""Reliability (issue 20): files are written only when asked, index math doesn't overflow, shifts and literal values are
defined like torch's, empty reductions and bad shapes raise."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.runtime.disk import disk_view

# ---- R1: DISK tensors never write a file unless assigned to

KNOWN = bytes(range(256)) * 2


@pytest.fixture
def known_file(tmp_path):
  p = tmp_path / "known.bin"
  p.write_bytes(KNOWN)
  return p


def test_disk_creation_and_reads_leave_file_unchanged(known_file):
  dev = f"DISK:{known_file}"
  t = Tensor.empty(len(KNOWN), dtype=dtypes.uint8, device=dev)
  data = Tensor([1, 2, 3], dtype=dtypes.uint8, device=dev)  # not realized: nothing may be written
  Tensor(np.arange(8, dtype=np.int32), device=dev)
  Tensor(b"\xff" * 16, device=dev)
  Tensor.zeros(16, dtype=dtypes.uint8, device=dev)
  Tensor.ones(4, 4, dtype=dtypes.uint8, device=dev)
  assert t.to(None).tolist() == list(KNOWN)
  assert t[4:8].to(None).tolist() == [4, 5, 6, 7]  # a slice is a byte range of the file, read directly
  assert t.reshape(32, 16)[3].tolist() == list(range(48, 64))
  assert t.reshape(32, 16)[2:4].numpy().tobytes() == KNOWN[32:64]
  assert disk_view(t, 256, dtypes.uint32, (2,)).tolist() == np.frombuffer(KNOWN[256:264], np.uint32).tolist()
  del data
  assert known_file.read_bytes() == KNOWN


def test_disk_data_tensor_writes_when_realized(tmp_path):
  p = tmp_path / "new.bin"
  t = Tensor([1, 2, 3], dtype=dtypes.uint8, device=f"DISK:{p}")
  assert not p.exists()
  assert t.tolist() == [1, 2, 3]
  assert p.read_bytes() == b"\x01\x02\x03"


@pytest.mark.parametrize("view,start", [(lambda t: t[4:8], 4), (lambda t: t.reshape(128, 4)[100], 400),
                                        (lambda t: disk_view(t, 300, dtypes.uint8, (4,)), 300)])
def test_disk_assign_writes_exactly_its_range(known_file, view, start):
  t = Tensor.empty(len(KNOWN), dtype=dtypes.uint8, device=f"DISK:{known_file}")
  view(t).assign(Tensor([9, 8, 7, 6], dtype=dtypes.uint8)).realize()
  want = bytearray(KNOWN)
  want[start:start + 4] = b"\x09\x08\x07\x06"
  assert known_file.read_bytes() == bytes(want)
  assert view(t).tolist() == [9, 8, 7, 6]


def test_disk_assign_typed_and_whole(known_file):
  t = Tensor.empty(len(KNOWN) // 4, dtype=dtypes.int32, device=f"DISK:{known_file}")
  t[1:3].assign(Tensor([-1, 5], dtype=dtypes.int32))
  want = bytearray(KNOWN)
  want[4:12] = np.array([-1, 5], np.int32).tobytes()
  assert known_file.read_bytes() == bytes(want)
  t.assign(Tensor.arange(len(KNOWN) // 4, dtype=dtypes.int32))
  assert known_file.read_bytes() == np.arange(len(KNOWN) // 4, dtype=np.int32).tobytes()


def test_disk_assign_to_scattered_view_raises(known_file):
  t = Tensor.empty(16, 32, dtype=dtypes.uint8, device=f"DISK:{known_file}")
  with pytest.raises(ValueError, match="contiguous"): t[:, 0:4].assign(Tensor.zeros(16, 4, dtype=dtypes.uint8))
  assert known_file.read_bytes() == KNOWN
