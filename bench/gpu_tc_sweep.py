"""Tensor-core tile configs on the GPU, side by side: TFLOP/s of each `codegen/tensor_core.py` CONFIGS entry (forced with
TC_CONFIG, optionally with TC_STAGES) against torch in the same run, with each result checked against torch's.

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA \
    SWEEP=0,0:3,14,11 python3 bench/gpu_tc_sweep.py

SWEEP: comma-separated `config[:stages[:prefetch]]` (TC_STAGES, TC_PREFETCH; default: every config the heuristic may pick for big matmuls); BENCH_SIZES,
BENCH_DTYPES as in gpu_matmul.py. A config that doesn't fit, or fails, is reported and the rest still run. Prints one
JSON object (stdout) and a table (stderr).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import emit, header, log, median, time_ours, time_torch  # noqa: E402

SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "8192").split(",")]
DTYPES = os.environ.get("BENCH_DTYPES", "float16,bfloat16").split(",")
SWEEP = [tuple(int(x) for x in v.split(":")) for v in os.environ.get("SWEEP", "0,0:3,9,10,11,12,13,14,15").split(",")]
TOL = {"float16": 2e-2, "bfloat16": 5e-2}


def variant(a, b, ref: np.ndarray, cfg: int, stages: int, prefetch: int) -> dict:
  from tinygrad import Context, TinyJit
  with Context(TC_CONFIG=cfg, TC_STAGES=stages, TC_PREFETCH=prefetch):
    @TinyJit
    def mm(x, y): return (x @ y).realize()
    out = mm(a, b)
    times = time_ours(lambda: mm(a, b))
    got = out.float().numpy()
  err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
  return {"config": cfg, "stages": stages, "prefetch": prefetch, "ms": median(times) * 1e3, "max_rel_err": err}


def main() -> None:
  import torch
  from tinygrad import Tensor, dtypes
  from tinygrad.codegen.tensor_core import CONFIGS
  result = {"bench": "gpu_tc_sweep", **header(), "unit": "TFLOP/s", "cases": []}
  for n in SIZES:
    for dtname in DTYPES:
      rng = np.random.default_rng(n)
      a_np, b_np = (rng.standard_normal((n, n), dtype=np.float32) / 8), (rng.standard_normal((n, n), dtype=np.float32) / 8)
      a, b = Tensor(a_np).cast(getattr(dtypes, dtname)).contiguous().realize(), Tensor(b_np).cast(getattr(dtypes, dtname)).contiguous().realize()
      ta, tb = torch.from_numpy(a_np).cuda().to(getattr(torch, dtname)), torch.from_numpy(b_np).cuda().to(getattr(torch, dtname))
      flop = 2 * n ** 3
      torch_tflops = flop / median(time_torch(lambda ta=ta, tb=tb: ta @ tb)) / 1e12
      ref = (ta @ tb).float().cpu().numpy()
      for cfg, *st in SWEEP:
        stages, prefetch = (st[0] if st else 0), (st[1] if len(st) > 1 else 1)
        case = {"n": n, "dtype": dtname, "config": cfg, "tile": str(CONFIGS[cfg]), "stages": stages, "prefetch": prefetch, "torch_tflops": torch_tflops}
        try:
          r = variant(a, b, ref, cfg, stages, prefetch)
          case.update(r, ours_tflops=flop / r["ms"] * 1e3 / 1e12, ok=r["max_rel_err"] <= TOL[dtname])
          case["ratio"] = case["ours_tflops"] / torch_tflops
          log(f"{n} {dtname} cfg {cfg:2d}:{stages}:{prefetch}: {case['ours_tflops']:7.1f} TFLOP/s ({case['ratio']:.3f}x torch {torch_tflops:.1f}), "
              f"err {r['max_rel_err']:.1e} {CONFIGS[cfg]}")
        except Exception as e:  # noqa: BLE001  one failing variant is reported and the others still run
          case["error"] = f"{type(e).__name__}: {str(e)[:500]}"
          log(f"{n} {dtname} cfg {cfg}:{stages}:{prefetch}: FAILED {case['error'][:200]}")
        result["cases"].append(case)
  emit(result)


if __name__ == "__main__":
  main()
