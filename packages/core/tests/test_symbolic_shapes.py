"""Symbolic shapes: a bound Variable as a size (slices, reshape, reductions, factories, cat, pad) and through TinyJit, as a
KV cache in a decode loop uses them. numpy is the reference; the values are read at the bound value."""
import math

import numpy as np
import pytest
from tinygrad import Tensor, TinyJit, Variable
from tinygrad.helpers import InvalidArgumentError, OutOfRangeError
from tinygrad.uop.ops import Ops

X = np.arange(40, dtype=np.float32).reshape(4, 10)
V = Variable("v", 1, 8)


def check(t: Tensor, shape: str, ref: np.ndarray) -> None:
  assert str(t.shape) == shape
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-6)


# ---- (1) slices by a bound Variable anywhere in a subscript
@pytest.mark.parametrize("k", [1, 3])
def test_slices(k):
  x, v = Tensor(X), V.bind(k)
  check(x[:, :v], "(4, v)", X[:, :k])
  check(x[:, :v + 1], "(4, (v+1))", X[:, :k + 1])
  check(x[:, v:v + 1], "(4, 1)", X[:, k:k + 1])
  check(x[:, v:], "(4, ((v*-1)+10))", X[:, k:])
  check(x[0, :v], "(v,)", X[0, :k])
  check(x[:v, 0], "(v,)", X[:k, 0])
  check(x[None, :, :v], "(1, 4, v)", X[None, :, :k])
  check(x[:, v], "(4,)", X[:, k])
  check(x[..., 1:v + 1], "(4, v)", X[:, 1:k + 1])
  check(x[:, :v + 2][:, 1:], "(4, (v+1))", X[:, 1:k + 2])
  check(x[:, :v][:, -1], "(4,)", X[:, k - 1])
  check(x[:, :v][:, ::-1], "(4, v)", X[:, :k][:, ::-1])
  check(x[:, :v].shrink(((0, 2), (0, 1))), "(2, 1)", X[:2, :1])  # to a fixed size that fits the bound value


def test_slice_errors():
  x, v = Tensor(X), V.bind(3)
  with pytest.raises(NotImplementedError, match="step 1"): x[:, :v][:, ::2]
  with pytest.raises(OutOfRangeError): x[:, v:2]  # 3:2 at the bound value
  with pytest.raises(OutOfRangeError): x[:, -v:]  # a negative symbolic bound (tinygrad 0.14 raises too)
  with pytest.raises(InvalidArgumentError): x[:, :v].shrink(((0, 4), (0, 5)))  # past the bound value


# ---- (2) reshape keeping a symbolic dim
def test_reshape():
  x, v = Tensor(X), V.bind(3)
  s = x[:, :v]
  check(s.reshape(2, 2, v), "(2, 2, v)", X[:, :3].reshape(2, 2, 3))
  check(s.reshape(4, v, 1), "(4, v, 1)", X[:, :3].reshape(4, 3, 1))
  check(s.reshape(-1), "((v*4),)", X[:, :3].reshape(-1))
  check(s.reshape(4, -1), "(4, v)", X[:, :3])
  check(s.reshape(-1, v), "(4, v)", X[:, :3])
  check(s.reshape(2, 2, v).permute(2, 0, 1).flatten(1), "(v, 4)", X[:, :3].T)
  c = Tensor(np.arange(64, dtype=np.float32).reshape(1, 16, 2, 2))
  check(c[:, :v + 1].reshape(1, v + 1, 4), "(1, (v+1), 4)", np.arange(64, dtype=np.float32).reshape(1, 16, 4)[:, :4])
  with pytest.raises(InvalidArgumentError, match="every value"): s.reshape(2, 6)  # 12 elements only at v=3


def test_reshape_keeps_the_symbolic_index():
  # the kernel indexes the kept symbolic axis directly: no division or modulo by a symbolic size
  c = Tensor.empty(1, 16, 2, 4).realize()
  (si,) = (c[:, :V.bind(3) + 1].reshape(1, V.bind(3) + 1, 8) * 2).schedule()
  assert not [n for n in si.ast.toposort() if n.op in (Ops.IDIV, Ops.MOD) and n.src[1].op is not Ops.CONST]


# ---- (3) elementwise, reductions and matmul along and over a symbolic dim
def test_reductions_and_matmul():
  x, v = Tensor(X), V.bind(3)
  s = x[:, :v]
  check(s.sum(1), "(4,)", X[:, :3].sum(1))
  check(s.sum(0), "(v,)", X[:, :3].sum(0))
  check(s.max(1), "(4,)", X[:, :3].max(1))
  check(s.mean(1), "(4,)", X[:, :3].mean(1))
  e = np.exp(X[:, :3] - X[:, :3].max(1, keepdims=True))
  check(s.softmax(-1), "(4, v)", e / e.sum(1, keepdims=True))
  check(s @ Tensor.ones(10, 2)[:v], "(4, 2)", X[:, :3] @ np.ones((3, 2)))   # the inner dim is symbolic
  check(s.T @ s, "(v, v)", X[:, :3].T @ X[:, :3])                          # both outer dims are
  check(s * Tensor.ones(4, 1) + s, "(4, v)", X[:, :3] * 2)
  check(s.cumsum(1), "(4, v)", X[:, :3].cumsum(1))
  check(s.argmax(1), "(4,)", X[:, :3].argmax(1))
  with pytest.raises(NotImplementedError, match="symbolic dim"): s.sort(1)


# ---- (4) factories with a symbolic size, triu/tril with a symbolic diagonal
def test_factories():
  v = V.bind(3)
  check(Tensor.full((1, v), 2.0), "(1, v)", np.full((1, 3), 2.0))
  check(Tensor.zeros(v, 2), "(v, 2)", np.zeros((3, 2)))
  check(Tensor.ones(v), "(v,)", np.ones(3))
  assert str(Tensor.empty(v, 2).shape) == "(v, 2)"
  check(Tensor.arange(v), "(v,)", np.arange(3))
  check(Tensor.arange(v + 1, v + 4), "(3,)", np.arange(4, 7))
  check(Tensor.full((1, 1, 3, v + 3), -math.inf).triu(v + 1), "(1, 1, 3, (v+3))", np.triu(np.full((3, 6), -np.inf), 4)[None, None])
  check(Tensor.ones(3, v).tril(), "(3, v)", np.tril(np.ones((3, 3))))


# ---- (5) cat along a symbolic dim, (6) pad by a symbolic amount
def test_cat_and_pad():
  x, v = Tensor(X), V.bind(3)
  check(x[:, :v].cat(Tensor.ones(4, 1), dim=1), "(4, (v+1))", np.concatenate([X[:, :3], np.ones((4, 1))], 1))
  check(x[:, :v].cat(x[:, v:v + 2], dim=1), "(4, (v+2))", X[:, :5])
  check(x[:, :v].cat(x[:, :v], dim=0), "(8, v)", np.concatenate([X[:, :3]] * 2))
  check(Tensor.ones(2, 3).pad(((0, 0), (v, 0))), "(2, (v+3))", np.pad(np.ones((2, 3)), ((0, 0), (3, 0))))
  check(x[:, :v].pad(((0, 0), (0, 2)), value=-1.0), "(4, (v+2))", np.pad(X[:, :3], ((0, 0), (0, 2)), constant_values=-1))
  with pytest.raises(NotImplementedError, match="mode='constant'"): x[:, :v].pad(((0, 0), (0, v)), mode="reflect")


# ---- TinyJit: one capture, replayed with the Variable rebound
def test_jit_replays_symbolic_shapes():
  x = Tensor(X).realize()
  @TinyJit
  def f(x: Tensor, v) -> tuple[Tensor, Tensor]:
    mask = Tensor.full((1, v + 1), -math.inf).triu(1)
    return (x[:, :v] * 2).contiguous(), (x[:, :v + 1] + mask).softmax(-1).sum(0).contiguous()
  for k in (2, 5, 3, 7, 1):
    a, b = f(x, V.bind(k))
    check(a, "(4, v)", X[:, :k] * 2)        # the returned symbolic shape takes this call's value
    check(b, "((v+1),)", np.eye(1, k + 1)[0] * 4)
  assert f.cnt == 5 and len(f.captured) >= 1


def test_jit_kv_cache_decode():
  """llama-style attention over a KV cache that grows by one row per step: symbolic slices, reshape, matmul, softmax, a
  symbolic mask; the cache rows are written with a symbolic slice assign."""
  B, H, D, L = 1, 2, 4, 8
  rng = np.random.default_rng(0)
  wq, wk, wv = (rng.standard_normal((H * D, H * D)).astype(np.float32) * 0.3 for _ in range(3))
  Wq, Wk, Wv = (Tensor(w).realize() for w in (wq, wk, wv))
  cache_k, cache_v = Tensor.zeros(B, L, H, D).contiguous().realize(), Tensor.zeros(B, L, H, D).contiguous().realize()
  @TinyJit
  def step(x: Tensor, start_pos) -> Tensor:
    q, k, v = ((x @ w).reshape(B, 1, H, D) for w in (Wq, Wk, Wv))
    cache_k[:, start_pos:start_pos + 1].assign(k).realize()
    cache_v[:, start_pos:start_pos + 1].assign(v).realize()
    keys = cache_k[:, :start_pos + 1].reshape(B, start_pos + 1, H, D).transpose(1, 2)
    values = cache_v[:, :start_pos + 1].transpose(1, 2)
    scores = q.transpose(1, 2) @ keys.transpose(2, 3) / math.sqrt(D)
    mask = Tensor.full((1, 1, 1, start_pos + 1), -math.inf).triu(start_pos + 1)   # nothing masked for one query row
    return ((scores + mask).softmax(-1) @ values).transpose(1, 2).reshape(B, 1, H * D).contiguous()
  pos = Variable("start_pos", 0, L - 1)
  ck, cv = np.zeros((B, L, H, D), np.float32), np.zeros((B, L, H, D), np.float32)
  for t in range(5):
    x = rng.standard_normal((B, 1, H * D)).astype(np.float32)
    got = step(Tensor(x), pos.bind(t)).numpy()
    q, k, v = ((x @ w).reshape(B, 1, H, D) for w in (wq, wk, wv))
    ck[:, t], cv[:, t] = k[:, 0], v[:, 0]
    s = q.transpose(0, 2, 1, 3) @ ck[:, :t + 1].transpose(0, 2, 3, 1) / math.sqrt(D)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = ((p / p.sum(-1, keepdims=True)) @ cv[:, :t + 1].transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3).reshape(B, 1, H * D)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
  assert step.cnt == 5  # captured once, replayed for t = 2, 3, 4


def test_unsupported_symbolic_use_says_so():
  s = Tensor(X)[:, :V.bind(3)]
  with pytest.raises(NotImplementedError, match="symbolic size"): bool(s.shape[1] < 4)


def test_int64_index_math_with_symbolic_sizes(monkeypatch):
  """Kernels past 2**31 elements index in int64; the Variables (int32) in their sizes are cast up (forced here)."""
  import tinygrad.schedule.indexing as indexing
  from tinygrad.dtype import dtypes
  monkeypatch.setattr(indexing, "index_dtype", lambda expr, out: dtypes.int64)
  Y = np.arange(66, dtype=np.float32).reshape(6, 11)  # shapes no other test uses: a kernel not cached from before
  y, v = Tensor(Y), Variable("w", 1, 9).bind(4)
  check((y[:, :v + 1].reshape(3, 2, v + 1) * 2).sum(2), "(3, 2)", (Y[:, :5].reshape(3, 2, 5) * 2).sum(2))
  check(y[:, :v].cat(y[:, v:v + 2], dim=1).sum(0), "((w+2),)", Y[:, :6].sum(0))
