# a VQ-VAE on 16 x 16 blob images, against numpy: a strided conv encoder (weights from bench.init), vector quantization by
# squared distances |z|^2 - 2 z E^T + |E|^2, argmin and a codebook gather, the straight-through estimator z + (q - z).detach()
# (the encoder's gradient equal to the decoder's gradient at q, plus the commitment term 2 beta (z - q) / n), a decoder by
# nearest upsampling (expand + reshape) and convolutions; the codebook updated by exponential moving averages with Laplace
# smoothing (cluster sizes by one_hot sums, code sums by one_hot^T z, all by assign), perplexity, a dead-code restart by
# where from chosen encoder outputs; a two-stage residual quantizer (codebooks from encoder outputs and residuals); Adam + the EMA codebook in one TinyJit step
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam

from bench import chk, finish, init, peer, report

B, S, C, KC, BETA, GAMMA, EPS = 16, 16, 8, 24, 0.25, 0.9, 1e-5

def make_images(r, n):
  yy, xx = np.mgrid[0:S, 0:S]
  img = np.zeros((n, 1, S, S))
  for i in range(n):
    for _ in range(2):
      cy, cx, s = r.uniform(2, S - 2), r.uniform(2, S - 2), r.uniform(1.5, 3.5)
      img[i, 0] += r.uniform(0.5, 1) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
  return img.astype(np.float32)

class Enc:
  def __init__(self): self.c1, self.c2 = nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.Conv2d(16, C, 3, padding=1)
  def __call__(self, x): return self.c2(self.c1(x).relu())               # (B, C, 8, 8)
class Dec:
  def __init__(self): self.c1, self.c2 = nn.Conv2d(C, 16, 3, padding=1), nn.Conv2d(16, 1, 3, padding=1)
  def __call__(self, q):
    b, c, h, w = q.shape
    up = q.reshape(b, c, h, 1, w, 1).expand(b, c, h, 2, w, 2).reshape(b, c, h * 2, w * 2)   # nearest x2
    return self.c2(self.c1(up).relu())
class VQ:
  def __init__(self, e):
    self.embed = Tensor(e.astype(np.float32))
    if peer(): self.embed.realize()   # tinygrad 0.14: clone() of an unrealized Tensor(numpy) shares its buffer (docs/differences.md)
    self.size = Tensor.ones(KC).contiguous()
    self.sums = self.embed.clone().realize()
  def codes(self, flat):
    d = (flat * flat).sum(1, keepdim=True) - 2 * flat @ self.embed.T + (self.embed * self.embed).sum(1)
    return d, d.argmin(1)
  def __call__(self, z):                     # z: (B, C, H, W) -> quantized, indices, flat z
    b, c, h, w = z.shape
    flat = z.permute(0, 2, 3, 1).reshape(-1, c)
    _, idx = self.codes(flat)
    q = self.embed[idx]
    return q.reshape(b, h, w, c).permute(0, 3, 1, 2), idx, flat
  def ema(self, flat, idx):                  # new (size, sums, embed), not yet assigned
    oh = idx.one_hot(KC).float()
    size = GAMMA * self.size + (1 - GAMMA) * oh.sum(0)
    sums = GAMMA * self.sums + (1 - GAMMA) * (oh.T @ flat)
    n = size.sum()
    return size, sums, sums / ((size + EPS) / (n + KC * EPS) * n).unsqueeze(1)
def perplexity(idx):
  p = idx.one_hot(KC).float().mean(0)
  return (-(p > 0).where(p * p.maximum(1e-30).log(), 0.0).sum()).exp()

enc, dec = Enc(), Dec()
init(enc); init(dec, seed=1)
imgs = [make_images(np.random.default_rng(30 + i), B) for i in range(4)]
x = Tensor(imgs[0])
z0 = enc(x).permute(0, 2, 3, 1).reshape(-1, C).numpy()
e0 = z0[np.random.default_rng(4).choice(len(z0), KC, replace=False)] + 0.01   # the codebook from encoder outputs
e0[-3:] += 5                                                                     # three far-off codes: dead
vq = VQ(e0)

# quantization against numpy
z = enc(x)
q, idx, flat = vq(z)
zf, E = flat.numpy().astype(np.float64), vq.embed.numpy().astype(np.float64)
dn = ((zf[:, None] - E[None]) ** 2).sum(-1)
srt = np.sort(dn, 1); clear = srt[:, 1] - srt[:, 0] > 1e-4
chk("distances", vq.codes(flat)[0], dn, 1e-4)
chk("argmin codes", idx.numpy()[clear], dn.argmin(1)[clear], exact=True)
chk("quantized = codebook rows", q.permute(0, 2, 3, 1).reshape(-1, C), E[idx.numpy()], exact=True)
chk("quantized by one_hot matmul", (idx.one_hot(KC).float() @ vq.embed).reshape(B, 8, 8, C).permute(0, 3, 1, 2), q.numpy(), 1e-6)

# the straight-through estimator: the encoder output's gradient is the decoder's gradient at q plus the commitment term
z = enc(x)
q, idx, flat = vq(z)
q_st = z + (q - z).detach()
recon = ((dec(q_st) - x) ** 2).mean()
commit = ((z - q.detach()) ** 2).mean()
g_z = (recon + BETA * commit).gradient(z)[0].numpy()
qd = q.detach()
g_q = ((dec(qd) - x) ** 2).mean().gradient(qd)[0].numpy()
chk("straight-through: dz = dq + 2 beta (z - q) / n", g_z, g_q + 2 * BETA * (z.numpy() - q.numpy()) / z.numel(), 1e-6)
chk("no gradient reaches the codebook through q_st", ((dec(q_st) - x) ** 2).mean().gradient(vq.embed)[0].abs().max(), 0.0, exact=True)
chk("codebook loss gradient", ((z.detach() - q) ** 2).mean().gradient(vq.embed)[0],
    np.stack([-2 * (zf - E[idx.numpy()])[idx.numpy() == k].sum(0) / zf.size for k in range(KC)]), 1e-6)

# one EMA update against numpy, perplexity, a dead-code restart
size, sums, emb = vq.ema(flat, idx)
ii = idx.numpy(); cnt = np.bincount(ii, minlength=KC)
sz_n = GAMMA * 1 + (1 - GAMMA) * cnt
sm_n = GAMMA * E + (1 - GAMMA) * np.stack([zf[ii == k].sum(0) for k in range(KC)])
chk("EMA cluster sizes", size, sz_n, 1e-6)
chk("EMA code sums", sums, sm_n, 1e-5)
chk("EMA codebook (Laplace smoothing)", emb, sm_n / ((sz_n + EPS) / (sz_n.sum() + KC * EPS) * sz_n.sum())[:, None], 1e-5)
p = cnt / cnt.sum()
chk("perplexity", perplexity(idx), np.exp(-(p[p > 0] * np.log(p[p > 0])).sum()), 1e-5)
dead = cnt == 0
pick = np.random.default_rng(2).choice(len(zf), KC, replace=False)
restarted = Tensor(dead).reshape(KC, 1).where(flat[Tensor(pick.astype(np.int32))], vq.embed)
chk("dead codes restarted from encoder outputs", restarted, np.where(dead[:, None], zf[pick], E), 1e-6)
print("codes used", int((cnt > 0).sum()), "of", KC, "dead", int(dead.sum()))
vq.embed.assign(restarted).realize(); vq.sums.assign(restarted).realize()

# a two-stage residual quantizer: the second codebook quantizes z - q1
z = enc(x)
q1, _, _ = vq(z)
r1 = (z - q1).permute(0, 2, 3, 1).reshape(-1, C).numpy()
e2init = r1[np.random.default_rng(5).choice(len(r1), KC, replace=False)]; e2init[0] = 0   # a zero code: never worse
vq2 = VQ(e2init)
q2, _, _ = vq2(z - q1)
e1, e2 = ((z - q1) ** 2).mean().item(), ((z - q1 - q2) ** 2).mean().item()
res = (z - q1).permute(0, 2, 3, 1).reshape(-1, C).numpy().astype(np.float64); E2 = vq2.embed.numpy().astype(np.float64)
ref2 = ((res - E2[((res[:, None] - E2[None]) ** 2).sum(-1).argmin(1)]) ** 2).mean()
chk("residual stage error vs numpy", e2, ref2, 1e-5)
chk("second stage lowers the error", e2 < e1, True, exact=True)

# training: Adam on encoder / decoder, the codebook by EMA, in one jitted step
params = nn.state.get_parameters(enc) + nn.state.get_parameters(dec)
opt = Adam(params, lr=3e-3)
@TinyJit
def step(xb):
  opt.zero_grad()
  z = enc(xb)
  q, idx, flat = vq(z)
  recon = ((dec(z + (q - z).detach()) - xb) ** 2).mean()
  commit = ((z - q.detach()) ** 2).mean()
  loss = recon + BETA * commit
  loss.backward()
  size, sums, emb = vq.ema(flat.detach(), idx)
  ppl = perplexity(idx)
  Tensor.realize(loss, recon, ppl, vq.size.assign(size), vq.sums.assign(sums), vq.embed.assign(emb), *opt.schedule_step())
  return loss, recon, ppl
ts, losses, recons, ppls = [], [], [], []
with Context(TRAINING=1):
  for i in range(40):
    st = time.perf_counter(); lo, rc, pp = step(Tensor(imgs[i % 4]))
    losses.append(lo.item()); recons.append(rc.item()); ppls.append(pp.item()); ts.append(time.perf_counter() - st)
chk("reconstruction improves", np.mean(recons[-4:]) < np.mean(recons[:4]) * 0.7, True, exact=True)
chk("codebook = sums / smoothed sizes", vq.embed,
    vq.sums.numpy() / ((vq.size.numpy() + EPS) / (vq.size.numpy().sum() + KC * EPS) * vq.size.numpy().sum())[:, None], 1e-5)
print("loss", [round(v, 4) for v in losses[::8]], "recon", [round(v, 4) for v in recons[::8]], "perplexity", [round(v, 2) for v in ppls[::8]])
finish()
c = losses[-1] + recons[-1] + ppls[-1] + float(np.abs(vq.embed.numpy()).sum())
report("vqvae", ts[0], ts[1] + ts[2], step, (Tensor(imgs[0]),), c, chk=lambda r: r[0].item())
