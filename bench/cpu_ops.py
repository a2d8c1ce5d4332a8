"""Benchmark: common tensor ops on the CPU against numpy in the same process, to find the ones far off (a column sum ran 15x
behind numpy, a row gather 140x, before session 12). Each op under TinyJit (warm), numpy's equivalent alternating with it
round by round (each timed call after an untimed one, 0.15 s apart); best of 7 each; every result checked against numpy's. One JSON line: ms per call and numpy / ours.

  PYTHONPATH=packages/core/src:packages/backend-cpu/src python bench/cpu_ops.py [NAME ...]
"""
import json
import os
import sys
import time

import numpy as np
from tinygrad import Tensor, TinyJit

N = int(os.getenv("OPS_N", "2048"))
SETTLE_S = float(os.getenv("SETTLE_S", "0.15"))


def cases() -> dict:
  rng = np.random.default_rng(0)
  A, B = rng.random((N, N), dtype=np.float32), rng.random((N, N), dtype=np.float32)
  V, I = rng.random((1, N), dtype=np.float32), rng.integers(0, N, 2 * N).astype(np.int32)
  X4 = rng.random((32, 64, 32, 32), dtype=np.float32)
  S = rng.random(1 << 16, dtype=np.float32)
  a, b, v, i, x4, s = (Tensor(z).realize() for z in (A, B, V, I, X4, S))
  def softmax0(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(0))
    return e / e.sum(0)
  return {
    "sum axis 0": (lambda: a.sum(0), lambda: A.sum(0)), "sum axis 1": (lambda: a.sum(1), lambda: A.sum(1)),
    "max axis 0": (lambda: a.max(0), lambda: A.max(0)), "var axis 0": (lambda: a.var(0), lambda: A.var(0, ddof=1)),
    "argmax axis 1": (lambda: a.argmax(1), lambda: A.argmax(1)), "softmax axis 0": (lambda: a.softmax(0), lambda: softmax0(A)),
    "v @ a": (lambda: v @ a, lambda: V @ A), "a.T @ b": (lambda: a.T @ b, lambda: A.T @ B), "a @ b.T": (lambda: a @ b.T, lambda: A @ B.T),
    "a[idx] (rows)": (lambda: a[i], lambda: A[I]), "cumsum axis 1": (lambda: a.cumsum(1), lambda: A.cumsum(1)),
    "cumsum axis 0": (lambda: a.cumsum(0), lambda: A.cumsum(0)), "transpose copy": (lambda: a.T.contiguous(), lambda: np.ascontiguousarray(A.T)),
    "exp": (lambda: a.exp(), lambda: np.exp(A)), "where": (lambda: (a > 0.5).where(a, b), lambda: np.where(A > 0.5, A, B)),
    "mean over N,H,W": (lambda: x4.mean((0, 2, 3)), lambda: X4.mean((0, 2, 3))),
    "max_pool2d 2": (lambda: x4.max_pool2d(2), lambda: X4.reshape(32, 64, 16, 2, 16, 2).max((3, 5))),
    "sort 65536": (lambda: s.sort()[0], lambda: np.sort(S, kind="stable")),
    "topk 64 of 2048 (64 rows)": (lambda: a[:64].topk(64)[0], lambda: -np.sort(-A[:64], axis=1, kind="stable")[:, :64]),
  }


def main() -> None:
  want = sys.argv[1:]
  out: dict = {"benchmark": "cpu_ops", "n": N, "loadavg": os.getloadavg(), "ops": {}}
  for name, (ours, ref) in cases().items():
    if want and name not in want: continue
    f = TinyJit(lambda ours=ours: ours().realize())
    for _ in range(3): f()
    ok = bool(np.allclose(f().numpy(), ref(), rtol=1e-3, atol=1e-3))
    to, tn = [], []
    for _ in range(7):
      # each side's timed call follows an untimed one of its own, and a pause lets the other's threads go idle: numpy's
      # OpenBLAS threads spin about 0.1 s after a call, and ran on the core our next call needed (a @ b.T read 0.5x that way)
      f(); t = time.perf_counter(); f(); to.append(time.perf_counter() - t)
      time.sleep(SETTLE_S)
      ref(); t = time.perf_counter(); ref(); tn.append(time.perf_counter() - t)
      time.sleep(SETTLE_S)
    out["ops"][name] = {"ours_ms": round(min(to) * 1e3, 3), "numpy_ms": round(min(tn) * 1e3, 3), "ratio": round(min(tn) / min(to), 3), "ok": ok}
  out["loadavg_end"] = os.getloadavg()
  print(json.dumps(out))


if __name__ == "__main__": main()
