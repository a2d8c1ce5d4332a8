"""Tensors on several devices: shard/replicate, ops on sharded tensors, the all-reduces, autograd and TinyJit.

Every test uses instances of the session's device kind (DEV=CPU -> CPU, CPU:1, ...; DEV=PYTHON -> PYTHON, PYTHON:1, ...).
On NULL only the compile_only tests run: they realize on NULL:0..3, where kernels compile and copies move nothing."""
import numpy as np
import pytest
from conftest import is_null_device, require_instances
from tinygrad import Device, Tensor, dtypes
from tinygrad.engine.realize import buffer_of
from tinygrad.helpers import Context
from tinygrad.jit import TinyJit
from tinygrad.schedule.multi import allreduce_mode, split_bounds
from tinygrad.uop.ops import Ops

KIND = Device.DEFAULT.split(":")[0]


def devices(n: int) -> tuple[str, ...]: return tuple(Device.canonicalize(f"{KIND}:{i}") for i in range(n))


D2, D3, D4 = devices(2), devices(3), devices(4)
# every test needs two instances, some more: on a machine with fewer GPUs they skip, saying why (conftest.py)
pytestmark = pytest.mark.devices(2)


@pytest.fixture(autouse=True)
def _skip_null_unless_compile_only(request):
  if is_null_device() and request.node.get_closest_marker("compile_only") is None: pytest.skip("the NULL device has no data to read back")


def arr(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
  return np.random.uniform(lo, hi, size=shape).astype(np.float32)


def close(t: Tensor, ref: np.ndarray, atol: float = 1e-5) -> None:
  got = t.numpy()
  assert got.shape == ref.shape, (got.shape, ref.shape)
  np.testing.assert_allclose(got, ref, atol=atol, rtol=1e-5)


def copies(items) -> list: return [si for si in items if si.ast.op is Ops.COPY]


# ---- shard, gather

@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_shard_roundtrip(axis):
  a = arr(4, 6)
  x = Tensor(a).shard(D2, axis=axis)
  assert x.device == D2 and x.shape == (4, 6) and x.dtype == dtypes.float32
  close(x, a)


@pytest.mark.devices(3)
def test_shards_are_buffers_on_their_devices():
  a = arr(5, 3)
  x = Tensor(a).shard(D3, axis=0).realize()
  assert x.uop.op is Ops.MULTI and x.uop.arg == (0, ((0, 2), (2, 4), (4, 5)))
  for part, dev, (b, e) in zip(x.uop.src, D3, x.uop.arg[1]):
    buf = buffer_of(part.base)
    assert buf.device == dev and buf.is_allocated() and buf.size == (e - b) * 3
    np.testing.assert_array_equal(np.frombuffer(buf.as_bytes(), dtype=np.float32).reshape(e - b, 3), a[b:e])


def test_replicated_is_whole_on_every_device():
  a = arr(3, 2)
  x = Tensor(a).shard(D2).realize()
  for part, dev in zip(x.uop.src, D2):
    assert buffer_of(part.base).device == dev
    np.testing.assert_array_equal(np.frombuffer(buffer_of(part.base).as_bytes(), dtype=np.float32).reshape(3, 2), a)


def test_shard_in_place_keeps_requires_grad():
  t = Tensor(arr(4, 2), requires_grad=True)
  assert t.shard_(D2, axis=0) is t
  assert t.device == D2 and t.requires_grad


@pytest.mark.devices(3)
def test_uneven_split_and_bounds():
  assert split_bounds(5, 2) == ((0, 3), (3, 5))
  assert split_bounds(4, 4) == ((0, 1), (1, 2), (2, 3), (3, 4))
  with pytest.raises(ValueError, match="at least one element"): split_bounds(1, 2)
  a = arr(7, 2)
  close(Tensor(a).shard(D3, axis=0), a)


def test_to_tolist_item_and_reshard():
  a = arr(4, 2)
  x = Tensor(a).shard(D2, axis=0)
  y = x.to(D2[1])
  assert y.device == D2[1]
  close(y, a)
  assert np.allclose(np.array(x.tolist()), a)
  assert abs(x.sum().item() - float(a.sum())) < 1e-4
  r = x.shard(D2, axis=1)  # resharding gathers and splits again
  assert r.uop.arg[0] == 1
  close(r, a)
  close(Tensor(a).to(D2) + 1, a + 1)  # .to(tuple) replicates


def test_creation_on_a_tuple_of_devices():
  close(Tensor([[1.0, 2.0], [3.0, 4.0]], device=D2) * 2, np.array([[2, 4], [6, 8]], np.float32))
  close(Tensor.ones(2, 3, device=D2).sum(1), np.full(2, 3, np.float32))
  close(Tensor.arange(5, device=D2).float(), np.arange(5, dtype=np.float32))
  e = Tensor.empty(2, 2, device=D2)
  assert e.device == D2 and e.shape == (2, 2)
  r = Tensor.rand(3, device=D2).numpy()
  assert ((r >= 0) & (r < 1)).all()


def test_bad_devices():
  with pytest.raises(ValueError, match="distinct"): Tensor(arr(2)).shard((D2[0], D2[0]))
  with pytest.raises(ValueError, match="at least one device"): Tensor(arr(2)).shard(())
  with pytest.raises(ValueError, match="at least one element"): Tensor(arr(1, 3)).shard(D2, axis=0)
  with pytest.raises(TypeError, match="tuple of devices"): Tensor(arr(2)).shard(D2[0])


# ---- elementwise

def test_elementwise_same_sharding():
  a, b = arr(4, 3), arr(4, 3)
  x, y = Tensor(a).shard(D2, 0), Tensor(b).shard(D2, 0)
  close(x * y + 1, a * b + 1)
  close((x > y).where(x, -y), np.where(a > b, a, -b))
  close(x.exp2().cast(dtypes.float16).float(), np.exp2(a).astype(np.float16).astype(np.float32), atol=2e-2)
  close(x.relu().sqrt(), np.sqrt(np.maximum(a, 0)))
  assert (x < 0).dtype == dtypes.bool
  np.testing.assert_array_equal((x < 0).numpy(), a < 0)


def test_replicated_operand_broadcasts_to_shards():
  a, b, c = arr(4, 3), arr(4, 3), arr(3)
  x = Tensor(a).shard(D2, 0)
  close(x + Tensor(b).shard(D2), a + b)
  close(x * Tensor(c).shard(D2), a * c)  # a (3,) replicated row broadcast over the sharded rows
  close(Tensor(c).shard(D2) - x, c - a)


def test_mismatched_sharding_reshards():
  a, b = arr(4, 6), arr(4, 6)
  x, y = Tensor(a).shard(D2, 0), Tensor(b).shard(D2, 1)
  z = x + y
  close(z, a + b)
  assert z.realize().uop.arg[0] == 0  # the first sharded operand's layout wins


@pytest.mark.devices(3)
def test_different_devices_error():
  x = Tensor(arr(4)).shard(D2, 0)
  with pytest.raises(ValueError, match="different devices"): (x + Tensor(arr(4)).shard(D3, 0)).realize()
  with pytest.raises(ValueError, match="different devices"): x + Tensor(arr(4))


# ---- movement

def test_movement_keeping_the_sharded_axis():
  a = arr(4, 6)
  x = Tensor(a).shard(D2, 0)
  close(x.reshape(4, 2, 3), a.reshape(4, 2, 3))
  close(x.reshape(24), a.reshape(24))            # merge the sharded axis with the ones after it
  close(x.reshape(2, 2, 6), a.reshape(2, 2, 6))  # split it
  close(x.permute(1, 0), a.T)
  close(x.T.sum(0), a.sum(1))
  close(x.reshape(4, 1, 6).expand(4, 3, 6), np.broadcast_to(a.reshape(4, 1, 6), (4, 3, 6)))
  close(x.pad(((0, 0), (1, 2))), np.pad(a, ((0, 0), (1, 2))))
  close(x.shrink(((0, 4), (1, 5))), a[:, 1:5])
  close(x.flip(0), a[::-1])
  close(x.flip(1), a[:, ::-1])
  assert x.permute(1, 0).realize().uop.arg[0] == 1
  assert x.reshape(24).realize().uop.arg == (0, ((0, 12), (12, 24)))


def test_views_that_mix_shards_gather():
  a = arr(4, 6)
  x = Tensor(a).shard(D2, 1)
  close(x.reshape(24), a.reshape(24))  # each shard is strided in the flat tensor
  close(x.reshape(8, 3), a.reshape(8, 3))
  close(x.shrink(((0, 4), (1, 4))), a[:, 1:4])
  close(x.pad(((0, 0), (2, 1))), np.pad(a, ((0, 0), (2, 1))))
  close(x[1:3, 2:5] * 2, a[1:3, 2:5] * 2)
  close(x.flip(1)[:, :2], a[:, ::-1][:, :2])
  close(Tensor(a).shard(D2, 0).cat(Tensor(a).shard(D2, 0), dim=0), np.concatenate([a, a], 0))


# ---- reductions

@pytest.mark.devices(3)
@pytest.mark.parametrize("axis", [0, 1])
def test_reductions(axis):
  a = arr(6, 4)
  x = Tensor(a).shard(D3, axis)
  close(x.sum(0), a.sum(0))
  close(x.sum(1), a.sum(1))
  close(x.sum(), np.array(a.sum(), np.float32), atol=1e-4)
  close(x.max(0), a.max(0))
  close(x.min(1), a.min(1))
  close(x.mean(), np.array(a.mean(), np.float32))
  close(x.prod(axis), a.prod(axis), atol=1e-4)
  close(x.sum(axis, keepdim=True), a.sum(axis, keepdims=True))
  np.testing.assert_array_equal(x.argmax(axis).numpy(), a.argmax(axis))
  close(x.softmax(axis), np.exp(a) / np.exp(a).sum(axis, keepdims=True))


def test_reduce_over_sharded_axis_is_replicated():
  x = Tensor(arr(4, 3)).shard(D2, 0)
  s = x.sum(0).realize()
  assert s.device == D2 and s.uop.op is Ops.MULTI and s.uop.arg == (None, None)
  t = x.sum(1).realize()
  assert t.uop.arg == (0, ((0, 2), (2, 4)))


def test_bool_and_int_reductions():
  a = np.random.randint(-5, 5, size=(4, 6)).astype(np.int32)
  x = Tensor(a).shard(D2, 0)
  np.testing.assert_array_equal(x.sum(0).numpy(), a.sum(0))
  np.testing.assert_array_equal((x > 0).any(0).numpy(), (a > 0).any(0))
  np.testing.assert_array_equal((x > -5).all(0).numpy(), (a > -5).all(0))


# ---- matmul

def test_matmul_batch_sharded():
  a, w = arr(6, 5), arr(5, 3)
  y = Tensor(a).shard(D2, 0) @ Tensor(w).shard(D2)
  assert y.realize().uop.arg[0] == 0
  close(y, a @ w)


def test_matmul_contracted_axis_sharded():
  a, w = arr(4, 6), arr(6, 3)
  y = Tensor(a).shard(D2, 1) @ Tensor(w).shard(D2, 0)
  assert y.realize().uop.arg == (None, None)  # partial products all-reduced
  close(y, a @ w)


def test_matmul_output_features_sharded():
  a, w = arr(4, 5), arr(5, 6)
  y = Tensor(a).shard(D2) @ Tensor(w).shard(D2, 1)
  assert y.realize().uop.arg[0] == 1
  close(y, a @ w)


# ---- all-reduce: naive and ring, against numpy

@pytest.mark.parametrize("mode", ["naive", "ring"])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_allreduce_matches_numpy(mode, n):
  require_instances(n)
  devs = devices(n)
  a = arr(n * 2, 7)
  with Context(ALLREDUCE=mode):
    x = Tensor(a).shard(devs, 0)
    close(x.sum(0), a.sum(0))
    close(x.max(0), a.max(0))
    close(x.reshape(n * 2, 7, 1).sum((0, 2)), a.sum(0))


@pytest.mark.devices(1)
def test_allreduce_choice():
  with Context(ALLREDUCE="ring"): assert allreduce_mode(4, 100) == "ring" and allreduce_mode(4, 3) == "naive"
  with Context(ALLREDUCE="naive"): assert allreduce_mode(4, 10**7) == "naive"
  with Context(ALLREDUCE="", RING=0): assert allreduce_mode(4, 10**7) == "naive"
  with Context(ALLREDUCE="", RING=1): assert allreduce_mode(4, 10**7) == "ring" and allreduce_mode(2, 10**7) == "naive"
  with Context(ALLREDUCE="", RING=2): assert allreduce_mode(2, 10) == "ring"
  with Context(ALLREDUCE="tree"), pytest.raises(ValueError, match="ALLREDUCE"): allreduce_mode(2, 10)


@pytest.mark.compile_only
@pytest.mark.devices(4)
@pytest.mark.parametrize("mode,n_copies", [("naive", 2 * 3), ("ring", 2 * 4 * 3)])
def test_allreduce_schedule(mode, n_copies):
  """4 devices: naive gathers 3 partials and sends 3 results; the ring sends one chunk per device in each of 2*(4-1) steps."""
  x = Tensor.empty(8, 64, device=D4[0]).shard(D4, 0).realize()
  with Context(ALLREDUCE=mode):
    s = x.sum(0)
    items = s.schedule()
    assert len(copies(items)) == n_copies
    assert {si.bufs[0].device for si in copies(items)} == set(D4)
    s.realize()
  assert s.device == D4 and s.uop.op is Ops.MULTI and all(buffer_of(p.base).device == d for p, d in zip(s.uop.src, D4))


@pytest.mark.compile_only
@pytest.mark.devices(4)
@pytest.mark.parametrize("mode", ["naive", "ring"])
def test_data_parallel_step_compiles(mode):
  """A forward and backward pass over sharded data with a replicated weight, realized on 4 devices (NULL: compile only)."""
  with Context(ALLREDUCE=mode):
    w = Tensor.empty(16, 8, device=D4[0], requires_grad=True).shard(D4).realize()
    x = Tensor.empty(8, 16, device=D4[0]).shard(D4, 0)
    loss = (x @ w).relu().sum()
    loss.backward()
    assert w.grad is not None and w.grad.device == D4
    Tensor.realize_all(loss, w.grad)
    assert w.grad.uop.op is Ops.MULTI


# ---- autograd

def test_grad_of_replicated_weight_is_allreduced():
  a, w0 = arr(6, 4), arr(4, 3)
  w = Tensor(w0, requires_grad=True).shard_(D2)
  loss = (Tensor(a).shard(D2, 0) @ w).tanh().sum()
  loss.backward()
  assert w.grad.device == D2
  g = w.grad.realize()
  assert g.uop.arg == (None, None)
  t = np.tanh(a @ w0)
  close(g, a.T @ (1 - t * t), atol=1e-4)


def test_grad_through_shard_of_a_single_device_tensor():
  a = arr(4, 3)
  for axis in (0, 1, None):
    x = Tensor(a, requires_grad=True)
    (x.shard(D2, axis) * Tensor(a).shard(D2, axis)).sum().backward()
    assert x.grad.device == x.device
    close(x.grad, a)


def test_grad_of_sharded_parameter():
  a, w0 = arr(4, 6), arr(6, 3)
  w = Tensor(w0, requires_grad=True).shard_(D2, 0)  # contracted axis sharded
  (Tensor(a).shard(D2, 1) @ w).sum().backward()
  close(w.grad, np.repeat(a.sum(0, keepdims=True).T, 3, axis=1), atol=1e-4)


# ---- assign and TinyJit

def test_assign_in_place():
  w = Tensor(arr(4, 2)).shard(D2, 0).realize()
  bufs = [buffer_of(p.base) for p in w.uop.src]
  a = arr(4, 2)
  w.assign(Tensor(a).shard(D2, 0)).realize()
  assert [buffer_of(p.base) for p in w.uop.src] == bufs
  close(w, a)
  w.assign(Tensor(a * 2)).realize()  # a single-device value is spread over the shards
  close(w, a * 2)


def test_jit_replays_multi_device_step():
  w0 = arr(4, 3)
  w = Tensor(w0).shard(D2).realize()

  @TinyJit
  def step(x: Tensor) -> Tensor:
    out = (x.shard(D2, 0) @ w).sum(0)
    w.assign(w * 0.5)
    return out.realize(w)

  scale = 1.0
  for _ in range(4):
    a = arr(6, 4)
    close(step(Tensor(a)), (a @ (w0 * scale)).sum(0), atol=1e-4)
    scale *= 0.5
  kinds = {(ei.kind, ei.bufs[0].device) for ei, _ in step.captured}
  assert ("copy", D2[1]) in kinds and ("kernel", D2[0]) in kinds and ("kernel", D2[1]) in kinds


@pytest.mark.devices(3)
def test_jit_with_sharded_inputs():
  w0 = arr(5, 2)
  w = Tensor(w0).shard(D3).realize()

  @TinyJit
  def f(x: Tensor) -> Tensor: return (x @ w).relu().sum(0).realize()

  for _ in range(4):
    a = arr(6, 5)
    close(f(Tensor(a).shard(D3, 0)), np.maximum(a @ w0, 0).sum(0), atol=1e-4)
  assert len(f.captured) > 0 and {ei.bufs[0].device for ei, _ in f.captured} == set(D3)


def test_jit_rejects_a_different_sharding():
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x * 2).sum(0).realize()

  for _ in range(3): f(Tensor(arr(4, 2)).shard(D2, 0))
  with pytest.raises(RuntimeError, match="split"): f(Tensor(arr(4, 2)).shard(D2, 1))  # same buffer sizes, other layout
