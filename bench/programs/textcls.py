# a tokenizer-free text classifier, each loss against numpy: byte ids padded with 0 into a batch, nn.Embedding, mean and max
# pooling over a padding mask (masked_fill, where), a multi-class head trained with sparse_categorical_crossentropy
# (label_smoothing, ignore_index on unlabeled rows, reduction sum / none), cross_entropy on soft targets with label_smoothing,
# nll_loss with class weights and ignore_index, a multi-label head with binary_crossentropy_logits (pos_weight); AdamW under
# TinyJit, then accuracy by argmax and a confusion matrix from one_hot sums
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context

from bench import chk, finish, init, report

texts = ["the cat sat on the mat", "tinygrad is small", "a dog barked", "kernels fuse", "numpy checks it all",
         "zebra", "one more sentence here", "ok", "lazy tensors realize late", "assign updates state", "xyz", "padding matters"]
B, T, V, D, C, L = len(texts), 24, 128, 16, 4, 3
ids_np = np.zeros((B, T), np.int32)
for i, s in enumerate(texts): ids_np[i, :len(s)] = np.frombuffer(s.encode()[:T], np.uint8)
lens_np = (ids_np != 0).sum(1)
labels_np = np.array([0, 1, 2, 1, 3, 2, 0, -100, 1, 3, -100, 0], np.int32)   # -100: unlabeled (ignore_index=-100)
multi_np = (np.random.default_rng(8).random((B, L)) < 0.4).astype(np.float32)
ids, labels, multi = Tensor(ids_np).realize(), Tensor(labels_np).realize(), Tensor(multi_np).realize()

class Model:
  def __init__(self):
    self.embed = nn.Embedding(V, D)
    self.proj = nn.Linear(2 * D, D)
    self.cls, self.tags = nn.Linear(D, C), nn.Linear(D, L)
  def __call__(self, ids):
    mask = (ids != 0).unsqueeze(-1)                                   # B, T, 1
    e = self.embed(ids)
    mean = (e * mask).sum(1) / mask.sum(1).maximum(1)
    mx = e.masked_fill(mask.logical_not(), -float("inf")).max(1)
    h = self.proj(Tensor.cat(mean, mx, dim=-1)).gelu()
    return self.cls(h), self.tags(h)
m = Model(); init(m)
def np_gelu(x): return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
def np_forward():
  sd = {k: v.numpy().astype(np.float64) for k, v in nn.state.get_state_dict(m).items()}
  e = sd["embed.weight"][ids_np]; mask = (ids_np != 0)[..., None]
  mean = (e * mask).sum(1) / np.maximum(mask.sum(1), 1); mx = np.where(mask, e, -np.inf).max(1)
  h = np_gelu(np.concatenate([mean, mx], -1) @ sd["proj.weight"].T + sd["proj.bias"])
  return h @ sd["cls.weight"].T + sd["cls.bias"], h @ sd["tags.weight"].T + sd["tags.bias"]
def np_logsoftmax(z): z = z - z.max(-1, keepdims=True); return z - np.log(np.exp(z).sum(-1, keepdims=True))
lg_np, tg_np = np_forward()
lp = np_logsoftmax(lg_np); keep = labels_np != -100
lg, tg = m(ids)
chk("lengths", (ids != 0).sum(1), lens_np, exact=True)
chk("logits", lg, lg_np, 1e-5); chk("tag logits", tg, tg_np, 1e-5)
nll = -lp[np.arange(B), np.where(keep, labels_np, 0)]
for ls in (0.0, 0.1):
  per = (1 - ls) * nll + ls * -lp.mean(-1)
  chk(f"sparse ce ls={ls}", lg.sparse_categorical_crossentropy(labels, ignore_index=-100, label_smoothing=ls), per[keep].mean(), 1e-5)
  chk(f"sparse ce sum ls={ls}", lg.sparse_categorical_crossentropy(labels, ignore_index=-100, label_smoothing=ls, reduction="sum"), per[keep].sum(), 1e-4)
  chk(f"sparse ce none ls={ls}", lg.sparse_categorical_crossentropy(labels, ignore_index=-100, label_smoothing=ls, reduction="none"),
      np.where(keep, per, 0), 1e-5)
  # the default ignore_index=-1 ignores nothing: a label outside [0, C) adds no nll term but keeps its smoothing term and its count
  chk(f"sparse ce default ignore ls={ls}", lg.sparse_categorical_crossentropy(labels, label_smoothing=ls),
      ((1 - ls) * np.where(keep, nll, 0) + ls * -lp.mean(-1)).mean(), 1e-5)
# ignore_index other than -1: class 3 rows ignored
keep3 = (labels_np != 3) & keep
chk("sparse ce ignore 3", lg[Tensor(np.nonzero(keep)[0].astype(np.int32))].sparse_categorical_crossentropy(labels[Tensor(np.nonzero(keep)[0].astype(np.int32))], ignore_index=3),
    nll[keep3].mean(), 1e-5)
soft_np = np.random.default_rng(9).dirichlet(np.ones(C), B).astype(np.float32)
for ls in (0.0, 0.2):
  chk(f"cross_entropy soft ls={ls}", lg.cross_entropy(Tensor(soft_np), label_smoothing=ls), -(lp * ((1 - ls) * soft_np + ls / C)).sum(-1).mean(), 1e-5)
chk("cross_entropy one_hot", lg.cross_entropy(labels.maximum(0).one_hot(C)), nll.mean(), 1e-5)
chk("cross_entropy none", lg.cross_entropy(Tensor(soft_np), reduction="none"), -(lp * soft_np).sum(-1), 1e-5)
cw_np = np.array([1.0, 2.0, 0.5, 3.0], np.float32)
wsel = cw_np[np.where(keep, labels_np, 0)] * keep
chk("nll_loss weight ignore", lg.log_softmax().nll_loss(labels, weight=Tensor(cw_np), ignore_index=-100), (nll * wsel).sum() / wsel.sum(), 1e-5)
chk("nll_loss sum", lg.log_softmax().nll_loss(labels, ignore_index=-100, reduction="sum"), nll[keep].sum(), 1e-4)
pw_np = np.array([1.0, 3.0, 0.5], np.float32)
lsig = lambda z: -np.logaddexp(0, -z)   # log sigmoid
bce_ref = -(pw_np * multi_np * lsig(tg_np) + (1 - multi_np) * lsig(-tg_np))
chk("bce logits", tg.binary_crossentropy_logits(multi), -(multi_np * lsig(tg_np) + (1 - multi_np) * lsig(-tg_np)).mean(), 1e-5)
chk("bce logits pos_weight", tg.binary_crossentropy_logits(multi, pos_weight=Tensor(pw_np)), bce_ref.mean(), 1e-5)
chk("bce probs", tg.sigmoid().binary_crossentropy(multi), -(multi_np * lsig(tg_np) + (1 - multi_np) * lsig(-tg_np)).mean(), 1e-4)
# the gradient of an embedding touches only the rows that occur in labeled texts (not the padding id 0)
with Context(TRAINING=1):
  m.embed.weight.grad = None
  lg.sparse_categorical_crossentropy(labels, ignore_index=-100, label_smoothing=0.1).backward()
used = np.zeros(V, bool); used[np.unique(ids_np[keep][ids_np[keep] != 0])] = True   # ignored rows send no gradient
gn = (m.embed.weight.grad.abs().sum(1).numpy() > 0)
chk("embedding grad rows", gn, used, exact=True)

opt = nn.optim.AdamW(nn.state.get_parameters(m), lr=1e-2, weight_decay=0.05)
@TinyJit
def step(ids, labels, multi):
  opt.zero_grad()
  lg, tg = m(ids)
  loss = lg.sparse_categorical_crossentropy(labels, ignore_index=-100, label_smoothing=0.1) + 0.5 * tg.binary_crossentropy_logits(multi, pos_weight=Tensor(pw_np))
  loss.backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
ref0 = ((0.9 * nll + 0.1 * -lp.mean(-1))[keep].mean() + 0.5 * bce_ref.mean())
losses, ts = [], []
with Context(TRAINING=1):
  for _ in range(30):
    st = time.perf_counter(); losses.append(step(ids, labels, multi).item()); ts.append(time.perf_counter() - st)
chk("first training loss", losses[0], ref0, 1e-5)
lg, _ = m(ids)
pred = lg.argmax(-1)
acc = ((pred == labels) & (labels != -100)).sum() / (labels != -100).sum()
conf = (labels.maximum(0).one_hot(C) * (labels != -100).unsqueeze(-1)).T.cast(dtypes.int32) @ pred.one_hot(C).cast(dtypes.int32)
pn = pred.numpy(); cref = np.zeros((C, C), np.int32); np.add.at(cref, (labels_np[keep], pn[keep]), 1)
chk("confusion matrix", conf, cref, exact=True); chk("accuracy", acc, (pn == labels_np)[keep].mean(), 1e-6)
print("losses", [round(v, 4) for v in losses[::6]], "train acc", round(acc.item(), 4))
finish()
with Context(TRAINING=1): report("textcls", ts[0], ts[1] + ts[2], step, (ids, labels, multi), sum(losses))
