"""One rank of a collectives check, run N times by mpirun or tinygrad.distributed.launch (see test_mpi.py and
run_on_gpus.sh): every collective against numpy, for a few dtypes and shapes, eagerly and replayed by TinyJit.
Exits non-zero on the first mismatch; prints `rank R: N checks passed` at the end."""
from __future__ import annotations

import sys

import numpy as np
import tinygrad.distributed as dist
from tinygrad import Tensor, TinyJit, dtypes


def value(rank: int, shape: tuple[int, ...], dtype: np.dtype, salt: int = 0) -> np.ndarray:
  """What rank `rank` contributes: distinct per rank, exact in every dtype tested."""
  n = int(np.prod(shape)) if shape else 1
  return ((np.arange(n) * 7 + rank * 13 + salt) % 23 - 5).astype(dtype).reshape(shape)


def main() -> int:
  backend = sys.argv[1] if len(sys.argv) > 1 else None
  if backend == "store":  # the test backend (store_backend.py): the launcher + TCP store path without a GPU
    from store_backend import register
    register()
    backend = None  # picked as the default for this device kind, as NCCL is for CUDA
  dist.init(backend=backend)
  r, w, dev = dist.rank(), dist.world_size(), dist.device()
  checks = 0

  def expect(name: str, got: Tensor, want: np.ndarray) -> None:
    nonlocal checks
    g = got.numpy()
    if g.shape != want.shape or not np.array_equal(g, want):
      print(f"rank {r}: {name} on {dev}: got {g.ravel()[:8]} shape {g.shape}, want {want.ravel()[:8]} shape {want.shape}", flush=True)
      raise SystemExit(1)
    checks += 1

  for dtype in (np.float32, np.int32):
    for shape in ((1,), (5, 3), (w * 4, 257)):
      parts = [value(k, shape, dtype) for k in range(w)]
      x = Tensor(parts[r], device=dev)
      expect(f"all_reduce sum {dtype.__name__} {shape}", dist.all_reduce(x), np.sum(parts, axis=0).astype(dtype))
      expect(f"all_reduce max {shape}", dist.all_reduce(x, "max"), np.max(parts, axis=0))
      expect(f"all_reduce min {shape}", dist.all_reduce(x, "min"), np.min(parts, axis=0))
      expect(f"all_gather {shape}", dist.all_gather(x), np.concatenate(parts, axis=0))
      expect(f"broadcast from {w - 1} {shape}", dist.broadcast(x, src=w - 1), parts[w - 1])
      if shape[0] % w == 0:
        chunk = shape[0] // w
        expect(f"reduce_scatter {shape}", dist.reduce_scatter(x), np.sum(parts, axis=0).astype(dtype)[r * chunk:(r + 1) * chunk])
  # a lazy input (x * 2 + 1 is computed first), and the result used by a kernel after it
  parts = [value(k, (6,), np.float32) for k in range(w)]
  y = dist.all_reduce(Tensor(parts[r], device=dev) * 2 + 1) - 1
  expect("lazy input", y, np.sum([p * 2 + 1 for p in parts], axis=0) - 1)
  dist.barrier()

  # TinyJit: the collective is captured between the kernels around it and replays on each call's new input
  @TinyJit
  def step(a: Tensor) -> Tensor:
    s = dist.all_reduce(a * 2)
    return (dist.all_gather(s + 1) * 3).realize()
  for i in range(4):
    parts = [value(k, (4, 5), np.float32, salt=i) for k in range(w)]
    want = np.concatenate([(np.sum(parts, axis=0) * 2 + 1) * 3] * w, axis=0)
    expect(f"jit call {i}", step(Tensor(parts[r], device=dev)), want)
  assert step.cnt >= 2 and step.captured, "the jitted step was not captured"

  @TinyJit
  def direct(a: Tensor) -> Tensor: return dist.all_reduce(a, "max")  # the argument goes straight in: replays use each call's buffer
  for i in range(4):
    parts = [value(k, (3,), np.float32, salt=i) for k in range(w)]
    expect(f"jit direct input {i}", direct(Tensor(parts[r], device=dev)), np.max(parts, axis=0))
  expect("scalar after jit", dist.all_reduce(Tensor([1.0], device=dev, dtype=dtypes.float32)), np.array([w], np.float32))
  boot = type(dist.group().bootstrap.impl).__name__  # NoneType: the backend never needed one (MPI)
  # one write of the whole line (print writes text and newline apart when stdout is unbuffered): mpiexec merges
  # ranks' output, and a line written in one piece below PIPE_BUF stays whole
  sys.stdout.write(f"rank {r}: {checks} checks passed ({dist.group().backend} on {dev}, world {w}, bootstrap {boot})\n")
  sys.stdout.flush()
  dist.destroy()
  return 0


if __name__ == "__main__": sys.exit(main())
