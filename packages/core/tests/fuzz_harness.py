"""Runs file-loader fuzz cases in a worker process, so that a crash (SIGBUS, segfault), a hang or a runaway allocation
is a counted failure of that case instead of a dead or stuck test worker.

The worker (this file run as a script) imports the loader once, then loads one path per line of its stdin and answers
one result line each. Its address space is limited (RLIMIT_AS), so an unbounded allocation is a MemoryError, counted as
an unnamed error. A case that crashes the worker or runs past its timeout is recorded and a new worker takes the rest.
"""
from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MARK = "@@FUZZ "
KINDS = ("loaded", "clean error", "unnamed error", "crash", "hang")


# ---- loaders, by name (each loads everything: the tensors' bytes too)

def _realize_all(obj: Any, seen: set[int] | None = None, depth: int = 0) -> None:
  from tinygrad import Tensor
  seen = set() if seen is None else seen
  if id(obj) in seen or depth > 50: return
  seen.add(id(obj))
  if isinstance(obj, Tensor):
    # a broadcast view may legitimately be huge (torch saves expanded tensors as views): loading it is the test, realizing it is not
    if obj.numel() <= 1 << 22: obj.to(None).realize().data()
    return
  if isinstance(obj, dict): obj = list(obj.values())
  if isinstance(obj, (list, tuple)):
    for x in obj: _realize_all(x, seen, depth + 1)


def load_safetensors(path: str) -> None:
  from tinygrad.nn.state import safe_load
  _realize_all(safe_load(path))


def load_torch(path: str) -> None:
  from tinygrad.nn.state import torch_load
  _realize_all(torch_load(path))


def load_gguf(path: str) -> None:
  from tinygrad.llm.engine import LLM  # what the CLI and server load: read_gguf, the tokenizer, Transformer.from_gguf
  LLM.load(path, max_context=64)


def _selftest(path: str) -> None:
  """A loader that misbehaves on purpose, by file name: the harness's own test."""
  import signal
  name = os.path.basename(path)
  if name == "crash": os.kill(os.getpid(), signal.SIGSEGV)
  if name == "hang": time.sleep(3600)
  if name == "keyerror": raise KeyError(path)
  if name == "unnamed": raise ValueError("no file name here")
  if name == "clean": raise ValueError(f"{path}: bad")


LOADERS: dict[str, tuple[Callable[[str], None], str]] = {  # name -> (loader, the module.Class of its documented error)
  "safetensors": (load_safetensors, "tinygrad.nn.state.SafetensorsError"),
  "torch": (load_torch, "tinygrad.nn.state.TorchLoadError"),
  # the GGUF loader's errors: GGUFError (UnsupportedModel is one) and UnsupportedQuantization (a supported file, an unsupported type)
  "selftest": (lambda p: _selftest(p), "builtins.ValueError"),
  "gguf": (load_gguf, "tinygrad.llm.gguf.GGUFError,tinygrad.llm.quants.UnsupportedQuantization"),
}


def _error_types(spec: str) -> tuple[type, ...]:
  import importlib
  out = []
  for s in spec.split(","):
    mod, name = s.rsplit(".", 1)
    out.append(getattr(importlib.import_module(mod), name))
  return tuple(out)


def _worker(name: str, mem_gb: int) -> None:
  import resource
  resource.setrlimit(resource.RLIMIT_AS, (mem_gb << 30, mem_gb << 30))
  loader, spec = LOADERS[name]
  errors = _error_types(spec)
  out = os.fdopen(os.dup(1), "w")
  sys.stdout = sys.stderr  # anything the loader prints goes to stderr, not into the result lines
  out.write(MARK + "ready\n")
  out.flush()
  for line in sys.stdin:
    path = line.rstrip("\n")
    start = time.perf_counter()
    try:
      loader(path)
      res = {"kind": "loaded"}
    except errors as e:
      res = {"kind": "clean error" if path in str(e) else "unnamed error", "type": type(e).__name__, "msg": str(e)[:300]}
    except BaseException as e:  # noqa: BLE001  anything else is what the fuzzer looks for
      res = {"kind": "unnamed error", "type": type(e).__name__, "msg": str(e)[:300]}
    res["s"] = round(time.perf_counter() - start, 3)
    out.write(MARK + json.dumps(res) + "\n")
    out.flush()


# ---- the parent side

@dataclass
class Report:
  fmt: str
  counts: Counter = field(default_factory=Counter)
  failures: list[tuple[str, dict]] = field(default_factory=list)
  results: list[tuple[str, dict]] = field(default_factory=list)
  seconds: float = 0.0

  def line(self) -> str:
    return f"fuzz {self.fmt}: tried {sum(self.counts.values())} / " + " / ".join(f"{k} {self.counts[k]}" for k in KINDS) + f" in {self.seconds:.1f} s"


class _Worker:
  def __init__(self, fmt: str, mem_gb: int, env: dict[str, str]):
    self.stderr = tempfile.TemporaryFile()
    self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), fmt, str(mem_gb)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=self.stderr, env=env)
    self.buf = b""
    if self._line(120) is None: raise RuntimeError(f"the fuzz worker did not start: {self.stderr_tail()}")

  def stderr_tail(self) -> str:
    self.stderr.seek(0)
    return self.stderr.read().decode(errors="replace")[-1500:]

  def _line(self, timeout: float) -> str | None:
    """The next result line, or None on a timeout or when the worker died."""
    assert self.proc.stdout is not None
    deadline = time.monotonic() + timeout
    while True:
      while b"\n" in self.buf:
        line, self.buf = self.buf.split(b"\n", 1)
        if line.startswith(MARK.encode()): return line[len(MARK):].decode()
      left = deadline - time.monotonic()
      if left <= 0: return None
      if not select.select([self.proc.stdout], [], [], left)[0]: return None
      chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
      if not chunk:  # the worker closed its stdout: it died (reap it, so that run() sees its exit status)
        try: self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired: pass
        return None
      self.buf += chunk

  def run(self, path: str, timeout: float) -> dict:
    assert self.proc.stdin is not None
    try:
      self.proc.stdin.write(path.encode() + b"\n")
      self.proc.stdin.flush()
    except BrokenPipeError: pass
    line = self._line(timeout)
    if line is not None: return json.loads(line)
    if self.proc.poll() is None:
      self.kill()
      return {"kind": "hang", "msg": f"no answer in {timeout} s"}
    return {"kind": "crash", "msg": f"the worker died (rc {self.proc.returncode}): {self.stderr_tail()}"}

  def kill(self) -> None:
    if self.proc.poll() is None:
      self.proc.kill()
      self.proc.wait()


def run_cases(fmt: str, paths: list[str], timeout: float = 20.0, mem_gb: int = 6) -> Report:
  """Load every path in a worker (a new one after a crash or hang) and count the outcomes."""
  rep, start = Report(fmt), time.perf_counter()
  env = os.environ.copy()
  env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
  # a GPU driver can't start under the worker's address-space limit (cuInit reserves far more): the loaders' parsing is
  # the same on any device, so a run on a GPU fuzzes on the PYTHON device
  device = env.get("DEV", "").split(";")[0].split("+")[-1].split(":")[0].upper()
  if device not in ("", "CPU", "PYTHON", "NULL"): env["DEV"] = "PYTHON"
  worker = _Worker(fmt, mem_gb, env)
  try:
    for p in paths:
      res = worker.run(p, timeout)
      rep.counts[res["kind"]] += 1
      rep.results.append((p, res))
      if res["kind"] not in ("loaded", "clean error"): rep.failures.append((p, res))
      if res["kind"] in ("crash", "hang"): worker = _Worker(fmt, mem_gb, env)
  finally:
    worker.kill()
  rep.seconds = time.perf_counter() - start
  return rep


# ---- byte-level mutations shared by the formats

INTERESTING = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\xff\xff\xff\xff", b"\x00\x00\x00\x80", b"\xff\xff\xff\xff\xff\xff\xff\x7f"]


def mutate_bytes(rng: random.Random, raw: bytes, hot: int) -> tuple[str, bytes]:
  """One random damage to `raw`; positions favour the first `hot` bytes (headers: where damage matters)."""
  b = bytearray(raw)
  pos = lambda: rng.randrange(min(hot, len(b))) if rng.random() < 0.8 else rng.randrange(len(b))  # noqa: E731
  kind = rng.choice(["flip", "flips", "truncate", "interesting", "insert", "delete"])
  if kind == "flip":
    i = pos()
    b[i] ^= 1 << rng.randrange(8)
  elif kind == "flips":
    for _ in range(rng.randint(2, 16)):
      i = pos()
      b[i] ^= 1 << rng.randrange(8)
  elif kind == "truncate": b = b[:rng.randrange(len(b))] if rng.random() < 0.5 else b[:pos()]
  elif kind == "interesting":
    i, v = pos(), rng.choice(INTERESTING)
    b[i:i + len(v)] = v
  elif kind == "insert":
    i = pos()
    b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
  else:
    i = pos()
    del b[i:i + rng.randint(1, 8)]
  return kind, bytes(b)


if __name__ == "__main__":
  _worker(sys.argv[1], int(sys.argv[2]))
