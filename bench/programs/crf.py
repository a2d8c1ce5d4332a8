# dynamic programming over time, against numpy: an HMM's forward algorithm in log space (logsumexp over the previous
# state), the backward pass and the state posteriors (each row sums to 1), Viterbi decoding by max / argmax and a
# backtrack by gathers, a linear-chain CRF's negative log-likelihood over a length-masked batch (the partition function by
# the forward recursion, the gold path's score by gathers) with its gradient w.r.t. the transitions equal to the expected
# minus the observed transition counts; cumsum / cummax / logcumsumexp of running scores; the CRF trained with Adam under
# TinyJit, its Viterbi paths against numpy's
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam

from bench import chk, finish, report

rng = np.random.default_rng(646)
B, T, S = 4, 9, 5
lens_np = np.array([9, 6, 4, 1]); mask_np = (np.arange(T)[None] < lens_np[:, None]).astype(np.float32)

def np_lse(a, axis):
  m = a.max(axis, keepdims=True); return (m + np.log(np.exp(a - m).sum(axis, keepdims=True))).squeeze(axis)

# an HMM: log start, log transition, log emission scores per step (B, T, S)
start_np = np.log(rng.dirichlet(np.ones(S))); trans_np = np.log(rng.dirichlet(np.ones(S), S)); emit_np = rng.standard_normal((B, T, S)) * 2
start, trans, emit = Tensor(start_np.astype(np.float32)), Tensor(trans_np.astype(np.float32)), Tensor(emit_np.astype(np.float32))
def forward(start, trans, emit, mask):
  a = start + emit[:, 0]; alphas = [a]
  for t in range(1, emit.shape[1]):
    nxt = (a.unsqueeze(2) + trans.unsqueeze(0)).logsumexp(1) + emit[:, t]
    m = mask[:, t].unsqueeze(1)
    a = m * nxt + (1 - m) * a; alphas.append(a)
  return a.logsumexp(1), Tensor.stack(*alphas, dim=1)
def backward(trans, emit, mask):
  b = Tensor.zeros(emit.shape[0], S); betas = [b]
  for t in range(emit.shape[1] - 1, 0, -1):
    prv = (trans.unsqueeze(0) + (emit[:, t] + b).unsqueeze(1)).logsumexp(2)
    m = mask[:, t].unsqueeze(1)
    b = m * prv + (1 - m) * b; betas.append(b)
  return Tensor.stack(*betas[::-1], dim=1)
def viterbi(start, trans, emit, mask):
  score = start + emit[:, 0]; bps = []
  for t in range(1, emit.shape[1]):
    cand = score.unsqueeze(2) + trans.unsqueeze(0)                  # (B, from, to)
    best, arg = cand.max(1), cand.argmax(1)
    m = mask[:, t].unsqueeze(1)
    score = m * (best + emit[:, t]) + (1 - m) * score
    bps.append((m > 0).where(arg, Tensor.arange(S).unsqueeze(0).expand(emit.shape[0], S)))   # padding: stay
  last = score.argmax(1)
  path = [last]
  for bp in reversed(bps): last = bp.gather(1, last.unsqueeze(1)).squeeze(1); path.append(last)
  return score.max(1), Tensor.stack(*path[::-1], dim=1)

def np_forward(s0, tr, em, mask):
  a = s0 + em[:, 0]; al = [a]
  for t in range(1, T):
    nx = np_lse(a[:, :, None] + tr[None], 1) + em[:, t]; m = mask[:, t:t + 1]; a = m * nx + (1 - m) * a; al.append(a)
  return np_lse(a, 1), np.stack(al, 1)
def np_viterbi(s0, tr, em, lens):
  paths, scores = [], []
  for b in range(len(lens)):
    sc = s0 + em[b, 0]; bp = []
    for t in range(1, lens[b]): c = sc[:, None] + tr; bp.append(c.argmax(0)); sc = c.max(0) + em[b, t]
    p = [int(sc.argmax())]
    for k in reversed(bp): p.append(int(k[p[-1]]))
    p = p[::-1]; paths.append(p + [p[-1]] * (T - lens[b])); scores.append(sc.max())
  return np.array(scores), np.array(paths)

M = Tensor(mask_np)
logz, alphas = forward(start, trans, emit, M)
ref_logz, ref_alphas = np_forward(start_np, trans_np, emit_np, mask_np)
chk("hmm log likelihood", logz, ref_logz, 1e-5)
chk("alphas", alphas, ref_alphas, 1e-4)
betas = backward(trans, emit, M)
post = (alphas + betas - logz.reshape(B, 1, 1)).exp()
chk("posteriors sum to 1 (valid steps)", post.sum(2).numpy() * mask_np, mask_np, 1e-5)
chk("beta at t=0 gives the same likelihood", (start + emit[:, 0] + betas[:, 0]).logsumexp(1), ref_logz, 1e-5)
vscore, vpath = viterbi(start, trans, emit, M)
ref_vs, ref_vp = np_viterbi(start_np, trans_np, emit_np, lens_np)
chk("viterbi score", vscore, ref_vs, 1e-5)
chk("viterbi path", vpath, ref_vp, exact=True)

# running scores: cumsum, cummax, logcumsumexp along time
run_np = emit_np[:, :, 0].astype(np.float32)
R = Tensor(run_np)
chk("cumsum", R.cumsum(1), np.cumsum(run_np.astype(np.float64), 1), 1e-5)
chk("cummax", R.cummax(1)[0], np.maximum.accumulate(run_np, 1), exact=True)
chk("logcumsumexp", R.logcumsumexp(1), np.logaddexp.accumulate(run_np.astype(np.float64), 1), 1e-5)
chk("logcumsumexp of large values", (R * 40).logcumsumexp(1), np.logaddexp.accumulate(run_np.astype(np.float64) * 40, 1), 1e-4)

# a linear-chain CRF: learned transitions + a linear emission layer over features, the nll over the masked batch
F = 6
x_np = rng.standard_normal((B, T, F)).astype(np.float32)
tags_np = np.stack([np.clip(np.round(np.cumsum(rng.standard_normal(T)) % S), 0, S - 1) for _ in range(B)]).astype(np.int32)
class CRF:
  def __init__(self, r):
    self.w = Tensor((r.standard_normal((F, S)) * 0.3).astype(np.float32)); self.start = Tensor.zeros(S).contiguous()
    self.trans = Tensor((r.standard_normal((S, S)) * 0.1).astype(np.float32))
  def params(self): return [self.w, self.start, self.trans]
  def nll(self, x, tags, mask):
    em = x @ self.w
    logz, _ = forward(self.start, self.trans, em, mask)
    e_gold = (em.gather(2, tags.unsqueeze(2)).squeeze(2) * mask).sum(1)
    t_gold = (self.trans[tags[:, :-1], tags[:, 1:]] * mask[:, 1:]).sum(1)
    gold = self.start[tags[:, 0]] + e_gold + t_gold
    return (logz - gold).mean()
crf = CRF(np.random.default_rng(9))
for p in crf.params(): p.requires_grad = True
X, TG = Tensor(x_np), Tensor(tags_np)
loss = crf.nll(X, TG, M)
Wn, Sn, Tn = (p.numpy().astype(np.float64) for p in crf.params())
em_np = x_np.astype(np.float64) @ Wn
lz, al = np_forward(Sn, Tn, em_np, mask_np)
gold_np = np.array([Sn[tags_np[b, 0]] + sum(em_np[b, t, tags_np[b, t]] for t in range(lens_np[b]))
                    + sum(Tn[tags_np[b, t - 1], tags_np[b, t]] for t in range(1, lens_np[b])) for b in range(B)])
chk("crf nll", loss, (lz - gold_np).mean(), 1e-5)
# d nll / d trans = (expected transition counts - observed) / B; expected counts from alphas, betas and the pair scores
ab = backward(Tensor(Tn.astype(np.float32)), Tensor(em_np.astype(np.float32)), M).numpy().astype(np.float64)
exp_cnt = np.zeros((S, S)); obs = np.zeros((S, S))
for b in range(B):
  for t in range(1, lens_np[b]):
    exp_cnt += np.exp(al[b, t - 1][:, None] + Tn + em_np[b, t][None] + ab[b, t][None] - lz[b])
    obs[tags_np[b, t - 1], tags_np[b, t]] += 1
g_trans = loss.gradient(crf.trans)[0]
chk("crf grad wrt transitions (expected - observed counts)", g_trans, (exp_cnt - obs) / B, 1e-5)

opt = Adam(crf.params(), lr=0.05)
@TinyJit
def step(x, tags, mask):
  opt.zero_grad()
  loss = crf.nll(x, tags, mask).backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
ts, losses = [], []
with Context(TRAINING=1):
  for _ in range(30):
    st = time.perf_counter(); losses.append(step(X, TG, M).item()); ts.append(time.perf_counter() - st)
chk("first step loss", losses[0], (lz - gold_np).mean(), 1e-5)
chk("crf loss decreases", losses[-1] < losses[0] * 0.6, True, exact=True)
em2 = X @ crf.w
_, path = viterbi(crf.start, crf.trans, em2, M)
_, ref_path = np_viterbi(crf.start.numpy().astype(np.float64), crf.trans.numpy().astype(np.float64), em2.numpy().astype(np.float64), lens_np)
chk("trained viterbi path", path, ref_path, exact=True)
acc = float(((path.numpy() == tags_np) * mask_np).sum() / mask_np.sum())
print("losses", [round(v, 4) for v in losses[::6]], "tag accuracy", round(acc, 3), "path dtype", path.dtype == dtypes.int32)
finish()
c = losses[-1] + float(logz.sum().item()) + acc
report("crf", ts[0], ts[1] + ts[2], step, (X, TG, M), c)
