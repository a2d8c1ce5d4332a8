"""Hopper's warpgroup MMA (wgmma, sm_90a, unless WGMMA=0): the descriptor and canonical layouts (wgmma.py) against the tiles the
generator writes, matmuls emulated on PYTHON::sm_90a from the descriptor definition, CUDA C compiled by NVRTC for sm_90a
(no spills, no wgmma serialization), the selection rules, and the results on the GPU where there is an sm_90 one."""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from nv_harness import GPU_ARCH, GPU_SCHEDULE, needs_gpu
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.program import get_program
from tinygrad.codegen.tensor_core import SmemTile
from tinygrad.device.devstring import Target
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_nv import wgmma
from tinygrad_backend_nv.compiler import NVRTCCompiler, nvrtc_available
from tinygrad_backend_nv.cuda import CUDARenderer
from tinygrad_backend_nv.ptx import PTXRenderer
from tinygrad_backend_nv.tensor_cores import WGMMA_TILE_CONFIGS, tensor_cores_for

needs_nvrtc = pytest.mark.skipif(nvrtc_available() is not None, reason=f"NVRTC is missing: {nvrtc_available()}")


# ---- the descriptor and the canonical layouts

def test_descriptor_bit_fields() -> None:
  """GmmaDescriptor (cute/arch/mma_sm90_desc.hpp): addr>>4 in [0,14), LBO>>4 in [16,30), SBO>>4 in [32,46), layout in [62,64)."""
  d = wgmma.encode_desc(0x1_2340, 8192, 1024)
  assert d == (0x1234 | (8192 >> 4) << 16 | (1024 >> 4) << 32 | 1 << 62)
  assert wgmma.decode_desc(d) == {"addr": 0x1_2340, "lbo": 8192, "sbo": 1024, "base_offset": 0, "layout": wgmma.SWIZZLE_128B}
  assert wgmma.decode_desc(wgmma.encode_desc(0x4_0000 + 0x30, 16, 1024))["addr"] == 0x30  # 18 address bits: shared memory only
  with pytest.raises(ValueError, match="16-byte"): wgmma.encode_desc(8, 16, 1024)


def test_swizzle_is_a_permutation_of_each_atom() -> None:
  atom = [wgmma.swizzle128(a) for a in range(0, 1024, 16)]
  assert sorted(atom) == list(range(0, 1024, 16))
  assert wgmma.swizzle128(3 * 128 + 5 * 16 + 2) == 3 * 128 + (5 ^ 3) * 16 + 2


def _tile(k_contig: bool, outer: int, bk: int = 64) -> SmemTile: return SmemTile(k_contig, outer, bk, 0, 8, 0 if k_contig else 64)


@pytest.mark.parametrize("k_contig,outer,rows", [(True, 128, 64), (True, 256, 256), (False, 128, 64), (False, 256, 256)])
def test_generator_tiles_are_the_canonical_layout(k_contig: bool, outer: int, rows: int) -> None:
  """Where core's lowering stores element (o, k) of a tile and where the instruction reads it, through the descriptor made from
  the lowering's start and strides, agree for every k step and every instruction-row offset of the tile."""
  tile = _tile(k_contig, outer)
  mn_major, lbo, sbo = tile.operand(2)
  assert mn_major == (not k_contig)
  for o0, ks in itertools.product(range(0, outer, rows), range(4) if rows < 256 else (1, 3)):
    start = tile.start(UOp.const(dtypes.int32, o0), ks * 16).simplify().arg * 2
    for o, k in itertools.product(range(rows), range(16)):
      read = wgmma.swizzle128(start + wgmma.canonical_offset(o, k, mn_major, lbo, sbo, 2))
      stored = tile.index(UOp.const(dtypes.int32, o0 + o), UOp.const(dtypes.int32, ks * 16 + k)).simplify().arg * 2
      assert read == stored, (o0, ks, o, k)


def test_read_operand_uses_the_descriptor() -> None:
  mem = {a: a for a in range(0, 1 << 15, 2)}
  desc = wgmma.encode_desc(2048, 16, 1024)
  m = wgmma.read_operand(mem.__getitem__, desc, 16, 16, False, 2)
  assert m[0][0] == 2048 and m[1][0] == 2048 + 128 + 16 * 1 and m[8][0] == 2048 + 1024 and m[0][9] == 2048 + (1 ^ 0) * 16 + 2
  with pytest.raises(NotImplementedError): wgmma.read_operand(mem.__getitem__, desc & ~(3 << 62), 8, 16, False, 2)


@pytest.mark.parametrize("n", [64, 128, 256])
def test_accumulator_layout_covers_the_tile(n: int) -> None:
  layout = wgmma.accumulator_layout(n)
  cells = [rc for lane in layout for rc in lane]
  assert len(layout) == 128 and len(cells) == 64 * n and set(cells) == set(itertools.product(range(64), range(n)))
  assert layout[37][5] == (16 * 1 + 1 + 8 * 0, 8 * 1 + 2 * 1 + 1)  # warp 1, groupID 1, threadID 1; register 5


# ---- selection

def _matmul(sa: tuple, sb: tuple, dt, bias: bool = False) -> Tensor:
  out = Tensor.empty(*sa, dtype=dt) @ Tensor.empty(*sb, dtype=dt)
  return (out + Tensor.empty(sb[-1], dtype=dt)).relu() if bias else out


def _tc_program(expr: Tensor, renderer, dev: str, opts: list | None = None):
  with Context(DEV=dev):
    items, _ = create_schedule([expr.uop], GPU_SCHEDULE)
    progs = [get_program(it.ast, renderer, opts) for it in items if it.ast.op is Ops.SINK and (opts is None or it.ast.src[0].op is Ops.STORE)]
  return next(p for p in progs if any(u.op is Ops.WMMA for u in p.uops))


def _wmma_names(prog) -> set[str]: return {u.arg[0] for u in prog.uops if u.op is Ops.WMMA}


@pytest.mark.parametrize("arch,renderer,flag,want", [("sm_90a", "CUDA", 1, "wgmma_m64n256k16_f16_f32"), ("sm_90a", "CUDA", 0, "mma_m16n8k16_f16_f32"),
                                                     ("sm_90", "CUDA", 1, "mma_m16n8k16_f16_f32"), ("sm_90a", "PTX", 1, "mma_m16n8k16_f16_f32")])
def test_selected_only_on_sm90a_with_the_flag(arch: str, renderer: str, flag: int, want: str) -> None:
  r = CUDARenderer(Target("CUDA", "CUDA", arch)) if renderer == "CUDA" else PTXRenderer(Target("CUDA", "PTX", arch))
  with Context(WGMMA=flag):
    assert _wmma_names(_tc_program(_matmul((2048, 512), (512, 2048), dtypes.float16), r, f"NULL:{renderer}:{arch}")) == {want}


def test_narrower_n_when_the_wide_one_leaves_sms_idle() -> None:
  """512 x 2048 (a prefill's matmul): 128x256 tiles make 32 blocks, 128x128 ones 64, 128x64 ones 128: a narrower spec wins
  (n64's 128x64 with the TMA-era rates, where a lone warpgroup's 64x128 tile idles the tensor cores between batches)."""
  r = CUDARenderer(Target("CUDA", "CUDA", "sm_90a"))
  with Context(WGMMA=1):
    names = _wmma_names(_tc_program(_matmul((512, 4096), (4096, 2048), dtypes.bfloat16), r, "NULL:CUDA:sm_90a"))
  assert len(names) == 1 and names <= {"wgmma_m64n128k16_bf16_f32", "wgmma_m64n64k16_bf16_f32"}, names


# ---- emulated on PYTHON::sm_90a (the instruction read from the descriptor's canonical layout, not from the generator's tiles)

EMULATED = [  # (M, N, K, layout, dtype, bias+relu, batch)
  (64, 64, 128, "nn", dtypes.float16, False, 0),
  (64, 64, 64, "nt", dtypes.bfloat16, True, 0),
  (64, 128, 64, "tn", dtypes.float16, False, 2),
  (128, 64, 64, "tt", dtypes.bfloat16, False, 0),
]


def _emulated(M: int, N: int, K: int, layout: str, dt, bias: bool, batch: int, **ctx: int) -> None:
  rng = np.random.default_rng(M + N + K)
  lead = (batch,) if batch else ()
  a_np = rng.standard_normal((*lead, M, K) if layout[0] == "n" else (*lead, K, M)).astype(np.float32)
  b_np = rng.standard_normal((*lead, K, N) if layout[1] == "n" else (*lead, N, K)).astype(np.float32)
  with Context(DEV="PYTHON::sm_90a", WGMMA=1, **ctx):
    a, b = Tensor(a_np).cast(dt).realize(), Tensor(b_np).cast(dt).realize()
    c = Tensor(rng.standard_normal(N).astype(np.float32)).cast(dt).realize()
    x, y = (a if layout[0] == "n" else a.transpose(-1, -2)), (b if layout[1] == "n" else b.transpose(-1, -2))
    expr = (x @ y + c).relu() if bias else x @ y
    items, _ = create_schedule([expr.uop], GPU_SCHEDULE)
    r = Device.renderer("PYTHON")
    names = {u.arg[0] for it in items if it.ast.op is Ops.SINK for u in get_program(it.ast, r).uops if u.op is Ops.WMMA}
    assert len(names) == 1 and next(iter(names)).startswith("wgmma_m64n"), names
    got = expr.float().numpy().astype(np.float64)
    ref = x.float().numpy().astype(np.float64) @ y.float().numpy().astype(np.float64)
    if bias: ref = np.maximum(ref + c.float().numpy().astype(np.float64), 0)
  # the f32 accumulation is exact enough here; what is left is the output's rounding to half / bfloat16
  np.testing.assert_allclose(got, ref, rtol=2 ** -7 if dt == dtypes.bfloat16 else 2 ** -10, atol=1e-2)


@pytest.mark.parametrize("case", EMULATED, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}_{c[3]}_{c[4].name}{'_bias_relu' if c[5] else ''}{'_batch' if c[6] else ''}")
def test_emulated_matches_numpy(case: tuple) -> None: _emulated(*case)


@pytest.mark.parametrize("ctx", [{"TC_INFLIGHT": 0}, {"ASYNC_COPY": 0}], ids=str)
def test_emulated_pipeline_variants(ctx: dict) -> None: _emulated(64, 64, 128, "nn", dtypes.float16, False, 0, **ctx)


# ---- CUDA C for sm_90a through NVRTC

CONFIGS = [(n, c) for n, cfgs in WGMMA_TILE_CONFIGS.items() for c in range(len(cfgs))]


@needs_nvrtc
@pytest.mark.parametrize("n,config", CONFIGS, ids=lambda x: str(x))
def test_compiles_without_spills_or_serialization(n: int, config: int) -> None:
  """Every tile config of every width, fp16 with a bias+relu epilogue: ptxas keeps it in registers and runs the wgmma
  pipeline as written (C7514 is ptxas serializing the wgmmas, e.g. when a non-wgmma instruction reads accumulators in flight)."""
  r = CUDARenderer(Target("CUDA", "CUDA", "sm_90a"))
  index = next(i for i, tc in enumerate(r.tensor_cores) if tc.name == f"wgmma_m64n{n}k16_f16_f32")
  cfg = WGMMA_TILE_CONFIGS[n][config]
  with Context(WGMMA=1):
    prog = _tc_program(_matmul((2 * cfg.bm, 4 * cfg.bk), (4 * cfg.bk, 2 * cfg.bn), dtypes.float16, True), r, "NULL:CUDA:sm_90a",
                       [Opt(OptOps.TC, index, config)])
  assert [(o.axis, o.amount) for o in prog.opts] == [(index, config)]
  assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16" in prog.src and "fence.proxy.async.shared::cta" in prog.src
  assert "__align__(1024)" in prog.src and "*((halfx2*)(data0+" in prog.src  # the epilogue stores column pairs
  log = NVRTCCompiler("sm_90a", ("--ptxas-options=-v",)).compile_log(prog.src)
  assert "C7514" not in log and "serialized" not in log, log[-2000:]
  assert (spill := re.search(r"(\d+) bytes spill stores", log)) is not None and int(spill.group(1)) == 0, log[-2000:]


@needs_nvrtc
def test_bf16_compiles() -> None:
  r = CUDARenderer(Target("CUDA", "CUDA", "sm_90a"))
  with Context(WGMMA=1):
    prog = _tc_program(_matmul((3, 256, 128), (3, 128, 256), dtypes.bfloat16), r, "NULL:CUDA:sm_90a")
  assert ".f32.bf16.bf16" in prog.src and len(r.compiler.compile(prog.src)) > 0


# ---- on the GPU

@needs_gpu
@pytest.mark.skipif(GPU_ARCH != "sm_90", reason=f"wgmma needs an sm_90 GPU (sm_90a code), this one is {GPU_ARCH}")
@pytest.mark.parametrize("case", [(256, 512, 384, "nn", dtypes.float16, True, 0), (384, 256, 512, "nt", dtypes.bfloat16, False, 0),
                                  (128, 256, 256, "tn", dtypes.float16, False, 3), (1024, 2048, 768, "nn", dtypes.bfloat16, False, 0)],
                         ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}_{c[3]}_{c[4].name}")
def test_gpu_matches_reference(case: tuple) -> None:
  M, N, K, layout, dt, bias, batch = case
  rng = np.random.default_rng(0)
  lead = (batch,) if batch else ()
  with Context(DEV="CUDA::sm_90a", WGMMA=1):
    a = Tensor(rng.standard_normal((*lead, M, K) if layout[0] == "n" else (*lead, K, M)).astype(np.float32)).cast(dt).realize()
    b = Tensor(rng.standard_normal((*lead, K, N) if layout[1] == "n" else (*lead, N, K)).astype(np.float32)).cast(dt).realize()
    c = Tensor(rng.standard_normal(N).astype(np.float32)).cast(dt).realize()
    x, y = (a if layout[0] == "n" else a.transpose(-1, -2)), (b if layout[1] == "n" else b.transpose(-1, -2))
    expr = (x @ y + c).relu() if bias else x @ y
    out = Tensor.full(expr.shape, float("nan"), dtype=dt).contiguous().realize()  # poisoned: every element must be written
    out.assign(expr).realize()
    got = out.float().numpy().astype(np.float64)
    ref = x.float().numpy().astype(np.float64) @ y.float().numpy().astype(np.float64)
    if bias: ref = np.maximum(ref + c.float().numpy().astype(np.float64), 0)
  assert not np.isnan(got).any()
  tol = 1e-2 if dt == dtypes.float16 else 3e-2
  np.testing.assert_allclose(got, ref, atol=tol * np.abs(ref).max(), rtol=tol)


def test_specs_registered_for_sm90a_only() -> None:
  assert any(tc.smem_operands for tc in tensor_cores_for("sm_90a"))
  assert not any(tc.smem_operands for arch in ("sm_80", "sm_89", "sm_90") for tc in tensor_cores_for(arch))


def test_emulator_catches_a_buffer_refilled_under_a_running_batch() -> None:
  """The interpreter keeps what unretired wgmma batches read: a BARRIER that lets one batch too many run on while the copy
  after it refills that batch's buffer fails (as the GPU would read the new tile)."""
  from tinygrad.runtime.python import PythonProgram, deserialize, serialize
  with Context(DEV="PYTHON::sm_90a", WGMMA=1):
    items, _ = create_schedule([_matmul((64, 256), (256, 64), dtypes.float16).uop], GPU_SCHEDULE)
    prog = get_program(items[-1].ast, Device.renderer("PYTHON"))
  enc = deserialize(prog.src)
  bufs = [bytearray(64 * 64 * 2), bytearray(64 * 256 * 2), bytearray(256 * 64 * 2)]
  PythonProgram("ok", serialize("ok", enc).encode())(*bufs, global_size=prog.global_size, local_size=prog.local_size)
  loop_barriers = [i for i, (op, _, _, arg) in enumerate(enc) if op == "BARRIER" and arg is not None and arg[1] == 1]
  assert loop_barriers, "the in-flight pipeline (TC_INFLIGHT=1) has a barrier that keeps one batch"
  bad = [(op, dt, src, (arg[0], 2) if i in loop_barriers else arg) for i, (op, dt, src, arg) in enumerate(enc)]
  with pytest.raises(RuntimeError, match="still in flight"):
    PythonProgram("bad", serialize("bad", bad).encode())(*bufs, global_size=prog.global_size, local_size=prog.local_size)
