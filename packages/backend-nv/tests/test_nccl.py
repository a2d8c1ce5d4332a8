"""The NCCL backend as far as it goes without GPUs: its registration, the ctypes types and enum values against nccl.h,
the library search and its error, and the id exchange through the TCP store with a stand-in library. Real NCCL runs:
packages/core/tests/distributed/run_on_gpus.sh."""
from __future__ import annotations

import ctypes
import threading
from types import SimpleNamespace

import pytest
from nv_harness import HAS_GPU
from tinygrad.device.collectives import CommInit
from tinygrad.device.registry import registry
from tinygrad.distributed.store import TCPStore
from tinygrad.dtype import dtypes
from tinygrad_backend_nv import nccl


def test_registered_for_cuda_and_nv() -> None:
  spec = next(s for s in registry.load().collectives if s.name == "nccl")
  assert spec.serves("CUDA:1") and spec.serves("NV") and not spec.serves("CPU")
  assert spec.package == "tinygrad-backend-nv[nccl]"
  mpi = next(s for s in registry.collectives if s.name == "mpi")
  assert mpi.serves("CUDA") and mpi.serves("CPU")  # staged through host memory


def test_types_match_nccl_h() -> None:
  assert ctypes.sizeof(nccl.ncclUniqueId) == 128  # NCCL_UNIQUE_ID_BYTES
  assert [nccl.NCCL_TYPES[d] for d in (dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64,
                                        dtypes.float16, dtypes.float32, dtypes.float64, dtypes.bfloat16)] == list(range(10))
  assert nccl.NCCL_OPS == {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
  with pytest.raises(TypeError, match="cast"): nccl.nccl_type(dtypes.int16)


def test_missing_library_says_what_to_install(monkeypatch, tmp_path) -> None:
  monkeypatch.setenv("TINYGRAD_NCCL_LIB", str(tmp_path / "libnccl.so.2"))
  monkeypatch.setattr(nccl.sys, "path", [str(tmp_path)])
  monkeypatch.setattr(nccl.ctypes.util, "find_library", lambda name: None)
  assert nccl.candidates() == [str(tmp_path / "libnccl.so.2")]
  nccl.load_nccl.cache_clear()
  try:
    with pytest.raises(RuntimeError, match=r"tinygrad-backend-nv\[nccl\]") as e: nccl.load_nccl()
    assert str(tmp_path) in str(e.value)
    assert "libnccl" in (nccl.nccl_available() or "")
  finally: nccl.load_nccl.cache_clear()


def test_site_packages_library_is_a_candidate(monkeypatch, tmp_path) -> None:
  lib = tmp_path / "nvidia" / "nccl" / "lib"
  lib.mkdir(parents=True)
  (lib / "libnccl.so.2").write_bytes(b"")
  monkeypatch.delenv("TINYGRAD_NCCL_LIB", raising=False)
  monkeypatch.setattr(nccl.sys, "path", [str(tmp_path)])
  assert nccl.candidates()[0] == str(lib / "libnccl.so.2")


class FakeNCCL:
  """Stands in for libnccl: rank 0's GetUniqueId writes a known id; CommInitRank records what each rank got."""

  def __init__(self) -> None: self.inits: dict[int, bytes] = {}
  def ncclGetUniqueId(self, ptr) -> int:
    ctypes.memmove(ctypes.cast(ptr, ctypes.c_void_p).value, bytes(range(128)), 128)
    return 0
  def ncclCommInitRank(self, comm_ptr, world, uid, rank) -> int:
    self.inits[rank] = bytes(uid)
    return 0


def test_unique_id_travels_through_the_store(monkeypatch) -> None:
  fake = FakeNCCL()
  monkeypatch.setattr(nccl, "load_nccl", lambda: fake)
  monkeypatch.setattr(nccl.NCCLCommunicator, "_use", lambda self: None)
  fake_device = SimpleNamespace(ctx=None, device="CUDA")
  server = TCPStore("127.0.0.1", 0, is_server=True, timeout=30)
  stores = [server] + [TCPStore("127.0.0.1", server.port, is_server=False, timeout=30) for _ in range(2)]
  threads = [threading.Thread(target=nccl.NCCLCommunicator, args=(CommInit(r, 3, "CUDA", stores[r], fake_device),)) for r in (2, 1, 0)]
  for t in threads: t.start()
  for t in threads: t.join(30)
  assert fake.inits == {r: bytes(range(128)) for r in range(3)}
  for s in stores[::-1]: s.close()


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU and libnccl")
def test_version_of_the_real_library() -> None:
  assert nccl.version().startswith("2.")
