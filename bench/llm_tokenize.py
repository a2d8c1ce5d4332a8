"""Tokenizer and server request costs of tinygrad.llm on adversarial and large prompts (issue 20: quadratic BPE).

  uv run python bench/llm_tokenize.py            # SmolLM2's tokenizer (the embedded model): encode times, then a live server
  uv run python bench/llm_tokenize.py --ref a1a7a1b   # also tokenizer.py as of a git revision (before/after, ids compared)

Prints one JSON line per case: `encode` is Tokenizer.encode of the text alone (16 KB of 'a' is one 16 KB pre-token: the old
rescan-every-pair BPE was quadratic in it); `server` is a POST /v1/chat/completions with that text as the message, timed to its
answer (a prompt this long is over a 1024-token context: 400, refused before tokenizing when the byte count alone rules it out).
"""
from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

SRC = "packages/llm/src/tinygrad/llm/tokenizer.py"


def tokenizer_at(ref: str):
  """tokenizer.py as of a git revision, imported as a module of its own."""
  root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
  code = subprocess.run(["git", "show", f"{ref}:{SRC}"], cwd=root, capture_output=True, check=True).stdout
  path = os.path.join(tempfile.mkdtemp(), "tokenizer_ref.py")
  with open(path, "wb") as f: f.write(code)
  spec = importlib.util.spec_from_file_location("tokenizer_ref", path)
  mod = importlib.util.module_from_spec(spec)
  sys.modules["tokenizer_ref"] = mod
  spec.loader.exec_module(mod)
  return mod


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--ref", default=None, help="also time tokenizer.py at this git revision (its 1 MB of 'a' is skipped: hours)")
  args = ap.parse_args()
  from tinygrad.llm.engine import LLM
  from tinygrad.llm.gguf import read_gguf
  from tinygrad.llm.hub import embedded_model_path
  from tinygrad.llm.server import make_server
  llm = LLM.load(str(embedded_model_path()), max_context=1024)
  toks = {"now": llm.tokenizer}
  if args.ref: toks[args.ref] = tokenizer_at(args.ref).Tokenizer.from_gguf(read_gguf(str(embedded_model_path())).metadata)
  readme = open(os.path.join(os.path.dirname(__file__), "..", "packages", "llm", "README.md")).read()
  cases = {"16KB a": "a" * 16384, "1MB english": (readme * (1 + (1 << 20) // len(readme)))[:1 << 20], "1MB a": "a" * (1 << 20)}
  for name, text in cases.items():
    ids = {}
    for label, tok in toks.items():
      if label != "now" and name == "1MB a": continue
      tok._cache.clear()
      t = time.perf_counter()
      ids[label] = tok.encode(text)
      print(json.dumps({"case": name, "what": "encode", "tokenizer": label, "s": round(time.perf_counter() - t, 4), "tokens": len(ids[label])}), flush=True)
    if len(ids) > 1: print(json.dumps({"case": name, "same_ids": len({tuple(v) for v in ids.values()}) == 1}), flush=True)
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
