"""fetch (tinygrad.fetch), Tensor.from_url and nn.datasets.mnist and cifar, on file:// URLs into a temporary download cache (CI has no
network): downloaded once, gunzip, extract, sha256, names and folders, clear errors for what isn't there or is corrupt."""
from __future__ import annotations

import gzip
import hashlib
import io
import struct
import tarfile

import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Tensor, dtypes, fetch
from tinygrad.nn import datasets


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
  monkeypatch.setenv("DOWNLOAD_CACHE", str(tmp_path / "cache"))
  return tmp_path / "cache"


def test_fetch_downloads_once_and_names_files(tmp_path, cache):
  src = tmp_path / "a.bin"
  src.write_bytes(b"first")
  url = src.as_uri()
  got = fetch(url)
  assert got.read_bytes() == b"first" and got.parent == cache
  src.write_bytes(b"second")
  assert fetch(url).read_bytes() == b"first"  # cached
  assert fetch(url, allow_caching=False).read_bytes() == b"second"
  named = fetch(url, name="x.bin", subdir="sub")
  assert named == cache / "sub" / "x.bin" and named.read_bytes() == b"second"
  assert fetch(str(src)) == src  # a local path is used as it is
  assert not list(cache.rglob("*.part"))  # no temporary files left


def test_fetch_gunzip_extract_and_sha256(tmp_path):
  gz = tmp_path / "d.gz"
  gz.write_bytes(gzip.compress(b"hello"))
  assert fetch(gz.as_uri(), gunzip=True).read_bytes() == b"hello"
  with pytest.raises(RuntimeError, match="not a gzip file"): fetch(_file(tmp_path, "p.txt", b"plain").as_uri(), gunzip=True)
  digest = hashlib.sha256(b"hello").hexdigest()
  src = _file(tmp_path, "h.txt", b"hello")
  assert fetch(src.as_uri(), sha256=digest).read_bytes() == b"hello"
  with pytest.raises(RuntimeError, match="sha256"): fetch(src.as_uri(), name="h2", sha256="0" * 64)
  buf = io.BytesIO()
  with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    info = tarfile.TarInfo("inner/f.txt")
    info.size = 3
    tar.addfile(info, io.BytesIO(b"abc"))
  archive = _file(tmp_path, "t.tar.gz", buf.getvalue())
  folder = fetch(archive.as_uri(), extract=True)
  assert (folder / "inner" / "f.txt").read_bytes() == b"abc"


def test_fetch_errors_say_what(tmp_path):
  with pytest.raises(RuntimeError, match="can't open it"): fetch((tmp_path / "missing.bin").as_uri())
  with pytest.raises(ValueError, match="not an http"): fetch("ftp://example.com/x")


@pytest.mark.skipif(is_null_device(), reason="the NULL device has no data to read back")
def test_from_url_is_the_files_bytes(tmp_path):
  src = _file(tmp_path, "b.gz", gzip.compress(bytes(range(10))))
  t = Tensor.from_url(src.as_uri(), gunzip=True)
  assert t.dtype == dtypes.uint8 and t.tolist() == list(range(10))


def _idx(kind: int, dims: tuple[int, ...], data: bytes) -> bytes:
  return gzip.compress(struct.pack(f">i{len(dims)}i", kind, *dims) + data)


@pytest.mark.skipif(is_null_device(), reason="the NULL device has no data to read back")
def test_mnist_reads_idx_files(tmp_path, monkeypatch):
  rng = np.random.default_rng(0)
  base = tmp_path / "mnist"
  base.mkdir()
  images = {n: rng.integers(0, 256, (n, 28, 28), dtype=np.uint8) for n in (5, 3)}
  labels = {n: rng.integers(0, 10, n, dtype=np.uint8) for n in (5, 3)}
  for split, n in (("train", 5), ("t10k", 3)):
    (base / f"{split}-images-idx3-ubyte.gz").write_bytes(_idx(2051, (n, 28, 28), images[n].tobytes()))
    (base / f"{split}-labels-idx1-ubyte.gz").write_bytes(_idx(2049, (n,), labels[n].tobytes()))
  monkeypatch.setattr(datasets, "MNIST_URL", base.as_uri() + "/")
  X_train, Y_train, X_test, Y_test = datasets.mnist()
  assert X_train.shape == (5, 1, 28, 28) and Y_train.shape == (5,) and X_test.shape == (3, 1, 28, 28) and Y_test.shape == (3,)
  assert X_train.dtype == dtypes.uint8 and Y_test.dtype == dtypes.uint8
  np.testing.assert_array_equal(X_train.numpy()[:, 0], images[5])
  np.testing.assert_array_equal(Y_test.numpy(), labels[3])
  # a corrupt file (the label file where images belong) says which, and how to recover
  (base / "train-images-idx3-ubyte.gz").write_bytes(_idx(2049, (5,), labels[5].tobytes()))
  monkeypatch.setenv("DOWNLOAD_CACHE", str(tmp_path / "fresh"))
  with pytest.raises(ValueError, match="not an MNIST image file"): datasets.mnist()
  (base / "train-images-idx3-ubyte.gz").write_bytes(_idx(2051, (5, 28, 28), images[5].tobytes()[:-1]))  # truncated
  monkeypatch.setenv("DOWNLOAD_CACHE", str(tmp_path / "fresh2"))
  with pytest.raises(ValueError, match="its header says"): datasets.mnist()


def _cifar_tarball(batches: dict[str, np.ndarray]) -> bytes:
  """A .tar.gz of the CIFAR-10 binary layout: cifar-10-batches-bin/<name>, records of a label byte then 3x32x32 bytes."""
  buf = io.BytesIO()
  with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    for name, records in batches.items():
      info = tarfile.TarInfo(f"cifar-10-batches-bin/{name}")
      info.size = records.nbytes
      tar.addfile(info, io.BytesIO(records.tobytes()))
  return buf.getvalue()


@pytest.mark.skipif(is_null_device(), reason="the NULL device has no data to read back")
def test_cifar_reads_the_binary_batches(tmp_path, monkeypatch):
  rng = np.random.default_rng(0)
  names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
  batches = {name: rng.integers(0, 256, (n, 3073), dtype=np.uint8) for name, n in zip(names, (2, 3, 1, 2, 2, 3), strict=True)}
  for records in batches.values(): records[:, 0] %= 10
  archive = _file(tmp_path, "cifar-10-binary.tar.gz", _cifar_tarball(batches))
  monkeypatch.setattr(datasets, "CIFAR_URL", archive.as_uri())
  X_train, Y_train, X_test, Y_test = datasets.cifar()
  assert X_train.shape == (10, 3, 32, 32) and Y_train.shape == (10,) and X_test.shape == (3, 3, 32, 32) and Y_test.shape == (3,)
  assert X_train.dtype == Y_train.dtype == X_test.dtype == Y_test.dtype == dtypes.uint8
  train = np.concatenate([batches[name] for name in names[:5]])  # the five training batches in order
  np.testing.assert_array_equal(X_train.numpy(), train[:, 1:].reshape(-1, 3, 32, 32))
  np.testing.assert_array_equal(Y_train.numpy(), train[:, 0])
  np.testing.assert_array_equal(X_test.numpy(), batches["test_batch.bin"][:, 1:].reshape(-1, 3, 32, 32))
  np.testing.assert_array_equal(Y_test.numpy(), batches["test_batch.bin"][:, 0])
  # an archive without the test batch, or with a truncated batch, says which file and how to recover
  del batches["test_batch.bin"]
  _file(tmp_path, "cifar-10-binary.tar.gz", _cifar_tarball(batches))
  monkeypatch.setenv("DOWNLOAD_CACHE", str(tmp_path / "fresh"))
  with pytest.raises(ValueError, match="has no cifar-10-batches-bin/test_batch.bin.*delete the cached folder"): datasets.cifar()
  batches["data_batch_1.bin"] = batches["data_batch_1.bin"][:, :-1]
  _file(tmp_path, "cifar-10-binary.tar.gz", _cifar_tarball(batches))
  monkeypatch.setenv("DOWNLOAD_CACHE", str(tmp_path / "fresh2"))
  with pytest.raises(ValueError, match="data_batch_1.bin: 6144 bytes is not a whole number of 3073-byte"): datasets.cifar()


def _file(tmp_path, name: str, data: bytes):
  p = tmp_path / name
  p.write_bytes(data)
  return p
