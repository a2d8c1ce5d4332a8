# TinyJit as a program structures it, each value against numpy: a jitted train step returning a dict of a loss, a list of
# gradients and a tuple of statistics, with the learning rate a realized 0-d tensor decayed between calls; a Python scalar
# argument (the capture's value is replayed, in both packages) against a bound Variable; a TinyJit made per instance in
# __init__ against one decorating a method (shared by every instance); a recurrent state fed back as the next call's input;
# a list of input tensors and a keyword tensor; one tensor returned twice; lazy returns realized together; @TinyJit(prune=True)
# with a part depending on no input; reset() and a capture at a new shape
import time

import numpy as np
from tinygrad import Tensor, TinyJit, Variable

from bench import chk, finish, report

rng = np.random.default_rng(44)
N, D = 32, 6
X_np = rng.standard_normal((N, D)).astype(np.float32); w_true = rng.standard_normal((D, 1)).astype(np.float32)
Y_np = (X_np @ w_true + 0.1 * rng.standard_normal((N, 1))).astype(np.float32)

# a linear-regression train step returning a structure; lr is an input
w = Tensor.zeros(D, 1).contiguous().realize(); b = Tensor.zeros(1).contiguous().realize()
w.requires_grad = b.requires_grad = True
@TinyJit
def train(x, y, lr):
  err = x @ w + b - y
  loss = (err * err).mean()
  gw, gb = loss.gradient(w, b)
  w.assign(w - lr * gw); b.assign(b - lr * gb)
  out = {"loss": loss, "grads": [gw, gb], "stats": (err.abs().mean(), err.abs().max())}
  Tensor.realize(loss, gw, gb, *out["stats"], w, b)
  return out
wn, bn, lr = np.zeros((D, 1)), np.zeros(1), 0.2
lr_t = Tensor([lr]).realize()
ts, hist = [], []
for i in range(8):
  st = time.perf_counter(); r = train(Tensor(X_np), Tensor(Y_np), lr_t); ts.append(time.perf_counter() - st)
  err = X_np @ wn + bn - Y_np
  gwn, gbn = 2 * X_np.T @ err / N, np.array([2 * err.mean()])
  chk(f"step {i} loss", r["loss"], (err ** 2).mean(), 1e-5); chk(f"step {i} grad w", r["grads"][0], gwn, 1e-5); chk(f"step {i} grad b", r["grads"][1], gbn, 1e-5)
  chk(f"step {i} stats", [r["stats"][0].item(), r["stats"][1].item()], [np.abs(err).mean(), np.abs(err).max()], 1e-5)
  hist.append(r["loss"].item())
  wn, bn = wn - lr * gwn, bn - lr * gbn
  lr *= 0.8; lr_t.assign(Tensor([lr])).realize()   # the schedule: the jitted step reads the new value
chk("weights after 8 steps", w, wn, 1e-5)

# a Python scalar argument is not an input: every replay computes with the capture's value (both packages);
# a bound Variable or a 0-d tensor input carries it
@TinyJit
def scale_py(x, s): return (x * s).realize()
@TinyJit
def scale_var(x, s): return (x * s).realize()
sv = Variable("s", 1, 100)
xs = Tensor(np.arange(4, dtype=np.float32)).realize()
py_out = [scale_py(xs, s).numpy() for s in (2, 3, 4, 5)]
chk("python scalar: capture's value replayed", np.stack(py_out[1:]), np.stack([np.arange(4) * 3] * 3), exact=True)
chk("bound Variable", np.stack([scale_var(xs, sv.bind(s)).numpy() for s in (2, 3, 4, 5)]), np.arange(4)[None] * np.array([[2], [3], [4], [5]]), exact=True)

# a TinyJit per instance against one decorating the method
class Layer:
  def __init__(self, seed):
    self.w = Tensor(np.random.default_rng(seed).standard_normal((4, 3)).astype(np.float32)).realize()
    self.fwd = TinyJit(self._fwd)
  def _fwd(self, x): return (x @ self.w).relu().realize()
  @TinyJit
  def shared(self, x): return (x @ self.w).relu().realize()
la, lb = Layer(1), Layer(2)
xin = rng.standard_normal((2, 4)).astype(np.float32)
for _ in range(3): oa, ob = la.fwd(Tensor(xin)).numpy(), lb.fwd(Tensor(xin)).numpy()
chk("per-instance jit a", oa, np.maximum(xin @ la.w.numpy(), 0), 1e-6); chk("per-instance jit b", ob, np.maximum(xin @ lb.w.numpy(), 0), 1e-6)
for _ in range(3): sa, sb = la.shared(Tensor(xin)).numpy(), lb.shared(Tensor(xin)).numpy()
print("a TinyJit decorating a method is one capture for every instance: la.shared uses lb's weights:",
      bool(np.allclose(sa, np.maximum(xin @ lb.w.numpy(), 0))))

# a recurrent state: the output of one call is the next call's input
Wh_np = (rng.standard_normal((5, 5)) * 0.4).astype(np.float32); Wh = Tensor(Wh_np).realize()
@TinyJit
def cell(h, x): return (h @ Wh + x).tanh().realize()
h, hn = Tensor.zeros(3, 5).contiguous().realize(), np.zeros((3, 5), np.float32)
for _ in range(6):
  xt = rng.standard_normal((3, 5)).astype(np.float32)
  h = cell(h, Tensor(xt)); hn = np.tanh(hn @ Wh_np + xt)
chk("recurrent state fed back", h, hn, 1e-5)

# a list of inputs and a keyword; one tensor returned twice; lazy returns realized by the TinyJit
@TinyJit
def combine(xs, *, bias):
  s = xs[0] * 2 + xs[1] - bias
  return s, s, [xs[0].sum(), s.max()]
for _ in range(4):
  a_np, b_np, c_np = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
  s1, s2, (tot, mx) = combine([Tensor(a_np), Tensor(b_np)], bias=Tensor(c_np))
chk("list + keyword inputs", s1, a_np * 2 + b_np - c_np, 1e-6); chk("same tensor twice", s1 is s2, True, exact=True)
chk("lazy returns", [tot.item(), mx.item()], [a_np.sum(), (a_np * 2 + b_np - c_np).max()], 1e-5)

# prune: the part that depends on no input runs once at the capture
k_src = Tensor([3.0]).realize()
@TinyJit(prune=True)
def pruned(x):
  k = (k_src * 2 + 1).contiguous().realize()
  return (x * k).realize()
pr = [pruned(Tensor([float(i)])).item() for i in range(4)]
k_src.assign(Tensor([10.0])).realize()
chk("prune", pr + [pruned(Tensor([1.0])).item()], [0.0, 7.0, 14.0, 21.0, 7.0], exact=True)

# reset() and a capture at a new shape
@TinyJit
def norm_rows(x): return (x / (x * x).sum(1, keepdim=True).sqrt()).realize()
for _ in range(3): norm_rows(Tensor(X_np[:8]))
norm_rows.reset()
for _ in range(3): nr = norm_rows(Tensor(X_np[:12, :4]))
chk("after reset, a new shape", nr, X_np[:12, :4] / np.sqrt((X_np[:12, :4] ** 2).sum(1, keepdims=True)), 1e-6)
finish()
c = hist[-1] + float(w.abs().sum().item()) + float(h.sum().item()) + float(oa.sum() + ob.sum())
report("jitstruct", ts[0], ts[1] + ts[2], train, (Tensor(X_np), Tensor(Y_np), lr_t), c, chk=lambda r: r["loss"].item())
