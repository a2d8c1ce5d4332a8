"""llama.cpp as the GPU LLM peer: build `llama-bench` from llama-cpp-python's sdist (which vendors llama.cpp) and run it on the
same GGUF files as bench/llm_decode.py, printing pp (prefill) and tg (decode) tok/s as JSON.

  python bench/llm_peer_llamacpp.py prepare --out .peer/llama.cpp     # here: download the sdist, keep llama.cpp's source, pruned
  python bench/llm_peer_llamacpp.py run --src .peer/llama.cpp --synthetic llama1b,smollm2   # on the GPU machine

`prepare` needs pip and the package index (run it where there is one); the pruned tree (~40 MB) travels to the GPU machine,
which has no network. `run` configures with CMake (CUDA for sm_90 when nvcc is found, else the CPU build), builds only
llama-bench, and runs `llama-bench -m FILE -ngl 99 -fa 1 -p 64,512 -n 128 -r 3 -d DEPTH -o json` for each file (recipe:
../shared/docs/FACTS.md, "llama.cpp as a peer"). `--synthetic` writes (or reuses) bench/llm_decode.py's synthetic models.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from typing import Any

VERSION = "0.3.36"
# what llama-bench doesn't need: models, docs, tools, tests, and ggml backends other than the CPU, CUDA and BLAS ones
PRUNE = ("models", "docs", "media", "benches", "conversion", "gguf-py", "tests", "scripts", "examples/model-conversion", ".devops")
KEEP_BACKENDS = ("ggml-cpu", "ggml-cuda", "ggml-blas")


def prepare(out: str, sdist: str | None) -> None:
  with tempfile.TemporaryDirectory() as tmp:
    if sdist is None:
      subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", f"llama-cpp-python=={VERSION}", "-d", tmp],
                     check=True)
      sdist = glob.glob(os.path.join(tmp, "*.tar.gz"))[0]
    with tarfile.open(sdist) as tf: tf.extractall(tmp, filter="data")
    src = glob.glob(os.path.join(tmp, "*", "vendor", "llama.cpp"))[0]
    for p in PRUNE: shutil.rmtree(os.path.join(src, p), ignore_errors=True)
    for d in glob.glob(os.path.join(src, "ggml", "src", "ggml-*")):
      if os.path.isdir(d) and os.path.basename(d) not in KEEP_BACKENDS: shutil.rmtree(d)
    if os.path.exists(out): shutil.rmtree(out)
    shutil.copytree(src, out)
  size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out) for f in fs)
  print(json.dumps({"prepared": out, "version": VERSION, "mb": round(size / 2**20, 1)}))


def build(src: str, build_dir: str, jobs: int) -> str:
  exe = os.path.join(build_dir, "bin", "llama-bench")
  if os.path.exists(exe): return exe
  cuda = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")
  flags = ["-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DCMAKE_BUILD_TYPE=Release"]
  if cuda: flags += ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"]
  if cuda and shutil.which("nvcc") is None: flags.append("-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
  subprocess.run(["cmake", "-S", src, "-B", build_dir, *flags], check=True, stdout=sys.stderr)
  subprocess.run(["cmake", "--build", build_dir, "--target", "llama-bench", f"-j{jobs}"], check=True, stdout=sys.stderr)
  return exe


def bench(exe: str, path: str, pp: str, tg: int, reps: int, depth: str = "0") -> dict[str, Any]:
  cmd = [exe, "-m", path, "-ngl", "99", "-fa", "1", "-p", pp, "-n", str(tg), "-r", str(reps), "-d", depth, "-o", "json"]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
  if res.returncode != 0: return {"error": (res.stderr or res.stdout)[-2000:], "cmd": " ".join(cmd)}
  rows = json.loads(res.stdout)
  out: dict[str, Any] = {"cmd": " ".join(cmd)}
  for r in rows:  # one row per test: a prefill of n_prompt tokens (pp) or n_gen decode steps (tg)
    name = f"pp{r['n_prompt']}" if r.get("n_gen", 0) == 0 else f"tg{r['n_gen']}"
    if r.get("n_depth", 0): name += f"_d{r['n_depth']}"  # the test run after a prompt of n_depth tokens: decode at that depth
    out[f"{name}_tok_s"] = round(float(r["avg_ts"]), 1)
    out[f"{name}_stddev"] = round(float(r.get("stddev_ts", 0.0)), 1)
  out["backend"] = rows[0].get("backends") if rows else None
  return out


def synthetic_paths(names: list[str]) -> list[str]:
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from llm_decode import synthetic_name, write_synthetic
  cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tinygrad-bench")
  os.makedirs(cache, exist_ok=True)
  paths = []
  for name in names:
    path = os.path.join(cache, synthetic_name(name))
    if not os.path.exists(path):
      write_synthetic(name, path + ".part")
      os.replace(path + ".part", path)
    paths.append(path)
  return paths


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  sub = ap.add_subparsers(dest="cmd", required=True)
  p = sub.add_parser("prepare", help="download llama-cpp-python's sdist and keep llama.cpp's source, pruned")
  p.add_argument("--out", required=True)
  p.add_argument("--sdist", default=None, help="a downloaded llama_cpp_python-*.tar.gz (default: pip download it)")
  r = sub.add_parser("run", help="build llama-bench and run it on GGUF files")
  r.add_argument("--src", required=True, help="the tree `prepare` wrote")
  r.add_argument("--build", default=None, help="build directory (default: SRC/build)")
  r.add_argument("--models", default="", help="comma-separated GGUF paths")
  r.add_argument("--synthetic", default="", help="comma-separated bench/llm_decode.py synthetic models (llama1b, smollm2, tiny)")
  r.add_argument("--pp", default="64,512")
  r.add_argument("--tg", type=int, default=128)
  r.add_argument("--reps", type=int, default=3)
  r.add_argument("--depth", default="0", help="llama-bench -d: context tokens before each test (e.g. 0,2048: decode at a 2,048-token span too)")
  r.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
  args = ap.parse_args()
  if args.cmd == "prepare": return prepare(args.out, args.sdist)
  paths = [m for m in args.models.split(",") if m] + synthetic_paths([s for s in args.synthetic.split(",") if s])
  if not paths: ap.error("give --models or --synthetic")
  exe = build(args.src, args.build or os.path.join(args.src, "build"), args.jobs)
  print(json.dumps({"benchmark": "llm_peer_llamacpp", "version": VERSION,
                    "models": {os.path.basename(p): bench(exe, p, args.pp, args.tg, args.reps, args.depth) for p in paths}}, indent=1))


if __name__ == "__main__":
  main()
