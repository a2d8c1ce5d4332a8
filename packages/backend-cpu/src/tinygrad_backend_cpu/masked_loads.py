"""Gated loads of neighbouring elements, grouped into one masked vector load (for the LLVM renderer).

An upcast loop over a padded input (a convolution's border) holds one load per lane, each gated by whether its element
lies inside the tensor. Rendered one at a time, every gated load is a branch around the load, the lanes end up in
different basic blocks, and LLVM leaves the whole kernel scalar (a 3x3 convolution: 64 scalar FMAs per step instead of 8
vector ones). Grouped, the lanes' gates form a mask and one `llvm.masked.load` reads the lanes that exist; a masked-off
lane's address is never touched, so an index before the buffer's start (the padding) is harmless.

`group_masked_loads` finds the groups in a linearized kernel and moves what the later lanes' addresses and gates are
computed from (pure arithmetic only) to before the first lane, so that all of the group's operands exist where its one
load is emitted. It returns the reordered list and the groups by their first lane.
"""
from __future__ import annotations

from dataclasses import dataclass

from tinygrad.device.plugin import GroupOp, Ops, PtrDType, UOp, dtypes

WIDTHS = (8, 4)  # lanes per masked load: a ymm register of floats, else an xmm one
# what may move up past other work: values computed from their sources alone (no memory, no control flow)
MOVABLE = GroupOp.Elementwise | {Ops.CONST, Ops.INDEX}
# ops between the first and last lane that end the straight-line block the group must lie in
BLOCK_ENDS = {Ops.RANGE, Ops.END, Ops.BARRIER, Ops.DEFINE_REG, Ops.DEFINE_LOCAL}


@dataclass(frozen=True)
class MaskedLoad:
  lanes: tuple[UOp, ...]  # the LOADs, lane 0 first
  first_index: UOp        # lane 0's element index (an int UOp); lane k reads first_index + k


def _lane_of(load: UOp) -> tuple[tuple, int] | None:
  """(group key, lane offset) of a gated float32 load from a global buffer at `base + const`; None if not a candidate."""
  if load.op is not Ops.LOAD or len(load.src) != 3 or load.dtype != dtypes.float32 or load.src[2].op is not Ops.CONST: return None
  idx = load.src[0]
  if idx.op is not Ops.INDEX or idx.src[0].op is not Ops.DEFINE_GLOBAL or not isinstance(idx.dtype, PtrDType): return None
  i = idx.src[1]
  base, off = (i.src[0], i.src[1].arg) if i.op is Ops.ADD and i.src[1].op is Ops.CONST else (i, 0)
  return (idx.src[0], base, load.src[2].arg), off


def _deps_after(u: UOp, pos: dict[UOp, int], start: int, out: set[UOp]) -> bool:
  """Collect into `out` what u is computed from that sits after position `start`; False if any of it can't move."""
  stack = [u]
  while stack:
    n = stack.pop()
    for s in n.src:
      if s in out or pos.get(s, -1) <= start: continue
      if s.op not in MOVABLE: return False
      out.add(s)
      stack.append(s)
  return True


def group_masked_loads(uops: list[UOp]) -> tuple[list[UOp], dict[UOp, MaskedLoad]]:
  candidates: dict[tuple, dict[int, UOp]] = {}
  for u in uops:
    if (lane := _lane_of(u)) is not None: candidates.setdefault(lane[0], {}).setdefault(lane[1], u)
  order, groups = list(uops), {}
  for by_off in candidates.values():
    offs = sorted(by_off)
    i = 0
    while i < len(offs):
      width = next((w for w in WIDTHS if all(offs[i] + k in by_off for k in range(w))), 0)
      if not width:
        i += 1
        continue
      lanes = tuple(by_off[offs[i] + k] for k in range(width))
      if (g := _make_group(order, lanes)) is not None:
        order, group = g
        first = {u: i for i, u in enumerate(order)}
        groups[min(lanes, key=first.__getitem__)] = group  # rendered where its first lane comes
      i += width
  return order, groups


def _make_group(order: list[UOp], lanes: tuple[UOp, ...]) -> tuple[list[UOp], MaskedLoad] | None:
  """The order with what the lanes' addresses and gates need moved before the first of them to be rendered, or None when
  the lanes don't share one straight-line block or something they need can't move."""
  pos = {u: i for i, u in enumerate(order)}
  first = min(lanes, key=lambda u: pos[u])
  start, end = pos[first], max(pos[u] for u in lanes)
  if any(u.op in BLOCK_ENDS for u in order[start:end + 1]): return None
  hoist: set[UOp] = set()
  for lane in (u for u in lanes if u is not first):
    for s in (lane.src[0], lane.src[1]):  # the address (INDEX) and the gate
      if pos[s] <= start: continue
      if s.op not in MOVABLE or not _deps_after(s, pos, start, hoist): return None
      hoist.add(s)
  moved = sorted(hoist, key=lambda u: pos[u])
  new_order = [u for u in order[:start] if u not in hoist] + moved + [u for u in order[start:] if u not in hoist]
  return new_order, MaskedLoad(lanes, lanes[0].src[0].src[1])
