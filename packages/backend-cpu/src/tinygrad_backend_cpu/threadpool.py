"""Runs one kernel call per thread: ctypes releases the GIL while native code runs, so the threads use every core.

Each worker waits on a lock of its own rather than on an executor's queue: handing a kernel to a thread and waiting for it
then costs two lock hand-offs (about 25 us a launch here, against 63 us through a ThreadPoolExecutor), which is what decides
how small a kernel may be and still gain from a second core.

Each thread of a parallel run has a core of its own: a worker is pinned to one of the cores the process may use, and the caller
to the first of them for the run (its own mask restored after). Unpinned, the OS woke a worker that had slept for a while on
the caller's core and left both there for tens of milliseconds: on the 2-core VM a 512^2 matmul ran at ~190 GFLOP/s instead of
~320 for its first 30-40 calls after a 3 s pause, a 1x1 conv called every 0.2 s at 70 instead of 133 (bench/README.md,
session 13). CPU_PIN=0 turns it off."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable


def cpu_threads() -> int:
  """Threads for big kernels: $THREADS, else the cores this process may run on."""
  if (env := os.environ.get("THREADS")): return max(1, int(env))
  try: return len(os.sched_getaffinity(0))
  except AttributeError: return os.cpu_count() or 1


PIN = os.environ.get("CPU_PIN", "1") != "0" and hasattr(os, "sched_setaffinity")


class _Worker:
  """A daemon thread that runs fn(index) each time `go` is released, then releases `done`; pinned to `cpu` (if not None)."""

  def __init__(self, index: int, cpu: int | None = None):
    self.index, self.cpu, self.fn, self.error = index, cpu, None, None
    self.go, self.done = threading.Lock(), threading.Lock()
    self.go.acquire()
    self.done.acquire()
    threading.Thread(target=self._loop, name=f"tinygrad-cpu-{index}", daemon=True).start()

  fn: Callable[[int], None] | None
  error: BaseException | None

  def _loop(self) -> None:
    if self.cpu is not None:
      try: os.sched_setaffinity(0, {self.cpu})  # 0: this thread
      except OSError: pass  # the core went away (a cgroup change): run unpinned
    while True:
      self.go.acquire()
      try:
        assert self.fn is not None
        self.fn(self.index)
      except BaseException as e:  # noqa: BLE001  handed back to the caller of run_parallel
        self.error = e
      self.done.release()


_workers: list[_Worker] = []
_lock = threading.Lock()  # one parallel launch at a time: the workers are shared


def _forget_workers() -> None:
  """In a forked child: none of the parent's threads exist there, and the lock may have been held by one of them."""
  global _lock
  _workers.clear()
  _lock = threading.Lock()


if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=_forget_workers)


def run_parallel(fn: Callable[[int], None], n: int) -> None:
  """fn(0), ..., fn(n-1) on n threads (the caller runs fn(0) itself)."""
  with _lock:
    cpus = sorted(os.sched_getaffinity(0)) if PIN else []
    while len(_workers) < n - 1:
      i = len(_workers) + 1
      _workers.append(_Worker(i, cpus[i % len(cpus)] if cpus else None))
    team = _workers[:n - 1]
    for w in team:
      w.fn = fn
      w.go.release()
    if cpus: os.sched_setaffinity(0, {cpus[0]})
    try: fn(0)
    finally:
      for w in team: w.done.acquire()
      if cpus: os.sched_setaffinity(0, cpus)
    for w in team:
      if (err := w.error) is not None:
        w.error = None
        raise err
