"""Output channels as the vector lanes of a CPU convolution whose pixel rows don't vectorize.

The CPU register block (codegen/heuristics.py) puts its vector lanes on the innermost output loop, a convolution's output
columns. That pays where a row is a multiple of the vector width (ROW_VECTOR) and the input is read at stride 1 along it (a
3x3 conv at 32x32). A stride-2 conv reads every second input pixel (the lanes' loads are gathers), and the 14- and 7-wide rows of a
ResNet's later layers leave no vector width that divides them: the kernel then blocks the output channels alone, loading
one weight at a time from 8 places a whole filter apart (a 3x3 stride-2 conv, 128 -> 256 channels at 28x28, ran at 0.16x
torch). Here such a reduction is computed in the blocked layout (N, C/w, H, W, w), a kernel of its own that writes w = 32
(else 16 or 8) output channels contiguously, over a copy of the weight laid out (O/w, I, H, W, w): the lanes then load
contiguous weight vectors and broadcast one input pixel per multiply-add, like a matmul's (its register block,
heuristics._lanes_block, is the matmul's 8x32: 32 lanes x up to 8 pixels), and each w-channel panel of the weight is
one contiguous run that stays in cache while every pixel of an image goes through it (the plain (I, H, W, O) transpose,
tried first, read 64 bytes from every 2 KiB of a 9 MB weight per pixel: the 7x7 layer ran 2.5x slower than before). The consumers read
the result back through a permute. Measured on the loaded 2-core VM (bench/README.md): the stride-2 conv above 7.8 -> 37
GFLOP/s with this alone (torch about 25 in the same runs). The input's stride along the columns is read through its view's
slices (a stride-2 conv's windows hide it under a SHRINK): ResNet's stem, 112-wide rows read at stride 2, takes lanes too.
The lanes operand may be a computed value rather than a buffer (a weight gradient's upstream gradient through a norm's and a
pool's backward): its copy computes it once (CONV_LANES_VALUES), instead of once per input channel and tap inside the kernel.

Applied by create_schedule (schedule/kernelize.py, through pack.rewrite_cpu_reduce) to CPU REDUCE_AXIS nodes.
"""
from __future__ import annotations

from collections.abc import Callable

from tinygrad.dtype import dtypes
from tinygrad.helpers import ContextVar, prod
from tinygrad.schedule.relayout import copied_with_axes_last
from tinygrad.uop.ops import GroupOp, Ops, UOp

CONV_LANES = ContextVar("CONV_LANES", 1)  # 0: convolutions keep their lanes on the output columns
CONV_LANES_VALUES = ContextVar("CONV_LANES_VALUES", 1)  # 0: only a buffer's (or a copy's) channels become lanes
# a row this many pixels wide (or a multiple), read at stride 1, vectorizes as it is: one zmm register of columns. 56 (8 at a
# time, ymm) did not: ResNet's 3x3 64x56 layer, batch 8, 188 -> 350-360 GFLOP/s with 32 lanes x 8 pixels, its 1x1 256x56
# 73 -> 180-190. 32-wide rows stay: (8, 64, 32, 32) 3x3 326-370 as they are, 220-359 with lanes; 1x1 128 ch 285-314 vs 211-217
ROW_VECTOR = 16
LANE_WIDTHS = (32, 16, 8)  # output channels per lane block, the widest that divides them: 32 are two zmm registers
# ... where the other operand is decoded per element (a quantized matrix dequantized inside the kernel times a few rows of x,
# tinygrad.llm's CPU prefill: the rows of x are then the lanes): each decoded element is broadcast to every lane, so more
# lanes share its decoding (codegen/heuristics.py's _decoded_lanes_block). SmolLM2's Q4_1 matmuls with 64 rows on 2 cores,
# 32 -> 64 lanes: 3072x576 1830 -> 1326 us, 576x1536 975 -> 685, 960x576 650 -> 432, 576x576 410 -> 290
# 64 or 32 rows, no fewer: 16 rows keep their layout, where the heuristics' few-vectors form (vectorized along the reduction, each
# decoded vector of weights reused for 8 rows) ran SmolLM2's 16-token chunk in 38.5 ms against 55.5 with 16 lanes
DECODED_LANE_WIDTHS = (64, 32)
DECODED_LANES = ContextVar("DECODED_LANES", 1)  # 0: a decoded operand's lanes are LANE_WIDTHS too


def channel_lanes(r: UOp, axis_strides: Callable[..., tuple[UOp, list[int]]]) -> UOp | None:
  """REDUCE_AXIS(ADD, MUL(input, weight)) of a convolution (two or more reduce axes) whose innermost output loop (the
  columns) is not a multiple of ROW_VECTOR or is read at a stride other than 1: the same reduction in the blocked layout
  (N, C/w, H, W, w) over a (O/w, I, H, W, w) copy of the weight, realized, and viewed back as NCHW. None where that doesn't
  apply. axis_strides: pack._axis_strides (pack calls this module)."""
  if not CONV_LANES.value or r.arg[0] is not Ops.ADD or (x := r.src[0]).op is not Ops.MUL or not dtypes.is_float(x.dtype): return None
  if len(r.arg[1]) < 2 or not all(isinstance(s, int) and s > 0 for s in x.shape): return None  # a matmul reduces one axis
  shape: tuple[int, ...] = x.shape
  outs = [a for a in range(len(shape)) if a not in r.arg[1] and shape[a] > 1]
  if len(outs) < 2: return None
  j = outs[-1]
  views = [axis_strides(op) for op in x.src]
  for i, (base, steps) in enumerate(views):
    other, sliced = views[1 - i][1], False
    # a weight sliced out of a buffer (every s-th tap, for a strided conv's input gradient): read through the slice
    if base.op is Ops.SHRINK and (through := axis_strides(x.src[i], True))[0].op is Ops.BUFFER: (base, steps), sliced = through, True
    # the weight (a buffer, or one this schedule makes: a strided conv's input gradient takes every s-th tap): the same for every column
    # or an elementwise value (a weight gradient's upstream gradient through a norm's and a pool's backward): the lanes' copy
    # computes it once, where inline every (input channel, tap) of the kernel computed it again
    if not (base.op in (Ops.BUFFER, Ops.CONTIGUOUS) or (CONV_LANES_VALUES.value and base.op in GroupOp.ALU)) or steps[j] != 0 or other[j] == 0: continue
    # columns vectorize as they are (the input's stride read through its slices: a stride-2 conv's windows hide it under a SHRINK)
    if shape[j] % ROW_VECTOR == 0 and abs(axis_strides(x.src[1 - i], True)[1][j]) == 1: return None
    chans = [a for a in outs if steps[a] != 0 and other[a] == 0 and shape[a] % LANE_WIDTHS[-1] == 0]
    if not chans: continue
    c = chans[-1]
    widths = DECODED_LANE_WIDTHS if DECODED_LANES.value and _decoded(x.src[1 - i]) else LANE_WIDTHS
    if (w := next((v for v in widths if shape[c] % v == 0), None)) is None: return None
    # axis c split into (c/w, w): the lanes are axis c+1, moved last; the reduce axes after c move one up
    split = shape[:c] + (shape[c] // w, w) + shape[c + 1:]
    srcs = [UOp(Ops.RESHAPE, x.dtype, (s,), split) for s in x.src]
    srcs[i] = _innermost(srcs[i], axis_strides(srcs[i], sliced)[1], c + 1)
    red = [a + 1 if a > c else a for a in r.arg[1]]
    lanes_bytes = prod(d for d, st in zip(shape, steps) if st != 0) * x.dtype.itemsize
    perm = _loop_order(split, red, c, _source_bytes(x.src[1 - i]) >= ROWS_FIRST_INPUT * lanes_bytes)
    xs = UOp(Ops.PERMUTE, x.dtype, (x.replace(src=tuple(srcs)),), perm)
    axes = tuple(sorted(perm.index(a) for a in red))
    out = UOp(Ops.CONTIGUOUS, r.dtype, (_sliced_sum(xs, axes, lanes_bytes),))
    back = UOp(Ops.PERMUTE, r.dtype, (out,), tuple(perm.index(a) for a in range(len(split))))
    return UOp(Ops.RESHAPE, r.dtype, (back,), r.shape)
  return None


# batch 1 (the channel blocks the outermost output loop, the one the threads split) with an input this many times the weight's
# size: the channel blocks nest inside the output rows, so that each thread reads its rows of the input once for every channel
# block, instead of all of the input once per channel block. ResNet's 3x3 stride-2 128x56 layer (a 1.7 MB padded input, a
# 590 KB weight) 176-184 -> 232-250 GFLOP/s, its 1x1 256x56 layer 136-147 -> 150-161, the 1x1 stride-2 one 132-144 -> 194;
# with a smaller input slower (3x3 128x28, batch 1: 460 KB over 590 KB, 293-303 -> 258-265). A weight gradient at batch 1 (the
# output's gradient as the lanes operand, the input channels as the rows) measured the same either way (dw 3x3 s2 b1 128x56)
ROWS_FIRST_INPUT = 2


def _decoded(u: UOp) -> bool:
  """Whether u is computed per element from a buffer of narrower integers (a quantized matrix dequantized in the kernel), not
  a view of a buffer or of a copy: a value each lane block decodes again."""
  while u.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SHRINK, Ops.PAD, Ops.FLIP): u = u.src[0]
  if u.op in (Ops.BUFFER, Ops.CONTIGUOUS) or not dtypes.is_float(u.dtype): return False
  return any(n.op is Ops.BUFFER and dtypes.is_int(n.dtype) and n.dtype.itemsize < u.dtype.itemsize for n in u.toposort())


def _source_bytes(u: UOp) -> int:
  """Bytes of what u views: the node under its movement ops (a buffer, or a copy such as the padded input's)."""
  while u.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SHRINK, Ops.PAD, Ops.FLIP): u = u.src[0]
  return prod(u.shape) * u.dtype.itemsize


def _loop_order(split: tuple[int, ...], red: list[int], c: int, rows_first: bool) -> tuple[int, ...]:
  """The permutation of the split axes that puts the lanes (c + 1) last; with rows_first at batch 1, the channel blocks (c)
  also move inside the other output loops but the innermost (the columns, whose block of pixels shares each weight load)."""
  outs = [a for a in range(len(split)) if a not in red and a != c + 1 and split[a] > 1]
  # the rows then are the loop the threads split: an odd count doesn't split (heuristics: an uneven split costs more than it saves)
  if not rows_first or len(outs) < 3 or outs[0] != c or split[outs[1]] % 2: return tuple([a for a in range(len(split)) if a != c + 1] + [c + 1])
  outs = outs[1:-1] + [c, outs[-1]]
  return tuple(outs + [a for a in range(len(split)) if a not in outs and a != c + 1] + [c + 1])


# a weight gradient (a long reduction over the images' pixels: SLICE_MIN_REDUCE+ elements, fewer than twice as many outputs, and
# 3+ output loops: channel blocks, input channels or taps, lanes) whose lanes operand (the output's gradient) is bigger than
# SLICE_BYTES runs in slices of its images, a kernel each that adds its sum to the ones before, so that each output block
# rereads one slice of that operand from L2 instead of all of it from memory. ResNet's 3x3 64x56 layer, batch 8 (a 6.4 MB
# gradient): dw 222-224 -> 336-363 GFLOP/s in 4 slices (8: 336-354, 2: 307-333); the stride-2 128x28 one (1.6 MB) 286-330
# either way, so not sliced. Its 1x1 256x56 layer (a 1x1's block is 32 lanes x 8 input channels, no taps): batch 8 151-155 ->
# 272-284 (4 slices), batch 32 160 -> 243 (16 slices)
SLICE_MIN_REDUCE = 1 << 14
SLICE_BYTES = 2 << 20


def _sliced_sum(xs: UOp, axes: tuple[int, ...], lanes_bytes: int) -> UOp:
  """SUM over axes of xs (float), in slices of the outermost reduce axis where that pays (see SLICE_BYTES)."""
  shape: tuple[int, ...] = xs.shape
  whole = UOp(Ops.REDUCE_AXIS, xs.dtype, (xs,), (Ops.ADD, axes))
  reduced, kept = prod(shape[a] for a in axes), [shape[a] for a in range(len(shape)) if a not in axes and shape[a] > 1]
  first = next((a for a in axes if shape[a] > 1), None)
  if first is None or reduced < SLICE_MIN_REDUCE or prod(kept) > 2 * reduced or len(kept) < 3 or lanes_bytes <= SLICE_BYTES: return whole
  n = next((d for d in range(2, shape[first] + 1) if shape[first] % d == 0 and lanes_bytes // d <= SLICE_BYTES), shape[first])
  step, out = shape[first] // n, None
  for i in range(n):
    cut = tuple((i * step, (i + 1) * step) if a == first else (0, d) for a, d in enumerate(shape))
    part = UOp(Ops.REDUCE_AXIS, xs.dtype, (UOp(Ops.SHRINK, xs.dtype, (xs,), cut),), (Ops.ADD, axes))
    out = part if out is None else UOp(Ops.ADD, xs.dtype, (UOp(Ops.CONTIGUOUS, xs.dtype, (out,)), part))
  assert out is not None
  return out


def _innermost(b: UOp, steps: list[int], c: int) -> UOp:
  """b (a view of a buffer, expanded over the axes it doesn't read) as the same view of a contiguous copy in which axis c
  is innermost and the other axes b reads keep their order."""
  return copied_with_axes_last(b, steps, (c,))
