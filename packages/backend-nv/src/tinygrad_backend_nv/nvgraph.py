"""TinyJit's device graph on NVK+NV: one command buffer built once. Each launch has its QMD and constant bank 0 in memory
the graph owns; the command buffer sends them in order with WAIT_FOR_IDLE between launches (a kernel reads what the one
before wrote). A replay writes one GPFIFO entry pointing at that command buffer, plus the timeline release, and rings the
doorbell once; `update` patches one launch's QMD and constant bank in place (buffers, values, grid)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tinygrad.device.plugin import KernelLaunch

from tinygrad_backend_nv import nv_classes as cls

if TYPE_CHECKING:
  from tinygrad_backend_nv.nvruntime import NVKDevice, NVKProgram


class NVKGraph:
  def __init__(self, dev: NVKDevice, launches: list[KernelLaunch]):
    from tinygrad_backend_nv.nvruntime import LAUNCH_SLOT, NVKProgram
    if not launches: raise NotImplementedError("a graph needs at least one kernel")
    if not all(isinstance(lc.program, NVKProgram) and lc.program.dev is dev for lc in launches):
      raise NotImplementedError("an NVK+NV graph holds only this device's kernels")
    self.dev, self.launches = dev, list(launches)
    self.slots = dev.alloc(LAUNCH_SLOT * len(launches), vidmem=False, what="a graph's QMDs and constant buffers")
    self.cmd = dev.alloc(64 * len(launches) + 64, vidmem=False, what="a graph's command buffer")
    self.qmds = [0] * len(launches)
    self.slot_size = LAUNCH_SLOT
    for i, lc in enumerate(launches): self._fill(i, lc)
    self._build()

  def _fill(self, i: int, lc: KernelLaunch) -> None:
    prg: NVKProgram = lc.program  # type: ignore[assignment]
    off = i * self.slot_size
    self.qmds[i] = prg.fill(self.slots.cpu + off, self.slots.va + off, lc.bufs, lc.vals, lc.global_size, lc.local_size, None)  # type: ignore[operator]

  def _build(self) -> None:
    pb = cls.PushBuffer()
    for i, lc in enumerate(self.launches):
      if any(g == 0 for g in lc.global_size): continue  # an empty grid: nothing to launch
      if len(pb.words): pb.inc(cls.SUBC_COMPUTE, cls.WAIT_FOR_IDLE, 0)
      pb.launch(self.qmds[i])
    if not pb.words: pb.inc(cls.SUBC_COMPUTE, cls.WAIT_FOR_IDLE, 0)
    data = pb.data()
    self.cmd.view(0, len(data))[:] = data
    self.entry = cls.gpfifo_entry(self.cmd.va, len(data) // 4)

  def update(self, i: int, launch: KernelLaunch) -> None:
    if launch.program is not self.launches[i].program: raise ValueError(f"graph launch {i}: update must keep the program ({self.launches[i].program.name})")  # type: ignore[attr-defined]
    self.dev.synchronize()  # a replay still in flight reads these QMDs and constant buffers
    empty_before = any(g == 0 for g in self.launches[i].global_size)
    self._fill(i, launch)
    self.launches[i] = launch
    if empty_before != any(g == 0 for g in launch.global_size): self._build()

  def __call__(self) -> None:
    self.dev.synchronize()  # the GPU writes into QMDs it runs: the previous replay must be done before they are sent again
    self.dev.recent.append(f"graph of {len(self.launches)} kernels ({self.launches[0].program.name} .. {self.launches[-1].program.name})")  # type: ignore[attr-defined]
    self.dev.submit(cls.PushBuffer(), prebuilt=(self.entry,))

  def __del__(self) -> None:
    try:
      self.dev.free(self.slots)
      self.dev.free(self.cmd)
    except Exception:  # noqa: BLE001  interpreter shutdown: the device may be gone already
      return
