"""One TinyJit capture for every position: a bound symbolic Variable is a kernel parameter, not a constant.

A TinyJit replays fixed kernels, so a plain Python int used inside a jitted function is frozen at its captured
value. A Variable bound to a value (`Variable("pos", 0, 63).bind(5)`) instead reaches the kernels as an int
argument: the captured kernels take it, and each replay passes the new value.

Here the Variable picks *positions* inside fixed-size buffers (masks built from `Tensor(var)`), which keeps
every shape static:

  1. a running mean over a window that grows by one element per call (and, for contrast, the same
     function taking a plain int, which the capture freezes);
  2. a KV-cache decode step: write this step's key/value row at `pos`, then attend over rows 0..pos.

  uv run python examples/symbolic_jit.py                 # default device (CPU with LLVM)
  DEV=CPU:CLANG uv run python examples/symbolic_jit.py   # C kernels through clang
  DEV=PYTHON uv run python examples/symbolic_jit.py      # the UOp interpreter
  DEV=CPU:CLANG DEBUG=4 uv run python examples/symbolic_jit.py   # C sources: see `int var0 /* pos */`
"""
import math

import numpy as np
from tinygrad import GlobalCounters, Tensor, TinyJit, Variable, dtypes

N = 64      # the longest window / the cache length
D = 16      # head size


def running_mean() -> None:
  data = Tensor(np.arange(N, dtype=np.float32) ** 0.5).realize()
  positions = Tensor.arange(N, dtype=dtypes.int32).realize()

  @TinyJit
  def window_mean(x: Tensor, n) -> Tensor:
    # mean of x[:n]: a mask instead of a slice, so the shapes don't depend on n
    return (positions < Tensor(n)).where(x, 0.0).sum() / Tensor(n).cast(dtypes.float32)

  n_var = Variable("n", 1, N)
  print("running mean of sqrt(0..n-1): call 1 runs, call 2 (n=2) captures, the rest replay that capture")
  print("   mask kernel for n=3 takes", (positions < Tensor(n_var.bind(3))).where(data, 0.0).sum().schedule()[-1].var_vals)
  for n in (1, 2, 3, 10, 40, 64):
    GlobalCounters.reset()
    got = window_mean(data, n_var.bind(n)).item()
    want = float(np.mean(np.arange(n) ** 0.5))
    print(f"   n={n:2d}  {got:8.5f}  (numpy {want:8.5f})  kernels {GlobalCounters.kernel_count}")

  @TinyJit
  def window_mean_int(x: Tensor, n: int) -> Tensor:  # the same function with a plain int: frozen by the capture
    return (positions < n).where(x, 0.0).sum() / n
  print("the same with a plain Python int (captured at n=2, so every later call still computes n=2):")
  for n in (1, 2, 3, 10):
    print(f"   n={n:2d}  {window_mean_int(data, n).item():8.5f}  (numpy {float(np.mean(np.arange(n) ** 0.5)):8.5f})")


def kv_cache_decode() -> None:
  rng = np.random.default_rng(0)
  cache_k = Tensor.zeros(N, D).contiguous().realize()
  cache_v = Tensor.zeros(N, D).contiguous().realize()
  rows = Tensor.arange(N, dtype=dtypes.int32).realize()

  @TinyJit
  def decode(q: Tensor, k: Tensor, v: Tensor, pos) -> Tensor:
    p = Tensor(pos)
    slot = (rows == p).reshape(N, 1)                        # one-hot row `pos`
    cache_k.assign(slot.where(k.reshape(1, D), cache_k))     # write this step's key and value in place
    cache_v.assign(slot.where(v.reshape(1, D), cache_v))
    scores = (cache_k @ q) * (1 / math.sqrt(D))              # (N,)
    weights = (rows <= p).where(scores, -math.inf).softmax()  # only rows 0..pos are filled
    return weights @ cache_v

  pos_var = Variable("pos", 0, N - 1)
  ks, vs = [], []
  worst, counts = 0.0, set()
  for pos in range(N):
    q, k, v = (rng.standard_normal(D).astype(np.float32) for _ in range(3))
    ks.append(k)
    vs.append(v)
    GlobalCounters.reset()
    out = decode(Tensor(q), Tensor(k), Tensor(v), pos_var.bind(pos)).numpy()
    counts.add(GlobalCounters.kernel_count)
    s = np.stack(ks) @ q / math.sqrt(D)
    w = np.exp(s - s.max())
    want = (w / w.sum()) @ np.stack(vs)
    worst = max(worst, float(np.abs(out - want).max()))
  print(f"KV-cache decode, {N} positions with one capture: kernels per step {sorted(counts)}, "
        f"max |error| vs numpy {worst:.2e}")


if __name__ == "__main__":
  running_mean()
  kv_cache_decode()
