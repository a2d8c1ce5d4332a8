"""Probe: a whole Llama-1B decode step as one streamed kernel -- what issue 18's megakernel would reach on this GPU.

  DEV=CUDA python3 bench/gpu_step_probe.py [--positions 72] [--reps 10]

A measurement for planning, not a tinygrad kernel. gpu_chain_probe.py timed the step's 64 layer products alone in several
structures; the fastest, `streamed_ld` (a block per SM: 4 copying warps stream the block's rows of every product into a ring of
shared-memory slots, running ahead of the data dependencies, while 8 computing warps wait only for their input vector), took
560 us on the H200 against 613 for our own kernels. A decode step has more between its products: two RMSNorms a layer, the
attention over the cache, residual adds, SiLU, the output matrix (525 MB) and the greedy argmax. Here they are phases of the
same kernel, with its synchronization (a grid-wide counter a phase):
  per layer  q/k/v product of rmsnorm(h) | attention: a block a query head (32), the cache's 72 positions and the token's own,
             the other blocks only pass | o product, h += | gate/up product of rmsnorm(h) | down product of silu(gate) * up, h +=
  then       the output matrix's product of rmsnorm(h), each block keeping its rows' best logit | the argmax of the blocks' bests
The norms are computed by every block while it stages its input vector (2048 values: cheaper than a phase). Not modelled: RoPE
and the cache write (a few hundred bytes a layer), the norms' weights (ones), sampling. The weights are the chain probe's random
halves (the products scaled to keep the values' size); the result is checked for being finite and the same token in every
repetition, not against a reference. Variants: the attention's work off (an empty phase), the cache not prefetched, the norms
skipped, the computing warps waiting for nothing (wrong values: what the stream and the work reach without the dependencies) and
also doing no dot products (the stream alone), and the weights converted by bit moves instead of cvt instructions.
Prints JSON: us a step and the bytes' rate (2.47 GB a step), beside `streamed_ld`'s products alone from the same process.

Build options (session 29): --warps 16 (16 computing warps, slots of 16 rows; with --cols 512 the slots keep their 16 KB),
--xperm (x in shared memory laid out for conflict-free 16-byte reads), --mma (the products on tensor cores: x as two halves, hi
and lo, the A operand's two rows; the weights as B by ldmatrix from XOR-swizzled slots; needs --warps 16 --cols 512 --no-xregs),
--no-xregs (without the x-in-registers path, flag 128: fewer registers), --dot2 (two accumulators a lane), --copy-warps N,
--tma (a bulk copy a row instead of 16-byte cp.async). Variant flags (the kernel's comment has them all): 512 (silu(gate) * up in
the gate/up product's epilogue), 1024 (release adds for the phase counters), 2048 (q/k/v split by columns), 4096 (the
attention's token loads together), 8192 (the cache prefetched a layer ahead), 16384 (row groups rotated a phase). --timeline: one more launch
with %globaltimer stamps a phase a block, summarized by phase kind (sync, stage, rows, straggle). --save-h / --ref-h: h after one
step of another build, to check --mma's values against the float path's.
  DEV=CUDA python3 bench/gpu_step_probe.py --warps 16 --cols 512 --no-xregs --xperm --only step_lean,step_lean_fused_rel --timeline
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_chain_probe import SRC as CHAIN_SRC  # noqa: E402  (the streamer's helpers: dot8, saddr, mwait, copy_slot)

D, HEADS, KV_HEADS, HEAD_DIM, FF, VOCAB = 2048, 32, 8, 64, 8192, 128256
QKV, ATTN, O, GATE_UP, DOWN, HEAD, ARGMAX = range(7)  # phase kinds

STEP_SRC = r"""
struct Phase { const unsigned short* w; int kind, n, k, layer; };
#ifndef CW
#define CW 8  // computing warps: a slot holds CW rows, computing warp j takes row j
#endif
#define NT (CW * 32)  // computing threads
#ifndef XREGS
#define XREGS 1  // build the x-in-registers path (flag 128)
#endif
#define KV_MAX 80  // cache positions the shared-memory copy holds
#define RED (16 + NT)  // floats of partials
#undef SLOT
#define SLOT (CW * COLS * 2)
#define CSYNC() asm volatile("bar.sync 1, %0;" :: "n"(NT) : "memory")  // the computing warps alone

#ifndef MMA
#define MMA 0  // the products on tensor cores (below)
#endif
// a row's 16-byte chunk's place in its slot row: MMA swizzles it by the row (ldmatrix's 8 rows then hit 8 different banks)
__device__ __forceinline__ int swz(int row, int chunk) { return MMA ? chunk ^ (row & 7) : chunk; }

#ifndef CPW
#define CPW 4  // copying warps
#endif
#ifndef BULK
#define BULK 0  // the slots filled by bulk copies (a row's COLS columns each), not 16-byte cp.async
#endif
#define CT (CPW * 32)  // copying threads
// the copying warps' threads copy 16-byte chunks ct, ct + CT, ... of the slot (cp.async), each thread's copies counting as
// one arrival at the slot's mbarrier once they have landed. BULK: lanes 0 .. CW - 1 of the first copying warp each ask for one
// row (cp.async.bulk), the slot's mbarrier expecting its bytes
__device__ __forceinline__ void copy_rows(unsigned char* dst, unsigned long long* full, const unsigned short* W, int row0, int K, int c, int ct) {
  if (BULK) {
    if (ct >= 32) return;
    if (ct == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(saddr(full)), "r"(CW * COLS * 2) : "memory");
    __syncwarp();
    if (ct < CW)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(saddr(dst + ct * COLS * 2)), "l"(W + (size_t)(row0 + ct) * K + c), "r"(COLS * 2), "r"(saddr(full)) : "memory");
    return;
  }
  #pragma unroll
  for (int q = ct; q < CW * COLS / 8; q += CT) {
    int j = q / (COLS / 8), e = q % (COLS / 8);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(saddr(dst + j * COLS * 2 + swz(j, e) * 16)), "l"(W + (size_t)(row0 + j) * K + c + e * 8) : "memory");
  }
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(saddr(full)) : "memory");
}

// where x's 4 columns from `col` (a multiple of 4) sit in shared memory. XPERM: each 256 columns are laid out so that a warp's
// lanes, lane l taking columns l * 8 .. l * 8 + 7 of them, read their first 4 (then their last 4) as 32 consecutive 16-byte
// words: no bank conflicts (plainly, the lanes' 16-byte loads are 32 bytes apart: twice the shared-memory wavefronts)
#ifndef XPERM
#define XPERM 0
#endif
__device__ __forceinline__ int xpos(int col) {
  if (!XPERM) return col;
  int q = (col & 255) >> 2;  // the 4-column group: lane q / 2, half q % 2
  return (col & ~255) + (q & 1) * 128 + (q >> 1) * 4;
}
// a lane's two float4 of x for columns `col` .. col + 7 (col = 256 * block + 8 * lane)
__device__ __forceinline__ void xload(const float* xs, int col, float4& a, float4& b) {
  if (XPERM) { const float* base = xs + (col & ~255) + ((col & 255) >> 3) * 4; a = *(const float4*)base; b = *(const float4*)(base + 128); }
  else { const float4* xp = (const float4*)(xs + col); a = xp[0]; b = xp[1]; }
}

// MMA: the products on tensor cores (mma.sync m16n8k16, float32 sums). x is staged as two halves, hi = half(x) and lo =
// half(x - hi) (about 22 bits of x, as exact as the float path's products for these magnitudes), the A operand's rows 0 and 1
// (the other 14 zero); the weights are B, 8 rows of a slot a warp, read by ldmatrix from slots whose 16-byte chunks the copying
// warps placed XOR-swizzled by row (conflict-free). A slot holds 16 rows x 512 columns: warp w takes rows (w / 8) * 8 .. + 7 and
// columns (w % 8) * 64 .. + 63; the 8 warps of a row's slab add up through shared memory once a row group
__device__ __forceinline__ unsigned short f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
// x's 4 values from column `col` into the staged vector: floats (plain or XPERM), or (MMA) their hi and lo halves where lane
// (m = 0 hi / 1 lo, q) of a warp finds its A registers a0 and a2 of k-block col / 16 as one 8-byte word
__device__ __forceinline__ void put4(float* xs, int col, float4 v) {
  if (!MMA) { *(float4*)(xs + xpos(col)) = v; return; }
  unsigned short* xp = (unsigned short*)xs;
  float e[4] = {v.x, v.y, v.z, v.w};
  #pragma unroll
  for (int i = 0; i < 4; i += 2) {  // columns col + i, col + i + 1: one 32-bit word of hi halves, one of lo
    int k = (col + i) & 15, at = ((col + i) >> 4) * 32 + ((k & 7) >> 1) * 4 + ((k >> 3) << 1);
    unsigned hi, lo;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(e[i + 1]), "f"(e[i]));
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(e[i + 1] - h2f(hi >> 16)), "f"(e[i] - h2f(hi & 0xffff)));
    *(unsigned*)(xp + at) = hi;
    *(unsigned*)(xp + at + 16) = lo;
  }
}
// DOT2: a 16-byte chunk's two halves summed into two accumulators (two dependent chains of 4 + 1, not one of 8 + 1)
#ifndef DOT2
#define DOT2 0
#endif
__device__ __forceinline__ float dot4_lo(uint4 w, float4 a) { return h2f(w.x & 0xffff) * a.x + h2f(w.x >> 16) * a.y + h2f(w.y & 0xffff) * a.z + h2f(w.y >> 16) * a.w; }
__device__ __forceinline__ float dot4_hi(uint4 w, float4 b) { return h2f(w.z & 0xffff) * b.x + h2f(w.z >> 16) * b.y + h2f(w.w & 0xffff) * b.z + h2f(w.w >> 16) * b.w; }

__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.f + __expf(-g)) * u; }

// x for the coming product into shared memory: rmsnorm(h), the attention's output, or silu(gate) * up. Every block stages the
// whole vector (read past L1: other blocks wrote it in this kernel); each thread's loads are issued before any use (one L2
// round trip a stage, not one a loop step)
__device__ void stage(float* xs, float* red, int kind, const float* h, const float* attn, const float* gu) {
  int t = threadIdx.x;
  if (kind == 2) {
    float4 v[2048 / (NT * 4)];
    #pragma unroll
    for (int j = 0; j < 2048 / (NT * 4); j++) v[j] = __ldcg((const float4*)(attn + t * 4 + j * NT * 4));
    #pragma unroll
    for (int j = 0; j < 2048 / (NT * 4); j++) put4(xs, t * 4 + j * NT * 4, v[j]);
    return;
  }
  if (kind == 4) {
    float4 g[8192 / (NT * 4)], u[8192 / (NT * 4)];
    #pragma unroll
    for (int j = 0; j < 8192 / (NT * 4); j++) { g[j] = __ldcg((const float4*)(gu + t * 4 + j * NT * 4)); u[j] = __ldcg((const float4*)(gu + 8192 + t * 4 + j * NT * 4)); }
    #pragma unroll
    for (int j = 0; j < 8192 / (NT * 4); j++)
      put4(xs, t * 4 + j * NT * 4, make_float4(silu_mul(g[j].x, u[j].x), silu_mul(g[j].y, u[j].y), silu_mul(g[j].z, u[j].z), silu_mul(g[j].w, u[j].w)));
    return;
  }
  float ss = 0.f;
  float4 v[2048 / (NT * 4)];
  #pragma unroll
  for (int j = 0; j < 2048 / (NT * 4); j++) v[j] = __ldcg((const float4*)(h + t * 4 + j * NT * 4));
  #pragma unroll
  for (int j = 0; j < 2048 / (NT * 4); j++) ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((t & 31) == 0) red[t >> 5] = ss;
  CSYNC();
  float tot = 0.f;
  for (int i = 0; i < CW; i++) tot += red[i];
  float scale = rsqrtf(tot / 2048.f + 1e-5f);
  #pragma unroll
  for (int j = 0; j < 2048 / (NT * 4); j++) put4(xs, t * 4 + j * NT * 4, make_float4(v[j].x * scale, v[j].y * scale, v[j].z * scale, v[j].w * scale));
}

// fused (flag 512): down's x, the gate/up product's silu(gate) * up, staged as it is
__device__ void stage_act(float* xs, const float* act) {
  int t = threadIdx.x;
  float4 v[8192 / (NT * 4)];
  #pragma unroll
  for (int j = 0; j < 8192 / (NT * 4); j++) v[j] = __ldcg((const float4*)(act + t * 4 + j * NT * 4));
  #pragma unroll
  for (int j = 0; j < 8192 / (NT * 4); j++) put4(xs, t * 4 + j * NT * 4, v[j]);
}

// this block's query head's keys and values of layer `layer` (kv head hd / 4) into shared memory, 16-byte cp.async copies not
// waited for: issued before the layer's q/k/v product, they land while it runs (the cache doesn't depend on this step)
__device__ void prefetch_kv(unsigned short* kvs, const unsigned short* kc, const unsigned short* vc, int hd, int P) {
  int kv = hd / 4, chunks = P * 64 * 2 / 16;
  const unsigned short* srcs[2] = {kc + (size_t)kv * P * 64, vc + (size_t)kv * P * 64};
  for (int i = threadIdx.x; i < 2 * chunks; i += NT) {
    int which = i / chunks, e = i % chunks;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(saddr(kvs + which * P * 64 + e * 8)), "l"(srcs[which] + e * 8) : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// one query head over the cache's P positions and the token's own (from qkv): scores, softmax, weighted values. kh, vh: the
// kv head's P x 64 keys and values (shared memory where prefetched, else the cache)
__device__ void attention(int hd, const float* qkv, const unsigned short* kh, const unsigned short* vh, float* out, float* sc, float* red, float* tok, int P, int tok_first) {
  int t = threadIdx.x, warp = t >> 5, lane = t & 31, kv = hd / 4;
  // the token's query row, key and value (this step's q/k/v product) into shared memory first: one round trip, not three
  // (flag 4096; else each where it is used, as session 28's kernel did: three dependent round trips)
  if (!tok_first) {
    if (t < 64) tok[t] = __ldcg(qkv + hd * 64 + t);
    CSYNC();
  } else {
    if (t < 192) tok[t] = __ldcg(qkv + (t < 64 ? hd * 64 + t : t < 128 ? 2048 + kv * 64 + t - 64 : 2560 + kv * 64 + t - 128));
    CSYNC();
  }
  float q0 = tok[lane] * 0.125f, q1 = tok[lane + 32] * 0.125f;
  for (int p = warp; p <= P; p += CW) {
    float k0, k1;
    if (p < P) { k0 = h2f(kh[p * 64 + lane]); k1 = h2f(kh[p * 64 + lane + 32]); }
    else if (tok_first) { k0 = tok[64 + lane]; k1 = tok[96 + lane]; }
    else { k0 = __ldcg(qkv + 2048 + kv * 64 + lane); k1 = __ldcg(qkv + 2048 + kv * 64 + lane + 32); }
    float s = q0 * k0 + q1 * k1;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) sc[p] = s;
  }
  CSYNC();
  if (warp == 0) {
    float m = -1e30f;
    for (int p = lane; p <= P; p += 32) m = fmaxf(m, sc[p]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.f;
    for (int p = lane; p <= P; p += 32) { float e = __expf(sc[p] - m); sc[p] = e; sum += e; }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) red[8] = 1.f / sum;
  }
  CSYNC();
  int d = t & 63, part = t >> 6;
  float acc = 0.f;
  for (int p = part; p <= P; p += NT / 64) acc += sc[p] * (p < P ? h2f(vh[p * 64 + d]) : tok_first ? tok[128 + d] : __ldcg(qkv + 2560 + kv * 64 + d));
  red[16 + t] = acc;
  CSYNC();
  if (t < 64) {
    float o = 0.f;
    for (int i = 0; i < NT / 64; i++) o += red[16 + i * 64 + t];
    out[hd * 64 + t] = o * red[8];
  }
}

// dot8 without cvt instructions (flag 64): a half's exponent and mantissa moved into a float's, the value 2^-112 of the half's
// (exact, zero and subnormals included); the sum is scaled back by 2^112. Integer and float ops at full rate, where cvt.f32.f16
// is a quarter-rate op on sm_90
__device__ __forceinline__ float lo_h(unsigned u) { return __int_as_float(((u << 16) & 0x80000000u) | ((u << 13) & 0x0fffe000u)); }
__device__ __forceinline__ float hi_h(unsigned u) { return __int_as_float((u & 0x80000000u) | ((u >> 3) & 0x0fffe000u)); }
__device__ __forceinline__ float dot8_bits(uint4 w, float4 a, float4 b) {
  return lo_h(w.x) * a.x + hi_h(w.x) * a.y + lo_h(w.y) * a.z + hi_h(w.y) * a.w + lo_h(w.z) * b.x + hi_h(w.z) * b.y + lo_h(w.w) * b.z + hi_h(w.w) * b.w;
}

// flag 2048: q/k/v's row groups in two halves of their columns (384 parts on the blocks, not 192: the phase's straggle)
__device__ __forceinline__ int splits(int flags, int kind) { return (flags & 2048) && kind == 0 ? 2 : 1; }

// this block's first row group of a phase. Plainly block b takes groups b, b + G, ...: the low blocks take the extra group of
// every phase whose groups don't divide evenly (q/k/v's 192, o's and down's 128 on 132 blocks), 15 units of weights a layer
// against 8 for the last blocks. Flag 16384 rotates each phase's start by the units (16 rows x 2048 columns) of the phases
// before it, so the extras go round
__device__ __forceinline__ int first_unit(int flags, int& off, const Phase& ph, int G) {
  int start = flags & 16384 ? off : 0;
  if (ph.w) off = (off + ph.n / CW * (ph.k / 2048)) % G;
  return ((int)blockIdx.x - start + G) % G;
}

__device__ __forceinline__ unsigned long long now_ns() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

__device__ __forceinline__ void wait_at_least(unsigned* counter, unsigned target) {
  unsigned v;
  do { asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory"); } while (v < target);
}

extern "C" __global__ void __launch_bounds__(NT + CT) step(const Phase* phases, int n_phases, float* h, float* qkv, float* attn, float* gu,
    float* logits, float* best, int* token, const unsigned short* kcache, const unsigned short* vcache, int P, unsigned* bar, int epoch,
    int flags, unsigned* abar, int n_main, int n_layers, unsigned long long* stamps) {
  // flags: 1 the attention's work, 2 its keys and values prefetched into shared memory, 4 the norms skipped, 8 lean: the
  // residuals staged with the input (not loaded after each row's sum), and the attention synchronized by a counter of its own
  // (the 32 attention blocks wait for the q/k/v product, the o product for them; no grid-wide phase for it)
  // 16: the computing warps wait for nothing (wrong values: the stream and the work without the dependencies), 32: and do no
  // dot products (they only free the slots: the stream alone)
  // 64: the weights converted by bit moves, not cvt (dot8_bits); 128: x of a 2048-column product in registers (bits ignored there)
  // 256: timestamps; 512: silu(gate) * up in the gate/up product's epilogue (rows 2i and 2i + 1 are gate i and up i), down
  // stages the 8192 products; 1024: the phase counters by a release add; 2048: q/k/v split in two by columns (atomic adds);
  // 4096: the attention loads the token's q, k and v together first; 8192: the cache prefetched a layer ahead (during o);
  // 16384: each phase's row groups start where the phase before's ended (first_unit)
  int attn_work = flags & 1, prefetch = flags & 2, norm = !(flags & 4), lean = flags & 8, waits = !(flags & 16), math = !(flags & 32);
  int bits = flags & 64, xregs = flags & 128, fused = flags & 512, rel = flags & 1024, early_kv = flags & 8192;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* ring = smem;
  float* xs = (float*)(smem + SLOTS * SLOT);
  float* red = xs + 8192;  // RED floats of partials
  float* sc = red + RED;   // attention scores (P + 1 <= 128)
  unsigned short* kvs = (unsigned short*)(sc + 128);  // the head's keys and values (P <= KV_MAX)
  float* hs = (float*)(kvs + 2 * KV_MAX * 64);  // h, for the residual adds (lean)
  unsigned long long* full = (unsigned long long*)(hs + 2048);
  unsigned long long* empty = full + SLOTS;
  unsigned long long* cbar = empty + SLOTS;  // MMA: a row group's partials written, one barrier a buffer (4)
  float* cbuf = (float*)(cbar + 4);  // MMA: 4 buffers of 16 rows x 8 warps' partials
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, G = gridDim.x;
  if (threadIdx.x == 0) {
    for (int i = 0; i < SLOTS; i++) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(saddr(full + i)), "n"(BULK ? 1 : CT) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(saddr(empty + i)), "n"(CW) : "memory");
    }
    for (int i = 0; i < 4; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(saddr(cbar + i)), "n"(CW) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n  fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (warp >= CW) {  // the copying warps: every product's rows of this block, in the order the computing warps take them
    int t = 0;
    int off = 0;
    for (int p = 0; p < n_phases; p++) {
      Phase ph = phases[p];
      int first = first_unit(flags, off, ph, G);
      if (ph.w == 0) continue;
      int sp = splits(flags, ph.kind), kc = ph.k / sp;
      for (int u = first; u < ph.n / CW * sp; u += G)
        for (int c = u % sp * kc; c < (u % sp + 1) * kc; c += COLS, t++) {
          int g = u / sp;
          int slot = t % SLOTS, use = t / SLOTS;
          if (use > 0) mwait(empty + slot, (use - 1) & 1);
          copy_rows(ring + slot * SLOT, full + slot, ph.w, g * CW, ph.k, c, threadIdx.x - NT);
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    return;
  }
  int rg = 0;  // row groups done (MMA and flag 512: which of the 4 partial buffers)
  int t = 0, m = 0;  // slots taken; grid-wide phases done in this launch (all of them unless lean)
  float mine = -1e30f; int mine_at = 0;  // this warp's best logit so far (output matrix)
  int off = 0;
  for (int p = 0; p < n_phases; p++) {
    Phase ph = phases[p];
    int first = first_unit(flags, off, ph, G);
    if (lean && ph.kind == 1) {  // the attention blocks alone, after every block's q/k/v rows; then their own counter
      if (blockIdx.x >= 32) continue;
      if (threadIdx.x == 0 && waits) wait_at_least(bar, (unsigned)((epoch * n_main + m) * G));
    } else if (p > 0 && threadIdx.x == 0 && waits) {  // every block's phase before is done (lean: the o product waits for the attention's)
      if (lean && ph.kind == 2) wait_at_least(abar, (unsigned)((epoch * n_layers + ph.layer + 1) * 32));
      else wait_at_least(bar, (unsigned)((epoch * n_main + m) * G));
    }
    CSYNC();
    if (stamps && threadIdx.x == 0) stamps[(p * G + blockIdx.x) * 3] = now_ns();  // released (the phase before done)
    const unsigned short* kl = kcache + (size_t)ph.layer * 8 * P * 64, *vl = vcache + (size_t)ph.layer * 8 * P * 64;
    if (attn_work && prefetch && blockIdx.x < 32) {
      // the head's cache into shared memory: as the layer's q/k/v product starts, or (flag 8192) as the layer before's o product
      // starts, right after its attention (long landed by the time it is read: not behind the stream's requests)
      if (ph.kind == 0 && (!early_kv || ph.layer == 0)) prefetch_kv(kvs, kl, vl, blockIdx.x, P);
      if (ph.kind == 2 && early_kv && ph.layer + 1 < n_layers) prefetch_kv(kvs, kl + (size_t)8 * P * 64, vl + (size_t)8 * P * 64, blockIdx.x, P);
    }
    if (ph.kind == 1) {
      if (attn_work && blockIdx.x < 32) {
        if (prefetch) {
          asm volatile("cp.async.wait_all;" ::: "memory");
          CSYNC();
          attention(blockIdx.x, qkv, kvs, kvs + P * 64, attn, sc, red, cbuf, P, flags & 4096);
        } else {
          attention(blockIdx.x, qkv, kl + (size_t)(blockIdx.x / 4) * P * 64, vl + (size_t)(blockIdx.x / 4) * P * 64, attn, sc, red, cbuf, P, flags & 4096);
        }
      }
    } else if (ph.kind == 6) {
      if (blockIdx.x == 0 && warp == 0) {  // the blocks' bests: a lane a few of them, then the warp's best (lowest index on ties)
        float b = -1e30f; int at = 0x7fffffff;
        for (int i = lane; i < G; i += 32) { float v = __ldcg(best + 2 * i); int a = (int)__ldcg(best + 2 * i + 1); if (v > b || (v == b && a < at)) { b = v; at = a; } }
        for (int o = 16; o > 0; o >>= 1) {
          float v = __shfl_xor_sync(0xffffffffu, b, o); int a = __shfl_xor_sync(0xffffffffu, at, o);
          if (v > b || (v == b && a < at)) { b = v; at = a; }
        }
        if (lane == 0) *token = at;
      }
    } else {
      if ((flags & 2048) && ph.kind == 3)  // the next layer's q/k/v sums start from 0 (this layer's attention has read them)
        for (int i = blockIdx.x * NT + threadIdx.x; i < 3072; i += G * NT) qkv[i] = 0.f;
      if (fused && ph.kind == 4) stage_act(xs, gu);
      else stage(xs, red, ph.kind == 2 || ph.kind == 4 || norm ? ph.kind : 2, h, ph.kind == 2 || ph.kind == 4 ? attn : h, gu);
      if (lean && (ph.kind == 2 || ph.kind == 4))
        for (int i = threadIdx.x * 4; i < 2048; i += NT * 4) *(float4*)(hs + i) = __ldcg((const float4*)(h + i));
      CSYNC();
      if (stamps && threadIdx.x == 0) stamps[(p * G + blockIdx.x) * 3 + 1] = now_ns();  // x staged
      float scale = 3.4641f * rsqrtf((float)ph.k) * (bits ? 0x1p112f : 1.f);
      int in_regs = XREGS && xregs && ph.k == 2048 && splits(flags, ph.kind) == 1;
      float xr[64];  // this lane's 64 columns of x for a 2048-column product (flag 128), read from shared memory once a phase
      if (in_regs) {
        #pragma unroll
        for (int j = 0; j < 8; j++) {  // chunk j: slot j / (COLS / 256), step j % (COLS / 256) of dot loop below
          float4 a, b;
          xload(xs, (j / (COLS / 256)) * COLS + ((j % (COLS / 256)) * 32 + lane) * 8, a, b);
          xr[j * 8] = a.x; xr[j * 8 + 1] = a.y; xr[j * 8 + 2] = a.z; xr[j * 8 + 3] = a.w;
          xr[j * 8 + 4] = b.x; xr[j * 8 + 5] = b.y; xr[j * 8 + 6] = b.z; xr[j * 8 + 7] = b.w;
        }
      }
      int sp = splits(flags, ph.kind), kc = ph.k / sp;  // a row group's columns in sp parts (flag 2048: q/k/v's in 2, added up in qkv)
      for (int u = first; u < ph.n / CW * sp; u += G) {
        int g = u / sp, c0 = u % sp * kc;
        float acc = 0.f, acc2 = 0.f;
        if (in_regs) {
          #pragma unroll
          for (int ci = 0; ci < 2048 / COLS; ci++, t++) {
            int slot = t % SLOTS, use = t / SLOTS;
            mwait(full + slot, use & 1);
            const uint4* row = (const uint4*)(ring + slot * SLOT + warp * COLS * 2);
            if (math) {
              #pragma unroll
              for (int i = 0; i < COLS / 256; i++) {
                int j = ci * (COLS / 256) + i;
                acc += dot8(row[i * 32 + lane], make_float4(xr[j * 8], xr[j * 8 + 1], xr[j * 8 + 2], xr[j * 8 + 3]),
                            make_float4(xr[j * 8 + 4], xr[j * 8 + 5], xr[j * 8 + 6], xr[j * 8 + 7]));
              }
            }
            __syncwarp();
            if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(saddr(empty + slot)) : "memory");
          }
        } else if (MMA) {
          float d[4][4] = {};  // 4 accumulators (one a k-block of the slot's 4): 4 shorter chains of dependent mma, not 1 long one
          const int slab = warp >> 3, q = warp & 7, j = slab * 8 + (lane & 7);
          const unsigned short* xp = (const unsigned short*)xs;
          for (int c = c0; c < c0 + kc; c += COLS, t++) {
            int slot = t % SLOTS, use = t / SLOTS;
            mwait(full + slot, use & 1);
            if (math) {
              unsigned char* sl = ring + slot * SLOT + j * COLS * 2;
              #pragma unroll
              for (int h2 = 0; h2 < 2; h2++) {  // 32 columns: ldmatrix.x4 gives both k-blocks' B registers
                unsigned b0, b1, b2, b3;
                int chunk = (q * 64 + h2 * 32) / 8 + (lane >> 3);
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                             : "r"(saddr(sl + swz(j, chunk) * 16)));
                #pragma unroll
                for (int kb2 = 0; kb2 < 2; kb2++) {
                  int kb = (c + q * 64 + h2 * 32 + kb2 * 16) >> 4;
                  uint2 a = lane < 8 ? *(const uint2*)(xp + kb * 32 + (lane >> 2) * 16 + (lane & 3) * 4) : make_uint2(0u, 0u);
                  unsigned zero = 0u;
                  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                               : "+f"(d[h2 * 2 + kb2][0]), "+f"(d[h2 * 2 + kb2][1]), "+f"(d[h2 * 2 + kb2][2]), "+f"(d[h2 * 2 + kb2][3])
                               : "r"(a.x), "r"(zero), "r"(a.y), "r"(zero), "r"(kb2 ? b2 : b0), "r"(kb2 ? b3 : b1));
                }
              }
            }
            __syncwarp();
            if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(saddr(empty + slot)) : "memory");
          }
          // rows slab * 8 + n: hi sums in lanes 0-3 (n = lane * 2, + 1), lo sums 4 lanes up; the slab's 8 warps through shared memory
          float s0 = (d[0][0] + d[1][0]) + (d[2][0] + d[3][0]), s1 = (d[0][1] + d[1][1]) + (d[2][1] + d[3][1]);
          float v0 = s0 + __shfl_down_sync(0xffffffffu, s0, 4), v1 = s1 + __shfl_down_sync(0xffffffffu, s1, 4);
          // (buffer rg % 4: the other warps go on; no warp gets 4 row groups ahead of warp 0, which sums and stores, for the ring
          // holds fewer slots than 3 row groups take)
          float* buf = cbuf + (rg & 3) * 128;
          if (lane < 4) { buf[slab * 64 + q * 8 + lane * 2] = v0; buf[slab * 64 + q * 8 + lane * 2 + 1] = v1; }
          __syncwarp();
          if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(saddr(cbar + (rg & 3))) : "memory");
          acc = 0.f;
          if (warp == 0) {
            mwait(cbar + (rg & 3), (rg >> 2) & 1);
            if (threadIdx.x < 16)
              for (int i = 0; i < 8; i++) acc += buf[(threadIdx.x >> 3) * 64 + i * 8 + (threadIdx.x & 7)];
          }
          rg++;
        } else
        for (int c = c0; c < c0 + kc; c += COLS, t++) {
          int slot = t % SLOTS, use = t / SLOTS;
          mwait(full + slot, use & 1);
          const uint4* row = (const uint4*)(ring + slot * SLOT + warp * COLS * 2);
          if (math) {
            #pragma unroll
            for (int i = 0; i < COLS / 256; i++) {
              float4 a, b;
              xload(xs, c + (i * 32 + lane) * 8, a, b);
              if (DOT2) { acc += dot4_lo(row[i * 32 + lane], a); acc2 += dot4_hi(row[i * 32 + lane], b); }
              else acc += bits ? dot8_bits(row[i * 32 + lane], a, b) : dot8(row[i * 32 + lane], a, b);
            }
          }
          __syncwarp();
          if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(saddr(empty + slot)) : "memory");
        }
        acc += acc2;
        if (!MMA) for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        int r = g * CW + (MMA ? threadIdx.x : warp);  // the row this thread stores (MMA: threads 0-15, else each warp's lane 0)
        if (fused && ph.kind == 3) {  // rows 2i, 2i + 1: gate i, up i -> act[i]
          float y = acc * scale, other;
          if (MMA) other = __shfl_xor_sync(0xffffffffu, y, 1);
          else {
            float* pb = cbuf + (rg & 3) * 128;
            if (lane == 0) pb[warp] = y;
            CSYNC();
            other = pb[warp ^ 1];
            rg++;
          }
          if ((MMA ? threadIdx.x < 16 : lane == 0) && math && (r & 1) == 0) gu[r >> 1] = y / (1.f + __expf(-y)) * other;
        } else
        if ((MMA ? threadIdx.x < 16 : lane == 0) && math) {
          float y = acc * scale;
          if (ph.kind == 0) { if (sp > 1) atomicAdd(qkv + r, y); else qkv[r] = y; }
          else if (ph.kind == 3) gu[r] = y;
          else if (ph.kind == 5) { logits[r] = y; if (y > mine) { mine = y; mine_at = r; } }
          else h[r] = (lean ? hs[r] : __ldcg(h + r)) + y;  // o and down: the residual (row r is this warp's alone)
        }
      }
      if (ph.kind == 5) {  // the block's best of its warps' bests
        if (MMA ? threadIdx.x < 16 : lane == 0) { red[MMA ? threadIdx.x : warp] = mine; red[16 + (MMA ? threadIdx.x : warp)] = (float)mine_at; }
        CSYNC();
        if (threadIdx.x == 0) {
          float b = red[0]; int at = (int)red[16];
          for (int i = 1; i < CW; i++) if (red[i] > b) { b = red[i]; at = (int)red[16 + i]; }
          best[2 * blockIdx.x] = b; best[2 * blockIdx.x + 1] = (float)at;
        }
      }
    }
    CSYNC();
    if (stamps && threadIdx.x == 0) stamps[(p * G + blockIdx.x) * 3 + 2] = now_ns();  // this block's part done
    if (threadIdx.x == 0) {  // the block's part is done: count it (rel: a release add, not a full fence and an atomic)
      unsigned* ctr = lean && ph.kind == 1 ? abar : bar;
      if (rel) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(ctr) : "memory");
      else { __threadfence(); atomicAdd(ctr, 1u); }
    }
    if (!(lean && ph.kind == 1)) m++;
  }
}
"""


def phase_table(layers: int, weights: list[dict[str, int]], head: int) -> list[tuple[int, int, int, int, int]]:
  """(weight pointer or 0, kind, rows, columns, layer) per phase, in the step's order (head 0: without the output matrix)."""
  out = []
  for l, w in enumerate(weights):
    out += [(w["qkv"], QKV, 3072, D, l), (0, ATTN, 0, 0, l), (w["o"], O, D, D, l), (w["gate_up"], GATE_UP, 2 * FF, D, l), (w["down"], DOWN, D, FF, l)]
  return out + ([(head, HEAD, VOCAB, D, layers), (0, ARGMAX, 0, 0, layers)] if head else [])


def timeline(launch, reset, dev, stamps: int, table: list, sms: int, flags: int) -> dict:
  """One launch (a lean variant's flags) with timestamps: per phase kind (summed over the layers), us from the previous phase's last block to
  this one's (`us`), and its parts: until the first block is released (`sync`: the counter's latency), staging x (`stage`, a
  block's mean), its rows (`rows`, a block's mean), and the last block's lag behind the mean (`straggle`)."""
  from tinygrad_backend_nv.runtime import check, cu
  reset()
  dev.synchronize()
  launch(0, flags | 256)
  dev.synchronize()
  raw = (ctypes.c_uint64 * (len(table) * sms * 3))()
  check(cu.cuMemcpyDtoH(ctypes.addressof(raw), stamps, ctypes.sizeof(raw)), "cuMemcpyDtoH")
  names = {QKV: "qkv", ATTN: "attention", O: "o", GATE_UP: "gate_up", DOWN: "down", HEAD: "head", ARGMAX: "argmax"}
  out: dict[str, dict[str, float]] = {}
  prev_done = None
  t0 = min(raw[(b * 3)] for b in range(sms))
  for p, (_, kind, *_rest) in enumerate(table):
    rows = [(raw[(p * sms + b) * 3], raw[(p * sms + b) * 3 + 1], raw[(p * sms + b) * 3 + 2]) for b in range(sms)]
    rows = [r for r in rows if r[0] and r[2]]
    if not rows: continue
    rel = min(r[0] for r in rows)
    done = [r[2] for r in rows]
    staged = [r[1] - r[0] for r in rows if r[1]]
    work = [r[2] - (r[1] or r[0]) for r in rows]
    start = prev_done if prev_done is not None else t0
    o = out.setdefault(names[kind], {"us": 0.0, "sync": 0.0, "stage": 0.0, "rows": 0.0, "straggle": 0.0, "phases": 0})
    o["us"] += (max(done) - start) / 1e3
    o["sync"] += max(0, rel - start) / 1e3
    o["stage"] += (sum(staged) / len(staged) if staged else 0) / 1e3
    o["rows"] += sum(work) / len(work) / 1e3
    o["straggle"] += (max(done) - sum(done) / len(done)) / 1e3
    o["phases"] += 1
    prev_done = max(done)
  for o in out.values():
    for k in ("us", "sync", "stage", "rows", "straggle"): o[k] = round(o[k], 1)
  total = round(sum(o["us"] for o in out.values()), 1)
  for name, o in out.items(): print(f"  {name:10s} {o}", file=sys.stderr)
  print(f"  timeline total {total} us (flags {flags})", file=sys.stderr)
  return {"total_us": total, "by_kind": out}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--layers", type=int, default=16)
  ap.add_argument("--positions", type=int, default=72, help="positions in the cache before the token (the step's attention length - 1)")
  ap.add_argument("--reps", type=int, default=10)
  ap.add_argument("--cols", type=int, default=1024)
  ap.add_argument("--slots", type=int, default=10)
  ap.add_argument("--no-xregs", action="store_true", help="build without the x-in-registers path (fewer registers)")
  ap.add_argument("--xperm", action="store_true", help="x in shared memory laid out for conflict-free reads")
  ap.add_argument("--dot2", action="store_true", help="two accumulators a lane (shorter dependent chains)")
  ap.add_argument("--mma", action="store_true", help="the products on tensor cores (needs --warps 16 --cols 512 --no-xregs)")
  ap.add_argument("--save-h", default=None, help="write h after one step of the first variant (JSON) here, for --ref-h")
  ap.add_argument("--ref-h", default=None, help="compare h after one step with this file's (another build's --save-h)")
  ap.add_argument("--timeline", action="store_true", help="one more step_lean launch with per-phase timestamps (globaltimer): where the step goes")
  ap.add_argument("--copy-warps", type=int, default=4, help="copying warps a block (cp.async)")
  ap.add_argument("--tma", action="store_true", help="bulk copies a row (cp.async.bulk) instead of 16-byte cp.async (not with --mma)")
  ap.add_argument("--only", default=None, help="comma-separated variant names to run (default: all)")
  ap.add_argument("--warps", type=int, default=8, choices=(8, 16), help="computing warps a block (a slot holds as many rows)")
  ap.add_argument("--no-head", action="store_true", help="without the output matrix and the argmax (the layers' part of the step)")
  args = ap.parse_args()
  if args.tma and args.mma: ap.error("--tma places rows plainly; --mma reads them swizzled")
  if args.mma and (args.warps, args.cols, args.no_xregs, args.xperm) != (16, 512, True, False): ap.error("--mma needs --warps 16 --cols 512 --no-xregs")
  from tinygrad_backend_nv.compiler import NVRTCCompiler
  from tinygrad_backend_nv.runtime import CUDAProgram, Timer, check, cu, device_arch, open_cuda
  dev = open_cuda("CUDA", 0)
  arch = device_arch(0) or "sm_90"
  lib = NVRTCCompiler(arch, ("-DROWS=2", f"-DCOLS={args.cols}", f"-DSLOTS={args.slots}", f"-DCW={args.warps}", f"-DXREGS={0 if args.no_xregs else 1}", f"-DXPERM={int(args.xperm)}", f"-DDOT2={int(args.dot2)}", f"-DMMA={int(args.mma)}", f"-DCPW={args.copy_warps}", f"-DBULK={int(args.tma)}")).compile(CHAIN_SRC + STEP_SRC)
  step, fill = CUDAProgram(dev.ctx, "step", lib), CUDAProgram(dev.ctx, "fill", lib)
  alloc = dev.allocator.alloc
  sms = int(check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev.ctx.device), "attr"))
  seed = iter(range(1, 1 << 20))

  def halves(n: int) -> int:
    p = alloc(n * 2)
    fill(p, global_size=(1024,), local_size=(256,), vals=(n, next(seed)))  # type: ignore[arg-type]
    return int(p)

  shapes = {"qkv": (3072, D), "o": (D, D), "gate_up": (2 * FF, D), "down": (D, FF)}
  weights = [{k: halves(n * m) for k, (n, m) in shapes.items()} for _ in range(args.layers)]
  head = 0 if args.no_head else halves(VOCAB * D)
  total_bytes = 2 * (args.layers * sum(n * m for n, m in shapes.values()) + (0 if args.no_head else VOCAB * D))
  P = args.positions
  kcache, vcache = (halves(max(1, args.layers) * KV_HEADS * P * HEAD_DIM) for _ in range(2))
  table = phase_table(args.layers, weights, head)
  raw = (ctypes.c_int64 * (3 * len(table)))()  # struct Phase { const unsigned short* w; int kind, n, k, layer; }: 24 bytes
  for i, (w, kind, n, k, layer) in enumerate(table):
    raw[3 * i] = w
    raw[3 * i + 1] = kind | (n << 32)
    raw[3 * i + 2] = k | (layer << 32)
  phases = alloc(ctypes.sizeof(raw))
  dev.allocator._copyin(phases, memoryview(raw).cast("B"))  # noqa: SLF001
  h, h0 = alloc(D * 4), alloc(D * 4)
  fill(h0, global_size=(8,), local_size=(256,), vals=(D * 2, 999))  # type: ignore[arg-type]  # halves' bytes as float bits: small values
  bufs = {name: alloc(n * 4) for name, n in (("qkv", 3072), ("attn", D), ("gu", 2 * FF), ("logits", VOCAB), ("best", 2 * sms), ("token", 1))}
  bar, abar = alloc(4), alloc(4)
  stamps = alloc(len(table) * sms * 3 * 8)  # --timeline: (released, staged, done) ns a phase a block
  n_main = sum(1 for ph in table if ph[1] != ATTN)  # grid-wide phases a launch when lean
  if P > 80: raise SystemExit("--positions: at most 80 (the kernel's KV_MAX)")
  smem = args.slots * args.warps * args.cols * 2 + (8192 + 16 + 32 * args.warps + 128) * 4 + 2 * 80 * 64 * 2 + 2048 * 4 + 2 * args.slots * 8 + 4 * 8 + 512 * 4
  check(cu.cuFuncSetAttribute(step.fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), "cuFuncSetAttribute")
  dev.synchronize()

  def launch(epoch: int, flags: int) -> None:
    ptrs = [phases, len(table), h, bufs["qkv"], bufs["attn"], bufs["gu"], bufs["logits"], bufs["best"], bufs["token"], kcache, vcache]
    vals = [ctypes.c_uint64(int(v)) if i not in (1,) else ctypes.c_int32(int(v)) for i, v in enumerate(ptrs)]
    vals += [ctypes.c_int32(P), ctypes.c_uint64(int(bar)), ctypes.c_int32(epoch), ctypes.c_int32(flags), ctypes.c_uint64(int(abar))]
    vals += [ctypes.c_int32(n_main if flags & 8 else len(table)), ctypes.c_int32(args.layers), ctypes.c_uint64(int(stamps) if flags & 256 else 0)]
    params = (ctypes.c_void_p * len(vals))(*(ctypes.addressof(v) for v in vals))
    check(cu.cuLaunchKernel(step.fn, sms, 1, 1, 32 * (args.warps + args.copy_warps), 1, 1, smem, 0, ctypes.addressof(params), 0), "cuLaunchKernel(step)")

  def reset() -> None:
    check(cu.cuMemcpyDtoD(h, h0, D * 4), "cuMemcpyDtoD")
    for counter in (bar, abar): check(cu.cuMemsetD32(counter, 0, 1), "cuMemsetD32")
    check(cu.cuMemsetD32(bufs["qkv"], 0, 3072), "cuMemsetD32")  # flag 2048 adds into it

  last_h: list[float] = []

  def token() -> tuple[int, float]:
    out, hv = ctypes.c_int32(), (ctypes.c_float * D)()
    check(cu.cuMemcpyDtoH(ctypes.addressof(out), bufs["token"], 4), "cuMemcpyDtoH")
    check(cu.cuMemcpyDtoH(ctypes.addressof(hv), h, D * 4), "cuMemcpyDtoH")
    last_h[:] = list(hv)
    return out.value, max(abs(x) for x in hv)

  ref_h = json.load(open(args.ref_h)) if args.ref_h else None

  res: dict = {"benchmark": "gpu_step_probe", "arch": arch, "sms": sms, "layers": args.layers, "positions": P, "bytes": total_bytes,
               "cols": args.cols, "slots": args.slots, "warps": args.warps, "xregs_built": not args.no_xregs, "xperm": args.xperm, "dot2": args.dot2, "mma": args.mma, "copy_warps": args.copy_warps, "tma": args.tma, "phases": len(table), "head": not args.no_head}
  variants = (("step_lean", 1 | 2 | 8), ("step", 1 | 2), ("step_cache_not_prefetched", 1), ("step_lean_no_attention", 8), ("step_no_attention", 0),
              ("step_no_attention_no_norms", 4), ("step_lean_nowait", 1 | 2 | 8 | 16), ("step_lean_nowait_nomath", 1 | 2 | 8 | 16 | 32),
              ("step_lean_bits", 1 | 2 | 8 | 64), ("step_lean_nowait_bits", 1 | 2 | 8 | 16 | 64), ("step_lean_xregs", 1 | 2 | 8 | 128),
              ("step_lean_nowait_xregs", 1 | 2 | 8 | 16 | 128), ("step_lean_rel", 1 | 2 | 8 | 1024), ("step_lean_fused", 1 | 2 | 8 | 512),
              ("step_lean_fused_rel", 1 | 2 | 8 | 512 | 1024), ("step_lean_nowait_fused_rel", 1 | 2 | 8 | 16 | 512 | 1024),
              ("step_lean_fused_rel_split", 1 | 2 | 8 | 512 | 1024 | 2048), ("step_lean_fused_rel_tok", 1 | 2 | 8 | 512 | 1024 | 4096),
              ("step_lean_fused_rel_kv", 1 | 2 | 8 | 512 | 1024 | 8192), ("step_lean_fused_rel_kv_rot", 1 | 2 | 8 | 512 | 1024 | 8192 | 16384),
              ("step_lean_nowait_nomath_rot", 1 | 2 | 8 | 16 | 32 | 16384))
  if args.only: variants = tuple(v for v in variants if v[0] in args.only.split(","))
  for name, work in variants:
    toks = set()
    best = math.inf
    for _ in range(3):
      reset()
      dev.synchronize()
      with Timer(dev) as tm:
        for i in range(args.reps): launch(i, work)  # step i continues from step i - 1's h (a different token each step)
      dev.synchronize()
      toks.add(token()[0])
      best = min(best, tm.seconds / args.reps * 1e6)
    reset()
    launch(0, work)
    dev.synchronize()
    first, hmax = token()
    if args.save_h and not os.path.exists(args.save_h):  # h after one step of the first variant run: another build's reference
      with open(args.save_h, "w") as f: json.dump(last_h, f)
    res[name] = {"us": round(best, 1), "tb_s": round(total_bytes / best / 1e6, 3), "tok_s": round(1e6 / best, 1), "token_after_one_step": first,
                 "h_max_abs": hmax, "finite": math.isfinite(hmax), "tokens_after_reps": sorted(toks)}
    if ref_h and (work & (16 | 1)) == 1:  # h after one step against the reference build's (where the dependencies and the attention are kept)
      res[name]["h_max_diff_vs_ref"] = max(abs(a - b) for a, b in zip(last_h, ref_h))
      res[name]["h_max_abs_ref"] = max(abs(b) for b in ref_h)
    diff = res[name].get("h_max_diff_vs_ref")
    print(f"{name:18s} {best:8.1f} us  {total_bytes / best / 1e6:6.3f} TB/s  {1e6 / best:7.1f} tok/s  token {first}" + (f"  h diff {diff:.3g} of {res[name]['h_max_abs_ref']:.3g}" if diff is not None else ""), file=sys.stderr)
  waiting = [flags for _, flags in variants if not flags & 16]
  if args.timeline and waiting: res["timeline"] = timeline(launch, reset, dev, stamps, table, sms, waiting[-1])  # the last waiting variant's flags
  print(json.dumps(res))


if __name__ == "__main__": main()
