"""BEAM's plumbing: compiling candidate kernels in worker processes (tinygrad/workers.py) and timing them on the device.

Knobs (environment): PARALLEL=k compile workers (0: compile in this process), BEAM_RUNS (timed runs per candidate,
the median is kept).
"""
from __future__ import annotations

import atexit
import functools
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from tinygrad.codegen.opt import Opt
from tinygrad.codegen.program import ProgramSpec, get_program
from tinygrad.codegen.threads import CORE_ID
from tinygrad.device.runtime import Buffer
from tinygrad.dtype import PtrDType
from tinygrad.helpers import DEBUG, ContextVar, getenv
from tinygrad.renderer import Renderer
from tinygrad.uop.ops import Ops, UOp
from tinygrad.workers import WorkerPool

PARALLEL = ContextVar("PARALLEL", min(os.cpu_count() or 1, 8))
RUNS = getenv("BEAM_RUNS", 3)


# ---- compiling candidates in worker processes

@dataclass
class Built:
  spec: ProgramSpec | None
  lib: bytes = b""
  error: str = ""


def compile_candidate(renderer: Renderer, ast: UOp, opts: list[Opt]) -> Built:
  """Lower, render and compile `ast` with `opts`; failures come back as an error string, not an exception."""
  try:
    spec = get_program(ast, renderer, opts)
    lib = renderer.compiler.compile(spec.src)
  except Exception as e:  # noqa: BLE001  any candidate may fail to lower or compile: it is skipped
    return Built(None, error=f"{type(e).__name__}: {str(e)[:300]}")
  return Built(replace(spec, uops=[]), lib)  # the uops aren't needed to run it, and are costly to pickle


WORKER_FAILED = "compile worker failed"
_pool: WorkerPool | None = None
_pool_broken = False
_pool_lock = threading.Lock()


def _get_pool() -> WorkerPool | None:
  global _pool
  if PARALLEL.value <= 1 or not sys.executable: return None
  with _pool_lock:
    if _pool is None or _pool.n != PARALLEL.value:
      if _pool is not None: _pool.close()
      try: _pool = WorkerPool(int(PARALLEL.value))
      except OSError as e:
        if DEBUG >= 1: print(f"BEAM: no compile workers ({e}); compiling in this process")
        return None
      atexit.register(_pool.close)
  return _pool


def compile_all(ast: UOp, renderer: Renderer, cands: list[list[Opt]], done: Any = None) -> list[Built]:
  """Compile `ast` with each list of opts, in parallel when workers are available. Results are in the order of `cands`."""
  global _pool_broken
  if not _pool_broken and (pool := _get_pool()) is not None and len(cands) > 1:
    # one partial per search: each worker unpickles the renderer once
    res = [value if ok else Built(None, error=f"{WORKER_FAILED}: {value}")
           for ok, value in pool.map(functools.partial(compile_candidate, renderer), [(ast, opts) for opts in cands], done)]
    if not all(r.error.startswith(WORKER_FAILED) for r in res): return res
    # every worker died: they can't run here (no importable tinygrad, say). Compile in this process from now on
    if DEBUG >= 1: print(f"BEAM: compile workers fail ({res[0].error}); compiling in this process")
    _pool_broken = True
  out = []
  for opts in cands:
    out.append(compile_candidate(renderer, ast, opts))
    if done is not None: done()
  return out


# ---- timing on the device

class Bench:
  """Random input buffers for one kernel on a device, and a timer for compiled candidates of it."""

  def __init__(self, ast: UOp, device: Any):
    import numpy as np
    self.device = device
    rng = np.random.default_rng(0)
    self.bufs: dict[int, Buffer] = {}
    for g in (u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL):
      if not isinstance(g.dtype, PtrDType) or g.dtype.size < 0: raise ValueError(f"buffer {g.arg} has no known size to time with")
      dt, size = g.dtype.base, max(g.dtype.size, 1)
      buf = self.bufs[g.arg] = Buffer(device.device, size, dt).ensure_allocated()
      # floats: values in [-1, 1) (no NaNs or denormals to slow anything); ints: ones (no division by zero traps)
      if dt.fmt is not None and dt.fmt in "efd": data = rng.uniform(-1, 1, size).astype(np.dtype(dt.fmt)).tobytes()
      elif dt.fmt is not None: data = np.ones(size, np.dtype(dt.fmt)).tobytes()
      else: data = bytes(buf.nbytes)
      buf.copyin(memoryview(data))
    # symbolic sizes run at their largest value: the buffers are sized for it
    self.var_vals = {u.arg[0]: u.arg[2] for u in ast.toposort() if u.op is Ops.DEFINE_VAR}

  def time(self, built: Built, early_stop: float = float("inf")) -> float:
    spec = built.spec
    assert spec is not None
    prg = self.device.runtime(spec.name, built.lib)
    args = [self.bufs[i].opaque for i in spec.globals]
    vals = tuple(self.var_vals[v.arg[0]] for v in spec.vars if v.arg[0] != CORE_ID)
    global_size, local_size = spec.launch_dims(self.var_vals)
    times: list[float] = []
    for _ in range(RUNS):
      st = time.perf_counter()
      t = prg(*args, global_size=global_size, local_size=local_size, vals=vals, wait=True)
      times.append(t if t is not None else time.perf_counter() - st)
      if times[-1] > early_stop: break  # far slower than the best: one run says enough
    return statistics.median(times)
