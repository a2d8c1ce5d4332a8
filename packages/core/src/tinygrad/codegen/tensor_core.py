"""Matmul kernels on tensor cores: recognize a matmul-like kernel AST and lower it to a tiled tensor-core program.

A kernel qualifies when it holds one REDUCE ADD over one reduce loop k of MUL(load A, load B) (through CASTs), the
loads are unmasked and affine in the loops, A depends on one output loop i and B on one output loop j (any other
output loops are batch loops), the operands' dtype is a TensorCore's `dtype_in`, and the tile sizes divide M, N, K.
Everything around the REDUCE (casts, bias loads, relu, ...) is the epilogue, applied per accumulator element.

The program (one block per BM x BN output tile, `warps_m x warps_n` warps, each owning a grid of TC tiles):

  gidx0/1/2 = tile along N / tile along M / batch (grouped TC_SWIZZLE rows at a time for L2);  lidx0 = lane, lidx1 = warp
  acc[tm][tn] = 0                                 (one DEFINE_REG vector per TC tile)
  tiles 0..S-2 of A (BM x BK) and B (BK x BN) -> shared buffers 0..S-2     (16-byte async copies where the arch has them)
  BARRIER (tile 0 has landed);  f = fragments of k step 0 of buffer 0          (kept in registers across iterations)
  for kt in K/BK:
    tile kt+S-1 -> buffer (kt+S-1) % S            (issued now, lands while the next S-2 tiles compute)
    for ks in BK/tk:
      if ks is the last: BARRIER (tile kt+1 has landed; everyone is done reading buffer kt % S, refilled next)
      f' = fragments of the next k step (ks+1 of buffer kt % S, or k step 0 of buffer (kt+1) % S)
      acc[tm][tn] = WMMA(f.a[tm], f.b[tn], acc[tm][tn]);  f = f'
  out[row, col] = epilogue(acc element)            (row, col from the C layout table)

Loading each k step's fragments (ldmatrix where the layout is its, else loads at the layout's (row, k)) one k step
ahead means no WMMA waits for its shared-memory loads, the tile boundary included (TC_PREFETCH=0, or a renderer
without reg_vectors: each iteration starts with the BARRIER and loads every k step's fragments right before its
WMMAs). Without async copies S is 2 and the next tile goes through registers: loaded before the WMMAs, stored after
them, then one BARRIER. Above 48 KB (renderer.shared_max allows it) the shared tiles are the device's dynamic shared
memory. Shared tiles read by ldmatrix are XOR-swizzled per 16-byte chunk (no padding), else padded by 16
bytes per row, so the rows one instruction touches fall into different banks.

Instructions that read A and B from shared memory themselves (`TensorCore.smem_operands`: NVIDIA's warpgroup wgmma,
128 lanes) have no fragments: each operand tile is stored in 128-byte rows (bk = 128 bytes along k, or blocks of 64
elements along a contiguous outer axis) whose 16-byte chunks are XOR-permuted by row % 8, and every k step is one
WMMA per instruction tile whose A and B sources are INDEXes of the tile's first element there. A tile's WMMAs form a
batch (fenced before the first, committed after the last) that may run on while the next tile's is issued
(TC_INFLIGHT=1): copies then run stages-2 tiles ahead, and the BARRIER arg (groups, batches) says what may still fly.
The accumulator rows and columns are fit as affine in the lane's bits (16 * warp + groupID, ...).

Where the renderer has `tile_copy` (NVIDIA's TMA on sm_90a, DEV=CUDA) the tiles come in as boxes of a tensor map, one box an
operand (_tile_maps: k-major (k, outer); mn-major (64, k, outer / 64), the 128-byte blocks as a third dimension, so the boxes
land in the same swizzled layout), issued by one thread, each stage completing on its "full" mbarrier (BARRIERs with string
args: "mbar_init", "tile_copy", "mbar_wait"). TC_TMA=1 keeps the block barrier per k tile; TC_TMA=2 has none in
the loop: after its batch every thread arrives at that stage's "empty" barrier, and the copying thread waits for it before
refilling the stage, stages-1 tiles ahead, and each batch is waited for in its own iteration (a batch left running across the
loop's back edge, past barrier waits and the copy's branch, makes ptxas 13.0 serialize every wgmma). TC_TMA=3 (the default) is warp-
specialized: one more warp, whose first thread runs its own loop of copies (the compute loops run no iterations there and the
copy loop none elsewhere: straight-line code, no branches in the IR), and the compute warps keep one batch in flight. With
TC_PERSIST=1 (the default; TC_TMA >= 2) a grid that divides the output tiles walks them in launch order, the stage/phase
count running on across tiles, so the next tile's first copies land under this one's epilogue; there two or more computing
warpgroups wait for each batch instead (TC_INFLIGHT auto: the other's batch keeps the tensor cores busy, copies run a tile
further ahead). There TC_PINGPONG (by default for 128x256 tiles of operands that about fit in L2) makes the two computing warpgroups take whole tiles of
their own (64x256), in turns: the copy loop fills the stages tile after tile, a warpgroup's k loop starts once the other has
waited for its tile's last k tile (a "turn" mbarrier each, so no full-barrier parity wait can pass on an older phase), keeps a
batch in flight (it is alone on the tensor cores), and its epilogue runs under the other's k loop.

A spec with `fma` (renderer.fma_tensor_core: float32 without tf32) has no instruction: its "WMMA" is each lane's outer
product of its A and B fragments as MULACCs (fma_outer), so the same tiled program is a classic SIMT SGEMM: each lane an
8x8 block of 2x2 instruction tiles, both operand tiles stored k-major (A transposed on its way through registers: no
async copies) so that a fragment, 4 neighbouring rows or columns of one k, is one 16-byte shared load, double-buffered
with one BARRIER per k tile, and int32 global indices wherever the buffers allow (the AST is int64 once M*N*K >= 2**31).

The layout tables are fit as affine functions of groupID = lane >> s and threadID = lane & (2**s - 1) (asserted over
all lanes), with the smallest split s that fits every table of the spec: NVIDIA's mma fragments need s = 2, AMD's
WMMA/MFMA ones (a row or column per lane % 16, a k or row group per lane // 16) s = 4. The same code serves every
spec whose layout has that form. Vendor knowledge comes in as typed fields of
the `TensorCore` (renderer/__init__.py) that a backend registers: `threads` (lanes per instruction: a warp), `matrix_load`
and `async_copy` (which load/copy instructions the target offers), and its tile configs with the order the heuristic
tries them in. Tile parameters are `tc.tile_configs[amount]` of an `Opt(OptOps.TC, tc_index, amount)`, so heuristics,
BEAM and its cache can name and replay them.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from tinygrad.codegen.vectorize import STORE_ORDER
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import ContextVar, prod
from tinygrad.renderer import TC_OPT_INS
from tinygrad.uop.ops import Ops, UOp
from tinygrad.uop.symbolic import split_terms

if TYPE_CHECKING:
  from tinygrad.renderer import Renderer, TensorCore, TileConfig

TC = ContextVar("TC", 1)                  # 0: never use tensor cores
ALLOW_TF32 = ContextVar("ALLOW_TF32", 0)  # float32 matmuls may run on tf32 tensor cores (10-bit mantissa inputs)
TC_CONFIG = ContextVar("TC_CONFIG", -1)   # >= 0: force the tensor core's tile_configs[TC_CONFIG] (for experiments)
TC_SPEC = ContextVar("TC_SPEC", -1)       # >= 0: only renderer.tensor_cores[TC_SPEC] (with TC_CONFIG: one exact tiling, for sweeps)
LDMATRIX = ContextVar("LDMATRIX", 1)      # 0: fragments from plain shared-memory loads even where the spec's matrix_load fits
ASYNC_COPY = ContextVar("ASYNC_COPY", 1)  # 0: global -> shared copies through registers even where the spec has async_copy
TC_STAGES = ContextVar("TC_STAGES", 0)    # shared-memory pipeline depth with async copies (0: as many as fit, 2..4)
TC_PREFETCH = ContextVar("TC_PREFETCH", 1)  # 1: fragments loaded one k step ahead, across tiles (async-copy pipeline)
# smem-operand instructions (wgmma): 1: a tile's batch runs on while the next is issued (TC_TMA=2: 2); -1 (auto): 1, except in a
# persistent grid with warp-specialized copies (TC_TMA=3) and two or more computing warpgroups (one's batch keeps the tensor
# cores busy while the other waits for its own, and copies run a tile further ahead): there 0. H200, 128x256 tiles, one process,
# interleaved (2026-12-02 s11, bench/README.md): persistent 4096^3 fp16 539 against 529 TFLOP/s, bf16 557 against 531, 8192^3
# 617/634 against 599/625; one block a tile it was mixed (4096^3 -1%/+3%, 512x8192x2048 -4%)
TC_INFLIGHT = ContextVar("TC_INFLIGHT", -1)
TC_SWIZZLE = ContextVar("TC_SWIZZLE", 8)  # rows of block tiles walked together for L2 reuse (0/1: plain row-major order)
# smem operands where renderer.tile_copy: tiles copied as boxes by one thread (TMA), not cp.async; 1: a block barrier per k tile
# says when a buffer may be refilled, 2: per-stage "empty" barriers every thread arrives at once its batch has read the buffer
# H200, fp16 8192^3 (bench/README.md, 2026-12-02 s10): cp.async 567, TMA=1 638, TMA=2 674-702, TMA=3 699-703 TFLOP/s (torch
# 715-751); 512x2048x8192 TMA=3 262 against TMA=2's 228
TC_TMA = ContextVar("TC_TMA", 3)
# 3: as 2, and warp-specialized: one more warp whose first thread only copies (waiting at the empty barriers), the others
# only compute, a batch left running while the next is issued (TC_INFLIGHT)
# TC_TMA >= 2: a persistent grid (one block an SM walks output tiles in launch order; the next tile's first k tiles are copied
# under this one's last batches and epilogue) where a grid of at least 90% of the compute units divides the output tiles (0: off).
# With TC_TMA=3 it was wrong on the H200 by one k tile's share until the k loop was kept rolled (backend-nv cuda.py
# WGMMA_ROLLED); then, with TC_INFLIGHT's auto 0, H200 4096^3 fp16 539 TFLOP/s against 508 one block a tile (torch 568), bf16
# 557 against 515 (torch 590); 8192^3 617/634 against 584/613 (one process, interleaved, 2026-12-02 s11, bench/README.md)
TC_PERSIST = ContextVar("TC_PERSIST", 1)
# TC_TMA >= 2: 1: each warp's first lane alone arrives at a stage's empty barrier once the warp has waited for the batch (a
# barrier of one arrival a warp), not every thread
TC_ARRIVE = ContextVar("TC_ARRIVE", 0)
# persistent warp-specialized TMA grids (TC_TMA=3, TC_PERSIST) only: "ping-pong": the two computing warpgroups take whole output
# tiles of their own, in turns (a "turn" mbarrier each orders their k loops), so one's epilogue runs under the other's k loop.
# 1: each warpgroup's tile is the config's warpgroup tile (128x256 -> 64x256), 2: the config's block tile (128x128 -> 128x128);
# -1 (auto): 1 where the warpgroup's tile is 64x256 (the one measured) and A and B together take at most PINGPONG_MAX_BYTES: the
# 64-row tiles read B twice as often, which L2 absorbs only while the operands about fit. H200, one process, interleaved, fp16
# batched TFLOP/s ping-pong / cooperative (2026-12-02 s12, bench/README.md): 4096^3 615-653 / 595-620 (bf16 653-682 / 629-658),
# 2048x8192x2048 555 / 527; but 8192^3 600 / 631 (bf16 630 / 664), 4096x14336x4096 551 / 590. 2 at 4096^3: 600 against 624
TC_PINGPONG = ContextVar("TC_PINGPONG", -1)
# ping-pong: 1: the next warpgroup's turn begins once this one has waited for its tile's last k tile (in the k loop), 0: after the
# loop, once its last batch is done
TC_TURN = ContextVar("TC_TURN", 0)
# persistent warp-specialized TMA grids (TC_TMA=3, TC_PERSIST) where neighbouring blocks' tiles share their B columns: blocks in
# clusters of 2 (2 * cta, 2 * cta + 1), each copying A's tile and half of B's, the half multicast into both blocks' shared memory
# (cp.async.bulk.tensor ... multicast::cluster), so each block reads half as much of B from L2. A stage may be refilled only once
# both blocks' consumers released it: lanes 0 and 1 of each computing warp arrive, at their own block's empty barrier and at the
# other's (one arrival a thread, each a remote one, ran at half the speed: H200 4096^3 fp16 268 against 562 TFLOP/s).
# 0: off; 2: clusters without multicast (each block copies all of B and releases its own stages: what the cluster launch costs).
# Off by default: correct (max error 0) but no faster on the H200 (one process, interleaved, 2026-12-03 s13, bench/README.md):
# 4096^3 fp16 ping-pong 513 / 569 TFLOP/s (single / batched) against 544 / 615 without (clusters alone 528 / 581); 8192^3
# cooperative 609 / 629 against 613 / 629
TC_CLUSTER = ContextVar("TC_CLUSTER", 0)
CLUSTER = 2  # blocks a cluster with TC_CLUSTER
# the epilogue's stores of one accumulator tile: 0 in the instruction's element order, 1 sorted by (row, column) of lane 0
TC_STORE_ORDER = ContextVar("TC_STORE_ORDER", 0)


def tc_setting() -> tuple[int, ...]:
  """The settings that change tensor-core kernels (part of the compiled-runner cache key: Context(TC=0) takes effect)."""
  opt_ins = tuple(int(v.value) for _, v in sorted(TC_OPT_INS.items()))
  return tuple(int(v.value) for v in (TC, ALLOW_TF32, TC_CONFIG, TC_SPEC, LDMATRIX, ASYNC_COPY, TC_STAGES, TC_SWIZZLE, TC_PREFETCH,
                                                            TC_INFLIGHT, TC_TMA, TC_PERSIST, TC_ARRIVE, TC_PINGPONG, TC_TURN, TC_CLUSTER,
                                                            TC_STORE_ORDER, STORE_ORDER)) + opt_ins


class TensorCoreError(ValueError): pass


@dataclass(frozen=True)
class Operand:
  load: UOp
  coeffs: dict[UOp, int]   # loop range -> stride in the buffer
  offset: int

  @property
  def buf(self) -> UOp: return self.load.src[0].src[0]

  def stride(self, r: UOp) -> int: return self.coeffs.get(r, 0)


@dataclass(frozen=True)
class MatmulMatch:
  store: UOp
  reduce: UOp
  a: Operand
  b: Operand
  i: UOp
  j: UOp
  k: UOp
  batch: tuple[UOp, ...]
  dtype_in: DType
  mul_dtype: DType | None = None  # the MUL's dtype: integer tensor cores need exact products (not int8 ones that wrap)

  @property
  def mnk(self) -> tuple[int, int, int]: return (self.i.src[0].arg, self.j.src[0].arg, self.k.src[0].arg)


def strip_casts(u: UOp) -> UOp:
  while u.op is Ops.CAST: u = u.src[0]
  return u


def _affine(idx: UOp, loops: set[UOp]) -> tuple[dict[UOp, int], int] | None:
  terms, const = split_terms(idx)
  coeffs: dict[UOp, int] = {}
  for atom, c in terms:
    if atom not in loops: return None
    coeffs[atom] = coeffs.get(atom, 0) + c
  return coeffs, const


def match_matmul(ast: UOp) -> MatmulMatch | None:
  """The matmul in `ast`, or None when it isn't one this lowering handles."""
  if ast.op is not Ops.SINK or len(ast.src) != 1 or (store := ast.src[0]).op is not Ops.STORE or len(store.src) != 2: return None
  nodes = ast.toposort()
  reduces = [n for n in nodes if n.op is Ops.REDUCE]
  if len(reduces) != 1 or (red := reduces[0]).arg is not Ops.ADD or len(red.src) != 2 or dtypes.is_bool(red.dtype): return None
  ranges = [n for n in nodes if n.op is Ops.RANGE]
  if any(r.src[0].op is not Ops.CONST for r in ranges): return None
  k = red.src[1]
  outs = [r for r in ranges if r.arg[1] == "global"]
  if k.arg[1] != "reduce" or len(outs) + 1 != len(ranges): return None
  mul = strip_casts(red.src[0])
  if mul.op is not Ops.MUL: return None
  loads = [strip_casts(s) for s in mul.src]
  if any(ld.op is not Ops.LOAD or len(ld.src) != 1 or ld.src[0].op is not Ops.INDEX or ld.src[0].src[0].op is not Ops.DEFINE_GLOBAL
         for ld in loads): return None
  if loads[0].dtype != loads[1].dtype: return None
  loops = set(ranges)
  ops: list[Operand] = []
  for ld in loads:
    if (fit := _affine(ld.src[0].src[1], loops)) is None: return None
    ops.append(Operand(ld, *fit))
  if any(op.stride(k) == 0 for op in ops): return None
  only = [[r for r in outs if op.stride(r) and not other.stride(r)] for op, other in ((ops[0], ops[1]), (ops[1], ops[0]))]
  if len(only[0]) != 1 or len(only[1]) != 1: return None
  a, b, i, j = ops[0], ops[1], only[0][0], only[1][0]
  if a.buf is store.src[0].src[0] or b.buf is store.src[0].src[0]: return None  # reads its own output: not a plain matmul
  batch = tuple(sorted((r for r in outs if r is not i and r is not j), key=lambda r: r.arg[0]))
  return MatmulMatch(store, red, a, b, i, j, k, batch, loads[0].dtype, mul.dtype)


# ---- choosing a tensor core and a tile config

def usable_tensor_cores(renderer: Renderer, m: MatmulMatch) -> list[int]:
  """Indices into renderer.tensor_cores whose instruction computes this matmul."""
  out = []
  for n, tc in enumerate(renderer.tensor_cores):
    if tc.dtype_in != m.dtype_in or not tc.tile_configs or not _lanes_fit(tc): continue
    if tc.opt_in is not None and not tc.opt_in.value: continue
    if dtypes.is_float(tc.dtype_out) != dtypes.is_float(m.reduce.dtype): continue
    # narrow float accumulators (f16) only for a matmul that accumulates in that dtype (matmul(dtype=half))
    if dtypes.is_float(tc.dtype_out) and tc.dtype_out.itemsize < 4 and tc.dtype_out != m.reduce.dtype: continue
    # integer ones (int8 -> int32) compute exact products and wrap like the AST only when it multiplies and adds in dtype_out
    if dtypes.is_int(tc.dtype_out) and (m.mul_dtype != tc.dtype_out or m.reduce.dtype != tc.dtype_out): continue
    if tc.dtype_in == dtypes.float32 and not ALLOW_TF32 and not tc.fma: continue  # fma specs multiply in full precision
    out.append(n)
  return sorted(out, key=lambda n: renderer.tensor_cores[n].dtype_out != m.reduce.dtype)  # the AST's own accumulator dtype first


@functools.cache
def _lanes_fit(tc: TensorCore) -> bool:
  """The lowering builds fragments from layouts affine in (lane >> s, lane & (2**s - 1)), one layout row per lane
  (smem-operand instructions: only the accumulators, affine in the lane's bits, see _fit_bits)."""
  if tc.smem_operands:
    if len(tc.c_layout) != tc.threads or tc.threads & (tc.threads - 1) or tc.smem_reader is None: return False
    try: [_fit_bits(tc.c_layout, which) for which in (0, 1)]
    except TensorCoreError: return False
    return True
  if any(len(layout) != tc.threads for layout in (tc.a_layout, tc.b_layout, tc.c_layout)): return False
  return lane_split(tc) is not None


SWIZZLE_BYTES = 128  # smem-operand tiles: rows of 128 bytes, 16-byte chunks XOR row % 8 (NVIDIA's 128-byte swizzle)
LANE_SPLITS = (2, 3, 4, 5)  # s in groupID = lane >> s, threadID = lane & (2**s - 1); 2 first (NVIDIA's, ldmatrix's)


@functools.cache
def lane_split(tc: TensorCore) -> int | None:
  """The smallest s for which all of tc's layout tables are affine in (lane >> s, lane & (2**s - 1)), or None."""
  for split in LANE_SPLITS:
    try: [fit_layout(layout, which, split) for layout in (tc.a_layout, tc.b_layout, tc.c_layout) for which in (0, 1)]
    except TensorCoreError: continue
    return split
  return None


def config_fits(cfg: TileConfig, tc: TensorCore, m: MatmulMatch, shared_max: int) -> bool:
  tm, tn, tk = tc.dims
  M, N, K = m.mnk
  if M % cfg.bm or N % cfg.bn or K % cfg.bk or cfg.bk % tk: return False
  # smem operands: one 128-byte swizzled row per k-major tile row, 64-element swizzled blocks along a contiguous outer axis
  if tc.smem_operands and (cfg.bk * m.dtype_in.itemsize != SWIZZLE_BYTES or cfg.bm % 64 or cfg.bn % 64): return False
  if cfg.bm % (cfg.warps_m * tm) or cfg.bn % (cfg.warps_n * tn): return False
  threads = cfg.warps * tc.threads
  stages = max(2, cfg.stages)
  return cfg.bm * cfg.bk % threads == 0 and cfg.bk * cfg.bn % threads == 0 and stages * _stage_bytes(cfg, tc, m.dtype_in) <= shared_max


def _uses_matrix_load(tc: TensorCore, din: DType) -> bool: return tc.matrix_load and LDMATRIX.value != 0 and din.itemsize == 2


def _stage_bytes(cfg: TileConfig, tc: TensorCore, din: DType) -> int:
  """Shared memory for one A tile and one B tile: swizzled (no padding) with ldmatrix, else one 16-byte pad per row."""
  pad = 0 if _uses_matrix_load(tc, din) or tc.smem_operands else 16 // din.itemsize
  def tile(outer: int) -> int: return max(outer * (cfg.bk + pad), cfg.bk * (outer + pad))  # rows along k or along outer
  return (tile(cfg.bm) + tile(cfg.bn)) * din.itemsize


def tc_opts(ast: UOp, renderer: Renderer) -> list | None:
  """[Opt(TC, tc index, config index)] when `ast` is a matmul this renderer's tensor cores can run, else None."""
  from tinygrad.codegen.opt import Opt, OptOps
  if not TC or not renderer.tensor_cores or (m := match_matmul(ast)) is None: return None
  fallback: Opt | None = None
  smem_best: tuple[float, int, int] | None = None  # (modeled cost, tensor core, config)
  for n in usable_tensor_cores(renderer, m):
    if TC_SPEC.value >= 0 and n != TC_SPEC.value: continue
    tc = renderer.tensor_cores[n]
    if not tc.smem_operands and (fallback is not None or smem_best is not None): break  # an smem-operand spec fits: it goes first
    configs = tc.tile_configs
    if TC_CONFIG.value >= 0:
      if TC_CONFIG.value < len(configs) and config_fits(configs[TC_CONFIG.value], tc, m, renderer.shared_max): return [Opt(OptOps.TC, n, TC_CONFIG.value)]
      continue
    M, N, _ = m.mnk
    fitting = [c for c in (tc.tile_order or range(len(configs))) if config_fits(configs[c], tc, m, renderer.shared_max)]
    if not fitting: continue
    blocks = {c: M // configs[c].bm * N // configs[c].bn * prod(r.src[0].arg for r in m.batch) for c in fitting}
    if renderer.compute_units and all(configs[c].rate > 0 for c in fitting):
      best = min(fitting, key=lambda c: modeled_tile_cost(configs[c], blocks[c], renderer.compute_units))
      if not tc.smem_operands: return [Opt(OptOps.TC, n, best)]
      # smem-operand specs of several widths are one instruction's alternatives: the cheapest of them all
      cost = modeled_tile_cost(configs[best], blocks[best], renderer.compute_units)
      if smem_best is None or cost < smem_best[0]: smem_best = (cost, n, best)
      continue
    # no measured rates: prefer big tiles, but not at the cost of leaving most of a big GPU idle (>= 64 blocks when possible)
    enough = [c for c in fitting if blocks[c] >= 64 and (configs[c].warps * tc.threads >= 128 if tc.smem_operands else configs[c].warps >= 4)]
    if enough: return [Opt(OptOps.TC, n, enough[0])]
    if tc.smem_operands:  # a narrower width may give enough blocks
      if fallback is None: fallback = Opt(OptOps.TC, n, fitting[0])
      continue
    return [Opt(OptOps.TC, n, fitting[0])]
  if smem_best is not None: return [Opt(OptOps.TC, smem_best[1], smem_best[2])]
  return [fallback] if fallback is not None else None


SPLIT_K = ContextVar("SPLIT_K", 1)  # 0: a matmul with few output tiles runs unsplit (schedule/split_k.py)
SPLIT_K_TILE = 64         # the output tile the occupancy is counted in: the smallest the tile heuristic picks on a big GPU
# each slice still reduces this much. H200, fp16, us per matmul unsplit -> split (.probe/splitk.py): 64x2048x8192 61.7 -> 33.6
# (4 slices), 128x2048x8192 73.7 -> 58.9 (2); with slices of 1024 64x2048x2048 29.3 -> 26.9 but 64x3072x2048 26.4 -> 35.0
SPLIT_K_MIN_CHUNK = 2048


def split_k_slices(renderer: Renderer, m: int, n: int, batch: int, k: int, dtype_in: DType) -> int:
  """How many K slices a tensor-core matmul should run as: doubled while the slices' tiles still fit in one wave of the
  renderer's compute units and each slice keeps SPLIT_K_MIN_CHUNK of K. 1 without measured compute units, tensor cores for
  `dtype_in`, or 64-row/column tiles (a matrix-vector product is codegen's GROUP work, not this)."""
  if not (SPLIT_K.value and TC.value and renderer.compute_units) or m < SPLIT_K_TILE or n < SPLIT_K_TILE: return 1
  if not any(tc.dtype_in == dtype_in and tc.tile_configs for tc in renderer.tensor_cores): return 1
  tiles, slices = batch * (m // SPLIT_K_TILE) * (n // SPLIT_K_TILE), 1
  while tiles * slices * 2 <= renderer.compute_units and k % (slices * 2 * SPLIT_K_TILE) == 0 and k // (slices * 2) >= SPLIT_K_MIN_CHUNK:
    slices *= 2
  return slices


def modeled_tile_cost(cfg: TileConfig, blocks: int, compute_units: int) -> float:
  """Relative time of a tiling: the blocks run in waves of one per compute unit, each block's time its tile area over the config's
  measured rate. Big tiles win on big matmuls; on a short, wide one (a prefill chunk: 512 x 2048) they leave most units idle, and a
  smaller tile that fills two waves is faster (H200, 512x2048x8192 fp16: 64x64 tiles 114 us, 128x128 149 us)."""
  return -(-blocks // compute_units) * cfg.bm * cfg.bn / cfg.rate


# ---- the lowering

def fit_layout(layout: tuple, which: int, split: int = 2) -> list[tuple[int, int, int]]:
  """Per element: (c0, cg, ct) with layout[lane][e][which] == c0 + cg*(lane>>split) + ct*(lane&mask) for every lane."""
  out = []
  mask = (1 << split) - 1
  for e in range(len(layout[0])):
    f = [layout[lane][e][which] for lane in range(len(layout))]
    if len(f) <= 1 << split: raise TensorCoreError(f"{len(f)} lanes don't reach groupID 1 with split {split}")
    c0, cg, ct = f[0], f[1 << split] - f[0], f[1] - f[0]
    if any(f[lane] != c0 + cg * (lane >> split) + ct * (lane & mask) for lane in range(len(layout))):
      raise TensorCoreError(f"layout element {e} is not affine in (lane>>{split}, lane&{mask}): {f}")
    out.append((c0, cg, ct))
  return out


def _c(x: int) -> UOp: return UOp.const(dtypes.int32, x)


Field = tuple[int, int, int]  # (shift, mask, coefficient): coefficient * ((lane >> shift) & mask)


@functools.cache  # a warpgroup's table is 128 lanes x up to 128 elements: fit once per table, not at every lookup and lowering
def _fit_bits(layout: tuple, which: int) -> tuple[tuple[int, tuple[Field, ...]], ...]:
  """Per element: (c0, fields) with layout[lane][e][which] == c0 + sum(coef * ((lane >> shift) & mask)) for every lane:
  affine in the lane's bits, runs of bits whose coefficients double merged into one field (a warpgroup's accumulator
  rows are 16 * warp + groupID: bits 2..4 and 5..6)."""
  lanes = len(layout)
  nbits = lanes.bit_length() - 1
  out = []
  for e in range(len(layout[0])):
    f = [layout[lane][e][which] for lane in range(lanes)]
    coef = [f[1 << b] - f[0] for b in range(nbits)]
    affine = [f[0]] * lanes  # each lane's value from its bits: the lane without its lowest set bit, plus that bit's coefficient
    for lane in range(1, lanes): affine[lane] = affine[lane & (lane - 1)] + coef[(lane & -lane).bit_length() - 1]
    if affine != f:
      raise TensorCoreError(f"layout element {e} is not affine in the lane's bits: {f}")
    fields: list[Field] = []
    b = 0
    while b < nbits:
      if coef[b] == 0:
        b += 1
        continue
      hi = b + 1
      while hi < nbits and coef[hi] == coef[b] << (hi - b): hi += 1
      fields.append((b, (1 << (hi - b)) - 1, coef[b]))
      b = hi
    out.append((f[0], tuple(fields)))
  return tuple(out)


def _bits_uop(fit: tuple[int, tuple[Field, ...]], lane: UOp, lanes: int) -> UOp:
  out = UOp.const(lane.dtype, fit[0])
  for shift, mask, coef in fit[1]:
    x = lane // (1 << shift) if shift else lane
    if (mask + 1) << shift < lanes: x = x % (mask + 1)
    out = out + x * coef
  return out


def _global_index_dtype(ast: UOp, m: MatmulMatch, buffers_only: bool = False) -> DType:
  """int64 for the global-memory index math when a buffer has 2**31 elements or more or the AST already indexes in int64
  (see schedule/indexing.index_dtype), else int32. Thread ids, tile loops and shared-memory offsets stay int32: they are
  bounded by the block's tiles. `buffers_only`: the buffers decide alone (every index the lowering makes is an element
  of one; the AST is int64 as soon as M*N*K reaches 2**31)."""
  if not buffers_only and any(r.dtype == dtypes.int64 for r in (m.i, m.j, m.k, *m.batch)): return dtypes.int64
  big = any(u.op is Ops.DEFINE_GLOBAL and u.dtype.size > 2**31 - 1 for u in ast.toposort())  # type: ignore[attr-defined]
  return dtypes.int64 if big else dtypes.int32


def affine_uop(fit: tuple[int, int, int], g: UOp, t: UOp) -> UOp:
  c0, cg, ct = fit
  out = _c(c0)
  if cg: out = out + g * cg
  if ct: out = out + t * ct
  return out


@dataclass
class SmemTile:
  """One operand's shared-memory tile: rows x cols in the operand's (outer, k) orientation, stored contiguous along
  the axis that is contiguous in global memory (so global -> shared copies are wide)."""
  k_contig: bool   # stored [outer][k] (else [k][outer])
  outer: int       # BM for A, BN for B
  bk: int
  pad: int         # elements after each row (bank-conflict avoidance without swizzle)
  chunk: int = 0   # > 0: no pad; instead the 16-byte chunks (of `chunk` elements) of row r are XOR-permuted by a function
                   # of r, so the 8 rows an ldmatrix or a wide copy touches at once fall into different banks
  block: int = 0   # > 0 (stored [k][outer] only): outer split into blocks of `block` elements, each a bk x block tile of
                   # its own (smem operands: rows of 128 bytes, the instruction's swizzle atom)

  def index(self, o: UOp, kk: UOp) -> UOp:
    if self.block and not self.k_contig:
      return (o // self.block) * (self.bk * self.block) + SmemTile(False, self.block, self.bk, 0, self.chunk).index(o % self.block, kk)
    row, col, length = (o, kk, self.bk) if self.k_contig else (kk, o, self.outer)
    if not self.chunk: return row * (length + self.pad) + col
    nchunks = length // self.chunk
    if nchunks == 1: return row * length + col
    # 8 chunks make a 128-byte bank window: rows r and r+1 start 128/nchunks... apart, so XOR by r // (8 // nchunks)
    perm = row % 8 if nchunks >= 8 else (row // (8 // nchunks)) % nchunks
    return row * length + ((col // self.chunk) ^ perm) * self.chunk + col % self.chunk

  def start(self, o0: UOp, k0: int) -> UOp:
    """Where an smem-operand instruction's view of the tile from (o0, k0) begins, before the swizzle: the address its
    descriptor names (o0 a multiple of 8 rows or of a block, k0 of 16 bytes)."""
    if self.k_contig: return o0 * self.bk + k0
    return (o0 // self.block) * (self.bk * self.block) + k0 * self.block

  def operand(self, itemsize: int) -> tuple[bool, int, int]:
    """(mn_major, block stride bytes, 8-row group stride bytes): how the instruction walks the tile."""
    if self.k_contig: return False, 16, 8 * self.bk * itemsize  # block stride unused: one 128-byte row holds the k16 step
    return True, self.bk * self.block * itemsize, 8 * self.block * itemsize

  @property
  def size(self) -> int:
    pad = 0 if self.chunk else self.pad
    return (self.outer * (self.bk + pad)) if self.k_contig else (self.bk * (self.outer + pad))


_Pid = TypeVar("_Pid", UOp, int)


def _tile_origin(pid: _Pid, nbx: int, nby: int) -> tuple[_Pid, _Pid]:
  """(row, column) of output tile `pid` in launch order. Blocks run roughly in that order: with TC_SWIZZLE rows walked column by
  column, the blocks running at once share their A rows and B columns in L2."""
  if (group := TC_SWIZZLE.value) > 1 and nby % group == 0 and nby > group:
    return pid // (group * nbx) * group + pid % group, pid % (group * nbx) // group
  return pid // nbx, pid % nbx


def _persistent_grid(tiles: int, units: int) -> int:
  """Blocks of a persistent launch: the most, up to one a compute unit, that divide the tiles evenly; 0 (one block a tile)
  where that leaves more than a tenth of the units idle or there are no more tiles than units."""
  if not units or tiles <= units: return 0
  best = max(d for d in range(1, units + 1) if tiles % d == 0)
  return best if best * 10 >= units * 9 else 0


def _cluster_shares_b(grid: int, nbx: int, nby: int) -> bool:
  """TC_CLUSTER: whether blocks 2c and 2c+1 of a persistent grid of `grid` blocks take output tiles of the same columns (the same
  B tile) at every step: tile seq * grid + cta is block cta's, so with an even grid that is every even tile and the next."""
  return grid % CLUSTER == 0 and all(_tile_origin(pid, nbx, nby)[1] == _tile_origin(pid + 1, nbx, nby)[1] for pid in range(0, nbx * nby, CLUSTER))


PINGPONG_GROUPS = 2  # computing warpgroups that take turns in a ping-pong kernel
PINGPONG_MAX_BYTES = 64 << 20  # TC_PINGPONG auto: A and B together at most this (4096^3 fp16: 64 MiB)


def _pingpong_config(cfg: TileConfig, tc: TensorCore, m: MatmulMatch, renderer: Renderer) -> TileConfig | None:
  """With TC_PINGPONG, the one-warpgroup tiling each computing warpgroup of a ping-pong kernel runs, or None where the kernel
  can't be one: it needs tile copies in a persistent warp-specialized grid (no batch) whose blocks each take an even number of
  tiles, and the warpgroup's accumulators must fit in what one holds now (128 floats a thread)."""
  mode = TC_PINGPONG.value
  if mode not in (-1, 1, 2) or not (tc.smem_operands and renderer.tile_copy and TC_TMA.value >= 3 and TC_PERSIST.value): return None
  if m.batch or ASYNC_COPY.value == 0: return None
  bm, bn = (cfg.bm, cfg.bn) if mode == 2 else (cfg.bm // cfg.warps_m, cfg.bn // cfg.warps_n)
  if mode == -1 and (bm, bn, cfg.warps) != (64, 256, PINGPONG_GROUPS): return None
  (M, N, K), units = m.mnk, renderer.compute_units
  if mode == -1 and (M + N) * K * m.dtype_in.itemsize > PINGPONG_MAX_BYTES: return None
  tm, tn, _ = tc.dims
  if bm % tm or bn % tn or bm // tm * (bn // tn) * len(tc.c_layout[0]) > 128: return None
  tiles = M // bm * (N // bn)
  if tiles % PINGPONG_GROUPS or not _persistent_grid(tiles // PINGPONG_GROUPS, units): return None
  return replace(cfg, bm=bm, bn=bn, warps_m=1, warps_n=1)


TileMap = tuple[int, int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # see _tile_maps


def _tile_maps(m: MatmulMatch, a_tile: SmemTile, b_tile: SmemTile, din: DType) -> list[tuple[TileMap, tuple[UOp, ...]]] | None:
  """Per operand, the tensor map its tiles are copied through and its batch loops (the map's last dimensions), or None where
  one can't describe it. A map is (buffer param, itemsize, byte offset, dims innermost first, byte strides of dims 1.., box),
  one box the whole tile. k-major: dims (k, outer, *batch), box (bk, outer). mn-major: dims (block, k, outer // block, *batch),
  the outer axis split into its 128-byte blocks (stride `block` elements), box (block, bk, outer // block): the blocks land one
  after another, bk rows each, as the tile stores them (one copy instruction an operand a stage)."""
  out = []
  for op, tile, outer_r in ((m.a, a_tile, m.i), (m.b, b_tile, m.j)):
    inner_r = m.k if tile.k_contig else outer_r
    batch = tuple(r for r in m.batch if op.stride(r))
    isz = din.itemsize
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    if tile.k_contig: dims, strides, box = (_size(m.k), _size(outer_r)), (op.stride(outer_r) * isz,), (tile.bk, tile.outer)
    else:
      if _size(outer_r) % tile.block: return None
      dims, strides = (tile.block, _size(m.k), _size(outer_r) // tile.block), (op.stride(m.k) * isz, tile.block * isz)
      box = (tile.block, tile.bk, tile.outer // tile.block)
    dims, strides = dims + tuple(_size(r) for r in batch), strides + tuple(op.stride(r) * isz for r in batch)
    box = box + (1,) * len(batch)
    # the hardware's limits: 16-byte aligned start and strides, at most 5 dims; strides positive here (no flips)
    if op.stride(inner_r) != 1 or op.offset < 0 or op.offset * isz % 16 or len(dims) > 5: return None
    if any(st <= 0 or st % 16 or st >= 2 ** 40 for st in strides): return None
    out.append(((int(op.buf.arg), isz, op.offset * isz, dims, strides, box), batch))
  return out


def _size(r: UOp) -> int: return r.src[0].arg


def _fragment(smem: UOp, idxs: list[UOp], lane0: list[int], din: DType) -> UOp:
  """A fragment vector from shared memory. Elements that sit side by side for every lane (their lane-0 offsets differ
  by 1, their lane terms match, and the pair starts at an even offset) are read as one 2-wide access."""
  elems: list[UOp] = []
  e = 0
  while e < len(idxs):
    pair = e + 1 < len(idxs) and lane0[e + 1] == lane0[e] + 1 and lane0[e] % 2 == 0 and _same_lane_terms(idxs[e], idxs[e + 1])
    if pair and din.itemsize <= 2:
      v = UOp(Ops.INDEX, din.vec(2).ptr(smem.dtype.size, "local"), (smem, idxs[e])).load()  # type: ignore[attr-defined]
      elems += [UOp(Ops.GEP, din, (v,), (0,)), UOp(Ops.GEP, din, (v,), (1,))]
      e += 2
    else:
      elems.append(UOp(Ops.INDEX, smem.dtype, (smem, idxs[e])).load())
      e += 1
  return UOp(Ops.VECTORIZE, din.vec(len(elems)), tuple(elems))


def matrix_fragment(smem: UOp, fit: list[tuple[tuple[int, int, int], tuple[int, int, int]]], tile: SmemTile, buf_off: UOp, outer0: UOp,
                    k0: int, lane: UOp, din: DType) -> UOp | None:
  """The fragment as one collective 8x8-matrix load (LOAD with arg ("matrix", matrices, trans): NVIDIA's ldmatrix),
  when the layout is the one it delivers: register j (elements 2j, 2j+1) of every lane is (outer = c_j + groupID,
  k = c'_j + 2*threadID + {0, 1}). Each lane gives the address of one matrix row: lane l row l&7 of matrix l>>3."""
  n = len(fit)
  if din.itemsize != 2 or n % 2 or n // 2 not in (2, 4): return None
  for j in range(n // 2):
    (o0, k0_), (o1, k1_) = fit[2 * j], fit[2 * j + 1]
    if o0 != o1 or o0[1:] != (1, 0) or k0_[1:] != (0, 2) or k1_ != (k0_[0] + 1, 0, 2): return None
  co, ck = [fit[2 * j][0][0] for j in range(n // 2)], [fit[2 * j][1][0] for j in range(n // 2)]
  def bits(c: list[int]) -> tuple[int, int, int] | None:  # c[j] == c0 + b0*(j&1) + b1*(j>>1)
    b = (c[0], c[1] - c[0], (c[2] - c[0]) if len(c) > 2 else 0)
    return b if all(c[j] == b[0] + b[1] * (j & 1) + b[2] * (j >> 1) for j in range(len(c))) else None
  if (bo := bits(co)) is None or (bk := bits(ck)) is None: return None
  mat = (lane // 8) % (n // 2)
  jb0, jb1, r = mat % 2, mat // 2, lane % 8
  o = outer0 + bo[0] + jb0 * bo[1] + jb1 * bo[2]
  kk = _c(k0 + bk[0]) + jb0 * bk[1] + jb1 * bk[2]
  trans = not tile.k_contig  # rows in memory run along outer: the matrix is read transposed
  idx = buf_off + (tile.index(o, kk + r) if trans else tile.index(o + r, kk))
  return UOp(Ops.LOAD, din.vec(n), (UOp(Ops.INDEX, din.vec(n).ptr(smem.dtype.size, "local"), (smem, idx)),), ("matrix", n // 2, trans))  # type: ignore[attr-defined]


def _vector_fragment(smem: UOp, idxs: list[UOp], din: DType) -> UOp:
  """A fragment vector from shared memory, its runs of neighbouring, aligned elements read as one access of up to 16
  bytes each (an fma spec's rows or columns of one k: float4 loads)."""
  elems: list[UOp] = []
  e = 0
  while e < len(idxs):
    w = next(w for w in (16 // din.itemsize, 8, 4, 2, 1) if w <= 16 // din.itemsize and (w == 1 or _aligned_run(idxs[e:e + w], w)))
    if w == 1: elems.append(UOp(Ops.INDEX, smem.dtype, (smem, idxs[e])).load())
    else:
      v = UOp(Ops.INDEX, din.vec(w).ptr(smem.dtype.size, "local"), (smem, idxs[e])).load()  # type: ignore[attr-defined]
      elems += [UOp(Ops.GEP, din, (v,), (i,)) for i in range(w)]
    e += w
  return UOp(Ops.VECTORIZE, din.vec(len(elems)), tuple(elems))


def _aligned_run(idxs: list[UOp], w: int) -> bool:
  """idxs are w consecutive elements (idxs[i] == idxs[0] + i) whose first is a multiple of w for every lane."""
  if len(idxs) != w: return False
  t0, c0 = split_terms(idxs[0].simplify())
  if c0 % w or any(c % w for _, c in t0): return False
  key = sorted(t0, key=lambda p: id(p[0]))
  for i, x in enumerate(idxs[1:], 1):
    tx, cx = split_terms(x.simplify())
    if cx != c0 + i or sorted(tx, key=lambda p: id(p[0])) != key: return False
  return True


@functools.cache
def _fma_terms(tc: TensorCore) -> tuple[tuple[tuple[int, int], ...], ...]:
  """Per accumulator element of an fma spec: the (A element, B element) pairs whose products it adds, one per k, the
  same for every lane (the C element (row, col) takes A's (row, k) and B's (k, col))."""
  out: tuple[tuple[tuple[int, int], ...], ...] | None = None
  for lane in range(tc.threads):
    a = {rk: n for n, rk in enumerate(tc.a_layout[lane])}
    b = {kc: n for n, kc in enumerate(tc.b_layout[lane])}
    terms = tuple(tuple((a[(r, k)], b[(k, c)]) for k in range(tc.dims[2])) for r, c in tc.c_layout[lane])
    if out is not None and terms != out: raise TensorCoreError(f"{tc.name}: lane {lane} pairs its fragments differently from lane 0")
    out = terms
  assert out is not None
  return out


def fma_outer(tc: TensorCore, a: UOp, b: UOp, c: UOp) -> UOp:
  """An fma spec's "instruction": each accumulator element plus its products of A and B elements, as MULACCs (one
  fused multiply-add each: renderers that don't contract a*b+c themselves still emit one instruction)."""
  elems = []
  for e, pairs in enumerate(_fma_terms(tc)):
    v = UOp(Ops.GEP, c.dtype.scalar(), (c,), (e,))
    for ia, ib in pairs: v = UOp(Ops.MULACC, v.dtype, (UOp(Ops.GEP, a.dtype.scalar(), (a,), (ia,)), UOp(Ops.GEP, b.dtype.scalar(), (b,), (ib,)), v))
    elems.append(v)
  return UOp(Ops.VECTORIZE, c.dtype, tuple(elems))


def _same_lane_terms(x: UOp, y: UOp) -> bool:
  """x and y differ by a constant, and every non-constant term has an even coefficient (so x's parity is lane 0's)."""
  tx, cx = split_terms(x.simplify())
  ty, cy = split_terms(y.simplify())
  return sorted(tx, key=lambda p: id(p[0])) == sorted(ty, key=lambda p: id(p[0])) and cy == cx + 1 and all(c % 2 == 0 for _, c in tx)


def _vec_width(op: Operand, contig_axis: UOp, other_axes: list[UOp], tile_elems: int, contig_len: int, threads: int, dt: DType) -> int:
  """The widest vector (<= 16 bytes) that keeps every copy aligned and gives each thread whole vectors."""
  for w in (16 // dt.itemsize, 8, 4, 2, 1):
    if w > 16 // dt.itemsize: continue
    if w > 1 and (op.stride(contig_axis) != 1 or contig_len % w or op.offset % w or any(op.stride(r) % w for r in other_axes)): continue
    if (tile_elems // w) % threads == 0: return w
  raise TensorCoreError("no copy width divides the tile among the threads")


def lower_tensor_core(ast: UOp, renderer: Renderer, tc_index: int, config: int) -> tuple[UOp, tuple, tuple]:
  """The lowered kernel (ready for cleanup + linearize) and its (global_size, local_size)."""
  if (m := match_matmul(ast)) is None: raise TensorCoreError("TC opt on a kernel that is not a matmul this lowering handles")
  if not 0 <= tc_index < len(renderer.tensor_cores): raise TensorCoreError(f"renderer {renderer!r} has no tensor core {tc_index}")
  tc = renderer.tensor_cores[tc_index]
  if not 0 <= config < len(tc.tile_configs): raise TensorCoreError(f"{tc.name} has no tile config {config}")
  cfg = tc.tile_configs[config]
  if tc_index not in usable_tensor_cores(renderer, m): raise TensorCoreError(f"{tc.name} can't compute this {m.dtype_in!r} matmul")
  if not config_fits(cfg, tc, m, renderer.shared_max): raise TensorCoreError(f"tile config {cfg} doesn't tile {m.mnk} with {tc.name}")
  M, N, K = m.mnk
  tm, tn, tk = tc.dims
  lanes = tc.threads  # one instruction's lanes (a warp on NVIDIA)
  # ping-pong: from here on cfg is one warpgroup's tiling; `groups` warpgroups compute (each its own tiles)
  groups = cfg.warps
  if (pp_cfg := _pingpong_config(cfg, tc, m, renderer)) is not None: cfg, groups = pp_cfg, PINGPONG_GROUPS
  threads = cfg.warps * lanes
  wtm, wtn = cfg.bm // cfg.warps_m // tm, cfg.bn // cfg.warps_n // tn  # TC tiles per warp along M and N
  din = m.dtype_in
  pad = 16 // din.itemsize  # one 16-byte pad per smem row: fragment reads of the 8 groupIDs hit different banks

  split = 2 if tc.smem_operands else lane_split(tc)  # smem operands: no fragments, only the accumulators' own fit
  assert split is not None  # usable_tensor_cores checked _lanes_fit
  use_ldm = _uses_matrix_load(tc, din) and split == 2  # the target's collective 8x8 load (its lane pattern is split 2's)
  use_async = tc.async_copy and ASYNC_COPY.value != 0 and not tc.fma  # fma tiles may be stored transposed: through registers
  chunk = 16 // din.itemsize if use_ldm or tc.smem_operands else 0  # swizzled (no padding) where fragments come from ldmatrix
  block = SWIZZLE_BYTES // din.itemsize if tc.smem_operands else 0  # smem operands: 128-byte swizzle atoms along outer too
  # fma: both tiles stored k-major, so a lane's neighbouring rows (columns) of one k are one vector load
  a_tile = SmemTile(not tc.fma and (m.a.stride(m.k) == 1 or m.a.stride(m.i) != 1), cfg.bm, cfg.bk, pad, chunk, block)
  b_tile = SmemTile(not tc.fma and m.b.stride(m.k) == 1 and m.b.stride(m.j) != 1, cfg.bn, cfg.bk, pad, chunk, block)
  # tiles as boxes through tensor maps (TMA): one thread copies a stage, which completes on that stage's shared barrier
  tmaps = _tile_maps(m, a_tile, b_tile, din) if tc.smem_operands and use_async and renderer.tile_copy and TC_TMA.value else None
  # pipe: no block barrier in the loop; stage s is "full" at barrier s (the copy landed) and "empty" at barrier stages + s
  pipe = tmaps is not None and TC_TMA.value >= 2
  ws = pipe and TC_TMA.value >= 3  # warp-specialized: warpgroup cfg.warps copies, the others compute
  pingpong = pp_cfg is not None
  if pingpong and not ws: raise TensorCoreError("TC_PINGPONG: these operands can't be copied as tensor-map boxes")
  nbx, nby, nbatch = N // cfg.bn, M // cfg.bm, prod(r.src[0].arg for r in m.batch)
  # ping-pong: a block's tiles come in turns of `groups`, one a warpgroup
  turn = groups if pingpong else 1
  grid = _persistent_grid(nbx * nby // turn, renderer.compute_units) if pipe and TC_PERSIST.value and not m.batch else 0
  # TC_CLUSTER: B's tile split along its outermost box dimension, each half copied by one block of the pair into both
  b_halves = tmaps is not None and (b_tile.outer if b_tile.k_contig else b_tile.outer // b_tile.block) % CLUSTER == 0
  cluster = CLUSTER if TC_CLUSTER.value and ws and grid and b_halves and not TC_ARRIVE.value and _cluster_shares_b(grid, nbx, nby) else 1

  # thread and block indices
  if ws:  # threads as (32 lanes, warps): the instruction's warpgroups, then one more warp that copies (224 registers a thread)
    wpg = lanes // 32
    lane32, wid = UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx0", 32)), UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx1", groups * wpg + 1))
    lane, warp = wid % wpg * 32 + lane32, wid // wpg
    copier, computes = wid.eq(groups * wpg) & lane32.eq(0), wid < groups * wpg
  else:
    lane = UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx0", lanes))
    warp = UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx1", cfg.warps))
  tid = warp * lanes + lane
  wm, wn = (_c(0), _c(0)) if pingpong else (warp // cfg.warps_n, warp % cfg.warps_n)  # ping-pong: the warpgroup's own tile
  g, t = lane // (1 << split), lane % (1 << split)
  tloop: UOp | None = None
  seq: UOp | None = None  # with a tile loop: the block's output tile count so far
  # warp-specialized: the compute loops (and the epilogue in them) run no iterations in the copying warpgroup, the copy loop
  # none in the others: the program stays straight-line, every thread takes the loop that is its own
  def trips(n: int) -> UOp: return computes.where(_c(n), _c(0)) if ws else _c(n)
  if grid:  # persistent: block cta takes output tiles cta, cta + grid, ... (the tile loop, outside every other)
    cta = UOp(Ops.SPECIAL, dtypes.int32, (), ("gidx0", grid))
    tloop = UOp(Ops.RANGE, dtypes.int32, (trips(nbx * nby // grid // turn),), (-1, "loop"))
    seq = tloop * turn + warp if pingpong else tloop  # the block's tile seq (ping-pong: warpgroup w takes every turn-th from w)
    by, bx = _tile_origin(seq * grid + cta, nbx, nby)
  else:
    bx = UOp(Ops.SPECIAL, dtypes.int32, (), ("gidx0", N // cfg.bn))
    by = UOp(Ops.SPECIAL, dtypes.int32, (), ("gidx1", M // cfg.bm))
    if ws: seq = tloop = UOp(Ops.RANGE, dtypes.int32, (trips(1),), (-1, "loop"))  # one output tile, in the compute warpgroups only
  batch_vals: dict[UOp, UOp] = {}
  if m.batch:
    bz = UOp(Ops.SPECIAL, dtypes.int32, (), ("gidx2", nbatch))
    inner = 1
    for r in reversed(m.batch):
      batch_vals[r] = (bz // inner if inner > 1 else bz) % r.src[0].arg if r is not m.batch[0] else (bz // inner if inner > 1 else bz)
      inner *= r.src[0].arg
  if not grid and TC_SWIZZLE.value > 1 and nby % TC_SWIZZLE.value == 0 and nby > TC_SWIZZLE.value: by, bx = _tile_origin(by * nbx + bx, nbx, nby)
  # global element offsets in idt: a block's first row times the row stride passes 2**31 in a big buffer
  idt = _global_index_dtype(ast, m, buffers_only=tc.fma)
  m0, n0 = by.cast(idt) * cfg.bm, bx.cast(idt) * cfg.bn

  # accumulators: one vector register per TC tile, zeroed before the k loop
  acc_dt = tc.dtype_out.vec(len(tc.c_layout[0]))
  accs = [UOp(Ops.DEFINE_REG, acc_dt.ptr(1, "reg"), (), n).index(_c(0)) for n in range(wtm * wtn)]
  zero = UOp(Ops.VECTORIZE, acc_dt, tuple(UOp.const(tc.dtype_out, 0.0) for _ in range(acc_dt.count)))
  inits = [(UOp(Ops.AFTER, acc.dtype, (acc, tloop)) if tloop is not None else acc).store(zero) for acc in accs]
  nk = K // cfg.bk

  # shared tiles: `stages` buffers of each operand, tile kt in buffer kt % stages
  stage_bytes = (a_tile.size + b_tile.size) * din.itemsize
  smem = renderer.shared_max
  stages = (TC_STAGES.value or cfg.stages or min(4, smem // stage_bytes)) if use_async else 2
  if not use_async and stages != 2: raise TensorCoreError("more than 2 stages need async copies")
  if stages < 2 or stages * stage_bytes > smem: raise TensorCoreError(f"{stages} stages of {stage_bytes} bytes don't fit in shared memory")
  a_sm = UOp(Ops.DEFINE_LOCAL, din.ptr(stages * a_tile.size, "local"), (), 0)
  b_sm = UOp(Ops.DEFINE_LOCAL, din.ptr(stages * b_tile.size, "local"), (), 1)

  def copy(k_tile: UOp, buf: UOp, dep: UOp | None = None, after: tuple[UOp, ...] = ()) -> tuple[list[UOp], list[UOp]]:
    """(loads, stores) of global tile k_tile of A and B into shared buffer `buf`, 16-byte vectors where aligned. The
    stores come after `dep` (a BARRIER) and wait for `after` (the loads don't: their latency hides behind `after`)."""
    loads: list[UOp] = []
    stores: list[UOp] = []
    for op, tile, smem, outer_r, outer0 in ((m.a, a_tile, a_sm, m.i, m0), (m.b, b_tile, b_sm, m.j, n0)):
      # the copy's vectors run along the axis contiguous in global memory; an fma tile may be stored across them
      gk = (op.stride(m.k) == 1 and op.stride(outer_r) != 1) if tc.fma else tile.k_contig
      contig_len = tile.bk if gk else tile.outer
      contig_r, other_r = (m.k, outer_r) if gk else (outer_r, m.k)
      w = _vec_width(op, contig_r, [other_r, *m.batch], tile.outer * tile.bk, contig_len, threads, din)
      per_row = contig_len // w
      base = UOp(Ops.AFTER, smem.dtype, (smem, dep)) if dep is not None else smem
      for it in range(tile.outer * tile.bk // w // threads):
        chunk_id = tid + it * threads
        row, col = chunk_id // per_row, (chunk_id % per_row) * w
        o, kk = (row, col) if gk else (col, row)
        gidx = UOp.const(idt, op.offset) + (outer0 + o.cast(idt)) * op.stride(outer_r) + (k_tile.cast(idt) * cfg.bk + kk.cast(idt)) * op.stride(m.k)
        for r in m.batch:
          if op.stride(r): gidx = gidx + batch_vals[r].cast(idt) * op.stride(r)
        vdt = din.vec(w)
        loads.append(val := UOp(Ops.LOAD, vdt, (UOp(Ops.INDEX, vdt.ptr(op.buf.dtype.size), (op.buf, gidx)),)))  # type: ignore[attr-defined]
        dst = UOp(Ops.INDEX, vdt.ptr(smem.dtype.size, "local"), (base, buf * tile.size + tile.index(o, kk)))  # type: ignore[attr-defined]
        if use_async and w * din.itemsize in (4, 8, 16):  # global -> shared without registers, done by a later BARRIER
          stores.append(UOp(Ops.STORE, dtypes.void, (dst, val), "async"))
          continue
        if after: val = UOp(Ops.AFTER, vdt, (val, *after))
        if gk != tile.k_contig:  # transposed into the tile: one scalar store per element
          for e in range(w):
            at = tile.index(o, kk + e) if gk else tile.index(o + e, kk)
            elem = UOp(Ops.GEP, din, (val,), (e,)) if w > 1 else val
            stores.append(UOp(Ops.INDEX, din.ptr(smem.dtype.size, "local"), (base, buf * tile.size + at)).store(elem))  # type: ignore[attr-defined]
          continue
        stores.append(dst.store(val))
    return loads, stores

  # fragments of one k step: ldmatrix where the layout is its, else loads at the layout's (row, k)
  a_fit = [] if tc.smem_operands else list(zip(fit_layout(tc.a_layout, 0, split), fit_layout(tc.a_layout, 1, split)))
  b_fit = [] if tc.smem_operands else list(zip(fit_layout(tc.b_layout, 0, split), fit_layout(tc.b_layout, 1, split)))
  b_ofit = [(fc, fk) for fk, fc in b_fit]
  # two neighbouring B tiles' fragments from one 4-matrix ldmatrix where the layout allows (fewer load instructions)
  b_pair = [*b_ofit, *(((fc[0] + tn, *fc[1:]), fk) for fc, fk in b_ofit)]

  def fragments(a_rd: UOp, b_rd: UOp, buf: UOp, ks: int) -> tuple[list[UOp], list[UOp]]:
    """The A fragments (one per TC tile row of the warp) and B fragments (one per column) of k step ks of buffer buf."""
    a_frags = []
    for x in range(wtm):
      row0 = wm * (cfg.bm // cfg.warps_m) + x * tm
      if use_ldm and (ldm := matrix_fragment(a_rd, a_fit, a_tile, buf * a_tile.size, row0, ks * tk, lane, din)) is not None:
        a_frags.append(ldm)
        continue
      idxs = [buf * a_tile.size + a_tile.index(row0 + affine_uop(fr, g, t), affine_uop(fk, g, t) + ks * tk) for fr, fk in a_fit]
      if tc.fma: a_frags.append(_vector_fragment(a_rd, idxs, din))
      else: a_frags.append(_fragment(a_rd, idxs, [a_tile.index(_c(fr[0]), _c(fk[0])).simplify().arg for fr, fk in a_fit], din))
    b_frags: list[UOp] = []
    for y in range(wtn):
      if len(b_frags) > y: continue  # filled by the pair load of y-1
      col0 = wn * (cfg.bn // cfg.warps_n) + y * tn
      if use_ldm and y + 1 < wtn and (ldm := matrix_fragment(b_rd, b_pair, b_tile, buf * b_tile.size, col0, ks * tk, lane, din)) is not None:
        half_n = len(b_ofit)
        b_frags += [UOp(Ops.VECTORIZE, din.vec(half_n), tuple(UOp(Ops.GEP, din, (ldm,), (h * half_n + e,)) for e in range(half_n))) for h in (0, 1)]
        continue
      if use_ldm and (ldm := matrix_fragment(b_rd, b_ofit, b_tile, buf * b_tile.size, col0, ks * tk, lane, din)) is not None:
        b_frags.append(ldm)
        continue
      idxs = [buf * b_tile.size + b_tile.index(col0 + affine_uop(fc, g, t), affine_uop(fk, g, t) + ks * tk) for fk, fc in b_fit]
      if tc.fma: b_frags.append(_vector_fragment(b_rd, idxs, din))
      else: b_frags.append(_fragment(b_rd, idxs, [b_tile.index(_c(fc[0]), _c(fk[0])).simplify().arg for fk, fc in b_fit], din))
    return a_frags, b_frags

  wmma_arg = (tc.name, tc.dims, tc.dtype_in.name, tc.dtype_out.name)
  nks = cfg.bk // tk

  def smem_wmmas(cur: list[UOp], a_rd: UOp, b_rd: UOp, buf: UOp, ks: int, prev: UOp | None) -> list[UOp]:
    """k step ks as instructions reading A and B from shared memory. They run in program order (each waits for the one
    before, through AFTER): the first of the tile's batch fences, the last commits it and waits for it all."""
    out = list(cur)
    for x, y in itertools.product(range(wtm), range(wtn)):
      first, last = ks == 0 and x == y == 0, ks == nks - 1 and x == wtm - 1 and y == wtn - 1
      row0, col0 = wm * (cfg.bm // cfg.warps_m) + x * tm, wn * (cfg.bn // cfg.warps_n) + y * tn
      srcs = []
      for rd, tile, o0 in ((a_rd, a_tile, row0), (b_rd, b_tile, col0)):
        base = UOp(Ops.AFTER, rd.dtype, (rd, prev)) if prev is not None else rd
        srcs.append(UOp(Ops.INDEX, din.ptr(rd.dtype.size, "local"), (base, buf * tile.size + tile.start(o0, ks * tk))))  # type: ignore[attr-defined]
      arg = (*wmma_arg, a_tile.operand(din.itemsize), b_tile.operand(din.itemsize), first, last)
      out[x * wtn + y] = prev = UOp(Ops.WMMA, acc_dt, (*srcs, out[x * wtn + y]), arg)
    return out

  def wmmas(cur: list[UOp], a_frags: list[UOp], b_frags: list[UOp]) -> list[UOp]:
    out = list(cur)
    for x, y in itertools.product(range(wtm), range(wtn)):
      if tc.fma: out[x * wtn + y] = fma_outer(tc, a_frags[x], b_frags[y], out[x * wtn + y])
      else: out[x * wtn + y] = UOp(Ops.WMMA, acc_dt, (a_frags[x], b_frags[y], out[x * wtn + y]), wmma_arg)
    return out

  # pipe: full and empty barriers a stage; ping-pong: then one "turn" barrier a computing warpgroup (its turn may begin)
  mbar = UOp(Ops.DEFINE_LOCAL, dtypes.uint64.ptr(stages * (2 if pipe else 1) + (turn if pingpong else 0), "local"), (), 2) if tmaps else None

  def mbar_at(i: UOp, dep: UOp | None) -> UOp:
    assert mbar is not None
    return UOp(Ops.INDEX, mbar.dtype, (UOp(Ops.AFTER, mbar.dtype, (mbar, dep)) if dep is not None else mbar, i))

  # the maps the copies name: with TC_CLUSTER B's box is half the tile (its outermost dimension halved)
  map_specs = tuple(spec for spec, _ in tmaps) if tmaps else ()
  mcast = cluster > 1 and TC_CLUSTER.value != 2
  if tmaps and mcast:
    bspec = map_specs[1]
    at = 1 if b_tile.k_contig else 2
    map_specs = (map_specs[0], (*bspec[:5], tuple(b // cluster if i == at else b for i, b in enumerate(bspec[5]))))
  rank = cta % cluster if cluster > 1 else _c(0)  # the block's rank in its cluster (clusters along the grid's x)

  def tile_copy(k_tile: UOp, buf: UOp, dep: UOp, pred: UOp, empty: tuple[UOp, UOp] | None = None, origin: tuple[UOp, UOp] | None = None,
                elect: bool = True) -> UOp:
    """BARRIER ("tile_copy", bytes, maps, boxes): where `pred` holds, one thread has stage barrier `buf` expect the tile's
    bytes and copies global tile k_tile of A and B into shared buffer `buf` as boxes (srcs: barrier, pred, then per box
    A's and B's buffers, with `empty` the barrier and phase parity that thread waits for first, then per box its destination
    and coordinates, innermost first; boxes: (map, coordinates) per box)."""
    assert tmaps is not None
    srcs: list[UOp] = [mbar_at(buf, dep), pred, m.a.buf, m.b.buf]  # the buffers: kernel parameters still (read through the maps)
    if empty is not None: srcs += list(empty)
    boxes: list[tuple[int, int] | tuple[int, int, bool]] = []
    oy, ox = origin if origin is not None else (by, bx)  # the output tile the k tile belongs to (persistent: maybe the next one)
    for n, ((_, axes), tile, smem, o0) in enumerate(zip(tmaps, (a_tile, b_tile), (a_sm, b_sm), (oy * cfg.bm, ox * cfg.bn))):
      base, kc, bc = UOp(Ops.AFTER, smem.dtype, (smem, dep)), k_tile * cfg.bk, [batch_vals[r] for r in axes]
      # one box a tile: k-major at (k, outer row), mn-major at (0, k, outer block)
      coords = [kc, o0] if tile.k_contig else [_c(0), kc, o0 // tile.block]
      dst = buf * tile.size
      if (half := n == 1 and mcast):  # this block's half of B (the outer half at its rank), landing in both blocks
        coords[-1] = coords[-1] + rank * ((tile.outer if tile.k_contig else tile.outer // tile.block) // cluster)
        dst = dst + rank * (tile.size // cluster)
      srcs += [UOp(Ops.INDEX, din.ptr(smem.dtype.size, "local"), (base, dst)), *coords, *bc]  # type: ignore[attr-defined]
      boxes.append((n, len(coords) + len(bc), True) if half else (n, len(coords) + len(bc)))  # (map, coordinates[, multicast])
    # every byte of the stage lands on this block's barrier: its own copies' and, multicast, the other block's half of B
    nbytes = (a_tile.outer + b_tile.outer) * cfg.bk * din.itemsize
    # elect: the block's first thread copies (else every thread that reaches it: the copy loop runs in one thread only)
    return UOp(Ops.BARRIER, dtypes.void, tuple(srcs), ("tile_copy", nbytes, map_specs, tuple(boxes), empty is not None, elect))

  prefetch = use_async and TC_PREFETCH.value != 0 and renderer.reg_vectors and not tc.smem_operands
  # smem operands: a tile's batch of instructions may still run while the next one is issued (inflight 1); then a buffer
  # is refilled only two tiles after its batch, so copies run stages-2 tiles ahead instead of stages-1
  # ping-pong: one warpgroup at a time on the tensor cores, so it keeps a batch in flight (auto 1)
  inflight_setting = TC_INFLIGHT.value if TC_INFLIGHT.value >= 0 else 0 if ws and grid and cfg.warps >= 2 else 1
  inflight = 1 if tc.smem_operands and use_async and inflight_setting and stages > 2 else 0
  # pipe: each batch is waited for right after it is issued unless TC_INFLIGHT=2. A batch left running into the next iteration
  # (past the barrier waits and the copy's branch) makes ptxas 13.0 serialize every wgmma (C7514; 13.5 does not); the other
  # warpgroup's batch keeps the tensor cores busy meanwhile
  if pipe and not ws and inflight_setting < 2: inflight = 0
  ahead = stages - 1 - inflight
  # BARRIER arg: async groups that may stay in flight, and for smem operands also the instruction batches that may
  def bar_arg(keep: int, batches: int) -> int | tuple[int, int]: return (keep, batches) if tc.smem_operands else keep
  # a stage's empty barrier: with TC_CLUSTER's multicast lanes 0 and 1 of each computing warp arrive, at its own block's and at the
  # other's, so a stage is refilled (in both blocks) once both blocks' consumers released it
  empty_arrive = ("mbar_arrive", "pair") if mcast else ("mbar_arrive",)
  order: list[UOp] = []  # per k step: fragment loads and WMMAs, in the order the linearizer should emit them
  bar: UOp | None = None
  if tmaps:  # prologue: the stage barriers (pipe: full ones of one arrival, empty ones of every thread's), then the first tiles
    bar = UOp(Ops.BARRIER, dtypes.void, (mbar_at(_c(0), None),), ("mbar_init", stages, (threads // 32 * cluster if mcast else threads // 32 if TC_ARRIVE.value else threads) if pipe else 0,
                                                                  *((turn, lanes) if pingpong else (0, 0) if cluster > 1 else ()),
                                                                  *((cluster,) if cluster > 1 else ())))
    total = nk * (nbx * nby // grid if grid else 1)  # k tiles this block copies (persistent: of all its output tiles)
    for st in range(0 if ws else stages - 1 if pipe else ahead):
      origin = _tile_origin(_c(st // nk * grid) + cta, nbx, nby) if grid else None
      bar = tile_copy(_c(st % nk), _c(st), bar, UOp.const(dtypes.bool, st < total), origin=origin)
  elif use_async:
    # prologue: tiles 0..ahead-1, one async group each
    for st in range(ahead):
      # with prefetch the last one also waits for tile 0 (the fragments of its first k step are read before the loop)
      keep = stages - 2 if prefetch and st == stages - 2 else ahead
      bar = UOp(Ops.BARRIER, dtypes.void, tuple(copy(_c(st % nk), _c(st), bar)[1]) + ((bar,) if bar is not None else ()), bar_arg(keep, 0))
    assert bar is not None
  if prefetch:
    assert bar is not None
    # fragments are software-pipelined one k step ahead, across the tile boundary too: each iteration's last k step
    # waits for the next tile (the one barrier per tile) and loads that tile's first fragments before its own WMMAs,
    # so no k step waits for its ldmatrix and the barrier's wait overlaps tensor-core work. The first k step's
    # fragments are carried from one iteration to the next in registers.
    a0, b0 = fragments(UOp(Ops.AFTER, a_sm.dtype, (a_sm, bar)), UOp(Ops.AFTER, b_sm.dtype, (b_sm, bar)), _c(0), 0)
    fregs = [UOp(Ops.DEFINE_REG, f.dtype.ptr(1, "reg"), (), len(accs) + n).index(_c(0)) for n, f in enumerate(a0 + b0)]
    kt = UOp(Ops.RANGE, dtypes.int32, (_c(nk), *inits, *(r.store(f) for r, f in zip(fregs, a0 + b0)), bar), (m.k.arg[0], "reduce"))
    # tile kt+stages-1 goes into the buffer read in iteration kt-1 (its reads all came before that iteration's barrier)
    loads, stores = copy((kt + stages - 1) % nk, (kt + stages - 1) % stages)
    frags = [UOp(Ops.AFTER, r.dtype, (r, kt)).load() for r in fregs]
    a_frags, b_frags = frags[:wtm], frags[wtm:]
    cur = [UOp(Ops.AFTER, acc.dtype, (acc, kt)).load() for acc in accs]
    cur_buf = kt % stages
    for ks in range(nks):
      if ks + 1 < nks: na, nb = fragments(a_sm, b_sm, cur_buf, ks + 1)
      else:
        # tile kt+1 has landed (newer groups may fly) and every read of this tile's buffer is done: it is refilled next
        mid = UOp(Ops.BARRIER, dtypes.void, (*stores, *order, *a_frags, *b_frags), stages - 2)
        na, nb = fragments(UOp(Ops.AFTER, a_sm.dtype, (a_sm, mid)), UOp(Ops.AFTER, b_sm.dtype, (b_sm, mid)), (kt + 1) % stages, 0)
        order.append(mid)
      cur = wmmas(cur, a_frags, b_frags)
      order += [*na, *nb, *cur]  # the next fragments' loads first: their latency hides behind these WMMAs
      a_frags, b_frags = na, nb
    updates = [UOp(Ops.AFTER, acc.dtype, (acc, kt)).store(v) for acc, v in zip(accs, cur)]
    updates += [UOp(Ops.AFTER, r.dtype, (r, kt)).store(f) for r, f in zip(fregs, a_frags + b_frags)]
    end = UOp(Ops.END, dtypes.void, (kt, *loads, *stores, *order, *updates))
  else:
    if pipe:
      assert bar is not None
      if pingpong:
        # the warpgroup's turn: the one before it has waited for every k tile of the block's previous tile (so each stage's full
        # barrier is at most one phase behind this tile's: a parity wait can't pass on an older phase). Its turn barrier completes
        # once a turn of the other one; the first tile's wait (parity 1 on a fresh barrier) passes at once
        assert seq is not None
        turn_bar = UOp(Ops.BARRIER, dtypes.void, (mbar_at(warp + 2 * stages, bar), ((seq + turn - 1) // turn + 1) % 2), ("mbar_wait",))
        kt = UOp(Ops.RANGE, dtypes.int32, (_c(nk), *inits, bar, turn_bar), (m.k.arg[0], "reduce"))
      else: kt = UOp(Ops.RANGE, dtypes.int32, (_c(nk), *inits, bar), (m.k.arg[0], "reduce"))
      gk = seq * nk + kt if seq is not None else kt  # the block's k tile count so far: stages and phases run on across output tiles
      # wait for tile kt: its stage's full barrier completes phase gk // stages
      full = UOp(Ops.BARRIER, dtypes.void, (mbar_at(gk % stages, kt), (gk // stages) % 2), ("mbar_wait",))
      loads, stores = [], []
      a_rd, b_rd = UOp(Ops.AFTER, a_sm.dtype, (a_sm, full)), UOp(Ops.AFTER, b_sm.dtype, (b_sm, full))
    elif use_async:
      assert bar is not None
      kt = UOp(Ops.RANGE, dtypes.int32, (_c(nk), *inits, bar), (m.k.arg[0], "reduce"))
      # top of each iteration: tile kt has landed (the newer ahead-1 groups may still fly) and everyone is done reading
      # the buffer that tile kt+ahead goes into now (smem operands: all but the last `inflight` batches are done)
      top = UOp(Ops.BARRIER, dtypes.void, (kt,), bar_arg(-1 if tmaps else ahead - 1, inflight))
      if tmaps:  # issue tile kt+ahead (while it exists), then wait for tile kt: its stage's barrier completes phase kt // stages
        nxt = kt + ahead
        cp = tile_copy(nxt % nk, nxt % stages, top, nxt < nk)
        full = UOp(Ops.BARRIER, dtypes.void, (mbar_at(kt % stages, cp), (kt // stages) % 2, cp), ("mbar_wait",))
        loads, stores = [], [cp]
        a_rd, b_rd = UOp(Ops.AFTER, a_sm.dtype, (a_sm, full)), UOp(Ops.AFTER, b_sm.dtype, (b_sm, full))
      else:
        loads, stores = copy((kt + ahead) % nk, (kt + ahead) % stages, top)
        a_rd, b_rd = UOp(Ops.AFTER, a_sm.dtype, (a_sm, top)), UOp(Ops.AFTER, b_sm.dtype, (b_sm, top))
    else:
      # double buffering through registers: tile 0 first, then each iteration loads tile kt+1 before its WMMAs
      first = UOp(Ops.BARRIER, dtypes.void, tuple(copy(_c(0), _c(0))[1]))
      kt = UOp(Ops.RANGE, dtypes.int32, (_c(nk), *inits, first), (m.k.arg[0], "reduce"))
      a_rd, b_rd = a_sm, b_sm
    cur_buf = gk % stages if pipe else kt % stages
    cur = [UOp(Ops.AFTER, acc.dtype, (acc, kt)).load() for acc in accs]
    for ks in range(nks):
      if tc.smem_operands:
        cur = smem_wmmas(cur, a_rd, b_rd, cur_buf, ks, order[-1] if order else None)
        order += cur
        continue
      a_frags, b_frags = fragments(a_rd, b_rd, cur_buf, ks)
      cur = wmmas(cur, a_frags, b_frags)
      order += [*a_frags, *b_frags, *cur]
    if pipe:
      # batch kt - inflight has read its buffer: every thread says so at that stage's empty barrier. Then one thread waits
      # until everyone has released the buffer of tile kt+stages-1 (its previous tile's batch, phase t // stages - 1:
      # parity 1 passes at once on a fresh barrier) and copies that tile into it
      done = UOp(Ops.BARRIER, dtypes.void, (order[-1],), ("wgmma_wait", inflight))
      rel, nxt = gk - inflight, gk + stages - 1
      # ping-pong: the warpgroup's previous k tile is in this tile (the last one's stage is released after the loop)
      pred = (kt >= inflight if pingpong else rel >= 0) if inflight else UOp.const(dtypes.bool, True)
      if TC_ARRIVE.value: pred = pred & (tid % 32).eq(0)  # the warp has waited for its batch: its first lane says so for it
      # (gk + stages - inflight) % stages, not rel % stages: never negative, so it folds to kt's where stages divide nk (one value
      # fewer held across the loop)
      arrive = UOp(Ops.BARRIER, dtypes.void, (mbar_at((gk + stages - inflight) % stages + stages, done), pred), empty_arrive)
      origin = _tile_origin(nxt // nk * grid + cta, nbx, nby) if grid else None
      stores = [arrive] if ws else [arrive, tile_copy(nxt % nk, nxt % stages, arrive, nxt < total, (mbar_at(nxt % stages + stages, arrive), (nxt // stages + 1) % 2),
                                  origin)]
      if pingpong and TC_TURN.value:  # every k tile of this one's has landed: the next warpgroup's full waits can't pass on them
        stores.append(UOp(Ops.BARRIER, dtypes.void, (mbar_at((warp + 1) % turn + 2 * stages, full), kt.eq(nk - 1)), ("mbar_arrive",)))
    updates = [UOp(Ops.AFTER, acc.dtype, (acc, kt)).store(v) for acc, v in zip(accs, cur)]
    # the linearizer emits ready nodes in the order END's sources reach them: copies first, then k step by k step all
    # fragments and then all WMMAs (independent accumulators back to back, not each one's chain over the k steps)
    if use_async: end = UOp(Ops.END, dtypes.void, (kt, *loads, *stores, *order, *updates))
    else:
      # the next tile: its global loads come first in the program (listed first below, so the linearizer emits them first)
      # and its shared stores after this tile's WMMAs, so the loads' latency hides behind them. The last iteration
      # reloads tile 0 (in bounds, never read) instead of branching. One barrier per tile: after every read of this
      # buffer (the WMMAs feed `updates`) and every store of the next.
      loads, stores = copy((kt + 1) % nk, (kt + 1) % 2, None, tuple(updates))
      end = UOp(Ops.END, dtypes.void, (kt, *loads, *order, UOp(Ops.BARRIER, dtypes.void, (*loads, *stores, *updates),
                                                                   bar_arg(0, 0) if tc.smem_operands else None)))
  # smem operands: every batch is done before the accumulators are read
  if ws: end = UOp(Ops.BARRIER, dtypes.void, (end,), ("wgmma_wait", 0))  # no block barrier: the copying thread may still run
  elif tc.smem_operands: end = UOp(Ops.BARRIER, dtypes.void, (end,), bar_arg(-1 if tmaps else 0, 0))
  if pingpong:
    assert tloop is not None
    # what depends on the warpgroup after the loop is computed after it (warp_after): held across it, ptxas 13.0 serialized the
    # wgmmas of a batch left in flight (C7514), as it does for the lane's offsets below
    warp_after = UOp(Ops.AFTER, warp.dtype, (warp, end))
    seq = tloop * turn + warp_after
    # the next warpgroup's turn may begin (its tile's k tiles come next in every stage). Turn barriers, not named ones: a bar.sync
    # before the loop and a bar.arrive after it made ptxas 13.0 serialize the wgmmas
    if not TC_TURN.value:
      end = UOp(Ops.BARRIER, dtypes.void, (mbar_at((warp_after + 1) % turn + 2 * stages, end), UOp.const(dtypes.bool, True)), ("mbar_arrive",))
    if inflight:  # the last k tile's stage, left in flight by the loop
      end = UOp(Ops.BARRIER, dtypes.void, (mbar_at((seq * nk + nk - 1) % stages + stages, end), UOp.const(dtypes.bool, True)), empty_arrive)
    by, bx = _tile_origin(seq * grid + cta, nbx, nby)
    m0, n0 = by.cast(idt) * cfg.bm, bx.cast(idt) * cfg.bn

  # the epilogue: the AST's store, once per accumulator element
  if tc.smem_operands:
    # the lane's offsets computed after the loop: hoisted above it they would hold registers across it (ptxas then
    # serializes the wgmma pipeline: C7514)
    # in the global index dtype, so each term keeps its coefficient (pairs of columns become one 4-byte store: vectorize.PAIRS)
    lane_after = UOp(Ops.AFTER, lane.dtype, (lane, end)).cast(idt)
    c_rows, c_cols = [[_bits_uop(f, lane_after, lanes) for f in _fit_bits(tc.c_layout, which)] for which in (0, 1)]
  else:
    c_fit = list(zip(fit_layout(tc.c_layout, 0, split), fit_layout(tc.c_layout, 1, split)))
    if tc.fma:  # as above: the 64 accumulators need every register the loop can spare
      lane_after, warp = UOp(Ops.AFTER, lane.dtype, (lane, end)), UOp(Ops.AFTER, warp.dtype, (warp, end))
      g, t, wm, wn = lane_after // (1 << split), lane_after % (1 << split), warp // cfg.warps_n, warp % cfg.warps_n
    c_rows, c_cols = [affine_uop(fr, g, t) for fr, _ in c_fit], [affine_uop(fc, g, t) for _, fc in c_fit]
  stores = []
  for x, y in itertools.product(range(wtm), range(wtn)):
    final = UOp(Ops.AFTER, accs[x * wtn + y].dtype, (accs[x * wtn + y], end)).load()
    row0 = m0 + (wm * (cfg.bm // cfg.warps_m) + x * tm).cast(idt)
    col0 = n0 + (wn * (cfg.bn // cfg.warps_n) + y * tn).cast(idt)
    elems = sorted(range(len(c_rows)), key=lambda e: tc.c_layout[0][e]) if TC_STORE_ORDER.value else range(len(c_rows))
    for e, fr, fc in ((e, c_rows[e], c_cols[e]) for e in elems):
      val = UOp(Ops.GEP, tc.dtype_out, (final,), (e,)).cast(m.reduce.dtype)
      # the loops' values in the AST's index dtype, so the store's index math keeps its width
      subst = {m.reduce: val, m.i: (row0 + fr.cast(idt)).cast(m.i.dtype),
               m.j: (col0 + fc.cast(idt)).cast(m.j.dtype), **{r: v.cast(r.dtype) for r, v in batch_vals.items()}}
      stores.append(m.store.substitute(subst))
  if tloop is not None: stores = [UOp(Ops.END, dtypes.void, (tloop, *stores))]  # the epilogue is the tile loop's last step
  if ws:  # the copy loop: one thread of the last warpgroup copies every k tile of the block, stages-1 ahead of the compute
    assert bar is not None
    cp_loop = UOp(Ops.RANGE, dtypes.int32, (copier.where(_c(total), _c(0)), bar), (-2, "loop"))
    origin = _tile_origin(cp_loop // nk * grid + cta, nbx, nby) if grid else None
    copy_one = tile_copy(cp_loop % nk, cp_loop % stages, cp_loop, UOp.const(dtypes.bool, True),
                         (mbar_at(cp_loop % stages + stages, cp_loop), (cp_loop // stages + 1) % 2), origin, elect=False)
    stores.append(UOp(Ops.END, dtypes.void, (cp_loop, copy_one)))
  # TC_CLUSTER: no block exits while the other may still copy into its shared memory or arrive at its barriers
  if cluster > 1: stores = [UOp(Ops.BARRIER, dtypes.void, tuple(stores), ("cluster_sync",))]
  sink = UOp(Ops.SINK, dtypes.void, tuple(stores))
  global_size = (grid, 1, 1) if grid else (N // cfg.bn, M // cfg.bm, nbatch)
  return sink, global_size, (32, groups * lanes // 32 + 1, 1) if ws else (lanes, cfg.warps, 1)
