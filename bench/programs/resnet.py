import sys

from tinygrad import Tensor, dtypes, nn
from tinygrad.nn.state import get_parameters

from bench import bench, classifier_step


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
step = classifier_step(m, opt)
x = Tensor.randn(8, 3, 16, 16).realize(); y = (Tensor.rand(8) * 10).cast(dtypes.int32).realize()
bench("resnet", step, (x, y))
