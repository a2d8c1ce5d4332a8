"""The collectives contract: what a backend implements so `tinygrad.distributed` can move data between processes.

A backend registers a `CollectiveSpec` through the `register_collectives` hook (core registers MPI this way, backend-nv
registers NCCL). `tinygrad.distributed.init` picks one by name and calls `make(CommInit(...))` once per process; the
returned `Communicator` works on runtime `Buffer`s of its process's device. Each operation is enqueued in the device's
order of work (NCCL: on the device's stream) or finished before it returns (MPI): either way the kernels that run after
it see its result, which is what lets TinyJit replay a captured collective like a copy.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from tinygrad.device.runtime import Buffer, Compiled

ReduceOp = Literal["sum", "prod", "max", "min"]
REDUCE_OPS: tuple[str, ...] = ("sum", "prod", "max", "min")


class Bootstrap(Protocol):
  """How processes agree on a few bytes before a communicator exists (NCCL's unique id): a TCP store or MPI."""

  def broadcast_bytes(self, key: str, data: bytes | None, root: int = 0) -> bytes:
    """`data` given on rank `root` (None elsewhere); every rank returns root's bytes."""
    ...


@dataclass(frozen=True)
class CommInit:
  """What a backend needs to join the group: this process's rank, the number of processes, its device (the name and
  the opened runtime, e.g. backend-nv's CUDADevice), and a bootstrap."""
  rank: int
  world_size: int
  device: str
  bootstrap: Bootstrap
  runtime: Compiled | None = None


class Communicator:
  """Collectives on Buffers of one device, between the processes of a group. `out` and `inp` may be the same buffer
  (in place) where the sizes allow. Sizes: all_gather's out is world_size times inp; reduce_scatter's inp is world_size
  times out."""
  name = "?"

  def all_reduce(self, out: Buffer, inp: Buffer, op: ReduceOp) -> None: raise NotImplementedError
  def all_gather(self, out: Buffer, inp: Buffer) -> None: raise NotImplementedError
  def reduce_scatter(self, out: Buffer, inp: Buffer, op: ReduceOp) -> None: raise NotImplementedError
  def broadcast(self, out: Buffer, inp: Buffer, root: int) -> None: raise NotImplementedError
  def barrier(self) -> None: raise NotImplementedError
  def close(self) -> None: pass


@dataclass(frozen=True)
class CollectiveSpec:
  """A collectives backend. `devices`: the device kinds whose buffers it moves ("*" for any: MPI goes through host
  memory). `available()` returns None when it can run here, else what is missing and how to install it."""
  name: str
  make: Callable[[CommInit], Communicator]
  devices: Sequence[str] = ("*",)
  available: Callable[[], str | None] = lambda: None
  package: str = ""

  def serves(self, device: str) -> bool:
    kind = device.split(":")[0].upper()
    return "*" in self.devices or kind in self.devices
