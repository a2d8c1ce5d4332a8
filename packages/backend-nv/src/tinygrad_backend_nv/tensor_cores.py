"""NVIDIA tensor cores (warp-level `mma.sync`) as data: shapes, dtypes and each lane's fragment layout.

The layouts are the fragment figures of the PTX ISA ("Matrix fragments for mma.m16n8k16" etc.), written as formulas
of the lane id: groupID = lane >> 2, threadID_in_group = lane % 4. A TensorCore's `a_layout[lane][i] = (row, k)` is
the element of A that lane holds in its i-th element register, `b_layout[lane][i] = (k, col)`, and
`c_layout[lane][i] = (row, col)` for C and D. The PYTHON device emulates an instruction from exactly these tables.
"""
from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable
from dataclasses import replace

from tinygrad.device.plugin import DType, TensorCore, TileConfig, dtypes, fma_tensor_core, tc_opt_in

from tinygrad_backend_nv import wgmma

Layout = tuple[tuple[tuple[int, int], ...], ...]
WARP = 32  # mma.sync is one warp's instruction: its 32 lanes hold the fragments

# How core's tensor-core lowering tiles a matmul here. Indexed by Opt(TC, _, amount): append only (BEAM caches name them).
# `rate`: fp16 8192^3 on the H200 (CUDA C renderer), the config's TFLOP/s over the fastest's (2026-12-02, .probe-style sweep of
# every config, bench/README.md): with the renderer's compute_units it lets core's heuristic pick by modeled waves
# (codegen/tensor_core.py modeled_tile_cost); 16x8x8 (sm_75/tf32 only) was not measured and takes its neighbour's rate.
TILE_CONFIGS: tuple[TileConfig, ...] = (
  TileConfig(128, 128, 32, 2, 2, rate=0.88),   # warp tiles 64x64, 2 blocks per SM: the fastest within 48 KB of shared memory
  TileConfig(128, 128, 32, 2, 4, rate=0.74),
  TileConfig(128, 256, 16, 2, 4, rate=0.61),
  TileConfig(64, 64, 32, 2, 2, rate=0.67),
  TileConfig(32, 32, 32, 2, 2, rate=0.31),
  TileConfig(32, 16, 16, 2, 1, rate=0.12),
  TileConfig(16, 8, 16, 1, 1, rate=0.045),
  TileConfig(16, 8, 8, 1, 1, rate=0.045),
  TileConfig(16, 8, 32, 1, 1, rate=0.058),
  TileConfig(128, 256, 32, 2, 4, rate=0.89),   # 8 warps of 64x64 (2 stages in 48 KB, more where the renderer has more shared memory)
  TileConfig(256, 128, 32, 4, 2, rate=0.87),
  # the big tiles below need more than 48 KB of shared memory (renderer.shared_max: CUDA's dynamic shared memory)
  TileConfig(128, 256, 64, 2, 4, 3, rate=0.98),  # 8 warps of 64x64, 144 KB
  TileConfig(256, 128, 64, 4, 2, 3, rate=1.0),
  TileConfig(128, 128, 64, 2, 2, 4, rate=0.82),
  TileConfig(128, 256, 32, 2, 4, 3, rate=0.84),
  TileConfig(256, 128, 32, 4, 2, 3, rate=0.86),
)
# the order ties are broken in (and, without compute units, the first that fits and leaves enough blocks wins): fastest measured
# first (H200, 8192 fp16/bf16, bench/README.md: 11 at 0.62x/0.58x of cuBLAS, 0 at 0.58x/0.54x; renderers without dynamic shared
# memory, like PTX's, or sm_86's 99 KB, don't fit 11 and take 0)
TILE_ORDER: tuple[int, ...] = (11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15)


def _layout(n: int, fn: Callable[[int, int, int], tuple[int, int]]) -> Layout:
  """n elements per lane; fn(groupID, threadID_in_group, i) -> (row, col)."""
  return tuple(tuple(fn(lane >> 2, lane % 4, i) for i in range(n)) for lane in range(WARP))


# ---- C/D of every m16n8 shape (f32 accumulators): c0,c1 in row g, c2,c3 in row g+8; columns 2t, 2t+1
C_M16N8 = _layout(4, lambda g, t, i: (g + 8 * (i >> 1), 2 * t + (i & 1)))

# ---- m16n8k16, .f16/.bf16 inputs: A is 16x16 in four .b32 (eight halves), B is 16x8 in two .b32 (four halves)
A_M16N8K16 = _layout(8, lambda g, t, i: (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)))
B_M16N8K16 = _layout(4, lambda g, t, i: (2 * t + (i & 1) + 8 * (i >> 1), g))

# ---- m16n8k8, .f16 inputs (sm_75's shape): A is 16x8 in two .b32, B is 8x8 in one .b32
A_M16N8K8_F16 = _layout(4, lambda g, t, i: (g + 8 * (i >> 1), 2 * t + (i & 1)))
B_M16N8K8_F16 = _layout(2, lambda g, t, i: (2 * t + i, g))

# ---- m16n8k8, .tf32 inputs: one element per .b32; A a0..a3 = (g,t) (g+8,t) (g,t+4) (g+8,t+4), B b0,b1 = (t,g) (t+4,g)
A_M16N8K8_TF32 = _layout(4, lambda g, t, i: (g + 8 * (i & 1), t + 4 * (i >> 1)))
B_M16N8K8_TF32 = _layout(2, lambda g, t, i: (t + 4 * i, g))

# ---- m16n8k32, .e4m3/.e5m2 inputs (sm_89+): four 8-bit elements per .b32; A is 16x32 (16 each), B is 32x8 (8 each)
A_M16N8K32_F8 = _layout(16, lambda g, t, i: (g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)))
B_M16N8K32_F8 = _layout(8, lambda g, t, i: (4 * t + (i & 3) + 16 * (i >> 2), g))

_PTX_TYPE = {dtypes.float16: "f16", dtypes.bfloat16: "bf16", dtypes.float32: "tf32", dtypes.fp8e4m3: "e4m3", dtypes.fp8e5m2: "e5m2"}


def _mma(dims: tuple[int, int, int], dtype_in: DType, a: Layout, b: Layout, async_copy: bool = False, **extra: object) -> TensorCore:
  """An mma.sync spec. Fragments of 16-bit operands load with ldmatrix (matrix_load); sm_80+ copies global -> shared
  with cp.async (async_copy), waited for at the next barrier."""
  m, n, k = dims
  tin = _PTX_TYPE[dtype_in]
  # tf32 operands live in f32 registers: the f32 dtype stands for them (the instruction reads the top 19 bits)
  instr = f"mma.sync.aligned.m{m}n{n}k{k}.row.col.f32.{tin}.{tin}.f32"
  regs = {"a": len(a[0]) * dtype_in.itemsize // 4, "b": len(b[0]) * dtype_in.itemsize // 4, "c": 4}
  return TensorCore(dims=dims, dtype_in=dtype_in, dtype_out=dtypes.float32, threads=WARP, a_layout=a, b_layout=b, c_layout=C_M16N8,
                    name=f"mma_m{m}n{n}k{k}_{tin}_f32", extra={"ptx": instr, "regs_b32": regs, **extra}, matrix_load=True,
                    async_copy=async_copy, tile_configs=TILE_CONFIGS, tile_order=TILE_ORDER)


# float32 matmuls without tf32: core's fma spec (an outer product of FFMAs per lane, A and B staged in shared memory).
# Indexed by Opt(TC, _, amount): append only. SIMT_GEMM=0: the register-blocked kernel of the heuristics instead.
# `rate`: 8192^3 on the H200 (CUDA C), TFLOP/s over the fastest's (64x128x16: 48.0, torch 50.9; 2026-12-02, bench/gpu_matmul.py with
# TC_CONFIG=n, bench/README.md); registers (bench/gpu_fp32_probe.py) 113-128, no spills. 5 and 8 unmeasured: their transposes' rates;
# 6 from 4096 (42.7 against 128x128x8's 44.0). With the renderer's compute_units core picks by modeled waves: 64x64 tiles
# for 512^3 (4.9 TFLOP/s, 128x128: 3.0) and 128x4096x4096 (9.5; 7.6)
FMA_TILE_CONFIGS: tuple[TileConfig, ...] = (
  TileConfig(128, 128, 8, 4, 2, rate=0.96),    # 256 threads of 8x8 (warp tiles 32x64), 128 registers
  TileConfig(128, 128, 16, 4, 2, rate=0.96),
  TileConfig(128, 256, 8, 4, 2, rate=0.87),    # 8x16 a thread
  TileConfig(256, 128, 8, 4, 2, rate=0.71),    # 16x8 a thread
  TileConfig(64, 128, 8, 2, 2, rate=0.95),     # 128 threads of 8x8
  TileConfig(128, 64, 8, 4, 1, rate=0.95),
  TileConfig(64, 64, 8, 2, 1, rate=0.93),      # 64 threads of 8x8
  TileConfig(64, 128, 16, 2, 2, rate=1.0),     # the fastest: 4096 45.9, 8192 48.0 TFLOP/s (0.90x / 0.94x torch)
  TileConfig(128, 64, 16, 4, 1, rate=1.0),
)
FMA_TILE_ORDER: tuple[int, ...] = (7, 0, 1, 4, 5, 8, 6, 2, 3)
SIMT_GEMM = tc_opt_in("SIMT_GEMM", 1)


def _fma() -> TensorCore: return fma_tensor_core(dtypes.float32, FMA_TILE_CONFIGS, tile_order=FMA_TILE_ORDER, opt_in=SIMT_GEMM)


def _sm75() -> list[TensorCore]: return [_mma((16, 8, 8), dtypes.float16, A_M16N8K8_F16, B_M16N8K8_F16, min_arch=75)]


def _sm80() -> list[TensorCore]:
  # sm_80+ copies global -> shared asynchronously (cp.async)
  return [_mma((16, 8, 16), dtypes.float16, A_M16N8K16, B_M16N8K16, min_arch=80, async_copy=True),
          _mma((16, 8, 16), dtypes.bfloat16, A_M16N8K16, B_M16N8K16, min_arch=80, async_copy=True),
          _mma((16, 8, 8), dtypes.float32, A_M16N8K8_TF32, B_M16N8K8_TF32, min_arch=80, operand="tf32", async_copy=True), _fma()]


def _sm89() -> list[TensorCore]:
  return [*_sm80(), _mma((16, 8, 32), dtypes.fp8e4m3, A_M16N8K32_F8, B_M16N8K32_F8, min_arch=89),
          _mma((16, 8, 32), dtypes.fp8e5m2, A_M16N8K32_F8, B_M16N8K32_F8, min_arch=89)]


_WGMMA = ("sm_90a also has warpgroup MMA (wgmma.mma_async m64nNk16, A and B read from shared memory through matrix "
          "descriptors): its specs come first there unless WGMMA=0 (wgmma.py); sm_90 without the 'a' can't run it.")

# 1 (default): on sm_90a, f16/bf16 matmuls try warpgroup MMA first. Measured on the H200 (2026-12-02, bench/gpu_wgmma.py, same run):
# 8192 fp16/bf16 573.5/590.5 TFLOP/s against mma.sync's 443.8/452.0, 4096 491.5/473.1 against 364.7/367.1, 512x8192x2048 fp16
# 281.5 against 221.0; every check against torch exact. WGMMA=0: the mma.sync specs only
WGMMA = tc_opt_in("WGMMA", 1)

# wgmma tilings (warps_m x warps_n count warpgroups of 128 threads): bk = 64 halves, one 128-byte swizzled row per
# k-major tile row; stages of cp.async copies in dynamic shared memory. Indexed by Opt(TC, _, amount): append only.
# `rate`: fp16 8192^3 on the H200, TFLOP/s over the default's (682.9 with warp-specialized TMA copies, TC_TMA=3; 2026-12-02 s10,
# `bench/gpu_wgmma.py --sweep`, results/h200/gpu_wgmma_sweep_20261202s10_tma_req3_tma3.json): core's modeled_tile_cost compares
# them across the three widths
WGMMA_TILE_CONFIGS: dict[int, tuple[TileConfig, ...]] = {
  256: (TileConfig(128, 256, 64, 2, 1, 4, rate=1.0), TileConfig(128, 256, 64, 2, 1, 3, rate=0.995)),
  # 128x128 in 3 stages (96 KB): two blocks an SM, one's epilogue under the other's main loop
  128: (TileConfig(128, 128, 64, 2, 1, 4, rate=0.933), TileConfig(64, 128, 64, 1, 1, 4, rate=0.650), TileConfig(256, 128, 64, 4, 1, 3, rate=0.926),
        TileConfig(128, 128, 64, 2, 1, 3, rate=0.906)),
  64: (TileConfig(64, 64, 64, 1, 1, 4, rate=0.480), TileConfig(128, 64, 64, 2, 1, 4, rate=0.616)),
}


def _wgmma(n: int, dtype_in: DType) -> TensorCore:
  tin = _PTX_TYPE[dtype_in]
  return TensorCore(dims=(64, n, 16), dtype_in=dtype_in, dtype_out=dtypes.float32, threads=128, c_layout=wgmma.accumulator_layout(n),
                    name=f"wgmma_m64n{n}k16_{tin}_f32", extra={"wgmma_n": n, "ptx_type": tin, "min_arch": 90}, async_copy=True,
                    smem_operands=True, smem_reader=wgmma.emulate_operand, tile_configs=WGMMA_TILE_CONFIGS[n], opt_in=WGMMA)


def _sm90() -> list[TensorCore]:
  return [replace(tc, extra={**tc.extra, "wgmma": _WGMMA}) for tc in _sm89()]


def _sm90a() -> list[TensorCore]:
  """The warpgroup specs (left out with WGMMA=0: opt_in), then sm_90's mma.sync set. tc_opts compares the tilings
  of all three widths by modeled waves (their rates), or without compute units takes the widest with enough blocks."""
  return [*(_wgmma(n, dt) for dt in (dtypes.float16, dtypes.bfloat16) for n in (256, 128, 64)), *_sm90()]


# fnmatch pattern -> specs; the plugin registers these through register_tensor_cores
SPECS: dict[str, Callable[[], list[TensorCore]]] = {"sm_75": _sm75, "sm_80": _sm80, "sm_86": _sm80, "sm_89": _sm89, "sm_90": _sm90,
                                                   "sm_90a": _sm90a}


@functools.cache
def tensor_cores_for(arch: str) -> tuple[TensorCore, ...]:
  """Built once per arch: the renderer hands out the same objects at every lookup (building sm_90a's warpgroup layouts took
  0.36 s, and a kernel's lowering looks them up about 20 times)."""
  return tuple(tc for pattern, make in SPECS.items() if fnmatch.fnmatchcase(arch, pattern) for tc in make())
