"""Benchmark: where tinygrad.llm's time to first token goes -- cold (empty on-disk caches), warm on disk (a second process: compiled
binaries and lowered programs cached), and warm in memory (a second prompt in the same process).

  DEV=NULL:CUDA:sm_90 uv run python bench/llm_ttft.py --synthetic smollm2   # the host pipeline alone: NULL compiles, never runs
  DEV=CUDA python3 bench/llm_ttft.py --synthetic llama1b                    # the real thing on a GPU

Each case runs in a fresh process (as the CLI: compile worker and pool started before loading) with its own cache file. The
prompt is given to LLM.load (`ahead`): its kernels are built in the compile pool while the weights load (`ahead` in the output:
how many; AHEAD=0 turns it off, the path before it). `--ahead guess`: it isn't, as for a server or a script that doesn't pass it
(LLM.load then builds those of typical prompt lengths, AHEAD_GUESS). Cases:
  cold          an empty cache: every kernel lowered and compiled
  warm_disk     the same cache again: lowered programs and binaries from disk (engine/program_cache.py, Compiler.compile_cached)
  warm_binaries the same cache with PCACHE=0: binaries from disk, every kernel lowered again (what a warm start was before)
Phases (seconds): import, load (the GGUF file into device memory), first_token (prefill of the bench's chat prompt and the greedy
sample: TTFT = import + load + first_token), first_decode (the first decode step: its capture), second_prompt (another prompt in
the same process: prefill and sample from captures already made). Counts over the whole run: schedules made, kernel ASTs built,
kernels lowered here and compiled here (the compile pool's workers lower and compile in their own processes: `pool_kernels`),
program-cache hits and misses here, layers recorded and replayed (`layer_reuse`, tinygrad/reuse.py; REUSE=0 turns it off). On NULL there is no token to read back: the sample is computed, not read.
Prints one JSON object. No peer: llama.cpp's TTFT is in bench/llm_decode.py's figures. Not a test, no time asserts.
TTFT_PROFILE=DIR runs each case's process under cProfile and writes DIR/<case>.prof (its phases then include the profiler's cost).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

T0 = time.perf_counter()
BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
CASES = {"cold": {}, "warm_disk": {}, "warm_binaries": {"PCACHE": "0"}}


def counting() -> dict[str, Any]:
  """Counters wrapped around the pipeline's entry points (this process only)."""
  import tinygrad.tensor as tensor_mod
  from tinygrad import renderer
  from tinygrad.engine import realize
  from tinygrad.schedule import kernelize
  counts: dict[str, Any] = {"schedules": 0, "kernel_asts": 0, "lowered": 0, "compiled": 0, "pool_kernels": 0}
  def wrap(owner: Any, name: str, counter: str) -> None:
    real = getattr(owner, name)
    def counted(*args: Any, **kwargs: Any) -> Any:
      counts[counter] += 1
      return real(*args, **kwargs)
    setattr(owner, name, counted)
  wrap(tensor_mod, "create_schedule", "schedules")
  wrap(kernelize, "kernel_ast", "kernel_asts")
  wrap(realize, "get_program", "lowered")
  wrap(renderer, "offload", "compiled")  # Compiler.compile_cached compiles through it on a miss
  real_pool = realize._build_in_pool
  def pool(kernels: list) -> list:
    built = real_pool(kernels)
    counts["pool_kernels"] += sum(b is not None for b in built)
    return built
  realize._build_in_pool = pool
  return counts


def child(path: str, max_context: int) -> dict[str, Any]:
  counts = counting()
  from llm_decode import PROMPT
  from tinygrad import Device, dtypes
  from tinygrad.engine import realize
  from tinygrad.llm.engine import LLM
  from tinygrad.workers import prestart
  phases = {"import": time.perf_counter() - T0}
  prestart()  # as the CLI does
  t = time.perf_counter()
  # the prompt's kernels built in the compile pool while the weights load (AHEAD=0: not); --ahead guess: LLM.load isn't told the
  # prompt (a server, a script), and builds those of typical prompts (AHEAD_GUESS)
  told = os.environ.get("TTFT_AHEAD", "prompt") == "prompt"
  llm = LLM.load(path, max_context=max_context, cache_dtype=dtypes.float16, ahead=[{"role": "user", "content": PROMPT}] if told else None)
  phases["load"] = time.perf_counter() - t
  runs = Device[Device.DEFAULT].runs_kernels
  def first_token(ids: list[int]) -> None:
    logits, _ = llm.prefill(ids)
    tok = llm._greedy(logits)  # the engine's greedy sampler (LLM.sample reads it back with .item())
    if runs: int(tok.item())
  ids = llm.chat_ids([{"role": "user", "content": PROMPT}])
  t = time.perf_counter()
  first_token(ids)
  phases["first_token"] = time.perf_counter() - t
  kernels_first = len(realize._runner_cache)
  t, pos = time.perf_counter(), len(ids)
  llm._step_for(llm.model.attn_len(pos + 1), "greedy")(llm._v_start.bind(pos), [])  # the decode step LLM.generate runs next
  if runs: Device[Device.DEFAULT].synchronize()
  phases["first_decode"] = time.perf_counter() - t
  llm.cached = []  # a new conversation: nothing reused from the cache
  t = time.perf_counter()
  first_token(llm.chat_ids([{"role": "user", "content": PROMPT + " Make it a sad one."}]))
  phases["second_prompt"] = time.perf_counter() - t
  phases["ttft"] = phases["import"] + phases["load"] + phases["first_token"]
  return {"device": Device.DEFAULT, "prompt_tokens": len(ids), "phases_s": {k: round(v, 3) for k, v in phases.items()},
          "kernels_first_token": kernels_first, "kernels": len(realize._runner_cache), **counts,
          "program_cache": dict(program_cache_stats()), "layer_reuse": dict(reuse_stats()), "ahead": ahead_stats()}


def ahead_stats() -> dict[str, int]:
  """Kernels sent to the compile pool before the weights were read (tinygrad/engine/ahead.py, LLM.load's `ahead`)."""
  try:
    from tinygrad.engine import ahead
  except ImportError: return {}  # a tinygrad from before it
  return dict(ahead.stats)


def program_cache_stats() -> dict[str, int]:
  try:
    from tinygrad.engine import program_cache
  except ImportError: return {}  # a tinygrad from before the cache (PYTHONPATH=its source: the figures before it)
  return program_cache.stats


def reuse_stats() -> dict[str, int]:
  """Layers recorded (misses) and replayed from a recording (hits): tinygrad/reuse.py, REUSE=0 turns it off."""
  try:
    from tinygrad import reuse
  except ImportError: return {}  # a tinygrad from before it
  return reuse.stats


def run_case(path: str, max_context: int, cache: str, case: str, env: dict[str, str]) -> dict[str, Any]:
  out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path, str(max_context)], capture_output=True, text=True,
                       env={**os.environ, "COMPILE_WORKER": "1", "CACHEDB": cache, "TTFT_CASE": case, **env}, timeout=1800)
  last = next((line for line in reversed(out.stdout.splitlines()) if line.startswith("{")), None)
  if out.returncode != 0 or last is None: return {"error": (out.stderr or out.stdout)[-2000:]}
  return json.loads(last)


def main() -> None:
  if len(sys.argv) > 1 and sys.argv[1] == "--child":
    if (prof_dir := os.environ.get("TTFT_PROFILE")):  # where the time goes: the child under cProfile, stats to DIR/CASE.prof
      import cProfile
      with cProfile.Profile() as prof: res = child(sys.argv[2], int(sys.argv[3]))
      prof.dump_stats(os.path.join(prof_dir, f"{os.environ.get('TTFT_CASE', 'case')}.prof"))
    else: res = child(sys.argv[2], int(sys.argv[3]))
    print(json.dumps(res))
    return
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  from llm_decode import add_model_args
  add_model_args(ap)
  ap.add_argument("--max-context", type=int, default=4096)
  ap.add_argument("--cases", default=",".join(CASES), help=f"which of {','.join(CASES)} to run (in this order; they share one cache file)")
  ap.add_argument("--ahead", choices=("prompt", "guess"), default="prompt",
                  help="prompt: LLM.load is given the prompt (as the CLI with a piped prompt); guess: it isn't (a server, a script)")
  args = ap.parse_args()
  os.environ["TTFT_AHEAD"] = args.ahead
  from llm_decode import resolve
  path = resolve(args)
  results: dict[str, Any] = {}
  with tempfile.TemporaryDirectory() as tmp:
    cache = os.path.join(tmp, "cache.db")
    for case in args.cases.split(","): results[case] = run_case(path, args.max_context, cache, case, CASES[case])
  print(json.dumps({"bench": "llm_ttft", "model": os.path.basename(path), "device": os.environ.get("DEV", ""), **results}))


if __name__ == "__main__":
  main()
