# multi-device on the CPU: two CPU devices, a model replicated with shard_ (axis None), batches split with shard(axis=0),
# a data-parallel training step under TinyJit, a weight sharded along its output axis (tensor parallel), .to() between
# devices and back, and the same step on one device for comparison
import time

from tinygrad import Device, Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters, get_state_dict

from bench import data, init, report

GPUS = (f"{Device.DEFAULT}:0", f"{Device.DEFAULT}:1")
class Net:
  def __init__(self): self.l1, self.l2, self.l3 = nn.Linear(24, 64), nn.Linear(64, 64), nn.Linear(64, 6)
  def __call__(self, x): return self.l3(self.l2(self.l1(x).relu()).relu())

X, Y = data(1, 32, 24), data(2, 32, kind="int", hi=6)

def run(sharded):
  m = Net(); init(m)
  if sharded:
    for p in get_state_dict(m).values(): p.shard_(GPUS)
  opt = nn.optim.SGD(get_parameters(m), lr=0.05, momentum=0.9)
  @TinyJit
  def step(x, y):
    opt.zero_grad()
    loss = m(x).sparse_categorical_crossentropy(y).backward()
    Tensor.realize(loss, *opt.schedule_step())  # the loss of the weights before the update, in the same schedule
    return loss
  x, y = (X.shard(GPUS, axis=0), Y.shard(GPUS, axis=0)) if sharded else (X, Y)
  losses, ts = [], []
  with Context(TRAINING=1):
    for _ in range(6):
      st = time.perf_counter()
      losses.append(step(x, y).item())
      ts.append(time.perf_counter() - st)
  return m, step, (x, y), losses, ts

m1, _, _, l1, _ = run(False)
m2, step2, args2, l2, ts = run(True)
print("single", [round(v, 4) for v in l1])
print("sharded", [round(v, 4) for v in l2])
print("weights agree", round((m1.l2.weight - m2.l2.weight.to(Device.DEFAULT)).abs().max().item(), 5),
      "device", m2.l2.weight.device, "batch device", args2[0].device)

# tensor parallel: l2's weight split along its output rows, activations gathered back
w = m1.l2.weight.shard(GPUS, axis=0)
h = m1.l1(X).relu()
ht = h.shard(GPUS) @ w.T                                       # each device computes half the columns
print("tensor parallel", ht.shape, round((ht.to(Device.DEFAULT) - h @ m1.l2.weight.T).abs().max().item(), 5))

# moving tensors between the two devices and back
a = Tensor.arange(12).float().reshape(3, 4).to(GPUS[1])
b = (a * 2).to(GPUS[0]) + Tensor.ones(3, 4, device=GPUS[0])
print("to()", b.device, b.sum().item(), b.to(Device.DEFAULT).tolist()[1])
s = Tensor.arange(8).float().shard(GPUS, axis=0)
print("shard sum", s.sum().item(), (s * s).mean().item(), s.to(Device.DEFAULT).tolist())
report("shard", ts[0], ts[1] + ts[2], step2, args2, sum(l1) + sum(l2))
