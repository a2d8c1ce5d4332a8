"""Loads that stream: read by one thread once, so caching them in L1 only evicts what other threads read again.

A matrix-vector product's warps each read their own rows of the matrix, once, and every one of them reads the same vector. With
both through L1, the rows (most of the bytes) push the vector out, and each warp's vector loads then wait on L2. A load whose
address depends on every thread index of the kernel and on every loop around it is read by no other thread and no other
iteration: the CUDA renderer (its tg_ld_stream helpers) and the PTX renderer give it `ld.global.nc.L1::no_allocate` (PTX ISA,
"ld": eviction priority), and the vector stays.
Measured on an H100 (bench/README.md, session 33): Llama-1B's decode step 1,004 -> 968 us.
"""
from __future__ import annotations

from tinygrad.device.plugin import ContextVar, Ops, PtrDType, UOp

STREAM_LOADS = ContextVar("STREAM_LOADS", 1)  # 0: no cache hint on streamed loads
STREAM_BYTES = (4, 8, 16)  # load sizes with a helper (one, two or four 32-bit registers)
PARTIALS_SMEM_MAX = 4096  # shared bytes up to which a kernel's shared memory holds only a reduction's partials


def streamed_loads(uops: list[UOp]) -> set[UOp]:
  """In a kernel without tensor cores whose shared memory (if any) holds only a reduction's partials, the ungated global loads
  of 4, 8 or 16 bytes, inside a loop, whose address depends on every SPECIAL (thread and block index) of the kernel and on
  every loop open around the load, from a buffer the kernel doesn't store to (a non-coherent load must not see the kernel's
  own writes)."""
  specials = {u for u in uops if u.op is Ops.SPECIAL}
  if not STREAM_LOADS.value or not specials or any(u.op is Ops.WMMA for u in uops): return set()
  if sum(u.dtype.size * u.dtype.base.itemsize for u in uops if u.op is Ops.DEFINE_LOCAL) > PARTIALS_SMEM_MAX: return set()  # type: ignore[attr-defined]
  written = {_buffer(u.src[0]) for u in uops if u.op is Ops.STORE}
  out: set[UOp] = set()
  open_ranges: list[UOp] = []
  for u in uops:
    if u.op is Ops.RANGE: open_ranges.append(u)
    elif u.op is Ops.END and open_ranges: open_ranges.pop()
    elif u.op is Ops.LOAD and open_ranges and len(u.src) == 1 and u.src[0].op is Ops.INDEX and u.dtype.itemsize * u.dtype.count in STREAM_BYTES \
        and isinstance(ptr := u.src[0].dtype, PtrDType) and ptr.addrspace == "global":
      used = set(u.src[0].src[1].toposort())
      if specials <= used and all(r in used for r in open_ranges) and _buffer(u.src[0]) not in written: out.add(u)
  return out


def _buffer(x: UOp) -> UOp:
  """The DEFINE_GLOBAL (or local, or register) an INDEX (through casts and AFTERs) addresses."""
  while x.op is not Ops.DEFINE_GLOBAL and x.src: x = x.src[0]
  return x


def stream_load_helper(nbytes: int) -> str:
  """tg_ld_stream<nbytes>(p): *p through `ld.global.nc.L1::no_allocate` as 32-bit words (any type of that size). Volatile: an asm
  without side effects may be hoisted by NVVM above the kernel's griddepcontrol.wait (its operands are ready at the start),
  where it could read what the kernel before has not written yet; the PTX of Llama-1B's decode products is the same either way."""
  n = nbytes // 4
  regs = ", ".join(f"%{i}" for i in range(n))
  if n > 1: regs = f"{{{regs}}}"
  outs = ", ".join(f'"=r"(R[{i}])' for i in range(n))
  vec = f".v{n}" if n > 1 else ""
  return (f"template <class T> static __device__ __forceinline__ T tg_ld_stream{nbytes}(const T *p) {{\n"
          f"  T r; unsigned *R = (unsigned *)&r;\n"
          f'  asm volatile("ld.global.nc.L1::no_allocate{vec}.u32 {regs}, [%{n}];" : {outs} : "l"(p));\n'
          f"  return r;\n}}")
