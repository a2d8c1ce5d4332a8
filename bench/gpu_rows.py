"""Row kernels on the GPU (schedule/rows.py): softmax, log_softmax, RMSNorm and LayerNorm over the last axis, ours (one
kernel per row where the row is short enough, ROW_FUSE_MAX) against ours without row kernels (ROW_FUSE_MAX=0) and torch,
in GB/s of the floor (the matrix read once and written once: 8 bytes a float32 element), at several row lengths with the
same 2^26 elements; then the values against torch (float64 reference) with the kernel count, at 4096, 8192 and 151936
columns (the last longer than ROW_FUSE_MAX: the path without row kernels). Prints one JSON object.

  PYTHONPATH=packages/core/src:packages/backend-nv/src:bench TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA python3 bench/gpu_rows.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import header, log, median, run_parts, time_ours, time_torch  # noqa: E402

ELEMENTS = 1 << 26
WIDTHS = tuple(int(w) for w in os.environ.get("ROW_WIDTHS", "1024,4096,8192,16384,32768").split(","))


def ops(w_t, w_ours):
  """name -> (ours(x), torch(x))"""
  import torch.nn.functional as F
  return {"softmax": (lambda x: x.softmax(1), lambda x: x.softmax(1)),
          "log_softmax": (lambda x: x.log_softmax(1), lambda x: x.log_softmax(1)),
          "rmsnorm": (lambda x: x.rms_norm() * w_ours, lambda x: F.rms_norm(x, (x.shape[1],), w_t, eps=1e-6)),
          "layernorm": (lambda x: x.layernorm(), lambda x: F.layer_norm(x, (x.shape[1],), eps=1e-5))}


def timings(result: dict) -> None:
  import torch
  from tinygrad import Tensor, TinyJit
  from tinygrad.engine import realize
  from tinygrad.helpers import Context
  rng = np.random.default_rng(0)
  for width in WIDTHS:
    mat = rng.standard_normal((ELEMENTS // width, width), dtype=np.float32)
    w = rng.standard_normal(width, dtype=np.float32)
    x, tx = Tensor(mat).realize(), torch.from_numpy(mat).cuda()
    wo, wt = Tensor(w).realize(), torch.from_numpy(w).cuda()
    for name, (ours, theirs) in ops(wt, wo).items():
      row: dict = {"op": name, "shape": list(mat.shape)}
      try:
        t_torch = median(time_torch(lambda theirs=theirs, tx=tx: theirs(tx), runs=15))
        for label, limit in (("fused", None), ("unfused", 0)):
          realize._runner_cache.clear()
          with Context(**({} if limit is None else {"ROW_FUSE_MAX": limit})):
            f = TinyJit(lambda ours=ours, x=x: ours(x).realize())
            f()
            t = median(time_ours(f, runs=15))
          row[f"{label}_kernels"], row[f"{label}_us"], row[f"{label}_ratio"] = len(f.captured), t * 1e6, t_torch / t
        row["torch_us"], row["torch_gbs"] = t_torch * 1e6, 8 * mat.size / t_torch / 1e9
        log(f"{name} {mat.shape}: fused {row['fused_kernels']}k {row['fused_us']:.1f} us ({row['fused_ratio']:.3f}x torch), unfused "
            f"{row['unfused_kernels']}k {row['unfused_us']:.1f} us ({row['unfused_ratio']:.3f}x), torch {row['torch_us']:.1f} us")
      except Exception as e:  # noqa: BLE001  reported; the other cases still run
        row["error"] = f"{type(e).__name__}: {str(e)[:800]}"
        log(f"{name} {mat.shape} failed: {row['error']}")
      result["timings"].append(row)
  realize._runner_cache.clear()


def correctness(result: dict) -> None:
  import torch
  from tinygrad import Tensor
  rng = np.random.default_rng(1)
  for rows, width in ((64, 4096), (33, 8192), (7, 151936), (5, 1000)):
    mat = (rng.standard_normal((rows, width)) * 4).astype(np.float32)
    w = rng.standard_normal(width).astype(np.float32)
    tx, wt = torch.from_numpy(mat).double(), torch.from_numpy(w).double()
    for name, (ours, theirs) in ops(wt, Tensor(w)).items():
      try:
        t = ours(Tensor(mat))
        kernels = len(t.schedule())
        got = ours(Tensor(mat)).numpy()
        ref = theirs(tx).numpy()
        err = float(np.abs(got - ref).max())
        row = {"op": name, "shape": [rows, width], "kernels": kernels, "max_abs_err": err, "ok": bool(np.allclose(got, ref, rtol=2e-4, atol=2e-5))}
      except Exception as e:  # noqa: BLE001
        row = {"op": name, "shape": [rows, width], "error": f"{type(e).__name__}: {str(e)[:800]}", "ok": False}
      log(f"check {row}")
      result["checks"].append(row)


def main() -> None:
  result = {"bench": "gpu_rows", **header(), "timings": [], "checks": []}
  run_parts(result, [correctness, timings])


if __name__ == "__main__":
  main()
