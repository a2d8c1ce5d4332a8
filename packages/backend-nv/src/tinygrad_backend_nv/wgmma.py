"""Hopper's warpgroup MMA (`wgmma.mma_async`, sm_90a) as data: the shared-memory matrix descriptor, its canonical
128-byte-swizzled layouts, the accumulator layout, and the CUDA C helper that issues one instruction.

Written from CUTLASS (github:NVIDIA/cutlass): include/cute/arch/mma_sm90_desc.hpp (`GmmaDescriptor`'s bit fields),
include/cute/atom/mma_traits_sm90_gmma.hpp (`make_gmma_desc`: the canonical layouts per major mode and swizzle) and
include/cute/atom/mma_traits_sm90_gmma.hpp / mma_sm90_gmma.hpp (the m64nNk16 f32 accumulator layout, the asm operands).

Descriptor (64 bits): start address >> 4 in bits [0,14), leading byte offset (LBO) >> 4 in [16,30), stride byte offset
(SBO) >> 4 in [32,46), base offset in [49,52), layout type in [62,64) (SWIZZLE_128B = 1). With the 128-byte swizzle
the hardware XORs byte-address bits [4,7) with bits [7,10) (CuTe's Swizzle<3,4,3> on the byte pointer), so a swizzle
atom (8 rows of 128 bytes) must start 1024-byte aligned, and the canonical layouts in 16-byte units (T = 16 bytes of
elements) are:

  K-major  (the k axis contiguous):  ((8, m), 2) : ((8, SBO), 1)         rows of 128 bytes, 8-row groups SBO apart
  MN-major (m/n contiguous):         ((8, m), (8, k)) : ((1, LBO), (8, SBO))  64-element blocks LBO apart, k rows
                                                                              of 128 bytes, 8-row groups SBO apart

`read_operand` reads a matrix through exactly that definition (the PYTHON device emulates the instruction with it);
the tile layout the generator writes (core's codegen/tensor_core.py) is derived separately, so the two check each other.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

SWIZZLE_128B = 1  # GmmaDescriptor layout_type: INTERLEAVE 0, B128 1, B64 2, B32 3
ADDR_MASK = 0x3FFFF  # 18 bits of shared address, stored >> 4 in 14 bits


def encode_desc(addr: int, lbo: int, sbo: int, layout: int = SWIZZLE_128B, base_offset: int = 0) -> int:
  """The 64-bit matrix descriptor for a shared-memory byte address and byte offsets (multiples of 16)."""
  if addr % 16 or lbo % 16 or sbo % 16: raise ValueError(f"wgmma descriptor fields must be 16-byte multiples: addr={addr} lbo={lbo} sbo={sbo}")
  return (((addr & ADDR_MASK) >> 4) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | (base_offset & 7) << 49 | (layout & 3) << 62)


def decode_desc(desc: int) -> dict[str, int]:
  return {"addr": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4, "sbo": ((desc >> 32) & 0x3FFF) << 4,
          "base_offset": (desc >> 49) & 7, "layout": (desc >> 62) & 3}


def swizzle128(addr: int) -> int:
  """Byte address -> where the 128-byte swizzle puts it: 16-byte chunk bits [4,7) XOR 128-byte row bits [7,10)."""
  return addr ^ ((addr >> 3) & 0x70)


def canonical_offset(mn: int, k: int, mn_major: bool, lbo: int, sbo: int, itemsize: int) -> int:
  """Byte offset from the start address of element (mn, k) in the canonical SWIZZLE_128B layout, before swizzling."""
  t = 16 // itemsize  # elements per 16-byte unit
  if mn_major:  # ((8, m), (8, k)) : ((1, LBO), (8, SBO)) in 16-byte units, T elements per unit along mn
    unit, e = divmod(mn, t)
    return (unit % 8) * 16 + (unit // 8) * lbo + (k % 8) * 128 + (k // 8) * sbo + e * itemsize
  unit, e = divmod(k, t)  # ((8, m), 2) : ((8, SBO), 1): rows of 128 bytes, k units side by side
  return (mn % 8) * 128 + (mn // 8) * sbo + unit * 16 + e * itemsize


def read_operand(read: Callable[[int], Any], desc: int, rows: int, k: int, mn_major: bool, itemsize: int) -> list[list[Any]]:
  """The rows x k operand (A as M x K, B as N x K) a descriptor names: read(byte address) -> element."""
  d = decode_desc(desc)
  if d["layout"] != SWIZZLE_128B: raise NotImplementedError(f"wgmma emulation reads SWIZZLE_128B descriptors only, got layout {d['layout']}")
  if d["base_offset"]: raise NotImplementedError("wgmma emulation: base_offset != 0")
  return [[read(swizzle128(d["addr"] + canonical_offset(r, c, mn_major, d["lbo"], d["sbo"], itemsize))) for c in range(k)] for r in range(rows)]


@functools.cache
def accumulator_layout(n: int) -> tuple[tuple[tuple[int, int], ...], ...]:
  """m64nNk16 f32 D fragments: warp w of the warpgroup holds rows 16w..16w+15; for lane l (g = l%32 // 4, t = l % 4),
  register i is (16w + g + 8*((i>>1)&1), 8*(i>>2) + 2t + (i&1)): mma.sync's m16n8 C layout repeated along N."""
  return tuple(tuple((16 * (lane >> 5) + ((lane >> 2) & 7) + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * (lane & 3) + (i & 1))
                     for i in range(n // 2)) for lane in range(128))


def emulate_operand(read: Callable[[int], Any], addr: int, rows: int, k: int, mn_major: bool, lbo: int, sbo: int, itemsize: int) -> list[list[Any]]:
  """TensorCore.smem_reader: the operand at shared byte address `addr` with the generator's (major, LBO, SBO), through
  the descriptor the CUDA helper builds from the same numbers."""
  return read_operand(read, encode_desc(addr, lbo, sbo), rows, k, mn_major, itemsize)


def cuda_helper(name: str, n: int, ptx_type: str, half_type: str) -> str:
  """A CUDA C template issuing one wgmma: descriptors from the operands' shared addresses and the compile-time
  (major, LBO, SBO) of each; FIRST fences the accumulators and shared memory before the first of a batch, LAST commits
  the batch (a later BARRIER waits for it: cuda.py render_barrier)."""
  nreg = n // 2
  regs = ", ".join(f"%{i}" for i in range(nreg))
  outs = ", ".join(f'"+f"(c.v[{i}])' for i in range(nreg))
  # scale-d is a predicate (D = A*B + D when true): set from an immediate inside the asm block
  return (
    f"template <int TA, int TB, int LBOA, int SBOA, int LBOB, int SBOB, int FIRST, int LAST>\n"
    f"static __device__ __forceinline__ floatx{nreg} tg_{name}(const {half_type} *a, const {half_type} *b, floatx{nreg} c) {{\n"
    f"  unsigned long long da = tg_wgmma_desc(a, LBOA, SBOA), db = tg_wgmma_desc(b, LBOB, SBOB);\n"
    f'  if (FIRST) asm volatile("wgmma.fence.sync.aligned;" ::: "memory");\n'
    f'  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, 1, 0;\\n"\n'
    f'    "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_type}.{ptx_type} {{{regs}}}, %{nreg}, %{nreg + 1}, p, 1, 1, %{nreg + 2}, %{nreg + 3};\\n}}"\n'
    f'    : {outs} : "l"(da), "l"(db), "n"(TA), "n"(TB) : "memory");\n'
    f'  if (LAST) asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");\n'
    f"  return c;\n}}")


DESC_HELPER = (
  "static __device__ __forceinline__ unsigned long long tg_wgmma_desc(const void *p, unsigned lbo, unsigned sbo) {\n"
  "  unsigned long long addr = (unsigned)__cvta_generic_to_shared(p);\n"
  f"  return ((addr & 0x{ADDR_MASK:X}ull) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |\n"
  f"         ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | ((unsigned long long){SWIZZLE_128B} << 62);\n"
  "}")
