"""MOCK: the NVIDIA driver's ioctl surface in Python, for running the NVK+NV runtime without a GPU (DEV=MOCK+NV).

It implements `iface.Interface` like the real `NVK`, with the rules the runtime must follow there:
- /dev/nvidiactl, /dev/nvidia0, /dev/nvidia-uvm; NV escapes are _IOC(READ|WRITE, 'F', escape, size) with the size of the
  escape's structure; RM answers in the structure's status (NV_ERR_*), as RM does, and errno only for a malformed ioctl;
- RM objects by handle under their parents (client, device, subdevice, usermode, VA space, memory, channel group, context
  share, GPFIFO channel, compute and copy objects), each class with its parameter structure (checked by size);
- memory objects are host memory; RM_MAP_MEMORY on a registered /dev/nvidiaN fd, then an mmap of that fd, maps one for the
  CPU; UVM places memory objects at GPU virtual addresses (CREATE_EXTERNAL_RANGE + MAP_EXTERNAL_ALLOCATION): GPU VAs are
  made-up numbers, not host addresses, and anything between mapped ranges is unmapped (an access there is an error);
- the usermode page: a doorbell write of a channel's work-submit token at +0x90 runs that channel's GPFIFO processor
  (mockgpfifo.py) from USERD.GPGet to USERD.GPPut;
- `program`: the runtime shows each cubin it loads; the mock records what the kernel computes (mockprograms.py).
"""
from __future__ import annotations

import bisect
import ctypes
import errno
import mmap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinygrad_backend_nv import nv_classes as cls
from tinygrad_backend_nv import nv_ioctl as nv
from tinygrad_backend_nv.iface import MAP_ANONYMOUS, NVIDIA_UVM, NVIDIACTL

N_GPUS = 4
GPU_ID0, CLIENT0 = 0x100, 0xC1D00001
GR = {nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS: 2, nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC: 2,
      nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC: 2, nv.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: 64}
# class -> (the class its parent must be, its parameter structure or None)
PARENTS: dict[int, tuple[tuple[int, ...], type[ctypes.Structure] | None]] = {
  cls.NV01_DEVICE_0: ((cls.NV01_ROOT_CLIENT,), nv.NV0080_ALLOC_PARAMETERS),
  cls.NV20_SUBDEVICE_0: ((cls.NV01_DEVICE_0,), nv.NV2080_ALLOC_PARAMETERS),
  cls.FERMI_VASPACE_A: ((cls.NV01_DEVICE_0,), nv.NV_VASPACE_ALLOCATION_PARAMETERS),
  cls.NV01_MEMORY_LOCAL_USER: ((cls.NV01_DEVICE_0,), nv.NV_MEMORY_ALLOCATION_PARAMS),
  cls.NV01_MEMORY_SYSTEM: ((cls.NV01_DEVICE_0,), nv.NV_MEMORY_ALLOCATION_PARAMS),
  cls.KEPLER_CHANNEL_GROUP_A: ((cls.NV01_DEVICE_0,), nv.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS),
  cls.FERMI_CONTEXT_SHARE_A: ((cls.KEPLER_CHANNEL_GROUP_A,), nv.NV_CTXSHARE_ALLOCATION_PARAMETERS),
  **{c: ((cls.NV20_SUBDEVICE_0,), None) for c in cls.USERMODE_CLASSES},
  **{c: ((cls.KEPLER_CHANNEL_GROUP_A,), nv.NV_CHANNEL_ALLOC_PARAMS) for c in cls.GPFIFO_CLASSES},
  **{c: (cls.GPFIFO_CLASSES, None) for c in cls.COMPUTE_CLASSES + cls.COPY_CLASSES},
}
# the classes each emulated arch has: (GPFIFO, compute, copy, usermode)
ARCH_CLASSES = {90: (cls.HOPPER_CHANNEL_GPFIFO_A, cls.HOPPER_COMPUTE_A, cls.HOPPER_DMA_COPY_A, cls.HOPPER_USERMODE_A),
                89: (cls.AMPERE_CHANNEL_GPFIFO_A, cls.ADA_COMPUTE_A, cls.AMPERE_DMA_COPY_B, cls.AMPERE_USERMODE_A),
                86: (cls.AMPERE_CHANNEL_GPFIFO_A, cls.AMPERE_COMPUTE_B, cls.AMPERE_DMA_COPY_B, cls.AMPERE_USERMODE_A),
                80: (cls.AMPERE_CHANNEL_GPFIFO_A, cls.AMPERE_COMPUTE_A, cls.AMPERE_DMA_COPY_A, cls.AMPERE_USERMODE_A)}


def _fail(code: int, msg: str) -> OSError: return OSError(code, f"MOCK+NV: {msg}")


class RMStatus(Exception):
  def __init__(self, status: int, msg: str):
    super().__init__(msg)
    self.status = status


@dataclass
class Obj:
  handle: int
  cls: int
  parent: int
  params: Any = None
  gpu: int = 0
  backing: ctypes.Array | None = None  # memory objects: their contents
  size: int = 0
  vidmem: bool = False
  extra: dict = field(default_factory=dict)

  @property
  def host(self) -> int: return ctypes.addressof(self.backing)  # type: ignore[arg-type]

  def view(self, off: int, size: int) -> memoryview: return memoryview(self.backing).cast("B")[off:off + size]  # type: ignore[arg-type]


def _host_memory(size: int) -> tuple[ctypes.Array, mmap.mmap]:
  m = mmap.mmap(-1, size)
  return (ctypes.c_char * size).from_buffer(m), m


@dataclass
class Range:
  va: int
  size: int
  mem: Obj | None = None  # None: reserved (CREATE_EXTERNAL_RANGE), not mapped yet


class MockNV:
  """N_GPUS mock GPUs of one arch (sm_90 by default: Hopper's classes and QMD V04_00)."""
  name = "MOCK"

  def __init__(self, arch: str = "sm_90"):
    self.arch = int(arch[3:].rstrip("a")) if arch else 90
    if self.arch not in ARCH_CLASSES: raise ValueError(f"MOCK+NV emulates {', '.join(f'sm_{a}' for a in ARCH_CLASSES)}, not {arch}")
    self.fds: dict[int, dict[str, Any]] = {}
    self.objs: dict[int, Obj] = {}
    self.clients = 0
    self.ranges: list[int] = []            # sorted range starts
    self.range_at: dict[int, Range] = {}
    self.cpu_maps: dict[int, tuple[Obj, int]] = {}  # host address -> (object, size)
    self.anon: dict[int, tuple[ctypes.Array, mmap.mmap]] = {}  # anonymous host mappings the runtime made (for OS descriptors)
    self.usermode_pages: dict[int, Obj] = {}        # host address of a mapped usermode page -> its object
    self.uvm_ready = False
    self.uvm_gpus: set[bytes] = set()
    self.uvm_vaspaces: set[int] = set()
    self.channels: dict[int, Any] = {}  # work-submit token -> GPFIFO processor
    self.code_at: dict[int, tuple[Any, Any]] = {}  # GPU VA of a loaded kernel's code -> (its image, what it computes)
    self.functions: dict[str, Callable[..., Any]] = {}  # kernel name -> the Python function that stands for it (register_function)

  # ---- files
  def exists(self, path: str) -> bool: return path in (NVIDIACTL, NVIDIA_UVM) or path in (f"/dev/nvidia{i}" for i in range(N_GPUS))

  def open(self, path: str) -> int:
    if not self.exists(path): raise _fail(errno.ENOENT, f"no such device node {path}")
    fd = 1000 + len(self.fds)
    self.fds[fd] = {"path": path}
    return fd

  def close(self, fd: int) -> None: self.fds.pop(fd, None)

  # ---- memory the CPU sees
  def mmap(self, addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int:
    if fd == -1:
      if not flags & MAP_ANONYMOUS or addr: raise _fail(errno.EINVAL, "an mmap without an fd must be MAP_ANONYMOUS at an address of the kernel's choosing")
      arr, m = _host_memory(size)
      self.anon[ctypes.addressof(arr)] = (arr, m)
      return ctypes.addressof(arr)
    f = self.fds.get(fd)
    if f is None or not f["path"].startswith("/dev/nvidia") or f["path"] in (NVIDIACTL, NVIDIA_UVM):
      raise _fail(errno.EINVAL, f"mmap of fd {fd}: MOCK+NV maps only /dev/nvidiaN fds that RM_MAP_MEMORY prepared")
    if (pending := f.pop("map", None)) is None: raise _fail(errno.EINVAL, f"mmap of {f['path']} (fd {fd}) without an RM_MAP_MEMORY on it first")
    obj, length = pending
    if size != length or offset != 0: raise _fail(errno.EINVAL, f"mmap of {size:#x} bytes at offset {offset:#x}: RM_MAP_MEMORY prepared {length:#x} at offset 0")
    host = obj.host
    self.cpu_maps[host] = (obj, size)
    if obj.cls in cls.USERMODE_CLASSES: self.usermode_pages[host] = obj
    return host

  def munmap(self, addr: int, size: int) -> None:
    if addr in self.anon:
      if any(o.cls == cls.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR and o.host == addr for o in self.objs.values()):
        raise _fail(errno.EBUSY, f"munmap of host memory at {addr:#x} that an RM memory object still describes: free the object first")
      del self.anon[addr]  # the memory goes when nothing views it any more
      return
    if self.cpu_maps.pop(addr, None) is None: raise _fail(errno.EINVAL, f"munmap of {addr:#x}, which is no CPU mapping of an RM object")

  # ---- GPU virtual memory
  def find(self, va: int, size: int = 1) -> tuple[Obj, int] | None:
    """The memory object mapped at [va, va + size) and the offset of va in it, or None."""
    i = bisect.bisect_right(self.ranges, va) - 1
    if i < 0: return None
    r = self.range_at[self.ranges[i]]
    if r.mem is None or va + size > r.va + r.size: return None
    return r.mem, va - r.va

  def gpu_view(self, va: int, size: int) -> memoryview:
    hit = self.find(va, size)
    if hit is None: raise KeyError(va)
    obj, off = hit
    return obj.view(off, size)

  # ---- ioctls
  def ioctl(self, fd: int, request: int, arg: ctypes.Structure | ctypes.Array) -> None:
    f = self.fds.get(fd)
    if f is None: raise _fail(errno.EBADF, f"ioctl {request:#x} on fd {fd}, which is not open")
    if f["path"] == NVIDIA_UVM: return self._uvm(fd, request, arg)
    if (request >> 8) & 0xFF != nv.NV_IOCTL_MAGIC: raise _fail(errno.ENOTTY, f"ioctl {request:#x} on {f['path']} is not an NV escape ('F')")
    esc, size = request & 0xFF, (request >> 16) & 0x3FFF
    if size != ctypes.sizeof(arg): raise _fail(errno.EINVAL, f"escape {esc:#x}: the request says {size} bytes, the argument is {ctypes.sizeof(arg)}")
    if esc == nv.NV_ESC_CARD_INFO:
      if not isinstance(arg, nv.CardInfoArray): raise _fail(errno.EINVAL, "NV_ESC_CARD_INFO takes nv_ioctl_card_info_t[NV_MAX_DEVICES]")
      for i in range(N_GPUS):
        arg[i].valid, arg[i].gpu_id, arg[i].minor_number = 1, GPU_ID0 + i, i
        arg[i].pci_info.bus, arg[i].pci_info.vendor_id = 0x18 + i, 0x10DE
      return None
    if esc == nv.NV_ESC_REGISTER_FD:
      if self.fds.get(arg.ctl_fd, {}).get("path") != NVIDIACTL: raise _fail(errno.EINVAL, f"REGISTER_FD: fd {arg.ctl_fd} is not /dev/nvidiactl")  # type: ignore[union-attr]
      f["ctl"] = arg.ctl_fd  # type: ignore[union-attr]
      return None
    if f["path"] != NVIDIACTL: raise _fail(errno.EINVAL, f"escape {esc:#x} on {f['path']}: RM escapes go to /dev/nvidiactl")
    handlers: dict[int, tuple[type, Callable]] = {nv.NV_ESC_RM_ALLOC: (nv.NVOS21_PARAMETERS, self._alloc), nv.NV_ESC_RM_CONTROL: (nv.NVOS54_PARAMETERS, self._control),
                                                  nv.NV_ESC_RM_FREE: (nv.NVOS00_PARAMETERS, self._free),
                                                  nv.NV_ESC_RM_ALLOC_MEMORY: (nv.nv_ioctl_nvos02_parameters_with_fd, self._alloc_memory),
                                                  nv.NV_ESC_RM_MAP_MEMORY: (nv.nv_ioctl_nvos33_parameters_with_fd, self._map_memory)}
    if esc not in handlers: raise _fail(errno.ENOTTY, f"escape {esc:#x} is not one MOCK+NV implements")
    want, fn = handlers[esc]
    if not isinstance(arg, want): raise _fail(errno.EINVAL, f"escape {nv.ESC_NAMES.get(esc)} takes {want.__name__}, got {type(arg).__name__}")
    target: Any = arg.params if isinstance(arg, (nv.nv_ioctl_nvos33_parameters_with_fd, nv.nv_ioctl_nvos02_parameters_with_fd)) else arg
    try:
      fn(arg)
      target.status = nv.NV_OK
    except RMStatus as e:
      target.status = e.status
      self.last_error = str(e)
    return None

  def _obj(self, handle: int, what: str) -> Obj:
    if handle not in self.objs: raise RMStatus(0x33, f"{what}: no object {handle:#x}")  # NV_ERR_INVALID_OBJECT_HANDLE
    return self.objs[handle]

  def _alloc(self, p: nv.NVOS21_PARAMETERS) -> None:
    if p.hClass == cls.NV01_ROOT_CLIENT:
      if p.hObjectParent != 0: raise RMStatus(0x36, "a client is allocated at the root (parent 0)")
      self.clients += 1
      p.hObjectNew = CLIENT0 + self.clients - 1
      self.objs[p.hObjectNew] = Obj(p.hObjectNew, cls.NV01_ROOT_CLIENT, 0)
      return
    client = self._obj(p.hRoot, "RM_ALLOC's client")
    if client.cls != cls.NV01_ROOT_CLIENT: raise RMStatus(0x33, f"hRoot {p.hRoot:#x} is not a client")
    if p.hClass not in PARENTS: raise RMStatus(0x22, f"class {p.hClass:#x} is not one MOCK+NV emulates")
    if p.hObjectNew == 0 or p.hObjectNew in self.objs: raise RMStatus(0x33, f"handle {p.hObjectNew:#x} is zero or taken")
    parent = self._obj(p.hObjectParent, f"the parent of {cls.class_name(p.hClass)}")
    want_parent, want_params = PARENTS[p.hClass]
    if parent.cls not in want_parent: raise RMStatus(0x36, f"{cls.class_name(p.hClass)} under {cls.class_name(parent.cls)}: its parent must be {', '.join(map(cls.class_name, want_parent))}")
    gpu = parent.gpu
    if p.hClass in (cls.COMPUTE_CLASSES + cls.COPY_CLASSES + cls.GPFIFO_CLASSES + cls.USERMODE_CLASSES) and p.hClass not in ARCH_CLASSES[self.arch]:
      raise RMStatus(0x22, f"{cls.class_name(p.hClass)} is not a class of this sm_{self.arch} GPU")
    params = None
    if want_params is not None:
      if p.paramsSize != ctypes.sizeof(want_params) or not p.pAllocParms:
        raise RMStatus(0x3A, f"{cls.class_name(p.hClass)} takes {want_params.__name__} ({ctypes.sizeof(want_params)} bytes), got {p.paramsSize} bytes")
      params = want_params.from_address(p.pAllocParms)
    obj = Obj(p.hObjectNew, p.hClass, p.hObjectParent, params, gpu)
    if p.hClass == cls.NV01_DEVICE_0:
      if params.deviceId >= N_GPUS: raise RMStatus(0x26, f"device {params.deviceId}: there are {N_GPUS}")  # type: ignore[union-attr]
      obj.gpu = params.deviceId  # type: ignore[union-attr]
    elif p.hClass in (cls.NV01_MEMORY_LOCAL_USER, cls.NV01_MEMORY_SYSTEM):
      if params.size == 0 or params.size % 4096: raise RMStatus(0x1F, f"memory of {params.size:#x} bytes is not whole pages")  # type: ignore[union-attr]
      obj.size, obj.vidmem = params.size, p.hClass == cls.NV01_MEMORY_LOCAL_USER  # type: ignore[union-attr]
      obj.backing, obj.extra["mmap"] = _host_memory(obj.size)
    elif p.hClass in cls.USERMODE_CLASSES:
      (obj.backing, obj.extra["mmap"]), obj.size = _host_memory(cls.USERMODE_SIZE), cls.USERMODE_SIZE
    elif p.hClass == cls.FERMI_VASPACE_A:
      if not params.flags & nv.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED: obj.extra["internal"] = True  # type: ignore[union-attr]
    elif p.hClass in cls.GPFIFO_CLASSES: self._channel(obj, params)  # type: ignore[arg-type]
    self.objs[obj.handle] = obj

  def _alloc_memory(self, w: nv.nv_ioctl_nvos02_parameters_with_fd) -> None:
    p = w.params
    if p.hClass != cls.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: raise RMStatus(0x22, f"RM_ALLOC_MEMORY of {cls.class_name(p.hClass)}: MOCK+NV describes host memory (NV01_MEMORY_SYSTEM_OS_DESCRIPTOR) only")
    if self._obj(p.hRoot, "RM_ALLOC_MEMORY's client").cls != cls.NV01_ROOT_CLIENT: raise RMStatus(0x33, f"hRoot {p.hRoot:#x} is not a client")
    parent = self._obj(p.hObjectParent, "the parent of host memory")
    if parent.cls != cls.NV01_DEVICE_0: raise RMStatus(0x36, "host memory is described under a device")
    if p.hObjectNew == 0 or p.hObjectNew in self.objs: raise RMStatus(0x33, f"handle {p.hObjectNew:#x} is zero or taken")
    size = p.limit + 1
    base = next((a for a, (arr, _) in self.anon.items() if a <= p.pMemory and p.pMemory + size <= a + ctypes.sizeof(arr)), None)
    if base is None or p.pMemory % 4096 or size % 4096: raise RMStatus(0x1E, f"host memory {p.pMemory:#x}+{size:#x} is not whole pages of one anonymous mapping")
    obj = Obj(p.hObjectNew, p.hClass, p.hObjectParent, None, parent.gpu, (ctypes.c_char * size).from_address(p.pMemory), size)
    obj.extra["keep"] = self.anon[base]  # the pages stay while RM describes them
    self.objs[obj.handle] = obj

  def _channel(self, obj: Obj, params: nv.NV_CHANNEL_ALLOC_PARAMS) -> None:
    from tinygrad_backend_nv.mockgpfifo import GPFIFOProcessor
    for what, h in (("error notifier", params.hObjectError), ("GPFIFO buffer", params.hObjectBuffer), ("USERD memory", params.hUserdMemory[0])):
      if self.objs.get(h) is None or self.objs[h].backing is None: raise RMStatus(0x33, f"GPFIFO channel: the {what} handle {h:#x} is no memory object")
    ctx = self.objs.get(params.hContextShare)
    if ctx is None or ctx.cls != cls.FERMI_CONTEXT_SHARE_A: raise RMStatus(0x33, "GPFIFO channel: hContextShare is no context share")
    entries = params.gpFifoEntries
    if entries < 2 or entries & (entries - 1): raise RMStatus(0x1F, f"GPFIFO channel: {entries} entries is not a power of two")
    userd = self.objs[params.hUserdMemory[0]]
    if params.userdOffset[0] + cls.USERD_SIZE > userd.size or params.userdOffset[0] % 512: raise RMStatus(0x37, "GPFIFO channel: USERD offset out of its memory or not 512-aligned")
    token = 0x40 + len(self.channels)
    obj.extra.update(token=token, scheduled=False)
    self.channels[token] = GPFIFOProcessor(self, obj, params.gpFifoOffset, entries, userd, params.userdOffset[0], self.objs[params.hObjectError])

  def _free(self, p: nv.NVOS00_PARAMETERS) -> None:
    obj = self._obj(p.hObjectOld, "RM_FREE")
    if any(o.parent == obj.handle for o in self.objs.values()): raise RMStatus(0x17, f"RM_FREE of {obj.handle:#x}: free its children first")
    if obj.backing is not None and any(r.mem is obj for r in self.range_at.values()): raise RMStatus(0x17, f"RM_FREE of memory {obj.handle:#x} still mapped on the GPU (UVM_FREE first)")
    del self.objs[obj.handle]

  def _control(self, p: nv.NVOS54_PARAMETERS) -> None:
    obj = self._obj(p.hObject, f"control {p.cmd:#x}")
    ctrl: dict[int, tuple[tuple[int, ...], type[ctypes.Structure]]] = {
      nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: ((cls.NV01_ROOT_CLIENT,), nv.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS),
      nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2: ((cls.NV01_DEVICE_0,), nv.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS),
      nv.NV2080_CTRL_CMD_GPU_GET_GID_INFO: ((cls.NV20_SUBDEVICE_0,), nv.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS),
      nv.NV2080_CTRL_CMD_GR_GET_INFO: ((cls.NV20_SUBDEVICE_0,), nv.NV2080_CTRL_GR_GET_INFO_PARAMS),
      nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: (cls.GPFIFO_CLASSES, nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS),
      nv.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: ((cls.KEPLER_CHANNEL_GROUP_A,), nv.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS)}
    if p.cmd not in ctrl: raise RMStatus(0x56, f"control {p.cmd:#x} is not one MOCK+NV emulates")
    on, st = ctrl[p.cmd]
    if obj.cls not in on: raise RMStatus(0x24, f"control {p.cmd:#x} on a {cls.class_name(obj.cls)}: it is a control of {', '.join(map(cls.class_name, on))}")
    if p.paramsSize != ctypes.sizeof(st) or not p.params: raise RMStatus(0x3A, f"control {p.cmd:#x} takes {st.__name__} ({ctypes.sizeof(st)} bytes), got {p.paramsSize}")
    a: Any = st.from_address(p.params)
    if p.cmd == nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2:
      if not GPU_ID0 <= a.gpuId < GPU_ID0 + N_GPUS: raise RMStatus(0x1F, f"gpu id {a.gpuId:#x} is no GPU's")
      a.deviceInstance = a.subDeviceInstance = a.gpuId - GPU_ID0
      a.deviceInstance, a.subDeviceInstance = a.gpuId - GPU_ID0, 0
    elif p.cmd == nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2:
      have = (cls.NV01_MEMORY_SYSTEM, cls.NV01_MEMORY_LOCAL_USER, cls.FERMI_VASPACE_A, cls.KEPLER_CHANNEL_GROUP_A, cls.FERMI_CONTEXT_SHARE_A, *ARCH_CLASSES[self.arch])
      a.numClasses = len(have)
      for i, c in enumerate(have): a.classList[i] = c
    elif p.cmd == nv.NV2080_CTRL_CMD_GPU_GET_GID_INFO:
      if a.length != 16 or not a.flags & nv.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY: raise RMStatus(0x1F, "GID info: MOCK+NV answers the 16-byte binary form")
      for i, b in enumerate(self.uuid(obj.gpu)): a.data[i] = b
    elif p.cmd == nv.NV2080_CTRL_CMD_GR_GET_INFO:
      infos = (nv.NVXXXX_CTRL_XXX_INFO * a.grInfoListSize).from_address(a.grInfoList)
      for info in infos:
        if info.index == nv.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION: info.data = (self.arch // 10) << 8 | self.arch % 10
        elif info.index in GR: info.data = GR[info.index]
        else: raise RMStatus(0x1F, f"GR info index {info.index:#x} is not one MOCK+NV answers")
    elif p.cmd == nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: a.workSubmitToken = obj.extra["token"]
    elif p.cmd == nv.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE:
      chans = [o for o in self.objs.values() if o.parent == obj.handle and o.cls in cls.GPFIFO_CLASSES]
      # as RM (kernel_channel_group_api.c): a channel not registered with UVM can't be scheduled
      if a.bEnable and not all(o.extra.get("uvm_registered") for o in chans): raise RMStatus(0x40, "GPFIFO_SCHEDULE: a channel is not registered with UVM")
      for o in chans: o.extra["scheduled"] = bool(a.bEnable)

  def uuid(self, gpu: int) -> bytes: return bytes([0x6D, 0x6F, 0x63, 0x6B, gpu]) + bytes(11)

  def _map_memory(self, w: nv.nv_ioctl_nvos33_parameters_with_fd) -> None:
    p = w.params
    f = self.fds.get(w.fd)
    if f is None or not f["path"].startswith("/dev/nvidia") or f["path"] in (NVIDIACTL, NVIDIA_UVM) or "ctl" not in f:
      raise RMStatus(0x1F, f"RM_MAP_MEMORY: fd {w.fd} is not a /dev/nvidiaN fd registered with REGISTER_FD")
    obj = self._obj(p.hMemory, "RM_MAP_MEMORY")
    if obj.backing is None: raise RMStatus(0x1F, f"RM_MAP_MEMORY of {cls.class_name(obj.cls)} {obj.handle:#x}: not memory")
    if obj.cls == cls.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: raise RMStatus(0x56, "RM_MAP_MEMORY of host memory: the CPU has it already")
    if p.offset + p.length > obj.size or p.offset: raise RMStatus(0x2E, f"RM_MAP_MEMORY of {p.length:#x} bytes at {p.offset:#x} of a {obj.size:#x}-byte object")
    f["map"] = (obj, p.length)
    p.pLinearAddress = 0

  # ---- UVM
  def _uvm(self, fd: int, request: int, arg: Any) -> None:
    want = nv.UVM_ARGS.get(request)
    if want is None: raise _fail(errno.ENOTTY, f"UVM ioctl {request} is not one MOCK+NV implements")
    if not isinstance(arg, want): raise _fail(errno.EINVAL, f"{nv.UVM_NAMES[request]} takes {want.__name__}, got {type(arg).__name__}")
    arg.rmStatus = 0
    if request == nv.UVM_INITIALIZE:
      self.fds[fd]["uvm"] = True
      self.uvm_ready = True
      return
    if request == nv.UVM_MM_INITIALIZE:
      if not self.fds.get(arg.uvmFd, {}).get("uvm"): arg.rmStatus = 0x40  # NV_ERR_INVALID_STATE
      return
    if not self.fds[fd].get("uvm"): raise _fail(errno.EINVAL, f"{nv.UVM_NAMES[request]} on a UVM fd that UVM_INITIALIZE was not called on")
    try: self._uvm_call(request, arg)
    except RMStatus as e:
      arg.rmStatus = e.status
      self.last_error = str(e)

  def _uvm_call(self, request: int, arg: Any) -> None:
    if request == nv.UVM_REGISTER_GPU:
      u = bytes(arg.gpu_uuid.uuid)
      if u not in (self.uuid(i) for i in range(N_GPUS)): raise RMStatus(0x12, "REGISTER_GPU: no GPU has that UUID")
      self.uvm_gpus.add(u)
    elif request == nv.UVM_REGISTER_GPU_VASPACE:
      if bytes(arg.gpuUuid.uuid) not in self.uvm_gpus: raise RMStatus(0x12, "REGISTER_GPU_VASPACE before REGISTER_GPU")
      vas = self.objs.get(arg.hVaSpace)
      if vas is None or vas.cls != cls.FERMI_VASPACE_A or vas.extra.get("internal"): raise RMStatus(0x1F, "REGISTER_GPU_VASPACE: not an externally owned VA space")
      self.uvm_vaspaces.add(arg.hVaSpace)
    elif request == nv.UVM_CREATE_EXTERNAL_RANGE:
      if not self.uvm_vaspaces: raise RMStatus(0x40, "CREATE_EXTERNAL_RANGE before a VA space was registered")
      if arg.base % 4096 or arg.length % 4096 or not arg.length: raise RMStatus(0x1F, f"range {arg.base:#x}+{arg.length:#x} is not page aligned")
      i = bisect.bisect_left(self.ranges, arg.base)
      prev = self.range_at[self.ranges[i - 1]] if i else None
      if (prev and prev.va + prev.size > arg.base) or (i < len(self.ranges) and self.ranges[i] < arg.base + arg.length):
        raise RMStatus(0x68, f"range {arg.base:#x}+{arg.length:#x} overlaps another")  # NV_ERR_UVM_ADDRESS_IN_USE
      bisect.insort(self.ranges, arg.base)
      self.range_at[arg.base] = Range(arg.base, arg.length)
    elif request == nv.UVM_MAP_EXTERNAL_ALLOCATION:
      r = self.range_at.get(arg.base)
      if r is None or r.size != arg.length: raise RMStatus(0x1E, f"MAP_EXTERNAL_ALLOCATION at {arg.base:#x}+{arg.length:#x}: no external range there")
      mem = self.objs.get(arg.hMemory)
      if mem is None or mem.backing is None: raise RMStatus(0x33, f"MAP_EXTERNAL_ALLOCATION: {arg.hMemory:#x} is no memory object")
      if arg.offset + arg.length > mem.size: raise RMStatus(0x2E, "MAP_EXTERNAL_ALLOCATION past the memory object's end")
      if arg.gpuAttributesCount != 1 or bytes(arg.perGpuAttributes[0].gpuUuid.uuid) not in self.uvm_gpus: raise RMStatus(0x12, "MAP_EXTERNAL_ALLOCATION: name one registered GPU")
      r.mem = mem
    elif request == nv.UVM_REGISTER_CHANNEL:
      ch = self.objs.get(arg.hChannel)
      if ch is None or ch.cls not in cls.GPFIFO_CLASSES: raise RMStatus(0x33, f"REGISTER_CHANNEL: {arg.hChannel:#x} is no GPFIFO channel")
      if bytes(arg.gpuUuid.uuid) not in self.uvm_gpus: raise RMStatus(0x12, "REGISTER_CHANNEL before REGISTER_GPU")
      i = bisect.bisect_left(self.ranges, arg.base)
      prev = self.range_at[self.ranges[i - 1]] if i else None
      if (prev and prev.va + prev.size > arg.base) or (i < len(self.ranges) and self.ranges[i] < arg.base + arg.length):
        raise RMStatus(0x68, f"channel range {arg.base:#x}+{arg.length:#x} overlaps another")
      bisect.insort(self.ranges, arg.base)
      self.range_at[arg.base] = Range(arg.base, arg.length)
      ch.extra["uvm_registered"] = True
    elif request == nv.UVM_FREE:
      if self.range_at.get(arg.base) is None: raise RMStatus(0x1E, f"UVM_FREE at {arg.base:#x}: no range there")
      del self.range_at[arg.base]
      self.ranges.remove(arg.base)

  # ---- the doorbell and programs
  def write_doorbell(self, addr: int, value: int) -> None:
    page = next((h for h in self.usermode_pages if h <= addr < h + cls.USERMODE_SIZE), None)
    if page is None: raise _fail(errno.EFAULT, f"doorbell write at {addr:#x}, which is in no mapped usermode page")
    if addr - page != cls.USERMODE_NOTIFY_CHANNEL_PENDING: raise _fail(errno.EFAULT, f"doorbell write at usermode+{addr - page:#x}; the doorbell is NOTIFY_CHANNEL_PENDING (+0x90)")
    proc = self.channels.get(value)
    if proc is None: raise _fail(errno.EINVAL, f"doorbell rung with {value:#x}, which is no channel's work-submit token")
    if not proc.channel.extra.get("scheduled"): raise _fail(errno.EINVAL, "doorbell rung for a channel whose group was never scheduled (NVA06C_CTRL_CMD_GPFIFO_SCHEDULE)")
    ctypes.c_uint32.from_address(addr).value = value
    proc.kick()

  def program(self, lib: bytes, name: str, va: int) -> None:
    from tinygrad_backend_nv.mockprograms import describe
    self.code_at[va] = describe(lib, name, self.functions.get(name))

  def register_function(self, lib: bytes, name: str, fn: Callable[..., Any]) -> None:
    """Tell the mock what a kernel compiled outside tinygrad computes (nv_bringup.py --mock): fn(*bufs, global_size, local_size, vals)."""
    self.functions[name] = fn
