from tinygrad import TinyJit, nn
from tinygrad.nn.state import get_parameters

from bench import bench, data, init


class MLP:
  def __init__(self): self.l1, self.l2, self.l3 = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 10)
  def __call__(self, x): return self.l3(self.l2(self.l1(x).relu()).relu())
m = MLP(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=1e-3)
@TinyJit
def step(x, y):
  opt.zero_grad()
  out = m(x)
  loss = out.sparse_categorical_crossentropy(y).backward()
  opt.step()
  return loss.realize(), (out.argmax(-1) == y).mean().realize()
bench("mlp", step, (data(1, 128, 784), data(2, 128, kind="int", hi=10)), chk=lambda r: r[0].item())
