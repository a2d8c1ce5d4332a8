from tinygrad import nn
from tinygrad.nn.state import get_parameters

from bench import bench, classifier_step, data, init


class IR:
  def __init__(self, ci, co, s, e=4):
    h = ci * e
    self.pw1, self.b1 = nn.Conv2d(ci, h, 1, bias=False), nn.BatchNorm2d(h)
    self.dw, self.b2 = nn.Conv2d(h, h, 3, stride=s, padding=1, groups=h, bias=False), nn.BatchNorm2d(h)
    self.pw2, self.b3 = nn.Conv2d(h, co, 1, bias=False), nn.BatchNorm2d(co)
    self.res = s == 1 and ci == co
  def __call__(self, x):
    y = self.b3(self.pw2(self.b2(self.dw(self.b1(self.pw1(x)).relu6())).relu6()))
    return x + y if self.res else y
class Mob:
  def __init__(self):
    self.stem, self.bs = nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16)
    self.blocks = [IR(16, 16, 1), IR(16, 24, 2), IR(24, 24, 1), IR(24, 32, 2)]
    self.grp = nn.Conv2d(32, 64, 3, padding=1, groups=4)
    self.fc = nn.Linear(64, 10)
  def __call__(self, x):
    x = self.bs(self.stem(x)).relu6()
    for b in self.blocks: x = b(x)
    return self.fc(self.grp(x).relu().mean((2, 3)))
m = Mob(); init(m)
opt = nn.optim.SGD(get_parameters(m), lr=0.01, momentum=0.9)
step = classifier_step(m, opt)
bench("mobilenet", step, (data(1, 8, 3, 32, 32), data(2, 8, kind="int", hi=10)))
