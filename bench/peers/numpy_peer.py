"""The numpy peer: one workload of bench/workloads.py written with numpy, printed as JSON with the BLAS it used.

bench/common.py runs it in a subprocess with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (set on some machines,
they pin OpenBLAS to a slower kernel), so OpenBLAS picks its kernel for this CPU itself.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from shapes import CONV, MATMUL_SIZES, MLP, N_16M, REDUCE_2D, mlp_flops  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import rate, timeit  # noqa: E402


def rand(*shape: int) -> np.ndarray: return np.random.default_rng(0).random(shape, dtype=np.float32)


def matmul(n: int) -> dict[str, Any]:
  a, b = rand(n, n), rand(n, n)
  return rate(timeit(lambda: a @ b, runs=max(3, 4096 // n * 2)), 2 * n**3, "gflops")


def add() -> dict[str, Any]:
  a, b, c = rand(N_16M), rand(N_16M), np.empty(N_16M, np.float32)
  return rate(timeit(lambda: np.add(a, b, out=c), runs=10), 3 * 4 * N_16M, "gbs")  # out=: no page faults on a fresh result


def sum_() -> dict[str, Any]:
  a = rand(N_16M)
  return rate(timeit(lambda: a.sum(), runs=10), 4 * N_16M, "gbs")


def sum_axis0() -> dict[str, Any]:
  a = rand(REDUCE_2D, REDUCE_2D)
  return rate(timeit(lambda: a.sum(0), runs=10), 4 * REDUCE_2D * REDUCE_2D, "gbs")


def vecmat() -> dict[str, Any]:
  x, w = rand(1, REDUCE_2D), rand(REDUCE_2D, REDUCE_2D)
  return rate(timeit(lambda: x @ w, runs=10), 4 * REDUCE_2D * REDUCE_2D, "gbs")


def softmax() -> dict[str, Any]:
  x = rand(4096, 4096)
  def f() -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)
  return rate(timeit(f, runs=5), 2 * 4 * 4096 * 4096, "gbs")


def conv2d() -> dict[str, Any]:
  bs, cin, cout, hw, k = CONV
  x, w = rand(bs, cin, hw, hw), rand(cout, cin, k, k)
  def f() -> np.ndarray:  # im2col through a strided view, then one BLAS matmul
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))  # bs, cin, hw, hw, k, k
    return np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
  return rate(timeit(f, runs=3, warmup=1), 2 * bs * cout * hw * hw * cin * k * k, "gflops")


def mlp_step() -> dict[str, Any]:
  bs, *sizes = MLP
  rng = np.random.default_rng(0)
  ws = [(rng.uniform(-1, 1, (i, o)) * i**-0.5).astype(np.float32) for i, o in zip(sizes, sizes[1:])]
  bs_ = [np.zeros(o, np.float32) for o in sizes[1:]]
  x, y = rand(bs, sizes[0]), rng.integers(0, sizes[-1], bs)
  lr = np.float32(0.01)

  def step() -> float:
    acts = [x]
    for j, (w, b) in enumerate(zip(ws, bs_)):
      h = acts[-1] @ w + b
      acts.append(np.maximum(h, 0) if j + 1 < len(ws) else h)
    logits = acts[-1]
    e = np.exp(logits - logits.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    loss = -np.log(p[np.arange(bs), y]).mean()
    g = p
    g[np.arange(bs), y] -= 1
    g /= bs
    for j in reversed(range(len(ws))):
      gw, gb = acts[j].T @ g, g.sum(0)
      if j: g = (g @ ws[j].T) * (acts[j] > 0)
      ws[j] -= lr * gw
      bs_[j] -= lr * gb
    return float(loss)

  t = timeit(step, runs=20, warmup=3)
  return {**rate(t, mlp_flops(), "gflops"), "ms": t["best_s"] * 1e3, "ms_median": t["median_s"] * 1e3}


def small_ops(kernels: int = 10, calls: int = 2000) -> dict[str, Any]:
  """For scale next to jit_overhead: numpy's own per-call cost of 10 tiny ops (16 floats)."""
  x = rand(16)
  def f() -> np.ndarray:
    y = x
    for i in range(kernels): y = y * np.float32(1.0001) + np.float32(i)
    return y
  best = timeit(f, runs=calls, warmup=10)["best_s"] * 1e6
  return {"us_per_call": best, "us_per_op": best / kernels}


WORKLOADS: dict[str, Callable[[], dict[str, Any]]] = {
  **{f"matmul_{n}": (lambda n=n: matmul(n)) for n in MATMUL_SIZES},
  "add": add, "sum": sum_, "sum_axis0": sum_axis0, "vecmat": vecmat, "softmax": softmax, "conv2d": conv2d, "mlp_step": mlp_step, "jit_overhead": small_ops,
}


def openblas_corename() -> str | None:
  """The kernel OpenBLAS chose (what threadpoolctl reports as its architecture), read from the loaded library."""
  try:
    with open("/proc/self/maps") as f: libs = {ln.split()[-1] for ln in f if "openblas" in ln.lower()}
  except OSError: return None
  for path in sorted(libs):
    lib = ctypes.CDLL(path)
    for sym in ("openblas_get_corename", "scipy_openblas_get_corename64_", "openblas_get_corename64_"):
      if hasattr(lib, sym):
        fn = getattr(lib, sym)
        fn.restype = ctypes.c_char_p
        return fn().decode()
  return None


def blas_info() -> dict[str, Any]:
  info: dict[str, Any] = {"numpy": np.__version__}
  try:
    from threadpoolctl import threadpool_info  # optional: the most precise answer when installed
    info["threadpools"] = [{k: v for k, v in d.items() if k in ("internal_api", "version", "architecture", "num_threads", "filepath")}
                           for d in threadpool_info()]
  except ImportError:
    try:
      cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[func-returns-value,index]
      info["blas"] = {k: cfg.get(k) for k in ("name", "version")}
    except (TypeError, KeyError): pass
    info["openblas_corename"] = openblas_corename()
  info["env_removed"] = os.environ.get("BENCH_REMOVED_ENV", "")
  return info


def main() -> None:
  which = sys.argv[1]
  if which not in WORKLOADS:
    print(json.dumps({"skipped": f"no numpy equivalent of {which}"}))
    return
  res = WORKLOADS[which]()
  print(json.dumps({**res, **blas_info()}))


if __name__ == "__main__": main()
