"""VIZ: record what tinygrad did (the schedule, each kernel's rewrite steps, source, disassembly, run times) and show it.

  VIZ=1 python prog.py    record; at exit write the trace, print its path, and serve the page on 127.0.0.1
                          (only when stdout is a terminal: elsewhere, e.g. in tests and CI, it only writes the trace)
  VIZ=2 python prog.py    record and write the trace, never serve (headless machines)
  python -m tinygrad.viz TRACE [--cli [--kernel N]]    serve a trace again, or print it as text

VIZ_TRACE=path picks the file (default: tinygrad-viz-<pid>.json in the temp directory), VIZ_PORT the port (default 8000,
0: any free one). In code: `enable()` ... `disable()` returns the trace (a dict, trace.py's format).
"""
from __future__ import annotations

import atexit
import os
import sys
import tempfile
from typing import Any

from tinygrad.codegen import program
from tinygrad.engine import realize
from tinygrad.uop import rewrite
from tinygrad.viz.recorder import PAUSED, STAGES, Recorder
from tinygrad.viz.trace import save

_active: Recorder | None = None
_swapped: list[tuple[Any, str, Any]] = []  # (module, name, original) put back by disable()


def _swap(module: Any, name: str, new: Any) -> None:
  if not hasattr(module, name): return  # a stage renamed or moved: it is simply not recorded
  _swapped.append((module, name, getattr(module, name)))
  setattr(module, name, new)


def enable() -> Recorder:
  """Start recording (kernels generated before this are cached and not seen again: enable early)."""
  global _active
  if _active is not None: return _active
  rec = _active = Recorder()
  rewrite.tracer = rec.graph_rewrite
  realize.recorder = rec
  _swap(realize, "get_program", rec.get_program(realize.get_program))
  _swap(realize, "lower_schedule", rec.schedule(realize.lower_schedule))
  for name in STAGES:
    if hasattr(program, name): _swap(program, name, rec.stage(getattr(program, name)))
  for name in PAUSED:
    if hasattr(program, name): _swap(program, name, rec.paused(getattr(program, name)))
  return rec


def disable() -> dict[str, Any] | None:
  """Stop recording and return the trace (None when nothing was recording)."""
  global _active
  if _active is None: return None
  rewrite.tracer, realize.recorder = None, None
  while _swapped:
    module, name, original = _swapped.pop()
    setattr(module, name, original)
  rec, _active = _active, None
  return rec.trace


def trace_path() -> str:
  return os.environ.get("VIZ_TRACE") or os.path.join(tempfile.gettempdir(), f"tinygrad-viz-{os.getpid()}.json")


def _at_exit(mode: int) -> None:
  if (trace := disable()) is None: return
  path = trace_path()
  save(trace, path)
  kernels = sum(1 for k in trace["kernels"] if k["kind"] == "kernel")
  print(f"VIZ: {kernels} kernels, {len(trace['events'])} runs recorded in {path}", file=sys.stderr)
  if mode == 1 and sys.stdout.isatty():
    from tinygrad.viz.server import serve
    serve(path, int(os.environ.get("VIZ_PORT", "8000")))
  else: print(f"VIZ: not serving here{' (stdout is not a terminal)' if mode == 1 else ''}: python -m tinygrad.viz {path}", file=sys.stderr)


def enable_from_env() -> None:
  """What `import tinygrad` does when VIZ is set: record now, write (and maybe serve) at exit."""
  if (mode := int(os.environ.get("VIZ", "0") or 0)) <= 0 or _active is not None: return
  enable()
  # worker processes (BEAM, COMPILE_WORKER) start from this environment: they must not record and write over our trace at exit
  os.environ["VIZ"] = "0"
  atexit.register(_at_exit, mode)
