"""The QCOM device: an Adreno GPU driven through kgsl ioctls, written once against an interface (kgsl.Interface).

`DEV=KGSL+QCOM` (or plain `QCOM`) talks to /dev/kgsl-3d0; `DEV=MOCKKGSL+QCOM` to mockkgsl.MockKgsl, which checks every
packet and executes each dispatch. Everything above the interface is the same code.

- memory: one kgsl GPU object per buffer (IOCTL_KGSL_GPUOBJ_ALLOC, _INFO for its GPU address, mmap for the CPU's view);
  copies in and out are memcpys through that mapping after the GPU is idle.
- a kernel: its shader object (shaderobj.py) in a GPU object; each launch writes its constants (buffer addresses,
  Variable values) into a constant ring and a PM4 indirect buffer (IB) into a command ring:
    CP_SET_MARKER(RM6_COMPUTE); HLSQ_CS_CNTL (constant length, enabled); SP_CS_OBJ_START, SP_CS_INSTRLEN (the shader);
    CP_LOAD_STATE6_FRAG(ST6_CONSTANTS, SS6_INDIRECT, SB6_CS_SHADER) from the constant ring;
    HLSQ_CS_NDRANGE_0..6 (local size, global size), CP_EXEC_CS(groups); CP_EVENT_WRITE(CACHE_FLUSH_TS) of our fence value
  then submits it (IOCTL_KGSL_GPU_COMMAND on our draw context). kgsl returns a timestamp; waiting is
  IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, after which the fence value must be in memory.
Never run on an Adreno: the register sequence follows freedreno's a6xx.xml, but a real GPU also needs the vendor
binary's native code and more shader state (register footprint, SP_CS_CTRL_REG0, ...): see docs/backends.md.
"""
from __future__ import annotations

import ctypes
import struct
import time
from typing import Any, cast

from tinygrad.device.plugin import Allocator, Compiled, KernelLaunch

from tinygrad_backend_qcom import kgsl, pm4
from tinygrad_backend_qcom.shaderobj import pack_constants, pack_image

KGSL_PATH = "/dev/kgsl-3d0"
CMD_RING, CONST_RING = 1 << 16, 1 << 18
WAIT_TIMEOUT_MS = 60_000
MAX_LOCAL = 1024  # LOCALSIZEX/Y/Z are 10-bit fields (minus one)


class GPUObject:
  """A kgsl GPU object: id, GPU address, size, and its CPU mapping."""
  __slots__ = ("id", "gpuaddr", "size", "mem")

  def __init__(self, id: int, gpuaddr: int, size: int, mem: Any): self.id, self.gpuaddr, self.size, self.mem = id, gpuaddr, size, mem


class QCOMBuffer:
  """A byte range of a GPU object (a buffer or a view of one)."""
  __slots__ = ("obj", "offset", "size")

  def __init__(self, obj: GPUObject, offset: int, size: int): self.obj, self.offset, self.size = obj, offset, size

  @property
  def gpuaddr(self) -> int: return self.obj.gpuaddr + self.offset


class QCOMAllocator(Allocator):
  def __init__(self, dev: QCOMDevice):
    super().__init__()
    self.dev = dev

  def _alloc(self, size: int, options: Any) -> QCOMBuffer:
    obj = self.dev.gpu_alloc(size)
    return QCOMBuffer(obj, 0, size)

  def _free(self, opaque: QCOMBuffer, size: int, options: Any) -> None:
    self.dev.synchronize()  # the GPU may still read it
    self.dev.gpu_free(opaque.obj)

  def view(self, opaque: QCOMBuffer, offset: int, size: int) -> QCOMBuffer: return QCOMBuffer(opaque.obj, opaque.offset + offset, size)

  def _copyin(self, dest: QCOMBuffer, src: memoryview) -> None:
    self.dev.synchronize()
    dest.obj.mem[dest.offset:dest.offset + src.nbytes] = src.cast("B")

  def _copyout(self, dest: memoryview, src: QCOMBuffer) -> None:
    self.dev.synchronize()
    dest.cast("B")[:] = src.obj.mem[src.offset:src.offset + dest.nbytes]


class QCOMProgram:
  """One kernel: its shader object in GPU memory; each call builds and submits an IB that dispatches it."""

  def __init__(self, dev: QCOMDevice, name: str, lib: bytes):
    self.dev, self.name = dev, name
    image = pack_image(name, lib)
    self.shader = dev.gpu_alloc(len(image))
    self.shader.mem[:len(image)] = image
    self.instrlen = len(image) // 8

  def dispatch(self, bufs: tuple[QCOMBuffer, ...], global_size: tuple[int, ...], local_size: tuple[int, ...], vals: tuple[int, ...]) -> list[int]:
    """The PM4 packets of one launch (its constants are written to the constant ring now); [] for an empty grid."""
    groups, local = (tuple(global_size) + (1, 1, 1))[:3], (tuple(local_size) + (1, 1, 1))[:3]
    if groups[0] * groups[1] * groups[2] == 0: return []
    if any(not 1 <= x <= MAX_LOCAL for x in local):
      raise RuntimeError(f"kernel {self.name}: local size {local} doesn't fit HLSQ_CS_NDRANGE_0 (1..{MAX_LOCAL} per dimension); "
                         "use a smaller LOCAL_SIZE (e.g. DEV=QCOM:QCOMCL:a630,LOCAL_SIZE=64)")
    consts = pack_constants([b.gpuaddr for b in bufs], list(vals))
    nvec4 = len(consts) // 16
    constlen = (nvec4 + 3) // 4 * 4  # HLSQ_CS_CNTL stores it >> 2
    caddr = self.dev.ring_write("const", consts)
    dim = 3 if groups[2] > 1 or local[2] > 1 else 2 if groups[1] > 1 or local[1] > 1 else 1
    return [*pm4.type7(pm4.CP_SET_MARKER, pm4.RM6_COMPUTE),
            *pm4.type4(pm4.HLSQ_CS_CNTL, (constlen >> 2) | (1 << 8)),
            *pm4.type4(pm4.SP_CS_OBJ_START_LO, *pm4.lo_hi(self.shader.gpuaddr)),
            *pm4.type4(pm4.SP_CS_INSTRLEN, self.instrlen),
            *pm4.load_state6(pm4.ST6_CONSTANTS, pm4.SS6_INDIRECT, pm4.SB6_CS_SHADER, nvec4, caddr),
            *pm4.type4(pm4.HLSQ_CS_NDRANGE_0, dim | ((local[0] - 1) << 2) | ((local[1] - 1) << 12) | ((local[2] - 1) << 22),
                       groups[0] * local[0], 0, groups[1] * local[1], 0, groups[2] * local[2], 0),
            *pm4.type7(pm4.CP_EXEC_CS, 0, *groups)]

  def __call__(self, *bufs: QCOMBuffer, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    ib = self.dispatch(bufs, global_size, local_size, vals)
    if not ib: return 0.0 if wait else None
    start = time.perf_counter()
    self.dev.submit_with_fence(ib)
    if not wait: return None
    self.dev.synchronize()
    return time.perf_counter() - start  # host time of submit + wait: kgsl's own profiling isn't read yet


def const_bytes(nbufs: int, nvals: int) -> int: return (16 + 8 * nbufs + 4 * nvals + 15) // 16 * 16  # = len(pack_constants(...))


class QCOMGraph:
  """TinyJit's launches as one IB: a single GPU_COMMAND (and one fence) per replay instead of one per kernel."""

  def __init__(self, dev: QCOMDevice, launches: list[KernelLaunch]):
    if not all(isinstance(launch.program, QCOMProgram) for launch in launches):
      raise NotImplementedError("a QCOM graph holds only QCOM kernels")
    self.dev, self.launches = dev, list(launches)
    if self._const_bytes() > CONST_RING // 2 or len(launches) * 48 * 4 > CMD_RING // 2:
      raise NotImplementedError(f"{len(launches)} launches don't fit one IB here: TinyJit runs them one by one")

  def _const_bytes(self) -> int: return sum(const_bytes(len(x.bufs), len(x.vals)) for x in self.launches)

  def update(self, i: int, launch: KernelLaunch) -> None: self.launches[i] = launch

  def __call__(self) -> None:
    self.dev.ring_make_room("const", self._const_bytes())  # no wrap while this IB's constants are written
    ib = [w for x in self.launches for w in cast(QCOMProgram, x.program).dispatch(x.bufs, x.global_size, x.local_size, x.vals)]
    if ib: self.dev.submit_with_fence(ib)


class QCOMDevice(Compiled):
  """One Adreno GPU through `iface` (KgslInterface or MockKgsl): a draw context, rings for IBs and constants, a fence."""

  def __init__(self, name: str, iface: kgsl.Interface):
    self.iface = iface
    iface.open(KGSL_PATH)
    ctx = kgsl.kgsl_drawctxt_create(flags=kgsl.KGSL_CONTEXT_PREAMBLE | kgsl.KGSL_CONTEXT_NO_GMEM_ALLOC |
                                    kgsl.KGSL_CONTEXT_NO_FAULT_TOLERANCE | (kgsl.KGSL_CONTEXT_TYPE_CL << kgsl.KGSL_CONTEXT_TYPE_SHIFT))
    iface.ioctl(kgsl.IOCTL_KGSL_DRAWCTXT_CREATE, ctx)
    self.ctx_id = ctx.drawctxt_id
    self.rings = {"cmd": self.gpu_alloc(CMD_RING, memtype=kgsl.KGSL_MEMTYPE_COMMAND), "const": self.gpu_alloc(CONST_RING)}
    self.ring_pos = {"cmd": 0, "const": 0}
    self.fence_obj = self.gpu_alloc(64)
    self.fence_addr = self.fence_obj.gpuaddr
    self.fence_value, self.last_timestamp, self.pending = 0, 0, False
    super().__init__(name, QCOMAllocator(self), lambda n, lib: QCOMProgram(self, n, lib), graph=lambda launches: QCOMGraph(self, launches))

  # memory
  def gpu_alloc(self, size: int, memtype: int = kgsl.KGSL_MEMTYPE_OBJECTANY) -> GPUObject:
    flags = (kgsl.KGSL_CACHEMODE_WRITECOMBINE << kgsl.KGSL_CACHEMODE_SHIFT) | (memtype << kgsl.KGSL_MEMTYPE_SHIFT) | (12 << kgsl.KGSL_MEMALIGN_SHIFT)
    req = kgsl.kgsl_gpuobj_alloc(size=max(size, 1), flags=flags)
    try: self.iface.ioctl(kgsl.IOCTL_KGSL_GPUOBJ_ALLOC, req)
    except OSError as e: raise MemoryError(f"{self.device}: kgsl could not allocate {size} bytes ({e})") from e
    info = kgsl.kgsl_gpuobj_info(id=req.id)
    self.iface.ioctl(kgsl.IOCTL_KGSL_GPUOBJ_INFO, info)
    return GPUObject(req.id, info.gpuaddr, size, self.iface.mmap(req.mmapsize, req.id << kgsl.PAGE_SHIFT))

  def gpu_free(self, obj: GPUObject) -> None:
    obj.mem.close()
    self.iface.ioctl(kgsl.IOCTL_KGSL_GPUOBJ_FREE, kgsl.kgsl_gpuobj_free(id=obj.id))

  def ring_make_room(self, ring: str, size: int) -> None:
    """Make the next `size` bytes of a ring free and contiguous: when they aren't, wait for the GPU and start over."""
    obj = self.rings[ring]
    if size > obj.size: raise RuntimeError(f"{self.device}: {size} bytes don't fit the {ring} ring ({obj.size} bytes)")
    if self.ring_pos[ring] + size > obj.size:
      self.synchronize()
      self.ring_pos[ring] = 0

  def ring_write(self, ring: str, data: bytes) -> int:
    """Copy `data` into a ring (16-byte aligned) and return its GPU address."""
    size = (len(data) + 15) // 16 * 16
    self.ring_make_room(ring, size)
    obj, off = self.rings[ring], self.ring_pos[ring]
    obj.mem[off:off + len(data)] = data
    self.ring_pos[ring] = off + size
    return obj.gpuaddr + off

  # commands
  def next_fence(self) -> int:
    self.fence_value = (self.fence_value + 1) & 0xffffffff
    return self.fence_value

  def submit_with_fence(self, ib: list[int]) -> None:
    fence = self.next_fence()
    self.submit([*ib, *pm4.event_write_ts(pm4.CACHE_FLUSH_TS, self.fence_addr, fence)], fence)

  def submit(self, ib: list[int], fence: int) -> None:
    addr = self.ring_write("cmd", struct.pack(f"<{len(ib)}I", *ib))
    cmd = kgsl.kgsl_command_object(gpuaddr=addr, size=len(ib) * 4, flags=kgsl.KGSL_CMDLIST_IB, id=self.rings["cmd"].id)
    sub = kgsl.kgsl_gpu_command(flags=0, cmdlist=ctypes.addressof(cmd), cmdsize=ctypes.sizeof(cmd), numcmds=1, context_id=self.ctx_id)
    self.iface.ioctl(kgsl.IOCTL_KGSL_GPU_COMMAND, sub)
    self.last_timestamp, self.pending = sub.timestamp, True

  def synchronize(self) -> None:
    if not self.pending: return
    self.iface.ioctl(kgsl.IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID,
                     kgsl.kgsl_device_waittimestamp_ctxtid(context_id=self.ctx_id, timestamp=self.last_timestamp, timeout=WAIT_TIMEOUT_MS))
    self.pending = False
    seen = struct.unpack_from("<I", self.fence_obj.mem, 0)[0]
    if seen != self.fence_value:
      raise RuntimeError(f"{self.device}: kgsl timestamp {self.last_timestamp} retired but the fence reads {seen}, not {self.fence_value}: "
                         "the command processor skipped the CP_EVENT_WRITE of the last submission")

  def __repr__(self) -> str: return f"<QCOMDevice {self.device} via {self.iface.name}>"


def open_qcom(index: int, iface: kgsl.Interface) -> QCOMDevice:
  if index != 0: raise RuntimeError(f"there is no QCOM device {index}: kgsl exposes one GPU (QCOM, i.e. QCOM:0)")
  return QCOMDevice("QCOM", iface)
