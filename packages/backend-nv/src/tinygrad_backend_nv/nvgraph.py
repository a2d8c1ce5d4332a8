"""TinyJit's device graph on NVK+NV: command buffers built once. Each launch has its QMD and constant bank 0 in memory
the graph owns; a command buffer sends them in order with WAIT_FOR_IDLE between launches (a kernel reads what the one
before wrote). A replay writes one GPFIFO entry pointing at a command buffer, plus the timeline release, and rings the
doorbell once. The GPU writes into a QMD while it runs it (its HW_ONLY_* fields), so a QMD can't be sent again before its
launch is done: the graph keeps two copies of its QMDs and command buffer and alternates, so a replay waits only for the one
before the previous one, and back-to-back replays queue on the GPU as CUDA graphs do.
`update` (new buffers, values or grid for one launch: a decode step's position, each token) only records the launch; each
copy is patched just before the replay that sends it, after that copy's previous replay is done. So an update never waits
for the GPU: the replay in flight reads the other copy (an update that waited for the whole queue, as before, kept decode
steps from overlapping with the host's work on the next one)."""
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
    # per copy: launches updated since the copy was last sent (index -> whether its QMD must be rewritten, not only its params),
    # and whether its command buffer must be rebuilt (a launch's grid became empty or stopped being empty)
    self.stale: list[dict[int, bool]] = [{} for _ in range(COPIES)]
    self.rebuild = [False] * COPIES
    self.replays = 0
    for c in range(COPIES):
      for i in range(len(launches)): self._fill(c, i)
      self._build(c)

  def _slot(self, c: int, i: int) -> int: return (c * len(self.launches) + i) * self.slot_size  # copy c's launch i

  def _fill(self, c: int, i: int) -> None:
    lc, off = self.launches[i], self._slot(c, i)
    prg: NVKProgram = lc.program  # type: ignore[assignment]
    self.qmds[c][i] = prg.fill(self.slots.cpu + off, self.slots.va + off, lc.bufs, lc.vals, lc.global_size, lc.local_size, None)  # type: ignore[operator]

  def _build(self, c: int) -> None:
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
    old = self.launches[i]
    # same grid and block: new buffers or values only, the params; else the whole QMD
    new_qmd = tuple(launch.global_size) != tuple(old.global_size) or tuple(launch.local_size) != tuple(old.local_size)
    empty_changed = any(g == 0 for g in old.global_size) != any(g == 0 for g in launch.global_size)
    self.launches[i] = launch
    for c in range(COPIES):
      self.stale[c][i] = self.stale[c].get(i, False) or new_qmd
      self.rebuild[c] = self.rebuild[c] or empty_changed

  def _refresh(self, c: int) -> None:
    """Bring copy c up to date with the launches (called once its previous replay is done)."""
    for i, new_qmd in self.stale[c].items():
      if new_qmd: self._fill(c, i)
      else:
        lc = self.launches[i]
        prg: NVKProgram = lc.program  # type: ignore[assignment]
        prg.patch_params(self.slots.cpu + self._slot(c, i), lc.bufs, lc.vals)  # type: ignore[operator]
    self.stale[c].clear()
    if self.rebuild[c]:
      self._build(c)
      self.rebuild[c] = False

  def __call__(self) -> None:
    c = self.replays % COPIES
    self.dev.synchronize(before=self.done_at[c])  # the replay that last sent this copy's QMDs is done
    if self.stale[c] or self.rebuild[c]: self._refresh(c)
    self.dev.recent.append(f"graph of {len(self.launches)} kernels ({self.launches[0].program.name} .. {self.launches[-1].program.name})")  # type: ignore[attr-defined]
    self.dev.submit(cls.PushBuffer(), prebuilt=(self.entries[c],))
    self.done_at[c], self.replays = self.dev.timeline, self.replays + 1

  def __del__(self) -> None:
    try:
      self.dev.free(self.slots)
      self.dev.free(self.cmd)
    except Exception:  # noqa: BLE001  interpreter shutdown: the device may be gone already
      return
