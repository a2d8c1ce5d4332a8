"""Runs one kernel call per thread: ctypes releases the GIL while native code runs, so the threads use every core."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def cpu_threads() -> int:
  """Threads for big kernels: $THREADS, else the cores this process may run on."""
  if (env := os.environ.get("THREADS")): return max(1, int(env))
  try: return len(os.sched_getaffinity(0))
  except AttributeError: return os.cpu_count() or 1


def run_parallel(fn: Callable[[int], None], n: int) -> None:
  """fn(0), ..., fn(n-1) on n threads (the caller runs fn(0) itself)."""
  global _pool
  with _lock:
    if _pool is None: _pool = ThreadPoolExecutor(max_workers=max(cpu_threads() - 1, 1), thread_name_prefix="tinygrad-cpu")
  futures = [_pool.submit(fn, i) for i in range(1, n)]
  fn(0)
  for f in futures: f.result()
