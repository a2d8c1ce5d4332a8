# autograd beyond loss.backward(): a non-scalar backward with an explicit gradient, gradients landing on intermediate
# tensors, detach, accumulation over two backward calls, gradients through where / gather / max (with ties) / sort /
# topk / cumsum / pad+flip, int tensors (no grad), Tensor.gradient for second derivatives, and a jitted training step
# with a WGAN-GP style gradient penalty (double backward through the model)
import time

from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters

from bench import data, init, report

chk = 0.0
def show(name, *ts):
  global chk
  vals = [round(t.sum().item(), 4) + 0.0 if t is not None else None for t in ts]
  chk += sum(v for v in vals if v is not None)
  print(f"  {name:10s}", vals)

x, w, g = data(1, 4, 6), data(2, 6, 5), data(3, 4, 5)
h = x @ w
out = h.tanh() * 2
out.backward(gradient=g)                          # non-scalar: explicit upstream gradient
show("explicit", x.grad, w.grad, h.grad)          # h is alive, so it gets a gradient too

a = data(4, 8)
b = a * a.detach() + a.detach().exp()             # d/da = a (detached factors are constants)
b.sum().backward()
show("detach", a.grad, a.grad - a)

c = data(5, 3, 3)
(c * 2).sum().backward()
(c.square()).sum().backward()                     # accumulates: 2 + 2c
show("accum", c.grad, c.grad - (2 + 2 * c))

d = data(6, 10)
d.where(d > 0, d * 3, d.square() / 2).sum().backward() if False else (d > 0).where(d * 3, d.square() / 2).sum().backward()
show("where", d.grad)

e = data(7, 5, 7)
idx = Tensor([[0, 3], [6, 6], [2, 2], [1, 5], [4, 0]], dtype=dtypes.int32)
(e.gather(1, idx) * Tensor([[1.0, 2.0]])).sum().backward()   # repeated indices add up
show("gather", e.grad, e.grad[1])

f = Tensor([[1.0, 3.0, 3.0, 2.0], [5.0, -1.0, 0.5, 5.0]])
f.max(-1).sum().backward()                        # ties share the gradient
print("  max ties", f.grad.tolist())
k = data(8, 2, 9)
vals, order = k.sort(-1, descending=True)
(vals * Tensor.arange(9).float()).sum().backward()
show("sort", k.grad, order.float())
t = data(9, 3, 12)
tv, ti = t.topk(4)
(tv.square()).sum().backward()
show("topk", t.grad, ti.float())
u = data(10, 3, 6)
u.pad(((0, 0), (2, 1))).flip(1).cumsum(1).sum().backward()
show("cumsum", u.grad)
n = Tensor([1, 2, 3]).float() + Tensor([4, 5, 6])   # int + int cast to float is a leaf computation
print("  int tensor grad", Tensor([1, 2, 3]).grad, n.dtype)

# second derivatives with Tensor.gradient
p = data(11, 6)
z = (p ** 3 + p.sin()).sum()
(dp,) = z.gradient(p)
(d2,) = dp.sum().gradient(p)
show("d2", dp - (3 * p.square() + p.cos()), d2 - (6 * p - p.sin()))

class Critic:
  def __init__(self): self.l1, self.l2, self.l3 = nn.Linear(16, 64), nn.Linear(64, 64), nn.Linear(64, 1)
  def __call__(self, x): return self.l3(self.l2(self.l1(x).tanh()).tanh())
m = Critic(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=1e-3, b1=0.5, b2=0.9)
real, fake, eps = data(12, 32, 16), data(13, 32, 16) * 0.5 + 1.0, data(14, 32, 1, kind="rand")
@TinyJit
def step(real, fake, eps):
  opt.zero_grad()
  mix = eps * real + (1 - eps) * fake
  (gx,) = m(mix).sum().gradient(mix)
  gp = ((gx.square().sum(-1) + 1e-12).sqrt() - 1).square().mean()
  loss = m(fake).mean() - m(real).mean() + 10 * gp
  loss.backward()
  opt.step()
  return loss.realize(), gp.realize()
ts = []
with Context(TRAINING=1):
  for i in range(5):
    st = time.perf_counter()
    loss, gp = step(real, fake, eps)
    print(f"  wgan-gp step {i} loss {loss.item():.4f} gp {gp.item():.4f}")
    ts.append(time.perf_counter() - st)
print(f"grads total {chk:.3f}")
report("grads", ts[0], ts[1] + ts[2], step, (real, fake, eps), loss.item() + round(chk, 2), chk=lambda r: r[0].item())
