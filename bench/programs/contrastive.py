# contrastive learning, SimCLR / MoCo style, against numpy: two views of a batch (noise + per-sample feature masks), an MLP
# encoder with a projection head, L2 normalization by hand, the NT-Xent loss over a 2N x 2N cosine-similarity matrix at a
# temperature (the diagonal masked by -inf, positives at i +- N), its gradient w.r.t. the normalized embeddings against the
# closed form; logsumexp over rows of 4096 wide logits (|logit| up to 50); a MoCo step under TinyJit: a momentum encoder by
# assign (EMA of the online weights), a queue of negatives shifted by assign, InfoNCE with the positive in column 0,
# AdamW with weight decay and global-norm clipping by hand; the learned embeddings retrieve their twin view (top-1 accuracy)
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters, get_state_dict

from bench import chk, finish, init, peer, report

rng = np.random.default_rng(606)
N, D, H, P, K, TAU = 16, 12, 24, 8, 64, 0.2

class Encoder:
  def __init__(self): self.l1, self.l2, self.proj = nn.Linear(D, H), nn.Linear(H, H), nn.Linear(H, P)
  def __call__(self, x): return self.proj(self.l2(self.l1(x).relu()).relu())
def normalize(z, eps=1e-8): return z / z.square().sum(-1, keepdim=True).sqrt().maximum(eps)
def nt_xent(z1, z2, tau):
  z = normalize(z1.cat(z2, dim=0)); n = z1.shape[0]
  sim = (z @ z.T) / tau
  sim = Tensor.eye(2 * n).bool().where(-float("inf"), sim)
  tgt = Tensor.arange(2 * n).add(n).mod(2 * n)
  return sim.sparse_categorical_crossentropy(tgt), z, sim

def np_forward(p, x):
  a = np.maximum(x @ p["l1.weight"].T + p["l1.bias"], 0); a = np.maximum(a @ p["l2.weight"].T + p["l2.bias"], 0)
  return a @ p["proj.weight"].T + p["proj.bias"]
def np_nt_xent(z1, z2, tau):
  z = np.concatenate([z1, z2]); z = z / np.linalg.norm(z, axis=1, keepdims=True); n = len(z1)
  s = z @ z.T / tau; np.fill_diagonal(s, -np.inf)
  tgt = (np.arange(2 * n) + n) % (2 * n)
  m = s.max(1, keepdims=True); lse = (m + np.log(np.exp(s - m).sum(1, keepdims=True)))[:, 0]
  loss = (lse - s[np.arange(2 * n), tgt]).mean()
  g = np.exp(s - lse[:, None]); g[np.arange(2 * n), tgt] -= 1; g /= 2 * n   # d loss / d sim
  return loss, z, (g + g.T) @ z / tau                                        # d loss / d z (z normalized)

base = rng.standard_normal((N, D)).astype(np.float32)
def views(seed):
  r = np.random.default_rng(seed)
  v = [base * (r.random((N, D)) > 0.2) + 0.1 * r.standard_normal((N, D)) for _ in range(2)]
  return [a.astype(np.float32) for a in v]
x1_np, x2_np = views(1)

enc = Encoder(); init(enc, seed=6)
Pn = {k: v.numpy().astype(np.float64) for k, v in get_state_dict(enc).items()}
z1, z2 = enc(Tensor(x1_np)), enc(Tensor(x2_np))
loss, zn, sim = nt_xent(z1, z2, TAU)
ref_loss, ref_z, ref_gz = np_nt_xent(np_forward(Pn, x1_np.astype(np.float64)), np_forward(Pn, x2_np.astype(np.float64)), TAU)
chk("normalized embeddings", zn, ref_z, 1e-5)
chk("unit norms", (zn * zn).sum(1), np.ones(2 * N), 1e-5)
chk("nt-xent loss", loss, ref_loss, 1e-5)
chk("diagonal masked", sim.numpy().diagonal(), np.full(2 * N, -np.inf), exact=True)
zl = Tensor(ref_z.astype(np.float32)); zl.requires_grad = True
s = (zl @ zl.T) / TAU
s = Tensor.eye(2 * N).bool().where(-float("inf"), s)
l2 = s.sparse_categorical_crossentropy(Tensor.arange(2 * N).add(N).mod(2 * N)); l2.backward()
chk("grad wrt normalized z", zl.grad, ref_gz, 1e-5)

# logsumexp over wide rows with large logits, against numpy in float64
wide_np = (rng.standard_normal((4, 4096)) * 12).astype(np.float32); wide_np[1] += 50; wide_np[2, :100] = 50
w64 = wide_np.astype(np.float64); m = w64.max(1, keepdims=True)
chk("logsumexp 4096 wide", Tensor(wide_np).logsumexp(1), (m + np.log(np.exp(w64 - m).sum(1, keepdims=True)))[:, 0], 1e-5)
chk("log_softmax rows sum to 1", Tensor(wide_np).log_softmax(1).exp().sum(1), np.ones(4), 1e-4)

# MoCo: momentum encoder by assign, a queue of negatives, AdamW + clipping, under TinyJit
key_enc = Encoder(); init(key_enc, seed=6)
for p in get_parameters(key_enc): p.requires_grad = False
queue = normalize(Tensor(rng.standard_normal((K, P)).astype(np.float32))).realize()
params = get_parameters(enc)
opt = nn.optim.AdamW(params, lr=3e-3, weight_decay=0.05)
MAXN, MOM = 1.0, 0.9
@TinyJit
def step(xq, xk):
  opt.zero_grad()
  q = normalize(enc(xq))
  k = normalize(key_enc(xk)).detach()
  lpos = (q * k).sum(1, keepdim=True)
  lneg = q @ queue.T
  logits = lpos.cat(lneg, dim=1) / TAU
  loss = logits.sparse_categorical_crossentropy(Tensor.zeros(xq.shape[0], dtype="int32")).backward()
  gn = Tensor.stack(*[p.grad.square().sum() for p in params]).sum().sqrt()
  scale = (MAXN / (gn + 1e-6)).minimum(1.0)
  for p in params: p.grad.assign(p.grad * scale)
  Tensor.realize(loss, gn, *opt.schedule_step())
  for pk, pq in zip(get_parameters(key_enc), params): pk.assign(pk * MOM + pq.detach() * (1 - MOM))
  old = queue[:-xq.shape[0]]
  new = k.cat(old, dim=0)
  queue.assign(new.clone().realize() if peer() else new)   # tinygrad 0.14: see the note below
  Tensor.realize(*get_parameters(key_enc), queue)
  return loss, gn

pairs = [views(10 + i) for i in range(4)]
if peer(): print("tinygrad 0.14: q.assign(new.cat(q[:-n])) writes new's rows into the shifted ones too, eagerly and under TinyJit (q[:-n] read after the write; there also with q[:-n].contiguous().realize()): the program assigns a clone().realize() of the new queue there")
ts, losses, gns = [], [], []
q0 = queue.numpy().copy()
with Context(TRAINING=1):
  for i in range(16):
    a, b = pairs[i % 4]
    st = time.perf_counter(); lo, gn = step(Tensor(a), Tensor(b)); losses.append(lo.item()); gns.append(gn.item()); ts.append(time.perf_counter() - st)
    if i == 0:
      # numpy: the first loss and the first queue update (the key encoder equals the online one before the first step)
      qn = np_forward(Pn, a.astype(np.float64)); qn /= np.linalg.norm(qn, axis=1, keepdims=True)
      kn = np_forward(Pn, b.astype(np.float64)); kn /= np.linalg.norm(kn, axis=1, keepdims=True)
      lg = np.concatenate([(qn * kn).sum(1, keepdims=True), qn @ q0.T], 1) / TAU
      mm = lg.max(1, keepdims=True); ref = (mm[:, 0] + np.log(np.exp(lg - mm).sum(1)) - lg[:, 0]).mean()
      chk("moco first loss", losses[0], ref, 1e-5)
      chk("queue shifted by assign", queue, np.concatenate([kn, q0[:-N]]), 1e-5)
chk("clipped updates ran (grad norm finite)", bool(np.isfinite(gns).all()), True, exact=True)
chk("moco loss decreases once the queue holds real keys", losses[-1] < losses[4], True, exact=True)
ek = {k: v.numpy() for k, v in get_state_dict(key_enc).items()}; eq = {k: v.numpy() for k, v in get_state_dict(enc).items()}
chk("momentum encoder lags the online one", max(np.abs(ek[k] - eq[k]).max() for k in ek) > 1e-4, True, exact=True)
print("losses", [round(v, 4) for v in losses[::4]], "grad norms", [round(v, 3) for v in gns[::4]])

# retrieval: each view-1 embedding's nearest view-2 embedding should be its twin
with Context(TRAINING=0):
  e1, e2 = normalize(enc(Tensor(x1_np))), normalize(enc(Tensor(x2_np)))
  simr = e1 @ e2.T
  top1 = simr.argmax(1).numpy()
  chk("retrieval argmax vs numpy", top1, simr.numpy().argmax(1), exact=True)
  acc = float((top1 == np.arange(N)).mean())
print("top-1 twin retrieval", acc)
finish()
c = losses[-1] + float(loss.item()) + acc
report("contrastive", ts[0], ts[1] + ts[2], step, (Tensor(pairs[0][0]), Tensor(pairs[0][1])), c, chk=lambda r: r[0].item())
