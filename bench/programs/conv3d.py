# volumetric (3-d) layers, each against numpy: conv2d with 3-d kernels (stride, padding per side, dilation, groups, bias),
# nn.Conv2d given a 3-tuple kernel, avg_pool2d / max_pool2d over 3 dims with padding (count_include_pad both ways, ceil_mode,
# return_indices), BatchNorm over (N, C, D, H, W) in training (batch statistics, running-stat updates) and in eval; a small
# 3-d CNN whose first loss is checked against a numpy forward, trained by SGD with momentum under TinyJit
import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context

from bench import chk, data, finish, init, report


def np_conv3d(x, w, b=None, stride=(1, 1, 1), pad=((0, 0),) * 3, dil=(1, 1, 1), groups=1):
  x = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple(pad))
  O, Cg, kd, kh, kw = w.shape
  ek = [(k - 1) * d + 1 for k, d in zip((kd, kh, kw), dil)]
  win = sliding_window_view(x, ek, axis=(2, 3, 4))[:, :, ::stride[0], ::stride[1], ::stride[2], ::dil[0], ::dil[1], ::dil[2]]
  N, C = x.shape[:2]
  win = win.reshape(N, groups, C // groups, *win.shape[2:5], kd, kh, kw)
  wg = w.reshape(groups, O // groups, Cg, kd, kh, kw).astype(np.float64)
  out = np.einsum("ngcdhwxyz,gocxyz->ngodhw", win, wg).reshape(N, O, *win.shape[3:6])
  return out if b is None else out + b.reshape(1, -1, 1, 1, 1)
def np_pool3d(x, k, s, pad, op, include_pad=True, ceil=False):
  N, C, *sp = x.shape
  outs = [((n + 2 * p - kk + (s_ - 1 if ceil else 0)) // s_) + 1 for n, kk, s_, p in zip(sp, k, s, pad)]
  if ceil: outs = [o - 1 if (o - 1) * s_ >= n + p else o for o, n, s_, p in zip(outs, sp, s, pad)]
  hi = [max(p, (o - 1) * s_ + kk - n - p) for o, s_, kk, n, p in zip(outs, s, k, sp, pad)]
  fill = -np.inf if op == "max" else 0.0
  xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple((p, h) for p, h in zip(pad, hi)), constant_values=fill)
  ones = np.pad(np.ones(sp), tuple((p, h) for p, h in zip(pad, hi)))
  inb = np.pad(np.ones(sp), tuple((p, p) for p in pad), constant_values=1); inb = np.pad(inb, tuple((0, h - p) for h, p in zip(hi, pad)))
  win = sliding_window_view(xp, k, axis=(2, 3, 4))[:, :, ::s[0], ::s[1], ::s[2]][:, :, :outs[0], :outs[1], :outs[2]]
  if op == "max": return win.max((-3, -2, -1))
  cnt = sliding_window_view(ones if not include_pad else inb, k)[::s[0], ::s[1], ::s[2]][:outs[0], :outs[1], :outs[2]].sum((-3, -2, -1))
  return win.sum((-3, -2, -1)) / cnt

rng = np.random.default_rng(3)
x_np = rng.standard_normal((2, 4, 6, 7, 5)).astype(np.float32); x = Tensor(x_np)
w_np = (rng.standard_normal((6, 4, 3, 3, 3)) / 10).astype(np.float32); bias_np = rng.standard_normal(6).astype(np.float32)
w, bias = Tensor(w_np), Tensor(bias_np)
chk("conv3d", x.conv2d(w, bias), np_conv3d(x_np, w_np, bias_np), 1e-4)
chk("conv3d pad 1", x.conv2d(w, padding=1), np_conv3d(x_np, w_np, pad=((1, 1),) * 3), 1e-4)
chk("conv3d stride", x.conv2d(w, stride=(2, 1, 2), padding=(1, 0, 1)), np_conv3d(x_np, w_np, stride=(2, 1, 2), pad=((1, 1), (0, 0), (1, 1))), 1e-4)
# padding as 6 numbers: (w_left, w_right, h_top, h_bottom, d_front, d_back), tinygrad's flat order
chk("conv3d pad 6", x.conv2d(w, padding=(0, 1, 2, 0, 1, 1)), np_conv3d(x_np, w_np, pad=((1, 1), (2, 0), (0, 1))), 1e-4)
chk("conv3d dilation", x.conv2d(w, dilation=(1, 2, 1), padding=1), np_conv3d(x_np, w_np, pad=((1, 1),) * 3, dil=(1, 2, 1)), 1e-4)
wg_np = (rng.standard_normal((6, 2, 1, 3, 2)) / 10).astype(np.float32)
chk("conv3d groups", x.conv2d(Tensor(wg_np), groups=2), np_conv3d(x_np, wg_np, groups=2), 1e-4)
cv = nn.Conv2d(4, 6, (3, 3, 3), padding=1); cv.weight.assign(w); cv.bias.assign(bias)
chk("nn.Conv2d 3-d kernel", cv(x), np_conv3d(x_np, w_np, bias_np, pad=((1, 1),) * 3), 1e-4)
# pooling over three dims
chk("avg_pool3d", x.avg_pool2d((2, 2, 2)), np_pool3d(x_np, (2, 2, 2), (2, 2, 2), (0, 0, 0), "avg"), 1e-5)
chk("avg_pool3d pad incl", x.avg_pool2d((3, 3, 3), stride=2, padding=1), np_pool3d(x_np, (3, 3, 3), (2, 2, 2), (1, 1, 1), "avg"), 1e-5)
chk("avg_pool3d pad excl", x.avg_pool2d((3, 3, 3), stride=2, padding=1, count_include_pad=False),
    np_pool3d(x_np, (3, 3, 3), (2, 2, 2), (1, 1, 1), "avg", include_pad=False), 1e-5)
chk("avg_pool3d ceil", x.avg_pool2d((2, 2, 2), stride=2, ceil_mode=True, count_include_pad=False),
    np_pool3d(x_np, (2, 2, 2), (2, 2, 2), (0, 0, 0), "avg", include_pad=False, ceil=True), 1e-5)
chk("max_pool3d", x.max_pool2d((2, 2, 2)), np_pool3d(x_np, (2, 2, 2), (2, 2, 2), (0, 0, 0), "max"))
chk("max_pool3d pad", x.max_pool2d((3, 3, 3), stride=(1, 2, 2), padding=1), np_pool3d(x_np, (3, 3, 3), (1, 2, 2), (1, 1, 1), "max"))
chk("max_pool3d ceil", x.max_pool2d((2, 2, 2), stride=2, ceil_mode=True), np_pool3d(x_np, (2, 2, 2), (2, 2, 2), (0, 0, 0), "max", ceil=True))
mv, mi = x.max_pool2d((2, 2, 2), return_indices=True)
chk("max_pool3d indices", np.take_along_axis(x_np.reshape(2, 4, -1), mi.numpy().reshape(2, 4, -1).astype(np.int64), 2).reshape(mv.shape), mv.numpy())
# BatchNorm over 5-d input
bn = nn.BatchNorm3d(4)
g_np, be_np = rng.random(4).astype(np.float32) + 0.5, rng.standard_normal(4).astype(np.float32)
bn.weight.assign(Tensor(g_np)); bn.bias.assign(Tensor(be_np))
mu, var = x_np.mean((0, 2, 3, 4)), x_np.var((0, 2, 3, 4))
ref_bn = (x_np - mu.reshape(1, -1, 1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1, 1) + 1e-5) * g_np.reshape(1, -1, 1, 1, 1) + be_np.reshape(1, -1, 1, 1, 1)
with Context(TRAINING=1): y = bn(x).realize()
chk("batchnorm3d train", y, ref_bn, 1e-4)
nel = x_np.size // 4
chk("running mean", bn.running_mean, 0.1 * mu, 1e-5); chk("running var", bn.running_var, 0.9 + 0.1 * var * nel / (nel - 1), 1e-5)
chk("batches tracked", bn.num_batches_tracked, 1)
with Context(TRAINING=0): ye = bn(x)
rv = 0.9 + 0.1 * var * nel / (nel - 1)
chk("batchnorm3d eval", ye, (x_np - 0.1 * mu.reshape(1, -1, 1, 1, 1)) / np.sqrt(rv.reshape(1, -1, 1, 1, 1) + 1e-5) * g_np.reshape(1, -1, 1, 1, 1) + be_np.reshape(1, -1, 1, 1, 1), 1e-4)

# a small 3-d CNN: conv -> BN -> relu -> max pool (padded) -> conv -> avg pool (padded, exclude pad) -> global mean -> linear
class Net:
  def __init__(self):
    self.c1, self.bn1 = nn.Conv2d(2, 8, (3, 3, 3), padding=1, bias=False), nn.BatchNorm3d(8)
    self.c2 = nn.Conv2d(8, 8, (3, 3, 3), stride=(1, 2, 2), padding=(1, 1, 0, 0, 1, 1))
    self.fc = nn.Linear(8, 5)
  def __call__(self, x):
    x = self.bn1(self.c1(x)).relu().max_pool2d((2, 2, 2), stride=2, padding=(0, 1, 0, 1, 0, 1))
    x = self.c2(x).avg_pool2d((2, 2, 2), stride=1, padding=1, count_include_pad=False)
    return self.fc(x.mean((2, 3, 4)))
net = Net(); init(net)
xb, yb = data(5, 4, 2, 8, 8, 8), data(6, 4, kind="int", hi=5)
def np_forward(xn):
  sd = {k: v.numpy().astype(np.float64) for k, v in nn.state.get_state_dict(net).items()}
  h = np_conv3d(xn, sd["c1.weight"], pad=((1, 1),) * 3)
  mu, var = h.mean((0, 2, 3, 4), keepdims=True), h.var((0, 2, 3, 4), keepdims=True)
  h = np.maximum((h - mu) / np.sqrt(var + 1e-5) * sd["bn1.weight"].reshape(1, -1, 1, 1, 1) + sd["bn1.bias"].reshape(1, -1, 1, 1, 1), 0)
  h = np.pad(h, ((0, 0), (0, 0), (0, 1), (0, 1), (0, 1)), constant_values=-np.inf)
  h = sliding_window_view(h, (2, 2, 2), axis=(2, 3, 4))[:, :, ::2, ::2, ::2].max((-3, -2, -1))
  h = np_conv3d(h, sd["c2.weight"], sd["c2.bias"], stride=(1, 2, 2), pad=((1, 1), (0, 0), (1, 1)))
  h = np_pool3d(h, (2, 2, 2), (1, 1, 1), (1, 1, 1), "avg", include_pad=False)
  return h.mean((2, 3, 4)) @ sd["fc.weight"].T + sd["fc.bias"]
logits_np = np_forward(xb.numpy())
lp = logits_np - logits_np.max(1, keepdims=True); lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
ref_loss = -lp[np.arange(4), yb.numpy()].mean()
with Context(TRAINING=1): chk("3-d CNN logits", net(xb), logits_np, 1e-4)
opt = nn.optim.SGD(nn.state.get_parameters(net), lr=0.05, momentum=0.9)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = net(x).sparse_categorical_crossentropy(y).backward()
  Tensor.realize(loss, *opt.schedule_step())  # the loss of the weights before the step (read after opt.step() it is the new weights')
  return loss
losses, ts = [], []
with Context(TRAINING=1):
  for _ in range(6):
    st = time.perf_counter(); losses.append(step(xb, yb).item()); ts.append(time.perf_counter() - st)
chk("3-d CNN first loss", losses[0], ref_loss, 1e-4)
print("losses", [round(v, 4) for v in losses])
finish()
report("conv3d", ts[0], ts[1] + ts[2], step, (xb, yb), sum(losses) + float(y.abs().sum().item()) / 100, train=True)
