"""GPU-style reductions run on the PYTHON device: its renderer is told it is a GPU (thread indices, float4-style
upcasts), and the split thresholds are lowered so that small tensors take every path a big one takes on a real GPU:
split reductions over rows, columns, middle and several axes, the levels of a full sum, max, and softmax's nested
reductions. Wide loads stay scalar (the interpreter has no vector types); the CUDA runs cover those."""
import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.helpers import Context

pytestmark = pytest.mark.skipif(not Device.DEFAULT.startswith("PYTHON"), reason="emulates a GPU on the PYTHON device (DEV=PYTHON)")


@pytest.fixture(autouse=True)
def gpu_style(monkeypatch):
  import tinygrad.codegen.program as program
  from tinygrad.codegen import heuristics
  from tinygrad.engine import realize
  r = Device.renderer(Device.DEFAULT)
  monkeypatch.setattr(r, "has_local", True)
  monkeypatch.setattr(r, "supports_float4", True)  # the heuristics choose wide loads ...
  monkeypatch.setattr(program, "vectorize_memory", lambda sink, allowed: sink)  # ... which stay scalar here
  monkeypatch.setattr(heuristics, "GPU_UPCAST_MIN_OUTPUTS", 64)
  monkeypatch.setattr(realize, "_runner_cache", {})
  # the split paths: block-cooperative reductions (GROUP_REDUCE, on by default) would take the small rows here instead
  with Context(GPU_SPLIT_PARTIALS=2048, GPU_SPLIT_CHUNK=8, GROUP_REDUCE=0): yield


def kernels(t: Tensor) -> list[str]:
  return [si.ast.op.name if si.ast.op.name == "COPY" else "kernel" for si in t.schedule()]


def test_full_sum_splits_in_levels():
  a = np.random.randn(64, 96).astype(np.float32)
  t = Tensor(a).realize().sum()
  assert len(kernels(t)) >= 3
  np.testing.assert_allclose(t.item(), a.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape,axis", [((32, 512), 1), ((512, 32), 0), ((8, 256, 12), 1), ((16, 64, 8), (0, 2)), ((4, 8, 512), (1, 2))])
def test_split_sum_and_max(shape, axis):
  a = np.random.randn(*shape).astype(np.float32)
  x = Tensor(a).realize()
  s, m = x.sum(axis), x.max(axis)
  assert len(kernels(s)) >= 2  # split: partials, then their reduction
  np.testing.assert_allclose(s.numpy(), a.astype(np.float64).sum(axis), rtol=1e-4, atol=1e-4)
  np.testing.assert_array_equal(m.numpy(), a.max(axis))


def test_int_sum_and_keepdim():
  a = np.random.randint(-50, 50, size=(16, 1024)).astype(np.int32)
  t = Tensor(a).realize()
  assert t.sum(1).dtype == dtypes.int32
  np.testing.assert_array_equal(t.sum(1, keepdim=True).numpy(), a.sum(1, keepdims=True))


def test_softmax_rows_split_once():
  a = (np.random.randn(32, 512) * 3).astype(np.float32)
  t = Tensor(a).realize().softmax(1)
  assert len(kernels(t)) == 5  # max: partials + final, sum of exp: partials + final, the division
  e = np.exp(a.astype(np.float64) - a.max(1, keepdims=True))
  np.testing.assert_allclose(t.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16])
def test_matrix_vector_split_reads_vector_chunks(dtype):
  # few outputs: the rows split into partials that each read 16-byte chunks (4 floats / 8 halves side by side)
  xv, wv = np.random.randn(1, 512).astype(np.float32), np.random.randn(24, 512).astype(np.float32)
  x, w = Tensor(xv).cast(dtype).realize(), Tensor(wv).cast(dtype).realize()
  y = x @ w.T
  shapes = [tuple(r.src[0].arg for r in si.ast.toposort() if r.op.name == "RANGE") for si in y.schedule()]
  v = 16 // dtype.itemsize
  assert any(s and s[-1] == v for s in shapes), shapes  # the partial kernel's innermost reduce is the vector chunk
  npdt = np.float16 if dtype == dtypes.float16 else np.float32
  ref = xv.astype(npdt).astype(np.float64) @ wv.astype(npdt).astype(np.float64).T
  np.testing.assert_allclose(y.float().numpy(), ref, rtol=2e-2 if dtype == dtypes.float16 else 1e-4, atol=2e-2 if dtype == dtypes.float16 else 1e-4)


def test_matrix_vector_gets_no_register_block():
  from tinygrad.codegen.heuristics import hand_coded_opts
  from tinygrad.codegen.opt import OptOps
  x, w = Tensor.empty(1, 256), Tensor.empty(64, 256)
  for si in (x @ w.T).schedule():
    opts = hand_coded_opts(si.ast, wide_loads=True, gpu=True)
    assert not [o for o in opts if o.op is OptOps.UPCAST and o.amount >= 8], opts  # would leave the chip idle


def test_grouped_rows_are_not_split():
  """With GROUP on, rows a block of threads can reduce stay one kernel (a matrix-vector product's rows, softmax's max and
  sum over short rows); a full sum, too big for one block, still splits."""
  from tinygrad.codegen.opt import OptOps
  from tinygrad.engine import realize
  a = np.random.randn(256, 512).astype(np.float32)
  sm = (np.random.randn(32, 512) * 3).astype(np.float32)
  with Context(GROUP_REDUCE=1):
    x = Tensor(a).realize()
    assert len(kernels(x.sum(1))) == 1
    np.testing.assert_allclose(x.sum(1).numpy(), a.astype(np.float64).sum(1), rtol=1e-4, atol=1e-4)
    assert any(o.op is OptOps.GROUP for r in realize._runner_cache.values() for o in r.spec.opts)
    t = Tensor(sm).realize().softmax(1)
    assert len(kernels(t)) == 1  # max, sum of exp and the division in one row kernel (schedule/rows.py): no partials
    e = np.exp(sm.astype(np.float64) - sm.max(1, keepdims=True))
    np.testing.assert_allclose(t.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert len(kernels(Tensor(np.random.randn(64, 1024).astype(np.float32)).realize().sum())) >= 2
