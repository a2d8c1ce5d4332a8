"""Simplify what a condition guards with what the condition guarantees.

A pad, a strided window or a transposed convolution gives loads like `valid ? buf[idx] : 0`, where `valid` bounds a piece of
the index (`0 <= r%10 - 1`, `r + k < 8`) and `idx` carries the reshapes' divisions of that same piece. Without the gate the
piece can be negative or cross a multiple of the divisor, so `(... + 8*(a+b-1)) // 1024` stays a division (a dozen
instructions in every iteration of a convolution's inner loop). Where the gate holds, the piece lies in a narrower range; what
the gate guards only matters there, so it may be simplified as if the piece were a variable of that range:

  1. each clause of the gate `X < c` or `X >= c` (an AND of them) narrows X's range;
  2. every sum that contains X's terms (k*X for one k) is rewritten with a variable v of X's narrowed range;
  3. the symbolic rules fold; then v goes back to X.

What a condition guards: a gated load's index and the gate's other clauses (the load runs only where its gate holds), a gated
store's likewise, and the chosen value of `where(c, a, b)` (a matters only where c holds). Renderers evaluate both sides of a
where, so inside `a` the loads (their addresses and gates) and anything under them are left as they are: a load's address
must stay valid where c is false. The result is kept only where it has fewer divisions and remainders than before.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from tinygrad.dtype import dtypes
from tinygrad.helpers import ContextVar
from tinygrad.uop.ops import Ops, UOp
from tinygrad.uop.rewrite import PatternMatcher, UPat, graph_rewrite
from tinygrad.uop.symbolic import build_sum, split_terms, symbolic

GATE_SIMPLIFY = ContextVar("GATE_SIMPLIFY", 1)  # 0: off (indices keep the divisions their gates make redundant)

# nodes a where's chosen value is not rewritten through: memory accesses and the loops behind accumulators
_OPAQUE = frozenset({Ops.LOAD, Ops.INDEX, Ops.STORE, Ops.AFTER, Ops.END, Ops.DEFINE_REG, Ops.DEFINE_LOCAL, Ops.RANGE})


def clauses(gate: UOp) -> list[UOp]:
  """The conjuncts of a boolean AND tree, left to right."""
  if gate.op is Ops.AND and gate.dtype == dtypes.bool: return [c for s in gate.src for c in clauses(s)]
  return [gate]


def gate_bounds(gate: UOp) -> dict[UOp, tuple[int, int]]:
  """The integer expressions the gate bounds and their range where it is true: {X: (lo, hi)}, narrower than X's own."""
  bounds: dict[UOp, tuple[int, int]] = {}
  for clause in clauses(gate):
    negated = clause.op is Ops.CMPNE and clause.src[1].op is Ops.CONST and clause.src[1].arg is True
    cmp = clause.src[0] if negated else clause
    if cmp.op is not Ops.CMPLT or cmp.src[1].op is not Ops.CONST or not dtypes.is_int(cmp.src[0].dtype) or cmp.src[0].dtype.count != 1: continue
    x, c = cmp.src[0], int(cmp.src[1].arg)
    lo, hi = bounds.get(x, (int(x.vmin), int(x.vmax)))
    bounds[x] = (max(lo, c), hi) if negated else (lo, min(hi, c - 1))  # not (X < c): X >= c
  return {x: b for x, b in bounds.items() if b[0] <= b[1] and b != (x.vmin, x.vmax)}


def _divisions(u: UOp) -> int: return sum(n.op in (Ops.IDIV, Ops.MOD) for n in u.toposort(lambda n: n.op not in _OPAQUE))


def _either(u: UOp | None, default: UOp) -> UOp: return default if u is None else u


def _rebuild(u: UOp, change: Callable[[UOp], UOp | None]) -> UOp:
  """u with `change(node)` (a replacement or None) applied bottom-up to every node outside the opaque ones."""
  new: dict[UOp, UOp] = {}
  for n in u.toposort(lambda n: n.op not in _OPAQUE):
    m = n if n.op in _OPAQUE or not n.src else n.replace(src=tuple(new[s] for s in n.src))
    new[n] = m if (r := change(m)) is None else r
  return new[u]


def _sum_with(x: UOp, v: UOp) -> Callable[[UOp], UOp | None]:
  """A rewrite of sums: k*X inside a sum (for one k) becomes k*v; X not a sum: X itself becomes v."""
  if x.op is not Ops.ADD: return lambda s: v if s is x else None
  x_terms, x_const = split_terms(x)
  def rewrite(s: UOp) -> UOp | None:
    if s.op is not Ops.ADD: return None
    terms, const = split_terms(s)
    coeff = dict(terms)
    if len(coeff) != len(terms) or any(a not in coeff for a, _ in x_terms): return None
    k, first = divmod(coeff[x_terms[0][0]], x_terms[0][1])
    if first or k == 0 or any(coeff[a] != k * c for a, c in x_terms): return None
    rest = [(a, c) for a, c in terms if all(a is not xa for xa, _ in x_terms)]
    return build_sum([*rest, (v, k)], const - k * x_const, s)
  return rewrite


# (graph_rewrite visits a load again whenever a node under it changes: the answer for the same (value, gate) is reused)
@lru_cache(maxsize=4096)
def simplify_given(u: UOp, gate: UOp) -> UOp | None:
  """u as simplified where `gate` holds (equal to u wherever gate is true), or None when that removes no division."""
  if (before := _divisions(u)) == 0 or not (bounds := gate_bounds(gate)): return None
  names: dict[UOp, UOp] = {}
  new = u
  for i, (x, (lo, hi)) in enumerate(bounds.items()):
    v = UOp(Ops.DEFINE_VAR, x.dtype, (), (f"gate_bound{i}", lo, hi))
    names[v] = x
    new = _rebuild(new, _sum_with(x, v))
  if new is u: return None
  new = graph_rewrite(new, symbolic)
  new = graph_rewrite(_rebuild(new, names.get), symbolic)
  return new if _divisions(new) < before else None


@lru_cache(maxsize=4096)
def simplify_gate(gate: UOp) -> UOp | None:
  """Each clause of an AND simplified where the others hold (the AND stays the same condition), or None."""
  cs = clauses(gate)
  if len(cs) < 2: return None
  changed = False
  for i, c in enumerate(cs):
    others = cs[:i] + cs[i + 1:]
    rest = others[0]
    for o in others[1:]: rest = rest & o
    if (new := simplify_given(c, rest)) is not None: cs[i], changed = new, True
  if not changed: return None
  out = cs[0]
  for c in cs[1:]: out = out & c
  return out


def _simplified_access(p: UOp, gate: UOp) -> tuple[UOp, UOp] | None:
  """A gated load's or store's (INDEX, gate) with the gate's clauses and the index simplified where the gate holds, or None."""
  if not GATE_SIMPLIFY.value or p.op is not Ops.INDEX or len(p.src) != 2: return None
  new_gate = _either(simplify_gate(gate), gate)
  if (idx := simplify_given(p.src[1], new_gate)) is None and new_gate is gate: return None
  return p.replace(src=(p.src[0], _either(idx, p.src[1]))), new_gate


def _simplify_load(p: UOp, gate: UOp, alt: UOp, load: UOp) -> UOp | None:
  return None if (new := _simplified_access(p, gate)) is None else load.replace(src=(new[0], new[1], alt))


def _simplify_store(p: UOp, v: UOp, gate: UOp, store: UOp) -> UOp | None:
  return None if (new := _simplified_access(p, gate)) is None else store.replace(src=(new[0], v, new[1]))


def _simplify_where(c: UOp, a: UOp, b: UOp, w: UOp) -> UOp | None:
  if not GATE_SIMPLIFY.value: return None
  # the condition as a gated load's gate is simplified, so that where(c, load(gate=c), 0) still folds to the load
  new_c = _either(simplify_gate(c), c)
  new_a = None if a.op in _OPAQUE else simplify_given(a, new_c)
  if new_a is None and new_c is c: return None
  return w.replace(src=(new_c, _either(new_a, a), b))


pm_gated = PatternMatcher([
  (UPat(Ops.LOAD, src=(UPat.var("p"), UPat.var("gate", dtype=dtypes.bool), UPat.var("alt")), name="load"), _simplify_load),
  (UPat(Ops.STORE, src=(UPat.var("p"), UPat.var("v"), UPat.var("gate", dtype=dtypes.bool)), name="store"), _simplify_store),
  (UPat(Ops.WHERE, src=(UPat.var("c", dtype=dtypes.bool), UPat.var("a"), UPat.var("b")), name="w"), _simplify_where),
])
