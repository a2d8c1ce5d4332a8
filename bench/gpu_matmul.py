"""Matmul TFLOP/s on the GPU: ours (DEV=CUDA or CUDA:PTX) and torch, same inputs, same run, medians of CUDA-event timings.

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA python3 bench/gpu_matmul.py

Sizes: 4096 and 8192 (square), dtypes float16, bfloat16, float32 (torch in full fp32: TF32 off). Prints one JSON object.
Each case also reports the max error of ours against torch relative to torch's largest |value| (inputs are N(0, 1)/8).
Timing: BENCH_ROUNDS rounds (default 5), ours and torch alternating which goes first, each BENCH_RUNS calls (default 7) with
one pair of CUDA events a call (these events also bracket the host's time to issue the call), then 2 x BENCH_BATCH calls
(default 20) between one pair of events ("batched": the kernel's own time wherever the host keeps ahead). The TFLOP/s
figures are medians over every call; every call's time is in the JSON. Then BENCH_PAIRS pairs (default 21) of one call each, ours
and torch back to back in alternating order, and 6 pairs of BENCH_BATCH calls: "paired_ratio" / "paired_batched_ratio" are the
medians of each pair's ratio, so clock and thermal drift between rounds (which moved whole rounds by 10-20% on the H200) cancels.
BENCH_SIZES=4096 / BENCH_DTYPES=float32 narrow it down.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import emit, header, log, median, time_ours, time_torch  # noqa: E402

SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "4096,8192").split(",")]
DTYPES = os.environ.get("BENCH_DTYPES", "float16,bfloat16,float32").split(",")
# a wrong result is reported, not fatal; these are the bounds for "ok" (half/bf16 depend on the accumulator dtype)
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))  # rounds of BENCH_RUNS timed calls each, ours and torch alternating
BATCH = int(os.environ.get("BENCH_BATCH", "20"))  # calls between one pair of events for the batched figures
PAIRS = int(os.environ.get("BENCH_PAIRS", "21"))  # back-to-back pairs (ours, torch) for the paired ratios
TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4}


def bench(n: int, dtname: str) -> dict:
  import torch
  from tinygrad import Tensor, TinyJit, dtypes
  dt = getattr(dtypes, dtname)
  tdt = getattr(torch, dtname)
  rng = np.random.default_rng(n)
  a_np = (rng.standard_normal((n, n), dtype=np.float32) / 8)
  b_np = (rng.standard_normal((n, n), dtype=np.float32) / 8)
  a, b = Tensor(a_np).cast(dt).contiguous().realize(), Tensor(b_np).cast(dt).contiguous().realize()
  ta, tb = torch.from_numpy(a_np).cuda().to(tdt), torch.from_numpy(b_np).cuda().to(tdt)

  @TinyJit
  def mm(x: Tensor, y: Tensor) -> Tensor: return (x @ y).realize()

  st = time.perf_counter()
  out = mm(a, b)
  first_s = time.perf_counter() - st  # includes scheduling and compiling
  slow = n >= 8192 and dtname == "float32"
  # rounds alternate which of the two goes first, so that clock and thermal drift falls on both alike
  ours, theirs, ours_b, theirs_b = [], [], [], []
  for r in range(1 if slow else ROUNDS):
    sides = [(ours, ours_b, time_ours, lambda: mm(a, b)), (theirs, theirs_b, time_torch, lambda: ta @ tb)]
    for single, batched, timer, fn in (sides if r % 2 == 0 else sides[::-1]):
      single += timer(fn, warmup=1, **({"runs": 3} if slow else {}))
      if not slow: batched += timer(fn, warmup=0, runs=2, batch=BATCH)
  # pairs: one call (or one batch) of each side back to back, alternating which goes first; the ratio of each pair
  pairs: list[float] = []
  pairs_b: list[float] = []
  for i in range(0 if slow else PAIRS + 6):
    calls = [(time_ours, lambda: mm(a, b)), (time_torch, lambda: ta @ tb)]
    batch = BATCH if i >= PAIRS else 1
    t = {timer: timer(fn, warmup=1 if batch == 1 else 0, runs=1, batch=batch)[0] for timer, fn in (calls if i % 2 == 0 else calls[::-1])}
    (pairs_b if batch > 1 else pairs).append(t[time_torch] / t[time_ours])
  ref = (ta @ tb).float().cpu().numpy()
  got = out.float().numpy() if dtname != "float32" else out.numpy()
  err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
  flop = 2 * n ** 3
  res = {"n": n, "dtype": dtname, "ours_tflops": flop / median(ours) / 1e12, "torch_tflops": flop / median(theirs) / 1e12,
         "ours_ms": median(ours) * 1e3, "torch_ms": median(theirs) * 1e3, "first_call_s": first_s, "max_rel_err": err, "ok": err <= TOL[dtname]}
  res["ratio"] = res["ours_tflops"] / res["torch_tflops"]
  res["ours_runs_ms"], res["torch_runs_ms"] = [x * 1e3 for x in ours], [x * 1e3 for x in theirs]
  if ours_b:
    res["ours_batched_tflops"], res["torch_batched_tflops"] = flop / median(ours_b) / 1e12, flop / median(theirs_b) / 1e12
    res["batched_ratio"] = res["ours_batched_tflops"] / res["torch_batched_tflops"]
  if pairs: res["paired_ratio"], res["paired_batched_ratio"], res["pair_ratios"], res["pair_batched_ratios"] = median(pairs), median(pairs_b), pairs, pairs_b
  batched = f" (batched: {res['ours_batched_tflops']:.2f} / {res['torch_batched_tflops']:.2f})" if ours_b else ""
  if pairs: batched += f", paired ratio {res['paired_ratio']:.3f} / batched {res['paired_batched_ratio']:.3f}"
  log(f"matmul {n} {dtname}: ours {res['ours_tflops']:.2f} TFLOP/s, torch {res['torch_tflops']:.2f} TFLOP/s{batched}, err {err:.2e}")
  return res


def main() -> None:
  import torch
  torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 for both
  result = {"bench": "gpu_matmul", **header(), "unit": "TFLOP/s", "cases": []}
  for n in SIZES:
    for dtname in DTYPES:
      try: result["cases"].append(bench(n, dtname))
      except Exception as e:  # noqa: BLE001  one failing case is reported and the others still run
        log(f"matmul {n} {dtname} failed: {type(e).__name__}: {e}")
        result["cases"].append({"n": n, "dtype": dtname, "error": f"{type(e).__name__}: {str(e)[:2000]}"})
  emit(result)


if __name__ == "__main__":
  main()
