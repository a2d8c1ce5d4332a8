"""MOCK+NV's GPFIFO processor: on each doorbell it walks the channel's GPFIFO ring from USERD.GPGet to USERD.GPPut, decodes
each pushbuffer segment's methods (incrementing, non-incrementing, immediate, increment-once headers), checks them and runs
them: host semaphores (release with optional timestamp, acquire), SET_OBJECT binding classes to subchannels, the compute
class's state and launches, the copy class's LAUNCH_DMA.

A launch runs for real: the QMD at SEND_PCAS_A's address is decoded with the same field tables the runtime encodes with
(qmd.py); its program address must hold the code of a kernel the mock recorded (mockprograms.py); the arguments are read
from constant bank 0 where the cubin's EIATTR_PARAM_CBANK / KPARAM_INFO put them; the grid and block from the QMD; then
core's PYTHON interpreter runs the kernel on views of the mock's memory. A wrong QMD field, argument, grid or address gives
wrong numbers or a GPFIFOError naming the channel, the GPFIFO entry, the dword and what is wrong; the channel then stops.
"""
from __future__ import annotations

import ctypes
import time
from typing import TYPE_CHECKING, Any

from tinygrad_backend_nv import nv_classes as cls
from tinygrad_backend_nv.mockprograms import code_key, load
from tinygrad_backend_nv.qmd import QMD_ALIGN, QMD_BYTES, decode_launch, smem_config_bytes, version_for_class

if TYPE_CHECKING:
  from tinygrad_backend_nv.cubin import KernelImage
  from tinygrad_backend_nv.mocknv import MockNV, Obj
  from tinygrad_backend_nv.qmd import LaunchQMD

LMEM_RESERVED = 0x240


class GPFIFOError(RuntimeError):
  """A malformed submission: the message names the channel, the GPFIFO entry, the dword and what is wrong."""


class GPFIFOProcessor:
  def __init__(self, nv: MockNV, channel: Obj, ring_va: int, entries: int, userd: Obj, userd_off: int, notifier: Obj | None = None):
    self.nv, self.channel, self.ring_va, self.entries, self.notifier = nv, channel, ring_va, entries, notifier
    self.userd = userd.host + userd_off
    self.error: GPFIFOError | None = None
    self.subc: dict[int, int] = {}  # subchannel -> bound class
    self.host: dict[int, int] = {}
    self.state: dict[int, dict[int, int]] = {}  # class -> method -> last value
    self.where = ""
    self.loaded: dict[tuple[str, str], Any] = {}
    self.launches = 0

  def _err(self, msg: str) -> GPFIFOError: return GPFIFOError(f"MOCK+NV channel {self.channel.handle:#x}, {self.where}: {msg}")

  def _view(self, what: str, va: int, size: int) -> memoryview:
    try: return self.nv.gpu_view(va, size)
    except KeyError: raise self._err(f"{what} {va:#x}+{size:#x} is not in memory mapped on the GPU (an unmapped gap, a freed range, or past an allocation's end)") from None

  def kick(self) -> None:
    if self.error is not None: raise GPFIFOError(f"channel {self.channel.handle:#x} stopped at an earlier error and runs nothing more: {self.error}")
    get = ctypes.c_uint32.from_address(self.userd + cls.USERD_GP_GET)
    put = ctypes.c_uint32.from_address(self.userd + cls.USERD_GP_PUT).value
    if put >= self.entries: raise self._fail(GPFIFOError(f"MOCK+NV channel {self.channel.handle:#x}: GPPut {put} is past the ring's {self.entries} entries"))
    while get.value != put:
      idx = get.value
      self.where = f"GPFIFO entry {idx}"
      entry = int.from_bytes(self._view("the GPFIFO ring", self.ring_va + 8 * idx, 8), "little")
      addr, n = cls.gpfifo_decode(entry)
      if n == 0: raise self._fail(self._err(f"entry {entry:#x} has length 0 (a control entry, which NVK+NV never writes)"))
      try: self._segment(addr, n)
      except GPFIFOError as e: raise self._fail(e) from None
      get.value = (idx + 1) % self.entries

  def _fail(self, e: GPFIFOError) -> GPFIFOError:
    self.error = e  # like a channel after an error: it stays stopped
    if self.notifier is not None:  # and RM writes the channel's error notifier (NvNotification: info32 = the nverror.h code, status)
      code = 31 if "not in memory mapped" in str(e) else 13 if "kernel" in str(e) else 32  # MMU fault, GR exception, PBDMA error
      view = self.notifier.view(0, 16)
      view[8:12], view[14:16] = code.to_bytes(4, "little"), (0xFFFF).to_bytes(2, "little")
    return e

  def _segment(self, addr: int, n: int) -> None:
    words = self._view("the pushbuffer segment", addr, 4 * n).cast("I")
    i = 0
    while i < n:
      self.where = f"GPFIFO entry {ctypes.c_uint32.from_address(self.userd + cls.USERD_GP_GET).value}, dword {i} (pushbuffer {addr + 4 * i:#x})"
      hdr = words[i]
      op, count, subc, method = hdr >> 29, (hdr >> 16) & 0x1FFF, (hdr >> 13) & 7, (hdr & 0xFFF) << 2
      if hdr == 0:
        i += 1
        continue
      if op == cls.OP_IMMD:
        self._method(subc, method, count)
        i += 1
        continue
      if op not in (cls.OP_INC, cls.OP_NON_INC, cls.OP_ONE_INC): raise self._err(f"method header {hdr:#010x} has opcode {op}: not INC (1), NON_INC (3), IMMD (4) or ONE_INC (5)")
      if i + count >= n + 0 and i + 1 + count > n: raise self._err(f"method header {hdr:#010x} says {count} data dwords, the segment has {n - i - 1} left")
      for k in range(count):
        m = method + 4 * k if op == cls.OP_INC else method + (4 if op == cls.OP_ONE_INC and k else 0)
        self._method(subc, m, words[i + 1 + k])
      i += 1 + count

  def _method(self, subc: int, method: int, value: int) -> None:
    if method < cls.HOST_METHODS_END:
      if method not in cls.HOST_METHODS: raise self._err(f"host method {method:#x} is not one NVK+NV uses ({', '.join(cls.HOST_METHODS.values())})")
      if method == cls.SET_OBJECT:
        child = next((o for o in self.nv.objs.values() if o.parent == self.channel.handle and o.cls == value), None)
        if child is None: raise self._err(f"SET_OBJECT {cls.class_name(value)} on subchannel {subc}: no object of that class was allocated on this channel")
        self.subc[subc] = value
        self.state.setdefault(value, {})
      elif method == cls.SEM_EXECUTE: self._semaphore(value)
      else: self.host[method] = value
      return
    if subc not in self.subc: raise self._err(f"method {method:#x} on subchannel {subc}, which has no class bound (SET_OBJECT first)")
    c = self.subc[subc]
    known = cls.COMPUTE_METHODS if c in cls.COMPUTE_CLASSES else cls.COPY_METHODS
    if method not in known: raise self._err(f"method {method:#x} of {cls.class_name(c)} (subchannel {subc}) is not one NVK+NV uses")
    self.state[c][method] = value
    if c in cls.COMPUTE_CLASSES and method == cls.SEND_SIGNALING_PCAS2_B:
      if value & 0xF != cls.PCAS_ACTION_INVALIDATE_COPY_SCHEDULE: raise self._err(f"SEND_SIGNALING_PCAS2_B action {value & 0xF}: NVK+NV schedules with INVALIDATE_COPY_SCHEDULE (3)")
      if cls.SEND_PCAS_A not in self.state[c]: raise self._err("SEND_SIGNALING_PCAS2_B before any SEND_PCAS_A: no QMD to schedule")
      self._launch(c, self.state[c].pop(cls.SEND_PCAS_A) << 8)
    elif c in cls.COPY_CLASSES and method == cls.LAUNCH_DMA: self._copy(c, value)

  def _semaphore(self, flags: int) -> None:
    addr = self.host.get(cls.SEM_ADDR_HI, 0) << 32 | self.host.get(cls.SEM_ADDR_LO, 0)
    payload = self.host.get(cls.SEM_PAYLOAD_HI, 0) << 32 | self.host.get(cls.SEM_PAYLOAD_LO, 0)
    op, wide, stamp = flags & 7, bool(flags & cls.SEM_EXECUTE_PAYLOAD_SIZE_64BIT), bool(flags & cls.SEM_EXECUTE_RELEASE_TIMESTAMP_EN)
    if addr % (8 if wide else 4): raise self._err(f"semaphore at {addr:#x} is not {8 if wide else 4}-byte aligned")
    if op == cls.SEM_EXECUTE_OPERATION_RELEASE:
      if stamp and not wide: raise self._err("a semaphore release with a timestamp must be 64-bit (the timestamp goes to +8)")
      mem = self._view("semaphore", addr, 16 if stamp else 8 if wide else 4)
      mem[:8 if wide else 4] = payload.to_bytes(8, "little")[:8 if wide else 4]
      if stamp: mem[8:16] = time.perf_counter_ns().to_bytes(8, "little")
    elif op == cls.SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ:
      have = int.from_bytes(self._view("semaphore", addr, 8 if wide else 4), "little")
      if have < payload: raise self._err(f"semaphore acquire at {addr:#x} waits for >= {payload}, it is {have}: nothing would release it (the mock runs work in order)")
    else: raise self._err(f"semaphore operation {op} is not RELEASE (1) or ACQ_CIRC_GEQ (3)")

  def _copy(self, c: int, flags: int) -> None:
    st = self.state[c]
    if flags & 3 != cls.LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED: raise self._err(f"LAUNCH_DMA {flags:#x}: NVK+NV copies are NON_PIPELINED (2)")
    if flags & (cls.LAUNCH_DMA_SRC_TYPE_PHYSICAL | cls.LAUNCH_DMA_DST_TYPE_PHYSICAL): raise self._err("LAUNCH_DMA with a physical address: NVK+NV copies between virtual addresses")
    if flags & (cls.LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH | cls.LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH) != cls.LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH | cls.LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH:
      raise self._err("LAUNCH_DMA with a block-linear layout: NVK+NV copies pitch (linear) memory")
    if flags & cls.LAUNCH_DMA_MULTI_LINE_ENABLE: raise self._err("LAUNCH_DMA with MULTI_LINE_ENABLE: NVK+NV copies one line")
    if flags & cls.LAUNCH_DMA_SEMAPHORE_TYPE_MASK: raise self._err("LAUNCH_DMA with a semaphore: NVK+NV signals with host semaphores")
    for m in (cls.OFFSET_IN_UPPER, cls.OFFSET_IN_LOWER, cls.OFFSET_OUT_UPPER, cls.OFFSET_OUT_LOWER, cls.LINE_LENGTH_IN):
      if m not in st: raise self._err(f"LAUNCH_DMA before {cls.COPY_METHODS[m]} was set")
    src, dst = st[cls.OFFSET_IN_UPPER] << 32 | st[cls.OFFSET_IN_LOWER], st[cls.OFFSET_OUT_UPPER] << 32 | st[cls.OFFSET_OUT_LOWER]
    n = st[cls.LINE_LENGTH_IN]
    data = bytes(self._view("copy source", src, n))
    self._view("copy destination", dst, n)[:] = data

  def _launch(self, c: int, qmd_va: int) -> None:
    st = self.state[c]
    for m in (cls.SET_SHADER_LOCAL_MEMORY_A, cls.SET_SHADER_LOCAL_MEMORY_B, cls.SET_SHADER_LOCAL_MEMORY_WINDOW_A, cls.SET_SHADER_LOCAL_MEMORY_WINDOW_B,
              cls.SET_SHADER_SHARED_MEMORY_WINDOW_A, cls.SET_SHADER_SHARED_MEMORY_WINDOW_B, cls.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B):
      if m not in st: raise self._err(f"launch before {cls.COMPUTE_METHODS[m]} was set: the kernel has no local/shared memory set up")
    self._view("shader local memory", st[cls.SET_SHADER_LOCAL_MEMORY_A] << 32 | st[cls.SET_SHADER_LOCAL_MEMORY_B], 1)
    if qmd_va % QMD_ALIGN: raise self._err(f"QMD at {qmd_va:#x} is not {QMD_ALIGN}-byte aligned")
    version = version_for_class(c)
    raw = bytes(self._view("QMD", qmd_va, QMD_BYTES[version]))
    try: q = decode_launch(version, raw)
    except ValueError as e: raise self._err(f"QMD at {qmd_va:#x}: {e}") from None
    entry = self.nv.code_at.get(q.program)
    if entry is None or self.nv.find(q.program, len(entry[0].text)) is None:
      raise self._err(f"QMD program address {q.program:#x} holds no kernel code the mock recorded (a wrong address, or a kernel not compiled for MOCK+NV)")
    img, program = entry
    if bytes(self.nv.gpu_view(q.program, len(img.text))) != img.text: raise self._err(f"QMD program address {q.program:#x}: kernel {img.name}'s code there was overwritten")
    if (problem := self._check(img, q)) is not None: raise self._err(problem)
    name = img.name
    cb_va, cb_size = q.cbufs[0]
    cb = self._view("constant buffer 0", cb_va, cb_size)
    bufs, vals = [], []
    for p in img.params:
      raw_arg = bytes(cb[img.param_offset + p.offset:img.param_offset + p.offset + p.size])
      if p.size == 8:
        ptr = int.from_bytes(raw_arg, "little")
        if (hit := self.nv.find(ptr, 1)) is None: raise self._err(f"kernel {name} argument {p.ordinal}: pointer {ptr:#x} is not in GPU-mapped memory")
        mem, moff = hit
        bufs.append(mem.view(moff, mem.size - moff))
      elif p.size == 4: vals.append(int.from_bytes(raw_arg, "little", signed=True))
      else: raise self._err(f"kernel {name} argument {p.ordinal}: {p.size} bytes; our kernels pass pointers and int32s")
    if callable(program): program(*bufs, q.grid, q.block, tuple(vals))
    else:
      key = (code_key(img.text), name)
      if key not in self.loaded: self.loaded[key] = load(name, program)
      self.loaded[key](*bufs, global_size=q.grid, local_size=q.block, vals=tuple(vals))
    self.launches += 1
    if q.release is not None: self._view("QMD release semaphore", q.release[0], 4)[:] = q.release[1].to_bytes(4, "little")

  def _check(self, img: KernelImage, q: LaunchQMD) -> str | None:
    """What is wrong with launching kernel `img` as QMD `q` says, or None."""
    name = img.name
    if any(g < 1 for g in q.grid) or any(b < 1 for b in q.block): return f"kernel {name}: grid {q.grid} and block {q.block} must be >= 1 in every dimension"
    threads = q.block[0] * q.block[1] * q.block[2]
    if threads > 1024 or (img.max_threads and threads > img.max_threads): return f"kernel {name}: a block of {threads} threads, its limit is {img.max_threads or 1024}"
    if q.registers < img.registers: return f"kernel {name}: QMD gives {q.registers} registers per thread, the kernel uses {img.registers}"
    if q.registers * threads > 65536: return f"kernel {name}: {q.registers} registers x {threads} threads exceeds the SM's 65536"
    if q.barriers < img.barriers: return f"kernel {name}: QMD gives {q.barriers} barriers, the kernel uses {img.barriers}"
    if q.shared < img.shared: return f"kernel {name}: QMD gives {q.shared} bytes of shared memory, the kernel needs {img.shared}"
    lo, hi, target = q.sm_config
    if not lo <= target <= hi or smem_config_bytes(lo) < q.shared:  # the SM may pick any carve-out from min to max: min must hold a block
      return (f"kernel {name}: SM_CONFIG_SHARED_MEM_SIZE min/max/target {lo}/{hi}/{target} ({smem_config_bytes(lo)} bytes at the least) "
              f"for a block of {q.shared} bytes of shared memory: the GPU traps (GR exception) when the SM runs it with too little")
    if q.local_high < img.local_size + LMEM_RESERVED: return f"kernel {name}: QMD gives {q.local_high} bytes of stack, the kernel needs {img.local_size + LMEM_RESERVED}"
    if 0 not in q.cbufs: return f"kernel {name}: constant buffer 0 (its parameters) is not valid in the QMD"
    if q.cbufs[0][1] < img.param_offset + img.param_size: return f"kernel {name}: constant buffer 0 is {q.cbufs[0][1]} bytes, its params end at {img.param_offset + img.param_size}"
    for idx in img.cbufs:
      if img.cbufs[idx] and idx not in q.cbufs: return f"kernel {name}: its constant bank {idx} is not bound in the QMD"
    cb = self._view("constant buffer 0", *q.cbufs[0])
    for p in img.params:
      ptr = int.from_bytes(cb[img.param_offset + p.offset:img.param_offset + p.offset + 8], "little") if p.size == 8 else None
      if ptr is not None and self.nv.find(ptr, 1) is None: return f"kernel {name} argument {p.ordinal}: pointer {ptr:#x} is not in GPU-mapped memory"
    return None
