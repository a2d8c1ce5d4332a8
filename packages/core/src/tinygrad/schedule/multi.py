"""Sharded tensors in the lazy graph, and their lowering to per-device graphs before scheduling.

In the lazy graph a sharded tensor is a MULTI node: MULTI(x_0, ..., x_n-1) is one logical tensor whose part on device i
is x_i, a slice `bounds[i]` of `axis` (or all of it, axis None). The frontends build ops on the logical shape as usual.
Before scheduling, `lower` rewrites the graph bottom-up so that every MULTI holds plain single-device graphs:
  elementwise  per device, once the operands share a layout (a replicated operand is sliced to each shard)
  movement     per device with per-shard arguments while every shard stays whole; a view that mixes shards gathers first
  reduce       per device; over the sharded axis the partial results are all-reduced (naive, or a ring)
  copy         to one device gathers the shards (COPY + a cat kernel); copying to a tuple of devices replicates
The copies between devices are ordinary COPY schedule items, so realize, TinyJit and the gradient need nothing new.
The Tensor methods (shard, shard_like, ...) are in frontend/multi.py.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from tinygrad.dtype import dtypes
from tinygrad.gradient import RULES
from tinygrad.helpers import DEBUG, ContextVar, InvalidArgumentError, prod
from tinygrad.uop.ops import GroupOp, Ops, UOp

Devices = tuple[str, ...]
Layout = tuple[int | None, tuple[tuple[int, int], ...] | None]  # MULTI's arg: (axis, bounds) or (None, None)

ALLREDUCE = ContextVar("ALLREDUCE", "")  # "ring" or "naive" forces one all-reduce; "" lets RING decide
RING = ContextVar("RING", 1)  # 0: always naive, 1: ring for 3+ devices and >= RING_MIN elements, 2: ring whenever it fits
RING_MIN = 256 * 1024  # below this a ring's 2(n-1) small copies cost more than the naive gather

PER_DEVICE = GroupOp.Elementwise | {Ops.CONTIGUOUS, Ops.DETACH}


# ---- small graph builders (single-device nodes)

def make_multi(srcs: Sequence[UOp], axis: int | None = None, bounds: tuple[tuple[int, int], ...] | None = None) -> UOp:
  return UOp(Ops.MULTI, srcs[0].dtype, tuple(srcs), (axis, bounds))


def single_device(u: UOp) -> str:
  """The device of a node that lives on one device."""
  assert isinstance(d := u.device, str), f"expected a single-device node, got one on {d}"
  return d


def copy_to(x: UOp, device: str) -> UOp:
  return x if x.device == device else UOp(Ops.COPY, x.dtype, (x, UOp(Ops.DEVICE, arg=device)))


def _with(arg: tuple, axis: int, value: Any) -> tuple: return tuple(value if i == axis else a for i, a in enumerate(arg))


def shrink_axis(x: UOp, axis: int, bound: tuple[int, int]) -> UOp:
  if bound == (0, x.shape[axis]): return x
  return UOp(Ops.SHRINK, x.dtype, (x,), tuple(bound if i == axis else (0, s) for i, s in enumerate(x.shape)))


def _pad_axis(x: UOp, axis: int, pad: tuple[int, int]) -> UOp:
  if pad == (0, 0): return x
  return UOp(Ops.PAD, x.dtype, (x,), tuple(pad if i == axis else (0, 0) for i in range(len(x.shape))))


def _join(parts: list[UOp]) -> UOp:
  """Sum of zero-padded pieces that don't overlap: a cat in one kernel (bools join with OR)."""
  op = Ops.OR if parts[0].dtype == dtypes.bool else Ops.ADD
  return functools.reduce(lambda a, b: UOp(op, a.dtype, (a, b)), parts)


def split_bounds(size: int, n: int) -> tuple[tuple[int, int], ...]:
  """n shards of an axis of `size`, the first size % n one element larger (like numpy's array_split)."""
  if size < n: raise InvalidArgumentError(f"can't shard an axis of size {size} over {n} devices: every device needs at least one element")
  sizes = [size // n + (i < size % n) for i in range(n)]
  starts = [sum(sizes[:i]) for i in range(n)]
  return tuple((s, s + z) for s, z in zip(starts, sizes))


# ---- moving shards around

def gather(m: UOp, device: str) -> UOp:
  """The whole logical tensor of a lowered MULTI, on one device."""
  axis, bounds = m.arg
  if axis is None:
    return next((s for s in m.src if s.device == device), copy_to(m.src[0], device))
  assert bounds is not None
  total = m.shape[axis]
  order = sorted(range(len(m.src)), key=lambda i: bounds[i][0])
  return _join([_pad_axis(copy_to(m.src[i], device), axis, (bounds[i][0], total - bounds[i][1])) for i in order])


def allgather(m: UOp) -> UOp:
  """Every device gets the whole tensor: a replicated MULTI."""
  if m.arg[0] is None: return m
  if DEBUG >= 2: print(f"multi: gathering a tensor sharded on axis {m.arg[0]} to every device of {m.device}")
  return make_multi([gather(m, d) for d in m.device])


def to_layout(x: UOp, devices: Devices, layout: Layout) -> tuple[UOp, ...]:
  """x's per-device parts in `layout`: a replicated x is sliced, a differently sharded one is gathered and sliced."""
  if x.op is not Ops.MULTI:
    if x.device is None: return (x,) * len(devices)  # a device-less constant: the same node everywhere
    raise InvalidArgumentError(f"can't combine a tensor on {x.device} with one on {devices}: move it there first with .to() or .shard()")
  if x.device != devices: raise InvalidArgumentError(f"tensors are on different devices: {x.device} and {devices}; reshard one with .shard()")
  if x.arg == layout: return x.src
  x = allgather(x)
  axis, bounds = layout
  if axis is None: return x.src
  assert bounds is not None
  return tuple(shrink_axis(s, axis, b) for s, b in zip(x.src, bounds))


# ---- all-reduce

def allreduce_mode(n_devices: int, numel: int) -> str:
  mode = str(ALLREDUCE.value).lower()
  if mode not in ("", "ring", "naive"): raise ValueError(f"ALLREDUCE must be 'ring' or 'naive' (or unset), got {ALLREDUCE.value!r}")
  if numel < n_devices or n_devices < 2: return "naive"  # a ring needs a chunk per device
  if mode: return mode
  if RING.value >= 2 or (RING.value >= 1 and n_devices > 2 and numel >= RING_MIN): return "ring"
  return "naive"


def allreduce(op: Ops, parts: Sequence[UOp]) -> list[UOp]:
  """Combine same-shaped partial results (one per device) with op (ADD, MUL or MAX); every device gets the result."""
  if len(parts) == 1: return list(parts)
  mode = allreduce_mode(len(parts), prod(parts[0].shape))
  return ring_allreduce(op, parts) if mode == "ring" else naive_allreduce(op, parts)


def naive_allreduce(op: Ops, parts: Sequence[UOp]) -> list[UOp]:
  """Copy every part to the first device, combine them there in one kernel, copy the result back out."""
  home = single_device(parts[0])
  total = functools.reduce(lambda acc, p: UOp(op, acc.dtype, (acc, copy_to(p, home))), parts[1:], parts[0])
  return [total] + [copy_to(total, single_device(p)) for p in parts[1:]]


def ring_allreduce(op: Ops, parts: Sequence[UOp]) -> list[UOp]:
  """Reduce-scatter then all-gather around the ring of devices, over n chunks of the flattened parts: each of the
  2(n-1) steps copies one chunk from every device to its right neighbour (which combines it with its own, in the
  reduce-scatter half). Each device sends and receives 2(n-1)/n of the data, whatever n is."""
  n, shape, numel = len(parts), parts[0].shape, prod(parts[0].shape)
  size = -(-numel // n)
  devs = [single_device(p) for p in parts]
  chunks: list[list[UOp]] = []
  for p in parts:
    flat = _pad_axis(UOp(Ops.RESHAPE, p.dtype, (p,), (numel,)), 0, (0, n * size - numel))
    chunks.append([shrink_axis(flat, 0, (j * size, (j + 1) * size)) for j in range(n)])
  # reduce-scatter: in step s device i sends chunk i-s; afterwards device i holds the finished chunk i+1
  for s in range(n - 1):
    for i in range(n):
      j, dst = (i - s) % n, (i + 1) % n
      chunks[dst][j] = UOp(op, chunks[dst][j].dtype, (chunks[dst][j], copy_to(chunks[i][j], devs[dst])))
  # all-gather: in step s device i passes on the finished chunk i+1-s
  for s in range(n - 1):
    for i in range(n):
      j, dst = (i + 1 - s) % n, (i + 1) % n
      chunks[dst][j] = copy_to(chunks[i][j], devs[dst])
  out = []
  for cs in chunks:
    flat = _join([_pad_axis(c, 0, (j * size, (n - 1 - j) * size)) for j, c in enumerate(cs)])
    out.append(UOp(Ops.RESHAPE, flat.dtype, (shrink_axis(flat, 0, (0, numel)),), shape))
  return out


# ---- lowering: logical graph -> MULTI of per-device graphs

def has_multi(u: UOp) -> bool:
  """Does the graph under u hold a sharded tensor (or anything placed on a tuple of devices)?"""
  return u._derived("has_multi", _has_multi)


def _has_multi(n: UOp) -> bool:
  return n.op is Ops.MULTI or (n.op is Ops.DEVICE and isinstance(n.arg, tuple)) or any(s.__dict__["has_multi"] for s in n.src)


def lowered_key() -> str:
  # the lowering depends on the all-reduce setting, so each setting caches its own
  return f"multi_lowered:{ALLREDUCE.value}:{RING.value}"


def lower(u: UOp) -> UOp:
  """u with every op on sharded tensors turned into per-device ops: a MULTI of single-device graphs, or a plain
  single-device graph. Cached on the nodes (the lowered nodes live as long as the logical ones, which keeps an applied
  per-device ASSIGN recognizable as applied)."""
  if not has_multi(u): return u
  key = lowered_key()
  low = u._derived(key, lambda n: _SAME if (x := _lower_node(n, key)) is n else x)
  return u if low is _SAME else low


# the cached lowering of a node that lowers to itself: not the node (a reference from its own __dict__ would make every such node
# a reference cycle, and the interning table's keys hold a node's sources, so a graph's nodes would go one garbage collection
# per level instead of when the last tensor drops them: a sharded tensor's unsharded source buffer stayed allocated)
_SAME = object()


def _lowered(s: UOp, key: str) -> UOp:
  low = s.__dict__[key]
  return s if low is _SAME else low


def _lower_node(n: UOp, key: str) -> UOp:
  if not n.__dict__["has_multi"] or n.op is Ops.DEVICE: return n
  src: tuple[Any, ...] = tuple(_lowered(s, key) for s in n.src)  # (devices: a MULTI's are a tuple, checked where used)
  op = n.op
  if op in (Ops.CONST, Ops.IOTA) and isinstance(n.device, tuple):  # made on every device: replicated
    return make_multi([n.replace(src=(UOp(Ops.DEVICE, arg=d),)) for d in n.device])
  if op is Ops.BUFFER: raise RuntimeError(f"a BUFFER can't live on several devices {n.device}; shard or replicate a tensor instead")
  if op is Ops.MULTI:
    if any(s.op is Ops.MULTI or isinstance(s.device, tuple) for s in src): raise ValueError("a shard of a sharded tensor can't be sharded itself")
    return n.replace(src=src)
  if op is Ops.COPY: return _lower_copy(n, src[0])
  if op is Ops.SHRINK and (piece := _shard_of_gather(n)) is not None: return piece
  if not any(s.op is Ops.MULTI for s in src): return n if src == n.src else n.replace(src=src)
  if op in PER_DEVICE:
    lead = [s for s in src if s.op is Ops.MULTI]
    layout = next((s.arg for s in lead if s.arg[0] is not None), (None, None))
    per = [to_layout(s, lead[0].device, layout) for s in src]
    return make_multi([n.replace(src=tuple(p[i] for p in per)) for i in range(len(lead[0].src))], *layout)
  if op in GroupOp.Movement: return _lower_movement(n, src[0])
  if op is Ops.REDUCE_AXIS:
    m = src[0]
    parts = [n.replace(src=(s,)) for s in m.src]
    if m.arg[0] is None or m.arg[0] not in n.arg[1]: return make_multi(parts, *m.arg)
    return make_multi(allreduce(n.arg[0], parts))  # reduced over the sharded axis: partials combined across devices
  if op is Ops.ASSIGN:
    target, value = src
    if target.op is not Ops.MULTI: return n.replace(src=(target, gather(value, target.device)))
    return make_multi([n.replace(src=(t, v)) for t, v in zip(target.src, to_layout(value, target.device, target.arg))], *target.arg)
  raise NotImplementedError(f"{op} is not supported on sharded tensors")


def _lower_copy(n: UOp, x: UOp) -> UOp:
  dest = n.src[1].arg
  if isinstance(dest, str): return gather(x, dest) if x.op is Ops.MULTI else (n if x is n.src[0] else n.replace(src=(x, n.src[1])))
  if x.op is Ops.MULTI: return x if x.device == dest else make_multi([gather(x, d) for d in dest])
  return make_multi([copy_to(x, d) for d in dest])  # one tensor to a tuple of devices: replicated


def _shard_of_gather(n: UOp) -> UOp | None:
  """SHRINK(COPY(sharded, dev)) that takes exactly one shard (the gradient of a shard): copy just that shard."""
  c = n.src[0]
  if c.op is not Ops.COPY or not isinstance(c.src[1].arg, str) or not has_multi(c.src[0]): return None
  m = lower(c.src[0])
  if m.op is not Ops.MULTI or (axis := m.arg[0]) is None: return None
  if any(b != (0, s) for i, (b, s) in enumerate(zip(n.arg, m.shape)) if i != axis): return None
  k = next((k for k, b in enumerate(m.arg[1]) if b == n.arg[axis]), None)
  return None if k is None else copy_to(m.src[k], c.src[1].arg)


def _reshaped_axis(old: tuple[int, ...], new: tuple[int, ...], axis: int, bounds: tuple[tuple[int, int], ...]) -> tuple[int, tuple] | None:
  """Where the sharded axis goes in a reshape, with the new bounds; None when some shard would not stay one block."""
  before, size = prod(old[:axis]), old[axis]
  for b in range(len(new)):
    if prod(new[:b]) != before: continue
    if all((x * new[b]) % size == 0 for bd in bounds for x in bd):
      return b, tuple((s * new[b] // size, e * new[b] // size) for s, e in bounds)
  return None


def _lower_movement(n: UOp, m: UOp) -> UOp:
  op, arg = n.op, n.arg
  axis, bounds = m.arg
  if axis is None: return make_multi([n.replace(src=(s,)) for s in m.src])
  assert bounds is not None
  size = m.shape[axis]
  if op is Ops.PERMUTE: return make_multi([n.replace(src=(s,)) for s in m.src], arg.index(axis), bounds)
  if op is Ops.EXPAND: return make_multi([n.replace(src=(s,), arg=_with(arg, axis, s.shape[axis])) for s in m.src], axis, bounds)
  if op is Ops.FLIP:  # each shard flips, and lands mirrored
    new_bounds = tuple((size - e, size - b) for b, e in bounds) if arg[axis] else bounds
    return make_multi([n.replace(src=(s,)) for s in m.src], axis, new_bounds)
  if op is Ops.PAD and arg[axis] == (0, 0): return make_multi([n.replace(src=(s,)) for s in m.src], axis, bounds)
  if op is Ops.SHRINK and arg[axis] == (0, size):
    return make_multi([n.replace(src=(s,), arg=_with(arg, axis, (0, s.shape[axis]))) for s in m.src], axis, bounds)
  if op is Ops.RESHAPE and (found := _reshaped_axis(m.shape, arg, axis, bounds)) is not None:
    new_axis, new_bounds = found
    return make_multi([n.replace(src=(s,), arg=_with(arg, new_axis, e - b)) for s, (b, e) in zip(m.src, new_bounds)], new_axis, new_bounds)
  # the view mixes shards (a reshape across the sharded axis, a pad or shrink of it): every device gathers it whole
  return make_multi([n.replace(src=(s,)) for s in allgather(m).src])


# ---- gradient: a MULTI passes each source its own part of the gradient

def _multi_grad(g: UOp, ret: UOp, *srcs: UOp) -> tuple[UOp | None, ...]:
  axis, bounds = ret.arg
  def on(dev: str) -> UOp: return UOp(Ops.COPY, g.dtype, (g, UOp(Ops.DEVICE, arg=dev)))
  # replicas are one logical value: its gradient goes to one of them
  if axis is None: return (on(single_device(srcs[0])),) + (None,) * (len(srcs) - 1)
  return tuple(shrink_axis(on(single_device(s)), axis, b) for s, b in zip(srcs, bounds))


RULES[Ops.MULTI] = _multi_grad


# ---- scheduling sharded roots

def lower_roots(roots: Sequence[UOp]) -> list[UOp]:
  """The single-device roots to schedule for `roots`: each root lowered, a sharded one as its parts; each once."""
  out: list[UOp] = []
  for r in roots:
    low = lower(r)
    out.extend(low.src if low.op is Ops.MULTI else (low,))
  return list(dict.fromkeys(out))


def realized(u: UOp, becomes: dict[UOp, UOp], key: str | None = None) -> UOp | None:
  """What node u stands for after a schedule with the replacements `becomes` ran: its buffer view, or for a sharded
  node the MULTI of its parts' views; None when the schedule did not compute it."""
  if (done := becomes.get(u)) is not None: return done
  # key: lowered_key(), passed in by a caller that asks for every live tensor (this runs once per tensor per realize)
  if (low := u.__dict__.get(key or lowered_key())) is None: return None
  if low is _SAME: low = u
  if low.op is not Ops.MULTI: return becomes.get(low)
  parts = tuple(becomes.get(s, s) for s in low.src)
  return low.replace(src=parts) if all(s.base.op is Ops.BUFFER for s in parts) else None
