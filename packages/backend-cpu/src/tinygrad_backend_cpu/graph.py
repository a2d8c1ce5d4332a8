"""TinyJit's launches on the CPU, replayed without the engine: each launch's ctypes arguments are built once (and again only
when `update` changes it), so a replay is one native call per kernel. A decode step of a small LLM is hundreds of short
kernels, where building the arguments and walking the engine's per-kernel bookkeeping cost about as much as the kernels."""
from __future__ import annotations

import ctypes
from collections.abc import Callable

from tinygrad.device.plugin import KernelLaunch

from tinygrad_backend_cpu.threadpool import run_parallel


def _prepared(launch: KernelLaunch) -> Callable[[], None]:
  """A call with no arguments that runs the launch (its thread count is global_size[0], as CPUProgram.__call__ reads it)."""
  fxn = getattr(launch.program, "fxn", None)  # a CPUProgram's native entry point
  if fxn is None: raise NotImplementedError("a CPU graph holds only CPU kernels")
  args = (*(ctypes.c_void_p(b.addr) for b in launch.bufs), *(ctypes.c_int32(v) for v in launch.vals))
  if (threads := launch.global_size[0]) > 1:
    per_thread = [(*args, ctypes.c_int32(core_id)) for core_id in range(threads)]
    return lambda: run_parallel(lambda core_id: fxn(*per_thread[core_id]), threads)
  return lambda: fxn(*args)


class CPUGraph:
  """The launches in order, each a prepared call."""

  def __init__(self, launches: list[KernelLaunch]):
    self.calls = [_prepared(launch) for launch in launches]

  def update(self, i: int, launch: KernelLaunch) -> None: self.calls[i] = _prepared(launch)

  def __call__(self) -> None:
    for call in self.calls: call()
