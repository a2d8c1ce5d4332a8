"""GGUF files: the header, metadata and tensor infos (versions 2 and 3, split files), and the tensors' bytes as
uint8 Tensors. Dequantizing those bytes is `quants.py`'s job.

Layout of a GGUF file (little-endian unless the version reads byte-swapped):
  magic "GGUF" | version u32 | tensor_count u64 | kv_count u64
  kv_count x (key: string, value_type u32, value)
  tensor_count x (name: string, n_dims u32, dims u64 x n_dims (innermost first), ggml_type u32, offset u64)
  padding to `general.alignment` (default 32) | tensor data (each tensor at data_start + offset)
A string is a u64 length and that many UTF-8 bytes; an array is an element type u32, a count u64 and the elements.
"""
from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any

from tinygrad import Tensor
from tinygrad.dtype import DType, to_dtype

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_ARRAY_DEPTH = 32  # arrays of arrays nest this deep at most (real files: 1 or 2); deeper ones are refused, not recursed into
MAX_SPLIT_COUNT = 99999  # split parts are numbered with 5 digits

# metadata value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR_FORMATS = {UINT8: "B", INT8: "b", UINT16: "H", INT16: "h", UINT32: "I", INT32: "i", FLOAT32: "f", BOOL: "?",
                   UINT64: "Q", INT64: "q", FLOAT64: "d"}
VALUE_TYPE_NAMES = {UINT8: "uint8", INT8: "int8", UINT16: "uint16", INT16: "int16", UINT32: "uint32", INT32: "int32", FLOAT32: "float32",
                    BOOL: "bool", STRING: "string", ARRAY: "array", UINT64: "uint64", INT64: "int64", FLOAT64: "float64"}


@dataclass(frozen=True)
class GGMLType:
  """A tensor data type: `block_size` elements are stored in `type_size` bytes."""
  id: int
  name: str
  block_size: int
  type_size: int


GGML_TYPES: dict[int, GGMLType] = {t.id: t for t in [
  GGMLType(0, "F32", 1, 4), GGMLType(1, "F16", 1, 2), GGMLType(2, "Q4_0", 32, 18), GGMLType(3, "Q4_1", 32, 20),
  GGMLType(6, "Q5_0", 32, 22), GGMLType(7, "Q5_1", 32, 24), GGMLType(8, "Q8_0", 32, 34), GGMLType(9, "Q8_1", 32, 40),
  GGMLType(10, "Q2_K", 256, 84), GGMLType(11, "Q3_K", 256, 110), GGMLType(12, "Q4_K", 256, 144), GGMLType(13, "Q5_K", 256, 176),
  GGMLType(14, "Q6_K", 256, 210), GGMLType(15, "Q8_K", 256, 292), GGMLType(16, "IQ2_XXS", 256, 66), GGMLType(17, "IQ2_XS", 256, 74),
  GGMLType(18, "IQ3_XXS", 256, 98), GGMLType(19, "IQ1_S", 256, 50), GGMLType(20, "IQ4_NL", 32, 18), GGMLType(21, "IQ3_S", 256, 110),
  GGMLType(22, "IQ2_S", 256, 82), GGMLType(23, "IQ4_XS", 256, 136), GGMLType(24, "I8", 1, 1), GGMLType(25, "I16", 1, 2),
  GGMLType(26, "I32", 1, 4), GGMLType(27, "I64", 1, 8), GGMLType(28, "F64", 1, 8), GGMLType(29, "IQ1_M", 256, 56),
  GGMLType(30, "BF16", 1, 2), GGMLType(34, "TQ1_0", 256, 54), GGMLType(35, "TQ2_0", 256, 66), GGMLType(39, "MXFP4", 32, 17),
]}
GGML_TYPE_IDS = {t.name: t.id for t in GGML_TYPES.values()}


class GGUFError(ValueError):
  """A file that is not a valid GGUF (or uses something this reader does not support). The message says what, where, and at
  which byte offset."""


@dataclass
class GGUFTensorInfo:
  name: str
  shape: tuple[int, ...]  # outermost first (numpy/Tensor order): GGUF's dims reversed
  ggml_type: GGMLType
  path: str               # the file (of a split set) that holds the data
  offset: int             # absolute byte offset of the data in `path`
  nbytes: int

  @property
  def type_name(self) -> str: return self.ggml_type.name

  @property
  def numel(self) -> int:
    n = 1
    for s in self.shape: n *= s
    return n


@dataclass
class GGUFFile:
  """A parsed GGUF model: metadata and tensor infos (from all parts of a split model). `tensor_bytes(name)` loads one tensor's
  raw bytes as a uint8 Tensor; `tensor_bytes(name, dtype=dtypes.float16)` the same bytes read as that dtype."""
  path: str
  version: int
  metadata: dict[str, Any]
  tensors: dict[str, GGUFTensorInfo]
  alignment: int = DEFAULT_ALIGNMENT
  parts: list[str] = field(default_factory=list)

  def __contains__(self, name: str) -> bool: return name in self.tensors

  def get(self, key: str, default: Any = None) -> Any: return self.metadata.get(key, default)

  def tensor_bytes(self, name: str, device: str | None = None, realize: bool = True, dtype: DType | str = "uint8") -> Tensor:
    info = self.tensors[name]
    return load_bytes(info.path, info.offset, info.nbytes, device, realize, dtype)


def load_bytes(path: str, offset: int, nbytes: int, device: str | None = None, realize: bool = True, dtype: DType | str = "uint8") -> Tensor:
  """`nbytes` bytes of a file from `offset` as a 1-D uint8 Tensor on `device`. The one place that reads tensor data from files.
  Another `dtype` reads the same bytes as that dtype (little-endian, as GGUF and every device we run on), reinterpreted on the
  DISK side: the copy brings them as they are, no conversion kernel (an F16 weight arrives as float16).
  A copy from the DISK device: straight from the file's mapping into the device buffer (no bytes object in between, so no
  transient second copy and no growth of the malloc heap), and the mapping closes when the DISK view is dropped, so the
  file's pages don't stay in this process's resident memory next to the copy. realize=False: the copy is lazy (realize it, with
  others, to load several tensors in one schedule)."""
  from tinygrad import Device
  from tinygrad.frontend.disk import disk_view
  from tinygrad.nn.state import disk_file
  size = os.stat(path).st_size
  if offset + nbytes > size: raise GGUFError(f"{path}: tensor data at offset {offset} (+{nbytes} bytes) runs past the end of the file ({size} bytes)")
  dt = to_dtype(dtype)
  if nbytes % dt.itemsize: raise GGUFError(f"{path}: {nbytes} bytes at offset {offset} are not a whole number of {dt!r} items")
  if nbytes == 0: return Tensor.empty(0, dtype=dt, device=device)
  out = disk_view(disk_file(path), offset, dt, (nbytes // dt.itemsize,)).to(device or Device.DEFAULT)
  return out.realize() if realize else out


class _Reader:
  """Reads GGUF values from an open file; every error names the file, what was being read and the offset. The bytes are
  read with pread into a buffer that grows (doubling) as far as the header goes, not memory-mapped: a file truncated
  while it is parsed reads short, an error, instead of killing the process with SIGBUS."""

  def __init__(self, fd: int, size: int, path: str, endian: str = "<"):
    self.fd, self.size, self.path, self.endian, self.pos = fd, size, path, endian, 0
    self.buf = b""

  def ensure(self, end: int) -> None:
    """Bytes [0, end) are in the buffer (end <= size, checked by the caller)."""
    if end <= len(self.buf): return
    want, parts = min(self.size, max(end, 2 * len(self.buf), 1 << 16)), [self.buf]
    have = len(self.buf)
    while have < want:
      chunk = os.pread(self.fd, want - have, have)
      if not chunk: break
      parts.append(chunk)
      have += len(chunk)
    self.buf = b"".join(parts)
    if len(self.buf) < end: raise self.fail(f"file is truncated: it shrank to {len(self.buf)} bytes while being read")

  def fail(self, what: str, at: int | None = None) -> GGUFError:
    return GGUFError(f"{self.path}: {what} (at byte offset {self.pos if at is None else at})")

  def need(self, n: int, what: str) -> None:
    if n < 0 or self.pos + n > self.size:
      raise self.fail(f"file is truncated or corrupt: reading {what} needs {n} bytes, only {self.size - self.pos} are left")
    if self.pos + n > len(self.buf): self.ensure(self.pos + n)  # (inline test: this runs for every scalar of the header)

  def scalar(self, fmt: str, what: str) -> Any:
    n = struct.calcsize(fmt)
    self.need(n, what)
    v = struct.unpack_from(self.endian + fmt, self.buf, self.pos)[0]
    self.pos += n
    return v

  def u32(self, what: str) -> int: return self.scalar("I", what)
  def u64(self, what: str) -> int: return self.scalar("Q", what)

  def string(self, what: str) -> str:
    start = self.pos
    n = self.u64(f"the length of {what}")
    if n > self.size - self.pos: raise self.fail(f"file is truncated or corrupt: {what} claims {n} bytes, only {self.size - self.pos} are left", start)
    if self.pos + n > len(self.buf): self.ensure(self.pos + n)
    raw = self.buf[self.pos:self.pos + n]
    self.pos += n
    try: return raw.decode("utf-8")
    except UnicodeDecodeError as e: raise self.fail(f"{what} is not valid UTF-8 ({e.reason} at byte {e.start})", start) from None

  def value(self, vtype: int, what: str, depth: int = 0) -> Any:
    if vtype in _SCALAR_FORMATS: return self.scalar(_SCALAR_FORMATS[vtype], what)
    if vtype == STRING: return self.string(what)
    if vtype == ARRAY:
      start = self.pos
      if depth >= MAX_ARRAY_DEPTH: raise self.fail(f"{what[:200]}: arrays nested more than {MAX_ARRAY_DEPTH} deep", start)
      etype = self.u32(f"the element type of {what}")
      count = self.u64(f"the length of {what}")
      if etype not in VALUE_TYPE_NAMES: raise self.fail(f"{what}: unknown array element type {etype}", start)
      if etype in _SCALAR_FORMATS:
        fmt = _SCALAR_FORMATS[etype]
        n = struct.calcsize(fmt)
        if count > (self.size - self.pos) // n: raise self.fail(f"file is truncated or corrupt: {what} claims {count} elements", start)
        self.ensure(self.pos + count * n)
        out = list(struct.unpack_from(f"{self.endian}{count}{fmt}", self.buf, self.pos))
        self.pos += count * n
        return out
      # a string is at least its 8-byte length, an array its 12-byte header
      if count > (self.size - self.pos) // (8 if etype == STRING else 12):
        raise self.fail(f"file is truncated or corrupt: {what} claims {count} elements", start)
      if etype == STRING: return self._strings(count, what)
      return [self.value(etype, f"{what}[{i}]"[:300], depth + 1) for i in range(count)]
    raise self.fail(f"{what}: unknown value type {vtype}", self.pos - 4)

  def _strings(self, count: int, what: str) -> list[str]:
    """`count` strings in a row (a vocabulary: ~50-150k of them). One tight loop: error messages are built only on failure
    (formatting one per string was most of a model's load time)."""
    out: list[str] = []
    append, length = out.append, struct.Struct(self.endian + "Q").unpack_from
    buf, pos, size = self.buf, self.pos, self.size
    for i in range(count):
      if pos + 8 > len(buf):
        self.pos = pos
        self.need(8, f"the length of {what}[{i}]")
        buf = self.buf
      (n,) = length(buf, pos)
      pos += 8
      if n > size - pos:
        self.pos = pos
        raise self.fail(f"file is truncated or corrupt: {what}[{i}] claims {n} bytes", pos - 8)
      if pos + n > len(buf):
        self.ensure(pos + n)
        buf = self.buf
      raw = buf[pos:pos + n]
      pos += n
      try: append(raw.decode("utf-8"))
      except UnicodeDecodeError: append(raw.decode("utf-8", errors="replace"))  # a vocabulary can hold partial bytes
    self.pos = pos
    return out


def _parse_one(path: str) -> tuple[int, dict[str, Any], list[tuple[str, tuple[int, ...], GGMLType, int, int]], int]:
  """(version, metadata, [(name, shape, type, absolute offset, nbytes)], alignment) of one GGUF file."""
  try: f = open(path, "rb")
  except FileNotFoundError: raise FileNotFoundError(f"GGUF file not found: {path}") from None
  with f:
    size = os.fstat(f.fileno()).st_size
    if size < 4 + 4 + 8 + 8: raise GGUFError(f"{path}: not a GGUF file: only {size} bytes, smaller than a GGUF header")
    r = _Reader(f.fileno(), size, path)
    r.ensure(24)
    magic = r.buf[:4]
    if magic != GGUF_MAGIC: raise GGUFError(f"{path}: not a GGUF file: magic is {magic!r}, expected {GGUF_MAGIC!r} (at byte offset 0)")
    version = struct.unpack_from("<I", r.buf, 4)[0]
    endian = "<"
    if version not in (1, 2, 3) and struct.unpack_from(">I", r.buf, 4)[0] in (1, 2, 3): version, endian = struct.unpack_from(">I", r.buf, 4)[0], ">"
    if version == 1: raise GGUFError(f"{path}: GGUF version 1 is not supported (only 2 and 3); convert the file again with a current llama.cpp")
    if version not in (2, 3): raise GGUFError(f"{path}: unsupported GGUF version {version} (this reader knows 2 and 3) (at byte offset 4)")
    r.endian = endian
    r.pos = 8
    n_tensors = r.u64("the tensor count")
    n_kv = r.u64("the metadata count")
    # each count is bounded by what the rest of the file could hold: a tensor info is at least 24 bytes, a metadata entry 13
    if n_tensors > (size - r.pos) // 24: raise r.fail(f"corrupt header: {n_tensors} tensors can't fit in a {size}-byte file", 8)
    if n_kv > (size - r.pos) // 13: raise r.fail(f"corrupt header: {n_kv} metadata entries can't fit in a {size}-byte file", 16)
    metadata: dict[str, Any] = {}
    for i in range(n_kv):
      key = r.string(f"the key of metadata entry {i}")
      vtype = r.u32(f"the type of metadata {key!r}")
      if vtype not in VALUE_TYPE_NAMES: raise r.fail(f"metadata {key!r} has unknown value type {vtype}", r.pos - 4)
      metadata[key] = r.value(vtype, f"metadata {key!r}")
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
      raise GGUFError(f"{path}: general.alignment must be a power of two, got {str(alignment)[:60]}")
    infos = []
    for i in range(n_tensors):
      start = r.pos
      name = r.string(f"the name of tensor {i}")
      n_dims = r.u32(f"the dimension count of tensor {name!r}")
      if n_dims > 8: raise r.fail(f"tensor {name!r} claims {n_dims} dimensions (GGUF allows at most 4)", start)
      dims = [r.u64(f"dimension {d} of tensor {name!r}") for d in range(n_dims)]
      type_id = r.u32(f"the type of tensor {name!r}")
      if type_id not in GGML_TYPES: raise r.fail(f"tensor {name!r} has unknown ggml type {type_id}", r.pos - 4)
      ggml_type = GGML_TYPES[type_id]
      offset = r.u64(f"the data offset of tensor {name!r}")
      numel = 1
      for d in dims: numel *= d
      if dims and dims[0] % ggml_type.block_size:
        raise GGUFError(f"{path}: tensor {name!r} ({ggml_type.name}) has a row of {dims[0]} elements, not a multiple of its block size {ggml_type.block_size}")
      nbytes = numel // ggml_type.block_size * ggml_type.type_size
      infos.append((name, tuple(reversed(dims)), ggml_type, offset, nbytes, start))
    data_start = -(-r.pos // alignment) * alignment
    out = []
    for name, shape, ggml_type, offset, nbytes, at in infos:
      if offset % alignment: raise GGUFError(f"{path}: tensor {name!r} data offset {offset} is not a multiple of the alignment {alignment} (info at byte offset {at})")
      if data_start + offset + nbytes > size:
        raise GGUFError(f"{path}: file is truncated: tensor {name!r} needs bytes {data_start + offset}..{data_start + offset + nbytes} "
                        f"but the file has {size} (info at byte offset {at})")
      out.append((name, shape, ggml_type, data_start + offset, nbytes))
    if endian == ">" and out:
      raise GGUFError(f"{path}: big-endian GGUF tensor data is not supported (the metadata was read; convert the file to little-endian)")
    return version, metadata, out, alignment


_SPLIT_RE = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def split_paths(path: str, count: int) -> list[str]:
  """The paths of all parts of a split model, given any part (`name-00001-of-00003.gguf`)."""
  m = _SPLIT_RE.match(path)
  if m is None or int(m["count"]) != count:
    raise GGUFError(f"{path}: metadata says the model is split into {count} files, but the name doesn't follow NAME-00001-of-{count:05d}.gguf")
  return [f"{m['prefix']}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


def read_gguf(path: str | os.PathLike) -> GGUFFile:
  """Parse a GGUF file (and, for a split model, all of its parts). Tensors aren't loaded: use `tensor_bytes`."""
  path = os.fspath(path)
  version, metadata, infos, alignment = _parse_one(path)
  count = metadata.get("split.count", 1)
  parts = [path]
  all_infos = [(path, i) for i in infos]
  if "split.count" in metadata and (not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_SPLIT_COUNT):
    raise GGUFError(f"{path}: metadata split.count is {str(count)[:50]}, expected a number of parts from 1 to {MAX_SPLIT_COUNT}")
  if count > 1:
    parts = split_paths(path, count)
    for p in parts:
      if p == path: continue
      if not os.path.exists(p): raise FileNotFoundError(f"part {p} of the split model {path} is missing")
      _, meta_p, infos_p, _ = _parse_one(p)
      all_infos += [(p, i) for i in infos_p]
      for k, v in meta_p.items():  # the first part holds the model's metadata; later parts only split.* keys
        if not k.startswith("split."): metadata.setdefault(k, v)
    metadata["split.no"] = 0
  tensors: dict[str, GGUFTensorInfo] = {}
  for p, (name, shape, ggml_type, offset, nbytes) in all_infos:
    if name in tensors: raise GGUFError(f"{p}: tensor {name!r} appears twice")
    tensors[name] = GGUFTensorInfo(name, shape, ggml_type, p, offset, nbytes)
  return GGUFFile(path, version, metadata, tensors, alignment, parts)


# ---- tinygrad 0.14's API (tinygrad.llm.gguf.gguf_load / ggml_data_to_tensor), for programs written against it

# kept in their own dtype, as tinygrad 0.14 keeps them (BF16 too: the model loader widens it, this API doesn't)
_KEPT_DTYPES = {"I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64", "F64": "float64", "BF16": "bfloat16"}


def ggml_data_to_tensor(t: Tensor, n: int, ggml_type: int) -> Tensor:
  """The first `n` values of GGML-type `ggml_type` data held in `t` (uint8 bytes) as a 1-D tensor (lazy): F32/F16 and the
  integer types and BF16 keep their dtype, block formats dequantize to float32 (the types quants.py knows; others raise ValueError)."""
  from tinygrad.llm import quants
  if ggml_type not in GGML_TYPES: raise ValueError(f"unknown ggml type {ggml_type}")
  name = GGML_TYPES[ggml_type].name
  raw = t.flatten().bitcast("uint8") if t.dtype.itemsize != 1 or t.dtype.name != "uint8" else t.flatten()
  if name in quants.NATIVE_DTYPES or name in _KEPT_DTYPES:
    dt = quants.NATIVE_DTYPES[name] if name in quants.NATIVE_DTYPES else to_dtype(_KEPT_DTYPES[name])
    return raw[:n * dt.itemsize].bitcast(dt)
  if name not in quants.DEQUANTIZERS:
    raise ValueError(f"ggml type {name} ({ggml_type}) is not supported (supported: {', '.join(quants.DEQUANTIZERS)})")
  block_size, type_size = quants.BLOCK_SIZES[name]
  blocks = -(-n // block_size)
  return quants.dequantize(raw[:blocks * type_size], name, (blocks * block_size,))[:n]


def gguf_load(fn: Tensor | str | os.PathLike) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """(metadata, {name: tensor}) of a GGUF file, as tinygrad's gguf_load: a path (a split model's other parts are found next
  to it) or the file's bytes as a uint8 Tensor. The tensors are lazy and dequantized (ggml_data_to_tensor) to their shapes."""
  if isinstance(fn, Tensor):  # the header is parsed from the bytes on the host (once); the tensors are views of fn
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
      f.write(bytes(fn.flatten().bitcast("uint8").data() if fn.dtype.itemsize != 1 else fn.flatten().data()))
      f.flush()
      g = read_gguf(f.name)
    src = {g.path: fn.flatten()}
  else: g, src = read_gguf(fn), {}
  out: dict[str, Tensor] = {}
  for name, info in g.tensors.items():
    raw = src[info.path][info.offset:info.offset + info.nbytes] if info.path in src else g.tensor_bytes(name, realize=False)
    out[name] = ggml_data_to_tensor(raw, info.numel, info.ggml_type.id).reshape(info.shape)
  return g.metadata, out
