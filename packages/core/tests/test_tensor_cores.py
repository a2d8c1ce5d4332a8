"""Tensor-core matmuls (codegen/tensor_core.py) emulated on PYTHON::sm_80 / PYTHON::sm_89: the PYTHON device runs the
same WMMA kernels as the GPU, lane by lane from the plugin's layout tables, so they are checked here without one."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.program import get_program
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops

# every test here runs on PYTHON::sm_80/89 whatever DEV says: once, in the PYTHON session (the CPU sessions would repeat it)
pytestmark = [pytest.mark.skipif(not Device.tensor_cores("sm_80"), reason="no plugin provides NVIDIA tensor cores (tinygrad-backend-nv)"),
              pytest.mark.skipif(not Device.DEFAULT.startswith("PYTHON"), reason="emulated on PYTHON::sm_80: runs in the PYTHON session")]
TOL = {dtypes.float16: 1e-2, dtypes.bfloat16: 3e-2, dtypes.float32: 3e-3}


def _programs(out: Tensor) -> list:
  items, _ = create_schedule([out.uop])
  renderer = Device.renderer(str(out.device))
  return [get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK]


def _rand(shape: tuple[int, ...], dt, seed: int) -> tuple[Tensor, np.ndarray]:
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  t = Tensor(x).cast(dt).realize()
  return t, t.float().numpy().astype(np.float64)  # the reference sees the operands' rounded values


def _check(got: Tensor, ref: np.ndarray, dt, uses_tc: bool) -> None:
  progs = _programs(got)
  wmma = [p for p in progs if any(u.op is Ops.WMMA for u in p.uops)]
  assert bool(wmma) == uses_tc, [p.opts for p in progs]
  if uses_tc: assert all(any(o.op is OptOps.TC for o in p.opts) for p in wmma)
  out = got.float().numpy().astype(np.float64)
  assert out.shape == ref.shape
  np.testing.assert_allclose(out, ref, atol=TOL[dt] * max(np.abs(ref).max(), 1.0), rtol=TOL[dt])


@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16])
def test_matmul(arch: str, dt) -> None:
  dev = f"PYTHON::{arch}"
  with Context(DEV=dev):
    (a, an), (b, bn) = _rand((32, 64), dt, 1), _rand((64, 32), dt, 2)
    _check(a @ b, an @ bn, dt, True)


def test_bias_relu_epilogue() -> None:
  dev, dt = "PYTHON::sm_80", dtypes.bfloat16
  with Context(DEV=dev):
    (a, an), (b, bn), (c, cn) = _rand((32, 32), dt, 3), _rand((32, 48), dt, 4), _rand((48,), dt, 5)
    _check(((a @ b) + c).relu(), np.maximum(an @ bn + cn, 0), dt, True)


def test_batched_and_transposed() -> None:
  dev, dt = "PYTHON::sm_80", dtypes.float16
  with Context(DEV=dev):
    (a, an), (b, bn) = _rand((2, 16, 32), dt, 6), _rand((2, 32, 16), dt, 7)
    _check(a @ b, an @ bn, dt, True)
    (a, an), (b, bn) = _rand((32, 16), dt, 8), _rand((16, 32), dt, 9)  # A read transposed: contiguous along M
    _check(a.T @ b.T, an.T @ bn.T, dt, True)


def test_fallbacks() -> None:
  dev, dt = "PYTHON::sm_80", dtypes.float16
  with Context(DEV=dev):
    (a, an), (b, bn) = _rand((24, 20), dt, 10), _rand((20, 12), dt, 11)  # doesn't tile: the plain path
    _check(a @ b, an @ bn, dt, False)
    (a, an), (b, bn) = _rand((16, 16), dt, 12), _rand((16, 8), dt, 13)
    with Context(TC=0): _check(a @ b, an @ bn, dt, False)
    (a, an), (b, bn) = _rand((16, 16), dtypes.float32, 14), _rand((16, 8), dtypes.float32, 15)
    _check(a @ b, an @ bn, dtypes.float32, False)  # float32 stays off tf32 unless ALLOW_TF32
  with Context(DEV="PYTHON"):  # no arch: no tensor cores
    (a, an), (b, bn) = _rand((16, 16), dt, 16), _rand((16, 8), dt, 17)
    _check(a @ b, an @ bn, dt, False)


def test_tf32_when_allowed() -> None:
  dev = "PYTHON::sm_80"
  with Context(DEV=dev, ALLOW_TF32=1):
    (a, an), (b, bn) = _rand((16, 16), dtypes.float32, 18), _rand((16, 8), dtypes.float32, 19)
    _check(a @ b, an @ bn, dtypes.float32, True)


def test_wmma_emulation_matches_layouts() -> None:
  """One WMMA from made-up fragments: lane l's A element i is the value of (row, k) = a_layout[l][i]; same for B, C."""
  from tinygrad.runtime.python import wmma_emulator
  tc = next(tc for tc in Device.tensor_cores("sm_80") if tc.dtype_in == dtypes.float16)
  M, N, K = tc.dims
  A, B, C = np.arange(M * K).reshape(M, K) % 7 - 3.0, np.arange(K * N).reshape(K, N) % 5 - 2.0, np.arange(M * N).reshape(M, N) % 3 * 1.0
  emulate = wmma_emulator((tc.dims, tc.threads, tc.a_layout, tc.b_layout, tc.c_layout, tc.dtype_in.name, tc.dtype_out.name))
  d = emulate([tuple(A[r, k] for r, k in tc.a_layout[lane]) for lane in range(32)], [tuple(B[k, c] for k, c in tc.b_layout[lane]) for lane in range(32)],
              [tuple(C[r, c] for r, c in tc.c_layout[lane]) for lane in range(32)])
  D = A @ B + C
  for lane in range(32): assert d[lane] == tuple(D[r, c] for r, c in tc.c_layout[lane])


@pytest.mark.parametrize("swizzle", [0, 2])
def test_block_order_swizzle(swizzle: int) -> None:
  """Blocks walk `swizzle` rows of output tiles together (L2 reuse); every tile is still computed exactly once."""
  dev, dt = "PYTHON::sm_80", dtypes.float16
  with Context(DEV=dev, TC_SWIZZLE=swizzle, TC_CONFIG=6):  # 16x8 tiles: a 4x3 grid of blocks
    (a, an), (b, bn) = _rand((64, 16), dt, 20), _rand((16, 24), dt, 21)
    _check(a @ b, an @ bn, dt, True)


@pytest.mark.parametrize("setting", [{"LDMATRIX": 0}, {"ASYNC_COPY": 0}, {"TC_STAGES": 2}, {"TC_STAGES": 4}, {"LDMATRIX": 0, "ASYNC_COPY": 0},
                                     {"TC_PREFETCH": 0}, {"TC_PREFETCH": 0, "TC_STAGES": 2}],
                         ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_pipeline_variants(setting: dict) -> None:
  """Plain fragment loads (padded tiles), register double buffering, and deeper async pipelines compute the same."""
  dev, dt = "PYTHON::sm_80", dtypes.float16
  with Context(DEV=dev, TC_CONFIG=4, **setting):  # 32x32x32 tiles, 4 warps; K=96: three k tiles
    (a, an), (b, bn) = _rand((32, 96), dt, 22), _rand((96, 64), dt, 23)
    _check(a @ b, an @ bn, dt, True)
    progs = _programs(a @ b)
    uops = [u for p in progs for u in p.uops]
    assert any(u.op is Ops.LOAD and u.arg is not None for u in uops) == (setting.get("LDMATRIX", 1) == 1)
    assert any(u.op is Ops.STORE and u.arg == "async" for u in uops) == (setting.get("ASYNC_COPY", 1) == 1)
    # fragments prefetched across iterations live in registers next to the accumulators (16 of them for 32x32 tiles)
    fragment_regs = [u for u in uops if u.op is Ops.DEFINE_REG and u.dtype.base.scalar() == dt]
    assert bool(fragment_regs) == (setting.get("TC_PREFETCH", 1) == 1 and setting.get("ASYNC_COPY", 1) == 1)


@pytest.mark.parametrize("config", [11, 12])
def test_big_tiles(config: int) -> None:
  """128x256 / 256x128 block tiles of 8 warps with 3 stages of bk=64 (dynamic shared memory on a GPU); K=128 is two k
  tiles, fewer than the stages, so the prologue's and the last iterations' copies wrap around."""
  dev, dt = "PYTHON::sm_80", dtypes.bfloat16
  with Context(DEV=dev, TC_CONFIG=config):
    configs = next(tc for tc in Device.renderer(Device.DEFAULT).tensor_cores if tc.dtype_in == dt).tile_configs  # the backend's
    assert configs[config].stages == 3 and configs[config].bk == 64
    (a, an), (b, bn), (c, cn) = _rand((256, 128), dt, 24), _rand((128, 256), dt, 25), _rand((256,), dt, 26)
    _check((a @ b + c).relu(), np.maximum(an @ bn + cn, 0), dt, True)


def test_int64_global_indices_compute_the_same(monkeypatch) -> None:
  """The lowering's int64 global index math (a buffer of 2**31 elements or more: test_reliability checks it is chosen) is
  run here on small operands, the kernels' index dtype forced to int64, batched and with an epilogue: the same results."""
  import tinygrad.schedule.indexing as indexing
  monkeypatch.setattr(indexing, "index_dtype", lambda expr, out_buffer: dtypes.int64)
  dev, dt = "PYTHON::sm_80", dtypes.float16
  with Context(DEV=dev):
    (a, an), (b, bn), (c, cn) = _rand((2, 48, 32), dt, 21), _rand((2, 32, 40), dt, 22), _rand((40,), dt, 23)
    out = ((a @ b) + c).relu()
    prog = next(p for p in _programs(out) if any(u.op is Ops.WMMA for u in p.uops))
    assert {u.src[1].dtype for u in prog.uops if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL} == {dtypes.int64}
    _check(out, np.maximum(an @ bn + cn, 0), dt, True)
