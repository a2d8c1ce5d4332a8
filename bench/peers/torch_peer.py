"""The torch peer (when torch is installed): one workload of bench/workloads.py with torch on the CPU, as JSON."""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from shapes import CONV, MATMUL_SIZES, MLP, N_16M, REDUCE_2D, mlp_flops  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import rate, timeit  # noqa: E402


def workloads(torch: Any) -> dict[str, Callable[[], dict[str, Any]]]:
  F = torch.nn.functional

  def matmul(n: int) -> dict[str, Any]:
    a, b = torch.rand(n, n), torch.rand(n, n)
    return rate(timeit(lambda: a @ b, runs=max(3, 4096 // n * 2)), 2 * n**3, "gflops")

  def add() -> dict[str, Any]:
    a, b, c = torch.rand(N_16M), torch.rand(N_16M), torch.empty(N_16M)
    return rate(timeit(lambda: torch.add(a, b, out=c), runs=10), 3 * 4 * N_16M, "gbs")

  def sum_() -> dict[str, Any]:
    a = torch.rand(N_16M)
    return rate(timeit(lambda: a.sum(), runs=10), 4 * N_16M, "gbs")

  def sum_axis0() -> dict[str, Any]:
    a = torch.rand(REDUCE_2D, REDUCE_2D)
    return rate(timeit(lambda: a.sum(0), runs=10), 4 * REDUCE_2D * REDUCE_2D, "gbs")

  def vecmat() -> dict[str, Any]:
    x, w = torch.rand(1, REDUCE_2D), torch.rand(REDUCE_2D, REDUCE_2D)
    return rate(timeit(lambda: x @ w, runs=10), 4 * REDUCE_2D * REDUCE_2D, "gbs")

  def softmax() -> dict[str, Any]:
    x = torch.rand(4096, 4096)
    return rate(timeit(lambda: x.softmax(1), runs=5), 2 * 4 * 4096 * 4096, "gbs")

  def conv2d() -> dict[str, Any]:
    bs, cin, cout, hw, k = CONV
    x, w = torch.rand(bs, cin, hw, hw), torch.rand(cout, cin, k, k)
    return rate(timeit(lambda: F.conv2d(x, w, padding=1), runs=3, warmup=1), 2 * bs * cout * hw * hw * cin * k * k, "gflops")

  def mlp_step() -> dict[str, Any]:
    bs, *sizes = MLP
    torch.manual_seed(0)
    params = []
    for i, o in zip(sizes, sizes[1:]): params += [((torch.rand(i, o) * 2 - 1) * i**-0.5).requires_grad_(), torch.zeros(o, requires_grad=True)]
    x, y = torch.rand(bs, sizes[0]), torch.randint(0, sizes[-1], (bs,))
    def step() -> None:
      h = x
      for j in range(0, len(params), 2):
        h = h @ params[j] + params[j + 1]
        if j + 2 < len(params): h = h.relu()
      F.cross_entropy(h, y).backward()
      with torch.no_grad():
        for p in params:
          p -= 0.01 * p.grad
          p.grad = None
    t = timeit(step, runs=20, warmup=3)
    return {**rate(t, mlp_flops(), "gflops"), "ms": t["best_s"] * 1e3, "ms_median": t["median_s"] * 1e3}

  return {**{f"matmul_{n}": (lambda n=n: matmul(n)) for n in MATMUL_SIZES},
          "add": add, "sum": sum_, "sum_axis0": sum_axis0, "vecmat": vecmat, "softmax": softmax, "conv2d": conv2d, "mlp_step": mlp_step}


def main() -> None:
  import torch
  which = sys.argv[1]
  table = workloads(torch)
  if which not in table:
    print(json.dumps({"skipped": f"no torch equivalent of {which}"}))
    return
  print(json.dumps({**table[which](), "version": torch.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__": main()
