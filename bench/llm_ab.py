"""A/B settings on one tinygrad.llm decode step, in one process: same model, same weights, variants interleaved round by round.

  DEV=CUDA python3 bench/llm_ab.py --synthetic llama1b '{"REDUCE_WARPS":0}' '{"REDUCE_WARPS":16}'

Each variant (a JSON dict of settings: ContextVars of core, a backend or tinygrad.llm) gets its own decode step: captured and
compiled under those settings (the in-memory runner cache and the layers' recordings are cleared per variant: their keys hold
the AST and the opts' settings, not a renderer's or the scheduler's own, so a second variant would otherwise run the first one's
kernels), then --tokens greedy tokens are decoded under it, which must equal the first variant's. The steps are timed --rounds
times each, interleaved (--steps steps queued back to back per timing, between device syncs). Prints a line per variant (best,
all, the kernels its step launches) and JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("variants", nargs="+", help='settings per variant, as JSON: \'{"NAME": value, ...}\' ({} for the defaults)')
  from llm_decode import add_model_args
  add_model_args(ap)
  ap.add_argument("--rounds", type=int, default=5)
  ap.add_argument("--steps", type=int, default=100)
  ap.add_argument("--tokens", type=int, default=24, help="greedy tokens each variant decodes (compared with the first's)")
  ap.add_argument("--position", type=int, default=0, help="decode from this cache position instead of the prompt's end (the "
                  "positions between hold zeros: a step's time at depth; the variants' tokens still compared)")
  ap.add_argument("--max-context", type=int, default=1024)
  ap.add_argument("--temperature", type=float, default=0.0, help="sample with this temperature (seed 0) instead of greedily: "
                  "the temperature draw's step (top-k and top-p off)")
  args = ap.parse_args()
  variants = [json.loads(v) for v in args.variants]

  from llm_decode import resolve
  from tinygrad import Device, dtypes
  from tinygrad.engine import realize
  from tinygrad.helpers import Context
  from tinygrad.llm.engine import LLM, SamplingParams
  llm = LLM.load(resolve(argparse.Namespace(model=args.model, synthetic=args.synthetic, tokens=0)), max_context=args.max_context,
                 cache_dtype=dtypes.float16)
  ids = llm.chat_ids([{"role": "user", "content": "Write a short story about a robot who learns to paint."}])
  llm.prefill(ids)
  pos = max(len(ids), args.position)
  if pos + args.tokens + 7 > llm.model.max_context: raise SystemExit(f"--position {pos}: past --max-context {args.max_context} (with --tokens)")
  attn_len = llm.model.attn_len(pos + 1)
  dev = Device[Device.DEFAULT]
  steps, tokens = [], []
  params = SamplingParams(temperature=args.temperature, ignore_eos=True)
  knobs = llm._knobs(params)
  for v in variants:
    with Context(**v):
      llm._step_jits.clear()
      llm._ring_holds = None
      realize._runner_cache.clear()
      # the layers' recorded kernels (tinygrad/reuse.py) too: their key holds the opts' settings, not the scheduler's
      if llm.model._reuse is not None: llm.model._reuse.recordings.clear()
      tokens.append(llm._decode_batch(7, pos, args.tokens, params))  # compiles and captures under v
      steps.append(llm._step_for(attn_len, llm._sampling_mode(params)))
      for _ in range(3): steps[-1](llm._v_start.bind(pos), knobs)
  times: list[list[float]] = [[] for _ in variants]
  for _ in range(args.rounds):
    for i, step in enumerate(steps):
      dev.synchronize()
      t0 = time.perf_counter()
      for _ in range(args.steps): step(llm._v_start.bind(pos), knobs)
      dev.synchronize()
      times[i].append(round((time.perf_counter() - t0) / args.steps * 1e6, 1))
  kernels = [len(getattr(step, "captured", ())) for step in steps]
  for v, t, k in zip(variants, times, kernels):
    print(f"{json.dumps(v):48s} best {min(t):8.1f} us/step = {1e6 / min(t):8.1f} tok/s  {k} kernels  all {t}", file=sys.stderr)
  print(json.dumps({"benchmark": "llm_ab", "model": os.path.basename(llm.path) if hasattr(llm, "path") else args.synthetic or args.model,
                    "device": Device.DEFAULT, "environment": _settings_from_environment(), "temperature": args.temperature, "position": pos, "attn_len": attn_len, "tokens_equal": all(t == tokens[0] for t in tokens),
                    "variants": [{"settings": v, "us_per_step": t, "best_tok_s": round(1e6 / min(t), 1), "kernels": k,
                                  "first_token_differing": _first_difference(tok, tokens[0])}
                                 for v, t, k, tok in zip(variants, times, kernels, tokens)]}))


def _settings_from_environment() -> dict:
  """The settings the environment gave other values than their defaults: those read while the model loads (DECODE_ATTN_O,
  DECODE_FFN, ...) apply to every variant, so the JSON says which run they were."""
  from tinygrad.helpers import ContextVar
  return {k: v.initial for k, v in sorted(ContextVar._registry.items()) if k != "DEV" and k in os.environ and v.initial != v.default}


def _first_difference(a: list[int], b: list[int]) -> int | None:
  """The index of the first greedy token where a variant's differs from the first variant's (None: all equal): a numerics
  change that flips a near-tie shows as a late index, a broken kernel as an early one."""
  return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))


if __name__ == "__main__": main()
