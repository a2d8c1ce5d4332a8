"""TinyJit: capture on the second call, replay after; symbolic Variables; clear errors."""
import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import GlobalCounters, Tensor, TinyJit, Variable
from tinygrad.jit import JitError

pytestmark = pytest.mark.skipif(is_null_device(), reason="NULL runs no kernels: nothing to read back")


def test_replay_matches_eager_and_runs_the_captured_kernels():
  @TinyJit
  def f(a: Tensor, b: Tensor) -> Tensor: return (a @ b).relu() + 1
  for _ in range(4):
    a_np, b_np = np.random.randn(3, 4).astype(np.float32), np.random.randn(4, 2).astype(np.float32)
    a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
    GlobalCounters.reset()
    out = f(a, b).numpy()
    np.testing.assert_allclose(out, np.maximum(a_np @ b_np, 0) + 1, rtol=1e-5, atol=1e-5)
  assert f.cnt == 4 and len(f.captured) >= 1  # cnt counts the calls, as tinygrad's
  assert GlobalCounters.kernel_count == len(f.captured)


def test_capture_after_zero_captures_on_the_first_call():
  f = TinyJit(lambda a, b: (a * b).sum(1) + 1, capture_after=0)
  for i in range(3):
    a_np, b_np = np.random.randn(4, 5).astype(np.float32), np.random.randn(4, 5).astype(np.float32)
    out = f(Tensor(a_np).realize(), Tensor(b_np).realize()).numpy()
    np.testing.assert_allclose(out, (a_np * b_np).sum(1) + 1, rtol=1e-5, atol=1e-5)
    assert f.captured and f.cnt == i + 1  # captured by call 1, replayed by calls 2 and 3
  with pytest.raises(ValueError, match="capture_after"): TinyJit(lambda a: a, capture_after=-1)


def test_changed_input_shape_is_a_clear_error():
  @TinyJit
  def f(a: Tensor) -> Tensor: return a * 2
  for _ in range(3): f(Tensor.ones(4).contiguous())
  with pytest.raises(JitError, match=r"changed from shape \(4,\)"): f(Tensor.ones(5).contiguous())


def test_bound_variable_value_is_a_kernel_parameter():
  x = Tensor.arange(6).float().realize()
  v = Variable("k", 1, 10)
  @TinyJit
  def f(x: Tensor, k) -> Tensor: return (x * k).sum()
  for k in range(1, 6): assert f(x, v.bind(k)).item() == 15 * k


def test_bound_variable_as_a_size_serves_every_size_with_one_capture():
  x = Tensor.arange(10).float().realize()
  n = Variable("n", 1, 10)
  @TinyJit
  def f(x: Tensor, n) -> Tensor: return x.shrink(((0, n),)).sum()
  for k in range(1, 9): assert f(x, n.bind(k)).item() == sum(range(k))
  assert f.cnt == 8


def test_random_numbers_are_fresh_on_every_replay():
  @TinyJit
  def f() -> Tensor: return (Tensor.rand(8) * 1).realize()
  draws = [f().numpy().copy() for _ in range(4)]
  assert all(not np.array_equal(draws[i], draws[i + 1]) for i in range(3))


def test_capturing_nothing_is_an_error():
  @TinyJit
  def f(x: Tensor) -> None: _ = x + 1  # lazy and dropped: nothing is realized, so nothing to capture
  with pytest.raises(JitError, match="captured no kernels"):
    for i in range(3): f(Tensor([float(i)]).realize())


def test_assign_into_a_slice_writes_the_parent_buffer():
  c = Tensor.zeros(4, 6).contiguous().realize()
  c[:, 2:4].assign(Tensor.ones(4, 2)).realize()
  c.T[1:3].assign(Tensor.full((2, 4), 5.0)).realize()
  expect = np.zeros((4, 6), np.float32)
  expect[:, 2:4] = 1
  expect[:, 1:3] = 5
  np.testing.assert_array_equal(c.numpy(), expect)


def test_kv_cache_style_write_at_a_symbolic_position():
  cache = Tensor.zeros(8, 3).contiguous().realize()
  pos = Variable("pos", 0, 7)
  @TinyJit
  def write(x: Tensor, p) -> None: cache.shrink(((p, p + 1), (0, 3))).assign(x).realize()
  for i in range(5): write(Tensor([[float(i + 1)] * 3]), pos.bind(i))
  expect = np.zeros((8, 3), np.float32)
  expect[:5] = np.arange(1, 6)[:, None]
  np.testing.assert_array_equal(cache.numpy(), expect)
  assert write.cnt == 5


# ---- device graphs: the hook core calls (a real one is tested in backend-nv with a GPU); here a recording stand-in

class _RecordingGraph:
  """A GraphExec that runs its launches one by one, counting builds, updates and replays."""
  built: list["_RecordingGraph"] = []

  def __init__(self, launches):
    self.launches, self.updates, self.calls = list(launches), 0, 0
    _RecordingGraph.built.append(self)

  def update(self, i, launch):
    self.launches[i] = launch
    self.updates += 1

  def __call__(self):
    self.calls += 1
    for lc in self.launches: lc.program(*lc.bufs, global_size=lc.global_size, local_size=lc.local_size, vals=lc.vals)


@pytest.fixture
def recording_graph(monkeypatch):
  from tinygrad import Device
  _RecordingGraph.built = []
  monkeypatch.setattr(Device[Device.DEFAULT], "graph", _RecordingGraph)
  return _RecordingGraph.built


def test_graph_replays_with_new_inputs_and_variables(recording_graph):
  n = Variable("n", 1, 12)
  @TinyJit
  def f(a: Tensor, b: Tensor, k) -> Tensor: return ((a + b).relu() * 2).shrink(((0, k),)).sum() + a.sum()
  for k in [3, 5, 5, 7, 2, 12, 1]:
    a_np, b_np = np.random.randn(12).astype(np.float32), np.random.randn(12).astype(np.float32)
    got = f(Tensor(a_np).realize(), Tensor(b_np).realize(), n.bind(k)).item()
    np.testing.assert_allclose(got, (np.maximum(a_np + b_np, 0) * 2)[:k].sum() + a_np.sum(), rtol=1e-5, atol=1e-5)
  assert len(recording_graph) == 1 and f.graph is not None
  g = recording_graph[0]
  assert g.calls == 5 and len(g.launches) == len(f.captured)  # calls 3..7 replayed the graph
  assert g.updates >= 1  # new var values (input buffers may reuse freed memory: those launches stay as they were)


def test_graph_keeps_unchanged_launches(recording_graph):
  x = Tensor.arange(8).float().realize()
  @TinyJit
  def f(x: Tensor) -> Tensor: return ((x + 1).contiguous() * 3).sum()
  for _ in range(5): assert f(x).item() == 3 * sum(range(1, 9))
  assert recording_graph[0].calls == 3 and recording_graph[0].updates == 0  # the same input buffer every call


def test_graph_off(recording_graph):
  from tinygrad.helpers import Context
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x * 2).sum()
  with Context(GRAPH=0):
    for i in range(4): assert f(Tensor([1.0, float(i)]).realize()).item() == 2 + 2 * i
  assert f.graph is None or recording_graph[0].calls == 0


def test_no_graph_when_the_device_refuses(monkeypatch):
  from tinygrad import Device
  def refuse(launches): raise NotImplementedError("not these kernels")
  monkeypatch.setattr(Device[Device.DEFAULT], "graph", refuse)
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x * 2).sum()
  for i in range(4): assert f(Tensor([1.0, float(i)]).realize()).item() == 2 + 2 * i
  assert f.graph is None


def test_elementwise_on_a_symbolic_size():
  """Constants and bound values broadcast over a tensor whose size is a Variable (expand compares symbolic sizes)."""
  x_np = np.random.randn(16).astype(np.float32)
  x, n, s = Tensor(x_np).realize(), Variable("n", 1, 16), Variable("s", 1, 9)
  @TinyJit
  def f(x: Tensor, k, v) -> Tensor: return ((x.shrink(((0, k),)) * v * 0.5).exp2().contiguous() + 1).sum()
  for k, v in [(3, 1), (16, 2), (1, 9), (7, 4)]:
    np.testing.assert_allclose(f(x, n.bind(k), s.bind(v)).item(), (np.exp2(x_np[:k] * v * 0.5) + 1).sum(), rtol=1e-5)


# ---- memory planning (engine/memory.py): captured intermediates share memory

def _chain(x: Tensor, n: int) -> Tensor:
  for i in range(n): x = (x * 1.5 + i).contiguous()  # n kernels, each result used only by the next
  return x


def _base_ids(f: TinyJit) -> tuple[int, int]:
  """(buffers, distinct memory blocks) among the captured items' buffers."""
  bufs = {id(b): b for ei, _ in f.captured for b in ei.bufs}
  return len(bufs), len({id(b.base or b) for b in bufs.values()})


@pytest.mark.parametrize("capture_after", [0, 1])
def test_plan_shares_intermediates_and_replays_match(capture_after):
  f = TinyJit(lambda a: _chain(a, 8).sum(), capture_after=capture_after)
  for _ in range(4):
    a_np = np.random.randn(64).astype(np.float32)
    expect = a_np.copy()
    for i in range(8): expect = expect * 1.5 + i
    np.testing.assert_allclose(f(Tensor(a_np).realize()).item(), expect.sum(), rtol=1e-5)
  n_bufs, n_blocks = _base_ids(f)
  # the input, 8 intermediates and the output; each kernel reads one intermediate and writes the next, so two blocks hold all 8
  assert n_bufs == 10 and n_blocks == 4


def _chain_ref(a: np.ndarray, n: int, k: float = 1.5) -> np.ndarray:
  for i in range(n): a = a * k + i
  return a


def test_a_jitted_function_called_inside_another_one():
  """The inner TinyJit runs as plain code while the outer one captures, so the outer capture holds its kernels as its own
  (replaying the inner capture there gave wrong sums from the third call on: the two captures shared ExecItems and each
  memory plan rewrote the other's buffers)."""
  inner = TinyJit(lambda a: _chain(a, 6).contiguous())
  @TinyJit
  def outer(a: Tensor) -> Tensor:
    h = _chain(a, 5)  # intermediates of its own, alive across the inner call
    return (h + inner(a * 2)).sum()
  for _ in range(5):
    a_np = np.random.randn(64).astype(np.float32)
    np.testing.assert_allclose(outer(Tensor(a_np).realize()).item(), (_chain_ref(a_np, 5) + _chain_ref(a_np * 2, 6)).sum(), rtol=1e-4)


def test_captures_share_their_blocks_and_replay_alternately():
  """Two captures (an LLM's chunk sizes or attention spans) replay one at a time: the second plan takes the first one's
  blocks instead of making its own, and replays of the two in any order stay correct."""
  f = TinyJit(lambda a: _chain(a, 8).sum())
  g = TinyJit(lambda a: (_chain(a * 2, 8) * 3).sum())
  for k in range(5):
    a_np = np.random.randn(64).astype(np.float32)
    if k % 2: np.testing.assert_allclose(g(Tensor(a_np).realize()).item(), 3 * _chain_ref(a_np * 2, 8).sum(), rtol=1e-4)
    np.testing.assert_allclose(f(Tensor(a_np).realize()).item(), _chain_ref(a_np, 8).sum(), rtol=1e-4)
    if not k % 2: np.testing.assert_allclose(g(Tensor(a_np).realize()).item(), 3 * _chain_ref(a_np * 2, 8).sum(), rtol=1e-4)
  def blocks(j: TinyJit) -> set[int]: return {id(b.base) for ei, _ in j.captured for b in ei.bufs if b.base is not None}
  assert blocks(f) and blocks(f) == blocks(g)


def test_plan_off_keeps_one_buffer_each():
  from tinygrad.helpers import Context
  with Context(JIT_PLAN=0):
    f = TinyJit(lambda a: _chain(a, 8).sum())
    for _ in range(3): f(Tensor(np.ones(64, np.float32)).realize())
  n_bufs, n_blocks = _base_ids(f)
  assert n_bufs == n_blocks == 10


def test_plan_leaves_buffers_filled_outside_the_captured_kernels():
  """A tensor made from host data inside the function is filled when it is created, not by a captured kernel: its memory
  must not be shared, or a replay would read what an intermediate wrote over it."""
  @TinyJit
  def f(a: Tensor) -> Tensor:
    w = Tensor(np.arange(64, dtype=np.float32))  # copied in at creation
    return (_chain(a, 6) * w).sum()
  for _ in range(4):
    a_np = np.random.randn(64).astype(np.float32)
    expect = a_np.copy()
    for i in range(6): expect = expect * 1.5 + i
    np.testing.assert_allclose(f(Tensor(a_np).realize()).item(), (expect * np.arange(64)).sum(), rtol=1e-5)


def test_plan_keeps_state_the_caller_holds():
  """Buffers that outlive the call (a running total written by an assign) keep their memory."""
  total = Tensor.zeros(16).contiguous().realize()
  @TinyJit
  def step(x: Tensor) -> None: total.assign(total + _chain(x, 4)).realize()
  expect = np.zeros(16, np.float32)
  for k in range(5):
    x_np = np.full(16, float(k), np.float32)
    step(Tensor(x_np).realize())
    y = x_np.copy()
    for i in range(4): y = y * 1.5 + i
    expect += y
  np.testing.assert_allclose(total.numpy(), expect, rtol=1e-5)


def test_capturing_call_releases_dead_intermediates(monkeypatch):
  """While the capturing call runs, intermediates of earlier realizes that nothing can reach go back to the allocator."""
  from tinygrad import jit
  from tinygrad.engine import realize
  monkeypatch.setattr(realize, "RELEASE_AFTER_BYTES", 0)  # after every realize (normally once a few MB were allocated)
  allocated_at_plan: list[int] = []
  plan = jit.plan_memory
  def spy(items, fresh, keep):
    allocated_at_plan.append(sum(1 for b in {id(b): b for ei, _ in items for b in ei.bufs}.values() if b.base is None and b.is_allocated()))
    return plan(items, fresh, keep)
  monkeypatch.setattr(jit, "plan_memory", spy)
  @TinyJit
  def f(a: Tensor) -> Tensor:
    for i in range(6): a = (a * 1.5 + i).contiguous().realize()
    return a.sum()
  for _ in range(4):
    a_np = np.random.randn(256).astype(np.float32)
    expect = a_np.copy()
    for i in range(6): expect = expect * 1.5 + i
    np.testing.assert_allclose(f(Tensor(a_np).realize()).item(), expect.sum(), rtol=1e-5)
  # at most the input, the last two links and the output are still allocated when the capture ends (6 links were made)
  assert allocated_at_plan and allocated_at_plan[0] <= 4
