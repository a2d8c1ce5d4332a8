"""The AMD device on a KFD interface: GPU memory, an AQL compute queue with completion signals and timestamps, and
code-object programs. Written once against `iface.Interface`, so `KFD+AMD` (/dev/kfd) and `MOCKKFD+AMD` (mockkfd.py)
run this same code; only the mock has ever run it (see the package README).

- Memory: a VA range reserved by an anonymous PROT_NONE mmap, allocated there (ALLOC_MEMORY_OF_GPU), mapped for the host
  through the render node at the offset KFD returns, and mapped to the GPU (MAP_MEMORY_TO_GPU). GPU and host addresses are
  equal. Buffers live in VRAM; copies in and out go through a host-visible staging buffer (GTT) and the SDMA engine
  (sdma.py), copies between two GPUs of one process SDMA directly (the destination mapped to the source GPU too).
- Queue: an AQL ring (one 64-byte packet per dispatch), its amd_queue_t dispatch ids, one completion signal per dispatch
  (amd_signal_t, with start/end timestamps: the queue enables profiling). Signals carry a KFD signal event's mailbox, so
  a wait on an unfinished one sleeps in WAIT_EVENTS (the GPU interrupts) instead of spinning.
- Programs: the code object's load image in executable VRAM, the kernel descriptor's address as the packet's kernel
  object, the kernargs (buffer pointers, then int32 values) in a host-visible ring, sized and aligned by the metadata.
"""
from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinygrad.device.plugin import Allocator, Compiled, KernelLaunch

from tinygrad_backend_amd import hsa
from tinygrad_backend_amd import kfd_ioctl as kfd
from tinygrad_backend_amd.codeobject import check_code_object
from tinygrad_backend_amd.iface import MAP_ANONYMOUS, MAP_FIXED, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED, PROT_NONE, PROT_READ, PROT_WRITE, TOPOLOGY
from tinygrad_backend_amd.loader import KernelInfo, load_code_object
from tinygrad_backend_amd.sdma import SDMAQueue

if TYPE_CHECKING:
  from tinygrad_backend_amd.graph import AMDGraph
  from tinygrad_backend_amd.iface import Interface

PAGE = 4096
RING_PACKETS = 1024
KERNARG_RING = 1 << 20
N_SIGNALS = 64
STAGING = 2 << 20  # host-visible bytes per SDMA copy chunk to or from the host
WAIT_TIMEOUT_S = 30.0
VRAM = kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | kfd.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC | kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
GTT = kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT | kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | kfd.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT


# per KFD interface (a process's KFD): (the interface, the device that made them, events page, event id, trigger data, mailbox)
_EVENTS: dict[int, tuple[Any, AMDDevice, GPUMem, int, int, int]] = {}


def round_up(x: int, a: int) -> int: return (x + a - 1) // a * a


def gfx_name(version: int) -> str:
  """KFD's gfx_target_version (110000, 90402) as an arch name (gfx1100, gfx942)."""
  return f"gfx{version // 10000}{version // 100 % 100:x}{version % 100:x}"


@dataclass(frozen=True)
class GPUNode:
  node: int
  gpu_id: int
  arch: str
  render_minor: int
  cwsr_size: int
  ctl_stack_size: int


def gpu_nodes(iface: Interface) -> list[GPUNode]:
  """The GPUs in KFD's topology (nodes with a gpu_id), in node order."""
  out = []
  for n in sorted(iface.listdir(TOPOLOGY), key=int):
    gpu_id = int(iface.read_text(f"{TOPOLOGY}/{n}/gpu_id").strip() or 0)
    if gpu_id == 0: continue  # a CPU node
    props = dict(line.split() for line in iface.read_text(f"{TOPOLOGY}/{n}/properties").splitlines() if line.strip())
    out.append(GPUNode(int(n), gpu_id, gfx_name(int(props["gfx_target_version"])), int(props["drm_render_minor"]),
                       int(props.get("cwsr_size", 0)), int(props.get("ctl_stack_size", 0))))
  return out


@dataclass(frozen=True)
class GPUMem:
  va: int
  size: int
  handle: int | None = None  # None for a view into another allocation
  base: GPUMem | None = None  # a view's allocation

  def view(self, offset: int, size: int) -> memoryview:
    return memoryview((ctypes.c_char * size).from_address(self.va + offset)).cast("B")


class AMDDevice(Compiled):
  def __init__(self, iface: Interface, index: int, arch: str):
    self.iface = iface
    self.kfd = iface.open("/dev/kfd")
    ver = kfd.kfd_ioctl_get_version_args()
    iface.ioctl(self.kfd, kfd.AMDKFD_IOC_GET_VERSION, ver)
    if ver.major_version != kfd.KFD_IOCTL_MAJOR_VERSION: raise RuntimeError(f"KFD ioctl version {ver.major_version}.{ver.minor_version}, expected 1.x")
    nodes = gpu_nodes(iface)
    if index >= len(nodes): raise RuntimeError(f"{iface.name} has {len(nodes)} AMD GPU(s), no instance {index}")
    self.node = nodes[index]
    if arch and arch != self.node.arch:
      raise RuntimeError(f"AMD:{index} on {iface.name} is a {self.node.arch}, but DEV asks to compile for {arch}: drop the arch (DEV={iface.name}+AMD) or name {self.node.arch}")
    self.drm = iface.open(f"/dev/dri/renderD{self.node.render_minor}")
    iface.ioctl(self.kfd, kfd.AMDKFD_IOC_ACQUIRE_VM, kfd.kfd_ioctl_acquire_vm_args(drm_fd=self.drm, gpu_id=self.node.gpu_id))
    # the queue: ring, amd_queue_t, end-of-pipe buffer, context save area (CWSR) sized as the topology says
    self.ring = self.alloc(RING_PACKETS * hsa.PACKET_SIZE, GTT)
    self.amd_queue = self.alloc(PAGE, GTT)
    ctypes.c_uint32.from_address(self.amd_queue.va + hsa.AMD_QUEUE_PROPERTIES).value = hsa.AMD_QUEUE_PROPERTIES_ENABLE_PROFILING
    self.eop = self.alloc(PAGE, VRAM)
    ctx_size = round_up(self.node.cwsr_size + self.node.ctl_stack_size, PAGE) or PAGE
    self.ctx = self.alloc(ctx_size, VRAM)
    q = kfd.kfd_ioctl_create_queue_args(
      ring_base_address=self.ring.va, ring_size=self.ring.size, gpu_id=self.node.gpu_id, queue_type=kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
      queue_percentage=kfd.KFD_MAX_QUEUE_PERCENTAGE, queue_priority=7, write_pointer_address=self.amd_queue.va + hsa.AMD_QUEUE_WRITE_DISPATCH_ID,
      read_pointer_address=self.amd_queue.va + hsa.AMD_QUEUE_READ_DISPATCH_ID, eop_buffer_address=self.eop.va, eop_buffer_size=self.eop.size,
      ctx_save_restore_address=self.ctx.va, ctx_save_restore_size=self.node.cwsr_size, ctl_stack_size=self.node.ctl_stack_size)
    iface.ioctl(self.kfd, kfd.AMDKFD_IOC_CREATE_QUEUE, q)
    self.queue_id = q.queue_id
    self.doorbell_pages: dict[int, int] = {}
    self.doorbell = self.doorbell_at(q.doorbell_offset)
    self.wptr = 0
    self.signals = self.alloc(N_SIGNALS * hsa.SIGNAL_SIZE, GTT)
    self.sig_next, self.last_signal = 0, 0
    self.kernargs = self.alloc(KERNARG_RING, GTT)
    self.kernarg_off = 0
    self._create_event()
    self.sdma = SDMAQueue(self)
    self.staging = self.alloc(STAGING, GTT)
    self.peers: set[tuple[int, int]] = set()  # (allocation handle, gpu_id) mapped for peer copies
    super().__init__(f"AMD:{index}" if index else "AMD", AMDAllocator(self), self._program, self._graph)

  def doorbell_at(self, offset: int) -> int:
    """The host address of the doorbell at a queue's doorbell offset: its 8 KiB page is mapped from /dev/kfd (once)."""
    page = offset & ~(0x2000 - 1)
    if page not in self.doorbell_pages: self.doorbell_pages[page] = self.iface.mmap(0, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED, self.kfd, page)
    return self.doorbell_pages[page] + (offset - page)

  def _create_event(self) -> None:
    """One auto-reset signal event for every completion signal of every GPU of the process (KFD's events and their page
    are per process: libhsakmt's hsaKmtCreateEvent on a dGPU allocates the page once and names it by handle in the first
    CREATE_EVENT; the event's mailbox is its slot there). The first device creates them, the others map the page too."""
    shared = _EVENTS.get(id(self.iface))
    if shared is not None and shared[0] is self.iface:
      _, owner, self.events_page, self.event_id, self.event_trigger, self.event_mailbox = shared
      owner.map_to_peer(self.events_page, self)  # this GPU writes the mailbox too
      return
    self.events_page = self.alloc(kfd.KFD_SIGNAL_EVENT_LIMIT * 8, GTT | kfd.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED)
    ev = kfd.kfd_ioctl_create_event_args(event_page_offset=self.events_page.handle or 0, event_type=kfd.KFD_IOC_EVENT_SIGNAL, auto_reset=1,
                                         node_id=self.node.node)
    self.iface.ioctl(self.kfd, kfd.AMDKFD_IOC_CREATE_EVENT, ev)
    if ev.event_slot_index >= kfd.KFD_SIGNAL_EVENT_LIMIT: raise RuntimeError(f"KFD gave event slot {ev.event_slot_index}, past the events page")
    self.event_id, self.event_trigger = ev.event_id, ev.event_trigger_data
    self.event_mailbox = self.events_page.va + 8 * ev.event_slot_index
    _EVENTS[id(self.iface)] = (self.iface, self, self.events_page, self.event_id, self.event_trigger, self.event_mailbox)

  # ---- memory
  def alloc(self, size: int, flags: int) -> GPUMem:
    size = round_up(max(size, 1), PAGE)
    va = self.iface.mmap(0, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    args = kfd.kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va, size=size, gpu_id=self.node.gpu_id, flags=flags)
    self.iface.ioctl(self.kfd, kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
    self.iface.mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, self.drm, args.mmap_offset)
    ids = (ctypes.c_uint32 * 1)(self.node.gpu_id)
    self.iface.ioctl(self.kfd, kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU,
                     kfd.kfd_ioctl_map_memory_to_gpu_args(handle=args.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1))
    return GPUMem(va, size, args.handle)

  def map_to_peer(self, mem: GPUMem, peer: AMDDevice) -> None:
    """Map this device's allocation holding `mem` to `peer`'s GPU as well (MAP_MEMORY_TO_GPU with the peer's id), once."""
    alloc = mem.base or mem
    if alloc.handle is None or (alloc.handle, peer.node.gpu_id) in self.peers: return
    ids = (ctypes.c_uint32 * 1)(peer.node.gpu_id)
    self.iface.ioctl(self.kfd, kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU,
                     kfd.kfd_ioctl_map_memory_to_gpu_args(handle=alloc.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1))
    self.peers.add((alloc.handle, peer.node.gpu_id))

  def free(self, mem: GPUMem) -> None:
    if mem.handle is None: return
    self.peers = {p for p in self.peers if p[0] != mem.handle}
    ids = (ctypes.c_uint32 * 1)(self.node.gpu_id)
    self.iface.ioctl(self.kfd, kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
                     kfd.kfd_ioctl_unmap_memory_from_gpu_args(handle=mem.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1))
    self.iface.ioctl(self.kfd, kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU, kfd.kfd_ioctl_free_memory_of_gpu_args(handle=mem.handle))
    self.iface.munmap(mem.va, mem.size)

  def kernarg(self, size: int, align: int) -> int:
    """`size` bytes of the kernarg ring, aligned; when the ring wraps every earlier dispatch must have read its arguments."""
    off = round_up(self.kernarg_off, max(align, 16))
    if off + size > self.kernargs.size:
      self.synchronize()
      off = 0
    self.kernarg_off = off + size
    return self.kernargs.va + off

  # ---- the queue
  def _signal(self) -> int:
    addr = self.signals.va + self.sig_next * hsa.SIGNAL_SIZE
    self.sig_next = (self.sig_next + 1) % N_SIGNALS
    sig = hsa.AmdSignal.from_address(addr)
    if sig.value != 0: self._wait(addr)  # still in flight from N_SIGNALS dispatches ago
    sig.kind, sig.value, sig.start_ts, sig.end_ts = hsa.AMD_SIGNAL_KIND_USER, 1, 0, 0
    sig.event_mailbox_ptr, sig.event_id = self.event_mailbox, self.event_trigger  # the GPU writes the id there, then interrupts
    return addr

  def _wait(self, addr: int) -> None:
    """Until the signal reads 0: sleep in WAIT_EVENTS on the device's event (any completion wakes it; auto-reset), check."""
    sig, deadline = hsa.AmdSignal.from_address(addr), time.monotonic() + WAIT_TIMEOUT_S
    data = kfd.kfd_event_data(event_id=self.event_id)
    while sig.value > 0:
      left = deadline - time.monotonic()
      if left <= 0: raise RuntimeError(f"{self.device}: a dispatch or copy did not complete in {WAIT_TIMEOUT_S:.0f} s (signal at {addr:#x} is {sig.value})")
      args = kfd.kfd_ioctl_wait_events_args(events_ptr=ctypes.addressof(data), num_events=1, wait_for_all=1, timeout=max(1, min(int(left * 1000), 100)))
      self.iface.ioctl(self.kfd, kfd.AMDKFD_IOC_WAIT_EVENTS, args)
      if args.wait_result == kfd.KFD_IOC_WAIT_RESULT_FAIL: raise RuntimeError(f"{self.device}: KFD WAIT_EVENTS failed on event {self.event_id}")

  def sdma_copy(self, dst: int, src: int, nbytes: int) -> None:
    """Copy on the SDMA engine after every kernel submitted so far, and wait for it."""
    after = self.last_signal
    signal = self._signal()
    # a finished dispatch's signal needs no poll; and its slot may be the one just taken (then it was finished)
    if after == signal or (after and hsa.AmdSignal.from_address(after).value == 0): after = 0
    self.sdma.copy(dst, src, nbytes, signal, after=after)
    self._wait(signal)

  def submit(self, packets: Sequence[ctypes.Structure]) -> None:
    """Write the packets to the ring (each header last, so the packet processor never sees half a packet), then ring the
    doorbell once with the last packet's index."""
    if not packets: return
    read_id = ctypes.c_uint64.from_address(self.amd_queue.va + hsa.AMD_QUEUE_READ_DISPATCH_ID)
    for pkt in packets:
      deadline = time.monotonic() + WAIT_TIMEOUT_S
      while self.wptr - read_id.value >= RING_PACKETS:
        if time.monotonic() > deadline: raise RuntimeError(f"{self.device}: the AQL ring stayed full for {WAIT_TIMEOUT_S:.0f} s")
      slot = self.ring.va + (self.wptr % RING_PACKETS) * hsa.PACKET_SIZE
      raw = bytes(pkt)
      ctypes.memmove(slot + 4, raw[4:], hsa.PACKET_SIZE - 4)
      ctypes.c_uint32.from_address(slot).value = int.from_bytes(raw[:4], "little")
      self.wptr += 1
    ctypes.c_uint64.from_address(self.amd_queue.va + hsa.AMD_QUEUE_WRITE_DISPATCH_ID).value = self.wptr
    self.iface.write_doorbell(self.doorbell, self.wptr - 1)

  def dispatch_packet(self, prg: AMDProgram, kernarg: int, global_size: tuple[int, ...], local_size: tuple[int, ...], signal: int) -> hsa.KernelDispatchPacket:
    gs, ls = (tuple(global_size) + (1, 1, 1))[:3], (tuple(local_size) + (1, 1, 1))[:3]
    dims = 3 if gs[2] * ls[2] > 1 else 2 if gs[1] * ls[1] > 1 else 1
    return hsa.KernelDispatchPacket(
      header=hsa.header(hsa.PACKET_TYPE_KERNEL_DISPATCH), setup=dims << hsa.SETUP_DIMENSIONS, workgroup_size_x=ls[0], workgroup_size_y=ls[1],
      workgroup_size_z=ls[2], grid_size_x=gs[0] * ls[0], grid_size_y=gs[1] * ls[1], grid_size_z=gs[2] * ls[2],
      private_segment_size=prg.private_size, group_segment_size=prg.group_size, kernel_object=prg.kernel_object,
      kernarg_address=kernarg, completion_signal=signal)

  def synchronize(self) -> None:
    if self.last_signal: self._wait(self.last_signal)
    self.kernarg_off = 0

  def _program(self, name: str, lib: bytes) -> AMDProgram: return AMDProgram(self, name, lib)

  def _graph(self, launches: list[KernelLaunch]) -> AMDGraph:
    from tinygrad_backend_amd.graph import AMDGraph
    return AMDGraph(self, launches)


class AMDAllocator(Allocator):
  def __init__(self, dev: AMDDevice):
    super().__init__()
    self.dev = dev

  def _alloc(self, size: int, options: Any) -> GPUMem: return self.dev.alloc(size, VRAM)
  def _free(self, opaque: GPUMem, size: int, options: Any) -> None: self.dev.free(opaque)

  # copies wait for the kernels before them on the GPU (the SDMA stream polls the last dispatch's signal) and for
  # themselves on the host (the staging buffer is reused; later kernels may read the destination)
  def _copyin(self, dest: GPUMem, src: memoryview) -> None:
    src = src.cast("B")
    for off in range(0, src.nbytes, STAGING):
      n = min(STAGING, src.nbytes - off)
      self.dev.staging.view(0, n)[:] = src[off:off + n]
      self.dev.sdma_copy(dest.va + off, self.dev.staging.va, n)

  def _copyout(self, dest: memoryview, src: GPUMem) -> None:
    dest = dest.cast("B")
    for off in range(0, dest.nbytes, STAGING):
      n = min(STAGING, dest.nbytes - off)
      self.dev.sdma_copy(self.dev.staging.va, src.va + off, n)
      dest[off:off + n] = self.dev.staging.view(0, n)

  def transfer(self, dest: GPUMem, src: GPUMem, nbytes: int, src_allocator: Allocator) -> None:
    """GPU to GPU on the source GPU's SDMA engine, the destination mapped to that GPU too (KFD's peer mapping)."""
    src_dev = src_allocator.dev  # type: ignore[attr-defined]
    if src_dev.iface is not self.dev.iface:  # two KFD instances (can't share a VA space): through the host
      buf = memoryview(bytearray(nbytes))
      src_allocator._copyout(buf, src)
      self._copyin(dest, buf)
      return
    self.dev.synchronize()  # kernels here may still read or write dest
    self.dev.map_to_peer(dest, src_dev)
    src_dev.sdma_copy(dest.va, src.va, nbytes)

  def view(self, opaque: GPUMem, offset: int, size: int) -> GPUMem: return GPUMem(opaque.va + offset, size, None, opaque.base or opaque)


class AMDProgram:
  """A kernel of a code object loaded into executable GPU memory."""

  def __init__(self, dev: AMDDevice, name: str, lib: bytes):
    self.dev, self.name = dev, name
    check_code_object(lib, dev.node.arch)  # a code object for another arch is a clear error, not a GPU fault
    dev.iface.code_object(lib)
    loaded = load_code_object(lib)
    if name not in loaded.kernels: raise ValueError(f"code object has no kernel {name!r} (it has {', '.join(loaded.kernels)})")
    self.info: KernelInfo = loaded.kernels[name]
    self.mem = dev.alloc(len(loaded.image), VRAM | kfd.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE)
    self.mem.view(0, len(loaded.image))[:] = loaded.image
    self.kernel_object = self.mem.va + self.info.kd_offset
    kd = loaded.image[self.info.kd_offset:self.info.kd_offset + 12]
    self.group_size, self.private_size = int.from_bytes(kd[0:4], "little"), int.from_bytes(kd[4:8], "little")
    self.explicit = [a for a in self.info.args if not a.kind.startswith("hidden_")]

  def __del__(self) -> None:
    try: self.dev.free(self.mem)
    except Exception:  # noqa: BLE001  interpreter shutdown: the device may be gone already
      return

  def fill_kernargs(self, addr: int, bufs: tuple[GPUMem, ...], vals: tuple[int, ...]) -> None:
    """Our kernels' arguments: the buffer pointers (8 bytes each), then the int32 values; hidden arguments zeroed."""
    if len(bufs) + len(vals) != len(self.explicit):
      raise TypeError(f"kernel {self.name!r} takes {len(self.explicit)} arguments, got {len(bufs)} buffers and {len(vals)} values")
    ctypes.memset(addr, 0, self.info.kernarg_size)
    for i, b in enumerate(bufs): ctypes.c_uint64.from_address(addr + 8 * i).value = b.va
    for j, v in enumerate(vals): ctypes.c_int32.from_address(addr + 8 * len(bufs) + 4 * j).value = v

  def __call__(self, *bufs: GPUMem, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    used = 8 * len(bufs) + 4 * len(vals)
    if used > self.info.kernarg_size: raise ValueError(f"kernel {self.name!r}: {used} bytes of arguments, its metadata says {self.info.kernarg_size}")
    kernarg = self.dev.kernarg(self.info.kernarg_size, self.info.kernarg_align)
    self.fill_kernargs(kernarg, bufs, vals)
    signal = self.dev._signal()
    self.dev.submit([self.dev.dispatch_packet(self, kernarg, global_size, local_size, signal)])
    self.dev.last_signal = signal
    if not wait: return None
    self.dev._wait(signal)
    sig = hsa.AmdSignal.from_address(signal)
    return (sig.end_ts - sig.start_ts) / hsa.TIMESTAMP_HZ
