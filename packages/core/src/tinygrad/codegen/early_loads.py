"""Weights loaded before the wait for the kernel before (renderers with `grid_wait`: CUDA sm_90+; last pass before linearize).

In a device graph with programmatic edges (backend-nv graph.py) a kernel's blocks may start while the kernel before it drains;
each first waits for it (`griddepcontrol.wait`), and only then reads memory. A matrix-vector product's matrix depends on no
kernel of a decode step, only its vector does: its loads can be in flight during the wait, so that the product's bytes stream
while the kernel before finishes (an attention kernel of 32 blocks leaves most SMs and the memory idle for microseconds).

**On by default since session 34 (`EARLY_LOADS=8`: the q/k/v and o products of a 1B model's decode step), 0.4% faster on an
H100; not yet measured on an H200. `EARLY_LOADS=0` turns it off.** Session 28 measured it slower, `bench/llm_ab.py --synthetic
llama1b` (5 rounds, tokens equal; bench/README.md), us a Llama-1B decode step: on the H200 off 821.9, every product (`EARLY_LOADS=16`) 1003.0, o/q/k/v and the output matrix (`8`)
986.5, the o product alone (`4`) 829.8; on an H100 off 1038.2, `16` 1164.0 against 1167.7 for its unroll alone (`EARLY_WAIT=0`),
`4` 1045.0 against 1036.0. Unrolling a product's loop whole costs what the early loads can't win back (registers: 40 -> 64-128 a
thread, fewer resident warps), and even where the unroll is free (the o product) the loads before the wait don't pay: the wait is
not where a decode step's time goes. It was kept as an A/B switch.

**Session 34 (H100): those loads were never early.** ptxas schedules the plain `griddepcontrol.wait` (SASS `ACQBULK`, no
operands) ahead of loads whose address is still being computed, so every load above issued after it (read in the SASS with
nvdisasm). The CUDA renderer now predicates the wait on the values loaded before it (cuda.py `_early_wait`), and the SASS has
them first. Measured again (`llm_ab.py`, same process, us a step): `EARLY_LOADS=4` 980.7 against 971.5 (the o and q/k/v products
unrolled whole at 64 lanes a row: 70 registers, two waves); `EARLY_LOADS=8` with two changes here, 966.5 and 967.4 against 971.6
and 969.9, 967.7 against 972.1 and 971.0 (-0.4%): (1) a product keeps 32 lanes a row where a lane's matrix loads
then fit EARLY_LOADS (`EARLY_FEW_LANES`: q/k/v 384 blocks, o 256), and no grid of more blocks than a GPU keeps resident
(`resident_threads`) is unrolled or waits late; (2) the renderer caps registers so the whole grid is resident
(`EARLY_ONE_WAVE`, cuda.py). `bench/gpu_timeline.py` shows why the gain is small: the q/k/v and o blocks end 1.5-2.3 us after
their release instead of 3.6-5.3, but the down product before q/k/v and the attention before o (32 blocks, latency-bound) run
slower by about as much, their loads queued behind the early ones: the step is near its bandwidth, and early loads move bytes,
they don't remove them.

Here a kernel's loads of a *streamed input* go before a GRID_WAIT barrier (uop.dsl.GRID_WAIT, the renderer's wait), every other
global access after it. A streamed input is read-only in the kernel, read only outside loops (the heuristics unroll a short
product's loop for that: `EARLY_LOADS`), and much bigger than what the kernel writes and than its smallest input (a matrix,
not an activation or the vector it multiplies). Whether the kernel before wrote it is not known here: the renderer lists the
buffers loaded before the wait (CUDA: the module's `tg_early_params`), and the graph gives such a kernel a plain edge where the
kernel before it takes one of them as a parameter (backend-nv graph.py).
"""
from __future__ import annotations

from tinygrad.dtype import PtrDType, dtypes
from tinygrad.helpers import ContextVar, prod
from tinygrad.uop.dsl import GRID_WAIT
from tinygrad.uop.ops import Ops, UOp

EARLY_LOADS = ContextVar("EARLY_LOADS", 8)  # 0: off; else the most loads a thread issues before the wait (heuristics unroll up to it)
EARLY_WAIT = ContextVar("EARLY_WAIT", 1)  # 0: the heuristics' unroll for EARLY_LOADS alone, the wait first as without (an A/B switch)
THREADS_PER_SM = 2048  # resident threads an SM keeps (sm_75 and later: 1024-2048; 2048 from sm_80 on)
EARLY_MIN_RATIO = 64  # a streamed input has at least this many times the bytes the kernel stores
EARLY_MIN_BYTES = 1 << 20


def _buffer(ptr: UOp) -> UOp | None:
  """The DEFINE_GLOBAL a load or store's pointer indexes (through AFTER and CAST), or None."""
  while ptr.op in (Ops.AFTER, Ops.CAST, Ops.BITCAST, Ops.INDEX): ptr = ptr.src[0]
  return ptr if ptr.op is Ops.DEFINE_GLOBAL else None


def _nbytes(buf: UOp) -> int:
  return buf.dtype.size * buf.dtype.base.itemsize if isinstance(buf.dtype, PtrDType) and buf.dtype.size > 0 else 0


def _in_loop(u: UOp) -> bool:
  """Whether a load runs more than once a thread (in a loop), after a barrier, or at an address it loaded. (A loop of one step,
  which lowering may leave behind, runs once.)"""
  def once(r: UOp) -> bool: return r.src[0].op is Ops.CONST and r.src[0].arg == 1
  return any((x.op is Ops.RANGE and not once(x)) or x.op in (Ops.BARRIER, Ops.LOAD) for x in u.src[0].toposort())


def resident_threads(compute_units: int) -> int:
  """The threads a GPU of `compute_units` SMs keeps resident at once (0: unknown). A grid of more runs in waves, and only its
  first wave's loads could start early: the heuristics don't unroll such a product for early loads, and this pass leaves it."""
  return compute_units * THREADS_PER_SM


def early_loads(sink: UOp, compute_units: int = 0) -> UOp:
  """sink with its streamed inputs' loads before a GRID_WAIT barrier and every other global access after it; unchanged where
  the kernel has no streamed input, already places its wait (a hand-written kernel), or, on a GPU of `compute_units` SMs, has
  more threads than can be resident at once (resident_threads)."""
  if not EARLY_LOADS.value or not EARLY_WAIT.value: return sink
  nodes = sink.toposort()
  if any(u.op is Ops.BARRIER and u.arg == GRID_WAIT for u in nodes): return sink
  if compute_units and prod(int(u.arg[1]) for u in nodes if u.op is Ops.SPECIAL) > resident_threads(compute_units): return sink
  loads = [u for u in nodes if u.op is Ops.LOAD and _buffer(u.src[0]) is not None]
  stores = [u for u in nodes if u.op is Ops.STORE and _buffer(u.src[0]) is not None]
  written = {_buffer(s.src[0]) for s in stores}
  out_bytes = sum(_nbytes(b) for b in written if b is not None)
  by_buf: dict[UOp, list[UOp]] = {}
  for ld in loads: by_buf.setdefault(_buffer(ld.src[0]), []).append(ld)  # type: ignore[arg-type]
  # streamed: EARLY_MIN_RATIO times what the kernel stores and the smallest input it reads (a matrix, not the vector it multiplies)
  smallest = min((_nbytes(b) for b in by_buf), default=0)
  streamed = [b for b, lds in by_buf.items() if b not in written and _nbytes(b) >= max(EARLY_MIN_BYTES, EARLY_MIN_RATIO * max(out_bytes, smallest))
              and not any(_in_loop(ld) for ld in lds)]
  early = [ld for b in streamed for ld in by_buf[b]]
  late = [ld for ld in loads if ld not in early]
  # a matrix-vector product: the vector read after the wait (a row sum alone reads what the kernel before wrote, as a whole)
  if not early or not late or len(early) > EARLY_LOADS.value: return sink
  wait = UOp(Ops.BARRIER, dtypes.void, tuple(early), GRID_WAIT)
  # every other global access starts after the wait: its pointer (the INDEX, or the CAST of a vector access) waits for it
  subs = {u.src[0]: UOp(Ops.AFTER, u.src[0].dtype, (u.src[0], wait)) for u in late + stores}
  return sink.substitute(subs)
