"""Matmul TFLOP/s on the GPU: ours (DEV=CUDA or CUDA:PTX) and torch, same inputs, same run, medians of CUDA-event timings.

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA python3 bench/gpu_matmul.py

Sizes: 4096 and 8192 (square), dtypes float16, bfloat16, float32 (torch in full fp32: TF32 off). Prints one JSON object.
Each case also reports the max error of ours against torch relative to torch's largest |value| (inputs are N(0, 1)/8).
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
  runs = 3 if n >= 8192 and dtname == "float32" else None
  ours = time_ours(lambda: mm(a, b), **({"runs": runs} if runs else {}))
  theirs = time_torch(lambda: ta @ tb)
  ref = (ta @ tb).float().cpu().numpy()
  got = out.float().numpy() if dtname != "float32" else out.numpy()
  err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
  flop = 2 * n ** 3
  res = {"n": n, "dtype": dtname, "ours_tflops": flop / median(ours) / 1e12, "torch_tflops": flop / median(theirs) / 1e12,
         "ours_ms": median(ours) * 1e3, "torch_ms": median(theirs) * 1e3, "first_call_s": first_s, "max_rel_err": err, "ok": err <= TOL[dtname]}
  res["ratio"] = res["ours_tflops"] / res["torch_tflops"]
  log(f"matmul {n} {dtname}: ours {res['ours_tflops']:.2f} TFLOP/s, torch {res['torch_tflops']:.2f} TFLOP/s, err {err:.2e}")
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
