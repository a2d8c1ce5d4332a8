"""The benchmark workloads, written against the tinygrad API that this project and tinygrad 0.14.0 share.

Our side imports this module in the workspace environment; bench/peers/tinygrad_peer.py imports the very same
functions inside an isolated environment with tinygrad 0.14.0, so both sides run identical Python.
Every workload returns a dict of figures; times are wall clock around realize() + synchronize().
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from shapes import CONV, MATMUL_SIZES, MLP, N_16M, REDUCE_2D, mlp_flops
from tinygrad import Device, Tensor, TinyJit, Variable


def sync() -> None: Device[Device.DEFAULT].synchronize()


def timeit(fn: Callable[[], Any], runs: int, warmup: int = 2) -> dict[str, float]:
  """Best and median wall time of `runs` calls after `warmup` calls (which compile and fill caches)."""
  for _ in range(warmup):
    fn()
    sync()
  times = []
  for _ in range(runs):
    st = time.perf_counter()
    fn()
    sync()
    times.append(time.perf_counter() - st)
  return {"best_s": min(times), "median_s": statistics.median(times), "runs": runs}


def _rate(t: dict[str, float], amount: float, unit: str) -> dict[str, Any]:
  """Figures per second from the best time (the least disturbed by other load on the machine)."""
  return {**t, unit: amount / t["best_s"] * 1e-9, f"{unit}_median": amount / t["median_s"] * 1e-9}


def first_call(fn: Callable[[], Any]) -> float:
  """Seconds of the first call: compiling (and under BEAM, searching or reading the search's cache)."""
  st = time.perf_counter()
  fn()
  sync()
  return time.perf_counter() - st


def matmul(n: int) -> dict[str, Any]:
  """Timed under TinyJit: the kernels alone, as numpy's figure is its BLAS call (scheduling a 512 matmul anew each call
  costs about as much as running it)."""
  a, b = Tensor.rand(n, n).realize(), Tensor.rand(n, n).realize()
  first = first_call(lambda: (a @ b).realize())
  step = TinyJit(lambda a, b: (a @ b).realize())
  return {**_rate(timeit(lambda: step(a, b), runs=max(3, 4096 // n * 2), warmup=3), 2 * n**3, "gflops"), "first_call_s": first}


def add() -> dict[str, Any]:
  a, b = Tensor.rand(N_16M).realize(), Tensor.rand(N_16M).realize()
  return _rate(timeit(lambda: (a + b).realize(), runs=10), 3 * 4 * N_16M, "gbs")


def sum_() -> dict[str, Any]:
  a = Tensor.rand(N_16M).realize()
  return _rate(timeit(lambda: a.sum().realize(), runs=10), 4 * N_16M, "gbs")


def sum_axis0() -> dict[str, Any]:
  """Column sums: the reduction strides a whole row a step (64 MB read per call)."""
  a = Tensor.rand(REDUCE_2D, REDUCE_2D).realize()
  step = TinyJit(lambda a: a.sum(0).realize())
  return _rate(timeit(lambda: step(a), runs=10, warmup=3), 4 * REDUCE_2D * REDUCE_2D, "gbs")


def vecmat() -> dict[str, Any]:
  """A vector times a matrix stored (K, N), as `x @ w` with w of shape (in, out): the matrix read once (GB/s)."""
  x, w = Tensor.rand(1, REDUCE_2D).realize(), Tensor.rand(REDUCE_2D, REDUCE_2D).realize()
  step = TinyJit(lambda x, w: (x @ w).realize())
  return _rate(timeit(lambda: step(x, w), runs=10, warmup=3), 4 * REDUCE_2D * REDUCE_2D, "gbs")


def softmax() -> dict[str, Any]:
  x = Tensor.rand(4096, 4096).realize()
  # bytes: read the input and write the output once (what any implementation must move at least)
  return _rate(timeit(lambda: x.softmax(1).realize(), runs=5), 2 * 4 * 4096 * 4096, "gbs")


def conv2d() -> dict[str, Any]:
  bs, cin, cout, hw, k = CONV
  x, w = Tensor.rand(bs, cin, hw, hw).realize(), Tensor.rand(cout, cin, k, k).realize()
  first = first_call(lambda: x.conv2d(w, padding=1).realize())
  t = timeit(lambda: x.conv2d(w, padding=1).realize(), runs=3, warmup=0)
  return {**_rate(t, 2 * bs * cout * hw * hw * cin * k * k, "gflops"), "first_call_s": first}


def make_mlp_step() -> tuple[Callable[[Tensor, Tensor], Tensor], Tensor, Tensor]:
  """A jitted training step of a 3-layer MLP with softmax cross-entropy and plain SGD written inline."""
  Tensor.manual_seed(0)
  bs, *sizes = MLP
  params = []
  for i, o in zip(sizes, sizes[1:]):
    params += [Tensor.scaled_uniform(i, o).contiguous().realize(), Tensor.zeros(o).contiguous().realize()]
  for p in params: p.requires_grad = True  # (tinygrad 0.14's rand constructors take no requires_grad)
  lr = 0.01

  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    h = x
    for j in range(0, len(params), 2):
      h = h @ params[j] + params[j + 1]
      if j + 2 < len(params): h = h.relu()
    loss = h.sparse_categorical_crossentropy(y)
    loss.backward()
    for p in params:
      p.assign(p.detach() - p.grad * lr)
    loss.realize(*params)
    for p in params: p.grad = None
    return loss

  x = Tensor.rand(bs, sizes[0]).realize()
  y = (Tensor.rand(bs) * sizes[-1]).cast("int32").realize()
  return step, x, y


def mlp_step() -> dict[str, Any]:
  step, x, y = make_mlp_step()
  t = timeit(lambda: step(x, y), runs=20, warmup=3)
  return {**_rate(t, mlp_flops(), "gflops"), "ms": t["best_s"] * 1e3, "ms_median": t["median_s"] * 1e3}


def mlp_cold() -> dict[str, Any]:
  """The first call of the step in a fresh process (run this with an empty cache): schedule + compile + run."""
  step, x, y = make_mlp_step()
  st = time.perf_counter()
  step(x, y)
  sync()
  cold = time.perf_counter() - st
  return {"cold_s": cold}


def lstm_cold(steps: int = 8, batch: int = 4, vocab: int = 16) -> dict[str, Any]:
  """The first call of a jitted training step of a character LSTM unrolled over `steps` positions (Embedding, LSTMCell,
  Linear, Adam) in a fresh process (run with an empty cache): schedule + compile + run. Session 23 found ours far slower
  here than tinygrad 0.14 (the backward's kernels grew with the unrolled history; fixed in session 24: schedule/recompute.py)."""
  from tinygrad import dtypes, nn
  from tinygrad.nn.state import get_parameters
  emb, cell, head = nn.Embedding(vocab, 8), nn.LSTMCell(8, 16), nn.Linear(16, vocab)
  opt = nn.optim.Adam(get_parameters([emb, cell, head]), lr=0.01)

  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    hc, outs = None, []
    for t in range(steps):
      hc = cell(emb(x[:, t]), hc)
      outs.append(head(hc[0]))
    loss = Tensor.stack(*outs, dim=1).sparse_categorical_crossentropy(y).backward()
    opt.step()
    return loss.realize()

  x = (Tensor.rand(batch, steps) * vocab).cast(dtypes.int32).realize()
  y = (Tensor.rand(batch, steps) * vocab).cast(dtypes.int32).realize()
  from tinygrad.helpers import Context
  with Context(TRAINING=1):  # (tinygrad 0.14 has no Tensor.train(); both read this setting)
    st = time.perf_counter()
    step(x, y)
    sync()
    return {"cold_s": time.perf_counter() - st}


def _replay_cost(call: Callable[[int], Any], kernels: int, calls: int) -> dict[str, Any]:
  """Per-call time of `call(i)` (a jitted function of `kernels` tiny kernels), after its run, capture and first replay:
  the best and the median of 5 rounds of `calls` calls."""
  for i in range(3): call(i)
  sync()
  times = []
  for _ in range(5):
    st = time.perf_counter()
    for i in range(calls): call(i + 1)
    sync()
    times.append((time.perf_counter() - st) / calls)
  best, med = min(times), statistics.median(times)
  return {"us_per_call": best * 1e6, "us_per_call_median": med * 1e6, "us_per_kernel": best * 1e6 / kernels, "kernels": kernels}


def jit_overhead(kernels: int = 10, calls: int = 2000) -> dict[str, Any]:
  """Per-call time of replaying a jitted function of `kernels` tiny kernels (16 floats each): Python overhead."""
  @TinyJit
  def f(x: Tensor) -> Tensor:
    for i in range(kernels): x = (x * 1.0001 + i).realize()
    return x

  x = Tensor.rand(16).realize()
  return _replay_cost(lambda i: f(x), kernels, calls)


def jit_overhead_var(kernels: int = 10, calls: int = 2000) -> dict[str, Any]:
  """jit_overhead with a bound Variable that takes a new value every call, as an LLM's decode step does with its position:
  every kernel's launch changes, with the same buffers."""
  pos = Variable("pos", 0, 1 << 20)

  @TinyJit
  def f(x: Tensor, p: Any) -> Tensor:
    for _ in range(kernels): x = (x * 1.0001 + p).realize()
    return x

  x = Tensor.rand(16).realize()
  return _replay_cost(lambda i: f(x, pos.bind(i)), kernels, calls)


WORKLOADS: dict[str, Callable[[], dict[str, Any]]] = {
  **{f"matmul_{n}": (lambda n=n: matmul(n)) for n in MATMUL_SIZES},  # type: ignore[misc]
  "add": add, "sum": sum_, "sum_axis0": sum_axis0, "vecmat": vecmat, "softmax": softmax, "conv2d": conv2d, "mlp_step": mlp_step, "mlp_cold": mlp_cold,
  "lstm_cold": lstm_cold, "jit_overhead": jit_overhead, "jit_overhead_var": jit_overhead_var,
}
