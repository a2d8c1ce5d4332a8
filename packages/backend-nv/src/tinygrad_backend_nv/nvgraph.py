"""TinyJit's device graph on NVK+NV: command buffers built once. Each launch has its QMD and constant bank 0 in memory
the graph owns; a command buffer sends them in order with WAIT_FOR_IDLE between launches (a kernel reads what the one
before wrote). A replay writes one GPFIFO entry pointing at a command buffer, plus the timeline release, and rings the
doorbell once; `update` patches one launch's QMD and constant bank in place (buffers, values, grid).
The GPU writes into a QMD while it runs it (its HW_ONLY_* fields), so a QMD can't be sent again before its launch is done:
the graph keeps two copies of its QMDs and command buffer and alternates, so a replay waits only for the one before the
previous one, and back-to-back replays queue on the GPU as CUDA graphs do."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tinygrad.device.plugin import KernelLaunch

from tinygrad_backend_nv import nv_classes as cls

if TYPE_CHECKING:
  from tinygrad_backend_nv.nvruntime import NVKDevice, NVKProgram

COPIES = 2  # of the QMDs and command buffer: replay n waits only for replay n - 2


class NVKGraph:
  def __init__(self, dev: NVKDevice, launches: list[KernelLaunch]):
    from tinygrad_backend_nv.nvruntime import LAUNCH_SLOT, NVKProgram
    if not launches: raise NotImplementedError("a graph needs at least one kernel")
    if not all(isinstance(lc.program, NVKProgram) and lc.program.dev is dev for lc in launches):
      raise NotImplementedError("an NVK+NV graph holds only this device's kernels")
    self.dev, self.launches = dev, list(launches)
    self.slot_size, self.cmd_size = LAUNCH_SLOT, 64 * len(launches) + 64
    self.slots = dev.alloc(self.slot_size * len(launches) * COPIES, vidmem=False, what="a graph's QMDs and constant buffers")
    self.cmd = dev.alloc(self.cmd_size * COPIES, vidmem=False, what="a graph's command buffers")
    self.qmds = [[0] * len(launches) for _ in range(COPIES)]
    self.entries = [0] * COPIES
    self.done_at = [0] * COPIES  # the timeline value after which each copy's QMDs are free again
    self.replays = 0
    for i, lc in enumerate(launches): self._fill(i, lc)
    self._build()

  def _slot(self, c: int, i: int) -> int: return (c * len(self.launches) + i) * self.slot_size  # copy c's launch i

  def _fill(self, i: int, lc: KernelLaunch) -> None:
    prg: NVKProgram = lc.program  # type: ignore[assignment]
    for c in range(COPIES):
      off = self._slot(c, i)
      self.qmds[c][i] = prg.fill(self.slots.cpu + off, self.slots.va + off, lc.bufs, lc.vals, lc.global_size, lc.local_size, None)  # type: ignore[operator]

  def _build(self) -> None:
    for c in range(COPIES):
      pb = cls.PushBuffer()
      for i, lc in enumerate(self.launches):
        if any(g == 0 for g in lc.global_size): continue  # an empty grid: nothing to launch
        if len(pb.words): pb.inc(cls.SUBC_COMPUTE, cls.WAIT_FOR_IDLE, 0)
        pb.launch(self.qmds[c][i])
      if not pb.words: pb.inc(cls.SUBC_COMPUTE, cls.WAIT_FOR_IDLE, 0)
      data = pb.data()
      self.cmd.view(c * self.cmd_size, len(data))[:] = data
      self.entries[c] = cls.gpfifo_entry(self.cmd.va + c * self.cmd_size, len(data) // 4)

  def update(self, i: int, launch: KernelLaunch) -> None:
    if launch.program is not self.launches[i].program: raise ValueError(f"graph launch {i}: update must keep the program ({self.launches[i].program.name})")  # type: ignore[attr-defined]
    self.dev.synchronize()  # a replay still in flight reads these QMDs and constant buffers
    old = self.launches[i]
    empty_before = any(g == 0 for g in old.global_size)
    if tuple(launch.global_size) == tuple(old.global_size) and tuple(launch.local_size) == tuple(old.local_size):
      # new buffers or values only (decode's position, each token): the params in both copies, QMDs untouched
      prg: NVKProgram = launch.program  # type: ignore[assignment]
      for c in range(COPIES): prg.patch_params(self.slots.cpu + self._slot(c, i), launch.bufs, launch.vals)  # type: ignore[operator]
    else: self._fill(i, launch)
    self.launches[i] = launch
    if empty_before != any(g == 0 for g in launch.global_size): self._build()

  def __call__(self) -> None:
    c = self.replays % COPIES
    self.dev.synchronize(before=self.done_at[c])  # the replay that last sent this copy's QMDs is done
    self.dev.recent.append(f"graph of {len(self.launches)} kernels ({self.launches[0].program.name} .. {self.launches[-1].program.name})")  # type: ignore[attr-defined]
    self.dev.submit(cls.PushBuffer(), prebuilt=(self.entries[c],))
    self.done_at[c], self.replays = self.dev.timeline, self.replays + 1

  def __del__(self) -> None:
    try:
      self.dev.free(self.slots)
      self.dev.free(self.cmd)
    except Exception:  # noqa: BLE001  interpreter shutdown: the device may be gone already
      return
