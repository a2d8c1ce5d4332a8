"""Symbolic index math over loop ranges: value ranges, folding, like terms, div/mod, comparisons, and a randomized
check that `simplify()` never changes the value of an expression (evaluated with the C semantics of exec_alu)."""
from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from tinygrad.dtype import dtypes
from tinygrad.uop.alu import cast_scalar, exec_alu
from tinygrad.uop.ops import Ops, UOp, render_expr
from tinygrad.uop.symbolic import sym_infer

pytestmark = pytest.mark.compile_only  # pure IR: no device involved

i32 = dtypes.int32


def rng(i: int, n: int) -> UOp: return UOp(Ops.RANGE, i32, (UOp.const(i32, n),), (i, "loop"))
def c(x: int) -> UOp: return UOp.const(i32, x)


i, j, k = rng(0, 10), rng(1, 6), rng(2, 24)


def evaluate(u: UOp, env: dict[UOp, int]) -> Any:
  """The value of u with each RANGE (or DEFINE_VAR) given by env, op by op with exec_alu."""
  vals: dict[UOp, Any] = {}
  for n in u.toposort():
    if n.op is Ops.CONST: vals[n] = n.arg
    elif n.op in (Ops.RANGE, Ops.DEFINE_VAR): vals[n] = env[n]
    elif n.op is Ops.CAST: vals[n] = cast_scalar(vals[n.src[0]], n.dtype)
    else: vals[n] = exec_alu(n.op, n.dtype, tuple(vals[s] for s in n.src))
  return vals[u]


def variables(u: UOp) -> list[UOp]: return sorted((n for n in u.toposort() if n.op is Ops.RANGE), key=lambda r: r.arg[0])


def assignments(vs: list[UOp]):
  for vals in itertools.product(*[range(v.src[0].arg) for v in vs]): yield dict(zip(vs, vals))


def assert_equivalent(a: UOp, b: UOp) -> None:
  vs = sorted(set(variables(a)) | set(variables(b)), key=lambda r: r.arg[0])
  for env in assignments(vs):
    assert evaluate(a, env) == evaluate(b, env), f"{render_expr(a)} != {render_expr(b)} at {[env[v] for v in vs]}"


def n_nodes(u: UOp) -> int: return len(u.toposort())


def check_simplifies(expr: UOp, expected: UOp) -> None:
  """expr.simplify() is expected when that is a single node, else at most as big as it; always the same values."""
  s = expr.simplify()
  assert_equivalent(expr, s)
  assert_equivalent(s, expected)
  if expected.op in (Ops.RANGE, Ops.CONST): assert s is expected, f"{render_expr(expr)} -> {render_expr(s)}, expected {render_expr(expected)}"
  else: assert n_nodes(s) <= n_nodes(expected), f"{render_expr(expr)} -> {render_expr(s)}, expected {render_expr(expected)}"


# ---- value ranges

@pytest.mark.parametrize("expr,lo,hi", [
  (i, 0, 9), (j, 0, 5), (c(7), 7, 7),
  (i + j, 0, 14), (i + 5, 5, 14), (i - 3, -3, 6), (i - j, -5, 9),
  (i * j, 0, 45), (i * 3, 0, 27), (i * -3, -27, 0), ((i - 5) * (j - 2), -15, 12),
  (i // 3, 0, 3), (k // 6, 0, 3), ((i + 2) // 4, 0, 2), ((i - 5) // 2, -2, 2),
  (i % 3, 0, 2), (j % 8, 0, 5), (k % 6, 0, 5), ((i - 5) % 3, -2, 2),
  (i.maximum(j), 0, 9), (i.maximum(c(4)), 4, 9), ((i - 9).maximum(j - 5), -5, 0), (i.minimum(j), 0, 5),
  ((i < 5).where(i + 20, j), 0, 29), ((i < 10).where(i, c(100)), 0, 9), ((i < 0).where(c(100), j), 0, 5),
  (-i, -9, 0), (i.cast(dtypes.int64), 0, 9),
])
def test_vmin_vmax(expr: UOp, lo: int, hi: int):
  assert (expr.vmin, expr.vmax) == (lo, hi), render_expr(expr)
  # the bounds are sound
  vals = [evaluate(expr, env) for env in assignments(variables(expr))]
  assert lo <= min(vals) and max(vals) <= hi


@pytest.mark.parametrize("expr,lo,hi", [
  (i < 10, True, True), (i < 9, False, True), (i < 0, False, False), (i < 1, False, True), (i + 1 < 1, False, False), (i + 1 < 2, False, True),
  (j < i + 6, True, True), (i + 10 < j, False, False), (i.ne(10), True, True), (i.ne(3), False, True), (i.eq(-1), False, False),
  (i.eq(c(3) * 0 + 12), False, False), ((i < 5) & (j < 3), False, True), ((i < 10) & (j < 6), True, True),
  ((i < 0) | (j < 0), False, False), ((i < 0) | (j < 6), True, True),
])
def test_vmin_vmax_bool(expr: UOp, lo: bool, hi: bool):
  assert (expr.vmin, expr.vmax) == (lo, hi), render_expr(expr)


def test_vmin_vmax_overflow_is_unknown():
  big = rng(9, 2**20)
  e = big * 2**12  # up to 2**32: would wrap in int32
  assert (e.vmin, e.vmax) == (dtypes.min(i32), dtypes.max(i32))
  assert ((big * 2**10).vmin, (big * 2**10).vmax) == (0, (2**20 - 1) * 2**10)


def test_vmin_vmax_define_var_and_special():
  n = UOp(Ops.DEFINE_VAR, i32, (), ("n", 1, 32))
  assert (n.vmin, n.vmax) == (1, 32) and ((n * 2 + 1).vmin, (n * 2 + 1).vmax) == (3, 65)
  g = UOp(Ops.SPECIAL, i32, (), ("gidx0", 64))
  assert (g.vmin, g.vmax) == (0, 63)
  assert (rng(3, 1).vmin, rng(3, 1).vmax) == (0, 0)


# ---- simplification

@pytest.mark.parametrize("expr,expected", [
  # constant folding
  (c(3) + 4, c(7)), (c(3) * c(4) + c(2), c(14)), (c(7) // 2, c(3)), (c(-7) // 2, c(-3)), (c(-7) % 3, c(-1)), (c(5).maximum(c(9)), c(9)),
  (c(2**31 - 1) + 1, c(-2**31)),  # int32 wraps
  # identities
  (i + 0, i), (i * 1, i), (i * 0, c(0)), (i // 1, i), (i % 1, c(0)), (i + 1 - 1, i), (i.neg().neg(), i), (i - i, c(0)),
  ((i < 10).where(i, j), i), ((i < 0).where(i, j), j), ((i < 5).where(j, j), j),
  # like terms
  (i + i + j * 2 - i, i + j * 2), (i * 3 + j + i * 2 - j, i * 5), ((i + 3) * 2 - 6, i * 2), (i + 2 + j + 3, i + j + 5),
  ((i + j) * 2 - j - j, i * 2), (i * 2 * 3, i * 6),
  # div and mod by constants when the range allows it
  (i // 10, c(0)), (i % 10, i), (i // 20, c(0)), (j % 6, j), ((i * 6 + j) // 6, i), ((i * 6 + j) % 6, j), ((j + i * 6) % 6, j),
  ((i * 3 + 1) // 3, i), ((i * 3 + 1) % 3, c(1)), ((i * 4 + 2) // 2, i * 2 + 1), ((i * 8 + j) // 2, i * 4 + j // 2),
  ((i * 6 + j + 6) // 6, i + 1), ((i * 6 + j) // 3, i * 2 + j // 3), ((i * 12 + j * 2) % 12, j * 2),
  # reshape round trips
  ((k // 6) * 6 + k % 6, k), ((k // 2) * 2 + k % 2, k), (((k // 2) % 3) * 2 + k % 2 + (k // 6) * 6, k),
  (k % 2 + ((k // 2) % 3) * 2, k % 6), (((k // 4) % 3) * 4 + k % 4 + (k // 12) * 12, k), ((k % 6) + (k // 6) * 6 + 1, k + 1),
  # gcd factoring
  ((i * 4 + j * 6) // 2, i * 2 + j * 3), ((i * 4 + j * 6) % 2, c(0)), ((i * 6 + j * 4) % 4, (i * 3 % 2) * 2),
  ((i * 4 + j * 6 + 2) // 2, i * 2 + j * 3 + 1),
  # only each coefficient's remainder matters in a mod: a conv window's kx*19 % 18 (kx < 3) is kx
  ((rng(4, 3) * 19) % 18, rng(4, 3)), ((rng(4, 3) * 19 + 37) % 18, rng(4, 3) + 1), ((i * 13 + j * 7) % 6, (i + j) % 6),
  # nested div and mod
  ((k // 2) // 3, k // 6), ((k // 3) // 2, k // 6), ((k % 12) % 4, k % 4), ((k % 12) // 4, (k // 4) % 3), ((k % 6) % 6, k % 6),
  # comparisons decided by the range
  (i < 10, c(1) < 2), (i < 0, c(1) < 1), (i + j < 15, c(1) < 2), (i - 10 < 0, c(1) < 2), (i.ne(-1), c(1) < 2),
  (k // 6 < 4, c(1) < 2), (k % 6 < 6, c(1) < 2), (i * 2 < 7, i < 4), (i * 2 + 1 < 6, i < 3), (i * 3 < 0, c(1) < 1),
])
def test_simplify(expr: UOp, expected: UOp):
  expected = expected.simplify() if expected.dtype == dtypes.bool and all(s.op is Ops.CONST for s in expected.src) else expected
  check_simplifies(expr, expected)


@pytest.mark.parametrize("expr", [
  # must NOT fold: the remainder part can cross a multiple of the divisor
  (i * 6 + rng(5, 7)) // 6, (i * 6 + rng(5, 7)) % 6, (k // 6) * 6 + k % 5, (i + 1) // 2, (i * 2 + j) // 4, i < 5, k % 7 + (k // 7) * 6,
  (i - 5) // 2, (i - 5) % 3, (i - 5) * 2 // 4,
])
def test_simplify_keeps_what_cannot_fold(expr: UOp):
  s = expr.simplify()
  assert_equivalent(expr, s)
  assert s.op is not Ops.CONST and s.op is not Ops.RANGE


def test_simplify_is_idempotent():
  for e in [(i * 6 + j) // 4, ((k // 2) % 3) * 2 + k % 2, (i * 4 + j * 6 + 2) % 4, i + j * 2 + 3]:
    s = e.simplify()
    assert s.simplify() is s


def test_simplify_constants_go_right():
  s = (3 + i).simplify()
  assert s.op is Ops.ADD and s.src[0] is i and s.src[1] is c(3)
  s = (c(4) * j).simplify()
  assert s.src[0] is j and s.src[1] is c(4)


def test_simplify_define_var():
  n = UOp(Ops.DEFINE_VAR, i32, (), ("n", 1, 8))
  assert ((n * 4 + 3) // 4).simplify() is n
  assert ((n * 4 + 3) % 4).simplify() is c(3)
  assert (n < 9).simplify() is UOp.const(dtypes.bool, True)
  assert (n < 1).simplify() is UOp.const(dtypes.bool, False)


def test_sym_infer():
  n, m = UOp(Ops.DEFINE_VAR, i32, (), ("n", 1, 8)), UOp(Ops.DEFINE_VAR, i32, (), ("m", 0, 8))
  assert sym_infer(n * 4 + m // 3, {"n": 5, "m": 7}) == 22
  assert sym_infer((n - 9) // 2, {"n": 4}) == -2  # C division: toward zero
  assert sym_infer((n - 9) % 3, {"n": 4}) == -2   # C remainder: the dividend's sign


# ---- randomized: simplify() preserves the value of every expression

def _random_expr(r: random.Random, ranges: list[UOp], depth: int, signed: bool) -> UOp:
  if depth == 0 or r.random() < 0.2:
    return r.choice(ranges) if r.random() < 0.75 else c(r.randint(-6 if signed else 1, 9))
  op = r.choice(["+", "+", "*", "*k", "//", "%"] + (["-", "max", "where"] if signed else []))
  a = _random_expr(r, ranges, depth - 1, signed)
  if op == "//": return a // r.randint(1, 9)
  if op == "%": return a % r.randint(1, 9)
  if op == "*k": return a * r.randint(-3 if signed else 1, 7)
  b = _random_expr(r, ranges, depth - 1, signed)
  if op == "+": return a + b
  if op == "*": return a * b
  if op == "-": return a - b
  if op == "max": return a.maximum(b)
  cond = r.choice([a < b, a.ne(b), (a < r.randint(0, 9)) & (b < a + 3)])
  return cond.where(_random_expr(r, ranges, depth - 1, signed), b)


def _check_random(seed: int, n: int, signed: bool) -> None:
  r = random.Random(seed)
  for t in range(n):
    ranges = [rng(10 + x, r.randint(1, 7)) for x in range(r.choice([2, 3]))]
    e = _random_expr(r, ranges, r.randint(2, 5), signed)
    s = e.simplify()
    for env in assignments(ranges):
      want, got = evaluate(e, env), evaluate(s, env)
      assert want == got, f"#{t}: {render_expr(e)} -> {render_expr(s)} at {[env[x] for x in ranges]}: {want} != {got}"
      assert e.vmin <= want <= e.vmax and s.vmin <= got <= s.vmax, f"#{t}: value {want} outside the range of {render_expr(e)}"


@pytest.mark.parametrize("seed", range(4))
def test_random_expressions_positive(seed: int):
  # +, *, //, % with positive constants over 2-3 ranges: 4 x 200 expressions
  _check_random(seed, 200, signed=False)


@pytest.mark.parametrize("seed", range(2))
def test_random_expressions_signed(seed: int):
  # with subtraction, negative constants, max and where: C division/remainder on negative values
  _check_random(100 + seed, 200, signed=True)
