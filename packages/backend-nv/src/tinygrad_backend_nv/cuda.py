"""The CUDA renderer: a linearized program as CUDA C, compiled by NVRTC into a cubin (compiler.NVRTCCompiler).

The source includes no header: NVRTC from the pip wheel ships none (cuda_fp16.h is not there), so half and bfloat16
are small structs of their own here (`half`, `bfloat16`) that convert through float with cvt instructions. Arithmetic
on them runs in float and rounds back once; for + - * / and sqrt that is correctly rounded (float has >= 2p+2 bits
for both), so results match tinygrad.uop.alu. Math follows alu too: accurate exp2f/log2f/sinf (not the __ intrinsics),
no FMA contraction (--fmad=false) except where the IR asks for MULACC.
"""
from __future__ import annotations

import re

from tinygrad.device.plugin import (
  GRID_WAIT,
  ContextVar,
  CStyleRenderer,
  DType,
  Ops,
  PtrDType,
  Target,
  TensorCore,
  UOp,
  dtypes,
  pm_fp8_as_bytes,
)

from tinygrad_backend_nv import timeline, wgmma
from tinygrad_backend_nv.compiler import DEFAULT_ARCH, LOCAL_SIZE, SM_COUNT, NVRTCCompiler, arch_number
from tinygrad_backend_nv.dependents import LAST_WORD, TRIGGER, late_trigger, predicated_trigger
from tinygrad_backend_nv.streams import (
  PARTIALS_SMEM_MAX,
  STREAM_BYTES,
  STREAM_EARLY,
  addressed_at_start,
  ahead_loads,
  ahead_steps,
  indexed_buffer,
  stream_load_helper,
  streamed_loads,
)

_HALF = """\
struct half {  // IEEE binary16, converted with cvt (cuda_fp16.h is not needed)
  unsigned short bits;
  half() = default;
  __device__ half(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f)); }
  __device__ operator float() const { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits)); return f; }
};
static __device__ __forceinline__ half tg_d2h(double d) { half h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(d)); return h; }"""

_BF16 = """\
struct bfloat16 {  // the top half of a float; float -> bf16 rounds to nearest even, NaN stays NaN
  unsigned short bits;
  bfloat16() = default;
  __device__ bfloat16(float f) {
#if __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(f));
#else
    unsigned int u = __float_as_uint(f);
    bits = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)((u >> 16) | 0x40u) : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
  }
  __device__ operator float() const { return __uint_as_float(((unsigned int)bits) << 16); }
};"""

_BITCAST = """\
template <typename T, typename F> static __device__ __forceinline__ T tg_bitcast(F x) {
  static_assert(sizeof(T) == sizeof(F), "bitcast between types of different sizes");
  union { F f; T t; } u; u.f = x; return u.t;  // type punning through a union: NVRTC has no __builtin_bit_cast
}"""

_CP_ASYNC = """\
static __device__ __forceinline__ void tg_cp_async{n}(const void *dst, const void *src) {{  // global -> shared, async
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.{cache}.shared.global [%0], [%1], {n};" :: "r"(d), "l"(src) : "memory");
}}"""

# shared memory one block may opt into (cudaFuncAttributeMaxDynamicSharedMemorySize's limit), per arch
_SHARED_MAX = {75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024}
STATIC_SHARED_MAX = 48 * 1024  # more than this per block must be dynamic shared memory, which the launch has to ask for
DYNAMIC_SMEM_SYMBOL = "tg_dynamic_smem"  # a kernel's dynamic shared bytes, as a global in its module (runtime.py reads it)
# sm_90+: every kernel first waits for the grids it depends on (griddepcontrol.wait; a no-op in a plain launch), then lets the
# next one be scheduled. A CUDA graph may then start a kernel while the one before it drains (a programmatic edge, graph.py):
# the global says so to the runtime
GRID_WAIT_SYMBOL = "tg_waits_for_grid"
EARLY_PARAMS_SYMBOL = "tg_early_params"  # a bit per buffer parameter the kernel reads before its wait (graph.py: a plain edge if the kernel before takes one)
_WAIT = '  asm volatile("griddepcontrol.wait;" ::: "memory");\n'
_TRIGGER_LINE = f"  {TRIGGER}\n"  # the next kernel may launch (dependents.py: here, or where LAUNCH_LATE puts it)


def _grid_wait(values: list[tuple[str, DType]], trigger: bool = True) -> str:
  """The grid wait and, unless LAUNCH_LATE moved it (dependents.py), the trigger. After loads issued before it (STREAM_EARLY,
  codegen/early_loads.py: `values`, their registers) the wait is predicated on the values they read: ptxas schedules a plain
  griddepcontrol.wait (SASS ACQBULK, no operands) ahead of loads still waiting for their address, so that they issue after it
  (seen in the SASS of session 28's EARLY_LOADS kernels); a wait that depends on what they read can't move above them. Both
  predicates wait."""
  if not values: wait = _WAIT
  else:
    word = " | ".join(_value_word(name, dt) for name, dt in values)
    wait = ('  asm volatile("{\\n .reg .pred p;\\n setp.ne.u32 p, %0, 0;\\n @p griddepcontrol.wait;\\n @!p griddepcontrol.wait;\\n}" '
            f':: "r"({word}) : "memory");\n')
  return wait + (_TRIGGER_LINE if trigger else "")


def _value_word(name: str, dt: DType) -> str:
  """An unsigned int that depends on the first bytes of a register value (any type)."""
  size = dt.itemsize * dt.count
  return f"(*(const unsigned *)&{name})" if size >= 4 else f"((unsigned)*(const unsigned {'short' if size == 2 else 'char'} *)&{name})"


def _early_params(wait: UOp, uops: list[UOp]) -> int:
  """A bit per buffer parameter (in parameter order) that what the GRID_WAIT barrier waits for reads."""
  return _param_bits(uops, {u.arg for u in wait.toposort() if u.op is Ops.DEFINE_GLOBAL})


def _param_bits(uops: list[UOp], read: set[int]) -> int:
  """A bit per buffer parameter (in parameter order) among `read` (DEFINE_GLOBAL args); bit 63: that parameter or a later one."""
  params = sorted(u.arg for u in uops if u.op is Ops.DEFINE_GLOBAL)
  return sum(1 << min(i, 63) for i, p in enumerate(params) if p in read)


def _launch_size(uops: list[UOp], prefix: str) -> int:
  """Blocks (prefix "gidx") or threads a block ("lidx") of a linearized kernel."""
  n = 1
  for u in uops:
    if u.op is Ops.SPECIAL and u.arg[0].startswith(prefix): n *= int(u.arg[1])
  return n


_MATH32 = {"exp2": "exp2f", "log2": "log2f", "sin": "sinf", "sqrt": "sqrtf", "trunc": "truncf"}
_MATH64 = {"exp2": "exp2", "log2": "log2", "sin": "sin", "sqrt": "sqrt", "trunc": "trunc"}
_HALFS = (dtypes.float16, dtypes.bfloat16)
_BYTES = {dtypes.int8: "i8", dtypes.uint8: "u8"}  # byte vectors (codegen/vectorize.py: 16 int8 weights in one load)
_BYTE_LANES = (4, 8, 16)
# int8/uint8 -> float32 by bit moves (render_cast), not cvt. On an H100, Llama-1B's decode step with the int8 screen of its
# output matrix (bench/README.md, session 38): 896.9 against 900.0 us a step, 903.7 against 907.7 with 16-byte lanes
BYTE_FLOATS = ContextVar("BYTE_FLOATS", 1)
_WIDE_FLOATS = (8, 16, 32, 64, 128)  # float vectors as structs: wgmma accumulators (m64nN: N/2 floats a thread)
# tile copies through tensor maps (TMA, sm_90a, DEV=CUDA): each map is a 128-byte kernel parameter the runtime encodes at
# launch (cuTensorMapEncodeTiled) from this global in the module: the map count, then per map TENSOR_MAP_WORDS numbers
# (buffer parameter position, itemsize, byte offset, rank, dims[5], byte strides of dims 1..4, box[5]); runtime.py reads it
TENSOR_MAP_SYMBOL = "tg_tensor_maps"
TENSOR_MAP_WORDS = 18
_TMA = """\
struct __align__(64) tg_tmap { unsigned long long v[16]; };  // a CUtensorMap (opaque), passed by value as __grid_constant__
static __device__ __forceinline__ unsigned tg_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ void tg_cluster_sync() {  // every thread of every block in the cluster
  asm volatile("barrier.cluster.arrive.release;\\n  barrier.cluster.wait.acquire;" ::: "memory");
}
static __device__ __forceinline__ bool tg_elected() { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }
// n stage barriers of one arrival each (full: the copy's thread), then, with `empty` > 0, n of that many arrivals (empty), then
// `turns` of `turn` arrivals (ping-pong: a computing warpgroup's turn may begin). In a cluster (TC_CLUSTER) the other block may
// copy into this one's stages and arrive at its barriers: every block's are initialized before any block goes on
static __device__ __forceinline__ void tg_mbar_init(unsigned long long *bar, int n, int empty, int turns = 0, int turn = 0, int cluster = 1) {
  if (tg_elected()) {
    for (int i = 0; i < n; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(tg_smem_addr(bar + i)) : "memory");
    for (int i = 0; i < n && empty > 0; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(tg_smem_addr(bar + n + i)), "r"(empty) : "memory");
    for (int i = 0; i < turns; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(tg_smem_addr(bar + 2 * n + i)), "r"(turn) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\\n  fence.proxy.async.shared::cta;" ::: "memory");
  }
  if (cluster > 1) tg_cluster_sync();
  else __syncthreads();
}
static __device__ __forceinline__ void tg_mbar_wait(unsigned long long *bar, int parity) {  // until phase `parity` completed
  asm volatile("{\\n .reg .pred p;\\n TG_WAIT:\\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\\n @!p bra TG_WAIT;\\n}"
               :: "r"(tg_smem_addr(bar)), "r"(parity) : "memory");
}
static __device__ __forceinline__ void tg_tma_expect(unsigned long long *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(tg_smem_addr(bar)), "r"(bytes) : "memory");
}"""


def _tma_load(rank: int, mcast: bool = False) -> str:
  """tg_tma_load{rank}: one box into this block's shared memory; tg_tma_mcast{rank}: into every block of the cluster (TC_CLUSTER's
  pairs: mask 0b11), at the same offset, completing on each block's barrier at the same offset."""
  cs = ", ".join(f"int c{i}" for i in range(rank))
  regs = ", ".join(f"%{3 + i}" for i in range(rank))
  ins = ", ".join(f'"r"(c{i})' for i in range(rank))
  name, mask, mask_in = (f"tg_tma_mcast{rank}", f", %{3 + rank}", ', "h"((unsigned short)3)') if mcast else (f"tg_tma_load{rank}", "", "")
  kind = ".multicast::cluster" if mcast else ""
  return (f"static __device__ __forceinline__ void {name}(const tg_tmap *map, const void *dst, unsigned long long *bar, {cs}) {{\n"
          f'  asm volatile("cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes{kind} [%0], [%1, {{{regs}}}], [%2]{mask};"\n'
          f'               :: "r"(tg_smem_addr(dst)), "l"(map), "r"(tg_smem_addr(bar)), {ins}{mask_in} : "memory");\n}}')


WGMMA_SMEM_ALIGN = 1024  # a 128-byte swizzle atom (8 rows of 128 bytes) starts 1024-byte aligned (wgmma.py)


# the k loop of a wgmma kernel nested in another loop (TC_TMA=3's tile loop; persistent grids) is kept rolled (#pragma unroll 1):
# unrolled by NVVM, ptxas 13.0 (the H200 machine's NVRTC) scheduled the epilogue's conversions of the accumulators above the
# final wgmma.wait_group (and any barrier), so they missed the last k tile's batch (TC_TMA=3 + TC_PERSIST=1 was wrong by one
# k tile's share; with the empty-barrier arrive predicated, render_sync, only some tile orders still show it). 0: NVVM's choice
WGMMA_ROLLED = ContextVar("WGMMA_ROLLED", 1)


def _rolled_loops(uops: list[UOp]) -> set[UOp]:
  """The innermost loops issuing wgmma batches (WMMAs reading shared memory) that another loop encloses."""
  open_loops: list[UOp] = []
  out: set[UOp] = set()
  for u in uops:
    if u.op is Ops.RANGE: open_loops.append(u)
    elif u.op is Ops.END and open_loops: open_loops.pop()
    elif u.op is Ops.WMMA and len(u.arg) > 4 and len(open_loops) >= 2: out.add(open_loops[-1])
  return out


def _mulacc(r: CUDARenderer, dt: DType, a: str, b: str, c: str) -> str:
  # alu computes a*b+c with an exact product (in double): fmaf is exactly that for float, and for half/bf16 too
  # (their product is exact in float); double keeps two roundings, as alu's Python floats do
  if dt == dtypes.float32: return f"fmaf({a},{b},{c})"
  if dt in _HALFS: return f"(({r.render_dtype(dt)})fmaf((float){a},(float){b},(float){c}))"
  return f"(({a}*{b})+{c})"


def _cmpne(r: CUDARenderer, dt: DType, a: str, b: str) -> str:
  return f"((float){a}!=(float){b})" if dt in _HALFS else f"({a}!={b})"


class CUDARenderer(CStyleRenderer):
  """CUDA C: `extern "C" __global__ void __launch_bounds__(L) name(T* __restrict__ data0, ..., const int var0)`."""
  device = "CUDA"
  name = "CUDA"
  has_local = True
  supports_float4 = True  # float4 loads/stores: one 16-byte access per thread (core's codegen/vectorize.py)
  vector_dtypes = (dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.int8, dtypes.uint8)  # float4, halfx8 / bfloat16x8 (_vector_struct), i8x16
  has_shared = True
  shuffle_lanes = 32  # __shfl_xor_sync: grouped reductions combine a warp's partials in registers (core's codegen/group.py)
  local_max = (LOCAL_SIZE,)  # threads per block the codegen uses: see compiler.LOCAL_SIZE
  global_max = (2 ** 31 - 1, 65535, 65535)
  kernel_prefix = 'extern "C" __global__ '
  buffer_suffix = " __restrict__"
  var_prefix = "const "
  helper_prefix = "static __device__ __forceinline__ "
  special_index = {"gidx": "blockIdx.{xyz}", "lidx": "threadIdx.{xyz}"}
  type_map = {**CStyleRenderer.type_map, dtypes.bool: "bool", dtypes.float16: "half", dtypes.bfloat16: "bfloat16"}
  code_for_op = {**CStyleRenderer.code_for_op, Ops.MULACC: _mulacc, Ops.CMPNE: _cmpne}
  # fp8 (e4m3fn, e5m2) as its byte, converted by integer code in the kernel (core's codegen/fp8.py), as on the CPU: every arch,
  # exactly the frontend's rounding; not the sm_89+ cvt instructions
  extra_matcher = pm_fp8_as_bytes
  compiler: NVRTCCompiler
  _dyn_offset: int | None  # (declared here, not in __init__: render_define_local, above it, assigns it first)
  # atomicAdd (red.global.add when the value goes unused); 64-bit ints as unsigned long long (two's complement adds the same)
  atomic_add = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)


  def render_atomic_add(self, ptr: str, value: str, dt: DType, gate: str | None = None) -> str:
    if dt in (dtypes.int64, dtypes.uint64): ptr, value = f"(unsigned long long*){ptr}", f"(unsigned long long)({value})"
    code = f"atomicAdd({ptr}, {value});"  # red.global.add: the result goes unused
    return code if gate is None else f"if ({gate}) {code}"

  def render_vector_dtype(self, dt: DType) -> str:
    if dt.scalar() == dtypes.float32 and dt.count in (2, 4): return f"float{dt.count}"
    if dt.scalar() == dtypes.float32 and dt.count in _WIDE_FLOATS: return f"floatx{dt.count}"  # wgmma accumulators
    if dt.scalar() in _HALFS and dt.count in (2, 4, 8): return f"{self.render_dtype(dt.scalar())}x{dt.count}"  # see _vector_struct
    if dt.scalar() in _BYTES and dt.count in _BYTE_LANES: return f"{_BYTES[dt.scalar()]}x{dt.count}"  # byte vectors: structs too
    return super().render_vector_dtype(dt)

  def _struct_vector(self, dt: DType) -> bool:
    return dt.scalar() in _HALFS or (dt.scalar() == dtypes.float32 and dt.count in _WIDE_FLOATS) or (dt.scalar() in _BYTES and dt.count in _BYTE_LANES)

  def render_vectorize(self, dt: DType, parts: list[str]) -> str:
    if self._struct_vector(dt): return f"{self.render_dtype(dt)}{{{', '.join(parts)}}}"
    return f"make_{self.render_dtype(dt)}({', '.join(parts)})"

  def render_gep(self, x: str, lane: int, dt: DType | None = None) -> str:
    if dt is not None and self._struct_vector(dt): return f"{x}.v[{lane}]"
    return super().render_gep(x, lane, dt)

  # ---- shared memory, barriers, tensor cores
  def render_define_local(self, name: str, dt: PtrDType) -> str:
    if self._dyn_offset is None: return f"__shared__ __align__({self._smem_align}) {self.render_dtype(dt.base)} {name}[{dt.size}];"
    # dynamic shared memory: one extern array for the kernel, each local an aligned slice of it (render() sizes it)
    off, self._dyn_offset = self._dyn_offset, self._dyn_offset + _align(dt.size * dt.base.itemsize, self._smem_align)
    return f"{self.render_dtype(dt.base)} *{name} = ({self.render_dtype(dt.base)} *)(tg_smem + {off});"

  def render_barrier(self, u: UOp) -> str:
    # sm_80+: the async copies (cp.async) issued since the last barrier become one group; all but the newest u.arg groups
    # (all, for arg None) are complete after the barrier
    if arch_number(self.arch) < 80: return "__syncthreads();"
    keep, wg = u.arg if isinstance(u.arg, tuple) else (u.arg or 0, None)
    # tiles copied through tensor maps (groups -1): no cp.async groups, and the copies wrote through the async proxy already
    if keep == -1: return f'asm volatile("wgmma.wait_group.sync.aligned {wg};" ::: "memory"); __syncthreads();'
    # wgmma kernels, arg (groups, batches): all but the newest `batches` wgmma batches are done too, and the landed copies
    # are made visible to the async proxy (wgmma reads shared memory through it)
    wait = "" if wg is None else f"\\n  wgmma.wait_group.sync.aligned {wg};\\n  fence.proxy.async.shared::cta;"
    return f'asm volatile("cp.async.commit_group;\\n  cp.async.wait_group {keep};{wait}" ::: "memory"); __syncthreads();'

  def render_sync(self, u: UOp, r: list[str]) -> str:
    kind = u.arg[0]
    if kind == "mbar_init": return f"tg_mbar_init({r[0]}, {', '.join(str(a) for a in u.arg[1:])});"
    if kind == "mbar_wait": return f"tg_mbar_wait({r[0]}, {r[1]});"
    if kind == "mbar_arrive" and len(u.arg) > 1 and u.arg[1] == "pair":
      # TC_CLUSTER (pairs): lane 0 of the warp arrives at its own block's barrier, lane 1 at the other block's (same offset, mapa):
      # the barrier completes once every computing warp of both blocks is done with the stage. One arrival a thread (each odd lane
      # a remote one) ran at half the speed. Lanes chosen inside the asm: a predicate on the lane in the program around a wgmma
      # pipeline made ptxas 13.0 serialize it (TC_ARRIVE)
      return ('asm volatile("{\\n .reg .pred q, w;\\n .reg .b32 rk, ln, ra;\\n mov.u32 ln, %%laneid;\\n setp.lt.u32 w, ln, 2;\\n'
              ' setp.ne.and.b32 q, %1, 0, w;\\n and.b32 ln, ln, 1;\\n mov.u32 rk, %%cluster_ctarank;\\n xor.b32 rk, rk, ln;\\n'
              ' mapa.shared::cluster.u32 ra, %0, rk;\\n @q mbarrier.arrive.shared::cluster.b64 _, [ra];\\n}" '
              f':: "r"(tg_smem_addr({r[0]})), "r"((int)({r[1]})) : "memory");')
    if kind == "cluster_sync": return "tg_cluster_sync();"
    if u.arg == GRID_WAIT:  # placed by a hand-written kernel (uop.dsl.GRID_WAIT) or early_loads.py, after its sources
      loaded = [(name, x.dtype) for x, name in zip(u.src, r) if x.op is Ops.LOAD and name and x.dtype.itemsize * x.dtype.count <= 16]
      return _grid_wait(loaded, self._trigger is None).strip() + ("\n" + timeline.AFTER_WAIT.rstrip() if self._stamps else "")
    if kind == "mbar_arrive":
      if r[1] in ("1", "true"): return f'asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(tg_smem_addr({r[0]})) : "memory");'
      # predicated in the asm, not branched around: a branch between a wgmma batch and its wait made ptxas 13.0 serialize
      # every wgmma of some persistent kernels (C7514)
      return (f'asm volatile("{{\\n .reg .pred q;\\n setp.ne.b32 q, %1, 0;\\n @q mbarrier.arrive.shared::cta.b64 _, [%0];\\n}}" '
              f':: "r"(tg_smem_addr({r[0]})), "r"((int)({r[1]})) : "memory");')
    if kind == "wgmma_wait": return f'asm volatile("wgmma.wait_group.sync.aligned {u.arg[1]};" ::: "memory");'
    if kind != "tile_copy": return super().render_sync(u, r)
    _, nbytes, specs, boxes, wait, elect = u.arg
    maps = []
    for spec in specs:  # each distinct map is one kernel parameter
      if spec not in self._tmaps: self._tmaps.append(spec)
      maps.append(self._tmaps.index(spec))
    calls, at = [f"tg_tma_expect({r[0]}, {nbytes});"], 4  # after the barrier, pred and the two buffers
    if wait: calls, at = [f"tg_mbar_wait({r[4]}, {r[5]});", *calls], 6  # the buffer's empty barrier first
    for n, ncoords, *mcast in boxes:
      fn = "tg_tma_mcast" if mcast and mcast[0] else "tg_tma_load"
      calls.append(f"{fn}{ncoords}(&tmap{maps[n]}, {r[at]}, {r[0]}, {', '.join(r[at + 1:at + 1 + ncoords])});")
      at += 1 + ncoords
    return f"if ({'tg_elected() && ' if elect else ''}{r[1]}) {{ {' '.join(calls)} }}"

  def render_async_copy(self, u: UOp, dst: str, src: str) -> str:
    if arch_number(self.arch) < 80: return super().render_async_copy(u, dst, src)
    return f"tg_cp_async{u.src[1].dtype.nbytes}({dst}, {src});"

  def render_shuffle(self, x: str, mask: int, dt: DType) -> str: return f"__shfl_xor_sync(0xffffffffu, {x}, {mask})"

  def render_wmma(self, u: UOp, operands: list[str]) -> str:
    if len(u.arg) > 4:  # A and B in shared memory (wgmma): how each lies and the batch position are template arguments
      (ta, lboa, sboa), (tb, lbob, sbob), first, last = u.arg[4:8]
      return f"tg_{u.arg[0]}<{int(ta)}, {int(tb)}, {lboa}, {sboa}, {lbob}, {sbob}, {int(first)}, {int(last)}>({', '.join(operands)})"
    return f"tg_{u.arg[0]}({', '.join(operands)})"

  def render_collective_load(self, u: UOp, ptr: str) -> str:
    if u.arg[0] != "matrix": return super().render_collective_load(u, ptr)
    return f"tg_ldsm_x{u.arg[1]}{'_t' if u.arg[2] else ''}_{self.render_dtype(u.dtype.scalar())}({ptr})"

  def __init__(self, target: Target | None = None):
    target = target or Target("CUDA", "CUDA", DEFAULT_ARCH)
    self.arch = target.arch or DEFAULT_ARCH
    arch_number(self.arch)
    if target.device in ("CUDA", "NV"): self.device = target.device
    self.compiler = NVRTCCompiler(self.arch)
    self.shared_max = _SHARED_MAX.get(arch_number(self.arch), STATIC_SHARED_MAX)
    # the tile configs' rates were measured with this renderer's dynamic shared memory (up to 4 stages of the 48 KB configs); PTX
    # keeps 48 KB of static shared memory, where they don't hold, so it leaves compute_units unknown (the blocks-count rule)
    self.compute_units = SM_COUNT.get(arch_number(self.arch), 0)
    self._dyn_offset = None  # while rendering a kernel with dynamic shared memory: the next local's offset
    self._smem_align = 16  # while rendering: shared arrays' alignment (wgmma's swizzle atoms need 1024)
    self._tmaps: list[tuple] = []  # while rendering: the tensor maps its tile copies name (kernel parameters tmap0, ...)
    self._rolled: set[UOp] = set()  # while rendering: loops kept rolled (_rolled_loops)
    self._streamed: set[UOp] = set()  # while rendering: loads with the no-L1 hint (streams.py)
    self._ahead: dict[UOp, list[UOp]] = {}  # while rendering: loop -> its streamed loads issued STREAM_AHEAD steps ahead
    self._ahead_regs: dict[UOp, list[str]] = {}  # ... and each such load's registers, the next step's first
    self._early: list[str] | None = None  # while rendering: lines to put before the grid wait (None: nothing may go there)
    self._stamps = False  # while rendering: with block timeline stamps (timeline.py)
    self._trigger: tuple[UOp, UOp | None] | None = None  # while rendering: the load after which the next kernel may launch (dependents.py)
    # sm_90a on the CUDA driver (runtime.py encodes the maps; the NV device's own launches don't)
    self.tile_copy = self.device == "CUDA" and self.arch.endswith("a") and arch_number(self.arch) >= 90
    self.grid_wait = arch_number(self.arch) >= 90  # every kernel waits for the grids before it (render)

  # (the SM count too: plugin.py sets this machine's where it differs from the arch's table, and the compile pool's workers
  # must render as this process does)
  def __reduce__(self) -> tuple: return _rebuilt_renderer, (type(self), Target(self.device, self.name, self.arch), self.compute_units)

  @property
  def tensor_cores(self):
    from tinygrad_backend_nv.tensor_cores import tensor_cores_for
    return tensor_cores_for(self.arch)

  # ---- constants and math
  def render_const(self, v: bool | int | float, dt: DType) -> str:
    # half/bf16 constants: the float literal (exact for any half/bf16 value) converted once, so that even -inf stays a
    # half expression (a '-' on a half would make it a float and break `c ? half : half`)
    if dt in _HALFS: return f"(({self.render_dtype(dt)}){super().render_const(v, dtypes.float32)})"
    return super().render_const(v, dt)

  def render_inf(self, dt: DType) -> str:
    if dt == dtypes.float64: return "__longlong_as_double(0x7ff0000000000000ll)"
    return "__int_as_float(0x7f800000)" if dt == dtypes.float32 else f"(({self.render_dtype(dt)})__int_as_float(0x7f800000))"

  def render_nan(self, dt: DType) -> str:
    if dt == dtypes.float64: return "__longlong_as_double(0x7ff8000000000000ll)"
    return "__int_as_float(0x7fc00000)" if dt == dtypes.float32 else f"(({self.render_dtype(dt)})__int_as_float(0x7fc00000))"

  def math_fn_name(self, fn: str, dt: DType) -> str | None:
    return {dtypes.float32: _MATH32, dtypes.float64: _MATH64}.get(dt, {}).get(fn)

  # ---- conversions
  def render_cast(self, x: str, src: DType, dst: DType) -> str:
    if src == dst: return x
    if BYTE_FLOATS.value and src in _BYTES and dst == dtypes.float32:
      # a byte b as float: the float whose mantissa's low byte is b (2^23 + b, exact), minus 2^23; a signed byte offset by 128
      # first. A byte-select and a logic op (ptxas: PRMT, LOP3) and an add, where a cvt from an 8-bit integer is a quarter-rate op
      if src == dtypes.uint8: return f"(__uint_as_float(0x4B000000u | (unsigned char)({x})) - 8388608.0f)"
      return f"(__uint_as_float(0x4B000000u | ((unsigned char)({x}) ^ 0x80u)) - 8388736.0f)"
    if src in _HALFS and dst != dtypes.bool:  # from half/bf16 through float (exact), then as float32
      return self.render_cast(f"((float){x})", dtypes.float32, dst)
    if dst in _HALFS:
      # alu rounds through a double: half straight from it (one rounding), bf16 through float (truncate_bf16 does)
      wide = f"((double){x})" if src == dtypes.float64 or (dtypes.is_int(src) and src.itemsize == 8) else None
      if dst == dtypes.float16: return f"tg_d2h({wide})" if wide else f"((half)(float){x})"
      return f"((bfloat16)(float){wide or x})"
    if dtypes.is_int(src) and src.itemsize == 8 and dst == dtypes.float32: return f"((float)(double){x})"  # as alu: via double
    return super().render_cast(x, src, dst)

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
    if dst == dtypes.bool: return f"({x}!=0)"
    return f"tg_bitcast<{self.render_dtype(dst)}>(({self.render_dtype(src)}){x})"

  # ---- prelude and signature
  def helpers(self) -> list[tuple[str, str]]:
    vectors = [(f"{name}x{n}", _vector_struct(name, n)) for name in ("half", "bfloat16") for n in (2, 4, 8)]
    vectors += [(f"{name}x{n}", _byte_struct(name, ctype, n)) for dt, name in _BYTES.items() for ctype in (self.render_dtype(dt),) for n in _BYTE_LANES]
    mmas = [(f"tg_{tc.name}(", _mma_helper(self, tc)) for tc in self.tensor_cores if tc.dtype_in in (*_HALFS, dtypes.float32) and not tc.smem_operands and not tc.fma]
    mmas += [(f"tg_{tc.name}<", wgmma.cuda_helper(tc.name, tc.dims[1], tc.extra["ptx_type"], self.render_dtype(tc.dtype_in)))
             for tc in self.tensor_cores if tc.smem_operands]
    wides = [(f"floatx{n}", f"struct __align__(16) floatx{n} {{ float v[{n}]; }};") for n in _WIDE_FLOATS]
    ldsm = [(f"tg_ldsm_x{n}{'_t' if t else ''}_{name}(", _ldsm_helper(name, n, t)) for name in ("half", "bfloat16") for n in (2, 4) for t in (0, 1)]
    cp = [(f"tg_cp_async{n}(", _CP_ASYNC.format(n=n, cache="cg" if n == 16 else "ca")) for n in (4, 8, 16)]
    # wgmma kernels round through the packed (x2) conversions: ptxas serializes a wgmma pipeline whose accumulators a
    # plain cvt.rn.f16.f32 / .bf16.f32 reads (C7514), not one read by cvt.rn.f16x2.f32 (same rounding, low half kept)
    half, bf16 = (_HALF, _BF16) if self._smem_align != WGMMA_SMEM_ALIGN else (_x2(_HALF, "f16"), _x2(_BF16, "bf16"))
    tma = [("tg_mbar_", _TMA), *((f"tg_tma_load{n}(", _tma_load(n)) for n in range(2, 6)), *((f"tg_tma_mcast{n}(", _tma_load(n, True)) for n in range(2, 6))]
    streams = [(f"tg_ld_stream{n}(", stream_load_helper(n)) for n in STREAM_BYTES]
    return [("half", half), ("bfloat16", bf16), *vectors, *wides, ("tg_bitcast<", _BITCAST), *ldsm, *cp, ("tg_wgmma_", wgmma.DESC_HELPER), *mmas, *tma,
            *streams, *super().helpers()]

  def _render_uop(self, k, u: UOp) -> None:
    if self._trigger is not None and u is self._trigger[1]: k.emit(f"unsigned {LAST_WORD} = 0;")  # set in the loop, read after it
    if u.op is Ops.RANGE and u in self._ahead:  # the loop's first STREAM_AHEAD steps of its streamed loads, before it
      for ld in self._ahead[u]:
        regs = self._ahead_regs[ld] = [k.new_name("ahead") for _ in range(ahead_steps(u))]
        # a weight's first loads before the wait for the kernel before (the graph's edge is plain where that kernel takes the buffer)
        early = self._early is not None and k.depth == 1 and ld in self._streamed and addressed_at_start(ld, u)
        for j, reg in enumerate(regs):
          line = f"{self.render_dtype(ld.dtype)} {reg} = {self._load_at(k, ld, u, u.const_like(j), early)};"
          if not early: k.emit(line)
          else:
            self._early.append("  " + line)  # type: ignore[union-attr]
            self._early_regs.append((reg, ld.dtype))
            self._early_bufs.add(indexed_buffer(ld.src[0]).arg)
      super()._render_uop(k, u)
    elif u in self._ahead_regs and u not in k.skip:  # this step's value was loaded steps ago; the load STREAM_AHEAD steps on is issued now
      regs, r = self._ahead_regs[u], next(x for x in self._ahead if u in self._ahead[x])
      self._declare(k, u, regs[0])
      for a, b in zip(regs, regs[1:]): k.emit(f"{a} = {b};")
      k.emit(f"if ({k.names[r]} < {r.src[0].arg - len(regs)}) {regs[-1]} = {self._load_at(k, u, r, r + len(regs))};")
    elif u in self._streamed and u not in k.skip:  # read once by one thread: not kept in L1 (streams.py)
      self._declare(k, u, f"tg_ld_stream{u.dtype.itemsize * u.dtype.count}({k.names[u.src[0]]})")
    else: super()._render_uop(k, u)
    if self._trigger is not None: self._late_trigger(k, u)

  def _late_trigger(self, k, u: UOp) -> None:
    """LAUNCH_LATE (dependents.py): the trigger after the chosen load, or after the loop around it (the load's first word kept
    in a variable the loop assigns)."""
    ld, loop = self._trigger  # type: ignore[misc]
    if u is ld:
      word = _value_word(k.names[u], u.dtype)
      k.emit(f"{LAST_WORD} = {word};" if loop is not None else predicated_trigger(word))
    elif loop is not None and u.op is Ops.END and u.src[0] is loop: k.emit(predicated_trigger(LAST_WORD))

  def _load_at(self, k, ld: UOp, r: UOp, step: UOp, top: bool = False) -> str:
    """A load's expression at loop r's `step` (its address rendered again, inline: streams.ahead_loads). top: at the kernel's
    start, before its thread indices are named."""
    def inline(x: UOp) -> str:
      if x.op is Ops.CONST: return self.render_const(x.arg, x.dtype)
      if top and x.op is Ops.SPECIAL: return self.render_special(x.arg[0], x.arg[1])
      if x.op in (Ops.SPECIAL, Ops.DEFINE_VAR, Ops.RANGE): return k.names[x]
      if x.op is Ops.CAST: return self.render_cast(inline(x.src[0]), x.src[0].dtype, x.dtype)
      return self._render_alu(x, [inline(s) for s in x.src])
    index = ld.src[0]
    assert isinstance(index.dtype, PtrDType)
    ptr = self.render_index(k.names[index.src[0]], inline(index.src[1].substitute({r: step})), index.dtype)
    if index.dtype.base.count > 1: ptr = f"(({self.render_dtype(index.dtype.base)}*){ptr})"
    return f"tg_ld_stream{ld.dtype.itemsize * ld.dtype.count}({ptr})" if ld in self._streamed else self.render_load(ptr, ld.dtype)

  def _spread(self, uops: list[UOp]) -> bool:
    """Whether each block gets an SM of its own: a hand-written kernel that asks (KernelInfo.spread), on sm_90+, where a graph
    launches kernels early. (Every kernel of at most 8, 32 or 132 blocks spread the same way measured as noise on the H200.)"""
    return arch_number(self.arch) >= 90 and bool(getattr(uops[-1].arg, "spread", False))

  def _balanced_reserve(self, uops: list[UOp]) -> int | None:
    """MV_BALANCE: shared memory a block of a matrix-vector product (with MV_BALANCE=2 also of a kernel that loads before its grid
    wait) reserves so that an SM holds at most ceil(blocks / SMs) of them (sm_90+). Launched early behind the kernel before, a product's blocks
    otherwise pile onto the SMs that drain first (the down product's 512 blocks ran on 113-119 of an H100's 132 SMs:
    bench/README.md, session 34). It reserves nothing else: the registers stay as they are. None: no reservation. Llama-1B's
    decode step on an H100: 966.9 -> 959.9 us (1 against 0, twice in one process; 2, the early-loading q/k/v and o too: 990.0)."""
    if not MV_BALANCE.value or arch_number(self.arch) < 90 or not self.compute_units: return None
    if (per_sm := self._blocks_per_sm(uops)) > MV_BALANCE_MAX_PER_SM: return None  # more than an SM holds at once: waves anyway
    sm_shared = self.shared_max + BLOCK_SHARED_OVERHEAD  # an SM's shared memory: a block may have all of it but the system's part
    return min(self.shared_max, sm_shared // (per_sm + 1) - BLOCK_SHARED_OVERHEAD + 16)

  def _blocks_per_sm(self, uops: list[UOp]) -> int:
    """ceil(blocks / SMs): how many of the kernel's blocks an SM must hold for the grid to run in one wave."""
    return -(-_launch_size(uops, "gidx") // self.compute_units)

  def range_pragma(self, u: UOp) -> str: return "#pragma unroll 1" if u in self._rolled else ""

  def render(self, name: str, uops: list[UOp]) -> str:
    self._smem_align = WGMMA_SMEM_ALIGN if any(u.op is Ops.WMMA and len(u.arg) > 4 for u in uops) else 16
    shared = sum(_align(dt.size * dt.base.itemsize, self._smem_align) for u in uops if u.op is Ops.DEFINE_LOCAL and isinstance(dt := u.dtype, PtrDType))
    if shared > self.shared_max: raise ValueError(f"kernel {name} needs {shared} bytes of shared memory; {self.arch} allows {self.shared_max}")
    # a kernel whose blocks should each have an SM (KernelInfo.spread) reserves more than half an SM's shared memory: launched
    # early behind a kernel that fills the GPU, its blocks then land one an SM as SMs drain, not packed where room is left
    spread = self._spread(uops)
    reserved = max(shared, self.shared_max // 2 + 16) if spread else shared
    self._tmaps = []
    self._rolled = _rolled_loops(uops) if WGMMA_ROLLED.value else set()
    # a reduction whose shared memory holds only partials (a matrix-vector product): its matrix's loads stream past L1
    self._streamed = streamed_loads(uops)
    wait = next((u for u in uops if u.op is Ops.BARRIER and u.arg == GRID_WAIT), None)
    loads_early = wait is not None and any(x.op is Ops.LOAD for x in wait.toposort())
    balanced = self._balanced_reserve(uops) if self._streamed or (MV_BALANCE.value >= 2 and loads_early and not spread) else None
    if balanced is not None: reserved = max(reserved, balanced)
    dynamic = reserved > shared or reserved > STATIC_SHARED_MAX  # (a reservation past what the kernel declares is dynamic)
    self._dyn_offset = 0 if dynamic else None
    self._ahead, self._ahead_regs = ahead_loads(uops, self._streamed), {}
    self._trigger = late_trigger(uops, self._streamed, spread) if self.grid_wait else None
    self._early_bufs: set[int] = set()
    # block timelines (timeline.py) on sm_90+, where the stamps' shared memory fits
    self._stamps = bool(timeline.KERNEL_TIMELINE.value) and self.grid_wait and reserved + timeline.SHARED_BYTES <= self.shared_max
    self._early_regs: list[tuple[str, DType]] = []
    self._early = [] if STREAM_EARLY.value and self.grid_wait and not any(u.op is Ops.BARRIER and u.arg == GRID_WAIT for u in uops) else None
    try: src = super().render(name, uops)
    finally:
      self._dyn_offset, align, self._smem_align, tmaps, self._tmaps, self._rolled = None, self._smem_align, 16, self._tmaps, [], set()
      self._streamed, self._ahead, self._ahead_regs, early, self._early = set(), {}, {}, self._early or [], None
      trigger_at_start, self._trigger = self._trigger is None, None
    threads = _launch_size(uops, "lidx")
    head = f"{self.kernel_prefix}void {name}("
    # tensor-core tiles this big need only one block per SM to be resident: ptxas may give each thread up to 255 registers
    bounds = f"{threads}, 1" if reserved > STATIC_SHARED_MAX and balanced is None else f"{threads}"
    # wgmma tiles small enough for two blocks an SM: registers capped so that two fit (epilogues overlap main loops)
    if align == WGMMA_SMEM_ALIGN and shared > STATIC_SHARED_MAX and 2 * shared <= self.shared_max: bounds = f"{threads}, 2"
    # a reduction kernel (its shared memory holds only partials) that keeps its share of the data in registers (a GPU row
    # kernel: codegen/rows.py) streams memory: it needs resident warps to hide the latency more than registers. A softmax row
    # of 64 values a thread took 166 registers (one 256-thread block an SM) where 128 fit; asked of one with 32 values a thread
    # (79 registers), ptxas used up to the cap instead (102: two blocks, not three), so only the former ask
    if (warps := REDUCE_WARPS.value) and 0 < shared <= PARTIALS_SMEM_MAX and threads * 2 <= warps * 32 and not any(u.op is Ops.WMMA for u in uops) \
        and _values_loaded_outside_loops(uops) >= REDUCE_HELD_VALUES:
      bounds = f"{threads}, {warps * 32 // threads}"
    # a kernel that loads before its grid wait (codegen/early_loads.py, or a hand-written one's loads, cast or not) gains in the
    # blocks resident before the kernel before ends: registers capped so that its whole grid is (EARLY_ONE_WAVE)
    if EARLY_ONE_WAVE.value and loads_early and self.compute_units:
      per_sm = self._blocks_per_sm(uops)
      if 1 < per_sm and per_sm * threads <= 2048 and REGISTERS_PER_SM // (per_sm * threads) >= EARLY_ONE_WAVE_MIN_REGS: bounds = f"{threads}, {per_sm}"
    decl = ""
    if dynamic:  # the launch must ask for it: the module says how much (runtime.CUDAProgram reads the global)
      decl = (f'extern "C" __device__ unsigned {DYNAMIC_SMEM_SYMBOL} = {reserved};\n'
              f"extern __shared__ __align__({align}) unsigned char tg_smem[];\n")
    if tmaps:  # by-value tensor-map parameters after the others, described to the runtime by a global
      params = sorted(u.arg for u in uops if u.op is Ops.DEFINE_GLOBAL)
      words = [len(tmaps)]
      for buf, itemsize, offset, dims, strides, box in tmaps:
        pad = 5 - len(dims)
        words += [params.index(buf), itemsize, offset, len(dims), *dims, *(1,) * pad, *strides, *(0,) * pad, *box, *(1,) * pad]
      decl += (f'extern "C" __device__ unsigned long long {TENSOR_MAP_SYMBOL}[{len(words)}] = {{{", ".join(map(str, words))}}};\n')
      close = src.index(") {\n", src.index(head))
      src = src[:close] + "".join(f", const __grid_constant__ tg_tmap tmap{i}" for i in range(len(tmaps))) + src[close:]
    if arch_number(self.arch) >= 90:
      decl += f'extern "C" __device__ unsigned {GRID_WAIT_SYMBOL} = 1;\n'
      stamps, body = self._stamps, src.index("{\n", src.index(head)) + 2
      if wait is None:  # else where the kernel placed it
        waited = "".join(line + "\n" for line in early) + _grid_wait(self._early_regs if early else [], trigger_at_start) + \
          (timeline.AFTER_WAIT if stamps else "")
        src = src[:body] + waited + src[body:]
        if early:  # the buffers read before the wait, for the graph (as codegen/early_loads.py's)
          decl += f'extern "C" __device__ unsigned long long {EARLY_PARAMS_SYMBOL} = {_param_bits(uops, self._early_bufs)}ull;\n'
      elif early_bits := _early_params(wait, uops):  # the parameters read before the wait, for the graph (codegen/early_loads.py)
        decl += f'extern "C" __device__ unsigned long long {EARLY_PARAMS_SYMBOL} = {early_bits}ull;\n'
      if stamps:  # block timelines (timeline.py): stamps at the start, after the wait (above, or render_sync) and at the end
        end = src.rstrip().rindex("}")
        src = src[:body] + timeline.START + src[body:end] + timeline.block_end(name) + src[end:]
        decl += timeline.declarations() + timeline.NOW_HELPER + "\n"
    # thread-block clusters (TC_CLUSTER: the tensor-core lowering's mbar_init names the size): fixed at compile time, so a plain
    # launch (and a graph's kernel node) runs the grid as clusters
    cluster = max((u.arg[5] for u in uops if u.op is Ops.BARRIER and isinstance(u.arg, tuple) and u.arg[:1] == ("mbar_init",) and len(u.arg) > 5),
                  default=1)
    dims = f"__cluster_dims__({cluster}, 1, 1) " if cluster > 1 else ""
    return src.replace(head, f"{decl}{self.kernel_prefix}void {dims}__launch_bounds__({bounds}) {name}(", 1)


def _rebuilt_renderer(cls: type, target: Target, compute_units: int) -> CUDARenderer:
  renderer = cls(target)
  renderer.compute_units = compute_units
  return renderer


MV_BALANCE = ContextVar("MV_BALANCE", 1)  # 1: streamed matrix-vector products spread evenly over the SMs (_balanced_reserve), 2: and
# the kernels that load before their grid wait
MV_BALANCE_MAX_PER_SM = 8  # ... where their grid needs at most this many blocks an SM
BLOCK_SHARED_OVERHEAD = 1024  # shared memory the system takes of an SM's for each resident block (CUDA programming guide, cc 8.0+)
EARLY_ONE_WAVE = ContextVar("EARLY_ONE_WAVE", 1)  # 0: no register cap for kernels that load before their grid wait
# ... where the cap leaves a thread at least this many registers: Qwen3-1.7B's q/k/v product (512 blocks of 256 threads) capped
# to 64 spilled 40 bytes a thread and made the step 3% slower on an H100 (1,566 against 1,518 us uncapped: bench/README.md,
# session 36); Llama-1B's (384 blocks, capped to 85) and the grouped attention's (capped to 128) gain
EARLY_ONE_WAVE_MIN_REGS = 80
REGISTERS_PER_SM = 65536  # sm_70 and later
REDUCE_WARPS = ContextVar("REDUCE_WARPS", 16)  # warps an SM keeps resident for reduction kernels (render's launch bounds); 0: no ask
REDUCE_HELD_VALUES = 64  # ... and values a thread loads from global memory outside any loop, from which it asks


def _values_loaded_outside_loops(uops: list[UOp]) -> int:
  """Elements a thread loads from global memory outside any loop: what it holds in registers at once, at most."""
  depth, n = 0, 0
  for u in uops:
    if u.op is Ops.RANGE: depth += 1
    elif u.op is Ops.END: depth -= 1
    elif u.op is Ops.LOAD and depth == 0 and isinstance(ptr := u.src[0].dtype, PtrDType) and ptr.addrspace == "global": n += u.dtype.count
  return n


def _x2(helper: str, ty: str) -> str:
  """The half/bfloat16 struct with float -> 16 bits through cvt.rn.{ty}x2.f32 of (f, f)."""
  old = f'asm("cvt.rn.{ty}.f32 %0, %1;" : "=h"(bits) : "f"(f));'
  assert old in helper
  return helper.replace(old, f'unsigned p; asm("cvt.rn.{ty}x2.f32 %0, %1, %1;" : "=r"(p) : "f"(f)); bits = (unsigned short)p;')


def _align(n: int, to: int) -> int: return (n + to - 1) // to * to


def _vector_struct(name: str, n: int) -> str:
  # half/bf16 vectors as aligned structs: a 16-byte halfx8 load/store is one instruction
  return f"struct __align__({2 * n}) {name}x{n} {{ {name} v[{n}]; }};"


def _byte_struct(name: str, ctype: str, n: int) -> str:
  return f"struct __align__({n}) {name}x{n} {{ {ctype} v[{n}]; }};"


def _ldsm_helper(name: str, n: int, trans: int) -> str:
  """ldmatrix: n 8x8 b16 matrices from shared memory, one row address per lane (see codegen/tensor_core.py _ldmatrix)."""
  regs = ", ".join(f"%{i}" for i in range(n))
  outs = ", ".join(f'"=r"(R[{i}])' for i in range(n))
  return (f"static __device__ __forceinline__ {name}x{2 * n} tg_ldsm_x{n}{'_t' if trans else ''}_{name}(const {name}x{2 * n} *p) {{\n"
          f"  {name}x{2 * n} r; unsigned *R = (unsigned *)&r; unsigned a;\n"
          f"  a = (unsigned)__cvta_generic_to_shared(p);\n"
          f'  asm volatile("ldmatrix.sync.aligned.m8n8.x{n}{".trans" if trans else ""}.shared.b16 {{{regs}}}, [%{n}];" : {outs} : "r"(a) : "memory");\n'
          f"  return r;\n}}")


def _mma_helper(r: CUDARenderer, tc: TensorCore) -> str:
  """An inline-asm mma.sync: fragments as vectors whose 32-bit words are the instruction's registers, in layout order."""
  na, nb = len(tc.a_layout[0]), len(tc.b_layout[0])
  ta, tb = r.render_dtype(tc.dtype_in.vec(na)), r.render_dtype(tc.dtype_in.vec(nb))
  regs = tc.extra["regs_b32"]
  nc = len(tc.c_layout[0])
  tcv = r.render_dtype(tc.dtype_out.vec(nc))
  c = [f"c.{'xyzw'[i]}" for i in range(nc)]
  ops = ", ".join(f"%{i}" for i in range(nc))
  aops = ", ".join(f"%{nc + i}" for i in range(regs["a"]))
  bops = ", ".join(f"%{nc + regs['a'] + i}" for i in range(regs["b"]))
  outs = ", ".join(f'"+f"({x})' for x in c)
  ins = ", ".join([f'"r"(A[{i}])' for i in range(regs["a"])] + [f'"r"(B[{i}])' for i in range(regs["b"])])
  return (f"static __device__ __forceinline__ {tcv} tg_{tc.name}({ta} a, {tb} b, {tcv} c) {{\n"
          f"  const unsigned *A = (const unsigned *)&a, *B = (const unsigned *)&b;\n"
          f'  asm("{tc.extra["ptx"]} {{{ops}}}, {{{aops}}}, {{{bops}}}, {{{ops}}};" : {outs} : {ins});\n'
          f"  return c;\n}}")


def kernel_names(src: str) -> list[str]:
  """The __global__ functions in CUDA source rendered by CUDARenderer (for tests and tools)."""
  return re.findall(r'extern "C" __global__ void (?:__\w+__\([\d, ]+\) )*(\w+)\(', src)
