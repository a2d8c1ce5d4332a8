"""Profile one tinygrad.llm decode step kernel by kernel: where the time of a token goes.

  DEV=CUDA python3 bench/llm_profile.py --synthetic smollm2          # a model with random weights (bench/llm_decode.py writes it)
  uv run python bench/llm_profile.py --model path/to.gguf --src /tmp/kernels.txt

Loads the model, generates a few tokens (compiling and capturing the decode TinyJit), then times the captured decode step two
ways: replayed whole as the engine does (device graph where there is one; `step_ms`), and kernel by kernel, each launched alone
and waited for (`us`, best of `--repeat`: a floor of several microseconds for the smallest). On a device with graphs, each group
of kernels (by name) is also timed by its marginal cost: the step's graph (`graph_ms`) minus the graph without that group
(`graph_us`), what the group really costs a token. Prints JSON: the step time, the sum of the per-kernel times, and the kernels
grouped by name, slowest first, with launch sizes, opts and achieved bandwidth. `--src` writes the slowest kernels' sources.
`--prefill N`: the same for the captured prefill of one N-token chunk (a size of the engine's chunks: 16, 32, 64 on a CPU) at
position 0, instead of the decode step (`step_ms` is then the chunk's time).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from typing import Any

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  from llm_decode import add_model_args
  add_model_args(ap)
  ap.add_argument("--max-context", type=int, default=1024)
  ap.add_argument("--steps", type=int, default=50, help="decode steps to time whole (default 50)")
  ap.add_argument("--repeat", type=int, default=5, help="launches per kernel, the best is kept (default 5)")
  ap.add_argument("--top", type=int, default=25, help="kernel groups to list (default 25)")
  ap.add_argument("--no-ablate", action="store_true", help="skip timing the device graph without each group of kernels")
  ap.add_argument("--host-profile", action="store_true", help="cProfile --steps decode steps with sampling (stderr)")
  ap.add_argument("--src", default=None, help="write the sources of the --top slowest kernels to this file")
  ap.add_argument("--drop-sets", default=None, help='JSON list of lists of kernel-name parts, e.g. \'[["r_8_4_", "E_2_8_64"]]\': '
                  "also time the device graph without every kernel whose name contains one of a set's parts, per set")
  ap.add_argument("--prefill", type=int, default=0, help="profile the prefill of one chunk of this many tokens instead of a decode step")
  args = ap.parse_args()

  from llm_decode import resolve
  from tinygrad import Device, dtypes
  from tinygrad.llm.engine import LLM
  args.tokens = 0
  path = resolve(args)
  llm = LLM.load(path, max_context=args.max_context, cache_dtype=dtypes.float16)
  ids = llm.chat_ids([{"role": "user", "content": "Write a short story about a robot who learns to paint."}])
  llm.prefill(ids)  # no sampling: the tokens' values don't matter here (and the NULL device, which compiles only, has none)
  pos = len(ids)
  L = llm.model.attn_len(pos + 1)
  var_vals = {llm._v_start.arg[0]: pos}
  if args.prefill:  # one chunk of exactly that many tokens at position 0, as the engine runs it (its capture, replayed)
    if args.prefill not in llm.chunks: ap.error(f"--prefill {args.prefill}: the engine's chunk sizes here are {llm.chunks}")
    chunk, pos = (ids * (args.prefill // len(ids) + 1))[:args.prefill], 0
    L = llm.model.attn_len(args.prefill)
    def step() -> None: llm._run_chunk(chunk, 0)
    step()
    jit = llm._prefill_jits[(args.prefill, L)]
    var_vals = {llm._v_start.arg[0]: 0, llm._v_last[args.prefill].arg[0]: args.prefill - 1}
  else:
    jit = llm._step_for(L, "greedy")  # the engine's decode step: token from the device, the model, greedy sampling, the token back
    def step() -> None: jit(llm._v_start.bind(pos), [])
  for _ in range(3): step()  # compile, capture, and build the device graph
  dev = Device[Device.DEFAULT]

  # the whole step as the engine runs it, steps queued back to back
  dev.synchronize()
  t0 = time.perf_counter()
  for _ in range(args.steps): step()
  dev.synchronize()
  step_ms = (time.perf_counter() - t0) / args.steps * 1e3

  if args.host_profile:  # where the host's time per token goes: the engine's decode step, under cProfile
    import cProfile
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.steps): step()
    prof.disable()
    pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)

  # kernel by kernel, each alone
  groups: dict[str, dict[str, Any]] = defaultdict(lambda: {"count": 0, "us": 0.0, "bytes": 0})
  total_us, n_kernels, sources = 0.0, 0, {}
  for ei, vals in jit.captured:
    if ei.runner is None: continue
    for b in ei.bufs: b.ensure_allocated()
    best = min(ei.runner(ei.bufs, {**vals, **var_vals}, wait=True) or 0.0 for _ in range(args.repeat)) * 1e6
    spec = ei.runner.spec
    gs, ls = ei.runner.launch(ei.bufs, {**vals, **var_vals}).global_size, ei.runner.launch(ei.bufs, {**vals, **var_vals}).local_size
    g = groups[spec.name]
    g.update(count=g["count"] + 1, us=g["us"] + best, bytes=g["bytes"] + spec.estimated_mem, global_size=list(gs), local_size=list(ls),
             opts=" ".join(f"{o.op.name}({o.axis},{o.amount})" for o in spec.opts) or "-")
    sources[spec.name] = spec.src
    total_us += best
    n_kernels += 1
  # marginal cost inside the device graph: the step's graph without one group's kernels (their outputs go stale, which doesn't
  # change any launch); a kernel's cost in a graph is its own run plus the gap before the next, which timing it alone can't show
  graph_ms, dropped = None, {}
  if dev.graph is not None and not args.no_ablate:
    launches = [(ei.runner.spec.name, ei.runner.launch(ei.bufs, {**vals, **var_vals})) for ei, vals in jit.captured if ei.runner is not None]
    graph_ms = time_graph(dev, [lc for _, lc in launches], args.steps)
    for name, g in groups.items(): g["graph_us"] = round((graph_ms - time_graph(dev, [lc for n, lc in launches if n != name], args.steps)) * 1e3, 1)
    for parts in json.loads(args.drop_sets or "[]"):  # a set's joint marginal cost: not the sum of its groups' in a chain
      kept = [lc for n, lc in launches if not any(p in n for p in parts)]
      dropped[" ".join(parts)] = {"kernels": len(launches) - len(kept), "graph_us": round((graph_ms - time_graph(dev, kept, args.steps)) * 1e3, 1)}
      print(f"without {parts}: {dropped[' '.join(parts)]}", file=sys.stderr)
  ranked = sorted(groups.items(), key=lambda kv: -kv[1].get("graph_us", kv[1]["us"]))
  top = [{"name": name, **{k: (round(v, 2) if isinstance(v, float) else v) for k, v in g.items()},
          "us_each": round(g["us"] / g["count"], 2), "gb_s": round(g["bytes"] / max(g["us"], 1e-9) * 1e-3, 1)} for name, g in ranked[:args.top]]
  if args.src:
    with open(args.src, "w") as f:
      for name, g in ranked[:args.top]: f.write(f"// ==== {name}: {g['count']}x, {g['us']:.1f} us, {g['opts']}\n{sources[name]}\n")
  for t in top:
    print(f"{t.get('graph_us', float('nan')):8.1f} us in graph {t['us']:9.1f} us alone {t['count']:4d}x {t['us_each']:8.2f} {t['gb_s']:8.1f} GB/s  {t['name']:32s} g{t['global_size']} l{t['local_size']} {t['opts']}",
          file=sys.stderr)
  print(json.dumps({"benchmark": "llm_profile", "model": os.path.basename(path), "device": Device.DEFAULT, "prefill_chunk": args.prefill or None,
                    "position": pos, "attn_len": L,
                    "step_ms": round(step_ms, 3), "graph_ms": graph_ms and round(graph_ms, 3), "tok_s_model_only": round(1e3 / step_ms, 1), "kernels": n_kernels,
                    "kernel_sum_ms": round(total_us / 1e3, 3), "groups": len(groups), "top": top, "dropped_sets": dropped}))


def time_graph(dev: Any, launches: list[Any], n: int) -> float:
  """Milliseconds per run of a device graph of these launches (best of 3 batches of n runs)."""
  g = dev.graph(launches)
  g()
  dev.synchronize()
  best = float("inf")
  for _ in range(3):
    t0 = time.perf_counter()
    for _ in range(n): g()
    dev.synchronize()
    best = min(best, (time.perf_counter() - t0) / n * 1e3)
  return best


if __name__ == "__main__": main()
