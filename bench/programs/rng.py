# randomness: Tensor.manual_seed reproducibility, dropout in train mode (and off in eval), rand / randn / randint / uniform /
# normal / randperm / kaiming / glorot initializers, rand_like, and a jitted training step with dropout. The two packages'
# random streams differ, so everything here compares invariants (ranges, moments, reproducibility under a seed,
# dropout's keep fraction and 1/(1-p) scaling, permutations); the loss checksum uses dropout p=0 for its comparable part
import time

from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters

from bench import data, init, report


def ok(name, cond): print(f"  {name:36s} {bool(cond)}")
Tensor.manual_seed(42)
a = Tensor.rand(4096).realize()
b = Tensor.randn(4096).realize()
Tensor.manual_seed(42)
a2, b2 = Tensor.rand(4096), Tensor.randn(4096)
ok("manual_seed reproduces rand/randn", (a == a2).all().item() and (b == b2).all().item())
ok("next draw differs", (Tensor.rand(4096) != a).any().item())
ok("rand in [0,1), mean ~0.5", 0 <= a.min().item() and a.max().item() < 1 and abs(a.mean().item() - 0.5) < 0.02)
ok("randn mean ~0, std ~1", abs(b.mean().item()) < 0.05 and abs(b.std().item() - 1) < 0.05)
r = Tensor.randint(2000, low=3, high=9)
ok("randint in [3,9), all values hit", r.min().item() == 3 and r.max().item() == 8 and len(set(r.tolist())) == 6)
ok("randint dtype int32", r.dtype == dtypes.int32)
u = Tensor.uniform(64, 64, low=-2, high=3)
ok("uniform range and mean", -2 <= u.min().item() and u.max().item() < 3 and abs(u.mean().item() - 0.5) < 0.1)
n = Tensor.normal(10000, mean=3.0, std=0.5)
ok("normal moments", abs(n.mean().item() - 3) < 0.03 and abs(n.std().item() - 0.5) < 0.03)
p = Tensor.randperm(100)
ok("randperm is a permutation", sorted(p.tolist()) == list(range(100)) and p.tolist() != list(range(100)))
k = Tensor.kaiming_uniform(256, 128)
ok("kaiming_uniform bound", k.abs().max().item() <= (3 ** 0.5) * (2 / (1 + 0.01 ** 2)) ** 0.5 / 128 ** 0.5 + 1e-6)
g = Tensor.glorot_uniform(64, 32)
ok("glorot_uniform bound", g.abs().max().item() <= (6 / 96) ** 0.5 + 1e-6)
x = data(1, 32, 16)
rl = x.rand_like()
ok("rand_like shape/dtype", rl.shape == x.shape and rl.dtype == x.dtype)
ok("scaled_uniform / randn dtype half", Tensor.scaled_uniform(8, 8).dtype == dtypes.float and Tensor.randn(4, dtype=dtypes.half).dtype == dtypes.half)

ones = Tensor.ones(200, 200).contiguous()
with Context(TRAINING=1):
  d = ones.dropout(0.3)
  kept = (d != 0).float().mean().item()
  ok("dropout keeps ~70%", abs(kept - 0.7) < 0.02)
  ok("dropout scales kept by 1/(1-p)", ((d == 0) | ((d - 1 / 0.7).abs() < 1e-5)).all().item())
  ok("dropout p=0 is identity", (ones.dropout(0.0) == ones).all().item())
with Context(TRAINING=0):
  ok("dropout off in eval", (ones.dropout(0.5) == ones).all().item())

class Net:
  def __init__(self, p): self.l1, self.l2, self.p = nn.Linear(16, 64), nn.Linear(64, 4), p
  def __call__(self, x): return self.l2(self.l1(x).relu().dropout(self.p))
def train(p):
  m = Net(p); init(m)
  opt = nn.optim.Adam(get_parameters(m), lr=1e-2)
  @TinyJit
  def step(x, y):
    opt.zero_grad()
    loss = m(x).sparse_categorical_crossentropy(y).backward()
    opt.step()
    return loss.realize()
  ls, ts = [], []
  y = data(2, 32, kind="int", hi=4)
  with Context(TRAINING=1):
    for _ in range(8):
      st = time.perf_counter(); ls.append(step(x, y).item()); ts.append(time.perf_counter() - st)
  return ls, ts, step, (x, y)
Tensor.manual_seed(7)
l0, _, _, _ = train(0.0)
ld, ts, step, args = train(0.5)
print("no dropout losses", [round(v, 4) for v in l0[::2]])
ok("dropout steps draw new masks (losses vary)", len({round(v, 6) for v in ld}) == len(ld))
ok("dropout losses finite, near no-dropout", all(abs(a - b) < 1.0 for a, b in zip(ld, l0)))
m = Net(0.5); init(m)
@TinyJit
def noisy(x): return m(x).sum().realize()
with Context(TRAINING=1): outs = [noisy(x).item() for _ in range(5)]
ok("a replayed JIT draws a new mask each call", len({round(v, 5) for v in outs}) == 5)
report("rng", ts[0], ts[1] + ts[2], step, args, sum(l0), chk=lambda r: r.item())
