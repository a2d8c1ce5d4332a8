"""Hand-coded heuristics: the optimizations (codegen/opt.py's actions) a kernel gets without a BEAM search.

Register blocking for matmul-like reductions, independent accumulators for long reductions, threads for big CPU kernels,
and on GPU renderers (has_local) a block of threads per output row (GROUP) for matrix-vector products and norms. The
constants were tuned on the machines bench/README.md names (the GPU ones on an H200); the scheduler's reduce split
defers to the GROUP ones (engine/realize.py passes them to it).
"""
from __future__ import annotations

from tinygrad.codegen.opt import KernelOptError, Opt, OptOps, apply_opts, range_size, ranges_of
from tinygrad.dtype import PtrDType, dtypes
from tinygrad.helpers import ContextVar, prod
from tinygrad.uop.ops import GroupOp, Ops, UOp
from tinygrad.uop.symbolic import split_terms


def _largest_divisor(size: int | None, choices: tuple[int, ...]) -> int:
  if size is None: return 1
  return next((c for c in choices if size % c == 0 and size >= c), 1)


def hand_coded_opts(ast: UOp, threads: int = 1, wide_loads: bool = False, gpu: bool = False, accumulators: int = 128,
                    early_loads: int = 0, resident_threads: int = 0) -> list[Opt]:
  """A good default per kernel: register-block reductions (matmul-like) over the two innermost output loops,
  split long reductions into independent accumulators, and use every core on big kernels. `accumulators`: how many float32
  accumulators a CPU register block may hold without spilling (Renderer.accumulators). `early_loads`, `resident_threads`: the most
  matrix loads a lane may issue before a GPU kernel's grid wait, and the threads the GPU keeps resident (codegen/early_loads.py)."""
  rngs = ranges_of(ast)
  outs = sorted((r for r in rngs.values() if r.arg[1] == "global"), key=lambda r: r.arg[0])
  reds = sorted((r for r in rngs.values() if r.arg[1] == "reduce"), key=lambda r: r.arg[0])
  opts: list[Opt] = []
  thread_loop = outs[0] if outs else None  # the output loop THREAD splits
  n_reduces = sum(1 for n in ast.toposort() if n.op is Ops.REDUCE)
  if gpu and reds and GROUP_REDUCE.value and (grouped := _gpu_group_reduce(ast, outs, reds, wide_loads, early_loads, resident_threads)): return grouped
  if gpu and reds and n_reduces <= 2 and not _is_reused_reduce(ast, gpu=True): return _gpu_plain_reduce(ast, outs, reds, wide_loads)
  if reds and n_reduces <= 2:
    if not gpu and not _big_operand_is_shared(ast):
      # CPU matrix-vector products (and the like): every output reads its own slice of the biggest input, so register
      # blocking saves nothing on it and turns its contiguous loads into strided ones; vectorize along the reduction instead,
      # or along the outputs where the input runs that way (a column sum, x @ W with W stored (K, N))
      opts.extend(_outputs_as_lanes(ast, outs, reds) or _unroll_each_reduce(ast))
      # below ~128k loop iterations (~10-20 us) starting the threads costs more than they save. In a TinyJit replay on the
      # CPU threads meet at a spinning barrier (backend-cpu native_graph.py), so the bound is low: SmolLM2's decode matvecs of
      # 576 x 576..1536 split over 2 cores, 89 -> 135 tok/s (bound 1M before: threads then woke per kernel, ~25-70 us)
      if _loop_work(ast) < MATVEC_THREAD_WORK: threads = 1
    elif not gpu and n_reduces == 1 and (unrolls := _unroll_each_reduce(ast)) and (shared := _contiguous_shared_operand(ast)) is not None:
      # a matrix times a few vectors (x @ W.T, W in rows): W's rows are contiguous along the reduction, so vectorize along it
      # (UNROLL) and reuse each loaded piece of W for several vectors (UPCAST the output loop W doesn't depend on)
      opts.extend(_short_unrolls(ast, unrolls))
      if (k := _largest_divisor(range_size(shared), (8, 4, 2))) > 1: opts.append(Opt(OptOps.UPCAST, shared.arg[0], k))
      # the threads split W's rows: each reads its share of W once (split by vectors, each thread read and decoded all of W:
      # 8 x 128 @ (1024 x 128).T ran on one thread, its 8 vectors all upcast). Not below ~128k loop iterations (see above)
      rows = [r for r in outs if r is not shared]
      if rows: thread_loop = rows[0]
      if _loop_work(ast) < MATVEC_THREAD_WORK: threads = 1
    elif outs and _is_reused_reduce(ast):  # each input element is read by many outputs: block registers
      if not gpu and _multiply_adds(ast, outs) < SMALL_BLOCK_WORK and _value_ops(ast) > SMALL_BLOCK_OPS: block = []  # (see there)
      elif not gpu and (block := _lanes_block(ast, outs, accumulators, threads)): pass  # a convolution with its channels as lanes
      elif not gpu and (block := _decoded_lanes_block(ast, outs, accumulators)): pass  # rows of x as lanes times a decoded matrix
      elif (block := _register_block(ordered := outs if gpu else _blocking_order(ast, outs), gpu,
                                     acc := accumulators if gpu else _epilogue_accumulators(ast, accumulators))) and not gpu:
        block += _fill_block(ast, ordered, block, acc)
      # a GPU kernel with too few outputs to block and still fill the chip (a matrix-vector product) is a plain reduce
      if gpu and not block: return _gpu_plain_reduce(ast, outs, reds, wide_loads)
      opts.extend(block)
      if not gpu: opts.extend(_cache_block(ast, block, reds))
      if not gpu and len(block) == 1 and block[0].axis == outs[-1].arg[0] and (size := range_size(inner := reds[-1])) and size >= 256 and size % 4 == 0:
        # blocked along one loop only (attention's probabilities times V): 4 accumulators per output break the chain of
        # dependent adds through a long reduction
        opts.append(Opt(OptOps.UNROLL, inner.arg[0], 4))
    else:  # a plain reduction (sum over an axis): independent accumulators so it vectorizes
      inner = reds[-1]
      if (k := _largest_divisor(range_size(inner), (16, 8, 4))) > 1 and (range_size(inner) or 0) >= 64:
        opts.append(Opt(OptOps.UNROLL, inner.arg[0], k))
  if not gpu: opts = _cap_unrolls(ast, opts)
  if not gpu and not reds and (up := _branch_upcast(ast, outs)): opts.extend(up)
  elif not gpu and not reds and (up := _transposed_read(ast, outs)): opts.extend(up)
  elif wide_loads and not reds and outs and (size := range_size(outs[-1])) is not None and size % 4 == 0:  # not a symbolic size
    opts.append(Opt(OptOps.UPCAST, outs[-1].arg[0], 4))  # four neighbours per thread: one 16-byte access (vectorize.py)
  # on a CPU the threads split one output loop (the outermost, or W's rows above): one that doesn't divide evenly gets clamped
  # indices and gated stores, which cost more than the second thread gains (attention over 3 KV heads on 2 threads ran 10x
  # slower): so as many threads as divide it (a batch of 8 on 16 cores: 8 threads, not 1)
  if not gpu and thread_loop is not None and (size := range_size(thread_loop)) is not None:
    left = size // prod(o.amount for o in opts if o.op in (OptOps.UPCAST, OptOps.BLOCK) and o.axis == thread_loop.arg[0])  # what's left
    threads = _largest_divisor(left, tuple(range(max(threads, 1), 1, -1)))
  elif not gpu: threads = 1
  # THREAD(0, n) is the outermost loop (the BEAM cache's and the tests' form); another loop by its id
  if threads > 1 and thread_loop is not None: opts.append(Opt(OptOps.THREAD, 0 if thread_loop is outs[0] else thread_loop.arg[0], threads))
  return opts


BRANCH_UPCAST = ContextVar("BRANCH_UPCAST", 8)  # 0: off; else the most lanes an output loop that picks a branch is upcast by
BRANCH_MIN_POINTS = 4  # a loop compared with this many different bounds picks among pieces (a cat or stack of 4+ tensors)
BRANCH_MAX_SIZE = 64


def _branch_upcast(ast: UOp, outs: list[UOp]) -> list[Opt]:
  """CPU elementwise kernels that pick one of many pieces by an output index (`Tensor.stack` of 16 crops, a cat of many
  slices): each piece is a gated load whose gate compares that loop's index with the piece's bounds, so every element
  evaluated every piece's gate and index (bench/programs/dataaug.py: 16 crops, 0.7 ms). Upcasting the loop makes its index a
  constant in each lane, where all gates but one fold away (71 us, BEAM's pick, by 4)."""
  points: dict[UOp, set[tuple[UOp, object]]] = {}
  for n in ast.toposort():
    if n.op is not Ops.CMPLT or n.src[1].op is not Ops.CONST: continue
    # an index compared with a bound; not a value loaded through it (softplus's gradient compares x with its thresholds)
    ts = n.src[0].toposort()
    if len(rs := [u for u in ts if u.op is Ops.RANGE]) == 1 and not any(u.op is Ops.LOAD for u in ts):
      points.setdefault(rs[0], set()).add((n.src[0], n.src[1].arg))
  best = max((r for r in outs if len(points.get(r, ())) >= BRANCH_MIN_POINTS and (range_size(r) or BRANCH_MAX_SIZE + 1) <= BRANCH_MAX_SIZE),
             key=lambda r: len(points[r]), default=None)
  if best is None or not BRANCH_UPCAST.value: return []
  k = _largest_divisor(range_size(best), tuple(c for c in (64, 32, 16, 8, 4, 2) if c <= BRANCH_UPCAST.value))
  return [Opt(OptOps.UPCAST, best.arg[0], k)] if k > 1 else []


def _transposed_read(ast: UOp, outs: list[UOp]) -> list[Opt]:
  """CPU elementwise kernels that write the transpose of what they read (a quantized weight dequantized into a (K, N) panel,
  tinygrad.llm's CPU prefill): the innermost output loop strides through the biggest input, an outer one walks it contiguously.
  UPCAST that outer loop by 8 (or 4): each step reads a contiguous run of a quantization block and writes it down a column,
  instead of one scattered byte per element (SmolLM2's 3072x576 Q4_1 -> f16 panel: 1.9 -> 0.68 ms on 2 cores; by 32 it ran
  0.44 ms, but LLVM took about three times as long to compile each such kernel: a second more per kernel on a cold start)."""
  if len(outs) < 2: return []
  loads = [n for n in ast.toposort() if n.op is Ops.LOAD and n.src and n.src[0].op is Ops.INDEX]
  biggest = max((_buffer_bytes(ld) for ld in loads), default=0)
  big = [ld for ld in loads if biggest and _buffer_bytes(ld) == biggest]
  if not big or any(_index_stride(ld, outs[-1]) in (0, 1, None) for ld in big): return []
  for r in reversed(outs[:-1]):
    if all(_index_stride(ld, r) in (0, 1) for ld in big) and any(_index_stride(ld, r) == 1 for ld in big):
      return [Opt(OptOps.UPCAST, r.arg[0], k)] if (k := _largest_divisor(range_size(r), (8, 4))) > 1 else []
  return []


GPU_MIN_THREADS = 1 << 16  # register blocking on a GPU keeps at least this many threads (the H200 holds ~270k)


WIDE_BLOCK = 32 * 8  # CPU: accumulators from which the register block is 32 wide (two 16-lane registers per row, 8 rows)
# ... for 256+ rows only: a 32-wide block doubles the unrolled body that is lowered and compiled. SmolLM2's 72-token prompt
# (zmm registers, llm_ttft.py): cold TTFT 3.36 s with 8x16 blocks, 4.33 s with 8x32, for a prefill 5-7% faster
WIDE_MIN_ROWS = 256


def _register_block(outs: list[UOp], gpu: bool, accumulators: int = 128) -> list[Opt]:
  """UPCAST the innermost output loop by up to 16 and the next by up to 8. On a GPU only as far as the threads left
  (outputs / block) still number GPU_MIN_THREADS; a block of fewer than 4 is not worth it there. On a CPU only as far as the
  accumulators fit in the vector registers: a spilled accumulator is a store and a load per multiply-add (AVX2's 16
  registers hold 4x16 floats plus the operands, measured 8x16 spilling 9 of them every iteration). With AVX-512's 32 zmm
  registers (WIDE_BLOCK fits) and WIDE_MIN_ROWS rows the innermost loop goes to 32: 8x32 loads 2 vectors of B and broadcasts 8 of A per 16
  multiply-adds, against 1 and 8 per 8 for 8x16 (one core, 2048 matmul: 163 GFLOP/s against 133 for 8x16 and 123 for 16x16)."""
  total = 1
  for o in outs: total *= range_size(o) or 1024  # a symbolic size counts as big
  budget = max(total // GPU_MIN_THREADS, 1) if gpu else 1 << 30
  opts: list[Opt] = []
  if not gpu and len(outs) >= 2 and _largest_divisor(range_size(outs[-1]), (16, 8, 4)) == 1 < _largest_divisor(range_size(outs[-2]), (16, 8, 4)):
    # an innermost loop that takes no vector (10 wide: a weight gradient stored as W (512, 10)) leaves the block one chain of
    # dependent multiply-adds per output; the loop outside it is the lanes instead (one thread: 175 -> 45 us)
    outs = [*outs[:-2], outs[-1], outs[-2]]
  wide = not gpu and accumulators >= WIDE_BLOCK and len(outs) >= 2 and (range_size(outs[-2]) or 0) >= WIDE_MIN_ROWS
  widths = (32, 16, 8, 4) if wide else (16, 8, 4)
  k = _largest_divisor(range_size(outs[-1]), tuple(c for c in widths if c <= budget))
  if k > 1: opts.append(Opt(OptOps.UPCAST, outs[-1].arg[0], k))
  if not gpu: budget = accumulators
  if len(outs) >= 2 and (k2 := _largest_divisor(range_size(outs[-2]), tuple(c for c in (8, 4, 2) if c * k <= budget))) > 1:
    opts.append(Opt(OptOps.UPCAST, outs[-2].arg[0], k2))
  if gpu and prod(o.amount for o in opts) < 4: return []
  return opts


# CPU: pixels a convolution's register block takes besides its channel lanes (each one broadcast per step): 9 lets a weight
# gradient's block be its 3x3 taps (ResNet's 3x3 64x56 layer, batch 8: dw 160-164 GFLOP/s with 3 taps x 2 channels, 216-225 with
# 3x3 taps; the stride-2 128x28 one 262-289 -> 309-311)
LANES_PIXELS = 9


def _lanes_block(ast: UOp, outs: list[UOp], accumulators: int, threads: int = 1) -> list[Opt]:
  """CPU: a convolution in the channel-lanes layout (schedule/conv_lanes.py: output loops (N, C/w, H, W, w), w = 8, 16 or 32
  channels whose weights are neighbours, one input pixel shared by all of them): UPCAST the lanes whole, and the pixel loops
  (W, then H, then N: those the weight doesn't depend on) by divisors of up to LANES_PIXELS pixels in all, within the
  accumulators (like the matmul's 8x32 block: 2 weight vectors and 8 broadcasts per 16 multiply-adds). A row of 7 or 14 takes
  7 pixels, one of 56 takes 8. Measured on the 2-core AVX-512 VM, 32 lanes x 7 pixels against the 16 x 2 x 2 block that
  _fill_block gave: ResNet's 3x3 256x14 layer, batch 8, 222 -> 255 GFLOP/s with 16 lanes x 2 channel blocks, 353-373 with 32
  lanes. [] where the kernel isn't one."""
  if len(outs) < 4: return []
  lanes, loads = outs[-1], _loads_in_reduces(ast)
  if range_size(lanes) not in (8, 16, 32) or not loads: return []
  strides = [_index_stride(ld, lanes) for ld in loads]
  if any(st not in (0, 1) for st in strides) or 0 not in strides or 1 not in strides: return []
  weights = [ld for ld, st in zip(loads, strides) if st == 1]
  deps = {n for ld in weights for n in ld.toposort() if n.op is Ops.RANGE}
  inputs = {n for ld, st in zip(loads, strides) if st == 0 for n in ld.toposort() if n.op is Ops.RANGE}
  # a loop of output channel blocks besides the lanes (the weight's, not the input's): a batched matmul has none, and keeps
  # the matmul's block (whose 32-wide form is for 256+ rows only: WIDE_MIN_ROWS)
  # (a convolution, reducing over its taps besides the channels, is one whose 32 channels make a single block: the CNN program's
  # 32 -> 32 5x5 input gradient, one thread, took the matmul's 16x8 block at 29 GFLOP/s)
  taps = sum(1 for r in ranges_of(ast).values() if r.arg[1] == "reduce" and (range_size(r) or 2) > 1) >= 3
  if not taps and not any(r in deps and r not in inputs for r in outs[:-1]): return []
  n_lanes = range_size(lanes) or 1
  left = max(min(LANES_PIXELS, accumulators // n_lanes), 1)
  opts = [Opt(OptOps.UPCAST, lanes.arg[0], n_lanes)]
  for r in reversed(outs[:-1]):
    if r in deps or left < 2 or (size := range_size(r)) is None: continue  # a loop the weight moves with: no reuse
    if (k := max(d for d in range(1, left + 1) if size % d == 0)) > 1:
      opts.append(Opt(OptOps.UPCAST, r.arg[0], k))
      left //= k
  return opts + (_lanes_cache_block(outs, loads, strides, deps, inputs) or _lanes_image_block(outs, loads, strides, deps, inputs, threads, opts))


DECODED_OUTPUTS = 4  # outputs (decoded weights, each broadcast) a block of 64 lanes takes: 16 zmm accumulators


def _decoded_lanes_block(ast: UOp, outs: list[UOp], accumulators: int) -> list[Opt]:
  """CPU: a matmul whose innermost output loop is more than 32 lanes (schedule/conv_lanes.py's DECODED_LANE_WIDTHS: a few rows of
  x as the lanes) over a matrix of 1-byte integers decoded per element (a quantized weight dequantized in the kernel: one
  decode per element and block, each broadcast to every lane): UPCAST all the lanes and DECODED_OUTPUTS of the outputs the
  decoded matrix moves with. The matmul's block (32 lanes x 8) decodes every weight twice as often. [] where it isn't one."""
  if len(outs) < 2 or (n := range_size(lanes := outs[-1])) is None or n <= 32 or n * DECODED_OUTPUTS > accumulators: return []
  loads = _loads_in_reduces(ast)
  def narrow(ld: UOp) -> bool:
    buf = ld.src[0].src[0] if ld.src and ld.src[0].op is Ops.INDEX else None
    return buf is not None and isinstance(buf.dtype, PtrDType) and buf.dtype.base.itemsize == 1 and dtypes.is_int(buf.dtype.base)
  coded = [ld for ld in loads if narrow(ld)]
  if not coded or any(_index_stride(ld, lanes) != 0 for ld in coded) or all(_index_stride(ld, lanes) != 1 for ld in loads): return []
  for r in reversed(outs[:-1]):
    if (size := range_size(r)) and size % DECODED_OUTPUTS == 0 and all(_index_stride(ld, r) != 0 for ld in coded):
      return [Opt(OptOps.UPCAST, lanes.arg[0], n), Opt(OptOps.UPCAST, r.arg[0], DECODED_OUTPUTS)]
  return []


def _lanes_bytes(loads: list[UOp], strides: list[int | None]) -> tuple[int, int]:
  """(weight, input) bytes of a channel-lanes convolution: the buffers its lanes step through, and those all lanes share."""
  return (sum(_buffer_bytes(ld) for ld, st in zip(loads, strides) if st == 1), sum(_buffer_bytes(ld) for ld, st in zip(loads, strides) if st == 0))


LANES_BLOCK_WEIGHT = 512 << 10  # a weight this small (bytes) is read whole per block of pixels, from L2 ...
LANES_BLOCK_INPUT = 16  # ... where the input is this many times bigger


def _lanes_cache_block(outs: list[UOp], loads: list[UOp], strides: list[int | None], deps: set[UOp], inputs: set[UOp]) -> list[Opt]:
  """BLOCK the loop over the channel blocks (the weight's, not the input's) whole: every block of output channels then runs
  over a block of pixels while its input is in L1, instead of the whole input streamed from memory once per channel block.
  Only for a small weight (it is what cycles through the cache then) and a much bigger input. Measured on the 2-core AVX-512
  VM, ResNet's 1x1 stride-2 downsample (512 x 256 channels, 56 -> 28, batch 8): 145-160 -> 238 GFLOP/s; its 1x1 256x56 (64
  channels) 185-187 -> 208-219; the 3x3 64x56 345-356 either way; with a big weight slower (3x3 256x14, 2.4 MB: 373 -> 245)."""
  blocks = [r for r in outs[1:-1] if r in deps and r not in inputs]  # not the outermost loop: the threads split that one
  weight, data = _lanes_bytes(loads, strides)
  if len(blocks) != 1 or not 0 < weight <= LANES_BLOCK_WEIGHT or data < LANES_BLOCK_INPUT * weight: return []
  return [Opt(OptOps.BLOCK, blocks[0].arg[0], size)] if (size := range_size(blocks[0]) or 0) > 1 else []


LANES_IMAGE_WEIGHT = 32  # a weight this many times one image's input or more: several images run per channel block


def _lanes_image_block(outs: list[UOp], loads: list[UOp], strides: list[int | None], deps: set[UOp], inputs: set[UOp], threads: int,
                       block: list[Opt]) -> list[Opt]:
  """BLOCK the images' loop (the outermost, the threads') so that each thread runs a few images per channel block while that
  block's weight panel is in L2, where the weight is much bigger than an image (the whole weight is otherwise streamed from
  L3 once per image, for little work on each: a 7x7 map). The threads still get an image block each. ResNet's 3x3 512x7 layer,
  batch 8 (a 9.4 MB weight, 166 KB per padded image): the conv kernel 266-297 -> 279-316 GFLOP/s with 4 images per block (2
  threads); its 256x7 layer (28x) and 256x14 one (9x) measured the same either way; with the bound at 1x every smaller
  ratio ran slower (1x1 1024x14, batch 8: 255-258 -> 186; ResNet-50's 1x1 stride-2 512 -> 1024 at 28x28: 179-188 -> 118-123)."""
  images = outs[0]
  if images in deps or images not in inputs or (size := range_size(images)) is None: return []
  weight, data = _lanes_bytes(loads, strides)
  if not data or weight < LANES_IMAGE_WEIGHT * data // size: return []
  size //= prod(o.amount for o in block if o.axis == images.arg[0])  # what the register block leaves of the loop
  k = max((d for d in range(2, size + 1) if size % d == 0 and size // d >= max(threads, 1)), default=1)
  return [Opt(OptOps.BLOCK, images.arg[0], k)] if k > 1 else []


FILL_BLOCK = 64  # CPU: accumulators a register block of three or more output loops grows to (8 AVX2 registers)


def _fill_block(ast: UOp, ordered: list[UOp], block: list[Opt], accumulators: int) -> list[Opt]:
  """CPU: a register block of fewer than FILL_BLOCK accumulators, whose second loop had no divisor to take (a convolution's
  7- or 14-wide rows with the output channels as lanes, schedule/conv_lanes.py), also upcasts the next loops (inner to
  outer) that reuse the lanes' loads, by 4 or 2: 16 lanes alone are two dependency chains of multiply-adds, each waiting
  on its own latency (ResNet's 7x7 layer, batch 8: 16 lanes x 4 images ran 1.6-2.6x faster than 16 lanes in two rounds on
  the loaded 2-core VM; for the 14x14 layer, 16 x 2 columns x 2 rows against 16 x 2 columns, the noise hid any difference)."""
  if len(ordered) < 3: return []  # a matmul's block is already full or its loops are too short
  inner, loads = ordered[-1], _loads_in_reduces(ast)
  deps = [{n for n in ld.toposort() if n.op is Ops.RANGE} for ld in loads]
  used = {o.axis for o in block}
  n, out = prod(o.amount for o in block), []
  for r in reversed(ordered[:-1]):
    if r.arg[0] in used or not any(r not in d and inner in d for d in deps): continue  # only loops whose upcast reuses a lane load
    left = (range_size(r) or 0) // next((o.amount for o in block if o.axis == r.arg[0]), 1)
    if (k := _largest_divisor(left, tuple(c for c in (4, 2) if n * c <= min(FILL_BLOCK, accumulators)))) > 1:
      out.append(Opt(OptOps.UPCAST, r.arg[0], k))
      n *= k
  return out


CACHE_BLOCK = ContextVar("CACHE_BLOCK", 8)
# BLOCK only matmuls with at least this many rows: with fewer, B is re-read by few row tiles, and the blocked loop order cost
# time there (2-core EPYC, with BLOCK vs without: SmolLM2's prefill matmuls, B a float16 panel, 64 x 1536 @ 1536 x 576 13.6 vs
# 1.5 ms and 128 x 1536 @ 1536 x 576 75 vs 2.1 ms per call in the model)
CACHE_BLOCK_MIN_ROWS = 256


def _cache_block(ast: UOp, block: list[Opt], reds: list[UOp]) -> list[Opt]:
  """BLOCK the second register-blocked loop (a matmul's rows) by CACHE_BLOCK tiles, so that several row tiles run over each
  column panel of the other operand while that panel is in cache (without it a 2048 matmul streamed all of B from memory
  once per row tile). Only for long reductions and many rows: a short one's panel is small anyway."""
  if len(block) < 2 or (n := CACHE_BLOCK.value) <= 1 or not reds or (range_size(reds[-1]) or 1024) < 256: return []
  rows = ranges_of(ast)[block[1].axis]
  if (range_size(rows) or 0) < CACHE_BLOCK_MIN_ROWS: return []
  left = (range_size(rows) or 0) // block[1].amount
  return [Opt(OptOps.BLOCK, rows.arg[0], b)] if left >= 2 * n and (b := _largest_divisor(left, (n, n // 2))) > 1 else []


def _blocking_order(ast: UOp, outs: list[UOp]) -> list[UOp]:
  """outs reordered so that _register_block's second loop is the one whose upcast reuses what the first one's doesn't.
  The first stays the innermost loop (contiguous stores and loads). A load inside the reduce that doesn't depend on a loop
  is shared by that loop's upcast lanes: in a matmul the rows (A ignores j, B ignores i); in a convolution the output
  channels, whose lanes share every input pixel, and not the output rows, which share only the weight that the innermost
  loop's lanes already share (blocking the two spatial loops made 64 separate masked input loads per weight)."""
  if len(outs) < 3: return outs
  inner, loads = outs[-1], _loads_in_reduces(ast)
  deps = [{n for n in ld.toposort() if n.op is Ops.RANGE} for ld in loads]
  def new_reuse(r: UOp) -> int: return sum(1 for d in deps if r not in d and inner in d)
  best = max(outs[:-1], key=lambda r: (new_reuse(r), r.arg[0]))  # ties: the inner one, as before
  return [o for o in outs[:-1] if o is not best] + [best, inner]


MATVEC_THREAD_WORK = 1 << 17


# CPU: a reduction with fewer multiply-adds than SMALL_BLOCK_WORK (outputs x reduce steps, all its reductions) and more than
# SMALL_BLOCK_OPS float ops besides is not register-blocked. A block copies everything computed per output and per step into
# every register of the block: a 4x16 weight gradient of an unrolled GRU (a sigmoid's derivative per output, two sums) became
# 11,800 UOps and 0.5-2 s of compile for 1,300 multiply-adds; a plain small matmul still blocks
SMALL_BLOCK_WORK, SMALL_BLOCK_OPS = 1 << 15, 16
# ... and a CPU block holds at most EPILOGUE_BUDGET // (float ops after the reduction) outputs (at least 16): the epilogue is
# copied into every output of the block. A double backward's 64x64 product with 110 ops after it (a WGAN-GP penalty through
# tanh layers) was a 16x8 block of 24,000 UOps, 1.65 s to compile
EPILOGUE_BUDGET = ContextVar("EPILOGUE_BUDGET", 4096)  # 0: no limit


def _epilogue_accumulators(ast: UOp, accumulators: int) -> int:
  """`accumulators`, less where the float ops after the reductions would be copied into too many outputs (EPILOGUE_BUDGET)."""
  inside = {n for r in ast.toposort() if r.op is Ops.REDUCE for n in r.src[0].toposort()}
  after = sum(1 for n in ast.toposort() if n.op in GroupOp.ALU and dtypes.is_float(n.dtype) and n not in inside)
  return accumulators if after == 0 or EPILOGUE_BUDGET.value <= 0 else max(16, min(accumulators, EPILOGUE_BUDGET.value // after))


def _multiply_adds(ast: UOp, outs: list[UOp]) -> int:
  per_output = sum(prod(range_size(r) or 1024 for r in red.src[1:]) for red in ast.toposort() if red.op is Ops.REDUCE)
  return prod(range_size(o) or 1024 for o in outs) * per_output


def _value_ops(ast: UOp) -> int: return sum(1 for n in ast.toposort() if n.op in GroupOp.ALU and dtypes.is_float(n.dtype))


def _loop_work(ast: UOp) -> int:
  work = 1
  for r in ranges_of(ast).values(): work *= range_size(r) or 1024
  return work


# a few-vectors kernel (x @ W.T) whose reduction leaves SHORT_K_STEPS steps after UNROLL 16 unrolls by SHORT_K_UNROLL instead
SHORT_K_STEPS = range(9, 17)
SHORT_K_UNROLL = ContextVar("SHORT_K_UNROLL", 8)  # 16: as any other reduction


def _short_unrolls(ast: UOp, unrolls: list[Opt]) -> list[Opt]:
  """Works around LLVM's SLP vectorizer, which left the 16 unrolled lanes of such a kernel scalar where the loop around them
  ran 16 steps (K = 256: 128 scalar FMAs a step; K = 512 vectorized). Measured on 2 cores, UNROLL 8 against 16: 64x256 @
  (1024x256 half).T 444 vs 1910 us, 8x256 @ (1024x256).T 84 vs 483, 4x256 @ (4096x256 half).T 249 vs 980, 32x192 @
  (1024x192 half).T 705 vs 791; but K = 64 ran 2x slower with 8 and K = 128 the same: only 9-16 steps switch. Emitting the
  lanes as explicit vectors would remove the dependence on the vectorizer (not done)."""
  ranges = ranges_of(ast)
  def short(o: Opt) -> Opt:
    size = range_size(ranges[o.axis]) if o.axis in ranges else None
    if o.op is OptOps.UNROLL and o.amount == 16 and size is not None and size % 16 == 0 and size // 16 in SHORT_K_STEPS and \
        size % SHORT_K_UNROLL.value == 0:
      return Opt(OptOps.UNROLL, o.axis, SHORT_K_UNROLL.value)
    return o
  return [short(o) for o in unrolls]


# a CPU reduction with a long body and few iterations (a focal loss over a batch of 64: softplus, exp and pow, 164 ALU ops an
# element) unrolls by at most as many copies of its body as fit UNROLL_BODY_BUDGET ops (none where 2 don't): each copy costs
# LLVM time to compile (that loss: UNROLL 16 2.1 s, 8 0.97 s, 4 0.48 s, none 0.32 s on 2 cores) and, under
# UNROLL_SMALL_WORK loop iterations, saves microseconds when it runs
UNROLL_BODY_BUDGET = ContextVar("UNROLL_BODY_BUDGET", 1024)  # 0: no limit
UNROLL_SMALL_WORK = 4096


def _cap_unrolls(ast: UOp, opts: list[Opt]) -> list[Opt]:
  if (budget := UNROLL_BODY_BUDGET.value) <= 0 or _loop_work(ast) > UNROLL_SMALL_WORK: return opts
  body: dict[int, int] = {}  # a reduce loop's axis -> the ALU ops of the longest body reducing over it
  for red in (n for n in ast.toposort() if n.op is Ops.REDUCE):
    n_ops = sum(1 for n in red.src[0].toposort() if n.op in GroupOp.ALU)
    for r in red.src[1:]:
      if r.op is Ops.RANGE: body[r.arg[0]] = max(body.get(r.arg[0], 0), n_ops)
  out: list[Opt] = []
  for o in opts:
    if o.op is OptOps.UNROLL and o.axis in body:
      k = o.amount
      while k > 1 and k * body[o.axis] > budget: k //= 2
      if k < 2: continue
      o = Opt(OptOps.UNROLL, o.axis, k)
    out.append(o)
  return out


def _unroll_each_reduce(ast: UOp) -> list[Opt]:
  """UNROLL the innermost loop of every REDUCE (a kernel may hold two, e.g. a gated MLP's two matmuls), by 16, 8 or 4."""
  opts: list[Opt] = []
  for red in (n for n in ast.toposort() if n.op is Ops.REDUCE):
    rs = [r for r in red.src[1:] if r.op is Ops.RANGE]
    if not rs: continue
    # a sum of sums (per-block dot products, scaled once per block: the inner sum runs inside the outer loop) unrolls its
    # inner sum only: codegen/lanes.py keeps those lanes through the outer sum; unrolling the outer one too would copy the
    # whole inner loop per lane. A reduction that merely reads another one's result (softmax's sum of exp(x - max)) unrolls
    if any(x.op is Ops.REDUCE and x is not red and any(r in x.src[0].toposort() for r in rs) for x in red.src[0].toposort()): continue
    inner = max(rs, key=lambda r: r.arg[0])
    if (size := range_size(inner)) is None or size < 16: continue
    if (k := _largest_divisor(size, (16, 8, 4))) > 1 and (o := Opt(OptOps.UNROLL, inner.arg[0], k)) not in opts: opts.append(o)
  return opts


# outputs a step of a strided reduction computes side by side: 128 floats (8 zmm registers) read half a KB of each row a step;
# 4096x4096 column sums 15 GB/s with 64, 17 with 128 or 256 (numpy 12-14)
OUTPUT_LANES = (128, 64, 32, 16, 8, 4)


def _outputs_as_lanes(ast: UOp, outs: list[UOp], reds: list[UOp]) -> list[Opt]:
  """CPU reductions whose big input is strided along the reduction but contiguous along an output loop (a sum over rows,
  a vector times a (K, N) matrix): UPCAST that output loop, so each reduce step reads a contiguous run of a row, several
  vectors wide, instead of one element per row per output (UNROLL of the reduction read 4096x4096's column sums at 1 GB/s)."""
  loads = _loads_in_reduces(ast)
  if not loads or not reds or (biggest := max(_buffer_bytes(ld) for ld in loads)) == 0: return []
  big = [ld for ld in loads if _buffer_bytes(ld) == biggest]
  inner = reds[-1]
  if any(_index_stride(ld, inner) in (0, 1, None) for ld in big): return []
  for r in reversed(outs):
    if all(_index_stride(ld, r) == 1 for ld in big) and (k := _largest_divisor(range_size(r), OUTPUT_LANES)) > 1:
      return [Opt(OptOps.UPCAST, r.arg[0], k)]
  return []


def _loads_in_reduces(ast: UOp) -> list[UOp]:
  """Each load inside a reduction, once: sibling reductions (schedule/siblings.py) share the vector's loads, and a nested
  reduction's loads are inside the outer one's too."""
  return list(dict.fromkeys(ld for red in ast.toposort() if red.op is Ops.REDUCE for ld in red.src[0].toposort() if ld.op is Ops.LOAD))


def _buffer_bytes(ld: UOp) -> int:
  buf = ld.src[0].src[0] if ld.src and ld.src[0].op is Ops.INDEX else None
  if buf is None or buf.op is not Ops.DEFINE_GLOBAL or not isinstance(buf.dtype, PtrDType) or buf.dtype.size < 0: return 0
  return buf.dtype.size * buf.dtype.base.itemsize


def _index_stride(ld: UOp, r: UOp) -> int | None:
  """How far the load's address moves when loop r steps by one (others at 0); None when that isn't plain arithmetic."""
  from tinygrad.uop.alu import eval_scalar
  idx = ld.src[0].src[1] if ld.src and ld.src[0].op is Ops.INDEX and len(ld.src[0].src) > 1 else None
  if idx is None or any(n.op not in INDEX_OPS for n in idx.toposort()): return None
  env: dict[UOp, int] = {n: (n.arg[1] if n.op is Ops.DEFINE_VAR else 0) for n in idx.toposort() if n.op in (Ops.RANGE, Ops.DEFINE_VAR)}
  try: return int(eval_scalar(idx, {**env, r: 1})) - int(eval_scalar(idx, env))
  except Exception: return None  # noqa: BLE001  anything unusual: no opinion


# the ops of loop index arithmetic (what eval_scalar evaluates from the loops' values): codegen/prefetch.py too
INDEX_OPS = {Ops.RANGE, Ops.DEFINE_VAR, Ops.CONST, Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.SUB, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.WHERE,
              Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.NEG, Ops.CAST}


SHARED_MIN_K = 512  # two inputs alike in size: the reduction at least this long to vectorize along it (_contiguous_shared_operand)


def _contiguous_shared_operand(ast: UOp) -> UOp | None:
  """For a single reduction whose one big input is contiguous along the innermost reduce loop and doesn't depend on some output
  loop (x @ W.T with several rows of x): that output loop, else None."""
  loads = _loads_in_reduces(ast)
  if not loads: return None
  biggest = max(_buffer_bytes(ld) for ld in loads)
  big = [ld for ld in loads if 2 * _buffer_bytes(ld) >= biggest]
  if biggest == 0: return None
  reds = [r for r in ranges_of(ast).values() if r.arg[1] == "reduce"]
  if not reds: return None
  inner = max(reds, key=lambda r: r.arg[0])
  if len(bufs := {ld.src[0].src[0] for ld in big}) > 1:
    # two big inputs (a few vectors times a small quantized matrix): reuse the one with the narrowest elements, packed data that
    # each load has to decode, so decoding it once serves several outputs
    narrow = min(b.dtype.base.itemsize for b in bufs if isinstance(b.dtype, PtrDType))
    if sum(1 for b in bufs if isinstance(b.dtype, PtrDType) and b.dtype.base.itemsize == narrow) == 1:
      big = [ld for ld in big if isinstance(ld.src[0].src[0].dtype, PtrDType) and ld.src[0].src[0].dtype.base.itemsize == narrow]
    else:
      # as big as each other (x @ W.T with 128 rows of x, half W's size or all of it): reuse the biggest, or on a tie the one that
      # doesn't move with the rows. Register-blocked instead, each step gathered 16 of W's rows a float at a time: 128x784 @
      # (256x784).T 13 -> 154 GFLOP/s, 128x784 @ (128x784).T 25 -> 142 (2 cores). Below SHARED_MIN_K the short rows ran slower
      # this way (128x256 @ (128x256).T 23 -> 17 GFLOP/s)
      if (range_size(inner) or 0) < SHARED_MIN_K: return None
      big = [ld for ld in big if _buffer_bytes(ld) == biggest]
      if len(tied := {ld.src[0].src[0] for ld in big}) > 1:
        first = min((r for r in ranges_of(ast).values() if r.arg[1] == "global"), key=lambda r: r.arg[0], default=None)
        keep = [b for b in tied if all(first not in ld.toposort() for ld in big if ld.src[0].src[0] is b)]
        if len(keep) != 1: return None
        big = [ld for ld in big if ld.src[0].src[0] is keep[0]]
  strides = [_index_stride(ld, inner) for ld in big]  # 0: a per-row scale of a quantized W, loaded once per block
  if any(st not in (0, 1) for st in strides) or 1 not in strides: return None
  used = {n for ld in big for n in ld.toposort() if n.op is Ops.RANGE}
  missed = sorted((r for r in ranges_of(ast).values() if r.arg[1] == "global" and r not in used), key=lambda r: r.arg[0])
  if not missed: return None
  # the vectors, too, must run along the reduction: x @ w with a big x and a small (K, N) w is a matmul whose columns of w are
  # strided along K (a 1x1 convolution's weights): vectorized along K it gathers them (45 GFLOP/s); register blocks reuse x
  if any(_index_stride(ld, inner) not in (0, 1) for ld in loads if ld not in big and missed[-1] in ld.toposort()): return None
  return missed[-1]


def _big_operand_is_shared(ast: UOp) -> bool:
  """True when some big input of the reduction (at least half the size of the biggest) is read by several outputs (it
  doesn't depend on some output loop): register blocking over that loop reuses it. False for a matrix-vector product,
  where the matrix is the big input and each of its elements feeds exactly one output."""
  outs = {n for n in ast.toposort() if n.op is Ops.RANGE and n.arg[1] == "global"}
  loads = _loads_in_reduces(ast)
  if not loads: return True
  biggest = max(_buffer_bytes(ld) for ld in loads)
  if biggest == 0: return True
  return any(outs - {n for n in ld.toposort() if n.op is Ops.RANGE} for ld in loads if 2 * _buffer_bytes(ld) >= biggest)


def _is_reused_reduce(ast: UOp, gpu: bool = False) -> bool:
  """True when some load inside a reduce doesn't depend on every output loop (matmul: A ignores j, B ignores i).
  gpu: only loads that move with the reduce loop count (a per-row value, softmax's max, is no reuse)."""
  outs = {n for n in ast.toposort() if n.op is Ops.RANGE and n.arg[1] == "global"}
  for red in (n for n in ast.toposort() if n.op is Ops.REDUCE):
    for ld in (n for n in red.src[0].toposort() if n.op is Ops.LOAD):
      used = {n for n in ld.toposort() if n.op is Ops.RANGE}
      if gpu and not any(r.arg[1] == "reduce" for r in used): continue
      if outs - used: return True
  return False


# reductions with few outputs share each one between the threads of a block (GROUP). Measured on the H200 (bench/llm_profile.py,
# SmolLM2-shaped Q4_1 decode step): 7.07 ms without, 3.10 ms with; GROUP_REDUCE=0 turns it off
GROUP_REDUCE = ContextVar("GROUP_REDUCE", 1)
GROUP_MAX_OUTPUTS = 1 << 15  # 2^15: a 1B model's gate and up stacked (16384 rows)
GROUP_MIN_REDUCE = ContextVar("GROUP_MIN_REDUCE", 64)  # 64: attention scores over a 64-wide head (Llama-1B decode step 0.984 -> 0.956 ms on the H200)
GROUP_MAX_MATVEC_OUTPUTS = 1 << 18
GROUP_QUANT = ContextVar("GROUP_QUANT", "blocks")  # two reduce loops (blocks, elements): lanes over "blocks" or "elements"
GROUP_TARGET_THREADS = ContextVar("GROUP_TARGET_THREADS", 1 << 17)  # more lanes per output (up to 256) while the threads number fewer: a long row's loads in flight
GROUP_WIDE = ContextVar("GROUP_WIDE", 1)  # 0: an uneven row always gets 32 lanes (the A/B switch)
EARLY_FEW_LANES = ContextVar("EARLY_FEW_LANES", 1)  # 0: EARLY_LOADS keeps the lanes a row it would have without
BYTE_WIDE = ContextVar("BYTE_WIDE", 0)  # 1: a byte matrix's lanes read 16 bytes a load, not 8 (an A/B switch)
GROUP_NARROW = ContextVar("GROUP_NARROW", 0)  # >0: matrix-vector products of at least this many rows get 16 lanes a row, not 32
GROUP_ROWS = ContextVar("GROUP_ROWS", 1)  # 0: one output per lane group, whatever the vector's weight (see _rows_per_thread)
GROUP_ROWS_WIDE = ContextVar("GROUP_ROWS_WIDE", 2)  # rows a lane at most where lanes read 16-byte (or byte-matrix 8-byte) loads
VECTOR_HEAVY, GROUP_MIN_ROW_GROUPS = 3, 4096


def _bytes_per_step(ast: UOp, outs: list[UOp], reds: list[UOp]) -> tuple[float, float]:
  """(matrix, vector) bytes a matrix-vector-like kernel loads per step of its reduce loops: the loads that depend on an output
  loop (each output's own row), and those that don't (one vector every output reads). A load outside some reduce loops is
  counted once per run of them (a quantized block's scales: once per block)."""
  out_set, sizes = set(outs), {r: range_size(r) or 1 for r in reds}
  matrix = vector = 0.0
  for ld in _loads_in_reduces(ast):
    used = {n for n in ld.src[0].toposort() if n.op is Ops.RANGE}
    per_step = ld.dtype.itemsize / prod(n for r, n in sizes.items() if r not in used)
    if used & out_set: matrix += per_step
    else: vector += per_step
  return matrix, vector


def _matrix_loads(ast: UOp, outs: list[UOp]) -> int:
  """How many of a reduction's loads read a matrix (depend on an output loop): a gated MLP's gate and up are two."""
  out_set = set(outs)
  return sum(1 for ld in _loads_in_reduces(ast) if out_set & {n for n in ld.src[0].toposort() if n.op is Ops.RANGE})


def _rows_per_thread(outs: list[UOp], loads: tuple[float, float], most: int) -> list[Opt]:
  """UPCAST of the output loop where the vector's loads outweigh the matrix's VECTOR_HEAVY-fold or more (a norm's weight
  fused into the input of a float16 matrix, or the float32 input of a quantized one): each lane then computes 2 rows (up to
  `most` where GROUP_MIN_ROW_GROUPS groups of rows are still left), and each vector load serves all of them. Measured on the
  H200 in device graphs (bench/gpu_matvec.py): Llama-1B's gate/up with its norm fused 33.7 -> 18.9 us with 2 rows (4 rows:
  22.2); SmolLM2's Q4_1 matrices 6-20% faster with 2 rows (4 rows slower), its Q8_0 output matrix 42 -> 27 us with 4.
  Float16 rows times a plain float32 vector (2x) gained nothing. `loads`: _bytes_per_step's (matrix, vector)."""
  if not GROUP_ROWS.value or len(outs) != 1 or (n := range_size(outs[0])) is None: return []
  matrix, vector = loads
  if vector < VECTOR_HEAVY * matrix: return []
  k = next((k for k in (4, 2) if k <= most and n % k == 0 and (k == 2 or n // k >= GROUP_MIN_ROW_GROUPS)), 1)
  return [Opt(OptOps.UPCAST, outs[0].arg[0], k)] if k > 1 else []


def _gpu_group_reduce(ast: UOp, outs: list[UOp], reds: list[UOp], wide_loads: bool, early_loads: int = 0, resident_threads: int = 0) -> list[Opt]:
  """A kernel with few outputs (< GROUP_MAX_OUTPUTS) and a long reduction (>= GROUP_MIN_REDUCE elements per output) gets 32
  threads per output (16 for a short innermost loop; up to 256 for a long contiguous row while the threads number fewer than
  GROUP_TARGET_THREADS), grouped on the innermost loop of every REDUCE, so neighbouring threads read neighbouring elements;
  each thread then sums every 32nd element or 16-byte vector (latency: one warp per output instead of one thread). What is
  left of each thread's loop is unrolled a few times, so several loads are in flight at once rather than one per round trip
  to memory. [] where that doesn't apply."""
  total = 1
  for o in outs: total *= range_size(o) or GROUP_MAX_MATVEC_OUTPUTS  # a symbolic output count counts as many
  # a matrix-vector product (no input shared between outputs: nothing to block in registers) groups up to a vocabulary's
  # rows: a thread per row would read its own row alone, uncoalesced
  if total >= (GROUP_MAX_MATVEC_OUTPUTS if not _big_operand_is_shared(ast) else GROUP_MAX_OUTPUTS): return []
  if any(range_size(r) is None for r in reds): return []
  inners: list[UOp] = []
  for red in (n for n in ast.toposort() if n.op is Ops.REDUCE):
    rs = [r for r in red.src[1:] if r.op is Ops.RANGE]
    if rs and prod(range_size(r) or 0 for r in rs) >= GROUP_MIN_REDUCE.value and (inner := max(rs, key=lambda r: r.arg[0])) not in inners:
      inners.append(inner)
  if not inners: return []
  inners.sort(key=lambda r: r.arg[0])
  loads = _bytes_per_step(ast, outs, reds)
  outers = [r for r in reds if r not in inners and (range_size(r) or 0) >= 16]
  if GROUP_QUANT.value == "blocks" and outers and all((range_size(r) or 0) <= 32 for r in inners):
    # lanes over the outer loop (a quantized row's blocks: 18 of them in a 576-long row), each lane a whole block, unrolled:
    # a lane per block up to 64 blocks, so a row takes one step (measured on the H200 for SmolLM2's Q4_1 matrices: the
    # down projection 10.5 -> 3.7 us, the whole decode step's graph 1.38 -> 0.98 ms, against lanes over a block's elements)
    n_blocks = min(range_size(r) or 0 for r in outers)
    g = n_blocks if n_blocks <= 64 else 32
    opts = _valid(ast, [Opt(OptOps.GROUP, r.arg[0], g) for r in outers] + [Opt(OptOps.UNROLL, r.arg[0], range_size(r) or 1) for r in inners])
    if opts and (rows := _rows_per_thread(outs, loads, 4)) and _valid(ast, rows + opts): return rows + opts
    if opts: return opts
  # one reduce loop read contiguously (a float matrix-vector product, a norm): UNROLL it first, so each lane reads v
  # neighbours in one 16-byte load of the narrowest input (the copies are combined before the exchange, codegen/group.py);
  # else lanes read single neighbouring elements (packed quantized blocks, whose element loads aren't contiguous)
  itemsize = min((ld.dtype.itemsize for ld in _loads_in_reduces(ast)), default=4)
  sizes = {range_size(r) for r in inners}
  if wide_loads and len(sizes) == 1 and all(_unit_stride(ast, r) for r in inners) and (size := sizes.pop()) is not None:
    axes = [r.arg[0] for r in inners]  # a gated MLP's two matrix-vector products: each its own loop, split alike
    # 16 bytes a lane (BYTE_WIDE=1) for a byte matrix: slower on an H100 (the int8 screen of Llama-1B's output matrix, 907.0 against
    # 900.0 us a step: 32 accumulators, 68 registers a thread)
    for v, g in ((16, 32), (16, 16), (8, 32), (8, 16), (4, 32), (4, 16), (2, 32), (2, 16))[0 if BYTE_WIDE.value else 2:]:
      if g == 32 and GROUP_NARROW.value and total >= GROUP_NARROW.value and size % (v * 16) == 0: g = 16  # an A/B switch (GROUP_NARROW)
      if v * itemsize <= 16 and size % (v * g) == 0:
        while g < 256 and total * g < GROUP_TARGET_THREADS.value and size % (v * g * 2) == 0 and size // (v * g * 2) >= 4:
          # with EARLY_LOADS, no more lanes once a lane's matrix loads can all go before the grid wait (fewer, fuller blocks)
          if early_loads and loads[1] and EARLY_FEW_LANES.value and size // (v * g) * _matrix_loads(ast, outs) <= early_loads \
              and total * g <= resident_threads: break
          g *= 2
        opts = [o for ax in axes for o in (Opt(OptOps.UNROLL, ax, v), Opt(OptOps.GROUP, ax, g))]
        if (rows := _rows_per_thread(outs, loads, GROUP_ROWS_WIDE.value)) and not _valid(ast, rows + opts): rows = []
        # a matrix-vector product's short loop unrolled whole, where the renderer loads streamed inputs before the wait for the
        # kernel before (codegen/early_loads.py): each lane's loads of the matrix, at most `early_loads`, are then outside loops
        left = size // (v * g)
        if early_loads and loads[1] and left > 1 and left * _matrix_loads(ast, outs) * prod(o.amount for o in rows) <= early_loads \
            and total * g // prod(o.amount for o in rows) <= resident_threads:
          if _valid(ast, whole := rows + opts + [Opt(OptOps.UNROLL, ax, left) for ax in axes]): return whole
        if rows: return rows + opts
        # a plain row reduction: what is left of each lane's loop unrolled (loads in flight). Not in a matrix-vector product,
        # whose vector loads the copies repeat: measured on the H200, Llama-1B's down and o projections 11.7 -> 10.5 and
        # 4.7 -> 3.9 us without it
        more = [Opt(OptOps.UNROLL, ax, u) for ax in axes if (u := _largest_divisor(size // (v * g), (4, 2))) > 1]
        if more and not loads[1] and _valid(ast, opts + more): opts += more
        return _valid(ast, opts)
  g = 32 if min(range_size(r) or 0 for r in inners) >= 32 else 16
  if any((range_size(r) or 0) < g for r in inners): return []
  if GROUP_WIDE.value and len(inners) == 1 and (size := range_size(inners[0])) is not None and size % g:
    # few outputs, a row the lanes can't split evenly (masked): more lanes while each keeps at least 4 elements, so that a lane's
    # loop is short (a greedy sample's partials of 501 logits: 16 loads in a row each, 32 lanes -> 4 each, 128 lanes)
    while g < 256 and total * g * 2 <= GROUP_TARGET_THREADS.value and -(-size // (g * 2)) >= 4: g *= 2
  opts = _valid(ast, [Opt(OptOps.GROUP, r.arg[0], g) for r in inners])
  # the other reduce loops (a quantized row's blocks, outside the elements of a block the lanes share): unrolled
  outer = [Opt(OptOps.UNROLL, r.arg[0], u) for r in reds if r not in inners and (u := _largest_divisor(range_size(r), (8, 6, 4, 3, 2))) > 1]
  if opts and outer and _valid(ast, opts + outer): opts += outer
  return opts


def _valid(ast: UOp, opts: list[Opt]) -> list[Opt]:
  try: apply_opts(ast, opts)
  except KernelOptError: return []  # e.g. one reduce's inner loop is an outer loop of another: one lane index can't serve both
  return opts


GPU_RED_UPCAST = ContextVar("GPU_RED_UPCAST", 1)
GPU_UPCAST_MIN_OUTPUTS = 1 << 18  # 4 outputs a thread still leaves 65536 threads


def _gpu_plain_reduce(ast: UOp, outs: list[UOp], reds: list[UOp], wide_loads: bool) -> list[Opt]:
  """A GPU thread per output of a sum/max over an axis. Where neighbouring outputs are neighbouring elements (the
  partials of a split reduction, column sums), each thread takes 4 of them: one 16-byte load per step, 4 steps
  unrolled, 16 independent accumulators. Else the reduce loop is unrolled 16 times (float4 loads along rows)."""
  inner, last = reds[-1], (outs[-1] if outs else None)
  red_size, out_size = range_size(inner) or 0, (range_size(last) or 0) if last is not None else 0
  total = 1
  for o in outs: total *= range_size(o) or 0
  # only with threads to spare: a small kernel (the last levels of a split) is latency-bound, short loops win there
  if wide_loads and GPU_RED_UPCAST.value and last is not None and out_size % 4 == 0 and total >= GPU_UPCAST_MIN_OUTPUTS and _unit_stride(ast, last):
    opts = [Opt(OptOps.UPCAST, last.arg[0], 4)]
    if (k := _largest_divisor(red_size, (4, 2))) > 1 and red_size >= 8: opts.append(Opt(OptOps.UNROLL, inner.arg[0], k))
    return opts
  if (k := _largest_divisor(red_size, (16, 8, 4))) > 1 and red_size >= 32: return [Opt(OptOps.UNROLL, inner.arg[0], k)]
  # the short contiguous inner loop of a two-loop reduce (the vector chunk of a split matrix-vector product, see kernelize):
  # unrolled whole, its loads become one 16-byte access
  if len(reds) >= 2 and red_size in (2, 4, 8, 16) and _unit_stride(ast, inner): return [Opt(OptOps.UNROLL, inner.arg[0], red_size)]
  return []


def _unit_stride(ast: UOp, r: UOp) -> bool:
  """True when every global load that uses loop r reads neighbouring elements for neighbouring values of r."""
  found = False
  for ld in (n for n in ast.toposort() if n.op is Ops.LOAD and n.src[0].op is Ops.INDEX and n.src[0].src[0].op is Ops.DEFINE_GLOBAL):
    idx = ld.src[0].src[1]
    if r not in idx.toposort(): continue
    terms, _ = split_terms(idx)
    if [c for a, c in terms if a is r] != [1] or any(r in a.toposort() for a, _ in terms if a is not r): return False
    found = True
  return found
