"""End to end: a tiny MLP trained with plain SGD on two Gaussian blobs; and the random number generators."""
import math

import numpy as np
import pytest
from tinygrad import Tensor, dtypes


def make_blobs(n: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  y = np.arange(n) % 2
  centers = np.array([[-1.5, -1.0], [1.5, 1.0]])
  x = centers[y] + rng.normal(0, 0.6, size=(n, 2))
  return x.astype(np.float32), y.astype(np.int32)


class MLP:
  def __init__(self, n_in: int = 2, hidden: int = 8, n_out: int = 2):
    # weights as (out, in) like nn.Linear; kaiming_uniform bounds by fan-in = prod(shape[1:])
    self.w1 = Tensor.kaiming_uniform(hidden, n_in, requires_grad=True)
    self.b1 = Tensor.zeros(hidden, requires_grad=True).contiguous()
    self.w2 = Tensor.scaled_uniform(n_out, hidden, requires_grad=True)
    self.b2 = Tensor.zeros(n_out, requires_grad=True).contiguous()
    Tensor.realize_all(*self.params)

  @property
  def params(self) -> list[Tensor]: return [self.w1, self.b1, self.w2, self.b2]

  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.w1.T, self.b1).relu().linear(self.w2.T, self.b2)


def test_mlp_trains_with_sgd():
  xs, ys = make_blobs()
  X, Y = Tensor(xs), Tensor(ys)
  model = MLP()
  for p in model.params:
    assert p.requires_grad is True
    assert p.dtype == dtypes.float32
  lr, losses = 0.5, []
  for _ in range(25):  # the PYTHON device interprets every op: a small net and few steps keep this around 10 s there
    loss = model(X).sparse_categorical_crossentropy(Y)
    loss.backward()
    Tensor.realize_all(loss, *[p.grad for p in model.params])
    losses.append(loss.item())
    for p in model.params:
      assert p.grad is not None and p.grad.shape == p.shape
      p.assign(p - lr * p.grad)
    Tensor.realize_all(*model.params)
    for p in model.params: p.grad = None
  assert all(math.isfinite(v) for v in losses), losses
  assert losses[-1] < losses[0] * 0.5, losses
  assert np.mean(losses[-5:]) < np.mean(losses[:5]), losses
  pred = model(X).argmax(1)
  assert pred.dtype == dtypes.int32
  acc = (pred == Y).float().mean().item()
  np_acc = float((pred.numpy() == ys).mean())
  assert acc == pytest.approx(np_acc)
  assert acc >= 0.9, (acc, losses)


def test_sgd_step_updates_in_place():
  w = Tensor([1.0, 2.0, 3.0], requires_grad=True).realize()
  (w * w).sum().backward()
  w.assign(w - 0.1 * w.grad).realize()
  np.testing.assert_allclose(w.numpy(), [0.8, 1.6, 2.4], rtol=1e-6)
  w.grad = None
  (w * 2).sum().backward()
  np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0, 2.0])


def test_rand_reproducible_and_in_range():
  Tensor.manual_seed(0)
  a = Tensor.rand(100).numpy()
  Tensor.manual_seed(0)
  b = Tensor.rand(100).numpy()
  np.testing.assert_array_equal(a, b)
  assert a.dtype == np.float32 and a.shape == (100,)
  assert (a >= 0).all() and (a < 1).all()
  assert 0.4 < a.mean() < 0.6
  assert len(np.unique(a)) > 90
  c = Tensor.rand(100).numpy()  # the next draw continues the stream
  assert not np.array_equal(a, c)
  Tensor.manual_seed(1)
  assert not np.array_equal(a, Tensor.rand(100).numpy())


def test_rand_shapes_and_dtypes():
  t = Tensor.rand(2, 3)
  assert t.shape == (2, 3) and t.dtype == dtypes.float32
  assert Tensor.rand((4, 2)).shape == (4, 2)
  h = Tensor.rand(8, dtype=dtypes.float16)
  assert h.dtype == dtypes.float16
  v = h.float().numpy()
  assert (v >= 0).all() and (v <= 1).all()


def test_randn_statistics():
  Tensor.manual_seed(0)
  z = Tensor.randn(1000).numpy()
  assert z.shape == (1000,) and z.dtype == np.float32
  assert np.isfinite(z).all()
  assert abs(z.mean()) < 0.15
  assert 0.85 < z.std() < 1.15
  assert (z < 0).mean() == pytest.approx(0.5, abs=0.08)
  Tensor.manual_seed(0)
  np.testing.assert_array_equal(z, Tensor.randn(1000).numpy())


def test_uniform_and_init_bounds():
  u = Tensor.uniform(200, low=-2.0, high=5.0).numpy()
  assert (u >= -2).all() and (u < 5).all() and u.min() < 0 < u.max()
  s = Tensor.scaled_uniform(10, 10).numpy()
  assert np.abs(s).max() <= 0.1 + 1e-6
  k = Tensor.kaiming_uniform(8, 6).numpy()
  bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + 0.01 ** 2)) / math.sqrt(6)
  assert np.abs(k).max() <= bound + 1e-6
  assert np.abs(k).max() > bound / 2


# ---- assign: the in-place update the optimizer relies on


def test_repeated_iadd():
  w = Tensor([1.0, 2.0]).realize()
  w += 1
  w += 1
  np.testing.assert_allclose(w.numpy(), [3.0, 4.0])


def test_two_pending_assigns():
  w = Tensor([1.0, 2.0]).realize()
  w.assign(w * 2)
  w.assign(w * 3)
  np.testing.assert_allclose(w.numpy(), [6.0, 12.0])
  w.assign(w + 1).realize()
  np.testing.assert_allclose(w.numpy(), [7.0, 13.0])


def test_assign_keeps_buffer_and_updates_views():
  a = Tensor([1.0, 2.0, 3.0, 4.0]).realize()
  v = a.reshape(2, 2)
  a.assign(a * 10).realize()
  np.testing.assert_allclose(v.numpy(), [[10.0, 20.0], [30.0, 40.0]])


@pytest.mark.parametrize("view,np_view", [(lambda w: w.flip(0), lambda a: a[::-1]), (lambda w: w.T, lambda a: a.T),
                                           (lambda w: w.pad(((1, 0), (0, 0)))[:3], lambda a: np.pad(a, ((1, 0), (0, 0)))[:3])],
                         ids=["flip", "T", "shift"])
def test_assign_reading_target_through_a_view(view, np_view):
  # the value reads the target in another order than it writes it: tinygrad refuses ("self operand of augmented assign must be
  # contiguous"); computing it in place without a copy would read already-overwritten elements. Either raise or get it right.
  a = np.arange(9, dtype=np.float32).reshape(3, 3)
  w = Tensor(a).realize()
  try:
    out = w.assign(view(w) + 0).numpy()
  except RuntimeError:
    return
  np.testing.assert_array_equal(out, np_view(a))


def test_optimizer_updates_run_in_place():
  """Adam's m, v and weight updates each write their buffer directly: the weight's gradient reads the weight everywhere, but
  from its own buffer, written by an earlier kernel; and m's update, which reads that gradient, runs before the weight's. (They
  were computed into temporaries and copied: 7 kernels the size of the weight instead of 4.)"""
  from tinygrad import nn
  from tinygrad.helpers import Context
  Tensor.manual_seed(0)
  w = Tensor.randn(8, 16).realize()
  w.requires_grad = True
  x = Tensor.randn(4, 16).realize()
  opt = nn.optim.Adam([w], lr=0.1)
  w0 = w.numpy()
  with Context(TRAINING=1):
    loss = (x @ w.T).square().mean()
    loss.backward()
    g = w.grad.numpy()
    updates = opt.schedule_step()
    items = Tensor.schedule(loss, *updates)
    assert sum(1 for si in items if si.bufs[0].size == w.numel()) == 4  # gradient, m, v, w
    Tensor.realize(loss, *updates)
  # one Adam step from zero moments moves each weight by lr * g / (|g| + eps)
  np.testing.assert_allclose(w.numpy(), w0 - 0.1 * g / (np.abs(g) + 1e-8), rtol=1e-5, atol=1e-6)


def test_assigns_that_read_each_others_old_values_stay_a_parallel_assignment():
  # values built before either assign: each reads the other's old buffer, so no order runs both in place (a swap)
  a, b = Tensor([1.0, 2.0, 3.0]).realize(), Tensor([4.0, 5.0, 6.0]).realize()
  va, vb = b * 1, a * 1
  a.assign(va)
  b.assign(vb)
  Tensor.realize(a, b)
  assert a.tolist() == [4.0, 5.0, 6.0] and b.tolist() == [1.0, 2.0, 3.0]
  # a kernel that reads the old value runs before the assign that overwrites it, and one reading it elsewhere still copies
  w = Tensor([1.0, 2.0, 3.0]).realize()
  old = w * 10
  w.assign(w + 1)
  Tensor.realize(w, old)
  assert old.tolist() == [10.0, 20.0, 30.0] and w.tolist() == [2.0, 3.0, 4.0]
  w.assign(w.flip(0) - w.sum()).realize()
  assert w.tolist() == [-5.0, -6.0, -7.0]


def test_assign_after_asking_for_its_schedule():
  # schedule() only looks: the assign must still run when realized
  w = Tensor([1.0, 2.0]).realize()
  w.assign(w - 1)
  assert len(w.schedule()) == 1
  w.realize()
  np.testing.assert_allclose(w.numpy(), [0.0, 1.0])
