"""The NV device without libcuda (`NVK+NV`): RM objects, GPU memory, a GPFIFO channel with the compute and copy classes,
QMD launches and semaphores, written once against `iface.Interface` so the real driver (NVK) and the mock (mocknv.py) run
this same code. Only the mock has run it in CI; see the package README for what has run on a GPU.

- Bring-up (`NVKDevice.__init__`, in the order nv_bringup.py prints): RM client, the GPU (card info, id info), device,
  subdevice, the usermode doorbell page, a VA space, UVM (initialize, register the GPU and the VA space), then memory.
- Memory: RM memory objects placed in the GPU's VA space by UVM (CREATE_EXTERNAL_RANGE + MAP_EXTERNAL_ALLOCATION) at
  addresses we pick: from VA_BASE up in power-of-two blocks (reused when freed), 2 MB aligned, with an unmapped 2 MB gap
  after each. Vidmem
  (NV01_MEMORY_LOCAL_USER) for Buffers and code; the GPFIFO ring and its USERD in contiguous vidmem mapped for the CPU
  (RM_MAP_MEMORY + an mmap of /dev/nvidiaN, write-combined: BAR1); host memory for command buffers, QMDs/constant buffers,
  semaphores and copy staging: anonymous host pages described to RM (NV01_MEMORY_SYSTEM_OS_DESCRIPTOR). NV_SYSMEM=rm uses
  RM-allocated sysmem (NV01_MEMORY_SYSTEM + RM_MAP_MEMORY) instead, NV_GPFIFO=sysmem puts the ring and USERD in host memory.
- Channel: a channel group (TSG) with a context share, a GPFIFO channel whose USERD follows its ring, the compute class on
  subchannel 1 and the copy class on subchannel 4 (SET_OBJECT), scheduled; work is submitted by writing GPFIFO entries,
  then USERD.GPPut, then the channel's work-submit token to the usermode doorbell.
- Every submission ends with a host semaphore release (after wait-for-idle) of the next timeline value: `synchronize`
  polls it with a deadline, and a timeout reports GPGet/GPPut and the semaphore.
- Launch: constant bank 0 (the driver's prefix, then the params where the cubin's EIATTR_PARAM_CBANK says) and a QMD of the
  compute class's version, in a sysmem launch ring; SEND_PCAS_A + SEND_SIGNALING_PCAS2_B. Copies: LAUNCH_DMA on the copy
  class, through a sysmem staging buffer for host<->device.
"""
from __future__ import annotations

import collections
import ctypes
import os
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinygrad.device.plugin import Allocator, Compiled, KernelLaunch, getenv

from tinygrad_backend_nv import nv_classes as cls
from tinygrad_backend_nv import nv_ioctl as nv
from tinygrad_backend_nv.cubin import KernelImage, parse_cubin
from tinygrad_backend_nv.iface import MAP_ANONYMOUS, MAP_SHARED, PROT_READ, PROT_WRITE
from tinygrad_backend_nv.nvrm import RM, UVM, NVError
from tinygrad_backend_nv.qmd import QMD_ALIGN, QMD_BYTES, LaunchQMD, cbuf_address_fields, encode_launch, qmd_patch, release_fields, version_for_class

if TYPE_CHECKING:
  from tinygrad_backend_nv.iface import Interface
  from tinygrad_backend_nv.nvgraph import NVKGraph

PAGE, BIG = 4096, 2 << 20
VA_BASE, VA_LIMIT = 0x10_0000_0000, 1 << 40  # below 1 << 40: every QMD/GPFIFO address field holds it
GPFIFO_ENTRIES = 1024
CMD_RING = 4 << 20
LAUNCH_SLOT, LAUNCH_SLOTS = 8192, 512  # a QMD (<= 384 bytes) and constant bank 0 (<= 4 KB + prefix) per slot
STAGING = 16 << 20
WAIT_TIMEOUT_S = float(getenv("NV_WAIT_TIMEOUT", 30.0))
LMEM_PER_THREAD = 0x400   # per-thread local memory (the stack) we provide; a kernel needing more is refused
LMEM_RESERVED = 0x240     # the top of the local window the ABI reserves (the stack pointer starts below it)
LOCAL_WINDOW, SHARED_WINDOW = 0x729300000000, 0x729400000000  # generic-address windows of local and shared memory
CBUF0_PREFIX = 0x28 + 8   # the driver's part of constant bank 0 we fill: block/grid dims, windows, stack top
# RM's error codes a channel's error notifier carries (open-gpu-kernel-modules src/common/sdk/nvidia/inc/nverror.h): the ones a
# compute channel meets
CHANNEL_ERRORS = {13: "GR exception (a kernel trapped: illegal instruction or address, misaligned access, ...)", 31: "MMU fault (a kernel or copy touched an unmapped GPU address)",
                  32: "PBDMA error (a malformed command buffer)", 43: "channel reset", 45: "preemptive removal", 69: "GR class error (a bad method or argument)"}
CHANNEL_VA = 64 << 20  # the VA range UVM maps a channel's context buffers into (UVM_REGISTER_CHANNEL)
SYSMEM_MODE = os.environ.get("NV_SYSMEM", "vid")       # "os": host pages described to RM; "rm": NV01_MEMORY_SYSTEM mapped by RM;
# "vid" (the default: the only one the H200 under gVisor accepted, where an OS descriptor is EINVAL and RM won't CPU-map
# NV01_MEMORY_SYSTEM): what the CPU must reach (command buffers, semaphores, staging) in vidmem mapped through BAR1
GPFIFO_MODE = os.environ.get("NV_GPFIFO", "vidmem")    # where the GPFIFO ring and USERD live: "vidmem" (CPU-mapped) or "sysmem"


def round_up(x: int, a: int) -> int: return (x + a - 1) // a * a


@dataclass(frozen=True)
class GPUMem:
  va: int             # GPU virtual address
  size: int
  cpu: int | None     # host address where mapped for the CPU
  handle: int | None  # RM memory handle (None for a view)

  def view(self, offset: int, size: int) -> memoryview:
    if self.cpu is None: raise RuntimeError(f"GPU memory at {self.va:#x} is not mapped for the CPU")
    return memoryview((ctypes.c_char * size).from_address(self.cpu + offset)).cast("B")


@dataclass(frozen=True)
class GRInfo:
  gpcs: int
  tpc_per_gpc: int
  sm_per_tpc: int
  max_warps_per_sm: int
  sm_version: int


class NVKDevice(Compiled):
  def __init__(self, iface: Interface, index: int, arch: str, log: Any = None):
    self.iface, self.say = iface, log or (lambda msg: None)
    self.device = f"NV:{index}" if index else "NV"  # Compiled sets it again: error messages before that need it
    self.rm = rm = RM(iface)
    self.say(f"RM client {rm.client:#x} on /dev/nvidiactl")
    cards = nv.CardInfoArray()
    rm.escape(rm.ctl, nv.NV_ESC_CARD_INFO, cards, "listing the GPUs")
    gpus = [c for c in cards if c.valid]
    if index >= len(gpus): raise RuntimeError(f"{iface.name}+NV: the driver lists {len(gpus)} GPU(s), there is no NV:{index}")
    card = gpus[index]
    self.dev_path = f"/dev/nvidia{card.minor_number}"
    self.fd_dev = rm._open(self.dev_path)  # opening the GPU's node attaches it (before RM answers about it)
    rm.escape(self.fd_dev, nv.NV_ESC_REGISTER_FD, nv.nv_ioctl_register_fd_t(ctl_fd=rm.ctl), f"registering {self.dev_path}")
    ids = rm.control(rm.client, nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, nv.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(gpuId=card.gpu_id), "GPU id info")
    self.say(f"GPU {index}: id {card.gpu_id:#x}, PCI {card.pci_info.domain:04x}:{card.pci_info.bus:02x}:{card.pci_info.slot:02x}, "
             f"device instance {ids.deviceInstance}, {self.dev_path}")
    self.hdevice = rm.alloc(rm.client, cls.NV01_DEVICE_0, nv.NV0080_ALLOC_PARAMETERS(deviceId=ids.deviceInstance, hClientShare=rm.client, vaMode=2),
                           what="the device")
    self.subdevice = rm.alloc(self.hdevice, cls.NV20_SUBDEVICE_0, nv.NV2080_ALLOC_PARAMETERS(), what="the subdevice")
    self.say(f"device {self.hdevice:#x}, subdevice {self.subdevice:#x}")
    classes = rm.control(self.hdevice, nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, nv.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS(), "the class list")
    have = set(classes.classList[:classes.numClasses])
    pick = lambda kinds, what: next((c for c in kinds if c in have), None) or self._no_class(what, kinds)  # noqa: E731
    self.gpfifo_class, self.compute_class = pick(cls.GPFIFO_CLASSES, "GPFIFO channel"), pick(cls.COMPUTE_CLASSES, "compute")
    self.copy_class, self.usermode_class = pick(cls.COPY_CLASSES, "copy"), pick(cls.USERMODE_CLASSES, "usermode")
    self.qmd_version = os.environ.get("NV_QMD") or version_for_class(self.compute_class)
    self.say(f"classes: {cls.class_name(self.gpfifo_class)}, {cls.class_name(self.compute_class)} (QMD {self.qmd_version}), "
             f"{cls.class_name(self.copy_class)}, {cls.class_name(self.usermode_class)}")
    self.gr = self._gr_info()
    self.arch_number = self.gr.sm_version
    if arch and arch.startswith("sm_") and int(arch[3:].rstrip("a")) != self.arch_number:
      raise RuntimeError(f"NV:{index} on {iface.name} is sm_{self.arch_number}, but DEV asks to compile for {arch}: drop the arch or name sm_{self.arch_number}")
    self.usermode = rm.alloc(self.subdevice, self.usermode_class, what="the usermode doorbell object")
    self.doorbell_page = rm.map_to_cpu(self.subdevice, self.usermode, cls.USERMODE_SIZE, self.dev_path, "the usermode doorbell page",
                                       nv.NVOS33_FLAGS_ACCESS_WRITE_ONLY)
    self.say(f"usermode doorbell page at {self.doorbell_page:#x}")
    self.vaspace = rm.alloc(self.hdevice, cls.FERMI_VASPACE_A, nv.NV_VASPACE_ALLOCATION_PARAMETERS(
      vaBase=0x1000, vaSize=0x1FFFFFB000000, flags=nv.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | nv.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED),
      what="the VA space")
    gid = rm.control(self.subdevice, nv.NV2080_CTRL_CMD_GPU_GET_GID_INFO,
                     nv.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(flags=nv.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY, length=16), "the GPU UUID")
    self.uuid = nv.NvProcessorUuid(uuid=(ctypes.c_uint8 * 16)(*gid.data[:16]))
    self.say(f"VA space {self.vaspace:#x}, GPU UUID {bytes(gid.data[:16]).hex()}")
    self.uvm = UVM(rm, self.say)
    self.uvm.call(nv.UVM_REGISTER_GPU, nv.UVM_REGISTER_GPU_PARAMS(gpu_uuid=self.uuid, rmCtrlFd=-1), "registering the GPU with UVM")
    self.uvm.call(nv.UVM_REGISTER_GPU_VASPACE, nv.UVM_REGISTER_GPU_VASPACE_PARAMS(gpuUuid=self.uuid, rmCtrlFd=rm.ctl, hClient=rm.client, hVaSpace=self.vaspace),
                  "registering the VA space with UVM")
    self.say("UVM: GPU and VA space registered")
    self.va_next, self.va_free = VA_BASE, dict[int, list[int]]()  # size -> free VAs of that size
    self.allocations: dict[int, GPUMem] = {}
    self.bringup_channel()
    super().__init__(f"NV:{index}" if index else "NV", NVKAllocator(self), self._program, self._graph)

  def _no_class(self, what: str, kinds: tuple[int, ...]) -> int:
    raise RuntimeError(f"this GPU has no {what} class NVK+NV knows ({', '.join(cls.class_name(c) for c in kinds)}): Ampere, Ada and Hopper only")

  def _gr_info(self) -> GRInfo:
    idx = [nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC, nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC,
           nv.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM, nv.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION]
    infos = (nv.NVXXXX_CTRL_XXX_INFO * len(idx))(*[nv.NVXXXX_CTRL_XXX_INFO(index=i) for i in idx])
    self.rm.control(self.subdevice, nv.NV2080_CTRL_CMD_GR_GET_INFO, nv.NV2080_CTRL_GR_GET_INFO_PARAMS(grInfoListSize=len(idx), grInfoList=ctypes.addressof(infos)),
                    "the graphics engine's size (GR info)")
    g = GRInfo(*(i.data for i in infos))
    sm = g.sm_version  # NV2080_CTRL_GR_INFO_SM_VERSION: major in bits 15:8, minor in 7:0 (0x0900 for sm_90)
    g = GRInfo(g.gpcs, g.tpc_per_gpc, g.sm_per_tpc, g.max_warps_per_sm, (sm >> 8) * 10 + (sm & 0xFF))
    self.say(f"GR: {g.gpcs} GPCs x {g.tpc_per_gpc} TPCs x {g.sm_per_tpc} SMs, {g.max_warps_per_sm} warps/SM, sm_{g.sm_version}")
    return g

  # ---- memory
  @staticmethod
  def _va_class(size: int) -> int: return 1 << max(21, (size - 1).bit_length())  # VA is handed out in power-of-two blocks

  def _va(self, size: int) -> int:
    """A GPU VA for `size` bytes: a free block of its power-of-two class, else a new one, with an unmapped gap after it
    (running off the allocation's end faults). Freed blocks are reused by their class, so VA use stays bounded."""
    cls_size = self._va_class(size)
    if (free := self.va_free.get(cls_size)): return free.pop()
    va = self.va_next
    self.va_next = va + cls_size + BIG
    if self.va_next > VA_LIMIT: raise MemoryError(f"{self.device}: the GPU VA range {VA_BASE:#x}..{VA_LIMIT:#x} is used up")
    return va

  def alloc(self, size: int, vidmem: bool = True, cpu: bool = False, what: str = "memory", contiguous: bool = False) -> GPUMem:
    if not vidmem and SYSMEM_MODE == "vid": vidmem, cpu = True, True  # host-visible memory as CPU-mapped vidmem (BAR1)
    size = round_up(max(size, 1), BIG if vidmem else PAGE)
    owner, host_pages = self.rm.client, None
    if vidmem:
      params = nv.NV_MEMORY_ALLOCATION_PARAMS(owner=owner, type=nv.NVOS32_TYPE_IMAGE, size=size, alignment=BIG, limit=size - 1, format=6,
        flags=nv.NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT | nv.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE | nv.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED |
              (0 if cpu else nv.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED) | nv.NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM,
        attr=nv.NVOS32_ATTR_PAGE_SIZE_HUGE | nv.NVOS32_ATTR_LOCATION_VIDMEM |
             (nv.NVOS32_ATTR_PHYSICALITY_CONTIGUOUS if contiguous else nv.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS),
        attr2=nv.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC | nv.NVOS32_ATTR2_GPU_CACHEABLE_YES | nv.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB)
      handle = self.rm.alloc(self.hdevice, cls.NV01_MEMORY_LOCAL_USER, params, what=f"{size:#x} bytes of vidmem for {what}")
    elif SYSMEM_MODE == "os":
      host_pages = self.iface.mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)
      handle = self.rm.alloc_os_memory(self.hdevice, host_pages, size, what)
      cpu = False  # the CPU has it already
    else:
      params = nv.NV_MEMORY_ALLOCATION_PARAMS(owner=owner, type=nv.NVOS32_TYPE_IMAGE, size=size, alignment=PAGE, limit=size - 1,
        flags=nv.NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT | nv.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE | nv.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED |
              nv.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED,
        attr=nv.NVOS32_ATTR_PAGE_SIZE_4KB | nv.NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS | nv.NVOS32_ATTR_LOCATION_PCI | nv.NVOS32_ATTR_COHERENCY_CACHED,
        attr2=nv.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC)
      handle = self.rm.alloc(self.hdevice, cls.NV01_MEMORY_SYSTEM, params, what=f"{size:#x} bytes of sysmem for {what}")
      cpu = True
    va = self._va(size)
    self.uvm.call(nv.UVM_CREATE_EXTERNAL_RANGE, nv.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=va, length=size), f"reserving GPU VA {va:#x}+{size:#x} for {what}")
    m = nv.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS(base=va, length=size, gpuAttributesCount=1, rmCtrlFd=self.rm.ctl, hClient=self.rm.client, hMemory=handle)
    m.perGpuAttributes[0].gpuUuid, m.perGpuAttributes[0].gpuMappingType = self.uuid, nv.UvmGpuMappingTypeReadWriteAtomic
    self.uvm.call(nv.UVM_MAP_EXTERNAL_ALLOCATION, m, f"mapping {what} at GPU VA {va:#x}")
    host = self.rm.map_to_cpu(self.subdevice, handle, size, self.dev_path, what, nv.NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED if vidmem else 0) if cpu else host_pages
    mem = GPUMem(va, size, host, handle)
    self.allocations[va] = mem
    return mem

  def free(self, mem: GPUMem) -> None:
    if mem.handle is None: return
    # UVM_FREE unmaps at once: work still queued may use this memory (a graph replay's intermediates, a kernel's code), and
    # touching it after faults the channel (RM error 31, seen on the H200). Wait first, as cuMemFree does.
    if hasattr(self, "signals") and mem is not self.signals:
      try: self.synchronize()
      except RuntimeError: pass  # a stopped channel runs nothing more: freeing is safe
    self.uvm.call(nv.UVM_FREE, nv.UVM_FREE_PARAMS(base=mem.va, length=mem.size), f"unmapping GPU VA {mem.va:#x}")
    self.rm.free(self.hdevice, mem.handle)
    if mem.cpu is not None: self.iface.munmap(mem.cpu, mem.size)  # host pages (RM let go of them) or RM's CPU mapping
    del self.allocations[mem.va]
    self.va_free.setdefault(self._va_class(mem.size), []).append(mem.va)

  # ---- the channel
  def bringup_channel(self) -> None:
    rm = self.rm
    self.notifier = self.alloc(PAGE, vidmem=False, what="the channel error notifier")
    self.gpfifo = self.alloc(GPFIFO_ENTRIES * 8 + cls.USERD_SIZE, vidmem=GPFIFO_MODE != "sysmem", cpu=True, contiguous=True, what="the GPFIFO ring and USERD")
    self.userd_off = GPFIFO_ENTRIES * 8
    self.group = rm.alloc(self.hdevice, cls.KEPLER_CHANNEL_GROUP_A, nv.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
      hObjectError=self.notifier.handle, engineType=nv.NV2080_ENGINE_TYPE_GRAPHICS), what="the channel group")
    self.ctxshare = rm.alloc(self.group, cls.FERMI_CONTEXT_SHARE_A, nv.NV_CTXSHARE_ALLOCATION_PARAMETERS(
      hVASpace=self.vaspace, flags=nv.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC), what="the context share")
    p = nv.NV_CHANNEL_ALLOC_PARAMS(hObjectError=self.notifier.handle, hObjectBuffer=self.gpfifo.handle, gpFifoOffset=self.gpfifo.va,
                                   gpFifoEntries=GPFIFO_ENTRIES, hContextShare=self.ctxshare)
    p.hUserdMemory[0], p.userdOffset[0] = self.gpfifo.handle, self.userd_off
    self.channel = rm.alloc(self.group, self.gpfifo_class, p, what="the GPFIFO channel")
    self.compute = rm.alloc(self.channel, self.compute_class, what="the compute engine object")
    self.copy = rm.alloc(self.channel, self.copy_class, what="the copy engine object")
    tok = rm.control(self.channel, nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS(),
                     "the channel's work-submit token")
    self.token = tok.workSubmitToken
    # RM schedules only channels registered with UVM (kernel_channel_group_api.c: kchannelIsSchedulable), which maps the
    # channel's context buffers into a VA range of ours
    base = self._va(CHANNEL_VA)
    self.uvm.call(nv.UVM_REGISTER_CHANNEL, nv.UVM_REGISTER_CHANNEL_PARAMS(gpuUuid=self.uuid, rmCtrlFd=rm.ctl, hClient=rm.client, hChannel=self.channel,
                  base=base, length=CHANNEL_VA), f"registering the channel with UVM (its context buffers at GPU VA {base:#x})")
    rm.control(self.group, nv.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, nv.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1), "scheduling the channel group")
    self.say(f"channel {self.channel:#x} ({cls.class_name(self.gpfifo_class)}) in group {self.group:#x}, work-submit token {self.token:#x}")
    self.put = 0
    self.cmd = self.alloc(CMD_RING, vidmem=False, what="the command ring")
    self.cmd_off = 0
    self.signals = self.alloc(PAGE, vidmem=False, what="semaphores")  # 0: the timeline; 16..: timestamp pairs; 256: QMD releases
    self.timeline, self.launches = 0, 0
    self.recent: collections.deque[str] = collections.deque(maxlen=6)  # what the last submissions ran: a timeout names them
    self.launch_ring = self.alloc(LAUNCH_SLOT * LAUNCH_SLOTS, vidmem=False, what="QMDs and constant buffers")
    self.launch_next = 0
    self.staging = self.alloc(STAGING, vidmem=False, what="copy staging")
    g = self.gr
    per_tpc = round_up(round_up(LMEM_PER_THREAD * 32, 0x200) * g.max_warps_per_sm * g.sm_per_tpc, 0x8000)
    self.lmem = self.alloc(per_tpc * g.gpcs * g.tpc_per_gpc, what="shader local memory")
    pb = cls.PushBuffer().inc(cls.SUBC_COMPUTE, cls.SET_OBJECT, self.compute_class).inc(cls.SUBC_COPY, cls.SET_OBJECT, self.copy_class)
    pb.inc(cls.SUBC_COMPUTE, cls.SET_SHADER_LOCAL_MEMORY_A, self.lmem.va >> 32, self.lmem.va & 0xFFFFFFFF)
    pb.inc(cls.SUBC_COMPUTE, cls.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, per_tpc >> 32, per_tpc & 0xFFFFFFFF, 0xFF)
    pb.inc(cls.SUBC_COMPUTE, cls.SET_SHADER_LOCAL_MEMORY_WINDOW_A, LOCAL_WINDOW >> 32, LOCAL_WINDOW & 0xFFFFFFFF)
    pb.inc(cls.SUBC_COMPUTE, cls.SET_SHADER_SHARED_MEMORY_WINDOW_A, SHARED_WINDOW >> 32, SHARED_WINDOW & 0xFFFFFFFF)
    self.submit(pb)
    self.synchronize()
    self.say("channel set up: compute and copy objects bound, local memory and windows set")

  @property
  def timeline_sem(self) -> ctypes.c_uint64: return ctypes.c_uint64.from_address(self.signals.cpu + 0)  # type: ignore[operator]

  def submit(self, pb: cls.PushBuffer, prebuilt: tuple[int, ...] = ()) -> None:
    """Copy the methods to the command ring, append the timeline release, and kick the channel: GPFIFO entries (the
    `prebuilt` ones first: a graph's command buffer), GPPut, one doorbell."""
    self.timeline += 1
    pb.semaphore_release(self.signals.va, self.timeline)
    data = pb.data()
    if len(data) > CMD_RING: raise ValueError(f"{self.device}: a submission of {len(data)} bytes is larger than the command ring")
    if self.cmd_off + len(data) > CMD_RING or self.put + len(prebuilt) - getattr(self, "synced_put", 0) >= GPFIFO_ENTRIES - 2:
      self.synchronize(before=self.timeline - 1)
      self.cmd_off, self.synced_put = 0, self.put
    off = self.cmd_off
    ctypes.memmove(self.cmd.cpu + off, data, len(data))  # type: ignore[operator]
    self.cmd_off = round_up(off + len(data), 64)
    self.write_gpfifo(*prebuilt, cls.gpfifo_entry(self.cmd.va + off, len(data) // 4))

  def write_gpfifo(self, *entries: int) -> None:
    """Write GPFIFO entries, then GPPut, then ring the doorbell once."""
    for entry in entries:
      ctypes.c_uint64.from_address(self.gpfifo.cpu + (self.put % GPFIFO_ENTRIES) * 8).value = entry  # type: ignore[operator]
      self.put += 1
    ctypes.c_uint32.from_address(self.gpfifo.cpu + self.userd_off + cls.USERD_GP_PUT).value = self.put % GPFIFO_ENTRIES  # type: ignore[operator]
    self.iface.write_doorbell(self.doorbell_page + cls.USERMODE_NOTIFY_CHANNEL_PENDING, self.token)

  def queue_state(self) -> str:
    userd = self.gpfifo.cpu + self.userd_off  # type: ignore[operator]
    get, put = ctypes.c_uint32.from_address(userd + cls.USERD_GP_GET).value, ctypes.c_uint32.from_address(userd + cls.USERD_GP_PUT).value
    return (f"GPFIFO GPGet {get}, GPPut {put}, timeline semaphore {self.timeline_sem.value} (want {self.timeline}), QMD releases "
            f"{self.qmd_release.value}/{self.launches}; last submitted: {'; '.join(self.recent) or 'nothing'}")

  def channel_error(self) -> str | None:
    """What RM wrote to the channel's error notifier (an NvNotification: timestamp, info32 = the error code, info16,
    status; nvgputypes.h), or None while the channel is healthy."""
    if self.notifier.cpu is None: return None
    info32, info16, status = (ctypes.c_uint32.from_address(self.notifier.cpu + 8).value, ctypes.c_uint16.from_address(self.notifier.cpu + 12).value,
                              ctypes.c_uint16.from_address(self.notifier.cpu + 14).value)
    if status == 0 and info32 == 0: return None
    return f"RM error {info32} ({CHANNEL_ERRORS.get(info32, 'see nverror.h')}), info16 {info16:#x}, status {status:#x}"

  @property
  def qmd_release(self) -> ctypes.c_uint32: return ctypes.c_uint32.from_address(self.signals.cpu + 256)  # type: ignore[operator]

  def synchronize(self, before: int | None = None) -> None:
    want, start = self.timeline if before is None else before, time.monotonic()
    checked = start
    while self.timeline_sem.value < want:
      # a channel that stopped or timed out once never finishes: later waits (a free() from the garbage collector, say) say so
      # at once instead of each waiting out the deadline again
      if (stuck := getattr(self, "stuck", None)) is not None: raise RuntimeError(f"{stuck}. The device is unusable in this process")
      now = time.monotonic()
      if now - checked > 0.05:  # a channel RM stopped never finishes: say why at once instead of waiting out the deadline
        checked = now
        if (err := self.channel_error()) is not None:
          self.stuck = f"{self.device}: the GPU channel stopped: {err}; {self.queue_state()}"
          raise RuntimeError(f"{self.stuck}. The device is unusable in this process")
      if now - start > WAIT_TIMEOUT_S:
        self.stuck = f"{self.device}: the GPU did not reach timeline value {want} in {WAIT_TIMEOUT_S:.0f} s: {self.queue_state()}"
        raise RuntimeError(self.stuck)

  # ---- copies through the copy engine
  def copy_gpu(self, dst: int, src: int, nbytes: int) -> None:
    self.recent.append(f"copy {nbytes} bytes {src:#x} -> {dst:#x}")
    pb = cls.PushBuffer()
    for off in range(0, nbytes, 1 << 30): pb.copy(dst + off, src + off, min(1 << 30, nbytes - off))
    self.submit(pb)

  def upload(self, dst: GPUMem, data: memoryview | bytes | bytearray, offset: int = 0) -> None:
    mv = memoryview(data).cast("B")
    for off in range(0, mv.nbytes, STAGING):
      n = min(STAGING, mv.nbytes - off)
      self.synchronize()  # the staging buffer may still be read by the previous copy
      self.staging.view(0, n)[:] = mv[off:off + n]
      self.copy_gpu(dst.va + offset + off, self.staging.va, n)
    self.synchronize()

  def download(self, out: memoryview, src: GPUMem) -> None:
    for off in range(0, out.nbytes, STAGING):
      n = min(STAGING, out.nbytes - off)
      self.copy_gpu(self.staging.va, src.va + off, n)
      self.synchronize()
      out[off:off + n] = self.staging.view(0, n)

  # ---- launches
  def launch_slot(self) -> int:
    """The offset of a free slot of the launch ring (a QMD and constant bank 0); wrapping waits for every launch before."""
    if self.launch_next == LAUNCH_SLOTS:
      self.synchronize()
      self.launch_next = 0
    self.launch_next += 1
    return (self.launch_next - 1) * LAUNCH_SLOT

  def _program(self, name: str, lib: bytes) -> NVKProgram: return NVKProgram(self, name, lib)

  def _graph(self, launches: list[KernelLaunch]) -> NVKGraph:
    from tinygrad_backend_nv.nvgraph import NVKGraph
    return NVKGraph(self, launches)


class NVKAllocator(Allocator):
  def __init__(self, dev: NVKDevice):
    super().__init__()
    self.dev = dev

  def _alloc(self, size: int, options: Any) -> GPUMem:
    try: return self.dev.alloc(size, what="a buffer")
    except NVError as e:
      if e.status == 0x51: raise MemoryError(str(e)) from e  # NV_ERR_NO_MEMORY: Allocator.alloc frees its cache and retries
      raise

  def _free(self, opaque: GPUMem, size: int, options: Any) -> None: self.dev.free(opaque)
  def view(self, opaque: GPUMem, offset: int, size: int) -> GPUMem: return GPUMem(opaque.va + offset, size, None, None)

  def _copyin(self, dest: GPUMem, src: memoryview) -> None:
    if src.nbytes: self.dev.upload(dest, src)

  def _copyout(self, dest: memoryview, src: GPUMem) -> None:
    if dest.nbytes: self.dev.download(dest.cast("B") if dest.format != "B" else dest, src)

  def copy_device(self, dest: GPUMem, src: GPUMem, nbytes: int) -> None:
    if nbytes: self.dev.copy_gpu(dest.va, src.va, nbytes)


class NVKProgram:
  """A kernel of a cubin: its code in vidmem, its constant bank 0 template, launched by QMD."""

  def __init__(self, dev: NVKDevice, name: str, lib: bytes):
    self.dev, self.name = dev, name
    self.img: KernelImage = parse_cubin(lib, name)
    if self.img.local_size + LMEM_RESERVED > LMEM_PER_THREAD:
      raise RuntimeError(f"kernel {name} needs {self.img.local_size} bytes of stack per thread; NVK+NV provides {LMEM_PER_THREAD - LMEM_RESERVED}")
    if self.img.param_offset < CBUF0_PREFIX and self.img.params: raise RuntimeError(f"kernel {name}: params at {self.img.param_offset:#x} in constant bank 0 overlap the driver's part")
    self.code = dev.alloc(len(self.img.text) + 0x1000, what=f"kernel {name}'s code")  # + room for the instruction prefetcher
    dev.upload(self.code, self.img.text)
    dev.iface.program(lib, name, self.code.va)
    self.cbufs: dict[int, tuple[int, int]] = {}
    self.cbuf_mems = []
    if self.img.globals_image:  # the kernel's global variables, where the constant banks' relocations point
      self.cbuf_mems.append(glob := dev.alloc(len(self.img.globals_image), what=f"kernel {name}'s global variables"))
      dev.upload(glob, self.img.globals_image)
    banks = {idx: (bytearray(data), dev.alloc(len(data), what=f"kernel {name}'s constant bank {idx}")) for idx, data in self.img.cbufs.items() if data}
    for r in self.img.relocs:
      addr = (glob.va if r.target == "global" else banks[int(r.target)][1].va) + r.addend
      banks[r.bank][0][r.offset:r.offset + r.size] = addr.to_bytes(r.size, "little")
    for idx, (data, m) in banks.items():
      dev.upload(m, data)
      self.cbuf_mems.append(m)
      self.cbufs[idx] = (m.va, round_up(len(data), 16))
    self.cbuf0_size = round_up(max(self.img.cbuf0_size, self.img.param_offset + self.img.param_size, CBUF0_PREFIX), 16)
    self.qmd_templates: dict[tuple[tuple[int, ...], tuple[int, ...], bool], int] = {}
    self.cbuf0_template = bytearray(self.cbuf0_size)
    # the shared and local windows and where the stack starts: below the reserved top of the local window
    struct.pack_into("<QQQ", self.cbuf0_template, 0x18, SHARED_WINDOW, LOCAL_WINDOW, 0x1000000 - LMEM_RESERVED)
    if self.cbuf0_size + QMD_BYTES["V04_00"] > LAUNCH_SLOT: raise RuntimeError(f"kernel {name}: {self.cbuf0_size} bytes of constant bank 0 is more than NVK+NV's launch slot")

  def __del__(self) -> None:
    try:
      for m in [getattr(self, "code", None), *getattr(self, "cbuf_mems", [])]:
        if m is not None: self.dev.free(m)
    except Exception:  # noqa: BLE001  interpreter shutdown: the device may be gone already
      return

  def fill(self, slot_cpu: int, slot_va: int, bufs: tuple[GPUMem, ...], vals: tuple[int, ...], global_size: tuple[int, ...],
           local_size: tuple[int, ...], release: tuple[int, int] | None) -> int:
    """Write constant bank 0 and the QMD of one launch into a launch slot; the QMD's GPU address."""
    img = self.img
    gs, ls = (tuple(global_size) + (1, 1, 1))[:3], (tuple(local_size) + (1, 1, 1))[:3]
    threads = ls[0] * ls[1] * ls[2]
    if img.max_threads and threads > img.max_threads: raise RuntimeError(f"kernel {self.name}: local size {ls} exceeds its limit of {img.max_threads} threads per block")
    cbuf = bytearray(self.cbuf0_template)  # the driver's prefix (windows, stack top) is in the template; block/grid dims first
    struct.pack_into("<6I", cbuf, 0, *ls, *gs)
    cbuf[img.param_offset:img.param_offset + img.param_size] = self.param_bytes(bufs, vals)
    ctypes.memmove(slot_cpu + QMD_ALIGN * 2, bytes(cbuf), len(cbuf))  # the QMD first (<= 384 bytes), constant bank 0 after it
    key = (gs, ls, release is not None)
    if (template := self.qmd_templates.get(key)) is None:  # the QMD of this grid and block, its per-launch fields zero
      q = LaunchQMD(program=self.code.va, grid=gs, block=ls, registers=min(255, round_up(max(img.registers, 1), 8)), barriers=img.barriers,  # type: ignore[arg-type]
                    shared=round_up(img.shared, 256), local_high=round_up(img.local_size + LMEM_RESERVED, 16),
                    cbufs={0: (0, self.cbuf0_size), **self.cbufs}, release=(0, 0) if release is not None else None, arch=self.dev.arch_number)
      template = self.qmd_templates[key] = int.from_bytes(encode_launch(self.dev.qmd_version, q), "little")
    version = self.dev.qmd_version
    fields = cbuf_address_fields(version, 0, slot_va + QMD_ALIGN * 2)
    if release is not None: fields.update(release_fields(version, release))
    ctypes.memmove(slot_cpu, qmd_patch(version, template, fields).to_bytes(QMD_BYTES[version], "little"), QMD_BYTES[version])
    return slot_va

  def param_bytes(self, bufs: tuple[GPUMem, ...], vals: tuple[int, ...]) -> bytes:
    """The params' part of constant bank 0: buffer addresses and int32 values where the cubin puts them."""
    img = self.img
    if len(bufs) + len(vals) != len(img.params):
      raise TypeError(f"kernel {self.name!r} takes {len(img.params)} arguments, got {len(bufs)} buffers and {len(vals)} values")
    out = bytearray(img.param_size)
    for p in img.params:
      if p.ordinal < len(bufs):
        if p.size != 8: raise TypeError(f"kernel {self.name}: parameter {p.ordinal} is {p.size} bytes, a buffer pointer is 8")
        struct.pack_into("<Q", out, p.offset, bufs[p.ordinal].va)
      else:
        if p.size != 4: raise TypeError(f"kernel {self.name}: parameter {p.ordinal} is {p.size} bytes, our values are int32")
        struct.pack_into("<i", out, p.offset, vals[p.ordinal - len(bufs)])
    return bytes(out)

  def patch_params(self, slot_cpu: int, bufs: tuple[GPUMem, ...], vals: tuple[int, ...]) -> None:
    """Rewrite only the params of a launch already in a slot (same grid and block: its QMD stays as it is)."""
    data = self.param_bytes(bufs, vals)
    ctypes.memmove(slot_cpu + QMD_ALIGN * 2 + self.img.param_offset, data, len(data))

  def __call__(self, *bufs: GPUMem, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    dev = self.dev
    if any(g == 0 for g in global_size): return 0.0 if wait else None  # nothing to do (empty tensors)
    off = dev.launch_slot()
    dev.launches += 1
    qmd = self.fill(dev.launch_ring.cpu + off, dev.launch_ring.va + off, bufs, vals, global_size, local_size,  # type: ignore[operator]
                    (dev.signals.va + 256, dev.launches & 0xFFFFFFFF))
    pb = cls.PushBuffer()
    dev.recent.append(f"launch #{dev.launches} {self.name} grid {tuple(global_size)} block {tuple(local_size)}")
    if wait: pb.semaphore_release(dev.signals.va + 16, 1, timestamp=True)
    pb.launch(qmd)
    if wait: pb.semaphore_release(dev.signals.va + 32, 1, timestamp=True)
    dev.submit(pb)
    if not wait: return None
    dev.synchronize()
    start, end = (ctypes.c_uint64.from_address(dev.signals.cpu + o).value for o in (24, 40))  # type: ignore[operator]
    return (end - start) / 1e9
