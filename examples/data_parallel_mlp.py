"""Data-parallel training of a small MLP over several processes with tinygrad.distributed.

Every rank holds the whole model and trains on its slice of each global batch; the gradients are averaged over the
ranks (one all-reduce per step) before the optimizer step, so the weights equal one process training on the whole
global batch (same seed, same data), up to float rounding.

  python examples/data_parallel_mlp.py                                        # one process: the reference
  mpirun -n 2 python examples/data_parallel_mlp.py                            # CPU, MPI
  python -m tinygrad.distributed.launch -n 2 examples/data_parallel_mlp.py    # one process per GPU (DEV=CUDA): NCCL
  torchrun --nproc-per-node 2 examples/data_parallel_mlp.py                   # the same with torch's launcher

--out weights.npz saves the final weights (rank 0) for comparison; the last line printed is a JSON summary.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
from tinygrad import Device, Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters

LAUNCHED = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")  # set by torchrun/our launcher, Open MPI, MPICH


class MLP:
  def __init__(self, n_in: int, hidden: int, n_out: int):
    self.l1, self.l2, self.l3 = nn.Linear(n_in, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, n_out)

  def __call__(self, x: Tensor) -> Tensor: return self.l3(self.l2(self.l1(x).relu()).relu())


def dataset(n: int, n_in: int, n_out: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Points labelled by a fixed random linear map (learnable, so the loss goes down)."""
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((n, n_in)).astype(np.float32)
  y = (x @ rng.standard_normal((n_in, n_out))).argmax(axis=1).astype(np.int32)
  return x, y


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--steps", type=int, default=20)
  ap.add_argument("--batch", type=int, default=64, help="the global batch: each of N ranks trains on batch/N samples")
  ap.add_argument("--hidden", type=int, default=64)
  ap.add_argument("--lr", type=float, default=0.05)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--no-jit", action="store_true", help="run every step eagerly instead of replaying a TinyJit capture")
  ap.add_argument("--out", default=None, help="save the final weights here (.npz, rank 0)")
  args = ap.parse_args()

  distributed = any(int(os.environ.get(v, "1")) > 1 for v in LAUNCHED)
  if distributed:
    import tinygrad.distributed as dist
    dist.init()  # NCCL for a GPU default device (GPU LOCAL_RANK), MPI otherwise
    rank, world, device = dist.rank(), dist.world_size(), dist.device()
  else: rank, world, device = 0, 1, Device.DEFAULT
  if args.batch % world: raise SystemExit(f"--batch {args.batch} must split evenly over {world} ranks")

  n_in, n_out = 16, 4
  Tensor.manual_seed(args.seed)
  model = MLP(n_in, args.hidden, n_out)
  params = get_parameters(model)
  rng = np.random.default_rng(args.seed)  # initial weights from numpy: identical on every rank and device
  for p in params: p.replace(Tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32), device=device)).requires_grad_(True).realize()
  opt = nn.optim.SGD(params, lr=args.lr, momentum=0.9)

  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)  # the mean over this rank's slice
    loss.backward()
    if world > 1:
      dist.average_gradients(params)  # equal slices: the mean of the ranks' means is the global batch's mean
      loss = dist.all_reduce(loss) / world
    return loss.realize(*opt.schedule_step())

  run = step if args.no_jit else TinyJit(step)
  xs, ys = dataset(args.steps * args.batch, n_in, n_out, args.seed + 1)
  local = args.batch // world
  losses = []
  Tensor.training = True
  for i in range(args.steps):
    lo = i * args.batch + rank * local
    losses.append(run(Tensor(xs[lo:lo + local], device=device), Tensor(ys[lo:lo + local], device=device)).item())
  weights = [p.numpy() for p in params]
  if rank == 0:
    if args.out: np.savez(args.out, *weights)
    print(json.dumps({"world_size": world, "device": device, "steps": args.steps, "first_loss": losses[0], "last_loss": losses[-1]}))
  if distributed: dist.destroy()


if __name__ == "__main__": main()
