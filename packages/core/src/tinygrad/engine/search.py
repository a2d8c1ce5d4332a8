"""BEAM search: pick a kernel's optimizations by compiling and timing candidates on the device.

`BEAM=n` searches every kernel, `JITBEAM=n` only those run while a TinyJit captures. The search starts from
the hand-coded heuristics' choice and its prefixes (and from no opts for small kernels), extends each of the n
best lists by one more action (UPCAST of an output loop, UNROLL of a reduce loop, THREAD across the device's
cores, GROUP of a reduce loop on GPUs), compiles the candidates in worker processes, times them on the device
with random inputs and keeps the n best; it stops when a round brings no improvement. The winner is cached on disk, keyed by the kernel AST,
renderer, arch, thread count and n, so a second run of the same program skips the search.

This module is the policy (candidates, the beam, the cache); engine/timing.py compiles candidates in worker processes
and times them. Knobs (environment): BEAM_MAX_COPIES (upper bound on the body copies UPCAST x UNROLL make), and
timing.py's PARALLEL (compile workers) and BEAM_RUNS.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

from tinygrad.codegen.custom import is_hand_written
from tinygrad.codegen.heuristics import hand_coded_opts
from tinygrad.codegen.opt import KernelOptError, Opt, OptOps, apply_opts, range_size, ranges_of
from tinygrad.codegen.program import default_opts, kernel_name, stable_key, worth_threading
from tinygrad.codegen.tensor_core import tc_opts
from tinygrad.device.registry import Device
from tinygrad.engine.timing import Bench, compile_all
from tinygrad.helpers import DEBUG, NOOPT, diskcache_get, diskcache_put, getenv, prod
from tinygrad.renderer import Renderer
from tinygrad.uop.ops import Ops, UOp

UPCAST_AMOUNTS = (2, 4, 8, 16, 32)
UNROLL_AMOUNTS = (2, 4, 8, 16)
MAX_COPIES = getenv("BEAM_MAX_COPIES", 128)
# each copy of the body is lowered and compiled (~0.2 ms per AST node and copy): copies x nodes stays under this
COPY_NODE_BUDGET = getenv("BEAM_COPY_NODES", 3072)
SLOW = 3.0            # a candidate this many times slower than the best is neither extended nor timed twice
NOOPT_SEED_WORK = 1 << 24  # kernels up to this many loop iterations also start from no opts (bigger ones run too long)
MIN_PROGRESS = 0.02   # a round must beat the best time by 2% to go on: smaller gains are timing noise on a busy machine
CACHE_TABLE = "beam_search_v1"  # bump when the meaning of a cached Opt list changes


def choose_opts(ast: UOp, renderer: Renderer, beam: int) -> list[Opt]:
  """The optimizations for a kernel: a BEAM search of width `beam` (> 0) where it applies (not with NOOPT, not for a
  tensor-core matmul, and only with a device to time on), else codegen's choice (none with NOOPT, tensor cores, heuristics)."""
  if beam > 0 and not NOOPT and ast.op is not Ops.PROGRAM and not is_hand_written(ast) and tc_opts(ast, renderer) is None and ranges_of(ast) and (device := _timing_device(renderer)) is not None:
    return beam_search(ast, renderer, beam, device)
  return default_opts(ast, renderer)


def _timing_device(renderer: Renderer) -> Any:
  """The device instance that runs this renderer's code, or None when there is none to time on."""
  try: dev = Device[renderer.device]
  except Exception as e:  # noqa: BLE001  no device to time on: BEAM falls back to the heuristics
    if DEBUG >= 1: print(f"BEAM: can't open {renderer.device} to time kernels ({e}); using the heuristics")
    return None
  return dev if dev.runs_kernels and dev.runtime is not None else None


# ---- the cache

def cache_key(ast: UOp, renderer: Renderer, amt: int) -> str:
  desc = f"{stable_key(ast.toposort())}|{renderer.device}|{renderer.name}|{renderer.arch}|{renderer.threads}|{amt}"
  return hashlib.sha256(desc.encode()).hexdigest()


def beam_search(ast: UOp, renderer: Renderer, amt: int, device: Any = None) -> list[Opt]:
  """The best opts for `ast` found by a beam of width `amt`, from the disk cache when this kernel was searched before."""
  key = cache_key(ast, renderer, amt)
  if (hit := diskcache_get(CACHE_TABLE, key)) is not None:
    try:
      opts = [Opt(OptOps[op], axis, amount) for op, axis, amount in hit]
      apply_opts(ast, opts)  # an entry the current optimizer can't apply is stale: search again
      return opts
    except (KeyError, KernelOptError, TypeError, ValueError): pass
  opts = _search(ast, renderer, amt, device if device is not None else _timing_device(renderer))
  diskcache_put(CACHE_TABLE, key, [(o.op.name, o.axis, o.amount) for o in opts])
  return opts


# ---- candidates

def copies(opts: list[Opt]) -> int:
  """How many copies of the kernel body UPCAST and UNROLL make."""
  return prod(o.amount for o in opts if o.op in (OptOps.UPCAST, OptOps.UNROLL))


GROUP_AMOUNTS = (8, 16, 32, 64, 128, 256)
BLOCK_AMOUNTS = (2, 4, 8, 16)


def actions(ast: UOp, opts: list[Opt], threads: int, has_local: bool = False) -> list[Opt]:
  """Every single action that could extend `opts` (already applied to `ast`). has_local (a GPU renderer): GROUP too,
  at one group size per kernel (one thread index serves every grouped reduce)."""
  out: list[Opt] = []
  rngs = ranges_of(ast)
  for rid, r in sorted(rngs.items()):
    if (size := range_size(r)) is None or r.arg[1] not in ("global", "reduce"): continue
    op, amounts = (OptOps.UPCAST, UPCAST_AMOUNTS) if r.arg[1] == "global" else (OptOps.UNROLL, UNROLL_AMOUNTS)
    out.extend(Opt(op, rid, k) for k in amounts if size % k == 0)
  if not has_local and any(r.arg[1] == "reduce" for r in rngs.values()):  # cache blocking: for a CPU's reductions
    for rid, r in sorted(rngs.items()):
      if r.arg[1] == "global" and (size := range_size(r)) is not None:
        out.extend(Opt(OptOps.BLOCK, rid, k) for k in BLOCK_AMOUNTS if size % k == 0 and size > k)
  if has_local:
    sizes = {o.amount for o in opts if o.op is OptOps.GROUP}
    for rid, r in sorted(rngs.items()):
      if r.arg[1] == "reduce" and (size := range_size(r)) is not None:
        out.extend(Opt(OptOps.GROUP, rid, g) for g in GROUP_AMOUNTS if g <= size and (not sizes or g in sizes))
  has_outputs = any(r.arg[1] == "global" for r in rngs.values())
  if threads > 1 and has_outputs and not any(o.op is OptOps.THREAD for o in opts): out.append(Opt(OptOps.THREAD, 0, threads))
  return out


def _canonical(opts: list[Opt]) -> tuple:
  """The same actions in another order make an equivalent kernel: one key for all orders."""
  return tuple(sorted((o.op.value, o.axis, o.amount) for o in opts))


@dataclass
class Candidate:
  opts: list[Opt]
  ast: UOp                     # the kernel with opts applied (its ranges are what the next actions act on)
  time: float = float("inf")   # seconds, median of the timed runs
  error: str = ""


def loop_work(ast: UOp) -> int:
  """Iterations of all loops together (a symbolic size counts as 1024)."""
  return prod(range_size(r) or 1024 for r in ranges_of(ast).values())


def max_copies(ast: UOp) -> int: return min(MAX_COPIES, max(4, COPY_NODE_BUDGET // len(ast.toposort())))


def extend(beam: list[Candidate], threads: int, seen: set[tuple], limit: int, has_local: bool = False) -> list[Candidate]:
  """The beam's entries each extended by one valid action; orderings of the same actions are tried once."""
  out: list[Candidate] = []
  for c in beam:
    for a in actions(c.ast, c.opts, threads, has_local):
      opts = [*c.opts, a]
      if (key := _canonical(opts)) in seen or copies(opts) > limit: continue
      seen.add(key)
      try: out.append(Candidate(opts, apply_opts(c.ast, [a])))
      except KernelOptError: continue
  return out


# ---- the search

def _search(ast: UOp, renderer: Renderer, amt: int, device: Any) -> list[Opt]:
  from tqdm import tqdm
  st = time.perf_counter()
  name = kernel_name(ast)
  hc = hand_coded_opts(ast, renderer.threads if worth_threading(ast) else 1, gpu=renderer.has_local, accumulators=renderer.accumulators)
  try: bench = Bench(ast, device)
  except ValueError as e:
    if DEBUG >= 1: print(f"BEAM {name}: {e}; using the heuristics")
    return hc
  threads = renderer.threads
  # seeds: the heuristics' choice and its prefixes (with its THREAD kept), so the beam can also grow from a smaller block
  # than the heuristics chose; and no opts when that runs quickly enough (a big matmul without opts takes seconds)
  thread = [o for o in hc if o.op is OptOps.THREAD]
  seeds = [[*p, *(t for t in thread if t not in p)] for p in (hc[:i] for i in range(1, len(hc) + 1))] or [[]]
  if hc and loop_work(ast) <= NOOPT_SEED_WORK: seeds.append([])
  unique = {_canonical(s): s for s in seeds}
  seeds, seen = list(unique.values()), set(unique)
  cands = seed_cands = [Candidate(s, apply_opts(ast, s)) for s in seeds]
  best: Candidate | None = None
  tried = 0
  with tqdm(total=0, desc=f"BEAM {amt} {name}", leave=False, disable=DEBUG.value < 0) as bar:
    while cands:
      bar.total += 2 * len(cands)
      bar.refresh()
      built = compile_all(ast, renderer, [c.opts for c in cands], lambda: bar.update(1))
      fastest = best.time if best is not None else float("inf")
      for c, b in zip(cands, built):
        tried += 1
        if b.spec is None: c.error = b.error
        else:
          try: c.time = bench.time(b, SLOW * fastest)
          except Exception as e:  # noqa: BLE001  a candidate that fails to load or run is skipped
            c.error = f"{type(e).__name__}: {e}"
          fastest = min(fastest, c.time)
        if DEBUG >= 3: print(f"  {c.time * 1e6:10.1f} us  {c.opts}{'  ' + c.error if c.error else ''}")
        bar.update(1)
      ok = sorted((c for c in cands if c.time != float("inf")), key=lambda c: c.time)
      if best is not None and (not ok or ok[0].time >= best.time * (1 - MIN_PROGRESS)): break
      if not ok: break
      best = ok[0]
      bar.set_postfix_str(f"{best.time * 1e6:.0f} us {best.opts}")
      cands = extend([c for c in ok[:amt] if c.time <= SLOW * best.time], threads, seen, max_copies(ast), renderer.has_local)
  if best is None: return hc
  if DEBUG >= 1:
    seed_times = ", ".join(f"{c.opts if c.opts != hc else 'heuristics'} {c.time * 1e6:.1f} us" for c in seed_cands)
    print(f"BEAM {amt} {name}: {best.opts} {best.time * 1e6:.1f} us ({seed_times}); {tried} candidates in {time.perf_counter() - st:.1f} s")
  return best.opts
