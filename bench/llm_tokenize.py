"""Tokenizer and server request costs of tinygrad.llm on adversarial and large prompts (issue 20: quadratic BPE).

  uv run python bench/llm_tokenize.py            # SmolLM2's tokenizer (the embedded model): encode times, then a live server

Prints one JSON line per case: `encode` is Tokenizer.encode of the text alone (16 KB of 'a' is one 16 KB pre-token: the old
rescan-every-pair BPE was quadratic in it); `server` is a POST /v1/chat/completions with that text as the message, timed to its
answer (a prompt this long is over a 1024-token context: 400, refused before tokenizing when the byte count alone rules it out).
"""
from __future__ import annotations

import http.client
import json
import os
import threading
import time


def main() -> None:
  from tinygrad.llm.engine import LLM
  from tinygrad.llm.hub import embedded_model_path
  from tinygrad.llm.server import make_server
  llm = LLM.load(str(embedded_model_path()), max_context=1024)
  tok = llm.tokenizer
  readme = open(os.path.join(os.path.dirname(__file__), "..", "packages", "llm", "README.md")).read()
  cases = {"16KB a": "a" * 16384, "1MB english": (readme * (1 + (1 << 20) // len(readme)))[:1 << 20], "1MB a": "a" * (1 << 20)}
  for name, text in cases.items():
    tok._cache.clear()
    t = time.perf_counter()
    n = len(tok.encode(text))
    print(json.dumps({"case": name, "what": "encode", "s": round(time.perf_counter() - t, 4), "tokens": n}), flush=True)
  srv = make_server(llm, "127.0.0.1", 0, quiet=True)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  for name, text in cases.items():
    body = json.dumps({"messages": [{"role": "user", "content": text}], "max_tokens": 1}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=600)
    t = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    print(json.dumps({"case": name, "what": "server", "s": round(time.perf_counter() - t, 4), "status": resp.status, "bytes": len(body)}), flush=True)
    conn.close()
  srv.shutdown()
  srv.server_close()


if __name__ == "__main__":
  main()
