"""NCCL all-reduce bandwidth between processes (one per GPU): tinygrad.distributed's NCCL backend and torch.distributed's
NCCL, measured in the same processes of one run on the same float32 buffer size (256 MiB by default).

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA \
    python3 bench/allreduce_nccl.py -n 2 [--size-mib 256] [--json out.json]

Without RANK in the environment it starts -n copies of itself through tinygrad.distributed.launch. Rank 0 prints one
JSON object: ours and torch's median time per all-reduce, algbw = bytes / time and busbw = algbw * 2(n-1)/n (NCCL's
convention), and ours/torch. Ours is `dist.all_reduce(t)` on a Tensor (out of place, a fresh output from the allocator's
cache; Python overhead included), and the same call replayed by TinyJit ("jit": how a jitted training step runs it),
each timed like torch's: device sync, one all-reduce, device sync.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the in-process bench's helpers; importing it also turns NVLink multicast off (it can take a shared host's GPUs out of service)
from allreduce import bandwidth  # noqa: E402


def timed(run, sync, warmup: int, runs: int) -> float:
  for _ in range(warmup): run()
  sync()
  times = []
  for _ in range(runs):
    st = time.perf_counter()
    run()
    sync()
    times.append(time.perf_counter() - st)
  return statistics.median(times)


def bench_ours(numel: int, warmup: int, runs: int) -> tuple[dict[str, Any], int, str]:
  import tinygrad.distributed as dist
  from tinygrad import Device, Tensor, TinyJit
  g = dist.init(backend="nccl")
  x = Tensor.ones(numel, device=g.device).contiguous().realize()
  check = dist.all_reduce(x)[:4].numpy()
  if not (check == g.world_size).all(): raise SystemExit(f"rank {g.rank}: our all-reduce gave {check}, want {g.world_size}")
  dev = Device[g.device]
  keep: list[Any] = []
  def run() -> None:
    keep[:] = [dist.all_reduce(x)]  # hold the output until the next call: its memory returns to the cache, not mid-flight
  t = timed(run, dev.synchronize, warmup, runs)
  # the same inside TinyJit, as a jitted training step runs it: a replay is the captured NCCL call alone
  jitted = TinyJit(lambda a: dist.all_reduce(a))
  t_jit = timed(lambda: jitted(x), dev.synchronize, max(warmup, 3), runs)
  from tinygrad_backend_nv.nccl import version
  return {**bandwidth(numel * 4, t, g.world_size), "jit": bandwidth(numel * 4, t_jit, g.world_size)}, g.world_size, version()


def bench_torch(numel: int, warmup: int, runs: int) -> dict[str, Any]:
  import torch
  import torch.distributed as tdist
  rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
  torch.cuda.set_device(local)
  init = f"tcp://{os.environ['MASTER_ADDR']}:{int(os.environ['MASTER_PORT']) + 1}"  # our store holds MASTER_PORT
  tdist.init_process_group("nccl", init_method=init, rank=rank, world_size=world, device_id=torch.device("cuda", local))
  x = torch.ones(numel, device="cuda")
  t = timed(lambda: tdist.all_reduce(x), torch.cuda.synchronize, warmup, runs)
  out = bandwidth(numel * 4, t, world)
  v = torch.cuda.nccl.version()
  out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
  tdist.destroy_process_group()
  return out


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("-n", type=int, default=2, help="processes (GPUs) when this script launches itself")
  ap.add_argument("--size-mib", type=int, default=256)
  ap.add_argument("--warmup", type=int, default=5)
  ap.add_argument("--runs", type=int, default=20)
  ap.add_argument("--no-torch", action="store_true")
  ap.add_argument("--json", default=None, help="also write rank 0's JSON here")
  args = ap.parse_args()
  if "RANK" not in os.environ:
    from tinygrad.distributed.launch import launch
    return launch(args.n, sys.argv, timeout=900)
  numel = args.size_mib * 2**20 // 4
  ours, world, version = bench_ours(numel, args.warmup, args.runs)
  ours["nccl"] = version
  result: dict[str, Any] = {"bench": "allreduce_nccl", "size_mib": args.size_mib, "world_size": world, "dtype": "float32", "ours": ours}
  if not args.no_torch:
    try:
      result["torch"] = bench_torch(numel, args.warmup, args.runs)
      result["ours_vs_torch"] = result["torch"]["median_s"] / ours["median_s"]  # bandwidth ratio: >= 0.95 is the target
      result["ours_jit_vs_torch"] = result["torch"]["median_s"] / ours["jit"]["median_s"]
    except ImportError as e: result["torch"] = f"not measured: {e}"
  if int(os.environ["RANK"]) == 0:
    print(json.dumps(result), flush=True)
    if args.json:
      with open(args.json, "w") as f: json.dump(result, f)
  import tinygrad.distributed as dist
  dist.destroy()
  return 0


if __name__ == "__main__": sys.exit(main())
