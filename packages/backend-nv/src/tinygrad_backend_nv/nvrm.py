"""RM (the NVIDIA kernel driver's resource manager) calls over an `Interface`: objects allocated, controlled and freed by
handle through the NV_ESC_RM_* escapes on /dev/nvidiactl, and the UVM ioctls on /dev/nvidia-uvm. Every failure is an
`NVError` naming the call, the escape or ioctl and its request number, errno and the RM status; DEBUG>=2 prints each
object allocated with its class and handle (the bring-up is then visible step by step)."""
from __future__ import annotations

import ctypes
import os

from tinygrad_backend_nv import nv_ioctl as nv
from tinygrad_backend_nv.iface import NVIDIA_UVM, NVIDIACTL, Interface
from tinygrad_backend_nv.nv_classes import NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, NV01_ROOT_CLIENT, class_name

FIRST_HANDLE = 0xCF000000  # the handles we pick for our objects (RM lets a client choose them); the client's own is RM's


class NVError(RuntimeError):
  def __init__(self, what: str, call: str, request: int, err: int = 0, status: int = 0):
    detail = f"errno {err} ({os.strerror(err)})" if err else f"RM status {status:#x} ({nv.status_name(status)})"
    super().__init__(f"{what}: {call} (request {request:#x}) failed with {detail}")
    self.what, self.call, self.request, self.errno, self.status = what, call, request, err, status


class RM:
  def __init__(self, iface: Interface):
    self.iface = iface
    self.debug = int(os.environ.get("DEBUG") or 0) >= 2  # read now, not cached: the probe and tests set it per device
    self.ctl = self._open(NVIDIACTL)
    self.next_handle = FIRST_HANDLE
    self.client = self.alloc(0, NV01_ROOT_CLIENT, what="the RM client")

  def _open(self, path: str) -> int:
    try: return self.iface.open(path)
    except OSError as e: raise NVError(f"open {path}", "open", 0, e.errno or 0) from e

  def log(self, msg: str) -> None:
    if self.debug: print(f"NVK: {msg}", flush=True)

  def escape(self, fd: int, esc: int, params: ctypes.Structure | ctypes.Array, what: str) -> None:
    req = nv.nv_request(esc, ctypes.sizeof(params))
    try: self.iface.ioctl(fd, req, params)
    except OSError as e: raise NVError(what, nv.ESC_NAMES.get(esc, f"escape {esc:#x}"), req, e.errno or 0) from e

  def alloc(self, parent: int, cls: int, params: ctypes.Structure | None = None, what: str = "") -> int:
    """Allocate an object of class `cls` under `parent` (0: the root, for the client itself); its handle."""
    handle = 0 if parent == 0 else self._handle()
    p = nv.NVOS21_PARAMETERS(hRoot=getattr(self, "client", 0), hObjectParent=parent, hObjectNew=handle, hClass=cls,
                             pAllocParms=ctypes.addressof(params) if params is not None else 0, paramsSize=ctypes.sizeof(params) if params is not None else 0)
    desc = what or class_name(cls)
    self.escape(self.ctl, nv.NV_ESC_RM_ALLOC, p, f"allocating {desc} ({class_name(cls)})")
    if p.status != nv.NV_OK: raise NVError(f"allocating {desc} ({class_name(cls)}, parent {parent:#x})", "NV_ESC_RM_ALLOC",
                                          nv.nv_request(nv.NV_ESC_RM_ALLOC, ctypes.sizeof(p)), status=p.status)
    self.log(f"allocated {desc}: {class_name(cls)} handle {p.hObjectNew:#x} (parent {parent:#x})")
    return p.hObjectNew

  def _handle(self) -> int:
    self.next_handle += 1
    return self.next_handle

  def control(self, obj: int, cmd: int, params: ctypes.Structure, what: str) -> ctypes.Structure:
    p = nv.NVOS54_PARAMETERS(hClient=self.client, hObject=obj, cmd=cmd, params=ctypes.addressof(params), paramsSize=ctypes.sizeof(params))
    self.escape(self.ctl, nv.NV_ESC_RM_CONTROL, p, f"{what} (control {cmd:#x})")
    if p.status != nv.NV_OK: raise NVError(f"{what} (control {cmd:#x} on {obj:#x})", "NV_ESC_RM_CONTROL",
                                          nv.nv_request(nv.NV_ESC_RM_CONTROL, ctypes.sizeof(p)), status=p.status)
    return params

  def free(self, parent: int, obj: int) -> None:
    p = nv.NVOS00_PARAMETERS(hRoot=self.client, hObjectParent=parent, hObjectOld=obj)
    self.escape(self.ctl, nv.NV_ESC_RM_FREE, p, f"freeing object {obj:#x}")
    if p.status != nv.NV_OK: raise NVError(f"freeing object {obj:#x}", "NV_ESC_RM_FREE", nv.nv_request(nv.NV_ESC_RM_FREE, ctypes.sizeof(p)), status=p.status)

  def alloc_os_memory(self, parent: int, host: int, size: int, what: str) -> int:
    """Describe `size` bytes of host memory at `host` to RM (NV01_MEMORY_SYSTEM_OS_DESCRIPTOR through NV_ESC_RM_ALLOC_MEMORY):
    the GPU then reaches it over PCIe and the CPU keeps its own mapping. Returns the memory object's handle."""
    handle = self._handle()
    p = nv.nv_ioctl_nvos02_parameters_with_fd(params=nv.NVOS02_PARAMETERS(
      hRoot=self.client, hObjectParent=parent, hObjectNew=handle, hClass=NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, pMemory=host, limit=size - 1,
      flags=nv.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS | nv.NVOS02_FLAGS_LOCATION_PCI | nv.NVOS02_FLAGS_COHERENCY_CACHED | nv.NVOS02_FLAGS_MAPPING_NO_MAP), fd=-1)
    self.escape(self.ctl, nv.NV_ESC_RM_ALLOC_MEMORY, p, f"describing host memory for {what}")
    if p.params.status != nv.NV_OK: raise NVError(f"describing {size:#x} bytes of host memory at {host:#x} for {what} (NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)",
                                                 "NV_ESC_RM_ALLOC_MEMORY", nv.nv_request(nv.NV_ESC_RM_ALLOC_MEMORY, ctypes.sizeof(p)), status=p.params.status)
    self.log(f"allocated host memory for {what}: NV01_MEMORY_SYSTEM_OS_DESCRIPTOR handle {handle:#x} ({size:#x} bytes at {host:#x})")
    return handle

  def map_to_cpu(self, device: int, memory: int, size: int, dev_path: str, what: str, flags: int = 0) -> int:
    """Map an RM memory object (or the usermode object) for the CPU: RM_MAP_MEMORY on a fresh fd of /dev/nvidiaN, then an
    mmap of that fd. Returns the host address."""
    fd = self._open(dev_path)
    self.escape(fd, nv.NV_ESC_REGISTER_FD, nv.nv_ioctl_register_fd_t(ctl_fd=self.ctl), f"registering {dev_path} for {what}")
    p = nv.nv_ioctl_nvos33_parameters_with_fd(params=nv.NVOS33_PARAMETERS(hClient=self.client, hDevice=device, hMemory=memory, length=size, flags=flags), fd=fd)
    self.escape(self.ctl, nv.NV_ESC_RM_MAP_MEMORY, p, f"mapping {what} for the CPU")
    if p.params.status != nv.NV_OK: raise NVError(f"mapping {what} for the CPU", "NV_ESC_RM_MAP_MEMORY",
                                                 nv.nv_request(nv.NV_ESC_RM_MAP_MEMORY, ctypes.sizeof(p)), status=p.params.status)
    from tinygrad_backend_nv.iface import MAP_SHARED, PROT_READ, PROT_WRITE
    prot = PROT_WRITE if flags & 3 == nv.NVOS33_FLAGS_ACCESS_WRITE_ONLY else PROT_READ | PROT_WRITE  # the driver refuses more than RM granted
    try: addr = self.iface.mmap(0, size, prot, MAP_SHARED, fd, 0)
    except OSError as e: raise NVError(f"mapping {what} for the CPU", f"mmap of {dev_path}", 0, e.errno or 0) from e
    self.iface.close(fd)  # the mapping holds the file: one fd per mapping would run out
    self.log(f"mapped {what} ({size:#x} bytes) for the CPU at {addr:#x}")
    return addr


class UVM:
  """/dev/nvidia-uvm: GPU virtual address ranges backed by RM memory (external allocations)."""

  def __init__(self, rm: RM, say=print):
    self.rm, self.iface = rm, rm.iface
    self.fd = rm._open(NVIDIA_UVM)
    self.call(nv.UVM_INITIALIZE, nv.UVM_INITIALIZE_PARAMS(flags=nv.UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE), "initializing UVM")
    # a second UVM fd bound to this process's mm (UVM_MM_INITIALIZE), as CUDA opens one; external allocations work without
    # it, so a sandbox that refuses it costs nothing but a note
    self.fd_mm = rm._open(NVIDIA_UVM)
    try: self.call(nv.UVM_MM_INITIALIZE, nv.UVM_MM_INITIALIZE_PARAMS(uvmFd=self.fd), "initializing UVM's mm fd", fd=self.fd_mm)
    except NVError as e: say(f"note: {e} (continuing without it)")

  def call(self, request: int, params: ctypes.Structure, what: str, fd: int | None = None) -> ctypes.Structure:
    name = nv.UVM_NAMES.get(request, f"UVM ioctl {request}")
    try: self.iface.ioctl(self.fd if fd is None else fd, request, params)
    except OSError as e: raise NVError(what, name, request, e.errno or 0) from e
    status = getattr(params, "rmStatus", 0)
    if status != nv.NV_OK: raise NVError(what, name, request, status=status)
    return params
