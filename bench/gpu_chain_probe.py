"""Probe: how fast can a Llama-1B decode step's 64 matrix-vector products run back to back on this GPU, by structure?

  DEV=CUDA python3 bench/gpu_chain_probe.py [--layers 16] [--reps 20]

A measurement for planning, not a tinygrad kernel: the same hand-written float16 matrix-vector product (2 or 4 rows a warp, 16-byte
loads, float32 sums) runs the 16 layers' q/k/v (3072x2048), o (2048x2048), gate/up (16384x2048) and down (2048x8192) products,
each layer its own weights (1.94 GB, past the L2), each product reading the one before's output, in these structures:
  graph              a kernel per product, one CUDA graph with plain edges (what tinygrad's decode graph is with PDL=0)
  graph_pdl          the same with programmatic edges (each kernel starts with griddepcontrol.wait; PDL=1, the default)
  graph_pdl_early    and each kernel lets the next one's blocks start at once (griddepcontrol.launch_dependents first)
  graph_pdl_preload  and each warp loads its first weights before it waits (they don't depend on the kernel before; x does)
  resident_rR_bB     a kernel per product whose grid is one wave of B blocks an SM (R rows a warp, the warps striding over the
                     rows), small enough that the next kernel's blocks fit beside it: launch_dependents first, the first weights
                     loaded before the wait (_wait_only: neither; _early_only: no preload)
  persistent         one kernel, a block per SM slot, the products separated by grid-wide barriers
  persistent_pf      the same, each warp asking the L2 for its first rows of the next product before it waits at the barrier
  persistent_preload the same, each warp loading its first weights of the next product into registers before it waits
  streamed_cC_sS     a block per SM whose copying warp streams its weights of every product into S shared-memory slots of 8 rows
                     x C columns, running ahead of the products (weights depend on nothing), while its computing warps wait only
                     for x; _nowait: they don't even wait for x (wrong results: the streaming alone, an upper bound)
  streamed_ld_cC_sS  the same with 4 copying warps of 16-byte cp.async copies instead of one warp's bulk (TMA) copies
Prints JSON: microseconds per 64-product chain, its bandwidth, and each structure's output checked against the graph's (the same
sums in the same order: bit-equal). The question it answers: how much of the decode step's ~2.9 us per matrix-vector kernel
beyond its bytes (bench/README.md, session 11) a persistent kernel would win back.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import sys

SHAPES = [(3072, 2048), (2048, 2048), (16384, 2048), (2048, 8192)]  # (rows, columns) of q/k/v, o, gate/up, down

SRC = r"""
#ifdef PDL
extern "C" __device__ unsigned tg_waits_for_grid = 1;  // graph.py: programmatic edges into this kernel
#endif
__device__ __forceinline__ float h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ float dot8(uint4 w, float4 a, float4 b) {
  return h2f(w.x & 0xffff) * a.x + h2f(w.x >> 16) * a.y + h2f(w.y & 0xffff) * a.z + h2f(w.y >> 16) * a.w
       + h2f(w.z & 0xffff) * b.x + h2f(w.z >> 16) * b.y + h2f(w.w & 0xffff) * b.z + h2f(w.w >> 16) * b.w;
}
// x (K floats) into this block's shared memory, past L1 (x was written earlier in this kernel, by other blocks)
__device__ __forceinline__ void stage_x(float* xs, const float* x, int K) {
  __syncthreads();
  for (int i = threadIdx.x * 4; i < K; i += blockDim.x * 4) *(float4*)(xs + i) = __ldcg((const float4*)(x + i));
  __syncthreads();
}

// R rows (r..r+R-1) of W (N x K halves), columns c*256..(c+8)*256: 8 loads of 16 bytes a lane per row
template <int R>
__device__ __forceinline__ void load_chunk(uint4 (&w)[R][8], const unsigned short* W, int r, int K, int c, int lane) {
  #pragma unroll
  for (int j = 0; j < R; j++) {
    const uint4* row = (const uint4*)(W + (size_t)(r + j) * K);
    #pragma unroll
    for (int i = 0; i < 8; i++) w[j][i] = row[(c + i) * 32 + lane];
  }
}
template <int R>
__device__ __forceinline__ void fma_chunk(float (&s)[R], const uint4 (&w)[R][8], const float* xs, int c, int lane) {
  #pragma unroll
  for (int i = 0; i < 8; i++) {
    const float4* xp = (const float4*)(xs + ((c + i) * 32 + lane) * 8);
    float4 x0 = xp[0], x1 = xp[1];
    #pragma unroll
    for (int j = 0; j < R; j++) s[j] += dot8(w[j][i], x0, x1);
  }
}
template <int R>
__device__ __forceinline__ void store_rows(float (&s)[R], float* y, int r, int K, int lane) {
  float scale = 3.4641f * rsqrtf((float)K);  // 1 / (sqrt(K) * the weights' std): the chain's values keep their size
  #pragma unroll
  for (int j = 0; j < R; j++) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) s[j] += __shfl_xor_sync(0xffffffffu, s[j], o);
    if (lane == 0) y[r + j] = s[j] * scale;
  }
}

// W (N x K halves) times x (in shared memory), R rows at a time by each warp, the warps striding over the rows
template <int R>
__device__ __forceinline__ void matvec(const unsigned short* W, const float* xs, float* y, int N, int K, int gwarp, int nwarps, int lane) {
  for (int r = gwarp * R; r < N; r += nwarps * R) {
    float s[R] = {};
    for (int c = 0; c < K / 256; c += 8) {
      uint4 w[R][8];
      load_chunk<R>(w, W, r, K, c, lane);
      fma_chunk<R>(s, w, xs, c, lane);
    }
    store_rows<R>(s, y, r, K, lane);
  }
}

// a kernel per product, its grid one row group a warp. PDL: it waits for the kernel before it (griddepcontrol.wait), EARLY: it
// lets the next kernel's blocks start at once (launch_dependents first), PRELOAD: its first weights are loaded before it waits
// (they don't depend on the kernel before: only x does)
extern "C" __global__ void __launch_bounds__(256) mv(const unsigned short* W, const float* x, float* y, int N, int K) {
  int lane = threadIdx.x & 31, r = (blockIdx.x * 8 + (threadIdx.x >> 5)) * ROWS;
  bool active = r < N;
  uint4 w[ROWS][8];
#ifdef PRELOAD
  if (active) load_chunk<ROWS>(w, W, r, K, 0, lane);
#endif
#ifdef EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#ifdef PDL
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  __shared__ float xs[8192];
  stage_x(xs, x, K);
  if (!active) return;
  float s[ROWS] = {};
  for (int c = 0; c < K / 256; c += 8) {
#ifdef PRELOAD
    if (c > 0)
#endif
    load_chunk<ROWS>(w, W, r, K, c, lane);
    fma_chunk<ROWS>(s, w, xs, c, lane);
  }
  store_rows<ROWS>(s, y, r, K, lane);
}

// resident: a kernel per product whose grid is one wave that leaves room on every SM for the next kernel's (SMs x RB blocks,
// the warps striding over the rows; __launch_bounds__ keeps two kernels' blocks within an SM's registers). It lets the next
// kernel's blocks start at once (launch_dependents first): they land beside this one's, load their first weights and wait, so
// a product's ramp runs under the one before's tail without taking block slots that product still needs
#ifndef MINB
#define MINB 2
#endif
extern "C" __global__ void __launch_bounds__(256, MINB) mv_res(const unsigned short* W, const float* x, float* y, int N, int K) {
  int lane = threadIdx.x & 31, gwarp = blockIdx.x * 8 + (threadIdx.x >> 5), nwarps = gridDim.x * 8, r0 = gwarp * ROWS;
  uint4 w[ROWS][8];
#ifdef PRELOAD
  if (r0 < N) load_chunk<ROWS>(w, W, r0, K, 0, lane);
#endif
#ifdef EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  asm volatile("griddepcontrol.wait;" ::: "memory");
  __shared__ float xs[8192];
  stage_x(xs, x, K);
  for (int r = r0; r < N; r += nwarps * ROWS) {
    float s[ROWS] = {};
    for (int c = 0; c < K / 256; c += 8) {
#ifdef PRELOAD
      if (r != r0 || c > 0)
#endif
      load_chunk<ROWS>(w, W, r, K, c, lane);
      fma_chunk<ROWS>(s, w, xs, c, lane);
    }
    store_rows<ROWS>(s, y, r, K, lane);
  }
}

__device__ __forceinline__ void grid_sync(unsigned* bar, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(bar, 1u);
    unsigned v;
    do { asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory"); } while (v < target);
  }
  __syncthreads();
}

// the whole chain: phase p is product p % 4 of layer p / 4, reading buf[p % 2], writing buf[(p + 1) % 2]. Before it waits at
// the barrier after a phase, each warp asks for its first rows of the next product: mode 1 of the L2 (a bulk prefetch), mode 2
// into its registers (the loads the next phase starts with: they don't depend on the barrier, only x does)
extern "C" __global__ void __launch_bounds__(256) chain(const unsigned long long* Ws, float* b0, float* b1, unsigned* bar, int epoch,
                                                        int phases, int mode) {
  const int Ns[4] = {3072, 2048, 16384, 2048}, Ks[4] = {2048, 2048, 2048, 8192};
  int lane = threadIdx.x & 31, gwarp = blockIdx.x * 8 + (threadIdx.x >> 5), nwarps = gridDim.x * 8;
  __shared__ float xs[8192];
  uint4 w[ROWS][8];
  bool have = false;  // w holds the first chunk of this warp's first rows of phase p
  for (int p = 0; p < phases; p++) {
    const unsigned short* W = (const unsigned short*)Ws[p];
    int N = Ns[p % 4], K = Ks[p % 4];
    stage_x(xs, p % 2 ? b1 : b0, K);
    float* y = p % 2 ? b0 : b1;
    for (int r = gwarp * ROWS; r < N; r += nwarps * ROWS) {
      float s[ROWS] = {};
      for (int c = 0; c < K / 256; c += 8) {
        if (!have) load_chunk<ROWS>(w, W, r, K, c, lane);
        have = false;
        fma_chunk<ROWS>(s, w, xs, c, lane);
      }
      store_rows<ROWS>(s, y, r, K, lane);
    }
    if (p + 1 < phases && gwarp * ROWS < Ns[(p + 1) % 4]) {
      const unsigned short* next = (const unsigned short*)Ws[p + 1];
      int k = Ks[(p + 1) % 4];
      if (mode == 2) {
        load_chunk<ROWS>(w, next, gwarp * ROWS, k, 0, lane);
        have = true;
      } else if (mode == 1 && lane < ROWS) {
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(next + (size_t)(gwarp * ROWS + lane) * k), "r"(k * 2) : "memory");
      }
    }
    grid_sync(bar, (unsigned)((epoch * phases + p + 1) * gridDim.x));
  }
}

// streamed: a block per SM, a copying warp and 8 computing warps. The copying warp streams this block's weights of every product in
// turn into a ring of SLOTS 16 KB slots (bulk copies, an mbarrier per slot), running ahead of the products' data dependencies
// (weights depend on nothing), held back only by free slots. A block owns groups of 8 rows (g = block, block + grid, ...), a slot
// holds one group's 1024 columns (8 rows of 2 KB); computing warp j takes row j. Before a product the computing warps wait for
// the grid (every block's stores of the product before: a counter), stage x into shared memory, and go through their slots.
#ifndef SLOTS
#define SLOTS 10
#endif
#ifndef COLS
#define COLS 1024
#endif
#define SLOT (8 * COLS * 2)
__device__ __forceinline__ unsigned saddr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mwait(unsigned long long* bar, int parity) {
  asm volatile("{\n .reg .pred p;\n W:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}" :: "r"(saddr(bar)), "r"(parity) : "memory");
}
// TMA: the one copying warp's lanes 0-7 each ask for one row's COLS columns (a bulk copy); the slot's mbarrier expects its bytes
// LDGSTS: the 4 copying warps' threads copy 16-byte chunks ct, ct + 128, ... of the slot (cp.async), each thread's copies counting
// as one arrival at the slot's mbarrier once they have landed (cp.async.mbarrier.arrive.noinc)
template <bool TMA>
__device__ __forceinline__ void copy_slot(unsigned char* dst, unsigned long long* full, const unsigned short* W, int row0, int K, int c, int ct) {
  if (TMA) {
    if (ct == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(saddr(full)), "r"(SLOT) : "memory");
    __syncwarp();
    if (ct < 8)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(saddr(dst + ct * COLS * 2)), "l"(W + (size_t)(row0 + ct) * K + c), "r"(COLS * 2), "r"(saddr(full)) : "memory");
  } else {
    #pragma unroll
    for (int q = ct; q < COLS; q += 128) {  // 8 rows x COLS / 8 chunks
      int j = q / (COLS / 8), e = q % (COLS / 8);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(saddr(dst + j * COLS * 2 + e * 16)), "l"(W + (size_t)(row0 + j) * K + c + e * 8) : "memory");
    }
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(saddr(full)) : "memory");
  }
}

template <bool TMA>
__device__ __forceinline__ void streamed(const unsigned long long* Ws, float* b0, float* b1, unsigned* bar, int epoch, int phases, int wait) {
  const int Ns[4] = {3072, 2048, 16384, 2048}, Ks[4] = {2048, 2048, 2048, 8192};
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* ring = smem;
  float* xs = (float*)(smem + SLOTS * SLOT);
  unsigned long long* full = (unsigned long long*)(smem + SLOTS * SLOT + 8192 * 4);
  unsigned long long* empty = full + SLOTS;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, G = gridDim.x;
  if (threadIdx.x == 0) {
    for (int i = 0; i < SLOTS; i++) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(saddr(full + i)), "r"(TMA ? 1 : 128) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 8;" :: "r"(saddr(empty + i)) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n  fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (warp >= 8) {  // the copying warp(s): every product's slots of this block, in the order the computing warps take them
    int t = 0;
    for (int p = 0; p < phases; p++)
      for (int g = blockIdx.x; g * 8 < Ns[p % 4]; g += G)
        for (int c = 0; c < Ks[p % 4]; c += COLS, t++) {
          int slot = t % SLOTS, use = t / SLOTS;
          if (use > 0) mwait(empty + slot, (use - 1) & 1);
          copy_slot<TMA>(ring + slot * SLOT, full + slot, (const unsigned short*)Ws[p], g * 8, Ks[p % 4], c, threadIdx.x - 256);
        }
    if (!TMA) asm volatile("cp.async.wait_all;" ::: "memory");
    return;
  }
  int t = 0;
  for (int p = 0; p < phases; p++) {
    int N = Ns[p % 4], K = Ks[p % 4];
    const float* x = p % 2 ? b1 : b0;
    float* y = p % 2 ? b0 : b1;
    if (p > 0 && wait && threadIdx.x == 0) {
      unsigned target = (unsigned)((epoch * phases + p) * G), v;
      do { asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory"); } while (v < target);
    }
    asm volatile("bar.sync 1, 256;" ::: "memory");
    for (int i = threadIdx.x * 4; i < K; i += 256 * 4) *(float4*)(xs + i) = __ldcg((const float4*)(x + i));
    asm volatile("bar.sync 1, 256;" ::: "memory");
    for (int g = blockIdx.x; g * 8 < N; g += G) {
      float acc = 0.f;
      for (int c = 0; c < K; c += COLS, t++) {
        int slot = t % SLOTS, use = t / SLOTS;
        mwait(full + slot, use & 1);
        const uint4* row = (const uint4*)(ring + slot * SLOT + warp * COLS * 2);
        #pragma unroll
        for (int i = 0; i < COLS / 256; i++) {
          const float4* xp = (const float4*)(xs + c + (i * 32 + lane) * 8);
          acc += dot8(row[i * 32 + lane], xp[0], xp[1]);
        }
        __syncwarp();
        if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(saddr(empty + slot)) : "memory");
      }
      #pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (lane == 0) y[g * 8 + warp] = acc * (3.4641f * rsqrtf((float)K));
    }
    asm volatile("bar.sync 1, 256;" ::: "memory");
    if (threadIdx.x == 0) { __threadfence(); atomicAdd(bar, 1u); }
  }
}

extern "C" __global__ void __launch_bounds__(288) stream(const unsigned long long* Ws, float* b0, float* b1, unsigned* bar, int epoch, int phases,
                                                         int wait) { streamed<true>(Ws, b0, b1, bar, epoch, phases, wait); }
extern "C" __global__ void __launch_bounds__(384) stream_ld(const unsigned long long* Ws, float* b0, float* b1, unsigned* bar, int epoch,
                                                            int phases, int wait) { streamed<false>(Ws, b0, b1, bar, epoch, phases, wait); }

extern "C" __global__ void fill(unsigned short* p, int n, unsigned seed) {
  for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) {
    unsigned x = (unsigned)i * 0x9E3779B9u + seed * 0x85EBCA6Bu;
    x = (x ^ (x >> 16)) * 0x7FEB352Du; x ^= x >> 15;
    float f = ((x >> 8) * (1.0f / 16777216.0f) - 0.5f);
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); p[i] = h;
  }
}
"""


def tinygrad_chain(shapes: list[tuple[int, int]], reps: int) -> dict:
  """The same 64 products written with tinygrad ops (a float16 W times a float32 x, summed in float32: the decode step's F16
  matrix-vector form), captured by TinyJit: the kernels our compiler generates, in its CUDA graph, on weights of their own."""
  import time

  from tinygrad import Device, Tensor, TinyJit, dtypes
  weights = [(Tensor.rand(n, k, dtype=dtypes.float16) - 0.5).realize() for n, k in shapes]

  @TinyJit
  def chain(x: Tensor) -> Tensor:
    for (n, k), w in zip(shapes, weights): x = (x[:k].reshape(1, k).matmul(w.T, dtype=dtypes.float32) * (3.4641 / k ** 0.5)).reshape(n)
    return x.contiguous()
  x = Tensor.rand(16384).realize()
  for _ in range(3): chain(x)
  best = None
  for _ in range(3):
    Device[Device.DEFAULT].synchronize()
    t = time.perf_counter()
    for _ in range(reps): chain(x)
    Device[Device.DEFAULT].synchronize()
    us = (time.perf_counter() - t) / reps * 1e6
    best = us if best is None else min(best, us)
  assert best is not None
  total = sum(n * k * 2 for n, k in shapes)
  kernels = [ei.runner.spec for ei, _ in chain.captured if ei.runner is not None]  # type: ignore[attr-defined]
  print(f"{'tinygrad':14s} {best:8.1f} us  {total / best / 1e6:6.3f} TB/s  ({len(kernels)} kernels)", file=sys.stderr)
  return {"us": round(best, 1), "tb_s": round(total / best / 1e6, 3), "kernels": len(kernels),
          "forms": sorted({f"{k.name} g{k.global_size} l{k.local_size} {' '.join(map(str, k.opts))}" for k in kernels})}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--layers", type=int, default=16)
  ap.add_argument("--reps", type=int, default=20)
  ap.add_argument("--rows", type=int, default=2, help="rows a warp takes at a time (2 or 4)")
  ap.add_argument("--tinygrad", action="store_true", help="also time the same chain of products as tinygrad's own kernels (TinyJit)")
  ap.add_argument("--only-graphs", action="store_true", help="the kernel-per-product structures only (no persistent or streamed kernel)")
  args = ap.parse_args()
  from tinygrad.device.plugin import KernelLaunch
  from tinygrad_backend_nv.compiler import NVRTCCompiler
  from tinygrad_backend_nv.graph import CUDAGraph
  from tinygrad_backend_nv.runtime import CUDAProgram, Timer, check, cu, device_arch, open_cuda
  dev = open_cuda("CUDA", 0)
  arch = device_arch(0) or "sm_90"
  rows = f"-DROWS={args.rows}"
  lib = NVRTCCompiler(arch, (rows,)).compile(SRC)
  graph_libs = {"graph": lib, "graph_pdl": NVRTCCompiler(arch, ("-DPDL", rows)).compile(SRC),
                "graph_pdl_early": NVRTCCompiler(arch, ("-DPDL", "-DEARLY", rows)).compile(SRC),
                "graph_pdl_preload": NVRTCCompiler(arch, ("-DPDL", "-DEARLY", "-DPRELOAD", rows)).compile(SRC)}
  load = lambda name, lb: CUDAProgram(dev.ctx, name, lb)  # noqa: E731
  chain, fill = load("chain", lib), load("fill", lib)
  alloc = dev.allocator.alloc
  phases = 4 * args.layers
  shapes = [SHAPES[p % 4] for p in range(phases)]
  weights = [alloc(n * k * 2) for n, k in shapes]
  for i, ((n, k), w) in enumerate(zip(shapes, weights)): fill(w, global_size=(1024,), local_size=(256,), vals=(n * k, i + 1))  # type: ignore[arg-type]
  total_bytes = sum(n * k * 2 for n, k in shapes)
  bufs = [alloc(16384 * 4) for _ in range(2)]
  x0 = alloc(16384 * 4)
  fill(x0, global_size=(8,), local_size=(256,), vals=(16384 * 2, 999))  # type: ignore[arg-type]  # 32768 halves' bytes as float bits: small values
  bar = alloc(4)
  ptrs = (ctypes.c_uint64 * phases)(*[int(w) for w in weights])
  wtab = alloc(8 * phases)
  dev.allocator._copyin(wtab, memoryview(ptrs).cast("B"))  # noqa: SLF001
  dev.synchronize()

  def reset() -> None:
    check(cu.cuMemcpyDtoD(bufs[0], x0, 16384 * 4), "cuMemcpyDtoD")
    check(cu.cuMemsetD32(bar, 0, 1), "cuMemsetD32")

  def result() -> bytes:
    out = (ctypes.c_float * 2048)()
    check(cu.cuMemcpyDtoH(ctypes.addressof(out), bufs[phases % 2], 2048 * 4), "cuMemcpyDtoH")
    return bytes(out)

  res: dict = {"benchmark": "gpu_chain_probe", "arch": arch, "rows": args.rows, "layers": args.layers, "products": phases, "bytes": total_bytes}
  sms = check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev.ctx.device), "attr")
  occ = check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(chain.fn, 256, 0), "occupancy")
  res["sms"], res["chain_blocks_per_sm"] = int(sms), int(occ)
  outs: dict[str, bytes] = {}

  def timed(name: str, run) -> None:
    reset()
    run(0)
    dev.synchronize()
    outs[name] = result()
    best = None
    for _ in range(3):
      reset()
      dev.synchronize()
      with Timer(dev) as t:
        for i in range(args.reps): run(i)  # the persistent kernel's barrier counts from the reset: launch i is its epoch
      us = t.seconds / args.reps * 1e6
      best = us if best is None else min(best, us)
    assert best is not None
    got, ref = (memoryview(outs[k]).cast("f") for k in (name, "graph"))
    err = max(abs(a - b) / (abs(b) + 1e-3) for a, b in zip(got, ref))  # the streamed sums go in another order: not bit-equal
    res[name] = {"us": round(best, 1), "tb_s": round(total_bytes / best / 1e6, 3), "same_as_graph": outs[name] == outs["graph"], "max_rel_diff": err}
    print(f"{name:14s} {best:8.1f} us  {total_bytes / best / 1e6:6.3f} TB/s", file=sys.stderr)

  for name, glib in graph_libs.items():
    prg = load("mv", glib)
    launches = [KernelLaunch(prg, (int(w), int(bufs[p % 2]), int(bufs[(p + 1) % 2])), (max(1, n // (8 * args.rows)),), (256,), (n, k))
                for p, ((n, k), w) in enumerate(zip(shapes, weights))]
    g = CUDAGraph(dev.ctx, launches)
    timed(name, lambda _i, g=g: g())
  # resident grids: (name, rows a warp, blocks an SM, launch-bounds minimum, defines)
  both = ("-DEARLY", "-DPRELOAD")
  for name, rws, rb, minb, defs in (("resident_r1_b1", 1, 1, 2, both), ("resident_r2_b1", 2, 1, 2, both), ("resident_r1_b2", 1, 2, 4, both),
                                     ("resident_r2_b1_wait_only", 2, 1, 2, ()), ("resident_r2_b1_early_only", 2, 1, 2, ("-DEARLY",)),
                                     ("resident_r2_b1_preload_only", 2, 1, 2, ("-DPRELOAD",)), ("resident_r2_b1_minb1", 2, 1, 1, both),
                                     ("resident_r4_b1", 4, 1, 2, both), ("resident_r2_b2", 2, 2, 4, both)):
    prg = load("mv_res", NVRTCCompiler(arch, ("-DPDL", f"-DROWS={rws}", f"-DMINB={minb}", *defs)).compile(SRC))
    launches = [KernelLaunch(prg, (int(w), int(bufs[p % 2]), int(bufs[(p + 1) % 2])), (int(sms) * rb,), (256,), (n, k))
                for p, ((n, k), w) in enumerate(zip(shapes, weights))]
    g = CUDAGraph(dev.ctx, launches)
    timed(name, lambda _i, g=g: g())
  if args.tinygrad: res["tinygrad"] = tinygrad_chain(shapes, args.reps)
  if args.only_graphs:
    print(json.dumps(res))
    return
  grid = (int(sms) * int(occ),)
  for name, pf in (("persistent", 0), ("persistent_pf", 1), ("persistent_preload", 2)):
    # the barrier's count grows by the grid per phase, across launches: the epoch is the launch's number since the reset
    timed(name, lambda i, pf=pf: chain(int(wtab), int(bufs[0]), int(bufs[1]), int(bar), global_size=grid, local_size=(256,),  # type: ignore[arg-type]
                                       vals=(i, phases, pf)))
  # streamed: its own launch (dynamic shared memory past 48 KB), a block per SM; slots of 8 rows x COLS columns
  variants = [("stream", 1024, 10, 1), ("stream", 2048, 6, 1), ("stream", 1024, 12, 0), ("stream_ld", 1024, 10, 1), ("stream_ld", 1024, 12, 1),
              ("stream_ld", 2048, 6, 1), ("stream_ld", 1024, 12, 0)]
  for kname, cols, slots, wait in variants:
    stream = load(kname, NVRTCCompiler(arch, (rows, f"-DCOLS={cols}", f"-DSLOTS={slots}")).compile(SRC))
    smem = slots * 8 * cols * 2 + 8192 * 4 + 2 * slots * 8
    check(cu.cuFuncSetAttribute(stream.fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), "cuFuncSetAttribute")

    def run_stream(i: int, stream=stream, smem=smem, wait=wait) -> None:
      vals = [ctypes.c_uint64(int(v)) for v in (wtab, bufs[0], bufs[1], bar)] + [ctypes.c_int32(v) for v in (i, phases, wait)]
      params = (ctypes.c_void_p * len(vals))(*(ctypes.addressof(v) for v in vals))
      threads = 288 if stream.name == "stream" else 384
      check(cu.cuLaunchKernel(stream.fn, int(sms), 1, 1, threads, 1, 1, smem, 0, ctypes.addressof(params), 0), "cuLaunchKernel(stream)")
    timed(f"{'streamed' if kname == 'stream' else 'streamed_ld'}_c{cols}_s{slots}" + ("" if wait else "_nowait"), run_stream)
  print(json.dumps(res))


if __name__ == "__main__": main()
