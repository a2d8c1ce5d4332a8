from tinygrad import nn
from tinygrad.nn.state import get_parameters

from bench import bench, classifier_step, data, init


class CNN:
  def __init__(self):
    self.c1, self.c2, self.b1 = nn.Conv2d(1, 32, 5), nn.Conv2d(32, 32, 5), nn.BatchNorm(32)
    self.c3, self.c4, self.b2 = nn.Conv2d(32, 64, 3), nn.Conv2d(64, 64, 3), nn.BatchNorm(64)
    self.fc = nn.Linear(576, 10)
  def __call__(self, x):
    x = self.b1(self.c2(self.c1(x).relu()).relu()).max_pool2d()
    x = self.b2(self.c4(self.c3(x).relu()).relu()).max_pool2d()
    return self.fc(x.flatten(1))
m = CNN(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=1e-3)
step = classifier_step(m, opt)
bench("cnn", step, (data(1, 32, 1, 28, 28), data(2, 32, kind="int", hi=10)))
