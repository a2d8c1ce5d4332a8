"""The llama.cpp peer of bench/llm_decode.py: llama-cpp-python (a CPU build, see bench/llm_decode.py's llama_cpp_python) loading
the same GGUF file, greedy decoding with its KV cache. Prints one JSON line.

  python bench/peers/llama_cpp_peer.py MODEL.gguf '[1, 2, 3]' 32 '[64, 512]'   (BENCH_T0: the parent's time.time() at the start;
                                                                                LLAMA_THREADS: threads, default 2)

TTFT is from BENCH_T0 to the first token of the first (cold) generation (importing llama_cpp and loading the file count). Then,
warm: a timed prefill of the same ids (with the argmax of its last logits, as ours samples its first token) and `n` greedy decode
steps. `pp`: prefill of exactly N tokens (the prompt's ids repeated), timed as llama-bench's pp test does: one warm-up, then the
evaluation of the batch alone on an empty cache; best of PP_REPS runs.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time

PP_REPS = 3


def main() -> None:
  path, ids, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
  pp: list[int] = json.loads(sys.argv[4]) if len(sys.argv) > 4 else []
  t0 = float(os.environ.get("BENCH_T0", time.time()))
  threads = int(os.environ.get("LLAMA_THREADS", "2"))
  import llama_cpp
  import numpy as np
  n_ctx = max(1024, len(ids) + n + 8, *(p + 8 for p in pp))
  n_batch = max(512, len(ids), *pp)  # a whole prompt (and each pp batch) in one llama_decode, as llama-bench's -b 2048 does
  llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch, n_threads=threads, n_threads_batch=threads,
                        verbose=False)

  def prefill(toks: list[int]) -> int:
    llm.reset()
    llm.eval(toks)
    return int(np.argmax(llm.scores[llm.n_tokens - 1]))

  def generate(steps: int) -> tuple[float, float, int]:
    """(prefill seconds including the first token, seconds for the remaining steps, steps after the first)"""
    st = time.perf_counter()
    tok = prefill(ids)
    t1 = time.perf_counter()
    for _ in range(steps - 1):
      llm.eval([tok])
      tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    return t1 - st, time.perf_counter() - t1, steps - 1

  prefill(ids)
  ttft = time.time() - t0
  generate(3)  # warm up
  prefill_s, decode_s, steps = generate(n)
  pp_tok_s: dict[str, float] = {}
  for p in pp:
    toks = (ids * (p // len(ids) + 1))[:p]
    prefill(toks)  # warm up
    best = float("inf")
    for _ in range(PP_REPS):
      llm.reset()
      st = time.perf_counter()
      llm.eval(toks)
      best = min(best, time.perf_counter() - st)
    pp_tok_s[str(p)] = round(p / best, 2)
  print(json.dumps({"prompt_tokens": len(ids), "prefill_tok_s": round(len(ids) / prefill_s, 2), "decode_tokens": n,
                    "decode_tok_s": round(steps / decode_s, 2) if decode_s else None, "ttft_s": round(ttft, 3), "pp_tok_s": pp_tok_s,
                    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "device": "CPU",
                    "llama_cpp_python": llama_cpp.__version__, "threads": threads}))


if __name__ == "__main__": main()
