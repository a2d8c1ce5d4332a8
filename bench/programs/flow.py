# a normalizing flow on 4-d data, against numpy: ActNorm with a data-dependent init (assign), a Glow-style invertible
# linear in LU form (a fixed permutation, unit lower / upper triangles by tril / triu masks, logdet = sum of the log
# diagonal; the inverse by forward and back substitution written with column slices), RealNVP affine couplings with
# alternating masks (tanh-bounded scales), a MADE / MAF layer with degree masks (the inverse by D sequential passes); every
# layer inverted back to its input, the whole flow's logdet against numpy's slogdet of the Jacobian built from D
# gradients (and the MAF Jacobian triangular), the log-likelihood against a numpy forward; Adam on the NLL under TinyJit;
# sampling by the inverse from numpy noise
import math
import time

import numpy as np
from tinygrad import Tensor, TinyJit
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam

from bench import chk, finish, report

rng = np.random.default_rng(717)
D, HID, NB = 4, 32, 128

def make_data(r, n):   # two moons in dims 0-1, a noisy ring in dims 2-3 whose radius depends on dim 0
  th = r.uniform(0, np.pi, n); up = r.integers(0, 2, n)
  m = np.stack([np.cos(th) + up * (1 - 2 * np.cos(th)) * 0.5, np.sin(th) * (1 - 2 * up) + up * 0.5], 1) + r.normal(0, 0.08, (n, 2))
  phi = r.uniform(0, 2 * np.pi, n); rad = 1.5 + 0.3 * m[:, 0]
  ring = np.stack([rad * np.cos(phi), rad * np.sin(phi)], 1) + r.normal(0, 0.1, (n, 2))
  return np.concatenate([m, ring], 1).astype(np.float32)

def tri(n, k, lower):
  a = Tensor.ones(n, n)
  return a.tril(k) if lower else a.triu(k)

class ActNorm:
  def __init__(self): self.loc, self.logs = Tensor.zeros(D).contiguous(), Tensor.zeros(D).contiguous()
  def init(self, x):
    self.loc.assign(-x.mean(0)).realize(); self.logs.assign(-(x.std(0) + 1e-6).log()).realize()
  def params(self): return [self.loc, self.logs]
  def __call__(self, x): return (x + self.loc) * self.logs.exp(), self.logs.sum().expand(x.shape[0])
  def inverse(self, y): return y * (-self.logs).exp() - self.loc
class LULinear:
  def __init__(self, r):
    w = np.linalg.qr(r.standard_normal((D, D)))[0]
    p, l_, u = lu_np(w)
    self.P = Tensor(p.astype(np.float32)); self.sign = Tensor(np.sign(np.diag(u)).astype(np.float32))
    self.lower, self.upper = Tensor(l_.astype(np.float32)), Tensor(u.astype(np.float32))
    self.logs = Tensor(np.log(np.abs(np.diag(u))).astype(np.float32))
  def params(self): return [self.lower, self.upper, self.logs]
  def LU(self):
    L = self.lower * tri(D, -1, True) + Tensor.eye(D)
    U = self.upper * tri(D, 1, False) + (self.sign * self.logs.exp()).diag()
    return L, U
  def weight(self):
    L, U = self.LU(); return self.P @ L @ U
  def __call__(self, x): return x @ self.weight().T, self.logs.sum().expand(x.shape[0])
  def inverse(self, y):
    L, U = self.LU()
    a = y @ self.P                          # P^T y for each row
    b = []                                  # L b = a, forward substitution
    for i in range(D):
      s = a[:, i]
      for j in range(i): s = s - L[i, j] * b[j]
      b.append(s)
    x = [None] * D                          # U x = b, back substitution
    for i in reversed(range(D)):
      s = b[i]
      for j in range(i + 1, D): s = s - U[i, j] * x[j]
      x[i] = s / U[i, i]
    return Tensor.stack(*x, dim=1)
class Coupling:
  def __init__(self, r, mask):
    self.m = Tensor(mask.astype(np.float32))
    self.w1 = Tensor((r.standard_normal((D, HID)) / np.sqrt(D)).astype(np.float32)); self.b1 = Tensor.zeros(HID).contiguous()
    self.w2 = Tensor((r.standard_normal((HID, 2 * D)) * 0.01).astype(np.float32)); self.b2 = Tensor.zeros(2 * D).contiguous()
    self.scale = Tensor.ones(D).contiguous()
  def params(self): return [self.w1, self.b1, self.w2, self.b2, self.scale]
  def st(self, xa):
    s, t = ((xa @ self.w1 + self.b1).relu() @ self.w2 + self.b2).chunk(2, -1)
    return (s.tanh() * self.scale) * (1 - self.m), t * (1 - self.m)
  def __call__(self, x):
    s, t = self.st(x * self.m)
    return x * self.m + (1 - self.m) * (x * s.exp() + t), s.sum(-1)
  def inverse(self, y):
    s, t = self.st(y * self.m)
    return y * self.m + (1 - self.m) * ((y - t) * (-s).exp())
class MAF:
  def __init__(self, r):
    din, dh = np.arange(1, D + 1), np.arange(HID) % (D - 1) + 1
    self.m1 = Tensor((dh[None, :] >= din[:, None]).astype(np.float32))                  # (D, HID)
    self.m2 = Tensor(np.tile(din[None, :] > dh[:, None], (1, 2)).astype(np.float32))    # (HID, 2D): mu and alpha
    self.w1 = Tensor((r.standard_normal((D, HID)) / np.sqrt(D)).astype(np.float32)); self.b1 = Tensor.zeros(HID).contiguous()
    self.w2 = Tensor((r.standard_normal((HID, 2 * D)) * 0.01).astype(np.float32)); self.b2 = Tensor.zeros(2 * D).contiguous()
  def params(self): return [self.w1, self.b1, self.w2, self.b2]
  def made(self, x):
    mu, alpha = ((x @ (self.w1 * self.m1) + self.b1).tanh() @ (self.w2 * self.m2) + self.b2).chunk(2, -1)
    return mu, alpha.clip(-4, 4)
  def __call__(self, x):
    mu, alpha = self.made(x)
    return (x - mu) * (-alpha).exp(), -alpha.sum(-1)
  def inverse(self, u):
    x = Tensor.zeros(*u.shape)
    for _ in range(D):                       # pass i fixes dim i (its mu / alpha depend only on dims before it)
      mu, alpha = self.made(x); x = u * alpha.exp() + mu
    return x

def lu_np(a):   # a = P L U, partial pivoting
  n = a.shape[0]; U = a.astype(np.float64).copy(); L = np.eye(n); P = np.eye(n)
  for k in range(n):
    piv = k + np.argmax(np.abs(U[k:, k]))
    U[[k, piv]] = U[[piv, k]]; P[[k, piv]] = P[[piv, k]]; L[[k, piv], :k] = L[[piv, k], :k]
    for i in range(k + 1, n): L[i, k] = U[i, k] / U[k, k]; U[i] -= L[i, k] * U[k]
  return P.T, L, U

class Flow:
  def __init__(self, r):
    alt = np.arange(D) % 2
    self.layers = [ActNorm(), LULinear(r), Coupling(r, alt), ActNorm(), LULinear(r), Coupling(r, 1 - alt), MAF(r)]
  def params(self): return [p for lay in self.layers for p in lay.params()]
  def __call__(self, x):
    ld = Tensor.zeros(x.shape[0])
    for lay in self.layers:
      x, d = lay(x); ld = ld + d
    return x, ld
  def inverse(self, z):
    for lay in reversed(self.layers): z = lay.inverse(z)
    return z
  def log_prob(self, x):
    z, ld = self(x)
    return (-0.5 * z.square() - 0.5 * math.log(2 * math.pi)).sum(-1) + ld

def np_flow(flow, x):   # float64 forward from the flow's current parameters
  ld = np.zeros(len(x))
  for lay in flow.layers:
    if isinstance(lay, ActNorm):
      ls = lay.logs.numpy().astype(np.float64); x = (x + lay.loc.numpy()) * np.exp(ls); ld += ls.sum()
    elif isinstance(lay, LULinear):
      ls = lay.logs.numpy().astype(np.float64)
      L = np.tril(lay.lower.numpy(), -1) + np.eye(D); U = np.triu(lay.upper.numpy(), 1) + np.diag(lay.sign.numpy() * np.exp(ls))
      x = x @ (lay.P.numpy() @ L @ U).T; ld += ls.sum()
    elif isinstance(lay, Coupling):
      m = lay.m.numpy(); o = np.maximum((x * m) @ lay.w1.numpy() + lay.b1.numpy(), 0) @ lay.w2.numpy() + lay.b2.numpy()
      s, t = np.tanh(o[:, :D]) * lay.scale.numpy() * (1 - m), o[:, D:] * (1 - m)
      x = x * m + (1 - m) * (x * np.exp(s) + t); ld += s.sum(-1)
    else:
      o = np.tanh(x @ (lay.w1.numpy() * lay.m1.numpy()) + lay.b1.numpy()) @ (lay.w2.numpy() * lay.m2.numpy()) + lay.b2.numpy()
      mu, al = o[:, :D], np.clip(o[:, D:], -4, 4); x = (x - mu) * np.exp(-al); ld -= al.sum(-1)
  return (-0.5 * x ** 2 - 0.5 * np.log(2 * np.pi)).sum(-1) + ld

flow = Flow(np.random.default_rng(3))
batches = [make_data(np.random.default_rng(10 + i), NB) for i in range(4)]
xb = Tensor(batches[0])
h = xb
for lay in flow.layers:                      # data-dependent ActNorm init on the first batch
  if isinstance(lay, ActNorm): lay.init(h)
  h = lay(h)[0].realize()
chk("ActNorm init: zero mean", flow.layers[0](xb)[0].mean(0), np.zeros(D), 1e-5)
chk("ActNorm init: unit std", flow.layers[0](xb)[0].std(0), np.ones(D), 1e-5)

lu = flow.layers[1]
W = lu.weight().numpy()
chk("LU weight: logdet = sum logs", lu.logs.sum(), np.linalg.slogdet(W.astype(np.float64))[1], 1e-5)
chk("LU weight is orthogonal at init", W @ W.T, np.eye(D), 1e-5)
x_small = Tensor(batches[1][:16])
for i, lay in enumerate(flow.layers):
  chk(f"layer {i} ({type(lay).__name__}) inverse", lay.inverse(lay(x_small)[0]), batches[1][:16], 1e-5)
chk("flow inverse", flow.inverse(flow(x_small)[0]), batches[1][:16], 1e-4)
chk("log-likelihood vs numpy", flow.log_prob(x_small), np_flow(flow, batches[1][:16].astype(np.float64)), 1e-4)

# logdet against slogdet of the Jacobian: row i of each sample's Jacobian from the gradient of z[:, i].sum()
def jacobian(f, x):
  rows = [f(x)[0][:, i].sum().gradient(x)[0].numpy() for i in range(D)]
  return np.stack(rows, 1)                   # (n, D out, D in)
xj = Tensor(batches[2][:8])
J = jacobian(flow, xj)
chk("logdet == slogdet(J)", flow(xj)[1], np.linalg.slogdet(J.astype(np.float64))[1], 1e-4)
maf = flow.layers[-1]
maf.w2.assign(Tensor(np.random.default_rng(4).standard_normal((HID, 2 * D)).astype(np.float32) * 0.3)).realize()
Jm = jacobian(maf, xj)
chk("MAF Jacobian lower triangular", np.abs(np.triu(Jm, 1)).max(), 0.0, 1e-7)
chk("MAF logdet == sum log diag", maf(xj)[1], np.log(np.abs(np.diagonal(Jm, axis1=1, axis2=2))).sum(-1), 1e-5)
chk("MAF inverse after D passes", maf.inverse(maf(xj)[0]), batches[2][:8], 1e-5)
maf.w2.assign(Tensor.zeros(HID, 2 * D) + Tensor(np.random.default_rng(5).standard_normal((HID, 2 * D)).astype(np.float32) * 0.01)).realize()
nll0 = float(-flow.log_prob(xb).mean().item())

# Adam on the negative log-likelihood, under TinyJit
params = flow.params()
for p in params: p.requires_grad = True
opt = Adam(params, lr=3e-3)
@TinyJit
def step(x):
  opt.zero_grad()
  loss = -flow.log_prob(x).mean()
  loss.backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
ts, losses = [], []
with Context(TRAINING=1):
  for i in range(40):
    st = time.perf_counter(); losses.append(step(Tensor(batches[i % 4])).item()); ts.append(time.perf_counter() - st)
chk("first step nll", losses[0], nll0, 1e-5)
chk("nll decreases", np.mean(losses[-4:]) < np.mean(losses[:4]) - 0.3, True, exact=True)
print("nll", [round(v, 4) for v in losses[::8]], "bits/dim", round(losses[-1] / D / math.log(2), 4))
chk("trained log-likelihood vs numpy", flow.log_prob(x_small), np_flow(flow, batches[1][:16].astype(np.float64)), 1e-4)
chk("trained flow inverse", flow.inverse(flow(x_small)[0]), batches[1][:16], 1e-4)

# sampling from numpy noise through the inverse
zs = np.random.default_rng(6).standard_normal((256, D)).astype(np.float32)
samples = flow.inverse(Tensor(zs))
chk("samples map back to the noise", flow(samples)[0], zs, 1e-3)
smp = samples.numpy()
print("sample mean", smp.mean(0).round(3), "data mean", batches[0].mean(0).round(3))
finish()
c = losses[-1] + float(np.abs(smp).mean()) + float(np.abs(J).sum())
report("flow", ts[0], ts[1] + ts[2], step, (Tensor(batches[0]),), c)
