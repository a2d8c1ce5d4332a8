"""Timing shared by the peer scripts (stdlib only: each peer runs in its own environment)."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timeit(fn: Callable[[], Any], runs: int, warmup: int = 2) -> dict[str, float]:
  """Best and median wall time of `runs` calls after `warmup` calls."""
  for _ in range(warmup): fn()
  times = []
  for _ in range(runs):
    st = time.perf_counter()
    fn()
    times.append(time.perf_counter() - st)
  return {"best_s": min(times), "median_s": statistics.median(times), "runs": runs}


def rate(t: dict[str, float], amount: float, unit: str) -> dict[str, Any]:
  """`amount` (flops or bytes) per second, in units of 1e9, from the best and the median time."""
  return {**t, unit: amount / t["best_s"] * 1e-9, f"{unit}_median": amount / t["median_s"] * 1e-9}
