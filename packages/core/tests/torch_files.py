"""torch checkpoints built by hand (torch is not installed here): the zip format torch.save writes and the legacy one,
pickled with protocol 2 by a pickler that writes torch's globals and storage persistent ids without importing torch."""
from __future__ import annotations

import io
import pickle
import struct
import zipfile
from collections import OrderedDict
from typing import Any

import numpy as np

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
STORAGES = {np.float32: "FloatStorage", np.float16: "HalfStorage", np.float64: "DoubleStorage", np.int64: "LongStorage",
            np.int32: "IntStorage", np.int16: "ShortStorage", np.int8: "CharStorage", np.uint8: "ByteStorage", np.bool_: "BoolStorage"}


class Global:
  """Pickled as the global module.name (GLOBAL opcode), whatever that is."""
  def __init__(self, module: str, name: str): self.module, self.name = module, name
  def __call__(self, *args: Any) -> Any: raise TypeError("only pickled")  # save_reduce wants a callable


class Storage:
  """Pickled as torch's persistent id ('storage', torch.<type>, key, 'cpu', numel) (and written as the entry data/<key>)."""
  def __init__(self, key: str, arr: np.ndarray, stype: str | None = None):
    self.key, self.arr, self.stype = key, np.ascontiguousarray(arr).reshape(-1), stype or STORAGES[np.dtype(arr.dtype).type]


class Rebuild:
  """torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())."""
  def __init__(self, storage: Storage, offset: int, size: tuple, stride: tuple, fn: str = "_rebuild_tensor_v2"):
    self.storage, self.offset, self.size, self.stride, self.fn = storage, offset, size, stride, fn

  def __reduce__(self) -> Any:
    return (Global("torch._utils", self.fn), (self.storage, self.offset, tuple(self.size), tuple(self.stride), False, OrderedDict()))


def tensor(key: str, arr: np.ndarray) -> Rebuild:
  """A contiguous tensor over its own storage."""
  strides = tuple(s // arr.itemsize for s in np.ascontiguousarray(arr).strides)
  return Rebuild(Storage(key, arr), 0, arr.shape, strides)


class _Pickler(pickle._Pickler):  # type: ignore[name-defined]
  legacy = False  # legacy checkpoints' ids carry a sixth element, the view (None)

  def save(self, obj: Any, save_persistent_id: bool = True) -> None:
    if isinstance(obj, Global): return self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
    return super().save(obj, save_persistent_id)

  def persistent_id(self, obj: Any) -> Any:
    if isinstance(obj, Storage): return ("storage", Global("torch", obj.stype), obj.key, "cpu", obj.arr.size) + ((None,) if self.legacy else ())
    return None


def dumps(obj: Any, legacy: bool = False) -> bytes:
  f = io.BytesIO()
  p = _Pickler(f, protocol=2)
  p.legacy = legacy
  p.dump(obj)
  return f.getvalue()


def storages(obj: Any, out: dict[str, Storage] | None = None) -> dict[str, Storage]:
  out = {} if out is None else out
  if isinstance(obj, Rebuild): out[obj.storage.key] = obj.storage
  elif isinstance(obj, dict): [storages(v, out) for v in obj.values()]
  elif isinstance(obj, (list, tuple)): [storages(v, out) for v in obj]
  return out


def zip_checkpoint(obj: Any, extra: dict[str, bytes] | None = None, compress: bool = False) -> bytes:
  """What torch.save writes: archive/data.pkl, archive/data/<key> per storage, archive/version, archive/byteorder."""
  f = io.BytesIO()
  with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", dumps(obj))
    z.writestr("archive/byteorder", "little")
    for key, st in storages(obj).items(): z.writestr(f"archive/data/{key}", st.arr.tobytes())
    for name, data in (extra or {}).items(): z.writestr(name, data)
    z.writestr("archive/version", "3\n")
  return f.getvalue()


def legacy_checkpoint(obj: Any) -> bytes:
  """torch.save(..., _use_new_zipfile_serialization=False): magic, protocol, sys info, the object, the storage keys,
  then each storage as a u64 element count and its bytes."""
  sts = storages(obj)
  out = b"".join(pickle.dumps(x, protocol=2) for x in (LEGACY_MAGIC, 1001, {"protocol_version": 1001, "little_endian": True}))
  out += dumps(obj, legacy=True) + pickle.dumps(list(sts), protocol=2)
  for st in sts.values(): out += struct.pack("<Q", st.arr.size) + st.arr.tobytes()
  return out
