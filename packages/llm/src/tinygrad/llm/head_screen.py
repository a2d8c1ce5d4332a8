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
Measured: bench/README.md (session 38)."""
from __future__ import annotations

import math
from collections.abc import Callable

from tinygrad import Tensor, dtypes
from tinygrad.helpers import ContextVar
from tinygrad.llm.decode_attention import pairwise_sum, warp_combine
from tinygrad.uop.dsl import AddrSpace, AxisType, KernelInfo
from tinygrad.uop.ops import Ops, UOp

HEAD_SCREEN = ContextVar("HEAD_SCREEN", 1)
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
    approx, norm, floor = self._bounds(hf, temperature, noise)
    return approx, (_drawn(approx + self.slack * norm, temperature, noise, 1) < floor).logical_not()  # NaN anywhere: a candidate

  def _bounds(self, hf: Tensor, temperature: Tensor | None, noise: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """The screened logits (vocab,), ||h|| (1,) and the largest lower bound (1,) (of the draw's values, with a temperature)."""
    # (a hand-written product holding h in registers, each warp walking 16 rows two at a time, was slower on an H100: Llama-1B
    # 919.7 against 897.0 us a step, bench/README.md session 38)
    approx = ((hf * self.q.cast(dtypes.float32)).sum(1) * self.scale).contiguous()
    norm = hf.square().sum().sqrt().reshape(1)
    return approx, norm, _drawn(approx - self.slack * norm, temperature, noise, -1).max().reshape(1)

  def logits(self, h: Tensor, temperature: Tensor | None = None, noise: Tensor | None = None) -> Tensor:
    """(1, vocab) float32: the float16 product's logits for the candidate rows, -inf for the others. The candidates of
    argmax(logits) (greedy), or with a temperature (1,) and Gumbel noise (vocab,) those of argmax(logits / temperature + noise)
    (the temperature draw, sampling.py): each bound goes through the same float operations as the value it bounds, and
    rounding is monotone, so a bound computed from a bound still bounds the computed value."""
    hf = h.reshape(1, -1).cast(dtypes.float32).contiguous()
    vocab, dim = self.w.shape
    approx, norm, floor = self._bounds(hf, temperature, noise)
    extra = (temperature, noise) if temperature is not None and noise is not None else ()
    fxn = screened_rows_kernel(vocab, dim, drawn=bool(extra))
    out = Tensor.empty(vocab, device=h.device).custom_kernel(hf, approx, self.slack, norm, floor, self.w, *extra, fxn=fxn)[0]
    return out.reshape(1, vocab)


def _drawn(x: Tensor, temperature: Tensor | None, noise: Tensor | None, side: int) -> Tensor:
  """A bound x of a logit as a bound of its draw value, x / temperature + noise, widened by DRAW_ULPS of itself on its `side`
  (1: upper): the compiler may round the draw's value and its bound along different paths (a fused multiply-add in one kernel)."""
  if temperature is None or noise is None: return x
  v = x / temperature + noise
  return v + side * DRAW_ULPS * v.abs()


def kernel_applies(dim: int) -> bool:
  """Whether screened_rows_kernel has a layout for rows of this length: 32 lanes of 8 halves a step."""
  return dim % LANE_SPAN == 0


def screened_rows_kernel(vocab: int, dim: int, drawn: bool = False) -> Callable[..., UOp]:
  """fxn for Tensor.custom_kernel(out, h, approx, slack, norm, floor, w[, temperature, noise]): out (vocab,) float32 gets each
  candidate row's logit h . w[r] (float16 w, float32 sums) and -inf elsewhere. h (1, dim) float32; approx, slack (vocab,)
  float32 (ScreenedHead); norm, floor (1,) float32: ||h|| and the largest lower bound; `drawn`: the bounds are of
  logit / temperature (1,) + noise (vocab,), a temperature draw's values. A block takes ROWS rows: each thread checks one (its bounds, one
  coalesced load a block), the flags go to shared memory, then each warp walks its 32 rows and computes the flagged ones
  (a loop of as many steps as the flag, 0 or 1: a row that is not a candidate costs a shared-memory read, no global loads)."""
  if not kernel_applies(dim): raise ValueError(f"no screened-rows kernel for rows of {dim}: check kernel_applies() first")
  f32 = dtypes.float32

  def kernel(out: UOp, h: UOp, approx: UOp, slack: UOp, norm: UOp, floor: UOp, w: UOp, *draw: UOp) -> UOp:
    b = UOp.range(-(-vocab // ROWS), 0, AxisType.GLOBAL)
    t = UOp.range(ROWS, 1, AxisType.LOCAL)
    lane, warp = t % 32, t // 32
    row = b * ROWS + t
    inside = row < vocab
    r = inside.where(row, vocab - 1)  # (rows past the vocabulary: a real row's bounds, then not a candidate)
    hi = approx[r] + slack[r] * norm[0]
    if drawn:
      hi = hi / draw[0][0] + draw[1][r]
      hi = hi + DRAW_ULPS * hi.alu(Ops.MAX, -hi)
    keep = (hi < floor[0]).logical_not() & inside  # NaN bounds: a candidate
    flags = UOp.placeholder(ROWS, dtypes.int32, 0, AddrSpace.LOCAL)
    flagged = flags[t].store(keep.cast(dtypes.int32)).barrier()
    not_kept = out[r].store(-math.inf, inside & keep.logical_not())
    j = UOp.range(32, 2, AxisType.LOOP)
    f = flags.after(flagged)[warp * 32 + j]
    once = UOp.range(f, 3, AxisType.LOOP)  # 0 or 1 steps: the row's loads only where it is a candidate
    # every address in the loop holds its index (0 when it runs), so that no load is hoisted out of it: h's too (64 floats a
    # lane, 32 MB from L2 over the grid if every thread loaded them)
    rr = b * ROWS + warp * 32 + j + once
    ks = [(i * 32 + lane) * 8 + e for i in range(dim // LANE_SPAN) for e in range(8)]
    dot = pairwise_sum([w[rr, k].cast(f32) * h[0, k + 8 * once] for k in ks])  # (8 * once: still 16-byte aligned)
    total = warp_combine(dot, (16, 8, 4, 2, 1), lambda a, c: a + c)
    kept = out[rr].store(total, lane.eq(0)).end(once, j)
    return UOp.sink(kept, not_kept, arg=KernelInfo("screened_rows"))

  return kernel
