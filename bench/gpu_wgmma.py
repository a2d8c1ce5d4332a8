"""fp16/bf16 matmuls of several shapes and operand layouts on the GPU: ours (whatever WGMMA= says) against torch, same
inputs, same run: the error against torch and TFLOP/s of both. Prints one JSON object.

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin \
    DEV=CUDA::sm_90a [WGMMA=0] python3 bench/gpu_wgmma.py [--check-only] [--cases 4096x4096x4096,512x2048x8192] \
    [--check-cases 4096x4096x4096:nt,4096x4096x4096:nn:bias]

Layouts: "nn" is A (M,K) @ B (K,N), "nt" is A @ B^T with B stored (N,K) (a linear layer's weight), "tn" A stored (K,M).
Each case reports the tensor-core opt the heuristic chose (TC(spec, config) and the spec's name). `--sweep` instead times
every wgmma tiling (forced with TC_SPEC and TC_CONFIG; TC_INFLIGHT 0 and 1 for the widest) on `--cases`, fp16, checked
against torch: the measurements behind TileConfig.rate of the wgmma configs.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import emit, header, log, median, time_ours, time_torch  # noqa: E402

CHECKS = [(128, 256, 64, "nn"), (256, 256, 256, "nt"), (128, 128, 128, "tn"), (512, 384, 512, "nn"),
          (1024, 2048, 768, "nn"), (512, 512, 512, "tt")]
TOL = {"float16": 2e-2, "bfloat16": 5e-2}


def _chosen(expr) -> str:
  from tinygrad import Device
  from tinygrad.codegen.program import default_opts
  from tinygrad.schedule.kernelize import create_schedule
  from tinygrad.uop.ops import Ops
  items, _ = create_schedule([expr.uop])
  r = Device.renderer(Device.DEFAULT)
  for it in items:
    if it.ast.op is Ops.SINK and (opts := default_opts(it.ast, r)) and opts[0].op.name == "TC":
      return f"TC({opts[0].axis},{opts[0].amount}) {r.tensor_cores[opts[0].axis].name} {r.tensor_cores[opts[0].axis].tile_configs[opts[0].amount]}"
  return "no TC"


def case(M: int, N: int, K: int, layout: str, dtname: str, timed: bool, bias: bool = False, batch: int = 0) -> dict:
  import torch
  from tinygrad import Tensor, TinyJit, dtypes
  dt, tdt = getattr(dtypes, dtname), getattr(torch, dtname)
  rng = np.random.default_rng(M * 7 + N * 3 + K)
  lead = (batch,) if batch else ()
  a_np = rng.standard_normal((*lead, M, K) if layout[0] == "n" else (*lead, K, M), dtype=np.float32) / 8
  b_np = rng.standard_normal((*lead, K, N) if layout[1] == "n" else (*lead, N, K), dtype=np.float32) / 8
  c_np = rng.standard_normal((N,), dtype=np.float32)
  a, b = Tensor(a_np).cast(dt).contiguous().realize(), Tensor(b_np).cast(dt).contiguous().realize()
  c = Tensor(c_np).cast(dt).contiguous().realize()
  ta, tb, tc = torch.from_numpy(a_np).cuda().to(tdt), torch.from_numpy(b_np).cuda().to(tdt), torch.from_numpy(c_np).cuda().to(tdt)

  def ours(x: Tensor, y: Tensor, z: Tensor) -> Tensor:
    out = (x if layout[0] == "n" else x.transpose(-1, -2)) @ (y if layout[1] == "n" else y.transpose(-1, -2))
    return ((out + z).relu() if bias else out)

  def theirs():
    out = (ta if layout[0] == "n" else ta.transpose(-1, -2)) @ (tb if layout[1] == "n" else tb.transpose(-1, -2))
    return (out + tc).relu() if bias else out

  chosen = _chosen(ours(a, b, c))
  mm = TinyJit(lambda x, y, z: ours(x, y, z).realize())
  st = time.perf_counter()
  out = mm(a, b, c)
  first_s = time.perf_counter() - st
  ref = theirs().float().cpu().numpy()
  got = out.float().numpy()
  err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
  res = {"shape": [M, N, K], "layout": layout, "dtype": dtname, "bias_relu": bias, "batch": batch, "opt": chosen, "max_rel_err": err,
         "ok": bool(err <= TOL[dtname] and not np.isnan(got).any()), "first_call_s": first_s}
  if timed:
    flop = 2 * M * N * K * max(batch, 1)
    t_ours, t_torch = median(time_ours(lambda: mm(a, b, c))), median(time_torch(theirs))
    res.update(ours_tflops=flop / t_ours / 1e12, torch_tflops=flop / t_torch / 1e12, ratio=t_torch / t_ours)
  log(f"{M}x{N}x{K} {layout} {dtname}{' bias_relu' if bias else ''}{f' batch {batch}' if batch else ''}: {chosen}, err {err:.2e}" +
      (f", ours {res['ours_tflops']:.1f} torch {res['torch_tflops']:.1f} TFLOP/s" if timed else ""))
  return res


def sweep(shapes: list[tuple[int, int, int]], result: dict) -> None:
  import torch
  from tinygrad import Context, Device, Tensor, TinyJit, dtypes
  r = Device.renderer(Device.DEFAULT)
  specs = [(i, tc) for i, tc in enumerate(r.tensor_cores) if tc.smem_operands and tc.dtype_in == dtypes.float16]
  for M, N, K in shapes:
    rng = np.random.default_rng(M + N + K)
    a_np, b_np = rng.standard_normal((M, K), dtype=np.float32) / 8, rng.standard_normal((K, N), dtype=np.float32) / 8
    a, b = Tensor(a_np).cast(dtypes.float16).contiguous().realize(), Tensor(b_np).cast(dtypes.float16).contiguous().realize()
    ta, tb = torch.from_numpy(a_np).cuda().half(), torch.from_numpy(b_np).cuda().half()
    flop, ref = 2 * M * N * K, (ta @ tb).float().cpu().numpy()
    torch_tflops = flop / median(time_torch(lambda ta=ta, tb=tb: ta @ tb)) / 1e12
    variants = [(i, tc, c, inflight) for i, tc in specs for c in range(len(tc.tile_configs)) for inflight in ((1, 0) if c == 0 and tc.dims[1] == 256 else (1,))]
    for i, tc, c, inflight in variants:
      cfg = tc.tile_configs[c]
      if M % cfg.bm or N % cfg.bn: continue
      case = {"shape": [M, N, K], "spec": tc.name, "config": c, "tile": str(cfg), "inflight": inflight, "torch_tflops": torch_tflops}
      try:
        with Context(TC_SPEC=i, TC_CONFIG=c, TC_INFLIGHT=inflight):
          case["opt"] = _chosen(a @ b)
          mm = TinyJit(lambda x, y: (x @ y).realize())
          out = mm(a, b)
          t = median(time_ours(lambda mm=mm, a=a, b=b: mm(a, b)))
          got = out.float().numpy()
        err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
        case.update(ours_tflops=flop / t / 1e12, ratio=flop / t / 1e12 / torch_tflops, max_rel_err=err, ok=err <= TOL["float16"])
        log(f"{M}x{N}x{K} {tc.name} cfg {c} inflight {inflight}: {case['ours_tflops']:.1f} TFLOP/s ({case['ratio']:.3f}x torch {torch_tflops:.1f}) err {err:.1e} {cfg}")
      except Exception as e:  # noqa: BLE001
        case["error"] = f"{type(e).__name__}: {str(e)[:1000]}"
        log(f"{M}x{N}x{K} {tc.name} cfg {c}: {case['error'][:300]}")
      result["sweep"].append(case)


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--check-only", action="store_true")
  ap.add_argument("--no-check", action="store_true")
  ap.add_argument("--cases", default="4096x4096x4096,8192x8192x8192,512x2048x8192,512x8192x2048")
  ap.add_argument("--dtypes", default="float16,bfloat16")
  ap.add_argument("--sweep", action="store_true")
  # more checks, e.g. big enough for a persistent grid: MxNxK:layout[:bias], comma-separated
  ap.add_argument("--check-cases", default="")
  args = ap.parse_args()
  result = {"bench": "gpu_wgmma", **header(), "WGMMA": os.environ.get("WGMMA", "0"), "checks": [], "cases": [], "sweep": []}
  if args.sweep:
    sweep([tuple(int(x) for x in s.split("x")) for s in args.cases.split(",")], result)  # type: ignore[misc]
    emit(result)
    return
  def guarded(out: list, *a, **kw) -> None:
    try: out.append(case(*a, **kw))
    except Exception as e:  # noqa: BLE001  one failing case is reported and the others still run
      log(f"{a} failed: {type(e).__name__}: {str(e)[:600]}")
      out.append({"args": [str(x) for x in a], "error": f"{type(e).__name__}: {str(e)[:2000]}"})
  if not args.no_check:
    for dtname in args.dtypes.split(","):
      for M, N, K, layout in CHECKS: guarded(result["checks"], M, N, K, layout, dtname, False)
      guarded(result["checks"], 256, 256, 128, "nn", dtname, False, bias=True)
      guarded(result["checks"], 128, 256, 64, "nt", dtname, False, batch=3)
      for spec in (c for c in args.check_cases.split(",") if c):
        shape, layout, *extra = spec.split(":")
        M, N, K = (int(x) for x in shape.split("x"))
        guarded(result["checks"], M, N, K, layout, dtname, False, bias="bias" in extra)
  if not args.check_only:
    for shape in args.cases.split(","):
      M, N, K = (int(x) for x in shape.split("x"))
      for dtname in args.dtypes.split(","): guarded(result["cases"], M, N, K, "nn", dtname, True)
    guarded(result["cases"], 512, 2048, 8192, "nt", "float16", True)
  emit(result)


if __name__ == "__main__":
  main()
