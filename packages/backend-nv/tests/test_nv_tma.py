"""Tile copies through tensor maps (TMA, sm_90a, DEV=CUDA; TC_TMA=1 with a block barrier a k tile, 2 with per-stage empty
barriers, 0: cp.async): where a box lands against the tile layout wgmma reads, the maps and kernels the renderer emits (NVRTC,
no spills, no serialized wgmma), and the runtime's by-value map parameters (with a stand-in driver)."""
from __future__ import annotations

import ctypes
import itertools
import os
import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from test_nv_wgmma import _matmul, _tc_program, _tile, needs_nvrtc
from tinygrad import Tensor, dtypes
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.tensor_core import _cluster_shares_b, _persistent_grid
from tinygrad.device.devstring import Target
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_nv import runtime, wgmma
from tinygrad_backend_nv.compiler import NVRTCCompiler
from tinygrad_backend_nv.cuda import TENSOR_MAP_SYMBOL, TENSOR_MAP_WORDS, CUDARenderer, _rolled_loops, kernel_names


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
@pytest.mark.parametrize("tma", [2, 3])
def test_persistent_grid_compiles(tma: int) -> None:
  """TC_PERSIST=1: 128 blocks take 4 output tiles each of a 4096^2 output (512 tiles of 128x256). TC_TMA=3 adds the copy loop,
  and in both the k loop, inside the tile loop, is the one kept rolled (WGMMA_ROLLED)."""
  with Context(TC_PERSIST=1): prog = _compile_with_maps(((4096, 512), (512, 4096), "nn", True, None), tma)
  assert prog.global_size[0] == 128 and prog.global_size[1:] in ((1, 1), ()), prog.global_size
  assert sum(1 for u in prog.uops if u.op is Ops.RANGE) == {2: 2, 3: 3}[tma]
  lines = prog.src.splitlines()
  rolled = [lines[i + 1].strip() for i, line in enumerate(lines) if line.strip() == "#pragma unroll 1"]
  assert rolled == [f"for (int ridx{tma - 1} = 0; ridx{tma - 1} < 8; ridx{tma - 1}++) {{"], rolled  # 3: ridx0 is the copy loop


def test_rolled_loops_are_the_nested_wgmma_ones() -> None:
  """Only a loop issuing wgmma batches inside another loop is kept rolled; WGMMA_ROLLED=0 leaves them all to NVVM."""
  r = CUDARenderer(Target("CUDA", "CUDA", "sm_90a"))
  for tma, persist, want in ((2, 0, 0), (3, 0, 1), (2, 1, 1), (3, 1, 1)):
    with Context(WGMMA=1, TC_TMA=tma, TC_PERSIST=persist):
      prog = _tc_program(_matmul((4096, 256), (256, 4096), dtypes.float16), r, "NULL:CUDA:sm_90a")
    assert prog.src.count("#pragma unroll 1") == want, (tma, persist)
    assert len(_rolled_loops(prog.uops)) == want
  with Context(WGMMA=1, TC_PERSIST=1, WGMMA_ROLLED=0):
    prog = _tc_program(_matmul((4096, 256), (256, 4096), dtypes.float16), r, "NULL:CUDA:sm_90a")
  assert "#pragma unroll" not in prog.src


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
  # iteration with the copy's branch and waits in between: C7514); the warp-specialized one leaves one running, except in a
  # persistent grid of two computing warpgroups on one tile (TC_INFLIGHT auto); ping-pong's lone warpgroup leaves one running
  waits = sorted(u.arg[1] for u in prog.uops if u.op is Ops.BARRIER and u.arg[0] == "wgmma_wait")
  persistent = prog.global_size[1:] in ((1, 1), ()) and prog.global_size[0] == 128
  pingpong = any(u.op is Ops.BARRIER and u.arg[0] == "mbar_init" and len(u.arg) > 3 for u in prog.uops)
  assert waits == {1: [], 2: [0], 3: [0, 0] if persistent and not pingpong else [0, 1]}[tma], waits
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


def _pingpong_program(shape: tuple[int, int, int], **ctx: int):
  M, N, K = shape
  r = CUDARenderer(Target("CUDA", "CUDA", "sm_90a"))
  with Context(WGMMA=1, **ctx): return _tc_program(_matmul((M, K), (K, N), dtypes.float16), r, "NULL:CUDA:sm_90a")


@pytest.mark.parametrize("mode,spec,a_box,b_box,stages", [(1, {}, (64, 64), (64, 64, 4), 4),
                                                         (2, {"TC_SPEC": 1, "TC_CONFIG": 0}, (64, 128), (64, 64, 2), 4)])
def test_pingpong_turns(mode: int, spec: dict, a_box: tuple, b_box: tuple, stages: int) -> None:
  """TC_PINGPONG: the two computing warpgroups of the persistent TMA=3 kernel each take whole tiles (1: 64x256 of the 128x256
  config, 2: the 128x128 config's) in turns. The copy loop fills the stages tile after tile as before; a warpgroup's stages are
  released by its 128 threads alone, and its turn barrier (one a warpgroup, after the stages' full and empty ones) is waited for
  before its k loop and arrived at by the other one after its own, so no parity wait can pass on an older phase."""
  prog = _pingpong_program((4096, 4096, 4096), TC_PINGPONG=mode, **spec)
  assert prog.global_size[0] == 128 and tuple(prog.local_size[:2]) == (32, 9)
  assert [m[13:13 + m[3]] for m in _maps(prog.src)] == [a_box, b_box]
  assert f"tg_mbar_init((smem0+0), {stages}, 128, 2, 128);" in prog.src
  waits = [u for u in prog.uops if u.op is Ops.BARRIER and u.arg[0] == "mbar_wait"]
  arrives = [u for u in prog.uops if u.op is Ops.BARRIER and u.arg[0] == "mbar_arrive"]
  assert len(waits) == 2 and len(arrives) == 3  # waits: the turn, a k tile; arrives: in the loop, the turn, the last k tile
  # a batch stays in flight through the k loop (a lone warpgroup keeps the tensor cores busy): wait 1 in it, 0 after it
  assert sorted(u.arg[1] for u in prog.uops if u.op is Ops.BARRIER and u.arg[0] == "wgmma_wait") == [0, 1]
  rng = [u for u in prog.uops if u.op is Ops.RANGE]
  assert [u.src[0].arg if u.src[0].op is Ops.CONST else None for u in rng][-1] == 64  # the k loop; the tile loop runs 4 turns
  assert "?4:0)" in prog.src  # the tile loop's trips in the computing warps: 8 tiles a block, 4 a warpgroup


def test_pingpong_turn_in_the_loop() -> None:
  """TC_TURN=1: the next warpgroup's turn begins once this one has waited for its tile's last k tile (an arrive in the k loop,
  predicated on that iteration), not after its last batch is done."""
  prog = _pingpong_program((4096, 4096, 4096), TC_PINGPONG=1, TC_TURN=1)
  k_loop = prog.src[prog.src.index("#pragma unroll 1"):]
  k_loop = k_loop[:k_loop.index("wgmma.wait_group.sync.aligned 0;")]
  assert k_loop.count("@q mbarrier.arrive") == 2  # the stage's empty barrier and, in the last iteration, the turn
  arrives = [u for u in prog.uops if u.op is Ops.BARRIER and u.arg[0] == "mbar_arrive"]
  assert len(arrives) == 3


def test_pingpong_auto() -> None:
  """TC_PINGPONG's default (-1) is 1 where a warpgroup's tile is 64x256 (the 128x256 config, the one measured) and A and B take
  at most 64 MiB (H200: faster at 4096^3 and 2048x8192x2048, slower at 8192^3 and 4096x14336x4096), else off."""
  for shape, on in (((4096, 4096, 4096), True), ((2048, 8192, 2048), True), ((8192, 8192, 8192), False), ((4096, 14336, 4096), False)):
    assert _pingpong_program(shape).src == _pingpong_program(shape, TC_PINGPONG=1 if on else 0).src, shape
  narrow = {"TC_SPEC": 1, "TC_CONFIG": 0}  # 128x128 tiles: 64x128 a warpgroup
  assert _pingpong_program((4096, 4096, 4096), **narrow).src == _pingpong_program((4096, 4096, 4096), TC_PINGPONG=0, **narrow).src
  assert _pingpong_program((4096, 4096, 4096), **narrow).src != _pingpong_program((4096, 4096, 4096), TC_PINGPONG=1, **narrow).src


def test_pingpong_only_where_it_fits() -> None:
  """Without a persistent grid whose blocks take an even number of tiles (or with TC_TMA < 3) TC_PINGPONG leaves the kernel as it is."""
  for shape, ctx in (((512, 2048, 8192), {}), ((4096, 4096, 4096), {"TC_PERSIST": 0}), ((4096, 4096, 4096), {"TC_TMA": 2})):
    assert _pingpong_program(shape, TC_PINGPONG=1, **ctx).src == _pingpong_program(shape, TC_PINGPONG=0, **ctx).src, (shape, ctx)


@needs_nvrtc
@pytest.mark.parametrize("pingpong,b_box", [(1, (64, 64, 2)), (0, (64, 64, 2))])
def test_cluster_multicasts_half_of_b(pingpong: int, b_box: tuple) -> None:
  """TC_CLUSTER=1: blocks 2c and 2c+1 (a cluster, fixed at compile time) take tiles of the same B columns; each copies its A tile
  and one half of B's (the map's box halved along its outermost dimension, at its rank's half) into both blocks. The stage still
  expects the whole tile's bytes; every computing thread releases a stage at its own block's or the other's empty barrier (by lane
  parity), and the blocks meet at a cluster barrier before they exit. It compiles without spills."""
  prog = _pingpong_program((4096, 4096, 4096), TC_PINGPONG=pingpong, TC_CLUSTER=1)
  assert "__cluster_dims__(2, 1, 1) __launch_bounds__(288, 1)" in prog.src and kernel_names(prog.src) == [prog.name]
  assert prog.global_size[0] == 128 and [m[13:13 + m[3]] for m in _maps(prog.src)][1] == b_box
  copies = [u for u in prog.uops if u.op is Ops.BARRIER and u.arg[0] == "tile_copy"]
  assert len(copies) == 1 and [len(box) == 3 and box[2] for box in copies[0].arg[3]] == [False, True]
  assert copies[0].arg[1] == ((64 if pingpong else 128) + 256) * 64 * 2  # the whole stage: own copies and the other's half of B
  assert prog.src.count("tg_tma_mcast3(&tmap1") == 1 and prog.src.count("tg_tma_load2(&tmap0") == 1
  pairs = [u for u in prog.uops if u.op is Ops.BARRIER and u.arg == ("mbar_arrive", "pair")]
  assert len(pairs) == (2 if pingpong else 1)  # the k loop's release (ping-pong: and the last k tile's, after the loop)
  assert prog.src.count("mapa.shared::cluster") == len(pairs) and prog.src.rstrip().endswith("tg_cluster_sync();\n}")
  init = next(u for u in prog.uops if u.op is Ops.BARRIER and u.arg[0] == "mbar_init")
  assert init.arg[-1] == 2 and init.arg[2] == (8 if pingpong else 16)  # lanes 0 and 1 of each computing warp, of both blocks
  log = NVRTCCompiler("sm_90a", ("--ptxas-options=-v",)).compile_log(prog.src)
  assert " 0 bytes spill stores" in log, log[-1500:]


def test_cluster_only_where_pairs_share_b() -> None:
  """Without a swizzled launch order (blocks 2c and 2c+1 then take neighbouring columns), outside persistent warp-specialized
  grids, or with TC_ARRIVE's one arrival a warp, TC_CLUSTER leaves the kernel as it is."""
  assert _cluster_shares_b(128, 16, 64) and not _cluster_shares_b(127, 16, 64)
  with Context(TC_SWIZZLE=1): assert not _cluster_shares_b(128, 16, 64)
  for shape, ctx in (((4096, 4096, 4096), {"TC_SWIZZLE": 1}), ((512, 2048, 8192), {}), ((4096, 4096, 4096), {"TC_TMA": 2}),
                     ((4096, 4096, 4096), {"TC_ARRIVE": 1, "TC_PINGPONG": 0})):
    assert _pingpong_program(shape, TC_CLUSTER=1, **ctx).src == _pingpong_program(shape, TC_CLUSTER=0, **ctx).src, (shape, ctx)


def test_epilogue_store_order_is_the_same_in_every_process() -> None:
  """The epilogue's wide stores come in one order (vectorize's store groups in first-seen order; STORE_ORDER=2, the default: the
  accumulator's element order, ascending columns; 1: descending): it came from a set of UOp-keyed groups before, so each process
  emitted the stores in another order (the H200 read 460-508 TFLOP/s for one 512x8192x2048 kernel whose sources differed only in
  that order)."""
  import sys
  code = ("import sys, hashlib; sys.path.insert(0, sys.argv[1]); from test_nv_tma import _pingpong_program; "
          "print(hashlib.md5(_pingpong_program((4096, 4096, 4096)).src.encode()).hexdigest())")
  here = os.path.dirname(os.path.abspath(__file__))
  run = lambda: subprocess.run([sys.executable, "-c", code, here], capture_output=True, text=True, check=True).stdout.strip()  # noqa: E731
  first = run()
  assert len(first) == 32 and run() == first
  def store_offsets(**ctx: int) -> list[int]:  # the epilogue's stores in program order: each one's offset from the first one's row
    src = _pingpong_program((4096, 4096, 4096), **ctx).src
    defs = {name: int(off) for name, off in re.findall(r"long long (alu\d+) = \(alu\d+\+(\d+)ll\);", src)}
    return [defs.get(name, 0) for name in re.findall(r"\*\(\(halfx2\*\)\(data0\+(alu\d+)\)\)", src)]
  # rows g and g+8 of columns 2t, 8 + 2t, ...; STORE_ORDER=1 from the last columns down
  assert store_offsets()[:4] == [0, 8 * 4096, 8, 8 * 4096 + 8] and store_offsets(STORE_ORDER=1)[:4] == [8 * 4096 + 248, 248, 8 * 4096 + 240, 240]


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
NVDISASM = os.environ.get("NVDISASM", "") or shutil.which("nvdisasm") or ""
# the backend_nv nox session fetches both (the nvidia-cuda-nvrtc 13.0.88 and nvidia-cuda-nvdisasm wheels): in CI their absence
# is a failure, not a quiet skip
if not (OLD_NVRTC and NVDISASM) and os.environ.get("CI", "").lower() in ("1", "true"):
  raise RuntimeError("CI must run the ptxas 13.0 checks: set NVRTC_SERIAL_CHECK_LIB and NVDISASM (`uv run nox -s backend_nv` does)")


def _old_nvrtc(src: str, opts: list[bytes]) -> tuple[str, bytes]:
  """(log, cubin) of `src` compiled by the libnvrtc at OLD_NVRTC."""
  # it opens its builtins library by name at compile time: loaded first from beside it, the name is already there
  for builtins in sorted(os.listdir(os.path.dirname(OLD_NVRTC))):
    if builtins.startswith("libnvrtc-builtins.so."): ctypes.CDLL(os.path.join(os.path.dirname(OLD_NVRTC), builtins), mode=ctypes.RTLD_GLOBAL)
  lib = ctypes.CDLL(OLD_NVRTC)
  handle = ctypes.c_void_p()
  assert lib.nvrtcCreateProgram(ctypes.byref(handle), src.encode(), b"k.cu", 0, None, None) == 0
  status = lib.nvrtcCompileProgram(handle, len(opts), (ctypes.c_char_p * len(opts))(*opts))
  size = ctypes.c_size_t()
  lib.nvrtcGetProgramLogSize(handle, ctypes.byref(size))
  log = ctypes.create_string_buffer(size.value)
  lib.nvrtcGetProgramLog(handle, log)
  assert status == 0, log.value.decode()[-1500:]
  lib.nvrtcGetCUBINSize(handle, ctypes.byref(size))
  cubin = ctypes.create_string_buffer(size.value)
  lib.nvrtcGetCUBIN(handle, cubin)
  return log.value.decode(), cubin.raw


_OPTS = [b"--gpu-architecture=sm_90a", b"--fmad=false", b"--std=c++17", b"--ptxas-options=-v"]


@pytest.mark.skipif(not OLD_NVRTC, reason="set NVRTC_SERIAL_CHECK_LIB to a libnvrtc.so.13 (e.g. pip nvidia-cuda-nvrtc==13.0.88)")
@pytest.mark.parametrize("tma,persist,pingpong,cluster", [(2, 0, 0, 0), (3, 0, 0, 0), (3, 1, 0, 0), (3, 1, 1, 0), (3, 1, 0, 1), (3, 1, 1, 1)])
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (512, 2048, 8192), (8192, 8192, 8192)])
def test_pipe_mode_not_serialized_by_that_nvrtc(shape: tuple, tma: int, persist: int, pingpong: int, cluster: int) -> None:
  """ptxas 13.0 serializes every wgmma (C7514, a wait after each) when a batch stays in flight across the k loop's back edge
  with barrier waits and the copy's branch in between; TC_TMA=2 waits for each batch in its own iteration. A persistent
  8192^3 was serialized by the branch around the first k tile's empty-barrier arrive: the arrive is predicated instead.
  Ping-pong keeps a batch in flight: it was serialized with named barriers for the turns (bar.sync/bar.arrive) and with the
  warpgroup's tile origin held across the k loop."""
  M, N, K = shape
  r = CUDARenderer(Target("CUDA", "CUDA", "sm_90a"))
  with Context(WGMMA=1, TC_TMA=tma, TC_PERSIST=persist, TC_PINGPONG=pingpong, TC_CLUSTER=cluster):
    prog = _tc_program(_matmul((M, K), (K, N), dtypes.float16), r, "NULL:CUDA:sm_90a")
  log, _ = _old_nvrtc(prog.src, _OPTS)
  assert "C7514" not in log and " 0 bytes spill stores" in log, log[-1500:]


def _accumulator_reads_in_flight(sass: str) -> list[str]:
  """Instructions (in address order) that touch a wgmma's accumulator registers while a batch may still be running: after an
  HGMMA and before the next WARPGROUP.DEPBAR.LE gsb0, 0x0."""
  ins = [re.sub(r"\s+", " ", m.group(1)).strip() for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+([^;]*);", sass)]
  first = next(i for i in ins if i.startswith("HGMMA"))
  base, n = int(re.search(r"HGMMA\.64x(\d+)x\S* R(\d+)", first).group(2)), int(re.search(r"HGMMA\.64x(\d+)", first).group(1)) // 2
  pending, bad = False, []
  for i in ins:
    if i.startswith("HGMMA"): pending = True
    elif i.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0"): pending = False
    elif pending and not i.startswith("WARPGROUP") and any(base <= int(x) < base + n for x in re.findall(r"\bR(\d+)\b", i)): bad.append(i)
  return bad


@pytest.mark.skipif(not (OLD_NVRTC and NVDISASM), reason="set NVRTC_SERIAL_CHECK_LIB (nvrtc 13.0.88) and NVDISASM (pip nvidia-cuda-nvdisasm)")
@pytest.mark.parametrize("persist", [0, 1])
def test_epilogue_waits_for_the_last_batch_with_that_nvrtc(persist: int, tmp_path) -> None:
  """With TC_TMA=3 + TC_PERSIST=1 and the k loop left to NVVM (unrolled by 2), ptxas 13.0 put the epilogue's conversions of
  the accumulators (F2FP) above the final WARPGROUP.DEPBAR: the last k tile's batch was missed on the H200 (error one k tile's
  share). Kept rolled, every read of the accumulators comes after it, and nothing spills."""
  r = CUDARenderer(Target("CUDA", "CUDA", "sm_90a"))
  def sass(**ctx: int) -> tuple[str, str]:
    with Context(WGMMA=1, TC_TMA=3, TC_PERSIST=persist, **{"TC_PINGPONG": 0, **ctx}):  # the cooperative kernel unless asked
      prog = _tc_program(_matmul((4096, 4096), (4096, 4096), dtypes.float16), r, "NULL:CUDA:sm_90a")
    log, cubin = _old_nvrtc(prog.src, _OPTS)
    (f := tmp_path / "k.cubin").write_bytes(cubin)
    return log, subprocess.run([NVDISASM, str(f)], capture_output=True, text=True, check=True).stdout
  for inflight in (-1, 1):  # auto (0 here) and one batch left running, the setting that failed on the H200
    log, code = sass(TC_INFLIGHT=inflight)
    assert _accumulator_reads_in_flight(code) == [] and "C7514" not in log and " 0 bytes spill stores" in log, log[-1500:]
  if persist:  # ping-pong: a batch in flight through the k loop, the epilogue of one warpgroup beside the other's k loop
    for turn in (0, 1):
      log, code = sass(TC_PINGPONG=1, TC_TURN=turn)
      assert _accumulator_reads_in_flight(code) == [] and "C7514" not in log and " 0 bytes spill stores" in log, log[-1500:]
  if persist:  # the failure this guards against is still there in that ptxas (with a tile order it shows in): the check sees it
    log, code = sass(TC_SWIZZLE=4, TC_INFLIGHT=1, WGMMA_ROLLED=0)
    assert len(_accumulator_reads_in_flight(code)) >= 32, log[-1500:]
    log, code = sass(TC_SWIZZLE=4, TC_INFLIGHT=1)
    assert _accumulator_reads_in_flight(code) == [], log[-1500:]
