"""The NCCL collectives backend: libnccl.so.2 through ctypes, on CUDA buffers, enqueued on the stream our kernels use
(the legacy default stream), so kernels before and after a collective are ordered with it without host syncs.

The library is found, in order: $TINYGRAD_NCCL_LIB; nvidia/nccl/lib/libnccl.so.2 in any site-packages on sys.path
(torch's CUDA wheels bring one, as does `pip install tinygrad-backend-nv[nccl]`, i.e. nvidia-nccl-cu13); then the
system's (ldconfig). NVLink multicast (NVLS) is switched off unless NCCL_NVLS_ENABLE is set.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import sys
from typing import Any

from tinygrad.device.plugin import Buffer, CommInit, Communicator, DType, dtypes

INSTALL_HINT = "pip install 'tinygrad-backend-nv[nccl]' (the nvidia-nccl-cu13 wheel), or set TINYGRAD_NCCL_LIB=/path/to/libnccl.so.2"

# ncclDataType_t and ncclRedOp_t (nccl.h)
NCCL_TYPES: dict[DType, int] = {dtypes.int8: 0, dtypes.uint8: 1, dtypes.int32: 2, dtypes.uint32: 3, dtypes.int64: 4, dtypes.uint64: 5,
                                dtypes.float16: 6, dtypes.float32: 7, dtypes.float64: 8, dtypes.bfloat16: 9, dtypes.bool: 1}
NCCL_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
NCCL_UNIQUE_ID_BYTES = 128


class ncclUniqueId(ctypes.Structure):
  _fields_ = [("internal", ctypes.c_char * NCCL_UNIQUE_ID_BYTES)]


def candidates() -> list[str]:
  """Where libnccl.so.2 is looked for, in order."""
  out = [os.environ["TINYGRAD_NCCL_LIB"]] if os.environ.get("TINYGRAD_NCCL_LIB") else []
  for entry in sys.path:
    if entry and os.path.isdir(entry): out += sorted(glob.glob(os.path.join(entry, "nvidia", "nccl", "lib", "libnccl.so*")))
  if (system := ctypes.util.find_library("nccl")) is not None: out.append(system)
  return out


@functools.cache
def load_nccl() -> ctypes.CDLL:
  os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # before NCCL reads its environment: multicast stays off
  tried = []
  for path in candidates():
    try: lib = ctypes.CDLL(path)
    except OSError as e:
      tried.append(f"{path} ({e})")
      continue
    _declare(lib)
    return lib
  raise RuntimeError(f"NCCL not found: no loadable libnccl.so.2 (tried: {'; '.join(tried) or 'nothing found on sys.path or ldconfig'}). {INSTALL_HINT}")


def nccl_available() -> str | None:
  try: load_nccl()
  except RuntimeError as e: return str(e)
  from tinygrad_backend_nv.runtime import driver_status
  return driver_status()[1]


def _declare(lib: ctypes.CDLL) -> None:
  p, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
  sigs: dict[str, tuple[Any, list[Any]]] = {
    "ncclGetVersion": (i, [ctypes.POINTER(i)]),
    "ncclGetUniqueId": (i, [ctypes.POINTER(ncclUniqueId)]),
    "ncclCommInitRank": (i, [ctypes.POINTER(p), i, ncclUniqueId, i]),
    "ncclCommInitAll": (i, [ctypes.POINTER(p), i, ctypes.POINTER(i)]),
    "ncclCommDestroy": (i, [p]),
    "ncclCommFinalize": (i, [p]),
    "ncclGetErrorString": (ctypes.c_char_p, [i]),
    "ncclGetLastError": (ctypes.c_char_p, [p]),
    "ncclAllReduce": (i, [p, p, sz, i, i, p, p]),
    "ncclAllGather": (i, [p, p, sz, i, p, p]),
    "ncclReduceScatter": (i, [p, p, sz, i, i, p, p]),
    "ncclBroadcast": (i, [p, p, sz, i, i, p, p]),
    "ncclGroupStart": (i, []),
    "ncclGroupEnd": (i, []),
  }
  for name, (restype, argtypes) in sigs.items():
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = restype, argtypes


def check(lib: ctypes.CDLL, result: int, what: str, comm: Any = None) -> None:
  if result == 0: return
  text = lib.ncclGetErrorString(result).decode()
  last = lib.ncclGetLastError(comm).decode() if comm is not None else ""
  raise RuntimeError(f"{what} failed: NCCL error {result} ({text}){': ' + last if last else ''}. NCCL_DEBUG=INFO shows more")


def version(lib: ctypes.CDLL | None = None) -> str:
  lib = lib or load_nccl()
  v = ctypes.c_int()
  check(lib, lib.ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
  code = v.value  # 2.19+: major*10000 + minor*100 + patch
  return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def nccl_type(dtype: DType) -> int:
  if (t := NCCL_TYPES.get(dtype)) is None: raise TypeError(f"NCCL has no type for {dtype}: cast the tensor (e.g. .float()) first")
  return t


class NCCLCommunicator(Communicator):
  """One rank's communicator on its GPU. Rank 0 makes the unique id; the bootstrap (TCP store or MPI) hands it out."""
  name = "nccl"

  def __init__(self, init: CommInit, comm: Any = None):
    self.lib, self.rank, self.world_size = load_nccl(), init.rank, init.world_size
    self.device: Any = init.runtime
    if not hasattr(self.device, "ctx"): raise ValueError(f"NCCL moves CUDA buffers; {init.device} is not a CUDA device")
    self.comm = ctypes.c_void_p(comm)
    if comm is not None: return  # made by ncclCommInitAll (in-process)
    uid = ncclUniqueId()
    if init.rank == 0: check(self.lib, self.lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    # bytes(uid): all 128 bytes (uid.internal, a c_char array, would stop at the first NUL)
    raw = init.bootstrap.broadcast_bytes("nccl_unique_id", bytes(uid) if init.rank == 0 else None)
    if len(raw) != NCCL_UNIQUE_ID_BYTES: raise RuntimeError(f"the NCCL unique id from rank 0 has {len(raw)} bytes, not {NCCL_UNIQUE_ID_BYTES}")
    ctypes.memmove(ctypes.addressof(uid), raw, NCCL_UNIQUE_ID_BYTES)
    self._use()
    try:
      check(self.lib, self.lib.ncclCommInitRank(ctypes.byref(self.comm), init.world_size, uid, init.rank),
            f"ncclCommInitRank (rank {init.rank} of {init.world_size} on {init.device})")
    finally: _forget_current()

  def _use(self) -> None:
    from tinygrad_backend_nv.runtime import _use
    _use(self.device.ctx)  # NCCL's runtime calls use the thread's current context: this GPU's primary one

  def _call(self, name: str, *args: Any) -> None:
    self._use()
    check(self.lib, getattr(self.lib, name)(*args, self.comm, None), name, self.comm)  # stream None: the legacy default stream

  def all_reduce(self, out: Buffer, inp: Buffer, op: str) -> None:
    self._call("ncclAllReduce", inp.opaque, out.opaque, out.size, nccl_type(out.dtype), NCCL_OPS[op])

  def all_gather(self, out: Buffer, inp: Buffer) -> None:
    self._call("ncclAllGather", inp.opaque, out.opaque, inp.size, nccl_type(out.dtype))

  def reduce_scatter(self, out: Buffer, inp: Buffer, op: str) -> None:
    self._call("ncclReduceScatter", inp.opaque, out.opaque, out.size, nccl_type(out.dtype), NCCL_OPS[op])

  def broadcast(self, out: Buffer, inp: Buffer, root: int) -> None:
    self._call("ncclBroadcast", inp.opaque, out.opaque, out.size, nccl_type(out.dtype), root)

  def barrier(self) -> None:
    """NCCL has no barrier: a one-element all-reduce, waited for on the host."""
    if not hasattr(self, "_token"): self._token = Buffer(self.device.device, 1, dtypes.float32).ensure_allocated()
    self.all_reduce(self._token, self._token, "sum")
    self.device.synchronize()

  def close(self) -> None:
    if self.comm.value:
      self._use()
      self.device.synchronize()
      self.lib.ncclCommDestroy(self.comm)
      self.comm = ctypes.c_void_p()


def make_nccl(init: CommInit) -> NCCLCommunicator: return NCCLCommunicator(init)


class NCCLClique:
  """Communicators for several GPUs of this one process (ncclCommInitAll), driven from one thread inside a group call:
  the in-process all-reduce through NCCL, measured against our ring by bench/allreduce.py (--modes ring,nccl).
  `runtimes` are opened CUDA devices (Device["CUDA:i"])."""

  def __init__(self, runtimes: list[Any]):
    self.lib, self.devices = load_nccl(), runtimes
    n = len(runtimes)
    self.comms = (ctypes.c_void_p * n)()
    devlist = (ctypes.c_int * n)(*[d.index for d in runtimes])
    try: check(self.lib, self.lib.ncclCommInitAll(self.comms, n, devlist), f"ncclCommInitAll({[d.device for d in runtimes]})")
    finally: _forget_current()

  def all_reduce(self, outs: list[Buffer], ins: list[Buffer], op: str = "sum") -> None:
    from tinygrad_backend_nv.runtime import _use
    check(self.lib, self.lib.ncclGroupStart(), "ncclGroupStart")
    try:
      for dev, comm, out, inp in zip(self.devices, self.comms, outs, ins):
        _use(dev.ctx)
        check(self.lib, self.lib.ncclAllReduce(inp.opaque, out.opaque, out.size, nccl_type(out.dtype), NCCL_OPS[op], comm, None),
              f"ncclAllReduce on {dev.device}")
    finally: check(self.lib, self.lib.ncclGroupEnd(), "ncclGroupEnd")

  def close(self) -> None:
    for comm in self.comms:
      if comm: self.lib.ncclCommDestroy(comm)
    _forget_current()


def _forget_current() -> None:
  """NCCL switches the thread's current CUDA context (cudaSetDevice per GPU): the runtime must make its own current again."""
  from tinygrad_backend_nv import runtime
  runtime._current.ctx = None
