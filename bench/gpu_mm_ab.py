"""fp16/bf16 matmuls on the GPU (BENCH_SIZES square, BENCH_SHAPES MxNxK): variants of our kernel (settings as Context values) and torch, interleaved round by
round in one process, every result checked against torch's. Prints one JSON object (stdout) and a table (stderr).

  PYTHONPATH=packages/core/src:packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA \
    AB="base;persist:TC_PERSIST=1;rolled0:WGMMA_ROLLED=0" BENCH_SIZES=4096,8192 python3 bench/gpu_mm_ab.py

AB: `;`-separated variants `name[:K=V,K=V...]`. Each round times every variant and torch (BENCH_RUNS calls each, one
CUDA-event pair per call) in an order rotated by one each round, so that clock and thermal drift falls on all of them alike;
BENCH_ROUNDS rounds (default 7). Per variant and for torch: the median over every call of every round and each round's
median; the same with BENCH_BATCH calls (default 20) between one pair of events ("batched": the kernels' own time where the
host keeps ahead of the GPU; a single call's events also bracket the host's time to issue it); per variant the max error
against torch relative to torch's largest |value| (inputs N(0, 1)/8), and with AB_SRC=DIR the CUDA source of each kernel
rendered and its ptxas log (registers, spills, C7514 = serialized wgmma) written there.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from gpu_common import emit, header, log, median, time_ours, time_torch  # noqa: E402

# BENCH_SIZES: square n; BENCH_SHAPES: MxNxK (A is M x K, B is K x N), both may be given
SHAPES = [(int(n),) * 3 for n in os.environ.get("BENCH_SIZES", "4096" if "BENCH_SHAPES" not in os.environ else "").split(",") if n]
SHAPES += [tuple(int(x) for x in s.split("x")) for s in os.environ.get("BENCH_SHAPES", "").split(",") if s]
DTYPES = os.environ.get("BENCH_DTYPES", "float16,bfloat16").split(",")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
RUNS = int(os.environ.get("BENCH_RUNS", "10"))
BATCH = int(os.environ.get("BENCH_BATCH", "20"))  # calls between one pair of events for the batched figure
SRC_DIR = os.environ.get("AB_SRC", "")
TOL = {"float16": 2e-2, "bfloat16": 5e-2}


def parse(spec: str) -> list[tuple[str, dict[str, int]]]:
  out = []
  for v in spec.split(";"):
    name, _, kvs = v.strip().partition(":")
    out.append((name, {k: int(x) for k, x in (kv.split("=") for kv in kvs.split(",") if kv)}))
  return out


_sources: list[str] = []  # every CUDA source rendered while a variant is built


def _record_sources() -> None:
  from tinygrad_backend_nv.cuda import CUDARenderer
  orig = CUDARenderer.render

  def render(self, name: str, uops: list) -> str:
    _sources.append(src := orig(self, name, uops))
    return src
  CUDARenderer.render = render  # type: ignore[method-assign]


def _dump(tag: str, srcs: list[str]) -> dict:
  """Each source and its ptxas log into SRC_DIR; the log's verdict (registers, spills, serialized wgmma) back."""
  import re

  from tinygrad import Device
  from tinygrad_backend_nv.compiler import NVRTCCompiler
  arch = Device.renderer(Device.DEFAULT).arch
  info: dict = {}
  for n, src in enumerate(srcs):
    try: log_txt = NVRTCCompiler(arch, ("--ptxas-options=-v",)).compile_log(src)
    except Exception as e:  # noqa: BLE001  the log is a report, not a requirement
      log_txt = f"compile_log failed: {type(e).__name__}: {e}"
    if SRC_DIR:
      with open(os.path.join(SRC_DIR, f"{tag}_{n}.cu"), "w") as f: f.write(src)
      with open(os.path.join(SRC_DIR, f"{tag}_{n}.log"), "w") as f: f.write(log_txt)
    regs = re.findall(r"Used (\d+) registers", log_txt)
    spill = re.findall(r"(\d+) bytes spill stores", log_txt)
    info[f"kernel{n}"] = {"registers": int(regs[-1]) if regs else None, "spill_bytes": int(spill[-1]) if spill else None,
                          "serialized_C7514": "C7514" in log_txt}
  return info


def bench(shape: tuple[int, ...], dtname: str, variants: list[tuple[str, dict[str, int]]]) -> dict:
  import torch
  from tinygrad import Context, Tensor, TinyJit, dtypes
  from tinygrad.engine import realize
  dt, tdt = getattr(dtypes, dtname), getattr(torch, dtname)
  M, N, K = shape
  rng = np.random.default_rng(M * 7 + N * 3 + K)
  a_np = rng.standard_normal((M, K), dtype=np.float32) / 8
  b_np = rng.standard_normal((K, N), dtype=np.float32) / 8
  a, b = Tensor(a_np).cast(dt).contiguous().realize(), Tensor(b_np).cast(dt).contiguous().realize()
  ta, tb = torch.from_numpy(a_np).cuda().to(tdt), torch.from_numpy(b_np).cuda().to(tdt)
  ref = (ta @ tb).float().cpu().numpy()
  scale = max(float(np.abs(ref).max()), 1e-30)
  fns, res = {}, {}
  for name, ctx in variants:
    del _sources[:]
    realize._runner_cache.clear()  # a renderer-only setting (WGMMA_ROLLED) is not in the in-process runner key
    with Context(**ctx):
      @TinyJit
      def mm(x: Tensor, y: Tensor) -> Tensor: return (x @ y).realize()
      out = mm(a, b)
      mm(a, b)
      got = mm(a, b).float().numpy()  # a replay of the captured kernels: what is timed is what is checked
    err = float(np.abs(got - ref).max() / scale)
    del out
    fns[name] = mm
    res[name] = {"settings": ctx, "max_rel_err": err, "ok": err <= TOL[dtname], "calls_ms": [], "round_ms": [],
                 "kernels": _dump(f"{M}x{N}x{K}_{dtname}_{name}", list(_sources))}
    log(f"{M}x{N}x{K} {dtname} {name}: err {err:.2e} {res[name]['kernels']}")
  res["torch"] = {"calls_ms": [], "round_ms": [], "batched_ms": []}
  for name in fns: res[name]["batched_ms"] = []
  order = [*fns, "torch"]
  for r in range(ROUNDS):
    for name in order[r % len(order):] + order[:r % len(order)]:
      fn = (lambda: ta @ tb) if name == "torch" else (lambda f=fns[name]: f(a, b))
      timer = time_torch if name == "torch" else time_ours
      ms = [x * 1e3 for x in timer(fn, warmup=1, runs=RUNS)]
      res[name]["calls_ms"] += ms
      res[name]["round_ms"].append(median(ms))
      res[name]["batched_ms"] += [x * 1e3 for x in timer(fn, warmup=0, runs=2, batch=BATCH)]
  flop = 2 * M * N * K
  for v in res.values():
    v["ms"], v["batched_ms_median"] = median(v["calls_ms"]), median(v["batched_ms"])
    v["tflops"], v["batched_tflops"] = flop / v["ms"] / 1e9, flop / v["batched_ms_median"] / 1e9
    v["round_tflops"] = [flop / x / 1e9 for x in v["round_ms"]]
  for name in fns:
    res[name]["ratio"] = res[name]["tflops"] / res["torch"]["tflops"]
    res[name]["batched_ratio"] = res[name]["batched_tflops"] / res["torch"]["batched_tflops"]
  def fmt(k: str, v: dict) -> str:
    if k == "torch": return f"torch {v['tflops']:.1f} / {v['batched_tflops']:.1f}"
    return f"{k} {v['tflops']:.1f} / {v['batched_tflops']:.1f} ({v['ratio']:.3f} / {v['batched_ratio']:.3f}{'' if v['ok'] else ' WRONG'})"
  log(f"matmul {M}x{N}x{K} {dtname} (single call / batched of {BATCH}): " + ", ".join(fmt(k, v) for k, v in res.items()))
  return {"n": M if M == N == K else None, "shape": [M, N, K], "dtype": dtname, "variants": res}


def main() -> None:
  _record_sources()
  variants = parse(os.environ.get("AB", "base"))
  if SRC_DIR: os.makedirs(SRC_DIR, exist_ok=True)
  result = {"bench": "gpu_mm_ab", **header(), "rounds": ROUNDS, "runs_per_round": RUNS, "unit": "TFLOP/s", "cases": []}
  for shape in SHAPES:
    for dtname in DTYPES:
      try: result["cases"].append(bench(shape, dtname, variants))
      except Exception as e:  # noqa: BLE001  one failing case is reported and the others still run
        log(f"matmul {shape} {dtname} failed: {type(e).__name__}: {e}")
        result["cases"].append({"shape": list(shape), "dtype": dtname, "error": f"{type(e).__name__}: {str(e)[:2000]}"})
  emit(result)


if __name__ == "__main__":
  main()
