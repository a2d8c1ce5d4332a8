"""Loads that stream: read by one thread once, so caching them in L1 only evicts what other threads read again.

A matrix-vector product's warps each read their own rows of the matrix, once, and every one of them reads the same vector. With
both through L1, the rows (most of the bytes) push the vector out, and each warp's vector loads then wait on L2. A load whose
address depends on every thread index of the kernel and on every loop around it is read by no other thread and no other
iteration: the CUDA renderer (its tg_ld_stream helpers) and the PTX renderer give it `ld.global.nc.L1::no_allocate` (PTX ISA,
"ld": eviction priority), and the vector stays.
Measured on an H100 (bench/README.md, session 33): Llama-1B's decode step 1,004 -> 968 us.
"""
from __future__ import annotations

from collections.abc import Callable

from tinygrad.device.plugin import ContextVar, GroupOp, Ops, PtrDType, UOp

STREAM_LOADS = ContextVar("STREAM_LOADS", 1)  # 0: no cache hint on streamed loads
STREAM_AHEAD = ContextVar("STREAM_AHEAD", 0)  # >0: each streamed load issued that many loop steps ahead, into registers (an A/B switch)
STREAM_AHEAD_WHOLE = ContextVar("STREAM_AHEAD_WHOLE", 0)  # 1: only loops of at most STREAM_AHEAD steps (loaded whole before them)
STREAM_EARLY = ContextVar("STREAM_EARLY", 0)  # 1: with STREAM_AHEAD, a loop's first streamed loads go before the grid wait (an A/B switch)
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
  written = {indexed_buffer(u.src[0]) for u in uops if u.op is Ops.STORE}
  out: set[UOp] = set()
  open_ranges: list[UOp] = []
  for u in uops:
    if u.op is Ops.RANGE: open_ranges.append(u)
    elif u.op is Ops.END and open_ranges: open_ranges.pop()
    elif u.op is Ops.LOAD and open_ranges and len(u.src) == 1 and u.src[0].op is Ops.INDEX and u.dtype.itemsize * u.dtype.count in STREAM_BYTES \
        and isinstance(ptr := u.src[0].dtype, PtrDType) and ptr.addrspace == "global":
      used = set(u.src[0].src[1].toposort())
      if specials <= used and all(r in used for r in open_ranges) and indexed_buffer(u.src[0]) not in written: out.add(u)
  return out


def indexed_buffer(x: UOp) -> UOp:
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


# ---- loads issued steps ahead (STREAM_AHEAD): software pipelining of a streamed load across its loop's steps, an A/B switch.
# ptxas keeps at most two of a product lane's 16-byte row loads in flight and none across its loop's back edge (SASS); issued
# 1-3 steps ahead they are, but Llama-1B's decode step did not get faster on an H100 (bench/README.md, session 34: 968.8 ->
# 972.7, 1003.1 with 2 steps: the gate/up kernel's registers 60 -> 70, 4 -> 3 blocks an SM). With STREAM_EARLY the loop's first
# steps go before the grid wait (cuda.py): 985.9 (1 step), 995.7 (2); only the loops of at most 4 steps, loaded whole before
# the wait (STREAM_AHEAD=4 STREAM_AHEAD_WHOLE=1: q/k/v and o), 971.3-971.8 against 967.7-969.4


def ahead_loads(uops: list[UOp], streamed: set[UOp]) -> dict[UOp, list[UOp]]:
  """RANGE -> the loads to issue STREAM_AHEAD steps of it ahead (at most its trip count): in a loop (the innermost open one)
  with a constant trip count that has a streamed load, its ungated global loads from buffers the kernel doesn't write (the streamed
  ones and the vector they multiply) whose address is arithmetic on open loops, thread indices and constants (so that it can be
  rendered again, before the loop and some steps on)."""
  if STREAM_AHEAD.value <= 0 or not streamed: return {}
  written = {indexed_buffer(u.src[0]) for u in uops if u.op is Ops.STORE}
  out: dict[UOp, list[UOp]] = {}
  open_ranges: list[UOp] = []
  for u in uops:
    if u.op is Ops.RANGE: open_ranges.append(u)
    elif u.op is Ops.END and open_ranges: open_ranges.pop()
    elif u.op is Ops.LOAD and open_ranges and (r := open_ranges[-1]).src[0].op is Ops.CONST and len(u.src) == 1 \
        and (not STREAM_AHEAD_WHOLE.value or r.src[0].arg <= STREAM_AHEAD.value) \
        and u.src[0].op is Ops.INDEX and isinstance(ptr := u.src[0].dtype, PtrDType) and ptr.addrspace == "global" and indexed_buffer(u.src[0]) not in written:
      if _address_is_arithmetic(u, lambda x: x.op in (Ops.CONST, Ops.SPECIAL, Ops.DEFINE_VAR) or x in open_ranges): out.setdefault(r, []).append(u)
  return {r: lds for r, lds in out.items() if any(ld in streamed for ld in lds)}


def addressed_at_start(ld: UOp, r: UOp) -> bool:
  """Whether a load's address is arithmetic on thread indices, constants and loop r alone (renderable at the kernel's start)."""
  return _address_is_arithmetic(ld, lambda x: x.op in (Ops.CONST, Ops.SPECIAL) or x is r)


def _address_is_arithmetic(ld: UOp, leaf: Callable[[UOp], bool]) -> bool:
  """Whether a load's address is ALU ops and casts on the leaves `leaf` accepts (a RANGE's sources only order it: not followed)."""
  return all(leaf(x) or x.op in GroupOp.ALU or x.op is Ops.CAST for x in ld.src[0].src[1].toposort(gate=lambda x: x.op is not Ops.RANGE))


def ahead_steps(r: UOp) -> int:
  """How many steps of loop r its ahead_loads are issued ahead: STREAM_AHEAD, at most the loop's trip count."""
  return min(STREAM_AHEAD.value, r.src[0].arg)
