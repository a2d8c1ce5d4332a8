"""Data parallel training: a batch sharded over two (or three) instances of the session's device, the weights replicated.

The gradients of the replicated weights are all-reduced, so every step must give the same weights as training on one
device with the whole batch."""
import contextlib

import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Device, Tensor, nn
from tinygrad.engine.realize import buffer_of
from tinygrad.helpers import Context
from tinygrad.jit import TinyJit
from tinygrad.nn.state import get_parameters

pytestmark = [pytest.mark.skipif(is_null_device(), reason="the NULL device has no data to read back"), pytest.mark.devices(2)]

KIND = Device.DEFAULT.split(":")[0]


def devices(n: int) -> tuple[str, ...]: return tuple(Device.canonicalize(f"{KIND}:{i}") for i in range(n))


@contextlib.contextmanager
def training():
  prev, Tensor.training = Tensor.training, True
  try: yield
  finally: Tensor.training = prev


class MLP:
  def __init__(self, n_in: int = 5, hidden: int = 8, n_out: int = 3):
    self.l1, self.l2 = nn.Linear(n_in, hidden), nn.Linear(hidden, n_out)

  def __call__(self, x: Tensor) -> Tensor: return self.l2(self.l1(x).relu())


def make_model(init: list[np.ndarray] | None, devs: tuple[str, ...] | None) -> tuple[MLP, list[np.ndarray]]:
  """An MLP whose weights are `init` (or fresh), replicated over devs when given."""
  Tensor.manual_seed(1)
  model = MLP()
  params = get_parameters(model)
  if init is None: init = [p.numpy() for p in params]
  for p, v in zip(params, init):
    p.replace(Tensor(v))
    if devs is not None: p.shard_(devs)
    p.requires_grad_(True).realize()
  return model, init


def data(n: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  return rng.standard_normal((n, 5)).astype(np.float32), rng.integers(0, 3, n).astype(np.int32)


def train(make_opt, devs: tuple[str, ...] | None, init: list[np.ndarray] | None = None, steps: int = 3, batch: int = 8,
          jit: bool = False) -> tuple[list[np.ndarray], list[float], list[np.ndarray]]:
  model, init = make_model(init, devs)
  opt = make_opt(get_parameters(model))

  def step(x: Tensor, y: Tensor) -> Tensor:
    if devs is not None: x, y = x.shard(devs, axis=0), y.shard(devs, axis=0)
    loss = model(x).sparse_categorical_crossentropy(y)
    opt.zero_grad()
    loss.backward()
    return loss.realize(*opt.schedule_step())

  run = TinyJit(step) if jit else step
  losses = []
  with training():
    for i in range(steps):
      xs, ys = data(batch, seed=i)
      losses.append(run(Tensor(xs), Tensor(ys)).item())
  return [p.numpy() for p in get_parameters(model)], losses, init


OPTIMIZERS = {
  "sgd": lambda ps: nn.optim.SGD(ps, lr=0.1),
  "sgd_momentum": lambda ps: nn.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3),
  "adam": lambda ps: nn.optim.Adam(ps, lr=0.01),
}


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_data_parallel_matches_one_device(opt):
  ref_w, ref_loss, init = train(OPTIMIZERS[opt], None)
  dp_w, dp_loss, _ = train(OPTIMIZERS[opt], devices(2), init)
  np.testing.assert_allclose(dp_loss, ref_loss, rtol=1e-5, atol=1e-5)
  for a, b in zip(dp_w, ref_w): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
  assert not np.allclose(ref_w[0], init[0])  # it did train


@pytest.mark.devices(3)
@pytest.mark.parametrize("mode", ["naive", "ring"])
def test_three_devices_uneven_batch(mode):
  """7 samples over 3 devices (3, 2, 2): the mean loss's all-reduced sums still match the whole batch."""
  with Context(ALLREDUCE=mode):
    ref_w, _, init = train(OPTIMIZERS["sgd"], None, batch=7, steps=2)
    dp_w, _, _ = train(OPTIMIZERS["sgd"], devices(3), init, batch=7, steps=2)
  for a, b in zip(dp_w, ref_w): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_jitted_data_parallel_step():
  ref_w, ref_loss, init = train(OPTIMIZERS["sgd_momentum"], None, steps=4)
  dp_w, dp_loss, _ = train(OPTIMIZERS["sgd_momentum"], devices(2), init, steps=4, jit=True)
  np.testing.assert_allclose(dp_loss, ref_loss, rtol=1e-5, atol=1e-5)
  for a, b in zip(dp_w, ref_w): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_weights_stay_replicated_in_place():
  model, _ = make_model(None, devices(2))
  params = get_parameters(model)
  before = [[id(p.uop.src[i].base) for i in range(2)] for p in params]
  opt = nn.optim.SGD(params, lr=0.1)
  xs, ys = data()
  with training():
    model(Tensor(xs).shard(devices(2), 0)).sparse_categorical_crossentropy(Tensor(ys).shard(devices(2), 0)).backward()
    opt.step()
  for p, ids in zip(params, before):
    assert p.device == devices(2) and [id(p.uop.src[i].base) for i in range(2)] == ids  # updated in the same buffers
    np.testing.assert_array_equal(*(np.frombuffer(buffer_of(p.uop.src[i].base).as_bytes(), dtype=np.float32) for i in range(2)))
