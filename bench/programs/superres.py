# an ESPCN-style super-resolution model and the reshapes around it, against numpy: pixel shuffle / unshuffle by reshape +
# permute (a round trip, and against a loop), non-overlapping patches and their fold back, overlapping 3x3 patches by two
# Tensor.unfold calls (an im2col matmul equal to conv2d), grouped + dilated convolutions and a padded 1x1 / 5x5 stack against
# a numpy convolution, a bicubic-free baseline (bilinear interpolate), PSNR; the model trained on an L1 + MSE loss with Adam
# under TinyJit, its output checked against the numpy forward before and after training
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters, get_state_dict

from bench import chk, finish, init, report

rng = np.random.default_rng(656)
R = 2  # upscale factor

def pixel_shuffle(x, r):
  b, c, h, w = x.shape
  return x.reshape(b, c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3).reshape(b, c // (r * r), h * r, w * r)
def pixel_unshuffle(x, r):
  b, c, h, w = x.shape
  return x.reshape(b, c, h // r, r, w // r, r).permute(0, 1, 3, 5, 2, 4).reshape(b, c * r * r, h // r, w // r)
def np_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
  n, ci, h, wd = x.shape; co, cig, kh, kw = w.shape
  xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
  oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1; ow = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
  out = np.zeros((n, co, oh, ow)); cog = co // groups
  for g in range(groups):
    for i in range(kh):
      for j in range(kw):
        patch = xp[:, g * cig:(g + 1) * cig, i * dilation:i * dilation + stride * oh:stride, j * dilation:j * dilation + stride * ow:stride]
        out[:, g * cog:(g + 1) * cog] += np.einsum("nchw,oc->nohw", patch, w[g * cog:(g + 1) * cog, :, i, j])
  return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)

# pixel shuffle against a loop, unshuffle as its inverse
x_np = rng.standard_normal((2, 8, 3, 5)).astype(np.float32)
ps_ref = np.zeros((2, 2, 6, 10), np.float32)
for c in range(2):
  for i in range(R):
    for j in range(R): ps_ref[:, c, i::R, j::R] = x_np[:, c * R * R + i * R + j]
ps = pixel_shuffle(Tensor(x_np), R)
chk("pixel shuffle", ps, ps_ref, exact=True)
chk("pixel unshuffle round trip", pixel_unshuffle(ps, R), x_np, exact=True)

# patches: 4x4 tiles of a 12x16 image and their fold back; overlapping 3x3 patches by unfold, an im2col conv
img_np = rng.standard_normal((1, 3, 12, 16)).astype(np.float32)
img = Tensor(img_np)
tiles = img.reshape(1, 3, 3, 4, 4, 4).permute(0, 2, 4, 1, 3, 5).reshape(12, 3, 4, 4)                 # (tiles, C, 4, 4)
chk("tile (1, 2)", tiles[1 * 4 + 2], img_np[0, :, 4:8, 8:12], exact=True)
chk("fold tiles back", tiles.reshape(1, 3, 4, 3, 4, 4).permute(0, 3, 1, 4, 2, 5).reshape(1, 3, 12, 16), img_np, exact=True)
pad = img.pad((1, 1, 1, 1))
cols = pad.unfold(2, 3, 1).unfold(3, 3, 1)                                                         # (1, 3, 12, 16, 3, 3)
chk("unfold patch", cols[0, :, 5, 7], np.pad(img_np, ((0, 0), (0, 0), (1, 1), (1, 1)))[0, :, 5:8, 7:10], exact=True)
k_np = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
im2col = (cols.permute(0, 2, 3, 1, 4, 5).reshape(12 * 16, 27) @ Tensor(k_np).reshape(4, 27).T).T.reshape(1, 4, 12, 16)
conv_ref = np_conv(img_np.astype(np.float64), k_np.astype(np.float64), padding=1)
chk("im2col conv", im2col, conv_ref, 1e-4)
chk("conv2d padding=1", img.conv2d(Tensor(k_np), padding=1), conv_ref, 1e-4)

# grouped and dilated convolutions
wg_np = rng.standard_normal((6, 1, 3, 3)).astype(np.float32); bg_np = rng.standard_normal(6).astype(np.float32)
chk("grouped conv (groups=3, 2 out each)", img.conv2d(Tensor(wg_np), Tensor(bg_np), groups=3, padding=1),
    np_conv(img_np.astype(np.float64), wg_np, bg_np, padding=1, groups=3), 1e-4)
wd_np = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
chk("dilated conv (dilation=2, padding=2)", img.conv2d(Tensor(wd_np), dilation=2, padding=2),
    np_conv(img_np.astype(np.float64), wd_np, padding=2, dilation=2), 1e-4)
chk("strided dilated conv", img.conv2d(Tensor(wd_np), dilation=(2, 2), stride=2, padding=1),
    np_conv(img_np.astype(np.float64), wd_np, stride=2, padding=1, dilation=2), 1e-4)
w6_np = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
x6_np = rng.standard_normal((1, 6, 7, 9)).astype(np.float32)
chk("grouped + dilated conv", Tensor(x6_np).conv2d(Tensor(w6_np), groups=3, dilation=2, padding=2),
    np_conv(x6_np.astype(np.float64), w6_np, padding=2, dilation=2, groups=3), 1e-4)

# ESPCN: 5x5 conv, a grouped dilated 3x3, a 3x3 to C * R^2 channels, pixel shuffle; a residual over bilinear upsampling
class ESPCN:
  def __init__(self):
    self.c1 = nn.Conv2d(1, 8, 5, padding=2)
    self.c2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
    self.c3 = nn.Conv2d(8, R * R, 3, padding=1)
  def __call__(self, x):
    up = x.interpolate((x.shape[2] * R, x.shape[3] * R), mode="linear")
    return up + pixel_shuffle(self.c3(self.c2(self.c1(x).tanh()).tanh()), R)
def np_espcn(p, x):
  h = np.tanh(np_conv(x, p["c1.weight"], p["c1.bias"], padding=2))
  h = np.tanh(np_conv(h, p["c2.weight"], p["c2.bias"], padding=2, dilation=2, groups=2))
  h = np_conv(h, p["c3.weight"], p["c3.bias"], padding=1)
  b, c, hh, ww = h.shape
  sh = h.reshape(b, 1, R, R, hh, ww).transpose(0, 1, 4, 2, 5, 3).reshape(b, 1, hh * R, ww * R)
  return np_bilinear(x) + sh
def np_bilinear(x):  # align_corners=False, upscale by R
  _, _, h, w = x.shape
  def coords(n):
    s = np.clip((np.arange(n * R) + 0.5) / R - 0.5, 0, n - 1); i0 = np.floor(s).astype(int); i1 = np.minimum(i0 + 1, n - 1)
    return i0, i1, s - i0
  y0, y1, fy = coords(h); x0, x1, fx = coords(w)
  top = x[:, :, y0][..., x0] * (1 - fx) + x[:, :, y0][..., x1] * fx; bot = x[:, :, y1][..., x0] * (1 - fx) + x[:, :, y1][..., x1] * fx
  return top * (1 - fy)[:, None] + bot * fy[:, None]

# data: smooth high-resolution images (sums of sinusoids), low resolution by 2x2 average pooling
yy, xx = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
hr_np = np.stack([np.sin(xx * a + yy * b + c) * 0.5 + np.cos(yy * d) * 0.3 for a, b, c, d in rng.uniform(0.1, 0.6, (8, 4))])[:, None].astype(np.float32)
HR = Tensor(hr_np)
LR = HR.avg_pool2d(2)
chk("avg_pool2d low resolution", LR, hr_np.reshape(8, 1, 8, 2, 8, 2).mean((3, 5)), 1e-6)
chk("bilinear x2 baseline", LR.interpolate((16, 16), mode="linear"), np_bilinear(LR.numpy().astype(np.float64)), 1e-5)
model = ESPCN(); init(model, seed=65)
P = {k: v.numpy().astype(np.float64) for k, v in get_state_dict(model).items()}
lr64 = LR.numpy().astype(np.float64)
chk("espcn forward", model(LR), np_espcn(P, lr64), 1e-4)
def psnr(a, b): return float(10 * np.log10(4.0 / ((a - b) ** 2).mean()))   # peak-to-peak range 2
base_psnr = psnr(np_bilinear(lr64), hr_np)

opt = nn.optim.Adam(get_parameters(model), lr=3e-3)
@TinyJit
def step(lr, hr):
  opt.zero_grad()
  d = model(lr) - hr
  loss = (d.abs().mean() + (d * d).mean()).backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
ts, losses = [], []
with Context(TRAINING=1):
  for _ in range(40):
    st = time.perf_counter(); losses.append(step(LR, HR).item()); ts.append(time.perf_counter() - st)
d0 = np_espcn(P, lr64) - hr_np
chk("first loss", losses[0], np.abs(d0).mean() + (d0 ** 2).mean(), 1e-5)
P2 = {k: v.numpy().astype(np.float64) for k, v in get_state_dict(model).items()}
out = model(LR)
chk("trained forward", out, np_espcn(P2, lr64), 1e-4)
model_psnr = psnr(out.numpy(), hr_np)
chk("model beats bilinear", model_psnr > base_psnr, True, exact=True)
print("losses", [round(v, 4) for v in losses[::8]], f"psnr bilinear {base_psnr:.2f} dB, model {model_psnr:.2f} dB")
finish()
c = losses[-1] + model_psnr + float(ps.abs().sum().item())
report("superres", ts[0], ts[1] + ts[2], step, (LR, HR), c)
