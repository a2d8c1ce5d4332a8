"""python -m tinygrad.llm: chat in the terminal (or answer a piped prompt), serve an OpenAI-compatible API, or benchmark."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

DEFAULT_MAX_CONTEXT = 1024  # the KV cache is allocated for all of it (f16: 2 * layers * kv heads * head dim * 2 bytes per position)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
  p = argparse.ArgumentParser(prog="python -m tinygrad.llm", description="Run a GGUF language model: chat, serve an OpenAI-compatible API, or benchmark.")
  p.add_argument("--model", help="a local .gguf path, a URL, or an alias (see --list-models); default: the embedded SmolLM2-135M-Instruct")
  p.add_argument("--list-models", action="store_true", help="print the model aliases and exit")
  p.add_argument("--max_context", "--max-context", type=int, default=None, help=f"context length in tokens (default: {DEFAULT_MAX_CONTEXT} or the model's, if smaller)")
  p.add_argument("--kv_cache", "--kv-cache", choices=["f16", "f32"], default="f16", help="KV cache precision (default f16)")
  p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 is greedy (default 0)")
  p.add_argument("--top_k", "--top-k", type=int, default=0, help="sample from the k most likely tokens (0: all)")
  p.add_argument("--top_p", "--top-p", type=float, default=1.0, help="nucleus sampling mass (1: all)")
  p.add_argument("--seed", type=int, default=0, help="random seed for sampling")
  p.add_argument("--max_tokens", "--max-tokens", type=int, default=None, help="most tokens per answer (default: until the model stops or the context is full)")
  p.add_argument("--system", default=None, help="a system prompt")
  p.add_argument("--serve", nargs="?", type=int, const=8000, default=None, metavar="PORT", help="serve the OpenAI API and a chat page (default port 8000)")
  p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
  p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                 help="let web pages from ORIGIN (e.g. http://localhost:3000; '*': any) call the API (default: only the server's own page)")
  p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                 help="accept requests whose Host header names HOST (default: localhost and the --host address; '*': any)")
  p.add_argument("--max-body", type=int, default=4 << 20, metavar="BYTES", help="largest request body (default 4 MiB; larger: 413)")
  p.add_argument("--request-timeout", type=float, default=30.0, metavar="S", help="seconds a request may take to arrive (default 30)")
  p.add_argument("--max-queue", type=int, default=16, metavar="N", help="requests that may wait for the model (default 16; more: 429)")
  p.add_argument("--max-connections", type=int, default=64, metavar="N", help="open connections (default 64; more: 503)")
  p.add_argument("--benchmark", nargs="?", type=int, const=20, default=None, metavar="N", help="time prefill and N decoded tokens (greedy, or as --temperature/--top-k/--top-p sample), print JSON and exit")
  p.add_argument("--warmup", action="store_true", help="compile and capture the kernels before the first prompt")
  p.add_argument("--verbose", "-v", action="store_true", help="print timings after each answer")
  return p.parse_args(argv)


def server_options(args: argparse.Namespace):
  from tinygrad.llm.server import ServerOptions
  return ServerOptions(set(args.allow_origin), set(args.allow_host), args.max_body, args.request_timeout, max_connections=args.max_connections,
                       max_queue=args.max_queue, max_tokens=args.max_tokens)


def load(args: argparse.Namespace, ahead: list[dict] | None = None):
  """The model; `ahead`: the first prompt's messages when known before loading (its kernels build while the weights load)."""
  from tinygrad import dtypes
  from tinygrad.llm.engine import LLM
  from tinygrad.llm.hub import resolve_model
  path = resolve_model(args.model)
  # the model caps max_context at its own context length, so the file is parsed once (by LLM.load): its metadata (the
  # vocabulary, ~9 MB of Python objects for SmolLM2) is never held twice
  return LLM.load(str(path), max_context=args.max_context or DEFAULT_MAX_CONTEXT,
                  cache_dtype=dtypes.float16 if args.kv_cache == "f16" else dtypes.float32, ahead=ahead)


def warmup(llm, samplings: list | None = None) -> None:
  """Run prefill and decode three times each (compile, capture, replay) for each way of sampling in `samplings` (SamplingParams;
  default greedy): each way has a decode capture of its own. Then forget the tokens."""
  from dataclasses import replace

  from tinygrad.llm.engine import SamplingParams
  ids = llm.tokenizer.encode("Hello, how are you?")[: max(2, min(8, llm.max_context - 8))] or [0, 0]
  for params in samplings or [SamplingParams()]:
    for _ in range(3):
      llm.cached = []
      for _ in llm.generate(ids, max_new_tokens=3, params=replace(params, ignore_eos=True)): pass
  llm.cached = []


def warmup_samplings(args: argparse.Namespace) -> list:
  """What the first answers will sample with: the server's default and greedy when serving, else the command line's."""
  from tinygrad.llm.engine import SamplingParams
  if args.serve is not None:
    from tinygrad.llm.server import DEFAULT_TEMPERATURE
    return [SamplingParams(temperature=DEFAULT_TEMPERATURE), SamplingParams()]
  return [SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)]


BENCHMARK_MESSAGES = [{"role": "user", "content": "Write a short story about a robot who learns to paint."}]


def benchmark(llm, n: int, params=None) -> dict:
  """Prefill of the benchmark prompt and n decoded tokens, warm; greedy unless params (a SamplingParams) says otherwise."""
  from dataclasses import replace

  from tinygrad.llm.engine import GenerationStats, SamplingParams
  params = replace(params or SamplingParams(), ignore_eos=True)
  ids = llm.chat_ids(BENCHMARK_MESSAGES)
  n = min(n, llm.max_context - 2)
  ids = ids[:max(1, min(len(ids), llm.max_context - n - 1))]  # prompt + n tokens must fit in the context
  # two untimed runs of the same length compile and capture the kernels (for every attention span the timed run reaches)
  for _ in range(2):
    llm.cached = []
    for _ in llm.generate(ids, max_new_tokens=n, params=params): pass
  llm.cached = []
  stats = GenerationStats()
  for _ in llm.generate(ids, max_new_tokens=n, params=params, stats=stats): pass
  return {"model": llm.name, "prompt_tokens": stats.prompt_tokens, "prefill_tok_s": round(stats.prefill_tps, 2),
          "decode_tokens": stats.completion_tokens, "decode_tok_s": round(stats.decode_tps, 2), "max_context": llm.max_context,
          "sampling": {"temperature": params.temperature, "top_k": params.top_k, "top_p": params.top_p}}


def answer(llm, messages: list[dict], args: argparse.Namespace, out=sys.stdout) -> str:
  from tinygrad.llm.engine import GenerationStats, SamplingParams
  params = SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
  stats = GenerationStats()
  ids = llm.chat_ids(messages)
  text = []
  for piece in llm.stream_text(ids, args.max_tokens, params, stats):
    out.write(piece)
    out.flush()
    text.append(piece)
  out.write("\n")
  out.flush()
  if args.verbose:
    print(f"[{stats.prompt_tokens} prompt tokens ({stats.cached_tokens} cached) in {stats.prefill_s:.2f} s, "
          f"{stats.completion_tokens} tokens at {stats.decode_tps:.2f} tok/s, {stats.finish_reason}]", file=sys.stderr)
  return "".join(text)


def chat(llm, args: argparse.Namespace) -> None:
  from tinygrad.llm.engine import ContextLengthExceeded
  from tinygrad.llm.tokenizer import ChatTemplateError
  history: list[dict] = [{"role": "system", "content": args.system}] if args.system else []
  print(f"{llm.name} (max context {llm.max_context} tokens). /reset clears the conversation, /exit or Ctrl-D quits.", file=sys.stderr)
  while True:
    try: line = input(">>> ")
    except (EOFError, KeyboardInterrupt):
      print(file=sys.stderr)
      return
    if not line.strip(): continue
    if line.strip() in ("/exit", "/quit", "/bye"): return
    if line.strip() == "/reset":
      history = history[:1] if args.system else []
      continue
    history.append({"role": "user", "content": line})
    try: reply = answer(llm, history, args)
    except ContextLengthExceeded as e:
      history.pop()
      print(f"error: {e}; /reset starts a new conversation", file=sys.stderr)
      continue
    except ChatTemplateError as e:  # the model's template ran past its limits: no prompt can be built
      print(f"error: {e}", file=sys.stderr)
      return
    except KeyboardInterrupt:
      print("\n[interrupted]", file=sys.stderr)
      history.pop()
      continue
    history.append({"role": "assistant", "content": reply})


def main(argv: list[str] | None = None) -> int:
  args = parse_args(argv)
  if args.list_models:
    from tinygrad.llm.hub import ALIASES
    for k, v in ALIASES.items(): print(f"{k:16s} {v}")
    return 0
  # kernels compile in a worker process: LLVM's ~90 MB of code and heap stay out of this one (tinygrad/workers.py)
  from tinygrad.llm.engine import ContextLengthExceeded
  from tinygrad.llm.gguf import GGUFError
  from tinygrad.llm.model import UnsupportedModel
  from tinygrad.llm.quants import UnsupportedQuantization
  from tinygrad.llm.tokenizer import ChatTemplateError
  from tinygrad.workers import COMPILE_WORKER, prestart
  if "COMPILE_WORKER" not in os.environ: COMPILE_WORKER.value = 1
  prestart()
  t0 = time.perf_counter()
  # a piped prompt is read before loading: its kernels then build while the weights load (LLM.load's `ahead`)
  messages: list[dict] | None = None
  if args.serve is None and args.benchmark is None and not sys.stdin.isatty():
    prompt = sys.stdin.read().strip()
    if not prompt:
      print("error: no prompt on stdin", file=sys.stderr)
      return 1
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [{"role": "user", "content": prompt}]
  try: llm = load(args, messages if args.benchmark is None else BENCHMARK_MESSAGES)
  except (FileNotFoundError, GGUFError, UnsupportedModel, UnsupportedQuantization, OSError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  if args.verbose: print(f"[loaded {llm.name} in {time.perf_counter() - t0:.1f} s]", file=sys.stderr)
  if args.benchmark is not None:
    from tinygrad.llm.engine import SamplingParams
    print(json.dumps(benchmark(llm, args.benchmark, SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed))))
    return 0
  if args.warmup:
    t1 = time.perf_counter()
    warmup(llm, warmup_samplings(args))
    if args.verbose: print(f"[warmed up in {time.perf_counter() - t1:.1f} s]", file=sys.stderr)
  if args.serve is not None:
    from tinygrad.llm.server import serve
    serve(llm, args.host, args.serve, server_options(args))
    return 0
  if messages is not None:
    try: answer(llm, messages, args)
    except (ContextLengthExceeded, ChatTemplateError) as e:
      print(f"error: {e}", file=sys.stderr)
      return 1
    return 0
  chat(llm, args)
  return 0


if __name__ == "__main__":
  sys.exit(main())
