"""Train a small MLP on generated data: every op below runs as a kernel our compiler generated.

  uv run python examples/mlp.py                 # default device (CPU with LLVM)
  DEV=CPU:CLANG uv run python examples/mlp.py   # C through clang
  DEV=PYTHON uv run python examples/mlp.py      # the UOp interpreter (slow, exact)
  DEBUG=2 uv run python examples/mlp.py         # one line per kernel: name, time, GFLOP/s
  VIZ=1 uv run python examples/mlp.py           # every kernel's rewrites, source and a timeline in the browser (docs/viz.md)
"""
import math
import time

from tinygrad import Device, GlobalCounters, Tensor


def make_data(n: int) -> tuple[Tensor, Tensor]:
  """Two interleaved spirals: not linearly separable, so the hidden layer has to work."""
  t = Tensor.rand(n) * 3 * math.pi
  label = (Tensor.rand(n) < 0.5)
  sign = label.where(1.0, -1.0)
  x = (sign * t * t.cos() / 10).reshape(n, 1).pad(((0, 0), (0, 1))) + (sign * t * t.sin() / 10).reshape(n, 1).pad(((0, 0), (1, 0)))
  return x.realize(), label.cast("int32").realize()


class MLP:
  def __init__(self, hidden: int = 64):
    self.w1, self.b1 = Tensor.kaiming_uniform(2, hidden, requires_grad=True), Tensor.zeros(hidden, requires_grad=True)
    self.w2, self.b2 = Tensor.kaiming_uniform(hidden, hidden, requires_grad=True), Tensor.zeros(hidden, requires_grad=True)
    self.w3, self.b3 = Tensor.kaiming_uniform(hidden, 2, requires_grad=True), Tensor.zeros(2, requires_grad=True)
    self.params = [self.w1, self.b1, self.w2, self.b2, self.w3, self.b3]
    for p in self.params: p.realize()

  def __call__(self, x: Tensor) -> Tensor:
    x = (x @ self.w1 + self.b1).relu()
    x = (x @ self.w2 + self.b2).relu()
    return x @ self.w3 + self.b3


def main() -> None:
  Tensor.manual_seed(42)
  x, y = make_data(512)
  model = MLP()
  lr = 0.1
  st = time.perf_counter()
  for step in range(301):
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    # all updates in one schedule: every gradient is computed before any weight is overwritten
    Tensor.realize_all(*[p.assign(p - lr * p.grad) for p in model.params])
    for p in model.params: p.grad = None
    if step % 50 == 0:
      acc = (model(x).argmax(axis=1) == y).cast("float32").mean().item()
      print(f"step {step:3d}  loss {loss.item():.4f}  accuracy {acc:.3f}")
  print(f"device {Device.DEFAULT}: {GlobalCounters.kernel_count} kernels in {time.perf_counter() - st:.1f} s")


if __name__ == "__main__":
  main()
