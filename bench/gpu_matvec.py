"""Benchmark: the matrix-vector products of a batch-1 LLM decode step (bench/llm_decode.py's synthetic models), built by
tinygrad.llm's own `linear` (the norm's weight and factor fused in where the model fuses them), under our heuristics' opts and
a sweep of alternatives, against torch's F.linear in float16 on the same shapes.

  DEV=CUDA python3 bench/gpu_matvec.py                 # both models' shapes
  DEV=CUDA python3 bench/gpu_matvec.py --model llama1b --no-sweep

Each launch reads a different copy of the weight (copies totalling >= 256 MB, past the 50 MB L2), as a decode step does: every
layer's weights are cold. The --launches launches are one device graph (torch: one captured CUDA graph), as in a decode step:
launched one by one from Python, a launch costs ~12 us of host time, more than most of these kernels take. A timing is the
median over --runs replays of the graph between CUDA events, divided by --launches. GB/s counts the weight's bytes (the vector
and the output are a rounding error). Prints JSON: per shape the heuristics' opts and figures, the sweep's fastest, and torch's.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
from typing import Any

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
COLD_BYTES = 256 << 20

# (name, out, in, type, input): "norm" the model's fused RMSNorm (x * norm weight in, a per-row factor out); "plain" a stored vector
SHAPES = {
  "llama1b": [("qkv", 3072, 2048, "F16", "norm"), ("o", 2048, 2048, "F16", "plain"), ("gate_up", 16384, 2048, "F16", "norm"),
              ("down", 2048, 8192, "F16", "plain"), ("lm_head", 128256, 2048, "F16", "plain")],
  "smollm2": [("qkv", 960, 576, "Q4_1", "norm"), ("o", 576, 576, "Q4_1", "plain"), ("gate_up", 3072, 576, "Q4_1", "norm"),
              ("down", 576, 1536, "Q4_1", "plain"), ("lm_head", 49152, 576, "Q8_0", "plain")],
}


def build(n_out: int, n_in: int, type_name: str, kind: str) -> tuple[Any, Any]:
  """The kernel's AST and its buffers, from the model's own code."""
  import numpy as np
  from tinygrad import Tensor, dtypes
  from tinygrad.llm.model import QuantWeight, linear
  from tinygrad.llm.quants import BLOCK_SIZES, NATIVE_DTYPES
  block, nbytes = BLOCK_SIZES[type_name]
  rng = np.random.default_rng(0)
  # as the model reads them (model._read_weight): F16/F32 as their own dtype, anything else as its bytes
  if (native := NATIVE_DTYPES.get(type_name)) is not None:
    raw = Tensor(rng.standard_normal(n_out * n_in, dtype=np.float32)).cast(native)
  else: raw = Tensor(rng.integers(0, 255, n_out * n_in // block * nbytes, dtype=np.uint8))
  w = QuantWeight(raw.realize(), type_name, (n_out, n_in))
  x = Tensor.empty(1, 1, n_in, dtype=dtypes.float32).realize()
  if kind == "norm": out = linear(x * Tensor.empty(n_in).realize(), w, scale=Tensor.empty(1, 1, 1).realize())
  else: out = linear(x, w)
  from tinygrad.engine.realize import buffer_of
  (item,) = out.schedule()
  return item.ast, [buffer_of(b) for b in item.bufs]


def variants(ast: Any, heuristics: list[Any]) -> list[list[Any]]:
  """Alternatives to the heuristics' opts: the same structure (vector UNROLL, GROUP lanes, UNROLL the rest) at other lane
  counts and unrolls, and several rows per thread (UPCAST the output loop), which shares each load of the vector between them."""
  from tinygrad.codegen.opt import Opt, OptOps, ranges_of
  outs = [r for r in ranges_of(ast).values() if r.arg[1] == "global"]
  out_axis = outs[0].arg[0] if outs else None
  found = [heuristics]
  base = [o for o in heuristics if o.op is not OptOps.UPCAST]  # without the heuristics' rows per lane
  group = next((o for o in base if o.op is OptOps.GROUP), None)
  found.append(base)
  if group is not None and base[0].op is OptOps.UNROLL and base[0].axis == group.axis:  # float rows: v, g, u
    v, size = base[0].amount, ranges_of(ast)[group.axis].src[0].arg
    for g, u in itertools.product((16, 32, 64, 128, 256), (1, 2, 4, 8)):
      if size % (v * g * u): continue
      base = [Opt(OptOps.UNROLL, group.axis, v), Opt(OptOps.GROUP, group.axis, g)] + ([Opt(OptOps.UNROLL, group.axis, u)] if u > 1 else [])
      found.append(base)
  if out_axis is not None:
    found += [[Opt(OptOps.UPCAST, out_axis, k), *opts] for opts in list(found[1:]) for k in (2, 4)]
  unique: dict[tuple, list[Any]] = {}
  for opts in found: unique.setdefault(tuple(opts), opts)
  return list(unique.values())


def time_graph(replay: Any, launches: int, runs: int) -> float:
  """Seconds per launch: replay() runs `launches` launches; the median of `runs` replays between CUDA events."""
  from gpu_common import our_device
  from tinygrad_backend_nv.runtime import Timer
  dev = our_device()
  replay()
  dev.synchronize()
  times = []
  for _ in range(runs):
    with Timer(dev) as t: replay()
    times.append(t.seconds / launches)
  return statistics.median(times)


def ours(ast: Any, bufs: list[Any], opts: list[Any], copies: list[Any], launches: int, runs: int) -> float:
  from tinygrad import Device
  from tinygrad.codegen.program import get_program
  from tinygrad.engine.realize import CompiledRunner
  dev = Device[Device.DEFAULT]
  renderer = Device.renderer(Device.DEFAULT)
  runner = CompiledRunner(get_program(ast, renderer, opts), dev, renderer)
  w_index = max(range(len(bufs)), key=lambda i: bufs[i].nbytes)
  graph = dev.graph([runner.launch([copies[i % len(copies)] if j == w_index else b for j, b in enumerate(bufs)]) for i in range(launches)])
  return time_graph(graph, launches, runs)


def torch_linear(n_out: int, n_in: int, launches: int, runs: int) -> float:
  import torch
  import torch.nn.functional as F
  n = max(1, COLD_BYTES // (n_out * n_in * 2))
  ws = [torch.randn(n_out, n_in, device="cuda", dtype=torch.float16) for _ in range(n)]
  x = torch.randn(1, n_in, device="cuda", dtype=torch.float16)
  for i in range(3): F.linear(x, ws[i % n])  # warm up (cuBLAS picks its kernel) outside the capture
  torch.cuda.synchronize()
  graph = torch.cuda.CUDAGraph()
  with torch.cuda.graph(graph):
    for i in range(launches): F.linear(x, ws[i % n])
  graph.replay()
  torch.cuda.synchronize()
  times = []
  for _ in range(runs):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    times.append(start.elapsed_time(end) * 1e-3 / launches)
  del graph, ws
  return statistics.median(times)


def main() -> None:
  from gpu_common import emit, header, log
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--model", choices=sorted(SHAPES), action="append", help="whose shapes (default: all)")
  ap.add_argument("--no-sweep", action="store_true", help="the heuristics' opts only")
  ap.add_argument("--launches", type=int, default=40)
  ap.add_argument("--runs", type=int, default=5)
  args = ap.parse_args()
  from tinygrad import Device
  from tinygrad.codegen.opt import KernelOptError
  from tinygrad.codegen.program import default_opts
  from tinygrad.device.runtime import Buffer
  renderer = Device.renderer(Device.DEFAULT)
  results = []
  for model in args.model or sorted(SHAPES):
    for name, n_out, n_in, type_name, kind in SHAPES[model]:
      ast, bufs = build(n_out, n_in, type_name, kind)
      for b in bufs: b.ensure_allocated()
      w = max(bufs, key=lambda b: b.nbytes)
      copies = [w] + [Buffer(w.device, w.size, w.dtype).ensure_allocated() for _ in range(max(0, COLD_BYTES // w.nbytes))]
      heur = default_opts(ast, renderer)
      timed = []
      for opts in (variants(ast, heur) if not args.no_sweep else [heur]):
        try: timed.append((ours(ast, bufs, opts, copies, args.launches, args.runs), opts))
        except (KernelOptError, RuntimeError) as e: log(f"{model} {name} {opts}: {type(e).__name__}: {e}")
      t_heur = next(t for t, o in timed if o == heur)
      t_best, best = min(timed, key=lambda x: x[0])
      t_torch = torch_linear(n_out, n_in, args.launches, args.runs) if type_name == "F16" else None
      gbs = lambda t, nbytes=w.nbytes: round(nbytes / t / 1e9, 1)  # noqa: E731
      r = {"model": model, "matvec": name, "shape": [n_out, n_in], "type": type_name, "input": kind, "weight_mb": round(w.nbytes / 1e6, 2),
           "heuristics": {"opts": repr(heur), "us": round(t_heur * 1e6, 2), "gb_s": gbs(t_heur)},
           "best": {"opts": repr(best), "us": round(t_best * 1e6, 2), "gb_s": gbs(t_best)},
           "torch_f16_linear": {"us": round(t_torch * 1e6, 2), "gb_s": gbs(t_torch)} if t_torch else None,
           "sweep": sorted(((round(t * 1e6, 2), repr(o)) for t, o in timed))[:8]}
      log(f"{model} {name}: heuristics {r['heuristics']['us']} us ({r['heuristics']['gb_s']} GB/s), best {r['best']['us']} us "
          f"{r['best']['opts']}, torch {r['torch_f16_linear']}")
      results.append(r)
      del copies
  emit({"benchmark": "gpu_matvec", **header(), "cold_bytes": COLD_BYTES, "launches": args.launches, "results": results})


if __name__ == "__main__": main()
