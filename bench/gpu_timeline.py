"""Where a decode step's time goes between its kernels: block timelines of one captured tinygrad.llm step on CUDA (sm_90+).

  DEV=CUDA python3 bench/gpu_timeline.py --synthetic llama1b [--settings '{"STREAM_LOADS":0}'] [--steps 5]

With KERNEL_TIMELINE=1 (set here) every generated kernel's blocks stamp %globaltimer when they start, when their grid wait
returns and when they end (backend-nv timeline.py). For each launch of the step, in order: `wait` (us from the end of the launch
before to this one's first block past its wait: the grid dependency's latency), `run` (to its median block's end), `tail` (to its
last block's end), `span` (from the end of the launch before to its own: its share of the step). Prints those per kernel, summed
and averaged over its launches, for the median step of --steps; JSON (every step's per-kernel table, the median step's launches)
on stdout. The stamps, the block-end barrier and the records cost time in every kernel: compare timelines with timelines, not
with llm_ab.py's plain steps.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  from llm_decode import add_model_args
  add_model_args(ap)
  ap.add_argument("--settings", default="{}", help="ContextVars for the step, as JSON")
  ap.add_argument("--steps", type=int, default=5, help="steps recorded one at a time (the median one is printed)")
  args = ap.parse_args()
  os.environ["KERNEL_TIMELINE"] = "1"  # before tinygrad reads its settings

  from llm_decode import resolve
  from tinygrad import Device, dtypes
  from tinygrad.helpers import Context
  from tinygrad.llm.engine import LLM, SamplingParams
  from tinygrad_backend_nv import timeline
  if not Device.DEFAULT.startswith("CUDA"): sys.exit(f"gpu_timeline.py runs on the CUDA device (DEV=CUDA), not {Device.DEFAULT}")
  with Context(**json.loads(args.settings)):
    llm = LLM.load(resolve(argparse.Namespace(model=args.model, synthetic=args.synthetic, tokens=0)), max_context=1024,
                   cache_dtype=dtypes.float16)
    ids = llm.chat_ids([{"role": "user", "content": "Write a short story about a robot who learns to paint."}])
    llm.prefill(ids)
    pos = len(ids)
    llm._decode_batch(7, pos, 8, SamplingParams(ignore_eos=True))  # compiles and captures the step
    step = llm._step_for(llm.model.attn_len(pos + 1), "greedy")
    dev = Device[Device.DEFAULT]
    for _ in range(3): step(llm._v_start.bind(pos), [])
    dev.synchronize()
    steps = []
    with timeline.Timeline(dev) as tl:
      names = {timeline.kernel_id(p.name): p.name for p in list(timeline._modules)}
      regs = {p.name: timeline.registers(p) for p in list(timeline._modules)}
      for _ in range(args.steps):
        tl.reset()
        step(llm._v_start.bind(pos), [])
        dev.synchronize()
        seq = timeline.launches(tl.records(), names)
        steps.append(((seq[-1].last_end - seq[0].first_start) / 1e3 if seq else 0.0, seq))
  if not steps or not steps[0][1]: sys.exit("no kernel recorded a timeline (kernels rendered without KERNEL_TIMELINE, or not sm_90+)")
  lines, out = report(steps, regs)
  print("\n".join(lines), file=sys.stderr)
  print(json.dumps({"benchmark": "gpu_timeline", "model": args.synthetic or args.model, "device": Device.DEFAULT,
                    "settings": json.loads(args.settings), **out}))


def report(steps: list[tuple[float, list]], regs: dict[str, int] | None = None) -> tuple[list[str], dict]:
  """(text lines, JSON fields) for recorded steps: (span in us, their launches) each; the median step's table. regs: registers a
  thread by kernel name (with the stamps: they may differ from the plain kernel's by a few)."""
  from tinygrad_backend_nv import timeline
  ordered = sorted(steps, key=lambda s: s[0])
  span, seq = ordered[len(ordered) // 2]
  rows = timeline.phases(seq)
  table = [{**r, "regs": (regs or {}).get(r["name"])} for r in timeline.by_kernel(rows)]
  waits, tails = sum(r["wait"] for r in rows), sum(r["tail"] for r in rows)
  lines = [f"step {span:.1f} us (median of {[round(s[0], 1) for s in steps]}), {len(seq)} launches",
           f"{'kernel':34s} {'n':>3s} {'blocks':>6s} {'span':>8s} {'wait':>6s} {'run':>7s} {'tail':>6s} {'record':>6s} {'spread':>6s} {'regs':>4s}  (us; span summed, the rest means)"]
  lines += [f"{r['name'][:34]:34s} {r['launches']:3d} {r['blocks']:6d} {r['span_total']:8.1f} {r['wait_mean']:6.2f} {r['run_mean']:7.2f} "
            f"{r['tail_mean']:6.2f} {r['record_mean']:6.2f} {r['release_spread_mean']:6.2f} {r['regs'] or 0:4d}" for r in table]
  lines.append(f"summed over the step: wait {waits:.1f} us, tail {tails:.1f} us, the last blocks' records {sum(r['record'] for r in rows):.1f} us")
  return lines, {"step_us": [round(s[0], 1) for s in steps], "median_step_us": round(span, 1), "wait_total_us": round(waits, 1),
                 "tail_total_us": round(tails, 1), "by_kernel": table,
                 "launches": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in rows]}

if __name__ == "__main__": main()
