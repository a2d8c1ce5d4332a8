"""A decode step's feed-forward block on a GPU (RMSNorm, gate and up, SiLU, down) as one kernel, written in UOps
(tinygrad.uop.dsl, docs/kernels.md) and compiled by our codegen, for float16 weights.

As Tensor ops it is two matrix-vector kernels a layer: gate/up (which stores silu(gate) * up) and down, the second waiting for
the first to finish. On the H200 each such wait drains the memory pipeline (bench/README.md, sessions 11 and 14): the down
product, whose 2,048 rows of 16 KB give few warps a lot to read, ran at 2.8 TB/s. Here the down product is split along the
hidden dimension instead: block c takes hidden rows c * ROWS .. (c + 1) * ROWS, and
  1. stores x = h * norm weight in shared memory and sums h^2 over the block (the RMSNorm's factor, rsqrt(mean + eps));
  2. each warp computes gate and up rows of its block's slice (16-byte loads of the weights, lanes over the model dim, warp
     shuffles), and stores silu(gate) * up of each row in shared memory;
  3. after one barrier, 8 lanes a row read the block's 128-byte slice of each of the down matrix's rows (4 rows a warp at a time)
     and store the partial dot products: out[c, n] = sum over the slice of down[n, hidden] * act[hidden].
The partials (hidden / ROWS of them per output) are summed by the Tensor op after it (with the residual add). No block waits for
another: each streams its gate/up rows and then its slice of down, so the weights' stream never stops for a kernel boundary
between the two products.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tinygrad.dtype import dtypes
from tinygrad.llm.decode_attention import block_reduce, pairwise_sum
from tinygrad.uop.dsl import GRID_WAIT, AddrSpace, AxisType, KernelInfo
from tinygrad.uop.ops import Ops, UOp

ROWS = 64  # hidden rows a block (the default): its slice of a down row is 64 halves = 128 bytes, 8 lanes of 16 bytes
THREADS = 256  # threads a block (8 warps)
UNROLL = 8  # down rows a lane reads per step of its loop (loads in flight)
LANE_SPAN = 256  # model dims a warp covers per 16-byte load (32 lanes x 8 halves)


def applies(dim: int, hidden: int, threads: int = THREADS, unroll: int = UNROLL, rows: int = ROWS) -> bool:
  """Whether decode_ffn_kernel has a layout for this model shape (else the two-kernel Tensor-op form)."""
  warps = threads // 32
  return (threads % 32 == 0 and dim % LANE_SPAN == 0 and dim % threads == 0 and rows in (16, 32, 64, 128, 256) and hidden % rows == 0
          and rows % warps == 0 and dim % (warps * (256 // rows) * unroll) == 0)


def down_tiles(down: Any, rows: int = ROWS) -> Any:
  """The down matrix (dim, hidden) as (hidden / rows, dim, rows): block c's slice of every row in one contiguous range."""
  dim, hidden = down.shape
  return down.reshape(dim, hidden // rows, rows).permute(1, 0, 2)


def silu(g: UOp) -> UOp:
  """g * sigmoid(g) with exp(-|g|) <= 1 (no overflow), as Tensor.sigmoid computes it."""
  e = ((g < 0).where(g, -g) * math.log2(math.e)).alu(Ops.EXP2)
  r = (1.0 + e).alu(Ops.RECIPROCAL)
  return g * (g < 0).where(e * r, r)


def decode_ffn_kernel(dim: int, hidden: int, eps: float, threads: int = THREADS, unroll: int = UNROLL, early: bool = False,
                      early_down: bool = False, rows: int = ROWS, kloop: int = 0) -> Callable[..., UOp]:
  """fxn for Tensor.custom_kernel(out, h, norm, gate_up, down): out (hidden / rows, dim) float32, the down product's partials;
  h (..., dim) float32 the residual stream (one token); norm (dim,) float32 the RMSNorm's weight; gate_up (2 * hidden, dim) float16, the gate's
  rows then the up's; down (dim, hidden) float16, or its tiles (hidden / rows, dim, rows) (`down_tiles`: each block's slice
  contiguous). The renderer needs warp shuffles (shuffle_lanes 32). The FFN's output is
  out.sum(0) (before the residual add). `early` (the renderer has grid_wait: CUDA sm_90+): each warp's first gate and up rows
  load before the kernel waits for the grids before it (uop.dsl.GRID_WAIT), h and norm after. `early_down`: each lane's first
  down weights load before the barrier that waits for the block's gate and up rows. `kloop` > 0: the gate and up rows' dims in
  a loop, kloop 16-byte loads of each a step (fewer registers, for blocks of more threads; `early` then doesn't apply)."""
  if not applies(dim, hidden, threads, unroll, rows) or (kloop and dim // LANE_SPAN % kloop):
    raise ValueError(f"no decode FFN kernel for dim {dim}, hidden {hidden} ({threads} threads, unroll {unroll}): check applies() first")
  K, F, R, T, U = dim, hidden, rows, threads, unroll
  L = R // 8  # lanes a down row's slice (16 bytes each), and rows a warp reads at a time
  RW = 32 // L
  W, f32 = T // 32, dtypes.float32

  def shuffled_sum(v: UOp, masks: tuple[int, ...]) -> UOp:
    for m in masks: v = v + UOp(Ops.SHUFFLE, f32, (v,), m)
    return v

  def kernel(out: UOp, h: UOp, norm: UOp, gate_up: UOp, down: UOp) -> UOp:
    c = UOp.range(F // R, 0, AxisType.GLOBAL)
    t = UOp.range(T, 1, AxisType.LOCAL)
    lane, warp = t % 32, t // 32
    dims = [j * LANE_SPAN + lane * 8 + e for j in range(K // LANE_SPAN) for e in range(8)]  # a lane's dims of a row
    def weights(r: UOp) -> tuple[list[UOp], list[UOp]]:  # the lane's gate and up weights of the slice's row r
      return [gate_up[c * R + r, k].cast(f32) for k in dims], [gate_up[c * R + r + F, k].cast(f32) for k in dims]
    first = ([], []) if kloop else weights(warp)
    if early and not kloop:  # the weights of the first row group load before the wait for the kernel before (no kernel writes them)
      wait = UOp(Ops.BARRIER, dtypes.void, tuple(first[0] + first[1]), GRID_WAIT)
      h, norm = h.after(wait), norm.after(wait)
    # 1. x = h * norm into shared memory, and the sum of h^2
    xs = UOp.placeholder(K, f32, 0, AddrSpace.LOCAL)
    lead = (0,) * (len(h.shape) - 1)  # h as the model holds it, (1, 1, dim): a reshape of the unrealized stream would be a copy
    hv = [h[(*lead, t + T * i)] for i in range(K // T)]
    stored = xs[t].store(hv[0] * norm[t])
    for i in range(1, K // T): stored = xs.after(stored)[t + T * i].store(hv[i] * norm[t + T * i])
    total = block_reduce(pairwise_sum([v * v for v in hv]), t, T, 32, 1, lambda a, b: a + b, stored)
    scale = (total * (1.0 / K) + eps).alu(Ops.SQRT).alu(Ops.RECIPROCAL)
    # 2. gate and up rows r = warp, warp + W, ... of the block's slice (the first group peeled: its weights may load early); lane
    # reads dims j * 256 + lane * 8 .. + 7 of each
    x = xs.after(total)
    xk = [] if kloop else [x[k] for k in dims]
    acts = UOp.placeholder(R, f32, 2, AddrSpace.LOCAL)
    def act(w: tuple[list[UOp], list[UOp]]) -> UOp:
      gate, up = (shuffled_sum(pairwise_sum([a * b for a, b in zip(ws, xk)]), (16, 8, 4, 2, 1)) * scale for ws in w)
      return silu(gate) * up
    if kloop:  # a loop over the row's dims, kloop 16-byte loads of gate and of up a step (few registers: x is not held)
      i = UOp.range(R // W, 2, AxisType.LOOP)
      r = warp + W * i
      acc = UOp.placeholder(2, f32, 3, AddrSpace.REG)
      init = acc.after(acc.after(total, i)[0].store(0.0))[1].store(0.0)
      j = UOp.range(K // LANE_SPAN // kloop, 4, AxisType.LOOP)
      cur = acc.after(init, j)
      ks = [(j * kloop + jj) * LANE_SPAN + lane * 8 + e for jj in range(kloop) for e in range(8)]
      xj = [x[k] for k in ks]
      sg, su = (pairwise_sum([gate_up[c * R + r + off, k].cast(f32) * v for k, v in zip(ks, xj)]) for off in (0, F))
      done = UOp(Ops.END, dtypes.void, (j, cur[0].store(cur[0] + sg), cur[1].store(cur[1] + su)))
      gate, up = (shuffled_sum(acc.after(done)[g], (16, 8, 4, 2, 1)) * scale for g in (0, 1))
      act_stored = acts.after(total)[r].store(silu(gate) * up, lane.eq(0)).end(i)
    else:
      act_stored = acts.after(total)[warp].store(act(first), lane.eq(0))
      if R // W > 1:
        i = UOp.range(R // W - 1, 2, AxisType.LOOP)
        r = warp + W * (i + 1)
        act_stored = acts.after(act_stored)[r].store(act(weights(r)), lane.eq(0)).end(i)
    # 3. the down product's partials over the slice: 8 lanes a row (16 bytes each), 4 rows a warp, W * 4 rows a step of U rows a
    # lane; the first step's weights (`early_down`) are sources of the barrier, so they load before it
    sub, row_of_lane = lane % L, lane // L
    def down_weights(step: UOp | int) -> list[tuple[UOp, list[UOp]]]:  # (row, its 8 weights) of each of a lane's U rows
      ns = [(step * U + v) * (W * RW) + warp * RW + row_of_lane for v in range(U)]
      if len(down.shape) == 3: return [(n, [down[c, n, sub * 8 + e].cast(f32) for e in range(8)]) for n in ns]  # tiles
      return [(n, [down[n, c * R + sub * 8 + e].cast(f32) for e in range(8)]) for n in ns]
    steps = K // (W * RW * U)
    first_down = down_weights(0) if early_down and steps > 1 else []
    a = acts.after(act_stored.barrier(*(w for _, ws in first_down for w in ws)))
    act_in = [a[sub * 8 + e] for e in range(8)]
    masks = tuple(m for m in (16, 8, 4, 2, 1) if m < L)
    def partials(rows: list[tuple[UOp, list[UOp]]]) -> list[UOp]:
      return [out[c, n].store(shuffled_sum(pairwise_sum([w * x for w, x in zip(ws, act_in)]), masks), sub.eq(0)) for n, ws in rows]
    if first_down:
      s = UOp.range(steps - 1, 3, AxisType.LOOP)
      rest = UOp(Ops.END, dtypes.void, (s, *partials(down_weights(s + 1))))
      return UOp.sink(*partials(first_down), rest, arg=KernelInfo("decode_ffn"))
    s = UOp.range(steps, 3, AxisType.LOOP)
    return UOp(Ops.END, dtypes.void, (s, *partials(down_weights(s)))).sink(arg=KernelInfo("decode_ffn"))

  return kernel
