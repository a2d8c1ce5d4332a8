"""PM4 packets for Adreno 6xx/7xx (the command processor's format), encoded and decoded.

Sources (github:freedreno/envytools, commit d88cafa3, 2020-08-12): the packet headers and their odd-parity bits from
`decode/cffdec.h` (pkt_is_type4/pkt_is_type7, pm4_calc_odd_parity_bit); opcodes and the CP_LOAD_STATE6 /
CP_EVENT_WRITE / CP_EXEC_CS payloads from `registers/adreno/adreno_pm4.xml`; register offsets and fields from
`registers/adreno/a6xx.xml`.

type4 (write `count` consecutive registers from `reg`):  0100 | P(reg) | reg:19 | P(count) | count:7   (bits 31..0)
type7 (run opcode `op` with `count` payload dwords):    0111 | 0000 | P(op) | op:7 | P(count) | count:15
P(x) is the odd parity bit of x's nibbles. The decoder rejects anything else (a wrong parity bit, type0/type3 packets).
"""
from __future__ import annotations

import struct

# opcodes (adreno_pm4.xml, enum adreno_pm4_type3_packets)
CP_NOP = 0x10
CP_WAIT_FOR_IDLE = 0x26
CP_EXEC_CS = 0x33
CP_LOAD_STATE6_FRAG = 0x34
CP_MEM_WRITE = 0x3d
CP_EVENT_WRITE = 0x46
CP_SET_MARKER = 0x65
OPCODE_NAMES = {CP_NOP: "CP_NOP", CP_WAIT_FOR_IDLE: "CP_WAIT_FOR_IDLE", CP_EXEC_CS: "CP_EXEC_CS",
                CP_LOAD_STATE6_FRAG: "CP_LOAD_STATE6_FRAG", CP_MEM_WRITE: "CP_MEM_WRITE", CP_EVENT_WRITE: "CP_EVENT_WRITE",
                CP_SET_MARKER: "CP_SET_MARKER"}

# CP_EVENT_WRITE events (vgt_event_type) and CP_SET_MARKER modes (a6xx_render_mode)
CACHE_FLUSH_TS = 4
RM6_COMPUTE = 8

# CP_LOAD_STATE6 dword 0: DST_OFF 0-13, STATE_TYPE 14-15, STATE_SRC 16-17, STATE_BLOCK 18-21, NUM_UNIT 22-31
ST6_SHADER, ST6_CONSTANTS = 0, 1
SS6_DIRECT, SS6_INDIRECT = 0, 2
SB6_CS_SHADER = 0xd

# a6xx registers (a6xx.xml, domain A6XX)
SP_CS_CTRL_REG0 = 0xa9b0
SP_CS_OBJ_START_LO, SP_CS_OBJ_START_HI = 0xa9b4, 0xa9b5
SP_CS_CONFIG = 0xa9bb
SP_CS_INSTRLEN = 0xa9bc   # the shader's length in 64-bit instructions
HLSQ_CS_CNTL = 0xb987     # CONSTLEN bits 0-7 (in vec4 units, stored >> 2), ENABLED bit 8
HLSQ_CS_NDRANGE_0 = 0xb990  # KERNELDIM 0-1, LOCALSIZEX/Y/Z (minus one) 2-11/12-21/22-31; NDRANGE_1..6: GLOBALSIZE/GLOBALOFF X,Y,Z
HLSQ_CS_KERNEL_GROUP_X = 0xb999  # .._Y, .._Z follow
REGISTER_NAMES = {SP_CS_CTRL_REG0: "SP_CS_CTRL_REG0", SP_CS_OBJ_START_LO: "SP_CS_OBJ_START_LO", SP_CS_OBJ_START_HI: "SP_CS_OBJ_START_HI",
                  SP_CS_CONFIG: "SP_CS_CONFIG", SP_CS_INSTRLEN: "SP_CS_INSTRLEN", HLSQ_CS_CNTL: "HLSQ_CS_CNTL",
                  **{HLSQ_CS_NDRANGE_0 + i: f"HLSQ_CS_NDRANGE_{i}" for i in range(7)},
                  **{HLSQ_CS_KERNEL_GROUP_X + i: f"HLSQ_CS_KERNEL_GROUP_{'XYZ'[i]}" for i in range(3)}}
MAX_TYPE4_COUNT, MAX_TYPE7_COUNT = 0x7f, 0x3fff


class PacketError(ValueError):
  """A malformed PM4 stream: says which dword, what was wrong and what a valid packet looks like."""


def odd_parity(v: int) -> int:
  x = v ^ (v >> 4) ^ (v >> 8) ^ (v >> 12) ^ (v >> 16) ^ (v >> 20) ^ (v >> 24) ^ (v >> 28)
  return (0x9669 >> (x & 0xf)) & 1


def type4(reg: int, *values: int) -> list[int]:
  """Write `values` to registers reg, reg+1, ..."""
  if not 1 <= len(values) <= MAX_TYPE4_COUNT: raise ValueError(f"a type4 packet writes 1..{MAX_TYPE4_COUNT} registers, not {len(values)}")
  if not 0 <= reg < 1 << 19: raise ValueError(f"register 0x{reg:x} does not fit a type4 packet (19 bits)")
  n = len(values)
  return [(4 << 28) | (odd_parity(reg) << 27) | (reg << 8) | (odd_parity(n) << 7) | n, *(v & 0xffffffff for v in values)]


def type7(opcode: int, *payload: int) -> list[int]:
  """Run `opcode` with `payload` dwords."""
  if len(payload) > MAX_TYPE7_COUNT: raise ValueError(f"a type7 packet carries at most {MAX_TYPE7_COUNT} dwords, not {len(payload)}")
  n = len(payload)
  return [(7 << 28) | (odd_parity(opcode) << 23) | ((opcode & 0x7f) << 16) | (odd_parity(n) << 15) | n, *(v & 0xffffffff for v in payload)]


def lo_hi(addr: int) -> tuple[int, int]: return addr & 0xffffffff, addr >> 32


def load_state6(state_type: int, src: int, block: int, num_unit: int, addr: int, dst_off: int = 0) -> list[int]:
  """CP_LOAD_STATE6_FRAG from GPU memory (SS6_INDIRECT): `num_unit` units (vec4 for constants) to offset `dst_off`."""
  return type7(CP_LOAD_STATE6_FRAG, dst_off | (state_type << 14) | (src << 16) | (block << 18) | (num_unit << 22), *lo_hi(addr))


def event_write_ts(event: int, addr: int, value: int) -> list[int]:
  """CP_EVENT_WRITE of `event` that then writes `value` to `addr` (as freedreno writes fences with CACHE_FLUSH_TS)."""
  return type7(CP_EVENT_WRITE, event, *lo_hi(addr), value)


def decode(words: list[int] | tuple[int, ...], where: str = "IB") -> list[tuple[str, int, list[int], int]]:
  """[(kind 'type4' | 'type7', register or opcode, payload, dword index)]; PacketError on anything malformed."""
  out, i = [], 0
  while i < len(words):
    h = words[i]
    kind = h >> 28
    if kind == 4:
      reg, n = (h >> 8) & 0x7ffff, h & 0x7f
      if (h >> 27) & 1 != odd_parity(reg) or (h >> 7) & 1 != odd_parity(n):
        raise PacketError(f"{where} dword {i}: type4 header 0x{h:08x} has a wrong parity bit (register 0x{reg:x}, count {n}); "
                          "bit 27 must be the odd parity of the register and bit 7 that of the count")
      if n == 0: raise PacketError(f"{where} dword {i}: type4 packet writes 0 registers (count must be 1..127)")
      out.append(("type4", reg, list(words[i + 1:i + 1 + n]), i))
    elif kind == 7:
      op, n = (h >> 16) & 0x7f, h & 0x3fff
      if (h >> 24) & 0xf or (h >> 23) & 1 != odd_parity(op) or (h >> 15) & 1 != odd_parity(n):
        raise PacketError(f"{where} dword {i}: type7 header 0x{h:08x} is malformed (opcode 0x{op:x}, count {n}): bits 24-27 must be 0, "
                          "bit 23 the odd parity of the opcode and bit 15 that of the count")
      out.append(("type7", op, list(words[i + 1:i + 1 + n]), i))
    else:
      raise PacketError(f"{where} dword {i}: 0x{h:08x} is not a type4 or type7 packet header (bits 28-31 are {kind}; a6xx streams "
                        "use only type4 register writes and type7 opcodes)")
    if i + 1 + n > len(words):
      raise PacketError(f"{where} dword {i}: packet declares {n} payload dwords but only {len(words) - i - 1} remain in the buffer "
                        f"({len(words)} dwords): the count is too large or the IB size too small")
    i += 1 + n
  return out


def words_of(data: bytes) -> list[int]:
  if len(data) % 4: raise PacketError(f"an IB must be a whole number of dwords, got {len(data)} bytes")
  return list(struct.unpack(f"<{len(data) // 4}I", data))
