"""Tile copies through tensor maps (TMA, sm_90a, DEV=CUDA; TC_TMA=1 with a block barrier a k tile, 2 with per-stage empty
barriers, 0: cp.async): where a box lands against the tile layout wgmma reads, the maps and kernels the renderer emits (NVRTC,
no spills, no serialized wgmma), and the runtime's by-value map parameters (with a stand-in driver)."""
from __future__ import annotations

import ctypes
import itertools
import os
import re
from types import SimpleNamespace

import pytest
from test_nv_wgmma import _matmul, _tc_program, _tile, needs_nvrtc
from tinygrad import Tensor, dtypes
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.tensor_core import _persistent_grid
from tinygrad.device.devstring import Target
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_nv import runtime, wgmma
from tinygrad_backend_nv.compiler import NVRTCCompiler
from tinygrad_backend_nv.cuda import TENSOR_MAP_SYMBOL, TENSOR_MAP_WORDS, CUDARenderer


@pytest.mark.parametrize("k_contig,outer", [(True, 64), (True, 128), (True, 256), (False, 64), (False, 256)])
def test_box_lands_where_the_tile_says(k_contig: bool, outer: int) -> None:
  """A box with the 128-byte swizzle is its elements row-major, 16-byte chunks XOR-permuted by row % 8 (the address bits
  wgmma.swizzle128 names): a k-major tile is a box (bk, outer), an mn-major one a box (64, bk, outer // 64) whose last dimension
  steps through the 64-element blocks of outer."""
  tile, isz = _tile(k_contig, outer), 2
  for o, k in itertools.product(range(outer), range(tile.bk)):
    if k_contig: box_at, x0, x1, width = 0, k, o, tile.bk
    else: box_at, x0, x1, width = (o // tile.block) * tile.bk * tile.block * isz, o % tile.block, k, tile.block
    lands = box_at + wgmma.swizzle128((x1 * width + x0) * isz)
    assert lands == tile.index(UOp.const(dtypes.int32, o), UOp.const(dtypes.int32, k)).simplify().arg * isz, (o, k)


def _maps(src: str) -> list[tuple[int, ...]]:
  words = [int(w) for w in re.search(TENSOR_MAP_SYMBOL + r"\[\d+\] = \{([\d, ]+)\}", src).group(1).split(", ")]  # type: ignore[union-attr]
  return [tuple(words[1 + i * TENSOR_MAP_WORDS:1 + (i + 1) * TENSOR_MAP_WORDS]) for i in range(words[0])]


CASES = [  # (A shape, B shape, transposes, bias+relu, maps: (param, rank, dims, strides of dims 1.., box) of A and B)
  ((256, 512), (512, 512), "nn", True, [(1, 2, (512, 256), (1024,), (64, 128)), (2, 3, (64, 512, 8), (1024, 128), (64, 64, 4))]),
  ((256, 512), (256, 512), "nt", False, [(1, 2, (512, 256), (1024,), (64, 128)), (2, 2, (512, 256), (1024,), (64, 256))]),
  ((512, 256), (512, 512), "tn", False, [(1, 3, (64, 512, 4), (512, 128), (64, 64, 2)), (2, 3, (64, 512, 8), (1024, 128), (64, 64, 4))]),
  ((3, 256, 128), (3, 128, 256), "nn", False, [(1, 3, (128, 256, 3), (256, 65536), (64, 128, 1)),
                                                (2, 4, (64, 128, 4, 3), (512, 128, 65536), (64, 64, 4, 1))]),
]

@needs_nvrtc
@pytest.mark.parametrize("tma", [1, 2, 3])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[2]}{len(c[0])}d{'_bias' if c[3] else ''}")
def test_kernels_compile_with_maps(case: tuple, tma: int) -> None:
  _compile_with_maps(case, tma)


@needs_nvrtc
def test_persistent_grid_compiles() -> None:
  """TC_PERSIST=1 (with TC_TMA=2): 128 blocks take 4 output tiles each of a 4096^2 output (512 tiles of 128x256)."""
  with Context(TC_PERSIST=1): prog = _compile_with_maps(((4096, 512), (512, 4096), "nn", True, None), 2)
  assert prog.global_size[0] == 128 and prog.global_size[1:] in ((1, 1), ()), prog.global_size
  assert sum(1 for u in prog.uops if u.op is Ops.RANGE) == 2


@pytest.mark.parametrize("tiles,units,want", [(512, 132, 128), (2048, 132, 128), (64, 132, 0), (131 * 2, 132, 131), (127 * 3, 132, 127),
                                              (7 * 37, 132, 0)])
def test_persistent_grid_size(tiles: int, units: int, want: int) -> None:
  assert _persistent_grid(tiles, units) == want


def _compile_with_maps(case: tuple, tma: int):
  sa, sb, lay, bias, want = case
  a, b = Tensor.empty(*sa, dtype=dtypes.float16), Tensor.empty(*sb, dtype=dtypes.float16)
  x, y = (a if lay[0] == "n" else a.transpose(-1, -2)), (b if lay[1] == "n" else b.transpose(-1, -2))
  out = x @ y
  if bias: out = (out + Tensor.empty(out.shape[-1], dtype=dtypes.float16)).relu()
  r = CUDARenderer(Target("CUDA", "CUDA", "sm_90a"))
  index = next(i for i, tc in enumerate(r.tensor_cores) if tc.name == "wgmma_m64n256k16_f16_f32")  # 128x256x64 tiles, 4 stages
  with Context(WGMMA=1, TC_TMA=tma): prog = _tc_program(out, r, "NULL:CUDA:sm_90a", [Opt(OptOps.TC, index, 0)])
  maps = _maps(prog.src)
  assert len(maps) == 2 and prog.src.count("const __grid_constant__ tg_tmap tmap") == 2
  if want is not None and len(want):
    assert [(m[0], m[3], m[4:4 + m[3]], m[9:8 + m[3]], m[13:13 + m[3]]) for m in maps] == want
  assert "cp.async.bulk.tensor" in prog.src and "cp.async.cg" not in prog.src
  # a box an operand: TMA=1 two tiles ahead, TMA=2 three (4 stages, no batch left running), TMA=3 in the copy loop only
  assert prog.src.count("tg_tma_load") - prog.src.count("void tg_tma_load") == 2 * {1: 3, 2: 4, 3: 1}[tma]
  # pipe mode waits for each batch right after it (ptxas 13.0 serializes every wgmma of a batch left running into the next
  # iteration with the copy's branch and waits in between: C7514); the warp-specialized one leaves one running
  waits = sorted(u.arg[1] for u in prog.uops if u.op is Ops.BARRIER and u.arg[0] == "wgmma_wait")
  assert waits == {1: [], 2: [0], 3: [0, 1]}[tma], waits
  # pipe mode: the only block barrier is the one after the loop
  barriers = sum(1 for u in prog.uops if u.op is Ops.BARRIER and not isinstance(u.arg[0], str))
  assert barriers == {1: 2, 2: 1, 3: 0}[tma]
  assert tuple(prog.local_size[:2]) == ((32, 9) if tma == 3 else (128, 2))  # 3: eight computing warps and the copying one
  log = NVRTCCompiler("sm_90a", ("--ptxas-options=-v",)).compile_log(prog.src)
  assert "C7514" not in log and "serialized" not in log, log[-2000:]
  # TMA=3 runs 288 threads, which ptxas caps at 168 registers as it would 384 (a warpgroup's granularity): some epilogues
  # then spill a few bytes (nn 8192^3 needs 154, no spill; setmaxnreg would need the roles on separate branches)
  allowed = 64 if tma == 3 else 0
  assert (spill := re.search(r"(\d+) bytes spill stores", log)) is not None and int(spill.group(1)) <= allowed, log[-2000:]
  return prog


def test_no_maps_where_the_renderer_cannot_pass_them() -> None:
  """NV's own launches (and TC_TMA=0) keep cp.async: the maps are parameters only the CUDA driver runtime encodes."""
  for target, tma in ((Target("NV", "CUDA", "sm_90a"), 1), (Target("CUDA", "CUDA", "sm_90a"), 0)):
    r = CUDARenderer(target)
    with Context(WGMMA=1, TC_TMA=tma): prog = _tc_program(_matmul((256, 512), (512, 512), dtypes.float16), r, "NULL:CUDA:sm_90a")
    assert TENSOR_MAP_SYMBOL not in prog.src and "cp.async.cg" in prog.src


class _FakeMap:
  def __init__(self) -> None: self.raw = (ctypes.c_uint8 * 128)(*range(128))
  def getPtr(self) -> int: return ctypes.addressof(self.raw)


def test_runtime_passes_maps_by_value(monkeypatch: pytest.MonkeyPatch) -> None:
  """After the buffers and vars come one 64-byte aligned 128-byte map per described map, encoded from the buffer address plus
  the map's byte offset (once per address: the graph and repeated launches reuse it)."""
  calls = []

  def encode(dtype, rank, addr, dims, strides, box, elem, *rest):
    calls.append((dtype, rank, addr, list(dims), list(strides), list(box)))
    return ("ok", _FakeMap())
  enum = SimpleNamespace(CU_TENSOR_MAP_DATA_TYPE_UINT8=1, CU_TENSOR_MAP_DATA_TYPE_UINT16=2, CU_TENSOR_MAP_DATA_TYPE_UINT32=4,
                         CU_TENSOR_MAP_INTERLEAVE_NONE=0, CU_TENSOR_MAP_SWIZZLE_128B=3, CU_TENSOR_MAP_L2_PROMOTION_L2_256B=3,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE=0)
  fake = SimpleNamespace(cuTensorMapEncodeTiled=encode, cuuint64_t=int, cuuint32_t=int, CUresult=SimpleNamespace(CUDA_SUCCESS="ok"),
                         CUtensorMapDataType=enum, CUtensorMapInterleave=enum, CUtensorMapSwizzle=enum, CUtensorMapL2promotion=enum,
                         CUtensorMapFloatOOBfill=enum)
  monkeypatch.setattr(runtime, "cu", fake)
  prg = object.__new__(runtime.CUDAProgram)
  prg.name, prg._encoded = "k", {}
  prg.tensor_maps = [(1, 2, 32, 2, 512, 256, 1, 1, 1, 1024, 0, 0, 0, 64, 128, 1, 1, 1), (2, 2, 0, 3, 512, 512, 3, 1, 1, 1024, 524288, 0, 0, 64, 64, 1, 1, 1)]
  for _ in range(2):
    values, params = prg.arguments((0x1000, 0x20000, 0x300000), (7,))
    assert len(params) == 6 and ctypes.c_int32.from_address(params[3]).value == 7
    for p in params[4:]:
      assert p % 64 == 0 and bytes((ctypes.c_uint8 * 128).from_address(p)) == bytes(range(128))
  assert calls == [(2, 2, 0x20000 + 32, [512, 256], [1024], [64, 128]), (2, 3, 0x300000, [512, 512, 3], [1024, 524288], [64, 64, 1])]


OLD_NVRTC = os.environ.get("NVRTC_SERIAL_CHECK_LIB", "")  # a libnvrtc.so of another version (e.g. 13.0, the GPU machine's)


@pytest.mark.skipif(not OLD_NVRTC, reason="set NVRTC_SERIAL_CHECK_LIB to a libnvrtc.so.13 (e.g. pip nvidia-cuda-nvrtc==13.0.88)")
@pytest.mark.parametrize("tma", [2, 3])
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (512, 2048, 8192)])
def test_pipe_mode_not_serialized_by_that_nvrtc(shape: tuple, tma: int) -> None:
  """ptxas 13.0 serializes every wgmma (C7514, a wait after each) when a batch stays in flight across the k loop's back edge
  with barrier waits and the copy's branch in between; TC_TMA=2 waits for each batch in its own iteration."""
  M, N, K = shape
  r = CUDARenderer(Target("CUDA", "CUDA", "sm_90a"))
  with Context(WGMMA=1, TC_TMA=tma): prog = _tc_program(_matmul((M, K), (K, N), dtypes.float16), r, "NULL:CUDA:sm_90a")
  lib = ctypes.CDLL(OLD_NVRTC)
  handle = ctypes.c_void_p()
  assert lib.nvrtcCreateProgram(ctypes.byref(handle), prog.src.encode(), b"k.cu", 0, None, None) == 0
  opts = [b"--gpu-architecture=sm_90a", b"--fmad=false", b"--std=c++17", b"--ptxas-options=-v"]
  assert lib.nvrtcCompileProgram(handle, len(opts), (ctypes.c_char_p * len(opts))(*opts)) == 0
  size = ctypes.c_size_t()
  lib.nvrtcGetProgramLogSize(handle, ctypes.byref(size))
  log = ctypes.create_string_buffer(size.value)
  lib.nvrtcGetProgramLog(handle, log)
  assert b"C7514" not in log.value, log.value.decode()[-1500:]
