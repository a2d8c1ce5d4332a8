"""For GPU-style renderers (`Renderer.has_local`): the kernel's output loops become thread indices.

All output loops are flattened into one index `gidx0 * L + lidx0` over `ceil(total / L)` blocks of L threads;
each loop variable is recovered with div/mod (the symbolic rules fold them). When L does not divide the
total, the last block's extra threads compute a clamped (in-bounds) element and skip their stores.
"""
from __future__ import annotations

from tinygrad.dtype import dtypes
from tinygrad.helpers import prod
from tinygrad.uop.ops import Ops, UOp

DEFAULT_LOCAL = 256
GROUP_MIN_BLOCKS = 128  # about an H200's 132 multiprocessors


def launch_dims(total: int | UOp, max_local: int = DEFAULT_LOCAL) -> tuple[int, int | UOp]:
  """(threads per block, blocks) for `total` threads."""
  local = min(max_local, total) if isinstance(total, int) else max_local
  local = max(local, 1)
  blocks = -(-total // local) if isinstance(total, int) else (total + (local - 1)) // local
  return local, blocks


def to_thread_indices(sink: UOp, max_local: int = DEFAULT_LOCAL, group: int = 0) -> tuple[UOp, tuple, tuple]:
  """Replace the output RANGEs with SPECIAL thread indices. Returns (sink, global_size, local_size).
  group G > 0 (OptOps.GROUP, codegen/group.py): lidx0 (size G) is the lane within an output's group of threads and the
  outputs are flattened onto gidx0 * L + lidx1 with L = max_local // G outputs per block (halved while that leaves
  fewer than GROUP_MIN_BLOCKS blocks); only lane 0 stores."""
  nodes = sink.toposort()
  loops = sorted((n for n in nodes if n.op is Ops.RANGE and n.arg[1] == "global"), key=lambda r: r.arg[0])
  lane = UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx0", group)) if group else None
  if not loops:
    if lane is None: return sink, (1, 1, 1), (1, 1, 1)
    return _gate_stores(sink, None, lane), (1, 1, 1), (group, 1, 1)
  sizes = [r.src[0] if r.src[0].op is not Ops.CONST else r.src[0].arg for r in loops]
  total = prod(sizes)
  per_block = max(max_local // group, 1) if group else max_local
  # grouped kernels have few outputs: fewer of them per block, so the blocks spread over the chip's multiprocessors
  while group and per_block > 1 and isinstance(total, int) and -(-total // per_block) < GROUP_MIN_BLOCKS: per_block //= 2
  local, blocks = launch_dims(total, per_block)
  blocks_max = blocks if isinstance(blocks, int) else int(blocks.vmax)
  gidx = UOp(Ops.SPECIAL, dtypes.int32, (), ("gidx0", blocks_max))
  lidx = UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx1" if group else "lidx0", local))
  flat = gidx.cast(loops[0].dtype) * local + lidx.cast(loops[0].dtype)  # thread indices are int32; big kernels index in int64
  exact = isinstance(total, int) and total % local == 0
  in_bounds = None if exact else flat < (total if isinstance(total, int) else total)
  replace: dict[UOp, UOp] = {}
  inner = 1
  for r, size in reversed(list(zip(loops, sizes))):
    idx = flat // inner if not (isinstance(inner, int) and inner == 1) else flat
    replace[r] = idx % size if r is not loops[0] else idx
    inner = inner * size
  if in_bounds is not None: replace[loops[0]] = in_bounds.where(replace[loops[0]], UOp.const(loops[0].dtype, 0))
  new_sink = sink.substitute(replace)
  if in_bounds is not None or lane is not None: new_sink = _gate_stores(new_sink, in_bounds, lane)
  return new_sink, (blocks, 1, 1), ((group, local, 1) if group else (local, 1, 1))


def _gate_stores(sink: UOp, in_bounds: UOp | None, lane: UOp | None) -> UOp:
  """Global stores gated by `in_bounds`, and, in a grouped kernel, to lane 0: except the stores that depend on the lane (a row
  kernel's outputs spread over the lanes, codegen/rows.py), where each lane stores its own."""
  gated = {}
  for s in sink.toposort():
    if s.op is not Ops.STORE or s.src[0].op is not Ops.INDEX or s.src[0].src[0].op is not Ops.DEFINE_GLOBAL: continue
    gate = in_bounds if lane is None or lane in s.toposort() else (lane.eq(0) if in_bounds is None else lane.eq(0) & in_bounds)
    if gate is None: continue
    gated[s] = s.replace(src=(*s.src[:2], gate if len(s.src) == 2 else s.src[2] & gate))
  return sink.substitute(gated)
