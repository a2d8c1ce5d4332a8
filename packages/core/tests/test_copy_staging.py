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



class _AsyncEngine:
  """A device whose copies from staging run later (when waited for), like a GPU's copy engine: the bytes arrive right only if
  no staging area is refilled before the copy that read it was waited for."""
  def __init__(self, nbytes: int):
    self.memory, self.waits, self.areas_made = bytearray(nbytes), 0, 0
  def view(self, opaque: int, offset: int, size: int) -> int: return opaque + offset
  def staging_areas(self, nbytes: int, count: int) -> list[memoryview]:
    self.areas_made += count
    return [memoryview(bytearray(nbytes)) for _ in range(count)]
  def copyin_async(self, dest: int, src: memoryview):
    def wait() -> None:
      self.memory[dest:dest + src.nbytes] = src  # reads the area now: a refill before this would corrupt the copy
      self.waits += 1
    return wait


@pytest.mark.parametrize("nbytes", [1000, 2500, 4321])
def test_pipelined_copy_in_waits_before_refilling_an_area(tmp_path, monkeypatch, nbytes):
  from types import SimpleNamespace
  monkeypatch.setattr(realize, "STAGING_BYTES", 1000)
  data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
  (tmp_path / "src.bin").write_bytes(data.tobytes())
  src = Buffer(f"DISK:{tmp_path / 'src.bin'}", nbytes, dtypes.uint8)
  from tinygrad import Device
  engine = _AsyncEngine(nbytes)
  realize._pipelined_copy_in(SimpleNamespace(opaque=0), src.ensure_allocated(), Device[src.device].allocator, engine)
  assert bytes(engine.memory) == data.tobytes()
  assert engine.waits == -(-nbytes // 1000) and engine.areas_made == 2  # every chunk waited for, two areas in turn


def test_pipeline_min_applies_to_async_devices_only():
  from tinygrad.helpers import Context
  with Context(PIPELINE_MIN=-1): assert realize._chunked_from(_AsyncEngine(8)) == realize.STAGING_BYTES
  with Context(PIPELINE_MIN=1 << 20):
    assert realize._chunked_from(_AsyncEngine(8)) == 1 << 20
    assert realize._chunked_from(object()) == realize.STAGING_BYTES  # no page-locked staging: scratch memory below STAGING_BYTES
