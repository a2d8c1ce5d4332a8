"""TinyJit on a training step: what capture costs, what replay saves, and that replay runs the same kernels.

An MLP learns to classify points by the quadrant they fall in, with nn.optim.SGD (momentum). The same step
function runs twice: first eagerly (every call builds, schedules and looks up the kernels of a fresh graph
in Python), then under @TinyJit:

  call 1  runs like the eager step (and compiles anything new),
  call 2  runs again while recording every kernel it launches (the capture),
  call 3+ replays the recorded kernels on the new input buffers: no graph, no scheduling.

GlobalCounters.kernel_count, reset before each call, shows the kernels per step: the same number eagerly,
while capturing, and on every replay (call 1 also runs the kernels that fill the optimizer's momentum buffers).

  uv run python examples/jit_training.py                 # default device (CPU with LLVM)
  DEV=CPU:CLANG uv run python examples/jit_training.py   # C kernels through clang
  JIT=0 uv run python examples/jit_training.py           # TinyJit turned off: the "jit" steps run eagerly too
  DEBUG=1 uv run python examples/jit_training.py         # also prints what each capture recorded
"""
import time

import numpy as np
from tinygrad import Device, GlobalCounters, Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters


class MLP:
  def __init__(self, hidden: int = 64):
    self.l1, self.l2, self.l3 = nn.Linear(2, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 4)
    Tensor.realize_all(*get_parameters(self))  # initialize now, not inside the first step

  def __call__(self, x: Tensor) -> Tensor: return self.l3(self.l2(self.l1(x).relu()).relu())


def quadrants(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
  x = rng.uniform(-1, 1, size=(n, 2)).astype(np.float32)
  return x, ((x[:, 0] < 0) * 1 + (x[:, 1] < 0) * 2).astype(np.int32)  # quadrant 0..3


def make_step(model: MLP, opt: nn.optim.Optimizer):
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss
  return step


def run(step, label: str, calls: int, rng: np.random.Generator) -> list[float]:
  """Call `step` on fresh batches; print time and kernels of the first calls, return every call's time."""
  times = []
  for i in range(1, calls + 1):
    x, y = quadrants(128, rng)
    xt, yt = Tensor(x).realize(), Tensor(y).realize()  # inputs ready before the clock starts
    GlobalCounters.reset()
    st = time.perf_counter()
    loss = step(xt, yt)
    loss_value = loss.item()  # the step has run once its loss is back on the host
    times.append(time.perf_counter() - st)
    if i <= 4 or i == calls:
      print(f"  {label} call {i:3d}: {times[-1] * 1e3:8.2f} ms  {GlobalCounters.kernel_count:3d} kernels  loss {loss_value:.4f}")
  return times


def main() -> None:
  Tensor.manual_seed(0)
  Tensor.training = True
  rng = np.random.default_rng(0)

  print("eager (no TinyJit):")
  model = MLP()
  eager = run(make_step(model, nn.optim.SGD(get_parameters(model), lr=0.05, momentum=0.9)), "eager", 12, rng)

  print("TinyJit:")
  model = MLP()
  jit_step = TinyJit(make_step(model, nn.optim.SGD(get_parameters(model), lr=0.05, momentum=0.9)))
  jitted = run(jit_step, "jit  ", 300, rng)

  x, y = quadrants(1000, rng)
  Tensor.training = False
  acc = (model(Tensor(x)).argmax(axis=1).numpy() == y).mean()
  print(f"accuracy after {len(jitted)} jitted steps: {acc:.3f}")
  print(f"median step: eager {np.median(eager[5:]) * 1e3:.2f} ms, replayed {np.median(jitted[5:]) * 1e3:.2f} ms "
        f"({np.median(eager[5:]) / np.median(jitted[5:]):.1f}x) on {Device.DEFAULT}")


if __name__ == "__main__":
  main()
