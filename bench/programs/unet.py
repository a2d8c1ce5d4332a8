from tinygrad import TinyJit, nn
from tinygrad.nn.state import get_parameters

from bench import bench, data, init


class CB:
  def __init__(self, ci, co):
    self.c1, self.n1, self.c2, self.n2 = nn.Conv2d(ci, co, 3, padding=1), nn.GroupNorm(4, co), nn.Conv2d(co, co, 3, padding=1), nn.GroupNorm(4, co)
  def __call__(self, x): return self.n2(self.c2(self.n1(self.c1(x)).silu())).silu()
class UNet:
  def __init__(self):
    self.e1, self.e2, self.mid = CB(3, 16), CB(16, 32), CB(32, 64)
    self.up2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
    self.d2, self.d1 = CB(64, 32), CB(48, 16)
    self.out = nn.Conv2d(16, 3, 1)
  def __call__(self, x):
    h1 = self.e1(x)                         # 16x32x32
    h2 = self.e2(h1.avg_pool2d(2))          # 32x16x16
    h = self.mid(h2.max_pool2d(2))          # 64x8x8
    h = self.d2(self.up2(h).cat(h2, dim=1)) # 32x16x16
    h = h.interpolate((32, 32), mode="nearest")
    h = self.d1(h.cat(h1, dim=1))
    return self.out(h)
m = UNet(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=1e-3)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = (m(x) - y).square().mean().backward()
  opt.step()
  return loss.realize()
bench("unet", step, (data(1, 4, 3, 32, 32), data(2, 4, 3, 32, 32)))
