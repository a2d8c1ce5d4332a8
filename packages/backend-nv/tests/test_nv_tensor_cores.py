"""Tensor-core matmuls (core's codegen/tensor_core.py) as CUDA C and as our PTX: compiled for sm_75/80/90 everywhere
(NVRTC, nvJitLink), and run against a float64 reference (into NaN-poisoned outputs) where a GPU is present."""
from __future__ import annotations

import re

import numpy as np
import pytest
from nv_harness import GPU_SCHEDULE, needs_gpu
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.program import get_program
from tinygrad.device.devstring import Target
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops
from tinygrad_backend_nv.compiler import NVRTCCompiler
from tinygrad_backend_nv.cuda import DYNAMIC_SMEM_SYMBOL, STATIC_SHARED_MAX, CUDARenderer
from tinygrad_backend_nv.ptx import PTXRenderer
from tinygrad_backend_nv.tensor_cores import TILE_CONFIGS as CONFIGS

CASES = [  # (A shape, B shape, dtype, bias+relu)
  ((256, 128), (128, 512), dtypes.float16, False),
  ((128, 64), (64, 256), dtypes.bfloat16, True),
  ((3, 64, 32), (3, 32, 64), dtypes.float16, False),
  ((512, 512), (512, 512), dtypes.bfloat16, False),
]


def _graph(sa: tuple, sb: tuple, dt, bias: bool) -> Tensor:
  out = Tensor.empty(*sa, dtype=dt) @ Tensor.empty(*sb, dtype=dt)
  return (out + Tensor.empty(sb[-1], dtype=dt)).relu() if bias else out


def _renderer(name: str, arch: str):
  return CUDARenderer(Target("CUDA", "CUDA", arch)) if name == "CUDA" else PTXRenderer(Target("CUDA", "PTX", arch))


@pytest.mark.parametrize("rname", ["CUDA", "PTX"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}_{c[2].name}{'_bias_relu' if c[3] else ''}")
def test_compiles_with_wmma(rname: str, arch: str, case: tuple) -> None:
  with Context(DEV=f"NULL:{rname}:{arch}"):
    items, _ = create_schedule([_graph(*case).uop], GPU_SCHEDULE)
  renderer = _renderer(rname, arch)
  progs = [get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK]
  tc = [p for p in progs if any(u.op is Ops.WMMA for u in p.uops)]
  assert len(tc) == 1 and [o.op for o in tc[0].opts] == [OptOps.TC]
  assert "mma.sync.aligned.m16n8k16.row.col.f32" in tc[0].src and "ldmatrix" in tc[0].src and "cp.async" in tc[0].src
  assert ("__syncthreads();" in tc[0].src and "__shared__" in tc[0].src) if rname == "CUDA" else ("bar.sync" in tc[0].src and ".shared" in tc[0].src)
  assert len(renderer.compiler.compile(tc[0].src)) > 0


@pytest.mark.parametrize("rname", ["CUDA", "PTX"])
def test_sm75_compiles(rname: str) -> None:
  """sm_75: m16n8k8 f16 only and no cp.async: the register double-buffered pipeline."""
  with Context(DEV=f"NULL:{rname}:sm_75"):
    items, _ = create_schedule([_graph(*CASES[0]).uop], GPU_SCHEDULE)
  renderer = _renderer(rname, "sm_75")
  prog = next(p for p in (get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK) if any(u.op is Ops.WMMA for u in p.uops))
  assert "m16n8k8" in prog.src and "cp.async" not in prog.src and "ldmatrix" in prog.src
  assert len(renderer.compiler.compile(prog.src)) > 0


@pytest.mark.parametrize("rname", ["CUDA", "PTX"])
def test_tf32_compiles_when_allowed(rname: str) -> None:
  renderer = _renderer(rname, "sm_90")
  for allow in (0, 1):
    with Context(DEV=f"NULL:{rname}:sm_90", ALLOW_TF32=allow):
      items, _ = create_schedule([_graph((128, 64), (64, 128), dtypes.float32, False).uop], GPU_SCHEDULE)
      progs = [get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK]
    tc = [p for p in progs if any(u.op is Ops.WMMA for u in p.uops)]
    assert len(tc) == allow
    if allow:
      assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in tc[0].src
      assert len(renderer.compiler.compile(tc[0].src)) > 0


@pytest.mark.parametrize("rname", ["CUDA", "PTX"])
def test_fp32_fma_compiles(rname: str) -> None:
  """float32 without tf32: core's fma spec (FFMAs from shared-memory tiles, no mma), as fma.rn in both renderers."""
  renderer = _renderer(rname, "sm_90")
  with Context(DEV=f"NULL:{rname}:sm_90"):
    items, _ = create_schedule([_graph((128, 64), (64, 128), dtypes.float32, True).uop], GPU_SCHEDULE)
    (prog,) = [p for p in (get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK) if p.opts and p.opts[0].op is OptOps.TC]
  assert renderer.tensor_cores[prog.opts[0].axis].fma and not any(u.op is Ops.WMMA for u in prog.uops)
  assert "mma" not in prog.src and prog.src.count("fmaf(" if rname == "CUDA" else "fma.rn.f32") >= 64 * 8
  assert len(renderer.compiler.compile(prog.src)) > 0


def test_fp32_fma_tiles_by_waves() -> None:
  """The fma configs' measured rates and the H200's 132 SMs pick 64x128x16 tiles for big matmuls and 64x64 where bigger
  tiles leave SMs idle (512^3, 128 rows); SIMT_GEMM=0 gives the register-blocked kernel; a shape that doesn't tile too."""
  from tinygrad.codegen.program import default_opts
  from tinygrad_backend_nv.tensor_cores import FMA_TILE_CONFIGS
  renderer = _renderer("CUDA", "sm_90a")
  def tile(m: int, n: int, k: int) -> tuple | None:
    with Context(DEV="NULL:CUDA:sm_90a"): items = _graph((m, k), (k, n), dtypes.float32, False).schedule()  # the GPU's policy
    opts = default_opts(items[-1].ast, renderer)
    if not opts or opts[0].op is not OptOps.TC: return None
    cfg = FMA_TILE_CONFIGS[opts[0].amount]
    return cfg.bm, cfg.bn, cfg.bk
  assert tile(4096, 4096, 4096) == tile(8192, 8192, 8192) == (64, 128, 16)
  assert tile(512, 512, 512) == tile(128, 4096, 4096) == (64, 64, 8)
  assert tile(96, 40, 72) is None
  with Context(SIMT_GEMM=0): assert tile(4096, 4096, 4096) is None



def test_opt_in_settings_are_in_the_runner_key_before_a_spec_is_met() -> None:
  """WGMMA and SIMT_GEMM (specs' opt_in) are part of the compiled-runner key from the plugin's import on, not from the first
  kernel that meets their spec: a key that grew then made KernelReuse and the runner cache miss (a decode step's second
  layer recompiled the first's kernels; tests/test_layer_reuse.py on a GPU)."""
  from tinygrad.engine.realize import opt_setting
  from tinygrad.renderer import TC_OPT_INS
  from tinygrad_backend_nv.tensor_cores import SIMT_GEMM, WGMMA
  assert TC_OPT_INS["WGMMA"] is WGMMA and TC_OPT_INS["SIMT_GEMM"] is SIMT_GEMM
  before = opt_setting()
  test_fp32_fma_compiles("CUDA")  # meets the fma spec (SIMT_GEMM's)
  assert opt_setting() == before
  with Context(SIMT_GEMM=0): assert opt_setting() != before

# tile configs whose shared memory is above 48 KB: CUDA C only, as dynamic shared memory
BIG_TILES = [c for c, cfg in enumerate(CONFIGS) if cfg.stages > 2]


@pytest.mark.parametrize("config", BIG_TILES)
def test_big_tiles_compile_with_dynamic_shared_memory(config: int) -> None:
  """CUDA renders them with one extern shared array and states its size in the module (runtime.py asks for it at
  launch); ptxas fits them in registers (spilling at most a few words). PTX (48 KB of static shared memory) never picks them."""
  renderer = _renderer("CUDA", "sm_90")
  with Context(DEV="NULL:CUDA:sm_90", TC_CONFIG=config):
    items, _ = create_schedule([_graph((512, 256), (256, 512), dtypes.float16, True).uop], GPU_SCHEDULE)
    prog = next(p for p in (get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK) if any(u.op is Ops.WMMA for u in p.uops))
  assert prog.opts[0].amount == config
  m = re.search(rf"{DYNAMIC_SMEM_SYMBOL} = (\d+);", prog.src)
  assert m is not None and STATIC_SHARED_MAX < int(m.group(1)) <= renderer.shared_max and "extern __shared__" in prog.src
  lib = renderer.compiler.compile(prog.src)
  assert DYNAMIC_SMEM_SYMBOL.encode() in lib  # kept in the cubin for cuModuleGetGlobal
  log = NVRTCCompiler("sm_90", ("--ptxas-options=-v",)).compile_log(prog.src)
  # bk=32 tiles fit in 255 registers; bk=64 ones, with fragments prefetched a k step ahead, spill a few words
  assert (spill := re.search(r"(\d+) bytes spill stores", log)) is not None and int(spill.group(1)) <= (0 if CONFIGS[config].bk == 32 else 128), log
  ptx = _renderer("PTX", "sm_90")
  with Context(DEV="NULL:PTX:sm_90", TC_CONFIG=config):
    items, _ = create_schedule([_graph((512, 256), (256, 512), dtypes.float16, True).uop], GPU_SCHEDULE)
    progs = [get_program(it.ast, ptx) for it in items if it.ast.op is Ops.SINK]
  assert not any(u.op is Ops.WMMA for p in progs for u in p.uops)  # doesn't fit: the plain path


@pytest.mark.parametrize("rname,arch,mkn,config", [
  ("CUDA", "sm_90", (4096, 4096, 4096), 12), ("CUDA", "sm_80", (4096, 4096, 4096), 12), ("CUDA", "sm_86", (4096, 4096, 4096), 0),
  ("PTX", "sm_90", (4096, 4096, 4096), 0),
  # a 512-token prefill chunk's down projection: 128x128 tiles make 64 blocks for 132 SMs; 64x64 ones fill two waves
  ("CUDA", "sm_90", (512, 8192, 2048), 3), ("PTX", "sm_90", (512, 8192, 2048), 0), ("CUDA", "sm_90", (512, 2048, 16384), 12)])
def test_heuristic_tile_config(rname: str, arch: str, mkn: tuple[int, int, int], config: int) -> None:
  """With the CUDA renderer (measured rates, SM count) the config of the fewest modeled waves x tile area / rate: big
  matmuls take the biggest tiles that fit the arch's shared memory, short wide ones smaller tiles that fill the GPU. PTX
  (48 KB of static shared memory, where the rates don't hold) keeps the old rule: the first config in order with 64 blocks."""
  renderer = _renderer(rname, arch)
  M, K, N = mkn
  with Context(DEV=f"NULL:{rname}:{arch}"):
    items, _ = create_schedule([_graph((M, K), (K, N), dtypes.float16, False).uop], GPU_SCHEDULE)
    prog = next(p for p in (get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK) if any(u.op is Ops.WMMA for u in p.uops))
  assert [(o.op, o.amount) for o in prog.opts] == [(OptOps.TC, config)]


def test_modeled_tile_cost_counts_waves() -> None:
  from tinygrad.codegen.tensor_core import modeled_tile_cost
  big, small = CONFIGS[0], CONFIGS[3]  # 128x128 and 64x64
  assert modeled_tile_cost(big, 64, 132) == 128 * 128 / big.rate  # one partial wave
  assert modeled_tile_cost(small, 256, 132) == 2 * 64 * 64 / small.rate
  assert modeled_tile_cost(small, 256, 132) < modeled_tile_cost(big, 64, 132)  # 512x2048: the small tiles
  assert modeled_tile_cost(big, 1024, 132) < modeled_tile_cost(small, 4096, 132)  # 4096x4096: the big ones


def test_small_kernels_keep_static_shared_memory() -> None:
  renderer = _renderer("CUDA", "sm_90")
  with Context(DEV="NULL:CUDA:sm_90", TC_CONFIG=3):
    items, _ = create_schedule([_graph(*CASES[0]).uop], GPU_SCHEDULE)
    prog = next(p for p in (get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK) if any(u.op is Ops.WMMA for u in p.uops))
  assert "__shared__ __align__(16) half" in prog.src and DYNAMIC_SMEM_SYMBOL not in prog.src and "extern __shared__" not in prog.src


@pytest.mark.parametrize("setting", [{"LDMATRIX": 0}, {"ASYNC_COPY": 0}, {"LDMATRIX": 0, "ASYNC_COPY": 0}], ids=str)
def test_ptx_pipeline_variants_compile(setting: dict) -> None:
  """The other fragment/copy forms: VECTORIZE of scalar shared loads (packed into .b32 pairs), register copies."""
  renderer = _renderer("PTX", "sm_80")
  with Context(DEV="NULL:PTX:sm_80", **setting):
    items, _ = create_schedule([_graph(*CASES[1]).uop], GPU_SCHEDULE)
    prog = next(p for p in (get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK) if any(u.op is Ops.WMMA for u in p.uops))
  assert ("ldmatrix" in prog.src) == ("LDMATRIX" not in setting) and ("cp.async.cg" in prog.src) == ("ASYNC_COPY" not in setting)
  assert len(renderer.compiler.compile(prog.src)) > 0


@needs_gpu
@pytest.mark.parametrize("dev", ["CUDA", "CUDA:PTX"])
@pytest.mark.parametrize("case", [*CASES, ((1024, 2048), (2048, 768), dtypes.float16, True)], ids=lambda c: f"{c[0]}x{c[1]}_{c[2].name}")
def test_gpu_matches_reference(dev: str, case: tuple) -> None: _check_on_gpu(dev, case)


@needs_gpu
@pytest.mark.parametrize("config", BIG_TILES)
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
def test_gpu_big_tiles_match_reference(config: int, dt) -> None:
  """The configs that need dynamic shared memory, each forced (the launch must ask for it, or the kernel faults)."""
  _check_on_gpu("CUDA", ((512, 384), (384, 512), dt, True), TC_CONFIG=config)


def _check_on_gpu(dev: str, case: tuple, **ctx: int) -> None:
  sa, sb, dt, bias = case
  rng = np.random.default_rng(0)
  with Context(DEV=dev, **ctx):
    a_np, b_np = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    a, b = Tensor(a_np).cast(dt).realize(), Tensor(b_np).cast(dt).realize()
    c = Tensor(rng.standard_normal(sb[-1]).astype(np.float32)).cast(dt).realize()
    expr = a @ b
    if bias: expr = (expr + c).relu()
    items, _ = create_schedule([expr.uop], GPU_SCHEDULE)
    renderer = Device.renderer("CUDA")
    assert renderer.name == dev.split(":")[-1] or (dev == "CUDA" and renderer.name == "CUDA")
    assert any(u.op is Ops.WMMA for it in items if it.ast.op is Ops.SINK for u in get_program(it.ast, renderer).uops)
    out = Tensor.full(expr.shape, float("nan"), dtype=dt).contiguous().realize()  # poisoned: every element must be written
    out.assign(expr).realize()
    got = out.float().numpy().astype(np.float64)
    ref = a.float().numpy().astype(np.float64) @ b.float().numpy().astype(np.float64)
    if bias: ref = np.maximum(ref + c.float().numpy().astype(np.float64), 0)
  tol = 1e-2 if dt == dtypes.float16 else 3e-2
  assert not np.isnan(got).any()
  np.testing.assert_allclose(got, ref, atol=tol * np.abs(ref).max(), rtol=tol)
  Device["CUDA"].synchronize()


def test_reduction_kernels_ask_for_resident_warps() -> None:
  """A reduction kernel (shared memory for partials only) whose threads hold 64+ loaded values in registers (a softmax row
  kernel over 4096 columns: 16 float4s a lane) asks ptxas for registers that let REDUCE_WARPS warps stay on an SM
  (__launch_bounds__(256, 2)); one over 1024 columns (8 float4s a lane) asks nothing (ptxas would use the headroom and fit
  fewer blocks); neither does a tensor-core matmul (its own bounds), nor anything with REDUCE_WARPS=0."""
  from tinygrad import Tensor
  renderer = _renderer("CUDA", "sm_90")
  def sources(expr: Tensor) -> list[str]:
    with Context(DEV="NULL:CUDA:sm_90"):
      items, _ = create_schedule([expr.uop], GPU_SCHEDULE)
      return [get_program(it.ast, renderer).src for it in items if it.ast.op is Ops.SINK]
  (wide,) = sources(Tensor.empty(1024, 4096).softmax(-1))
  assert "__launch_bounds__(256, 2)" in wide and len(renderer.compiler.compile(wide)) > 0
  (short,) = sources(Tensor.empty(4096, 1024).softmax(-1))
  assert "__launch_bounds__(256)" in short
  (matmul,) = sources(Tensor.empty(512, 256, dtype=dtypes.float16) @ Tensor.empty(256, 512, dtype=dtypes.float16))
  assert "mma" in matmul and not re.search(r"__launch_bounds__\(\d+, 2\)", matmul)
  with Context(REDUCE_WARPS=0):
    (plain,) = sources(Tensor.empty(1024, 4096).softmax(-1))
  assert "__launch_bounds__(256)" in plain
