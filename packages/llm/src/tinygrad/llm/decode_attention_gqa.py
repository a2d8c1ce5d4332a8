"""A decode step's attention over a long span on a GPU: a block per (kv head, part of the span), for all the query heads that
share that kv head (grouped-query attention; a group of one where a model has as many kv heads), written in UOps
(tinygrad.uop.dsl) like decode_attention.py.

decode_attention's split kernel has a block per (query head, part): the G query heads of a kv head each read its keys and values
again, and their registers (every key and value of a part held at once) allow two blocks an SM. For Llama-1B (32 query heads
over 8 kv heads) at 2,048 positions that is 512 blocks in two waves, and it was slower than the Tensor-op form's five kernels
(bench/README.md, session 23), which cost the step 440 us over a 128-position span for 67 MB of cache. Here a block reads each
key and value of its part once and uses it for all G heads:
  1. the G query rows, rotated (RoPE) and scaled by log2(e) / sqrt(head_dim), into shared memory;
  2. thread t the G scores of its position (the key row loaded once, before the first barrier), masked; heads of more than 64
     split each position over head_dim / 64 threads (64 dims of the key each, the slices' sums added through shared memory);
  3. per head, the scores' max over the block; each thread's exponentials exp2(score - max), once a (head, position), into
     shared memory, and their sum over the block;
  4. thread t, for VALUE_DIMS (4) neighbouring dimensions, the G weighted sums over every (4 B / D)-th position of the part (the 4
     values one load, before the first barrier), the 4 B / D threads of a dimension added through shared memory;
  5. per (head, part) the unnormalized weighted values, the max and the sum: decode_attention.combine_split's partials, which
     `combine_kernel` turns into the heads' rows (one small kernel, a block a head). A span of at most GQA_ONE_BLOCK positions
     is one part, a block a kv head, which writes the heads' rows itself (the weighted values divided by the sum): no partials
     and no combining kernel, a launch fewer a layer.
Where q/k/v are one buffer (`new_kv`) the kernel also writes the token's key and value into the cache, as decode_attention's
one-block-a-head kernel does, and loads the cache before the grid wait. Measured on an H100 (bench/README.md, session 35; model
DECODE_GQA, then from 256 positions): Llama-1B's step at a 2,048-position span 1,443 -> 1,053 us, at 8,192 3,944 -> 1,275;
SmolLM2 at 2,048 800 -> 643; Qwen3-1.7B's sizes (heads of 128) 2,529 -> 1,675. Session 36 (the values VALUE_DIMS to a load and
held as float16 until used, which lets 512 blocks run in one wave; 256 positions a block from LONG_SPAN): Llama-1B 1,261 -> 1,172
at 8,192 and 1,053 -> 1,029 at 2,048, SmolLM2 684 -> 657 at 4,096.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from tinygrad.dtype import PtrDType, dtypes
from tinygrad.helpers import ContextVar
from tinygrad.llm.decode_attention import block_reduce, pairwise_sum
from tinygrad.uop.dsl import GRID_WAIT, AddrSpace, AxisType, KernelInfo
from tinygrad.uop.ops import Ops, UOp

# a block's part of the span: a position a thread (or KEY_SLICE dims of it a thread), a key slice and up to KEY_SLICE values a
# thread in registers (loaded before the first barrier); 0: block_positions' rule
POSITIONS_PER_BLOCK = ContextVar("GQA_BLOCK_POSITIONS", 0)
LONG_SPAN = 2048  # from this span on, block_positions gives a block of heads of at most KEY_SLICE dims 256 positions
KEY_SLICE = 64
# spans up to this many positions are one block a kv head where a model has at least GQA_ONE_BLOCK_MIN_GRID kv heads: the kernel
# writes the heads' rows, normalized, and no combining kernel runs after it (0: parts of 128 positions). On an H100 (us a step at a
# 256-position span, two parts and their combining kernel -> one block; bench/README.md, session 44): Llama-1B 931.3 -> 908.2,
# Qwen3-1.7B's sizes (heads of 128) 1,414.0 -> 1,405.2; at 512 positions Llama-1B 931.9 -> 958.7 (so 256). SmolLM2's 3 kv heads
# would be 3 blocks: 546.3 -> 550.2, hence the minimum grid
ONE_BLOCK = ContextVar("GQA_ONE_BLOCK", 256)
ONE_BLOCK_MIN_GRID = ContextVar("GQA_ONE_BLOCK_MIN_GRID", 8)
# a thread's value dimensions in the weighted sums: one 8-byte load of float16 values a position (1: a 2-byte load each)
VALUE_DIMS = ContextVar("GQA_VALUE_DIMS", 4)
# GQA_HOIST=0: the token's value loads where first used, after barriers (with the mask entry past a thread's position: Llama-1B at
# a 2,048-position span on an H100: 1,029.8 us a step, against 1,026.9 loaded before the first barrier)
GQA_HOIST = ContextVar("GQA_HOIST", 1)

# the blocks a kv head's group of query heads is shared over: each reads the kv head's keys and values and attends for G / R of
# the heads (a shorter chain of arithmetic between its barriers, more blocks at once). 0: group_blocks' rule; N: N where it divides
# the group. On an H100 (us a step, R = 1 -> the rule's; bench/README.md, session 45): Llama-1B (groups of 4) at a 128-position span
# 875.5 -> 866.8 (R 4), 256 902.8 -> 872.5 (4), 512 924.7 -> 904.0 (4), 1,024 928.0 -> 912.2 (2; 4 gave 925.3); SmolLM2 (groups
# of 3) at 256 545.5 -> 515.0 (3); Qwen3-1.7B's sizes (groups of 2, heads of 128) at 256 1,462.2 -> 1,378.7, 1,024 1,444.4 ->
# 1,436.7, but 128 1,346.3 -> 1,359.0 (the one loss)
GROUP_BLOCKS = ContextVar("GQA_GROUP_BLOCKS", 0)


def group_blocks(n_heads: int, n_kv_heads: int, blocks: int = 1, max_blocks: int = 128) -> int:
  """Blocks a kv head's query heads are shared over, for a grid of `blocks` blocks at one block a group: GQA_GROUP_BLOCKS where
  set and it divides the group; else the largest divisor of the group that keeps the grid within max_blocks (the GPU's SMs: one
  wave, a block an SM), at least 1."""
  G = n_heads // n_kv_heads
  if GROUP_BLOCKS.value: return GROUP_BLOCKS.value if G % GROUP_BLOCKS.value == 0 else 1
  return max((r for r in range(1, G + 1) if G % r == 0 and blocks * r <= max_blocks), default=1)


def key_split(head_dim: int) -> int:
  """Threads a position's key row is split over (its dims KEY_SLICE a thread): 1 up to heads of KEY_SLICE, 2 for 128."""
  return max(1, head_dim // KEY_SLICE)


def block_positions(attn_len: int, head_dim: int, n_kv_heads: int) -> int:
  """A block's positions: GQA_BLOCK_POSITIONS where set; else the whole span up to GQA_ONE_BLOCK positions with at least
  GQA_ONE_BLOCK_MIN_GRID kv heads (at most 1,024 threads a block); else 128, and 256 from LONG_SPAN positions for heads of at
  most KEY_SLICE dims. Measured on an H100 (us a step, 128 -> 256 positions a block; bench/README.md, session 36): Llama-1B at 8,192
  1,249 -> 1,179, 4,096 1,078 -> 1,072, 2,048 1,041 -> 1,036, 1,024 1,013 -> 1,027; heads of 128 (512 threads a block) at
  2,048 1,654 -> 1,673."""
  if POSITIONS_PER_BLOCK.value: return POSITIONS_PER_BLOCK.value
  if attn_len <= ONE_BLOCK.value and n_kv_heads >= ONE_BLOCK_MIN_GRID.value and attn_len * key_split(head_dim) <= 1024: return attn_len
  return 256 if attn_len >= LONG_SPAN and key_split(head_dim) == 1 else 128


def gqa_parts(attn_len: int, n_heads: int, n_kv_heads: int, head_dim: int) -> int:
  """How many parts the kernel cuts a span of attn_len positions into (0: it doesn't apply; 1: a block a kv head, the heads' rows
  written whole): block_positions a part, query heads in groups over the kv heads, heads of at most KEY_SLICE dims or a multiple
  of it, a block's threads (the positions times key_split) a whole number of head_dim rows."""
  L, K = block_positions(attn_len, head_dim, n_kv_heads), key_split(head_dim)
  if L % 32 or L * K > 1024 or attn_len % L or n_heads % n_kv_heads or (L * K) % head_dim: return 0
  if head_dim > KEY_SLICE and head_dim % KEY_SLICE: return 0
  W = VALUE_DIMS.value
  if head_dim % W or (W * L * K) % head_dim or L % (W * L * K // head_dim): return 0  # whole groups of value dimensions, positions a lane
  return attn_len // L


def grid_blocks(attn_len: int, n_heads: int, n_kv_heads: int, head_dim: int, max_blocks: int = 128) -> int:
  """The kernel's grid: a block per (kv head, share of its query heads (group_blocks), part of the span)."""
  S = gqa_parts(attn_len, n_heads, n_kv_heads, head_dim)
  return n_kv_heads * S * group_blocks(n_heads, n_kv_heads, n_kv_heads * S, max_blocks)


def gqa_attention_kernel(n_heads: int, n_kv_heads: int, head_dim: int, attn_len: int, neox: bool, warp: int = 0,
                         new_kv: tuple[int, int] | None = None, grid_wait: bool = False, spread: bool = True,
                         max_blocks: int = 128) -> Callable[..., UOp]:
  """fxn for Tensor.custom_kernel(out, q, cache, cos, sin, position): out (n_heads * parts * (head_dim + 2),) float32 partials in
  decode_attention.combine_split's layout (per query head and part: the unnormalized weighted values, the scores' max in log2
  units, -inf where the part sees no position, and the exponentials' sum); where gqa_parts is 1, out (n_heads * head_dim,)
  float32, the heads' rows themselves (each weighted sum divided by its head's sum in the block); q a buffer whose first
  n_heads * head_dim values are the token's query heads (unrotated); cache (2, kv heads, positions, head_dim); cos, sin the RoPE
  tables (positions, head_dim / 2), of which the kernel reads the token's row; position the token's position, a bound Variable
  (a kernel parameter): it sees the cache's positions 0 .. position. `warp`: the renderer's shuffle_lanes
  (decode_attention.block_reduce).
  `new_kv` (k offset, v offset): fxn(out, q, cache, cos, sin, position, kv), and the kernel also writes the cache: the token's key
  (unrotated) and value heads lie in `kv` at these offsets; the block whose part holds the token's position uses them from
  registers and shared memory there, not the cache, and stores them (rounded to the cache's dtype) at the end; no other block
  reads that position. `grid_wait` (with new_kv): the cache's loads come before a GRID_WAIT barrier, q's and kv's after it
  (only this kernel writes the cache; the RoPE tables are written once, at load), and (`spread`) each block asks for an SM of its own, as
  decode_attention's kernel does: launched early behind the q/k/v product, its blocks would otherwise land packed on the few SMs
  with room left. Each kv head's query heads are shared over `group_blocks` blocks (the grid at most `max_blocks`, the GPU's SMs),
  each of which reads the kv head's keys and values; only the first writes the cache."""
  S = gqa_parts(attn_len, n_heads, n_kv_heads, head_dim)
  if not S: raise ValueError(f"no grouped-query attention kernel for {n_heads} query heads over {n_kv_heads} kv heads, head_dim {head_dim}, "
                             f"attn_len {attn_len}: check gqa_parts first")
  D, G, L, K = head_dim, n_heads // n_kv_heads, block_positions(attn_len, head_dim, n_kv_heads), key_split(head_dim)
  R = group_blocks(n_heads, n_kv_heads, n_kv_heads * S, max_blocks)
  Gq = G // R  # query heads a block
  B = L * K  # a position a thread, or K threads a position (each D / K of its key's dims)
  DK = D // K
  W = VALUE_DIMS.value
  P = W * B // D  # threads a group of W dimensions in the weighted sums
  f32 = dtypes.float32

  def kernel(out: UOp, q: UOp, cache: UOp, cos: UOp, sin: UOp, position: UOp, kv: UOp | None = None) -> UOp:
    assert isinstance(cache.dtype, PtrDType)  # a kernel parameter: a buffer
    g = UOp.range(n_kv_heads * R * S, 0, AxisType.GLOBAL)
    c, sub, part = g // (R * S), (g // S) % R, g % S  # the kv head, the block's share of its query heads, the part of the span
    h0 = c * G + sub * Gq  # the block's first query head
    t = UOp.range(B, 1, AxisType.LOCAL)
    tp, ks_at = t % L, (t // L) * DK  # the thread's position in the part, and where its slice of the key starts
    pos = part * L + tp
    d = t % D
    # the weighted sums' dimensions W * quad + j, over positions lane + u * P
    quad, lane = t % (D // W), t // (D // W)
    # every key and value the block reads, loaded before the first barrier (they wait beside the query's loads), held in the
    # cache's dtype until used and the values W (VALUE_DIMS) dimensions a load: with float16 that halves what they take of the
    # registers (a thread held 64 keys and 64 values as floats: 170 registers, 3 blocks an SM, two waves at 512 blocks)
    key = [cache[0, c, pos, ks_at + k] for k in range(DK)]
    values = [cache[1, c, part * L + u * P + lane, W * quad + j] for u in range(L // P) for j in range(W)]
    if kv is not None and grid_wait:  # earlier steps wrote these positions, and only this kernel writes the cache
      wait = UOp(Ops.BARRIER, dtypes.void, (*key, *values), GRID_WAIT)
      q, kv = (x.after(wait) for x in (q, kv))

    def rotated(src: UOp, base: UOp, de: UOp) -> UOp:
      if neox: ri, partner, sign = de % (D // 2), (de + D // 2) % D, (de < D // 2).where(-1.0, 1.0)
      else: ri, partner, sign = de // 2, de ^ 1, (de % 2).eq(0).where(-1.0, 1.0)
      return src[base + de] * cos[position, ri] + src[base + partner] * sign * sin[position, ri]
    # 1. the group's query rows, rotated and scaled: entry e = t + i * B is head e // D's dimension e % D
    qs = UOp.placeholder(Gq * D, f32, 0, AddrSpace.LOCAL)
    stores = []
    for i in range(-(-Gq * D // B)):
      e = t + i * B
      ok = e < Gq * D
      hq = h0 + ok.where(e, 0) // D  # (past the group's rows: the first's, not stored)
      stores.append(qs[e].store(rotated(q, hq * D, e % D) * (math.log2(math.e) / math.sqrt(D)), ok))
    seen = pos < position + 1  # the causal mask
    if kv is not None:  # the token's key (rotated) and value, rounded as the cache will hold them; where its position is
      assert new_kv is not None
      cdt = cache.dtype.base
      knew, vnew = rotated(kv, new_kv[0] + c * D, d).cast(cdt).cast(f32), kv[new_kv[1] + c * D + d].cast(cdt).cast(f32)
      ks = UOp.placeholder(D, f32, 1, AddrSpace.LOCAL)
      stores.append(ks[d].store(knew, t < D))  # (B >= D threads: L * K is a multiple of D)
      is_new = pos.eq(position)
      vq = [kv[new_kv[1] + c * D + W * quad + j].cast(cdt).cast(f32) for j in range(W)]
    # read after barriers, but loaded before the first (each would be one more round trip to memory behind a barrier): the
    # token's value as the weighted sums and the cache write use it
    late = [*vq, vnew] if kv is not None and GQA_HOIST.value else []
    first = stores[0].barrier(*stores[1:], *key, *values, *late)
    qv = qs.after(first)
    key = [x.cast(f32) for x in key]
    if kv is not None:  # the threads scoring the token's position use its key
      key = [is_new.where(ks.after(first)[ks_at + k], x) for k, x in enumerate(key)]
    # 2. the group's scores of the thread's position (registers); with K threads a position, their slices' sums added through
    # shared memory, so that each of them holds the scores
    mine = [pairwise_sum([qv[h * D + ks_at + k] * key[k] for k in range(DK)]) for h in range(Gq)]
    if K > 1:
      sl = UOp.placeholder(Gq * B, f32, 5 + 3 * Gq, AddrSpace.LOCAL)
      sl_done = sl.after(first)[t].store(mine[0])
      for h in range(1, Gq): sl_done = sl.after(sl_done)[h * B + t].store(mine[h])
      first = sl_done.barrier()
      slices = sl.after(first)
      mine = [pairwise_sum([slices[h * B + j * L + tp] for j in range(K)]) for h in range(Gq)]
    mine = [seen.where(m, -math.inf) for m in mine]
    # 3. per head the max (-inf where the part sees nothing: kept for the partials, 0 below so that the sums are 0); then each
    # thread's exponentials, once a (head, position), into shared memory (position-major: a thread's Gq in a row) and summed
    maxes = [block_reduce(mine[h], t, B, warp, 2 + 2 * h, lambda a, b: a.maximum(b), first) for h in range(Gq)]
    finite = [m.eq(-math.inf).where(0.0, m) for m in maxes]
    ex = [(mine[h] - finite[h]).alu(Ops.EXP2) for h in range(Gq)]
    ps = UOp.placeholder(Gq * L, f32, 3 + 2 * Gq, AddrSpace.LOCAL)
    owner = t < L  # a position's first thread stores and counts its exponentials
    p_stored = ps[tp * Gq].store(ex[0], owner)
    for h in range(1, Gq): p_stored = ps.after(p_stored)[tp * Gq + h].store(ex[h], owner)
    totals = [block_reduce(owner.where(ex[h], 0.0), t, B, warp, 3 + 2 * h, lambda a, b: a + b, p_stored) for h in range(Gq)]
    # 4. the weighted values: dimensions W * quad + j over positions lane, lane + P, ... of the part, for every head;
    # the exponentials read after a barrier (the sums')
    pv = ps.after(p_stored, *totals)
    values = [v.cast(f32) for v in values]
    if kv is not None:  # the token's value where its position is
      values = [(part * L + (i // W) * P + lane).eq(position).where(vq[i % W], v) for i, v in enumerate(values)]
    weighted = [pairwise_sum([pv[(u * P + lane) * Gq + h] * values[W * u + j] for u in range(L // P)]) for h in range(Gq) for j in range(W)]
    # (head h, lane, dimension) at h * P * D + lane * D + dimension: P * D = W * B entries a head
    red = UOp.placeholder(W * Gq * B, f32, 2 + 2 * Gq, AddrSpace.LOCAL)
    done = red[lane * D + W * quad].store(weighted[0])
    for i in range(1, W * Gq): done = red.after(done)[(i // W) * P * D + lane * D + W * quad + i % W].store(weighted[i])
    parts = red.after(last := done.barrier())
    # 5. entry e = t + i * B (head e // D, dimension e % D): its P lanes' sums, then the head's max and sum from the first entry
    # (one part: divided by the head's sum, into the head's row)
    writes = []
    for i in range(-(-Gq * D // B)):
      e = t + i * B
      ok = e < Gq * D
      hg, de = ok.where(e, 0) // D, e % D
      value = pairwise_sum([parts[hg * P * D + p * D + de] for p in range(P)])
      if S == 1:
        total = totals[0]
        for h in range(1, Gq): total = hg.eq(h).where(totals[h], total)
        writes.append(out[(h0 + hg) * D + de].store(value / total, ok))
      else: writes.append(out[((h0 + hg) * S + part) * (D + 2) + de].store(value, ok))
    for h in range(Gq if S > 1 else 0):
      row = ((h0 + h) * S + part) * (D + 2)
      writes += [out[row + D].store(maxes[h], t.eq(0)), out[row + D + 1].store(totals[h], t.eq(0))]
    if kv is not None:  # the block that holds the token's position writes its key and value (after every read: the last barrier)
      holds_new = (position // L).eq(part) & sub.eq(0)  # (the first of the blocks that share the part's query heads)
      writes += [cache.after(last)[i, c, position, d].store(x.cast(cache.dtype.base), holds_new & (t < D)) for i, x in ((0, knew), (1, vnew))]
    return UOp.sink(*writes, arg=KernelInfo("decode_attention_gqa" if kv is None else "decode_attention_gqa_kv", spread=kv is not None and grid_wait and spread))

  return kernel


def combine_kernel(n_heads: int, head_dim: int, parts: int) -> Callable[..., UOp]:
  """fxn for Tensor.custom_kernel(out, partials): out (n_heads * head_dim,) float32, the heads' attention rows from the kernel's
  partials (decode_attention.combine_split's layout), each part's sums rescaled to the largest max: one kernel, a block a head
  and a thread a dimension, instead of the Tensor-op form's three."""
  D, S = head_dim, parts

  def kernel(out: UOp, partials: UOp) -> UOp:
    h = UOp.range(n_heads, 0, AxisType.GLOBAL)
    d = UOp.range(D, 1, AxisType.LOCAL)
    rows = [(h * S + s) * (D + 2) for s in range(S)]
    ms = [partials[r + D] for r in rows]
    top = ms[0]
    for m in ms[1:]: top = top.maximum(m)
    fs = [(m - top).alu(Ops.EXP2) for m in ms]  # a part that sees nothing: exp2(-inf) = 0 (part 0 sees position 0)
    num = pairwise_sum([partials[r + d] * f for r, f in zip(rows, fs)])
    den = pairwise_sum([partials[r + D + 1] * f for r, f in zip(rows, fs)])
    return out[h * D + d].store(num / den).end(d, h).sink(arg=KernelInfo("decode_attention_combine"))

  return kernel
