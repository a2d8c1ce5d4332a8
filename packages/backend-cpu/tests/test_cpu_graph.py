"""The CPU device graph (graph.py): TinyJit replays with prepared ctypes calls, updated when inputs or var values change."""
import numpy as np
from tinygrad import Device, Tensor, TinyJit, Variable
from tinygrad_backend_cpu.graph import CPUGraph


def test_jit_replays_through_the_cpu_graph_with_new_inputs_and_variables():
  n = Variable("n", 1, 64)
  @TinyJit
  def f(a: Tensor, b: Tensor, k) -> Tensor: return ((a + b).relu() * 2).shrink(((0, k),)).sum() + a.sum()
  for k in [3, 5, 5, 7, 2, 64, 1, 9]:
    a_np, b_np = np.random.randn(64).astype(np.float32), np.random.randn(64).astype(np.float32)
    got = f(Tensor(a_np).realize(), Tensor(b_np).realize(), n.bind(k)).item()
    np.testing.assert_allclose(got, (np.maximum(a_np + b_np, 0) * 2)[:k].sum() + a_np.sum(), rtol=1e-5, atol=1e-5)
  assert Device[Device.DEFAULT].graph is CPUGraph and isinstance(f.graph.graph, CPUGraph)


def test_threaded_kernel_in_the_graph():
  """A kernel big enough to be split over threads (THREAD opt) runs each thread's part from the graph too."""
  @TinyJit
  def f(w: Tensor, x: Tensor) -> Tensor: return (w @ x).relu()
  w_np = np.random.randn(2048, 1024).astype(np.float32)
  w = Tensor(w_np).realize()
  for _ in range(4):
    x_np = np.random.randn(1024, 1).astype(np.float32)
    np.testing.assert_allclose(f(w, Tensor(x_np).realize()).numpy(), np.maximum(w_np @ x_np, 0), rtol=1e-4, atol=1e-4)
  launches = f.graph.launches
  assert any(lc.global_size[0] > 1 for lc in launches) or Device.renderer(Device.DEFAULT).threads == 1
