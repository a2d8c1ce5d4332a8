"""Tensor-core tile configs on the GPU, side by side: TFLOP/s of each tiling the renderer offers (a tensor core's `tile_configs`,
forced with TC_SPEC and TC_CONFIG, optionally with TC_STAGES) and of the heuristic's own choice, against torch in the same run,
with each result checked against torch's.

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA \
    BENCH_SHAPES=512x2048x8192,4096 SWEEP=1/0,1/1:3 python3 bench/gpu_tc_sweep.py

BENCH_SHAPES: comma-separated `M x N x K` (x (M, K) times W.T, W (N, K) as an LLM's weight) or `N` (square, N x N times N x N);
default 8192. SWEEP: comma-separated `spec/config[:stages[:prefetch]]` (spec: the index in the renderer's tensor_cores); default:
every config of every tensor core with this dtype. `-1/-1` is the heuristic's choice (always run first). BENCH_DTYPES as in
gpu_matmul.py. A config that doesn't fit, or fails, is reported and the rest still run. Prints one JSON object (stdout) and a
table (stderr).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import emit, header, log, median, time_ours, time_torch  # noqa: E402

SHAPES = [tuple(int(x) for x in s.split("x")) if "x" in s else (int(s),) * 3 for s in os.environ.get("BENCH_SHAPES", "8192").split(",")]
DTYPES = os.environ.get("BENCH_DTYPES", "float16,bfloat16").split(",")
TOL = {"float16": 2e-2, "bfloat16": 5e-2}


def sweep(dtname: str) -> list[tuple[int, ...]]:
  """(spec, config, stages, prefetch) to run: SWEEP's, else every tiling of the renderer's tensor cores for this dtype."""
  if (env := os.environ.get("SWEEP")):
    out = []
    for v in env.split(","):
      spec, rest = v.split("/")
      cfg, *st = (int(x) for x in rest.split(":"))
      out.append((int(spec), cfg, st[0] if st else 0, st[1] if len(st) > 1 else 1))
    return [(-1, -1, 0, 1)] + [o for o in out if o[:2] != (-1, -1)]
  from tinygrad import Device, dtypes
  tcs = Device[Device.DEFAULT].renderer.tensor_cores
  return [(-1, -1, 0, 1)] + [(n, c, 0, 1) for n, tc in enumerate(tcs) if tc.dtype_in == getattr(dtypes, dtname)
                             for c in range(len(tc.tile_configs))]


def variant(a, w, square: bool, ref: np.ndarray, spec: int, cfg: int, stages: int, prefetch: int) -> dict:
  from tinygrad import Context, TinyJit, dtypes
  from tinygrad.engine import realize
  with Context(TC_SPEC=spec, TC_CONFIG=cfg, TC_STAGES=stages, TC_PREFETCH=prefetch):
    realize._runner_cache.clear()  # the runner key holds these settings, but not a previous variant's kernels' reuse

    @TinyJit
    def mm(x, y): return (x.matmul(y, dtype=dtypes.float32) if square else x.matmul(y.T, dtype=dtypes.float32)).realize()
    out = mm(a, w)
    times = time_ours(lambda: mm(a, w))
    got = out.numpy()
    kernels = [ei.runner.spec.name for ei, _ in getattr(mm, "captured", []) if ei.runner is not None]
  err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
  return {"spec": spec, "config": cfg, "stages": stages, "prefetch": prefetch, "ms": median(times) * 1e3, "max_rel_err": err, "kernels": kernels}


def main() -> None:
  import torch
  from tinygrad import Device, Tensor, dtypes
  tcs = Device[Device.DEFAULT].renderer.tensor_cores
  result = {"bench": "gpu_tc_sweep", **header(), "unit": "TFLOP/s", "cases": []}
  for M, N, K in SHAPES:
    square = M == N == K
    for dtname in DTYPES:
      rng = np.random.default_rng(M + N + K)
      a_np = rng.standard_normal((M, K), dtype=np.float32) / 8
      w_np = rng.standard_normal((K, N) if square else (N, K), dtype=np.float32) / 8
      a, w = (Tensor(x).cast(getattr(dtypes, dtname)).contiguous().realize() for x in (a_np, w_np))
      ta, tw = (torch.from_numpy(x).cuda().to(getattr(torch, dtname)) for x in (a_np, w_np))
      tmm = (lambda ta=ta, tw=tw: ta @ tw) if square else (lambda ta=ta, tw=tw: ta @ tw.T)
      flop = 2 * M * N * K
      torch_tflops = flop / median(time_torch(tmm)) / 1e12
      ref = tmm().float().cpu().numpy()
      for spec, cfg, stages, prefetch in sweep(dtname):
        tile = "heuristic" if spec < 0 else str(tcs[spec].tile_configs[cfg]) if spec < len(tcs) and cfg < len(tcs[spec].tile_configs) else "?"
        case = {"mnk": [M, N, K], "dtype": dtname, "spec": spec, "config": cfg, "tile": tile, "stages": stages, "prefetch": prefetch,
                "torch_tflops": torch_tflops}
        try:
          r = variant(a, w, square, ref, spec, cfg, stages, prefetch)
          case.update(r, ours_tflops=flop / r["ms"] * 1e3 / 1e12, ok=r["max_rel_err"] <= TOL[dtname])
          case["ratio"] = case["ours_tflops"] / torch_tflops
          log(f"{M}x{N}x{K} {dtname} {spec:2d}/{cfg:2d}:{stages}:{prefetch}: {case['ours_tflops']:7.1f} TFLOP/s ({case['ratio']:.3f}x torch "
              f"{torch_tflops:.1f}), err {r['max_rel_err']:.1e} {tile}")
        except Exception as e:  # noqa: BLE001  one failing variant is reported and the others still run
          case["error"] = f"{type(e).__name__}: {str(e)[:500]}"
          log(f"{M}x{N}x{K} {dtname} {spec}/{cfg}:{stages}:{prefetch}: FAILED {case['error'][:200]}")
        result["cases"].append(case)
  emit(result)


if __name__ == "__main__":
  main()
