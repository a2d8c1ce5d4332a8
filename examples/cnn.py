"""Train a small convolutional network to tell four procedurally drawn shapes apart.

The images are 12x12 grayscale with noise: a horizontal stroke, a vertical stroke, a plus sign, or a diagonal
stroke, each at a random place. The network is two nn.Conv2d + relu + max_pool2d blocks and an nn.Linear
head, trained with nn.optim.Adam. The training step runs under TinyJit (see examples/jit_training.py), so
after two calls every step replays the same compiled kernels; run with JIT=0 to see the eager speed.

  uv run python examples/cnn.py                 # default device (CPU with LLVM)
  DEV=CPU:CLANG uv run python examples/cnn.py   # C kernels through clang
  JIT=0 uv run python examples/cnn.py           # no capture: every step schedules its graph again (minutes)
  DEBUG=2 uv run python examples/cnn.py         # one line per kernel run: name, time, GFLOP/s

DEV=PYTHON runs the same kernels in the interpreter, far too slowly for 200 steps (not past step 40 in five minutes).
"""
import time

import numpy as np
from tinygrad import Device, GlobalCounters, Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters

CLASSES = ("horizontal", "vertical", "plus", "diagonal")
SIZE = 12


def draw(label: int, rng: np.random.Generator) -> np.ndarray:
  """One SIZE x SIZE image of shape `label`, strokes of value ~1 over noise in [0, 0.3)."""
  img = rng.uniform(0.0, 0.3, size=(SIZE, SIZE)).astype(np.float32)
  length = int(rng.integers(6, SIZE + 1))
  r, c = int(rng.integers(0, SIZE)), int(rng.integers(0, SIZE - length + 1))
  if label == 0: img[r, c:c + length] = 1.0
  elif label == 1: img[c:c + length, r] = 1.0
  elif label == 2:
    r, c, h = int(rng.integers(3, SIZE - 3)), int(rng.integers(3, SIZE - 3)), int(rng.integers(2, 4))
    img[r, c - h:c + h + 1] = 1.0
    img[r - h:r + h + 1, c] = 1.0
  else:
    r0, falling = int(rng.integers(0, SIZE - length + 1)), rng.random() < 0.5  # "\\" or "/"
    for i in range(length): img[r0 + i, c + i if falling else c + length - 1 - i] = 1.0
  return img


def make_dataset(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, len(CLASSES), size=n)
  images = np.stack([draw(int(y), rng) for y in labels])[:, None]  # (n, 1, SIZE, SIZE): NCHW
  return images, labels.astype(np.int32)


class ShapeNet:
  def __init__(self):
    self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
    self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
    self.head = nn.Linear(16 * (SIZE // 4) ** 2, len(CLASSES))
    Tensor.realize_all(*get_parameters(self))  # initialize the weights now, not fused into the first step

  def __call__(self, x: Tensor) -> Tensor:
    x = self.conv1(x).relu().max_pool2d(2)  # (n, 8, 6, 6)
    x = self.conv2(x).relu().max_pool2d(2)  # (n, 16, 3, 3)
    return self.head(x.flatten(1))          # (n, 4) logits


def main() -> None:
  Tensor.manual_seed(0)
  x_train, y_train = make_dataset(2048, seed=1)
  x_test, y_test = make_dataset(512, seed=2)
  model = ShapeNet()
  opt = nn.optim.Adam(get_parameters(model), lr=3e-3)

  @TinyJit
  def train_step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss

  rng = np.random.default_rng(3)
  st = time.perf_counter()
  Tensor.training = True  # optimizers refuse to step otherwise
  for step in range(1, 201):
    idx = rng.integers(0, len(x_train), size=64)
    loss = train_step(Tensor(x_train[idx]), Tensor(y_train[idx]))
    if step % 40 == 0: print(f"step {step:3d}  loss {loss.item():.3f}  ({time.perf_counter() - st:.1f} s)")
  Tensor.training = False

  pred = model(Tensor(x_test)).argmax(axis=1).numpy()
  print(f"test accuracy {(pred == y_test).mean():.3f} on {len(y_test)} new images")
  for i, name in enumerate(CLASSES): print(f"  {name:10s} {(pred[y_test == i] == i).mean():.3f}")
  print(f"device {Device.DEFAULT}: {GlobalCounters.kernel_count} kernels in {time.perf_counter() - st:.1f} s")


if __name__ == "__main__":
  main()
