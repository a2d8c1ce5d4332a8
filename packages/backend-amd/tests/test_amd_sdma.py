"""SDMA copies and KFD signal events on MOCKKFD: the runtime's copies to, from and between GPUs are SDMA packet streams
the mock decodes, checks and executes; completion signals carry an event mailbox the mock's packet processors write."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from tinygrad import Device, Tensor
from tinygrad.helpers import Context
from tinygrad_backend_amd import hsa, sdma
from tinygrad_backend_amd import kfd_ioctl as kfd
from tinygrad_backend_amd.mockkfd import MockKFD
from tinygrad_backend_amd.mocksdma import SDMAError
from tinygrad_backend_amd.runtime import GTT, STAGING, VRAM, AMDDevice


@pytest.fixture
def dev():
  return AMDDevice(MockKFD("gfx1100"), 0, "")


def _copied(dev: AMDDevice) -> int: return dev.iface.queues[dev.sdma.queue_id].processor.copied  # type: ignore[attr-defined]


def test_copies_in_and_out_go_through_sdma(dev):
  """A buffer bigger than the staging buffer goes in and out in STAGING-sized COPY_LINEAR chunks, all through the engine."""
  n = STAGING + STAGING // 2 + 12
  data = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
  buf = dev.allocator.alloc(n)
  before = _copied(dev)
  dev.allocator.copyin(buf, memoryview(data))
  out = memoryview(bytearray(n))
  dev.allocator.copyout(out, buf)
  assert _copied(dev) - before == 2 * n
  np.testing.assert_array_equal(np.frombuffer(out, np.uint8), data)


def test_tensor_roundtrip_on_the_mock_uses_sdma():
  with Context(DEV="MOCKKFD+AMD"):
    before = _copied(Device["AMD"])
    x = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal((Tensor(x) * 2).numpy(), x * 2)
    assert _copied(Device["AMD"]) - before >= 2 * x.nbytes


def test_copy_after_a_kernel_polls_its_signal(dev):
  """The copy's stream starts with POLL_REGMEM on the last dispatch's completion signal; one still at 1 would never
  change in the in-order mock: a clear error, not a hang."""
  dev.last_signal = dev._signal()  # a dispatch that never ran: its signal stays 1
  buf = dev.allocator.alloc(64)
  with pytest.raises(SDMAError, match="POLL_REGMEM waits for .* \\(now 0x1\\) to compare 3 with 0x0"): dev.allocator.copyin(buf, memoryview(bytes(64)))


def test_many_copies_after_a_dispatch(dev):
  """More copies than there are signal slots after one finished dispatch: the slot of that dispatch's signal is taken
  again by a copy, which must not poll its own (reset) signal."""
  from tinygrad_backend_amd.runtime import N_SIGNALS
  dev.last_signal = dev._signal()
  hsa.AmdSignal.from_address(dev.last_signal).value = 0  # the dispatch finished
  buf = dev.allocator.alloc(64)
  for i in range(N_SIGNALS + 8): dev.allocator.copyin(buf, memoryview(bytes([i]) * 64))
  out = memoryview(bytearray(64))
  dev.allocator.copyout(out, buf)
  assert bytes(out) == bytes([N_SIGNALS + 7]) * 64


def _stream(dev, dwords):
  dev.sdma.submit(dwords)


@pytest.mark.parametrize("case, match", [
  ("dst_past_end", "COPY_LINEAR destination 0x[0-9a-f]+\\+0x2000 is not inside one allocation"),
  ("src_unmapped", "COPY_LINEAR source 0x1000\\+0x10 is not inside one allocation"),
  ("opcode", "opcode 7 is not NOP, COPY, FENCE, TRAP or POLL_REGMEM"),
  ("subop", "COPY sub-op 4: only COPY_LINEAR"),
  ("fence_align", "FENCE address 0x[0-9a-f]+ is not 4-byte aligned"),
  ("trap", "TRAP interrupt context 999 is no event's id"),
  ("truncated", "the packet needs 7 dwords, but the write pointer ends it after 3"),
])
def test_bad_packets_are_caught(dev, case, match):
  a, b = dev.alloc(4096, VRAM), dev.alloc(8192, VRAM)
  stream = {"dst_past_end": sdma.copy_linear(a.va, b.va, 8192), "src_unmapped": sdma.copy_linear(a.va, 0x1000, 16),
            "opcode": [7, 0, 0, 0], "subop": [sdma.OP_COPY | 4 << 8, 0, 0, 0, 0, 0, 0], "fence_align": sdma.fence(a.va + 2, 1),
            "trap": sdma.trap(999), "truncated": sdma.copy_linear(a.va, b.va, 16)[:3]}[case]
  with pytest.raises(SDMAError, match=match): _stream(dev, stream)
  with pytest.raises(SDMAError, match="stopped at an earlier error"): _stream(dev, sdma.fence(a.va, 1))


def test_copy_packets_move_exactly_count_plus_one_bytes(dev):
  src, dst = dev.alloc(4096, GTT), dev.alloc(4096, GTT)
  src.view(0, 4096)[:] = bytes(range(256)) * 16
  _stream(dev, sdma.copy_linear(dst.va + 1, src.va + 3, 100) + sdma.fence(dst.va + 200, 0xABCD1234))
  got = bytes(dst.view(0, 208))
  assert got[0] == 0 and got[1:101] == bytes(range(3, 103)) and got[101] == 0
  assert int.from_bytes(got[200:204], "little") == 0xABCD1234


def test_the_ring_wraps(dev):
  """More bytes of packets than the ring holds: the runtime pads to the ring's end with NOPs and the engine follows."""
  src, dst = dev.alloc(4096, GTT), dev.alloc(4096, GTT)
  i = 0
  while dev.sdma.wptr < sdma.RING_BYTES + 4096:
    i += 1
    ctypes.c_uint32.from_address(src.va).value = i
    sig = dev._signal()
    dev.sdma.copy(dst.va, src.va, 4, sig)
    dev._wait(sig)
    assert ctypes.c_uint32.from_address(dst.va).value == i


# ---- events

def test_completion_signals_carry_the_event_mailbox(dev):
  """Each signal names the device's signal event: a copy's FENCE + TRAP (and a dispatch's completion, see mockgpu) write
  the event id to the mailbox and set the event, so WAIT_EVENTS returns COMPLETE (then auto-resets)."""
  sig_addr = dev._signal()
  sig = hsa.AmdSignal.from_address(sig_addr)
  assert sig.event_mailbox_ptr == dev.event_mailbox and sig.event_id == dev.event_trigger
  buf = dev.alloc(4096, GTT)
  dev.sdma.copy(buf.va, buf.va + 64, 64, sig_addr)
  assert sig.value == 0 and ctypes.c_uint64.from_address(dev.event_mailbox).value == dev.event_trigger
  data = kfd.kfd_event_data(event_id=dev.event_id)
  args = kfd.kfd_ioctl_wait_events_args(events_ptr=ctypes.addressof(data), num_events=1, wait_for_all=1, timeout=10)
  dev.iface.ioctl(dev.kfd, kfd.AMDKFD_IOC_WAIT_EVENTS, args)
  assert args.wait_result == kfd.KFD_IOC_WAIT_RESULT_COMPLETE
  with pytest.raises(OSError, match="that nothing has signaled"): dev.iface.ioctl(dev.kfd, kfd.AMDKFD_IOC_WAIT_EVENTS, args)


def test_dispatch_completion_sets_the_event():
  with Context(DEV="MOCKKFD+AMD"):
    d = Device["AMD"]
    (Tensor.ones(16).contiguous() + 1).realize()
    assert d.iface.events[d.event_id].signaled  # set by the kernel's completion (nobody waited: it ran at the doorbell)


def test_wait_on_a_signal_nothing_completes_sleeps_in_wait_events(dev):
  """The runtime's wait on an unfinished signal calls WAIT_EVENTS (instead of spinning); on the mock, where nothing is
  ever in flight, that is an error naming the event."""
  sig = dev._signal()
  with pytest.raises(OSError, match=f"WAIT_EVENTS on event\\(s\\) \\[{dev.event_id}\\] that nothing has signaled"): dev._wait(sig)


def test_event_ioctl_misuse(dev):
  with pytest.raises(OSError, match="signal events \\(0\\) only"):
    dev.iface.ioctl(dev.kfd, kfd.AMDKFD_IOC_CREATE_EVENT, kfd.kfd_ioctl_create_event_args(event_type=kfd.KFD_IOC_EVENT_SIGNAL + 3))
  with pytest.raises(OSError, match="destroy of event 77"): dev.iface.ioctl(dev.kfd, kfd.AMDKFD_IOC_DESTROY_EVENT, kfd.kfd_ioctl_destroy_event_args(event_id=77))
  m = MockKFD("gfx1100")
  fd = m.open("/dev/kfd")
  with pytest.raises(OSError, match="must name the events page"): m.ioctl(fd, kfd.AMDKFD_IOC_CREATE_EVENT, kfd.kfd_ioctl_create_event_args())


# ---- between GPUs

def test_copies_between_gpus_are_sdma_peer_copies():
  """AMD -> AMD:1 on the mock's shared KFD: the source GPU's SDMA engine copies straight into the destination, which
  the runtime mapped to the source GPU (MAP_MEMORY_TO_GPU with the peer's id) first; no host bounce."""
  with Context(DEV="MOCKKFD+AMD"):
    x = np.arange(4096, dtype=np.float32)
    a = Tensor(x).realize()
    src_before, dst_before = _copied(Device["AMD"]), _copied(Device["AMD:1"])
    b = a.to("AMD:1").realize()
    assert _copied(Device["AMD"]) - src_before == x.nbytes and _copied(Device["AMD:1"]) == dst_before
    np.testing.assert_array_equal((b + 1).numpy(), x + 1)


def test_peer_memory_must_be_mapped_to_the_copying_gpu():
  m = MockKFD("gfx1100")
  d0, d1 = AMDDevice(m, 0, ""), AMDDevice(m, 1, "")
  src, dst = d0.alloc(4096, VRAM), d1.alloc(4096, VRAM)
  with pytest.raises(SDMAError, match="COPY_LINEAR destination 0x[0-9a-f]+\\+0x40 is not inside one allocation mapped to this GPU"):
    d0.sdma.copy(dst.va, src.va, 64, d0._signal())
  d2 = AMDDevice(m, 2, "")
  d1.map_to_peer(dst, d2)
  src.view(0, 64)[:] = bytes(range(64))
  d2_src = d2.alloc(4096, VRAM)
  d2_src.view(0, 64)[:] = bytes(range(64))
  sig = d2._signal()
  d2.sdma.copy(dst.va, d2_src.va, 64, sig)
  d2._wait(sig)
  assert bytes(dst.view(0, 64)) == bytes(range(64))
