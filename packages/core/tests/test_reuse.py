"""tinygrad/reuse.py: a block's kernels recorded once per structure and replayed on other blocks' buffers."""
import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Context, GlobalCounters, Tensor, TinyJit, Variable, dtypes, reuse
from tinygrad.reuse import KernelReuse

pytestmark = pytest.mark.skipif(is_null_device(), reason="NULL runs no kernels: nothing to read back")


class Layer:
  """A small residual layer: a matmul, a norm-like reduction, a write into its own cache at a (symbolic) position."""
  def __init__(self, n: int, seed: int, dtype=dtypes.float32):
    rng = np.random.default_rng(seed)
    self.w = Tensor(rng.standard_normal((n, n)).astype(np.float32)).cast(dtype).contiguous().realize()
    self.b = Tensor(rng.standard_normal(n).astype(np.float32)).realize()
    self.cache = Tensor.zeros(8, n).contiguous().realize()
    self.scale = 0.5

  def __call__(self, x: Tensor, pos) -> Tensor:
    h = (x @ self.w.T.cast(dtypes.float32) + self.b).relu()
    self.cache.shrink(((pos, pos + 1), (0, self.cache.shape[1]))).assign(h).realize()
    return (x + h * self.scale / (h.square().mean(-1, keepdim=True) + 1).sqrt()).contiguous()


def run(layers, x: Tensor, pos, reuser: KernelReuse | None) -> Tensor:
  for layer in layers: x = layer(x, pos).realize() if reuser is None else reuser(layer, x, pos)
  return x


def counts() -> dict: return dict(reuse.stats)


def test_hits_on_identical_structure_and_matches_the_plain_run():
  layers, x_np = [Layer(16, s) for s in range(4)], np.random.default_rng(9).standard_normal((1, 16)).astype(np.float32)
  want = run(layers, Tensor(x_np), 0, None).numpy()
  want_caches = [layer.cache.numpy() for layer in layers]
  for layer in layers: layer.cache.assign(Tensor.zeros(8, 16)).realize()
  before, r = counts(), KernelReuse()
  got = run(layers, Tensor(x_np), 0, r).numpy()
  assert (reuse.stats["misses"] - before["misses"], reuse.stats["hits"] - before["hits"]) == (1, 3)
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
  for layer, c in zip(layers, want_caches): np.testing.assert_allclose(layer.cache.numpy(), c, rtol=1e-6, atol=1e-6)


def test_a_replay_builds_no_graph_and_runs_the_recorded_kernels():
  layers, r = [Layer(8, s) for s in range(3)], KernelReuse()
  x = Tensor.ones(1, 8).contiguous().realize()
  r(layers[0], x, 0)
  n = len(next(iter(r.recordings.values())).items)
  GlobalCounters.reset()
  r(layers[1], x, 0)
  assert GlobalCounters.kernel_count == n


@pytest.mark.parametrize("change", ["dtype", "shape", "scalar", "device"])
def test_misses_on_a_different_structure(change):
  r, x = KernelReuse(), Tensor.ones(1, 8).contiguous().realize()
  a = Layer(8, 0)
  other = {"dtype": lambda: Layer(8, 1, dtypes.float16), "shape": lambda: Layer(8, 1), "scalar": lambda: Layer(8, 1),
           "device": lambda: Layer(8, 1)}[change]()
  if change == "shape": other.cache = Tensor.zeros(9, 8).contiguous().realize()
  if change == "scalar": other.scale = 0.25
  if change == "device":
    for name in ("w", "b", "cache"): setattr(other, name, getattr(other, name).to("CPU:1").realize())
    x_other = x.to("CPU:1").realize()
  else: x_other = x
  before = counts()
  r(a, x, 0)
  got = r(other, x_other, 0).numpy()
  assert (reuse.stats["misses"] - before["misses"], reuse.stats["hits"] - before["hits"]) == (2, 0)
  other.cache.assign(Tensor.zeros(*other.cache.shape, device=other.cache.device)).realize()
  np.testing.assert_allclose(got, other(x_other, 0).numpy(), rtol=1e-3, atol=1e-3)


def test_misses_on_another_opt_setting():
  layers, x = [Layer(8, s) for s in range(2)], Tensor.ones(1, 8).contiguous().realize()
  want = run(layers, x, 0, None).numpy()
  r, before = KernelReuse(), counts()
  run(layers[:1], x, 0, r)
  with Context(NOOPT=1): got = run(layers[1:], run(layers[:1], x, 0, None), 0, r).numpy()
  assert (reuse.stats["misses"] - before["misses"], reuse.stats["hits"] - before["hits"]) == (2, 0)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_variable_values_come_from_each_call():
  layers, r, pos = [Layer(8, s) for s in range(3)], KernelReuse(), Variable("pos", 0, 7)
  x_np = np.random.default_rng(3).standard_normal((1, 8)).astype(np.float32)
  for p in (0, 5, 2): run(layers, Tensor(x_np), pos.bind(p), r)
  plain = [Layer(8, s) for s in range(3)]
  for p in (0, 5, 2): run(plain, Tensor(x_np), p, None)
  for a, b in zip(layers, plain): np.testing.assert_allclose(a.cache.numpy(), b.cache.numpy(), rtol=1e-6, atol=1e-6)
  assert len(r.recordings) == 1  # one recording served every position


def test_a_buffer_from_outside_the_inputs_is_not_reused():
  hidden = [Tensor([1.0, 2.0, 3.0, 4.0]).realize(), Tensor([10.0, 20.0, 30.0, 40.0]).realize()]
  class Sneaky:
    def __init__(self, i: int): self.i = i
    def __call__(self, x: Tensor) -> Tensor: return x + hidden[self.i]  # reads a global the signature can't see
  r, x = KernelReuse(), Tensor.zeros(4).contiguous().realize()
  before = counts()
  # self.i differs: two structures anyway; with the same i, the global still makes it unreusable
  assert r(Sneaky(0), x).tolist() == [1.0, 2.0, 3.0, 4.0]
  assert r(Sneaky(0), x).tolist() == [1.0, 2.0, 3.0, 4.0]
  assert reuse.stats["uncacheable"] - before["uncacheable"] == 1 and reuse.stats["hits"] == before["hits"]
  assert r(Sneaky(1), x).tolist() == [10.0, 20.0, 30.0, 40.0]


def test_shared_tensors_key_apart_from_distinct_ones():
  class Two:
    def __init__(self, a: Tensor, b: Tensor): self.a, self.b = a, b
    def __call__(self, x: Tensor) -> Tensor: return x * self.a + self.b
  r, x = KernelReuse(), Tensor.ones(4).contiguous().realize()
  t = Tensor([1.0, 2.0, 3.0, 4.0]).realize()
  assert r(Two(t, t), x).tolist() == [2.0, 4.0, 6.0, 8.0]
  u, v = Tensor([1.0, 1.0, 1.0, 1.0]).realize(), Tensor([5.0, 5.0, 5.0, 5.0]).realize()
  assert r(Two(u, v), x).tolist() == [6.0, 6.0, 6.0, 6.0]
  assert len(r.recordings) == 2


def test_inside_a_tinyjit_capture_and_its_replays():
  layers, pos = [Layer(8, s) for s in range(3)], Variable("pos", 0, 7)
  plain = [Layer(8, s) for s in range(3)]
  r = KernelReuse()
  f = TinyJit(lambda x, p: run(layers, x, p, r), capture_after=0)
  for p in range(4):
    x_np = np.random.default_rng(p).standard_normal((1, 8)).astype(np.float32)
    got = f(Tensor(x_np).realize(), pos.bind(p)).numpy()
    np.testing.assert_allclose(got, run(plain, Tensor(x_np), p, None).numpy(), rtol=1e-5, atol=1e-5)
  for a, b in zip(layers, plain): np.testing.assert_allclose(a.cache.numpy(), b.cache.numpy(), rtol=1e-5, atol=1e-5)
  assert f.cnt == 4


def test_reuse_off_runs_every_call():
  layers, x = [Layer(8, s) for s in range(2)], Tensor.ones(1, 8).contiguous().realize()
  r = KernelReuse()
  with Context(REUSE=0): run(layers, x, 0, r)
  assert not r.recordings


def test_which_objects_are_shared_is_part_of_the_structure():
  class Holder:
    def __init__(self, t: Tensor): self.t = t
  class Three:
    def __init__(self, a, b, c): self.a, self.b, self.c = a, b, c
    def __call__(self, x: Tensor) -> Tensor: return x * self.a.t + self.b.t * 10 + self.c.t * 100
  r, x = KernelReuse(), Tensor.ones(2).contiguous().realize()
  h = [Holder(Tensor([float(i), float(i)]).realize()) for i in range(1, 5)]
  assert r(Three(h[0], h[1], h[0]), x).tolist() == [1 + 20 + 100] * 2
  assert r(Three(h[2], h[3], h[3]), x).tolist() == [3 + 40 + 400] * 2  # c is b now, not a: another structure
  assert len(r.recordings) == 2


def test_a_block_that_rebinds_its_tensors_is_not_reused():
  class Rebinds:
    def __init__(self): self.state = Tensor.zeros(3).contiguous().realize()
    def __call__(self, x: Tensor) -> Tensor:
      self.state = (self.state + x).contiguous().realize()
      return (self.state * 2).contiguous()
  r, x = KernelReuse(), Tensor.ones(3).contiguous().realize()
  blocks = [Rebinds(), Rebinds()]
  for _ in range(2):
    for b in blocks: r(b, x)
  assert [b.state.tolist() for b in blocks] == [[2.0] * 3] * 2
  assert list(r.recordings.values()) == [None]
