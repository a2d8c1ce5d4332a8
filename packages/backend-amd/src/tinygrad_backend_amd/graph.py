"""TinyJit's device graph on the AMD queue: a command buffer of AQL dispatch packets built once, with each launch's
kernargs in memory the graph owns. A replay copies the packets into the ring and rings the doorbell once; `update`
patches one launch's kernargs (buffers, values) and its packet's grid in place."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tinygrad.device.plugin import KernelLaunch

from tinygrad_backend_amd import hsa

if TYPE_CHECKING:
  from tinygrad_backend_amd.runtime import AMDDevice, AMDProgram


class AMDGraph:
  def __init__(self, dev: AMDDevice, launches: list[KernelLaunch]):
    from tinygrad_backend_amd.runtime import GTT, AMDProgram, round_up
    if not all(isinstance(lc.program, AMDProgram) and lc.program.dev is dev for lc in launches):
      raise NotImplementedError("an AMD graph holds only this device's kernels")
    self.dev, self.launches = dev, list(launches)
    self.offsets, off = [], 0
    for lc in launches:
      prg: AMDProgram = lc.program  # type: ignore[assignment]
      off = round_up(off, max(prg.info.kernarg_align, 16))
      self.offsets.append(off)
      off += prg.info.kernarg_size
    self.kernargs = dev.alloc(off, GTT)
    self.packets: list[hsa.KernelDispatchPacket] = []
    for i, lc in enumerate(launches):
      self.packets.append(hsa.KernelDispatchPacket())
      self.update(i, lc)

  def update(self, i: int, launch: KernelLaunch) -> None:
    prg: AMDProgram = launch.program  # type: ignore[assignment]
    self.dev.synchronize()  # a replay still in flight reads these kernargs
    if prg is not self.launches[i].program: raise ValueError(f"graph launch {i}: update must keep the program ({self.launches[i].program.name})")  # type: ignore[attr-defined]
    addr = self.kernargs.va + self.offsets[i]
    prg.fill_kernargs(addr, launch.bufs, launch.vals)
    self.packets[i] = self.dev.dispatch_packet(prg, addr, launch.global_size, launch.local_size, 0)
    self.launches[i] = launch

  def __call__(self) -> None:
    # the previous replay must have read its kernargs before an update may change them: replays are serialized by the
    # last packet's completion signal, which the next replay's packets wait behind (barrier bit)
    self.dev.synchronize()
    signal = self.dev._signal()
    pkts = [hsa.KernelDispatchPacket.from_buffer_copy(bytes(p)) for p in self.packets]
    if pkts: pkts[-1].completion_signal = signal
    self.dev.submit(pkts)
    self.dev.last_signal = signal

  def __del__(self) -> None:
    try: self.dev.free(self.kernargs)
    except Exception:  # noqa: BLE001  interpreter shutdown: the device may be gone already
      return
