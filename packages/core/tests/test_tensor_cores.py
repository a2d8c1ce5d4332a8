"""Tensor-core matmuls (codegen/tensor_core.py) emulated on PYTHON::sm_80 / PYTHON::sm_89: the PYTHON device runs the
same WMMA kernels as the GPU, lane by lane from the plugin's layout tables, so they are checked here without one."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.program import get_program
from tinygrad.engine.realize import split_policy
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops

# every test here runs on PYTHON::sm_80/89 whatever DEV says: once, in the PYTHON session (the CPU sessions would repeat it)
pytestmark = [pytest.mark.skipif(not Device.tensor_cores("sm_80"), reason="no plugin provides NVIDIA tensor cores (tinygrad-backend-nv)"),
              pytest.mark.skipif(not Device.DEFAULT.startswith("PYTHON"), reason="emulated on PYTHON::sm_80: runs in the PYTHON session")]
TOL = {dtypes.float16: 1e-2, dtypes.bfloat16: 3e-2, dtypes.float32: 3e-3}


def _programs(out: Tensor) -> list:
  items, _ = create_schedule([out.uop], split_policy())  # the policy realize() uses: no CPU panel packing where tensor cores run
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


# ---- float32 without tf32: core's fma spec (an outer product of multiply-adds per lane, the plugin's tile configs)

def _fma_programs(out: Tensor) -> list:
  return [p for p in _programs(out) if any(o.op is OptOps.TC for o in p.opts)]


def test_fma_spec_pairs_fragments_like_a_matmul() -> None:
  """Each lane's C element (r, c) adds A's (r, k) times B's (k, c): the pairing fma_outer expands, from the layouts."""
  from tinygrad.codegen.tensor_core import _fma_terms, lane_split
  from tinygrad.renderer import fma_tensor_core
  tc = fma_tensor_core(dtypes.float32, ())
  assert tc.fma and tc.dims == (16, 32, 1) and tc.threads == 32 and lane_split(tc) == 3
  terms = _fma_terms(tc)
  assert len(terms) == 16 and all(len(t) == 1 for t in terms)
  for lane in range(32):
    for e, ((ia, ib),) in enumerate(terms): assert (tc.a_layout[lane][ia][0], tc.b_layout[lane][ib][1]) == tc.c_layout[lane][e]


@pytest.mark.parametrize("config", [6, 4])
def test_fma_matmul(config: int) -> None:
  """float32 matmuls tile on the fma spec (no tf32): exact float32 products, A and B through shared memory, no WMMA."""
  dt = dtypes.float32
  with Context(DEV="PYTHON::sm_80", TC_CONFIG=config):  # 64x64 tiles of 2 warps / 64x128 of 4
    (a, an), (b, bn), (c, cn) = _rand((128, 16), dt, 30), _rand((16, 128), dt, 31), _rand((128,), dt, 32)
    out = ((a @ b) + c).relu()
    (prog,) = _fma_programs(out)
    assert not any(u.op is Ops.WMMA for u in prog.uops) and any(u.op is Ops.DEFINE_LOCAL for u in prog.uops)
    np.testing.assert_allclose(out.numpy(), np.maximum(an @ bn + cn, 0), atol=1e-5, rtol=1e-5)


def test_fma_batched_and_transposed() -> None:
  dt = dtypes.float32
  with Context(DEV="PYTHON::sm_80", TC_CONFIG=6):
    (a, an), (b, bn) = _rand((2, 64, 8), dt, 33), _rand((2, 8, 64), dt, 34)
    assert _fma_programs(a @ b)
    np.testing.assert_allclose((a @ b).numpy(), an @ bn, atol=1e-5, rtol=1e-5)
    (a, an), (b, bn) = _rand((16, 64), dt, 35), _rand((64, 16), dt, 36)  # A contiguous along M, B along K: both transposed
    assert _fma_programs(a.T @ b.T)
    np.testing.assert_allclose((a.T @ b.T).numpy(), an.T @ bn.T, atol=1e-5, rtol=1e-5)


def test_fma_program_shape() -> None:
  """The lowered program, on its own: per thread and k tile one float4 shared load per 4-row/4-column fragment, one
  MULACC per accumulator and k, A (contiguous along K) stored transposed into its k-major tile as scalars, B as float4;
  int32 global loads although the AST indexes in int64 (M*N*K >= 2**31; the epilogue's stores keep its dtype)."""
  from tinygrad.codegen.program import lower_kernel_with_dims
  dt = dtypes.float32
  with Context(DEV="PYTHON::sm_80", PACK_PANELS=0):  # (PYTHON is CPU-style: it would copy B into panels, schedule/pack.py)
    a, b = Tensor.empty(1024, 2048, dtype=dt), Tensor.empty(2048, 1024, dtype=dt)
    (item,) = create_schedule([(a @ b).uop])[0]
    renderer = Device.renderer(Device.DEFAULT)
    prog = get_program(item.ast, renderer)
    (opt,) = prog.opts
    tc = renderer.tensor_cores[opt.axis]
    cfg = tc.tile_configs[opt.amount]
    assert opt.op is OptOps.TC and tc.fma and cfg.bk >= 8
    uops, gsz, lsz = lower_kernel_with_dims(item.ast, renderer, prog.opts)
  threads = cfg.warps * 32
  assert gsz == (1024 // cfg.bn, 1024 // cfg.bm, 1) and lsz == (32, cfg.warps, 1)
  assert cfg.bm // cfg.warps_m == 32 and cfg.bn // cfg.warps_n == 64  # warp tiles of 32x64: 8x8 a lane
  loop = uops[uops.index(next(u for u in uops if u.op is Ops.RANGE)):]
  def space(u) -> str: return getattr(u.src[0].dtype, "addrspace", "")
  local_loads = [u for u in loop if u.op is Ops.LOAD and space(u) == "local"]
  assert len(local_loads) == 4 * cfg.bk and all(u.dtype == dt.vec(4) for u in local_loads)  # 2 for A, 2 for B per k
  assert sum(u.op is Ops.MULACC for u in loop) == 64 * cfg.bk
  stores = [u for u in loop if u.op is Ops.STORE and space(u) == "local"]
  a_vecs, b_vecs = cfg.bm * cfg.bk // 4 // threads, cfg.bn * cfg.bk // 4 // threads
  assert sorted(u.src[1].dtype.count for u in stores) == [1] * (4 * a_vecs) + [4] * b_vecs
  assert {u.src[0].src[1].dtype for u in loop if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL} == {dtypes.int32}


def test_fma_fallbacks() -> None:
  """A float32 matmul that doesn't tile (or SIMT_GEMM=0) keeps the register-blocked kernel of the heuristics."""
  dt = dtypes.float32
  with Context(DEV="PYTHON::sm_80"):
    (a, an), (b, bn) = _rand((96, 40), dt, 37), _rand((40, 72), dt, 38)
    assert not _fma_programs(a @ b)
    np.testing.assert_allclose((a @ b).numpy(), an @ bn, atol=1e-5, rtol=1e-5)
    (a, an), (b, bn) = _rand((64, 8), dt, 39), _rand((8, 64), dt, 40)
    with Context(SIMT_GEMM=0):
      assert not _fma_programs(a @ b)
      assert not any(u.op is Ops.DEFINE_LOCAL for p in _programs(a @ b) for u in p.uops)
