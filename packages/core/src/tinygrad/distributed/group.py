"""The process group: `init` once per process, then collectives (ops.py) talk to the other ranks through its
communicator. One group per process (the world), as in `torch.distributed`'s default group."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tinygrad.device.collectives import Bootstrap, CollectiveSpec, CommInit, Communicator
from tinygrad.device.registry import Device
from tinygrad.distributed.env import ProcessEnv, master_address, process_env
from tinygrad.distributed.store import TCPStore


@dataclass
class ProcessGroup:
  rank: int
  world_size: int
  local_rank: int
  backend: str
  device: str  # the device whose buffers the communicator moves (NCCL: this rank's GPU)
  comm: Communicator
  bootstrap: _LazyBootstrap


class _LazyBootstrap:
  """The TCP store (or MPI) is set up only when a backend needs to exchange bytes: MPI itself never does."""

  def __init__(self, env: ProcessEnv, init_method: str | None, timeout: float):
    self.env, self.init_method, self.timeout = env, init_method, timeout
    self.impl: Any = None

  def _make(self) -> Any:
    use_mpi = self.init_method == "mpi://" or (self.env.mpi and self.init_method is None and "MASTER_ADDR" not in os.environ)
    if use_mpi:
      from tinygrad.runtime.mpi import MPIBootstrap
      return MPIBootstrap()
    host, port = master_address(self.init_method)
    return TCPStore(host, port, is_server=self.env.rank == 0, timeout=self.timeout)

  def broadcast_bytes(self, key: str, data: bytes | None, root: int = 0) -> bytes:
    if self.impl is None: self.impl = self._make()
    return self.impl.broadcast_bytes(key, data, root)

  def close(self) -> None:
    if isinstance(self.impl, TCPStore): self.impl.close()


_group: ProcessGroup | None = None


def _specs() -> list[CollectiveSpec]: return Device.registry.collectives


def _pick(backend: str | None, device: str) -> CollectiveSpec:
  specs = _specs()
  names = [s.name for s in specs]
  if backend is None:  # a backend made for this device (NCCL for CUDA) before one that stages through the host (MPI)
    ranked = sorted((s for s in specs if s.serves(device)), key=lambda s: "*" in s.devices)
    usable = [s for s in ranked if s.available() is None]
    if not usable:
      why = "; ".join(f"{s.name}: {s.available()}" for s in ranked) or "none is registered"
      raise RuntimeError(f"tinygrad.distributed: no collectives backend can run for {device} ({why})")
    return usable[0]
  spec = next((s for s in specs if s.name == backend.lower()), None)
  if spec is None:
    raise ValueError(f"tinygrad.distributed: unknown backend {backend!r}; registered: {', '.join(names)} "
                     "(NCCL comes with tinygrad-backend-nv, MPI with core when mpi4py is installed)")
  if not spec.serves(device): raise ValueError(f"tinygrad.distributed: backend {spec.name!r} moves {'/'.join(spec.devices)} buffers, not {device}'s")
  missing = spec.available()
  if missing is not None: raise RuntimeError(f"tinygrad.distributed: backend {spec.name!r} can't run here: {missing}")
  return spec


def _default_device(env: ProcessEnv, backend: str | None) -> str:
  """One device per process: a GPU backend takes GPU LOCAL_RANK of the default device's kind; MPI the default device."""
  kind = Device.DEFAULT.split(":")[0]
  if backend is not None and backend.lower() == "mpi": return Device.DEFAULT
  specific = any(s.serves(kind) and "*" not in s.devices for s in _specs())
  return f"{kind}:{env.local_rank}" if specific else Device.DEFAULT


def init(backend: str | None = None, rank: int | None = None, world_size: int | None = None, init_method: str | None = None,
         device: str | None = None, timeout: float = 300.0) -> ProcessGroup:
  """Join the process group. Everything may come from the environment (torchrun, mpirun or our launcher set it):
  `backend` "nccl" or "mpi" (default: the one made for `device`'s kind, else MPI); `device` defaults to GPU LOCAL_RANK for
  NCCL, the default device for MPI; `init_method` "env://" (MASTER_ADDR/MASTER_PORT), "tcp://HOST:PORT" or "mpi://"."""
  global _group
  if _group is not None: raise RuntimeError("tinygrad.distributed.init was called twice: call destroy() first to join another group")
  env = process_env(rank, world_size)
  dev = Device.canonicalize(device or _default_device(env, backend))
  spec = _pick(backend, dev)
  bootstrap = _LazyBootstrap(env, None if init_method == "env://" else init_method, timeout)
  comm = spec.make(CommInit(env.rank, env.world_size, dev, bootstrap, Device[dev]))
  _group = ProcessGroup(env.rank, env.world_size, env.local_rank, spec.name, dev, comm, bootstrap)
  return _group


def group() -> ProcessGroup:
  if _group is None: raise RuntimeError("tinygrad.distributed is not initialised: call tinygrad.distributed.init() first")
  return _group


def is_initialized() -> bool: return _group is not None


def destroy() -> None:
  """Leave the group (closes the communicator and, on rank 0, the store)."""
  global _group
  if _group is None: return
  _group.comm.close()
  _group.bootstrap.close()
  _group = None


__all__ = ["Bootstrap", "ProcessGroup", "init", "group", "is_initialized", "destroy"]
