"""The peer of bench/llm_decode.py: torch + transformers loading a GGUF file (`gguf_file=`, dequantized to float32 on the CPU,
float16 on a GPU), greedy decoding with its KV cache. Prints one JSON line.

  python bench/peers/torch_llm_peer.py MODEL.gguf '[1, 2, 3]' 32      (BENCH_T0: the parent's time.time() at the start)

TTFT is from BENCH_T0 to the first token of the first (cold) generation; then a timed prefill of the same ids and `n` decode steps.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time


def main() -> None:
  path, ids, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
  t0 = float(os.environ.get("BENCH_T0", time.time()))
  import torch
  import transformers
  from transformers import AutoModelForCausalLM
  cuda = torch.cuda.is_available() and os.environ.get("DEV", "").upper().startswith(("CUDA", "NV"))
  dev, dtype = ("cuda", torch.float16) if cuda else ("cpu", torch.float32)
  model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path), dtype=dtype)
  model = model.to(dev).eval()
  x = torch.tensor([ids], device=dev)

  def sync() -> None:
    if cuda: torch.cuda.synchronize()

  def generate(steps: int) -> tuple[float, float, int]:
    """(prefill seconds including the first token, seconds for the remaining steps, steps after the first)"""
    st = time.perf_counter()
    out = model(x, use_cache=True)
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    sync()
    t1 = time.perf_counter()
    past = out.past_key_values
    for _ in range(steps - 1):
      out = model(tok, past_key_values=past, use_cache=True)
      past, tok = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    tok.item()
    return t1 - st, time.perf_counter() - t1, steps - 1

  with torch.inference_mode():
    out = model(x, use_cache=True)
    out.logits[:, -1].argmax(-1).item()
    ttft = time.time() - t0
    generate(3)  # warm up
    prefill_s, decode_s, steps = generate(n)
  print(json.dumps({"prompt_tokens": len(ids), "prefill_tok_s": round(len(ids) / prefill_s, 2), "decode_tokens": n,
                    "decode_tok_s": round(steps / decode_s, 2) if decode_s else None, "ttft_s": round(ttft, 3),
                    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "device": dev,
                    "torch": torch.__version__, "transformers": transformers.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__": main()
