"""The scheduler: which nodes of a tensor graph get their own buffer, and the ordered kernels and copies
that compute them.

Fusion rules: elementwise ops and views fuse into whatever consumes them. A reduction fuses with its
elementwise inputs and with the elementwise chain after it, as long as that chain neither broadcasts
the reduced value (which would recompute the reduction per element) nor feeds another reduction; except a row kernel
(schedule/rows.py: softmax, norms), whose reductions over the last axis are broadcast back along it in one kernel.
Anything else a reduction feeds, and every CONTIGUOUS, COPY and ASSIGN, gets a buffer. So does a long elementwise value that
several kernels read, and a link of a long running chain (schedule/recompute.py).

A hand-written kernel (`Tensor.custom_kernel`: CALL(*args) whose arg holds the kernel AST) is one kernel on its arguments'
buffers: each argument that is not already a contiguous buffer gets one, and AFTER(arg, CALL), the argument once the kernel
ran, reads that buffer; like an ASSIGN it runs as late as its readers allow.
"""
from __future__ import annotations

import itertools
import weakref
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from tinygrad.helpers import ContextVar, InvalidArgumentError, prod
from tinygrad.schedule.indexing import IndexingContext, kernel_ast
from tinygrad.schedule.pack import rewrite_cpu_reduce
from tinygrad.schedule.recompute import chain_links, inlines_any, shared_and_long
from tinygrad.schedule.rows import broadcast_rows, fits_row, reads_other_reduction, row_limit, row_shape
from tinygrad.schedule.siblings import sibling_of
from tinygrad.schedule.split_k import MatmulShape, matmul_shape, split_k
from tinygrad.uop.ops import GroupOp, Ops, UOp

_buffer_ids = itertools.count()


def new_buffer(device: str, size: int, dtype) -> UOp:
  """A fresh BUFFER node: unique, so two buffers never merge by hash-consing."""
  return UOp(Ops.BUFFER, dtype, (UOp(Ops.DEVICE, arg=device),), (next(_buffer_ids), size))


def buffer_view(buf: UOp, shape: tuple[int, ...]) -> UOp:
  return buf if buf.shape == shape else UOp(Ops.RESHAPE, buf.dtype, (buf,), shape)


@dataclass
class ScheduleItem:
  """One kernel (ast is a SINK) or one copy (ast is a COPY); bufs[0] is the output."""
  ast: UOp
  bufs: list[UOp]
  var_vals: dict[str, int] = field(default_factory=dict)  # values of the symbolic Variables the kernel takes


def is_buffer_view(u: UOp) -> bool:
  """A realized tensor: movement ops over a BUFFER, nothing to compute."""
  return u.base.op is Ops.BUFFER


def is_writable_view(u: UOp) -> bool:
  """A view every element of which is one distinct element of a buffer (no expand, no pad): it can be assigned to."""
  while u.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK, Ops.FLIP): u = u.src[0]
  return u.op is Ops.BUFFER


def is_strided_view(u: UOp) -> bool:
  """A view of a buffer through reshapes, permutes, shrinks, flips and pads (t[::2], t[1:0:-1]): no expand. Tensor.assign writes
  through it where no element is padding."""
  while u.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK, Ops.FLIP, Ops.PAD): u = u.src[0]
  return u.op is Ops.BUFFER


def is_contiguous_buffer(u: UOp) -> bool:
  """A BUFFER, possibly reshaped: its elements are already in row-major order."""
  return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)


def find_realizes(sink: UOp, policy: SplitPolicy | None = None, copy_assigns: bool = False) -> tuple[set[UOp], set[UOp]]:
  """The nodes that get a buffer, and those of them that get one only so that kernels stay short (schedule/recompute.py: not
  shown to the tensors that hold them, see create_schedule). `policy`: what the targets do with reductions (row kernels on
  GPUs need GROUP; nested sums only off GPUs, _nests). `copy_assigns`: an assigned value that reads another assign's target
  gets a buffer of its own (then copied into the target), for assigns that no order can run in place (_kernel_order)."""
  nodes = sink.toposort(gate=lambda u: u.op is not Ops.BUFFER)
  consumers: dict[UOp, list[UOp]] = defaultdict(list)
  for n in nodes:
    for s in n.src: consumers[s].append(n)
  realize: set[UOp] = {r for r in sink.src if not is_buffer_view(r)}
  targets = {n.src[0].base for n in nodes if n.op is Ops.ASSIGN}
  copied: dict[UOp, UOp] = {}  # assign -> its value, stored first because it may read the target at other positions
  for n in nodes:
    if n.op in (Ops.CONTIGUOUS, Ops.ASSIGN): realize.add(n)
    if n.op is Ops.CALL:
      realize.add(n)
      realize.update(a for a in map(_written, n.src) if not is_contiguous_buffer(a))
    if _is_kernel_output(n): realize.discard(n)  # a view of the argument's buffer
    # (a value that is a view of another buffer is read as it is; a view of the target's own buffer at other positions,
    # x.assign(x.flip(0)) or x[1:].assign(x[:-1]), would read elements already overwritten: it is stored first too)
    if n.op is Ops.ASSIGN and not (is_buffer_view(n.src[1]) and n.src[1].base is not n.src[0].base) and \
       (reads_target_elsewhere(n) or (copy_assigns and reads_other_targets(n, targets))):
      if n.src[1] not in realize and not copy_assigns: copied[n] = n.src[1]
      realize.add(n.src[1])
    if n.op is Ops.COPY:
      realize.add(n)
      if not is_contiguous_buffer(n.src[0]): realize.add(n.src[0])
  policy = policy or SplitPolicy()
  fused = _with_reductions(nodes, consumers, realize, policy)
  # long elementwise values that several kernels would each compute get a buffer (schedule/recompute.py); the reductions then
  # decide again, as their users may now end in different kernels
  stored = shared_and_long(nodes, consumers, fused)
  final = _with_reductions(nodes, consumers, realize | stored, policy) if stored else fused
  # the links of a long chain read by a kernel a step get a buffer in place of a reduction's (recompute.py, chain_links); the
  # values stored for their length that inline a link are chosen again, the others stay; kept where the kernels don't grow in
  # number
  if links := chain_links(nodes, consumers, fused):
    kept = {n for n in stored if not inlines_any(n, links, fused)}
    with_links = _with_reductions(nodes, consumers, realize | kept | links | shared_and_long(nodes, consumers, fused | links), policy)
    if len(with_links) <= len(final): final = with_links
  return _in_place(final, copied, consumers), final - fused


def _in_place(realize: set[UOp], copied: dict[UOp, UOp], consumers: dict[UOp, list[UOp]]) -> set[UOp]:
  """`realize` less the assigned values that were stored only in case they read their target at other positions, where the
  assign's kernel, as the buffers now fall, reads it only where it writes: the weight update of an optimizer reads its
  gradient, which reads the weight everywhere, but from the gradient's own buffer, written by an earlier kernel."""
  keep = set(realize)
  for assign, value in copied.items():
    if value.op is not Ops.REDUCE_AXIS and consumers[value] == [assign] and not reads_target_elsewhere(assign, realize - {value}):
      keep.discard(value)
  return keep


def _with_reductions(nodes: list[UOp], consumers: dict[UOp, list[UOp]], realize: set[UOp], policy: SplitPolicy) -> set[UOp]:
  """`realize` and the reductions that must get a buffer besides.
  A reduction stays inline when everything that uses it, up to the next buffer, is elementwise ops and
  non-broadcasting views that all end in one kernel, or a row kernel (schedule/rows.py), or a short sum nested in the sum
  that reduces it (_nests). The reductions that can't be in a row kernel decide first, so a row kernel knows which of them
  it would hold; then later reductions before earlier ones: softmax's sum is settled before the max inside it asks whether
  it may fuse through it."""
  realize = set(realize)
  rows = broadcast_rows(nodes, policy)
  reductions = [n for n in reversed(nodes) if n.op is Ops.REDUCE_AXIS]
  siblings: dict[UOp, UOp] = {}  # a scalar reduction fused into the kernel of a sibling (schedule/siblings.py) -> the sibling
  for n in reductions:
    if n in realize or n in rows: continue
    gpu = policy.on_gpu(n)  # a CPU's sums may nest in a sum that reduces them further; a GPU's scalar may join a sibling
    if _fuses_into_one_kernel(n, consumers, realize, None, not gpu, siblings if gpu else None) is None: realize.add(n)
  for n in reductions:
    if n in realize or n not in rows: continue
    row = row_shape(n, row_limit(n, policy))
    if (row_outputs := _fuses_into_one_kernel(n, consumers, realize, row)) is None: realize.add(n)
    else: realize.update(row_outputs)
  # a sibling that got a buffer after all: its kernel is an elementwise one, where the scalar would be reduced per element
  realize.update(red for red, other in siblings.items() if other in realize and red not in realize)
  return realize


def _is_kernel_output(n: UOp) -> bool: return n.op is Ops.AFTER and n.src[-1].op is Ops.CALL


def _written(arg: UOp) -> UOp:
  """A custom kernel's argument under the AFTERs of earlier kernels that wrote it: what holds its buffer."""
  while _is_kernel_output(arg): arg = arg.src[0]
  return arg


def _kernel_order(sink: UOp, realize: set[UOp]) -> list[UOp] | None:
  """Realized nodes in dependency order, with every ASSIGN as late as possible. Every kernel that reads a buffer's old value
  (the BUFFER itself, not the ASSIGN that overwrites it) runs before that ASSIGN: so an optimizer's update of m runs in place
  before the update of the weight whose gradient it reads, instead of into a copy. None when no order satisfies that (two
  assigns that read each other's old value: a swap); the caller then stores such values first (find_realizes, copy_assigns)."""
  deps: dict[UOp, set[UOp]] = {}
  reads: dict[UOp, set[UOp]] = {}  # realized node -> the buffers its kernel reads directly
  for n in sink.toposort(gate=lambda u: u.op is not Ops.BUFFER):
    if n not in realize: continue
    found, bufs, stack, seen = set(), set(), list(n.src), set()
    while stack:
      s = stack.pop()
      if s in seen: continue
      seen.add(s)
      if s in realize: found.add(s)
      elif s.op is Ops.BUFFER: bufs.add(s)
      else: stack.extend(s.src)
    deps[n], reads[n] = found, bufs
  readers: dict[UOp, list[UOp]] = defaultdict(list)
  for r, bufs in reads.items():
    for b in bufs: readers[b].append(r)
  targets = {n: n.src[0].base for n in deps if n.op is Ops.ASSIGN}
  for a, buf in targets.items():
    # assigns to one buffer (setitems of one tensor) keep their program order
    deps[a].update(r for r in readers[buf] if r is not a and targets.get(r) is not buf)
  order: list[UOp] = []
  done: set[UOp] = set()
  pending = list(deps)
  while pending:
    if not (ready := [n for n in pending if deps[n] <= done]): return None
    pick = next((n for n in ready if n.op not in (Ops.ASSIGN, Ops.CALL)), ready[0])
    order.append(pick)
    done.add(pick)
    pending.remove(pick)
  return order


def reads_target_elsewhere(assign: UOp, stored: set[UOp] | frozenset[UOp] = frozenset()) -> bool:
  """Does the assigned value read the target buffer at other positions than the one it writes? Then computing
  it in place would read elements that are already overwritten, so it gets a buffer of its own first. `stored`: nodes
  other kernels compute (into buffers of their own, before this one): what they read doesn't count."""
  target, buf = assign.src[0], assign.src[0].base
  stack: list[tuple[UOp, bool]] = [(assign.src[1], False)]
  seen: set[tuple[UOp, bool]] = set()
  while stack:
    u, moved = stack.pop()
    if (u, moved) in seen: continue
    seen.add((u, moved))
    if u is target:
      if moved: return True
      continue
    if u is buf: return True
    if u in stored: continue
    stack.extend((x, moved or u.op in GroupOp.Movement or u.op is Ops.REDUCE_AXIS) for x in u.src)
  return False


def reads_other_targets(assign: UOp, targets: set[UOp]) -> bool:
  """Does the value read a buffer that another assign of this schedule overwrites? Then it is computed into a
  buffer of its own before any assign runs, so every assign sees the old values (a parallel assignment)."""
  others = targets - {assign.src[0].base}
  return bool(others) and any(u in others for u in assign.src[1].toposort(gate=lambda u: u.op is not Ops.ASSIGN))


# ASSIGNs that already ran and CONTIGUOUS nodes already realized -> the view of the buffer they wrote: a graph built before
# may still hold the node (a slice of a realized tensor, taken before it was realized), and it must read the result, not run
# the assignment again or recompute the tensor
applied_assigns: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()


def _fuses_into_one_kernel(red: UOp, consumers: dict[UOp, list[UOp]], realize: set[UOp], row: tuple | None,
                           nest: bool = False, siblings: dict[UOp, UOp] | None = None) -> set[UOp] | None:
  """None when `red` must get a buffer; else the nodes that must get one for it to stay inline: the outputs of its row
  kernel where they feed something a row kernel can't hold (a matmul after a softmax). `row`: the shape red's result may
  broadcast back to (row_shape), None where it may not. `nest`: red may nest in a sum that reduces it further (_nests).
  `siblings` (GPUs): red, a scalar, may be broadcast into the kernel of a sibling reduction (schedule/siblings.py), which is
  recorded there."""
  ends: set[UOp] = set()
  outputs: set[UOp] = set()
  frontier, seen = [red], {red}
  read: set[UOp] = set()
  while frontier:
    node = frontier.pop()
    # the row's outputs must not depend on another reduction that varies along the row (a matmul's, as wide as the row)
    if row is not None and node.shape == row and reads_other_reduction(node, red, row, realize, read): return None
    if row is not None and node.shape == row and not all(u in realize or fits_row(u, row, red) for u in consumers[node]):
      outputs.add(node)  # a row kernel's result read by something else: it gets a buffer, and ends this kernel
      ends.add(node)
      continue
    for user in consumers[node]:
      if user.op is Ops.SINK:
        ends.add(node)
        continue
      broadcast = user.op is Ops.EXPAND and prod(user.shape) != prod(node.shape)
      # padded wider (a piece of a cat): inline, every output of the wider kernel would run the reduction's loop under a gate
      # (two 256^3 matmuls concatenated: 13.8 ms in one kernel, against 0.18 for one of them alone)
      if PAD_REALIZES.value and user.op is Ops.PAD and prod(user.shape) > prod(node.shape): return None
      if user.op is Ops.REDUCE_AXIS and nest and _nests(red, user):
        ends.add(user)  # a sum nested in this one goes where this one goes
        continue
      if broadcast and row is None and siblings is not None and (other := sibling_of(red, user, consumers, realize)) is not None:
        siblings[red] = other
      elif user.op is Ops.REDUCE_AXIS or broadcast:
        if row is None or not fits_row(user, row, red, node): return None
      if user in realize:
        if row is not None and user.shape == row and reads_other_reduction(user, red, row, realize, read): return None
        ends.add(user)
      elif user not in seen:
        seen.add(user)
        frontier.append(user)
  return outputs if len(ends) <= 1 else None


PAD_REALIZES = ContextVar("PAD_REALIZES", 1)  # 0: a reduction fuses through a pad into the wider kernel (the A/B switch)
NESTED_SUMS = ContextVar("NESTED_SUMS", 1)  # 0: a sum of sums always gets a buffer between them (the A/B switch)
NEST_MAX_INNER = 256  # the longest inner sum that nests: a quantization block (32 or 256 weights), not a matmul's reduction
_LINEAR = (Ops.MUL, Ops.ADD, Ops.CAST, Ops.RESHAPE, Ops.PERMUTE)


def _nests(red: UOp, outer: UOp) -> bool:
  """On a CPU, a sum of scaled short sums, SUM_b(d_b * SUM_i(...) + ...), with the inner sum at most NEST_MAX_INNER long (llm's
  quantized matrix-vector product: each block's dot product scaled once, summed over the blocks) stays one kernel, the inner
  loop nested in the outer (codegen/lanes.py keeps the inner sum's vector lanes through the outer one). Any other reduction of
  a reduction (a plain sum of sums, a matmul's sum after a relu), and any on a GPU, gets a buffer in between."""
  if NESTED_SUMS.value <= 0 or red.arg[0] is not Ops.ADD or outer.arg[0] is not Ops.ADD: return False
  inner = [red.src[0].shape[a] for a in red.arg[1]]
  if not all(isinstance(n, int) for n in inner) or prod(inner) > NEST_MAX_INNER: return False
  # every op between the two sums is linear in the inner one, and one multiplies it by a scale
  return (path := _between(red, outer.src[0])) is not None and all(n.op in _LINEAR for n in path) and any(n.op is Ops.MUL for n in path)


NEST_MAX_NODES = 1024  # a nesting candidate's outer sum reads at most this many nodes (llm's quantized products: up to 532 in its tests)


def _between(red: UOp, top: UOp) -> list[UOp] | None:
  """The nodes under `top` that read `red` (the paths from top down to it), or None when top's graph is bigger than
  NEST_MAX_NODES: an unrolled recurrence's sums of sums asked this for every pair, walking the whole history each time."""
  users: dict[UOp, list[UOp]] = {top: []}
  stack = [top]
  while stack:
    n = stack.pop()
    if n is red or n.op is Ops.BUFFER: continue
    for x in n.src:
      if x not in users:
        users[x] = []
        stack.append(x)
        if len(users) > NEST_MAX_NODES: return None
      users[x].append(n)
  if red not in users: return []
  path, frontier = set(), [red]
  while frontier:
    for u in users[frontier.pop()]:
      if u not in path:
        path.add(u)
        frontier.append(u)
  return list(path)


SPLIT_MIN_REDUCE, SPLIT_MAX_OUTPUT = 1 << 15, 1 << 10
PAD_SPLIT_MIN_REDUCE = 1 << 24  # sums this long are split even when their length doesn't divide (padded with zeros)
# GPU: a thread per partial result, so the partials (all outputs together) should number about a chip's worth of
# threads times the 4 that a float4 load gives each; every partial sums at least GPU_SPLIT_CHUNK elements. 2**19: on the H200 a
# sum of 2**28 floats 0.94x torch with 2**20 partials, 1.04x with 2**19 (three runs each; a column sum of 2**26 elements
# 1.07x -> 1.18x): a split reduction of more than 2**25 elements in all gets fewer partials (bench/README.md, session 20)
GPU_SPLIT_PARTIALS = ContextVar("GPU_SPLIT_PARTIALS", 1 << 19)
GPU_SPLIT_CHUNK = ContextVar("GPU_SPLIT_CHUNK", 64)


@dataclass(frozen=True)
class SplitPolicy:
  """What the reduce split needs to know about the targets; the caller (engine/realize.py) asks the registry and codegen.
  `gpu(device)`: the device's renderer is GPU-style (`has_local`); `group_rows`: codegen reduces rows with a block of
  threads each (GROUP) when there are fewer than `group_max_outputs` of them."""
  gpu: Callable[[str], bool] = lambda device: False
  group_rows: bool = False
  group_max_outputs: int = 0
  # K slices for a matmul on a GPU device (schedule/split_k.py); 1: as it is
  matmul_split: Callable[[str, MatmulShape], int] = lambda device, shape: 1
  # whether a CPU-style device's matmuls read packed copies (schedule/pack.py): not where tensor cores take them (PYTHON::sm_80
  # emulates a GPU's with a CPU-style renderer)
  packs: Callable[[str], bool] = lambda device: True

  def on_gpu(self, node: UOp) -> bool:
    """Whether `node` lives on a GPU-style device (a multi-device node: its first device)."""
    return self.gpu(node.device if isinstance(node.device, str) else node.device[0])


def split_reduce(r: UOp, policy: SplitPolicy) -> UOp | None:
  """A big reduction into few outputs runs as two kernels: k partial results per output, reading the input
  coalesced/contiguously with every core or thread busy, then a small reduction of the partials."""
  x = r.src[0]
  if not all(isinstance(s, int) for s in x.shape): return None
  if policy.on_gpu(r): return _split_reduce_gpu(r, policy)
  op, axes = r.arg
  n, out = prod(x.shape[a] for a in axes), prod(r.shape)
  if n < SPLIT_MIN_REDUCE or out > SPLIT_MAX_OUTPUT: return None
  # partials: about sqrt(n) on a CPU (a few threads), each one contiguous chunk
  k = 1
  while n % (k * 2) == 0 and (k * 2) ** 2 <= n: k *= 2
  padded = n
  if k < 256:
    # a length with few factors of 2 stays one running total, which for a float sum past 2**24 elements drops every addend
    # below its ulp (2**32 + 3 ones summed to 2**24): a big sum is padded with zeros (ADD's identity) to k whole chunks
    if op is not Ops.ADD or n < PAD_SPLIT_MIN_REDUCE: return None
    k = 1 << ((n.bit_length() - 1) // 2)
    padded = -(-n // k) * k
  keep = [i for i in range(len(x.shape)) if i not in axes]
  kept_shape = tuple(x.shape[i] for i in keep)
  xp = UOp(Ops.RESHAPE, x.dtype, (_permute(x, tuple(keep + list(axes))),), kept_shape + (n,))
  if padded != n: xp = UOp(Ops.PAD, x.dtype, (xp,), ((0, 0),) * len(keep) + ((0, padded - n),))
  xr = UOp(Ops.RESHAPE, x.dtype, (xp,), kept_shape + (k, padded // k))
  partial = UOp(Ops.CONTIGUOUS, x.dtype, (UOp(Ops.REDUCE_AXIS, x.dtype, (xr,), (op, (len(keep) + 1,))),))
  total = UOp(Ops.REDUCE_AXIS, x.dtype, (partial,), (op, (len(keep),)))
  if (again := split_reduce(total, policy)) is not None: total = again  # 2**30 elements and more: the partials split too
  return UOp(Ops.RESHAPE, x.dtype, (total,), r.shape)


def _rewrite_reduce(r: UOp, policy: SplitPolicy) -> UOp | None:
  """A reduction as the target runs it best: a GPU matmul with few output tiles in K slices (split_k.py), a big reduction split
  (split_reduce), or on a CPU over packed or padded copies of its inputs (schedule/pack.py)."""
  device = r.device if isinstance(r.device, str) else r.device[0]
  if _is_one_hot_select(r): return None  # a gather: collapse_one_hot makes it a direct load, whatever its size
  # an empty input (no output, or a sum over nothing): no layout to improve (pack.py's strides would divide by its zero size)
  if any(isinstance(s, int) and s == 0 for s in r.src[0].shape): return None
  if policy.gpu(device) and (mm := matmul_shape(r)) is not None and (slices := policy.matmul_split(device, mm)) > 1: return split_k(r, slices)
  if (split := split_reduce(r, policy)) is not None: return split
  return None if policy.gpu(device) or not policy.packs(device) else rewrite_cpu_reduce(r)


def _is_one_hot_select(r: UOp) -> bool:
  """A sum of `cond ? x : 0` with an equality in cond (a gather: `table[idx]`, `gather`, a one-hot pick): kept whole, so the
  kernel builder can fold it into a direct load (schedule/indexing.py, collapse_one_hot) rather than split its loop."""
  x = r.src[0]
  while x.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND): x = x.src[0]
  return r.arg[0] is Ops.ADD and x.op is Ops.WHERE and any(n.op is Ops.CMPEQ for n in x.src[0].toposort())


def _split_reduce_gpu(r: UOp, policy: SplitPolicy) -> UOp | None:
  """GPU: every thread computes partial results, so enough partials to fill the chip (GPU_SPLIT_PARTIALS over all
  outputs), and neighbouring threads read neighbouring elements:
  - reduced axes last (a full sum, rows): partial j of an output sums elements j, j+k, j+2k, ... of its row;
  - an output axis after the reduced ones (columns): partial j sums the j-th chunk of rows, and the partials are laid
    out (k, outputs...) so that neighbouring threads take neighbouring outputs.
  The partials are reduced again the same way until few are left (each level is one small kernel)."""
  x, (op, axes) = r.src[0], r.arg
  n, out = prod(x.shape[a] for a in axes), prod(r.shape)
  keep = [i for i in range(len(x.shape)) if i not in axes]
  rows = not any(i > max(axes) for i in keep)
  if rows and _grouped_instead(out, n, policy): return None
  k = 1
  while n % (k * 2) == 0 and out * k * 2 <= GPU_SPLIT_PARTIALS.value and n // (k * 2) >= GPU_SPLIT_CHUNK.value: k *= 2
  if k < 16: return None
  kept = tuple(x.shape[i] for i in keep)
  xp = _permute(x, tuple(keep + list(axes)))
  if not rows:  # columns: (k, kept..., n // k), reduce the last axis, then the first
    xr = _permute(UOp(Ops.RESHAPE, x.dtype, (xp,), kept + (k, n // k)), (len(kept), *range(len(kept)), len(kept) + 1))
    partial = UOp(Ops.CONTIGUOUS, x.dtype, (UOp(Ops.REDUCE_AXIS, x.dtype, (xr,), (op, (len(kept) + 1,))),))
    total = UOp(Ops.REDUCE_AXIS, x.dtype, (partial,), (op, (0,)))
  elif (v := _vector_chunk(x, n, k, out)) > 1:  # rows, few partials: (kept..., n // (k*v), k, v), v in one 16-byte load
    xr = UOp(Ops.RESHAPE, x.dtype, (xp,), kept + (n // (k * v), k, v))
    partial = UOp(Ops.CONTIGUOUS, x.dtype, (UOp(Ops.REDUCE_AXIS, x.dtype, (xr,), (op, (len(kept), len(kept) + 2))),))
    total = UOp(Ops.REDUCE_AXIS, x.dtype, (partial,), (op, (len(kept) + 1,)))
  else:  # rows: (kept..., n // k, k), reduce the strided axis, then the partials
    xr = UOp(Ops.RESHAPE, x.dtype, (xp,), kept + (n // k, k))
    partial = UOp(Ops.CONTIGUOUS, x.dtype, (UOp(Ops.REDUCE_AXIS, x.dtype, (xr,), (op, (len(kept),))),))
    total = UOp(Ops.REDUCE_AXIS, x.dtype, (partial,), (op, (len(kept) + 1,)))
  if (again := _split_reduce_gpu(total, policy)) is not None: total = again  # the partials may still be many
  return UOp(Ops.RESHAPE, x.dtype, (total,), r.shape)


GROUP_MIN_ROWS, GROUP_MAX_ROW, GROUP_MAX_SMALL = 128, 1 << 16, 1 << 14


def _grouped_instead(out: int, n: int, policy: SplitPolicy) -> bool:
  """Rows that the codegen's GROUP heuristic reduces in one kernel, a block of threads per row (codegen/heuristics.py): a matrix-vector
  product's few hundred to few thousand rows, or a small reduction (a norm's sum of squares) that one block covers in a few
  steps. A second kernel for the partials would cost more than it gains there."""
  if not policy.group_rows or out >= policy.group_max_outputs or n > GROUP_MAX_ROW: return False
  return out >= GROUP_MIN_ROWS or out * n <= GROUP_MAX_SMALL


GPU_VECTOR_CHUNK_MAX_PARTIALS = 1 << 18  # above this many partials the codegen widens loads across outputs instead


def _vector_chunk(x: UOp, n: int, k: int, out: int) -> int:
  """Elements of a row that one partial reads side by side (a matrix-vector product's rows): as many as one 16-byte
  load holds of the narrowest buffer read; 1 when the partials are many (opt.py's float4 upcast serves those)."""
  if out * k >= GPU_VECTOR_CHUNK_MAX_PARTIALS: return 1
  sizes = [b.dtype.itemsize for b in x.toposort(gate=lambda u: u.op is not Ops.BUFFER) if b.op is Ops.BUFFER]
  v = min(16 // min(sizes), 8) if sizes else 1
  while v > 1 and n % (k * v): v //= 2
  return v


def _permute(x: UOp, order: tuple[int, ...]) -> UOp:
  return x if order == tuple(range(len(order))) else UOp(Ops.PERMUTE, x.dtype, (x,), order)


def create_schedule(roots: list[UOp], policy: SplitPolicy = SplitPolicy()) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  """Kernels and copies, in execution order, that realize `roots`; and what each realized node became
  (a view of its new buffer). `policy`: how big reductions split (the default: as for CPUs)."""
  sink = UOp(Ops.SINK, src=tuple(roots))
  nodes = sink.toposort(gate=lambda u: u.op is not Ops.BUFFER)
  done = {n: applied_assigns[n] for n in nodes if n.op in (Ops.ASSIGN, Ops.CONTIGUOUS) and n in applied_assigns}
  done.update({n: ran for n in nodes if _is_kernel_output(n) and (ran := _ran_output(n)) is not None})
  renamed: dict[UOp, UOp] = {}  # original node -> node after the substitution, for nodes that changed
  if done or any(n.op is Ops.REDUCE_AXIS for n in nodes):
    whole = broadcast_rows(nodes, policy)  # reductions a row kernel may hold: not split
    def rewrite(n: UOp) -> UOp | None: return _rewrite_reduce(n, policy) if n.op is Ops.REDUCE_AXIS and n not in whole else None
    sink, renamed = _substitute_tracking(sink, done, rewrite)
  realize, internal = find_realizes(sink, policy)
  if (order := _kernel_order(sink, realize)) is None:
    realize, internal = find_realizes(sink, policy, copy_assigns=True)
    if (order := _kernel_order(sink, realize)) is None:
      raise RuntimeError("no order of these assigns gives each the values it read (they read each other in a cycle): realize() the values before assigning them")
  # one pass in dependency order: each node with its realized sources replaced by views of their buffers (each
  # realized node's kernel computes the rebuilt node). Linear in the graph: no per-kernel substitution.
  replaced: dict[UOp, UOp] = {}
  rebuilt_of: dict[UOp, UOp] = {}
  outs: dict[UOp, UOp] = {}
  kernel_outputs: list[UOp] = []
  for n in sink.toposort(gate=lambda u: u.op is not Ops.BUFFER):
    src = tuple(replaced.get(x, x) for x in n.src)
    rebuilt = n if src == n.src else n.replace(src=src)
    if _is_kernel_output(n):  # the argument's buffer, written by the kernel
      replaced[n] = rebuilt.src[0]
      kernel_outputs.append(n)
      continue
    if n not in realize:
      replaced[n] = rebuilt
      continue
    rebuilt_of[n] = rebuilt
    if n.op is Ops.CALL: replaced[n] = rebuilt  # its arguments as buffer views (mark_applied keeps them)
    elif n.op is Ops.ASSIGN:
      if not is_writable_view(rebuilt.src[0]):
        raise ValueError(f"assign target must be a realized tensor or a reshape/permute/shrink/flip of one, got a {rebuilt.src[0].op}")
      outs[n] = rebuilt.src[0].base
      replaced[n] = rebuilt.src[0]  # after the assign, the target (view) holds the value
    else:
      outs[n] = new_buffer(str(n.device), max_size(n.shape), n.dtype)
      replaced[n] = buffer_view(outs[n], n.shape)
  becomes: dict[UOp, UOp] = {}
  items: list[ScheduleItem] = []
  for node in order:
    if node.op is Ops.CALL:
      items.append(ScheduleItem(node.arg.ast, [_argument_buffer(a, i, node) for i, a in enumerate(rebuilt_of[node].src)],
                                {b.src[0].arg[0]: b.src[1].arg for b in node.arg.binds}))
      continue
    out, rebuilt = outs[node], rebuilt_of[node]
    value = rebuilt.src[1] if node.op is Ops.ASSIGN else rebuilt.src[0] if node.op in (Ops.CONTIGUOUS, Ops.COPY) else rebuilt
    if isinstance(out.arg[1], int) and out.arg[1] == 0: pass  # nothing to compute for an empty tensor
    # nor for an assign into an empty view of a buffer (t[1:1]): its kernel would drop the zero-sized dim and store the rest
    elif node.op is Ops.ASSIGN and any(isinstance(d, int) and d == 0 for d in node.shape): pass
    elif node.op is Ops.COPY:
      items.append(ScheduleItem(UOp(Ops.COPY, node.dtype, (), out.size), [out, value.base]))
    else:
      ast, bufs = cached_kernel_ast(value, out, rebuilt.src[0] if node.op is Ops.ASSIGN else None, siblings=policy.on_gpu(out))
      ast, var_vals = strip_binds(ast)
      items.append(ScheduleItem(ast, bufs, var_vals))
    # a value stored only to keep kernels short stays a graph for the tensors that hold it: a lazily initialized weight
    # pointed at its buffer would leave the graphs built on the old node without it (their gradients lost it)
    if node not in internal: becomes[node] = replaced[node]
  becomes.update({n: replaced[n] for n in kernel_outputs})
  becomes.update({n: replaced[n] for n in rebuilt_of if n.op is Ops.CALL})
  becomes.update(done)
  # the caller's tensors hold nodes as they were before the applied assigns were substituted
  for orig, new in renamed.items():
    if new in becomes: becomes[orig] = becomes[new]
  return items, becomes


# kernel ASTs by the shape of their graph with buffers renamed to placeholders: the layers of a model (and every call of a
# function) build the same kernels over different buffers, and pushing the indexing through each graph is most of scheduling
_ast_cache: dict[tuple[UOp, UOp, UOp | None, bool], tuple[UOp, tuple[UOp, ...]]] = {}
AST_CACHE_SIZE = 4096


def cached_kernel_ast(value: UOp, out: UOp, out_view: UOp | None, siblings: bool = False) -> tuple[UOp, list[UOp]]:
  """kernel_ast(value, out, ...) and its buffers in parameter order, reusing the AST of an earlier kernel that differs only in
  which buffers it reads and writes. `siblings`: sibling reductions share a loop (a GPU-style device's kernel)."""
  roots = (value, out) if out_view is None else (value, out, out_view)
  bufs = [n for n in UOp(Ops.SINK, src=roots).toposort(gate=lambda u: u.op is not Ops.BUFFER) if n.op is Ops.BUFFER]
  # placeholders keep everything the AST sees of a buffer (dtype, size, device); only the identity goes
  holders = {b: UOp(Ops.BUFFER, b.dtype, b.src, (-1 - i, b.arg[1])) for i, b in enumerate(bufs)}
  key = (value.substitute(holders), holders[out], None if out_view is None else out_view.substitute(holders), siblings)
  if (hit := _ast_cache.get(key)) is None:
    ctx = IndexingContext()
    ast = kernel_ast(key[0], key[1], ctx, key[2], siblings)
    if len(_ast_cache) >= AST_CACHE_SIZE: del _ast_cache[next(iter(_ast_cache))]
    hit = _ast_cache[key] = (ast, tuple(ctx.buffers))
  real = {h: b for b, h in holders.items()}
  return hit[0], [real[h] for h in hit[1]]


def mark_applied(becomes: dict[UOp, UOp]) -> None:
  """Call after running a schedule: its ASSIGNs (and custom kernels) have happened."""
  for node, view in becomes.items():
    if node.op in (Ops.ASSIGN, Ops.CONTIGUOUS, Ops.CALL): applied_assigns[node] = view


def _ran_output(after: UOp) -> UOp | None:
  """What AFTER(arg, CALL) reads when that kernel already ran (realizing any of its outputs ran it): the argument's buffer."""
  call = after.src[-1]
  if (ran := applied_assigns.get(call)) is None: return None
  return ran.src[call.src.index(after.src[0])]


def _argument_buffer(arg: UOp, i: int, call: UOp) -> UOp:
  """The BUFFER behind a custom kernel's argument (already a contiguous view of one: find_realizes saw to it)."""
  if not is_contiguous_buffer(arg) or arg.base.arg[1] < prod(arg.shape):
    raise ValueError(f"custom kernel {call.arg.ast.arg.name or ''}: argument {i} is a {arg.op.name} of its buffer, not the whole buffer; "
                     "pass a tensor that is one buffer (e.g. .contiguous())")
  return arg.base


def _substitute_tracking(sink: UOp, mapping: dict[UOp, UOp], rewrite: Callable[[UOp], UOp | None] | None = None) -> tuple[UOp, dict[UOp, UOp]]:
  """sink.substitute(mapping), also returning old -> new for every node that changed. `rewrite` may replace each other
  node after its sources were substituted (so a reduction inside another one's input is split once, in both)."""
  new: dict[UOp, UOp] = {}
  for node in sink.toposort(gate=lambda u: u.op is not Ops.BUFFER):
    if node in mapping: new[node] = mapping[node]
    else:
      src = tuple(new.get(s, s) for s in node.src)
      rebuilt = node if src == node.src else node.replace(src=src)
      new[node] = rebuilt if rewrite is None or (again := rewrite(rebuilt)) is None else again
  return new[sink], {k: v for k, v in new.items() if k is not v}


def max_size(shape: tuple) -> int:
  """Elements a buffer needs for a shape; a symbolic shape gets room for its largest value."""
  size = prod(shape)
  return size if isinstance(size, int) else int(size.vmax)


def strip_binds(ast: UOp) -> tuple[UOp, dict[str, int]]:
  """BIND(var, value) -> var, so the kernel takes the value as a parameter (one kernel serves every value)."""
  binds = [n for n in ast.toposort() if n.op is Ops.BIND]
  if not binds: return ast, {}
  var_vals: dict[str, int] = {}
  for b in binds:
    name, value = b.src[0].arg[0], b.src[1].arg
    if var_vals.get(name, value) != value: raise InvalidArgumentError(f"bind mismatch on Variable {name!r}: it is bound to both {var_vals[name]} and {value} in one kernel")
    var_vals[name] = value
  return ast.substitute({b: b.src[0] for b in binds}), var_vals
