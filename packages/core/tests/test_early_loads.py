"""codegen/early_loads.py: a matrix-vector product's matrix loads go before the wait for the kernel before (GRID_WAIT), every
other global access after it; the heuristics unroll a short product's loop whole for that. Run on the PYTHON device with its
renderer told it has `grid_wait` (the interpreter runs kernels one after another, so the wait is a no-op there): the programs
must compute what numpy does, with the pass on and off."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.early_loads import early_loads, resident_threads
from tinygrad.codegen.heuristics import hand_coded_opts
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.program import lower_kernel_with_dims
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.dsl import GRID_WAIT
from tinygrad.uop.ops import Ops, UOp


@pytest.fixture
def grid_wait(monkeypatch):
  """The PYTHON device's renderer as a GPU's with grid_wait (CUDA's for sm_90+: blocks, 16-byte loads, the wait, an H100's 132
  SMs), small matrices counted as streamed, its runner cache cleared before and after."""
  if Device.DEFAULT != "PYTHON": pytest.skip("runs the programs on the PYTHON device (DEV=PYTHON)")
  from tinygrad.codegen import early_loads as module
  from tinygrad.engine import realize
  renderer = Device["PYTHON"].renderer
  for name in ("grid_wait", "has_local", "supports_float4"): monkeypatch.setattr(renderer, name, True)
  monkeypatch.setattr(renderer, "compute_units", 132)  # the resident grid early loads are sized to (codegen/early_loads.py)
  monkeypatch.setattr(module, "EARLY_MIN_BYTES", 0)
  realize._runner_cache.clear()
  # (the disk cache doesn't key on grid_wait; the interpreter loads halves one by one, not 8 at a time: 8x the loads a lane)
  with Context(PCACHE=0, EARLY_LOADS=128): yield renderer
  realize._runner_cache.clear()


def _asts(t: Tensor) -> list[UOp]:
  items, _ = create_schedule([t.uop])
  return [it.ast for it in items if it.ast.op is Ops.SINK]


def _wait(uops: list[UOp]) -> UOp | None: return next((u for u in uops if u.op is Ops.BARRIER and u.arg == GRID_WAIT), None)


def _matvec(n: int, k: int) -> tuple[Tensor, np.ndarray]:
  rng = np.random.default_rng(n + k)
  w, x = rng.standard_normal((n, k)).astype(np.float16), rng.standard_normal((1, k)).astype(np.float32)
  return Tensor(x) @ Tensor(w).T.cast(dtypes.float), x @ w.astype(np.float32).T


@pytest.mark.parametrize("n,k", [(128, 2048), (128, 4096)])
def test_matvec_loads_its_matrix_before_the_wait(grid_wait, n, k):
  out, ref = _matvec(n, k)
  (ast,) = _asts(out)
  uops, _, _ = lower_kernel_with_dims(ast, grid_wait)
  wait = _wait(uops)
  assert wait is not None
  at = uops.index(wait)
  before = [u for u in uops[:at] if u.op is Ops.LOAD]
  after = [u for u in uops[at:] if u.op in (Ops.LOAD, Ops.STORE) and _global(u) is not None]
  assert before and all((g := _global(u)) is not None and g.dtype.base == dtypes.half for u in before)  # the matrix, whole
  assert not any(u.op is Ops.RANGE for u in uops[:at])  # its loads outside loops: the loop was unrolled whole
  assert any(u.op is Ops.LOAD and (g := _global(u)) is not None and g.dtype.base == dtypes.float for u in after) and any(u.op is Ops.STORE for u in after)
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-3, atol=1e-3)


def _global(u: UOp) -> UOp | None:
  x = u.src[0]
  while x.op in (Ops.AFTER, Ops.CAST, Ops.INDEX): x = x.src[0]
  return x if x.op is Ops.DEFINE_GLOBAL else None


def test_off_and_without_grid_wait_nothing_moves(grid_wait):
  out, _ = _matvec(2048, 2048)
  (ast,) = _asts(out)
  with Context(EARLY_LOADS=0):
    assert _wait(lower_kernel_with_dims(ast, grid_wait)[0]) is None
  assert _wait(lower_kernel_with_dims(ast, grid_wait)[0]) is not None
  grid_wait.grid_wait = False
  assert _wait(lower_kernel_with_dims(ast, grid_wait)[0]) is None


def test_heuristics_unroll_a_short_product_whole_only_when_asked():
  out, _ = _matvec(2048, 2048)
  (ast,) = _asts(out)
  def unrolls(early: int, resident: int = resident_threads(132)) -> list[int]:
    return [o.amount for o in hand_coded_opts(ast, wide_loads=True, gpu=True, early_loads=early, resident_threads=resident) if o.op is OptOps.UNROLL]
  assert unrolls(0) == [8]  # 16-byte loads, the rest of each lane's loop a loop
  assert unrolls(16) == [8, 2048 // (8 * 64)] or unrolls(16) == [8, 2048 // (8 * 32)]
  assert unrolls(1) == [8]  # more loads a lane than allowed: a loop
  assert unrolls(16, resident=0) == [8]  # a GPU whose resident threads are unknown: the grid may not fit at once, a loop
  assert unrolls(16, resident=resident_threads(31)) == [8]  # 2048 rows x 32 lanes need 32 SMs at once: on 31, a loop


def test_what_is_not_streamed_stays_after_the_wait(grid_wait):
  """An activation (as big as the output), a matrix the kernel also writes, a prefill matmul (W read by 64 rows): no wait moved."""
  rng = np.random.default_rng(1)
  a = Tensor(rng.standard_normal((256, 1024)).astype(np.float32))
  for t in (a.sum(axis=1), a * 2 + 1, Tensor(rng.standard_normal((64, 512)).astype(np.float32)) @ Tensor(rng.standard_normal((512, 512)).astype(np.float32))):
    for ast in _asts(t):
      assert _wait(lower_kernel_with_dims(ast, grid_wait)[0]) is None


def test_pass_leaves_a_placed_wait_alone():
  x = UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(1 << 20), (), 1)
  y = UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(1), (), 0)
  ld = x.index(UOp.const(dtypes.int32, 0)).load()
  wait = UOp(Ops.BARRIER, dtypes.void, (ld,), GRID_WAIT)
  sink = UOp(Ops.AFTER, y.index(UOp.const(dtypes.int32, 0)).dtype, (y.index(UOp.const(dtypes.int32, 0)), wait)).store(ld).sink()
  assert early_loads(sink) is sink


@pytest.mark.parametrize("early", [0, 128])
def test_gated_mlp_and_matvec_chain_match_numpy(grid_wait, early):
  """A decode-like chain (norm, a gated MLP's two products, the down product): values with the pass on and off."""
  rng = np.random.default_rng(2)
  d, h = 256, 512
  x = rng.standard_normal((1, d)).astype(np.float32)
  wg, wu = (rng.standard_normal((h, d)).astype(np.float16) * 0.05 for _ in range(2))
  wd = rng.standard_normal((d, h)).astype(np.float16) * 0.05
  with Context(EARLY_LOADS=early):
    t = Tensor(x)
    n = t * (t.square().mean(-1, keepdim=True) + 1e-5).rsqrt()
    g = n @ Tensor(wg).T.cast(dtypes.float)
    u = n @ Tensor(wu).T.cast(dtypes.float)
    got = ((g.silu() * u) @ Tensor(wd).T.cast(dtypes.float)).numpy()
  nx = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)
  gn, un = nx @ wg.astype(np.float32).T, nx @ wu.astype(np.float32).T
  ref = (gn / (1 + np.exp(-gn)) * un) @ wd.astype(np.float32).T
  np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3)
