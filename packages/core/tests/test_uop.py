"""UOp: hash-consing, immutability, traversal of deep graphs, substitute, pickling, shape inference, render_expr."""
from __future__ import annotations

import gc
import math
import pickle
import weakref

import numpy as np
import pytest
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import GroupOp, Ops, UOp, pretty, render_expr

pytestmark = pytest.mark.compile_only  # pure IR: no device involved

i32, f32 = dtypes.int32, dtypes.float32
DEEP = 100_000


def rng(i: int, n: int) -> UOp: return UOp(Ops.RANGE, i32, (UOp.const(i32, n),), (i, "loop"))
def var(name: str, lo: int = 0, hi: int = 10) -> UOp: return UOp(Ops.DEFINE_VAR, i32, (), (name, lo, hi))
def device(name: str = "PYTHON") -> UOp: return UOp(Ops.DEVICE, arg=name)
def buffer(size: int, uid: int = 0, dev: str = "PYTHON") -> UOp: return UOp(Ops.BUFFER, f32, (device(dev),), (uid, size))
def mv(op: Ops, x: UOp, arg) -> UOp: return UOp(op, x.dtype, (x,), arg)


# ---- hash-consing

def test_same_args_same_object():
  a, b = var("a"), var("b")
  assert UOp(Ops.ADD, i32, (a, b)) is UOp(Ops.ADD, i32, (a, b))
  assert a + b is a + b
  assert a * 3 + 1 is a * 3 + 1
  assert UOp.const(i32, 5) is UOp.const(i32, 5)
  assert var("a") is a
  assert rng(0, 4) is rng(0, 4)
  # equality is identity, and hashing follows it
  assert (a + b) == (a + b) and hash(a + b) == hash(a + b) and len({a + b, a + b, b + a}) == 2


@pytest.mark.parametrize("other", [
  lambda a, b: UOp(Ops.ADD, f32, (a, b)),          # dtype differs
  lambda a, b: UOp(Ops.ADD, i32, (b, a)),          # src order differs
  lambda a, b: UOp(Ops.MUL, i32, (a, b)),          # op differs
  lambda a, b: UOp(Ops.ADD, i32, (a, b), "tag"),   # arg differs
  lambda a, b: UOp(Ops.ADD, i32, (a, b, b)),       # src length differs
])
def test_different_args_different_object(other):
  a, b = var("a"), var("b")
  assert other(a, b) is not UOp(Ops.ADD, i32, (a, b))


def test_replace_is_hash_consed():
  a, b = var("a"), var("b")
  x = a + b
  assert x.replace() is x
  assert x.replace(src=(a, b)) is x
  assert x.replace(src=[a, b]) is x  # any sequence becomes a tuple
  assert x.replace(op=Ops.MUL) is a * b
  assert x.replace(arg="t") is UOp(Ops.ADD, i32, (a, b), "t")


def test_const_args_of_equal_value_and_different_type_stay_apart():
  # 1, 1.0 and True compare and hash equal in Python, but consts of different dtypes are different nodes
  c_int, c_float, c_bool = UOp.const(i32, 1), UOp.const(f32, 1), UOp.const(dtypes.bool, True)
  assert len({c_int, c_float, c_bool}) == 3
  assert type(c_int.arg) is int and type(c_float.arg) is float and type(c_bool.arg) is bool


def test_negative_zero_const_is_not_zero():
  # -0.0 == 0.0 in Python, but they are different float constants (1/x tells them apart)
  zero = UOp.const(f32, 0.0)
  neg_zero = UOp.const(f32, -0.0)
  assert math.copysign(1.0, zero.arg) == 1.0
  assert math.copysign(1.0, neg_zero.arg) == -1.0, "const -0.0 came back as +0.0 (interned with the existing 0.0)"
  assert neg_zero is not zero


def test_const_truncates_to_dtype():
  assert UOp.const(dtypes.int8, 200).arg == -56
  assert UOp.const(dtypes.uint8, -1).arg == 255
  assert UOp.const(dtypes.float16, 0.1).arg == 0.0999755859375
  assert UOp.const(f32, 2).arg == 2.0 and type(UOp.const(f32, 2).arg) is float
  assert math.isnan(UOp.const(f32, math.nan).arg)
  assert UOp.const(i32, UOp.const(i32, 3)) is UOp.const(i32, 3)  # a UOp passes through


def test_interning_is_weak():
  x = UOp(Ops.DEFINE_VAR, i32, (), ("only_here_for_this_test", 0, 1))
  ref = weakref.ref(x)
  del x
  gc.collect()
  assert ref() is None, "the intern table keeps nodes alive"
  # and the same key can be made again afterwards
  assert UOp(Ops.DEFINE_VAR, i32, (), ("only_here_for_this_test", 0, 1)).arg[0] == "only_here_for_this_test"


def test_intern_table_drops_dead_nodes_and_keeps_a_replacement():
  from tinygrad.uop import ops
  key = ("intern_table_test", 0, 1)
  def entries() -> int: return sum(1 for k in ops._interned if k[3] == key)
  x = UOp(Ops.DEFINE_VAR, i32, (), key)
  assert entries() == 1 and UOp(Ops.DEFINE_VAR, i32, (), key) is x
  del x
  gc.collect()
  assert entries() == 0, "a dead node's entry stays in the table (it would grow without bound)"
  # a node that dies after an equal one replaced its entry must not take the replacement's entry with it
  y = UOp(Ops.DEFINE_VAR, i32, (), key)
  stale = ops._Interned(y, ops._forget)
  stale.key = ops._interned[next(k for k in ops._interned if k[3] == key)].key
  z = UOp(Ops.DEFINE_VAR, i32, (), key)
  ops._forget(stale)  # the entry holds a live reference: kept
  assert z is y and entries() == 1 and UOp(Ops.DEFINE_VAR, i32, (), key) is y


def test_unhashable_arg_is_a_clear_error():
  with pytest.raises(TypeError, match="hashable"):
    UOp(Ops.RESHAPE, f32, (buffer(4),), [2, 2])


# ---- immutability

@pytest.mark.parametrize("field", ["op", "dtype", "src", "arg"])
def test_fields_cannot_be_assigned(field: str):
  x = var("a") + 1
  before = (x.op, x.dtype, x.src, x.arg)
  with pytest.raises(AttributeError):
    setattr(x, field, None)
  assert (x.op, x.dtype, x.src, x.arg) == before


def test_no_new_attributes():
  x = var("a") + 1
  with pytest.raises(AttributeError):
    x.extra = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("field", ["op", "dtype", "src", "arg"])
def test_fields_cannot_be_deleted(field: str):
  # nodes are shared by every graph that uses them: deleting a field would break all of them
  x = UOp(Ops.DEFINE_VAR, i32, (), ("immutable_del_test", 0, 5))
  try:
    with pytest.raises(AttributeError):
      delattr(x, field)
  finally:
    if not hasattr(x, field):  # repair the shared node so later tests aren't affected
      object.__setattr__(x, field, {"op": Ops.DEFINE_VAR, "dtype": i32, "src": (), "arg": ("immutable_del_test", 0, 5)}[field])


def test_no_truth_value_and_not_iterable():
  x = var("a")
  with pytest.raises(TypeError, match="truth value"):
    bool(x)
  with pytest.raises(TypeError, match="truth value"):
    if x < 3: pass
  with pytest.raises(TypeError, match="iterable"):
    list(x)


# ---- operators build the expected nodes

def test_operators():
  a, b = var("a"), var("b")
  assert (a + b).op is Ops.ADD and (a + b).src == (a, b)
  assert (a + 1).src[1] is UOp.const(i32, 1)
  assert (1 + a).src == (UOp.const(i32, 1), a)
  assert (a - b).src == (a, b.neg()) and (a - 2).src[1] is UOp.const(i32, -2)
  assert (a * b).op is Ops.MUL and (a // b).op is Ops.IDIV and (a % b).op is Ops.MOD
  assert (a < b).op is Ops.CMPLT and (a < b).dtype == dtypes.bool
  assert (a > b).src == (b, a)
  assert (a >= b) is (a < b).logical_not() and (a < b).logical_not().op is Ops.CMPNE
  assert a.ne(b).op is Ops.CMPNE and a.eq(b).op is Ops.CMPEQ and a.eq(b).dtype == dtypes.bool
  assert a.maximum(b).op is Ops.MAX
  assert (-a).op is Ops.NEG and (-(a < b)).op is Ops.CMPNE  # negating a bool is logical not
  w = (a < b).where(a, 0)
  assert w.op is Ops.WHERE and w.dtype == i32 and w.src[2] is UOp.const(i32, 0)
  assert a.cast(i32) is a and a.cast(f32).op is Ops.CAST and a.cast(f32).dtype == f32


# ---- toposort

def test_toposort_sources_first_each_once():
  a, b, c = var("a"), var("b"), var("c")
  s1, s2 = a + b, a + c
  root = s1 * s2
  order = root.toposort()
  assert order[-1] is root
  assert len(order) == len(set(order))
  assert set(order) == {a, b, c, s1, s2, root}
  pos = {u: i for i, u in enumerate(order)}
  for u in order:
    for s in u.src: assert pos[s] < pos[u]
  # depth first, sources left to right
  assert order == [a, b, s1, c, s2, root]


def test_toposort_gate():
  a, b = var("a"), var("b")
  inner = a + b
  root = inner * 2
  order = root.toposort(gate=lambda u: u is not inner)
  assert inner in order and a not in order and b not in order


def test_toposort_diamond_is_linear():
  # each level uses the previous twice: 2**200 paths but 201 nodes
  x = var("a")
  for _ in range(200): x = x + x
  assert len(x.toposort()) == 201


def test_toposort_deep_chain():
  x = var("a")
  root = x
  for i in range(DEEP): root = UOp(Ops.ADD, i32, (root, UOp.const(i32, i % 7)))
  order = root.toposort()
  assert len(order) == DEEP + 1 + 7
  assert order[0] is x and order[-1] is root
  # printing a huge graph is a summary, not a recursion
  assert f"<{DEEP + 8} nodes>" in repr(root)


def test_deep_chain_substitute():
  depth = 30_000  # every node is rebuilt: far past the recursion limit at a third of the cost of DEEP
  x, y = var("a"), var("b")
  root = x
  for _ in range(depth): root = root + 1
  new = root.substitute({x: y})
  assert new is not root and new.op is Ops.ADD
  order = new.toposort()
  assert y in order and x not in order and len(order) == depth + 2


def test_deep_chain_properties_dont_recurse():
  # shape, device and vmin/vmax are derived from the sources: on a deep graph they must not hit the recursion limit
  depth = 20_000
  x = buffer(4)
  for _ in range(depth): x = UOp(Ops.NEG, f32, (x,))
  assert x.shape == (4,)
  assert x.device == "PYTHON"
  i = rng(0, 10)
  e = i
  for _ in range(depth): e = e + 1
  assert (e.vmin, e.vmax) == (depth, depth + 9)


# ---- substitute

def test_substitute():
  a, b, c = var("a"), var("b"), var("c")
  e = (a + b) * a
  assert e.substitute({a: c}) is (c + b) * c
  assert e.substitute({a + b: c}) is c * a
  assert e.substitute({}) is e
  assert e.substitute({var("zz"): c}) is e  # nothing to replace: the same object
  # the replacement's own graph is not searched again
  assert e.substitute({a: a + 1}) is ((a + 1) + b) * (a + 1)
  # the original is untouched
  assert e.src[0].src == (a, b)


def test_substitute_root():
  a, b = var("a"), var("b")
  assert (a + 1).substitute({a + 1: b}) is b


# ---- pickling

def test_pickle_round_trip_is_the_same_node():
  i, j = rng(0, 4), rng(1, 6)
  e = ((i * 6 + j) // 6 < 3).where(i, j.maximum(i))
  assert pickle.loads(pickle.dumps(e)) is e


def test_pickle_round_trip_rebuilds_the_graph():
  i, j = rng(100, 4), rng(101, 6)
  data = pickle.dumps(((i * 6 + j) % 5).cast(f32) * 2.5)
  expected = pretty(((i * 6 + j) % 5).cast(f32) * 2.5)
  del i, j
  gc.collect()
  back = pickle.loads(data)
  assert pretty(back) == expected
  # and it is interned again: rebuilding it by hand finds the same node
  i, j = rng(100, 4), rng(101, 6)
  assert back is ((i * 6 + j) % 5).cast(f32) * 2.5


def test_pickle_tensor_graph_and_shared_nodes():
  b = buffer(24, uid=7)
  x = mv(Ops.RESHAPE, b, (2, 3, 4))
  y = UOp(Ops.ADD, f32, (x, x))
  back = pickle.loads(pickle.dumps(y))
  assert back is y and back.src[0] is back.src[1]
  assert back.shape == (2, 3, 4)


def test_pickle_moderately_deep_graph():
  x = var("a")
  for _ in range(150): x = x + 1
  assert pickle.loads(pickle.dumps(x)) is x


# ---- shapes of tensor-graph ops

def test_shape_leaves():
  assert buffer(24).shape == (24,) and buffer(24).size == 24
  assert UOp(Ops.IOTA, i32, (device(),), 7).shape == (7,)
  assert UOp.const(f32, 1.0, (device(),)).shape == ()
  assert device().shape == ()


@pytest.mark.parametrize("build,expected", [
  (lambda b: mv(Ops.RESHAPE, b, (2, 3, 4)), (2, 3, 4)),
  (lambda b: mv(Ops.RESHAPE, b, (24,)), (24,)),
  (lambda b: mv(Ops.PERMUTE, mv(Ops.RESHAPE, b, (2, 3, 4)), (2, 0, 1)), (4, 2, 3)),
  (lambda b: mv(Ops.EXPAND, mv(Ops.RESHAPE, b, (2, 1, 12)), (2, 5, 12)), (2, 5, 12)),
  (lambda b: mv(Ops.PAD, mv(Ops.RESHAPE, b, (4, 6)), ((1, 2), (0, 3))), (7, 9)),
  (lambda b: mv(Ops.SHRINK, mv(Ops.RESHAPE, b, (4, 6)), ((1, 3), (0, 6))), (2, 6)),
  (lambda b: mv(Ops.FLIP, mv(Ops.RESHAPE, b, (4, 6)), (True, False)), (4, 6)),
  (lambda b: mv(Ops.REDUCE_AXIS, mv(Ops.RESHAPE, b, (2, 3, 4)), (Ops.ADD, (1,))), (2, 1, 4)),
  (lambda b: mv(Ops.REDUCE_AXIS, mv(Ops.RESHAPE, b, (2, 3, 4)), (Ops.MAX, (0, 2))), (1, 3, 1)),
  (lambda b: mv(Ops.REDUCE_AXIS, b, (Ops.ADD, (0,))), (1,)),
  (lambda b: UOp(Ops.ADD, f32, (mv(Ops.RESHAPE, b, (4, 6)), mv(Ops.RESHAPE, b, (4, 6)))), (4, 6)),
  (lambda b: UOp(Ops.CAST, dtypes.float16, (mv(Ops.RESHAPE, b, (6, 4)),)), (6, 4)),
  (lambda b: UOp(Ops.WHERE, f32, (UOp(Ops.CMPLT, dtypes.bool, (b, b)), b, b)), (24,)),
  (lambda b: UOp(Ops.CONTIGUOUS, f32, (mv(Ops.PERMUTE, mv(Ops.RESHAPE, b, (4, 6)), (1, 0)),)), (6, 4)),
  (lambda b: UOp(Ops.COPY, f32, (mv(Ops.RESHAPE, b, (3, 8)), device("CPU"))), (3, 8)),
  (lambda b: UOp(Ops.ASSIGN, f32, (b, UOp(Ops.NEG, f32, (b,)))), (24,)),
  (lambda b: UOp(Ops.DETACH, f32, (mv(Ops.RESHAPE, b, (1, 24)),)), (1, 24)),
], ids=lambda x: "" if callable(x) else str(x))
def test_shape_inference(build, expected):
  x = build(buffer(24))
  assert x.shape == expected
  assert x.size == math.prod(expected)


# random chains of movement ops agree with numpy
def _np_apply(a: np.ndarray, op: Ops, arg) -> np.ndarray:
  if op is Ops.RESHAPE: return a.reshape(arg)
  if op is Ops.PERMUTE: return a.transpose(arg)
  if op is Ops.EXPAND: return np.broadcast_to(a, arg)
  if op is Ops.PAD: return np.pad(a, arg)
  if op is Ops.SHRINK: return a[tuple(slice(s, e) for s, e in arg)]
  if op is Ops.FLIP: return np.flip(a, [i for i, f in enumerate(arg) if f]) if any(arg) else a
  raise AssertionError(op)


def _random_movement(rs: np.random.RandomState, shape: tuple[int, ...]) -> tuple[Ops, object]:
  op = [Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP][rs.randint(6)]
  n = len(shape)
  if op is Ops.RESHAPE:
    total = math.prod(shape)
    divs = [d for d in range(1, total + 1) if total % d == 0]
    d = divs[rs.randint(len(divs))]
    return op, (d, total // d) if rs.randint(2) else (total // d, 1, d)
  if op is Ops.PERMUTE: return op, tuple(int(x) for x in rs.permutation(n))
  if op is Ops.EXPAND: return op, tuple(s if s != 1 else int(rs.randint(1, 4)) for s in shape)
  if op is Ops.PAD: return op, tuple((int(rs.randint(0, 3)), int(rs.randint(0, 3))) for _ in shape)
  if op is Ops.SHRINK:
    out = []
    for s in shape:
      st = int(rs.randint(0, s))
      out.append((st, int(rs.randint(st + 1, s + 1))))
    return op, tuple(out)
  return op, tuple(bool(rs.randint(2)) for _ in shape)


@pytest.mark.parametrize("seed", range(40))
def test_shape_inference_matches_numpy(seed: int):
  rs = np.random.RandomState(seed)
  x, a = mv(Ops.RESHAPE, buffer(24), (2, 3, 4)), np.zeros((2, 3, 4))
  for _ in range(6):
    op, arg = _random_movement(rs, a.shape)
    x, a = mv(op, x, arg), _np_apply(a, op, arg)
    assert x.shape == a.shape, f"{op} {arg}"
  red = tuple(int(i) for i in range(len(a.shape)) if rs.randint(2))
  assert mv(Ops.REDUCE_AXIS, x, (Ops.ADD, red)).shape == a.sum(axis=red, keepdims=True).shape


def test_device_and_base():
  b = buffer(24, dev="CPU")
  x = mv(Ops.PERMUTE, mv(Ops.RESHAPE, b, (4, 6)), (1, 0))
  assert x.device == "CPU" and x.base is b
  assert b.base is b
  c = UOp(Ops.COPY, f32, (x, device("PYTHON")))
  assert c.device == "PYTHON" and c.base is c
  assert UOp(Ops.NEG, f32, (x,)).device == "CPU"


# ---- render_expr

def test_render_expr():
  i, j = rng(0, 4), rng(1, 6)
  n = var("n")
  assert render_expr(i * 6 + j) == "((r0*6)+r1)"
  assert (i * 6 + j).render() == "((r0*6)+r1)"
  assert render_expr((i + n) // 2 % 3) == "(((r0+n)//2)%3)"
  assert render_expr(i < n) == "(r0<n)"
  assert render_expr((i < 2).where(i, j)) == "((r0<2) ? r0 : r1)"
  assert render_expr(i.maximum(j)) == "max(r0, r1)"
  assert render_expr(-i) == "(-r0)"
  assert render_expr(UOp.const(i32, 7)) == "7"
  assert render_expr(UOp(Ops.SPECIAL, i32, (), ("gidx0", 16)) + 1) == "(gidx0+1)"
  # other ops show their name and sources
  assert render_expr(UOp(Ops.CAST, f32, (i,))) == "CAST(r0)"
  # shared subexpressions are rendered at every use
  s = i + j
  assert render_expr(s * s) == "((r0+r1)*(r0+r1))"


def test_group_ops_are_consistent():
  assert GroupOp.Comparison <= GroupOp.Binary and GroupOp.Commutative <= GroupOp.ALU
  assert not (GroupOp.Movement & GroupOp.ALU)
  assert GroupOp.Reduce == {Ops.ADD, Ops.MUL, Ops.MAX}
