"""Schedules as UOps: Tensor.schedule_linear returns one LINEAR of CALLs without running it, run_linear runs it; training an
MNIST-shaped MLP that way gives the very weights that realize gives."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Tensor, nn
from tinygrad.engine.linear import from_linear, run_linear
from tinygrad.uop.ops import Ops

pytestmark = pytest.mark.skipif(is_null_device(), reason="the NULL device runs no kernels")


class MNISTMLP:
  """28x28 images in, 10 classes out (weights from numpy: PYTHON would spend most of the test drawing random numbers)."""
  def __init__(self, hidden: int = 8):
    rng = np.random.default_rng(0)
    self.l1, self.l2 = nn.Linear(784, hidden), nn.Linear(hidden, 10)
    for p in nn.state.get_parameters(self): p.replace(Tensor(rng.uniform(-0.1, 0.1, p.shape).astype(np.float32), requires_grad=True))

  def __call__(self, x: Tensor) -> Tensor: return self.l2(self.l1(x).relu())


def train(steps: int, linear: bool) -> list[np.ndarray]:
  model = MNISTMLP()
  params = nn.state.get_parameters(model)
  opt = nn.optim.SGD(params, lr=0.05, momentum=0.9)
  rng = np.random.default_rng(1)
  x, y = Tensor(rng.random((4, 784), dtype=np.float32)), Tensor(rng.integers(0, 10, 4, dtype=np.int32))
  with Tensor.train():
    for _ in range(steps):
      opt.zero_grad()
      model(x).sparse_categorical_crossentropy(y).backward()
      if linear:
        lin = Tensor.schedule_linear(*opt.schedule_step())
        assert lin.op is Ops.LINEAR and all(c.op is Ops.CALL for c in lin.src) and len(lin.src) > 3
        run_linear(lin)
      else: opt.step()
  return [p.numpy() for p in params]


def test_mlp_trained_with_run_linear_equals_realize():
  want, got = train(2, linear=False), train(2, linear=True)
  assert len(want) == 4
  for w, g in zip(want, got): np.testing.assert_array_equal(g, w)
  assert not np.array_equal(want[2], MNISTMLP().l2.weight.numpy())  # the steps did change the weights


def test_schedule_linear_runs_nothing_until_run_linear():
  a = Tensor([1.0, 2.0, 3.0])
  b = (a * 2).contiguous()
  c = b.sum()
  lin = Tensor.schedule_linear(c)
  items = from_linear(lin)
  assert [it.ast.op for it in items] == [Ops.SINK, Ops.SINK]  # a * 2 into b's buffer, then its sum
  assert all(call.src == tuple(it.bufs) for call, it in zip(lin.src, items))
  assert not any(t.uop.op is Ops.CONTIGUOUS for t in (b, c))  # the tensors refer to the buffers the schedule fills
  run_linear(lin)
  assert c.item() == 12.0 and b.tolist() == [2.0, 4.0, 6.0]
  run_linear(lin)  # a schedule is a value: it can run again
  assert c.item() == 12.0


def test_run_linear_rejects_other_uops():
  with pytest.raises(TypeError, match="LINEAR"):
    run_linear(Tensor([1.0]).uop)
