"""tinygrad 0.14's GGUF API (tinygrad.llm.gguf.gguf_load and ggml_data_to_tensor), which programs written against tinygrad
call; found missing by running tinygrad's own test/unit/test_gguf.py against this package."""
import struct

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.llm.gguf import ggml_data_to_tensor, gguf_load

gguf = pytest.importorskip("gguf")
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, dequantize, quantize  # noqa: E402


def gguf_file(tensors: list[tuple[str, tuple[int, ...], int, bytes]], kvs: list[tuple[str, int]]) -> bytes:
  """A version-3 GGUF: uint32 metadata, then each tensor (name, shape, ggml type, data) at 32-byte aligned offsets."""
  out = bytearray(struct.pack("<4sIQQ", b"GGUF", 3, len(tensors), len(kvs)))
  for k, v in kvs: out += struct.pack("<Q", len(k)) + k.encode() + struct.pack("<II", 4, v)
  at = 0
  for name, shape, qtype, data in tensors:
    out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in reversed(shape))
    out += struct.pack("<IQ", qtype, at)
    at += -(-len(data) // 32) * 32
  out += b"\0" * (-len(out) % 32)
  for *_, data in tensors: out += data + b"\0" * (-len(data) % 32)
  return bytes(out)


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"])
def test_ggml_data_to_tensor_matches_gguf_py(qtype):
  q = GGMLQuantizationType[qtype]
  block_size, type_size = GGML_QUANT_SIZES[q]
  rng = np.random.default_rng(0)
  try: data = quantize(rng.random(4 * block_size, dtype=np.float32) * 100 - 50, q)
  except NotImplementedError: data = rng.integers(0, 256, size=4 * type_size, dtype=np.uint8)  # gguf-py quantizes no K types
  np.testing.assert_equal(ggml_data_to_tensor(Tensor(data), 4 * block_size, q.value).numpy(), dequantize(data, q))


def test_ggml_data_to_tensor_native_and_unknown_types():
  x = np.arange(6, dtype=np.float32)
  out = ggml_data_to_tensor(Tensor(x.view(np.uint8)), 5, 0)
  assert out.dtype == dtypes.float32 and out.tolist() == [0, 1, 2, 3, 4]
  with pytest.raises(ValueError): ggml_data_to_tensor(Tensor.empty(512, dtype=dtypes.uint8), 256, 1337)
  # BF16 stays bfloat16, as tinygrad 0.14 keeps it (bench/programs/statefiles.py): the top halves of float32 bits
  bits = (np.array([1.5, -2.25, 3e38], np.float32).view(np.uint32) >> 16).astype(np.uint16)
  out = ggml_data_to_tensor(Tensor(bits.view(np.uint8)), 3, 30)
  assert out.dtype == dtypes.bfloat16 and out.float().tolist() == (bits.astype(np.uint32) << 16).view(np.float32).tolist()


def test_gguf_load_path_tensor_and_split_parts(tmp_path):
  a, b = np.arange(4, dtype=np.float32), np.array([5, 6], dtype=np.float16)
  q = quantize(np.linspace(-1, 1, 64, dtype=np.float32), GGMLQuantizationType.Q8_0)
  whole = gguf_file([("a", (4,), 0, a.tobytes()), ("q", (2, 32), 8, q.tobytes())], [("general.alignment", 32)])
  (p := tmp_path / "m.gguf").write_bytes(whole)
  for src in (p, str(p), Tensor(np.frombuffer(whole, np.uint8))):
    kv, ts = gguf_load(src)
    assert kv["general.alignment"] == 32 and set(ts) == {"a", "q"}
    np.testing.assert_equal(ts["a"].numpy(), a)
    assert ts["q"].shape == (2, 32)
    np.testing.assert_equal(ts["q"].numpy(), dequantize(q, GGMLQuantizationType.Q8_0).reshape(2, 32))
  (tmp_path / "s-00001-of-00002.gguf").write_bytes(gguf_file([("a", (4,), 0, a.tobytes())], [("split.count", 2), ("split.no", 0)]))
  (tmp_path / "s-00002-of-00002.gguf").write_bytes(gguf_file([("b", (2,), 1, b.tobytes())], [("split.count", 2), ("split.no", 1)]))
  kv, ts = gguf_load(tmp_path / "s-00001-of-00002.gguf")
  assert kv["split.count"] == 2 and ts["b"].dtype == dtypes.float16
  np.testing.assert_equal(ts["b"].numpy(), b)
  (tmp_path / "s-00002-of-00002.gguf").unlink()
  with pytest.raises(FileNotFoundError): gguf_load(tmp_path / "s-00001-of-00002.gguf")
