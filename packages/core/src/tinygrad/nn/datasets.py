"""Datasets as tensors, downloaded once into the download cache (tinygrad.download): `mnist` and `cifar`, as tinygrad's.

    from tinygrad.nn.datasets import cifar, mnist
    X_train, Y_train, X_test, Y_test = mnist()   # uint8: (60000, 1, 28, 28), (60000,), (10000, 1, 28, 28), (10000,)
    X_train, Y_train, X_test, Y_test = cifar()   # uint8: (50000, 3, 32, 32), (50000,), (10000, 3, 32, 32), (10000,)
"""
from __future__ import annotations

import pathlib
import struct

from tinygrad.download import fetch
from tinygrad.tensor import Tensor

MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
FASHION_MNIST_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"  # the "binary version" (not the pickled python one)
CIFAR_FOLDER = "cifar-10-batches-bin"  # in the archive: data_batch_1.bin .. data_batch_5.bin, test_batch.bin
_CIFAR_RECORD = 1 + 3 * 32 * 32  # a record: the label byte (0-9), then the red, green and blue 32x32 planes, row by row
_IMAGES, _LABELS = 2051, 2049  # the IDX files' magic numbers (unsigned bytes, 3 dims / 1 dim)


def _idx(url: str, magic: int, device: str | None) -> Tensor:
  """An IDX file (the MNIST format: a big-endian header of magic and dims, then the bytes) as a uint8 tensor of its dims,
  images with a channel axis: (n, 1, rows, cols)."""
  path = fetch(url, gunzip=True)
  data = path.read_bytes()
  ndim = 3 if magic == _IMAGES else 1
  header = 4 + 4 * ndim
  if len(data) < header or struct.unpack(">i", data[:4])[0] != magic:
    raise ValueError(f"{url} (cached at {path}): not an MNIST {'image' if ndim == 3 else 'label'} file (IDX magic {magic}); "
                     "delete the cached file to download it again")
  dims = struct.unpack(f">{ndim}i", data[4:header])
  n = 1
  for d in dims: n *= d
  if min(dims) < 0 or len(data) != header + n:
    raise ValueError(f"{url} (cached at {path}): its header says {dims} ({n} bytes), it holds {len(data) - header}; "
                     "delete the cached file to download it again")
  shape = (dims[0], 1, dims[1], dims[2]) if ndim == 3 else dims
  return Tensor(data[header:], device=device).reshape(shape)


def mnist(device: str | None = None, fashion: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """X_train, Y_train, X_test, Y_test of MNIST (fashion=True: Fashion-MNIST), uint8: images (n, 1, 28, 28), labels (n,)."""
  base = FASHION_MNIST_URL if fashion else MNIST_URL
  return (_idx(base + "train-images-idx3-ubyte.gz", _IMAGES, device), _idx(base + "train-labels-idx1-ubyte.gz", _LABELS, device),
          _idx(base + "t10k-images-idx3-ubyte.gz", _IMAGES, device), _idx(base + "t10k-labels-idx1-ubyte.gz", _LABELS, device))


def _cifar_records(folder: pathlib.Path, files: list[str], device: str | None) -> tuple[Tensor, Tensor]:
  """The images (n, 3, 32, 32) and labels (n,) of CIFAR-10 batch files, uint8, in the order of `files`."""
  data = []
  for name in files:
    path = folder / CIFAR_FOLDER / name
    if not path.is_file():
      raise ValueError(f"{CIFAR_URL} (extracted at {folder}): has no {CIFAR_FOLDER}/{name}, not the CIFAR-10 binary archive; "
                       "delete the cached folder to download it again")
    raw = path.read_bytes()
    if len(raw) % _CIFAR_RECORD:
      raise ValueError(f"{path}: {len(raw)} bytes is not a whole number of {_CIFAR_RECORD}-byte CIFAR-10 records; "
                       f"delete {folder} to download it again")
    data.append(raw)
  raw = b"".join(data)
  labels = raw[::_CIFAR_RECORD]
  images = b"".join(raw[start + 1:start + _CIFAR_RECORD] for start in range(0, len(raw), _CIFAR_RECORD))
  return Tensor(images, device=device).reshape(-1, 3, 32, 32), Tensor(labels, device=device)


def cifar(device: str | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """X_train, Y_train, X_test, Y_test of CIFAR-10, uint8: images (n, 3, 32, 32) as channels (red, green, blue), labels (n,)
  0-9 (airplane, automobile, bird, cat, deer, dog, frog, horse, ship, truck); 50000 for training, 10000 for testing."""
  folder = fetch(CIFAR_URL, extract=True)
  X_train, Y_train = _cifar_records(folder, [f"data_batch_{i}.bin" for i in range(1, 6)], device)
  X_test, Y_test = _cifar_records(folder, ["test_batch.bin"], device)
  return X_train, Y_train, X_test, Y_test


__all__ = ["cifar", "mnist"]
