"""copy_buffer through host memory: a big copy goes through one reused staging area in chunks (both sides have views), else
through one scratch buffer; the bytes arrive either way."""
import numpy as np
import pytest
from tinygrad import dtypes
from tinygrad.device.runtime import Buffer
from tinygrad.engine import realize


@pytest.mark.parametrize("nbytes", [999, 1000, 4321])
def test_disk_to_disk_in_chunks(tmp_path, monkeypatch, nbytes):
  monkeypatch.setattr(realize, "STAGING_BYTES", 1000)
  data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
  (tmp_path / "src.bin").write_bytes(b"\x07" * 16 + data.tobytes())
  (tmp_path / "dst.bin").write_bytes(bytes(nbytes + 8))
  chunks = []
  real = realize._copy_in_chunks
  monkeypatch.setattr(realize, "_copy_in_chunks", lambda d, s: (chunks.append(s.nbytes), real(d, s)))
  src_file = Buffer(f"DISK:{tmp_path / 'src.bin'}", nbytes + 16, dtypes.uint8)
  dst_file = Buffer(f"DISK:{tmp_path / 'dst.bin'}", nbytes + 8, dtypes.uint8)
  src, dst = Buffer(src_file.device, nbytes, dtypes.uint8, base=src_file, offset=16), Buffer(dst_file.device, nbytes, dtypes.uint8, base=dst_file, offset=8)
  realize.copy_buffer(dst, src)  # views at offsets: the chunks' views are views of views
  assert (tmp_path / "dst.bin").read_bytes() == bytes(8) + data.tobytes()
  assert chunks == ([nbytes] if nbytes > 1000 else [])


def test_scratch_buffers_big_and_small(monkeypatch):
  monkeypatch.setattr(realize, "STAGING_BYTES", 64)
  for n in (10, 64, 1000):
    with realize._scratch(n) as mv:
      assert mv.nbytes == n and not any(mv)
      mv[:] = bytes(range(256)) * (n // 256) + bytes(range(n % 256))

