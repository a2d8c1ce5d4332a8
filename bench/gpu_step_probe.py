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
#define NT 256  // computing threads
#define KV_MAX 80  // cache positions the shared-memory copy holds

// x for the coming product into shared memory: rmsnorm(h), the attention's output, or silu(gate) * up. Every block stages the
// whole vector (read past L1: other blocks wrote it in this kernel)
__device__ void stage(float* xs, float* red, int kind, const float* h, const float* attn, const float* gu) {
  int t = threadIdx.x;
  if (kind == 2) { for (int i = t * 4; i < 2048; i += NT * 4) *(float4*)(xs + i) = __ldcg((const float4*)(attn + i)); return; }
  if (kind == 4) {
    for (int i = t * 4; i < 8192; i += NT * 4) {
      float4 g = __ldcg((const float4*)(gu + i)), u = __ldcg((const float4*)(gu + 8192 + i));
      *(float4*)(xs + i) = make_float4(g.x / (1.f + __expf(-g.x)) * u.x, g.y / (1.f + __expf(-g.y)) * u.y,
                                       g.z / (1.f + __expf(-g.z)) * u.z, g.w / (1.f + __expf(-g.w)) * u.w);
    }
    return;
  }
  float ss = 0.f;
  for (int i = t * 4; i < 2048; i += NT * 4) {
    float4 v = __ldcg((const float4*)(h + i));
    *(float4*)(xs + i) = v;
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((t & 31) == 0) red[t >> 5] = ss;
  asm volatile("bar.sync 1, 256;" ::: "memory");
  float tot = 0.f;
  for (int i = 0; i < 8; i++) tot += red[i];
  float scale = rsqrtf(tot / 2048.f + 1e-5f);
  for (int i = t * 4; i < 2048; i += NT * 4) { float4 v = *(float4*)(xs + i); *(float4*)(xs + i) = make_float4(v.x * scale, v.y * scale, v.z * scale, v.w * scale); }
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
__device__ void attention(int hd, const float* qkv, const unsigned short* kh, const unsigned short* vh, float* out, float* sc, float* red, int P) {
  int t = threadIdx.x, warp = t >> 5, lane = t & 31, kv = hd / 4;
  const float* q = qkv + hd * 64;
  float q0 = __ldcg(q + lane) * 0.125f, q1 = __ldcg(q + lane + 32) * 0.125f;
  for (int p = warp; p <= P; p += 8) {
    float k0, k1;
    if (p < P) { k0 = h2f(kh[p * 64 + lane]); k1 = h2f(kh[p * 64 + lane + 32]); }
    else { k0 = __ldcg(qkv + 2048 + kv * 64 + lane); k1 = __ldcg(qkv + 2048 + kv * 64 + lane + 32); }
    float s = q0 * k0 + q1 * k1;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) sc[p] = s;
  }
  asm volatile("bar.sync 1, 256;" ::: "memory");
  if (warp == 0) {
    float m = -1e30f;
    for (int p = lane; p <= P; p += 32) m = fmaxf(m, sc[p]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.f;
    for (int p = lane; p <= P; p += 32) { float e = __expf(sc[p] - m); sc[p] = e; sum += e; }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) red[8] = 1.f / sum;
  }
  asm volatile("bar.sync 1, 256;" ::: "memory");
  int d = t & 63, part = t >> 6;
  float acc = 0.f;
  for (int p = part; p <= P; p += 4) acc += sc[p] * (p < P ? h2f(vh[p * 64 + d]) : __ldcg(qkv + 2560 + kv * 64 + d));
  red[16 + t] = acc;
  asm volatile("bar.sync 1, 256;" ::: "memory");
  if (t < 64) out[hd * 64 + t] = (red[16 + t] + red[80 + t] + red[144 + t] + red[208 + t]) * red[8];
}

// dot8 without cvt instructions (flag 64): a half's exponent and mantissa moved into a float's, the value 2^-112 of the half's
// (exact, zero and subnormals included); the sum is scaled back by 2^112. Integer and float ops at full rate, where cvt.f32.f16
// is a quarter-rate op on sm_90
__device__ __forceinline__ float lo_h(unsigned u) { return __int_as_float(((u << 16) & 0x80000000u) | ((u << 13) & 0x0fffe000u)); }
__device__ __forceinline__ float hi_h(unsigned u) { return __int_as_float((u & 0x80000000u) | ((u >> 3) & 0x0fffe000u)); }
__device__ __forceinline__ float dot8_bits(uint4 w, float4 a, float4 b) {
  return lo_h(w.x) * a.x + hi_h(w.x) * a.y + lo_h(w.y) * a.z + hi_h(w.y) * a.w + lo_h(w.z) * b.x + hi_h(w.z) * b.y + lo_h(w.w) * b.z + hi_h(w.w) * b.w;
}

__device__ __forceinline__ void wait_at_least(unsigned* counter, unsigned target) {
  unsigned v;
  do { asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory"); } while (v < target);
}

extern "C" __global__ void __launch_bounds__(384) step(const Phase* phases, int n_phases, float* h, float* qkv, float* attn, float* gu,
    float* logits, float* best, int* token, const unsigned short* kcache, const unsigned short* vcache, int P, unsigned* bar, int epoch,
    int flags, unsigned* abar, int n_main, int n_layers) {
  // flags: 1 the attention's work, 2 its keys and values prefetched into shared memory, 4 the norms skipped, 8 lean: the
  // residuals staged with the input (not loaded after each row's sum), and the attention synchronized by a counter of its own
  // (the 32 attention blocks wait for the q/k/v product, the o product for them; no grid-wide phase for it)
  // 16: the computing warps wait for nothing (wrong values: the stream and the work without the dependencies), 32: and do no
  // dot products (they only free the slots: the stream alone)
  // 64: the weights converted by bit moves, not cvt (dot8_bits)
  int attn_work = flags & 1, prefetch = flags & 2, norm = !(flags & 4), lean = flags & 8, waits = !(flags & 16), math = !(flags & 32);
  int bits = flags & 64;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* ring = smem;
  float* xs = (float*)(smem + SLOTS * SLOT);
  float* red = xs + 8192;  // 272 floats of partials
  float* sc = red + 272;   // attention scores (P + 1 <= 128)
  unsigned short* kvs = (unsigned short*)(sc + 128);  // the head's keys and values (P <= KV_MAX)
  float* hs = (float*)(kvs + 2 * KV_MAX * 64);  // h, for the residual adds (lean)
  unsigned long long* full = (unsigned long long*)(hs + 2048);
  unsigned long long* empty = full + SLOTS;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, G = gridDim.x;
  if (threadIdx.x == 0) {
    for (int i = 0; i < SLOTS; i++) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 128;" :: "r"(saddr(full + i)) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 8;" :: "r"(saddr(empty + i)) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n  fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (warp >= 8) {  // the copying warps: every product's rows of this block, in the order the computing warps take them
    int t = 0;
    for (int p = 0; p < n_phases; p++) {
      Phase ph = phases[p];
      if (ph.w == 0) continue;
      for (int g = blockIdx.x; g * 8 < ph.n; g += G)
        for (int c = 0; c < ph.k; c += COLS, t++) {
          int slot = t % SLOTS, use = t / SLOTS;
          if (use > 0) mwait(empty + slot, (use - 1) & 1);
          copy_slot<false>(ring + slot * SLOT, full + slot, ph.w, g * 8, ph.k, c, threadIdx.x - 256);
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    return;
  }
  int t = 0, m = 0;  // slots taken; grid-wide phases done in this launch (all of them unless lean)
  float mine = -1e30f; int mine_at = 0;  // this warp's best logit so far (output matrix)
  for (int p = 0; p < n_phases; p++) {
    Phase ph = phases[p];
    if (lean && ph.kind == 1) {  // the attention blocks alone, after every block's q/k/v rows; then their own counter
      if (blockIdx.x >= 32) continue;
      if (threadIdx.x == 0 && waits) wait_at_least(bar, (unsigned)((epoch * n_main + m) * G));
    } else if (p > 0 && threadIdx.x == 0 && waits) {  // every block's phase before is done (lean: the o product waits for the attention's)
      if (lean && ph.kind == 2) wait_at_least(abar, (unsigned)((epoch * n_layers + ph.layer + 1) * 32));
      else wait_at_least(bar, (unsigned)((epoch * n_main + m) * G));
    }
    asm volatile("bar.sync 1, 256;" ::: "memory");
    const unsigned short* kl = kcache + (size_t)ph.layer * 8 * P * 64, *vl = vcache + (size_t)ph.layer * 8 * P * 64;
    if (ph.kind == 0 && attn_work && prefetch && blockIdx.x < 32) prefetch_kv(kvs, kl, vl, blockIdx.x, P);
    if (ph.kind == 1) {
      if (attn_work && blockIdx.x < 32) {
        if (prefetch) {
          asm volatile("cp.async.wait_all;" ::: "memory");
          asm volatile("bar.sync 1, 256;" ::: "memory");
          attention(blockIdx.x, qkv, kvs, kvs + P * 64, attn, sc, red, P);
        } else {
          attention(blockIdx.x, qkv, kl + (size_t)(blockIdx.x / 4) * P * 64, vl + (size_t)(blockIdx.x / 4) * P * 64, attn, sc, red, P);
        }
      }
    } else if (ph.kind == 6) {
      if (blockIdx.x == 0 && threadIdx.x == 0) {
        float b = -1e30f; int at = 0;
        for (int i = 0; i < G; i++) { float v = __ldcg(best + 2 * i); if (v > b) { b = v; at = (int)__ldcg(best + 2 * i + 1); } }
        *token = at;
      }
    } else {
      stage(xs, red, ph.kind == 2 || ph.kind == 4 || norm ? ph.kind : 2, h, ph.kind == 2 || ph.kind == 4 ? attn : h, gu);
      if (lean && (ph.kind == 2 || ph.kind == 4))
        for (int i = threadIdx.x * 4; i < 2048; i += NT * 4) *(float4*)(hs + i) = __ldcg((const float4*)(h + i));
      asm volatile("bar.sync 1, 256;" ::: "memory");
      float scale = 3.4641f * rsqrtf((float)ph.k) * (bits ? 0x1p112f : 1.f);
      for (int g = blockIdx.x; g * 8 < ph.n; g += G) {
        float acc = 0.f;
        for (int c = 0; c < ph.k; c += COLS, t++) {
          int slot = t % SLOTS, use = t / SLOTS;
          mwait(full + slot, use & 1);
          const uint4* row = (const uint4*)(ring + slot * SLOT + warp * COLS * 2);
          if (math) {
            #pragma unroll
            for (int i = 0; i < COLS / 256; i++) {
              const float4* xp = (const float4*)(xs + c + (i * 32 + lane) * 8);
              acc += bits ? dot8_bits(row[i * 32 + lane], xp[0], xp[1]) : dot8(row[i * 32 + lane], xp[0], xp[1]);
            }
          }
          __syncwarp();
          if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(saddr(empty + slot)) : "memory");
        }
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        int r = g * 8 + warp;
        if (lane == 0 && math) {
          float y = acc * scale;
          if (ph.kind == 0) qkv[r] = y;
          else if (ph.kind == 3) gu[r] = y;
          else if (ph.kind == 5) { logits[r] = y; if (y > mine) { mine = y; mine_at = r; } }
          else h[r] = (lean ? hs[r] : __ldcg(h + r)) + y;  // o and down: the residual (row r is this warp's alone)
        }
      }
      if (ph.kind == 5) {  // the block's best of its warps' bests
        if (lane == 0) { red[warp] = mine; red[8 + warp] = (float)mine_at; }
        asm volatile("bar.sync 1, 256;" ::: "memory");
        if (threadIdx.x == 0) {
          float b = red[0]; int at = (int)red[8];
          for (int i = 1; i < 8; i++) if (red[i] > b) { b = red[i]; at = (int)red[8 + i]; }
          best[2 * blockIdx.x] = b; best[2 * blockIdx.x + 1] = (float)at;
        }
      }
    }
    asm volatile("bar.sync 1, 256;" ::: "memory");
    if (threadIdx.x == 0) { __threadfence(); atomicAdd(lean && ph.kind == 1 ? abar : bar, 1u); }
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


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--layers", type=int, default=16)
  ap.add_argument("--positions", type=int, default=72, help="positions in the cache before the token (the step's attention length - 1)")
  ap.add_argument("--reps", type=int, default=10)
  ap.add_argument("--cols", type=int, default=1024)
  ap.add_argument("--slots", type=int, default=10)
  ap.add_argument("--no-head", action="store_true", help="without the output matrix and the argmax (the layers' part of the step)")
  args = ap.parse_args()
  from tinygrad_backend_nv.compiler import NVRTCCompiler
  from tinygrad_backend_nv.runtime import CUDAProgram, Timer, check, cu, device_arch, open_cuda
  dev = open_cuda("CUDA", 0)
  arch = device_arch(0) or "sm_90"
  lib = NVRTCCompiler(arch, ("-DROWS=2", f"-DCOLS={args.cols}", f"-DSLOTS={args.slots}")).compile(CHAIN_SRC + STEP_SRC)
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
  n_main = sum(1 for ph in table if ph[1] != ATTN)  # grid-wide phases a launch when lean
  if P > 80: raise SystemExit("--positions: at most 80 (the kernel's KV_MAX)")
  smem = args.slots * 8 * args.cols * 2 + (8192 + 272 + 128) * 4 + 2 * 80 * 64 * 2 + 2048 * 4 + 2 * args.slots * 8
  check(cu.cuFuncSetAttribute(step.fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), "cuFuncSetAttribute")
  dev.synchronize()

  def launch(epoch: int, flags: int) -> None:
    ptrs = [phases, len(table), h, bufs["qkv"], bufs["attn"], bufs["gu"], bufs["logits"], bufs["best"], bufs["token"], kcache, vcache]
    vals = [ctypes.c_uint64(int(v)) if i not in (1,) else ctypes.c_int32(int(v)) for i, v in enumerate(ptrs)]
    vals += [ctypes.c_int32(P), ctypes.c_uint64(int(bar)), ctypes.c_int32(epoch), ctypes.c_int32(flags), ctypes.c_uint64(int(abar))]
    vals += [ctypes.c_int32(n_main if flags & 8 else len(table)), ctypes.c_int32(args.layers)]
    params = (ctypes.c_void_p * len(vals))(*(ctypes.addressof(v) for v in vals))
    check(cu.cuLaunchKernel(step.fn, sms, 1, 1, 384, 1, 1, smem, 0, ctypes.addressof(params), 0), "cuLaunchKernel(step)")

  def reset() -> None:
    check(cu.cuMemcpyDtoD(h, h0, D * 4), "cuMemcpyDtoD")
    for counter in (bar, abar): check(cu.cuMemsetD32(counter, 0, 1), "cuMemsetD32")

  def token() -> tuple[int, float]:
    out, hv = ctypes.c_int32(), (ctypes.c_float * D)()
    check(cu.cuMemcpyDtoH(ctypes.addressof(out), bufs["token"], 4), "cuMemcpyDtoH")
    check(cu.cuMemcpyDtoH(ctypes.addressof(hv), h, D * 4), "cuMemcpyDtoH")
    return out.value, max(abs(x) for x in hv)

  res: dict = {"benchmark": "gpu_step_probe", "arch": arch, "sms": sms, "layers": args.layers, "positions": P, "bytes": total_bytes,
               "cols": args.cols, "slots": args.slots, "phases": len(table), "head": not args.no_head}
  variants = (("step_lean", 1 | 2 | 8), ("step", 1 | 2), ("step_cache_not_prefetched", 1), ("step_lean_no_attention", 8), ("step_no_attention", 0),
              ("step_no_attention_no_norms", 4), ("step_lean_nowait", 1 | 2 | 8 | 16), ("step_lean_nowait_nomath", 1 | 2 | 8 | 16 | 32),
              ("step_lean_bits", 1 | 2 | 8 | 64), ("step_lean_nowait_bits", 1 | 2 | 8 | 16 | 64))
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
    res[name] = {"us": round(best, 1), "tb_s": round(total_bytes / best / 1e6, 3), "tok_s": round(1e6 / best, 1), "token_after_one_step": first,
                 "h_max_abs": hmax, "finite": math.isfinite(hmax), "tokens_after_reps": sorted(toks)}
    print(f"{name:18s} {best:8.1f} us  {total_bytes / best / 1e6:6.3f} TB/s  {1e6 / best:7.1f} tok/s  token {first}", file=sys.stderr)
  print(json.dumps(res))


if __name__ == "__main__": main()
