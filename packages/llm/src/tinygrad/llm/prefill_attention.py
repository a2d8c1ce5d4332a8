"""A prefill chunk's attention as one flash-style kernel on a GPU's tensor cores, written in UOps (tinygrad.uop.dsl,
docs/kernels.md) and compiled by our codegen like any kernel.

As Tensor ops a chunk's attention is four kernels a layer on tensor cores (q as half, the scores' matmul, the softmax, the
values' matmul), the float32 scores and the half probabilities each stored and read back. Here nothing between q and the output
leaves the chip. A block takes one tile of M query rows (M x N x K the instruction's tile) for the query heads of one kv head's
group: a warp a head, each with S warps ("shares") that take every S-th block of KB cache positions (split_work). Per step of
its loop a share:
  1. copies its block of keys and values into shared memory (16-byte copies by the share's warps, rows padded against bank
     conflicts), then a barrier;
  2. scores it: S = Q K^T on the tensor cores (Q's A fragments made once: rotated by RoPE, scaled by log2(e) / sqrt(head_dim),
     rounded to half; K's B fragments by ldmatrix where the spec has it), masked past each row's own position (causal: the
     chunk's first position comes in as a one-element tensor, and blocks past the tile's last row are never visited);
  3. runs flash attention's online softmax in registers: each row's running max m (the lanes that share a row combine theirs by
     warp shuffles), p = exp2(S - m), the sum l and the output O rescaled by exp2(m_old - m_new);
  4. adds P V to O, P's A fragments being S's accumulator registers rounded to half, in the same lane (this needs a tensor core
     whose C layout, tile by tile, is its A layout, as NVIDIA's mma.sync m16n8k16 is: `fits` checks it from the lane tables);
then the shares' (O, m, l) are combined through shared memory and O / l is stored as half rows, the output projection's input.
The instruction's lane layouts are data (the renderer's TensorCore tables, fit as affine functions of the lane's bits as the
tensor-core lowering fits them), so no vendor's layout is written here. Rows, positions and loops are fixed when the kernel is
built: one kernel per (chunk rows, attn_len, model shape).

H200 (bench/README.md, session 21): Llama-1B pp512 132-139k -> 144-149k tok/s, SmolLM2 214-233k -> 229-257k, against the
Tensor-op form in the same process; 64-token chunks about even (MIN_BLOCKS keeps the Tensor-op form where the kernel's blocks
are few).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

from tinygrad.codegen.tensor_core import LDMATRIX, SmemTile, affine_uop, fit_layout, lane_split, matrix_fragment
from tinygrad.dtype import PtrDType, dtypes
from tinygrad.helpers import ContextVar
from tinygrad.renderer import TensorCore
from tinygrad.uop.dsl import AxisType, KernelInfo, buffer_of
from tinygrad.uop.ops import Ops, UOp

KB = 64  # cache positions a warp scores per step of its loop (the P @ V matmul's K)
MAX_WARPS = 8  # warps a block: one per query head of a kv head's group, all reading the block's keys and values in shared memory
PAD = 8  # halves after each row of a shared-memory tile
# blocks (kv heads x row tiles) below which the Tensor-op form runs a chunk's attention. H200, 64-token chunks (bench/README.md,
# session 21): Llama-1B's 32 blocks 39.9k -> 42.8k tok/s with the kernel, SmolLM2's 12 blocks 42.9k -> 40.9k
MIN_BLOCKS = ContextVar("PA_MIN_BLOCKS", 32)
# 1: keys and values copied with async copies in two stages (the next block in flight while this one is used). Slower on the
# H200 (bench/README.md, session 21; pp512 tok/s, one process): Llama-1B 140.7k against 143.8k through registers, SmolLM2 214.4k
# against 229.0k; so off by default
PA_ASYNC = ContextVar("PA_ASYNC", 0)
PA_SPLIT = ContextVar("PA_SPLIT", 0)  # > 0: heads * 10 + shares of a block (split_work), for experiments
M_INIT = -1e30  # the running max before any position: finite, so a block that masks a whole row gives exp2(-inf - M_INIT) = 0


@functools.cache  # asked for each prefill chunk: the answer is the spec's
def _p_from_c(tc: TensorCore) -> list[tuple[int, int]] | None:
  """For each A element of a lane, the (C tile, C element) of the same lane that holds it when a row of C tiles side by side
  (tile n: columns n*N ..) is read as A: None where some A element lies in another lane."""
  M, N, K = tc.dims
  out = []
  for e in range(len(tc.a_layout[0])):
    found = None
    for ce in range(len(tc.c_layout[0])):
      tiles = {tc.a_layout[ln][e][1] // N for ln in range(tc.threads)}
      if len(tiles) == 1 and all(tc.c_layout[ln][ce] == (tc.a_layout[ln][e][0], tc.a_layout[ln][e][1] % N) for ln in range(tc.threads)):
        found = (tiles.pop(), ce)
        break
    if found is None: return None
    out.append(found)
  return out


def fits(tc: TensorCore, head_dim: int, attn_len: int, rows: int, group: int) -> bool:
  """Whether this kernel can run attention of `rows` query rows over `attn_len` positions, `group` query heads a kv head, with
  this tensor core."""
  if warps_for(group) is None or head_dim % 8: return False
  if tc.smem_operands or tc.fma or tc.dtype_in != dtypes.float16 or tc.dtype_out != dtypes.float32 or not tc.a_layout: return False
  M, N, K = tc.dims
  if rows % M or attn_len % KB or KB % K or KB % N or head_dim % K or head_dim % N: return False
  if (split := lane_split(tc)) is None: return False
  rows_fit = fit_layout(tc.c_layout, 0, split)
  # the lanes that share a C row differ only in threadID's bits (their max and sum combine by shuffles over those bits)
  return all(ct == 0 for _, _, ct in rows_fit) and _p_from_c(tc) is not None


def pick_tensor_core(tcs: tuple[TensorCore, ...] | list[TensorCore], head_dim: int, attn_len: int, rows: int, group: int,
                     n_kv_heads: int) -> TensorCore | None:
  """The float16 tensor core with the longest K that fits (fewer instructions a block of positions), or None, also where the
  kernel would have fewer than MIN_BLOCKS (PA_MIN_BLOCKS) blocks (a short chunk of a model with few kv heads: the Tensor-op form's kernels
  spread wider)."""
  ok = [tc for tc in tcs if fits(tc, head_dim, attn_len, rows, group) and n_kv_heads * rows // tc.dims[0] >= MIN_BLOCKS.value]
  return max(ok, key=lambda tc: tc.dims[2]) if ok else None


def split_work(group: int, attn_len: int) -> tuple[int, int]:
  """(heads, shares) of a block: `heads` query heads of one group (warps reading the same keys and values in shared memory),
  each with `shares` warps that take every shares-th block of positions (their results combined at the end). Measured on the
  H200 (bench/README.md, session 21; heads x shares, pp512 tok/s): Llama-1B 4x2 149k, 2x2 147k, 1x4 134k, 1x8 108k; SmolLM2 3x2
  257k, 1x2 243k, 1x4 227k, 1x8 182k: all of a group's heads and two shares, fewer where there are fewer blocks of positions.
  PA_SPLIT = heads * 10 + shares overrides (experiments)."""
  if (forced := PA_SPLIT.value) > 0: return forced // 10, forced % 10
  return group, max(1, min(2, MAX_WARPS // group, attn_len // KB))


def warps_for(group: int) -> int | None:
  """Warps a block at most: a group's query heads (None past MAX_WARPS: the Tensor-op form runs it)."""
  return group if group <= MAX_WARPS else None


def prefill_attention_kernel(tc: TensorCore, n_heads: int, n_kv_heads: int, head_dim: int, rows: int, attn_len: int,
                             neox: bool) -> Callable[..., UOp]:
  """fxn for Tensor.custom_kernel(out, q, cache, cos, sin, first): out (rows, n_heads * head_dim) float16; q (rows, width)
  float32 whose first n_heads * head_dim values a row are the token's query heads (unrotated); cache (2, kv heads, positions,
  head_dim) float16, keys already rotated, the chunk's own rows written; cos, sin (rows, head_dim / 2); first (1,) int32, the
  chunk's first position. Causal: query row r sees positions 0 .. first + r (of the first attn_len)."""
  H, D, L, T = n_heads, head_dim, attn_len, rows
  if H % n_kv_heads or not fits(tc, D, L, T, H // n_kv_heads):
    raise ValueError(f"no prefill attention kernel for {tc.name}, head_dim {D}, attn_len {L}, {T} rows, {H} heads over {n_kv_heads} "
                     "kv heads: check pick_tensor_core() first and use the Tensor-op form where it is None")
  G = H // n_kv_heads
  M, N, K = tc.dims
  split = lane_split(tc)
  assert split is not None  # fits() checked it
  W, S = split_work(G, L)
  if G % W or W * S > MAX_WARPS: raise ValueError(f"prefill attention: {W} heads x {S} shares a block don't split {G} heads a group in {MAX_WARPS} warps")
  fa, fb, fc = ([*zip(fit_layout(lay, 0, split), fit_layout(lay, 1, split))] for lay in (tc.a_layout, tc.b_layout, tc.c_layout))
  b_ofit = [(fcol, fk) for fk, fcol in fb]  # B's (outer, k): outer the position (K) or the head dim (V)
  p_src = _p_from_c(tc)
  assert p_src is not None
  nc = len(tc.c_layout[0])
  # C elements by row: the distinct row functions of a lane (m16n8: groupID and groupID + 8)
  row_fits = list(dict.fromkeys(r for r, _ in fc))
  slot = [row_fits.index(r) for r, _ in fc]
  shuffles = [1 << b for b in range(split)]  # lanes sharing a row differ in threadID's bits
  f32, f16 = dtypes.float32, dtypes.float16
  arg = (tc.name, tc.dims, tc.dtype_in.name, tc.dtype_out.name)
  qscale = math.log2(math.e) / math.sqrt(D)
  # a block of keys and one of values in shared memory, rows padded by 16 bytes (the 8 rows an ldmatrix reads: different banks)
  k_tile, v_tile = SmemTile(True, KB, D, PAD), SmemTile(False, D, KB, PAD)
  VEC = 8  # halves a copy moves (16 bytes)
  chunks = KB * D // VEC  # of one block of keys (and of values)
  nthreads = W * tc.threads  # the warps of a share copy its blocks
  stage = k_tile.size + v_tile.size  # one share's keys and values
  STAGES = 2 if tc.async_copy and PA_ASYNC.value else 1
  use_ldm = tc.matrix_load and LDMATRIX.value != 0  # else each fragment element is a shared-memory load (LDMATRIX=0, as the lowering)

  lane_max = ((tc.threads >> split) - 1, (1 << split) - 1)  # the largest groupID and threadID

  def rope_fits(fd: tuple[int, int, int]) -> tuple[tuple[int, int, int], tuple[int, int, int], float] | None:
    """For a head-dim element affine in the lane (c0 + cg*groupID + ct*threadID): its RoPE partner's and angle's fits and the
    partner's sign, where every lane's element pairs the same way (else None: computed per lane)."""
    c0, cg, ct = fd
    if cg < 0 or ct < 0: return None
    hi = c0 + cg * lane_max[0] + ct * lane_max[1]
    if neox:  # pairs (d, d + D/2): every lane's element in the same half
      if hi < D // 2: return (c0 + D // 2, cg, ct), fd, -1.0
      if c0 >= D // 2: return (c0 - D // 2, cg, ct), (c0 - D // 2, cg, ct), 1.0
      return None
    if cg % 2 or ct % 2: return None  # pairs (2i, 2i + 1): the lane terms keep the parity of c0
    return (c0 ^ 1, cg, ct), (c0 // 2, cg // 2, ct // 2), (-1.0 if c0 % 2 == 0 else 1.0)

  def vec(xs: list[UOp], dt) -> UOp: return UOp(Ops.VECTORIZE, dt.vec(len(xs)), tuple(xs))
  def gep(x: UOp, i: int) -> UOp: return UOp(Ops.GEP, x.dtype.scalar(), (x,), (i,))
  def wmma(a: UOp, b: UOp, c: UOp) -> UOp: return UOp(Ops.WMMA, f32.vec(nc), (a, b, c), arg)

  def kernel(out: UOp, q: UOp, cache: UOp, cos: UOp, sin: UOp, first: UOp) -> UOp:
    # blocks launch x fastest: every head's tile of the chunk's last rows (the most positions) first, so the longest blocks
    # don't start in the last wave
    qt = UOp.range(T // M, 0, AxisType.GLOBAL)
    hg = UOp.range(G // W, 1, AxisType.GLOBAL)  # which W heads of the group
    kvh = UOp.range(n_kv_heads, 2, AxisType.GLOBAL)
    hw = UOp.range(W, 3, AxisType.LOCAL)  # a query head: the block's warps read the same keys and values
    sp = UOp.range(S, 4, AxisType.LOCAL)  # which share of the blocks of positions (every S-th)
    lane = UOp.range(tc.threads, 5, AxisType.LOCAL)
    g, t = lane // (1 << split), lane % (1 << split)
    tid = hw * tc.threads + lane  # within the warps of this share
    row0 = (T // M - 1 - qt) * M

    def head_loop(h: UOp) -> list[UOp]:
      """The stores of query head h's M rows."""
      # 1. the query rows as A fragments, one per K-wide slice of the head dim: rotated, scaled, half
      def q_at(row: UOp, fk: tuple[int, int, int], kk: int) -> UOp:
        fd = (fk[0] + kk * K, fk[1], fk[2])  # the head-dim element, affine in the lane
        if (parts := rope_fits(fd)) is not None:  # its partner and angle affine too: the loads are other elements' (shared)
          fp, fi, sign_c = parts
          d, partner, i, sign = affine_uop(fd, g, t), affine_uop(fp, g, t), affine_uop(fi, g, t), UOp.const(f32, sign_c)
        else:
          d = affine_uop(fd, g, t)
          if neox: i, partner, sign = d % (D // 2), (d + D // 2) % D, (d < D // 2).where(-1.0, 1.0)
          else: i, partner, sign = d // 2, d ^ 1, (d % 2).eq(0).where(-1.0, 1.0)
        return (q[row, h * D + d] * cos[row, i] + q[row, h * D + partner] * sign * sin[row, i]) * qscale
      qa = [vec([q_at(row0 + affine_uop(fr, g, t), fk, kk).cast(f16) for fr, fk in fa], f16) for kk in range(D // K)]

      # the running state, in registers across the loop over blocks of positions: O (D/N tiles), m and l per row slot
      n_o, n_slots = D // N, len(row_fits)
      st = UOp.placeholder(n_o * nc + 2 * n_slots, f32, 0, "reg")
      O_AT, M_AT, L_AT = 0, n_o * nc, n_o * nc + n_slots
      inits = [st[i].store(0.0) for i in range(n_o * nc)] + [st[M_AT + s].store(M_INIT) for s in range(n_slots)] + \
              [st[L_AT + s].store(0.0) for s in range(n_slots)]
      # the blocks of positions the tile's last row sees (the chunk is causal: later blocks are masked for every row); share sp
      # takes blocks sp, sp + S, ..., all shares the same number of steps (the barriers are the block's): a step past nb is masked
      last = first[0] + row0 + (M - 1)
      nb = (last // KB + 1).minimum(L // KB)
      steps = (nb + (S - 1)) // S
      def block_of(step: UOp | int) -> UOp: return (step * S + sp).minimum(nb - 1)  # a step past nb reads the last live block again

      # keys and values into shared memory, 16 bytes a copy, the warps of a share its blocks. With async copies (sm_80+) two
      # stages: the next step's block is copied while this one's is used (the barrier after its copies waits for all but them)
      smem_dt = f16.ptr(STAGES * S * stage, "local")
      smem = UOp(Ops.DEFINE_LOCAL, smem_dt, (), 1)
      cache_buf = buffer_of(cache)[0]
      cache_dt = cache_buf.dtype
      assert isinstance(cache_dt, PtrDType)  # a kernel parameter: a buffer
      def copy(step: UOp | int, at_buf: UOp | int, dep: UOp | None) -> list[UOp]:
        base, buf = block_of(step) * KB, at_buf * (S * stage) + sp * stage
        out_ = []
        for i in range(-(-2 * chunks // nthreads)):
          c = (tid + i * nthreads).minimum(2 * chunks - 1)  # threads past the last chunk copy it again (the same bytes)
          which, rem = c // chunks, c % chunks
          r, ch = rem // (D // VEC), rem % (D // VEC)
          src = ((which * n_kv_heads + kvh) * cache.shape[2] + base + r) * D + ch * VEC
          ld = UOp(Ops.INDEX, f16.vec(VEC).ptr(cache_dt.size), (cache_buf, src)).load()
          dst = buf + which.eq(0).where(k_tile.index(r, ch * VEC), k_tile.size + v_tile.index(ch * VEC, r))
          at = UOp(Ops.INDEX, f16.vec(VEC).ptr(smem_dt.size, "local"), (UOp(Ops.AFTER, smem.dtype, (smem, dep)) if dep is not None else smem, dst))
          out_.append(UOp(Ops.STORE, dtypes.void, (at, ld), "async") if STAGES == 2 else at.store(ld))
        return out_
      pre = (UOp(Ops.BARRIER, dtypes.void, tuple(copy(0, 0, None)), 1),) if STAGES == 2 else ()  # the first block, a group of its own
      j = UOp.range(steps, 6, AxisType.LOOP)
      cur = st.after(*inits, *pre, j)
      live = j * S + sp < nb
      base = block_of(j) * KB
      if STAGES == 2:  # the next step's block (the last one again past the end), in flight while this step runs
        now = j % 2
        rd = UOp(Ops.AFTER, smem.dtype, (smem, UOp(Ops.BARRIER, dtypes.void, tuple(copy(j + 1, 1 - now, j)), 1)))
      else:
        now = UOp.const(dtypes.int32, 0)
        rd = UOp(Ops.AFTER, smem.dtype, (smem, UOp(Ops.BARRIER, dtypes.void, tuple(copy(j, 0, j)))))
      share = now * (S * stage) + sp * stage

      def frag(tile: SmemTile, off: int, outer0: int, k0: int) -> UOp:
        if use_ldm and (ldm := matrix_fragment(rd, b_ofit, tile, share + off, UOp.const(dtypes.int32, outer0), k0, lane, f16)) is not None:
          return ldm
        return vec([UOp(Ops.INDEX, f16.ptr(smem_dt.size, "local"), (rd, share + off + tile.index(outer0 + affine_uop(fo, g, t), affine_uop(fk, g, t) + k0))).load()
                    for fo, fk in b_ofit], f16)

      # 2. scores of this block's positions, masked past each row's own position
      s_tiles = []
      for n in range(KB // N):
        acc = vec([UOp.const(f32, 0.0)] * nc, f32)
        for kk in range(D // K): acc = wmma(qa[kk], frag(k_tile, 0, n * N, kk * K), acc)
        s_tiles.append([(live & (base + n * N + affine_uop(fcl, g, t) <= first[0] + row0 + affine_uop(fr, g, t))).where(gep(acc, e), -math.inf)
                        for e, (fr, fcl) in enumerate(fc)])
      # 3. the online softmax, a row slot at a time
      m_new, alpha = [], []
      for s in range(n_slots):
        mx = cur[M_AT + s]
        for tile in s_tiles:
          for e in range(nc):
            if slot[e] == s: mx = mx.maximum(tile[e])
        for sh in shuffles: mx = mx.maximum(UOp(Ops.SHUFFLE, f32, (mx,), sh))
        m_new.append(mx)
        alpha.append((cur[M_AT + s] - mx).alu(Ops.EXP2))
      p_tiles = [[(tile[e] - m_new[slot[e]]).alu(Ops.EXP2) for e in range(nc)] for tile in s_tiles]
      l_new = []
      for s in range(n_slots):
        parts = [p for tile in p_tiles for e, p in enumerate(tile) if slot[e] == s]
        while len(parts) > 1: parts = [parts[i] + parts[i + 1] if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
        l_new.append(cur[L_AT + s] * alpha[s] + parts[0])
      # 4. O = O * alpha + P @ V, P's fragments from the lane's own score registers
      pa = [vec([p_tiles[kk * (K // N) + tile][ce].cast(f16) for tile, ce in p_src], f16) for kk in range(KB // K)]
      stores = []
      for n in range(n_o):
        o = vec([cur[O_AT + n * nc + e] * alpha[slot[e]] for e in range(nc)], f32)
        for kk in range(KB // K): o = wmma(pa[kk], frag(v_tile, k_tile.size, n * N, kk * K), o)
        stores += [cur[O_AT + n * nc + e].store(gep(o, e)) for e in range(nc)]
      stores += [cur[M_AT + s].store(m_new[s]) for s in range(n_slots)] + [cur[L_AT + s].store(l_new[s]) for s in range(n_slots)]
      # every warp is done reading this block before the next iteration's copies overwrite it (the copies in flight may stay:
      # two groups, theirs and this barrier's empty one)
      loop = UOp(Ops.END, dtypes.void, (j, UOp(Ops.BARRIER, dtypes.void, tuple(stores), 2 if STAGES == 2 else None)))
      # after the loop every copy has landed (the last step's prefetch too: none is left in flight when the kernel ends)
      done = st.after(UOp(Ops.BARRIER, dtypes.void, (loop,)) if STAGES == 2 else loop)

      # 5. the shares' O, m and l combined (shares 1.. store theirs in shared memory, over the last blocks of keys; share 0 adds
      # them up), then O / l, l summed over the lanes that share the row
      mine = [done[i] for i in range(n_o * nc + 2 * n_slots)]
      if S > 1:
        nst = len(mine)
        part = UOp.placeholder(W * (S - 1) * tc.threads * nst, f32, 2, "local")
        def at(share_: UOp | int, i: int) -> UOp: return ((hw * (S - 1) + share_ - 1) * tc.threads + lane) * nst + i
        sp_at = sp.maximum(1)  # share 0 stores nothing (its store is gated off): any in-bounds address
        kept = UOp(Ops.BARRIER, dtypes.void, tuple(part[at(sp_at, i)].store(v, sp.ne(0)) for i, v in enumerate(mine)))
        theirs = part.after(kept)
        for other_share in range(1, S):
          other = [theirs[at(other_share, i)] for i in range(nst)]
          m_all = [mine[M_AT + s_].maximum(other[M_AT + s_]) for s_ in range(n_slots)]
          a_me = [(mine[M_AT + s_] - m_all[s_]).alu(Ops.EXP2) for s_ in range(n_slots)]
          a_ot = [(other[M_AT + s_] - m_all[s_]).alu(Ops.EXP2) for s_ in range(n_slots)]
          mine = [mine[O_AT + i] * a_me[slot[i % nc]] + other[O_AT + i] * a_ot[slot[i % nc]] for i in range(n_o * nc)] + m_all + \
                 [mine[L_AT + s_] * a_me[s_] + other[L_AT + s_] * a_ot[s_] for s_ in range(n_slots)]
      totals = []
      for s in range(n_slots):
        tot = mine[L_AT + s]
        for sh in shuffles: tot = tot + UOp(Ops.SHUFFLE, f32, (tot,), sh)
        totals.append(tot)
      keep = (sp.eq(0),) if S > 1 else ()  # share 0 stores the result
      return [out[row0 + affine_uop(fr, g, t), h * D + n * N + affine_uop(fcl, g, t)].store((mine[O_AT + n * nc + e] / totals[slot[e]]).cast(f16), *keep)
              for n in range(n_o) for e, (fr, fcl) in enumerate(fc)]

    outs = head_loop(kvh * G + hg * W + hw)
    return UOp(Ops.END, dtypes.void, (lane, *outs)).end(sp, hw, qt, hg, kvh).sink(arg=KernelInfo("prefill_attention"))

  return kernel
