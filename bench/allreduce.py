"""All-reduce bandwidth: a float32 buffer (256 MiB by default) on each of N devices summed into every device, with our ring
and naive all-reduces (schedule/multi.py) and, when torch is importable, torch.distributed from the same run (gloo for CPU
devices, NCCL for CUDA/NV ones; one process per device). Prints one JSON object on stdout, progress on stderr.

  uv run python bench/allreduce.py --devices CPU:0,CPU:1
  PYTHONPATH=packages/core/src:packages/backend-cpu/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_cpu.plugin \
    python3 bench/allreduce.py --devices CPU:0,CPU:1,CPU:2,CPU:3 --size-mib 64
  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA \
    python3 bench/allreduce.py --devices CUDA:0,CUDA:1

Ours runs the lowered all-reduce's kernels and copies directly (no Python graph building per run: like a TinyJit replay),
then synchronizes every device. algbw = bytes / time; busbw = algbw * 2(n-1)/n, the traffic per device of an optimal
all-reduce (NCCL's convention), comparable across device counts. Our copies between devices go through host memory.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from typing import Any

# NVLink multicast stays off (a program using it can take a shared host's GPUs out of service): set before torch loads
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"


def log(*args: Any) -> None: print(*args, file=sys.stderr, flush=True)


def bandwidth(nbytes: int, seconds: float, n: int) -> dict[str, float]:
  algbw = nbytes / seconds / 1e9
  return {"median_s": seconds, "algbw_gbs": algbw, "busbw_gbs": algbw * 2 * (n - 1) / n}


def bench_ours(devices: list[str], numel: int, mode: str, warmup: int, runs: int) -> dict[str, Any]:
  import numpy as np
  from tinygrad import Device, Tensor
  from tinygrad.engine.realize import buffer_of, lower_schedule, split_policy
  from tinygrad.helpers import Context
  from tinygrad.schedule.kernelize import create_schedule
  from tinygrad.schedule.multi import allreduce
  from tinygrad.uop.ops import Ops
  # device i holds i+1 everywhere: the sum is n(n+1)/2
  parts = [Tensor.full((numel,), float(i + 1), device=d).contiguous().realize() for i, d in enumerate(devices)]
  if mode == "nccl": return bench_nccl_inprocess(devices, parts, numel, warmup, runs)
  with Context(ALLREDUCE=mode): outs = allreduce(Ops.ADD, [p.uop for p in parts])
  items, becomes = create_schedule(outs, split_policy())
  exec_items = lower_schedule(items)
  log(f"ours {mode}: {sum(ei.kind == 'copy' for ei, _ in exec_items)} copies, {sum(ei.kind == 'kernel' for ei, _ in exec_items)} kernels")

  def run() -> float:
    for d in devices: Device[d].synchronize()
    st = time.perf_counter()
    for ei, var_vals in exec_items: ei.run(var_vals)
    for d in devices: Device[d].synchronize()
    return time.perf_counter() - st

  for _ in range(warmup): run()
  times = [run() for _ in range(runs)]
  want = len(devices) * (len(devices) + 1) / 2
  ok = True
  for out in outs:
    buf = buffer_of(becomes[out].base)
    got = np.frombuffer(buf.as_bytes(), dtype=np.float32)
    ok = ok and bool((got == want).all())
  return {**bandwidth(numel * 4, statistics.median(times), len(devices)), "times_s": times, "correct": ok}


def bench_nccl_inprocess(devices: list[str], parts: list[Any], numel: int, warmup: int, runs: int) -> dict[str, Any]:
  """The same all-reduce through NCCL inside this process (one communicator per GPU, ncclCommInitAll; backend-nv)."""
  import numpy as np
  from tinygrad import Device, dtypes
  from tinygrad.device.runtime import Buffer
  from tinygrad.engine.realize import buffer_of
  from tinygrad_backend_nv.nccl import NCCLClique
  ins = [buffer_of(p.uop.base) for p in parts]
  outs = [Buffer(d, numel, dtypes.float32).ensure_allocated() for d in devices]
  clique = NCCLClique([Device[d] for d in devices])

  def run() -> float:
    for d in devices: Device[d].synchronize()
    st = time.perf_counter()
    clique.all_reduce(outs, ins)
    for d in devices: Device[d].synchronize()
    return time.perf_counter() - st

  for _ in range(warmup): run()
  times = [run() for _ in range(runs)]
  want = len(devices) * (len(devices) + 1) / 2
  ok = all(bool((np.frombuffer(b.as_bytes(), dtype=np.float32) == want).all()) for b in outs)
  clique.close()
  return {**bandwidth(numel * 4, statistics.median(times), len(devices)), "times_s": times, "correct": ok}


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _torch_worker(rank: int, world: int, port: int, backend: str, numel: int, warmup: int, runs: int, queue: Any) -> None:
  import torch
  import torch.distributed as dist
  dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
  cuda = backend == "nccl"
  if cuda: torch.cuda.set_device(rank)
  x = torch.full((numel,), float(rank + 1), dtype=torch.float32, device=f"cuda:{rank}" if cuda else "cpu")
  times = []
  for i in range(warmup + runs):
    y = x.clone()
    if cuda: torch.cuda.synchronize()
    dist.barrier()
    st = time.perf_counter()
    dist.all_reduce(y)
    if cuda: torch.cuda.synchronize()
    if i >= warmup: times.append(time.perf_counter() - st)
  ok = bool((y == world * (world + 1) / 2).all().item())
  queue.put((rank, times, ok))
  dist.destroy_process_group()


def bench_torch(devices: list[str], numel: int, warmup: int, runs: int) -> dict[str, Any]:
  try:
    import torch
    import torch.multiprocessing as mp
  except ImportError as e:
    return {"skipped": f"torch is not importable: {e}"}
  kind = devices[0].split(":")[0].upper()
  backend = "nccl" if kind in ("CUDA", "NV") else "gloo"
  if backend == "nccl" and torch.cuda.device_count() < len(devices):
    return {"skipped": f"torch sees {torch.cuda.device_count()} CUDA devices, {len(devices)} needed"}
  ctx = mp.get_context("spawn")
  queue = ctx.Queue()
  port = _free_port()
  procs = [ctx.Process(target=_torch_worker, args=(r, len(devices), port, backend, numel, warmup, runs, queue)) for r in range(len(devices))]
  for p in procs: p.start()
  results = [queue.get(timeout=1800) for _ in procs]
  for p in procs: p.join()
  # an all-reduce finishes when its slowest rank does
  per_run = [max(r[1][i] for r in results) for i in range(runs)]
  return {**bandwidth(numel * 4, statistics.median(per_run), len(devices)), "times_s": per_run, "backend": backend,
          "version": torch.__version__, "correct": all(r[2] for r in results)}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--devices", default="CPU:0,CPU:1", help="comma-separated device instances, e.g. CPU:0,CPU:1 or CUDA:0,CUDA:1")
  ap.add_argument("--size-mib", type=float, default=256.0, help="size of the float32 buffer on each device")
  ap.add_argument("--modes", default="ring,naive", help="which of our all-reduces to run (ring, naive; nccl: NCCL in-process, CUDA only)")
  ap.add_argument("--warmup", type=int, default=1)
  ap.add_argument("--runs", type=int, default=5)
  ap.add_argument("--no-torch", action="store_true", help="skip the torch.distributed figure")
  args = ap.parse_args()
  from tinygrad import Device
  devices = [Device.canonicalize(d.strip()) for d in args.devices.split(",") if d.strip()]
  if len(devices) < 2: raise SystemExit("--devices needs at least two device instances")
  numel = int(args.size_mib * 2**20) // 4
  result: dict[str, Any] = {"bench": "allreduce", "devices": devices, "n": len(devices), "dtype": "float32", "size_mib": numel * 4 / 2**20,
                            "bytes": numel * 4, "warmup": args.warmup, "runs": args.runs, "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                            "renderer": Device.renderer(devices[0]).name, "ours": {}}
  for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
    log(f"ours {mode} on {devices}, {result['size_mib']:.0f} MiB ...")
    result["ours"][mode] = bench_ours(devices, numel, mode, args.warmup, args.runs)
    log(f"  {result['ours'][mode]['median_s'] * 1e3:.1f} ms, busbw {result['ours'][mode]['busbw_gbs']:.2f} GB/s")
  if not args.no_torch:
    log("torch.distributed ...")
    result["torch"] = bench_torch(devices, numel, args.warmup, args.runs)
    if "median_s" in result["torch"]: log(f"  {result['torch']['median_s'] * 1e3:.1f} ms, busbw {result['torch']['busbw_gbs']:.2f} GB/s")
  print(json.dumps(result), flush=True)


if __name__ == "__main__":
  main()
