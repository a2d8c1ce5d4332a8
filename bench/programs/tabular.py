# a tabular binary classifier, against numpy: missing values imputed by the training mean (nan-aware sums by isnan /
# where) with missing-indicator columns, standardization by the training mean and std (correction 1), quantile bin edges by
# sort + linear interpolation (numpy.quantile's default) and bucketing by comparisons (numpy.digitize), bins and categoricals
# embedded by one_hot matmuls and nn.Embedding (unseen categories mapped to index 0), smoothed target encoding by one_hot
# sums; a focal loss written from logits (its gradient against numpy's central differences), AUC by pairwise comparisons
# (against the rank formula), the F1-best threshold over all candidate thresholds; AdamW under TinyJit over
# shuffled mini-batches, a jitted eval with TRAINING=0, early stopping on validation AUC with the best weights kept by
# assign and restored
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import AdamW

from bench import chk, finish, init, report

rng = np.random.default_rng(88)
NTR, NVA, NUM, CARDS, NBINS, EMB, ALPHA, GAMMA, SMOOTH = 512, 256, 4, (5, 7), 6, 4, 0.75, 2.0, 10.0

def make_table(r, n):
  age = r.uniform(18, 80, n); income = np.exp(r.normal(10.5, 0.6, n)); score = r.normal(600, 80, n); visits = r.poisson(3, n).astype(float)
  c0, c1 = r.integers(1, CARDS[0], n), r.integers(1, CARDS[1] + 2, n)       # c1 has 2 codes past its training card: unseen
  logit = 0.04 * (age - 50) + 0.8 * (np.log(income) - 10.5) - 0.01 * (score - 600) + 0.5 * (c0 == 2) - 0.7 * (c1 % 3 == 0) - 1.5
  y = (r.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
  X = np.stack([age, income / 1000, score, visits], 1)
  X[r.random((n, NUM)) < 0.08] = np.nan                                          # 8% missing
  return X.astype(np.float32), np.stack([c0, c1], 1).astype(np.int32), y

Xtr, Ctr, ytr = make_table(np.random.default_rng(1), NTR)
Xva, Cva, yva = make_table(np.random.default_rng(2), NVA)
Ctr[:, 1] = np.minimum(Ctr[:, 1], CARDS[1] - 1)                                   # training sees codes 1..6 only
x_tr, x_va = Tensor(Xtr), Tensor(Xva)

# preprocessing statistics from the training set
miss = x_tr.isnan()
cnt = (~miss).sum(0)
mean = miss.where(0, x_tr).sum(0) / cnt
chk("nan-aware mean", mean, np.nanmean(Xtr.astype(np.float64), 0), 1e-5)
def impute(x): return x.isnan().where(mean, x)
filled = impute(x_tr)
std = filled.std(0)
chk("std of imputed columns (correction 1)", std, np.where(np.isnan(Xtr), np.nanmean(Xtr, 0), Xtr).astype(np.float64).std(0, ddof=1), 1e-4)
def quantile_edges(x, qs):                   # numpy.quantile's 'linear' method, by sort and interpolation
  s = x.sort(0)[0]
  n = x.shape[0]
  pos = [q * (n - 1) for q in qs]
  lo = [int(np.floor(p)) for p in pos]
  return Tensor.stack(*[s[lo_] + (p - lo_) * (s[min(lo_ + 1, n - 1)] - s[lo_]) for p, lo_ in zip(pos, lo)], dim=0)   # (nq, F)
qs = [i / NBINS for i in range(1, NBINS)]
edges = quantile_edges(filled, qs)
Fnp = np.where(np.isnan(Xtr), np.nanmean(Xtr.astype(np.float64), 0), Xtr)
chk("quantile edges", edges, np.quantile(Fnp, qs, axis=0), 1e-4)
edges_np = edges.numpy()
def bucket(x): return (x.unsqueeze(-1) >= edges.T).sum(-1)                      # (n, F) in 0..NBINS-1
chk("buckets == numpy.digitize", bucket(impute(x_va)), np.stack([np.digitize(np.where(np.isnan(Xva), mean.numpy(), Xva)[:, j],
    edges_np[:, j]) for j in range(NUM)], 1), exact=True)
# smoothed target encoding of each categorical: (sum y + SMOOTH * prior) / (count + SMOOTH), unseen codes -> prior
prior = float(ytr.mean())
def target_encoding(c, card, y):
  oh = Tensor(c).one_hot(card).float()
  return (oh.T @ Tensor(y) + SMOOTH * prior) / (oh.sum(0) + SMOOTH)
te = [target_encoding(Ctr[:, j], CARDS[j], ytr) for j in range(2)]
for j in range(2):
  cts, sums = np.bincount(Ctr[:, j], minlength=CARDS[j]), np.bincount(Ctr[:, j], ytr, minlength=CARDS[j])
  chk(f"target encoding {j}", te[j], (sums + SMOOTH * prior) / (cts + SMOOTH), 1e-6)
chk("class balance", prior, ytr.mean(), exact=True)

class Model:
  def __init__(self):
    self.bin_emb = [Tensor.zeros(NBINS, 2).contiguous() for _ in range(NUM)]
    self.cat_emb = [nn.Embedding(c, EMB) for c in CARDS]
    self.l1, self.l2, self.l3 = nn.Linear(2 * NUM + 2 * NUM + 2 * EMB + 2, 32), nn.Linear(32, 16), nn.Linear(16, 1)
  def __call__(self, x, c):
    xf = impute(x)
    cols = [(xf - mean) / std, x.isnan().float()]
    b = bucket(xf)
    cols += [b[:, j].one_hot(NBINS).float() @ self.bin_emb[j] for j in range(NUM)]
    for j in range(2):
      cj = c[:, j]
      cj = (cj < CARDS[j]).where(cj, 0)                                       # unseen codes -> 0 ("unknown")
      cols += [self.cat_emb[j](cj), te[j][cj].unsqueeze(1)]
    h = Tensor.cat(*cols, dim=1)
    h = self.l1(h).relu()
    return self.l3(self.l2(h).relu()).squeeze(1)

def focal(z, y, alpha=ALPHA, gamma=GAMMA):    # from logits: log p = -softplus(-z), log(1 - p) = -softplus(z)
  logp, log1mp = -(-z).softplus(), -z.softplus()
  p = logp.exp()
  pos = -alpha * (1 - p) ** gamma * logp
  neg = -(1 - alpha) * p ** gamma * log1mp
  return (y * pos + (1 - y) * neg).mean()
def np_focal_each(z, y):
  p = 1 / (1 + np.exp(-z))
  return -(y * ALPHA * (1 - p) ** GAMMA * np.log(p) + (1 - y) * (1 - ALPHA) * p ** GAMMA * np.log(1 - p))
def auc(s, y):                                # P(score of a positive > score of a negative), ties count half
  pos, neg = y.unsqueeze(1), (1 - y).unsqueeze(0)
  d = s.unsqueeze(1) - s.unsqueeze(0)
  w = pos * neg
  return ((d > 0).float() * w + (d == 0).float() * 0.5 * w).sum() / w.sum()
def np_auc(s, y):
  r = np.argsort(np.argsort(s)) + 1.0
  for v in np.unique(s):                      # average ranks of ties
    k = s == v; r[k] = r[k].mean()
  npos = y.sum(); nneg = len(y) - npos
  return (r[y == 1].sum() - npos * (npos + 1) / 2) / (npos * nneg)

model = Model()
init(model)
for j, e in enumerate(model.bin_emb): e.assign(Tensor(np.random.default_rng(50 + j).uniform(-0.5, 0.5, (NBINS, 2)).astype(np.float32))).realize()

# the loss and metrics against numpy
z_np = np.random.default_rng(3).standard_normal(64) * 3
yb_np = (np.random.default_rng(4).random(64) < 0.3).astype(np.float64)
zt = Tensor(z_np.astype(np.float32))
chk("focal loss", focal(zt, Tensor(yb_np.astype(np.float32))), np_focal_each(z_np, yb_np).mean(), 1e-6)
eps = 1e-6
chk("focal loss gradient vs central differences", focal(zt, Tensor(yb_np.astype(np.float32))).gradient(zt)[0],
    (np_focal_each(z_np + eps, yb_np) - np_focal_each(z_np - eps, yb_np)) / (2 * eps) / 64, 1e-6)
chk("focal loss at alpha 0.5, gamma 0 == half binary_crossentropy_logits", focal(zt, Tensor(yb_np.astype(np.float32)), 0.5, 0.0),
    0.5 * zt.binary_crossentropy_logits(Tensor(yb_np.astype(np.float32))).numpy(), 1e-6)
chk("binary_crossentropy_logits", zt.binary_crossentropy_logits(Tensor(yb_np.astype(np.float32))),
    np.mean(np.logaddexp(0, -z_np) * yb_np + np.logaddexp(0, z_np) * (1 - yb_np)), 1e-6)
s_np = np.round(np.random.default_rng(5).standard_normal(200), 1)                # rounded: ties
y_np = (np.random.default_rng(6).random(200) < 0.4).astype(np.float32)
chk("AUC with ties vs the rank formula", auc(Tensor(s_np.astype(np.float32)), Tensor(y_np)), np_auc(s_np, y_np), 1e-6)
def best_f1(s, y):                             # every score a candidate threshold: predict positive where s >= t
  pred = (s.unsqueeze(0) >= s.unsqueeze(1)).float()                           # (t, n)
  tp = (pred * y).sum(1); fp = (pred * (1 - y)).sum(1); fn = ((1 - pred) * y).sum(1)
  f1 = 2 * tp / (2 * tp + fp + fn)
  i = f1.argmax()
  return f1.max(), s[i]
f1, thr = best_f1(Tensor(s_np.astype(np.float32)), Tensor(y_np))
cand = [(2 * ((s_np >= t) & (y_np == 1)).sum() / (2 * ((s_np >= t) & (y_np == 1)).sum() + ((s_np >= t) & (y_np == 0)).sum()
        + ((s_np < t) & (y_np == 1)).sum()), t) for t in s_np]
chk("best F1", f1, max(c[0] for c in cand), 1e-6)
chk("its threshold", thr, next(t for f, t in cand if f == max(c[0] for c in cand)), 1e-6)

# the model's first forward against numpy (TRAINING=0)
with Context(TRAINING=0): lo = model(x_va, Tensor(Cva))
def np_model(X, C):
  P = {k: v.numpy().astype(np.float64) for k, v in nn.state.get_state_dict(model).items()}
  mu, sd = mean.numpy().astype(np.float64), std.numpy().astype(np.float64)
  xf = np.where(np.isnan(X), mu, X)
  cols = [(xf - mu) / sd, np.isnan(X).astype(float)]
  cols += [model.bin_emb[j].numpy()[np.stack([np.digitize(xf[:, j], edges_np[:, j])])[0]] for j in range(NUM)]
  for j in range(2):
    cj = np.where(C[:, j] < CARDS[j], C[:, j], 0)
    cols += [P[f"cat_emb.{j}.weight"][cj], te[j].numpy()[cj][:, None]]
  h = np.maximum(np.concatenate(cols, 1) @ P["l1.weight"].T + P["l1.bias"], 0)
  h = np.maximum(h @ P["l2.weight"].T + P["l2.bias"], 0)
  return (h @ P["l3.weight"].T + P["l3.bias"])[:, 0]
chk("logits (eval) vs numpy", lo, np_model(Xva.astype(np.float64), Cva), 1e-4)
chk("unseen codes present in validation", (Cva[:, 1] >= CARDS[1]).sum() > 0, True, exact=True)

# training with early stopping on validation AUC
params = nn.state.get_parameters(model)
opt = AdamW(params, lr=1e-3, weight_decay=1e-2)
best = [p.clone().realize() for p in params]
BS = 64
@TinyJit
def step(xb, cb, yb):
  opt.zero_grad()
  loss = focal(model(xb, cb), yb)
  loss.backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
@TinyJit
def evaluate(xv, cv, yv):
  return auc(model(xv, cv), yv).realize()
@TinyJit
def keep_best(): Tensor.realize(*[b.assign(p) for b, p in zip(best, params)])
ts, losses, val_aucs, best_auc, best_ep, patience = [], [], [], -1.0, -1, 0
xv_t, cv_t, yv_t = Tensor(Xva), Tensor(Cva), Tensor(yva)
order_rng = np.random.default_rng(7)
for ep in range(30):
  perm = order_rng.permutation(NTR)
  with Context(TRAINING=1):
    for i in range(NTR // BS):
      k = perm[i * BS:(i + 1) * BS]
      st = time.perf_counter(); losses.append(step(Tensor(Xtr[k]), Tensor(Ctr[k]), Tensor(ytr[k])).item()); ts.append(time.perf_counter() - st)
  with Context(TRAINING=0):
    a = evaluate(xv_t, cv_t, yv_t).item()
  val_aucs.append(a)
  if a > best_auc: best_auc, best_ep, patience = a, ep, 0; keep_best()
  else:
    patience += 1
    if patience >= 4: break
for p, b in zip(params, best): p.assign(b).realize()
with Context(TRAINING=0):
  s_best = model(xv_t, cv_t).numpy()
chk("restored weights give the best validation AUC", np_auc(s_best, yva), best_auc, 1e-6)
chk("restored logits vs numpy", s_best, np_model(Xva.astype(np.float64), Cva), 1e-4)
chk("validation AUC above chance", best_auc > 0.6, True, exact=True)
print("epochs", len(val_aucs), "best epoch", best_ep, "val AUC", [round(v, 4) for v in val_aucs], "loss", [round(v, 4) for v in losses[::16]])
finish()
c = best_auc + losses[-1] + float(np.abs(s_best).sum())
k = perm[:BS]
report("tabular", ts[0], ts[1] + ts[2], step, (Tensor(Xtr[k]), Tensor(Ctr[k]), Tensor(ytr[k])), c)
