"""AMD tensor cores emulated lane by lane on PYTHON::gfx1100 / gfx1201 (RDNA3/4 WMMA, wave32) and PYTHON::gfx950 (CDNA MFMA, wave64):
core's generic lowering builds the fragments from our layout tables and the PYTHON device runs them."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.program import get_program
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops

TOL = {dtypes.float16: 1e-2, dtypes.bfloat16: 3e-2}
ARCHS = ["gfx1100", "gfx1201", "gfx950"]


def _rand(shape, dt, seed):
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  t = Tensor(x).cast(dt).realize()
  return t, t.float().numpy().astype(np.float64)


def _check(got: Tensor, ref: np.ndarray, dt, uses_tc: bool) -> None:
  items, _ = create_schedule([got.uop])
  renderer = Device.renderer(str(got.device))
  progs = [get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK]
  wmma = [p for p in progs if any(u.op is Ops.WMMA for u in p.uops)]
  assert bool(wmma) == uses_tc, [p.opts for p in progs]
  if uses_tc: assert all(any(o.op is OptOps.TC for o in p.opts) for p in wmma)
  out = got.float().numpy().astype(np.float64)
  np.testing.assert_allclose(out, ref, atol=TOL[dt] * max(np.abs(ref).max(), 1.0), rtol=TOL[dt])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16])
def test_matmul(arch, dt):
  with Context(DEV=f"PYTHON::{arch}"):
    (a, an), (b, bn) = _rand((32, 64), dt, 1), _rand((64, 32), dt, 2)
    _check(a @ b, an @ bn, dt, True)


@pytest.mark.parametrize("arch", ARCHS)
def test_epilogue_batched_transposed(arch):
  dt = dtypes.float16
  with Context(DEV=f"PYTHON::{arch}"):
    (a, an), (b, bn), (c, cn) = _rand((2, 16, 32), dt, 3), _rand((2, 32, 48), dt, 4), _rand((48,), dt, 5)
    _check(((a @ b) + c).relu(), np.maximum(an @ bn + cn, 0), dt, True)
    (a, an), (b, bn) = _rand((32, 16), dt, 6), _rand((16, 32), dt, 7)
    _check(a.T @ b.T, an.T @ bn.T, dt, True)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("config", [1, 3])
def test_tile_configs(arch, config):
  """Tile configs other than the heuristic's pick here: 2x2 waves (128 or 256 lanes) with 2x2 tiles each, and one wave."""
  dt = dtypes.bfloat16
  with Context(DEV=f"PYTHON::{arch}", TC_CONFIG=config):
    (a, an), (b, bn) = _rand((64, 32), dt, 8), _rand((32, 64), dt, 9)
    _check(a @ b, an @ bn, dt, True)


def test_gfx950_picks_k32_and_falls_back_to_k16():
  with Context(DEV="PYTHON::gfx950"):
    r = Device.renderer(Device.DEFAULT)
    for k, want in ((64, "mfma_f32_16x16x32_f16"), (16, "mfma_f32_16x16x16_f16")):
      (a, an), (b, bn) = _rand((32, k), dtypes.float16, 12), _rand((k, 32), dtypes.float16, 13)
      out = a @ b
      items, _ = create_schedule([out.uop])
      (prog,) = [get_program(it.ast, r) for it in items if it.ast.op is Ops.SINK]
      assert {u.arg[0] for u in prog.uops if u.op is Ops.WMMA} == {want}
      _check(out, an @ bn, dtypes.float16, True)


def test_fallback_when_it_doesnt_tile():
  with Context(DEV="PYTHON::gfx950"):
    (a, an), (b, bn) = _rand((24, 20), dtypes.float16, 10), _rand((20, 12), dtypes.float16, 11)
    _check(a @ b, an @ bn, dtypes.float16, False)


@pytest.mark.parametrize("arch", ARCHS)
def test_emulation_matches_layouts(arch):
  """One instruction from made-up fragments: lane l's A element i is A[a_layout[l][i]], likewise B and C; the result
  in lane l's element i must be D[c_layout[l][i]] for D = A @ B + C, exactly."""
  for tc in Device.tensor_cores(arch):
    if tc.dtype_in == dtypes.float16: _emulate_one(tc)


def _emulate_one(tc) -> None:
  from tinygrad.runtime.python import wmma_emulator
  M, N, K = tc.dims
  A, B, C = np.arange(M * K).reshape(M, K) % 7 - 3.0, np.arange(K * N).reshape(K, N) % 5 - 2.0, np.arange(M * N).reshape(M, N) % 3 * 1.0
  emulate = wmma_emulator((tc.dims, tc.threads, tc.a_layout, tc.b_layout, tc.c_layout, tc.dtype_in.name, tc.dtype_out.name))
  lanes = range(tc.threads)
  d = emulate([tuple(A[r, k] for r, k in tc.a_layout[lane]) for lane in lanes], [tuple(B[k, c] for k, c in tc.b_layout[lane]) for lane in lanes],
              [tuple(C[r, c] for r, c in tc.c_layout[lane]) for lane in lanes])
  D = A @ B + C
  for lane in lanes: assert d[lane] == tuple(D[r, c] for r, c in tc.c_layout[lane])


@pytest.mark.parametrize("arch", ARCHS)
def test_layouts_cover_each_matrix_once(arch):
  """Each element of A, B and D sits in some lane; D's in exactly one (WMMA's A/B halves repeat in lanes 16..31)."""
  for tc in Device.tensor_cores(arch):
    M, N, K = tc.dims
    assert {rk for lane in tc.a_layout for rk in lane} == {(r, k) for r in range(M) for k in range(K)}
    assert {kc for lane in tc.b_layout for kc in lane} == {(k, c) for k in range(K) for c in range(N)}
    c_cells = [rc for lane in tc.c_layout for rc in lane]
    assert sorted(c_cells) == sorted((r, c) for r in range(M) for c in range(N))


def test_emulation_rejects_lanes_that_disagree():
  """RDNA3 WMMA reads A and B from lanes 0..15 and needs lanes 16..31 to repeat them: the emulation checks they do."""
  from tinygrad.runtime.python import wmma_emulator
  tc = next(tc for tc in Device.tensor_cores("gfx1100") if tc.dtype_in == dtypes.float16)
  emulate = wmma_emulator((tc.dims, tc.threads, tc.a_layout, tc.b_layout, tc.c_layout, tc.dtype_in.name, tc.dtype_out.name))
  a = [tuple(float(lane % 16) for _ in row) for lane, row in enumerate(tc.a_layout)]
  b = [tuple(1.0 for _ in row) for row in tc.b_layout]
  c = [tuple(0.0 for _ in row) for row in tc.c_layout]
  assert emulate(a, b, c)[0][0] == 16 * 0.0
  a[20] = tuple(9.0 for _ in a[20])  # lane 20 claims other values for row 4 than lane 4
  with pytest.raises(RuntimeError, match=r"lanes hold different values for A\[4\]"): emulate(a, b, c)
