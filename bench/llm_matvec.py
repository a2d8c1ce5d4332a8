"""Benchmark: the CPU decode step's matrix-vector products on quantized weights, one kernel each (tinygrad.llm's linear with one
row): SmolLM2-135M's 1536x576 (gate or up), 576x1536 (down) and 49152x576 (the output head), Q4_1 and Q8_0, in each of
linear's forms (model.BLOCK_DOT): 0 every weight dequantized, 1 block_dot with x as int16, 2 block_dot with float32 x, 3 block_dot
with x as int8 (byte dot-product instructions where the CPU has them: vpdpbusd).

  uv run python bench/llm_matvec.py [--types Q4_1,Q8_0] [--shapes 1536x576,576x1536,49152x576]

Prints one JSON object: microseconds per product (best of 7 rounds of 20 TinyJit calls, the forms interleaved so that the
machine's load moves them alike), weights per second, and the largest error relative to the largest output (float64 numpy)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import machine  # noqa: E402

FORMS = (0, 1, 2, 3)


def random_weight(type_name: str, n_out: int, k: int, rng: np.random.Generator) -> np.ndarray:
  """Random blocks with sane float16 scales (d in [0, 0.01), Q4_1's m in (-0.08, 0])."""
  from tinygrad.llm.quants import BLOCK_SIZES
  block, size = BLOCK_SIZES[type_name]
  nb = n_out * k // block
  b = rng.integers(0, 256, (nb, size), dtype=np.uint8)
  b[:, 0:2] = (rng.random(nb) * 0.01).astype(np.float16).view(np.uint8).reshape(nb, 2)
  if type_name == "Q4_1": b[:, 2:4] = (-(rng.random(nb) * 0.08)).astype(np.float16).view(np.uint8).reshape(nb, 2)
  return b.reshape(-1)


def one(type_name: str, n_out: int, k: int) -> dict:
  from tinygrad import Tensor, TinyJit
  from tinygrad.helpers import Context
  from tinygrad.llm.model import QuantWeight, linear
  rng = np.random.default_rng(0)
  w = QuantWeight(Tensor(random_weight(type_name, n_out, k, rng)).realize(), type_name, (n_out, k))
  x = Tensor(rng.standard_normal((1, 1, k)).astype(np.float32)).realize()
  ref = x.numpy().reshape(1, k).astype(np.float64) @ w.dequant().numpy().T.astype(np.float64)
  fns = {}
  for form in FORMS:
    with Context(BLOCK_DOT=form):
      fns[form] = TinyJit(lambda x: linear(x, w).realize())
      for _ in range(3): fns[form](x)
  best = dict.fromkeys(FORMS, float("inf"))
  for _ in range(7):
    for form in FORMS:
      t = time.perf_counter()
      for _ in range(20): fns[form](x)
      best[form] = min(best[form], (time.perf_counter() - t) / 20)
  out = {}
  for form in FORMS:
    err = float(np.abs(fns[form](x).numpy().reshape(-1) - ref.reshape(-1)).max() / np.abs(ref).max())
    out[f"block_dot_{form}"] = {"us": round(best[form] * 1e6, 1), "gweights_s": round(n_out * k / best[form] / 1e9, 2), "rel_err": float(f"{err:.2e}")}
  return out


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--types", default="Q4_1,Q8_0")
  ap.add_argument("--shapes", default="1536x576,576x1536,49152x576")
  args = ap.parse_args()
  load = os.getloadavg()
  results = {f"{t} {s}": one(t, *map(int, s.split("x"))) for t in args.types.split(",") for s in args.shapes.split(",")}
  print(json.dumps({"benchmark": "llm_matvec", "results": results, "machine": {**machine(), "loadavg": load, "loadavg_end": os.getloadavg()}}))


if __name__ == "__main__": main()
