from tinygrad import Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters

from bench import bench, data, init


class VAE:
  def __init__(self):
    self.e1, self.e2, self.mu, self.lv = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 16), nn.Linear(128, 16)
    self.d1, self.d2, self.d3 = nn.Linear(16, 128), nn.Linear(128, 256), nn.Linear(256, 784)
  def __call__(self, x):
    h = self.e2(self.e1(x).relu()).relu()
    mu, lv = self.mu(h), self.lv(h)
    z = mu + (lv * 0.5).exp() * Tensor.randn(*mu.shape)
    return self.d3(self.d2(self.d1(z).relu()).relu()), mu, lv
m = VAE(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=1e-3)
@TinyJit
def step(x):
  opt.zero_grad()
  rec, mu, lv = m(x)
  bce = rec.binary_crossentropy_logits(x, reduction="sum") / x.shape[0]
  kl = -0.5 * (1 + lv - mu.square() - lv.exp()).sum() / x.shape[0]
  loss = (bce + kl).backward()
  opt.step()
  return loss.realize()
Tensor.manual_seed(0)
bench("vae", step, ((data(1, 64, 784, kind="rand") > 0.5).float().realize(),))
