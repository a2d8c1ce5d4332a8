"""Sums of register accumulators, rendered as one vector reduction (for the LLVM renderer).

An unrolled reduction (UNROLL(axis, 16)) keeps 16 accumulators, the lanes, and adds them once after its loop: a chain of 15
scalar adds per output. LLVM's SLP vectorizer starts from stores and vector builds; a chain of adds that ends in a scalar
store gives it nothing to start from, so where LLVM also unrolled the loop (a short reduction: 8 x 128 @ (1024 x 128).T) every
multiply-add of the lanes stayed scalar (128 `vfmadd231ss` a step, 5 GFLOP/s). Rendered as the lanes put into a vector and
`llvm.vector.reduce.fadd`, the vector is where SLP starts: the lanes' loads and multiply-adds become vector ones, and
(`reassoc` on the reduction only) the 15 adds become a 4-step tree of shuffles and vector adds. Only the order in which the
lanes are added changes.

`lane_sums` finds such sums in a linearized kernel: an ADD tree over at least MIN_LANES loads of register accumulators
(float32 or float64), each inner ADD used by the tree alone, whose lanes read neighbouring elements (contiguous_lanes). It
returns, by the tree's root, the loads in the order they are summed, and the inner ADDs, which are not rendered.
"""
from __future__ import annotations

from collections import Counter

from tinygrad.device.plugin import Ops, PtrDType, UOp, dtypes, split_terms

MIN_LANES, MAX_LANES = 4, 64


def _is_reg(ptr: UOp) -> bool: return isinstance(ptr.dtype, PtrDType) and ptr.dtype.addrspace == "reg"


def _is_acc_load(u: UOp) -> bool:
  # (the pointer is an INDEX, or an AFTER of one: the accumulator read once its loop has ended)
  return u.op is Ops.LOAD and len(u.src) == 1 and _is_reg(u.src[0])


def lane_sums(uops: list[UOp]) -> tuple[dict[UOp, list[UOp]], set[UOp]]:
  # kernels with vectors of their own (byte dot products, codegen/dot.py) are vectorized already: there, SLP started from the
  # sums took the dot products' lanes apart (SmolLM2's Q4_1 products with int8 x, one thread: 70 -> 102 us)
  if any(u.op in (Ops.VECTORIZE, Ops.GEP, Ops.WMMA) for u in uops): return {}, set()
  uses = Counter(s for u in uops for s in u.src)
  # each accumulator's update (the value stored into its register; the last store, inside its loop)
  updates = {_reg(u.src[0]): u.src[1] for u in uops if u.op is Ops.STORE and _is_reg(u.src[0])}
  sums: dict[UOp, list[UOp]] = {}
  inner: set[UOp] = set()
  for u in reversed(uops):  # roots first: an ADD already inside a bigger tree is not a root
    if u.op is not Ops.ADD or u.dtype not in (dtypes.float32, dtypes.float64) or u in inner: continue
    leaves: list[UOp] = []
    nodes: list[UOp] = []
    stack = [u]
    while stack:
      n = stack.pop()
      if n is not u and n.op is Ops.ADD and n.dtype == u.dtype and uses[n] == 1: nodes.append(n); stack.extend(reversed(n.src))
      elif n is u: nodes.append(n); stack.extend(reversed(n.src))
      else: leaves.append(n)
    if MIN_LANES <= len(leaves) <= MAX_LANES and all(_is_acc_load(x) for x in leaves) and contiguous_lanes(updates, leaves):
      sums[u] = leaves
      inner.update(n for n in nodes if n is not u)
  return sums, inner


def _reg(u: UOp) -> UOp:
  """The DEFINE_REG under an accumulator's pointer (INDEX, or AFTER of one)."""
  while u.op is not Ops.DEFINE_REG: u = u.src[0]
  return u


def _global_indices(u: UOp) -> dict[UOp, UOp]:
  """The index of each global buffer that u loads from (u's own computation, not through other accumulators)."""
  out: dict[UOp, UOp] = {}
  for n in u.toposort():
    if n.op is Ops.LOAD and n.src[0].op is Ops.INDEX and n.src[0].src[0].op is Ops.DEFINE_GLOBAL: out.setdefault(n.src[0].src[0], n.src[0].src[1])
  return out


def _neighbours(a: UOp, b: UOp) -> bool:
  """Whether index b is index a + 1, term for term."""
  (ta, ca), (tb, cb) = split_terms(a), split_terms(b)
  return cb - ca == 1 and sorted(ta, key=lambda t: (id(t[0]), t[1])) == sorted(tb, key=lambda t: (id(t[0]), t[1]))


def contiguous_lanes(updates: dict[UOp, UOp], lanes: list[UOp]) -> bool:
  """Whether the first two lanes' accumulators are updated from neighbouring elements of some buffer (a reduction unrolled
  along a contiguous axis: a few vectors times W.T). Lanes that stride through memory (a weight gradient's x.T @ g, unrolled
  along the batch) are left to LLVM, whose loop vectorizer then takes 16 outputs at once (optims.py's 64x64 products, one
  thread: 100 us that way, 219 as reductions)."""
  first, second = (updates.get(_reg(lane.src[0])) for lane in lanes[:2])
  if first is None or second is None: return False
  i0, i1 = _global_indices(first), _global_indices(second)
  return any(buf in i1 and _neighbours(idx, i1[buf]) for buf, idx in i0.items())
