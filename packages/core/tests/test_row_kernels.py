"""Row kernels (schedule/rows.py, codegen/rows.py): a reduction over the last axis and the elementwise ops that broadcast its
result back along that axis run as one kernel: softmax, log_softmax, RMSNorm, LayerNorm.

Kernel counts and the program's shape are compile_only (NULL:CUDA compiles every kernel with NVRTC, NULL:PTX with our PTX);
values against numpy run on PYTHON/CLANG/LLVM, and on the PYTHON device told it is a GPU (GROUP: the output loop spread
over a block's lanes, each lane storing its own outputs).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from tinygrad import Device, Tensor
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.program import get_program
from tinygrad.engine import realize
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops

F32 = np.float32
ON_NULL = Device.DEFAULT.startswith("NULL")
runs = pytest.mark.skipif(ON_NULL, reason="reads values back: NULL runs nothing")


def np_softmax(a: np.ndarray) -> np.ndarray:
  e = np.exp(a - a.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def np_layernorm(a: np.ndarray, eps: float = 1e-5) -> np.ndarray:
  mu = a.mean(-1, keepdims=True)
  return (a - mu) / np.sqrt(((a - mu) ** 2).mean(-1, keepdims=True) + eps)


def np_rmsnorm(a: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray: return a / np.sqrt((a * a).mean(-1, keepdims=True) + eps) * w


# name -> (ours(x, w), numpy(a, w)), each a row kernel where it applies
OPS: dict[str, tuple[Callable, Callable]] = {
  "softmax": (lambda x, w: x.softmax(-1), lambda a, w: np_softmax(a)),
  "log_softmax": (lambda x, w: x.log_softmax(-1), lambda a, w: np.log(np_softmax(a))),
  "rmsnorm": (lambda x, w: x.rms_norm() * w, np_rmsnorm),
  "layernorm": (lambda x, w: x.layernorm(), lambda a, w: np_layernorm(a)),
}


def n_kernels(t: Tensor) -> int: return len(t.schedule())


# ---- kernel counts

@pytest.mark.compile_only
@pytest.mark.parametrize("name", list(OPS))
def test_one_kernel_each(name: str):
  ours, _ = OPS[name]
  for shape in ((64, 4096), (7, 13), (2, 3, 40), (1, 64)):
    assert n_kernels(ours(Tensor.empty(*shape), Tensor.empty(shape[-1]))) == 1, (name, shape)


@pytest.mark.compile_only
def test_with_a_following_op():
  x, w = Tensor.empty(64, 256), Tensor.empty(256, 32)
  assert n_kernels(x.softmax(1) @ w) == 2  # the softmax, then the matmul reading it
  assert n_kernels(x.softmax(1).half()) == 1
  assert n_kernels(x.softmax(1) * 2 + 1) == 1
  assert n_kernels(x.softmax(1).sum(1)) == 1  # a third reduction of the same rows
  assert n_kernels(x.softmax(1).T.contiguous()) == 2  # a permuted result: its own kernel, as a buffer read by a copy


@pytest.mark.compile_only
def test_where_the_rule_does_not_apply():
  x = Tensor.empty(64, 256)
  assert n_kernels(x.softmax(0)) > 1  # over an inner axis
  assert n_kernels(x - x.max(keepdim=True)) == 2  # over several axes
  assert n_kernels(x.reshape(64, 16, 16) - x.reshape(64, 16, 16).max((1, 2), keepdim=True)) == 2
  assert n_kernels(Tensor.empty(4, 40000).softmax(1)) > 1  # rows longer than ROW_FUSE_MAX
  with Context(ROW_FUSE_MAX=0): assert n_kernels(x.softmax(1)) > 1


@pytest.mark.compile_only
def test_a_scale_on_a_matmul_as_wide_as_the_row_is_not_recomputed():
  """A norm's scale times a matmul's output (tinygrad.llm's rms_scale: (x * w) @ W.T * scale) broadcasts the scale to the
  matmul's shape, which equals the row's when W is square: the matmul varies along the row, so no row kernel (the scale would
  be recomputed for every output); no kernel holds more than one reduction (a CPU's copy of W packed into panels, none)."""
  for t in (1, 64):
    x, w, W = Tensor.empty(1, t, 256), Tensor.empty(256), Tensor.empty(256, 256)
    scale = (x.square().mean(-1, keepdim=True) + 1e-6).rsqrt()
    items = (((x * w) @ W.T) * scale).schedule()
    reduces = [sum(1 for n in si.ast.toposort() if n.op is Ops.REDUCE) for si in items]
    assert max(reduces) == 1 and sum(reduces) >= 2, (t, reduces)


@pytest.mark.compile_only
@pytest.mark.skipif(not ON_NULL, reason="compiles on NULL (NULL:CUDA: NVRTC, NULL:PTX: nvJitLink); elsewhere test_values runs them")
def test_compiles():
  """Every row kernel here compiles: the GPU's fast path (64 x 4096, 1 x 2048) and the heuristics' GROUP (7 x 13, 5 x 130)."""
  for shape in ((64, 4096), (7, 13), (1, 2048), (5, 130)):
    for ours, _ in OPS.values(): ours(Tensor.empty(*shape), Tensor.empty(shape[-1])).realize()
    Tensor.empty(*shape).half().softmax(-1).realize()  # halves in, halves out, the sum in float32


# ---- the program: reductions once per row

@pytest.mark.compile_only
@pytest.mark.parametrize("name", list(OPS))
def test_reductions_run_once_per_row(name: str):
  """No accumulator of a reduction is written inside the loop over a row's outputs; the kernel loads about what one pass
  per reduction and one for the outputs read, not a reduction per output element."""
  rows, cols = 16, 1024
  ours, _ = OPS[name]
  (si,) = ours(Tensor.empty(rows, cols), Tensor.empty(cols)).schedule()
  assert any(n.op is Ops.RANGE and n.arg[1] == "row" for n in si.ast.toposort())
  p = get_program(si.ast, Device.renderer(Device.DEFAULT))
  depth, inside_row = [], 0
  for u in p.uops:
    if u.op is Ops.RANGE:
      depth.append(u.arg[1] == "row")
      inside_row += depth[-1]
    elif u.op is Ops.END and depth: inside_row -= depth.pop()
    elif u.op is Ops.STORE and inside_row: assert u.src[0].src[0].op is Ops.DEFINE_GLOBAL, f"{name}: an accumulator updated per output"
  assert p.estimated_mem <= 4 * rows * cols * 5, (name, p.estimated_mem)  # 2 reductions + the outputs' pass + the store, and the weight


@pytest.mark.compile_only
@pytest.mark.skipif(Device.renderer(Device.DEFAULT).has_local, reason="a CPU-style renderer's heuristics")
def test_cpu_row_kernel_unrolls_every_reduction():
  """softmax's sum of exp(x - max) reads the max's result but doesn't run inside its loop: both reductions get independent
  accumulators (unrolled), not only the first (one serial chain through 4096 exps ran softmax at 1.6 GB/s; 4.9 unrolled)."""
  (si,) = Tensor.empty(64, 4096).softmax(1).schedule()
  p = get_program(si.ast, Device.renderer(Device.DEFAULT))
  reduce_axes = {r.arg[0] for r in si.ast.toposort() if r.op is Ops.RANGE and r.arg[1] == "reduce"}
  unrolled = {o.axis for o in p.opts if o.op is OptOps.UNROLL}
  assert len(reduce_axes) == 2 and reduce_axes <= unrolled, (reduce_axes, p.opts)


@pytest.mark.compile_only
@pytest.mark.skipif(not (Device.renderer(Device.DEFAULT).has_local and Device.renderer(Device.DEFAULT).supports_float4),
                    reason="a GPU renderer with 16-byte accesses (NULL:CUDA)")
@pytest.mark.parametrize("cols", [512, 2048, 4096, 16384])
def test_gpu_row_read_once(cols: int):
  """On a GPU every pass over the row (the reductions, the outputs) reads the same elements through the same loads, which
  merge: the kernel loads the input once, as many 16-byte loads as it stores (codegen/rows.py gpu_row_opts)."""
  for name, (ours, _) in OPS.items():
    (si,) = ours(Tensor.empty(64, cols), Tensor.empty(cols)).schedule()
    p = get_program(si.ast, Device.renderer(Device.DEFAULT))
    assert any(o.op is OptOps.GROUP for o in p.opts), (name, p.opts)
    x_param = 1  # the input matrix: the first buffer the kernel reads
    loads = [u for u in p.uops if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL and u.src[0].src[0].arg == x_param]
    stores = [u for u in p.uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
    assert len(loads) == len(stores) and all(u.dtype.count == 4 for u in loads), (name, len(loads), len(stores))


# ---- values

SHAPES = [(7, 13), (3, 1000), (1, 64), (5, 1), (4, 2048), (2, 3, 40)]


@runs
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_values(shape: tuple[int, ...]):
  rng = np.random.default_rng(0)
  a = (rng.standard_normal(shape) * 3).astype(F32)
  w = rng.standard_normal(shape[-1]).astype(F32)
  for name, (ours, ref) in OPS.items():
    np.testing.assert_allclose(ours(Tensor(a), Tensor(w)).numpy(), ref(a.astype(np.float64), w), rtol=1e-4, atol=1e-5, err_msg=name)


@runs
def test_values_strided_keepdim_and_following_ops():
  rng = np.random.default_rng(1)
  a = (rng.standard_normal((24, 37)) * 3).astype(F32)
  w = rng.standard_normal((37, 5)).astype(F32)
  sm = np_softmax(a.astype(np.float64))
  x = Tensor(np.ascontiguousarray(a.T)).T  # a transposed view: rows are strided
  np.testing.assert_allclose(x.softmax(1).numpy(), sm, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose((Tensor(a).softmax(1) @ Tensor(w)).numpy(), sm @ w, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(Tensor(a).softmax(1).half().numpy().astype(np.float64), sm, rtol=2e-3, atol=1e-4)
  np.testing.assert_allclose(Tensor(a).softmax(1).sum(1, keepdim=True).numpy(), np.ones((24, 1)), rtol=1e-5)
  m = Tensor(a)
  np.testing.assert_allclose((m - m.mean(1, keepdim=True)).numpy(), a - a.mean(1, keepdims=True), rtol=1e-5, atol=1e-5)


# ---- on a GPU-style renderer: the output loop over the lanes of a GROUP

@pytest.mark.skipif(not Device.DEFAULT.startswith("PYTHON"), reason="emulates a GPU on the PYTHON device (DEV=PYTHON)")
@pytest.mark.parametrize("shape", [(6, 512), (3, 2048), (5, 1000), (3, 200), (9, 130)], ids=str)
def test_grouped_values(gpu, shape: tuple[int, int]):
  """Every lane holds the reduced values after the final combine and stores its own outputs (c = k*G + lane; a lane past the
  row's end stores nothing: 1000/4 and 200/4 and 130 don't divide by the group)."""
  rng = np.random.default_rng(2)
  a = (rng.standard_normal(shape) * 3).astype(F32)
  w = rng.standard_normal(shape[-1]).astype(F32)
  for name, (ours, ref) in OPS.items():
    realize._runner_cache.clear()
    np.testing.assert_allclose(ours(Tensor(a), Tensor(w)).numpy(), ref(a.astype(np.float64), w), rtol=1e-4, atol=1e-5, err_msg=name)
    (runner,) = realize._runner_cache.values()
    assert any(o.op is OptOps.GROUP for o in runner.spec.opts), (name, runner.spec.opts)
