"""Small whole programs as a tinygrad user writes them (model, optimizer steps, lazy reads after the step), checked against
numpy or against the same program recomputed by hand. Each pins a behaviour where our package differed from tinygrad 0.14."""
import numpy as np
import pytest
from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict


def _lstm_model(seed: int = 0):
  cell, head = nn.LSTMCell(3, 4), nn.Linear(4, 1)
  rng = np.random.default_rng(seed)
  for obj in (cell, head):
    load_state_dict(obj, {k: Tensor((rng.standard_normal(v.shape) * 0.3).astype(np.float32)) for k, v in get_state_dict(obj).items()},
                    verbose=False)
  return cell, head


def _lstm_loss(cell, head, xs: Tensor, y: Tensor) -> Tensor:
  hc = None
  for t in range(xs.shape[1]): hc = cell(xs[:, t], hc)
  assert hc is not None
  return (head(hc[0]) - y).square().mean() + 0.1 * hc[1].abs().mean()


def test_lstm_loss_read_after_the_step_is_the_loss_at_the_new_weights():
  # tinygrad's LSTMCell returns (h, c) lazily: `loss.backward(); opt.step(); loss.item()` computes the loss from the updated
  # weights, all of it (ours made h and c contiguous, so the cell states kept the values from before the step)
  rng = np.random.default_rng(1)
  xs, y = Tensor(rng.standard_normal((2, 3, 3)).astype(np.float32)), Tensor(rng.standard_normal((2, 1)).astype(np.float32))
  cell, head = _lstm_model()
  opt = nn.optim.SGD(get_parameters(cell) + get_parameters(head), lr=0.5)
  with Context(TRAINING=1):
    loss = _lstm_loss(cell, head, xs, y)
    h, c = cell(xs[:, 0])
    assert h.uop.op.name != "CONTIGUOUS" and c.uop.op.name != "CONTIGUOUS"
    loss.backward()
    opt.step()
    after = loss.item()
  fresh = _lstm_loss(cell, head, xs, y).item()
  assert after == pytest.approx(fresh, rel=1e-5, abs=1e-6)


def test_lstm_cell_matches_numpy():
  cell, _ = _lstm_model(2)
  rng = np.random.default_rng(3)
  x, h0, c0 = (rng.standard_normal((2, n)).astype(np.float32) for n in (3, 4, 4))
  h, c = cell(Tensor(x), (Tensor(h0), Tensor(c0)))
  sd = {k: v.numpy() for k, v in get_state_dict(cell).items()}
  gates = x @ sd["weight_ih"].T + sd["bias_ih"] + h0 @ sd["weight_hh"].T + sd["bias_hh"]
  i, f, g, o = np.split(gates, 4, axis=1)
  sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
  c_ref = sig(f) * c0 + sig(i) * np.tanh(g)
  np.testing.assert_allclose(c.numpy(), c_ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(h.numpy(), sig(o) * np.tanh(c_ref), rtol=1e-5, atol=1e-6)


def test_assign_broadcasts_and_takes_python_and_numpy_values():
  a = Tensor.zeros(3, 4).contiguous().realize()
  a.assign(Tensor.arange(4).float()).realize()
  np.testing.assert_array_equal(a.numpy(), np.tile(np.arange(4, dtype=np.float32), (3, 1)))
  a.assign(Tensor([[1.0], [2.0], [3.0]])).realize()
  np.testing.assert_array_equal(a.numpy(), np.repeat(np.array([[1.0], [2.0], [3.0]], np.float32), 4, axis=1))
  b = Tensor.zeros(2).contiguous().realize()
  assert b.assign([1, 2]).realize().tolist() == [1.0, 2.0] and b.dtype == dtypes.float32
  assert b.assign(np.array([1.5, 2.5])).realize().tolist() == [1.5, 2.5] and b.dtype == dtypes.float32
  with pytest.raises(ValueError, match="assign shape mismatch"): a.assign(Tensor.ones(2, 3, 4))
  with pytest.raises(ValueError, match="assign shape mismatch"): a.assign(Tensor.ones(3, 3))


def test_assign_dtype_mismatch_is_a_runtime_error_and_a_type_error():
  a = Tensor.zeros(3).contiguous().realize()
  for err in (RuntimeError, TypeError):  # tinygrad raises RuntimeError
    with pytest.raises(err, match="assign dtype mismatch"): a.assign(Tensor.ones(3, dtype=dtypes.half))


def test_tinyjit_training_step_replays_and_counts_calls():
  rng = np.random.default_rng(4)
  w0 = (rng.standard_normal((3, 2)) * 0.5).astype(np.float32)
  w = Tensor(w0, requires_grad=True).realize()
  opt = nn.optim.SGD([w], lr=0.1)
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = ((x @ w - y) ** 2).mean().backward()
    opt.step()
    return loss.realize()
  ref, losses = w0.copy(), []
  with Context(TRAINING=1):
    for i in range(4):
      x, y = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
      losses.append(step(Tensor(x), Tensor(y)).item())
      err = x @ ref - y
      ref = ref - 0.1 * (2 * x.T @ err / err.size)
      # the loss is realized after opt.step() inside the step: it reads the updated weight (as in tinygrad)
      assert losses[-1] == pytest.approx(float(((x @ ref - y) ** 2).mean()), rel=1e-5)
      assert step.cnt == i + 1  # the number of calls, as tinygrad's TinyJit.cnt
  np.testing.assert_allclose(w.numpy(), ref, rtol=1e-5, atol=1e-6)
