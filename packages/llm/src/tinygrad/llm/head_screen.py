"""A decode step's next token (greedy, or drawn with a temperature) from the output matrix read at half its bytes, exactly.

A greedy step needs only the argmax of h @ W.T (W: the (vocab, dim) float16 output matrix, 525 MB for Llama-3.2-1B, a fifth of
the step's bytes), not every logit. `ScreenedHead` keeps a copy of W as int8, q = round(W / s) with one scale s a row, and
for each row the bound `slack` on how far its screened logit s * (q . h) can be from the logit the float16 product computes:
  |W.h - s q.h| = |e.h| <= ||e|| ||h||          (e = W - s q, the row's rounding error; Cauchy-Schwarz)
plus float32 rounding of both dot products (at most dim * 2^-24 of sum |w_i h_i| <= ||w|| ||h|| each), with a margin.
The step then reads the int8 copy (half the bytes), keeps as candidates the rows whose upper bound reaches the largest lower
bound, and computes the float16 logits of the candidates alone (`screened_rows_kernel`: the other rows' bytes are never read).
The row holding the largest logit is always a candidate (its upper bound is at least its logit, which is at least every row's
logit, which is at least every row's lower bound), and so is every row tied with it: the argmax over the candidates' exact
logits is the argmax over all of them, the lowest index among ties included.

Random Llama-1B-shaped weights leave 5-58 candidates of 128,256 (the bound is ~0.4 against logits of spread 1); a trained
model's top logit stands further apart. Non-finite values fall back to more candidates, never to a wrong token: a row with
a non-finite weight is always a candidate; a non-finite h makes every row one (NaN comparisons are false).

The greedy step and the temperature draw (the Gumbel-max argmax of logit / temperature + noise, whose bounds are the logits'
bounds through the same operations) use it; top-k and top-p need every logit. `HEAD_SCREEN=0` turns it off.

A step's token (`next_token`) takes five kernels: the screen's product, ||h||, the largest lower bound of each block's rows, the
screened rows (each block takes the floor from those partial maxima, computes its candidates, and keeps its best row: the order
key of its value and its first index) and one block taking the best of the blocks' bests. Session 38's form wrote every logit
(-inf where not a candidate) and then took an argmax over all of them: nine kernels after the product where this has four
(`HEAD_BEST=0` for it).
Measured: bench/README.md (sessions 38 and 39: 896.1 -> 887.7 us a Llama-1B step on an H100 with next_token)."""
from __future__ import annotations

import math
from collections.abc import Callable

from tinygrad import Tensor, dtypes
from tinygrad.helpers import ContextVar
from tinygrad.llm.decode_attention import block_reduce, pairwise, pairwise_sum, warp_combine
from tinygrad.llm.sampling import greedy, noisy_argmax, order_key
from tinygrad.uop.dsl import AddrSpace, AxisType, KernelInfo
from tinygrad.uop.ops import Ops, UOp

HEAD_SCREEN = ContextVar("HEAD_SCREEN", 1)
# 0: the screened logits, then an argmax's passes over every row (session 38's form), instead of each screened-rows block's best
# row and one block taking the best of those (`ScreenedHead.next_token`)
HEAD_BEST = ContextVar("HEAD_BEST", 1)
# the bound's margin over the rounding analysis: its own float32 norms err by ~dim * 2^-24 too
MARGIN = 1.01
DRAW_ULPS = 2.0 ** -20  # a draw's bounds widened by this much of themselves (16 float32 ulps)
ROWS = 256  # rows (and threads) a block of screened_rows_kernel
LANE_SPAN = 256  # a row's elements a warp reads a step: 32 lanes x 8 halves (16 bytes)


class ScreenedHead:
  """The int8 screen of a (vocab, dim) float16 output matrix `w` (see the module docstring): q (vocab, dim) int8, scale and
  slack (vocab,) float32. Its tensors are lazy until realized (`tensors`)."""

  def __init__(self, w: Tensor):
    if w.ndim != 2 or w.dtype != dtypes.float16: raise TypeError(f"ScreenedHead takes a 2-D float16 matrix, not {w.dtype.name} {w.shape}")
    self.w = w
    vocab, dim = w.shape
    wf = w.cast(dtypes.float32)
    amax = wf.abs().max(1, keepdim=True)
    finite = amax.isfinite()
    scale = amax.maximum(1e-30) / 127  # an all-zero row: q 0, not 0/0
    q = finite.where((wf / scale).round().clip(-127, 127), 0)
    err = (wf - q * scale).square().sum(1).sqrt()
    norm = wf.square().sum(1).sqrt()
    rounding = 2 * dim * 2.0 ** -24  # float32 rounding of both dot products, each at most dim * u of ||w|| ||h||
    slack = (err + rounding * (norm + err)) * MARGIN
    self.q = q.cast(dtypes.int8).contiguous()
    self.scale = scale.reshape(vocab).contiguous()
    self.slack = finite.reshape(vocab).where(slack, math.inf).contiguous()

  @property
  def tensors(self) -> list[Tensor]: return [self.q, self.scale, self.slack]

  def candidates(self, h: Tensor, temperature: Tensor | None = None, noise: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(screened logits (vocab,), candidate flags (vocab,) bool) for h (1, dim) float32 (see `logits`)."""
    hf = h.reshape(1, -1).cast(dtypes.float32)
    approx, norm, parts = self._bounds(hf, temperature, noise)
    return approx, (_drawn(approx + self.slack * norm, temperature, noise, 1) < parts.max()).logical_not()  # NaN anywhere: a candidate

  def _bounds(self, hf: Tensor, temperature: Tensor | None, noise: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """The screened logits (vocab,), ||h|| (1,) and the largest lower bound (of the draw's values, with a temperature) of each
    ROWS rows (blocks(vocab),): the screened-rows kernel's blocks take the largest of those themselves (one kernel fewer)."""
    # (a hand-written product holding h in registers, each warp walking 16 rows two at a time, was slower on an H100: Llama-1B
    # 919.7 against 897.0 us a step, bench/README.md session 38)
    vocab = self.w.shape[0]
    approx = ((hf * self.q.cast(dtypes.float32)).sum(1) * self.scale).contiguous()
    norm = hf.square().sum().sqrt().reshape(1)
    lower = _drawn(approx - self.slack * norm, temperature, noise, -1)
    parts = lower.pad(((0, blocks(vocab) * ROWS - vocab),), value=-math.inf).reshape(blocks(vocab), ROWS).max(1)
    return approx, norm, parts

  def logits(self, h: Tensor, temperature: Tensor | None = None, noise: Tensor | None = None) -> Tensor:
    """(1, vocab) float32: the float16 product's logits for the candidate rows, -inf for the others. The candidates of
    argmax(logits) (greedy), or with a temperature (1,) and Gumbel noise (vocab,) those of argmax(logits / temperature + noise)
    (the temperature draw, sampling.py): each bound goes through the same float operations as the value it bounds, and
    rounding is monotone, so a bound computed from a bound still bounds the computed value."""
    return self._screened_rows(h, temperature, noise, best=False).reshape(1, -1)

  def next_token(self, h: Tensor, temperature: Tensor | None = None, noise: Tensor | None = None) -> Tensor:
    """(1,) int32: the token `logits` leads to, in two kernels after the bounds instead of an argmax's passes over every row:
    sampling.greedy(logits(h)) (the first index of the largest logit, NaN the largest), or with a temperature (1,) and noise
    (vocab,) the draw's, argmax(logits / temperature + noise). The screened-rows kernel's blocks each store their best row (its
    value's order key and index: `best_of_rows`), and one block takes the best of those (`best_of_blocks_kernel`)."""
    if not HEAD_BEST.value:
      if temperature is None or noise is None: return greedy(self.logits(h))
      return noisy_argmax(self.logits(h, temperature, noise) / temperature.reshape(1, 1), noise)
    best = self._screened_rows(h, temperature, noise, best=True)
    return Tensor.empty(1, dtype=dtypes.int32, device=h.device).custom_kernel(best, fxn=best_of_blocks_kernel(blocks(self.w.shape[0])))[0]

  def _screened_rows(self, h: Tensor, temperature: Tensor | None, noise: Tensor | None, best: bool) -> Tensor:
    """The bounds, then screened_rows_kernel: the screened logits (vocab,), or with `best` each block's best row (2 * blocks,).
    h is read where the kernel before stored it (the model's final norm): a contiguous() copy would cost a kernel a step."""
    hf = h.reshape(1, -1).cast(dtypes.float32)
    vocab, dim = self.w.shape
    approx, norm, parts = self._bounds(hf, temperature, noise)
    extra = (temperature, noise) if temperature is not None and noise is not None else ()
    fxn = screened_rows_kernel(vocab, dim, drawn=bool(extra), best=best)
    out = Tensor.empty(2 * blocks(vocab), dtype=dtypes.uint32, device=hf.device) if best else Tensor.empty(vocab, device=hf.device)
    return out.custom_kernel(hf, approx, self.slack, norm, parts, self.w, *extra, fxn=fxn)[0]


def _drawn(x: Tensor, temperature: Tensor | None, noise: Tensor | None, side: int) -> Tensor:
  """A bound x of a logit as a bound of its draw value, x / temperature + noise, widened by DRAW_ULPS of itself on its `side`
  (1: upper): the compiler may round the draw's value and its bound along different paths (a fused multiply-add in one kernel)."""
  if temperature is None or noise is None: return x
  v = x / temperature + noise
  return v + side * DRAW_ULPS * v.abs()


def kernel_applies(dim: int) -> bool:
  """Whether screened_rows_kernel has a layout for rows of this length: 32 lanes of 8 halves a step."""
  return dim % LANE_SPAN == 0


def blocks(vocab: int) -> int:
  """Blocks of screened_rows_kernel (ROWS rows each), and partial maxima of the lower bounds (one a block's rows)."""
  return -(-vocab // ROWS)


def _larger(a: UOp, b: UOp) -> UOp: return (a < b).where(b, a)
def _smaller(a: UOp, b: UOp) -> UOp: return (b < a).where(b, a)


def best_of_rows(key: UOp, index: UOp, t: UOp, n: int, slot: int, after: UOp) -> tuple[UOp, UOp]:
  """(the largest key, the smallest index holding it) over a block of n threads t (each its key and index, a multiple of 32
  threads), seen by every thread: two block reductions from shared slots slot and slot + 1, their first barrier after `after`."""
  top = block_reduce(key, t, n, 32, slot, _larger, after)
  first = block_reduce(key.eq(top).where(index, 0xFFFFFFFF), t, n, 32, slot + 1, _smaller, after)
  return top, first


def screened_rows_kernel(vocab: int, dim: int, drawn: bool = False, best: bool = False) -> Callable[..., UOp]:
  """fxn for Tensor.custom_kernel(out, h, approx, slack, norm, parts, w[, temperature, noise]): out (vocab,) float32 gets each
  candidate row's logit h . w[r] (float16 w, float32 sums) and -inf elsewhere. h (1, dim) float32; approx, slack (vocab,)
  float32 (ScreenedHead); norm (1,) ||h||; parts (blocks(vocab),) float32 the largest lower bound of each ROWS rows, whose
  largest (the floor) every block takes; `drawn`: the bounds are of logit / temperature (1,) + noise (vocab,), a temperature
  draw's values. A block takes ROWS rows: each thread checks one (its bounds, one coalesced load a block), the flags go to shared
  memory, then each warp walks its 32 rows and computes the flagged ones (a loop of as many steps as the flag, 0 or 1: a row
  that is not a candidate costs a shared-memory read, no global loads).
  `best`: out is (2 * blocks(vocab),) uint32 instead: block b's best row, the order key (order_key) of its largest value (the
  logit, or the draw's logit / temperature + noise) at b and its first index at blocks(vocab) + b; the values stay in shared
  memory."""
  if not kernel_applies(dim): raise ValueError(f"no screened-rows kernel for rows of {dim}: check kernel_applies() first")
  f32, nb = dtypes.float32, blocks(vocab)

  def kernel(out: UOp, h: UOp, approx: UOp, slack: UOp, norm: UOp, parts: UOp, w: UOp, *draw: UOp) -> UOp:
    b = UOp.range(nb, 0, AxisType.GLOBAL)
    t = UOp.range(ROWS, 1, AxisType.LOCAL)
    lane, warp = t % 32, t // 32
    row = b * ROWS + t
    inside = row < vocab
    r = inside.where(row, vocab - 1)  # (rows past the vocabulary: a real row's bounds, then not a candidate)
    # the floor: the largest of the partial maxima, a few a thread, then the block's (a repeated part doesn't change a max)
    vals = UOp.placeholder(ROWS, f32, 2, AddrSpace.LOCAL)
    cleared = vals[t].store(-math.inf)  # the block's values where `best`: a row that is not a candidate stays -inf
    mine = [parts[(t + ROWS * i < nb).where(t + ROWS * i, nb - 1)] for i in range(-(-nb // ROWS))]
    floor = block_reduce(pairwise(mine, UOp.maximum), t, ROWS, 32, 1, UOp.maximum, cleared)
    hi = approx[r] + slack[r] * norm[0]
    if drawn:
      hi = hi / draw[0][0] + draw[1][r]
      hi = hi + DRAW_ULPS * hi.alu(Ops.MAX, -hi)
    keep = (hi < floor).logical_not() & inside  # NaN bounds: a candidate
    flags = UOp.placeholder(ROWS, dtypes.int32, 0, AddrSpace.LOCAL)
    flagged = flags[t].store(keep.cast(dtypes.int32)).barrier()
    j = UOp.range(32, 2, AxisType.LOOP)
    f = flags.after(flagged)[warp * 32 + j]
    once = UOp.range(f, 3, AxisType.LOOP)  # 0 or 1 steps: the row's loads only where it is a candidate
    # every address in the loop holds its index (0 when it runs), so that no load is hoisted out of it: h's too (64 floats a
    # lane, 32 MB from L2 over the grid if every thread loaded them)
    rr = b * ROWS + warp * 32 + j + once
    ks = [(i * 32 + lane) * 8 + e for i in range(dim // LANE_SPAN) for e in range(8)]
    dot = pairwise_sum([w[rr, k].cast(f32) * h[0, k + 8 * once] for k in ks])  # (8 * once: still 16-byte aligned)
    total = warp_combine(dot, (16, 8, 4, 2, 1), lambda a, c: a + c)
    if not best:
      kept = out[rr].store(total, lane.eq(0)).end(once, j)
      not_kept = out[r].store(-math.inf, inside & keep.logical_not())
      return UOp.sink(kept, not_kept, arg=KernelInfo("screened_rows"))
    kept = vals.after(flagged)[warp * 32 + j + once].store(total, lane.eq(0)).end(once, j)
    v = vals.after(kept.barrier())[t]
    if drawn: v = v / draw[0][0] + draw[1][r]  # as noisy_argmax(logits / temperature, noise) computes it
    key = inside.where(order_key(v), 0)  # (rows past the vocabulary: below every row's key, -inf's included)
    top, first = best_of_rows(key, row.cast(dtypes.uint32), t, ROWS, 3, kept)
    head = t.eq(0)
    return UOp.sink(out[b].store(top, head), out[nb + b].store(first, head), arg=KernelInfo("screened_rows_best"))

  return kernel


THREADS_BEST = 512  # threads of best_of_blocks_kernel


def best_of_blocks_kernel(n: int) -> Callable[..., UOp]:
  """fxn for Tensor.custom_kernel(token, best): token (1,) int32 gets the index of the best of n blocks' rows, best (2 * n,)
  uint32 as screened_rows_kernel(best=True) stores them: the largest key, the first index among its ties (the blocks' rows
  are in order, and each block's index is its first tie). One block; each thread folds every THREADS_BEST-th block first."""

  def kernel(token: UOp, best: UOp) -> UOp:
    t = UOp.range(THREADS_BEST, 0, AxisType.LOCAL)
    key, index = UOp.const(dtypes.uint32, 0), UOp.const(dtypes.uint32, 0xFFFFFFFF)
    for i in range(-(-n // THREADS_BEST)):
      c = t + THREADS_BEST * i
      there = c < n
      k = there.where(best[there.where(c, 0)], 0)
      x = there.where(best[there.where(n + c, n)], 0xFFFFFFFF)
      index = (key < k).where(x, index)  # strictly larger: an earlier block keeps a tie
      key = _larger(key, k)
    flag = UOp.placeholder(1, dtypes.int32, 0, AddrSpace.LOCAL)
    start = flag[0].store(0, t.eq(0))  # (block_reduce's first barrier needs a store before it)
    _, first = best_of_rows(key, index, t, THREADS_BEST, 1, start)
    return UOp.sink(token[0].store(first.cast(dtypes.int32), t.eq(0)), arg=KernelInfo("best_of_blocks"))

  return kernel
