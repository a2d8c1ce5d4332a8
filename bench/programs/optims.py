# every optimizer tinygrad ships (SGD plain / momentum / nesterov / weight decay, AdamW, LAMB, LARS, Muon), an
# OptimizerGroup over two of them, gradient clipping by global norm done by hand, and a learning-rate schedule by
# assigning opt.lr between jitted steps
import math
import time

from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters

from bench import data, init, report


class Net:
  def __init__(self): self.l1, self.l2, self.l3 = nn.Linear(32, 64), nn.Linear(64, 64, bias=False), nn.Linear(64, 8)
  def __call__(self, x): return self.l3(self.l2(self.l1(x).gelu()).relu())

X, Y = data(1, 64, 32), data(2, 64, kind="int", hi=8)
def clip_(params, max_norm):
  # global-norm clipping written by hand, the way tinygrad's examples do it
  total = Tensor.stack(*[p.grad.square().sum() for p in params]).sum().sqrt()
  scale = (max_norm / (total + 1e-6)).minimum(1.0)
  for p in params: p.grad = p.grad * scale
  return total
def train(make_opt, steps=6, clip=None, sched=None):
  m = Net(); init(m)
  opt = make_opt(m)
  @TinyJit
  def step(x, y):
    opt.zero_grad()
    loss = m(x).sparse_categorical_crossentropy(y).backward()
    gn = clip_(opt.params, clip) if clip is not None else loss
    opt.step()
    return loss.realize(), gn.realize()
  losses, ts = [], []
  with Context(TRAINING=1):
    for i in range(steps):
      st = time.perf_counter()
      if sched is not None:
        opts = opt.optimizers if isinstance(opt, nn.optim.OptimizerGroup) else [opt]
        for o in opts: o.lr.assign(Tensor([sched(i)])).realize()
      loss, gn = step(X, Y)
      losses.append(loss.item())
      ts.append(time.perf_counter() - st)
  times.append(ts)
  wsum = sum(p.abs().sum().item() for p in get_parameters(m))
  return losses, wsum

times = []
cosine = lambda i: 0.05 * 0.5 * (1 + math.cos(math.pi * i / 6))
cases = {
  "sgd": lambda m: nn.optim.SGD(get_parameters(m), lr=0.05),
  "sgd_mom_wd": lambda m: nn.optim.SGD(get_parameters(m), lr=0.05, momentum=0.9, weight_decay=1e-3),
  "sgd_nesterov": lambda m: nn.optim.SGD(get_parameters(m), lr=0.05, momentum=0.9, nesterov=True),
  "sgd_classic": lambda m: nn.optim.SGD(get_parameters(m), lr=0.05, momentum=0.8, classic=True),
  "adamw": lambda m: nn.optim.AdamW(get_parameters(m), lr=3e-3, weight_decay=0.1),
  "lamb": lambda m: nn.optim.LAMB(get_parameters(m), lr=1e-2, weight_decay=0.01),
  "lars": lambda m: nn.optim.LARS(get_parameters(m), lr=0.1),
  "muon": lambda m: nn.optim.OptimizerGroup(nn.optim.Muon([m.l2.weight], lr=0.02),
                                            nn.optim.AdamW([m.l1.weight, m.l1.bias, m.l3.weight, m.l3.bias], lr=3e-3)),
  "group": lambda m: nn.optim.OptimizerGroup(nn.optim.SGD(get_parameters(m.l1), lr=0.1, momentum=0.9),
                                             nn.optim.Adam(get_parameters(m.l2) + get_parameters(m.l3), lr=1e-3)),
}
total = 0.0
for name, mk in cases.items():
  losses, wsum = train(mk)
  total += losses[-1] + wsum
  print(f"  {name:13s} loss {losses[0]:.4f} -> {losses[-1]:.4f} |w| {wsum:.3f}")
losses, wsum = train(cases["sgd_mom_wd"], clip=0.5, sched=cosine)
print(f"  {'clip+cosine':13s} loss {losses[0]:.4f} -> {losses[-1]:.4f} |w| {wsum:.3f}")
total += losses[-1] + wsum
print(f"optims total {total:.2f}")

# first call and capture: the first case (plain SGD, nothing compiled yet); step: AdamW with clipping
m = Net(); init(m)
opt = nn.optim.AdamW(get_parameters(m), lr=1e-3)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = m(x).sparse_categorical_crossentropy(y).backward()
  gn = clip_(opt.params, 1.0)
  opt.step()
  return loss.realize(), gn.realize()
report("optims", times[0][0], times[0][1] + times[0][2], step, (X, Y), round(total, 2), chk=lambda r: r[0].item() + r[1].item())
