"""A/B settings on tinygrad.llm prefill (prompt processing), in one process: same file, variants interleaved round by round.

  DEV=CUDA python3 bench/llm_pp_ab.py --synthetic llama1b '{"PREFILL_ATTENTION":0}' '{}'

Each variant (a JSON dict of settings: ContextVars of core, a backend or tinygrad.llm) loads its own LLM under those settings,
so its prefill captures, its layers' kernel recordings and its kernels are its own; every call of a variant runs under its
settings again. For each prompt length of --pp (the prompt's ids repeated, on an empty cache, as llama-bench's ppN): two untimed
prefills (compile, capture), the first greedy token, which must equal the first variant's, then --rounds rounds, variants in
alternating order, each the best of --reps prefills (prefill and the greedy pick of the first token, as bench/llm_decode.py's
pp figures). Across processes (and device calls) the same code's figures move by several percent: compare variants within one
run. Prints a line per round and JSON (tok/s, best of the rounds, per variant and length).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

PROMPT = "Write a short story about a robot who learns to paint."


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("variants", nargs="+", help='settings per variant, as JSON: \'{"NAME": value, ...}\' ({} for the defaults)')
  from llm_decode import add_model_args
  add_model_args(ap)
  ap.add_argument("--pp", default="64,512", help="prompt lengths, comma-separated (default 64,512)")
  ap.add_argument("--rounds", type=int, default=4)
  ap.add_argument("--reps", type=int, default=5, help="prefills a variant and length per round; the best counts")
  args = ap.parse_args()
  try: envs = [json.loads(v) for v in args.variants]
  except json.JSONDecodeError as e: ap.error(f"a variant is not JSON ({e}): write it as '{{\"NAME\": value}}'")
  if not all(isinstance(e, dict) for e in envs): ap.error("each variant is a JSON object of settings, e.g. '{\"PREFILL_ATTENTION\": 0}'")
  pp = [int(x) for x in args.pp.split(",")]

  from llm_decode import resolve
  from tinygrad import dtypes
  from tinygrad.helpers import Context
  from tinygrad.llm.engine import LLM, GenerationStats, SamplingParams
  path = resolve(argparse.Namespace(model=args.model, synthetic=args.synthetic, tokens=0))
  llms = []
  for env in envs:
    with Context(**env): llms.append(LLM.load(path, max_context=max(1024, 2 * max(pp)), cache_dtype=dtypes.float16))
  ids = llms[0].chat_ids([{"role": "user", "content": PROMPT}])

  def prefill(v: int, toks: list[int]) -> tuple[list[int], float]:
    """The first greedy token of `toks` on an empty cache under variant v, and the prefill's seconds."""
    llm = llms[v]
    with Context(**envs[v]):
      llm.cached, stats = [], GenerationStats()
      out = list(llm.generate(toks, max_new_tokens=1, params=SamplingParams(ignore_eos=True), stats=stats))
    return out, stats.prefill_s

  prompts = {p: (ids * (p // len(ids) + 1))[:p] for p in pp}
  first: dict[str, list[int]] = {}
  for p, toks in prompts.items():
    for v in range(len(envs)):
      for _ in range(2): out, _ = prefill(v, toks)
      first[f"pp{p}_{v}"] = out
      if out != first[f"pp{p}_0"]: print(f"variant {v} {envs[v]}: pp{p}'s first token {out} differs from variant 0's {first[f'pp{p}_0']}", file=sys.stderr)
  rounds = []
  for r in range(args.rounds):
    row = {}
    for p, toks in prompts.items():
      for v in (range(len(envs)) if r % 2 == 0 else reversed(range(len(envs)))):
        row[f"pp{p}_{v}"] = round(p / min(prefill(v, toks)[1] for _ in range(args.reps)), 1)
    rounds.append(row)
    print(f"round {r}: {row}", file=sys.stderr, flush=True)
  best = {k: max(row[k] for row in rounds) for k in rounds[0]}
  for v, env in enumerate(envs): print(f"variant {v} {env}: " + ", ".join(f"pp{p} {best[f'pp{p}_{v}']:,.0f} tok/s" for p in pp), file=sys.stderr)
  print(json.dumps({"bench": "llm_pp_ab", "model": os.path.basename(path), "device": os.environ.get("DEV", ""), "variants": envs,
                    "best_tok_s": best, "rounds": rounds, "first_token": first,
                    "same_first_token": all(first[f"pp{p}_{v}"] == first[f"pp{p}_0"] for p in pp for v in range(len(envs)))}))


if __name__ == "__main__":
  main()
