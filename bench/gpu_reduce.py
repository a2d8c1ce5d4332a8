"""Reductions on the GPU in GB/s, ours and torch in the same run, plus TinyJit replay overhead with and without CUDA graphs.

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA python3 bench/gpu_reduce.py

Cases: sum over 2^28 float32 (4 * N bytes), x.sum(axis=1) and x.sum(axis=0) of a (16384, 4096) matrix, softmax over
its rows (read once, written once: 8 * N bytes as the floor; one row kernel, schedule/rows.py). SWEEP=1 also times the full sum
under other split sizes (GPU_SPLIT_PARTIALS, GPU_SPLIT_CHUNK) and without the float4 upcast (GPU_RED_UPCAST=0).
The JIT case replays 10 tiny kernels: host time per call (launch-bound) with GRAPH=1 and GRAPH=0. Prints one JSON object.
"""
from __future__ import annotations

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import header, log, median, our_device, run_parts, time_ours, time_torch  # noqa: E402


def reductions(result: dict) -> None:
  import torch
  from tinygrad import Tensor, TinyJit
  rng = np.random.default_rng(0)
  big = rng.standard_normal(1 << 28, dtype=np.float32)
  mat = rng.standard_normal((16384, 4096), dtype=np.float32)
  a, m = Tensor(big).realize(), Tensor(mat).realize()
  ta, tm = torch.from_numpy(big).cuda(), torch.from_numpy(mat).cuda()
  ref64 = {"sum": float(big.astype(np.float64).sum()), "rowsum": mat.astype(np.float64).sum(1), "colsum": mat.astype(np.float64).sum(0)}
  cases = [("sum", lambda: a.sum(), lambda: ta.sum(), 4 * big.size),
           ("rowsum", lambda: m.sum(axis=1), lambda: tm.sum(dim=1), 4 * mat.size),
           ("colsum", lambda: m.sum(axis=0), lambda: tm.sum(dim=0), 4 * mat.size),
           ("softmax", lambda: m.softmax(axis=1), lambda: tm.softmax(dim=1), 8 * mat.size)]
  for name, ours, theirs, nbytes in cases:
    try:
      f = TinyJit(lambda ours=ours: ours().realize())
      st = time.perf_counter()
      f()
      first = time.perf_counter() - st
      t_ours, t_torch = time_ours(f, runs=15), time_torch(theirs, runs=15)
      got = f().numpy()  # a replay's result (through the graph where there is one)
      if name == "softmax":
        e = np.exp(mat[:64].astype(np.float64) - mat[:64].max(1, keepdims=True))
        err = float(np.abs(got[:64] - e / e.sum(1, keepdims=True)).max())
      else:
        ref = ref64[name]
        err = float(np.abs(np.asarray(got, np.float64) - ref).max() / max(1.0, math.sqrt(float(np.abs(ref).max()))))
      case = {"op": name, "ours_gbs": nbytes / median(t_ours) / 1e9, "torch_gbs": nbytes / median(t_torch) / 1e9,
              "ours_us": median(t_ours) * 1e6, "ours_best_us": min(t_ours) * 1e6, "torch_us": median(t_torch) * 1e6,
              "first_call_s": first, "err": err, "kernels": len(f.captured), "graph": getattr(f, "graph", None) is not None}
      case["ratio"] = case["ours_gbs"] / case["torch_gbs"]
      log(f"{name}: ours {case['ours_gbs']:.0f} GB/s ({case['kernels']} kernels), torch {case['torch_gbs']:.0f} GB/s, "
          f"ratio {case['ratio']:.3f}, err {err:.1e}")
    except Exception as e:  # noqa: BLE001  reported; the other cases still run
      log(f"{name} failed: {type(e).__name__}: {e}")
      case = {"op": name, "error": f"{type(e).__name__}: {str(e)[:1500]}"}
    result["cases"].append(case)
  if os.environ.get("SWEEP", "0") not in ("", "0"): sweep(result, a, float(big.astype(np.float64).sum()), ta)


def sweep(result: dict, a, ref: float, ta) -> None:
  from tinygrad import TinyJit
  from tinygrad.engine import realize
  from tinygrad.helpers import Context
  t_torch = median(time_torch(lambda: ta.sum(), runs=15))
  configs = [dict(GPU_SPLIT_PARTIALS=p, GPU_SPLIT_CHUNK=c, GPU_RED_UPCAST=u) for p in (1 << 18, 1 << 19, 1 << 20, 1 << 21)
             for c in (64,) for u in (1, 0)] + [dict(GPU_SPLIT_PARTIALS=1 << 20, GPU_SPLIT_CHUNK=16, GPU_RED_UPCAST=1)]
  # longer chunks: fewer levels of partials (fewer kernels after the first)
  configs += [dict(GPU_SPLIT_PARTIALS=p, GPU_SPLIT_CHUNK=c, GPU_RED_UPCAST=1) for p, c in ((1 << 18, 1024), (1 << 19, 512), (1 << 20, 256), (1 << 18, 256))]
  for cfg in configs:
    try:
      realize._runner_cache.clear()
      with Context(**cfg):
        f = TinyJit(lambda: a.sum().realize())
        out = f()
        t = time_ours(f, runs=15)
      row = {**cfg, "ours_gbs": 4 * a.shape[0] / median(t) / 1e9, "ratio": t_torch / median(t), "kernels": len(f.captured),
             "err": abs(out.item() - ref) / math.sqrt(a.shape[0])}
      log(f"sweep {cfg}: {row['ours_gbs']:.0f} GB/s ratio {row['ratio']:.3f} ({row['kernels']} kernels)")
    except Exception as e:  # noqa: BLE001
      row = {**cfg, "error": f"{type(e).__name__}: {str(e)[:500]}"}
      log(f"sweep {cfg} failed: {e}")
    result["sweep"].append(row)
  realize._runner_cache.clear()


def jit_overhead(result: dict, kernels: int = 10, calls: int = 2000) -> None:
  from tinygrad import Tensor, TinyJit
  from tinygrad.helpers import Context
  dev = our_device()
  for graph in (1, 0):
    with Context(GRAPH=graph):
      @TinyJit
      def f(x: Tensor) -> Tensor:
        for i in range(kernels): x = (x * 1.0001 + i).realize()
        return x

      x = Tensor.rand(16).realize()
      for _ in range(5): f(x)
      dev.synchronize()
      best = math.inf
      for _ in range(5):
        st = time.perf_counter()
        for _ in range(calls): f(x)
        dev.synchronize()
        best = min(best, (time.perf_counter() - st) / calls)
      row = {"graph": graph, "used_graph": getattr(f, "graph", None) is not None, "us_per_call": best * 1e6, "us_per_kernel": best * 1e6 / kernels}
      log(f"jit replay GRAPH={graph}: {row['us_per_call']:.1f} us/call, {row['us_per_kernel']:.2f} us/kernel (graph used: {row['used_graph']})")
      result["jit_overhead"].append(row)


def main() -> None:
  result = {"bench": "gpu_reduce", **header(), "unit": "GB/s", "cases": [], "sweep": [], "jit_overhead": []}
  run_parts(result, [jit_overhead, reductions])


if __name__ == "__main__":
  main()
