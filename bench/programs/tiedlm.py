# a small causal language model with multi-head attention written by hand (one fused qkv projection split by chunk, heads
# by reshape / transpose, a causal mask from triu, a key padding mask, softmax), pre-norm blocks, the output projection tied
# to the token embedding (one tensor used twice), label smoothing; checked against numpy: the first loss of a numpy forward,
# the tied weight's gradient against the sum of an untied copy's two gradients, the attention by hand against
# scaled_dot_product_attention, global-norm gradient clipping; then AdamW under TinyJit with a linear warmup of the learning
# rate by assign
import math
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context

from bench import chk, finish, init, report

V, D, H, T, B, NL = 48, 32, 4, 12, 4, 2
HD = D // H

def attention(x, qkv, proj, pad_mask):
  q, k, v = qkv(x).chunk(3, dim=-1)
  q, k, v = (t.reshape(B, T, H, HD).transpose(1, 2) for t in (q, k, v))      # B, H, T, HD
  s = q @ k.transpose(-2, -1) / math.sqrt(HD)
  causal = Tensor.ones(T, T).triu(1).bool()
  s = s.masked_fill(causal | pad_mask.reshape(B, 1, 1, T).logical_not(), -float("inf"))
  o = s.softmax(-1) @ v
  return proj(o.transpose(1, 2).reshape(B, T, D))
class Block:
  def __init__(self):
    self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
    self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
    self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
  def __call__(self, x, pad_mask):
    x = x + attention(self.ln1(x), self.qkv, self.proj, pad_mask)
    return x + self.fc2(self.fc1(self.ln2(x)).gelu())
class LM:
  def __init__(self, tied=True):
    self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
    self.blocks = [Block() for _ in range(NL)]
    self.ln = nn.LayerNorm(D)
    self.head = None if tied else Tensor.zeros(V, D).contiguous()
  def __call__(self, ids, pad_mask):
    x = self.tok(ids) + self.pos(Tensor.arange(T).reshape(1, T))
    for b in self.blocks: x = b(x, pad_mask)
    return self.ln(x) @ (self.tok.weight if self.head is None else self.head).T   # weight tying: the embedding again
m = LM(); init(m)
rng = np.random.default_rng(21)
ids_np = rng.integers(1, V, (B, T)).astype(np.int32)
lens = np.array([T, T - 3, T - 5, T])
pad_np = np.arange(T)[None] < lens[:, None]
ids_np[~pad_np] = 0
tgt_np = np.where(pad_np, np.roll(ids_np, -1, 1), -100).astype(np.int32); tgt_np[:, -1] = -100
ids, pad, tgt = Tensor(ids_np), Tensor(pad_np), Tensor(tgt_np)

# numpy forward
def np_ln(x, w, b): mu = x.mean(-1, keepdims=True); var = x.var(-1, keepdims=True); return (x - mu) / np.sqrt(var + 1e-5) * w + b
def np_gelu(x): return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
def np_forward(sd):
  x = sd["tok.weight"][ids_np] + sd["pos.weight"][np.arange(T)][None]
  for i in range(NL):
    def p(n, i=i): return sd[f"blocks.{i}.{n}"]
    h = np_ln(x, p("ln1.weight"), p("ln1.bias"))
    q, k, v = np.split(h @ p("qkv.weight").T + p("qkv.bias"), 3, -1)
    q, k, v = (t.reshape(B, T, H, HD).transpose(0, 2, 1, 3) for t in (q, k, v))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HD)
    s = np.where(np.triu(np.ones((T, T)), 1).astype(bool) | ~pad_np[:, None, None, :], -np.inf, s)
    s = np.exp(s - s.max(-1, keepdims=True)); s = s / s.sum(-1, keepdims=True)
    x = x + (s @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ p("proj.weight").T + p("proj.bias")
    x = x + np_gelu(np_ln(x, p("ln2.weight"), p("ln2.bias")) @ p("fc1.weight").T + p("fc1.bias")) @ p("fc2.weight").T + p("fc2.bias")
  return np_ln(x, sd["ln.weight"], sd["ln.bias"]) @ sd["tok.weight"].T
sd = {k: v.numpy().astype(np.float64) for k, v in nn.state.get_state_dict(m).items()}
logits_np = np_forward(sd)
lp = logits_np - logits_np.max(-1, keepdims=True); lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
keep = tgt_np != -100
per = 0.9 * -np.take_along_axis(lp, np.where(keep, tgt_np, 0)[..., None], -1)[..., 0] + 0.1 * -lp.mean(-1)
ref_loss = per[keep].mean()
def loss_fn(model): return model(ids, pad).sparse_categorical_crossentropy(tgt, ignore_index=-100, label_smoothing=0.1)
chk("logits", m(ids, pad), logits_np, 2e-4)
loss0 = loss_fn(m)
chk("first loss", loss0, ref_loss, 1e-5)
# attention by hand against scaled_dot_product_attention (bool mask: True = attend)
blk = m.blocks[0]; h = blk.ln1(m.tok(ids) + m.pos(Tensor.arange(T).reshape(1, T)))
q, k, v = (t.reshape(B, T, H, HD).transpose(1, 2) for t in blk.qkv(h).chunk(3, dim=-1))
allowed = Tensor.ones(T, T).tril().bool() & pad.reshape(B, 1, 1, T)
chk("sdpa with bool mask", q.scaled_dot_product_attention(k, v, attn_mask=allowed).transpose(1, 2).reshape(B, T, D),
    (attention(h, blk.qkv, lambda o: o, pad)).numpy(), 1e-5)
# the tied weight's gradient is the sum of an untied copy's embedding and head gradients
m2 = LM(tied=False)
sd2 = nn.state.get_state_dict(m2)
for k_, v1 in nn.state.get_state_dict(m).items(): sd2[k_].assign(v1.detach()).realize()
m2.head.assign(m.tok.weight.detach()).realize()
g_tied, = loss_fn(m).gradient(m.tok.weight)
g_emb, g_head = loss_fn(m2).gradient(m2.tok.weight, m2.head)
chk("tied gradient = embedding + head gradients", g_tied, (g_emb + g_head).numpy(), 1e-5)
chk("head gradient is not zero", bool((g_head.abs().sum() > 0).item()), True, exact=True)

params = nn.state.get_parameters(m)
opt = nn.optim.AdamW(params, lr=0.0, weight_decay=0.01)
WARM, LR = 6, 3e-3
MAXN = 0.5
step_i = Tensor([0.0]).contiguous().realize()
@TinyJit
def step(ids, pad, tgt):
  opt.zero_grad()
  loss = loss_fn(m).backward()
  gn = Tensor.stack(*[(p.grad * p.grad).sum() for p in params]).sum().sqrt()
  scale = (MAXN / (gn + 1e-6)).minimum(1.0)
  for p in params: p.grad.assign(p.grad * scale)
  step_i.assign(step_i + 1)
  opt.lr.assign((step_i / WARM).minimum(1.0) * LR)                            # linear warmup by assign
  Tensor.realize(loss, gn, *opt.schedule_step())
  return loss, gn
losses, norms, lrs, ts = [], [], [], []
with Context(TRAINING=1):
  for _ in range(10):
    st = time.perf_counter(); lo, gn = step(ids, pad, tgt); losses.append(lo.item()); norms.append(gn.item()); ts.append(time.perf_counter() - st)
    lrs.append(opt.lr.item())
chk("warmup lr", np.array(lrs), np.minimum(np.arange(1, 11) / WARM, 1.0) * LR, 1e-7)
chk("first jitted loss", losses[0], ref_loss, 1e-5)
chk("clipped norm", float(Tensor.stack(*[(p.grad * p.grad).sum() for p in params]).sum().sqrt().item()) <= MAXN * 1.0001, True, exact=True)
chk("weights still tied", m.tok.weight.numpy() is not None and len([p for p in params if p is m.tok.weight]) == 1, True, exact=True)
print("losses", [round(v, 4) for v in losses[::3]], "grad norms", [round(v, 3) for v in norms[::3]])
finish()
with Context(TRAINING=1):
  report("tiedlm", ts[0], ts[1] + ts[2], step, (ids, pad, tgt), sum(losses) + sum(norms) / 10, chk=lambda r: r[0].item())
