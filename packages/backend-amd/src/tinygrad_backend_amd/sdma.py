"""SDMA: the GPU's copy engine, fed by a ring of SDMA packets (KFD_IOC_QUEUE_TYPE_SDMA), and the packets we use.

Packet formats from ROCm's ROCR-Runtime (github:ROCm/ROCR-Runtime, runtime/hsa-runtime/core/inc/sdma_registers.h:
SDMA_PKT_COPY_LINEAR, SDMA_PKT_FENCE, SDMA_PKT_POLL_REGMEM, SDMA_PKT_TRAP), and how ROCR drives an SDMA v4+ engine
(gfx9 and later, all our archs) from runtime/core/runtime/amd_blit_sdma.cpp (BlitSdmaV4/V5): the read/write pointers
and the doorbell are 64-bit byte offsets into the ring that only grow; a linear copy's count is bytes - 1 (22 bits:
at most 0x3fffe0 bytes per packet); a fence's mtype is 3 on gfx10+.

A copy here is: POLL_REGMEM until the compute queue's last completion signal reads 0 (so the copy never overtakes a
kernel), COPY_LINEAR packets, a FENCE that writes 0 to the copy's completion signal (an amd_signal_t like a dispatch's:
the host waits on it the same way), and where the signal has an event mailbox, a FENCE of its event id there and a TRAP
(the interrupt that wakes a KFD WAIT_EVENTS). Never run on an AMD GPU: only MOCKKFD has consumed these packets.
"""
from __future__ import annotations

import ctypes
import struct
import time
from typing import TYPE_CHECKING

from tinygrad_backend_amd import hsa
from tinygrad_backend_amd import kfd_ioctl as kfd

if TYPE_CHECKING:
  from tinygrad_backend_amd.runtime import AMDDevice

OP_NOP, OP_COPY, OP_FENCE, OP_TRAP, OP_POLL_REGMEM = 0, 1, 5, 6, 8
SUBOP_COPY_LINEAR = 0
MAX_COPY = 0x3FFFE0          # SDMA_PKT_COPY_LINEAR::kMaxSize_ (22-bit count of bytes - 1, kept 32-byte aligned)
POLL_FUNC_EQUAL = 3          # POLL_REGMEM func: (mem & mask) == value
FENCE_MTYPE_GFX10 = 3        # ROCR's BuildFenceCommand: mtype 3 on gfx10+ (uncached), 0 before
RING_BYTES = 64 * 1024
DWORDS = {OP_COPY: 7, OP_FENCE: 4, OP_TRAP: 2, OP_POLL_REGMEM: 6}  # packet sizes (NOP: 1)


def _lo_hi(addr: int) -> tuple[int, int]: return addr & 0xFFFFFFFF, addr >> 32


def copy_linear(dst: int, src: int, nbytes: int) -> list[int]:
  if not 0 < nbytes <= MAX_COPY: raise ValueError(f"one COPY_LINEAR moves 1..{MAX_COPY:#x} bytes, not {nbytes:#x}")
  return [OP_COPY | SUBOP_COPY_LINEAR << 8, nbytes - 1, 0, *_lo_hi(src), *_lo_hi(dst)]


def fence(addr: int, value: int, mtype: int = FENCE_MTYPE_GFX10) -> list[int]:
  return [OP_FENCE | mtype << 16, *_lo_hi(addr), value & 0xFFFFFFFF]


def poll_regmem(addr: int, value: int, mask: int = 0xFFFFFFFF) -> list[int]:
  # mem_poll (bit 31): poll memory, not a register; retry_count 0xfff: forever, every 4 (interval) clocks
  return [OP_POLL_REGMEM | POLL_FUNC_EQUAL << 28 | 1 << 31, *_lo_hi(addr), value, mask, 4 | 0xFFF << 16]


def trap(int_ctx: int) -> list[int]: return [OP_TRAP, int_ctx & 0x0FFFFFFF]


def copy_packets(dst: int, src: int, nbytes: int) -> list[int]:
  out: list[int] = []
  for off in range(0, nbytes, MAX_COPY): out += copy_linear(dst + off, src + off, min(MAX_COPY, nbytes - off))
  return out


class SDMAQueue:
  """One SDMA ring of a device. Submits dword streams; the host-side byte pointers are 64-bit and monotonic."""

  def __init__(self, dev: AMDDevice):
    from tinygrad_backend_amd.runtime import GTT
    self.dev = dev
    self.ring = dev.alloc(RING_BYTES, GTT)
    self.ptrs = dev.alloc(4096, GTT)  # read pointer at +0, write pointer at +8 (the engine reads/writes them)
    self.rptr, self.wptr_mem = ctypes.c_uint64.from_address(self.ptrs.va), ctypes.c_uint64.from_address(self.ptrs.va + 8)
    q = kfd.kfd_ioctl_create_queue_args(ring_base_address=self.ring.va, ring_size=self.ring.size, gpu_id=dev.node.gpu_id,
                                        queue_type=kfd.KFD_IOC_QUEUE_TYPE_SDMA, queue_percentage=kfd.KFD_MAX_QUEUE_PERCENTAGE,
                                        queue_priority=7, write_pointer_address=self.ptrs.va + 8, read_pointer_address=self.ptrs.va)
    dev.iface.ioctl(dev.kfd, kfd.AMDKFD_IOC_CREATE_QUEUE, q)
    self.queue_id = q.queue_id
    self.doorbell = dev.doorbell_at(q.doorbell_offset)
    self.wptr = 0

  def submit(self, dwords: list[int]) -> None:
    """Write the stream at the write pointer (NOP dwords pad to the ring's start where it would wrap), then publish the
    write pointer and ring the doorbell with it."""
    data = struct.pack(f"<{len(dwords)}I", *dwords)
    if len(data) > RING_BYTES // 2: raise ValueError(f"an SDMA submission of {len(data)} bytes; the ring holds {RING_BYTES}")
    pos = self.wptr % RING_BYTES
    if pos + len(data) > RING_BYTES: data = bytes(RING_BYTES - pos) + data  # NOP (op 0, one dword each) to the end
    deadline = time.monotonic() + 30.0
    while self.wptr + len(data) - self.rptr.value > RING_BYTES:
      if time.monotonic() > deadline: raise RuntimeError(f"{self.dev.device}: the SDMA ring stayed full for 30 s")
    p = self.wptr % RING_BYTES
    first = min(len(data), RING_BYTES - p)
    ctypes.memmove(self.ring.va + p, data[:first], first)
    if first < len(data): ctypes.memmove(self.ring.va, data[first:], len(data) - first)
    self.wptr += len(data)
    self.wptr_mem.value = self.wptr
    self.dev.iface.write_doorbell(self.doorbell, self.wptr)

  def copy(self, dst: int, src: int, nbytes: int, signal: int, after: int = 0) -> None:
    """Copy nbytes GPU address to GPU address; `signal` (an amd_signal_t at value 1) reads 0 when done. `after`: a
    compute completion signal the copy waits for (0: none)."""
    sig = hsa.AmdSignal.from_address(signal)
    stream = poll_regmem(after + hsa.AmdSignal.value.offset, 0) if after else []
    stream += copy_packets(dst, src, nbytes) + fence(signal + hsa.AmdSignal.value.offset, 0)
    if sig.event_mailbox_ptr: stream += fence(sig.event_mailbox_ptr, sig.event_id) + trap(sig.event_id)
    self.submit(stream)
