"""A GGUF writer with no checks, for hostile and damaged test files: any metadata value (huge counts, NaN, wrong types,
deep nesting) and any tensor info. `model_parts` takes a valid file apart into what `write_gguf` writes back."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from tinygrad.llm.gguf import _SCALAR_FORMATS, ARRAY, BOOL, FLOAT64, INT64, STRING, read_gguf


@dataclass
class Typed:
  """A metadata value with an explicit GGUF value type (plain Python values get INT64, FLOAT64, BOOL, STRING or ARRAY)."""
  vtype: int
  value: Any
  etype: int | None = None  # for an ARRAY: the element type (default: inferred from the first element)


def _vtype(v: Any) -> int:
  if isinstance(v, Typed): return v.vtype
  if isinstance(v, bool): return BOOL
  if isinstance(v, int): return INT64
  if isinstance(v, float): return FLOAT64
  if isinstance(v, str): return STRING
  if isinstance(v, list): return ARRAY
  raise TypeError(f"no GGUF type for {type(v).__name__}")


def _string(s: str | bytes) -> bytes:
  raw = s.encode() if isinstance(s, str) else s
  return struct.pack("<Q", len(raw)) + raw


def _value(v: Any, vtype: int) -> bytes:
  etype = v.etype if isinstance(v, Typed) else None
  v = v.value if isinstance(v, Typed) else v
  if vtype == STRING: return _string(v)
  if vtype == ARRAY:
    et = etype if etype is not None else (_vtype(v[0]) if v else INT64)
    return struct.pack("<IQ", et, len(v)) + b"".join(_value(x, et) for x in v)
  return struct.pack("<" + _SCALAR_FORMATS[vtype], v)


def kv_bytes(key: str | bytes, v: Any) -> bytes:
  t = _vtype(v)
  return _string(key) + struct.pack("<I", t) + _value(v, t)


def write_gguf(path: Any, metadata: dict[str, Any], tensors: list[tuple[str, tuple[int, ...], int, bytes]], alignment: int = 32,
               version: int = 3) -> None:
  """tensors: (name, shape outermost first, ggml type id, raw bytes), laid out in order, each aligned."""
  out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata)) + b"".join(kv_bytes(k, v) for k, v in metadata.items())
  offset, blobs = 0, b""
  for name, shape, type_id, raw in tensors:
    out += _string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in reversed(shape))
    out += struct.pack("<IQ", type_id, offset)
    pad = -len(raw) % alignment
    blobs += raw + b"\0" * pad
    offset += len(raw) + pad
  if tensors: out += b"\0" * (-len(out) % alignment)  # no padding after the header of a file without tensors
  with open(path, "wb") as f: f.write(out + blobs)


def model_parts(path: Any) -> tuple[dict[str, Any], list[tuple[str, tuple[int, ...], int, bytes]]]:
  """The metadata (values typed as the file has them where that matters: ints stay ints) and tensors of a GGUF file."""
  g = read_gguf(path)
  meta = {k: v for k, v in g.metadata.items() if k != "general.alignment"}
  tensors = []
  with open(path, "rb") as f:
    for name, info in g.tensors.items():
      f.seek(info.offset)
      tensors.append((name, info.shape, info.ggml_type.id, f.read(info.nbytes)))
  return meta, tensors
