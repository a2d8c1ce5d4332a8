"""Wide memory accesses for renderers with vector types (`Renderer.supports_float4`).

After an UPCAST by 4, a kernel holds four loads (or stores) of one buffer at `base + 0..3` where `base` is a
multiple of 4. They become one 16-byte access: LOAD of a float.vec(4) through an INDEX whose pointer is a
vec4 pointer, with GEP picking the lanes; and one STORE of a VECTORIZE of the four values.
"""
from __future__ import annotations

from collections import defaultdict

from tinygrad.dtype import DType, PtrDType, dtypes
from tinygrad.uop.ops import Ops, UOp
from tinygrad.uop.symbolic import build_sum, split_terms

WIDTH = 4
VECTORIZABLE = (dtypes.float32,)


def _aligned_base(idx: UOp) -> tuple[UOp, int] | None:
  """idx as (base, lane) with base a multiple of WIDTH and 0 <= lane < WIDTH, when that is provable."""
  terms, const = split_terms(idx)
  if any(k % WIDTH for _, k in terms): return None
  return build_sum(terms, const - const % WIDTH, idx), const % WIDTH


def _access_key(u: UOp) -> tuple | None:
  """Group key for a global LOAD/STORE: (op, buffer, base, gate) and its lane; None when not a candidate."""
  ptr = u.src[0]
  if ptr.op is not Ops.INDEX or ptr.src[0].op is not Ops.DEFINE_GLOBAL or _base(ptr) not in VECTORIZABLE: return None
  if (split := _aligned_base(ptr.src[1])) is None: return None
  base, lane = split
  gate = u.src[1] if u.op is Ops.LOAD and len(u.src) == 3 else u.src[2] if u.op is Ops.STORE and len(u.src) == 3 else None
  if u.op is Ops.LOAD and gate is not None: return None  # gated lanes may differ in validity: keep them scalar
  return (u.op, ptr.src[0], base, gate), lane


def _base(ptr: UOp) -> DType: return ptr.dtype.base if isinstance(ptr.dtype, PtrDType) else ptr.dtype


def _vec_ptr(buf: UOp, base: UOp, dt: DType) -> UOp:
  size = buf.dtype.size if isinstance(buf.dtype, PtrDType) else -1
  return UOp(Ops.INDEX, dt.vec(WIDTH).ptr(size), (buf, base))


def vectorize_memory(sink: UOp) -> UOp:
  groups: dict[tuple, dict[int, UOp]] = defaultdict(dict)
  for u in sink.toposort():
    if u.op in (Ops.LOAD, Ops.STORE) and (key := _access_key(u)) is not None: groups[key[0]][key[1]] = u
  replace: dict[UOp, UOp] = {}
  store_groups: list[tuple[list[UOp], UOp]] = []
  for (op, buf, base, gate), lanes in groups.items():
    if sorted(lanes) != list(range(WIDTH)): continue
    dt = _base(lanes[0].src[0])
    if op is Ops.LOAD:
      vload = UOp(Ops.LOAD, dt.vec(WIDTH), (_vec_ptr(buf, base, dt),))
      for lane, u in lanes.items(): replace[u] = UOp(Ops.GEP, dt, (vload,), (lane,))
    else:
      stores = [lanes[i] for i in range(WIDTH)]
      value = UOp(Ops.VECTORIZE, dt.vec(WIDTH), tuple(s.src[1] for s in stores))
      store_groups.append((stores, UOp(Ops.STORE, dtypes.void, (_vec_ptr(buf, base, dt), value, *((gate,) if gate is not None else ())))))
  if not replace and not store_groups: return sink
  sink = sink.substitute(replace) if replace else sink
  for stores, wide in store_groups:
    stores = [s.substitute(replace) if replace else s for s in stores]
    wide = wide.substitute(replace) if replace else wide
    sink = _replace_stores(sink, stores, wide)
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
