# the parts of a training loop around the step, each against numpy or against the loop itself: gradient accumulation over
# four micro-batches (equal to the full batch's gradient, and to numpy's), a learning rate by linear warmup then step decay
# assigned into opt.lr, momentum SGD checked step by step against numpy, a frozen layer (left out of the optimizer), an EMA
# of the weights by assign, a checkpoint of the model and the optimizer (get_state_dict + safe_save) taken mid-run and
# resumed in fresh objects by load_state_dict (the resumed losses equal the uninterrupted run's, bit for bit), strict
# loading of a reshaped weight (refused; accepted after reshaping it back), early stopping on a validation loss
import os
import tempfile
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save

from bench import chk, finish, init, report

rng = np.random.default_rng(77)
N, D, Hd = 64, 5, 8
X_np = rng.standard_normal((N, D)).astype(np.float32)
Y_np = (np.sin(X_np[:, :1] * 2) + X_np[:, 1:2] * 0.5).astype(np.float32)
Xv_np = rng.standard_normal((32, D)).astype(np.float32); Yv_np = (np.sin(Xv_np[:, :1] * 2) + Xv_np[:, 1:2] * 0.5).astype(np.float32)

class MLP:
  def __init__(self): self.l1, self.l2, self.l3 = nn.Linear(D, Hd), nn.Linear(Hd, Hd), nn.Linear(Hd, 1)
  def __call__(self, x): return self.l3(self.l2(self.l1(x).tanh()).tanh())
def make(seed=1):
  m = MLP(); init(m, seed); return m
def np_grads(p, x, y):  # loss = mean((out - y)^2), a numpy backward
  a1 = np.tanh(x @ p["l1.weight"].T + p["l1.bias"]); a2 = np.tanh(a1 @ p["l2.weight"].T + p["l2.bias"]); out = a2 @ p["l3.weight"].T + p["l3.bias"]
  d = 2 * (out - y) / len(x)
  g = {"l3.weight": d.T @ a2, "l3.bias": d.sum(0)}
  d2 = d @ p["l3.weight"] * (1 - a2 ** 2); g.update({"l2.weight": d2.T @ a1, "l2.bias": d2.sum(0)})
  d1 = d2 @ p["l2.weight"] * (1 - a1 ** 2); g.update({"l1.weight": d1.T @ x, "l1.bias": d1.sum(0)})
  return ((out - y) ** 2).mean(), g

# gradient accumulation: four micro-batches of a quarter loss each
m = make()
P = {k: v.numpy().astype(np.float64) for k, v in get_state_dict(m).items()}
params = get_parameters(m)
for p in params: p.requires_grad = True
full = ((m(Tensor(X_np)) - Tensor(Y_np)) ** 2).mean()
full_g = [g.numpy() for g in full.gradient(*params)]
acc = None
for k in range(4):
  sl = slice(16 * k, 16 * k + 16)
  lk = ((m(Tensor(X_np[sl])) - Tensor(Y_np[sl])) ** 2).mean() / 4
  gk = lk.gradient(*params)
  acc = gk if acc is None else [a + g for a, g in zip(acc, gk)]
ref_loss, ref_g = np_grads(P, X_np.astype(np.float64), Y_np.astype(np.float64))
names = list(get_state_dict(m))
for n, a, f in zip(names, acc, full_g):
  chk(f"accumulated grad {n} == full batch", a, f, 1e-6); chk(f"accumulated grad {n} vs numpy", a, ref_g[n], 1e-5)

# the loop: warmup + step decay into opt.lr, momentum SGD (l1 frozen: not in the optimizer), EMA by assign, a checkpoint
def schedule(i, base=0.1, warm=4): return base * (i + 1) / warm if i < warm else base * 0.5 ** ((i - warm) // 6)
def build(seed=1):
  m = make(seed)
  opt = nn.optim.SGD([m.l2.weight, m.l2.bias, m.l3.weight, m.l3.bias], lr=0.0, momentum=0.9)
  ema = {k: v.detach().clone().realize() for k, v in get_state_dict(m).items()}  # clone: see the README
  @TinyJit
  def step(x, y):
    opt.zero_grad()
    loss = ((m(x) - y) ** 2).mean().backward()
    Tensor.realize(loss, *opt.schedule_step())
    for k, v in get_state_dict(m).items(): ema[k].assign(ema[k] * 0.9 + v.detach() * 0.1).realize()
    return loss
  return m, opt, ema, step
m, opt, ema, step = build()
ckpt = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
losses, val, lrs, ts = [], [], [], []
pn = {k: v.copy() for k, v in P.items()}; mom = {k: np.zeros_like(v) for k, v in P.items()}; ema_n = {k: v.copy() for k, v in P.items()}
best, bad_epochs, stopped = float("inf"), 0, None
with Context(TRAINING=1):
  for i in range(24):
    opt.lr.assign(Tensor([schedule(i)], dtype=opt.lr.dtype)).realize(); lrs.append(opt.lr.item())
    st = time.perf_counter(); losses.append(step(Tensor(X_np), Tensor(Y_np)).item()); ts.append(time.perf_counter() - st)
    ln, g = np_grads(pn, X_np.astype(np.float64), Y_np.astype(np.float64))
    for k in pn:
      if k.startswith("l1"): continue
      mom[k] = 0.9 * mom[k] + g[k]; pn[k] = pn[k] - schedule(i) * mom[k]
    for k in pn: ema_n[k] = ema_n[k] * 0.9 + pn[k] * 0.1
    chk(f"loss {i}", losses[-1], ln, 2e-5)
    if i == 11: safe_save({**{f"model.{k}": v for k, v in get_state_dict(m).items()}, **{f"opt.{k}": v for k, v in get_state_dict(opt).items()}}, ckpt)
    with Context(TRAINING=0): vl = ((m(Tensor(Xv_np)) - Tensor(Yv_np)) ** 2).mean().item()
    val.append(vl)
    if vl < best - 1e-4: best, bad_epochs = vl, 0
    else: bad_epochs += 1
    if bad_epochs >= 3 and stopped is None: stopped = i
chk("lr schedule", lrs, [schedule(i) for i in range(24)], 1e-7)
for k in pn: chk(f"weights {k}", get_state_dict(m)[k], pn[k], 1e-4); chk(f"ema {k}", ema[k], ema_n[k], 1e-4)
chk("frozen layer unchanged", m.l1.weight, P["l1.weight"], exact=True)
print("early stopping would stop at", stopped, "val", [round(v, 4) for v in val[::6]])

# resume from the checkpoint in fresh objects: the same losses, bit for bit
m2, opt2, ema2, step2 = build(seed=9)
sd = safe_load(ckpt)
load_state_dict(m2, {k[6:]: v for k, v in sd.items() if k.startswith("model.")}, verbose=False)
load_state_dict(opt2, {k[4:]: v for k, v in sd.items() if k.startswith("opt.")}, verbose=False)
resumed = []
with Context(TRAINING=1):
  for i in range(12, 24):
    opt2.lr.assign(Tensor([schedule(i)], dtype=opt2.lr.dtype)).realize()
    resumed.append(step2(Tensor(X_np), Tensor(Y_np)).item())
chk("resumed losses equal the uninterrupted run", resumed, losses[12:], exact=True)
chk("resumed weights", get_state_dict(m2)["l3.weight"], get_state_dict(m)["l3.weight"].numpy(), exact=True)

# strict loading of a reshaped weight: refused, then accepted after reshaping back
bad = {k: (v.reshape(-1) if k == "l2.weight" else v) for k, v in get_state_dict(make(4)).items()}
m3 = make(5)
try: load_state_dict(m3, bad, verbose=False); refused = False
except (ValueError, AssertionError, RuntimeError): refused = True
chk("shape mismatch refused", refused, True, exact=True)
good = {k: (v.reshape(Hd, Hd) if k == "l2.weight" else v) for k, v in bad.items()}
load_state_dict(m3, good, verbose=False)
chk("loaded after reshape", m3.l2.weight, get_state_dict(make(4))["l2.weight"].numpy(), exact=True)
try: load_state_dict(m3, {k: v for k, v in good.items() if k != "l3.bias"}, verbose=False); missing = False
except (KeyError, ValueError, AssertionError, RuntimeError): missing = True
chk("missing key refused (strict)", missing, True, exact=True)
load_state_dict(m3, {k: v for k, v in good.items() if k != "l3.bias"}, strict=False, verbose=False)
finish()
c = losses[-1] * 100 + sum(val) + float(sum(v.abs().sum().item() for v in ema.values()))
report("trainloop", ts[0], ts[1] + ts[2], step, (Tensor(X_np), Tensor(Y_np)), c)
