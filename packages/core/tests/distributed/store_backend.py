"""A collectives backend made of nothing but the bootstrap (the TCP store), for tests: it takes the path NCCL takes
(our launcher's variables, the store at MASTER_ADDR:MASTER_PORT, a device-specific registration) without a GPU.
`python collectives_worker.py store` under `python -m tinygrad.distributed.launch` uses it (see test_plugin_backend.py).
Each collective publishes every rank's bytes under a fresh key and combines them with numpy (test code only)."""
from __future__ import annotations

import numpy as np
from tinygrad.device.collectives import CollectiveSpec, CommInit, Communicator
from tinygrad.device.registry import registry
from tinygrad.device.runtime import Buffer

REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


class StoreCommunicator(Communicator):
  name = "store"

  def __init__(self, init: CommInit):
    self.init, self.calls = init, 0

  def _everyone(self, buf: Buffer | None) -> list[np.ndarray]:
    """Every rank's buffer (as numpy), through the store."""
    self.calls += 1
    mine = buf.as_bytes() if buf is not None else b""
    raw = [self.init.bootstrap.broadcast_bytes(f"c{self.calls}/{k}", mine if k == self.init.rank else None, root=k)
           for k in range(self.init.world_size)]
    return [np.frombuffer(r, dtype=buf.dtype.fmt) for r in raw] if buf is not None else []

  def _write(self, out: Buffer, value: np.ndarray) -> None: out.copyin(memoryview(np.ascontiguousarray(value, dtype=out.dtype.fmt)).cast("B"))

  def all_reduce(self, out, inp, op): self._write(out, REDUCE[op](self._everyone(inp), axis=0))
  def all_gather(self, out, inp): self._write(out, np.concatenate(self._everyone(inp)))
  def reduce_scatter(self, out, inp, op): self._write(out, REDUCE[op](self._everyone(inp), axis=0).reshape(self.init.world_size, -1)[self.init.rank])
  def broadcast(self, out, inp, root): self._write(out, self._everyone(inp)[root])
  def barrier(self): self._everyone(None)


def register() -> None:
  """Add the backend for CPU devices (as NCCL is registered for CUDA): the default for DEV=CPU, ahead of MPI."""
  registry.load().collectives.append(CollectiveSpec("store", StoreCommunicator, devices=("CPU",)))
