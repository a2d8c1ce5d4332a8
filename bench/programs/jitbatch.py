# TinyJit beyond one step: a training step fed different batches, an eval loop in its own JIT (TRAINING=0, so
# BatchNorm uses running stats), a batch-size change (the captured JIT refuses it; reset() re-captures), inputs passed
# in a list and by keyword, and a dict of outputs
import time

from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters

from bench import data, init


class Net:
  def __init__(self):
    # no bias before a BatchNorm: its gradient is rounding noise, which Adam would blow up to lr-sized steps
    self.l1, self.bn1, self.l2, self.bn2 = nn.Linear(20, 64, bias=False), nn.BatchNorm(64), nn.Linear(64, 64, bias=False), nn.BatchNorm(64)
    self.out = nn.Linear(64, 5)
  def __call__(self, x): return self.out(self.bn2(self.l2(self.bn1(self.l1(x)).relu())).relu())

m = Net(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=2e-3)
xs = [data(10 + i, 32, 20) for i in range(6)]
ys = [data(20 + i, 32, kind="int", hi=5) for i in range(6)]

@TinyJit
def train_step(batch, lr_scale=None):
  x, y = batch
  opt.zero_grad()
  out = m(x) * lr_scale
  loss = out.sparse_categorical_crossentropy(y).backward()
  opt.step()
  return {"loss": loss.realize(), "acc": (out.argmax(-1) == y).float().mean().realize()}

@TinyJit
def eval_step(x, y):
  out = m(x)
  return (out.argmax(-1) == y).sum().realize(), out.sparse_categorical_crossentropy(y, reduction="sum").realize()

one = Tensor([1.0]).realize()
times, hist = [], []
with Context(TRAINING=1):
  for _ in range(3):
    for x, y in zip(xs, ys):
      st = time.perf_counter()
      r = train_step([x, y], lr_scale=one)
      hist.append(round(r["loss"].item(), 4))
      times.append(time.perf_counter() - st)
print("losses", hist[:3], hist[-3:], "acc", round(r["acc"].item(), 4))
print("running_mean", round(m.bn1.running_mean.sum().item(), 4), "running_var", round(m.bn2.running_var.sum().item(), 4),
      "tracked", m.bn1.num_batches_tracked.item())

# eval: 4 batches of 48, then a partial batch of 24 (a new shape)
ex, ey = [data(30 + i, 48, 20) for i in range(4)], [data(40 + i, 48, kind="int", hi=5) for i in range(4)]
tail_x, tail_y = data(50, 24, 20), data(51, 24, kind="int", hi=5)
correct, lsum = 0, 0.0
with Context(TRAINING=0):
  st = time.perf_counter()
  for x, y in zip(ex, ey):
    c, l = eval_step(x, y)
    correct += c.item(); lsum += l.item()
  t_eval = time.perf_counter() - st
  try:
    eval_step(tail_x, tail_y)
    print("shape change: no error")
  except Exception as e: print("shape change raised", type(e).__name__)  # noqa: BLE001  (the two packages' types are printed)
  eval_step.reset()
  for _ in range(3): c, l = eval_step(tail_x, tail_y)
  correct += c.item(); lsum += l.item()
  # the re-captured JIT runs batch 24 only; batch 48 again needs another reset
  eval_step.reset()
  c2, _ = eval_step(ex[0], ey[0])
print("eval correct", correct, "loss", round(lsum / 216, 4), "first batch again", c2.item())

# a JIT whose input is a slice view must get a real buffer (.contiguous()); a view of one buffer twice is refused
@TinyJit
def add(a, b): return (a + b).realize()
base = Tensor.arange(12).float().reshape(3, 4).contiguous().realize()
try:
  for _ in range(3): add(base, base)
  print("duplicate inputs: no error")
except Exception as e: print("duplicate inputs raised", type(e).__name__)  # noqa: BLE001
print(f"jitbatch first {times[0]:.2f}s capture {times[1] + times[2]:.2f}s step {sum(times[3:])/len(times[3:])*1e3:.2f}ms "
      f"chk {sum(hist) + correct + lsum:.4f} eval {t_eval:.2f}s")
