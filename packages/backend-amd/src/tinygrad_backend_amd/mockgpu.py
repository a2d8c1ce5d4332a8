"""MOCKKFD's packet processor: on each doorbell it checks every AQL packet up to the one the doorbell names and runs it.

A kernel dispatch runs for real: the kernel object must be the descriptor of a kernel in a code-object image loaded in
GPU-mapped memory, whose PYTHON program the mock renderer recorded (mockprograms.py); the arguments are read from the
kernarg buffer at the offsets the code object's metadata gives (pointers, int32 values), the grid and workgroup from the
packet; then core's PYTHON interpreter runs the program on views of the mock memory, with the same WMMA/MFMA lane
emulation (wave32/wave64) as PYTHON::gfx1100 / PYTHON::gfx950. A wrong kernarg layout, grid or address gives wrong numbers
or a PacketError naming the packet and the field.
"""
from __future__ import annotations

import ctypes
import time
from typing import TYPE_CHECKING, Any

from tinygrad_backend_amd import hsa
from tinygrad_backend_amd.loader import KD_SIZE, KernelInfo
from tinygrad_backend_amd.mockprograms import PROGRAMS, image_key

if TYPE_CHECKING:
  from tinygrad_backend_amd.mockkfd import Alloc, MockKFD, Queue


class PacketError(RuntimeError):
  """A malformed AQL packet: the message names the queue, the packet index and what is wrong."""


class AQLProcessor:
  def __init__(self, kfd: MockKFD, queue: Queue):
    self.kfd, self.q = kfd, queue
    self.n = queue.ring_size // hsa.PACKET_SIZE
    self.error: PacketError | None = None

  def _u64(self, addr: int) -> ctypes.c_uint64: return ctypes.c_uint64.from_address(addr)

  def ring(self, last: int) -> None:
    """The doorbell says packets up to index `last` are written: process them in order."""
    if self.error is not None: raise PacketError(f"queue {self.q.queue_id} stopped at an earlier error and runs nothing more: {self.error}")
    write, read = self._u64(self.q.write_ptr), self._u64(self.q.read_ptr)
    if last >= write.value: raise PacketError(f"queue {self.q.queue_id}: doorbell names packet {last}, but the write dispatch id is {write.value}")
    while read.value <= last:
      idx = read.value
      slot = self.q.ring + (idx % self.n) * hsa.PACKET_SIZE
      try: self._packet(idx, slot)
      except PacketError as e:  # like a GPU queue after a fault: it stays stopped
        self.error = e
        raise
      ctypes.c_uint16.from_address(slot).value = hsa.PACKET_TYPE_INVALID << hsa.HEADER_TYPE  # consumed: the slot is free again
      read.value = idx + 1

  def _err(self, idx: int, msg: str) -> PacketError: return PacketError(f"queue {self.q.queue_id}, packet {idx}: {msg}")

  def _mapped(self, idx: int, what: str, addr: int, size: int) -> Alloc:
    a = self.kfd.find(addr, size)
    if a is None or self.q.gpu_id not in a.gpus:
      raise self._err(idx, f"{what} {addr:#x}+{size:#x} is not in memory mapped to this GPU (an unmapped or freed address, one past an allocation's "
                           "end, or another GPU's memory not mapped to this one)")
    return a

  def _packet(self, idx: int, slot: int) -> None:
    head = ctypes.c_uint16.from_address(slot).value
    kind = head & 0xFF
    if kind == hsa.PACKET_TYPE_KERNEL_DISPATCH: self._dispatch(idx, hsa.KernelDispatchPacket.from_address(slot), head)
    elif kind == hsa.PACKET_TYPE_BARRIER_AND:
      pkt = hsa.BarrierAndPacket.from_address(slot)
      for dep in pkt.dep_signal:
        if dep and self._mapped(idx, "barrier dependency signal", dep, hsa.SIGNAL_SIZE) and hsa.AmdSignal.from_address(dep).value > 0:
          raise self._err(idx, f"barrier waits on signal {dep:#x}, which nothing will complete (the mock runs packets in order)")
      self._complete(idx, pkt.completion_signal, time.perf_counter_ns(), time.perf_counter_ns())
    elif kind == hsa.PACKET_TYPE_INVALID: raise self._err(idx, "header type is INVALID: the doorbell was rung before the packet's header was written")
    else: raise self._err(idx, f"header type {kind} is not a kernel dispatch (2) or barrier-AND (3) packet")

  def _dispatch(self, idx: int, pkt: hsa.KernelDispatchPacket, head: int) -> None:
    # header: both fences must reach at least the agent, and the release system-wide for the host to see the results
    acquire, release = (head >> hsa.HEADER_ACQUIRE_FENCE_SCOPE) & 3, (head >> hsa.HEADER_RELEASE_FENCE_SCOPE) & 3
    if acquire == hsa.FENCE_SCOPE_NONE: raise self._err(idx, "acquire fence scope is NONE: the kernel may read stale memory")
    if release != hsa.FENCE_SCOPE_SYSTEM: raise self._err(idx, f"release fence scope is {release}, not SYSTEM (2): the host may not see the results")
    if not head >> hsa.HEADER_BARRIER & 1: raise self._err(idx, "barrier bit is clear: the dispatch may overlap the previous one, which our runtime never asks for")
    dims = pkt.setup & 3
    if dims not in (1, 2, 3): raise self._err(idx, f"setup names {dims} grid dimensions, expected 1-3")
    wg = (pkt.workgroup_size_x, pkt.workgroup_size_y, pkt.workgroup_size_z)
    grid = (pkt.grid_size_x, pkt.grid_size_y, pkt.grid_size_z)
    for d in range(3):
      if wg[d] < 1 or grid[d] < 1: raise self._err(idx, f"dimension {'xyz'[d]}: workgroup size {wg[d]} and grid size {grid[d]} must be >= 1")
      if d >= dims and (wg[d] != 1 or grid[d] != 1): raise self._err(idx, f"setup says {dims} dimension(s), but dimension {'xyz'[d]} has workgroup {wg[d]}, grid {grid[d]}")
      if grid[d] % wg[d]: raise self._err(idx, f"dimension {'xyz'[d]}: grid size {grid[d]} is not a multiple of the workgroup size {wg[d]} (grid sizes count work-items)")
    info, program = self._kernel(idx, pkt.kernel_object)
    threads = wg[0] * wg[1] * wg[2]
    if threads > info.max_workgroup: raise self._err(idx, f"kernel {info.name}: workgroup of {threads} work-items, its code object allows {info.max_workgroup}")
    kd_group = ctypes.c_uint32.from_address(pkt.kernel_object).value
    if pkt.group_segment_size < kd_group: raise self._err(idx, f"kernel {info.name}: group segment {pkt.group_segment_size} bytes, its descriptor needs {kd_group}")
    if pkt.kernarg_address % info.kernarg_align: raise self._err(idx, f"kernarg address {pkt.kernarg_address:#x} is not {info.kernarg_align}-byte aligned")
    self._mapped(idx, "kernarg buffer", pkt.kernarg_address, max(info.kernarg_size, 1))
    if pkt.completion_signal: self._signal(idx, pkt.completion_signal)
    bufs, vals = self._args(idx, info, pkt.kernarg_address)
    start = time.perf_counter_ns()
    program(*bufs, global_size=tuple(g // w for g, w in zip(grid, wg)), local_size=wg, vals=tuple(vals))
    self._complete(idx, pkt.completion_signal, start, time.perf_counter_ns())

  def _kernel(self, idx: int, kernel_object: int) -> tuple[KernelInfo, Any]:
    a = self._mapped(idx, "kernel object", kernel_object, KD_SIZE)
    if not a.flags & (1 << 30): raise self._err(idx, f"kernel object {kernel_object:#x} is in memory not allocated EXECUTABLE")
    key = image_key(self.kfd.view(a.va, a.size).tobytes())  # the allocation is the image padded to whole pages
    if (kernels := PROGRAMS.kernels(key)) is None:
      raise self._err(idx, f"kernel object {kernel_object:#x} points into memory that holds no code object the mock renderer recorded "
                           "(a wrong kernel object address, an overwritten program, or a kernel not rendered for MOCKKFD+AMD)")
    off = kernel_object - a.va
    match = [(name, info) for name, (info, _) in kernels.items() if info.kd_offset == off]
    if not match: raise self._err(idx, f"kernel object {kernel_object:#x} is offset {off:#x} into a code object, where no kernel descriptor is")
    name, info = match[0]
    kd_kernarg = ctypes.c_uint32.from_address(kernel_object + 8).value  # kernel_descriptor_t.kernarg_size
    if kd_kernarg != info.kernarg_size: raise self._err(idx, f"kernel {name}: its descriptor says {kd_kernarg} kernarg bytes, its metadata {info.kernarg_size}")
    return info, PROGRAMS.load(key, name)

  def _signal(self, idx: int, addr: int) -> None:
    self._mapped(idx, "completion signal", addr, hsa.SIGNAL_SIZE)
    if addr % 64: raise self._err(idx, f"completion signal {addr:#x} is not 64-byte aligned")
    sig = hsa.AmdSignal.from_address(addr)
    if sig.kind != hsa.AMD_SIGNAL_KIND_USER: raise self._err(idx, f"completion signal {addr:#x} has kind {sig.kind}, not a user signal (1)")
    if sig.value <= 0: raise self._err(idx, f"completion signal {addr:#x} is {sig.value} before the dispatch: the host can't wait on it")

  def _args(self, idx: int, info: KernelInfo, base: int) -> tuple[list[memoryview], list[int]]:
    """The kernel's explicit arguments, where the code object's metadata puts them: buffers as views to the end of the
    allocation they point into, by-value int32s."""
    bufs, vals = [], []
    for n, arg in enumerate(info.args):
      if arg.kind == "global_buffer":
        ptr = ctypes.c_uint64.from_address(base + arg.offset).value
        a = self._mapped(idx, f"kernel {info.name} argument {n} (a buffer pointer)", ptr, 1)
        bufs.append(self.kfd.view(ptr, a.va + a.size - ptr))
      elif arg.kind == "by_value":
        if arg.size != 4: raise self._err(idx, f"kernel {info.name} argument {n}: a {arg.size}-byte value; our kernels pass int32")
        vals.append(ctypes.c_int32.from_address(base + arg.offset).value)
      elif not arg.kind.startswith("hidden_"): raise self._err(idx, f"kernel {info.name} argument {n}: value kind {arg.kind!r} is not one our kernels use")
    return bufs, vals

  def _complete(self, idx: int, addr: int, start: int, end: int) -> None:
    if not addr: return
    self._mapped(idx, "completion signal", addr, hsa.SIGNAL_SIZE)
    sig = hsa.AmdSignal.from_address(addr)
    # the timestamps in the GPU's 100 MHz ticks, like the packet processor writes them with profiling on
    sig.start_ts, sig.end_ts = start * hsa.TIMESTAMP_HZ // 10**9, end * hsa.TIMESTAMP_HZ // 10**9
    sig.value -= 1
    if sig.event_mailbox_ptr:  # the CP writes the event id to the mailbox and interrupts: KFD signals the event
      if self.kfd.mailbox(sig.event_id) != sig.event_mailbox_ptr:
        raise self._err(idx, f"completion signal {addr:#x}: event mailbox {sig.event_mailbox_ptr:#x} is not the mailbox of an event with id {sig.event_id}")
      ctypes.c_uint64.from_address(sig.event_mailbox_ptr).value = sig.event_id
      self.kfd.trigger(sig.event_id)
