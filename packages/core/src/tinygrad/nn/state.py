"""Saving and loading weights: safetensors, torch checkpoints, and the state dict of a model object.

Loading is lazy: `safe_load` and `torch_load` return tensors that are views of the file on the DISK device (read
with pread), so nothing is read until a tensor is used, and then only its bytes (`load_state_dict` moves each to the
model's device). `torch_load` reads the pickle through a restricted unpickler that knows only what torch tensors
need and never runs code from the file.
"""
from __future__ import annotations

import _compat_pickle
import io
import json
import os
import pickle
import reprlib
import struct
import sys
import tempfile
import time
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, ClassVar

from tinygrad.device.registry import Device
from tinygrad.device.runtime import Views
from tinygrad.dtype import DType, dtypes
from tinygrad.frontend.disk import disk_view
from tinygrad.helpers import DEBUG, GlobalCounters, prod, round_up
from tinygrad.schedule.kernelize import is_contiguous_buffer
from tinygrad.tensor import Tensor

__all__ = ["disk_file", "TensorIO", "accept_filename", "zip_extract", "tar_extract", "SafetensorsError", "TorchLoadError", "safe_load", "safe_save", "safe_load_metadata", "get_state_dict", "get_parameters", "load_state_dict", "torch_load"]

FileLike = Tensor | str | os.PathLike


def disk_file(path: str | os.PathLike) -> Tensor:
  """The whole file as a uint8 DISK tensor; nothing is read until a part of it is used (frontend/disk.py has the views)."""
  path = os.path.abspath(os.fspath(path))
  return Tensor.empty(os.stat(path).st_size, dtype=dtypes.uint8, device=f"DISK:{path}")

# ---- where a file's bytes come from


class _Source:
  """A file given as a path or a uint8 tensor. `read` returns bytes (headers, pickles); `tensor` returns a lazy view
  when the bytes live on a device that makes views (DISK), else a tensor made from the bytes on the source's device."""

  def __init__(self, fn: FileLike):
    t = fn if isinstance(fn, Tensor) else disk_file(fn)
    if t.dtype != dtypes.uint8 or t.ndim != 1: raise ValueError(f"expected a file path or a 1-D uint8 tensor of a file's bytes, got {t}")
    self.t, self.size = t, t.shape[0]
    self._bytes: bytes | None = None
    if not (is_contiguous_buffer(t.uop) and isinstance(Device[t.device].allocator, Views)): self._bytes = bytes(t.data())

  def read(self, offset: int, n: int) -> bytes:
    n = max(0, min(n, self.size - offset))
    if self._bytes is not None: return self._bytes[offset:offset + n]
    return bytes(disk_view(self.t, offset, dtypes.uint8, (n,)).data()) if n else b""

  def tensor(self, offset: int, dtype: DType, shape: tuple[int, ...]) -> Tensor:
    if self._bytes is None: return disk_view(self.t, offset, dtype, shape)
    raw = self._bytes[offset:offset + prod(shape) * dtype.itemsize]
    return Tensor(raw, dtype=dtype, device=self.t.device).reshape(shape)

  def reader(self) -> io.BufferedReader:
    """A seekable binary file object over the bytes (for zipfile and pickle)."""
    return _BoundedReader(_RawReader(self), buffer_size=1 << 16)


class _BoundedReader(io.BufferedReader):
  """A read of n bytes allocates at most what is left of the file, and a line is at most 1 MiB: a pickle's length
  fields (BINUNICODE8 of 2^60 bytes) and text opcodes come from the file."""

  def read(self, n: int | None = -1) -> bytes:
    if n is not None and n > 0: n = min(n, max(0, self.raw.src.size - self.tell()))  # type: ignore[attr-defined]
    return super().read(n)

  def readline(self, size: int | None = -1) -> bytes:
    return super().readline(1 << 20 if size is None or size < 0 else min(size, 1 << 20))


class _RawReader(io.RawIOBase):
  def __init__(self, src: _Source):
    super().__init__()
    self.src, self.pos = src, 0

  def readable(self) -> bool: return True
  def seekable(self) -> bool: return True
  def tell(self) -> int: return self.pos

  def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
    # clamped to the file, as tinygrad's TensorIO (a read-only file: nothing lies past its end to seek to)
    self.pos = min(max(0, {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.src.size}[whence] + offset), self.src.size)
    return self.pos

  def readinto(self, buffer: Any) -> int:
    data = self.src.read(self.pos, len(buffer))
    memoryview(buffer).cast("B")[:len(data)] = data
    self.pos += len(data)
    return len(data)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 60


def _short(x: Any) -> str:
  """repr of something read from a file, bounded in length and time (a shared, deeply nested value's full repr is exponential)."""
  return _REPR.repr(x)


def _name(fn: FileLike) -> str: return str(fn) if not isinstance(fn, Tensor) else f"the tensor {fn}"


def _stored_entry_offset(src: _Source, info: zipfile.ZipInfo, name: str, error: type[Exception]) -> int:
  """Where an uncompressed zip entry's bytes start in the file (after its local header, whose lengths may differ from
  the central directory's)."""
  local = src.read(info.header_offset, 30)
  if local[:4] != b"PK\x03\x04": raise error(f"{name}: bad zip local header for {info.filename}")
  name_len, extra_len = struct.unpack("<HH", local[26:30])
  at = info.header_offset + 30 + name_len + extra_len
  if at + info.file_size > src.size: raise error(f"{name} is truncated: zip entry {info.filename} ends past the end of the file")
  return at


# ---- safetensors

SAFE_DTYPES: dict[str, DType] = {
  "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
  "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8,
  "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8, "BOOL": dtypes.bool,
  "F8_E4M3": dtypes.fp8e4m3, "F8_E5M2": dtypes.fp8e5m2}
INVERSE_SAFE_DTYPES: dict[DType, str] = {v: k for k, v in SAFE_DTYPES.items()}


MAX_SAFE_HEADER = 100_000_000


class SafetensorsError(ValueError):
  """A file that is not a valid safetensors file; the message starts with the file's name."""


def _safe_header(src: _Source, name: str) -> tuple[int, dict[str, Any]]:
  if src.size < 8: raise SafetensorsError(f"{name}: not a safetensors file: {src.size} bytes, less than the 8-byte header length")
  n = int.from_bytes(src.read(0, 8), "little")
  if n > MAX_SAFE_HEADER:  # as the reference implementation: a header is parsed whole, so its size is bounded
    raise SafetensorsError(f"{name}: the safetensors header claims {n} bytes, more than the format's limit of {MAX_SAFE_HEADER}")
  if n > src.size - 8:
    raise SafetensorsError(f"{name}: not a safetensors file (or truncated): its header claims {n} bytes, but only {src.size - 8} follow")
  try: header = json.loads(src.read(8, n))
  except RecursionError: raise SafetensorsError(f"{name}: the safetensors header nests too deeply to parse") from None
  # ValueError: JSONDecodeError, and integers longer than Python converts
  except (UnicodeDecodeError, ValueError) as e: raise SafetensorsError(f"{name}: the safetensors header is not valid JSON: {str(e)[:200]}") from None
  if not isinstance(header, dict): raise SafetensorsError(f"{name}: the safetensors header is a JSON {type(header).__name__}, expected an object")
  return 8 + n, header


def safe_load_metadata(fn: FileLike) -> tuple[Tensor, int, dict[str, Any]]:
  """(the file as a uint8 tensor, the byte offset where the data starts, the JSON header) of a safetensors file.
  The header holds every tensor's entry and, under "__metadata__", the user metadata."""
  src = _Source(fn)
  data_start, header = _safe_header(src, _name(fn))
  return src.t, data_start, header


def safe_load(fn: FileLike) -> dict[str, Tensor]:
  """The tensors of a safetensors file, by name. Lazy: each is a view of the file on DISK (nothing is read until it is
  used, then only its bytes); `.to(device)` or `load_state_dict` moves it to a compute device."""
  src, name = _Source(fn), _name(fn)
  data_start, header = _safe_header(src, name)
  data_len = src.size - data_start
  out: dict[str, Tensor] = {}
  for k, v in header.items():
    if k == "__metadata__": continue
    if not isinstance(v, dict) or not {"dtype", "shape", "data_offsets"} <= v.keys():
      raise SafetensorsError(f"{name}: tensor {k!r:.100} has a malformed entry {_short(v)}, expected dtype, shape and data_offsets")
    if not isinstance(v["dtype"], str) or v["dtype"] not in SAFE_DTYPES:
      raise SafetensorsError(f"{name}: tensor {k!r:.100} has dtype {_short(v['dtype'])}, which tinygrad can't load (known: {', '.join(SAFE_DTYPES)})")
    dt, shape, offs = SAFE_DTYPES[v["dtype"]], v["shape"], v["data_offsets"]
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
      raise SafetensorsError(f"{name}: tensor {k!r:.100} has a bad shape {_short(shape)}")
    if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs) and 0 <= offs[0] <= offs[1] <= data_len):
      raise SafetensorsError(f"{name}: tensor {k!r:.100} has data_offsets {_short(offs)} outside the {data_len} data bytes of the file")
    if offs[1] - offs[0] != prod(shape) * dt.itemsize:
      raise SafetensorsError(f"{name}: tensor {k!r:.100} is {_short(shape)} x {v['dtype']} = {prod(shape) * dt.itemsize} bytes, "
                             f"but its data_offsets span {offs[1] - offs[0]}")
    out[k] = src.tensor(data_start + offs[0], dt, tuple(shape))
  return out


def _tensor_bytes(t: Tensor) -> memoryview:
  return t.data().cast("B") if t.numel() else memoryview(b"")


def safe_save(tensors: dict[str, Tensor], fn: str | os.PathLike, metadata: dict[str, Any] | None = None) -> None:
  """Write `tensors` as a safetensors file (realizing them one at a time). `metadata` goes under "__metadata__"
  (the format wants str -> str). The file is written next to `fn` and renamed over it, so tensors still loaded
  from an older `fn` keep reading the old bytes."""
  header: dict[str, Any] = {}
  if metadata: header["__metadata__"] = metadata
  offset = 0
  for k, v in tensors.items():
    if k == "__metadata__": raise ValueError("'__metadata__' is reserved in safetensors; pass metadata= instead")
    if not isinstance(v, Tensor): raise TypeError(f"safe_save: {k!r} is a {type(v).__name__}, expected a Tensor")
    if v.dtype not in INVERSE_SAFE_DTYPES: raise ValueError(f"safe_save: {k!r} has dtype {v.dtype!r}, which safetensors can't store")
    header[k] = {"dtype": INVERSE_SAFE_DTYPES[v.dtype], "shape": list(v.shape), "data_offsets": [offset, offset + v.nbytes()]}
    offset += v.nbytes()
  j = json.dumps(header, separators=(",", ":")).encode()
  j += b" " * (round_up(len(j), 8) - len(j))  # the data starts 8-byte aligned
  path = os.fspath(fn)
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".safe_save.")
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(len(j).to_bytes(8, "little"))
      f.write(j)
      for v in tensors.values(): f.write(_tensor_bytes(v))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp): os.unlink(tmp)
    raise


# ---- state dicts of model objects


def get_state_dict(obj: Any, prefix: str = "", tensor_type: type[Tensor] = Tensor) -> dict[str, Tensor]:
  """Every tensor reachable from `obj` through attributes, dicts, lists, tuples and namedtuples, by dotted path
  (`{"l1.weight": ..., "layers.0.bias": ...}`). Objects already visited on the way down are skipped (cycles)."""
  out: dict[str, Tensor] = {}
  _walk(obj, prefix, tensor_type, out, set())
  return out


def _walk(obj: Any, prefix: str, tensor_type: type[Tensor], out: dict[str, Tensor], seen: set[int]) -> None:
  if isinstance(obj, tensor_type):
    out[prefix.strip(".")] = obj
    return
  if isinstance(obj, (str, bytes, int, float, bool, type(None))) or id(obj) in seen: return
  seen.add(id(obj))
  try:
    if hasattr(obj, "_asdict"): items: Any = obj._asdict().items()  # namedtuple
    elif isinstance(obj, dict): items = obj.items()
    elif isinstance(obj, (list, tuple)): items = enumerate(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type): items = vars(obj).items()
    else: return
    for k, v in items: _walk(v, f"{prefix}{k}.", tensor_type, out, seen)
  finally:
    seen.discard(id(obj))


def get_parameters(obj: Any) -> list[Tensor]:
  """The tensors of `get_state_dict(obj)`, each once (a tensor shared by two layers is listed once)."""
  return list({id(t): t for t in get_state_dict(obj).values()}.values())


def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = True, consume: bool = False,
                    realize: bool = True) -> list[Tensor]:
  """Put the tensors of `state_dict` into `model`'s tensors of the same name (`replace`: moved to the model tensor's
  device, keeping the state dict's dtype), then realize them. Shapes must match. With strict=False, model tensors
  missing from the state dict are left as they are; consume=True deletes each entry from `state_dict` once used."""
  start, mem_start = time.perf_counter(), GlobalCounters.mem_used
  model_state = get_state_dict(model)
  if strict and (missing := [k for k in model_state if k not in state_dict]):
    raise KeyError(f"load_state_dict: {len(missing)} of the model's tensors are missing from the state dict: {', '.join(missing[:10])}"
                   f"{' ...' if len(missing) > 10 else ''} (pass strict=False to leave them as they are)")
  if DEBUG >= 1 and (unused := sorted(state_dict.keys() - model_state.keys())): print(f"WARNING: unused weights in the state dict: {unused}")
  ret = []
  for k, v in model_state.items():
    if k not in state_dict:
      if DEBUG >= 1: print(f"WARNING: not loading {k}")
      continue
    new = state_dict[k]
    if not isinstance(new, Tensor): raise TypeError(f"load_state_dict: state dict entry {k!r} is a {type(new).__name__}, expected a Tensor")
    if v.shape != new.shape and v.numel() == new.numel() == 1 and v.ndim <= 1 and new.ndim <= 1: new = new.reshape(v.shape)  # () vs (1,)
    if v.shape != new.shape:
      raise ValueError(f"load_state_dict: shape mismatch in layer `{k}`: the model has {v.shape}, the state dict has {new.shape}")
    ret.append(v.replace(new.to(v.device)))
    if consume: del state_dict[k]
  if realize and ret: Tensor.realize_all(*ret)
  if verbose:
    mb, ms = (GlobalCounters.mem_used - mem_start) / 1e6, (time.perf_counter() - start) * 1e3
    print(f"loaded {len(ret)} tensors ({mb:.2f} MB) in {ms:.2f} ms", file=sys.stderr)
  return ret


# ---- torch checkpoints

TORCH_STORAGES: dict[str, DType] = {
  "FloatStorage": dtypes.float32, "HalfStorage": dtypes.float16, "BFloat16Storage": dtypes.bfloat16, "DoubleStorage": dtypes.float64,
  "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8, "ShortStorage": dtypes.int16, "IntStorage": dtypes.int32,
  "LongStorage": dtypes.int64, "BoolStorage": dtypes.bool, "UntypedStorage": dtypes.uint8}
TORCH_DTYPES: dict[str, DType] = {
  "float32": dtypes.float32, "float": dtypes.float32, "float16": dtypes.float16, "half": dtypes.float16, "bfloat16": dtypes.bfloat16,
  "float64": dtypes.float64, "double": dtypes.float64, "int8": dtypes.int8, "uint8": dtypes.uint8, "int16": dtypes.int16,
  "short": dtypes.int16, "int32": dtypes.int32, "int": dtypes.int32, "int64": dtypes.int64, "long": dtypes.int64, "bool": dtypes.bool,
  "uint16": dtypes.uint16, "uint32": dtypes.uint32, "uint64": dtypes.uint64,
  "float8_e4m3fn": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2}
LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


class TorchLoadError(ValueError):
  """A file that torch_load can't load (not a torch checkpoint, corrupt, or asking for more than it holds); the message
  starts with the file's name."""


class Refused(TorchLoadError, pickle.UnpicklingError):
  """torch_load met a global it does not allow (and so ran nothing from the file)."""


MAX_PICKLE_BYTES = 64 << 20     # a data.pkl holds ~100 bytes per tensor: 64 MiB is far past any real checkpoint
MAX_EXPANDED_BYTES = 256 << 20  # overlapping strides are copied out: at most this much beyond the bytes the tensor reads


class _Immutable:
  """Refuses pickle's BUILD opcode (`__setstate__`): a file may not set attributes on the objects torch_load hands it."""
  __slots__ = ()

  def __setstate__(self, state: Any) -> None:
    raise pickle.UnpicklingError(f"the pickle sets the state of {self!r}, which is not allowed (only an OrderedDict's can be set)")


class _StorageType(_Immutable):
  """What `torch.FloatStorage` (etc.) unpickles to: only its dtype. Not callable."""
  __slots__ = ("name", "dtype")

  def __init__(self, name: str, dtype: DType): self.name, self.dtype = name, dtype
  def __repr__(self) -> str: return f"torch.{self.name}"


class _TorchDType(_Immutable):
  """What `torch.float32` (etc.) unpickles to."""
  __slots__ = ("name", "dtype")

  def __init__(self, name: str, dtype: DType): self.name, self.dtype = name, dtype
  def __repr__(self) -> str: return f"torch.{self.name}"


class _Global(_Immutable):
  """An allowed callable global (a rebuild function, OrderedDict, torch.Size): callable, but its attributes can't be set."""
  __slots__ = ("name", "fn")

  def __init__(self, name: str, fn: Callable): self.name, self.fn = name, fn
  def __call__(self, *args: Any) -> Any: return self.fn(*args)
  def __repr__(self) -> str: return self.name


class _Storage(_Immutable):
  """A storage named by a persistent id: `nbytes` bytes of `dtype` elements at byte `offset` of storage `key`."""
  __slots__ = ("key", "dtype", "nbytes", "offset")

  def __init__(self, key: str, dtype: DType, nbytes: int, offset: int = 0): self.key, self.dtype, self.nbytes, self.offset = key, dtype, nbytes, offset
  def __repr__(self) -> str: return f"<torch storage {self.key} {self.dtype!r} {self.nbytes} bytes>"


class _Unpickler(pickle._Unpickler):  # type: ignore[name-defined]
  """Knows only the globals a checkpoint of tensors needs (the torch rebuild functions, storage types, dtypes,
  OrderedDict); any other global is refused before anything is called, so no code from the file runs. The pure-Python
  unpickler, so that BUILD can be restricted: it may set the attributes of an OrderedDict the file made (torch's
  `_metadata`), never of anything else (the C unpickler sets them on whatever is on its stack)."""
  dispatch: ClassVar[dict[int, Any]] = dict(pickle._Unpickler.dispatch)  # type: ignore[attr-defined,misc]
  stack: list[Any]  # the pure-Python unpickler's stack (set by load)

  def __init__(self, file: Any, name: str, make_tensor: Callable[[_Storage, int, tuple, tuple, DType | None], Tensor | None]):
    super().__init__(file)
    self.name, self.make_tensor = name, make_tensor
    self.storages: dict[str, _Storage] = {}  # root storages by key, as the persistent ids describe them
    fns: dict[tuple[str, str], Callable] = {
      ("torch._utils", "_rebuild_tensor"): self._rebuild_tensor,
      ("torch._utils", "_rebuild_tensor_v2"): self._rebuild_tensor_v2,
      ("torch._utils", "_rebuild_tensor_v3"): self._rebuild_tensor_v3,
      ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
      ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
      ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
      ("torch", "Size"): _size,
      ("torch", "device"): _torch_device,
      ("collections", "OrderedDict"): OrderedDict}
    self.allowed: dict[tuple[str, str], Any] = {
      **{k: _Global(f"{k[0]}.{k[1]}", fn) for k, fn in fns.items()},
      ("torch", "Tensor"): _TypeMarker("torch.Tensor"),
      ("torch.nn.parameter", "Parameter"): _TypeMarker("torch.nn.Parameter"),
      ("torch.storage", "UntypedStorage"): _StorageType("UntypedStorage", dtypes.uint8),
      **{("torch", k): _StorageType(k, v) for k, v in TORCH_STORAGES.items()},
      **{("torch", k): _TorchDType(k, v) for k, v in TORCH_DTYPES.items()}}

  def load_build(self) -> None:
    state = self.stack.pop()
    inst = self.stack[-1]
    if type(inst) is not OrderedDict or not isinstance(state, dict):
      raise pickle.UnpicklingError(f"the pickle sets the state of a {type(inst).__name__}, which is not allowed (only an OrderedDict's can be set)")
    for k, v in state.items():
      if not isinstance(k, str) or k.startswith("__"): raise pickle.UnpicklingError(f"the pickle sets the attribute {_short(k)} of an OrderedDict")
      setattr(inst, k, v)
  dispatch[pickle.BUILD[0]] = load_build

  def load_bytearray8(self) -> None:
    # the one opcode that allocates its claimed length before reading it (protocol 5; torch writes protocol 2)
    raise pickle.UnpicklingError("the pickle holds a protocol-5 bytearray, which a torch checkpoint doesn't")
  dispatch[pickle.BYTEARRAY8[0]] = load_bytearray8

  def find_class(self, module: str, name: str) -> Any:
    # protocol-2 pickles (what torch writes) may name Python 2 modules, e.g. __builtin__.eval for builtins.eval
    py3 = _compat_pickle.NAME_MAPPING.get((module, name), (_compat_pickle.IMPORT_MAPPING.get(module, module), name))
    if py3 in self.allowed: return self.allowed[py3]
    spelled = f" (pickled as '{module:.100}.{name:.100}')" if py3 != (module, name) else ""
    raise Refused(
      f"{self.name}: torch_load: the file asks for the global '{py3[0]:.100}.{py3[1]:.100}'{spelled}, which is not allowed: only torch tensors, "
      "storages and dicts/lists of them can be loaded (a pickled object of any other class could run code), so nothing from this file was "
      "executed. If it is a whole pickled model, save its state_dict() instead.")

  def persistent_load(self, pid: Any) -> _Storage:
    if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
      raise pickle.UnpicklingError(f"unsupported persistent id {_short(pid)}")
    stype, key, numel = pid[1], pid[2], pid[4]
    if not isinstance(key, (str, int)) or len(str(key)) > 1000: raise pickle.UnpicklingError(f"a storage has a bad key {_short(key)}")
    key = str(key)
    if type(numel) is not int or numel < 0: raise pickle.UnpicklingError(f"storage {key} has a bad size {_short(numel)}")
    root = self.storages.setdefault(key, _Storage(key, stype.dtype, numel * stype.dtype.itemsize))
    view = pid[5] if len(pid) > 5 else None
    if view is None: return root
    # legacy storage views: (view key, offset, size) in elements of the root storage
    if not (isinstance(view, tuple) and len(view) == 3): raise pickle.UnpicklingError(f"bad storage view {_short(view)} of storage {key}")
    _, offset, size = view
    if not (type(offset) is int and type(size) is int and 0 <= offset and 0 <= size and (offset + size) * stype.dtype.itemsize <= root.nbytes):
      raise pickle.UnpicklingError(f"storage view {_short(view)} is out of bounds of storage {key}")
    return _Storage(key, stype.dtype, size * stype.dtype.itemsize, offset * stype.dtype.itemsize)

  def _rebuild_tensor(self, storage: Any, storage_offset: int, size: Any, stride: Any) -> Tensor | None:
    return self._rebuild(storage, storage_offset, size, stride, None)

  def _rebuild_tensor_v2(self, storage: Any, storage_offset: int, size: Any, stride: Any, requires_grad: Any = False,
                         backward_hooks: Any = None, metadata: Any = None) -> Tensor | None:
    return self._rebuild(storage, storage_offset, size, stride, None)

  def _rebuild_tensor_v3(self, storage: Any, storage_offset: int, size: Any, stride: Any, requires_grad: Any, backward_hooks: Any,
                         dtype: Any, metadata: Any = None) -> Tensor | None:
    if not isinstance(dtype, _TorchDType): raise pickle.UnpicklingError(f"_rebuild_tensor_v3 got {_short(dtype)}, expected a torch dtype")
    return self._rebuild(storage, storage_offset, size, stride, dtype.dtype)

  def _rebuild(self, storage: Any, offset: Any, size: Any, stride: Any, dtype: DType | None) -> Tensor | None:
    if not isinstance(storage, _Storage): raise pickle.UnpicklingError(f"a tensor was rebuilt from {_short(storage)}, not a storage")
    if not (isinstance(size, (tuple, list)) and isinstance(stride, (tuple, list)) and len(size) == len(stride) <= 64):
      raise pickle.UnpicklingError(f"bad tensor layout: size {_short(size)}, stride {_short(stride)}")
    size, stride = tuple(size), tuple(stride)
    if not (type(offset) is int and offset >= 0 and all(type(x) is int and 0 <= x < 1 << 62 for x in size + stride) and offset < 1 << 62):
      raise pickle.UnpicklingError(f"bad tensor layout: offset {_short(offset)}, size {_short(size)}, stride {_short(stride)}")
    return self.make_tensor(storage, offset, size, stride, dtype)


class _TypeMarker(_Immutable):
  __slots__ = ("name",)

  def __init__(self, name: str): self.name = name
  def __repr__(self) -> str: return self.name


def _rebuild_parameter(data: Any, requires_grad: Any = None, backward_hooks: Any = None, state: Any = None) -> Any: return data


def _rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
  # func can only be something find_class returned (a rebuild function above), so calling it is safe
  if not isinstance(func, _Global) or not isinstance(args, tuple): raise pickle.UnpicklingError(f"can't rebuild a tensor with {_short(func)}")
  return func(*args)


def _size(*args: Any) -> tuple: return tuple(*args)
def _torch_device(*args: Any) -> str: return ":".join(_short(a) if not isinstance(a, (str, int)) else str(a)[:100] for a in args)


class _TorchFile:
  """Turns (storage, offset, size, stride) into tensors: DISK views for contiguous layouts, else the covering bytes
  moved to the default device and laid out there with movement ops. A storage's bytes are found when a tensor uses
  them: an entry of the zip no tensor refers to is never read, and a compressed one only as far as its tensors reach."""

  def __init__(self, src: _Source, name: str):
    self.src, self.name = src, name
    self.data_at: dict[str, tuple[int, int]] = {}  # storage key -> (byte offset in the file, bytes available)
    self.zf: zipfile.ZipFile | None = None
    self.entries: dict[str, zipfile.ZipInfo] = {}  # storage key -> its zip entry, not located yet
    self.data_bytes: dict[str, bytes] = {}         # storage key -> the decompressed start of a compressed zip entry

  def _locate(self, key: str, need: int) -> int:
    """Bytes available for storage `key` (at least `need` of them if it has them), reading what that takes."""
    if key in self.data_at: return self.data_at[key][1]
    if (info := self.entries.get(key)) is None: raise TorchLoadError(f"{self.name}: no data for storage {key}")
    if info.file_size < need: return info.file_size
    if info.compress_type == zipfile.ZIP_STORED:
      self.data_at[key] = (_stored_entry_offset(self.src, info, self.name, TorchLoadError), info.file_size)
      return info.file_size
    # compressed (not written by torch): decompress only as far as the tensors need
    if key not in self.data_bytes or len(self.data_bytes[key]) < need:
      assert self.zf is not None
      with self.zf.open(info) as zf: self.data_bytes[key] = zf.read(need)
    return len(self.data_bytes[key])

  def tensor(self, storage: _Storage, offset: int, size: tuple[int, ...], stride: tuple[int, ...], dtype: DType | None) -> Tensor:
    dt = dtype or storage.dtype
    if prod(size) == 0:
      self._locate(storage.key, 0)
      return self._flat(storage, 0, dt, 0).reshape(size)
    span = 1 + sum((s - 1) * st for s, st in zip(size, stride))
    start = storage.offset + offset * dt.itemsize
    end = start + span * dt.itemsize
    if end > min(self._locate(storage.key, end), storage.offset + storage.nbytes):
      raise TorchLoadError(f"{self.name}: a {_short(size)} tensor with strides {_short(stride)} at offset {offset} reads past the end of its "
                           f"storage {storage.key} ({storage.nbytes} bytes)")
    flat = self._flat(storage, start, dt, span)
    if _is_row_major(size, stride): return flat.reshape(size)
    if (out := _strided(flat.to(None), size, stride)) is not None: return out
    # overlapping or otherwise exotic strides: one strided copy on the host (numpy), bounded in what it may expand to
    if (nbytes := prod(size) * dt.itemsize) > span * dt.itemsize + MAX_EXPANDED_BYTES:
      raise TorchLoadError(f"{self.name}: a {_short(size)} tensor with overlapping strides {_short(stride)} would expand {span * dt.itemsize} bytes "
                           f"of storage {storage.key} into {nbytes}; save it contiguous (.contiguous()) instead")
    return Tensor(_gather(bytes(flat.data().cast("B")), dt.itemsize, size, stride), dtype=dt).reshape(size)

  def _flat(self, storage: _Storage, start: int, dt: DType, n: int) -> Tensor:
    if storage.key in self.data_bytes:
      return Tensor(self.data_bytes[storage.key][start:start + n * dt.itemsize], dtype=dt)
    return self.src.tensor(self.data_at[storage.key][0] + start, dt, (n,))


def _is_row_major(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
  expect = 1
  for s, st in reversed(list(zip(size, stride))):
    if s == 1: continue
    if st != expect: return False
    expect *= s
  return True


def _strided(flat: Tensor, size: tuple[int, ...], stride: tuple[int, ...]) -> Tensor | None:
  """The 1-D `flat` seen with torch's size/stride, built from pad/reshape/shrink/permute/expand; None when the
  strides aren't a permuted, possibly sliced layout (each stride a multiple of the next smaller one, no overlap)."""
  kept = [i for i, (s, st) in enumerate(zip(size, stride)) if s != 1 and st != 0]  # size-1 and broadcast axes come back at the end
  order = sorted(kept, key=lambda i: -stride[i])
  for a, b in zip(order, order[1:]):
    if stride[b] == stride[a] or stride[a] % stride[b] or size[b] * stride[b] > stride[a]: return None
  t = flat.shrink(((0, 1),)).reshape(()) if not order else flat
  if order:
    # axes in decreasing stride: (size0, stride0) first, padded so every row is whole
    t = t.pad(((0, size[order[0]] * stride[order[0]] - t.shape[0]),)).reshape(size[order[0]], stride[order[0]])
    for i in order[1:]:
      # the last axis holds `prev` elements: split it into (prev // stride, stride) and keep the first `size` of the rows
      outer, prev = t.shape[:-1], t.shape[-1]
      t = t.reshape(*outer, prev // stride[i], stride[i]).shrink(tuple((0, s) for s in outer) + ((0, size[i]), (0, stride[i])))
    # the element itself is the first of the last axis
    t = t.shrink(tuple((0, s) for s in t.shape[:-1]) + ((0, 1),)).reshape(t.shape[:-1])
    t = t.permute([order.index(i) for i in kept])
  return t.reshape(tuple(size[i] if i in kept else 1 for i in range(len(size)))).expand(size)


def _gather(raw: bytes, itemsize: int, size: tuple[int, ...], stride: tuple[int, ...]) -> bytes:
  """The elements of `raw` at torch's size/stride (in elements), row-major: one numpy strided view, copied."""
  import numpy as np
  flat = np.frombuffer(raw, dtype=np.dtype(f"V{itemsize}"))
  return np.ascontiguousarray(np.lib.stride_tricks.as_strided(flat, size, tuple(st * itemsize for st in stride), writeable=False)).tobytes()


def torch_load(fn: FileLike) -> Any:
  """Load a checkpoint written by `torch.save`, in the zip format (torch >= 1.6) or the legacy pickle format
  (`_use_new_zipfile_serialization=False`). Returns what was saved (usually a dict of name -> Tensor); contiguous
  tensors are lazy DISK views of the file, others are laid out on the default device. Only tensors, storages and
  plain containers can be in the file: any other pickled class is refused with an error naming it. A file that can't
  be loaded raises TorchLoadError (a ValueError) naming the file; a missing one, FileNotFoundError."""
  src, name = _Source(fn), _name(fn)
  tf = _TorchFile(src, name)
  try:
    f = src.reader()
    if zipfile.is_zipfile(f): return _load_zip(tf, f)
    f.seek(0)
    return _load_legacy(tf, f)
  except TorchLoadError: raise
  except RecursionError: raise TorchLoadError(f"{name}: the checkpoint nests too deeply to load") from None
  except MemoryError: raise  # running out of memory is not the file's fault (every size read from it is bounded)
  except Exception as e:  # noqa: BLE001  whatever a corrupt pickle or zip raises: one error type, naming the file
    raise TorchLoadError(f"{name}: not a loadable torch checkpoint ({type(e).__name__}: {str(e)[:300]})") from e


def _load_zip(tf: _TorchFile, f: io.BufferedReader) -> Any:
  f.seek(0)
  with zipfile.ZipFile(f) as zf:
    pkls = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
    if len(pkls) != 1: raise TorchLoadError(f"{tf.name}: a zip file but not a torch checkpoint (found {len(pkls)} data.pkl)")
    prefix = pkls[0][:-len("data.pkl")]
    if f"{prefix}byteorder" in zf.namelist() and _read_entry(tf, zf, f"{prefix}byteorder", 64).strip() == b"big":
      raise TorchLoadError(f"{tf.name} was saved on a big-endian machine; only little-endian checkpoints are supported")
    # entries are only noted here: _TorchFile reads one when a tensor uses it
    tf.zf = zf
    for info in zf.infolist():
      if info.filename.startswith(f"{prefix}data/") and not info.is_dir(): tf.entries[info.filename[len(f"{prefix}data/"):]] = info
    up = _Unpickler(io.BytesIO(_read_entry(tf, zf, pkls[0], MAX_PICKLE_BYTES)), tf.name, tf.tensor)
    return up.load()


def _read_entry(tf: _TorchFile, zf: zipfile.ZipFile, name: str, limit: int) -> bytes:
  """A zip entry's bytes, refusing one that decompresses to more than `limit` (whatever its header claims)."""
  with zf.open(name) as e: data = e.read(limit + 1)
  if len(data) > limit: raise TorchLoadError(f"{tf.name}: zip entry {name} is larger than {limit} bytes, too large for a checkpoint's {name.rsplit('/', 1)[-1]}")
  return data


def _load_legacy(tf: _TorchFile, f: io.BufferedReader) -> Any:
  def header(what: str) -> Any:
    try: return _Unpickler(f, tf.name, lambda *a: None).load()
    except Refused: raise
    except Exception as e:  # noqa: BLE001  any failure to read the header pickles means this is not a legacy checkpoint
      raise TorchLoadError(f"{tf.name}: neither a zip nor a legacy torch checkpoint (reading its {what}: {str(e)[:200]})") from None
  if header("magic number") != LEGACY_MAGIC: raise TorchLoadError(f"{tf.name}: neither a zip nor a legacy torch checkpoint (bad magic number)")
  if header("protocol version") != 1001: raise TorchLoadError(f"{tf.name}: unsupported legacy protocol version")
  sys_info = header("system info")
  if isinstance(sys_info, dict) and not sys_info.get("little_endian", True):
    raise TorchLoadError(f"{tf.name} was saved on a big-endian machine; only little-endian checkpoints are supported")
  # pass 1: unpickle without data to learn the storages, then find each one's bytes after the list of storage keys
  main_at = f.tell()
  scan = _Unpickler(f, tf.name, lambda *a: None)
  scan.load()
  keys = _Unpickler(f, tf.name, lambda *a: None).load()
  if not isinstance(keys, list): raise TorchLoadError(f"{tf.name}: expected the list of storage keys, got {type(keys).__name__}")
  pos = f.tell()
  for key in keys:
    if not isinstance(key, (str, int)) or (st := scan.storages.get(str(key))) is None:
      raise TorchLoadError(f"{tf.name}: storage {_short(key)} is saved but never described")
    numel = int.from_bytes(tf.src.read(pos, 8), "little")
    if numel * st.dtype.itemsize != st.nbytes:
      raise TorchLoadError(f"{tf.name}: storage {key} holds {numel} elements, its description says {st.nbytes // st.dtype.itemsize}")
    if pos + 8 + st.nbytes > tf.src.size: raise TorchLoadError(f"{tf.name} is truncated: storage {key} ends past the end of the file")
    tf.data_at[str(key)] = (pos + 8, st.nbytes)
    pos += 8 + st.nbytes
  # pass 2: the same pickle, now making tensors
  f.seek(main_at)
  return _Unpickler(f, tf.name, tf.tensor).load()


# tinygrad's archive helpers live in their own module and are reached from here as in tinygrad (imported last: they build on _Source)
from tinygrad.nn.archive import TensorIO, accept_filename, tar_extract, zip_extract  # noqa: E402
