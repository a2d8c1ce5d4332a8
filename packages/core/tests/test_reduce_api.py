"""The reduction Tensor API against numpy: sums and extremes over axes (ints, tuples, negative, keepdim), result dtypes,
moments, arg reductions, the softmax family, cumulative ops (also across blocks), sorting and topk, and gradients.
Runs on every DEV; tensors stay tiny for the PYTHON interpreter."""
import numpy as np
import pytest
import tinygrad.frontend.reduce as reduce_mod
from tinygrad import Context, Tensor, TinyJit, dtypes


def same(t: Tensor, expected, dtype=None, rtol=1e-6, atol=1e-6):
  if dtype is not None: assert t.dtype == dtype, f"dtype {t.dtype!r}, expected {dtype!r}"
  out, exp = t.numpy(), np.asarray(expected)
  assert out.shape == exp.shape, f"shape {out.shape}, expected {exp.shape}"
  if out.dtype == np.bool_ or np.issubdtype(out.dtype, np.integer): np.testing.assert_array_equal(out, exp)
  else: np.testing.assert_allclose(out.astype(np.float64), exp.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


A = np.array([[1.5, -2.0, 3.0, 0.5], [4.0, 0.25, -1.0, 2.0], [-3.0, 5.0, 1.0, -0.5]], np.float32)
B3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5 - 5
AXES = [None, 0, 1, -1, (0, 1), (-1, 0)]


def np_axis(axis): return axis if not isinstance(axis, tuple) else tuple(axis)


@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "mean", "any", "all"])
def test_basic_reductions(op, axis, keepdim):
  x = A if op not in ("any", "all") else (A > 0)
  ref = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean, "any": np.any, "all": np.all}[op]
  same(getattr(Tensor(x), op)(axis, keepdim=keepdim), ref(x, axis=np_axis(axis), keepdims=keepdim), rtol=1e-5)


@pytest.mark.parametrize("axis", [None, 1, (0, 2), -1], ids=str)
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_std(axis, correction):
  t = Tensor(B3)
  same(t.var(axis, correction=correction), np.var(B3.astype(np.float64), axis=axis, ddof=correction), rtol=1e-5)
  same(t.std(axis, keepdim=True, correction=correction), np.std(B3.astype(np.float64), axis=axis, ddof=correction, keepdims=True), rtol=1e-5)
  v, m = t.var_mean(axis, correction=correction)
  same(v, np.var(B3, axis=axis, ddof=correction), rtol=1e-5); same(m, np.mean(B3, axis=axis), rtol=1e-5)
  s, m = t.std_mean(axis, correction=correction)
  same(s, np.std(B3, axis=axis, ddof=correction), rtol=1e-5); same(m, np.mean(B3, axis=axis), rtol=1e-5)


def test_var_std_of_halves_sum_the_squares_in_float32():
  # bench/programs/dtypecorner.py: the squared deviations of a half arange(200) sum to 666,650 (past half's 65504) while the
  # variance is 3350; the sum was cast back to half before the division (inf). torch and tinygrad 0.14 give 3350
  x = Tensor(np.arange(200, dtype=np.float16))
  same(x.var(), 3350.0, dtypes.float16, rtol=1e-3); same(x.std(), np.sqrt(3350.0), dtypes.float16, rtol=1e-3)
  same(x.reshape(2, 100).var(1, correction=0), np.var(np.arange(200.0).reshape(2, 100), 1), dtypes.float16, rtol=1e-3)
  same(Tensor(np.arange(200, dtype=np.float32)).cast(dtypes.bfloat16).var().float(), 3350.0, rtol=1e-2)
  same(x[:2].var(correction=5), np.inf)  # a correction past the count: sq / 0


def test_result_dtypes():
  i8, u8, b = Tensor([[1, 2], [3, 4]], dtype=dtypes.int8), Tensor([[200, 100]], dtype=dtypes.uint8), Tensor([True, True, False])
  same(i8.sum(), 10, dtypes.int32); same(u8.sum(), 300, dtypes.uint32); same(b.sum(), 2, dtypes.int32)
  same(Tensor([1, 2], dtype=dtypes.int64).sum(), 3, dtypes.int64)
  same(i8.sum(dtype=dtypes.int8), 10, dtypes.int8); same(i8.sum(0, dtype="float32"), [4.0, 6.0], dtypes.float32)
  same(i8.prod(), 24, dtypes.int8); same(i8.max(), 4, dtypes.int8); same(u8.min(), 100, dtypes.uint8)
  same(i8.mean(), 2.5, dtypes.float32); same(Tensor([1, 2]).mean(), 1.5, dtypes.float32)
  same(i8.var(), np.var([1, 2, 3, 4], ddof=1), dtypes.float32)
  same(b.any(), True, dtypes.bool); same(b.all(), False, dtypes.bool); same(Tensor([1.0, 0.0]).any(), True, dtypes.bool)
  h = Tensor(np.full(4096, 0.1, np.float16))
  assert h.sum().dtype == dtypes.float16 and h.mean().dtype == dtypes.float16
  same(h.sum(), np.float16(0.1) * 4096.0, rtol=1e-3)  # accumulated in float32: a float16 sum would stall at 256
  same(Tensor([1, 2, 3]).cumsum(), [1, 3, 6], dtypes.int32); same(Tensor([1, 2], dtype=dtypes.int8).cumsum(), [1, 3], dtypes.int32)
  same(Tensor([True, True]).cumsum(), [1, 2], dtypes.int32); same(Tensor([2, 3], dtype=dtypes.int16).cumprod(), [2, 6], dtypes.int16)
  same(Tensor([3, 1, 2]).argmax(), 0, dtypes.int32)


def test_extremes_of_ints_and_special_values():
  same(Tensor([-2**31, 5, 2**31 - 1]).min(), -2**31, dtypes.int32); same(Tensor([-2**31, 5, 2**31 - 1]).max(), 2**31 - 1, dtypes.int32)
  same(Tensor([0, 255, 7], dtype=dtypes.uint8).min(), 0, dtypes.uint8); same(Tensor([True, False]).min(), False, dtypes.bool)
  same(Tensor([1.0, np.nan, 3.0]).max(), np.nan); same(Tensor([1.0, np.nan, 3.0]).min(), np.nan)
  same(Tensor([-np.inf, -np.inf]).max(), -np.inf)


def test_empty_and_zero_dim():
  e = Tensor.empty(0, 3)
  same(e.sum(0), [0, 0, 0]); same(e.prod(0), [1, 1, 1]); same(e.mean(0), [np.nan] * 3)
  with pytest.raises(RuntimeError, match="no identity"): e.max(0)  # as torch: max of nothing has no value
  same(e.max(1), np.zeros(0))
  same(e.sum(1), np.zeros(0)); same(e.any(), False); same(e.all(), True)
  s = Tensor(3.5)
  same(s.sum(), 3.5); same(s.max(), 3.5); same(s.mean(), 3.5); same(s.sum(0), 3.5); same(s.argmax(), 0, dtypes.int32)
  same(Tensor(A).sum(axis=()), A)  # no axes: nothing reduced


def test_argmax_argmin():
  x = np.array([[1, 3, 3, 0], [2, 2, 0, 0], [-1, -5, 7, -5]], np.float32)
  t = Tensor(x)
  for axis in (0, 1, -1):
    same(t.argmax(axis), np.argmax(x, axis), dtypes.int32); same(t.argmin(axis), np.argmin(x, axis), dtypes.int32)
    same(t.argmax(axis, keepdim=True), np.argmax(x, axis, keepdims=True)); same(t.argmin(axis, keepdim=True), np.argmin(x, axis, keepdims=True))
  same(t.argmax(), np.argmax(x), dtypes.int32); same(t.argmin(), np.argmin(x), dtypes.int32)
  same(Tensor([1.0, np.nan, 5.0, np.nan]).argmax(), 1)  # the first NaN, like torch
  same(Tensor([3, -2**31, 2**31 - 1, -2**31]).argmin(), 1)
  same(Tensor([5, 0, 255], dtype=dtypes.uint8).argmin(), 1); same(Tensor([False, True, True]).argmax(), 1)
  with pytest.raises(ValueError): Tensor.empty(0).argmax()


def _np_softmax(x, axis):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)


def test_softmax_family():
  x = A.astype(np.float64)
  for axis in (0, 1, -1):
    same(Tensor(A).softmax(axis), _np_softmax(x, axis)); same(Tensor(A).log_softmax(axis), np.log(_np_softmax(x, axis)), rtol=1e-5)
  same(Tensor(A).softmax(), _np_softmax(x, -1))
  assert Tensor(A).softmax(dtype=dtypes.float16).dtype == dtypes.float16
  same(Tensor([1, 2, 3]).softmax(), _np_softmax(np.array([1.0, 2, 3]), 0), dtypes.float32)
  big = np.array([[1000.0, 1000.0, -1000.0]], np.float32)
  same(Tensor(big).softmax(1), [[0.5, 0.5, 0.0]]); same(Tensor(big).log_softmax(1), [[-np.log(2), -np.log(2), -2000 - np.log(2)]], rtol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp(axis, keepdim):
  x = A.astype(np.float64) * 100
  m = x.max(axis=axis, keepdims=True)
  ref = np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m
  if not keepdim: ref = ref.reshape(np.sum(x, axis=axis).shape)
  same(Tensor(A * 100).logsumexp(axis, keepdim=keepdim), ref, rtol=1e-6)


def test_logsumexp_infinities():
  same(Tensor([[-np.inf, -np.inf], [np.inf, 1.0], [0.0, -np.inf]]).logsumexp(1), [-np.inf, np.inf, 0.0])
  same(Tensor([1, 2]).logsumexp(), np.log(np.e + np.e ** 2), dtypes.float32)


CUM = np.array([[1.5, -2.0, 3.0, 0.5, 2.0], [4.0, 0.5, -1.0, 2.0, -0.5], [-3.0, 5.0, 1.0, -0.5, 1.5]], np.float32)


def np_logcumsumexp(x, axis):
  m = np.maximum.accumulate(x, axis=axis)
  return np.log(np.cumsum(np.exp(x - x.max(axis, keepdims=True)), axis=axis)) + x.max(axis, keepdims=True) + 0 * m


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("block", [128, 2], ids=["one_block", "blocks_of_2"])
def test_cumulative(axis, block, monkeypatch):
  monkeypatch.setattr(reduce_mod, "_SCAN_BLOCK", block)  # blocks of 2: the chained-blocks path on a tiny tensor
  t, x = Tensor(CUM), CUM.astype(np.float64)
  same(t.cumsum(axis), np.cumsum(x, axis), rtol=1e-6)
  same(t.cumprod(axis), np.cumprod(x, axis), rtol=1e-6)
  same(t.cummax(axis)[0], np.maximum.accumulate(x, axis))
  same(t.cummin(axis)[0], np.minimum.accumulate(x, axis))
  same(t.logcumsumexp(axis), np_logcumsumexp(x, axis), rtol=1e-6)


def test_cumulative_ints_exact(monkeypatch):
  monkeypatch.setattr(reduce_mod, "_SCAN_BLOCK", 3)
  x = np.array([2**30, 2**30, 7, -9, 1, 2**29, 3], np.int64)
  same(Tensor(x).cumsum(), np.cumsum(x), dtypes.int64)
  same(Tensor(x.astype(np.int32)).cumsum(), np.cumsum(x).astype(np.int32), dtypes.int32)  # wraps like int32
  same(Tensor([3, -2, 4, 1, -1, 2, 2]).cumprod(), np.cumprod([3, -2, 4, 1, -1, 2, 2]), dtypes.int32)
  same(Tensor([3, -2, 4, 1, -1, 9, 2]).cummax()[0], np.maximum.accumulate([3, -2, 4, 1, -1, 9, 2]), dtypes.int32)
  same(Tensor([3, -2, 4, 1, -1, 9, 2], dtype=dtypes.uint8).cummin()[0], [3, 3, 3, 1, 1, 1, 1], dtypes.uint8)
  same(Tensor(np.arange(10, dtype=np.int32)).cumsum(), np.cumsum(np.arange(10)))


def test_cumulative_special():
  same(Tensor([-np.inf, -np.inf, 0.0, np.inf, 1.0]).logcumsumexp(), [-np.inf, -np.inf, 0.0, np.inf, np.inf])
  same(Tensor([1000.0, 1000.0, -5.0]).logcumsumexp(), [1000, 1000 + np.log(2), 1000 + np.log(2)], rtol=1e-6)
  same(Tensor([-1000.0, 0.0]).logcumsumexp(), [-1000.0, 0.0])
  same(Tensor(2.5).cumsum(), 2.5); same(Tensor.empty(0).cumsum(), np.zeros(0))


@pytest.fixture(params=["rank", "network"])
def sort_path(request):
  """Each sort test twice: the rank sort (short rows) and the bitonic network (frontend/sort_network.py, long rows), forced."""
  with Context(SORT_NETWORK_MIN=2 if request.param == "network" else 1 << 30): yield request.param


SORTX = np.array([[3.0, 1.0, 2.0, 1.0, -4.0, 2.0], [0.5, -1.0, 7.0, 7.0, 7.0, -2.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]], np.float32)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort(dim, descending, sort_path):
  t = Tensor(SORTX)
  values, indices = t.sort(dim, descending=descending)
  assert indices.dtype == dtypes.int32 and values.dtype == dtypes.float32
  key = -SORTX if descending else SORTX
  order = np.argsort(key, axis=dim, kind="stable")  # ties keep their order, in both directions (like tinygrad)
  same(indices, order); same(values, np.take_along_axis(SORTX, order, axis=dim))
  same(t.argsort(dim, descending=descending), order)


def test_sort_nan_ints_bools_and_3d(sort_path):
  v, i = Tensor([2.0, np.nan, -1.0, np.inf, np.nan, -np.inf]).sort()
  same(v, [-np.inf, -1.0, 2.0, np.inf, np.nan, np.nan]); same(i, [5, 2, 0, 3, 1, 4])
  v, i = Tensor([2.0, np.nan, -1.0]).sort(descending=True)
  same(v, [np.nan, 2.0, -1.0]); same(i, [1, 0, 2])
  x = np.array([5, -2**31, 2**31 - 1, 0, 5, -7], np.int32)
  v, i = Tensor(x).sort()
  same(v, np.sort(x), dtypes.int32); same(i, np.argsort(x, kind="stable"))
  v, i = Tensor([True, False, True, False]).sort()
  same(v, [False, False, True, True], dtypes.bool); same(i, [1, 3, 0, 2])
  same(Tensor(B3).sort(1)[0], np.sort(B3, 1)); same(Tensor(-B3).argsort(0), np.argsort(-B3, 0, kind="stable"))
  v, i = Tensor(4.0).sort()
  same(v, 4.0); same(i, 0)


@pytest.mark.parametrize("k", [0, 1, 3, 6])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(k, largest, sort_path):
  v, i = Tensor(SORTX).topk(k, largest=largest)
  order = np.argsort(-SORTX if largest else SORTX, axis=-1, kind="stable")[:, :k]
  same(i, order, dtypes.int32); same(v, np.take_along_axis(SORTX, order, axis=-1), dtypes.float32)


def test_topk_dim_and_errors(sort_path):
  v, i = Tensor(SORTX).topk(2, dim=0)
  order = np.argsort(-SORTX, axis=0, kind="stable")[:2]
  same(i, order); same(v, np.take_along_axis(SORTX, order, axis=0))
  v, _ = Tensor(SORTX).topk(2, sorted_=False)
  same(v, np.sort(SORTX, 1)[:, ::-1][:, :2])
  with pytest.raises(ValueError): Tensor(SORTX).topk(7)
  with pytest.raises(IndexError): Tensor(SORTX).sort(2)


# ---- gradients

def grad_of(fn, x: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
  """d sum(fn(x) * w) / dx."""
  t = Tensor(x, requires_grad=True)
  out = fn(t)
  (out * Tensor(w if w is not None else np.ones(out.shape, np.float32))).sum().backward()
  return t.grad.numpy()


W = np.array([[0.5, -1.0, 2.0, 1.5, -0.5], [1.0, 0.25, -2.0, 0.75, 3.0], [-1.5, 2.5, 0.5, -0.25, 1.0]], np.float32)


def test_reduction_gradients():
  x = CUM
  np.testing.assert_allclose(grad_of(lambda t: t.sum(1), x, W[:, 0]), np.broadcast_to(W[:, :1], x.shape))
  np.testing.assert_allclose(grad_of(lambda t: t.mean(0), x, W[0]), np.broadcast_to(W[:1] / 3, x.shape), rtol=1e-6)
  np.testing.assert_allclose(grad_of(lambda t: t.prod(1), x, W[:, 0]), W[:, :1] * x.prod(1, keepdims=True) / x, rtol=1e-5)
  g = grad_of(lambda t: t.var(1), x, W[:, 0])
  np.testing.assert_allclose(g, W[:, :1] * 2 * (x - x.mean(1, keepdims=True)) / 4, rtol=1e-5)
  s = x.std(1, ddof=1, keepdims=True)
  np.testing.assert_allclose(grad_of(lambda t: t.std(1), x, W[:, 0]), W[:, :1] * (x - x.mean(1, keepdims=True)) / (4 * s), rtol=1e-5)
  sm = _np_softmax(x.astype(np.float64), 1)
  np.testing.assert_allclose(grad_of(lambda t: t.logsumexp(1), x, W[:, 0]), W[:, :1] * sm, rtol=1e-5)
  ws = (W * sm).sum(1, keepdims=True)
  np.testing.assert_allclose(grad_of(lambda t: t.softmax(1), x, W), sm * (W - ws), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(grad_of(lambda t: t.log_softmax(1), x, W), W - sm * W.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(grad_of(lambda t: t.min(1), x, W[:, 0]), (x == x.min(1, keepdims=True)) * W[:, :1])


@pytest.mark.parametrize("block", [128, 2], ids=["one_block", "blocks_of_2"])
def test_cumulative_gradients(block, monkeypatch):
  monkeypatch.setattr(reduce_mod, "_SCAN_BLOCK", block)
  x = CUM
  rev_cumsum = lambda a: np.flip(np.cumsum(np.flip(a, 1), 1), 1)  # noqa: E731
  np.testing.assert_allclose(grad_of(lambda t: t.cumsum(1), x, W), rev_cumsum(W), rtol=1e-6)
  cp = np.cumprod(x.astype(np.float64), 1)
  np.testing.assert_allclose(grad_of(lambda t: t.cumprod(1), x, W), rev_cumsum(W * cp) / x, rtol=1e-5)
  # cummax: each output's gradient goes to the element that is the running maximum (distinct values)
  cm_idx = np.array([[int(np.argmax(row[:i + 1])) for i in range(row.size)] for row in x])
  expected = np.zeros_like(x)
  for r in range(3):
    for i in range(5): expected[r, cm_idx[r, i]] += W[r, i]
  np.testing.assert_allclose(grad_of(lambda t: t.cummax(1)[0], x, W), expected)
  lcse = np_logcumsumexp(x.astype(np.float64), 1)
  expected = np.array([[sum(W[r, i] * np.exp(x[r, j] - lcse[r, i]) for i in range(j, 5)) for j in range(5)] for r in range(3)])
  np.testing.assert_allclose(grad_of(lambda t: t.logcumsumexp(1), x, W), expected, rtol=1e-5)


def test_sort_topk_gradients_reach_the_selected_element(sort_path):
  x = SORTX[:2, :]  # has ties: each output still takes its gradient from exactly one element
  w = W[:2, :5]
  v_fn = lambda t: t.sort(1, descending=True)[0][:, :5]  # noqa: E731
  order = np.argsort(-x, axis=1, kind="stable")[:, :5]
  expected = np.zeros_like(x)
  for r in range(2):
    for k in range(5): expected[r, order[r, k]] += w[r, k]
  np.testing.assert_allclose(grad_of(v_fn, x, w), expected)
  np.testing.assert_allclose(grad_of(lambda t: t.topk(5, dim=1)[0], x, w), expected)
  t = Tensor(x, requires_grad=True)
  assert t.argsort().dtype == dtypes.int32 and t.argmax().dtype == dtypes.int32  # indices: no gradient flows through them


def test_sort_network_long_rows_match_numpy_and_keep_their_indices():
  """Rows past SORT_NETWORK_MIN (forced low here) with NaN, infinities and ties: numpy's stable order (NaN last, or first
  descending); the indices a sort returned stay as they were when another sort of the same shape runs after it."""
  rng = np.random.default_rng(1)
  x = np.round(rng.standard_normal((2, 1000)) * 4).astype(np.float32)
  x[0, :4], x[1, 7:9] = [np.nan, np.inf, -np.inf, np.nan], [np.nan, np.nan]
  with Context(SORT_NETWORK_MIN=2):
    i_up = Tensor(x).argsort()
    keep = i_up.numpy().copy()
    i_down = Tensor(x).argsort(descending=True).numpy()
    Tensor(x[::-1].copy()).argsort().numpy()
  np.testing.assert_array_equal(keep, np.argsort(x, axis=-1, kind="stable"))  # numpy's stable order also puts NaN last
  nan, idx = np.isnan(x), np.broadcast_to(np.arange(1000), x.shape)
  down = [np.lexsort((idx[r], -np.where(nan[r], 0, x[r]), ~nan[r])) for r in range(2)]  # NaN first, then values, ties in order
  np.testing.assert_array_equal(i_down, np.stack(down))
  same(i_up, keep)


def test_sort_network_inside_a_tinyjit():
  """Inside another TinyJit's capture the network's stages run as plain code and are captured with it."""
  rng = np.random.default_rng(2)
  f = TinyJit(lambda t: t.sort(descending=True)[0].realize())
  with Context(SORT_NETWORK_MIN=2):
    for _ in range(4):
      x = rng.standard_normal(300).astype(np.float32)
      same(f(Tensor(x).realize()), np.sort(x)[::-1])
