"""MOCKKFD: the KFD ioctl surface in Python, for running the AMD runtime without a GPU (DEV=MOCKKFD+AMD).

It implements `iface.Interface` like the real `KFD`, with the same rules the runtime must follow there:
- a topology with four GPU nodes (AMD .. AMD:3, of the DEV target's arch, default gfx1100) under KFD's sysfs paths;
- /dev/kfd and the node's render node; ACQUIRE_VM before any allocation;
- memory: an anonymous PROT_NONE mmap reserves a VA range (the mock backs it with real host memory, so host and GPU
  addresses are the same numbers, as on KFD), ALLOC_MEMORY_OF_GPU places an allocation inside a reserved range,
  an mmap of the render node at the allocation's mmap offset maps it for the host, MAP_MEMORY_TO_GPU for the GPU;
  the packet processor accepts only addresses in allocations mapped to the GPU;
- CREATE_QUEUE (AQL compute and SDMA), a doorbell page mmapped from /dev/kfd at the returned offset; a doorbell write
  runs the queue's packet processor (mockgpu.py for AQL, mocksdma.py for SDMA) up to the packet it names;
- signal events: CREATE_EVENT (the first names the events page by its allocation handle), DESTROY_EVENT, WAIT_EVENTS;
  the packet processors set an event where the GPU would interrupt. Every packet runs at its doorbell, so a wait on an
  event nothing has set would sleep forever: an error here;
- `code_object`: the runtime shows each code object it loads; the mock records the PYTHON program attached to it.
Each misuse is an OSError (the errno KFD would give) whose message says what was wrong.
"""
from __future__ import annotations

import ctypes
import errno
import mmap
from dataclasses import dataclass, field

from tinygrad.device.plugin import MockVA

from tinygrad_backend_amd import kfd_ioctl as kfd
from tinygrad_backend_amd.iface import MAP_ANONYMOUS, MAP_FIXED, PROT_NONE, TOPOLOGY

GPU_IDS, RENDER_MINOR = (0x1002, 0x1003, 0x1004, 0x1005), 128  # four mock GPUs (AMD .. AMD:3), render nodes renderD128 ..
MMAP_DOORBELL = 0x1 << 40  # where /dev/kfd's doorbell pages sit in its mmap offsets
# gfx_target_version per arch: major * 10000 + minor * 100 + stepping (the hex digits of the name)
TARGET_VERSION = {"gfx1100": 110000, "gfx1101": 110001, "gfx1201": 120001, "gfx942": 90402, "gfx950": 90500}


def _fail(code: int, msg: str) -> OSError: return OSError(code, f"MOCKKFD: {msg}")


@dataclass
class Alloc:
  va: int
  size: int
  handle: int
  flags: int
  mmap_offset: int
  host_mapped: bool = False
  gpus: set[int] = field(default_factory=set)  # the GPUs it is mapped to (MAP_MEMORY_TO_GPU)

  @property
  def gpu_mapped(self) -> bool: return bool(self.gpus)


@dataclass
class Event:
  event_id: int
  slot: int
  auto_reset: bool
  signaled: bool = False


@dataclass
class Queue:
  queue_id: int
  ring: int
  ring_size: int
  write_ptr: int
  read_ptr: int
  doorbell: int
  gpu_id: int = 0
  processor: object = None


@dataclass
class MockKFD:
  """The mock KFD of a process: four GPUs of `arch` sharing `va` (core's MockVA: reserved ranges, allocations in them)."""
  arch: str = "gfx1100"
  name: str = "MOCKKFD"
  fds: dict[int, str] = field(default_factory=dict)
  va: MockVA[Alloc] = field(default_factory=MockVA)        # reserved ranges and the allocations in them (core's mock memory)
  allocs: dict[int, Alloc] = field(default_factory=dict)      # handle -> allocation
  queues: dict[int, Queue] = field(default_factory=dict)
  vm_acquired: bool = False
  doorbells: mmap.mmap | None = None
  next_handle: int = 0
  events: dict[int, Event] = field(default_factory=dict)
  events_page: int = 0  # the allocation handle the first CREATE_EVENT named

  def __post_init__(self) -> None:
    if self.arch not in TARGET_VERSION: raise ValueError(f"MOCKKFD has no {self.arch!r} GPU; it emulates {', '.join(TARGET_VERSION)}")

  # ---- files: the topology and the device nodes
  def listdir(self, path: str) -> list[str]:
    if path != TOPOLOGY: raise FileNotFoundError(path)
    return ["0", *(str(n + 1) for n in range(len(GPU_IDS)))]  # node 0 is the CPU

  def read_text(self, path: str) -> str:
    files = {f"{TOPOLOGY}/0/gpu_id": "0\n", f"{TOPOLOGY}/0/properties": "cpu_cores_count 2\n"}
    for n, gpu_id in enumerate(GPU_IDS):
      files[f"{TOPOLOGY}/{n + 1}/gpu_id"] = f"{gpu_id}\n"
      files[f"{TOPOLOGY}/{n + 1}/properties"] = (f"gfx_target_version {TARGET_VERSION[self.arch]}\ndrm_render_minor {RENDER_MINOR + n}\n"
                                                 "cwsr_size 4096\nctl_stack_size 4096\n")
    if path not in files: raise FileNotFoundError(path)
    return files[path]

  def open(self, path: str) -> int:
    if path != "/dev/kfd" and path not in (f"/dev/dri/renderD{RENDER_MINOR + n}" for n in range(len(GPU_IDS))): raise _fail(errno.ENOENT, f"no such device node {path}")
    fd = 1000 + len(self.fds)
    self.fds[fd] = path
    return fd

  def close(self, fd: int) -> None: self.fds.pop(fd, None)

  # ---- memory
  def mmap(self, addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int:
    if fd == -1:
      if not flags & MAP_ANONYMOUS or prot != PROT_NONE or addr: raise _fail(errno.EINVAL, "an anonymous mmap only reserves VA (PROT_NONE, no address)")
      return self.va.reserve(size)
    path = self.fds.get(fd)
    if path == "/dev/kfd":
      if offset & ~0x1FFF != MMAP_DOORBELL: raise _fail(errno.EINVAL, f"/dev/kfd mmap offset {offset:#x} is not a doorbell page")
      if self.doorbells is None: self.doorbells = mmap.mmap(-1, size)
      return ctypes.addressof(ctypes.c_char.from_buffer(self.doorbells))
    if path is None: raise _fail(errno.EBADF, f"mmap of fd {fd}, which is not open")
    a = next((a for a in self.allocs.values() if a.mmap_offset == offset), None)
    if a is None: raise _fail(errno.EINVAL, f"render node mmap offset {offset:#x} is no allocation's")
    if not flags & MAP_FIXED or addr != a.va or size != a.size:
      raise _fail(errno.EINVAL, f"the allocation at {a.va:#x} ({a.size:#x} bytes) must be mapped MAP_FIXED at its VA with its size, got {addr:#x} ({size:#x})")
    a.host_mapped = True
    return addr

  def munmap(self, addr: int, size: int) -> None:
    if addr in self.va.at: raise _fail(errno.EBUSY, f"munmap of {addr:#x}: free the allocation there first")
    if not self.va.release(addr): raise _fail(errno.EINVAL, f"munmap of {addr:#x}, which is no reserved range")

  def find(self, addr: int, size: int = 1) -> Alloc | None:
    """The allocation holding [addr, addr + size), or None."""
    return self.va.find(addr, size)

  def view(self, addr: int, size: int) -> memoryview:
    """Host memory at a mock GPU address (the allocation must be mapped to the GPU: the caller checked)."""
    return MockVA.view(addr, size)

  # ---- ioctls
  def ioctl(self, fd: int, request: int, arg: ctypes.Structure) -> None:
    if self.fds.get(fd) != "/dev/kfd": raise _fail(errno.ENOTTY, f"ioctl {request:#x} on fd {fd}, which is not /dev/kfd")
    want = kfd.ARGS.get(request)
    if want is None: raise _fail(errno.ENOTTY, f"ioctl {request:#x} is not one MOCKKFD implements")
    if not isinstance(arg, want): raise _fail(errno.EINVAL, f"ioctl {request:#x} takes {want.__name__}, got {type(arg).__name__}")
    if request == kfd.AMDKFD_IOC_GET_VERSION: arg.major_version, arg.minor_version = 1, 11
    elif request == kfd.AMDKFD_IOC_ACQUIRE_VM: self._acquire_vm(arg)  # type: ignore[arg-type]
    elif request == kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: self._alloc(arg)  # type: ignore[arg-type]
    elif request == kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU: self._free(arg.handle)
    elif request in (kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU, kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU):
      self._map(arg, request == kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU)  # type: ignore[arg-type]
    elif request == kfd.AMDKFD_IOC_CREATE_QUEUE: self._create_queue(arg)  # type: ignore[arg-type]
    elif request == kfd.AMDKFD_IOC_CREATE_EVENT: self._create_event(arg)  # type: ignore[arg-type]
    elif request == kfd.AMDKFD_IOC_DESTROY_EVENT:
      if self.events.pop(arg.event_id, None) is None: raise _fail(errno.EINVAL, f"destroy of event {arg.event_id}, which does not exist")
    elif request == kfd.AMDKFD_IOC_WAIT_EVENTS: self._wait_events(arg)  # type: ignore[arg-type]
    elif request == kfd.AMDKFD_IOC_DESTROY_QUEUE:
      if self.queues.pop(arg.queue_id, None) is None: raise _fail(errno.EINVAL, f"destroy of queue {arg.queue_id}, which does not exist")

  def _gpu(self, gpu_id: int) -> None:
    if gpu_id not in GPU_IDS: raise _fail(errno.EINVAL, f"gpu_id {gpu_id:#x} is not a GPU of this topology (it has {', '.join(map(hex, GPU_IDS))})")

  def _acquire_vm(self, a: kfd.kfd_ioctl_acquire_vm_args) -> None:
    self._gpu(a.gpu_id)
    node = f"/dev/dri/renderD{RENDER_MINOR + GPU_IDS.index(a.gpu_id)}"
    if self.fds.get(a.drm_fd) != node: raise _fail(errno.EINVAL, f"ACQUIRE_VM: fd {a.drm_fd} is not gpu {a.gpu_id:#x}'s render node {node}")
    self.vm_acquired = True

  def _alloc(self, a: kfd.kfd_ioctl_alloc_memory_of_gpu_args) -> None:
    self._gpu(a.gpu_id)
    if not self.vm_acquired: raise _fail(errno.EINVAL, "ALLOC_MEMORY_OF_GPU before ACQUIRE_VM")
    if a.size == 0 or a.size % 4096 or a.va_addr % 4096: raise _fail(errno.EINVAL, f"allocation {a.va_addr:#x}+{a.size:#x} is not page aligned")
    if not a.flags & (kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT): raise _fail(errno.EINVAL, f"allocation flags {a.flags:#x} name no memory type (VRAM or GTT)")
    if self.va.reservation(a.va_addr, a.size) is None: raise _fail(errno.EINVAL, f"allocation at {a.va_addr:#x}+{a.size:#x} is outside every reserved VA range")
    if self.va.overlaps(a.va_addr, a.size): raise _fail(errno.EINVAL, f"allocation at {a.va_addr:#x}+{a.size:#x} overlaps another")
    self.next_handle += 1
    handle = self.next_handle
    a.handle, a.mmap_offset = handle, handle << 12
    self.allocs[handle] = Alloc(a.va_addr, a.size, handle, a.flags, a.mmap_offset)
    self.va.add(self.allocs[handle])

  def _free(self, handle: int) -> None:
    if (a := self.allocs.pop(handle, None)) is None: raise _fail(errno.EINVAL, f"free of handle {handle}, which is no allocation")
    self.va.remove(a)

  def _map(self, a: kfd.kfd_ioctl_map_memory_to_gpu_args, on: bool) -> None:
    if (al := self.allocs.get(a.handle)) is None: raise _fail(errno.EINVAL, f"map/unmap of handle {a.handle}, which is no allocation")
    ids = (ctypes.c_uint32 * a.n_devices).from_address(a.device_ids_array_ptr) if a.n_devices else []
    for gpu_id in ids: self._gpu(gpu_id)
    if not ids: raise _fail(errno.EINVAL, "map/unmap with no devices")
    al.gpus = al.gpus | set(ids) if on else al.gpus - set(ids)
    a.n_success = a.n_devices

  # ---- events
  def _create_event(self, e: kfd.kfd_ioctl_create_event_args) -> None:
    if e.event_type != kfd.KFD_IOC_EVENT_SIGNAL: raise _fail(errno.EINVAL, f"event type {e.event_type}: MOCKKFD has signal events (0) only")
    if not self.events_page:
      page = self.allocs.get(e.event_page_offset)
      if page is None or page.size < kfd.KFD_SIGNAL_EVENT_LIMIT * 8:
        raise _fail(errno.EINVAL, f"the first CREATE_EVENT must name the events page ({kfd.KFD_SIGNAL_EVENT_LIMIT * 8} bytes) by its allocation handle, got {e.event_page_offset:#x}")
      self.events_page = page.handle
    slot = next(i for i in range(kfd.KFD_SIGNAL_EVENT_LIMIT) if i not in {ev.slot for ev in self.events.values()})
    e.event_id = e.event_trigger_data = slot + 1
    e.event_slot_index = slot
    self.events[e.event_id] = Event(e.event_id, slot, bool(e.auto_reset))

  def mailbox(self, event_id: int) -> int | None:
    """The host/GPU address of a signal event's mailbox, or None for no such event."""
    ev = self.events.get(event_id)
    return None if ev is None else self.allocs[self.events_page].va + 8 * ev.slot

  def trigger(self, event_id: int) -> None:
    """What the GPU's interrupt does for an event: KFD marks it signaled and wakes its waiters."""
    self.events[event_id].signaled = True

  def _wait_events(self, w: kfd.kfd_ioctl_wait_events_args) -> None:
    if w.num_events == 0: raise _fail(errno.EINVAL, "WAIT_EVENTS on no events")
    data = (kfd.kfd_event_data * w.num_events).from_address(w.events_ptr)
    evs = []
    for d in data:
      if d.event_id not in self.events: raise _fail(errno.EINVAL, f"WAIT_EVENTS on event {d.event_id}, which does not exist")
      evs.append(self.events[d.event_id])
    done = all(e.signaled for e in evs) if w.wait_for_all else any(e.signaled for e in evs)
    if not done: raise _fail(errno.EDEADLK, f"WAIT_EVENTS on event(s) {[e.event_id for e in evs]} that nothing has signaled: the mock runs every packet "
                                            "at its doorbell, so this wait would only time out (a signal the GPU never completes, or no event mailbox)")
    for e in evs:
      if e.signaled and e.auto_reset: e.signaled = False
    w.wait_result = kfd.KFD_IOC_WAIT_RESULT_COMPLETE

  def _create_queue(self, q: kfd.kfd_ioctl_create_queue_args) -> None:
    from tinygrad_backend_amd.mockgpu import AQLProcessor
    from tinygrad_backend_amd.mocksdma import SDMAProcessor
    self._gpu(q.gpu_id)
    if q.queue_type not in (kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, kfd.KFD_IOC_QUEUE_TYPE_SDMA):
      raise _fail(errno.EINVAL, f"queue type {q.queue_type}: MOCKKFD emulates AQL compute (2) and SDMA (1) queues only")
    if q.ring_size < kfd.KFD_MIN_QUEUE_RING_SIZE or q.ring_size & (q.ring_size - 1): raise _fail(errno.EINVAL, f"ring size {q.ring_size} is not a power of two >= 1024")
    parts = [("ring", q.ring_base_address, q.ring_size), ("write pointer", q.write_pointer_address, 8), ("read pointer", q.read_pointer_address, 8)]
    if q.queue_type == kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL:
      parts += [("EOP buffer", q.eop_buffer_address, q.eop_buffer_size), ("context save area", q.ctx_save_restore_address, q.ctx_save_restore_size + q.ctl_stack_size)]
    for what, addr, size in parts:
      if (al := self.find(addr, size)) is None or q.gpu_id not in al.gpus: raise _fail(errno.EINVAL, f"queue {what} at {addr:#x}+{size:#x} is not in memory mapped to gpu {q.gpu_id:#x}")
    qid = len(self.queues)
    q.queue_id, q.doorbell_offset = qid, MMAP_DOORBELL + 8 * qid
    queue = Queue(qid, q.ring_base_address, q.ring_size, q.write_pointer_address, q.read_pointer_address, 8 * qid, q.gpu_id)
    queue.processor = AQLProcessor(self, queue) if q.queue_type == kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL else SDMAProcessor(self, queue)
    self.queues[qid] = queue

  def code_object(self, lib: bytes) -> None:
    from tinygrad_backend_amd.mockprograms import register
    register(lib)

  def write_doorbell(self, addr: int, value: int) -> None:
    if self.doorbells is None: raise _fail(errno.EFAULT, "doorbell write before the doorbell page was mapped")
    base = ctypes.addressof(ctypes.c_char.from_buffer(self.doorbells))
    q = next((q for q in self.queues.values() if base + q.doorbell == addr), None)
    if q is None: raise _fail(errno.EFAULT, f"doorbell write at {addr:#x}, which is no queue's doorbell")
    ctypes.c_uint64.from_address(addr).value = value
    q.processor.ring(value)  # type: ignore[attr-defined]
