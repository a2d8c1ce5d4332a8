"""A decode step's feed-forward block on a GPU (RMSNorm, gate and up, SiLU, down) as one kernel, written in UOps
(tinygrad.uop.dsl, docs/kernels.md) and compiled by our codegen, for float16 weights. Off by default (model.DECODE_FFN): on the
H200 it is still 2.3% slower than the two kernels it replaces (Llama-1B 840 against 821 us a step; bench/README.md, session 31).

As Tensor ops the block is two matrix-vector kernels a layer: gate/up (which stores silu(gate) * up) and down, the second waiting
for the first to finish, a wait that drains the memory pipeline (bench/README.md, sessions 11 and 14). Here the down product is
split along the hidden dimension instead, so that no block waits for another: block c takes hidden rows c * ROWS .. (c + 1) *
ROWS, and
  1. stores x = h * norm weight in shared memory and sums h^2 over the block (the RMSNorm's factor, rsqrt(mean + eps));
  2. each warp computes gate and up rows of the block's slice: a loop over the model dim, KLOOP 16-byte loads of each row a
     step, lanes over the dims, warp shuffles at the end; silu(gate) * up of each row into shared memory;
  3. after one barrier, 8 lanes a row read the block's 128-byte slice of each of the down matrix's rows (4 rows a warp at a
     time) and store the partial dot products: out[c, n] = sum over the slice of down[n, hidden] * act[hidden].
The partials (hidden / ROWS of them per output) are summed by the Tensor op after it, with the residual add (a small kernel);
or (`accumulate`, DECODE_FFN=2) added by atomic adds into the next residual stream, which the attention kernel before it zeroed
(decode_attention's o_parts): cheaper than that kernel, and still 12 us a step slower than the gate/up and down kernels on an H100
(Llama-1B 1,031 against 1,019.7 us with the projection folded in both; bench/README.md, session 32).
Blocks of 1,024 threads with few registers each (x stays in shared memory) keep enough loads in flight: blocks of 256 or 512
threads holding x in registers made the step 14-31% slower than the two kernels (this form: 2.3%).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tinygrad.dtype import dtypes
from tinygrad.llm.decode_attention import block_reduce, pairwise_sum, warp_combine
from tinygrad.uop.dsl import AddrSpace, AxisType, KernelInfo
from tinygrad.uop.ops import Ops, UOp

ROWS = 64  # hidden rows a block: its slice of a down row is 64 halves = 128 bytes, 8 lanes of 16 bytes
THREADS = 1024  # threads a block (32 warps)
KLOOP = 2  # 16-byte loads of a gate and of an up row a lane issues per step of the loop over the model dim
UNROLL = 4  # down rows a lane reads per step of its loop
LANE_SPAN = 256  # model dims a warp covers per 16-byte load (32 lanes x 8 halves)
LANES = ROWS // 8  # lanes a down row's slice takes; a warp reads 32 // LANES rows at a time


def applies(dim: int, hidden: int, threads: int = THREADS) -> bool:
  """Whether decode_ffn_kernel has a layout for this model shape (else the two-kernel Tensor-op form)."""
  warps = threads // 32
  return (threads % 32 == 0 and dim % threads == 0 and dim % (LANE_SPAN * KLOOP) == 0 and hidden % ROWS == 0
          and ROWS % warps == 0 and dim % (warps * (32 // LANES) * UNROLL) == 0)


def down_tiles(down: Any) -> Any:
  """The down matrix (dim, hidden) as (hidden / ROWS, dim, ROWS): block c's slice of every row in one contiguous range (one
  DRAM page after another, where the slices of (dim, hidden) lie 16 KB apart: 19 us a step faster on the H200)."""
  dim, hidden = down.shape
  return down.reshape(dim, hidden // ROWS, ROWS).permute(1, 0, 2)


def silu(g: UOp) -> UOp:
  """g * sigmoid(g) with exp(-|g|) <= 1 (no overflow), as Tensor.sigmoid computes it."""
  e = ((g < 0).where(g, -g) * math.log2(math.e)).alu(Ops.EXP2)
  r = (1.0 + e).alu(Ops.RECIPROCAL)
  return g * (g < 0).where(e * r, r)


def decode_ffn_kernel(dim: int, hidden: int, eps: float, threads: int = THREADS, accumulate: bool = False) -> Callable[..., UOp]:
  """fxn for Tensor.custom_kernel(out, h, norm, gate_up, down): out (hidden / ROWS, dim) float32, the down product's partials;
  h (..., dim) float32, one token's residual stream; norm (dim,) float32, the RMSNorm's weight; gate_up (2 * hidden, dim)
  float16, the gate's rows then the up's; down (dim, hidden) float16, or its tiles (`down_tiles`). The renderer needs warp
  shuffles (shuffle_lanes 32). The block's output is out.sum(0) (before the residual add). `accumulate`: out is (..., dim)
  float32 holding zeros, and the kernel adds h and every partial into it (atomic adds: the renderer's atomic_add has float32), so
  that out is the residual stream after the block, without a kernel that sums the partials."""
  if not applies(dim, hidden, threads):
    raise ValueError(f"no decode FFN kernel for dim {dim}, hidden {hidden} ({threads} threads): check applies() first")
  K, F, R, T, W, f32 = dim, hidden, ROWS, threads, threads // 32, dtypes.float32
  RW = 32 // LANES

  def shuffled_sum(v: UOp, masks: tuple[int, ...]) -> UOp: return warp_combine(v, masks, lambda a, b: a + b)

  def kernel(out: UOp, h: UOp, norm: UOp, gate_up: UOp, down: UOp) -> UOp:
    c = UOp.range(F // R, 0, AxisType.GLOBAL)
    t = UOp.range(T, 1, AxisType.LOCAL)
    lane, warp = t % 32, t // 32
    # 1. x = h * norm into shared memory, and the sum of h^2
    xs = UOp.placeholder(K, f32, 0, AddrSpace.LOCAL)
    lead = (0,) * (len(h.shape) - 1)  # h as the model holds it, (1, 1, dim): a reshape of the unrealized stream would be a copy
    hv = [h[(*lead, t + T * i)] for i in range(K // T)]
    stored = xs[t].store(hv[0] * norm[t])
    for chunk in range(1, K // T): stored = xs.after(stored)[t + T * chunk].store(hv[chunk] * norm[t + T * chunk])
    total = block_reduce(pairwise_sum([v * v for v in hv]), t, T, 32, 1, lambda a, b: a + b, stored)
    scale = (total * (1.0 / K) + eps).alu(Ops.SQRT).alu(Ops.RECIPROCAL)
    # 2. gate and up rows r = warp, warp + W, ... of the block's slice; lane reads dims (j * KLOOP + jj) * 256 + lane * 8 .. + 7
    x = xs.after(total)
    i = UOp.range(R // W, 2, AxisType.LOOP)
    r = warp + W * i
    acc = UOp.placeholder(2, f32, 3, AddrSpace.REG)  # the gate's and the up's sums
    init = acc.after(acc.after(total, i)[0].store(0.0))[1].store(0.0)
    j = UOp.range(K // LANE_SPAN // KLOOP, 4, AxisType.LOOP)
    cur = acc.after(init, j)
    ks = [(j * KLOOP + jj) * LANE_SPAN + lane * 8 + e for jj in range(KLOOP) for e in range(8)]
    xj = [x[k] for k in ks]
    sg, su = (pairwise_sum([gate_up[c * R + r + off, k].cast(f32) * v for k, v in zip(ks, xj)]) for off in (0, F))
    done = UOp(Ops.END, dtypes.void, (j, cur[0].store(cur[0] + sg), cur[1].store(cur[1] + su)))
    gate, up = (shuffled_sum(acc.after(done)[g], (16, 8, 4, 2, 1)) * scale for g in (0, 1))
    acts = UOp.placeholder(R, f32, 2, AddrSpace.LOCAL)
    act_stored = acts.after(total)[r].store(silu(gate) * up, lane.eq(0)).end(i).barrier()
    # 3. the down product's partials over the slice: LANES lanes a row (16 bytes each), RW rows a warp, W * RW rows a step of
    # UNROLL rows a lane
    sub, row_of_lane = lane % LANES, lane // LANES
    a = acts.after(act_stored)
    act_in = [a[sub * 8 + e] for e in range(8)]
    s = UOp.range(K // (W * RW * UNROLL), 3, AxisType.LOOP)
    stores, olead = [], (0,) * (len(out.shape) - 1)
    for v in range(UNROLL):
      n = (s * UNROLL + v) * (W * RW) + warp * RW + row_of_lane
      ws = [(down[c, n, sub * 8 + e] if len(down.shape) == 3 else down[n, c * R + sub * 8 + e]).cast(f32) for e in range(8)]
      d = shuffled_sum(pairwise_sum([w * x for w, x in zip(ws, act_in)]), tuple(m for m in (16, 8, 4, 2, 1) if m < LANES))
      stores.append(out[(*olead, n)].atomic_add(d, sub.eq(0)) if accumulate else out[c, n].store(d, sub.eq(0)))
    if not accumulate: return UOp(Ops.END, dtypes.void, (s, *stores)).sink(arg=KernelInfo("decode_ffn"))
    residual = [out[(*olead, t + T * i)].atomic_add(hv[i], c.eq(0)) for i in range(K // T)]  # the first block adds h itself
    return UOp.sink(UOp(Ops.END, dtypes.void, (s, *stores)), *residual, arg=KernelInfo("decode_ffn_add"))

  return kernel
