"""Where a generation's decode time goes besides the steps, on the GPU: the ring's copy in and the first step's host call (the
GPU idles behind both), the later calls (queued behind the GPU's work) and the wait for the readback, per trial, as JSON.

  DEV=CUDA python3 bench/llm_host_gaps.py --synthetic llama1b --tokens 64 [--split]

Two untimed generations of the same length first capture every attention span's step; then each trial prefills the benchmark
prompt, samples its first token and runs the engine's decode batch by hand (LLM._decode_batch's steps), timing each piece.
--split also times, inside each call, the device graph's node updates (and counts them) and its launch, by wrapping the graph
class's `update` and `__call__`; the rest of a call is the JIT's own Python.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from array import array

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
  from llm_decode import add_model_args, resolve
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  add_model_args(ap)
  ap.add_argument("--tokens", type=int, default=64)
  ap.add_argument("--trials", type=int, default=3)
  ap.add_argument("--split", action="store_true", help="split each call into node updates, graph launch and the rest")
  args = ap.parse_args()

  from tinygrad import Device, dtypes
  from tinygrad.engine.realize import buffer_of
  from tinygrad.llm.__main__ import BENCHMARK_MESSAGES, benchmark
  from tinygrad.llm.engine import LLM, RING, SamplingParams
  llm = LLM.load(resolve(args), max_context=1024, cache_dtype=dtypes.float16)
  n = args.tokens
  warm = [benchmark(llm, n)["decode_tok_s"] for _ in range(2)]
  split = time_graph_calls(llm) if args.split else None
  ids, params = llm.chat_ids(BENCHMARK_MESSAGES), SamplingParams(ignore_eos=True)
  trials = []
  for _ in range(args.trials):
    llm.cached = []
    logits, _ = llm.prefill(ids)
    tok = llm.sample(logits, params, len(ids))
    Device[Device.DEFAULT].synchronize()
    pos = len(ids)
    t0 = time.perf_counter()
    ring = array("i", bytes(4 * RING))
    ring[pos % RING] = tok
    buffer_of(llm._ring.uop.base).copyin(memoryview(ring).cast("B"))
    t1 = time.perf_counter()
    mode, knobs = llm._sampling_mode(params), llm._knobs(params)
    calls, parts = [], []
    for p in range(pos, pos + n - 1):
      if split is not None: split.update(updates_s=0.0, updates=0, launch_s=0.0)
      a = time.perf_counter()
      llm._step_for(llm.model.attn_len(p + 1), mode)(llm._v_start.bind(p), knobs)
      calls.append(time.perf_counter() - a)
      if split is not None: parts.append(dict(split))
    t2 = time.perf_counter()
    llm._ring.data()
    t3 = time.perf_counter()
    us = lambda s: round(s * 1e6, 1)  # noqa: E731
    trials.append({"steps": n - 1, "total_ms": round((t3 - t0) * 1e3, 3), "tok_s": round((n - 1) / (t3 - t0), 1), "copyin_us": us(t1 - t0),
                   "first_call_us": us(calls[0]), "later_calls_mean_us": us(sum(calls[1:]) / max(len(calls) - 1, 1)),
                   "enqueue_ms": round((t2 - t1) * 1e3, 3), "readback_wait_ms": round((t3 - t2) * 1e3, 3)})
    if parts:
      later = parts[1:] or parts
      mean = lambda k, later=later: sum(x[k] for x in later) / len(later)  # noqa: E731
      trials[-1]["first_call_split"] = {"updates": parts[0]["updates"], "updates_us": us(parts[0]["updates_s"]), "launch_us": us(parts[0]["launch_s"])}
      trials[-1]["later_calls_split"] = {"updates": round(mean("updates"), 1), "updates_us": us(mean("updates_s")), "launch_us": us(mean("launch_s"))}
  print(json.dumps({"benchmark": "llm_host_gaps", "model": llm.name, "device": Device.DEFAULT, "tokens": n, "prompt_tokens": len(ids),
                    "warm_decode_tok_s": warm, "trials": trials}, indent=1))


def time_graph_calls(llm) -> dict | None:
  """Wrap the device graph class of the decode steps' captures so that each call's node updates and launch are timed into the
  returned dict (None where the steps replay without a device graph)."""
  graphs = [g.graph for j in llm._step_jits.values() if (g := getattr(j, "graph", None)) is not None]
  if not graphs: return None
  acc: dict = {"updates_s": 0.0, "updates": 0, "launch_s": 0.0}
  cls = type(graphs[0])
  update, launch = cls.update, cls.__call__

  def timed_update(self, i, lc):
    a = time.perf_counter()
    try: return update(self, i, lc)
    finally: acc["updates_s"] += time.perf_counter() - a; acc["updates"] += 1

  def timed_launch(self):
    a = time.perf_counter()
    try: return launch(self)
    finally: acc["launch_s"] += time.perf_counter() - a

  cls.update, cls.__call__ = timed_update, timed_launch
  return acc


if __name__ == "__main__":
  main()
