"""Shared driver of the benchmark scripts: run our side and every peer for some workloads, print ONE JSON object.

Our side runs in this process (default device, hand-coded heuristics; and BEAM where a script asks for it), except
cold-start figures, which need a fresh process with an empty cache. Peers run one after another in subprocesses:
  numpy           bench/peers/numpy_peer.py, with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed from its environment
  torch           bench/peers/torch_peer.py, when torch is importable
  tinygrad 0.14   bench/peers/tinygrad_peer.py in `uv run --isolated --no-project --with tinygrad==0.14.0`, CC set to a clang
"""
from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from typing import Any

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from shapes import CONV, MATMUL_SIZES  # noqa: E402

PEER_TINYGRAD = "tinygrad==0.14.0"
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
TIMEOUT = 1800
COLD = ("mlp_cold", "lstm_cold")  # first calls in a fresh process with an empty compile cache

# the figure that headlines each workload: (key in the result, unit, True when higher is better)
HEADLINE: dict[str, tuple[str, str, bool]] = {
  **{f"matmul_{n}": ("gflops", "GFLOP/s", True) for n in MATMUL_SIZES},
  "add": ("gbs", "GB/s", True), "sum": ("gbs", "GB/s", True), "sum_axis0": ("gbs", "GB/s", True),
  "vecmat": ("gbs", "GB/s", True), "softmax": ("gbs", "GB/s", True), "conv2d": ("gflops", "GFLOP/s", True),
  "mlp_step": ("ms", "ms/step", False), "mlp_cold": ("cold_s", "s", False), "lstm_cold": ("cold_s", "s", False), "jit_overhead": ("us_per_call", "us/call", False),
  "jit_overhead_var": ("us_per_call", "us/call", False),
}


def _last_json(out: str) -> dict[str, Any] | None:
  for line in reversed(out.strip().splitlines()):
    if line.startswith("{"):
      try: return json.loads(line)
      except json.JSONDecodeError: return None
  return None


def run_json(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> dict[str, Any]:
  """Run a peer; its last stdout line is its JSON. Failures come back as {"error": ...}."""
  try: p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=TIMEOUT)
  except (OSError, subprocess.TimeoutExpired) as e: return {"error": f"{type(e).__name__}: {e}"}
  if p.returncode == 0 and (res := _last_json(p.stdout)) is not None: return res
  return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-1500:]}"}


def find_clang() -> str | None:
  """tinygrad 0.14's CPU device runs `$CC` (default `clang`); a versioned clang-N must be named in CC."""
  if (cc := os.environ.get("CC")) and shutil.which(cc) and "clang" in cc: return cc
  return next((c for c in ["clang", *(f"clang-{v}" for v in range(22, 13, -1))] if shutil.which(c)), None)


def numpy_peer(which: str) -> dict[str, Any]:
  """numpy with OpenBLAS's own thread count, and with one thread: the better of the two is numpy's figure (on a busy
  machine OpenBLAS's threads wait on each other whenever one is descheduled, and one thread can be several times faster)."""
  removed = [k for k in BLAS_ENV if k in os.environ]
  env = {k: v for k, v in os.environ.items() if k not in BLAS_ENV}
  env["BENCH_REMOVED_ENV"] = ",".join(f"{k}={os.environ[k]}" for k in removed)
  cmd = [sys.executable, os.path.join(BENCH, "peers", "numpy_peer.py"), which]
  runs = {"default": run_json(cmd, env=env), "1": run_json(cmd, env={**env, "OPENBLAS_NUM_THREADS": "1"})}
  key, _, higher = HEADLINE[which]
  ok = {t: r for t, r in runs.items() if isinstance(r.get(key), (int, float))}
  if not ok: return runs["default"]
  best = (max if higher else min)(ok, key=lambda t: ok[t][key])
  return {**ok[best], "blas_threads": best, "other_blas_threads": {t: r.get(key) for t, r in runs.items() if t != best}}


def torch_python() -> str | None:
  """An interpreter with torch: this one, $BENCH_TORCH_PYTHON, or the venv of the `bench` or `parity` nox session (they
  pip-install the CPU build of torch; uv would fetch a multi-GB CUDA build)."""
  if importlib.util.find_spec("torch") is not None: return sys.executable
  root = os.path.dirname(BENCH)
  for py in (os.environ.get("BENCH_TORCH_PYTHON"), *(os.path.join(root, ".nox", s, "bin", "python") for s in ("bench", "parity"))):
    if py and os.path.exists(py) and subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0: return py
  return None


def torch_peer(which: str) -> dict[str, Any]:
  if (py := torch_python()) is None:
    return {"skipped": "no torch: run through `uv run nox -s bench` (its venv has torch), or set BENCH_TORCH_PYTHON"}
  return run_json([py, os.path.join(BENCH, "peers", "torch_peer.py"), which])


def tinygrad_peer(which: str, cold: bool = False) -> dict[str, Any]:
  if (uv := shutil.which("uv")) is None: return {"error": "uv not on PATH: can't make tinygrad 0.14's isolated environment"}
  if (cc := find_clang()) is None: return {"error": "tinygrad 0.14's CPU device compiles with clang ($CC or `clang`): none found on PATH"}
  env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "DEV", "BEAM", "JITBEAM", "DEBUG", "PYTHONPATH")}
  env["CC"] = cc
  with tempfile.TemporaryDirectory() as tmp:
    if cold: env.update(CACHELEVEL="0", CACHEDB=os.path.join(tmp, "cache.db"))
    cmd = [uv, "run", "--isolated", "--no-project", "--with", PEER_TINYGRAD, "python", os.path.join(BENCH, "peers", "tinygrad_peer.py"), which]
    return run_json(cmd, env=env, cwd=tmp)


def ours_cold(which: str) -> dict[str, Any]:
  """Our side in a fresh process with the on-disk cache off and empty: everything is scheduled and compiled."""
  with tempfile.TemporaryDirectory() as tmp:
    env = {**os.environ, "CACHELEVEL": "0", "CACHEDB": os.path.join(tmp, "cache.db")}
    return run_json([sys.executable, os.path.join(BENCH, "peers", "tinygrad_peer.py"), which], env=env)


def ours(which: str, beam: int = 0) -> dict[str, Any]:
  import workloads
  from tinygrad import Context, Device
  if which in COLD: return {**ours_cold(which), "device": Device.DEFAULT}
  with Context(BEAM=beam): res = workloads.WORKLOADS[which]()
  res["device"] = f"{Device.DEFAULT}:{Device.renderer(Device.DEFAULT).name}"
  if (probe := OPTS_PROBE.get(which)) is not None: res["opts"] = applied_opts(probe(), beam)
  return res


# the main kernel of a workload, to report which optimizations our compiler applies to it
OPTS_PROBE: dict[str, Any] = {
  **{f"matmul_{n}": (lambda n=n: _empty(n, n) @ _empty(n, n)) for n in MATMUL_SIZES},
  "conv2d": lambda: _empty(*CONV[:2], CONV[3], CONV[3]).conv2d(_empty(CONV[2], CONV[1], CONV[4], CONV[4]), padding=1),
}


def _empty(*shape: int) -> Any:
  from tinygrad import Tensor
  return Tensor.empty(*shape)


def applied_opts(t: Any, beam: int) -> list[str]:
  """The opts of each kernel of `t` (heuristics, or BEAM's cached choice)."""
  from tinygrad import Context, Device
  from tinygrad.engine.search import choose_opts
  from tinygrad.uop.ops import Ops
  with Context(BEAM=beam):
    return [" ".join(f"{o.op.name}({o.axis},{o.amount})" for o in choose_opts(si.ast, Device.renderer(Device.DEFAULT), beam))
            for si in t.schedule() if si.ast.op is Ops.SINK]


def machine() -> dict[str, Any]:
  cpu = ""
  try:
    with open("/proc/cpuinfo") as f: cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
  except OSError: pass
  return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "loadavg": list(os.getloadavg())}


def main(benchmark: str, cases: list[str], beam: int = 0, beam_cases: list[str] | None = None) -> dict[str, Any]:
  """Run `cases` on our side and every peer; print and return one JSON object. `beam_cases`: those also run under BEAM (all
  of them when None)."""
  start = machine()
  details: dict[str, dict[str, Any]] = {}
  for which in cases:
    d: dict[str, Any] = {"ours": ours(which)}
    if beam and (beam_cases is None or which in beam_cases): d[f"ours_beam{beam}"] = ours(which, beam)
    d["numpy"] = numpy_peer(which) if which not in COLD else {"skipped": "numpy compiles nothing"}
    d["torch"] = torch_peer(which) if which not in (*COLD, "jit_overhead", "jit_overhead_var") else {"skipped": "no equivalent"}
    d["tinygrad_0.14"] = tinygrad_peer(which, cold=which in COLD)
    details[which] = d
  key_of = {w: HEADLINE[w] for w in cases}
  figures = {w: {side: r.get(key_of[w][0]) for side, r in d.items()} for w, d in details.items()}
  ratios: dict[str, dict[str, float]] = {}
  for w, f in figures.items():
    higher = key_of[w][2]
    for side in [s for s in f if s.startswith("ours")]:
      for peer in ("numpy", "torch", "tinygrad_0.14"):
        if isinstance(f.get(side), (int, float)) and isinstance(f.get(peer), (int, float)) and f[peer] and f[side]:
          # >1 means ours is better, whichever direction the unit goes
          ratios.setdefault(w, {})[f"{side}_vs_{peer}"] = round(f[side] / f[peer] if higher else f[peer] / f[side], 3)
  out = {"benchmark": benchmark, "units": {w: key_of[w][1] for w in cases}, "figures": figures, "ratios": ratios,
         "details": details, "machine": {**start, "loadavg_end": list(os.getloadavg())}}
  if "jit_overhead" in cases: out["note"] = "numpy's jit_overhead figure is 10 tiny numpy ops per call, for scale only"
  print(json.dumps(out))
  return out
