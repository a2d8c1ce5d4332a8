"""Wide memory accesses for renderers with vector types (`Renderer.supports_float4`).

After an UPCAST (or UNROLL) by 4, a kernel holds four loads (or stores) of one buffer at `base + 0..3` where `base` is
a multiple of 4. They become one 16-byte access: LOAD of a float.vec(4) through an INDEX whose pointer is a
vec4 pointer, with GEP picking the lanes; and one STORE of a VECTORIZE of the four values. Halves (float16, bfloat16)
group by 8 (16 bytes), else by 4 (8 bytes), on renderers that list them in `Renderer.vector_dtypes`.
"""
from __future__ import annotations

from collections import defaultdict

from tinygrad.dtype import DType, PtrDType, dtypes
from tinygrad.helpers import ContextVar
from tinygrad.uop.ops import Ops, UOp
from tinygrad.uop.symbolic import build_sum, split_terms

# lanes per wide access, widest first: 16 bytes, then 8 for the 2-byte types; bytes by 16, 8 or 4 (an int8 matrix's rows)
WIDTHS: dict[DType, tuple[int, ...]] = {dtypes.float32: (4,), dtypes.float16: (8, 4), dtypes.bfloat16: (8, 4), dtypes.int8: (16, 8, 4),
                                       dtypes.uint8: (16, 8, 4)}


def _aligned_base(idx: UOp, width: int) -> tuple[UOp, int] | None:
  """idx as (base, lane) with base a multiple of width and 0 <= lane < width, when that is provable."""
  terms, const = split_terms(idx)
  if any(k % width for _, k in terms): return None
  return build_sum(terms, const - const % width, idx), const % width


def _access_key(u: UOp, width: int) -> tuple | None:
  """Group key for a global LOAD/STORE: (op, buffer, base, gate) and its lane; None when not a candidate."""
  ptr = u.src[0]
  if (split := _aligned_base(ptr.src[1], width)) is None: return None
  base, lane = split
  gate = u.src[1] if u.op is Ops.LOAD and len(u.src) == 3 else u.src[2] if u.op is Ops.STORE and len(u.src) == 3 else None
  if u.op is Ops.LOAD and gate is not None: return None  # gated lanes may differ in validity: keep them scalar
  return (u.op, ptr.src[0], base, gate), lane


def _candidate(u: UOp, allowed: tuple[DType, ...]) -> bool:
  if u.op not in (Ops.LOAD, Ops.STORE) or u.src[0].op is not Ops.INDEX or u.arg is not None: return False  # (atomic adds stay scalar)
  ptr = u.src[0]
  return ptr.src[0].op is Ops.DEFINE_GLOBAL and ptr.dtype.count == 1 and _base(ptr) in allowed


def _base(ptr: UOp) -> DType: return ptr.dtype.base if isinstance(ptr.dtype, PtrDType) else ptr.dtype


def _vec_ptr(buf: UOp, base: UOp, dt: DType, width: int) -> UOp:
  size = buf.dtype.size if isinstance(buf.dtype, PtrDType) else -1
  return UOp(Ops.INDEX, dt.vec(width).ptr(size), (buf, base))


# the wide stores' order in the kernel (a tensor-core epilogue's 64-128 pairs a thread): each replaces its group at the front of
# the END holding it, so 1 emits the groups in reverse of the order the kernel lists them (a wgmma epilogue: descending columns),
# 2 in that order (ascending). H200, one process, interleaved, fp16 TFLOP/s single / batched ratio to torch, 2 vs 1 (2026-12-03
# s13, bench/README.md): 4096^3 0.943 / 0.958 vs 0.932 / 0.948 (bf16 0.935 / 0.956 vs 0.927 / 0.954), 512x8192x2048 0.790 / 0.811
# vs 0.763 / 0.797, 2048x8192x2048 0.866 / 0.905 vs 0.886 / 0.899; the set order that changed from one process to the next
# (before session 13) read 0.845 / 0.845 there
STORE_ORDER = ContextVar("STORE_ORDER", 2)


# a tensor-core epilogue's pairs of neighbouring columns (each lane holds (row, 2t) and (row, 2t+1)): 4- or 8-byte accesses
PAIRS: dict[DType, tuple[int, ...]] = {dtypes.float32: (2,), dtypes.float16: (2,), dtypes.bfloat16: (2,)}


def _groups(accesses: list[UOp], widths: dict[DType, tuple[int, ...]]) -> list[tuple[tuple, int, dict[int, UOp]]]:
  """Complete groups of accesses (key, width, lanes), trying each dtype's widest width first."""
  found: list[tuple[tuple, int, dict[int, UOp]]] = []
  left = accesses
  for width in sorted({w for ws in widths.values() for w in ws}, reverse=True):
    groups: dict[tuple, dict[int, UOp]] = defaultdict(dict)
    for u in left:
      if width in widths[_base(u.src[0])] and (key := _access_key(u, width)) is not None: groups[key[0]][key[1]] = u
    # a list in first-seen order, not a set: the keys hold UOps, whose hashes differ between processes, so a set's order (and with
    # it the order of a tensor-core epilogue's stores in the kernel) changed from one process to the next
    done = [g for g, lanes in groups.items() if sorted(lanes) == list(range(width))]
    found.extend((g, width, groups[g]) for g in done)
    taken = {u for g in done for u in groups[g].values()}
    left = [u for u in left if u not in taken]
  return found


def vectorize_memory(sink: UOp, allowed: tuple[DType, ...] = (dtypes.float32,), widths: dict[DType, tuple[int, ...]] = WIDTHS) -> UOp:
  """`allowed`: the element dtypes the renderer has vector types for (`Renderer.vector_dtypes`); `widths`: lanes per
  access to try per dtype (WIDTHS, or PAIRS)."""
  allowed = tuple(d for d in allowed if d in widths)
  replace: dict[UOp, UOp] = {}
  store_groups: list[tuple[list[UOp], UOp]] = []
  for (op, buf, base, gate), width, lanes in _groups([u for u in sink.toposort() if _candidate(u, allowed)], widths):
    dt = _base(lanes[0].src[0])
    if op is Ops.LOAD:
      vload = UOp(Ops.LOAD, dt.vec(width), (_vec_ptr(buf, base, dt, width),))
      for lane, u in lanes.items(): replace[u] = UOp(Ops.GEP, dt, (vload,), (lane,))
    else:
      stores = [lanes[i] for i in range(width)]
      value = UOp(Ops.VECTORIZE, dt.vec(width), tuple(s.src[1] for s in stores))
      store_groups.append((stores, UOp(Ops.STORE, dtypes.void, (_vec_ptr(buf, base, dt, width), value, *((gate,) if gate is not None else ())))))
  if not replace and not store_groups: return sink
  if STORE_ORDER.value == 2: store_groups.reverse()
  if replace:
    sink = sink.substitute(replace)
    if store_groups:  # the groups' stores with the loads replaced, in one walk: they share most of their graphs (a tensor-core
      # kernel's 96 groups walked one by one were ~0.5 s of a cold Llama-1B first token)
      done = iter(UOp.sink(*(n for stores, wide in store_groups for n in (*stores, wide))).substitute(replace).src)
      store_groups = [([next(done) for _ in stores], next(done)) for stores, _ in store_groups]
  for stores, wide in store_groups: sink = _replace_stores(sink, stores, wide)
  return sink


def _replace_stores(sink: UOp, stores: list[UOp], wide: UOp) -> UOp:
  """The END (or SINK) holding the stores holds the one wide store instead."""
  targets = set(stores)
  mapping: dict[UOp, UOp] = {}
  for u in sink.toposort():
    if u.op in (Ops.END, Ops.SINK) and targets & set(u.src):
      src = [s for s in u.src if s not in targets]
      mapping[u] = u.replace(src=(*src[:1], wide, *src[1:]) if u.op is Ops.END else (wide, *src))
  return sink.substitute(mapping)
