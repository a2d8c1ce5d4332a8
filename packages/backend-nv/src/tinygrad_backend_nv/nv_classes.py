"""RM class numbers, the methods NVK+NV sends, and the pushbuffer / GPFIFO entry formats.

Sources (MIT): open-gpu-kernel-modules 580.142 src/common/sdk/nvidia/inc/class/ (cl0000.h NV01_ROOT, cl0080.h, cl2080.h,
cl90f1.h, cl003e.h, cl0040.h, cl0071.h, cla06c.h, cl9067.h, clc56f.h/clc86f.h (host: SEM_*, GP_ENTRY, the USERD layout
Nvc86fControl), clc361.h/clc661.h (usermode doorbell), clc6b5.h/clc8b5.h (copy)); open-gpu-doc classes/compute/clc6c0.h,
clcbc0.h (compute methods) and classes/host/clc56f.h (method header formats NVC56F_DMA_*).
"""
from __future__ import annotations

import struct

# ---- classes
NV01_ROOT_CLIENT = 0x41  # nvos.h: the client object, allocated at the root
NV01_DEVICE_0 = 0x80
NV20_SUBDEVICE_0 = 0x2080
NV01_MEMORY_SYSTEM = 0x3E
NV01_MEMORY_LOCAL_USER = 0x40
NV01_MEMORY_SYSTEM_OS_DESCRIPTOR = 0x71
FERMI_VASPACE_A = 0x90F1
FERMI_CONTEXT_SHARE_A = 0x9067
KEPLER_CHANNEL_GROUP_A = 0xA06C
AMPERE_CHANNEL_GPFIFO_A = 0xC56F
HOPPER_CHANNEL_GPFIFO_A = 0xC86F
AMPERE_COMPUTE_A, AMPERE_COMPUTE_B, ADA_COMPUTE_A, HOPPER_COMPUTE_A = 0xC6C0, 0xC7C0, 0xC9C0, 0xCBC0
AMPERE_DMA_COPY_A, AMPERE_DMA_COPY_B, HOPPER_DMA_COPY_A = 0xC6B5, 0xC7B5, 0xC8B5
VOLTA_USERMODE_A, AMPERE_USERMODE_A, HOPPER_USERMODE_A = 0xC361, 0xC561, 0xC661
# newest first: the first of each list the device's class list has is used
GPFIFO_CLASSES = (HOPPER_CHANNEL_GPFIFO_A, AMPERE_CHANNEL_GPFIFO_A)
COMPUTE_CLASSES = (HOPPER_COMPUTE_A, ADA_COMPUTE_A, AMPERE_COMPUTE_B, AMPERE_COMPUTE_A)
COPY_CLASSES = (HOPPER_DMA_COPY_A, AMPERE_DMA_COPY_B, AMPERE_DMA_COPY_A)
USERMODE_CLASSES = (HOPPER_USERMODE_A, AMPERE_USERMODE_A, VOLTA_USERMODE_A)
CLASS_NAMES = {NV01_ROOT_CLIENT: "NV01_ROOT_CLIENT", NV01_DEVICE_0: "NV01_DEVICE_0", NV20_SUBDEVICE_0: "NV20_SUBDEVICE_0",
               NV01_MEMORY_SYSTEM: "NV01_MEMORY_SYSTEM", NV01_MEMORY_LOCAL_USER: "NV01_MEMORY_LOCAL_USER",
               NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR", FERMI_VASPACE_A: "FERMI_VASPACE_A",
               FERMI_CONTEXT_SHARE_A: "FERMI_CONTEXT_SHARE_A", KEPLER_CHANNEL_GROUP_A: "KEPLER_CHANNEL_GROUP_A",
               AMPERE_CHANNEL_GPFIFO_A: "AMPERE_CHANNEL_GPFIFO_A", HOPPER_CHANNEL_GPFIFO_A: "HOPPER_CHANNEL_GPFIFO_A",
               AMPERE_COMPUTE_A: "AMPERE_COMPUTE_A", AMPERE_COMPUTE_B: "AMPERE_COMPUTE_B", ADA_COMPUTE_A: "ADA_COMPUTE_A",
               HOPPER_COMPUTE_A: "HOPPER_COMPUTE_A", AMPERE_DMA_COPY_A: "AMPERE_DMA_COPY_A", AMPERE_DMA_COPY_B: "AMPERE_DMA_COPY_B",
               HOPPER_DMA_COPY_A: "HOPPER_DMA_COPY_A", VOLTA_USERMODE_A: "VOLTA_USERMODE_A", AMPERE_USERMODE_A: "AMPERE_USERMODE_A",
               HOPPER_USERMODE_A: "HOPPER_USERMODE_A"}


def class_name(c: int) -> str: return CLASS_NAMES.get(c, f"class {c:#x}")


# ---- host (channel) methods, subchannel-independent (clc86f.h)
SET_OBJECT = 0x0000
SEM_ADDR_LO, SEM_ADDR_HI, SEM_PAYLOAD_LO, SEM_PAYLOAD_HI, SEM_EXECUTE = 0x5C, 0x60, 0x64, 0x68, 0x6C
WFI = 0x78
SEM_EXECUTE_OPERATION_ACQUIRE, SEM_EXECUTE_OPERATION_RELEASE, SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ = 0, 1, 3
SEM_EXECUTE_RELEASE_WFI_EN = 1 << 20
SEM_EXECUTE_PAYLOAD_SIZE_64BIT = 1 << 24
SEM_EXECUTE_RELEASE_TIMESTAMP_EN = 1 << 25
HOST_METHODS = {SET_OBJECT: "SET_OBJECT", SEM_ADDR_LO: "SEM_ADDR_LO", SEM_ADDR_HI: "SEM_ADDR_HI", SEM_PAYLOAD_LO: "SEM_PAYLOAD_LO",
                SEM_PAYLOAD_HI: "SEM_PAYLOAD_HI", SEM_EXECUTE: "SEM_EXECUTE", WFI: "WFI"}
HOST_METHODS_END = 0x100  # methods below this offset go to the host (PBDMA), the rest to the subchannel's engine

# ---- compute class methods (clc6c0.h / clcbc0.h: the same offsets from Ampere to Hopper)
SET_SHADER_SHARED_MEMORY_WINDOW_A, SET_SHADER_SHARED_MEMORY_WINDOW_B = 0x02A0, 0x02A4
SEND_PCAS_A, SEND_SIGNALING_PCAS2_B = 0x02B4, 0x02C0
PCAS_ACTION_INVALIDATE_COPY_SCHEDULE = 0x3
SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B, SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C = 0x02E4, 0x02E8, 0x02EC
SET_SHADER_LOCAL_MEMORY_A, SET_SHADER_LOCAL_MEMORY_B = 0x0790, 0x0794
SET_SHADER_LOCAL_MEMORY_WINDOW_A, SET_SHADER_LOCAL_MEMORY_WINDOW_B = 0x07B0, 0x07B4
INVALIDATE_SHADER_CACHES_NO_WFI = 0x1698
WAIT_FOR_IDLE = 0x0110
COMPUTE_METHODS = {SET_OBJECT: "SET_OBJECT", WAIT_FOR_IDLE: "WAIT_FOR_IDLE", SET_SHADER_SHARED_MEMORY_WINDOW_A: "SET_SHADER_SHARED_MEMORY_WINDOW_A",
                   SET_SHADER_SHARED_MEMORY_WINDOW_B: "SET_SHADER_SHARED_MEMORY_WINDOW_B", SEND_PCAS_A: "SEND_PCAS_A",
                   SEND_SIGNALING_PCAS2_B: "SEND_SIGNALING_PCAS2_B",
                   SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A: "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A",
                   SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B: "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B",
                   SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C: "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C",
                   SET_SHADER_LOCAL_MEMORY_A: "SET_SHADER_LOCAL_MEMORY_A", SET_SHADER_LOCAL_MEMORY_B: "SET_SHADER_LOCAL_MEMORY_B",
                   SET_SHADER_LOCAL_MEMORY_WINDOW_A: "SET_SHADER_LOCAL_MEMORY_WINDOW_A", SET_SHADER_LOCAL_MEMORY_WINDOW_B: "SET_SHADER_LOCAL_MEMORY_WINDOW_B",
                   INVALIDATE_SHADER_CACHES_NO_WFI: "INVALIDATE_SHADER_CACHES_NO_WFI"}

# ---- copy class methods (clc8b5.h; the same in clc6b5.h / clc7b5.h)
LAUNCH_DMA = 0x0300
OFFSET_IN_UPPER, OFFSET_IN_LOWER, OFFSET_OUT_UPPER, OFFSET_OUT_LOWER = 0x0400, 0x0404, 0x0408, 0x040C
LINE_LENGTH_IN = 0x0418
LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED = 2       # 1:0
LAUNCH_DMA_FLUSH_ENABLE_TRUE = 1 << 2
LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH = 1 << 7
LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH = 1 << 8
LAUNCH_DMA_MULTI_LINE_ENABLE = 1 << 9
LAUNCH_DMA_SRC_TYPE_PHYSICAL = 1 << 12
LAUNCH_DMA_DST_TYPE_PHYSICAL = 1 << 13
LAUNCH_DMA_SEMAPHORE_TYPE_MASK = 3 << 3
COPY_METHODS = {SET_OBJECT: "SET_OBJECT", LAUNCH_DMA: "LAUNCH_DMA", OFFSET_IN_UPPER: "OFFSET_IN_UPPER", OFFSET_IN_LOWER: "OFFSET_IN_LOWER",
                OFFSET_OUT_UPPER: "OFFSET_OUT_UPPER", OFFSET_OUT_LOWER: "OFFSET_OUT_LOWER", LINE_LENGTH_IN: "LINE_LENGTH_IN"}
COPY_MAX_LINE = (1 << 32) - 1

# ---- the USERD (Nvc86fControl) and the usermode doorbell (clc361.h NVC361_NOTIFY_CHANNEL_PENDING)
USERD_GP_GET, USERD_GP_PUT = 0x88, 0x8C
USERD_SIZE = 0x200
USERMODE_NOTIFY_CHANNEL_PENDING = 0x90
USERMODE_SIZE = 0x10000

# ---- method headers (clc56f.h NVC56F_DMA_*): opcode 31:29, count/immediate 28:16, subchannel 15:13, method address >> 2 in 11:0
OP_INC, OP_NON_INC, OP_IMMD, OP_ONE_INC = 1, 3, 4, 5
SUBC_COMPUTE, SUBC_COPY = 1, 4  # our subchannel bindings (SET_OBJECT on each)


def method_header(op: int, subc: int, method: int, count: int) -> int:
  if method % 4 or method >> 2 >= 1 << 12: raise ValueError(f"method {method:#x} is not a dword offset below 0x4000")
  if not 0 <= count < 1 << 13: raise ValueError(f"{count} is too many dwords (or too large an immediate) for one method header")
  return (op << 29) | (count << 16) | (subc << 13) | (method >> 2)


class PushBuffer:
  """Methods as dwords, ready to copy into a command buffer (one GPFIFO entry)."""

  def __init__(self) -> None: self.words: list[int] = []

  def inc(self, subc: int, method: int, *data: int) -> PushBuffer:
    """Incrementing: data[i] goes to method + 4 * i."""
    self.words += [method_header(OP_INC, subc, method, len(data)), *(d & 0xFFFFFFFF for d in data)]
    return self

  def non_inc(self, subc: int, method: int, *data: int) -> PushBuffer:
    self.words += [method_header(OP_NON_INC, subc, method, len(data)), *(d & 0xFFFFFFFF for d in data)]
    return self

  def imm(self, subc: int, method: int, value: int) -> PushBuffer:
    self.words.append(method_header(OP_IMMD, subc, method, value))
    return self

  def semaphore_release(self, addr: int, value: int, timestamp: bool = False) -> PushBuffer:
    """A host semaphore release of a 64-bit `value` at `addr` after the engines are idle (WFI): the completion signal.
    With `timestamp`, the GPU's nanosecond clock goes to addr + 8."""
    flags = SEM_EXECUTE_OPERATION_RELEASE | SEM_EXECUTE_RELEASE_WFI_EN | SEM_EXECUTE_PAYLOAD_SIZE_64BIT
    return self.inc(0, SEM_ADDR_LO, addr & 0xFFFFFFFF, addr >> 32, value & 0xFFFFFFFF, value >> 32,
                    flags | (SEM_EXECUTE_RELEASE_TIMESTAMP_EN if timestamp else 0))

  def semaphore_acquire(self, addr: int, value: int) -> PushBuffer:
    """Wait until the 64-bit semaphore at `addr` is >= `value` (circular compare)."""
    return self.inc(0, SEM_ADDR_LO, addr & 0xFFFFFFFF, addr >> 32, value & 0xFFFFFFFF, value >> 32,
                    SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ | SEM_EXECUTE_PAYLOAD_SIZE_64BIT)

  def copy(self, dst: int, src: int, nbytes: int) -> PushBuffer:
    """The copy engine moves `nbytes` from GPU VA `src` to `dst` (virtual addresses, pitch layout, one line)."""
    if not 0 < nbytes <= COPY_MAX_LINE: raise ValueError(f"a copy of {nbytes} bytes: one LAUNCH_DMA line moves 1 to {COPY_MAX_LINE} bytes")
    self.inc(SUBC_COPY, OFFSET_IN_UPPER, src >> 32, src & 0xFFFFFFFF, dst >> 32, dst & 0xFFFFFFFF)
    self.inc(SUBC_COPY, LINE_LENGTH_IN, nbytes)
    return self.inc(SUBC_COPY, LAUNCH_DMA, LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED | LAUNCH_DMA_FLUSH_ENABLE_TRUE |
                    LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH | LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH)

  def launch(self, qmd_addr: int) -> PushBuffer:
    """Send the QMD at `qmd_addr` (256-byte aligned) to the compute engine and schedule it."""
    if qmd_addr % 256: raise ValueError(f"QMD address {qmd_addr:#x} is not 256-byte aligned (SEND_PCAS_A takes address >> 8)")
    self.inc(SUBC_COMPUTE, INVALIDATE_SHADER_CACHES_NO_WFI, 0x1011)  # instruction, data and constant caches: the code and cbufs are fresh
    return self.inc(SUBC_COMPUTE, SEND_PCAS_A, qmd_addr >> 8).inc(SUBC_COMPUTE, SEND_SIGNALING_PCAS2_B, PCAS_ACTION_INVALIDATE_COPY_SCHEDULE)

  def data(self) -> bytes: return struct.pack(f"<{len(self.words)}I", *self.words)


def gpfifo_entry(addr: int, ndwords: int) -> int:
  """A GPFIFO entry (GP_ENTRY0/1): the pushbuffer segment's address (4-byte aligned, 40 bits) and length in dwords."""
  if addr % 4 or addr >> 40: raise ValueError(f"pushbuffer address {addr:#x} must be 4-byte aligned and below 1 << 40")
  if not 0 < ndwords < 1 << 21: raise ValueError(f"a pushbuffer segment is 1 to {(1 << 21) - 1} dwords, got {ndwords}")
  return addr | (ndwords << 42)


def gpfifo_decode(entry: int) -> tuple[int, int]:
  """(address, dwords) of a GPFIFO entry."""
  return entry & ((1 << 40) - 4), (entry >> 42) & ((1 << 21) - 1)
