"""AMD tensor cores as data: RDNA3/4 WMMA (wave32) and CDNA3/4 MFMA (wave64), with each lane's fragment layout.

A TensorCore's `a_layout[lane][i] = (row, k)` is the element of A that lane holds in the i-th element of its operand
vector, `b_layout[lane][i] = (k, col)`, and `c_layout[lane][i] = (row, col)` for C and D. The PYTHON device emulates an
instruction from exactly these tables (`PYTHON::gfx1100`, `PYTHON::gfx950`), and core's lowering builds fragments from
them (they are affine in lane // 16 and lane % 16).

Layouts, from AMD's documentation of the instructions (RDNA3 ISA "Wave Matrix Multiply Accumulate", GPUOpen's "How to
accelerate AI applications on RDNA 3 using WMMA", and the CDNA3 ISA / AMD Matrix Instruction Calculator):
- v_wmma_f32_16x16x16_{f16,bf16} (wave32): lane l holds row l % 16 of A (all 16 k) and column l % 16 of B (all 16 k);
  lanes 16..31 repeat lanes 0..15. D/C: element i of lane l is (row 2*i + l // 16, col l % 16).
- RDNA4 (gfx12) v_wmma_f32_16x16x16_{f16,bf16} (wave32, RDNA4 ISA "Matrix layouts"): no repeated lanes; lane l holds A's
  row l % 16 at k = 4*(l // 16) + i for i < 4 and k = 8 + 4*(l // 16) + i - 4 for i >= 4, B's column l % 16 at the same k;
  D/C: element i of lane l is (row 8*(l // 16) + i, col l % 16). Its 8-bit operands (iu8, fp8) hold k = 8*(l // 16) + i.
- f16 accumulators: RDNA3's v_wmma_f16_16x16x16_f16 has the f32 one's C/D layout, each value in the low half of one of 8
  registers (opsel 0; the renderers widen C to 16 halves and take D's even ones); RDNA4's packs its 8 into 4 registers.
  They serve matmuls that accumulate in f16 (matmul(dtype=half)), and are picked first there.
- v_mfma_i32_16x16x32_i8 and v_mfma_i32_32x32x16_i8 (gfx942, gfx950): the fp8 shapes' layouts with signed bytes, int32
  accumulators. gfx950's wider v_mfma_i32_16x16x64_i8 / 32x32x32_i8 (16 bytes per lane) are not here: no layout source
  for CDNA4 was at hand to check them against.
- RDNA4's v_wmma_f32_16x16x16_{fp8_fp8,bf8_bf8}: OCP fp8, the iu8 layout, 8 bytes per lane as 2 x i32.
- v_mfma_f32_16x16x16{f16,bf16_1k} (wave64): lane l holds A's row l % 16 at k = 4*(l // 16) + i (i < 4), B's
  column l % 16 at the same k; D/C: element i of lane l is (row 4*(l // 16) + i, col l % 16).
- gfx950's v_mfma_f32_16x16x32_{f16,bf16} (wave64): the same with 8 elements per lane, k = 8*(l // 16) + i; same D/C.
  Listed first for gfx950, so matmuls whose K tiles by 32 use it; the x16 ones serve the rest.
- v_wmma_i32_16x16x16_iu8 (RDNA3, and RDNA4's `_gfx12` one): the f16 layouts with int8 elements, packed 4 per int32 in
  the operand registers (4 x i32 on RDNA3, 2 x i32 on RDNA4); both operands signed, no clamp, int32 accumulators (wrap).
- v_mfma_f32_32x32x8{f16,bf16_1k} (CDNA3/4) and gfx950's v_mfma_f32_32x32x16_{f16,bf16} (wave64): lane l holds A's row
  l % 32 at k = n*(l // 32) + i (n = 4 or 8 elements), B's column l % 32 likewise; D/C: 16 elements per lane, element i
  of lane l is (row 8*(i // 4) + 4*(l // 32) + i % 4, col l % 32). Listed after the 16x16 ones (picked by Opt(TC, ...)).
- v_mfma_f32_16x16x32_{fp8_fp8,bf8_bf8} and v_mfma_f32_32x32x16_{fp8_fp8,bf8_bf8} (gfx950 here): the 16x16x32 and 32x32x16
  layouts, 8 fp8 bytes per lane in one i64 (fp8 = e4m3, bf8 = e5m2). gfx942 has the same instructions, but CDNA3 reads
  their bytes as the FNUZ formats (e4m3fnuz/e5m2fnuz: bias 8/16, NaN 0x80, no -0, no inf; AMD's CDNA3 ISA guide and LLVM's
  AMDGPUUsage say so), not the OCP e4m3fn/e5m2 of dtypes.fp8e4m3/fp8e5m2: an OCP byte read as FNUZ is half its value, -0
  becomes NaN. gfx942 offers the e4m3 ones with `fp8_fnuz` set: the AMD renderers rewrite their operands (fnuz.py: -0 and
  NaN remapped, C scaled by 1/4 and D by 4, exact); gfx950 (CDNA4) reads OCP.
Builtin operand and result types were checked against clang 22 (`clang -x hip -emit-llvm`), so the IR types in `extra`
are the intrinsics' own. Every RDNA3/RDNA4/CDNA3 A, B and D table here was compared element by element with AMD's Matrix
Instruction Calculator (github.com/ROCm/amd_matrix_instruction_calculator, `-A/-B/-D --matrix-layout`): all agree (it
has no CDNA4: gfx950's own shapes follow the CDNA3 pattern and are unchecked). Not here: bf16 accumulators, mixed
fp8 x bf8 (one dtype_in per TensorCore), gfx950's f8f6f4 (its scale operands don't fit the lowering).
"""
from __future__ import annotations

import dataclasses
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


def _layout32(n: int, fn: Callable[[int, int, int], tuple[int, int]]) -> Layout:
  """The 32x32 MFMA shapes (wave64), n elements per lane; fn(lane % 32, lane // 32, i) -> (row, col)."""
  return tuple(tuple(fn(lane % 32, lane // 32, i) for i in range(n)) for lane in range(64))


# ---- RDNA3 WMMA, wave32
A_WMMA = _layout(32, 16, lambda r, h, i: (r, i))
B_WMMA = _layout(32, 16, lambda c, h, i: (i, c))
C_WMMA_F32 = _layout(32, 8, lambda c, h, i: (2 * i + h, c))

# ---- RDNA4 WMMA, wave32: 8-bit operands (iu8, fp8) hold k = 8h..8h+7; 16-bit ones k = 4h..4h+3 and 8+4h..8+4h+3
A_WMMA12 = _layout(32, 8, lambda r, h, i: (r, 8 * h + i))
B_WMMA12 = _layout(32, 8, lambda c, h, i: (8 * h + i, c))
A_WMMA12_16 = _layout(32, 8, lambda r, h, i: (r, 8 * (i // 4) + 4 * h + i % 4))
B_WMMA12_16 = _layout(32, 8, lambda c, h, i: (8 * (i // 4) + 4 * h + i % 4, c))
C_WMMA12_F32 = _layout(32, 8, lambda c, h, i: (8 * h + i, c))

# ---- CDNA3/4 MFMA 16x16x16, wave64
A_MFMA16 = _layout(64, 4, lambda r, q, i: (r, 4 * q + i))
B_MFMA16 = _layout(64, 4, lambda c, q, i: (4 * q + i, c))
C_MFMA16_F32 = _layout(64, 4, lambda c, q, i: (4 * q + i, c))

A_MFMA32 = _layout(64, 8, lambda r, q, i: (r, 8 * q + i))
B_MFMA32 = _layout(64, 8, lambda c, q, i: (8 * q + i, c))

# ---- CDNA3/4 MFMA 32x32, wave64 (lane l: row/column l % 32, half l // 32)
A_MFMA32X8 = _layout32(4, lambda r, h, i: (r, 4 * h + i))
B_MFMA32X8 = _layout32(4, lambda c, h, i: (4 * h + i, c))
A_MFMA32X16 = _layout32(8, lambda r, h, i: (r, 8 * h + i))
B_MFMA32X16 = _layout32(8, lambda c, h, i: (8 * h + i, c))
C_MFMA32_F32 = _layout32(16, lambda c, h, i: (8 * (i // 4) + 4 * h + i % 4, c))

_SHORT = {dtypes.float16: "f16", dtypes.bfloat16: "bf16", dtypes.int8: "iu8", dtypes.fp8e4m3: "fp8", dtypes.fp8e5m2: "bf8"}


def _tc(dims: tuple[int, int, int], dtype_in: DType, dtype_out: DType, a: Layout, b: Layout, c: Layout, name: str, builtin: str,
        intrinsic: str, pack: str = "", opsel: bool = False) -> TensorCore:
  """`builtin` is clang's (HIP renderer), `intrinsic` LLVM's (LLVM renderer; `ir_in` is its A/B operand type, from
  `clang -emit-llvm` of the builtin). `pack`: the builtin takes the operand packed into this vector of ints (int8/fp8 bytes,
  4 per int32): HIP bitcasts the fragment to it. `opsel`: C/D are 16 halves of which the even ones (the low half of each
  register) hold the c_layout's 8 values; the renderers widen C and take D's even elements."""
  n = len(a[0])
  ir_in = {"int4": "<4 x i32>", "int2": "<2 x i32>", "long": "i64"}.get(pack) or \
    f"<{n} x {'half' if dtype_in == dtypes.float16 else 'bfloat' if intrinsic.endswith('.bf16') else 'i16'}>"  # bf16 before gfx950: i16
  return TensorCore(dims=dims, dtype_in=dtype_in, dtype_out=dtype_out, threads=len(a), a_layout=a, b_layout=b, c_layout=c, name=name,
                    tile_configs=TILE_CONFIGS, tile_order=TILE_ORDER, extra={"builtin": builtin, "intrinsic": intrinsic, "pack": pack, "ir_in": ir_in,
                                                                                    "opsel": opsel})


def _wmma(dtype_in: DType, dtype_out: DType = dtypes.float32) -> TensorCore:
  t = _SHORT[dtype_in]
  if dtype_out == dtypes.float16:  # f16 accumulators: the 8 values of a lane sit in the low halves of 8 registers (opsel 0)
    return _tc((16, 16, 16), dtype_in, dtype_out, A_WMMA, B_WMMA, C_WMMA_F32, "wmma_f16_16x16x16_f16", "__builtin_amdgcn_wmma_f16_16x16x16_f16_w32",
               "llvm.amdgcn.wmma.f16.16x16x16.f16.v16f16.v16f16", opsel=True)
  if dtype_in == dtypes.int8:  # v_wmma_i32_16x16x16_iu8: 16 bytes of a row/column per lane as 4 x i32, signed (iu8 with sign bits set)
    return _tc((16, 16, 16), dtype_in, dtypes.int32, A_WMMA, B_WMMA, C_WMMA_F32, "wmma_i32_16x16x16_iu8", "__builtin_amdgcn_wmma_i32_16x16x16_iu8_w32",
               "llvm.amdgcn.wmma.i32.16x16x16.iu8.v8i32.v4i32", pack="int4")
  return _tc((16, 16, 16), dtype_in, dtypes.float32, A_WMMA, B_WMMA, C_WMMA_F32, f"wmma_f32_16x16x16_{t}", f"__builtin_amdgcn_wmma_f32_16x16x16_{t}_w32",
             f"llvm.amdgcn.wmma.f32.16x16x16.{t}.v8f32.v16{'f16' if t == 'f16' else 'i16'}")


def _wmma12(dtype_in: DType, dtype_out: DType = dtypes.float32) -> TensorCore:
  t = _SHORT[dtype_in]
  if dtype_in == dtypes.int8:  # gfx12: 8 bytes per lane as 2 x i32
    return _tc((16, 16, 16), dtype_in, dtypes.int32, A_WMMA12, B_WMMA12, C_WMMA12_F32, "wmma12_i32_16x16x16_iu8",
               "__builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12", "llvm.amdgcn.wmma.i32.16x16x16.iu8.v8i32.v2i32", pack="int2")
  if dtype_in in (dtypes.fp8e4m3, dtypes.fp8e5m2):  # OCP fp8/bf8, 8 bytes per lane as 2 x i32
    return _tc((16, 16, 16), dtype_in, dtypes.float32, A_WMMA12, B_WMMA12, C_WMMA12_F32, f"wmma12_f32_16x16x16_{t}_{t}",
               f"__builtin_amdgcn_wmma_f32_16x16x16_{t}_{t}_w32_gfx12", f"llvm.amdgcn.wmma.f32.16x16x16.{t}.{t}.v8f32.v2i32", pack="int2")
  if dtype_out == dtypes.float16:  # f16 accumulators, 8 per lane packed in 4 registers: a plain half8
    return _tc((16, 16, 16), dtype_in, dtype_out, A_WMMA12_16, B_WMMA12_16, C_WMMA12_F32, "wmma12_f16_16x16x16_f16",
               "__builtin_amdgcn_wmma_f16_16x16x16_f16_w32_gfx12", "llvm.amdgcn.wmma.f16.16x16x16.f16.v8f16.v8f16")
  return _tc((16, 16, 16), dtype_in, dtypes.float32, A_WMMA12_16, B_WMMA12_16, C_WMMA12_F32, f"wmma12_f32_16x16x16_{t}",
             f"__builtin_amdgcn_wmma_f32_16x16x16_{t}_w32_gfx12", f"llvm.amdgcn.wmma.f32.16x16x16.{t}.v8f32.v8{'f16' if t == 'f16' else 'i16'}")


def _mfma(dtype_in: DType) -> TensorCore:
  suffix = "f16" if dtype_in == dtypes.float16 else "bf16_1k"
  return _tc((16, 16, 16), dtype_in, dtypes.float32, A_MFMA16, B_MFMA16, C_MFMA16_F32, f"mfma_f32_16x16x16_{_SHORT[dtype_in]}",
             f"__builtin_amdgcn_mfma_f32_16x16x16{suffix}", f"llvm.amdgcn.mfma.f32.16x16x16{suffix.replace('_', '.')}")


def _mfma_32x32x8(dtype_in: DType) -> TensorCore:
  suffix = "f16" if dtype_in == dtypes.float16 else "bf16_1k"
  return _tc((32, 32, 8), dtype_in, dtypes.float32, A_MFMA32X8, B_MFMA32X8, C_MFMA32_F32, f"mfma_f32_32x32x8_{_SHORT[dtype_in]}",
             f"__builtin_amdgcn_mfma_f32_32x32x8{suffix}", f"llvm.amdgcn.mfma.f32.32x32x8{suffix.replace('_', '.')}")


def _mfma_k32(dtype_in: DType) -> TensorCore:
  t = _SHORT[dtype_in]
  return _tc((16, 16, 32), dtype_in, dtypes.float32, A_MFMA32, B_MFMA32, C_MFMA16_F32, f"mfma_f32_16x16x32_{t}", f"__builtin_amdgcn_mfma_f32_16x16x32_{t}",
             f"llvm.amdgcn.mfma.f32.16x16x32.{t}")


def _mfma_32x32x16(dtype_in: DType) -> TensorCore:
  t = _SHORT[dtype_in]
  return _tc((32, 32, 16), dtype_in, dtypes.float32, A_MFMA32X16, B_MFMA32X16, C_MFMA32_F32, f"mfma_f32_32x32x16_{t}",
             f"__builtin_amdgcn_mfma_f32_32x32x16_{t}", f"llvm.amdgcn.mfma.f32.32x32x16.{t}")


def _mfma_i8(big: bool) -> TensorCore:
  # v_mfma_i32_{16x16x32,32x32x16}_i8 (gfx940+): 8 signed bytes per lane as one i64, the fp8 shapes' layouts, int32 accumulators
  shape, a, b, c = ("32x32x16", A_MFMA32X16, B_MFMA32X16, C_MFMA32_F32) if big else ("16x16x32", A_MFMA32, B_MFMA32, C_MFMA16_F32)
  return _tc((32, 32, 16) if big else (16, 16, 32), dtypes.int8, dtypes.int32, a, b, c, f"mfma_i32_{shape}_i8", f"__builtin_amdgcn_mfma_i32_{shape}_i8",
             f"llvm.amdgcn.mfma.i32.{shape}.i8", pack="long")


def _mfma_fp8(dtype_in: DType, big: bool, fnuz: bool = False) -> TensorCore:
  # 8 fp8 bytes per lane as one i64 (HIP bitcasts the uchar8 fragment, codegen/fp8.py keeps fp8 as bytes). gfx950 reads
  # OCP; gfx942 FNUZ, which fnuz.py bridges for e4m3 (see the module docstring)
  t = _SHORT[dtype_in]
  shape, a, b, c = ("32x32x16", A_MFMA32X16, B_MFMA32X16, C_MFMA32_F32) if big else ("16x16x32", A_MFMA32, B_MFMA32, C_MFMA16_F32)
  dims = (32, 32, 16) if big else (16, 16, 32)
  tc = _tc(dims, dtype_in, dtypes.float32, a, b, c, f"mfma_f32_{shape}_{t}_{t}", f"__builtin_amdgcn_mfma_f32_{shape}_{t}_{t}",
           f"llvm.amdgcn.mfma.f32.{shape}.{t}.{t}", pack="long")
  return dataclasses.replace(tc, fp8_fnuz=True) if fnuz else tc


def _rdna3() -> list[TensorCore]:
  return [_wmma(dtypes.float16), _wmma(dtypes.bfloat16), _wmma(dtypes.int8), _wmma(dtypes.float16, dtypes.float16)]
def _rdna4() -> list[TensorCore]:
  return [_wmma12(dtypes.float16), _wmma12(dtypes.bfloat16), _wmma12(dtypes.int8), _wmma12(dtypes.float16, dtypes.float16),
          _wmma12(dtypes.fp8e4m3), _wmma12(dtypes.fp8e5m2)]
def _cdna_common() -> list[TensorCore]:
  return [_mfma(dtypes.float16), _mfma(dtypes.bfloat16), _mfma_32x32x8(dtypes.float16), _mfma_32x32x8(dtypes.bfloat16), _mfma_i8(False),
          _mfma_i8(True)]
def _cdna3() -> list[TensorCore]: return [*_cdna_common(), _mfma_fp8(dtypes.fp8e4m3, False, fnuz=True), _mfma_fp8(dtypes.fp8e4m3, True, fnuz=True)]
def _cdna4() -> list[TensorCore]:
  fp8 = [_mfma_fp8(dt, big) for big in (False, True) for dt in (dtypes.fp8e4m3, dtypes.fp8e5m2)]
  return [_mfma_k32(dtypes.float16), _mfma_k32(dtypes.bfloat16), *_cdna_common(), _mfma_32x32x16(dtypes.float16), _mfma_32x32x16(dtypes.bfloat16),
          *fp8]


# fnmatch pattern -> specs; the plugin registers these through register_tensor_cores
SPECS: dict[str, Callable[[], list[TensorCore]]] = {"gfx11[0-9][0-9]": _rdna3, "gfx12[0-9][0-9]": _rdna4, "gfx94[0-9]": _cdna3, "gfx950": _cdna4}


def tensor_cores_for(arch: str) -> list[TensorCore]:
  return [tc for pattern, make in SPECS.items() if fnmatch.fnmatchcase(arch, pattern) for tc in make()]
