"""The rewrite engine: UPat matching, PatternMatcher rule order, ctx, and graph_rewrite (fixed point, bottom_up, deep graphs)."""
from __future__ import annotations

import time

import pytest
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import GroupOp, Ops, UOp
from tinygrad.uop.rewrite import PatternMatcher, UPat, graph_rewrite

pytestmark = pytest.mark.compile_only  # pure IR: no device involved

i32, f32 = dtypes.int32, dtypes.float32
DEEP = 100_000
DEEP_REBUILT = 30_000  # far past the recursion limit, and a third of the time when every node is rebuilt


def var(name: str, dt=i32) -> UOp: return UOp(Ops.DEFINE_VAR, dt, (), (name, 0, 10))
def c(x, dt=i32) -> UOp: return UOp.const(dt, x)
def matches(pat: UPat, u: UOp) -> list[dict[str, UOp]]: return pat.match(u, {})


# ---- UPat

def test_match_any():
  a = var("a")
  assert matches(UPat(), a) == [{}]
  assert matches(UPat.var("x"), a) == [{"x": a}]


def test_match_op_and_op_sets():
  a, b = var("a"), var("b")
  assert matches(UPat(Ops.ADD), a + b) == [{}]
  assert matches(UPat(Ops.MUL), a + b) == []
  alu = UPat({Ops.ADD, Ops.MUL}, name="x")
  assert matches(alu, a + b) == [{"x": a + b}] and matches(alu, a * b) == [{"x": a * b}] and matches(alu, a // b) == []
  assert matches(UPat(GroupOp.Comparison), a < b) and matches(UPat(GroupOp.Comparison), a.ne(b))
  assert matches(UPat([Ops.IDIV, Ops.MOD]), a % b)  # any iterable of ops


def test_match_dtype():
  a, f = var("a"), var("f", f32)
  assert matches(UPat(dtype=i32), a) and not matches(UPat(dtype=f32), a)
  assert matches(UPat(dtype={i32, f32}), f) and not matches(UPat(dtype={dtypes.int8, dtypes.float16}), f)
  assert matches(UPat.var("x", dtype=dtypes.bool), a < 3) and not matches(UPat.var("x", dtype=dtypes.bool), a)


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float16, dtypes.int8, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.bool],
                         ids=lambda d: d.name)
def test_match_scalar_dtype_matches_vectors(dt):
  # a pattern for a scalar dtype also matches vectors of it
  v = UOp(Ops.VECTORIZE, dt.vec(4), tuple(UOp.const(dt, 1) for _ in range(4)))
  assert matches(UPat(Ops.VECTORIZE, dtype=dt), v) == [{}]
  other = dtypes.float64 if dt != dtypes.float64 else dtypes.float32
  assert matches(UPat(Ops.VECTORIZE, dtype=other), v) == []


def test_match_arg():
  assert matches(UPat(Ops.CONST, arg=3), c(3)) and not matches(UPat(Ops.CONST, arg=3), c(4))
  assert matches(UPat.const(i32, 0), c(0)) and not matches(UPat.const(f32, 0), c(0))
  assert matches(UPat.const(None, 0), c(0.0, f32))  # value equality: 0 matches 0.0
  assert matches(UPat(Ops.DEFINE_VAR, arg=("a", 0, 10)), var("a"))
  assert matches(UPat(Ops.CONST), c(123)) == [{}]  # no arg: any


def test_match_src_tuple_in_order():
  a, b = var("a"), var("b")
  pat = UPat(Ops.CMPLT, src=(UPat.var("x"), UPat.cvar("k")))
  assert matches(pat, a < 3) == [{"x": a, "k": c(3)}]
  assert matches(pat, UOp(Ops.CMPLT, dtypes.bool, (c(3), a))) == []  # not commutative: order matters
  assert matches(pat, a < b) == []
  # wrong number of sources
  assert matches(UPat(Ops.ADD, src=(UPat(),)), a + b) == []
  assert matches(UPat(Ops.ADD, src=(UPat(), UPat(), UPat())), a + b) == []


def test_match_commutative_list_src():
  a = var("a")
  pat = UPat(Ops.ADD, src=[UPat.var("x"), UPat.cvar("k")])
  assert matches(pat, a + 3) == [{"x": a, "k": c(3)}]
  assert matches(pat, 3 + a) == [{"x": a, "k": c(3)}]
  # both orders can match: every match is returned
  both = matches(pat, c(1) + c(2))
  assert {(m["x"].arg, m["k"].arg) for m in both} == {(1, 2), (2, 1)}
  # the operator helpers build commutative patterns for commutative ops only
  assert matches(UPat.var("x") + UPat.cvar("k"), 3 + a) and matches(UPat.var("x") * UPat.cvar("k"), 3 * a)
  assert not matches(UPat.var("x") < UPat.cvar("k"), UOp(Ops.CMPLT, dtypes.bool, (c(3), a)))
  assert not matches(UPat.var("x") // UPat.cvar("k"), UOp(Ops.IDIV, i32, (c(3), a)))


def test_match_repeated_src_pattern():
  a, b = var("a"), var("b")
  all_const = UPat(Ops.SINK, src=UPat(Ops.CONST))
  assert matches(all_const, UOp(Ops.SINK, dtypes.void, (c(1), c(2), c(3)))) == [{}]
  assert matches(all_const, UOp(Ops.SINK, dtypes.void, (c(1), a, c(3)))) == []
  assert matches(all_const, UOp(Ops.SINK, dtypes.void, ())) == [{}]  # vacuously
  # a named repeated pattern must bind the same node every time
  same = UPat(Ops.SINK, src=UPat.var("x"))
  assert matches(same, UOp(Ops.SINK, dtypes.void, (a, a, a))) == [{"x": a}]
  assert matches(same, UOp(Ops.SINK, dtypes.void, (a, b))) == []


def test_match_allow_any_len():
  a, b = var("a"), var("b")
  pat = UPat(Ops.SINK, src=(UPat.var("first"),), allow_any_len=True)
  assert matches(pat, UOp(Ops.SINK, dtypes.void, (a, b, c(1)))) == [{"first": a}]
  assert matches(pat, UOp(Ops.SINK, dtypes.void, (a,))) == [{"first": a}]
  assert matches(pat, UOp(Ops.SINK, dtypes.void, ())) == []  # fewer sources than the pattern
  assert matches(UPat(Ops.SINK, src=(UPat.var("first"),)), UOp(Ops.SINK, dtypes.void, (a, b))) == []


def test_match_custom_predicate():
  a = var("a")
  even = UPat(Ops.CONST, name="k", custom=lambda u: u.arg % 2 == 0)
  assert matches(even, c(4)) == [{"k": c(4)}] and matches(even, c(5)) == []
  # the predicate runs after op/dtype checks, so it only sees nodes of the right kind
  assert matches(even, a) == []


def test_same_name_twice_must_be_same_node():
  a, b = var("a"), var("b")
  pat = UPat(Ops.ADD, src=(UPat.var("x"), UPat.var("x")))
  assert matches(pat, a + a) == [{"x": a}]
  assert matches(pat, a + b) == []
  # across levels too: x * (x + k)
  deep = UPat(Ops.MUL, src=(UPat.var("x"), UPat(Ops.ADD, src=(UPat.var("x"), UPat.cvar("k")))))
  assert matches(deep, a * (a + 1)) == [{"x": a, "k": c(1)}]
  assert matches(deep, a * (b + 1)) == []
  # the root can be named and referenced by nothing else
  assert matches(UPat(Ops.ADD, name="root"), a + b) == [{"root": a + b}]


def test_named_copies_pattern():
  base = UPat(Ops.CONST, dtype=i32, arg=3)
  named = base.named("k")
  assert matches(named, c(3)) == [{"k": c(3)}] and matches(named, c(4)) == []
  assert base.name is None


def test_match_does_not_mutate_bindings():
  a = var("a")
  start = {"y": a}
  out = UPat.var("x").match(a, start)
  assert out == [{"y": a, "x": a}] and start == {"y": a}


# ---- PatternMatcher

def test_first_matching_rule_wins():
  a = var("a")
  pm = PatternMatcher([
    (UPat(Ops.ADD, name="x"), lambda x: c(1)),
    (UPat(Ops.ADD, name="x"), lambda x: c(2)),
  ])
  assert pm.rewrite(a + 5) is c(1)
  assert pm.rewrite(a * 5) is None  # no rule for MUL


def test_none_means_try_next():
  a = var("a")
  calls = []
  def first(x): calls.append("first"); return None
  def second(x): calls.append("second"); return c(2)
  pm = PatternMatcher([(UPat(Ops.ADD, name="x"), first), (UPat(Ops.ADD, name="x"), second)])
  assert pm.rewrite(a + 5) is c(2)
  assert calls == ["first", "second"]


def test_returning_the_same_node_means_try_next():
  a = var("a")
  pm = PatternMatcher([(UPat(Ops.ADD, name="x"), lambda x: x), (UPat(Ops.ADD, name="x"), lambda x: c(7))])
  assert pm.rewrite(a + 5) is c(7)
  assert PatternMatcher([(UPat(Ops.ADD, name="x"), lambda x: x)]).rewrite(a + 5) is None


def test_every_match_of_a_rule_is_tried():
  # a commutative pattern that matches in two ways: when the first binding gives None, the second is tried
  a = var("a")
  pm = PatternMatcher([(UPat(Ops.ADD, src=[UPat.var("x"), UPat(Ops.CONST, name="k")]), lambda x, k: x if x.op is Ops.DEFINE_VAR else None)])
  assert pm.rewrite(a + 5) is a
  assert pm.rewrite(UOp(Ops.ADD, i32, (c(5), a))) is a


def test_rules_are_indexed_by_op_but_any_op_rules_apply_everywhere():
  a = var("a")
  seen = []
  pm = PatternMatcher([
    (UPat(name="x"), lambda x: seen.append(x.op)),  # returns None: observes only
    (UPat(Ops.MUL, name="x"), lambda x: c(0)),
  ])
  assert pm.rewrite(a * 2) is c(0) and pm.rewrite(a + 2) is None
  assert seen == [Ops.MUL, Ops.ADD]


def test_ctx_is_passed_only_to_functions_that_take_it():
  a = var("a")
  def with_ctx(ctx, x): ctx.append(x); return None
  def without_ctx(x): return c(9)
  pm = PatternMatcher([(UPat(Ops.ADD, name="x"), with_ctx), (UPat(Ops.ADD, name="x"), without_ctx)])
  log: list[UOp] = []
  assert pm.rewrite(a + 1, ctx=log) is c(9)
  assert log == [a + 1]
  # lambdas with ctx too
  pm2 = PatternMatcher([(UPat(Ops.CONST, name="x"), lambda ctx, x: c(ctx[x.arg]) if x.arg in ctx else None)])
  assert pm2.rewrite(c(1), ctx={1: 100}) is c(100)
  assert pm2.rewrite(c(2), ctx={1: 100}) is None


def test_pattern_matchers_add_in_order():
  a = var("a")
  pm1 = PatternMatcher([(UPat(Ops.ADD), lambda: c(1))])
  pm2 = PatternMatcher([(UPat(Ops.ADD), lambda: c(2)), (UPat(Ops.MUL), lambda: c(3))])
  assert (pm1 + pm2).rewrite(a + 1) is c(1)
  assert (pm2 + pm1).rewrite(a + 1) is c(2)
  assert (pm1 + pm2).rewrite(a * 1) is c(3)


# ---- graph_rewrite

fold_add_zero = PatternMatcher([(UPat.var("x") + UPat.const(None, 0), lambda x: x)])
fold_consts = PatternMatcher([
  (UPat(Ops.ADD, src=(UPat.cvar("p"), UPat.cvar("q"))), lambda p, q: c(p.arg + q.arg, p.dtype)),
  (UPat(Ops.MUL, src=(UPat.cvar("p"), UPat.cvar("q"))), lambda p, q: c(p.arg * q.arg, p.dtype)),
])


def test_graph_rewrite_no_change_is_identity():
  a, b = var("a"), var("b")
  e = (a + b) * (a + 1)
  assert graph_rewrite(e, fold_add_zero) is e


def test_graph_rewrite_reaches_fixed_point():
  # counting down one step per rewrite: the rewritten node is rewritten again until no rule applies
  countdown = PatternMatcher([(UPat(Ops.CONST, name="x", custom=lambda u: u.arg > 0), lambda x: c(x.arg - 1))])
  a = var("a")
  assert graph_rewrite(c(50), countdown) is c(0)
  assert graph_rewrite(a + c(5), countdown) is a + c(0)
  # a parent rebuilt from rewritten sources is rewritten too: ((1+2)*(3+4)) + 0 folds all the way
  e = (c(1) + c(2)) * (c(3) + c(4)) + 0
  assert graph_rewrite(e, fold_consts + fold_add_zero) is c(21)


def test_graph_rewrite_result_is_rewritten():
  # a rule's result can contain new matches (x*2 -> x+x+0 -> x+x); they are rewritten as well
  a = var("a")
  pm = fold_add_zero + PatternMatcher([(UPat.var("x") * UPat.const(None, 2), lambda x: (x + x) + 0)])
  assert graph_rewrite(a * 2 + 1, pm) is (a + a) + 1


def test_graph_rewrite_shared_nodes_rewritten_once():
  calls: list[UOp] = []
  def count(ctx, x):
    ctx.append(x)
    return None
  pm = PatternMatcher([(UPat(Ops.ADD, name="x"), count)])
  x = var("a")
  for _ in range(300): x = x + x  # 2**300 paths
  st = time.perf_counter()
  graph_rewrite(x, pm, ctx=calls)
  assert len(calls) == 300 and len(set(calls)) == 300
  assert time.perf_counter() - st < 5


def test_graph_rewrite_ctx():
  # rename variables through a ctx dict
  a, b = var("a"), var("b")
  pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda ctx, v: ctx.get(v))])
  assert graph_rewrite((a + b) * a, pm, ctx={a: c(3)}) is (c(3) + b) * c(3)


def _distribute_pm(log: list | None = None) -> PatternMatcher:
  def distribute(s, k):
    if log is not None: log.append("distribute")
    return s.src[0] * k + s.src[1] * k
  def fold(p, q):
    if log is not None: log.append("fold")
    return c(p.arg + q.arg)
  return PatternMatcher([
    (UPat(Ops.MUL, src=(UPat(Ops.ADD, name="s"), UPat.var("k"))), distribute),
    (UPat(Ops.ADD, src=(UPat.cvar("p"), UPat.cvar("q"))), fold),
  ])


def test_bottom_up_sees_parent_before_sources():
  a = var("a")
  e = (c(1) + c(2)) * a
  # default: sources first, so 1+2 folds before the parent is looked at, and nothing distributes
  assert graph_rewrite(e, _distribute_pm()) is c(3) * a
  # bottom_up: the parent is tried first, so it distributes over the original sum
  assert graph_rewrite(e, _distribute_pm(), bottom_up=True) is c(1) * a + c(2) * a


def test_bottom_up_order_of_visits():
  order: list[UOp] = []
  def visit(ctx, x):
    ctx.append(x)
    return None
  pm = PatternMatcher([(UPat(name="x"), visit)])
  a, b = var("a"), var("b")
  e = (a + b) * b
  graph_rewrite(e, pm, ctx=order, bottom_up=True)
  assert order[0] is e  # the root first
  order.clear()
  graph_rewrite(e, pm, ctx=order)
  assert order[-1] is e and order.index(a + b) < order.index(e)


def test_bottom_up_fixed_point():
  countdown = PatternMatcher([(UPat(Ops.CONST, name="x", custom=lambda u: u.arg > 0), lambda x: c(x.arg - 1))])
  a = var("a")
  assert graph_rewrite(a * c(40) + c(7), countdown, bottom_up=True) is a * c(0) + c(0)
  e = (c(1) + c(2)) * (c(3) + c(4)) + 0
  assert graph_rewrite(e, fold_consts + fold_add_zero, bottom_up=True) is c(21)


@pytest.mark.parametrize("bottom_up", [False, True])
def test_deep_chain_rewrite(bottom_up: bool):
  x = var("a")
  e = x
  for _ in range(DEEP): e = e + 0
  assert graph_rewrite(e, fold_add_zero, bottom_up=bottom_up) is x


@pytest.mark.parametrize("bottom_up", [False, True])
def test_deep_chain_rebuilt(bottom_up: bool):
  # every node of a deep chain changes (its leaf is renamed), so every node is rebuilt
  a, b = var("a"), var("b")
  e = a
  for i in range(DEEP_REBUILT): e = UOp(Ops.MUL if i % 2 else Ops.ADD, i32, (e, c(i % 5 + 1)))
  out = graph_rewrite(e, PatternMatcher([(UPat(Ops.DEFINE_VAR, arg=("a", 0, 10)), lambda: b)]), bottom_up=bottom_up)
  assert out.op is e.op and out.src[1] is e.src[1]
  assert out.toposort()[0] is b and a not in out.toposort()


def test_deep_chain_simplify():
  x = var("a")
  e = x
  for _ in range(DEEP): e = e + 0
  assert e.simplify() is x
