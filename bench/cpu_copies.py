"""Benchmark: the CPU copies before a big matmul (B packed into panels) and a padded convolution (the input copied padded),
schedule/pack.py: each workload with them (PACK_PANELS=1) and without (PACK_PANELS=0), interleaved in one process so both see
the same machine load, numpy's matmul beside them; GFLOP/s, best of --reps. One JSON line.

  uv run python bench/cpu_copies.py [--sizes 512,1024,2048,4096] [--convs 3x3,1x1,s2] [--reps 5]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from tinygrad import Context, Tensor, TinyJit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
CONVS = {"3x3": ((8, 64, 56, 56), (64, 64, 3, 3), 1, 1), "1x1": ((8, 256, 56, 56), (64, 256, 1, 1), 0, 1),
         "s2": ((8, 128, 28, 28), (256, 128, 3, 3), 1, 2)}  # bench/conv_shapes.py's ResNet shapes, batch 8


def compare(fn: Any, args: tuple[Tensor, ...], flops: int, reps: int, peer: Any = None) -> dict[str, Any]:
  runs: dict[str, Any] = {}
  for pack in (0, 1):
    f = TinyJit(fn)
    with Context(PACK_PANELS=pack):
      for _ in range(3): f(*args)  # capture with the setting on (the schedule is made while capturing)
    runs[f"pack{pack}"] = f
  if peer is not None: runs["numpy"] = peer
  best = dict.fromkeys(runs, float("inf"))
  for _ in range(reps):
    for k, f in runs.items():
      t = time.perf_counter()
      f() if k == "numpy" else f(*args)
      best[k] = min(best[k], time.perf_counter() - t)
  out: dict[str, Any] = {k: round(flops / t / 1e9, 1) for k, t in best.items()}
  out["speedup"] = round(best["pack0"] / best["pack1"], 2)
  if peer is not None: out.update({f"{k}_vs_numpy": round(best["numpy"] / best[k], 2) for k in ("pack0", "pack1")})
  return out


def main() -> None:
  from common import machine
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--sizes", default="512,1024,2048,4096", help="square float32 matmuls (comma-separated)")
  ap.add_argument("--convs", default="3x3,1x1,s2", help=f"convolutions, of {', '.join(CONVS)}")
  ap.add_argument("--reps", type=int, default=5)
  args = ap.parse_args()
  start, d = machine(), {}
  for n in (int(s) for s in args.sizes.split(",") if s):
    a, b = Tensor.rand(n, n).realize(), Tensor.rand(n, n).realize()
    an, bn = a.numpy(), b.numpy()
    d[f"matmul_{n}"] = compare(lambda a, b: (a @ b).realize(), (a, b), 2 * n ** 3, args.reps, lambda an=an, bn=bn: an @ bn)
  for name in (s for s in args.convs.split(",") if s):
    xs, ws, pad, stride = CONVS[name]
    x, w = Tensor.rand(*xs).realize(), Tensor.rand(*ws).realize()
    out = x.conv2d(w, padding=pad, stride=stride)
    flops = 2 * out.numel() * ws[1] * ws[2] * ws[3]
    d[f"conv_{name}"] = compare(lambda x, w, pad=pad, stride=stride: x.conv2d(w, padding=pad, stride=stride).realize(), (x, w), flops,
                                args.reps)
  print(json.dumps({"benchmark": "cpu_copies", "units": "GFLOP/s", "figures": d, "machine": {**start, "loadavg_end": list(os.getloadavg())}}))


if __name__ == "__main__": main()
