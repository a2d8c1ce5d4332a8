"""A decode step's attention as one kernel on a GPU, written in UOps (tinygrad.uop.dsl, docs/kernels.md) and compiled by our
codegen for whichever GPU backend runs it.

Written as Tensor ops, one token's attention is five kernels a layer on a GPU (the cache write, the scores, their max, the
exponentials' sum, the weighted values), each waiting for the one before: on the H200 they cost Llama-1B's decode step 112 us
of its 872 (bench/README.md, session 19), far more than their bytes. Here one block per query head does all of it after the
cache write:
  1. its query row, rotated (RoPE) and scaled by log2(e) / sqrt(head_dim), into shared memory;
  2. each thread the scores of positions t, t + B, ... (a dot product over the head dim with the cached keys), masked, into
     shared memory;
  3. the scores' max and the sum of exp2(score - max), each thread's part, then the block's (warp shuffles, or a tree);
  4. thread t the weighted sum of the values for dimension t % D over every (B / D)-th position (UNROLL loads a step), the
     exponentials recomputed (cheaper than a pass that stores them), the parts added and divided by the sum.
Positions, dims and loops are fixed when the kernel is built: one kernel per (attn_len, model shape). Where a thread's keys and
values are few they are loaded before the first barrier (beside the query's loads, not one round trip after another), and the
block's max and sum combine through warp shuffles where the renderer has them.

`new_kv` also folds the cache write into the kernel (one kernel a layer instead of two). It then follows the q/k/v product
directly, which fills the GPU with its blocks. A CUDA graph launches it early (a programmatic edge): its blocks landed packed on
the few SMs with room left, and the step was slower than with the cache write's one-block kernel in between (Llama-1B 835 ->
864 us a step on the H200; session 19: 839 -> 866, SmolLM2 584 -> 625). The fold kernel therefore asks for an SM a block
(KernelInfo.spread): still launched early, its blocks wait one an SM for the product to finish. Llama-1B 839 -> 823 us,
SmolLM2 595 -> 536 against the cache write's kernel and this one (bench/README.md, session 22). With `grid_wait` (the renderer
has it: CUDA sm_90+) the keys and values of the cache it reads early load before the wait for the product (uop.dsl.GRID_WAIT):
only this kernel writes the cache, and the token's own position comes from registers (SmolLM2 543 -> 534 us, Llama-1B 821 ->
819).

`o_parts` (model.DECODE_ATTN_O, off by default) also folds the output projection in: a block per (head, part of wo's rows), its
slice of wo copied into shared memory before the grid wait, the products added into the residual stream by atomic adds. On an
H100 it is break-even (Llama-1B 1,019.7 against 1,019.4 us a step, 16 kernels fewer; bench/README.md, session 32).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tinygrad.dtype import PtrDType, dtypes
from tinygrad.helpers import ContextVar
from tinygrad.uop.dsl import GRID_WAIT, AddrSpace, AxisType, KernelInfo, buffer_of
from tinygrad.uop.ops import Ops, UOp

UNROLL = 64  # values a thread loads per step of the weighted sum (independent loads in flight: fewer steps, each an L2 round trip)
MAX_LEN = 8192  # the scores of one head are in shared memory: 32 KB at most
SPAN_PER_HEAD = 32  # past this many positions per query head, the Tensor-op form is faster (`applies`)
SPLIT_MIN_PARTS, SPLIT_MAX_BLOCKS = 8, 256  # where the split kernel beats the Tensor-op form past that (`split_parts`)


def applies(attn_len: int, n_heads: int, head_dim: int) -> bool:
  """Whether a decode step's attention over attn_len positions is this kernel (else the Tensor-op form). The kernel has a block
  a query head, so its blocks' work grows with the span while their number stays n_heads; the Tensor-op form's kernels spread
  over many more. On the H200 (bench/README.md, session 23, us a step at spans 128 .. 2048): SmolLM2 (9 heads) 530 / 634 / 815 /
  1,013 / 1,523 with this kernel against 596 / 624 / 680 / 798 / 1,130 without; Llama-1B (32 heads) 823 / 879 / 976 / 1,082 /
  1,363 against 875 / 903 / 984 / 1,106 / 1,268. Both cross over near SPAN_PER_HEAD positions a head."""
  return block_size(attn_len, head_dim) is not None and attn_len <= SPAN_PER_HEAD * n_heads


def block_size(attn_len: int, head_dim: int) -> int | None:
  """Threads a block for this attention length, or None where the kernel doesn't apply (the Tensor-op form does)."""
  b = min(128, attn_len)
  if attn_len > MAX_LEN or attn_len % b or b % head_dim: return None
  return b


def pairwise(xs: list[UOp], combine: Callable[[UOp, UOp], UOp]) -> UOp:
  """combine of xs as a balanced tree: log2(n) dependent steps instead of n (the compiler keeps the order it is given)."""
  while len(xs) > 1: xs = [combine(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]


def pairwise_sum(xs: list[UOp]) -> UOp: return pairwise(xs, lambda a, b: a + b)


def warp_combine(v: UOp, masks: tuple[int, ...], combine: Callable[[UOp, UOp], UOp]) -> UOp:
  """combine of v over the lanes a butterfly of warp shuffles with these lane masks joins (16, 8, 4, 2, 1: the whole warp),
  seen by each of them."""
  for m in masks: v = combine(v, UOp(Ops.SHUFFLE, v.dtype, (v,), m))
  return v


def block_reduce(v: UOp, t: UOp, B: int, warp: int, slot: int, combine: Callable[[UOp, UOp], UOp], after: UOp) -> UOp:
  """combine of every thread's v over a block of B threads t, seen by every thread; its first barrier comes after `after` (a
  store other threads read past that barrier). warp >= 32 (the renderer's shuffle_lanes): each warp by shuffles, then one value a
  warp through shared memory and one barrier; else a tree in shared memory, a barrier a level. Uses shared slot `slot`."""
  f32 = v.dtype
  if warp >= 32 and B % 32 == 0:
    v = warp_combine(v, (16, 8, 4, 2, 1), combine)
    red = UOp.placeholder(B // 32, f32, slot, AddrSpace.LOCAL)
    r = red.after(red.after(after)[t // 32].store(v, (t % 32).eq(0)).barrier())
    out = r[0]
    for w in range(1, B // 32): out = combine(out, r[w])
    return out
  red = UOp.placeholder(B, f32, slot, AddrSpace.LOCAL)
  after, s = red.after(after)[t].store(v).barrier(), B // 2
  while s >= 1:  # halves, a barrier each
    r = red.after(after)
    after = r[t].store(combine(r[t], r[(t + s) % B]), t < s).barrier()
    s //= 2
  return red.after(after)[0]


def decode_attention_kernel(n_heads: int, n_kv_heads: int, head_dim: int, attn_len: int, neox: bool, warp: int = 0,
                            new_kv: tuple[int, int] | None = None, grid_wait: bool = False, split: int = 1,
                            o_parts: int = 0, dim: int = 0) -> Callable[..., UOp]:
  """fxn for Tensor.custom_kernel(out, q, cache, cos, sin, position[, kv]): out (n_heads * head_dim,) float32; q a buffer whose
  first n_heads * head_dim values are the token's query heads (unrotated); cache (2, kv heads, positions, head_dim); cos, sin
  the RoPE tables (positions, head_dim / 2), of which the kernel reads the token's row; position the token's position, a bound
  Variable (the kernel takes it as a parameter: one kernel for every step): it sees the cache's positions 0 .. position.
  `warp`: the renderer's shuffle_lanes (32:
  the block's max and sum combine through warp shuffles and one barrier; 0: a tree in shared memory, a barrier a level).
  `new_kv` (k offset, v offset): the kernel also writes the cache: the token's key (unrotated) and value heads lie in `kv` at
  these offsets; the first block of each kv head rotates the key and stores both at the token's position, and every block uses
  them from registers there, not the cache (which other blocks may be writing). `grid_wait`
  (with new_kv): the early cache loads come before a GRID_WAIT barrier, every other buffer's after it. `split` > 1 (without
  new_kv): a block per (head, attn_len / split positions); out is then (n_heads, split, head_dim + 2) float32 partials, each
  the unnormalized weighted values, the scores' max (log2 units; -inf where the part sees no position) and the sum of the
  exponentials, which `combine_split` turns into the heads' rows.
  `o_parts` R > 0 (with new_kv, `dim` the model's width): the kernel also applies the output projection and adds it to the
  residual stream: fxn(out, q, cache, cos, sin, position, kv, wo) with out the residual (..., dim) float32, added to in place, and wo
  (dim, n_heads * head_dim) float16. A block per (head, R-th of wo's rows): each computes its head's attention (R blocks the same
  one) and adds head_dim columns of wo times it into its dim / R rows of out, an atomic add a row (`o_applies`). An optional last
  parameter `zeroed` (..., dim) float32 is set to zeros by the first block (for decode_ffn's accumulating kernel after it)."""
  H, D, S = n_heads, head_dim, split
  if S < 1 or attn_len % S or (S > 1 and new_kv is not None):
    raise ValueError(f"split={S}: must divide attn_len {attn_len}, and can't write the cache (new_kv) as well")
  if o_parts and (new_kv is None or not o_applies(n_heads, head_dim, attn_len, dim, o_parts, warp)):
    raise ValueError(f"o_parts={o_parts}: needs new_kv and a layout (o_applies) for {n_heads} heads of {head_dim}, dim {dim}")
  L = attn_len // S  # positions a block sees
  G = n_heads // n_kv_heads
  B = block_size(L, D)
  if B is None or n_heads % n_kv_heads:
    raise ValueError(f"no decode attention kernel for {n_heads} query heads over {n_kv_heads} kv heads, attn_len {L}, head_dim {D}: "
                     "check block_size(attn_len, head_dim) first and use the Tensor-op form where it is None")
  P, N = B // D, L // B  # threads per dimension in the weighted sum; positions per thread
  f32 = dtypes.float32

  def kernel(out: UOp, q: UOp, cache: UOp, cos: UOp, sin: UOp, position: UOp, kv: UOp | None = None, wo: UOp | None = None,
             zeroed: UOp | None = None) -> UOp:
    assert isinstance(cache.dtype, PtrDType)  # a kernel parameter: a buffer
    o_part: UOp | None = None
    if S > 1:  # a block per (head, part): positions from the part's first on
      g = UOp.range(H * S, 0, AxisType.GLOBAL)
      h, part_no = g // S, g % S
      def at_pos(p: UOp | int) -> UOp: return p + part_no * L
    elif o_parts:  # a block per (head, R-th of wo's rows): the head's attention computed R times
      g = UOp.range(H * o_parts, 0, AxisType.GLOBAL)
      h, o_part = g // o_parts, g % o_parts
      def at_pos(p: UOp | int) -> UOp: return p  # type: ignore[return-value]
    else:
      h = g = UOp.range(H, 0, AxisType.GLOBAL)
      def at_pos(p: UOp | int) -> UOp: return p  # type: ignore[return-value]
    t = UOp.range(B, 1, AxisType.LOCAL)
    kvh = h // G
    # 1. the query, rotated and scaled (threads t < D; the others read in bounds and don't store)
    d = t % D
    if neox: i, partner, sign = d % (D // 2), (d + D // 2) % D, (d < D // 2).where(-1.0, 1.0)
    else: i, partner, sign = d // 2, d ^ 1, (d % 2).eq(0).where(-1.0, 1.0)
    # the keys and values a thread reads, where they are few (straight-line code): listed in the first barrier, so their loads
    # issue before it and wait beside the query's, not one round trip after another
    part = t // D
    keys = [[cache[0, kvh, at_pos(j * B + t), k].cast(f32) for k in range(D)] for j in range(N)] if N <= 2 else None
    values = [cache[1, kvh, at_pos(u * P + part), d].cast(f32) for u in range(L // P)] if L // P <= UNROLL else None
    early = [x for row in keys or [] for x in row] + (values or [])
    staged = stage_wo(wo, h, o_part, t) if o_parts and o_stage(dim // o_parts, D) else None
    if staged is not None: early += staged[1]  # copies in flight beside the early loads, complete at the first barrier
    if kv is not None and grid_wait and early:
      # the cache's earlier positions were written by earlier steps, and only this kernel writes it (the token's own position
      # comes from registers): they load before the wait for the grid before this one, every other buffer after it but the RoPE
      # tables (written once, at load)
      wait = UOp(Ops.BARRIER, dtypes.void, tuple(early), GRID_WAIT)
      q, kv = (x.after(wait) for x in (q, kv))
      if o_parts: out = out.after(wait)
    def rotated(src: UOp, base: UOp) -> UOp: return src[base + d] * cos[position, i] + src[base + partner] * sign * sin[position, i]
    qrot = rotated(q, h * D) * (math.log2(math.e) / math.sqrt(D))
    qs = UOp.placeholder(D, f32, 0, AddrSpace.LOCAL)
    q_stored = qs[d].store(qrot, t < D)
    if kv is not None:  # the token's key, rotated, and value, rounded to the cache's dtype as the cache will hold them
      assert new_kv is not None
      cdt = cache.dtype.base
      knew, vnew = rotated(kv, new_kv[0] + kvh * D).cast(cdt).cast(f32), kv[new_kv[1] + kvh * D + d].cast(cdt).cast(f32)
      ks = UOp.placeholder(D, f32, 8, AddrSpace.LOCAL)
      first = q_stored.barrier(ks[d].store(knew, t < D), *early)
      kv_new = ks.after(first)
    else: first = q_stored.barrier(*early)
    qv = qs.after(first)
    def seen(pos: UOp) -> UOp: return pos < position + 1  # the causal mask
    def is_new(pos: UOp) -> UOp: return pos.eq(position)  # the token's own position
    def score(j: int | UOp) -> UOp:
      pos = j * B + t
      k_at = (lambda k: keys[j][k]) if keys is not None and isinstance(j, int) else (lambda k: cache[0, kvh, at_pos(pos), k].cast(f32))
      if kv is not None: k_at = (lambda old: lambda k: is_new(pos).where(kv_new[k], old(k)))(k_at)
      return seen(at_pos(pos)).where(pairwise_sum([qv[k] * k_at(k) for k in range(D)]), -math.inf)
    # a part past the token's position sees nothing: its max is -inf, and exp2(-inf - -inf) would be NaN; 0 makes its sums 0
    def finite(m: UOp) -> UOp: return m.eq(-math.inf).where(0.0, m)
    # 2. scores of positions j * B + t, masked, into shared memory; 3. their max, then the exponentials' sum over the block
    sc = UOp.placeholder(L, f32, 1, AddrSpace.LOCAL)
    if N <= 4:  # few positions a thread: straight-line code, the scores stay in registers too
      mine = [score(j) for j in range(N)]
      stored = sc[t].store(mine[0])
      for n in range(1, N): stored = sc.after(stored)[n * B + t].store(mine[n])
      mx = mine[0]
      for v in mine[1:]: mx = mx.maximum(v)
      m_seen = m = block_reduce(mx, t, B, warp, 2, lambda a, b: a.maximum(b), stored)
      if S > 1: m = finite(m)
      sm = (mine[0] - m).alu(Ops.EXP2)
      for v in mine[1:]: sm = sm + (v - m).alu(Ops.EXP2)
    else:
      j = UOp.range(N, 2, AxisType.LOOP)
      stored = sc[j * B + t].store(score(j)).end(j)
      scv = sc.after(stored)
      acc = UOp.placeholder(1, f32, 3, AddrSpace.REG)
      j2 = UOp.range(N, 3, AxisType.LOOP)
      a = acc.after(acc.after(stored)[0].store(-math.inf), j2)
      m_seen = m = block_reduce(acc.after(a[0].store(a[0].maximum(scv[j2 * B + t])).end(j2))[0], t, B, warp, 2, lambda a, b: a.maximum(b), stored)
      if S > 1: m = finite(m)
      acc2 = UOp.placeholder(1, f32, 4, AddrSpace.REG)
      j3 = UOp.range(N, 4, AxisType.LOOP)
      a2 = acc2.after(acc2.after(m)[0].store(0.0), j3)
      sm = acc2.after(a2[0].store(a2[0] + (scv[j3 * B + t] - m).alu(Ops.EXP2)).end(j3))[0]
    total = block_reduce(sm, t, B, warp, 5, lambda a, b: a + b, stored)
    # 4. the weighted values: dimension d over positions part, part + P, ... (UNROLL loads a step); other threads' scores, so
    # read after a barrier (total's)
    scores = sc.after(stored, total)
    def value(p: UOp, old: UOp) -> UOp: return is_new(p).where(vnew, old) if kv is not None else old
    red3 = UOp.placeholder(B, f32, 7, AddrSpace.LOCAL)
    if values is not None:  # loaded before the first barrier
      mine_w = pairwise_sum([(scores[u * P + part] - m).alu(Ops.EXP2) * value(u * P + part, v) for u, v in enumerate(values)])
      part_done = red3.after(total)[t].store(mine_w)
    else:
      acc3 = UOp.placeholder(1, f32, 6, AddrSpace.REG)
      j4 = UOp.range(L // P // UNROLL, 6, AxisType.LOOP)
      a3 = acc3.after(acc3.after(total)[0].store(0.0), j4)
      step = a3[0] + pairwise_sum([(scores[p] - m).alu(Ops.EXP2) * value(p, cache[1, kvh, at_pos(p), d].cast(f32))
                                   for p in ((j4 * UNROLL + u) * P + part for u in range(UNROLL))])
      part_done = red3[t].store(acc3.after(a3[0].store(step).end(j4))[0])
    parts = red3.after(last := part_done.barrier())
    weighted = parts[d]
    for k in range(1, P): weighted = weighted + parts[k * D + d]
    if S > 1:
      row, first_thread = g * (D + 2), t.eq(0)
      return UOp.sink(out[row + d].store(weighted, t < D), out[row + D].store(m_seen, first_thread), out[row + D + 1].store(total, first_thread),
                      arg=KernelInfo("decode_attention_split"))
    if o_parts:
      assert wo is not None and o_part is not None
      writes = (h % G).eq(0) & o_part.eq(0) & (t < D)  # one block of each kv head writes the cache (after its reads)
      cache_writes = [cache.after(last)[c, kvh, position, d].store(x.cast(cache.dtype.base), writes) for c, x in ((0, knew), (1, vnew))]
      zlead = (0,) * (len(zeroed.shape) - 1) if zeroed is not None else ()
      zeros = [] if zeroed is None else [zeroed[(*zlead, (t + B * i) % dim)].store(0.0, g.eq(0) & (t + B * i < dim)) for i in range(-(-dim // B))]
      return UOp.sink(*projected(out, wo, h, o_part, t, weighted / total, d, last, staged), *cache_writes, *zeros,
                      arg=KernelInfo("decode_attention_o", spread=True))
    result = out[h * D + d].store(weighted / total, t < D)
    if kv is None: return result.end(t, h).sink(arg=KernelInfo("decode_attention"))
    writes = (h % G).eq(0) & (t < D)  # the first block of each kv head writes the cache (after its reads: the last barrier)
    return UOp.sink(result, *(cache.after(last)[c, kvh, position, d].store(x.cast(cache.dtype.base), writes) for c, x in ((0, knew), (1, vnew))),
                    arg=KernelInfo("decode_attention_kv", spread=True))

  def stage_wo(wo: UOp | None, h: UOp, o_part: UOp | None, t: UOp) -> tuple[UOp, list[UOp]]:
    """The block's slice of wo (its rows, head h's columns) copied into shared memory, 16 bytes a copy (cp.async where the GPU has
    it): issued first thing, before the wait for the q/k/v product (wo depends on no kernel). Returns the array and the copies."""
    assert wo is not None and o_part is not None
    rows, f16 = dim // o_parts, dtypes.float16
    smem_dt = f16.ptr(rows * D, "local")
    smem = UOp(Ops.DEFINE_LOCAL, smem_dt, (), 11)
    buf = buffer_of(wo)[0]
    assert isinstance(buf.dtype, PtrDType)
    copies = []
    for i in range(rows * (D // 8) // B):
      c = t + i * B  # the block's 16-byte chunks: row c // (D / 8), chunk c % (D / 8)
      r, ch = c // (D // 8), c % (D // 8)
      ld = UOp(Ops.INDEX, f16.vec(8).ptr(buf.dtype.size), (buf, (o_part * rows + r) * wo.shape[1] + h * D + ch * 8)).load()
      at = UOp(Ops.INDEX, f16.vec(8).ptr(smem_dt.size, "local"), (smem, r * D + ch * 8))
      copies.append(UOp(Ops.STORE, dtypes.void, (at, ld), "async"))
    return smem, copies

  def projected(out: UOp, wo: UOp, h: UOp, o_part: UOp, t: UOp, head_out: UOp, d: UOp, after: UOp,
                staged: tuple[UOp, list[UOp]] | None) -> list[UOp]:
    """The atomic adds of wo[rows of this part, head h's columns] @ head_out into out: the head's row through shared memory
    (one barrier), then 8 lanes a row (16 bytes of wo each, from `staged` or global memory: every load of the block's rows
    issued at once), B / 8 rows at a time."""
    f32, rows = dtypes.float32, dim // o_parts
    hs = UOp.placeholder(D, f32, 10, AddrSpace.LOCAL)
    row = hs.after(shared := hs.after(after)[d].store(head_out, t < D).barrier())
    sub, lane_row, per_step = t % 8, t // 8, B // 8
    act = [row[sub * 8 + e] for e in range(8)]
    lead = (0,) * (len(out.shape) - 1)
    adds = []
    for step in range(rows // per_step):
      n = o_part * rows + step * per_step + lane_row
      if staged is not None:
        smem = staged[0].after(shared)
        assert isinstance(smem.dtype, PtrDType)
        vec = UOp(Ops.INDEX, dtypes.float16.vec(8).ptr(smem.dtype.size, "local"), (smem, (step * per_step + lane_row) * D + sub * 8)).load()
        ws = [UOp(Ops.GEP, dtypes.float16, (vec,), (e,)).cast(f32) for e in range(8)]
      else: ws = [wo[n, h * D + sub * 8 + e].cast(f32) for e in range(8)]
      part = warp_combine(pairwise_sum([w * a for w, a in zip(ws, act)]), (4, 2, 1), lambda a, b: a + b)
      adds.append(out[(*lead, n)].atomic_add(part, sub.eq(0)))
    return adds

  return kernel


# KB of wo a block may stage in shared memory (beside the attention's few KB, under sm_90's 227 KB); 0: wo read where it is used
O_STAGE_KB = ContextVar("DECODE_ATTN_O_STAGE_KB", 64)


def o_stage(rows: int, head_dim: int) -> bool:
  """Whether a block's slice of wo (rows x head_dim halves) is staged in shared memory (decode_attention_kernel's o_parts)."""
  return rows * head_dim * 2 <= O_STAGE_KB.value * 1024


def o_applies(n_heads: int, head_dim: int, attn_len: int, dim: int, o_parts: int, warp: int) -> bool:
  """Whether decode_attention_kernel(o_parts=) has a layout: warp shuffles, 8 lanes of 16 bytes a head's slice of a wo row (head_dim
  64), the rows of a part a whole number of the block's steps."""
  b = block_size(attn_len, head_dim)
  return (b is not None and warp >= 32 and head_dim == 64 and o_parts >= 1 and dim % o_parts == 0
          and (dim // o_parts) % (b // 8) == 0)


def split_parts(attn_len: int, n_heads: int, head_dim: int, parts: int = 1) -> int:
  """How many parts `decode_attention_kernel(split=)` cuts a span into where `applies` says no (`parts` > 1: that many, for
  experiments); 1: the Tensor-op form. 128 positions a block (a position a thread, every key and value loaded before the first
  barrier: many registers, two blocks an SM), and only where that makes SPLIT_MIN_PARTS parts or more and SPLIT_MAX_BLOCKS
  blocks or fewer (one wave on the H200). Measured there (bench/README.md, session 23; us a step, Tensor-op form against the
  split by 4 / 8 / 16): SmolLM2 (9 heads) at 512 positions 672 against 718 / 727 / 669, at 1,024 793 against 773 / 737 / 745,
  at 2,048 1,118 against 886 / 792 / 766; Llama-1B (32 heads) at 2,048 1,267 against 1,377 / 1,334 / 1,336."""
  S = parts if parts > 1 else attn_len // 128
  if parts <= 1 and (S < SPLIT_MIN_PARTS or n_heads * S > SPLIT_MAX_BLOCKS): return 1
  return S if S > 1 and attn_len % S == 0 and block_size(attn_len // S, head_dim) is not None else 1


def combine_split(parts: Any, n_heads: int, head_dim: int) -> Any:
  """The heads' attention rows (n_heads * head_dim,) from the split kernel's (n_heads * split * (head_dim + 2),) partials: each
  part's sums rescaled to the largest max (Tensor ops)."""
  p = parts.reshape(n_heads, -1, head_dim + 2)
  w, m, tot = p[:, :, :head_dim], p[:, :, head_dim:head_dim + 1], p[:, :, head_dim + 1:]
  f = (m - m.max(1, keepdim=True)).exp2()
  return ((w * f).sum(1) / (tot * f).sum(1)).reshape(-1)
