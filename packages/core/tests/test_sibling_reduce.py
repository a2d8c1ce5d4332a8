"""Sibling reductions (schedule/siblings.py): reductions of one kernel over loops of the same length, neither reading the other,
share one loop; on a GPU a scalar reduction (an RMS norm's sum of squares) joins the kernel of a sibling that its broadcast value
meets (the matrix-vector product after the norm), instead of running as a kernel of its own (SIBLING_REDUCE=1, the default;
these tests set it, so that they test the fusion whatever the environment says).

Kernel counts and shared loops are read off the schedule (any device); values against numpy run on PYTHON/CLANG/LLVM, and on
the PYTHON device told it is a GPU (the `gpu` fixture, conftest.py)."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, UOp

ON_NULL = Device.DEFAULT.startswith("NULL")
runs = pytest.mark.skipif(ON_NULL, reason="reads values back: NULL runs nothing")
# a GPU-style kernel reads shared memory: runs on PYTHON (told it is a GPU) and on a real GPU, not on the CPU renderers
GPU_RUNS = Device.DEFAULT.startswith("PYTHON") or (not ON_NULL and Device.renderer(Device.DEFAULT).has_local)
runs_gpu = pytest.mark.skipif(not GPU_RUNS, reason="runs a GPU-style kernel: DEV=PYTHON (emulated) or a GPU")
EPS = 1e-5


@pytest.fixture(autouse=True)
def sibling_fusion_on():
  """On by default since the warp-shuffle combine (bench/README.md); set here so that SIBLING_REDUCE=0 in the environment
  doesn't turn these tests into no-ops."""
  with Context(SIBLING_REDUCE=1): yield


def asts(*ts: Tensor) -> list[UOp]: return [si.ast for si in Tensor.schedule(*ts) if si.ast.op is Ops.SINK]


def reduce_loops(ast: UOp) -> list[tuple[UOp, ...]]: return [r.src[1:] for r in ast.toposort() if r.op is Ops.REDUCE]


def normed_matvec(x: Tensor, g: Tensor, w: Tensor) -> Tensor:
  """llm's form: (x * g) @ W.T, times the norm's factor rsqrt(mean(x^2) + eps)."""
  return ((x * g) @ w.T) * (x.square().mean(-1, keepdim=True) + EPS).rsqrt()


def np_normed_matvec(a: np.ndarray, g: np.ndarray, w: np.ndarray) -> np.ndarray:
  return ((a * g) @ w.T.astype(np.float32)) / np.sqrt((a * a).mean(-1, keepdims=True) + EPS)


def rand(*shape: int, seed: int = 0) -> np.ndarray: return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- loops shared within a kernel

def test_sum_and_max_of_rows_share_one_loop(gpu):
  (ast,) = asts(Tensor.empty(4, 256).sum(1) + Tensor.empty(4, 256).max(1))
  loops = reduce_loops(ast)
  assert len(loops) == 2 and loops[0] == loops[1]


def test_on_a_cpu_siblings_keep_a_loop_each():
  """A CPU runs each output's loops on one thread: one loop with two accumulators measured slower than two loops."""
  if Device.renderer(Device.DEFAULT).has_local: pytest.skip("the default device is GPU-style")
  (ast,) = asts(Tensor.empty(4, 256).sum(1) + Tensor.empty(4, 256).max(1))
  assert len(set(reduce_loops(ast))) == 2


def test_a_reduction_that_reads_another_keeps_its_loop(gpu):
  (ast,) = asts(Tensor.empty(4, 256).softmax(1))  # the sum of exp(x - max) reads the max: two loops, one after the other
  loops = reduce_loops(ast)
  assert len(loops) == 2 and loops[0] != loops[1]


def test_loops_of_different_lengths_stay_apart(gpu):
  a = Tensor.empty(4, 256)
  (ast,) = asts(a.sum(1) + a[:, :128].max(1))
  assert len(set(reduce_loops(ast))) == 2


@pytest.mark.parametrize("on_gpu", [False, pytest.param(True, marks=runs_gpu)])
@runs
def test_shared_loop_values(request, on_gpu: bool):
  if on_gpu: request.getfixturevalue("gpu_shuffles")
  a, b = rand(5, 300), rand(5, 300, seed=1)
  out = (Tensor(a).sum(1) * Tensor(b).max(1) + (Tensor(a) * Tensor(b)).sum(1)).numpy()
  np.testing.assert_allclose(out, a.sum(1) * b.max(1) + (a * b).sum(1), rtol=1e-5, atol=1e-4)


# ---- a norm's sum of squares in the kernel of the matrix-vector product after it

def test_the_norm_joins_its_matvec_on_a_gpu(gpu):
  x, g, w = Tensor.empty(1, 1, 256), Tensor.empty(256), Tensor.empty(96, 256, dtype=dtypes.float16)
  (ast,) = asts(normed_matvec(x, g, w.float()))
  loops = reduce_loops(ast)
  assert len(loops) == 2 and loops[0] == loops[1]  # the sum of squares in the product's loop: x loaded once for both
  with Context(SIBLING_REDUCE=0): assert len(asts(normed_matvec(x, g, w.float()))) == 2


def test_off_a_gpu_the_norm_keeps_its_kernel():
  if Device.renderer(Device.DEFAULT).has_local: pytest.skip("the default device is a GPU")
  x, g, w = Tensor.empty(1, 1, 256), Tensor.empty(256), Tensor.empty(96, 256)
  assert len(asts(normed_matvec(x, g, w))) == 2  # a CPU's output loop is a loop: the norm would be summed again per output


def test_a_batch_of_rows_keeps_the_norm_apart(gpu):
  x, g, w = Tensor.empty(1, 4, 256), Tensor.empty(256), Tensor.empty(96, 256)
  assert len(asts(normed_matvec(x, g, w))) == 2  # a factor per row, not a scalar: its own kernel


def test_a_product_over_blocks_keeps_the_norm_apart(gpu):
  # a quantized weight's product reduces over (blocks, elements of a block): not the norm's one loop of 256
  x, g, w = Tensor.empty(1, 1, 256), Tensor.empty(256), Tensor.empty(96, 8, 32)
  s = (x.square().mean(-1, keepdim=True) + EPS).rsqrt()
  assert len(asts((x * g).reshape(1, 1, 1, 8, 32).mul(w).sum((-1, -2)) * s)) == 2


def test_a_realized_product_keeps_the_norm_apart(gpu):
  x, g, w = Tensor.empty(1, 1, 256), Tensor.empty(256), Tensor.empty(96, 256)
  s = (x.square().mean(-1, keepdim=True) + EPS).rsqrt()
  assert len(asts(((x * g) @ w.T).contiguous() * s)) == 3  # the product, the norm, their product: none recomputes a sum


@runs
@pytest.mark.parametrize("on_gpu", [False, pytest.param(True, marks=runs_gpu)])
def test_normed_matvec_values(request, on_gpu: bool):
  if on_gpu: request.getfixturevalue("gpu_shuffles")
  a, g, w = rand(1, 1, 320), rand(320, seed=1), rand(48, 320, seed=2).astype(np.float16)
  out = normed_matvec(Tensor(a), Tensor(g), Tensor(w).float()).numpy()
  np.testing.assert_allclose(out, np_normed_matvec(a, g, w), rtol=1e-4, atol=1e-4)


@runs_gpu
def test_the_product_also_read_by_another_reduction(gpu):
  # the product feeds a second reduction too, so it gets a buffer after the norm had chosen its kernel: the norm then gets one
  a, g, w = rand(1, 1, 256), rand(256, seed=1), rand(64, 256, seed=2)
  x, gt, wt = Tensor(a), Tensor(g), Tensor(w)
  prod = (x * gt) @ wt.T
  out = prod * (x.square().mean(-1, keepdim=True) + EPS).rsqrt()
  total = prod.sum()
  assert all(len(set(reduce_loops(ast))) <= 1 for ast in asts(out, total))  # no kernel sums the norm per output element
  Tensor.realize_all(out, total)
  want = (a * g) @ w.T
  np.testing.assert_allclose(out.numpy(), want / np.sqrt((a * a).mean(-1, keepdims=True) + EPS), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(total.numpy(), want.sum(), rtol=1e-4, atol=1e-3)


def test_siblings_share_the_vector_in_the_rows_a_thread_heuristic(gpu):
  """Two float16 matrix-vector products of one float32 vector (an FFN's gate and up as siblings) already serve each vector load
  to two rows: the GPU heuristics count that load once, and give the kernel no more rows a thread (UPCAST) than one product
  over the stacked matrix gets (measured on the H200: 4 rows a thread ran slower, bench/README.md)."""
  from tinygrad.codegen.heuristics import hand_coded_opts
  from tinygrad.codegen.opt import OptOps
  x, g, w = Tensor.empty(1, 2048), Tensor.empty(2048), Tensor.empty(2 * 4096, 2048, dtype=dtypes.half)
  xg = x * g
  def rows_a_thread(t: Tensor) -> int:
    (ast,) = asts(t)
    ups = [o.amount for o in hand_coded_opts(ast, wide_loads=True, gpu=True) if o.op is OptOps.UPCAST]
    return (ups[0] if ups else 1) * len([r for r in ast.toposort() if r.op is Ops.REDUCE])
  stacked = rows_a_thread(xg @ w.cast(dtypes.float).T)
  siblings = rows_a_thread((xg @ w[:4096].cast(dtypes.float).T).silu() * (xg @ w[4096:].cast(dtypes.float).T))
  assert stacked == 2 and siblings == 2
