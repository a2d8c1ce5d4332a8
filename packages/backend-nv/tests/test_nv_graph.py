"""CUDA graphs for TinyJit replays (graph.py): replays through one graph launch give the eager results, with new input
buffers, bound Variables (kernel parameters and launch sizes) and GRAPH=0. Every test skips without a GPU."""
from __future__ import annotations

import numpy as np
from nv_harness import compile_prog, make_renderer, needs_gpu
from test_nv_gpu import _fill_prog
from tinygrad import Tensor, TinyJit, Variable
from tinygrad.device.plugin import KernelLaunch
from tinygrad.helpers import Context

pytestmark = needs_gpu


def _cuda(a: np.ndarray) -> Tensor: return Tensor(a, device="CUDA").realize()


def _is_cuda_graph(f: TinyJit) -> bool:
  from tinygrad_backend_nv.graph import CUDAGraph
  return f.graph is not None and isinstance(f.graph.graph, CUDAGraph)


def test_graph_launches_and_updates() -> None:
  """The graph itself: two fills, then the first pointed at another buffer and the second given an empty grid."""
  from tinygrad_backend_nv.graph import CUDAGraph
  from tinygrad_backend_nv.runtime import open_cuda
  dev = open_cuda("CUDA", 0)
  name, _, lib = compile_prog(_fill_prog(), make_renderer("CUDA"))
  prg = dev.runtime(name, lib)
  n = 1024 * 256
  bufs = [dev.allocator.alloc(n * 4) for _ in range(3)]

  def read(b: int) -> np.ndarray:
    out = np.full(n, -1.0, np.float32)
    dev.allocator.copyout(out.data.cast("B"), b)
    return out

  zeros = memoryview(np.zeros(n, np.float32).tobytes())
  for b in bufs: dev.allocator.copyin(b, zeros)
  g = CUDAGraph(dev.ctx, [KernelLaunch(prg, (bufs[0],), (1024, 1, 1), (256, 1, 1)), KernelLaunch(prg, (bufs[1],), (512, 1, 1), (256, 1, 1))])
  g()
  dev.synchronize()
  ref = np.arange(n, dtype=np.float32)
  np.testing.assert_array_equal(read(bufs[0]), ref)
  np.testing.assert_array_equal(read(bufs[1])[:n // 2], ref[:n // 2])
  assert not read(bufs[1])[n // 2:].any()  # half the grid: the rest untouched
  g.update(0, KernelLaunch(prg, (bufs[2],), (1024, 1, 1), (256, 1, 1)))
  g.update(1, KernelLaunch(prg, (bufs[1],), (0, 1, 1), (256, 1, 1)))  # an empty grid: the node is disabled
  for b in bufs[1:]: dev.allocator.copyin(b, zeros)
  g()
  dev.synchronize()
  np.testing.assert_array_equal(read(bufs[2]), ref)
  assert not read(bufs[1]).any()
  g.update(1, KernelLaunch(prg, (bufs[1],), (1024, 1, 1), (256, 1, 1)))  # enabled again
  g()
  dev.synchronize()
  np.testing.assert_array_equal(read(bufs[1]), ref)


def test_jit_graph_matches_eager_with_new_inputs() -> None:
  @TinyJit
  def f(a: Tensor, b: Tensor) -> Tensor: return ((a @ b).relu() + 1).sum(1) * 2
  keep = []  # the inputs stay alive, so every call's buffers are new memory and the graph's launches must follow them
  for _ in range(6):
    a_np, b_np = np.random.randn(33, 64).astype(np.float32), np.random.randn(64, 17).astype(np.float32)
    a, b = _cuda(a_np), _cuda(b_np)
    keep += [a, b]
    np.testing.assert_allclose(f(a, b).numpy(), (np.maximum(a_np @ b_np, 0) + 1).sum(1) * 2, rtol=1e-4, atol=1e-4)
  assert _is_cuda_graph(f)


def test_jit_graph_with_bound_variables() -> None:
  """A Variable as a value (a kernel parameter) and as a size (the launch grid changes with it)."""
  n, scale = Variable("n", 1, 4096), Variable("s", 1, 100)
  x_np = np.random.randn(4096).astype(np.float32)
  x = _cuda(x_np)

  @TinyJit
  def f(x: Tensor, k, s) -> Tensor: return ((x.shrink(((0, k),)) * s * 0.1).exp2().contiguous() * 0.5).sum()

  for k, s in [(3, 1), (100, 2), (4096, 3), (7, 100), (1000, 5), (1000, 6), (1, 1), (2049, 20)]:
    got = f(x, n.bind(k), scale.bind(s)).item()
    ref = float((np.exp2(x_np[:k].astype(np.float64) * s * 0.1) * 0.5).sum())
    assert abs(got - ref) <= 1e-4 * max(1.0, abs(ref)), (k, s, got, ref)
  assert _is_cuda_graph(f)


def test_jit_graph_kv_cache_write() -> None:
  """A symbolic position: the assign kernel's parameters change every call, its inputs too."""
  cache = Tensor.zeros(64, 8, device="CUDA").contiguous().realize()
  pos = Variable("pos", 0, 63)

  @TinyJit
  def write(x: Tensor, p) -> None: cache.shrink(((p, p + 1), (0, 8))).assign(x * 2).realize()

  rows = np.random.randn(20, 1, 8).astype(np.float32)
  for i in range(20): write(_cuda(rows[i]), pos.bind(i))
  expect = np.zeros((64, 8), np.float32)
  expect[:20] = rows[:, 0] * 2
  np.testing.assert_array_equal(cache.numpy(), expect)
  assert _is_cuda_graph(write)


def test_graph_off_replays_kernel_by_kernel() -> None:
  @TinyJit
  def f(a: Tensor) -> Tensor: return (a * 3 + 1).sum()
  with Context(GRAPH=0):
    for _ in range(4):
      a_np = np.random.randn(1000).astype(np.float32)
      np.testing.assert_allclose(f(_cuda(a_np)).item(), (a_np * 3 + 1).sum(), rtol=1e-4, atol=1e-3)
  assert f.graph is None


def test_chain_of_dependent_kernels_with_programmatic_edges() -> None:
  """Each kernel reads what the one before it wrote, big enough to take several waves of blocks: with programmatic edges
  (sm_90+) a kernel may be scheduled while the one before drains, and its griddepcontrol.wait must still order every read
  after that one's writes. Replayed many times back to back; compared with the same arithmetic in numpy."""
  from tinygrad import Device
  from tinygrad_backend_nv.compiler import arch_number
  n, depth = 1 << 22, 24
  x_np = np.random.rand(n).astype(np.float32)
  x = _cuda(x_np)

  @TinyJit
  def f(x: Tensor) -> Tensor:
    for i in range(depth): x = (x * 0.5 + (i % 3)).contiguous()  # a kernel each
    return x.sum()

  ref = x_np.astype(np.float64)
  for i in range(depth): ref = ref * 0.5 + (i % 3)
  for _ in range(8): got = f(x)
  np.testing.assert_allclose(got.item(), ref.sum(), rtol=1e-4)
  assert _is_cuda_graph(f)
  if arch_number(Device.renderer("CUDA").arch) >= 90:  # every kernel rendered for Hopper waits: all its edges are programmatic
    assert all(ei.runner.program.waits_for_grid for ei, _ in f.captured if ei.runner is not None)
