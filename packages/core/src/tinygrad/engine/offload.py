"""Compiling in a helper process (`COMPILE_WORKER=1`).

A process that compiles with LLVM maps LLVM's code and grows LLVM's heap: about 90 MB that stay for the life of the
process, although only the binaries are needed to run kernels (the CPU backend loads them with its own ELF loader). With
COMPILE_WORKER=1 cache misses are compiled by one long-lived worker process (the BEAM workers' protocol, codegen/search.py)
and only the binaries come back; the disk cache is read and written here as before. The llm CLI turns it on: its peak
memory is then the model's, even on a first run that compiles every kernel.

`offload(fn, *args)` is `fn(*args)`, run in the worker when the setting is on and `fn` and its arguments pickle (a bound
method pickles its object: a compiler). An exception raised by `fn` is raised here. When the worker can't run (it can't
start, or dies), this process compiles from then on.
"""
from __future__ import annotations

import atexit
import pickle
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from tinygrad.helpers import DEBUG, ContextVar

COMPILE_WORKER = ContextVar("COMPILE_WORKER", 0)
T = TypeVar("T")

_worker: Any = None
_broken = False
_lock = threading.Lock()


def _get() -> Any:
  global _worker
  if _worker is None:
    from tinygrad.codegen.search import _Worker  # the worker process and its protocol
    _worker = _Worker(extra_env={"COMPILE_WORKER": "0"})
    atexit.register(close)
  return _worker


def prestart() -> None:
  """Start the worker now: its Python starts while this process does its own work (the first call waits for it)."""
  global _broken
  if COMPILE_WORKER.value and not _broken:
    with _lock:
      try: _get()
      except OSError: _broken = True  # no worker: compile here


def offload(fn: Callable[..., T], *args: Any) -> T:
  global _broken
  if not COMPILE_WORKER.value or _broken: return fn(*args)
  try: job = pickle.dumps(("call", pickle.dumps(fn), args))
  except Exception:  # noqa: BLE001  not everything pickles (a compiler holding a handle): compile here
    return fn(*args)
  with _lock:
    try: ok, value = _get().call(job)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError) as e:
      if DEBUG >= 1: print(f"compile worker failed ({type(e).__name__}: {e}); compiling in this process")
      _broken = True
      close()
      return fn(*args)
  if ok: return value
  raise value


def close() -> None:
  global _worker
  if _worker is not None:
    _worker.close()
    _worker = None
