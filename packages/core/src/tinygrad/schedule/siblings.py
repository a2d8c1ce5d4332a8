"""Sibling reductions: two reductions of one kernel over loops of the same length, neither reading the other, share one loop.

  out[i] = SUM_k w[i, k] * x[k]  *  rsqrt(SUM_k' x[k']^2 / K + eps)     (a matrix-vector product and its input's RMS norm)
      ->   both sums in the loop over k: x[k] is loaded once, and the norm needs no kernel of its own

Codegen lowers reductions over the same loops into one loop with an accumulator each (codegen/lower.py), and an opt on the
loop (GROUP, UNROLL) splits both alike. The scheduler fuses a scalar reduction broadcast into a kernel that has such a sibling
(kernelize.find_realizes, `sibling_of`) only on GPUs, where the kernel's outputs are threads: the sibling is then computed by
each output's threads, in the loop they run anyway. SIBLING_REDUCE=0 turns that fusion off. It was off by default until the
grouped reductions' combine moved to warp shuffles (codegen/group.py): before, Llama-1B's decode step lost its 32 norm kernels
but got slower on the H200, 935 -> 976 us (q/k/v 77 -> 117 us a step); with shuffles it is 881 -> 875 us, and SmolLM2's
quantized products (which can't take the norm in) are unchanged (bench/README.md, "warp shuffles"). On a GPU, kernels that already hold sibling reductions
(a row kernel's `x.sum() / x.max()`, an FFN's gate and up products) share their loop either way; on a CPU they keep a loop each
(indexing.kernel_ast `siblings`): one loop with two accumulators ran up to 2x slower there.
"""
from __future__ import annotations

from tinygrad.helpers import ContextVar, prod
from tinygrad.uop.ops import GroupOp, Ops, UOp

SIBLING_REDUCE = ContextVar("SIBLING_REDUCE", 1)
SIBLING_MAX = 16384  # the longest scalar reduction fused into a sibling's kernel (elements): a norm over a hidden vector


def _bound(red: UOp) -> tuple[UOp, ...]: return red.src[1:]


def _sizes(red: UOp) -> tuple[int, ...] | None:
  sizes = tuple(r.src[0].arg if r.src[0].op is Ops.CONST else None for r in _bound(red))
  return None if any(s is None for s in sizes) else sizes  # type: ignore[return-value]


def _free_ranges(red: UOp) -> set[UOp]:
  """The loops red's value depends on besides the ones it reduces (its own and those of reductions nested in it)."""
  nodes = red.src[0].toposort()
  bound = set(_bound(red)).union(*(_bound(n) for n in nodes if n.op is Ops.REDUCE))
  return {n for n in nodes if n.op is Ops.RANGE and n not in bound}


def merge_sibling_reduces(ast: UOp) -> UOp:
  """Give a reduction the loops of an earlier sibling: same loop sizes, neither inside the other, and every loop the sibling
  depends on beyond red's own an output loop ("global": the output's threads on a GPU, where red is computed per thread anyway)."""
  while True:
    reds = [n for n in ast.toposort() if n.op is Ops.REDUCE]
    inside = {r: set(r.src[0].toposort()) for r in reds}
    swap: dict[UOp, UOp] = {}
    for i, b in enumerate(reds):
      if (sizes := _sizes(b)) is None: continue
      for a in reds[:i]:
        if _bound(a) == _bound(b) or _sizes(a) != sizes or a in inside[b] or b in inside[a]: continue
        extra_a, extra_b = _free_ranges(a) - _free_ranges(b), _free_ranges(b) - _free_ranges(a)
        if extra_b or any(r.arg[1] != "global" for r in extra_a): continue
        swap = dict(zip(_bound(b), _bound(a)))
        break
      if swap: break
    if not swap: return ast
    ast = ast.substitute(swap)


def sibling_of(red: UOp, expand: UOp, consumers: dict[UOp, list[UOp]], realize: set[UOp]) -> UOp | None:
  """The reduction whose kernel `red` (a scalar: every kept axis 1) may join through `expand` (red's value broadcast to the
  sibling's output shape): one that the broadcast value meets in an elementwise op, not realized, reducing as many elements
  (axis by axis) as red and not reading red. None where there is none."""
  if not SIBLING_REDUCE.value or prod(red.shape) != 1: return None
  n = tuple(red.src[0].shape[a] for a in red.arg[1])
  if not all(isinstance(s, int) for s in n) or prod(n) > SIBLING_MAX: return None
  frontier, seen = [expand], {expand}
  while frontier:
    node = frontier.pop()
    for user in consumers.get(node, []):
      if user in seen or not (user.op in GroupOp.Elementwise and user.shape == expand.shape): continue
      seen.add(user)  # a realized user ends the kernel: its sources are the kernel's, what reads it is not
      for other in user.src:
        while other.op in (Ops.RESHAPE, Ops.PERMUTE) and other not in realize: other = other.src[0]  # a matmul's (.., N, 1) -> (.., N)
        if other.op is Ops.REDUCE_AXIS and other not in realize and other is not red and red not in other.toposort():
          # the same loop sizes, so that merge_sibling_reduces can give red the sibling's loops
          if tuple(other.src[0].shape[a] for a in other.arg[1]) == n: return other
      if user not in realize: frontier.append(user)
  return None
