# a mixture density network on Bishop's inverse problem (x = t + 0.3 sin(2 pi t): several t for one x), against numpy: an
# MLP (weights from bench.init) giving K mixture logits, 2-d means and full covariances by a Cholesky factor (softplus
# diagonal, free off-diagonal), the Gaussian log-density by a hand-written 2 x 2 triangular solve, the NLL by logsumexp of
# log_softmax + log N; the logits' gradient equal to (pi - responsibilities) / n and the means' to -gamma Sigma^-1 (y - mu)
# / n; Adam under TinyJit; the conditional mean and covariance (law of total variance), the density integrated over a grid,
# sampling from numpy uniforms / normals by an inverse-CDF component choice (cumsum + comparisons) and by Gumbel-max, the
# sample built as mu + L eps from gathered factors (against numpy's samples)
import math
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam

from bench import chk, finish, init, report

K, HID, NB = 4, 32, 256

def make_data(r, n):
  t = r.uniform(0, 1, n)
  x = t + 0.3 * np.sin(2 * np.pi * t) + r.uniform(-0.05, 0.05, n)
  y = np.stack([t, np.cos(3 * t) + r.normal(0, 0.05, n)], 1)
  return x[:, None].astype(np.float32), y.astype(np.float32)

class MDN:
  def __init__(self): self.l1, self.l2, self.out = nn.Linear(1, HID), nn.Linear(HID, HID), nn.Linear(HID, K * 6)
  def __call__(self, x):
    o = self.out(self.l2(self.l1(x).tanh()).tanh()).reshape(x.shape[0], K, 6)
    logits, mu = o[:, :, 0], o[:, :, 1:3]
    d = o[:, :, 3:5].softplus() + 1e-3                        # Cholesky diagonal
    return logits, mu, d, o[:, :, 5]                          # L = [[d0, 0], [off, d1]]
def log_normal(y, mu, d, off):                               # y: (n, 2) -> (n, K)
  r = y.unsqueeze(1) - mu
  z0 = r[:, :, 0] / d[:, :, 0]
  z1 = (r[:, :, 1] - off * z0) / d[:, :, 1]
  return -0.5 * (z0 * z0 + z1 * z1) - d.log().sum(-1) - math.log(2 * math.pi)
def nll(model, x, y):
  logits, mu, d, off = model(x)
  return -(logits.log_softmax(-1) + log_normal(y, mu, d, off)).logsumexp(-1).mean()

def np_heads(model, x):
  f = lambda lin, v: v @ lin.weight.numpy().T.astype(np.float64) + lin.bias.numpy()
  o = f(model.out, np.tanh(f(model.l2, np.tanh(f(model.l1, x))))).reshape(len(x), K, 6)
  return o[:, :, 0], o[:, :, 1:3], np.logaddexp(0, o[:, :, 3:5]) + 1e-3, o[:, :, 5]
def np_cov(d, off):
  L = np.zeros(d.shape[:-1] + (2, 2)); L[..., 0, 0], L[..., 1, 0], L[..., 1, 1] = d[..., 0], off, d[..., 1]
  return L, L @ np.swapaxes(L, -1, -2)
def np_lognormal(y, mu, d, off):
  _, S = np_cov(d, off); r = y[:, None] - mu
  return -0.5 * np.einsum("nki,nkij,nkj->nk", r, np.linalg.inv(S), r) - 0.5 * np.log(np.linalg.det(S)) - np.log(2 * np.pi)
def np_lse(a, ax=-1): m = a.max(ax, keepdims=True); return (m + np.log(np.exp(a - m).sum(ax, keepdims=True))).squeeze(ax)
def np_nll(model, x, y):
  lg, mu, d, off = np_heads(model, x.astype(np.float64))
  lp = lg - np_lse(lg)[:, None]
  return -np_lse(lp + np_lognormal(y.astype(np.float64), mu, d, off)).mean(), lp, mu, d, off

model = MDN(); init(model)
batches = [make_data(np.random.default_rng(20 + i), NB) for i in range(4)]
X, Y = Tensor(batches[0][0]), Tensor(batches[0][1])
ref, lp, mu_np, d_np, off_np = np_nll(model, *batches[0])
chk("nll vs numpy", nll(model, X, Y), ref, 1e-5)
logits, mu, d, off = model(X)
chk("log N vs numpy (inverse covariance)", log_normal(Y, mu, d, off), np_lognormal(batches[0][1].astype(np.float64), mu_np, d_np, off_np), 1e-4)

# gradients w.r.t. the heads: d nll / d logits = (pi - gamma) / n, d nll / d mu_k = -gamma_k Sigma_k^-1 (y - mu_k) / n
logits, mu, d, off = [t.detach() for t in model(X)]
loss = -(logits.log_softmax(-1) + log_normal(Y, mu, d, off)).logsumexp(-1).mean()
g_logits, g_mu = loss.gradient(logits, mu)
lj = lp + np_lognormal(batches[0][1].astype(np.float64), mu_np, d_np, off_np)
gamma = np.exp(lj - np_lse(lj)[:, None])
chk("responsibilities sum to 1", gamma.sum(1), np.ones(NB), 1e-9)
chk("d/d logits = (pi - gamma) / n", g_logits, (np.exp(lp) - gamma) / NB, 1e-6)
Sinv = np.linalg.inv(np_cov(d_np, off_np)[1])
chk("d/d mu = -gamma Sigma^-1 (y - mu) / n", g_mu, -gamma[..., None] * np.einsum("nkij,nkj->nki", Sinv, batches[0][1][:, None] - mu_np) / NB, 1e-6)

# Adam under TinyJit
opt = Adam(nn.state.get_parameters(model), lr=2e-3)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = nll(model, x, y)
  loss.backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
ts, losses = [], []
with Context(TRAINING=1):
  for i in range(48):
    b = batches[i % 4]
    st = time.perf_counter(); losses.append(step(Tensor(b[0]), Tensor(b[1])).item()); ts.append(time.perf_counter() - st)
chk("first step loss", losses[0], ref, 1e-5)
chk("nll decreases", np.mean(losses[-4:]) < np.mean(losses[:4]) - 0.5, True, exact=True)
print("nll", [round(v, 4) for v in losses[::12]])

# the conditional distribution at a few inputs: mean, covariance by the law of total variance
xq_np = np.array([[0.1], [0.5], [0.9]], np.float32)
lg, mu, d, off = model(Tensor(xq_np))
pi = lg.softmax(-1)
mean = (pi.unsqueeze(-1) * mu).sum(1)
L = Tensor.stack(Tensor.stack(d[:, :, 0], d[:, :, 0] * 0, dim=-1), Tensor.stack(off, d[:, :, 1], dim=-1), dim=-2)   # (n, K, 2, 2)
S = L @ L.transpose(-1, -2)
dev = mu - mean.unsqueeze(1)
cov = (pi.reshape(3, K, 1, 1) * (S + dev.unsqueeze(-1) * dev.unsqueeze(-2))).sum(1)
lg_n, mu_n, d_n, off_n = np_heads(model, xq_np.astype(np.float64))
pi_n = np.exp(lg_n - np_lse(lg_n)[:, None]); mean_n = (pi_n[..., None] * mu_n).sum(1)
Ln, Sn = np_cov(d_n, off_n); dv = mu_n - mean_n[:, None]
chk("conditional mean", mean, mean_n, 1e-5)
chk("conditional covariance", cov, (pi_n[..., None, None] * (Sn + dv[..., :, None] * dv[..., None, :])).sum(1), 1e-5)
chk("Cholesky factors", L, Ln, 1e-6)

# the density at x = 0.5 integrated over a grid (about 1)
g0, g1 = np.linspace(-1.5, 2.5, 161), np.linspace(-2.5, 2.5, 201)
grid = np.stack(np.meshgrid(g0, g1, indexing="ij"), -1).reshape(-1, 2).astype(np.float32)
lgq, muq, dq, offq = [t[1:2].expand(len(grid), *t.shape[1:]) for t in (lg, mu, d, off)]
dens = (lgq.log_softmax(-1) + log_normal(Tensor(grid), muq, dq, offq)).logsumexp(-1).exp()
mass = float((dens.sum() * (g0[1] - g0[0]) * (g1[1] - g1[0])).item())
chk("density integrates to 1", mass, 1.0, 2e-2)

# sampling from numpy noise: component by inverse CDF and by Gumbel-max, then mu + L eps
ns = 512
r = np.random.default_rng(9)
u, eps, gum = r.random((ns, 1)).astype(np.float32), r.standard_normal((ns, 2)).astype(np.float32), r.gumbel(size=(ns, K)).astype(np.float32)
xs = Tensor(np.full((ns, 1), 0.5, np.float32))
lg_s, mu_s, d_s, off_s = model(xs)
cdf = lg_s.softmax(-1).cumsum(-1)
k_cdf = (Tensor(u) > cdf).sum(-1).minimum(K - 1)
k_gum = (lg_s + Tensor(gum)).argmax(-1)
lgx, mux, dx, offx = np_heads(model, np.full((ns, 1), 0.5))
pix = np.exp(lgx - np_lse(lgx)[:, None])
kc_np = np.minimum((u > np.cumsum(pix, -1)).sum(-1), K - 1); kg_np = (lgx + gum).argmax(-1)
# float32 against float64 sums may flip a draw right at a boundary: compare where the margin is clear
clear = np.abs(u - np.cumsum(pix, -1)).min(-1) > 1e-5
chk("inverse-CDF components", k_cdf.numpy()[clear], kc_np[clear], exact=True)
chk("Gumbel-max components", k_gum, kg_np, exact=True)
ki = k_cdf.reshape(ns, 1, 1).expand(ns, 1, 2)
m_k = mu_s.gather(1, ki).squeeze(1); d_k = d_s.gather(1, ki).squeeze(1); o_k = off_s.gather(1, k_cdf.unsqueeze(1)).squeeze(1)
e = Tensor(eps)
samp = Tensor.stack(m_k[:, 0] + d_k[:, 0] * e[:, 0], m_k[:, 1] + o_k * e[:, 0] + d_k[:, 1] * e[:, 1], dim=-1)
kk = k_cdf.numpy(); Lx = np_cov(dx, offx)[0][np.arange(ns), kk]
chk("samples = mu + L eps", samp, mux[np.arange(ns), kk] + np.einsum("nij,nj->ni", Lx, eps), 1e-5)
print("component counts", np.bincount(kk, minlength=K), "gumbel", np.bincount(k_gum.numpy(), minlength=K))
finish()
c = losses[-1] + float(np.abs(samp.numpy()).mean()) + float(np.abs(cov.numpy()).sum()) + mass
report("mdn", ts[0], ts[1] + ts[2], step, (X, Y), c)
