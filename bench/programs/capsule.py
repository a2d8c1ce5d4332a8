# a capsule network (CapsNet) on 12 x 12 stroke images, against numpy: a conv layer, primary capsules by a strided conv
# reshaped and permuted into 128 capsules of 4 dims, the squash nonlinearity (|s|^2 / (1 + |s|^2) s / |s|), prediction
# vectors u_hat = W_ij u_i by a broadcast matmul of (in, out, 8, 4) weights, routing by agreement (3 iterations of a
# softmax over the output capsules, weighted sums, squash, logits += u_hat . v; u_hat detached in the first two), the
# margin loss on capsule lengths, a reconstruction decoder fed the capsules masked by one_hot of the label (argmax at
# test); the forward and the routing coefficients against a numpy implementation, the gradient through undetached routing
# against numpy's central differences; Adam under TinyJit
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam

from bench import chk, finish, init, report

B, S, NCLS, PD, DD, ITERS, MP, MM, LAM, REC = 16, 12, 4, 4, 8, 3, 0.9, 0.1, 0.5, 5e-4
NPRIM = 8 * 4 * 4

def make_strokes(r, n):
  imgs, ys = np.zeros((n, 1, S, S), np.float32), np.zeros(n, np.int32)
  for i in range(n):
    c = i % NCLS; o = r.integers(2, S - 2)
    if c == 0: imgs[i, 0, o, 1:-1] = 1                                           # horizontal
    elif c == 1: imgs[i, 0, 1:-1, o] = 1                                         # vertical
    elif c == 2: imgs[i, 0, np.arange(1, S - 1), np.arange(1, S - 1)] = 1          # diagonal
    else: imgs[i, 0, o, 2:-2] = 1; imgs[i, 0, 2:-2, o] = 1                       # cross
    imgs[i] += r.normal(0, 0.1, (1, S, S)).astype(np.float32); ys[i] = c
  return imgs, ys

def squash(s, axis=-1):
  n2 = (s * s).sum(axis, keepdim=True)
  return n2 / (1 + n2) * s / (n2 + 1e-9).sqrt()
def np_squash(s):
  n2 = (s * s).sum(-1, keepdims=True)
  return n2 / (1 + n2) * s / np.sqrt(n2 + 1e-9)

class CapsNet:
  def __init__(self):
    self.conv = nn.Conv2d(1, 16, 3)
    self.prim = nn.Conv2d(16, 8 * PD, 3, stride=2)
    self.W = Tensor.zeros(NPRIM, NCLS, DD, PD).contiguous()
    self.d1, self.d2 = nn.Linear(NCLS * DD, 64), nn.Linear(64, S * S)
  def primary(self, x):                        # -> (B, 128, 4)
    p = self.prim(self.conv(x).relu())                                         # (B, 32, 4, 4)
    b = p.shape[0]
    return squash(p.reshape(b, 8, PD, 4, 4).permute(0, 1, 3, 4, 2).reshape(b, NPRIM, PD))
  def __call__(self, x, detach=True):          # -> output capsules (B, NCLS, DD), coupling coefficients
    u = self.primary(x)
    u_hat = (self.W.unsqueeze(0) @ u.reshape(-1, NPRIM, 1, PD, 1)).squeeze(-1)    # (B, 128, NCLS, DD)
    blog = Tensor.zeros(u.shape[0], NPRIM, NCLS)
    for it in range(ITERS):
      c = blog.softmax(2)
      uh = u_hat.detach() if detach and it < ITERS - 1 else u_hat
      v = squash((c.unsqueeze(-1) * uh).sum(1))                                  # (B, NCLS, DD)
      if it < ITERS - 1: blog = blog + (uh * v.unsqueeze(1)).sum(-1)
    return v, c
  def reconstruct(self, v, y): return self.d2(self.d1((v * y.one_hot(NCLS).unsqueeze(-1)).flatten(1)).relu()).sigmoid()

def margin_loss(v, y):
  ln = (v * v).sum(-1).sqrt()
  t = y.one_hot(NCLS).float()
  return (t * (MP - ln).relu() ** 2 + LAM * (1 - t) * (ln - MM).relu() ** 2).sum(1).mean()

def np_conv(x, w, b, stride=1):
  win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
  return np.einsum("bchwij,ocij->bohw", win, w) + b[None, :, None, None]
def np_caps(P, W, x):
  p = np_conv(np.maximum(np_conv(x, P["conv.weight"], P["conv.bias"]), 0), P["prim.weight"], P["prim.bias"], 2)
  u = np_squash(p.reshape(len(x), 8, PD, 4, 4).transpose(0, 1, 3, 4, 2).reshape(len(x), NPRIM, PD))
  u_hat = np.einsum("iodp,bip->biod", W, u)
  blog = np.zeros((len(x), NPRIM, NCLS))
  for it in range(ITERS):
    c = np.exp(blog - blog.max(2, keepdims=True)); c /= c.sum(2, keepdims=True)
    v = np_squash((c[..., None] * u_hat).sum(1))
    if it < ITERS - 1: blog = blog + (u_hat * v[:, None]).sum(-1)
  return v, c
def np_margin(v, y):
  ln = np.sqrt((v * v).sum(-1)); t = np.eye(NCLS)[y]
  return (t * np.maximum(MP - ln, 0) ** 2 + LAM * (1 - t) * np.maximum(ln - MM, 0) ** 2).sum(1).mean()

model = CapsNet()
init(model)
model.W.assign(Tensor((np.random.default_rng(9).standard_normal((NPRIM, NCLS, DD, PD)) * 0.5).astype(np.float32))).realize()
P = {k: v.numpy().astype(np.float64) for k, v in nn.state.get_state_dict(model).items()}
x_np, y_np = make_strokes(np.random.default_rng(0), B)
x, y = Tensor(x_np), Tensor(y_np)

# squash
s_np = np.random.default_rng(1).standard_normal((5, 7)) * np.array([[0.01], [0.3], [1], [3], [30]])
sq = squash(Tensor(s_np.astype(np.float32)))
chk("squash", sq, np_squash(s_np), 1e-6)
chk("squash keeps the direction", (sq * Tensor(s_np.astype(np.float32))).sum(-1) / ((sq * sq).sum(-1).sqrt() * Tensor(np.linalg.norm(s_np, axis=-1).astype(np.float32))), np.ones(5), 1e-5)
chk("squashed lengths |s|^2 / (1 + |s|^2)", (sq * sq).sum(-1).sqrt(), (n2 := (s_np ** 2).sum(-1)) / (1 + n2), 1e-5)

# the forward and the routing against numpy
v, c = model(x)
ref_v, ref_c = np_caps(P, P["W"], x_np.astype(np.float64))
chk("primary capsules are squashed (lengths < 1)", ((model.primary(x) ** 2).sum(-1) < 1).all(), True, exact=True)
chk("output capsules", v, ref_v, 1e-5)
chk("coupling coefficients", c, ref_c, 1e-5)
chk("coupling coefficients sum to 1 over the output capsules", c.sum(2), np.ones((B, NPRIM)), 1e-5)
chk("margin loss", margin_loss(v, y), np_margin(ref_v, y_np), 1e-5)
rec = model.reconstruct(v, y)
h = np.maximum((ref_v * np.eye(NCLS)[y_np][..., None]).reshape(B, -1) @ P["d1.weight"].T + P["d1.bias"], 0)
chk("reconstruction from the masked capsules", rec, 1 / (1 + np.exp(-(h @ P["d2.weight"].T + P["d2.bias"]))), 1e-5)
chk("only the label's capsule reaches the decoder", model.reconstruct(v, y).sum().gradient(v)[0].numpy()[np.eye(NCLS)[y_np] == 0], np.zeros((B * (NCLS - 1), DD)), exact=True)

# the gradient through (undetached) routing against numpy's central differences
gW = margin_loss(model(x, detach=False)[0], y).gradient(model.W)[0].numpy()
eps, fd, where = 1e-5, [], [(0, 0, 0, 0), (37, 2, 5, 1), (100, 3, 7, 3), (64, 1, 2, 2)]
for ix in where:
  Wp, Wm = P["W"].copy(), P["W"].copy(); Wp[ix] += eps; Wm[ix] -= eps
  fd.append((np_margin(np_caps(P, Wp, x_np.astype(np.float64))[0], y_np) - np_margin(np_caps(P, Wm, x_np.astype(np.float64))[0], y_np)) / (2 * eps))
chk("dL/dW through routing vs central differences", np.array([gW[ix] for ix in where]), np.array(fd), 2e-5)
gWd = margin_loss(model(x)[0], y).gradient(model.W)[0].numpy()
chk("detaching u_hat in the first iterations changes dL/dW", np.abs(gWd - gW).max() > 1e-6, True, exact=True)

# training: margin loss + reconstruction, Adam under TinyJit
data = [make_strokes(np.random.default_rng(10 + i), 32) for i in range(4)]
opt = Adam(nn.state.get_parameters(model), lr=2e-3)
@TinyJit
def step(xb, yb):
  opt.zero_grad()
  v, _ = model(xb)
  loss = margin_loss(v, yb) + REC * ((model.reconstruct(v, yb) - xb.flatten(1)) ** 2).sum(1).mean()
  loss.backward()
  acc = ((v * v).sum(-1).argmax(1) == yb).float().mean()
  Tensor.realize(loss, acc, *opt.schedule_step())
  return loss, acc
ts, losses, accs = [], [], []
with Context(TRAINING=1):
  for i in range(30):
    xb, yb = data[i % 4]
    st = time.perf_counter(); lo, ac = step(Tensor(xb), Tensor(yb)); losses.append(lo.item()); accs.append(ac.item()); ts.append(time.perf_counter() - st)
chk("loss decreases", np.mean(losses[-4:]) < np.mean(losses[:4]) * 0.7, True, exact=True)
tx, ty = make_strokes(np.random.default_rng(99), 40)
vt, _ = model(Tensor(tx))
pred = (vt * vt).sum(-1).argmax(1)
test_rec = model.reconstruct(vt, pred)
test_acc = float((pred.numpy() == ty).mean())
print("loss", [round(v, 4) for v in losses[::6]], "train acc", [round(v, 3) for v in accs[::6]], "test acc", test_acc,
      "test reconstruction mse", round(float(((test_rec.numpy() - tx.reshape(40, -1)) ** 2).mean()), 4))
finish()
c = losses[-1] + float(np.abs(v.numpy()).sum()) + float(np.abs(vt.numpy()).sum())
report("capsule", ts[0], ts[1] + ts[2], step, (Tensor(data[0][0]), Tensor(data[0][1])), c, chk=lambda r: r[0].item())
