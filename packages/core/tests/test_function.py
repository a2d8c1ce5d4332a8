"""@function: the body's graph is traced once per input signature and reused; results, gradients and training equal the
undecorated function's; precompile=True compiles the kernels at the first call."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Tensor, function, nn
from tinygrad.engine import realize

pytestmark = pytest.mark.skipif(is_null_device(), reason="the NULL device runs no kernels")


class MLP:
  def __init__(self, seed: int):
    rng = np.random.default_rng(seed)
    self.l1, self.l2 = nn.Linear(8, 16), nn.Linear(16, 4)
    for p in nn.state.get_parameters(self): p.replace(Tensor(rng.uniform(-0.5, 0.5, p.shape).astype(np.float32), requires_grad=True))
    self.traced = 0

  def forward(self, x: Tensor) -> Tensor: return self.l2(self.l1(x).relu())

  @function
  def __call__(self, x: Tensor) -> Tensor:
    self.traced += 1
    return self.forward(x)


def test_body_traced_once_per_signature_and_results_equal():
  m = MLP(0)
  x1, x2 = Tensor.rand(2, 8).realize(), Tensor.rand(2, 8).realize()
  np.testing.assert_allclose(m(x1).numpy(), m.forward(x1).numpy(), rtol=1e-6)
  np.testing.assert_allclose(m(x2).numpy(), m.forward(x2).numpy(), rtol=1e-6)
  np.testing.assert_allclose(m(x1 * 2).numpy(), m.forward(x1 * 2).numpy(), rtol=1e-6)  # a lazy input too
  assert m.traced == 1
  assert m(Tensor.rand(5, 8)).shape == (5, 4) and m.traced == 2  # another shape: traced again
  other = MLP(1)  # another instance: its own weights, its own trace
  assert not np.allclose(other(x1).numpy(), m(x1).numpy()) and other.traced == 1


def test_training_through_function_equals_plain():
  x, y = Tensor.rand(4, 8).realize(), Tensor([0, 1, 2, 3])
  losses, weights, traced = [], [], []
  for use_function in (True, False):
    m = MLP(2)
    opt = nn.optim.SGD(nn.state.get_parameters(m), lr=0.1)
    with Tensor.train():
      for _ in range(3):
        opt.zero_grad()
        loss = (m(x) if use_function else m.forward(x)).sparse_categorical_crossentropy(y)
        loss.backward()
        opt.step()
    losses.append(loss.item())
    weights.append(m.l1.weight.numpy())
    traced.append(m.traced)
  assert traced == [1, 0]  # three steps, one trace: the graph read the weights each step wrote
  np.testing.assert_allclose(weights[0], weights[1], rtol=1e-6, atol=1e-7)
  assert losses[0] == pytest.approx(losses[1], rel=1e-6)


def test_precompile_compiles_at_the_first_call():
  @function(precompile=True)
  def f(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return (a @ b).relu(), (a * 3).sum(axis=1)

  a, b = Tensor.rand(3, 5).realize(), Tensor.rand(5, 2).realize()
  before = len(realize._runner_cache)
  out = f(a, b)
  compiled = len(realize._runner_cache) - before
  assert compiled >= 1 and isinstance(out, tuple)
  Tensor.realize_all(*out)
  assert len(realize._runner_cache) - before == compiled  # running it compiled nothing more
  np.testing.assert_allclose(out[0].numpy(), np.maximum(a.numpy() @ b.numpy(), 0), rtol=1e-5)


def test_function_errors():
  @function
  def realizes(x: Tensor) -> Tensor: return x + x.sum().item()
  with pytest.raises(RuntimeError, match="ran kernels while traced"):
    realizes(Tensor.rand(3).realize())

  @function
  def not_a_tensor(x: Tensor) -> float: return 1.0
  with pytest.raises(TypeError, match="must return a Tensor"):
    not_a_tensor(Tensor.rand(3))
