"""Worker processes for generic jobs: `fn(*args)` run in a long-lived child process, its result (or exception) sent back.

Two users, one protocol: compiling in a helper process (`offload`, COMPILE_WORKER=1) and BEAM compiling its candidates
in parallel (`WorkerPool`, engine/search.py). Nothing here knows what a job does; it depends only on helpers.

Workers are plain subprocesses (unlike multiprocessing's spawn they never re-run the user's __main__): length-prefixed
pickled jobs on stdin, results on the original stdout (prints go to stderr). A job is (pickled fn, args); each worker
unpickles a given fn once, so a fn that carries a big object (a bound compiler, a partial holding a renderer) costs one
unpickling per worker.

`offload(fn, *args)` is `fn(*args)`, run in the one compile worker when COMPILE_WORKER=1 and `fn` and its arguments pickle.
A process that compiles with LLVM maps LLVM's code and grows LLVM's heap: about 90 MB that stay for the life of the
process, although only the binaries are needed to run kernels. With COMPILE_WORKER=1 only the binaries come back. The llm
CLI turns it on: its peak memory is then the model's. When the worker can't run (it can't start, or dies), this process
runs the jobs from then on.
"""
from __future__ import annotations

import atexit
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from tinygrad.helpers import DEBUG, ContextVar

COMPILE_WORKER = ContextVar("COMPILE_WORKER", 0)
# processes that lower and compile a schedule's new kernels in parallel (engine/realize.py): -1 picks one per core beyond the
# first two, at most 8 (none on a machine of two cores or fewer, where they would only compete with this process); 0 is off
PARALLEL_COMPILE = ContextVar("PARALLEL_COMPILE", -1)
T = TypeVar("T")
WORKER_ARGS = ["-c", "from tinygrad.workers import worker_main; worker_main()"]


class WorkerDied(RuntimeError):
  """The worker process exited or sent garbage (a crash in a compiler, a worker that can't start)."""


def worker_main() -> None:
  """The child's loop: (pickled fn, args) jobs in, (ok, result or exception) out."""
  out = os.fdopen(os.dup(1), "wb")
  os.dup2(2, 1)
  inp = sys.stdin.buffer
  fns: dict[bytes, Any] = {}
  while len(hdr := inp.read(8)) == 8:
    fbytes, args = pickle.loads(inp.read(int.from_bytes(hdr, "little")))
    try:
      if fbytes not in fns: fns[fbytes] = pickle.loads(fbytes)
      data = pickle.dumps((True, fns[fbytes](*args)))
    except Exception as e:  # noqa: BLE001  the caller raises it
      try: data = pickle.dumps((False, e))
      except Exception:  # noqa: BLE001  an exception that doesn't pickle
        data = pickle.dumps((False, RuntimeError(f"{type(e).__name__}: {e}")))
    out.write(len(data).to_bytes(8, "little") + data)
    out.flush()


def job(fbytes: bytes, *args: Any) -> bytes:
  """A job for `Worker.call`: `fbytes` is `pickle.dumps(fn)` (made once for many jobs of one fn)."""
  return pickle.dumps((fbytes, args))


class Worker:
  """One long-lived child process."""

  def __init__(self, extra_env: dict[str, str] | None = None) -> None:
    # the child finds tinygrad (and any plugin) where this process does; it never searches or offloads itself
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "DEBUG": "0", "BEAM": "0", "JITBEAM": "0",
           "COMPILE_WORKER": "0", **(extra_env or {})}
    self.proc = subprocess.Popen([sys.executable, *WORKER_ARGS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

  def call(self, data: bytes) -> tuple[bool, Any]:
    """Run one job (from `job`): (True, result) or (False, the exception it raised). WorkerDied when the child is gone."""
    assert self.proc.stdin is not None and self.proc.stdout is not None
    try:
      self.proc.stdin.write(len(data).to_bytes(8, "little") + data)
      self.proc.stdin.flush()
      if len(hdr := self.proc.stdout.read(8)) < 8: raise EOFError("worker exited")
      return pickle.loads(self.proc.stdout.read(int.from_bytes(hdr, "little")))
    except (OSError, EOFError, pickle.UnpicklingError, ValueError) as e: raise WorkerDied(f"{type(e).__name__}: {e}") from e

  def close(self) -> None:
    if self.proc.poll() is None:
      try:
        if self.proc.stdin is not None: self.proc.stdin.close()  # EOF: the worker's loop ends
        self.proc.wait(timeout=5)
      except (OSError, subprocess.TimeoutExpired): self.proc.kill()


class WorkerPool:
  """`n` workers. Threads here only wait on pipes; the jobs run in parallel in the children."""

  def __init__(self, n: int):
    self.idle: queue.Queue[Worker] = queue.Queue()
    for _ in range(n): self.idle.put(Worker())
    self.n = n

  def _run(self, data: bytes) -> tuple[bool, Any]:
    w = self.idle.get()
    try: res = w.call(data)
    except WorkerDied as e:  # replace it; the job's result is the failure
      w.close()
      w = Worker()
      res = (False, e)
    finally: self.idle.put(w)
    return res

  def map(self, fn: Callable[..., Any], arglists: list[tuple], done: Callable[[], None] | None = None) -> list[tuple[bool, Any]]:
    """`fn(*args)` for each args, in parallel: (True, result) or (False, exception: raised by fn, or WorkerDied), in order."""
    fbytes = pickle.dumps(fn)
    def one(args: tuple) -> tuple[bool, Any]:
      res = self._run(job(fbytes, *args))
      if done is not None: done()
      return res
    with ThreadPoolExecutor(self.n) as ex: return list(ex.map(one, arglists))

  def submit(self, fn: Callable[..., Any], arglists: list[tuple]) -> list[Future]:
    """`fn(*args)` for each args, in parallel, without waiting: a Future per args of (True, result) or (False, exception), each
    done as soon as its job is (the jobs are pickled on the waiting threads, not here)."""
    fbytes = pickle.dumps(fn)
    def one(args: tuple) -> tuple[bool, Any]:
      try: data = job(fbytes, *args)
      except Exception as e: return (False, e)  # noqa: BLE001  something didn't pickle
      return self._run(data)
    ex = ThreadPoolExecutor(self.n, thread_name_prefix="tinygrad-pool")
    futures = [ex.submit(one, args) for args in arglists]
    ex.shutdown(wait=False)
    return futures

  def close(self) -> None:
    while not self.idle.empty(): self.idle.get().close()


# ---- the compile worker (COMPILE_WORKER=1)

_worker: Worker | None = None
_broken = False
_lock = threading.Lock()


def _get() -> Worker:
  global _worker
  if _worker is None:
    _worker = Worker()
    atexit.register(close)
  return _worker


def prestart() -> None:
  """Start the compile worker and the compile pool now: their Pythons start while this process does its own work (loading a
  model, say), instead of when the first kernels need them."""
  global _broken
  compile_pool()
  if COMPILE_WORKER.value and not _broken:
    with _lock:
      try: _get()
      except OSError: _broken = True  # no worker: run here


def offload(fn: Callable[..., T], *args: Any) -> T:
  global _broken
  if not COMPILE_WORKER.value or _broken: return fn(*args)
  try: data = job(pickle.dumps(fn), *args)
  except Exception:  # noqa: BLE001  not everything pickles (a compiler holding a handle): run here
    return fn(*args)
  with _lock:
    try: ok, value = _get().call(data)
    except (OSError, WorkerDied) as e:
      if DEBUG >= 1: print(f"compile worker failed ({e}); compiling in this process")
      _broken = True
      close()
      return fn(*args)
  if ok: return value
  raise value


def close() -> None:
  global _worker, _pool
  if _worker is not None:
    _worker.close()
    _worker = None
  if _pool is not None:
    _pool.close()
    _pool = None


# ---- the compile pool (PARALLEL_COMPILE)

_pool: WorkerPool | None = None


def parallel_workers() -> int:
  if PARALLEL_COMPILE.value >= 0: return PARALLEL_COMPILE.value
  return min(8, max(0, (os.cpu_count() or 1) - 2))


def pool_started() -> bool: return _pool is not None and _pool.n == parallel_workers()


def compile_pool() -> WorkerPool | None:
  """The pool of compile processes, started on first use; None when PARALLEL_COMPILE (or the machine) gives none."""
  global _pool
  if (n := parallel_workers()) <= 0: return None
  if _pool is None or _pool.n != n:
    if _pool is not None: _pool.close()
    _pool = WorkerPool(n)
    atexit.register(close)
  return _pool
