"""Base classes for turning a linearized program (a list of UOps) into source, and source into a binary."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import ContextVar, diskcache_get, diskcache_put
from tinygrad.uop.ops import UOp
from tinygrad.uop.rewrite import PatternMatcher
from tinygrad.workers import offload


class CompileError(RuntimeError):
  """A compiler rejected generated source. The message carries the source (numbered) and the compiler's words."""

  def __init__(self, compiler: str, src: str, message: str):
    numbered = "\n".join(f"{i + 1:4d} | {line}" for i, line in enumerate(src.splitlines()))
    super().__init__(f"{compiler} failed to compile a generated kernel:\n{message.strip()}\n--- source ---\n{numbered}")
    self.src, self.message = src, message


class UnsupportedDTypeError(TypeError):
  def __init__(self, renderer: str, dtype: DType, hint: str = ""):
    super().__init__(f"renderer {renderer} can't express dtype {dtype!r}" + (f": {hint}" if hint else ""))


class DTypeSet(frozenset[DType]):
  """The dtypes a renderer can express. Calling it returns itself, so tinygrad's `renderer.supported_dtypes()` reads it too."""
  def __call__(self) -> DTypeSet: return self


# bump when what a compiler emits changes in a way its cachekey doesn't capture (e.g. code model, ABI)
CACHE_VERSION = 1


class Compiler:
  """Source -> binary. `compile_cached` keeps binaries in the on-disk cache keyed by `cachekey` and source."""
  cachekey: str | None = None

  def compile(self, src: str) -> bytes: return src.encode()

  def compile_cached(self, src: str) -> bytes:
    if self.cachekey is None: return self.compile(src)
    table, key = f"{self.cachekey}_v{CACHE_VERSION}", hashlib.sha256(src.encode()).hexdigest()
    if (lib := diskcache_get(table, key)) is not None: return lib
    # COMPILE_WORKER=1: compiled in a worker process (tinygrad/workers.py)
    return diskcache_put(table, key, offload(self.compile, src))

  def disassemble(self, lib: bytes) -> str: return f"<{len(lib)} bytes>"


@dataclass(frozen=True)
class TileConfig:
  """How a tensor-core matmul is tiled: one block computes a bm x bn output tile with warps_m x warps_n groups of
  `TensorCore.threads` lanes, staging bk-deep tiles of A and B through shared memory (codegen/tensor_core.py)."""
  bm: int        # block tile rows (M)
  bn: int        # block tile columns (N)
  bk: int        # K per shared-memory tile
  warps_m: int   # lane groups (warps) along M
  warps_n: int   # lane groups along N
  stages: int = 0  # shared-memory pipeline depth with async copies (0: as many as fit, 2..4)
  rate: float = 0.0  # measured throughput on a large matmul relative to the backend's fastest config (0: not measured)

  @property
  def warps(self) -> int: return self.warps_m * self.warps_n


@dataclass(frozen=True)
class TensorCore:
  """One matrix-multiply-accumulate instruction: D(MxN) = A(MxK) @ B(KxN) + C, done by `threads` lanes together.

  The lane layouts are data, so the PYTHON device can emulate the instruction exactly:
  `a_layout[lane][i] = (row, k)` says which element of A lane `lane` holds in its i-th register,
  likewise `b_layout[lane][i] = (k, col)` and `c_layout[lane][i] = (row, col)` (C and D share it).
  What else the target offers to feed it, and how to tile a matmul with it, is typed data too: the generic lowering
  (codegen/tensor_core.py) reads only these fields; `extra` is the backend's own (its renderer reads it).
  """
  dims: tuple[int, int, int]  # M, N, K
  dtype_in: DType
  dtype_out: DType
  threads: int
  a_layout: tuple[tuple[tuple[int, int], ...], ...] = ()
  b_layout: tuple[tuple[tuple[int, int], ...], ...] = ()
  c_layout: tuple[tuple[tuple[int, int], ...], ...] = ()
  name: str = ""
  extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
  # a collective load of 8x8 matrices of 16-bit elements from shared memory, one row address per lane (a LOAD with arg
  # ("matrix", matrices, transposed)), where a fragment's layout is the one it delivers
  matrix_load: bool = False
  # global -> shared copies that bypass registers and complete by a later BARRIER (a STORE with arg "async")
  async_copy: bool = False
  # fp8 operands that reach the instruction as bytes (codegen/fp8.py) are read in the FNUZ flavour of dtype_in (bias one
  # higher, 0x80 the only NaN, no -0/inf: AMD CDNA3), not OCP's; the backend rewrites its operands to fit (the emulator reads them so)
  fp8_fnuz: bool = False
  # A and B are read from shared memory by the instruction itself (a warpgroup instruction fed by matrix descriptors):
  # no fragments, a_layout/b_layout stay empty, c_layout has one row per lane of `threads`. The WMMA's A and B sources are
  # INDEXes of each operand's first element in tiles of 128-byte rows whose 16-byte chunks are XOR-permuted by row % 8
  # (codegen/tensor_core.py), and its arg says how each operand lies: (mn_major, block stride bytes, 8-row group stride)
  smem_operands: bool = False
  # the PYTHON device's view of such an operand: fn(read(byte address) -> element, byte address, rows, k, mn_major,
  # block stride, group stride, itemsize) -> rows x k elements (the backend's definition of the instruction's addressing)
  smem_reader: Callable[..., list[list[Any]]] | None = field(default=None, compare=False, hash=False)
  # a setting that must be nonzero for the lowering to use this spec (new instructions start off until measured)
  opt_in: ContextVar | None = field(default=None, compare=False, hash=False)
  # the tilings a TC opt may name (Opt(TC, tensor core, index into tile_configs)): append only, BEAM caches name them
  tile_configs: tuple[TileConfig, ...] = ()
  tile_order: tuple[int, ...] = ()  # the order the heuristic tries tile_configs in (empty: as listed)
  # no instruction: each lane multiplies its A fragment by its B fragment as an outer product of scalar multiply-adds
  # (SIMT). The lowering emits the ALU ops itself (no WMMA), so every GPU renderer runs it, exactly in dtype_out
  fma: bool = False

  def __post_init__(self) -> None:
    if self.opt_in is not None: TC_OPT_INS.setdefault(self.opt_in.key, self.opt_in)  # (a setting not made by tc_opt_in: from now on)


# every TensorCore.opt_in setting, registered where it is defined (tc_opt_in): the compiled-runner cache key holds their values
# (codegen/tensor_core.tc_setting), and a key that grew when a spec was first met would miss the kernels compiled before it
TC_OPT_INS: dict[str, ContextVar] = {}


def tc_opt_in(key: str, default: int) -> ContextVar:
  """The ContextVar for a TensorCore's opt_in (a backend's new instruction that starts off, e.g. WGMMA), registered at once."""
  TC_OPT_INS[key] = var = ContextVar(key, default)
  return var


@dataclass(frozen=True)
class DotProduct:
  """A CPU vector instruction that adds to each of its `lanes` int32 lanes the sum of `group` products of an element of A
  (dtype_a) and one of B (dtype_b), lane j taking elements group*j .. group*j+group-1 of each: x86's vpdpbusd (unsigned by
  signed bytes, 4 a lane) and vpdpwssd (int16 pairs) of AVX-512 VNNI and AVX-VNNI. codegen/dot.py builds it from an int32 sum
  of such products (a quantized weight's block dot product with integer x); the renderer emits the instruction named `name`
  for it (a WMMA whose arg starts with that name)."""
  lanes: int
  name: str
  group: int = 4
  dtype_a: DType = dtypes.uint8
  dtype_b: DType = dtypes.int8


def fma_tensor_core(dtype: DType, tile_configs: tuple[TileConfig, ...], lanes: tuple[int, int] = (4, 8), per_lane: tuple[int, int] = (4, 4),
                    **kw: Any) -> TensorCore:
  """An outer product of scalar multiply-adds as a "tensor core" (fma=True): the lanes form a lanes[0] x lanes[1] grid
  (row group = lane // lanes[1]), each lane owns per_lane[0] neighbouring rows and per_lane[1] neighbouring columns of a
  (lanes[0]*per_lane[0]) x (lanes[1]*per_lane[1]) tile, one k per instruction. Its fragments are runs of neighbouring
  rows/columns, so they load from shared memory as vectors (A stored k-major, like B); a warp tile of 2x2 such
  instructions gives each lane the classic SGEMM's 8x8 block, rows g*4.. and 16+g*4.. (no bank conflicts)."""
  gm, gn = lanes
  rm, rn = per_lane
  a = tuple(tuple((rm * (lane // gn) + i, 0) for i in range(rm)) for lane in range(gm * gn))
  b = tuple(tuple((0, rn * (lane % gn) + i) for i in range(rn)) for lane in range(gm * gn))
  c = tuple(tuple((rm * (lane // gn) + i // rn, rn * (lane % gn) + i % rn) for i in range(rm * rn)) for lane in range(gm * gn))
  return TensorCore(dims=(gm * rm, gn * rn, 1), dtype_in=dtype, dtype_out=dtype, threads=gm * gn, a_layout=a, b_layout=b, c_layout=c,
                    name=f"fma_{gm * rm}x{gn * rn}_{dtype.name}", fma=True, tile_configs=tile_configs, **kw)


class Renderer:
  """Renders a linearized program for one device/arch. Subclasses set their capabilities and `render`."""
  device: str = ""
  name: str = ""
  arch: str = ""
  compiler: Compiler = Compiler()
  has_local: bool = False       # GPU-style: outer loops become thread indices (SPECIAL)
  runs_blocks: bool = False     # not GPU-style, but runs programs with thread indices, shared memory and barriers (the PYTHON
                                # interpreter): a hand-written kernel that needs blocks of threads gets them (codegen/custom.py)
  has_shared: bool = False
  shuffle_lanes: int = 0        # lanes of a warp that Ops.SHUFFLE exchanges values between (CUDA: 32); 0: no shuffles, grouped
                                # reductions combine through shared memory only (codegen/group.py)
  reg_vectors: bool = True      # DEFINE_REG of packed 16-bit vectors (tensor-core fragments carried across loop iterations)
  shared_max: int = 48 * 1024   # shared memory bytes one block may use (above 48 KB the device needs it as dynamic smem)
  compute_units: int = 0        # blocks that run side by side at full speed (GPU: its SMs/CUs; 0: unknown): tile choice by waves
  global_max: tuple[int, ...] | None = None
  local_max: tuple[int, ...] | None = None
  supports_float4: bool = False
  vector_dtypes: tuple[DType, ...] = (dtypes.float32,)  # with supports_float4: element types of the 16-byte accesses
  supports_images: bool = False  # renders buffers of dtype ImageDType (dtypes.imagef/imageh) as images
  threads: int = 1              # CPU threads a kernel may be split across (see codegen/threads.py)
  accumulators: int = 128       # CPU: float32 accumulators a register block may hold without spilling (codegen/heuristics.py)
  prefetch_ahead: int = 0       # CPU: bytes past a far-striding load's footprint to prefetch (codegen/prefetch.py); 0: none
  atomic_add: tuple[DType, ...] = ()  # element dtypes of the atomic adds into global memory it renders (UOp.atomic_add)
  grid_wait: bool = False       # kernels wait for the grids before them (CUDA sm_90+ graphs); a hand-written one may place it (uop.dsl.GRID_WAIT)
  tensor_cores: tuple[TensorCore, ...] = ()
  dot_products: tuple[DotProduct, ...] = ()  # CPU: byte dot-product instructions (codegen/dot.py), widest first
  # smem-operand tensor cores: a tile's A and B may come in as whole boxes copied by one thread through a tensor map (NVIDIA's
  # TMA), each stage completing on a shared-memory barrier (BARRIER args "mbar_init", "tile_copy", "mbar_wait": codegen/tensor_core.py)
  tile_copy: bool = False
  # rules this target needs before rendering (decompositions, dtype emulation); see codegen
  extra_matcher: PatternMatcher | None = None
  # dtypes it can express (a subclass's frozenset, or property returning one, becomes a DTypeSet: see __init_subclass__)
  supported_dtypes: DTypeSet = DTypeSet(dtypes.fields().values())

  def __init_subclass__(cls, **kwargs: Any) -> None:
    super().__init_subclass__(**kwargs)
    sd = cls.__dict__.get("supported_dtypes")
    if isinstance(sd, frozenset) and not isinstance(sd, DTypeSet): cls.supported_dtypes = DTypeSet(sd)
    elif isinstance(sd, property) and sd.fget is not None:
      get = sd.fget
      cls.supported_dtypes = property(lambda self: DTypeSet(get(self)))  # type: ignore[assignment]

  def render(self, name: str, uops: list[UOp]) -> str: raise NotImplementedError(f"{type(self).__name__}.render")

  def check_atomic_add(self, u: UOp) -> None:
    """Raise where this renderer has no atomic add (UOp.atomic_add) for the STORE's dtype and memory."""
    dt, ptr = u.src[1].dtype, u.src[0].dtype
    space = getattr(ptr, "addrspace", "global")
    if dt in self.atomic_add and space == "global": return
    raise NotImplementedError(f"{type(self).__name__} renders no atomic add of {dt!r} into {space} memory (it has them for "
                              f"{[d.name for d in self.atomic_add] or 'no dtype'} in global memory): add into a global buffer of one "
                              "of those dtypes, or write partial results and sum them with Tensor ops")

  def __repr__(self) -> str: return f"<{type(self).__name__} {self.device}:{self.name}:{self.arch}>"

  def params(self) -> dict[str, Any]: return {"device": self.device, "name": self.name, "arch": self.arch}
