"""Memory-bound kernels on the GPU, in GB/s: a + b and sum(a) over 2^28 float32, ours and torch in the same run.

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA python3 bench/gpu_elementwise.py

add moves 3 * 4 * N bytes (two reads, one write), sum 4 * N. `sum` is a.sum() as written; `sum_2stage` is
a.reshape(R, C).sum(0).sum(), the same reduction split so that many threads share it (what the codegen does not
do by itself yet). Prints one JSON object. BENCH_LOG2N=24 for a quick run.
"""
from __future__ import annotations

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import emit, header, log, median, time_ours, time_torch  # noqa: E402

LOG2N = int(os.environ.get("BENCH_LOG2N", "28"))


def main() -> None:
  import torch
  from tinygrad import Tensor, TinyJit
  n = 1 << LOG2N
  rng = np.random.default_rng(0)
  a_np, b_np = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
  a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
  ta, tb = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()
  result = {"bench": "gpu_elementwise", **header(), "n": n, "unit": "GB/s", "cases": []}
  ref_sum = float(np.sum(a_np, dtype=np.float64))
  scale = math.sqrt(float(np.sum(a_np.astype(np.float64) ** 2)))  # the size of the rounding errors a float32 sum can make

  @TinyJit
  def add(x: Tensor, y: Tensor) -> Tensor: return (x + y).realize()

  @TinyJit
  def total(x: Tensor) -> Tensor: return x.sum().realize()

  rows = 1 << (LOG2N // 2)

  @TinyJit
  def total_2stage(x: Tensor) -> Tensor: return x.reshape(rows, n // rows).sum(0).sum().realize()

  cases = [("add", lambda: add(a, b), lambda: ta + tb, 12 * n),
           ("sum", lambda: total(a), lambda: ta.sum(), 4 * n),
           ("sum_2stage", lambda: total_2stage(a), lambda: ta.sum(), 4 * n)]
  for name, ours_fn, torch_fn, nbytes in cases:
    try:
      st = time.perf_counter()
      out = ours_fn()
      first_s = time.perf_counter() - st
      # a single-thread reduction of 2^28 elements takes seconds: time it fewer times
      slow = first_s > 2.0
      ours = time_ours(ours_fn, **({"warmup": 1, "runs": 3} if slow else {}))
      theirs = time_torch(torch_fn)
      got = out.numpy()
      if name == "add":
        err = float(np.abs(got - (a_np + b_np)).max())
        ok = err == 0.0
      else:
        err = abs(float(got) - ref_sum) / scale
        ok = err < 1e-2
      case = {"op": name, "ours_gbs": nbytes / median(ours) / 1e9, "torch_gbs": nbytes / median(theirs) / 1e9, "ours_ms": median(ours) * 1e3,
              "torch_ms": median(theirs) * 1e3, "first_call_s": first_s, "err": err, "ok": ok}
      case["ratio"] = case["ours_gbs"] / case["torch_gbs"]
      log(f"{name}: ours {case['ours_gbs']:.1f} GB/s, torch {case['torch_gbs']:.1f} GB/s, err {err:.2e}")
    except Exception as e:  # noqa: BLE001  reported; the other cases still run
      log(f"{name} failed: {type(e).__name__}: {e}")
      case = {"op": name, "error": f"{type(e).__name__}: {str(e)[:2000]}"}
    result["cases"].append(case)
  emit(result)


if __name__ == "__main__":
  main()
