"""Split-K on the GPU: short fp16 matmuls (a prefill chunk of 64-512 rows times an LLM weight) with SPLIT_K on and off, and
torch on the same inputs in the same run: microseconds per call (TinyJit, median) and the error against float64 numpy.

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA python3 bench/gpu_split_k.py

Each case lists the kernels that ran: split, a batch of K slices (r_S_M_N_K/S) and the sum of the slices (r_M_N_S); unsplit,
one kernel. Prints one JSON object.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import emit, header, log, median, time_ours, time_torch  # noqa: E402

SHAPES = [(64, 2048, 8192), (64, 3072, 2048), (64, 2048, 2048), (64, 16384, 2048), (128, 2048, 8192), (512, 2048, 8192)]


def main() -> None:
  import torch
  from tinygrad import Context, Tensor, TinyJit, dtypes
  result = {**header(), "unit": "us", "cases": []}
  for M, N, K in SHAPES:
    rng = np.random.default_rng(0)
    an, bn = rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16)
    a, b = Tensor(an).realize(), Tensor(bn).realize()
    ref = an.astype(np.float64) @ bn.astype(np.float64)
    ta, tb = torch.from_numpy(an).cuda(), torch.from_numpy(bn).cuda()
    case = {"mnk": [M, N, K], "torch_us": median(time_torch(lambda ta=ta, tb=tb: ta @ tb)) * 1e6}
    for split in (0, 1):
      with Context(SPLIT_K=split):
        jit = TinyJit(lambda x, y: x.matmul(y, dtype=dtypes.float32).realize())
        out = jit(a, b)
        out = jit(a, b)
        kernels = [ei.runner.spec.name for ei, _ in jit.captured if ei.runner is not None]
        us = median(time_ours(lambda jit=jit, a=a, b=b: jit(a, b))) * 1e6
        err = float(np.abs(out.numpy() - ref).max() / np.abs(ref).max())
      case[f"split_k_{split}"] = {"us": us, "max_rel_err": err, "kernels": kernels}
    log(case)
    result["cases"].append(case)
  emit(result)


if __name__ == "__main__":
  main()
