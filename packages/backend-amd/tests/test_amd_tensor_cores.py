"""AMD tensor cores emulated lane by lane on PYTHON::gfx1100 / gfx1201 (RDNA3/4 WMMA, wave32) and PYTHON::gfx950 (CDNA MFMA, wave64):
core's generic lowering builds the fragments from our layout tables and the PYTHON device runs them."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from amd_harness import HIP_MISSING, needs_hip
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.program import ProgramSpec, get_program
from tinygrad.engine.buffers import buffer_of
from tinygrad.engine.realize import CompiledRunner
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops

TOL = {dtypes.float16: 1e-2, dtypes.bfloat16: 3e-2}
ARCHS = ["gfx1100", "gfx1201", "gfx950"]
ALL_ARCHS = ["gfx1100", "gfx1201", "gfx942", "gfx950"]


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


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_emulation_matches_layouts(arch):
  """One instruction from made-up fragments: lane l's A element i is A[a_layout[l][i]], likewise B and C; the result
  in lane l's element i must be D[c_layout[l][i]] for D = A @ B + C, exactly."""
  for tc in Device.tensor_cores(arch): _emulate_one(tc)


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


@pytest.mark.parametrize("arch", ALL_ARCHS)
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


# ---- int8 WMMA (RDNA3/4): int8 x int8 -> int32, exact

def _int8(shape, seed):
  x = np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)
  return Tensor(x).realize(), x.astype(np.int64)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_int8_matmul_exact(arch):
  """int32 products and sums of int8 operands (extremes included) are exact: the WMMA result equals numpy bit for bit."""
  with Context(DEV=f"PYTHON::{arch}"):
    (a, an), (b, bn) = _int8((32, 64), 20), _int8((64, 32), 21)
    out = a.cast(dtypes.int32) @ b.cast(dtypes.int32)
    items, _ = create_schedule([out.uop])
    (prog,) = [get_program(it.ast, Device.renderer(Device.DEFAULT)) for it in items if it.ast.op is Ops.SINK]
    assert {u.arg[0] for u in prog.uops if u.op is Ops.WMMA} == {("wmma12" if arch == "gfx1201" else "wmma") + "_i32_16x16x16_iu8"}
    np.testing.assert_array_equal(out.numpy(), (an @ bn).astype(np.int32))


def test_int8_matmul_with_an_int32_dtype_is_exact_on_the_tensor_core():
  """matmul(dtype=int32) of int8 multiplies in int32 (tinygrad 0.14 gives the exact products: numpy's dtype=), so the
  WMMA's exact int8 products are the same result and it runs on the tensor core."""
  with Context(DEV="PYTHON::gfx1100"):
    (a, an), (b, bn) = _int8((16, 16), 22), _int8((16, 16), 23)
    out = a.matmul(b, dtype=dtypes.int32)
    items, _ = create_schedule([out.uop])
    (prog,) = [get_program(it.ast, Device.renderer(Device.DEFAULT)) for it in items if it.ast.op is Ops.SINK]
    assert any(u.op is Ops.WMMA for u in prog.uops)
    np.testing.assert_array_equal(out.numpy(), an.astype(np.int32) @ bn.astype(np.int32))


# ---- shapes the heuristic doesn't pick first (MFMA 32x32): forced by Opt(TC, index, config)

def run_forced(out: Tensor, tc_name: str, config: int) -> tuple[np.ndarray, ProgramSpec]:
  """Run out's one kernel with Opt(TC, the index of tc_name, config) (its inputs must be realized); (result, program)."""
  items, _ = create_schedule([out.uop])
  (si,) = [it for it in items if it.ast.op is Ops.SINK]
  dev = str(out.device)
  r = Device.renderer(dev)
  idx = next(n for n, tc in enumerate(r.tensor_cores) if tc.name == tc_name)
  spec = get_program(si.ast, r, [Opt(OptOps.TC, idx, config)])
  bufs = [buffer_of(b).ensure_allocated() for b in si.bufs]
  CompiledRunner(spec, Device[dev], r)(bufs, si.var_vals, wait=True)
  return np.frombuffer(bufs[0].as_bytes(), dtype=_np_dtype(out.dtype)).reshape(out.shape), spec


def _np_dtype(dt):
  return {dtypes.float32: np.float32, dtypes.float16: np.float16, dtypes.int32: np.int32}[dt]


MFMA32 = [("gfx942", "mfma_f32_32x32x8"), ("gfx950", "mfma_f32_32x32x8"), ("gfx950", "mfma_f32_32x32x16")]


@pytest.mark.parametrize("arch,shape", MFMA32)
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16])
def test_mfma_32x32(arch, shape, dt):
  with Context(DEV=f"PYTHON::{arch}"):
    (a, an), (b, bn) = _rand((64, 32), dt, 24), _rand((32, 64), dt, 25)
    got, spec = run_forced(a.matmul(b, dtype=dtypes.float32), f"{shape}_{_SHORT[dt]}", 1 if arch == "gfx950" else 3)  # 2x2 waves / 1
    assert {u.arg[0] for u in spec.uops if u.op is Ops.WMMA} == {f"{shape}_{_SHORT[dt]}"}
    np.testing.assert_allclose(got, an @ bn, atol=1e-3, rtol=1e-3)  # float32 out: only the summation order differs


_SHORT = {dtypes.float16: "f16", dtypes.bfloat16: "bf16", dtypes.fp8e4m3: "fp8", dtypes.fp8e5m2: "bf8"}


# ---- every shape renders its instruction and compiles into a code object for its arch

def _shapes() -> list[tuple[str, str]]:
  from tinygrad_backend_amd.tensor_cores import tensor_cores_for
  return [(arch, tc.name) for arch in ALL_ARCHS for tc in tensor_cores_for(arch)]


def compile_forced(dev: str, tc_name: str) -> tuple[str, bytes]:
  """A 64x64x64 matmul under DEV=dev with Opt(TC, tc_name, 1) (2x2 waves): (source, code object)."""
  from tinygrad_backend_amd.codeobject import check_code_object
  with Context(DEV=dev):
    r = Device.renderer(Device.DEFAULT)
    idx = next(n for n, tc in enumerate(r.tensor_cores) if tc.name == tc_name)
    tc = r.tensor_cores[idx]
    a, b = Tensor.empty(64, 64, dtype=tc.dtype_in), Tensor.empty(64, 64, dtype=tc.dtype_in)
    out = a.cast(dtypes.int32) @ b.cast(dtypes.int32) if tc.dtype_in == dtypes.int8 else a.matmul(b, dtype=tc.dtype_out)
    items, _ = create_schedule([out.uop])
    (si,) = [it for it in items if it.ast.op is Ops.SINK]
    spec = get_program(si.ast, r, [Opt(OptOps.TC, idx, 1)])
    lib = r.compiler.compile(spec.src)
    check_code_object(lib, r.arch, spec.name)
    return spec.src, lib


@needs_hip
@pytest.mark.parametrize("arch,tc_name", _shapes())
def test_hip_renders_and_compiles_every_shape(arch, tc_name):
  from tinygrad_backend_amd.tensor_cores import tensor_cores_for
  tc = next(tc for tc in tensor_cores_for(arch) if tc.name == tc_name)
  src, _ = compile_forced(f"NULL:HIP:{arch}", tc_name)
  assert tc.extra["builtin"] + "(" in src


@pytest.mark.parametrize("arch,tc_name", _shapes())
def test_llvm_renders_and_compiles_every_shape(arch, tc_name):
  """NULL:LLVM:<arch>: the WMMA is the arch's llvm.amdgcn.* intrinsic, and llvmlite + ld.lld make a code object of it."""
  from tinygrad_backend_amd.tensor_cores import tensor_cores_for
  tc = next(tc for tc in tensor_cores_for(arch) if tc.name == tc_name)
  src, _ = compile_forced(f"NULL:LLVM:{arch}", tc_name)
  assert f"@{tc.extra['intrinsic']}(" in src


def on(dev: str, check) -> None:
  """check(dev) under DEV=dev; a mock of another arch than the process's first (gfx1100) runs in its own process, since a
  mock GPU's arch is fixed when it opens (like /dev/kfd)."""
  if dev.startswith("MOCKKFD") and HIP_MISSING is not None: pytest.skip(f"HIP toolchain: {HIP_MISSING}")
  arch = dev.split(":")[2] if dev.count(":") >= 2 else ""
  if not dev.startswith("MOCKKFD") or arch in ("", "gfx1100"): return check(dev)
  code = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import test_amd_tensor_cores as t; t.{check.__name__}({dev!r})"
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "DEV": dev})
  assert p.returncode == 0, p.stderr[-3000:]


# ---- CDNA int8 and fp8 MFMA: int8 exact; fp8 (gfx950: OCP e4m3 "fp8" and e5m2 "bf8"; gfx942: e4m3 through fnuz.py)
# float32 sums of exact products of the fp8-rounded operands. On the mock the HIP/LLVM kernel is compiled (fp8 fragments
# are bytes bitcast to the i64 operands; gfx942's rewritten by fnuz.py) and its uops run, the MFMA read as the arch reads it.

def _fp8(shape, dt, seed):
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 4
  t = Tensor(x).cast(dt).realize()
  return t, t.float().numpy().astype(np.float64)  # the fp8 values, read back through a cast kernel


def _wmma_names(out: Tensor) -> set[str]:
  items, _ = create_schedule([out.uop])
  (prog,) = [get_program(it.ast, Device.renderer(Device.DEFAULT)) for it in items if it.ast.op is Ops.SINK]
  return {u.arg[0] for u in prog.uops if u.op is Ops.WMMA}


def _both_shapes(a: Tensor, b: Tensor, ref: np.ndarray, small: str, big: str, acc=dtypes.float32) -> None:
  """The heuristic's pick (the 16x16 shape, 2x2 waves) and the 32x32 one forced (one wave), both against ref."""
  out = a.cast(acc) @ b.cast(acc) if acc == dtypes.int32 else a.matmul(b, dtype=acc)
  assert _wmma_names(out) == {small}
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6, atol=1e-4)
  out2 = a.cast(acc) @ b.cast(acc) if acc == dtypes.int32 else a.matmul(b, dtype=acc)
  got, spec = run_forced(out2, big, 3)
  assert {u.arg[0] for u in spec.uops if u.op is Ops.WMMA} == {big}
  np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-4)


def check_cdna(dev: str) -> None:
  with Context(DEV=dev):
    (a, an), (b, bn) = _int8((32, 32), 42), _int8((32, 32), 43)
    _both_shapes(a, b, (an @ bn).astype(np.int32), "mfma_i32_16x16x32_i8", "mfma_i32_32x32x16_i8", dtypes.int32)
    fp8s = [dtypes.fp8e4m3, dtypes.fp8e5m2] if "gfx950" in dev else [dtypes.fp8e4m3]
    for n, dt in enumerate(fp8s):
      t = _SHORT[dt]
      (a, an), (b, bn) = _fp8((32, 32), dt, 30 + n), _fp8((32, 32), dt, 31 + n)
      if dt == dtypes.fp8e4m3:  # -0 bytes (0x80), gfx942's FNUZ NaN unless fnuz.py remaps them
        a_np = an.astype(np.float32)
        a_np[0, :8] = an[0, :8] = -0.0
        a = Tensor(a_np).cast(dt).realize()
      _both_shapes(a, b, an @ bn, f"mfma_f32_16x16x32_{t}_{t}", f"mfma_f32_32x32x16_{t}_{t}")


SLOW = pytest.mark.slow  # a mock of another arch in its own process, 15-20 s each: `nox -s amd_mock` runs them, `amd` doesn't


@pytest.mark.parametrize("dev", ["PYTHON::gfx942", "PYTHON::gfx950", "MOCKKFD+AMD::gfx942", pytest.param("MOCKKFD+AMD:LLVM:gfx942", marks=SLOW),
                                 pytest.param("MOCKKFD+AMD::gfx950", marks=SLOW), pytest.param("MOCKKFD+AMD:LLVM:gfx950", marks=SLOW)])
def test_cdna_int8_and_fp8_mfma(dev): on(dev, check_cdna)


def test_fnuz_bytes_are_half_the_ocp_value():
  """fnuz.py's byte map, against FNUZ and OCP e4m3 written out here: every byte reads as half its OCP value, NaN as NaN."""
  from tinygrad.uop.alu import eval_scalar
  from tinygrad.uop.ops import UOp
  from tinygrad_backend_amd.fnuz import fnuz_bytes
  def ocp(b):
    if b & 0x7F == 0x7F: return float("nan")
    e, m, s = (b >> 3) & 15, b & 7, -1.0 if b & 0x80 else 1.0
    return s * (m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
  def fnuz(b):
    if b == 0x80: return float("nan")
    e, m, s = (b >> 3) & 15, b & 7, -1.0 if b & 0x80 else 1.0
    return s * (m * 2.0 ** -10 if e == 0 else (1 + m / 8) * 2.0 ** (e - 8))
  vec = UOp(Ops.VECTORIZE, dtypes.uint8.vec(256), tuple(UOp.const(dtypes.uint8, b) for b in range(256)))
  mapped = fnuz_bytes(vec)
  for b in range(256):
    lanes = {g: g.arg[0] for g in mapped.src[b].toposort() if g.op is Ops.GEP}  # the input byte of each lane read
    got, want = fnuz(eval_scalar(mapped.src[b], lanes)), ocp(b) / 2
    assert got == want or (got != got and want != want), (hex(b), got, want)


# ---- f16 accumulators (RDNA3 with opsel packing, RDNA4), RDNA4 fp8 WMMA

@pytest.mark.parametrize("dev,tc_name", [("PYTHON::gfx1100", "wmma_f16_16x16x16_f16"), ("PYTHON::gfx1201", "wmma12_f16_16x16x16_f16"),
                                         ("MOCKKFD+AMD", "wmma_f16_16x16x16_f16"), ("MOCKKFD+AMD:LLVM", "wmma_f16_16x16x16_f16")])
def test_f16_accumulator_matmul(dev, tc_name):
  """matmul(dtype=half) accumulates in f16: it takes the f16-accumulating WMMA, and its result is the f16 matmul; the
  default (float32 accumulation) keeps the f32 one."""
  if dev.startswith("MOCKKFD") and HIP_MISSING is not None: pytest.skip(f"HIP toolchain: {HIP_MISSING}")
  with Context(DEV=dev):
    (a, an), (b, bn) = _rand((32, 32), dtypes.float16, 40), _rand((32, 32), dtypes.float16, 41)
    out = a.matmul(b, dtype=dtypes.float16)
    assert _wmma_names(out) == {tc_name}
    np.testing.assert_allclose(out.float().numpy(), an @ bn, rtol=1e-2, atol=3e-2)
    assert tc_name not in _wmma_names(a @ b)


def test_f16_accumulator_emulation_rounds_once():
  """The emulated f16 WMMA rounds each output once from the exact sum: 2048 + 1 + 1 in f16 is 2050, not 2048 twice."""
  with Context(DEV="PYTHON::gfx1100"):
    a = Tensor([[2048.0, 1.0, 1.0] + [0.0] * 13] * 16, dtype=dtypes.float16).realize()
    b = Tensor.ones(16, 16, dtype=dtypes.float16).contiguous().realize()
    got, spec = run_forced(a.matmul(b, dtype=dtypes.float16), "wmma_f16_16x16x16_f16", 4)
    assert {u.arg[0] for u in spec.uops if u.op is Ops.WMMA} == {"wmma_f16_16x16x16_f16"}
    assert (got == 2050).all()


def check_rdna4_fp8_wmma(dev):
  with Context(DEV=dev):
    (a, an), (b, bn) = _fp8((32, 32), dtypes.fp8e4m3, 44), _fp8((32, 32), dtypes.fp8e4m3, 45)
    out = a.matmul(b, dtype=dtypes.float32)
    assert _wmma_names(out) == {"wmma12_f32_16x16x16_fp8_fp8"}
    np.testing.assert_allclose(out.numpy(), an @ bn, rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize("dev", ["PYTHON::gfx1201", pytest.param("MOCKKFD+AMD:LLVM:gfx1201", marks=SLOW)])
def test_rdna4_fp8_wmma(dev): on(dev, check_rdna4_fp8_wmma)
