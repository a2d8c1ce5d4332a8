"""AMD tensor cores as data: RDNA3 WMMA (wave32) and CDNA3/4 MFMA (wave64), with each lane's fragment layout.

A TensorCore's `a_layout[lane][i] = (row, k)` is the element of A that lane holds in the i-th element of its operand
vector, `b_layout[lane][i] = (k, col)`, and `c_layout[lane][i] = (row, col)` for C and D. The PYTHON device emulates an
instruction from exactly these tables (`PYTHON::gfx1100`, `PYTHON::gfx950`), and core's lowering builds fragments from
them (they are affine in lane // 16 and lane % 16).

Layouts, from AMD's documentation of the instructions (RDNA3 ISA "Wave Matrix Multiply Accumulate", GPUOpen's "How to
accelerate AI applications on RDNA 3 using WMMA", and the CDNA3 ISA / AMD Matrix Instruction Calculator):
- v_wmma_f32_16x16x16_{f16,bf16} (wave32): lane l holds row l % 16 of A (all 16 k) and column l % 16 of B (all 16 k);
  lanes 16..31 repeat lanes 0..15. D/C: element i of lane l is (row 2*i + l // 16, col l % 16).
- RDNA4 (gfx12) v_wmma_f32_16x16x16_{f16,bf16} (wave32, RDNA4 ISA "Matrix layouts"): no repeated lanes; lane l holds A's
  row l % 16 at k = 8*(l // 16) + i (i < 8), B's column l % 16 at the same k; D/C: element i of lane l is
  (row 8*(l // 16) + i, col l % 16).
- v_mfma_f32_16x16x16{f16,bf16_1k} (wave64): lane l holds A's row l % 16 at k = 4*(l // 16) + i (i < 4), B's
  column l % 16 at the same k; D/C: element i of lane l is (row 4*(l // 16) + i, col l % 16).
- gfx950's v_mfma_f32_16x16x32_{f16,bf16} (wave64): the same with 8 elements per lane, k = 8*(l // 16) + i; same D/C.
  Listed first for gfx950, so matmuls whose K tiles by 32 use it; the x16 ones serve the rest.
Not here yet: int8 WMMA and f16 accumulators, MFMA fp8 (gfx942+), and MFMA's 32x32 shapes.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Callable

from tinygrad.device.plugin import DType, TensorCore, TileConfig, dtypes

Layout = tuple[tuple[tuple[int, int], ...], ...]

# Indexed by Opt(TC, _, amount): append only (BEAM caches name them). None measured on hardware: sizes that keep four
# waves per workgroup busy on big matmuls, down to one 16x16 tile for small ones.
TILE_CONFIGS: tuple[TileConfig, ...] = (
  TileConfig(128, 128, 32, 2, 2),
  TileConfig(64, 64, 32, 2, 2),
  TileConfig(32, 32, 32, 2, 2),
  TileConfig(32, 32, 16, 1, 1),
  TileConfig(16, 16, 16, 1, 1),
)
TILE_ORDER: tuple[int, ...] = (0, 1, 2, 3, 4)


def _layout(lanes: int, n: int, fn: Callable[[int, int, int], tuple[int, int]]) -> Layout:
  """n elements per lane; fn(lane % 16, lane // 16, i) -> (row, col)."""
  return tuple(tuple(fn(lane % 16, lane // 16, i) for i in range(n)) for lane in range(lanes))


# ---- RDNA3 WMMA, wave32
A_WMMA = _layout(32, 16, lambda r, h, i: (r, i))
B_WMMA = _layout(32, 16, lambda c, h, i: (i, c))
C_WMMA_F32 = _layout(32, 8, lambda c, h, i: (2 * i + h, c))

# ---- RDNA4 WMMA, wave32
A_WMMA12 = _layout(32, 8, lambda r, h, i: (r, 8 * h + i))
B_WMMA12 = _layout(32, 8, lambda c, h, i: (8 * h + i, c))
C_WMMA12_F32 = _layout(32, 8, lambda c, h, i: (8 * h + i, c))

# ---- CDNA3/4 MFMA 16x16x16, wave64
A_MFMA16 = _layout(64, 4, lambda r, q, i: (r, 4 * q + i))
B_MFMA16 = _layout(64, 4, lambda c, q, i: (4 * q + i, c))
C_MFMA16_F32 = _layout(64, 4, lambda c, q, i: (4 * q + i, c))

A_MFMA32 = _layout(64, 8, lambda r, q, i: (r, 8 * q + i))
B_MFMA32 = _layout(64, 8, lambda c, q, i: (8 * q + i, c))

_SHORT = {dtypes.float16: "f16", dtypes.bfloat16: "bf16"}


def _wmma(dtype_in: DType) -> TensorCore:
  t = _SHORT[dtype_in]
  return TensorCore(dims=(16, 16, 16), dtype_in=dtype_in, dtype_out=dtypes.float32, threads=32, a_layout=A_WMMA, b_layout=B_WMMA,
                    c_layout=C_WMMA_F32, name=f"wmma_f32_16x16x16_{t}", tile_configs=TILE_CONFIGS, tile_order=TILE_ORDER,
                    extra={"builtin": f"__builtin_amdgcn_wmma_f32_16x16x16_{t}_w32", "intrinsic": f"llvm.amdgcn.wmma.f32.16x16x16.{t}"})


def _wmma12(dtype_in: DType) -> TensorCore:
  t = _SHORT[dtype_in]
  return TensorCore(dims=(16, 16, 16), dtype_in=dtype_in, dtype_out=dtypes.float32, threads=32, a_layout=A_WMMA12, b_layout=B_WMMA12,
                    c_layout=C_WMMA12_F32, name=f"wmma12_f32_16x16x16_{t}", tile_configs=TILE_CONFIGS, tile_order=TILE_ORDER,
                    extra={"builtin": f"__builtin_amdgcn_wmma_f32_16x16x16_{t}_w32_gfx12", "intrinsic": f"llvm.amdgcn.wmma.f32.16x16x16.{t}"})


def _mfma(dtype_in: DType) -> TensorCore:
  suffix = "f16" if dtype_in == dtypes.float16 else "bf16_1k"
  return TensorCore(dims=(16, 16, 16), dtype_in=dtype_in, dtype_out=dtypes.float32, threads=64, a_layout=A_MFMA16, b_layout=B_MFMA16,
                    c_layout=C_MFMA16_F32, name=f"mfma_f32_16x16x16_{_SHORT[dtype_in]}", tile_configs=TILE_CONFIGS, tile_order=TILE_ORDER,
                    extra={"builtin": f"__builtin_amdgcn_mfma_f32_16x16x16{suffix}", "intrinsic": f"llvm.amdgcn.mfma.f32.16x16x16{suffix.replace('_', '.')}"})


def _rdna3() -> list[TensorCore]: return [_wmma(dtypes.float16), _wmma(dtypes.bfloat16)]
def _mfma_k32(dtype_in: DType) -> TensorCore:
  t = _SHORT[dtype_in]
  return TensorCore(dims=(16, 16, 32), dtype_in=dtype_in, dtype_out=dtypes.float32, threads=64, a_layout=A_MFMA32, b_layout=B_MFMA32,
                    c_layout=C_MFMA16_F32, name=f"mfma_f32_16x16x32_{t}", tile_configs=TILE_CONFIGS, tile_order=TILE_ORDER,
                    extra={"builtin": f"__builtin_amdgcn_mfma_f32_16x16x32_{t}", "intrinsic": f"llvm.amdgcn.mfma.f32.16x16x32.{t}"})


def _rdna4() -> list[TensorCore]: return [_wmma12(dtypes.float16), _wmma12(dtypes.bfloat16)]
def _cdna3() -> list[TensorCore]: return [_mfma(dtypes.float16), _mfma(dtypes.bfloat16)]
def _cdna4() -> list[TensorCore]: return [_mfma_k32(dtypes.float16), _mfma_k32(dtypes.bfloat16), *_cdna3()]


# fnmatch pattern -> specs; the plugin registers these through register_tensor_cores
SPECS: dict[str, Callable[[], list[TensorCore]]] = {"gfx11[0-9][0-9]": _rdna3, "gfx12[0-9][0-9]": _rdna4, "gfx94[0-9]": _cdna3, "gfx950": _cdna4}


def tensor_cores_for(arch: str) -> list[TensorCore]:
  return [tc for pattern, make in SPECS.items() if fnmatch.fnmatchcase(arch, pattern) for tc in make()]
