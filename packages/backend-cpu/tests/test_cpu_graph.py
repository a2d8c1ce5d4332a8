"""The CPU device graphs: TinyJit replays as one generated native function per thread (native_graph.py), or with prepared
ctypes calls (graph.py, CPU_NATIVE_GRAPH=0); both updated when inputs or var values change."""
import ctypes
import platform
import time

import numpy as np
import pytest
from tinygrad import Context, Device, Tensor, TinyJit, Variable
from tinygrad_backend_cpu.graph import CPUGraph
from tinygrad_backend_cpu.native_graph import NativeCPUGraph, render_graph
from tinygrad_backend_cpu.runtime import NATIVE_GRAPH, CPUProgram, _graph_compiler, cpu_graph
from tinygrad_backend_cpu.threadpool import run_parallel


@pytest.mark.parametrize("native", [1, 0])
def test_jit_replays_through_the_cpu_graph_with_new_inputs_and_variables(native: int):
  n = Variable("n", 1, 64)
  @TinyJit
  def f(a: Tensor, b: Tensor, k) -> Tensor: return ((a + b).relu() * 2).shrink(((0, k),)).sum() + a.sum()
  with Context(CPU_NATIVE_GRAPH=native):
    for k in [3, 5, 5, 7, 2, 64, 1, 9]:
      a_np, b_np = np.random.randn(64).astype(np.float32), np.random.randn(64).astype(np.float32)
      got = f(Tensor(a_np).realize(), Tensor(b_np).realize(), n.bind(k)).item()
      np.testing.assert_allclose(got, (np.maximum(a_np + b_np, 0) * 2)[:k].sum() + a_np.sum(), rtol=1e-5, atol=1e-5)
  assert Device[Device.DEFAULT].graph is cpu_graph and isinstance(f.graph.graph, NativeCPUGraph if native else CPUGraph)


@pytest.mark.parametrize("native", [1, 0])
def test_replays_that_change_only_a_var_value(native: int):
  """The decode step's case: the same buffers, a new value each call (negative ones too) in kernels that read no input."""
  p = Variable("p", -50, 50)
  @TinyJit
  def f(x: Tensor, v) -> Tensor:
    for _ in range(3): x = (x * 0.5 + v).contiguous()
    return x
  x_np = np.random.randn(16).astype(np.float32)
  x = Tensor(x_np).realize()
  with Context(CPU_NATIVE_GRAPH=native):
    for v in [1, 2, 2, -7, 50, -50, 3, 0]:
      want = x_np
      for _ in range(3): want = want * 0.5 + v
      np.testing.assert_allclose(f(x, p.bind(v)).numpy(), want, rtol=1e-6, atol=1e-6)
  assert isinstance(f.graph.graph, NativeCPUGraph if native else CPUGraph)


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


@pytest.mark.parametrize("native", [1, 0])
def test_split_and_single_kernels_interleaved(native: int):
  """Kernels split over threads between kernels that run on one core: each reads what the one before it wrote (the
  barriers between them are what makes that hold in the native graph)."""
  rng = np.random.default_rng(native)
  w_np = rng.standard_normal((1024, 512)).astype(np.float32)
  w = Tensor(w_np).realize()
  @TinyJit
  def f(x: Tensor) -> Tensor:
    h = (w @ x).relu().contiguous()        # split (big)
    h = (h * 2 + 1).contiguous()           # small: one core
    return (w.T @ h).sum().contiguous() + h.max()  # split, then small reductions
  with Context(CPU_NATIVE_GRAPH=native):
    for _ in range(5):
      x_np = rng.standard_normal((512, 1)).astype(np.float32)
      h_ref = np.maximum(w_np.astype(np.float64) @ x_np, 0) * 2 + 1
      terms = w_np.T.astype(np.float64) @ h_ref
      # the sum of 512 terms of ~50 may cancel to ~1: float32's error is relative to the terms, not to the sum
      np.testing.assert_allclose(f(Tensor(x_np).realize()).item(), terms.sum() + h_ref.max(), rtol=1e-4, atol=1e-5 * np.abs(terms).sum())
  assert isinstance(f.graph.graph, NativeCPUGraph if native else CPUGraph)


def test_render_graph_barriers_only_where_threads_meet():
  """Between two kernels on core 0 no barrier; before and after a split kernel one; a kernel split over fewer threads than
  the team runs on the first cores only; the barriers count arrivals (team x barriers so far)."""
  src = render_graph([(2, 0, 1), (2, 1, 1), (3, 0, 2), (2, 0, 2), (1, 0, 1)], team=2)
  assert src.count("call void @tg_barrier") == 3
  assert "i32 2)" in src and "i32 4)" in src and "i32 6)" in src
  assert src.count("br i1 %is0") == 3 and "%core)" in src
  four = render_graph([(1, 0, 2), (1, 0, 4)], team=4)
  assert "icmp ult i32 %core, 2" in four and four.count("call void @tg_barrier") == 1
  assert "tg_barrier" not in render_graph([(1, 0, 1), (1, 0, 1)], team=1).split("define internal")[0]


def test_native_graph_is_the_default_and_can_be_turned_off():
  assert NATIVE_GRAPH.value == 1
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x + 1).sum()
  for _ in range(3): f(Tensor.ones(8).contiguous().realize())
  assert isinstance(f.graph.graph, NativeCPUGraph)


def test_barrier_waits_out_a_slow_thread_through_its_yields():
  """A thread that arrives at a barrier long before the other spins, then yields its core (x86-64 Linux: a raw
  sched_yield; a pure spin starved the late thread where both shared one core) and still passes only once the other
  arrives: the kernel after the barrier sees what the slow thread wrote before it."""
  seen: list[tuple[int, list[int]]] = []
  wrote: list[int] = []
  def split(core: int) -> None:
    if core == 1:
      time.sleep(0.05)  # core 0 meanwhile reaches the barrier and spins well past SPINS_BEFORE_YIELD
      wrote.append(1)
  def after() -> None: seen.append((len(seen), list(wrote)))
  kernel_t, after_t = ctypes.CFUNCTYPE(None, ctypes.c_int32), ctypes.CFUNCTYPE(None)
  fns = [kernel_t(split), after_t(after)]
  src = render_graph([(0, 0, 2), (0, 0, 1)], team=2)
  prog = CPUProgram("tg_graph", _graph_compiler().compile_cached(src))
  table = (ctypes.c_uint64 * 2)(*[ctypes.cast(f, ctypes.c_void_p).value for f in fns])
  counter = (ctypes.c_uint32 * 16)()
  for _ in range(3):
    counter[0] = 0
    wrote.clear()
    run_parallel(lambda core: prog.fxn(ctypes.c_void_p(ctypes.addressof(table)), ctypes.c_int32(core), ctypes.c_void_p(ctypes.addressof(counter))), 2)
    assert seen[-1][1] == [1]
  assert len(seen) == 3
  assert ("syscall" in src) == (platform.system() == "Linux" and platform.machine() == "x86_64")
