"""TinyJit's launches on the CPU, replayed without the engine: each launch's ctypes arguments are built once (and again only
when `update` changes it), so a replay is one native call per kernel. A decode step of a small LLM is hundreds of short
kernels, where building the arguments and walking the engine's per-kernel bookkeeping cost about as much as the kernels."""
from __future__ import annotations

from collections.abc import Callable

from tinygrad.device.plugin import KernelLaunch


def _prepared(launch: KernelLaunch) -> Callable[[], None]:
  """The launch as a call with no arguments (CPUProgram.prepare; its thread count is global_size[0])."""
  if not hasattr(launch.program, "prepare"): raise NotImplementedError("a CPU graph holds only CPU kernels")
  return launch.program.prepare(launch.bufs, launch.vals, launch.global_size[0])


class CPUGraph:
  """The launches in order, each a prepared call."""

  def __init__(self, launches: list[KernelLaunch]):
    self.calls = [_prepared(launch) for launch in launches]

  def update(self, i: int, launch: KernelLaunch) -> None: self.calls[i] = _prepared(launch)

  def __call__(self) -> None:
    for call in self.calls: call()
