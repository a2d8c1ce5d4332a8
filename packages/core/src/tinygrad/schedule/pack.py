"""Panel packing of a CPU matmul's shared operand: B, read by the register block 16 columns at a time down the whole
reduction, is first copied (a kernel of its own) into panel order (..., N/w, K, w), so that the matmul kernel reads each panel
as one contiguous run. A transposed B (x @ W.T, W's rows along K) is packed the same way when A has PACK_MIN_ROWS_T rows (PACK_MIN_ROWS_SHORT_K
for a reduction shorter than PACK_SHORT_K).

Why: in row-major B (K, N) the w columns of one panel are N elements apart from one k to the next. At N = 1024 or 2048 that
stride is a multiple of 4 KiB, so every line of a panel falls in the same L1 set (8 ways for 1024 lines) and on a new page:
the panel that a row tile reuses is refetched from L3 for every row tile (1024/2048 matmuls ran at a third of 512's speed
on the same kernel). Only such strides are packed, multiples of PACK_ALIGN bytes (a panel's lines then fall in at most 8
of a 64-set L1): rows 1008 floats apart spread over all the sets and ran as fast unpacked (measured 18-22 GFLOP/s either
way, against 4.8 -> 16 for 1024, on the loaded 2-core VM). Packed, a panel is K*w*4 bytes in order, which the prefetcher
streams and L2 keeps. The copy reads and writes B once; the matmul reads it M/4 times, so it pays from a few dozen rows on.

Padded inputs (pad_inputs): a convolution's input with its zero border, computed in the kernel, costs a masked load (the
mask rebuilt for every step of the reduction); a copy of the padded input (a kernel of its own, one read and one write of the
input) lets the convolution read plain vectors: measured 11.6 -> 19.5 GFLOP/s for a 3x3 conv, batch 8, 64 channels at 56x56
on 2 loaded cores.

Applied by create_schedule (schedule/kernelize.py) to REDUCE_AXIS nodes of CPU-style devices, like the reduce split.
"""
from __future__ import annotations

import math

from tinygrad.dtype import dtypes
from tinygrad.helpers import ContextVar, prod
from tinygrad.schedule.conv_lanes import channel_lanes
from tinygrad.schedule.relayout import bytes_read, relayout_narrow
from tinygrad.schedule.stored_operands import store_computed_operands
from tinygrad.uop.ops import GroupOp, Ops, UOp

PACK_PANELS = ContextVar("PACK_PANELS", 1)  # 0: matmuls read B in place
PACK_MIN_REDUCE = 256  # the reduction (K) at least this long: a short panel fits in L1 anyway
# ... a transposed B (W.T) from a shorter one: there the register block would gather 16 of W's rows at each k, wherever they
# sit in cache (2 cores: 512x512 @ (512x128).T 62 -> 247 GFLOP/s, 25088x128 @ (64x128).T 24 -> 309; K=256 ran 271 packed)
PACK_MIN_REDUCE_T = ContextVar("PACK_MIN_REDUCE_T", 16)
PACK_MIN_STRIDE = 256  # B's elements N at least this far apart along K (a narrower B is small enough to stay in L2)
PACK_ALIGN = 512  # ... and a multiple of this many bytes apart (the lines of a panel share a few L1 sets)
PACK_MIN_ROWS = 64     # rows of A (M) that reuse each packed panel: below that the copy costs more than it saves
# ... for a transposed B (W.T): below this many rows the few-vectors form (codegen/heuristics.py: vectorized along K, W's rows
# reused for 8 rows of x) is as fast without a copy (64x576 @ (1536x576).T: 136 GFLOP/s); 25088x256 @ (64x256).T ran 23.5
PACK_MIN_ROWS_T = ContextVar("PACK_MIN_ROWS_T", 256)
# ... and from this many where the reduction is shorter than the few-vectors form takes (heuristics.SHARED_MIN_K, 512): there the
# register block gathered W's rows (2 cores: 128x256 @ (128x256).T 15 -> 86 GFLOP/s, 128x256 @ (784x256).T 18 -> 150, 32x128 @
# (512x128).T 14 -> 42, 16 rows 9 -> 20; a matrix-vector product (1 row) would copy all of W for nothing; with
# K = 576 the few-vectors form stays ahead: 64x576 @ (1536x576).T 125 against 110 packed). 16 until the few-vectors form's lanes
# were vectorized (LLVM's lane_sums.py, session 30): since then it is ahead below 64 rows (one thread, us: 16x128 @ (1024x128).T
# 114 -> 74, 32x128 150 -> 128, 32x256 @ (1024x256).T 277 -> 207, 16x256 @ (256x256).T 65 -> 42; 64 rows alike)
PACK_MIN_ROWS_SHORT_K = ContextVar("PACK_MIN_ROWS_SHORT_K", 64)
# ... but from 16 where x is at least half W's size: the few-vectors form doesn't take two inputs alike in size at a short K
# (heuristics.SHARED_MIN_K), and the register block gathers W's rows (grads.py's 32x64 @ (64x64).T: 39 us in place, 11 packed)
PACK_MIN_ROWS_SHORT_K_ALIKE = 16
PACK_SHORT_K = 512
PACK_CASTS = ContextVar("PACK_CASTS", 1)  # 0: a W cast from float16 (or bfloat16) is not packed (read in place, as before)
PACK_MIN_ROWS_CAST = ContextVar("PACK_MIN_ROWS_CAST", 128)  # rows of x from which such a W is packed, at any reduction length
PANEL_WIDTH = 16  # the CPU register block's width (codegen/heuristics.py's _register_block)
PAD_MIN_ELEMENTS = 1 << 16  # padded inputs this big and bigger are copied padded (a small one is cheap to mask, and in cache)
PAD_MIN_REUSE = 16  # outputs (a conv's output channels) that read each padded element: a copy for fewer doesn't pay
STORED = (Ops.BUFFER, Ops.CONTIGUOUS)  # operands laid out row-major in memory (a CONTIGUOUS: once its kernel has run)
MOVEMENT = (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SHRINK, Ops.PAD, Ops.FLIP)


VIEWS = (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.FLIP)  # the movement ops that move no element out of range


def _offsets(x: UOp, idx: tuple[int, ...], sliced: bool = False, casts: bool = False) -> tuple[UOp, int]:
  """(base, row-major position in base.shape) that element idx of x reads, through RESHAPE, PERMUTE, EXPAND and FLIP (a conv's
  input gradient reads its weight flipped); with sliced through SHRINK and PAD too, as the linear map they are inside their
  range (a strided conv's input gradient takes every s-th tap of its weight: a pad, a reshape and a shrink); with casts through
  a float widening (a float16 W read as float: element for element)."""
  while x.op in VIEWS or (sliced and x.op in (Ops.SHRINK, Ops.PAD)) or (casts and _widening(x)):
    x, idx = x.src[0], (idx if x.op is Ops.CAST else _step(x, idx))
  return x, sum(i * st for i, st in zip(idx, _strides(x.shape)))


def _widening(x: UOp) -> bool:
  """A CAST from a narrower float to a float (float16 or bfloat16 to float32)."""
  return (x.op is Ops.CAST and dtypes.is_float(x.dtype) and dtypes.is_float(x.src[0].dtype)
          and x.src[0].dtype.itemsize < x.dtype.itemsize)


def _strides(shape: tuple) -> tuple[int, ...]:
  out, acc = [], 1
  for s in reversed(shape):
    out.append(acc)
    acc *= s
  return tuple(reversed(out))


def _axis_strides(x: UOp, sliced: bool = False, casts: bool = False) -> tuple[UOp, list[int]]:
  """The base under x's movement ops and how far its read position moves per step of each axis of x (memory, where the
  base is a realized buffer). sliced, casts: see _offsets."""
  base, origin = _offsets(x, (0,) * len(x.shape), sliced, casts)
  steps = []
  for a, s in enumerate(x.shape):
    steps.append(_offsets(x, tuple(1 if i == a and s > 1 else 0 for i in range(len(x.shape))), sliced, casts)[1] - origin if s > 1 else 0)
  # a reshape that merges an expanded axis with another ((G, R) -> G*R: a GQA's repeated heads) moves the read position by
  # no single step per axis: described as x itself, contiguous, so that no caller takes an axis for a broadcast one. (Read
  # through slices, positions in the padding have no place in the base: the map holds only inside the range, unchecked)
  if not sliced and not _affine(x, origin, steps, sliced, casts):
    return x, [st if s > 1 else 0 for s, st in zip(x.shape, _strides(x.shape))]
  return base, steps


def _affine(x: UOp, origin: int, steps: list[int], sliced: bool, casts: bool) -> bool:
  """Whether element idx of x reads position origin + sum(idx * steps), checked along each axis (every position up to 512,
  beyond that the first 64, the divisors and the last: where a merged axis's digits carry) and at the far corner."""
  nd = len(x.shape)
  for a, s in enumerate(x.shape):
    if s <= 2: continue
    pts = set(range(2, s)) if s <= 512 else {*range(2, 64), s - 1, *(d for d in range(2, math.isqrt(s) + 1) if s % d == 0),
                                             *(s // d for d in range(2, math.isqrt(s) + 1) if s % d == 0)}
    for i in pts:
      if _offsets(x, tuple(i if b == a else 0 for b in range(nd)), sliced, casts)[1] != origin + i * steps[a]: return False
  corner = tuple(s - 1 for s in x.shape)
  return _offsets(x, corner, sliced, casts)[1] == origin + sum(c * st for c, st in zip(corner, steps))


def rewrite_cpu_reduce(r: UOp) -> UOp | None:
  """A CPU reduction over stored copies of its computed operands (stored_operands.py) and a packed B (pack_panels) or a narrow
  operand laid out anew (relayout.py), or over
  padded copies of its inputs (pad_inputs) and with its output channels as the vector lanes (conv_lanes.py); None where none
  applies."""
  new = r if (stored := store_computed_operands(r, _reused)) is None else stored
  if (packed := pack_panels(new)) is not None: return packed
  if (padded := pad_inputs(new)) is not None: new = padded
  if (lanes := channel_lanes(new, _axis_strides)) is not None: new = lanes
  # (a 1x1 convolution with 14-wide rows is narrow too, but its channels as the lanes serve it better)
  elif padded is None and (narrow := relayout_narrow(new, _axis_strides)) is not None: new = narrow
  return None if new is r else new


def pad_inputs(r: UOp) -> UOp | None:
  """REDUCE_AXIS(ADD, MUL(a, b)) over several reduce loops (a convolution) where an input is a zero-padded view of a realized
  buffer, big (PAD_MIN_ELEMENTS) and shared by PAD_MIN_REUSE or more outputs: the PAD realized as a copy of its own."""
  if not PACK_PANELS.value or r.arg[0] is not Ops.ADD or (x := r.src[0]).op is not Ops.MUL or not dtypes.is_float(x.dtype): return None
  if not all(isinstance(s, int) for s in x.shape) or sum(1 for a in r.arg[1] if x.shape[a] > 1) < 2: return None
  new = list(x.src)
  for i, op in enumerate(x.src):
    chain, base = [], op
    while base.op in MOVEMENT:
      chain.append(base)
      base = base.src[0]
    pads = [n for n in chain if n.op is Ops.PAD]
    # (a computed input, a conv's upstream gradient through a norm's backward, is computed into the padded copy once)
    if base.op not in (Ops.BUFFER, *GroupOp.ALU) or len(pads) != 1 or not all(isinstance(d, int) for d in pads[0].shape): continue
    if prod(pads[0].shape) < PAD_MIN_ELEMENTS: continue
    if Ops.SHRINK in {n.op for n in chain[chain.index(pads[0]):]}: continue  # a shrink under the pad: a slice, not a conv input
    if not _reused(op, r, PAD_MIN_REUSE): continue
    new[i] = op.substitute({pads[0]: UOp(Ops.CONTIGUOUS, pads[0].dtype, (pads[0],))})
  return None if new == list(x.src) else r.replace(src=(x.replace(src=tuple(new)),))


def _reused(op: UOp, r: UOp, n: int) -> bool:
  """True when op's value doesn't change along output loops of r totalling n or more iterations (through its movement ops
  from the top: an EXPAND of a size-1 axis)."""
  x = r.src[0]
  outs = [a for a in range(len(x.shape)) if a not in r.arg[1]]
  still = 1
  for a in outs:
    idx = [0] * len(x.shape)
    if x.shape[a] > 1:
      idx[a] = 1
      if _moves(op, tuple(idx)): continue
      still *= x.shape[a]
  return still >= n


def _moves(op: UOp, idx: tuple[int, ...]) -> bool:
  """True when element idx of op (through the VIEWS from the top) is a different element than element 0."""
  zero = (0,) * len(idx)
  while op.op in VIEWS:
    op, idx, zero = op.src[0], _step(op, idx), _step(op, zero)
  return idx != zero


def _step(x: UOp, idx: tuple[int, ...]) -> tuple[int, ...]:
  src = x.src[0]
  if x.op is Ops.RESHAPE:
    flat = sum(i * st for i, st in zip(idx, _strides(x.shape)))
    return tuple((flat // st) % s for st, s in zip(_strides(src.shape), src.shape))
  if x.op is Ops.PERMUTE:
    out = [0] * len(idx)
    for i, a in enumerate(x.arg): out[a] = idx[i]
    return tuple(out)
  if x.op is Ops.FLIP: return tuple(s - 1 - i if f else i for i, s, f in zip(idx, src.shape, x.arg))
  if x.op is Ops.SHRINK: return tuple(i + lo for i, (lo, _) in zip(idx, x.arg))
  if x.op is Ops.PAD: return tuple(i - lo for i, (lo, _) in zip(idx, x.arg))
  return tuple(0 if s == 1 else i for i, s in zip(idx, src.shape))


def pack_panels(r: UOp) -> UOp | None:
  """REDUCE_AXIS(ADD, MUL(a, b)) with b a big realized matrix read with a long stride along the reduction: the same reduction
  over b read from a packed copy (see the module's docstring), else None."""
  if not PACK_PANELS.value or r.arg[0] is not Ops.ADD or (x := r.src[0]).op is not Ops.MUL or not dtypes.is_float(x.dtype): return None
  if not all(isinstance(s, int) for s in x.shape): return None
  shape: tuple[int, ...] = x.shape
  reds = [a for a in r.arg[1] if shape[a] > 1]
  outs = [a for a in range(len(shape)) if a not in r.arg[1] and shape[a] > 1]
  if len(reds) != 1 or not outs or shape[reds[0]] < min(PACK_MIN_REDUCE, PACK_MIN_REDUCE_T.value): return None
  k, j = reds[0], outs[-1]  # the reduction and the register block's loop (the innermost output loop)
  # a float16 W read as float is packed too (the panels hold it as float), from more rows (PACK_MIN_ROWS_CAST, below)
  views = [_axis_strides(op, casts=bool(PACK_CASTS.value)) for op in x.src]
  for i, (base, steps) in enumerate(views):
    if base.op not in STORED or steps[j] == 0 or steps[k] == 0: continue
    if views[1 - i][1][j] != 0: continue  # a doesn't move with j: each of its elements serves the whole register block
    # B = W.T (nn.Linear's x @ W.T): contiguous along k, its columns W's rows; the register block would read 16 of them per k
    transposed = abs(steps[k]) == 1 and abs(steps[j]) >= PANEL_WIDTH
    cast = base.dtype != x.dtype  # a float16 W read as float (PACK_CASTS): only x @ W.T measured
    if cast and not transposed: continue
    if transposed and shape[k] < PACK_MIN_REDUCE_T.value: continue
    if not transposed:
      if shape[k] < PACK_MIN_REDUCE: continue
      if abs(steps[j]) != 1 or abs(steps[k]) < PACK_MIN_STRIDE: continue  # contiguous along j and far apart along k
      if abs(steps[k]) * x.dtype.itemsize % PACK_ALIGN: continue
    min_rows = (PACK_MIN_ROWS_SHORT_K.value if shape[k] < PACK_SHORT_K else PACK_MIN_ROWS_T.value) if transposed else PACK_MIN_ROWS
    if transposed and shape[k] < PACK_SHORT_K and bytes_read(x.src[1 - i], views[1 - i][1]) * 2 >= bytes_read(x.src[i], steps):
      min_rows = min(min_rows, PACK_MIN_ROWS_SHORT_K_ALIKE)
    # a float16 W read as float: packed from 128 rows at any K. Session 28 packed it from 32 (2 cores, us: 32x2048 @ (2048x2048
    # half).T 5,604 -> 3,950, 32x128 @ (1024x128 half).T 706 -> 214) while the few-vectors form ran scalar at short K and split the
    # vectors over the threads, each reading all of W; with its lanes vectorized and W's rows split (session 30) it is ahead below
    # 128 rows (one thread, us: 32x128 241 -> 128, 64x576 @ (1536x576 half).T 1,967 -> 1,165, 32x2048 @ (2048x2048 half).T 7,547
    # -> 5,504; the tiny F16 model's pp32 / pp64 / pp512 on 2 cores 20.1k / 27.9k / 12.8k -> 32.6k / 34.3k / 16.7k tok/s), the
    # panels from 128 (128x2048 @ (2048x2048 half).T 22.6 -> 15.1 ms)
    if cast: min_rows = PACK_MIN_ROWS_CAST.value
    if prod(shape[a] for a in outs if steps[a] == 0) < min_rows: continue
    if shape[j] % (w := PANEL_WIDTH): continue
    a = _rows_contiguous(x.src[1 - i], views[1 - i], k, len(shape)) if shape[j] >= PACK_MIN_ROWS else x.src[1 - i]
    srcs = [a, a]
    srcs[i] = _packed(x.src[i], steps, j, k, w)
    return k_slices(r, x.replace(src=tuple(srcs)), k)
  return None


def _rows_contiguous(a: UOp, view: tuple[UOp, list[int]], k: int, ndim: int) -> UOp:
  """A (the broadcast operand) read far apart along the reduction (A.T @ B, a weight gradient's x.T @ g): its un-broadcast view
  copied with the reduction innermost, so the register block's broadcasts step through it contiguously. Read in place, every
  reduce step of a 2048^3 A.T @ B was another page (8 KB apart): 62 GFLOP/s against 200 for A @ B."""
  base, steps = view
  if base.op not in STORED or abs(steps[k]) < PACK_MIN_STRIDE or k != ndim - 1 or a.op is not Ops.EXPAND: return a
  return a.replace(src=(UOp(Ops.CONTIGUOUS, a.dtype, (a.src[0],)),))


# A packed matmul's reduction runs in slices of at most this many elements, a kernel each (k_slices). Measured on 2 cores of
# an AVX-512 VM (8x32 register block, 64-row cache blocks): 4096^3 in one kernel 318-333 GFLOP/s, in two slices of 2048
# 343-366, in four 341; 2048^3 in one 332, in two 312 (the sum so far, written and read again, costs more than it saves there)
K_SLICE = ContextVar("K_SLICE", 2048)
MAX_K_SLICES = 16


def k_slices(r: UOp, x: UOp, k: int) -> UOp:
  """REDUCE_AXIS(ADD) r over x (float32) along axis k, as equal slices of at most K_SLICE: slice s a kernel of its own that adds
  the sum of the slices before it (a buffer) to its own. A block of A's rows runs over every column panel of B while it stays in
  L2 (rows x K floats: 64 x 4096 x 4 bytes is 1 MiB, half of the 2 MiB L2), which a long reduction doesn't allow in one kernel."""
  size, n = x.shape[k], 1
  if (kc := K_SLICE.value) > 0 and x.dtype == dtypes.float32 and isinstance(size, int) and size > kc:
    n = next((c for c in range(-(-size // kc), MAX_K_SLICES + 1) if size % c == 0), 1)
  if n == 1: return r.replace(src=(x,))
  out: UOp | None = None
  for s in range(n):
    part = r.replace(src=(UOp(Ops.SHRINK, x.dtype, (x,), tuple((s * size // n, (s + 1) * size // n) if a == k else (0, d)
                                                                for a, d in enumerate(x.shape))),))
    out = part if out is None else UOp(Ops.ADD, r.dtype, (UOp(Ops.CONTIGUOUS, r.dtype, (out,)), part))
  assert out is not None
  return out


def _packed(b: UOp, steps: list[int], j: int, k: int, w: int) -> UOp:
  """b (expanded over the axes it doesn't read) as a view of a contiguous copy laid out (others..., N/w, K, w)."""
  shape: tuple[int, ...] = b.shape
  dep = [a for a in range(len(shape)) if steps[a] != 0]  # the axes b reads, in order
  others = [a for a in dep if a not in (j, k)]
  # b without its broadcast axes, in the order (others..., j, k)
  flat = UOp(Ops.SHRINK, b.dtype, (b,), tuple((0, s if a in dep else 1) for a, s in enumerate(shape)))
  order = others + [j, k]
  small = UOp(Ops.PERMUTE, b.dtype, (UOp(Ops.RESHAPE, b.dtype, (flat,), tuple(shape[a] for a in dep)),), tuple(dep.index(a) for a in order))
  lead = tuple(shape[a] for a in others)
  nj, nk, n = len(lead), len(lead) + 1, len(lead) + 2
  split = UOp(Ops.RESHAPE, b.dtype, (small,), lead + (shape[j] // w, w, shape[k]))
  packed = UOp(Ops.CONTIGUOUS, b.dtype, (UOp(Ops.PERMUTE, b.dtype, (split,), tuple(range(nj)) + (nj, n, nk)),))
  # and back: (others..., N/w, w, K) -> (others..., N, K) -> the order of dep -> b's shape with 1s -> expanded
  back = UOp(Ops.RESHAPE, b.dtype, (UOp(Ops.PERMUTE, b.dtype, (packed,), tuple(range(nj)) + (nj, n, nk)),), lead + (shape[j], shape[k]))
  back = UOp(Ops.PERMUTE, b.dtype, (back,), tuple(order.index(a) for a in dep))
  back = UOp(Ops.RESHAPE, b.dtype, (back,), tuple(s if a in dep else 1 for a, s in enumerate(shape)))
  return UOp(Ops.EXPAND, b.dtype, (back,), shape)
