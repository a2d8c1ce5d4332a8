"""End to end: a small CNN (conv -> relu -> max pool -> linear) learns horizontal vs vertical bars with Adam."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, nn
from tinygrad.nn import optim


@pytest.fixture(autouse=True)
def training():
  old = Tensor.training
  Tensor.training = True
  yield
  Tensor.training = old


NOISE = 0.2


def make_bars(n: int, size: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
  """Noise images with one horizontal (label 0) or vertical (label 1) bar across the image at a random row/column."""
  rng = np.random.default_rng(seed)
  x = rng.uniform(0, NOISE, size=(n, 1, size, size)).astype(np.float32)
  y = rng.permutation(np.arange(n) % 2)
  for i, line in enumerate(rng.integers(0, size, size=n)):
    if y[i] == 0: x[i, 0, line, :] = 1.0
    else: x[i, 0, :, line] = 1.0
  return x, y.astype(np.int32)


class TinyCNN:
  def __init__(self, filters: int = 4, pool: int = 6):
    self.pool = pool
    self.conv = nn.Conv2d(1, filters, 3)
    self.fc = nn.Linear(filters * (6 // pool) ** 2, 2)

  def parameters(self) -> list[Tensor]: return [self.conv.weight, self.conv.bias, self.fc.weight, self.fc.bias]

  def __call__(self, x: Tensor) -> Tensor:
    x = self.conv(x).relu().max_pool2d(self.pool)  # (n, f, 6, 6) -> (n, f, 6/pool, 6/pool)
    return self.fc(x.reshape(x.shape[0], -1))


def train(steps: int, batch: int, lr: float, seed: int = 0, **model_kw) -> tuple[float, list[float]]:
  Tensor.manual_seed(seed)
  xs, ys = make_bars(64)
  model = TinyCNN(**model_kw)
  opt = optim.Adam(model.parameters(), lr=lr)
  rng, losses = np.random.default_rng(1), []
  for _ in range(steps):
    idx = rng.choice(len(xs), size=batch, replace=False)
    opt.zero_grad()
    loss = model(Tensor(xs[idx])).sparse_categorical_crossentropy(Tensor(ys[idx]))
    loss.backward()
    opt.step()
    losses.append(loss.item())
  Tensor.training = False
  xt, yt = make_bars(64, seed=7)
  acc = float((model(Tensor(xt)).argmax(1).numpy() == yt).mean())
  return acc, losses


def test_cnn_learns_bars():
  acc, losses = train(steps=10, batch=12, lr=0.1)
  assert all(np.isfinite(losses)), losses
  assert np.mean(losses[-3:]) < np.mean(losses[:3]) * 0.5, losses
  assert acc >= 0.9, (acc, losses)


@pytest.mark.slow
def test_cnn_learns_bars_longer():
  from tinygrad import Device
  # 40 eager steps of batch 32 in the UOp interpreter take minutes (the longest test of the PYTHON session by far);
  # test_cnn_learns_bars trains there, this one on the compiled devices
  if Device.DEFAULT == "PYTHON": pytest.skip("40 training steps in the interpreter: run on a compiled device")
  acc, losses = train(steps=40, batch=32, lr=0.05, filters=8, pool=3)
  assert acc >= 0.97 and np.mean(losses[-5:]) < 0.1, (acc, losses[-5:])
