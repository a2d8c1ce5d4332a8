"""Datasets as tensors, downloaded once into the download cache (tinygrad.download): `mnist`, as tinygrad's.

    from tinygrad.nn.datasets import mnist
    X_train, Y_train, X_test, Y_test = mnist()   # uint8: (60000, 1, 28, 28), (60000,), (10000, 1, 28, 28), (10000,)
"""
from __future__ import annotations

import struct

from tinygrad.download import fetch
from tinygrad.tensor import Tensor

MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
FASHION_MNIST_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
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


__all__ = ["mnist"]
