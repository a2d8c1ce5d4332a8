"""MOCKKFD's SDMA engine: on each doorbell it decodes the ring from the read pointer to the doorbell's write pointer,
checks every packet and does what it says on the mock's memory.

Packets (sdma.py has their formats and sources): NOP (a zero dword), COPY_LINEAR (count + 1 bytes; source and
destination each inside one allocation mapped to this queue's GPU), FENCE (a dword written to 4-byte aligned mapped
memory), POLL_REGMEM (memory polls only; the mock runs packets in order, so the condition must already hold or it never
would), TRAP (its interrupt context must be an event: KFD signals it). Anything else, a packet cut off by the write
pointer, or a wrong address or size is an SDMAError naming the queue, the packet's byte offset and the field.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from tinygrad_backend_amd import sdma

if TYPE_CHECKING:
  from tinygrad_backend_amd.mockkfd import MockKFD, Queue

_POLL_FUNCS = {0: lambda m, v: True, 1: lambda m, v: m < v, 2: lambda m, v: m <= v, 3: lambda m, v: m == v, 4: lambda m, v: m != v,
               5: lambda m, v: m >= v, 6: lambda m, v: m > v}


class SDMAError(RuntimeError):
  """A malformed SDMA packet or a copy outside mapped memory."""


class SDMAProcessor:
  def __init__(self, kfd: MockKFD, queue: Queue):
    self.kfd, self.q = kfd, queue
    self.error: SDMAError | None = None
    self.copied = 0  # bytes moved (tests count them)

  def _u64(self, addr: int) -> ctypes.c_uint64: return ctypes.c_uint64.from_address(addr)

  def _err(self, pos: int, msg: str) -> SDMAError: return SDMAError(f"SDMA queue {self.q.queue_id}, packet at byte {pos}: {msg}")

  def ring(self, wptr: int) -> None:
    if self.error is not None: raise SDMAError(f"SDMA queue {self.q.queue_id} stopped at an earlier error and runs nothing more: {self.error}")
    read = self._u64(self.q.read_ptr)
    if wptr != self._u64(self.q.write_ptr).value: raise SDMAError(f"SDMA queue {self.q.queue_id}: doorbell {wptr:#x} differs from the write pointer in memory")
    if wptr % 4 or wptr < read.value or wptr - read.value > self.q.ring_size:
      raise SDMAError(f"SDMA queue {self.q.queue_id}: write pointer {wptr:#x} is not a dword offset within one ring ahead of the read pointer {read.value:#x}")
    while read.value < wptr:
      try: read.value += 4 * self._packet(read.value, wptr)
      except SDMAError as e:
        self.error = e
        raise

  def _dwords(self, pos: int, n: int, end: int) -> list[int]:
    if pos + 4 * n > end: raise self._err(pos, f"the packet needs {n} dwords, but the write pointer ends it after {(end - pos) // 4}")
    return [ctypes.c_uint32.from_address(self.q.ring + (pos + 4 * i) % self.q.ring_size).value for i in range(n)]

  def _mapped(self, pos: int, what: str, addr: int, size: int) -> None:
    a = self.kfd.find(addr, size)
    if a is None or self.q.gpu_id not in a.gpus:
      raise self._err(pos, f"{what} {addr:#x}+{size:#x} is not inside one allocation mapped to this GPU (a wrong address or size, or a peer's memory not mapped here)")

  def _packet(self, pos: int, end: int) -> int:
    """Run the packet at byte `pos`; its length in dwords."""
    head = self._dwords(pos, 1, end)[0]
    op, sub_op = head & 0xFF, (head >> 8) & 0xFF
    if op == sdma.OP_NOP:
      if head: raise self._err(pos, f"NOP header {head:#x}: we pad with single zero dwords only")
      return 1
    if op not in sdma.DWORDS: raise self._err(pos, f"opcode {op} is not NOP, COPY, FENCE, TRAP or POLL_REGMEM")
    d = self._dwords(pos, sdma.DWORDS[op], end)
    if op == sdma.OP_COPY:
      if sub_op != sdma.SUBOP_COPY_LINEAR: raise self._err(pos, f"COPY sub-op {sub_op}: only COPY_LINEAR (0)")
      n = (d[1] & 0x3FFFFF) + 1
      if d[1] >> 22: raise self._err(pos, f"COPY_LINEAR count {d[1]:#x} has bits above the 22-bit count")
      src, dst = d[3] | d[4] << 32, d[5] | d[6] << 32
      self._mapped(pos, "COPY_LINEAR source", src, n)
      self._mapped(pos, "COPY_LINEAR destination", dst, n)
      ctypes.memmove(dst, src, n)
      self.copied += n
    elif op == sdma.OP_FENCE:
      addr = d[1] | d[2] << 32
      if addr % 4: raise self._err(pos, f"FENCE address {addr:#x} is not 4-byte aligned")
      self._mapped(pos, "FENCE address", addr, 4)
      ctypes.c_uint32.from_address(addr).value = d[3]
    elif op == sdma.OP_POLL_REGMEM:
      func, mem_poll = (head >> 28) & 7, head >> 31
      if not mem_poll: raise self._err(pos, "POLL_REGMEM of a register: we poll memory only (mem_poll bit 31)")
      if func not in _POLL_FUNCS: raise self._err(pos, f"POLL_REGMEM function {func} is not 0-6")
      addr = d[1] | d[2] << 32
      if addr % 4: raise self._err(pos, f"POLL_REGMEM address {addr:#x} is not 4-byte aligned")
      self._mapped(pos, "POLL_REGMEM address", addr, 4)
      mem = ctypes.c_uint32.from_address(addr).value & d[4]
      if not _POLL_FUNCS[func](mem, d[3]):
        raise self._err(pos, f"POLL_REGMEM waits for {addr:#x} (now {mem:#x}) to compare {func} with {d[3]:#x}: nothing before it in the mock will change it")
    elif op == sdma.OP_TRAP:
      ctx = d[1] & 0x0FFFFFFF
      if self.kfd.mailbox(ctx) is None: raise self._err(pos, f"TRAP interrupt context {ctx} is no event's id")
      self.kfd.trigger(ctx)
    return len(d)
