import sys
import time

from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters


class Blk:
  def __init__(self, c):
    self.c1, self.b1, self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
  def __call__(self, x): return (x + self.b2(self.c2(self.b1(self.c1(x)).relu()))).relu()
class Net:
  def __init__(self, n=int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    self.stem, self.bn = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
    self.blocks = [Blk(16) for _ in range(n)]
    self.fc = nn.Linear(16, 10)
  def __call__(self, x):
    x = self.bn(self.stem(x)).relu()
    for b in self.blocks: x = b(x)
    return self.fc(x.max_pool2d(2).mean((2, 3)))
Tensor.manual_seed(0)
m = Net()
opt = nn.optim.SGD(get_parameters(m), lr=0.01, momentum=0.9)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = m(x).sparse_categorical_crossentropy(y).backward()
  opt.step()
  return loss.realize()
x = Tensor.randn(8, 3, 16, 16).realize(); y = (Tensor.rand(8) * 10).cast(dtypes.int32).realize()
with Context(TRAINING=1):
  st = time.perf_counter(); l = step(x, y).item(); t1 = time.perf_counter() - st
  st = time.perf_counter(); step(x, y).item(); step(x, y).item(); t2 = time.perf_counter() - st
  st = time.perf_counter(); [step(x, y) for _ in range(10)]; step(x,y).item(); t3 = (time.perf_counter() - st) / 11
print(f"resnet first {t1:.2f}s capture {t2:.2f}s step {t3*1e3:.2f}ms loss {l:.4f}")
