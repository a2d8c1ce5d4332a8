"""float32 matmul TFLOP/s over a few shapes, ours only (CUDA events, medians), to compare settings run by run:

  DEV=CUDA SIMT_GEMM=0 python3 bench/gpu_fp32_shapes.py      (the register-blocked kernel)
  DEV=CUDA TC_CONFIG=4 python3 bench/gpu_fp32_shapes.py      (one fma tile config)

BENCH_SHAPES=MxNxK,... overrides the list. Prints one JSON object; each case also carries the opts and max error vs numpy.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import emit, log, median, time_ours  # noqa: E402

SHAPES = os.environ.get("BENCH_SHAPES", "512x512x512,1024x1024x1024,2048x2048x2048,512x2048x8192,4096x4096x4096,128x4096x4096")


def bench(m: int, n: int, k: int) -> dict:
  from tinygrad import Device, Tensor, TinyJit
  from tinygrad.codegen.program import default_opts
  rng = np.random.default_rng(0)
  a_np, b_np = rng.standard_normal((m, k), dtype=np.float32) / 8, rng.standard_normal((k, n), dtype=np.float32) / 8
  a, b = Tensor(a_np).contiguous().realize(), Tensor(b_np).contiguous().realize()

  opts = [str(default_opts(it.ast, Device.renderer(Device.DEFAULT))) for it in (a @ b).schedule() if it.ast.op.name == "SINK"]

  @TinyJit
  def mm(x: Tensor, y: Tensor) -> Tensor: return (x @ y).realize()

  out = mm(a, b)
  times = time_ours(lambda: mm(a, b))
  ref = a_np.astype(np.float64) @ b_np.astype(np.float64) if m * n * k <= 2**33 else None
  err = float(np.abs(out.numpy() - ref).max() / np.abs(ref).max()) if ref is not None else None
  res = {"m": m, "n": n, "k": k, "tflops": 2 * m * n * k / median(times) / 1e12, "ms": median(times) * 1e3, "max_rel_err": err, "opts": opts}
  log(f"{m}x{n}x{k}: {res['tflops']:.2f} TFLOP/s err {err}")
  return res


def main() -> None:
  cases = []
  for s in SHAPES.split(","):
    m, n, k = (int(x) for x in s.split("x"))
    try: cases.append(bench(m, n, k))
    except Exception as e:  # noqa: BLE001
      log(f"{s} failed: {type(e).__name__}: {e}")
      cases.append({"shape": s, "error": f"{type(e).__name__}: {str(e)[:500]}"})
  emit({"bench": "gpu_fp32_shapes", "settings": {k: os.environ[k] for k in ("SIMT_GEMM", "TC_CONFIG", "FMA_MIN_BLOCKS") if k in os.environ},
        "cases": cases})


if __name__ == "__main__":
  main()
