"""Symbolic simplification of integer index math, driven by value ranges (vmin/vmax).

Index expressions come from views: a reshape turns indices into `(i*6 + j) // 6` and `% 6`, a pad
into `0 <= i-1 < n` gates. These rules fold them back: constant folding, collecting like terms,
div/mod by a constant when the value range allows it, and comparisons decided by ranges.
"""
from __future__ import annotations

import math
from typing import Any

from tinygrad.dtype import ConstType, dtypes
from tinygrad.uop.alu import exec_alu
from tinygrad.uop.ops import GroupOp, Ops, UOp
from tinygrad.uop.rewrite import PatternMatcher, UPat

# ---- value ranges

def value_range(u: UOp) -> tuple[ConstType, ConstType]:
  """Bounds (vmin, vmax) of a scalar node; the dtype's full range when unknown."""
  op, dt = u.op, u.dtype
  if op is Ops.CONST: return u.arg, u.arg
  if op is Ops.RANGE: return 0, max(0, u.src[0].vmax - 1)
  if op is Ops.SPECIAL: return 0, u.arg[1] - 1
  if op is Ops.DEFINE_VAR: return u.arg[1], u.arg[2]
  if op is Ops.BIND: return u.src[0].vmin_vmax
  if dtypes.is_int(dt) or dt == dtypes.bool:
    s = [x.vmin_vmax for x in u.src]
    if op is Ops.ADD: return _clamp(dt, s[0][0] + s[1][0], s[0][1] + s[1][1])
    if op is Ops.NEG and dt != dtypes.bool: return _clamp(dt, -s[0][1], -s[0][0])
    if op is Ops.MUL:
      prods = [a * b for a in s[0] for b in s[1]]
      return _clamp(dt, min(prods), max(prods))
    if op is Ops.IDIV and u.src[1].op is Ops.CONST and u.src[1].arg > 0:
      c = u.src[1].arg
      return exec_alu(Ops.IDIV, dt, (s[0][0], c)), exec_alu(Ops.IDIV, dt, (s[0][1], c))
    if op is Ops.MOD and u.src[1].op is Ops.CONST and u.src[1].arg > 0:
      c = u.src[1].arg
      if s[0][0] >= 0: return (s[0][0], s[0][1]) if s[0][1] < c else (0, c - 1)
      return -(c - 1), c - 1
    if op is Ops.MAX: return max(s[0][0], s[1][0]), max(s[0][1], s[1][1])
    if op is Ops.WHERE:
      if s[0] == (True, True): return s[1]
      if s[0] == (False, False): return s[2]
      return min(s[1][0], s[2][0]), max(s[1][1], s[2][1])
    if op is Ops.CAST and (dtypes.is_int(u.src[0].dtype) or u.src[0].dtype == dtypes.bool):
      lo, hi = s[0]
      if dtypes.min(dt) <= lo and hi <= dtypes.max(dt): return int(lo), int(hi)
    if op is Ops.CMPLT:
      if s[0][1] < s[1][0]: return True, True
      if s[0][0] >= s[1][1]: return False, False
      return False, True
    if op in (Ops.CMPNE, Ops.CMPEQ):
      disjoint = s[0][1] < s[1][0] or s[1][1] < s[0][0]
      same_const = s[0][0] == s[0][1] == s[1][0] == s[1][1]
      if disjoint or same_const:
        ne = disjoint
        return (ne, ne) if op is Ops.CMPNE else (not ne, not ne)
      return False, True
    if op is Ops.AND and dt == dtypes.bool:
      return s[0][0] and s[1][0], s[0][1] and s[1][1]
    if op is Ops.OR and dt == dtypes.bool:
      return s[0][0] or s[1][0], s[0][1] or s[1][1]
    if op is Ops.AND and s[0][0] >= 0 and s[1][0] >= 0: return 0, min(s[0][1], s[1][1])
    if op is Ops.AND and u.src[1].op is Ops.CONST and u.src[1].arg >= 0: return 0, u.src[1].arg  # a mask: sign bit cleared
  return dtypes.min(dt), dtypes.max(dt)


def _clamp(dt: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
  """Ranges that might overflow the dtype are unknown (it would wrap)."""
  if lo < dtypes.min(dt) or hi > dtypes.max(dt): return dtypes.min(dt), dtypes.max(dt)
  return lo, hi


# ---- helpers over sums of terms

def split_terms(u: UOp) -> tuple[list[tuple[UOp, int]], int]:
  """An integer expression as ([(atom, coefficient), ...], constant)."""
  terms: list[tuple[UOp, int]] = []
  const = 0
  stack: list[tuple[UOp, int]] = [(u, 1)]
  while stack:
    node, coeff = stack.pop()
    if node.op is Ops.ADD: stack.extend((s, coeff) for s in reversed(node.src))
    elif node.op is Ops.CONST: const += node.arg * coeff
    elif node.op is Ops.MUL and node.src[1].op is Ops.CONST: stack.append((node.src[0], coeff * node.src[1].arg))
    elif node.op is Ops.NEG: stack.append((node.src[0], -coeff))
    else: terms.append((node, coeff))
  return terms, const


def build_sum(terms: list[tuple[UOp, int]], const: int, like: UOp) -> UOp:
  out: UOp | None = None
  for atom, coeff in terms:
    if coeff == 0: continue
    t = atom if coeff == 1 else UOp(Ops.MUL, like.dtype, (atom, like.const_like(coeff)))
    out = t if out is None else UOp(Ops.ADD, like.dtype, (out, t))
  if out is None: return like.const_like(const)
  return out if const == 0 else UOp(Ops.ADD, like.dtype, (out, like.const_like(const)))


def merge_terms(terms: list[tuple[UOp, int]]) -> list[tuple[UOp, int]]:
  merged: dict[UOp, int] = {}
  for atom, coeff in terms: merged[atom] = merged.get(atom, 0) + coeff
  return [(a, c) for a, c in merged.items() if c != 0]


# ---- rules

def fold_const(x: UOp) -> UOp | None:
  if x.op in GroupOp.ALU and all(s.op is Ops.CONST for s in x.src):
    return UOp.const(x.dtype, exec_alu(x.op, x.dtype, tuple(s.arg for s in x.src)))
  return None


def fold_by_range(x: UOp) -> UOp | None:
  """An integer/bool expression whose range is a single value is that constant."""
  if x.op is Ops.CONST or not (dtypes.is_int(x.dtype) or x.dtype == dtypes.bool) or x.dtype.count != 1: return None
  if x.op in (Ops.DEFINE_VAR, Ops.BIND, Ops.SPECIAL, Ops.RANGE, Ops.LOAD, Ops.INDEX, Ops.DEFINE_REG): return None
  lo, hi = x.vmin_vmax
  return UOp.const(x.dtype, lo) if lo == hi else None


def canonical_sum(x: UOp) -> UOp | None:
  """Collect like terms of an integer sum; one constant, last. Returns None when already canonical."""
  if not dtypes.is_int(x.dtype): return None
  terms, const = split_terms(x)
  new = build_sum(_recombine_div_mod(merge_terms(terms)), const, x)
  return None if new is x else new


def _recombine_div_mod(terms: list[tuple[UOp, int]]) -> list[tuple[UOp, int]]:
  """Undo the splits that reshapes make, k times:
  (y // d)*d + y % d -> y, and ((y // a) % b)*a + y % a -> y % (a*b)."""
  coeff = dict(terms)
  changed = True
  while changed:
    changed = False
    for atom, k in list(coeff.items()):
      if atom.op is not Ops.MOD or atom.src[1].op is not Ops.CONST or atom not in coeff: continue
      y, d = atom.src[0], atom.src[1].arg
      div = UOp(Ops.IDIV, atom.dtype, atom.src)
      if coeff.get(div) == k * d:
        del coeff[atom], coeff[div]
        coeff[y] = coeff.get(y, 0) + k
        changed = True
        continue
      for other, k2 in list(coeff.items()):
        if (other.op is Ops.MOD and other.src[0] is div and other.src[1].op is Ops.CONST and k2 == k * d):
          del coeff[atom], coeff[other]
          merged = y % (d * other.src[1].arg)
          coeff[merged] = coeff.get(merged, 0) + k
          changed = True
          break
  return [(a, c) for a, c in coeff.items() if c != 0]


def fold_div_mod(x: UOp, c: UOp, is_div: bool) -> UOp | None:
  """x // c and x % c for a constant c > 0 and x >= 0, using the terms of x."""
  if not dtypes.is_int(x.dtype) or c.arg <= 0 or x.vmin < 0: return None
  d = c.arg
  if d == 1: return x if is_div else x.const_like(0)
  if x.vmax < d: return x.const_like(0) if is_div else x
  terms, const = split_terms(x)
  # a common factor of everything: (a*6 + b*4) // 4 -> (a*3 + b*2) // 2
  g = math.gcd(d, const, *(coeff for _, coeff in terms))
  if g > 1:
    inner = build_sum([(a, k // g) for a, k in terms], const // g, x)
    return inner // (d // g) if is_div else (inner % (d // g)) * g
  if not is_div and (any(k % d != k for _, k in terms) or const % d != const) and all(a.vmin >= 0 for a, _ in terms):
    # (a*19 + 37) % 18 -> (a + 1) % 18: only each coefficient's remainder matters (the sum stays >= 0, so C's % agrees);
    # a conv's window index (kx*19 % 18, from the pad/reshape that builds the windows) becomes plain kx
    return build_sum([(a, k % d) for a, k in terms if k % d], const % d, x) % d
  exact = [(a, k // d) for a, k in terms if k % d == 0]
  rest = build_sum([(a, k) for a, k in terms if k % d != 0], const, x)
  lo, hi = rest.vmin, rest.vmax
  if lo // d == hi // d:  # the remainder part never crosses a multiple of d
    return build_sum(exact, lo // d, x) if is_div else build_sum(*split_terms(rest - (lo // d) * d), x)
  if exact and lo >= 0:
    return build_sum(exact, 0, x) + rest // d if is_div else rest % d
  if (split := _split_below(terms, const, d, x)) is not None:
    high, low, f = split  # x = high*f + low with 0 <= low < f and f | d
    return high // (d // f) if is_div else (high % (d // f)) * f + low
  return _fold_nested_div(x, d, is_div)


def _split_below(terms: list[tuple[UOp, int]], const: int, d: int, x: UOp) -> tuple[UOp, UOp, int] | None:
  """x = high*f + low with f a proper divisor of d and 0 <= low < f, the largest such f: then x // d = high // (d/f) and
  x % d = (high % (d/f))*f + low. A reshape's index gives these: ((r*64 + k) // 1024 with k < 64 is r // 16), which the
  recombination in canonical_sum then folds back into r*64 + k."""
  for f in sorted({math.gcd(k, d) for _, k in terms} - {1, d}, reverse=True):
    high = [(a, k // f) for a, k in terms if k % f == 0]
    low = build_sum([(a, k) for a, k in terms if k % f], const % f, x)
    if high and low.vmin >= 0 and low.vmax < f: return build_sum(high, const // f, x), low, f
  return None


def _fold_nested_div(x: UOp, d: int, is_div: bool) -> UOp | None:
  # (y // a) // b -> y // (a*b) when y >= 0
  if is_div and x.op is Ops.IDIV and x.src[1].op is Ops.CONST and x.src[1].arg > 0 and x.src[0].vmin >= 0:
    return x.src[0] // (x.src[1].arg * d)
  # (y % (a*d)) % d -> y % d
  if not is_div and x.op is Ops.MOD and x.src[1].op is Ops.CONST and x.src[1].arg % d == 0 and x.src[0].vmin >= 0:
    return x.src[0] % d
  # (y % (a*d)) // d -> (y // d) % a
  if is_div and x.op is Ops.MOD and x.src[1].op is Ops.CONST and x.src[1].arg % d == 0 and x.src[0].vmin >= 0:
    return (x.src[0] // d) % (x.src[1].arg // d)
  return None


def fold_compare_const(x: UOp, c: UOp) -> UOp | None:
  """a*k + b < c with every coefficient divisible by k: divide through (index gates from pads)."""
  if not dtypes.is_int(x.dtype): return None
  terms, const = split_terms(x)
  if not terms: return None
  g = math.gcd(*(k for _, k in terms))
  if g <= 1: return None
  # dividing through is only sound when x itself doesn't wrap: (q+q) < 0 is true for a large int32 q
  lo = const + sum(min(k * a.vmin, k * a.vmax) for a, k in terms)
  hi = const + sum(max(k * a.vmin, k * a.vmax) for a, k in terms)
  if lo < dtypes.min(x.dtype) or hi > dtypes.max(x.dtype): return None
  # a*g + const < c  <=>  a < ceil((c - const) / g)
  bound = -((const - c.arg) // g)
  return build_sum([(a, k // g) for a, k in terms], 0, x) < bound


def _is_int(u: UOp) -> bool: return dtypes.is_int(u.dtype)


symbolic_simple = PatternMatcher([
  (UPat(GroupOp.ALU, name="x"), fold_const),
  # identities
  (UPat.var("x") + UPat.const(None, 0), lambda x: x),
  (UPat.var("x") * UPat.const(None, 1), lambda x: x),
  (UPat.var("x") * UPat.const(None, 0), lambda x: x.const_like(0) if dtypes.is_int(x.dtype) else None),
  (UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(UPat.var("x"),)),)), lambda x: x),
  (UPat(Ops.NEG, src=(UPat.var("x"),), custom=_is_int), lambda x: x * -1),
  (UPat(Ops.CAST, src=(UPat.var("x"),), name="c"), lambda x, c: x if x.dtype == c.dtype else None),
  # booleans
  (UPat.var("x", dtype=dtypes.bool) & UPat.const(dtypes.bool, True), lambda x: x),
  (UPat.var("x", dtype=dtypes.bool) & UPat.const(dtypes.bool, False), lambda x: x.const_like(False)),
  (UPat.var("x", dtype=dtypes.bool) | UPat.const(dtypes.bool, True), lambda x: x.const_like(True)),
  (UPat.var("x", dtype=dtypes.bool) | UPat.const(dtypes.bool, False), lambda x: x),
  (UPat(Ops.AND, src=[UPat.var("x"), UPat.var("x")]), lambda x: x),
  (UPat(Ops.CMPNE, src=(UPat(Ops.CMPNE, src=(UPat.var("x", dtype=dtypes.bool), UPat.const(dtypes.bool, True))),
                        UPat.const(dtypes.bool, True))), lambda x: x),
  (UPat(Ops.WHERE, src=(UPat.const(dtypes.bool, True), UPat.var("a"), UPat.var("b"))), lambda a, b: a),
  (UPat(Ops.WHERE, src=(UPat.const(dtypes.bool, False), UPat.var("a"), UPat.var("b"))), lambda a, b: b),
  (UPat(Ops.WHERE, src=(UPat.var("c"), UPat.var("a"), UPat.var("a"))), lambda c, a: a),
])

symbolic = symbolic_simple + PatternMatcher([
  (UPat(GroupOp.ALU | {Ops.CAST}, name="x"), fold_by_range),
  (UPat(Ops.ADD, name="x"), canonical_sum),
  (UPat(Ops.MUL, src=(UPat(Ops.ADD, name="s"), UPat.cvar("c")), custom=_is_int),
   lambda s, c: build_sum([(a, k * c.arg) for a, k in split_terms(s)[0]], split_terms(s)[1] * c.arg, s)),
  (UPat(Ops.MUL, src=(UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("c1"))), UPat.cvar("c2")), custom=_is_int),
   lambda x, c1, c2: x * (c1.arg * c2.arg)),
  (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: fold_div_mod(x, c, True)),
  (UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: fold_div_mod(x, c, False)),
  (UPat(Ops.CMPLT, src=(UPat.var("x"), UPat.cvar("c"))), fold_compare_const),
  # canonical order: constants on the right of commutative ops
  (UPat(GroupOp.Commutative, src=(UPat(Ops.CONST, name="c"), UPat.var("x")), name="op"),
   lambda op, c, x: op.replace(src=(x, c)) if x.op is not Ops.CONST else None),
])


def sym_infer(u: UOp | int, var_vals: dict[str, int]) -> Any:
  """Evaluate a symbolic integer expression with variable values (an int is itself, as a shape's fixed dims are)."""
  if not isinstance(u, UOp): return u
  vals: dict[UOp, Any] = {}
  for n in u.toposort():
    if n.op is Ops.CONST: vals[n] = n.arg
    elif n.op is Ops.DEFINE_VAR: vals[n] = var_vals[n.arg[0]]
    elif n.op is Ops.BIND: vals[n] = vals[n.src[1]]
    else: vals[n] = exec_alu(n.op, n.dtype, tuple(vals[s] for s in n.src))
  return vals[u]


# ---- symbolic sizes: the dims of a shape are ints or int expressions of (bound) Variables

def sint_simplify(x: Any) -> Any:
  """A size simplified; a plain int when it is constant ((v+1) - v is 1)."""
  if not isinstance(x, UOp): return x
  s = x.simplify()
  return s.arg if s.op is Ops.CONST else s


def sint_prod(xs: Any) -> Any:
  """The product of sizes, simplified (an int when they all are)."""
  out: Any = 1
  for x in xs: out = x * out if isinstance(x, UOp) else out * x
  return sint_simplify(out)


def sint_eq(a: Any, b: Any) -> bool:
  """a == b for every value of their Variables (ints compare as ints; a size equal only at the bound value is not equal)."""
  if not isinstance(a, UOp) and not isinstance(b, UOp): return bool(a == b)
  if a is b: return True
  d = sint_simplify(a - b if isinstance(a, UOp) else (-b) + a)
  return not isinstance(d, UOp) and d == 0


def _bound_value(x: UOp) -> int | None:
  """The value of x from its bound Variables; None when one of them is not bound."""
  nodes = x.toposort()
  bound = {n.src[0]: n.src[1].arg for n in nodes if n.op is Ops.BIND}
  if any(n.op is Ops.DEFINE_VAR and n not in bound for n in nodes): return None
  return sym_infer(x, {v.arg[0]: val for v, val in bound.items()})


def sint_le(a: Any, b: Any) -> bool:
  """a <= b for sizes. Symbolic: True when the Variables' ranges guarantee it, False when they rule it out; otherwise the
  bound values decide (x[:, :v].shrink(((0, 4), (0, 3))) with v bound to 3 or more), and an unbound Variable allows it."""
  if not isinstance(a, UOp) and not isinstance(b, UOp): return bool(a <= b)
  if a is b: return True
  d = sint_simplify(b - a if isinstance(b, UOp) else (-a) + b)
  if not isinstance(d, UOp): return d >= 0
  if d.vmin >= 0: return True
  if d.vmax < 0: return False
  return (v := _bound_value(d)) is None or v >= 0


def sint_val(x: Any) -> int:
  """A size's value: its bound Variables' values in a symbolic one."""
  if not isinstance(x, UOp): return int(x)
  if (v := _bound_value(x)) is None:
    raise ValueError(f"the size {x.render()} has a Variable that is not bound: bind it (Variable(...).bind(value)) to read its value")
  return int(v)


def sint_div(a: Any, b: Any) -> Any:
  """a // b when b divides a for every value of the Variables (sizes: reshape's -1), else None."""
  if not isinstance(a, UOp) and not isinstance(b, UOp): return a // b if b and a % b == 0 else None
  if isinstance(b, int):
    if b <= 0: return None
    q = sint_simplify(a // b)
    return q if sint_eq(q * b if isinstance(q, UOp) else b * q, a) else None
  # a symbolic divisor: a an int multiple of it ((v*4) // v, (v*8+8) // (v+1)), the one case reshape's -1 needs
  at, ac = split_terms(a if isinstance(a, UOp) else UOp.const(b.dtype, a))
  bt, bc = split_terms(b)
  da, db = dict(merge_terms(at)), dict(merge_terms(bt))
  if not db or set(da) != set(db): return None
  atom, k = next(iter(db.items()))
  if da[atom] % k: return None
  q = da[atom] // k
  return q if all(da[x] == q * db[x] for x in db) and ac == q * bc else None
