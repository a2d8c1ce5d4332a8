# neural style transfer by optimizing the input image, against numpy: a fixed 3-layer conv feature extractor (weights from
# bench.init, avg_pool2d between layers), Gram matrices F F^T / (C H W) per layer, a style loss over three layers, a content
# loss on the last layer's features, a total-variation loss by shifted slices; the Gram loss's gradient w.r.t. the features
# against the closed form 4 (G - A) F / (C^2 C H W), the total loss's gradient w.r.t. the image against numpy's central
# differences; the image itself the only parameter: Adam on it under TinyJit with a clamp to [0, 1] by assign after each
# step, the features of the targets computed once and detached; a content-only reconstruction from noise (feature inversion)
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam

from bench import chk, finish, init, report

S, WS, WC, WTV = 24, (3e3, 3e5, 3e7), 1.0, 0.1

def content_image():
  yy, xx = np.mgrid[0:S, 0:S] / (S - 1)
  img = np.stack([xx, yy, 0.5 * (1 - xx)])
  img[:, (yy - 0.5) ** 2 + (xx - 0.45) ** 2 < 0.06] = [[0.9], [0.2], [0.3]]
  return img[None].astype(np.float32)
def style_image():
  yy, xx = np.mgrid[0:S, 0:S]
  stripes = (((xx + yy) // 3) % 2).astype(np.float64)
  return np.stack([stripes, 1 - stripes, 0.5 * stripes + 0.25])[None].astype(np.float32)

class Features:
  def __init__(self): self.c1, self.c2, self.c3 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1), nn.Conv2d(16, 16, 3, padding=1)
  def __call__(self, x):
    f1 = self.c1(x).relu()
    f2 = self.c2(f1.avg_pool2d(2)).relu()
    f3 = self.c3(f2.avg_pool2d(2)).relu()
    return [f1, f2, f3]
def gram(f):
  b, c, h, w = f.shape
  F = f.reshape(b, c, h * w)
  return F @ F.transpose(1, 2) / (c * h * w)
def tv(x): return ((x[:, :, 1:] - x[:, :, :-1]) ** 2).mean() + ((x[:, :, :, 1:] - x[:, :, :, :-1]) ** 2).mean()

def np_conv(x, w, b):
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
  return np.einsum("bchwij,ocij->bohw", win, w) + b[None, :, None, None]
def np_pool(x): return x.reshape(*x.shape[:2], x.shape[2] // 2, 2, x.shape[3] // 2, 2).mean((3, 5))
def np_features(P, x):
  f1 = np.maximum(np_conv(x, P["c1.weight"], P["c1.bias"]), 0)
  f2 = np.maximum(np_conv(np_pool(f1), P["c2.weight"], P["c2.bias"]), 0)
  return [f1, f2, np.maximum(np_conv(np_pool(f2), P["c3.weight"], P["c3.bias"]), 0)]
def np_gram(f):
  F = f.reshape(f.shape[0], f.shape[1], -1)
  return F @ F.transpose(0, 2, 1) / F.shape[1] / F.shape[2]
def np_tv(x): return (np.diff(x, axis=2) ** 2).mean() + (np.diff(x, axis=3) ** 2).mean()
def np_loss(P, x, grams, content):
  fs = np_features(P, x)
  style = sum(w * ((np_gram(f) - g) ** 2).mean() for w, f, g in zip(WS, fs, grams))
  return style + WC * ((fs[2] - content) ** 2).mean() + WTV * np_tv(x)

net = Features()
init(net, seed=12)
P = {k: v.numpy().astype(np.float64) for k, v in nn.state.get_state_dict(net).items()}
c_np, s_np = content_image(), style_image()
feats_c, feats_s = net(Tensor(c_np)), net(Tensor(s_np))
ref_fc, ref_fs = np_features(P, c_np.astype(np.float64)), np_features(P, s_np.astype(np.float64))
for i in range(3): chk(f"features of layer {i + 1}", feats_s[i], ref_fs[i], 1e-5)
grams_s = [gram(f).detach().realize() for f in feats_s]
for i in range(3): chk(f"Gram matrix of layer {i + 1}", grams_s[i], np_gram(ref_fs[i]), 1e-5)
chk("Gram matrices are symmetric", (grams_s[1] - grams_s[1].transpose(1, 2)).abs().max(), 0.0, exact=True)
content_t = feats_c[2].detach().realize()

# the Gram loss's gradient w.r.t. the features: 4 (G - A) F / (C^2 k)
f2 = Tensor(ref_fc[1].astype(np.float32))
gf = ((gram(f2) - grams_s[1]) ** 2).mean().gradient(f2)[0]
F2, C2 = ref_fc[1].reshape(1, 16, -1), 16
chk("Gram loss gradient vs 4 (G - A) F / (C^2 k)", gf, (4 * (np_gram(ref_fc[1]) - np_gram(ref_fs[1])) @ F2 / (C2 ** 2 * F2.shape[1] * F2.shape[2])).reshape(ref_fc[1].shape), 1e-6)
chk("total variation", tv(Tensor(c_np)), np_tv(c_np.astype(np.float64)), 1e-6)

# the total loss and its gradient w.r.t. the image
def total(x):
  fs = net(x)
  style = sum(w * ((gram(f) - g) ** 2).mean() for w, f, g in zip(WS, fs, grams_s))
  return style + WC * ((fs[2] - content_t) ** 2).mean() + WTV * tv(x)
x0_np = (0.5 * c_np + 0.5 * np.random.default_rng(3).random(c_np.shape)).astype(np.float32)
x0 = Tensor(x0_np)
gr = np.asarray(total(x0).gradient(x0)[0].numpy())
G_np, C_np = [np_gram(f) for f in ref_fs], ref_fc[2]
chk("total loss", total(x0), np_loss(P, x0_np.astype(np.float64), G_np, C_np), 1e-5)
eps, fd, where = 1e-5, [], [(0, 0, 0, 0), (0, 1, 7, 11), (0, 2, 23, 5), (0, 0, 12, 12), (0, 1, 3, 20)]
for ix in where:
  xp, xm = x0_np.astype(np.float64), x0_np.astype(np.float64)
  xp[ix] += eps; xm[ix] -= eps
  fd.append((np_loss(P, xp, G_np, C_np) - np_loss(P, xm, G_np, C_np)) / (2 * eps))
chk("dL/dimage vs central differences", np.array([gr[ix] for ix in where]), np.array(fd), 1e-5)

# style transfer: the image is the parameter, Adam under TinyJit, clamped to [0, 1] after each step
img = Tensor(x0_np).contiguous().realize()
opt = Adam([img], lr=0.02)
@TinyJit
def step():
  opt.zero_grad()
  loss = total(img)
  loss.backward()
  Tensor.realize(loss, *opt.schedule_step())
  img.assign(img.clip(0, 1)).realize()
  return loss
ts, losses = [], []
with Context(TRAINING=1):
  for i in range(60):
    if i == 1: after1 = img.numpy()
    st = time.perf_counter(); losses.append(step().item()); ts.append(time.perf_counter() - st)
chk("first loss", losses[0], np_loss(P, x0_np.astype(np.float64), G_np, C_np), 1e-5)
m_, v_ = 0.1 * gr, 0.001 * gr ** 2                                              # Adam's first step, by hand
chk("first step = Adam by hand, clamped", after1, np.clip(x0_np - 0.02 * (m_ / 0.1) / (np.sqrt(v_ / 0.001) + 1e-8), 0, 1), 1e-5)
chk("loss decreases", np.mean(losses[-4:]) < np.mean(losses[:4]) * 0.5, True, exact=True)
chk("pixels stay in [0, 1]", ((img >= 0) & (img <= 1)).all(), True, exact=True)
style_d = [float(((gram(f) - g) ** 2).mean().item()) for f, g in zip(net(img), grams_s)]
style_0 = [float(((np_gram(f) - g) ** 2).mean()) for f, g in zip(np_features(P, x0_np.astype(np.float64)), G_np)]
chk("style distances shrink in every layer", all(a < b for a, b in zip(style_d, style_0)), True, exact=True)

# feature inversion: an image from noise that matches the content features only
inv = Tensor(np.random.default_rng(4).random(c_np.shape).astype(np.float32)).contiguous().realize()
opt2 = Adam([inv], lr=0.05)
@TinyJit
def inv_step():
  opt2.zero_grad()
  loss = ((net(inv)[2] - content_t) ** 2).mean() + 0.1 * tv(inv)
  loss.backward()
  Tensor.realize(loss, *opt2.schedule_step())
  return loss
with Context(TRAINING=1): inv_losses = [inv_step().item() for _ in range(40)]
chk("feature inversion loss decreases", inv_losses[-1] < inv_losses[0] * 0.5, True, exact=True)
print("loss", [round(v, 5) for v in losses[::12]], "style by layer", [f"{a:.2e} (from {b:.2e})" for a, b in zip(style_d, style_0)],
      "inversion", [round(v, 5) for v in inv_losses[::10]])
finish()
c = losses[-1] * 100 + float(np.abs(img.numpy()).sum()) + inv_losses[-1] * 100
report("style", ts[0], ts[1] + ts[2], step, (), c)
