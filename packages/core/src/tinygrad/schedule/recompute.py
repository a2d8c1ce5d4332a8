"""Recompute or store: elementwise values that several kernels (or reduction loops) read.

Elementwise ops fuse into every kernel that reads them, so a value used by two kernels is computed in both. That is right for a
few ops (a residual add read by a norm and by the next add) and wrong for a long chain: an unrolled recurrence (an LSTM's cell
state c_t = f_t * c_{t-1} + i_t * g_t, and its gradient backwards through time) inlines every earlier step into every later
kernel, so each kernel grows with the history, and compiling them grows with its square (an 8-step LSTM training step: minutes).

`shared_and_long` picks the values that get a buffer instead: read by more than one kernel, and more than `limit` ALU ops long
counting everything they inline (up to the buffers they read). Values of a broadcast shape (more elements than any buffer they
read, a pad widening what it reads: a matmul's product before its sum) never do; their sources may.

`chain_links` picks, however short, the links of a running chain read by a kernel at each step: a value read by one kernel and
inlined into the next link, itself read by several (farthest point sampling's running minimum dist_k = min(dist_{k-1}, d_k),
read by each step's argmax). Inlined, each step's kernel holds every earlier step, so each one differs from the last (a new
compile a step, growing) until RECOMPUTE_MAX_OPS; stored, as the epilogue of the reduction that the link reads anyway (d_k's
sum), every step is the same few kernels; in chains of CHAIN_MIN_LINKS links or more (a few steps inlined are a few kernels, and
a 2-layer transformer's residual stream kept its measured kernels), and never where it would add a kernel. Eager farthest point
sampling, 16 steps of (8, 64) points (bench/programs/pointnet.py): 8.4 -> 1.3 s. (tinygrad 0.14 stores every value that kernels
read indexed differently.)
"""
from __future__ import annotations

from tinygrad.helpers import ContextVar, prod
from tinygrad.uop.ops import GroupOp, Ops, UOp

# the longest elementwise value (ALU ops, inlined sources included) that several kernels each compute; 0: never stored
RECOMPUTE_MAX_OPS = ContextVar("RECOMPUTE_MAX_OPS", 48)

# a value read through a broadcast of at least BROADCAST_MIN_COPIES copies into one kernel (a conv's upstream gradient in its
# weight gradient: every (cin, ky, kx), through a batchnorm's and a max pool's backward) is stored past BROADCAST_MAX_OPS ALU
# ops, unless it holds a reduction (a row kernel's, computed once a row); 0: only past RECOMPUTE_MAX_OPS. 24, on 2 cores
# (bench/programs): an MNIST-style CNN's training step 494 -> 118-130 ms, a small UNet's 374 -> 47 ms (tinygrad 0.14: 235
# and 164). At 8 or 16 tinygrad.llm's prefill attention would change too (not measured on the H200); at 24 only its rope
# table's frequencies get a kernel of their own (at load)
BROADCAST_MAX_OPS = ContextVar("BROADCAST_MAX_OPS", 24)
BROADCAST_MIN_COPIES = 16

# an elementwise value that one kernel reads at several positions (through shrinks, pads, flips: a concatenation of slices of
# the value before, as an ODE solver's stages build it) is computed once for each, and index pushing gives each its own copy
# of everything it inlines: a chain of such steps grows exponentially (two RK4 steps on a (B, 2) state by cat of slices: 9 s
# to compile, three: minutes). Such a value gets a buffer where the positions it is read at times its ALU ops (counted up to
# RECOMPUTE_MAX_OPS + 1) pass this; 0: never. (tinygrad 0.14 stores every value its readers index differently.)
VIEW_RECOMPUTE_MAX = ContextVar("VIEW_RECOMPUTE_MAX", 256)

_MANY = UOp(Ops.NOOP)  # stands for "more than one kernel"
_VIEWS = (Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK, Ops.PAD, Ops.FLIP)


def broadcast_copies(nodes: list[UOp], consumers: dict[UOp, list[UOp]], realize: set[UOp]) -> dict[UOp, int]:
  """How many times a kernel reads each element of a node that is not realized, through broadcasts (expands that add
  elements, past views): 1 where there is none."""
  copies: dict[UOp, int] = {}
  for n in reversed(nodes):
    if n in realize: continue
    c = 1
    for user in consumers[n]:
      if user in realize: continue
      if user.op is Ops.EXPAND and _elements(n): c = max(c, _elements(user) // _elements(n) * copies.get(user, 1))
      elif user.op in _VIEWS: c = max(c, copies.get(user, 1))
    copies[n] = c
  return copies


def read_at_many_positions(nodes: list[UOp], consumers: dict[UOp, list[UOp]], realize: set[UOp], limit: int, most: int) -> set[UOp]:
  """The elementwise values that a kernel reads at so many positions that computing each again costs more than `most` ALU ops
  (VIEW_RECOMPUTE_MAX). A node's positions are, roughly, the most of its elementwise users' (which read it where they are
  read) plus those of each view reading it. Decided from the kernel's output down, so a value stored shortens what its
  sources are read at; the ops a value inlines are counted up to the buffers it reads (at most limit + 1)."""
  ops: dict[UOp, frozenset[UOp] | None] = {}
  widest: dict[UOp, int] = {}
  for n in nodes: _inline_step(n, realize, ops, widest, limit)
  stored: set[UOp] = set()
  pos: dict[UOp, int] = {}
  for n in reversed(nodes):
    if n in realize:
      pos[n] = 1
      continue
    same, moved = 0, 0
    for user in dict.fromkeys(consumers[n]):
      p = 1 if user in realize or user in stored else pos.get(user, 1)
      if user.op in _VIEWS or user.op is Ops.EXPAND: moved += p
      else: same = max(same, p)
    pos[n] = max(1, same + moved)
    cost = limit + 1 if (o := ops.get(n)) is None else len(o)
    if n.op in GroupOp.ALU and pos[n] > 1 and pos[n] * cost > most and _storable(n, widest[n]): stored.add(n)
  return stored


def kernels_reading(nodes: list[UOp], consumers: dict[UOp, list[UOp]], realize: set[UOp], loops: bool = True) -> dict[UOp, UOp]:
  """Each node that is not realized -> the realized node whose kernel computes it, or the reduction whose loop does, or _MANY
  when several do (reverse topological order: a node is in the kernels of its users). A reduction counts as a kernel of its
  own: a value read inside two reductions' loops is computed in each, even when both are in one kernel; and a broadcast
  value is computed once per copy (random weights never realized, each computed again for every row of a matmul).
  `loops=False`: kernels only (a reduction is in its kernel's, a broadcast value in the kernel that reads it)."""
  kernel_of: dict[UOp, UOp] = {}
  for n in reversed(nodes):
    if n in realize or (loops and n.op is Ops.REDUCE_AXIS):
      kernel_of[n] = n
      continue
    found: UOp | None = None
    for user in consumers[n]:
      if loops and user.op is Ops.EXPAND and _elements(user) > _elements(n):  # broadcast: each element computed once per copy
        found = _MANY
        break
      k = kernel_of.get(user)
      if k is None or k is found: continue
      if found is not None or k is _MANY:
        found = _MANY
        break
      found = k
    if found is not None: kernel_of[n] = found
  return kernel_of


def chain_links(nodes: list[UOp], consumers: dict[UOp, list[UOp]], realize: set[UOp]) -> set[UOp]:
  """The elementwise values that are links of a chain (module docstring): read in one kernel by one user and, by another, inlined
  into a value that several kernels read; each stored value takes a reduction's place in `realize` (a reduction that gets a
  buffer and is read by nothing else but this value: its kernel computes the value instead), so no kernel is added. CHAIN_LINKS=0:
  none."""
  if CHAIN_LINKS.value <= 0: return set()
  kernel_of = kernels_reading(nodes, consumers, realize, loops=False)  # the one kernel computing each node, or _MANY
  shared_below: dict[UOp, bool] = {}  # a user (past unrealized elementwise ops and views) is an ALU value several kernels read
  after: dict[UOp, int] = {}  # the most links on a path from a node's users on, past unrealized ops (reductions end it)
  links: set[UOp] = set()
  for n in reversed(nodes):
    if n in realize or n.op is Ops.REDUCE_AXIS: continue
    users = [u for u in dict.fromkeys(consumers[n]) if u not in realize and u.op is not Ops.REDUCE_AXIS]
    chained = [u for u in users if (u.op in GroupOp.ALU and kernel_of.get(u) is _MANY) or shared_below.get(u, False)]
    shared_below[n] = bool(chained)
    after[n] = max((after.get(u, 0) + (u in links) for u in users), default=0)
    if n.op not in GroupOp.ALU or kernel_of.get(n) is not _MANY or not chained or \
       not any(u not in chained and kernel_of.get(u) not in (None, _MANY) for u in dict.fromkeys(consumers[n])): continue
    if _absorbs(n, consumers, realize) and _storable(n, _elements(n)): links.add(n)
  if not links: return links
  # only chains of CHAIN_MIN_LINKS links or more: a few steps inlined cost a few kernels that differ, and storing their values
  # changes kernels that were measured fine (a 2-layer transformer's residual stream, a 3-block ResNet's)
  before: dict[UOp, int] = {}  # the same, from a node's sources down
  for n in nodes:
    if n in realize or n.op is Ops.REDUCE_AXIS: continue
    before[n] = max((before.get(s, 0) + (s in links) for s in n.src if s not in realize and s.op is not Ops.REDUCE_AXIS), default=0)
  return {n for n in links if before[n] + 1 + after[n] >= CHAIN_MIN_LINKS.value}


# 0: no value is stored as a chain link; links are stored only in chains of at least CHAIN_MIN_LINKS of them
CHAIN_LINKS = ContextVar("CHAIN_LINKS", 1)
CHAIN_MIN_LINKS = ContextVar("CHAIN_MIN_LINKS", 5)
_ABSORB_MAX_NODES = 256


def _absorbs(link: UOp, consumers: dict[UOp, list[UOp]], realize: set[UOp]) -> bool:
  """A reduction with a buffer of its own lies under `link` (past unrealized elementwise ops and views) and every use of it flows
  into `link`: the link's kernel computes the reduction, so storing the link adds no kernel."""
  stack, seen = list(link.src), set[UOp]()
  while stack and len(seen) < _ABSORB_MAX_NODES:
    u = stack.pop()
    if u in seen: continue
    seen.add(u)
    if u.op is Ops.REDUCE_AXIS and u in realize and _flows_only_into(u, link, consumers, realize): return True
    if u in realize or u.op is Ops.REDUCE_AXIS or u.op is Ops.BUFFER: continue
    stack.extend(u.src)
  return False


def inlines_any(n: UOp, targets: set[UOp], realize: set[UOp]) -> bool:
  """Does n inline one of `targets` (past unrealized nodes, up to _ABSORB_MAX_NODES of them)?"""
  stack, seen = list(n.src), set[UOp]()
  while stack and len(seen) < _ABSORB_MAX_NODES:
    u = stack.pop()
    if u in targets: return True
    if u in seen or u in realize or u.op is Ops.BUFFER: continue
    seen.add(u)
    stack.extend(u.src)
  return False


def _flows_only_into(red: UOp, link: UOp, consumers: dict[UOp, list[UOp]], realize: set[UOp]) -> bool:
  frontier, seen = [red], {red}
  while frontier:
    for user in consumers[frontier.pop()]:
      if user is link: continue
      if user in realize or user.op in (Ops.REDUCE_AXIS, Ops.SINK, Ops.EXPAND) or len(seen) > _ABSORB_MAX_NODES: return False
      if user not in seen:
        seen.add(user)
        frontier.append(user)
  return True


def _elements(n: UOp) -> int:
  return prod(s if isinstance(s, int) else 1 for s in n.shape) if n.shape is not None else 1


def _inline_step(n: UOp, realize: set[UOp], ops: dict[UOp, frozenset[UOp] | None], widest: dict[UOp, int], limit: int) -> bool:
  """ops[n], the ALU nodes n inlines (None: more than `limit`), and widest[n], the most elements of a buffer or realized value it
  reads, from its sources' (visited in topological order); False where n is read as data (a buffer, a realized value, a leaf:
  an index counts as data read)."""
  empty: frozenset[UOp] = frozenset()
  if n in realize or n.op in (Ops.BUFFER, Ops.SINK, Ops.IOTA) or not n.src:
    ops[n], widest[n] = empty, _elements(n) if n.shape is not None else 0
    return False
  widest[n] = max((widest.get(s, 0) for s in n.src), default=0)
  # a pad is a concatenation's piece: it widens what it reads by as much as it adds (random bits made in two halves)
  if n.op is Ops.PAD and _elements(n.src[0]): widest[n] = widest[n] * _elements(n) // _elements(n.src[0])
  srcs = [ops.get(s, empty) for s in n.src]
  inlined = None if any(so is None for so in srcs) else empty.union(*(so for so in srcs if so is not None))
  if inlined is not None and n.op in GroupOp.ALU: inlined = inlined | {n}
  ops[n] = None if inlined is None or len(inlined) > limit else inlined
  return True


def shared_and_long(nodes: list[UOp], consumers: dict[UOp, list[UOp]], realize: set[UOp], limit: int | None = None) -> set[UOp]:
  """The elementwise nodes to realize besides `realize` (module docstring). In topological order, so a long chain gets a buffer
  every `limit` ops (each stored value shortens what comes after it)."""
  limit = RECOMPUTE_MAX_OPS.value if limit is None else limit
  if limit <= 0: return set()
  moved = read_at_many_positions(nodes, consumers, realize, limit, most) if (most := VIEW_RECOMPUTE_MAX.value) > 0 else set()
  realize = realize | moved
  kernel_of = kernels_reading(nodes, consumers, realize)
  copies = broadcast_copies(nodes, consumers, realize) if (bmax := BROADCAST_MAX_OPS.value) > 0 else {}
  ops: dict[UOp, frozenset[UOp] | None] = {}  # the ALU nodes a node inlines (None: more than `limit`)
  reduces: dict[UOp, bool] = {}  # whether it inlines a reduction
  widest: dict[UOp, int] = {}  # the most elements of a buffer or realized value it reads
  chosen: set[UOp] = set()
  empty: frozenset[UOp] = frozenset()
  for n in nodes:
    if not _inline_step(n, realize, ops, widest, limit): continue
    reduces[n] = n.op is Ops.REDUCE_AXIS or any(reduces.get(s, False) for s in n.src)
    inlined = ops[n]
    # (a broadcast reduction's result is a row kernel's, computed once a row: schedule/rows.py; or gets a buffer anyway)
    long = inlined is None or (copies.get(n, 1) >= BROADCAST_MIN_COPIES and not reduces[n] and len(inlined) > bmax)
    if long and n.op in GroupOp.ALU and kernel_of.get(n) is _MANY and _storable(n, widest[n]) and \
        not _flows_into_one_value(n, consumers, realize, widest[n]):
      chosen.add(n)
      ops[n], widest[n], reduces[n] = empty, _elements(n), False
  return chosen | moved


def _storable(n: UOp, widest: int) -> bool:
  return all(isinstance(s, int) for s in n.shape) and _elements(n) <= widest and isinstance(n.device, str)


def _flows_into_one_value(n: UOp, consumers: dict[UOp, list[UOp]], realize: set[UOp], widest: int) -> bool:
  """n's only user, past views that don't broadcast, is another elementwise op that could be stored instead: store that one,
  where the value forks (a gradient's four gate slices padded and summed into one array: one buffer, not four)."""
  u = n
  while len(users := set(consumers[u])) == 1:
    u = next(iter(users))
    if u in realize: return False
    if u.op in GroupOp.ALU: return _storable(u, widest)
    if u.op not in (Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK, Ops.PAD, Ops.FLIP, Ops.CAST): return False
  return False
