# a DCGAN-style GAN: generator (Linear, ConvTranspose2d, BatchNorm, tanh) and discriminator (Conv2d, leaky_relu, BatchNorm);
# two Adam optimizers, two jitted steps that share the models: the discriminator step trains on the generator's detached
# output, the generator step backpropagates through the discriminator (whose gradients it leaves unused); binary
# cross-entropy on logits, eval-mode sampling at the end. Noise comes from numpy, so the checksum compares
import time

from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters

from bench import data, init, report

Z, B = 16, 16
class G:
  def __init__(self):
    self.fc, self.bn0 = nn.Linear(Z, 32 * 4 * 4, bias=False), nn.BatchNorm(32)
    self.up1, self.bn1 = nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1, bias=False), nn.BatchNorm(16)
    self.up2 = nn.ConvTranspose2d(16, 1, 4, stride=2, padding=1)
  def __call__(self, z):
    h = self.bn0(self.fc(z).reshape(-1, 32, 4, 4)).relu()
    return self.up2(self.bn1(self.up1(h)).relu()).tanh()           # B,1,16,16
class D:
  def __init__(self):
    self.c1 = nn.Conv2d(1, 16, 4, stride=2, padding=1)
    self.c2, self.bn = nn.Conv2d(16, 32, 4, stride=2, padding=1, bias=False), nn.BatchNorm(32)
    self.fc = nn.Linear(32 * 4 * 4, 1)
  def __call__(self, x):
    h = self.c1(x).leaky_relu(0.2)
    return self.fc(self.bn(self.c2(h)).leaky_relu(0.2).flatten(1))
g, d = G(), D(); init(g); init(d, seed=1)
opt_g = nn.optim.Adam(get_parameters(g), lr=2e-4, b1=0.5)
opt_d = nn.optim.Adam(get_parameters(d), lr=2e-4, b1=0.5)
real = (data(1, B, 1, 16, 16) * 0.5).tanh()
zs = [data(10 + i, B, Z) for i in range(4)]
ones, zeros = Tensor.ones(B, 1).contiguous().realize(), Tensor.zeros(B, 1).contiguous().realize()

@TinyJit
def d_step(real, z):
  opt_d.zero_grad()
  fake = g(z).detach()
  loss = d(real).binary_crossentropy_logits(ones) + d(fake).binary_crossentropy_logits(zeros)
  loss.backward()
  opt_d.step()
  return loss.realize()
@TinyJit
def g_step(z):
  opt_g.zero_grad()
  loss = d(g(z)).binary_crossentropy_logits(ones).backward()
  opt_g.step()
  return loss.realize()
def train_step(real, z): return d_step(real, z), g_step(z)
ts, hist = [], []
with Context(TRAINING=1):
  for i in range(8):
    st = time.perf_counter()
    ld, lg = train_step(real, zs[i % 4])
    hist.append((round(ld.item(), 4), round(lg.item(), 4)))
    ts.append(time.perf_counter() - st)
print("d/g losses", hist[:2], hist[-2:])
print("bn running", round(g.bn1.running_mean.sum().item(), 4), round(d.bn.running_var.sum().item(), 4))
with Context(TRAINING=0):
  samples = g(zs[0])
  score = d(samples).sigmoid().mean()
print("samples", samples.shape, round(samples.mean().item(), 4), round(samples.abs().max().item(), 4), "d score", round(score.item(), 4))
report("gan", ts[0], ts[1] + ts[2], train_step, (real, zs[0]), sum(a + b for a, b in hist), chk=lambda r: r[0].item() + r[1].item())
