"""Views become index math: rules that push `INDEX_AT(tensor, gate, *idx)` ("tensor's element at idx") down
through the tensor graph until only loads, constants and arithmetic on loop indices remain.

  INDEX_AT(a + b, g, i)       -> INDEX_AT(a, g, i) + INDEX_AT(b, g, i)
  INDEX_AT(PERMUTE(x), g, i)  -> INDEX_AT(x, g, permuted i)
  INDEX_AT(PAD(x), g, i)      -> valid ? INDEX_AT(x, g & valid, i - before) : 0
  INDEX_AT(REDUCE_AXIS(x), g, i) -> REDUCE(INDEX_AT(x, g, i with new loop ranges), ranges)
  INDEX_AT(BUFFER, g, i)      -> LOAD(INDEX(DEFINE_GLOBAL(n), i), gate g)
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tinygrad.dtype import DType, dtypes
from tinygrad.schedule.rows import mark_row_loops
from tinygrad.schedule.siblings import merge_sibling_reduces
from tinygrad.uop.ops import GroupOp, Ops, UOp
from tinygrad.uop.rewrite import PatternMatcher, UPat

TRUE = UOp.const(dtypes.bool, True)
INT32_MAX = 2**31 - 1


@dataclass
class IndexingContext:
  """Per kernel: which buffer is which parameter, a counter for new loop ranges, and the dtype of the index math (int64
  only for a kernel over a buffer or loop of 2**31 elements or more, see index_dtype)."""
  buffers: dict[UOp, int] = field(default_factory=dict)
  next_range: int = 0
  dtype: DType = dtypes.int32

  def new_range(self, size: int, kind: str) -> UOp:
    r = UOp(Ops.RANGE, self.dtype, (UOp.const(self.dtype, size),), (self.next_range, kind))
    self.next_range += 1
    return r

  def param(self, buf: UOp) -> int:
    if buf not in self.buffers: self.buffers[buf] = len(self.buffers)
    return self.buffers[buf]


def index_at(x: UOp, gate: UOp, idx: tuple[UOp, ...]) -> UOp:
  return UOp(Ops.INDEX_AT, x.dtype, (x, gate, *idx))


def strides_for(shape: tuple[int, ...]) -> tuple[int, ...]:
  """Row-major strides of a contiguous shape."""
  out, acc = [], 1
  for s in reversed(shape):
    out.append(acc)
    acc *= s
  return tuple(reversed(out))


def flat_index(idx: tuple[UOp, ...], shape: tuple[int, ...], dt: DType = dtypes.int32) -> UOp:
  """Row-major position of idx in shape, in dt: the kernel's index dtype (see index_dtype)."""
  total = UOp.const(dt, 0)
  for i, st, s in zip(idx, strides_for(shape), shape):
    if s != 1: total = total + i * st
  return total


def unflatten_index(flat: UOp, shape: tuple[int, ...]) -> tuple[UOp, ...]:
  out = []
  for j, (st, s) in enumerate(zip(strides_for(shape), shape)):
    if s == 1: out.append(UOp.const(flat.dtype, 0))
      # a size-1 axis is always index 0
    else:
      v = flat // st if st != 1 else flat
      out.append(v % s if j != 0 else v)
  return tuple(out)


# ---- one rule per view op

def _reshape(x: UOp, g: UOp, idx: tuple[UOp, ...], arg: tuple[int, ...], dt: DType) -> UOp:
  old = x.shape
  if old == arg: return index_at(x, g, idx)
  if all(isinstance(s, int) for s in old) and all(isinstance(s, int) for s in arg):
    return index_at(x, g, unflatten_index(flat_index(idx, arg, dt), old))
  # a symbolic shape: each group of axes with equal products maps on its own, so a symbolic axis that the reshape keeps
  # keeps its index (no `% (v+1)` of a flat index)
  out: list[UOp] = []
  for (o0, o1), (n0, n1) in _reshape_groups(old, arg):
    if o1 - o0 == 1 and n1 - n0 == 1: out.append(idx[n0])
    else: out.extend(unflatten_index(flat_index(idx[n0:n1], arg[n0:n1], dt), old[o0:o1]) if o1 > o0 else ())
  return index_at(x, g, tuple(out))


def _reshape_groups(old: tuple, new: tuple) -> list[tuple[tuple[int, int], tuple[int, int]]]:
  """Consecutive axis ranges of old and new shapes with equal element counts (for every value of the Variables), in order;
  one group of everything when no finer split is found."""
  from tinygrad.uop.symbolic import sint_eq, sint_prod
  groups, i, j = [], 0, 0
  while i < len(old) or j < len(new):
    i0, j0 = i, j
    po, pn = old[i] if i < len(old) else 1, new[j] if j < len(new) else 1
    i, j = min(i + 1, len(old)), min(j + 1, len(new))
    while not sint_eq(po, pn):
      if j < len(new) and (i == len(old) or _surely_le(pn, po)): pn, j = sint_prod((pn, new[j])), j + 1
      elif i < len(old) and (j == len(new) or _surely_le(po, pn)): po, i = sint_prod((po, old[i])), i + 1
      else: return [((0, len(old)), (0, len(new)))]
    groups.append(((i0, i), (j0, j)))
  return groups


def _surely_le(a: int | UOp, b: int | UOp) -> bool:
  """a <= b for every value of the Variables (not only the bound ones)."""
  if not isinstance(a, UOp) and not isinstance(b, UOp): return a <= b
  d = b - a if isinstance(b, UOp) else (-a) + b
  return bool(isinstance(d, UOp) and d.simplify().vmin >= 0)


def _permute(x: UOp, g: UOp, idx: tuple[UOp, ...], arg: tuple[int, ...], dt: DType) -> UOp:
  new = [UOp.const(dt, 0)] * len(arg)
  for out_axis, in_axis in enumerate(arg): new[in_axis] = idx[out_axis]
  return index_at(x, g, tuple(new))


def _expand(x: UOp, g: UOp, idx: tuple[UOp, ...], arg: tuple[int, ...], dt: DType) -> UOp:
  return index_at(x, g, tuple(UOp.const(dt, 0) if s == 1 and n != 1 else i for i, s, n in zip(idx, x.shape, arg)))


def _shrink(x: UOp, g: UOp, idx: tuple[UOp, ...], arg: tuple[tuple[int, int], ...], dt: DType) -> UOp:
  return index_at(x, g, tuple(i + b if b != 0 else i for i, (b, _) in zip(idx, arg)))


def _flip(x: UOp, g: UOp, idx: tuple[UOp, ...], arg: tuple[bool, ...], dt: DType) -> UOp:
  return index_at(x, g, tuple((s - 1) - i if f else i for i, s, f in zip(idx, x.shape, arg)))


def _nonzero(x: int | UOp) -> bool: return isinstance(x, UOp) or x != 0  # a symbolic pad (cat along a symbolic dim) may be 0


def _pad(x: UOp, g: UOp, idx: tuple[UOp, ...], arg: tuple[tuple[int, int], ...], dtype) -> UOp:
  valid = TRUE
  new_idx = []
  for i, s, (before, after) in zip(idx, x.shape, arg):
    has_before, has_after = _nonzero(before), _nonzero(after)
    j = i - before if has_before else i
    new_idx.append(j)
    if has_before: valid = valid & (j >= 0) if valid is not TRUE else (j >= 0)
    if has_after: valid = valid & (j < s) if valid is not TRUE else (j < s)
  valid = valid.simplify()
  inner_gate = valid if g is TRUE else (g & valid)
  return valid.where(index_at(x, inner_gate, tuple(new_idx)), UOp.const(dtype, 0))


def _invariant_in_bounds(i: UOp, gate: UOp, size: int | UOp) -> bool:
  """A pad's gate keeps a load in bounds. An index in bounds for every value of its loops, moving with none of the loops the
  gate tests, and at least one of those a reduce loop, needs none (the pad's `where` selects the 0 anyway): ungated, the load
  is the same value across that reduce loop and leaves it (a conv's weight gradient after a batchnorm: each channel's scale
  once a channel, not once a tap and pixel: a small ResNet's training step 40 -> 33 ms of kernels on 2 cores). A load that
  moves with the gate's loops keeps it, as one gated only by output loops does (GPU threads, not loops: a cat of slices of
  one buffer would read every piece in every thread)."""
  if not (isinstance(size, int) and isinstance(lo := i.vmin, int) and isinstance(hi := i.vmax, int) and 0 <= lo and hi < size): return False
  loops = {u for u in i.simplify().toposort() if u.op is Ops.RANGE}  # (a window's (c*9 + tap) // 9 is c)
  tested = [u for u in gate.toposort() if u.op is Ops.RANGE]
  return not any(u in loops for u in tested) and any(u.arg[1] == "reduce" for u in tested)


_MOVEMENT: dict[Ops, Callable[..., UOp]] = {Ops.RESHAPE: _reshape, Ops.PERMUTE: _permute, Ops.EXPAND: _expand, Ops.SHRINK: _shrink, Ops.FLIP: _flip}


def push_index(ctx: IndexingContext, node: UOp) -> UOp | None:
  x, g, idx = node.src[0], node.src[1], node.src[2:]
  if x.op in _MOVEMENT: return _MOVEMENT[x.op](x.src[0], g, idx, x.arg, ctx.dtype)
  if x.op is Ops.PAD: return _pad(x.src[0], g, idx, x.arg, x.dtype)
  if x.op is Ops.CONST: return x.arg.cast(x.dtype) if isinstance(x.arg, UOp) else UOp.const(x.dtype, x.arg)
  if x.op is Ops.IOTA: return idx[0].cast(x.dtype)
  if x.op is Ops.BUFFER:
    # an empty buffer has nothing to read: every access to it is gated off (a pad around it, a zero-length range)
    if isinstance(x.arg[1], int) and x.arg[1] == 0: return UOp.const(x.dtype, 0)
    ptr = UOp(Ops.DEFINE_GLOBAL, x.dtype.ptr(x.arg[1]), (), ctx.param(x)).index(idx[0])
    return ptr.load() if g is TRUE or _invariant_in_bounds(idx[0], g, x.arg[1]) else ptr.load(g, UOp.const(x.dtype, 0))
  if x.op in GroupOp.Elementwise:
    return UOp(x.op, x.dtype, tuple(index_at(s, g, idx) for s in x.src), x.arg)
  if x.op in (Ops.DETACH, Ops.CONTIGUOUS): return index_at(x.src[0], g, idx)
  if x.op is Ops.REDUCE_AXIS:
    op, axes = x.arg
    src_shape = x.src[0].shape
    new_idx, ranges = list(idx), []
    for a in axes:
      if src_shape[a] == 1: new_idx[a] = UOp.const(ctx.dtype, 0)
      else:
        ranges.append(ctx.new_range(src_shape[a], "reduce"))
        new_idx[a] = ranges[-1]
    inner = index_at(x.src[0], g, tuple(new_idx))
    return UOp(Ops.REDUCE, x.dtype, (inner, *ranges), op) if ranges else inner
  raise NotImplementedError(f"can't index into {x.op} inside a kernel (it should have been realized)")


pm_indexing = PatternMatcher([(UPat(Ops.INDEX_AT, name="node"), push_index)])


def output_ranges(ctx: IndexingContext, shape: tuple[int, ...]) -> tuple[UOp, ...]:
  """One loop per output axis (size-1 axes are index 0)."""
  return tuple(ctx.new_range(s, "global") if s != 1 else UOp.const(ctx.dtype, 0) for s in shape)


def index_dtype(expr: UOp, out_buffer: UOp) -> DType:
  """int32 index math where every buffer, view and loop of the kernel has fewer than 2**31 elements (then no in-bounds index
  or loop bound can exceed int32, and normal kernels keep their code); int64 otherwise, on every renderer."""
  def big(n: UOp) -> bool:
    if n.op is Ops.BUFFER: return isinstance(n.arg[1], int) and n.arg[1] > INT32_MAX
    size = 1
    for s in n.shape: size *= s if isinstance(s, int) else int(s.vmax)
    return size > INT32_MAX
  nodes = UOp(Ops.SINK, src=(expr, out_buffer)).toposort(gate=lambda u: u.op is not Ops.BUFFER)
  return dtypes.int64 if any(big(n) for n in nodes if n.op not in (Ops.SINK, Ops.DEVICE) and n.dtype != dtypes.void) else dtypes.int32


def kernel_ast(expr: UOp, out_buffer: UOp, ctx: IndexingContext, out_view: UOp | None = None, siblings: bool = False) -> UOp:
  """SINK(STORE(out[flat(ranges)], expr at ranges)), with every view turned into index math. With `out_view` (a view
  of out_buffer: an assign into a slice) the store goes where that view's elements live. `siblings`: reductions over loops of
  equal length share one loop (schedule/siblings.py; on a GPU, where each output's threads run the loop: on a CPU one loop with
  two accumulators ran slower, e.g. silu(W1 @ x) * (W2 @ x) at 1536x576: 190 -> 430 us)."""
  from tinygrad.uop.rewrite import graph_rewrite
  from tinygrad.uop.symbolic import symbolic
  ctx.param(out_buffer)
  ctx.dtype = index_dtype(expr, out_buffer)
  idx = output_ranges(ctx, expr.shape)
  value = graph_rewrite(index_at(expr, TRUE, idx), pm_indexing, ctx)
  if out_view is not None and out_view.op is not Ops.BUFFER:
    out_ptr = graph_rewrite(index_at(out_view, TRUE, idx), pm_indexing, ctx).src[0]  # LOAD(INDEX(out, i)) -> INDEX
  else:
    out_ptr = UOp(Ops.DEFINE_GLOBAL, out_buffer.dtype.ptr(out_buffer.arg[1]), (), 0).index(flat_index(idx, expr.shape, ctx.dtype))
  ast = out_ptr.store(value).sink()
  if ctx.dtype is not dtypes.int32: ast = graph_rewrite(ast, pm_widen_sizes)  # symbolic sizes (int32 Variables) in int64 index math
  ast = graph_rewrite(ast, symbolic + pm_collapse_one_hot)
  return mark_row_loops(merge_sibling_reduces(ast) if siblings else ast)


def collapse_one_hot(red: UOp) -> UOp | None:
  """A sum over a range r of `e == r ? v(r) : 0`, with e free of r, has at most one nonzero term: it is `v(e)` where e is in
  range (read at e clamped into range, so the load stays in bounds) and 0 elsewhere. A one-hot gather (`table[idx]`,
  `gather`) becomes a direct load instead of a loop over the whole indexed axis."""
  value, ranges = red.src[0], red.src[1:]
  if red.arg is not Ops.ADD or value.op is not Ops.WHERE or value.dtype != red.dtype: return None
  cond, picked, zero = value.src
  if cond.op is not Ops.CMPEQ or zero.op is not Ops.CONST or zero.arg != 0: return None
  for r in ranges:
    if r.src[0].op is not Ops.CONST: continue
    # r itself, or r cast to the index's type (int64 loops where a view of the kernel passes 2**31 elements): same values
    sides = [i for i, x in enumerate(cond.src) if x is r or (x.op is Ops.CAST and x.src[0] is r and dtypes.is_int(x.dtype))]
    if not sides: continue
    e = cond.src[1 - sides[0]]
    if any(n.op is Ops.RANGE and n in ranges for n in e.toposort()): continue
    n = r.src[0].arg
    inside = (e < 0).logical_not() & (e < n)
    at = e.maximum(0).minimum(n - 1)
    out = inside.where(picked.substitute({r: at if at.dtype == r.dtype else at.cast(r.dtype)}), zero)
    rest = tuple(x for x in ranges if x is not r)
    return UOp(Ops.REDUCE, red.dtype, (out, *rest), red.arg) if rest else out
  return None


_INT_MATH = frozenset({Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.SUB, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE})


def widen_sizes(x: UOp) -> UOp | None:
  """Index math that mixes int64 loop indices with int32 symbolic sizes (a Variable is int32) in int64: the sizes are cast up."""
  if x.op is Ops.RANGE:
    end = x.src[0]
    return x.replace(src=(end.cast(x.dtype), *x.src[1:])) if end.dtype != x.dtype and dtypes.is_int(end.dtype) else None
  vals = x.src[1:] if x.op is Ops.WHERE else x.src
  ints = {s.dtype for s in vals if dtypes.is_int(s.dtype) and s.dtype.count == 1}
  if len(ints) < 2 or dtypes.int64 not in ints: return None
  src = tuple(s.cast(dtypes.int64) if (x.op is not Ops.WHERE or i > 0) and dtypes.is_int(s.dtype) else s for i, s in enumerate(x.src))
  return UOp(x.op, dtypes.bool if x.op in GroupOp.Comparison else dtypes.int64, src, x.arg)


pm_widen_sizes = PatternMatcher([(UPat(_INT_MATH | {Ops.RANGE}, name="x"), widen_sizes)])


pm_collapse_one_hot = PatternMatcher([(UPat(Ops.REDUCE, name="red"), collapse_one_hot)])
