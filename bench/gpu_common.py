"""Shared pieces of the GPU benchmarks (bench/gpu_matmul.py, bench/gpu_elementwise.py): CUDA-event timing of our
framework and of torch in the same process, medians after warmup, and a JSON line at the end.

Run on a machine with an NVIDIA GPU, torch (CUDA build) and cuda-bindings, e.g. from a source checkout:
  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA python3 bench/gpu_matmul.py
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

WARMUP = int(os.environ.get("BENCH_WARMUP", "2"))
RUNS = int(os.environ.get("BENCH_RUNS", "7"))


def log(*args: Any) -> None: print(*args, file=sys.stderr, flush=True)  # progress on stderr, the JSON alone on stdout


def our_device() -> Any:
  from tinygrad import Device
  dev = Device[Device.DEFAULT]
  if not hasattr(dev, "ctx"): raise SystemExit(f"DEV={os.environ.get('DEV')} is not a CUDA/NV device (got {dev}); run with DEV=CUDA")
  return dev


def time_ours(fn: Callable[[], Any], warmup: int = WARMUP, runs: int = RUNS, batch: int = 1) -> list[float]:
  """Seconds per call of fn (a TinyJit'd function: the kernels replay without Python rebuilding the graph), each timed
  with CUDA events on the stream our kernels launch on. The events bracket the host's call too: a kernel shorter than
  the call's host time is timed as the host time. `batch` > 1: that many calls between one pair of events (the queue runs
  ahead of the host), the time divided by them: the kernels' own time wherever the host keeps up."""
  from tinygrad_backend_nv.runtime import Timer
  dev = our_device()
  for _ in range(warmup): fn()
  dev.synchronize()
  times = []
  for _ in range(runs):
    with Timer(dev) as t:
      for _ in range(batch): fn()
    times.append(t.seconds / batch)
  return times


def time_torch(fn: Callable[[], Any], warmup: int = WARMUP, runs: int = RUNS, batch: int = 1) -> list[float]:
  """As time_ours, for torch (its current stream)."""
  import torch
  for _ in range(warmup): fn()
  torch.cuda.synchronize()
  times = []
  for _ in range(runs):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(batch): fn()
    end.record()
    end.synchronize()
    times.append(start.elapsed_time(end) * 1e-3 / batch)
  return times


def median(xs: list[float]) -> float: return statistics.median(xs)


def header() -> dict[str, Any]:
  import torch
  from tinygrad import Device
  dev = our_device()
  r = Device.renderer(Device.DEFAULT)
  return {"device": torch.cuda.get_device_name(0), "ours": f"{Device.DEFAULT}:{r.name}:{r.arch}", "torch": torch.__version__,
          "warmup": WARMUP, "runs": RUNS, "arch": getattr(dev, "arch", None), "time": time.strftime("%Y-%m-%d %H:%M:%S")}


def emit(result: dict[str, Any]) -> None:
  print(json.dumps(result), flush=True)


def run_parts(result: dict[str, Any], parts: list[Callable[[dict[str, Any]], None]]) -> None:
  """Each part adds its figures to `result`; one that fails is logged and the others still run; then the JSON is printed."""
  for part in parts:
    try: part(result)
    except Exception as e:  # noqa: BLE001
      log(f"{part.__name__} failed: {type(e).__name__}: {e}")
  emit(result)
