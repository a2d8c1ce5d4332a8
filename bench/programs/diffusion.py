# a diffusion model on 2-d points: a linear beta schedule and its cumulative products as tensors (cumprod), sinusoidal time
# embeddings, the noise-prediction loss with per-sample timesteps gathered by Tensor indexing, Adam under TinyJit; then
# deterministic DDIM sampling (eta = 0) under TinyJit with the timesteps as bound Variables (schedule values read by
# Variable slices), and DDPM sampling with Tensor.randn inside TinyJit after manual_seed (invariants only: the random
# streams differ between the packages)
import math
import time

import numpy as np
from tinygrad import Tensor, TinyJit, Variable, nn
from tinygrad.helpers import Context

from bench import init, report

TS, D, HID, N, TE = 100, 2, 64, 128, 16
betas = Tensor.linspace(1e-4, 0.05, TS)
alphas = 1 - betas
abar = alphas.cumprod(0).contiguous().realize()
abar_prev = Tensor.cat(Tensor.ones(1), abar[:-1]).contiguous().realize()
sigmas = ((1 - abar_prev) / (1 - abar) * betas).sqrt().contiguous().realize()
def temb_table():
  freqs = (-math.log(1000.0) * Tensor.arange(TE // 2) / (TE // 2)).exp()
  ang = Tensor.arange(TS).float().reshape(-1, 1) * freqs.reshape(1, -1)
  return ang.sin().cat(ang.cos(), dim=1)
temb = temb_table().contiguous().realize()                    # TS, TE
class Denoiser:
  def __init__(self): self.l1, self.l2, self.l3 = nn.Linear(D + TE, HID), nn.Linear(HID, HID), nn.Linear(HID, D)
  def __call__(self, x, te): return self.l3(self.l2(self.l1(x.cat(te, dim=1)).silu()).silu())
net = Denoiser(); init(net)
opt = nn.optim.Adam(nn.state.get_parameters(net), lr=2e-3)

rng = np.random.default_rng(3)
th = rng.uniform(0, 3 * np.pi, N); pts = np.stack([th * np.cos(th), th * np.sin(th)], 1).astype(np.float32) / 5  # a spiral
x0 = Tensor(pts).realize()
print("schedule", round(abar[0].item(), 6), round(abar[-1].item(), 6), "sigma", round(sigmas[1].item(), 6), round(sigmas[-1].item(), 6))
ref_abar = np.cumprod(1 - np.linspace(1e-4, 0.05, TS))
print("cumprod vs numpy", float(np.abs(abar.numpy() - ref_abar).max()))

@TinyJit
def train_step(x0, t, noise):
  opt.zero_grad()
  ab = abar[t].reshape(-1, 1)                                 # per-sample schedule values by a Tensor index
  xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
  loss = (net(xt, temb[t]) - noise).square().mean().backward()
  opt.step()
  return loss.realize()
losses, ts = [], []
with Context(TRAINING=1):
  for _ in range(30):
    tt = Tensor(rng.integers(0, TS, N).astype(np.int32)); noise = Tensor(rng.standard_normal((N, D)).astype(np.float32))
    st = time.perf_counter(); losses.append(train_step(x0, tt.realize(), noise.realize()).item()); ts.append(time.perf_counter() - st)
print("losses", [round(v, 4) for v in losses[::5]])

@TinyJit
def ddim_step(x, t, tp):
  ab, abp = abar[t:t+1].reshape(1, 1), abar[tp:tp+1].reshape(1, 1)
  eps = net(x, temb[t:t+1].expand(x.shape[0], TE))
  x0p = (x - (1 - ab).sqrt() * eps) / ab.sqrt()
  return (abp.sqrt() * x0p + (1 - abp).sqrt() * eps).realize()
x = Tensor(np.random.default_rng(9).standard_normal((N, D)).astype(np.float32)).realize()
steps = list(range(TS - 1, 0, -9)) + [0]
for t, tp in zip(steps[:-1], steps[1:]):
  x = ddim_step(x, Variable("t", 0, TS - 1).bind(t), Variable("tp", 0, TS - 1).bind(tp)).clone().realize()
print("ddim sample", x.shape, round(x.mean().item(), 4), round(x.std().item(), 4), "radius", round((x.square().sum(1).sqrt()).mean().item(), 4))
# the same DDIM step without TinyJit at concrete t: must agree with the captured replays
xe = Tensor(np.random.default_rng(9).standard_normal((N, D)).astype(np.float32))
for t, tp in zip(steps[:-1], steps[1:]):
  eps = net(xe, temb[t:t+1].expand(N, TE))
  x0p = (xe - (1 - abar[t]).sqrt() * eps) / abar[t].sqrt()
  xe = (abar[tp].sqrt() * x0p + (1 - abar[tp]).sqrt() * eps).realize()
print("ddim jit == eager", float((x - xe).abs().max().item()) < 1e-4)

@TinyJit
def ddpm_step(x, t):
  ab, a, sg = abar[t:t+1].reshape(1, 1), alphas[t:t+1].reshape(1, 1), sigmas[t:t+1].reshape(1, 1)
  eps = net(x, temb[t:t+1].expand(x.shape[0], TE))
  mean = (x - (1 - a) / (1 - ab).sqrt() * eps) / a.sqrt()
  return (mean + sg * Tensor.randn(*x.shape)).realize()
def ddpm(seed):
  Tensor.manual_seed(seed)
  x = Tensor.randn(N, D).realize()
  for t in range(TS - 1, 0, -1): x = ddpm_step(x, Variable("t", 1, TS - 1).bind(t)).clone().realize()
  return x
s1, s2, s3 = ddpm(1).numpy(), ddpm(1).numpy(), ddpm(2).numpy()
# (a capture keeps the random stream it was captured with: manual_seed resets eager draws, not a TinyJit's replays; both packages)
Tensor.manual_seed(4); e1 = Tensor.randn(3, 2).numpy(); Tensor.manual_seed(4); e2 = Tensor.randn(3, 2).numpy()
print("eager reseeded repeats", bool((e1 == e2).all()), "jit replays reseeded repeat", bool(np.abs(s1 - s2).max() < 1e-5), "another seed differs", bool(np.abs(s1 - s3).max() > 1e-2),
      "finite", bool(np.isfinite(s1).all()), "radius in range", 0.5 < float(np.sqrt((s1 ** 2).sum(1)).mean()) < 3.5)
report("diffusion", ts[0], ts[1] + ts[2], train_step, (x0, tt, noise), sum(losses) + x.abs().sum().item())
