"""A CPU matmul's small narrow operand copied into the layout its kernel vectorizes (schedule/relayout.py): which products get
the copy (a kernel of its own), and the values, forward and through an MLP's backward, against numpy."""
import numpy as np
import pytest
from tinygrad import Device, Tensor
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops

pytestmark = pytest.mark.skipif(Device.DEFAULT.split(":")[0] not in ("CPU", "PYTHON", "NULL") or ":sm_" in Device.DEFAULT,
                                reason="operands are laid out anew on CPU-style devices only")


def kernels(t: Tensor) -> int: return sum(1 for si in t.schedule() if si.ast.op is Ops.SINK)


def runs() -> bool: return Device.DEFAULT.split(":")[0] != "NULL"


@pytest.mark.parametrize("m,k,n,copies", [(128, 512, 10, 1), (64, 96, 3, 1), (128, 512, 16, 0), (8, 512, 10, 0), (128, 8, 10, 0)])
def test_narrow_columns(m: int, k: int, n: int, copies: int):
  """x @ W with W (K, N) and N narrower than a vector: W copied contiguous along K (not when N is a multiple of 16, with fewer
  than 16 rows of x, or with a reduction shorter than 16)."""
  rng = np.random.default_rng(m + k + n)
  xs, ws = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
  x, w = Tensor(xs).realize(), Tensor(ws).realize()
  assert kernels(x @ w) == 1 + copies
  with Context(RELAYOUT_NARROW=0): assert kernels(x @ w) == 1
  if runs(): np.testing.assert_allclose((x @ w).numpy(), xs @ ws, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n,copies", [(128, 10, 512, 1), (32, 3, 64, 1), (32, 16, 512, 0), (128, 10, 8, 0)])
def test_short_reduction_of_a_transposed_operand(m: int, k: int, n: int, copies: int):
  """g @ W.T with W (N, K) and K shorter than a vector (a classifier's input gradient): W.T copied contiguous along N (from K = 16
  on, it is the few-vectors form's, or packed into panels from 64 rows: pack.py)."""
  rng = np.random.default_rng(m + k + n)
  gs, ws = rng.standard_normal((m, k), np.float32), rng.standard_normal((n, k), np.float32)
  g, w = Tensor(gs).realize(), Tensor(ws).realize()
  assert kernels(g @ w.T) == 1 + copies
  if runs(): np.testing.assert_allclose((g @ w.T).numpy(), gs @ ws.T, rtol=1e-4, atol=1e-4)


def test_weight_gradient_copies_both_operands():
  """x.T @ g (512 x 128 @ 128 x 10): g copied contiguous along the batch, x.T too (it is read across it)."""
  rng = np.random.default_rng(1)
  xs, gs = rng.standard_normal((128, 512), np.float32), rng.standard_normal((128, 10), np.float32)
  x, g = Tensor(xs).realize(), Tensor(gs).realize()
  assert kernels(x.T @ g) == 3
  if runs(): np.testing.assert_allclose((x.T @ g).numpy(), xs.T @ gs, rtol=1e-4, atol=1e-4)


def test_mlp_gradients_match_numpy():
  """A 2-layer MLP with (in, out) weights and 10 outputs: loss and every gradient as numpy's (float64) formulas."""
  if not runs(): pytest.skip("runs kernels")
  rng = np.random.default_rng(2)
  xs, w1s, w2s = rng.standard_normal((64, 48), np.float32), rng.standard_normal((48, 32), np.float32) * 0.2, rng.standard_normal((32, 10), np.float32) * 0.2
  x, w1, w2 = Tensor(xs), Tensor(w1s, requires_grad=True), Tensor(w2s, requires_grad=True)
  out = (x @ w1).relu() @ w2
  out.square().mean().backward()
  h = np.maximum(xs.astype(np.float64) @ w1s, 0)
  o = h @ w2s
  do = 2 * o / o.size
  dh = (do @ w2s.T) * (h > 0)
  np.testing.assert_allclose(out.numpy(), o, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(w2.grad.numpy(), h.T @ do, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(w1.grad.numpy(), xs.T @ dh, rtol=1e-4, atol=1e-5)


def test_computed_operands_are_computed_into_the_copy():
  """relu(x + b) @ W (W (512, 10)) and relu(x + b).T @ softmax(y): the computed operands are computed once, into the copies,
  and the values are numpy's."""
  rng = np.random.default_rng(3)
  xs, bs, ys, ws = (rng.standard_normal(s, np.float32) for s in ((128, 512), (512,), (128, 10), (512, 10)))
  x, b, y, w = (Tensor(a).realize() for a in (xs, bs, ys, ws))
  h, hs = (x + b).relu(), np.maximum(xs + bs, 0)
  e = np.exp(ys * 2 - (ys * 2).max(1, keepdims=True))
  sm = e / e.sum(1, keepdims=True)
  assert kernels(h @ w) == 2
  with Context(RELAYOUT_NARROW=0): assert kernels(h @ w) == 1
  if runs():
    np.testing.assert_allclose((h @ w).numpy(), hs @ ws, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose((h.T @ (y * 2).softmax(1)).numpy(), hs.T @ sm, rtol=1e-4, atol=1e-4)
