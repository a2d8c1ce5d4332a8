"""MOCKKGSL: the kgsl ioctls and the Adreno command processor in Python (`DEV=MOCKKGSL+QCOM`).

It has the interface of kgsl.KgslInterface, so the QCOM runtime above it is the code that would drive /dev/kgsl-3d0.
- memory: GPU objects are anonymous mappings at made-up GPU addresses, with an unmapped gap between objects so an
  address past an object's end belongs to nothing;
- IOCTL_KGSL_GPU_COMMAND reads the command list from the caller's memory (as the kernel's copy_from_user does), checks
  that each IB lies inside the GPU object it names, and runs the IB on the command processor below;
- the command processor decodes every packet (pm4.decode: type, parity bits, counts), accepts only the registers and
  opcodes a compute dispatch uses, checks that each address it follows lies inside an allocated object, and EXECUTES
  each CP_EXEC_CS: the shader object at SP_CS_OBJ_START (shaderobj.py) names the kernel and carries its OpenCL program
  binary, the constants loaded by CP_LOAD_STATE6 give the buffer addresses and Variable values, HLSQ_CS_NDRANGE the
  local and global sizes. The binary runs on PoCL (OpenCL on the CPU) against copies of the mock's memory that are
  written back after the kernel. So a wrong address, argument order, size or constant gives wrong numbers.

Why PoCL and not core's PYTHON interpreter: the shader object holds what the compiler produced (here PoCL's binary of
the QCOMCL source), not UOps; running that binary tests the bytes the runtime uploaded, with the very numerics the CL
device is tested for. Execution is synchronous: a submission has retired when the ioctl returns.
"""
from __future__ import annotations

import ctypes
import hashlib
import mmap
from typing import Any

from tinygrad_backend_qcom import kgsl, pm4
from tinygrad_backend_qcom.qcom import KGSL_PATH
from tinygrad_backend_qcom.shaderobj import unpack_constants, unpack_image

GPU_BASE, GUARD = 0x1_0000_0000, 1 << 16
PAGE = 1 << kgsl.PAGE_SHIFT


class MockKgslError(OSError):
  """What the real driver would refuse (a bad id, context or size): an OSError, as from fcntl.ioctl."""


class MockObject:
  __slots__ = ("id", "gpuaddr", "size", "mmapsize", "mem", "flags")

  def __init__(self, id: int, gpuaddr: int, size: int, flags: int):
    self.id, self.gpuaddr, self.size, self.flags = id, gpuaddr, size, flags
    self.mmapsize = (size + PAGE - 1) // PAGE * PAGE
    self.mem = mmap.mmap(-1, self.mmapsize)  # anonymous: reads as zeros, like kgsl's fresh pages


# the registers a compute dispatch writes; anything else is rejected
KNOWN_REGISTERS = frozenset(pm4.REGISTER_NAMES)
# opcode -> allowed payload lengths (None: any)
PAYLOAD_LENGTHS: dict[int, tuple[int, ...] | None] = {
  pm4.CP_NOP: None, pm4.CP_WAIT_FOR_IDLE: (0,), pm4.CP_SET_MARKER: (1,), pm4.CP_EXEC_CS: (4,), pm4.CP_LOAD_STATE6_FRAG: (3,),
  pm4.CP_EVENT_WRITE: (1, 4), pm4.CP_MEM_WRITE: None}


class MockKgsl:
  """The mock driver: GPU objects, draw contexts, submissions and timestamps."""
  name = "MOCKKGSL"

  def __init__(self) -> None:
    self.objects: dict[int, MockObject] = {}
    self.contexts: dict[int, int] = {}  # context id -> last retired timestamp
    self.next_id, self.next_ctx, self.next_addr = 1, 1, GPU_BASE
    self.opened = False
    self.cp = CommandProcessor(self)
    self.submissions = 0

  # the interface
  def open(self, path: str) -> None:
    if path != KGSL_PATH: raise FileNotFoundError(f"the kgsl mock provides {KGSL_PATH}, not {path}")
    self.opened = True

  def close(self) -> None: self.opened = False

  def mmap(self, size: int, offset: int) -> Any:
    obj = self._object(offset >> kgsl.PAGE_SHIFT, "mmap")
    if offset % PAGE or size != obj.mmapsize:
      raise MockKgslError(f"mmap of GPU object {obj.id}: offset must be id << {kgsl.PAGE_SHIFT} and size its mmapsize {obj.mmapsize}, "
                          f"got offset 0x{offset:x}, size {size}")
    return obj.mem

  def ioctl(self, request: int, arg: ctypes.Structure) -> None:
    if not self.opened: raise MockKgslError(f"ioctl 0x{request:x} on a closed kgsl file: open {KGSL_PATH} first")
    want = kgsl.IOCTL_STRUCTS.get(request)
    if want is None: raise MockKgslError(f"ioctl 0x{request:08x} is not a kgsl request this mock implements ({len(kgsl.IOCTL_STRUCTS)} are)")
    if type(arg) is not want: raise MockKgslError(f"ioctl 0x{request:08x} takes struct {want.__name__}, got {type(arg).__name__}")
    getattr(self, "_" + want.__name__)(arg)

  # the requests
  def _kgsl_drawctxt_create(self, a: kgsl.kgsl_drawctxt_create) -> None:
    a.drawctxt_id, self.next_ctx = self.next_ctx, self.next_ctx + 1
    self.contexts[a.drawctxt_id] = 0

  def _kgsl_drawctxt_destroy(self, a: kgsl.kgsl_drawctxt_destroy) -> None:
    if self.contexts.pop(a.drawctxt_id, None) is None: raise MockKgslError(f"DRAWCTXT_DESTROY: no draw context {a.drawctxt_id}")

  def _kgsl_gpuobj_alloc(self, a: kgsl.kgsl_gpuobj_alloc) -> None:
    if a.size == 0: raise MockKgslError("GPUOBJ_ALLOC of 0 bytes: kgsl objects have a size >= 1")
    obj = MockObject(self.next_id, self.next_addr, a.size, a.flags)
    self.objects[obj.id] = obj
    self.next_id += 1
    self.next_addr += obj.mmapsize + GUARD
    a.id, a.mmapsize, a.va_len = obj.id, obj.mmapsize, obj.mmapsize

  def _kgsl_gpuobj_free(self, a: kgsl.kgsl_gpuobj_free) -> None:
    self._object(a.id, "GPUOBJ_FREE")
    del self.objects[a.id]

  def _kgsl_gpuobj_info(self, a: kgsl.kgsl_gpuobj_info) -> None:
    obj = self._object(a.id, "GPUOBJ_INFO")
    a.gpuaddr, a.flags, a.size, a.va_len = obj.gpuaddr, obj.flags, obj.size, obj.mmapsize

  def _kgsl_gpu_command(self, a: kgsl.kgsl_gpu_command) -> None:
    if a.context_id not in self.contexts: raise MockKgslError(f"GPU_COMMAND on draw context {a.context_id}, which was never created")
    if a.numcmds and a.cmdsize != ctypes.sizeof(kgsl.kgsl_command_object):
      raise MockKgslError(f"GPU_COMMAND: cmdsize {a.cmdsize} is not sizeof(struct kgsl_command_object) = {ctypes.sizeof(kgsl.kgsl_command_object)}")
    cmds = (kgsl.kgsl_command_object * a.numcmds).from_address(a.cmdlist) if a.numcmds else []
    for i, c in enumerate(cmds):
      if not c.flags & kgsl.KGSL_CMDLIST_IB: raise MockKgslError(f"GPU_COMMAND cmdlist[{i}]: flags 0x{c.flags:x} lack KGSL_CMDLIST_IB")
      obj = self._object(c.id, f"GPU_COMMAND cmdlist[{i}]")
      if not (obj.gpuaddr <= c.gpuaddr and c.gpuaddr + c.size <= obj.gpuaddr + obj.size):
        raise MockKgslError(f"GPU_COMMAND cmdlist[{i}]: IB 0x{c.gpuaddr:x}+{c.size} is not inside GPU object {c.id} "
                            f"(0x{obj.gpuaddr:x}+{obj.size})")
      self.cp.execute(self.read(c.gpuaddr, c.size), f"cmdlist[{i}] IB at 0x{c.gpuaddr:x}")
    self.submissions += 1
    a.timestamp = self.contexts[a.context_id] = self.contexts[a.context_id] + 1  # retired: execution is synchronous

  def _kgsl_device_waittimestamp_ctxtid(self, a: kgsl.kgsl_device_waittimestamp_ctxtid) -> None:
    if a.context_id not in self.contexts: raise MockKgslError(f"WAITTIMESTAMP_CTXTID on draw context {a.context_id}, which was never created")
    if a.timestamp > self.contexts[a.context_id]:
      raise MockKgslError(f"WAITTIMESTAMP_CTXTID: timestamp {a.timestamp} of context {a.context_id} was never submitted "
                          f"(last is {self.contexts[a.context_id]}): it would wait forever")

  # memory as the GPU sees it
  def _object(self, id: int, what: str) -> MockObject:
    if (obj := self.objects.get(id)) is None: raise MockKgslError(f"{what}: no GPU object with id {id}")
    return obj

  def find(self, addr: int, size: int, what: str) -> tuple[MockObject, int]:
    """(object, offset) for [addr, addr+size), which must lie in one allocated object."""
    for obj in self.objects.values():
      if obj.gpuaddr <= addr < obj.gpuaddr + obj.size:
        if addr + size > obj.gpuaddr + obj.size:
          raise pm4.PacketError(f"{what}: 0x{addr:x}+{size} runs past the end of GPU object {obj.id} (0x{obj.gpuaddr:x}+{obj.size})")
        return obj, addr - obj.gpuaddr
    raise pm4.PacketError(f"{what}: address 0x{addr:x} is not inside any allocated GPU object")

  def read(self, addr: int, size: int, what: str = "read") -> bytes:
    obj, off = self.find(addr, size, what)
    return bytes(obj.mem[off:off + size])

  def write(self, addr: int, data: bytes, what: str = "write") -> None:
    obj, off = self.find(addr, len(data), what)
    obj.mem[off:off + len(data)] = data


class CommandProcessor:
  """Decodes IBs and runs them: register state, constant loads, dispatches, fence writes."""

  def __init__(self, kgsl_mock: MockKgsl):
    self.k = kgsl_mock
    self.regs: dict[int, int] = {}
    self.consts = bytearray()
    self.programs: dict[bytes, tuple[Any, Any]] = {}  # sha256(binary) + name -> (cl.Kernel, queue)
    self.dispatches = 0

  def execute(self, ib: bytes, where: str) -> None:
    for kind, code, payload, at in pm4.decode(pm4.words_of(ib), where):
      here = f"{where} dword {at}"
      if kind == "type4":
        for i, v in enumerate(payload):
          if code + i not in KNOWN_REGISTERS:
            raise pm4.PacketError(f"{here}: register 0x{code + i:x} is not one a compute dispatch writes "
                                  f"(known: {', '.join(sorted(pm4.REGISTER_NAMES.values()))})")
          self.regs[code + i] = v
        continue
      if code not in PAYLOAD_LENGTHS:
        raise pm4.PacketError(f"{here}: opcode 0x{code:x} is not supported by the mock command processor "
                              f"(supported: {', '.join(pm4.OPCODE_NAMES[o] for o in PAYLOAD_LENGTHS)})")
      name = pm4.OPCODE_NAMES[code]
      if (lengths := PAYLOAD_LENGTHS[code]) is not None and len(payload) not in lengths:
        raise pm4.PacketError(f"{here}: {name} takes {' or '.join(map(str, lengths))} payload dwords, got {len(payload)}")
      getattr(self, name.lower())(payload, f"{here} ({name})")

  def cp_nop(self, p: list[int], here: str) -> None: pass
  def cp_wait_for_idle(self, p: list[int], here: str) -> None: pass

  def cp_set_marker(self, p: list[int], here: str) -> None:
    if p[0] & 0xf != pm4.RM6_COMPUTE: raise pm4.PacketError(f"{here}: render mode {p[0] & 0xf} is not RM6_COMPUTE ({pm4.RM6_COMPUTE})")

  def cp_mem_write(self, p: list[int], here: str) -> None:
    if len(p) < 3: raise pm4.PacketError(f"{here}: needs an address (2 dwords) and at least one dword to write")
    self.k.write(p[0] | p[1] << 32, b"".join(v.to_bytes(4, "little") for v in p[2:]), here)

  def cp_event_write(self, p: list[int], here: str) -> None:
    if p[0] & 0xff != pm4.CACHE_FLUSH_TS or len(p) != 4:
      raise pm4.PacketError(f"{here}: the mock supports only CACHE_FLUSH_TS with an address and a value (4 dwords), got event "
                            f"{p[0] & 0xff} with {len(p)} dwords")
    self.k.write(p[1] | p[2] << 32, p[3].to_bytes(4, "little"), here)

  def cp_load_state6_frag(self, p: list[int], here: str) -> None:
    dst, stype, src, block, units = p[0] & 0x3fff, (p[0] >> 14) & 3, (p[0] >> 16) & 3, (p[0] >> 18) & 0xf, p[0] >> 22
    if (stype, src, block) != (pm4.ST6_CONSTANTS, pm4.SS6_INDIRECT, pm4.SB6_CS_SHADER):
      raise pm4.PacketError(f"{here}: the mock loads only compute constants from memory (ST6_CONSTANTS, SS6_INDIRECT, SB6_CS_SHADER); "
                            f"got state type {stype}, source {src}, block 0x{block:x}")
    if p[1] & 3: raise pm4.PacketError(f"{here}: EXT_SRC_ADDR 0x{p[1]:x} is not 4-byte aligned")
    data = self.k.read(p[1] | p[2] << 32, units * 16, here)
    end = (dst + units) * 16
    if len(self.consts) < end: self.consts.extend(b"\0" * (end - len(self.consts)))
    self.consts[dst * 16:end] = data

  def cp_exec_cs(self, p: list[int], here: str) -> None:
    r = self.regs
    groups = tuple(p[1:4])
    missing = [pm4.REGISTER_NAMES[x] for x in (pm4.HLSQ_CS_CNTL, pm4.SP_CS_OBJ_START_LO, pm4.SP_CS_OBJ_START_HI, pm4.SP_CS_INSTRLEN,
                                               *range(pm4.HLSQ_CS_NDRANGE_0, pm4.HLSQ_CS_NDRANGE_0 + 7)) if x not in r]
    if missing: raise pm4.PacketError(f"{here}: dispatch before these registers were written: {', '.join(missing)}")
    cntl = r[pm4.HLSQ_CS_CNTL]
    if not cntl >> 8 & 1: raise pm4.PacketError(f"{here}: HLSQ_CS_CNTL.ENABLED is 0: the compute stage is off")
    constlen = (cntl & 0xff) << 2  # vec4s
    nd0 = r[pm4.HLSQ_CS_NDRANGE_0]
    local = (((nd0 >> 2) & 0x3ff) + 1, ((nd0 >> 12) & 0x3ff) + 1, ((nd0 >> 22) & 0x3ff) + 1)
    glob = tuple(r[pm4.HLSQ_CS_NDRANGE_0 + 1 + 2 * i] for i in range(3))
    offs = tuple(r[pm4.HLSQ_CS_NDRANGE_0 + 2 + 2 * i] for i in range(3))
    if any(offs): raise pm4.PacketError(f"{here}: global offsets {offs} are not supported (HLSQ_CS_NDRANGE_2/4/6 must be 0)")
    if any(g == 0 for g in groups): raise pm4.PacketError(f"{here}: CP_EXEC_CS with {groups} work-groups: each must be >= 1")
    if glob != tuple(lo * g for lo, g in zip(local, groups)):
      raise pm4.PacketError(f"{here}: HLSQ_CS_NDRANGE global size {glob} is not local size {local} x work-groups {groups}")
    consts = bytes(self.consts[:constlen * 16])
    if len(consts) < 16:
      raise pm4.PacketError(f"{here}: no kernel arguments: HLSQ_CS_CNTL.CONSTLEN is {constlen} vec4s and CP_LOAD_STATE6_FRAG loaded "
                            f"{len(self.consts) // 16}; the runtime loads at least c0 (the argument counts)")
    try: addrs, vals = unpack_constants(consts)
    except ValueError as e: raise pm4.PacketError(f"{here}: constants (HLSQ_CS_CNTL.CONSTLEN {constlen} vec4s): {e}") from e
    shader_addr, size = r[pm4.SP_CS_OBJ_START_LO] | r[pm4.SP_CS_OBJ_START_HI] << 32, r[pm4.SP_CS_INSTRLEN] * 8
    try: name, binary = unpack_image(self.k.read(shader_addr, size, f"{here}: SP_CS_OBJ_START/SP_CS_INSTRLEN"))
    except ValueError as e: raise pm4.PacketError(f"{here}: {e}") from e
    self._run(name, binary, addrs, vals, local, groups, here)
    self.dispatches += 1

  def _run(self, name: str, binary: bytes, addrs: list[int], vals: list[int], local: tuple[int, ...], groups: tuple[int, ...],
           here: str) -> None:
    import numpy as np  # host arrays over the mock's memory, for pyopencl

    from tinygrad_backend_qcom.compiler import build, compile_context
    from tinygrad_backend_qcom.opencl import import_pyopencl
    cl = import_pyopencl()
    ctx, dev = compile_context()
    key = hashlib.sha256(binary).digest() + name.encode()
    if key not in self.programs:
      try: kernel = cl.Kernel(build(ctx, dev, binary=binary), name)
      except cl.Error as e: raise pm4.PacketError(f"{here}: the shader object has no kernel {name!r} ({e})") from e
      self.programs[key] = (kernel, cl.CommandQueue(ctx))
    kernel, queue = self.programs[key]
    if kernel.num_args != len(addrs) + len(vals):
      raise pm4.PacketError(f"{here}: kernel {name} takes {kernel.num_args} arguments, but the constants hold {len(addrs)} buffer "
                            f"addresses and {len(vals)} values")
    align = max(int(dev.mem_base_addr_align) // 8, 1)
    host: dict[int, tuple[MockObject, Any, Any]] = {}  # object id -> (object, host array, cl.Buffer)
    for i, a in enumerate(addrs):
      obj, off = self.k.find(a, 1, f"{here}: buffer argument {i}")
      if obj.id not in host:
        arr = np.frombuffer(obj.mem, dtype=np.uint8, count=obj.size)
        host[obj.id] = (obj, arr, cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=arr))
      buf = host[obj.id][2]
      if off:
        if off % align: raise pm4.PacketError(f"{here}: buffer argument {i} at offset {off} of GPU object {obj.id} is not {align}-byte "
                                              "aligned, which the mock's OpenCL executor needs for sub-buffers")
        buf = buf.get_sub_region(off, obj.size - off)
      kernel.set_arg(i, buf)
    for j, v in enumerate(vals): kernel.set_arg(len(addrs) + j, np.int32(v))
    cl.enqueue_nd_range_kernel(queue, kernel, tuple(lo * g for lo, g in zip(local, groups)), local)
    for _obj, arr, buf in host.values(): cl.enqueue_copy(queue, arr, buf, is_blocking=True)
