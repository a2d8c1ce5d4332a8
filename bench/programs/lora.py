# LoRA fine-tuning of a small "pretrained" transformer classifier (weights from bench.init), against numpy: rank-4
# adapters on the q / v projections and the head (A random, B zero, scale alpha / r), the base weights frozen (requires_grad
# False here, torch-style; tinygrad 0.14 has no requires_grad: there they are only left out of the optimizer); at B = 0 the
# outputs equal the base model's (to 1e-6: fused sums may be ordered differently); the adapters' gradients equal s G A^T
# and s B^T G for G the (frozen) weight's own gradient; AdamW on the adapters only under TinyJit, the base weights unchanged
# bit for bit; merged weights W + s B A give the adapted outputs and unmerging gives W back; the adapters alone saved by
# safe_save and loaded into a fresh model; two adapter sets swapped on one base by assign
import os
import tempfile
import time

import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import AdamW
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save

from bench import chk, data, finish, init, peer, report

V, T, D, H, F, C, Bsz, RANK, ALPHA = 40, 8, 16, 2, 32, 5, 12, 4, 8.0

class Block:
  def __init__(self):
    self.q, self.k, self.v, self.o = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
    self.ln1, self.ln2, self.fc1, self.fc2 = nn.LayerNorm(D), nn.LayerNorm(D), nn.Linear(D, F), nn.Linear(F, D)
  def __call__(self, x, mask):
    h = self.ln1(x)
    sp = lambda t: t.reshape(x.shape[0], T, H, D // H).transpose(1, 2)
    a = sp(self.q(h)) @ sp(self.k(h)).transpose(-1, -2) / np.sqrt(D // H) + mask
    x = x + self.o((a.softmax(-1) @ sp(self.v(h))).transpose(1, 2).reshape(x.shape[0], T, D))
    return x + self.fc2(self.fc1(self.ln2(x)).gelu())
class Classifier:
  def __init__(self):
    self.tok_embed, self.pos_embed, self.blocks, self.head = nn.Embedding(V, D), nn.Embedding(T, D), [Block(), Block()], nn.Linear(D, C)
  def __call__(self, ids):
    pad = (ids == 0).reshape(ids.shape[0], 1, 1, T).where(-1e9, 0.0)              # key padding
    x = self.tok_embed(ids) + self.pos_embed(Tensor.arange(T)).unsqueeze(0)
    for b in self.blocks: x = b(x, pad)
    keep = (ids != 0).unsqueeze(-1).float()
    return self.head((x * keep).sum(1) / keep.sum(1).maximum(1))

class LoRA:
  def __init__(self, base: nn.Linear, seed):
    r = np.random.default_rng(seed)
    self.base, self.scale = base, ALPHA / RANK
    self.A = Tensor((r.uniform(-1, 1, (RANK, base.weight.shape[1])) / np.sqrt(base.weight.shape[1])).astype(np.float32))
    self.B = Tensor.zeros(base.weight.shape[0], RANK).contiguous()
  def __call__(self, x): return self.base(x) + (x @ self.A.T @ self.B.T) * self.scale
  def delta(self): return self.scale * (self.B @ self.A)
def freeze(t):
  try: t.requires_grad = False        # ours (torch-style): backward() skips it
  except AttributeError: pass         # tinygrad 0.14's Tensor has no requires_grad (__slots__): left out of the optimizer only

model = Classifier(); init(model)
base_params = get_parameters(model)
for p in base_params: freeze(p)
ids_np = [data(70 + i, Bsz, T, kind="int", hi=V).numpy() for i in range(4)]
for a in ids_np: a[np.arange(Bsz), np.arange(T)[np.arange(Bsz) % T]] = 0   # some padding
ids = [Tensor(a) for a in ids_np]
labels = [data(80 + i, Bsz, kind="int", hi=C) for i in range(4)]
base_out = model(ids[0]).numpy()
snapshot = {k: v.numpy().copy() for k, v in get_state_dict(model).items()}
base_snap = [p.numpy().copy() for p in base_params]

# wrap q / v of both blocks and the head
targets = [(b, n) for b in model.blocks for n in ("q", "v")] + [(model, "head")]
adapters = []
for i, (obj, name) in enumerate(targets):
  lo = LoRA(getattr(obj, name), 100 + i); setattr(obj, name, lo); adapters.append(lo)
lora_params = [t for a in adapters for t in (a.A, a.B)]
if not peer():
  for t in lora_params: t.requires_grad = True
print("trainable", sum(t.numel() for t in lora_params), "of", sum(t.numel() for t in base_params) + sum(t.numel() for t in lora_params))
chk("B = 0: outputs equal the base model's", model(ids[0]), base_out, 1e-6)

# the adapters' gradients against the frozen weights' own gradient G: dL/dB = s G A^T, dL/dA = s B^T G
for a in adapters: a.B.assign(Tensor(np.random.default_rng(5).uniform(-0.1, 0.1, a.B.shape).astype(np.float32))).realize()
loss = model(ids[0]).sparse_categorical_crossentropy(labels[0])
head = adapters[-1]
gA, gB, G = loss.gradient(head.A, head.B, head.base.weight)
chk("head dL/dB = s G A^T", gB, head.scale * G.numpy() @ head.A.numpy().T, 1e-5)
chk("head dL/dA = s B^T G", gA, head.scale * head.B.numpy().T @ G.numpy(), 1e-5)
q0 = adapters[0]
gA, gB, G = loss.gradient(q0.A, q0.B, q0.base.weight)
chk("q dL/dB = s G A^T", gB, q0.scale * G.numpy() @ q0.A.numpy().T, 1e-5)
chk("q dL/dA = s B^T G", gA, q0.scale * q0.B.numpy().T @ G.numpy(), 1e-5)
loss.backward()
if not peer(): chk("frozen weights get no .grad", sum(p.grad is not None for p in base_params), 0, exact=True)
else: print("tinygrad 0.14: no requires_grad, backward() gives the frozen weights a .grad too (unused)")
chk("adapters get a .grad", all(t.grad is not None for t in lora_params), True, exact=True)
for a in adapters: a.B.assign(Tensor.zeros(*a.B.shape)).realize()
for t in lora_params: t.grad = None

# AdamW on the adapters only, under TinyJit
opt = AdamW(lora_params, lr=0.02, weight_decay=0.01)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = model(x).sparse_categorical_crossentropy(y)
  loss.backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
ts, losses = [], []
with Context(TRAINING=1):
  for i in range(32):
    st = time.perf_counter(); losses.append(step(ids[i % 4], labels[i % 4]).item()); ts.append(time.perf_counter() - st)
print("losses", [round(v, 4) for v in losses[::8]])
chk("loss decreases", np.mean(losses[-4:]) < np.mean(losses[:4]) * 0.6, True, exact=True)
chk("base weights unchanged", all(np.array_equal(p.numpy(), v) for p, v in zip(base_params, base_snap)), True, exact=True)
adapted = model(ids[1]).numpy()
acc = float((adapted.argmax(1) == labels[1].numpy()).mean())

# merge: W + s B A into plain Linears gives the same outputs; unmerging gives W back
merged = Classifier(); load_state_dict(merged, {k: Tensor(v) for k, v in snapshot.items()})
for (obj, name), a in zip([(b, n) for b in merged.blocks for n in ("q", "v")] + [(merged, "head")], adapters):
  lin = getattr(obj, name); lin.weight.assign(lin.weight + a.delta()).realize()
chk("merged outputs == adapted", merged(ids[1]), adapted, 1e-5)
w_un = merged.head.weight - adapters[-1].delta()
chk("unmerge gives W back", w_un, snapshot["head.weight"], 1e-6)
chk("merge by numpy", merged.blocks[1].v.weight, snapshot["blocks.1.v.weight"] + adapters[3].scale * adapters[3].B.numpy() @ adapters[3].A.numpy(), 1e-6)

# only the adapters saved and loaded into a fresh model on the same base
adict = {f"{i}.{n}": getattr(a, n) for i, a in enumerate(adapters) for n in ("A", "B")}
path = os.path.join(tempfile.mkdtemp(), "adapters.safetensors")
safe_save(adict, path, metadata={"rank": str(RANK), "alpha": str(ALPHA)})
fresh = Classifier(); load_state_dict(fresh, {k: Tensor(v) for k, v in snapshot.items()})
fresh_ad = []
for obj, name in [(b, n) for b in fresh.blocks for n in ("q", "v")] + [(fresh, "head")]:
  lo = LoRA(getattr(obj, name), 999); setattr(obj, name, lo); fresh_ad.append(lo)
ld = safe_load(path)
for i, a in enumerate(fresh_ad):
  a.A.assign(ld[f"{i}.A"].to(a.A.device)).realize(); a.B.assign(ld[f"{i}.B"].to(a.B.device)).realize()
chk("adapters reloaded: same outputs", fresh(ids[1]), adapted, exact=True)
chk("adapter file size", os.path.getsize(path) < 4 * sum(t.numel() for t in lora_params) + 2048, True, exact=True)

# two adapter sets on one base, swapped by assign: task B's adapters zero -> the base model again
saved = [(a.A.numpy().copy(), a.B.numpy().copy()) for a in fresh_ad]
for a in fresh_ad: a.B.assign(Tensor.zeros(*a.B.shape)).realize()
chk("zero adapters: base outputs", fresh(ids[0]), base_out, 1e-6)
for a, (sa, sb) in zip(fresh_ad, saved): a.A.assign(Tensor(sa)).realize(); a.B.assign(Tensor(sb)).realize()
chk("swapped back", fresh(ids[1]), adapted, exact=True)
finish()
print("accuracy on batch 1", acc)
c = losses[-1] + float(np.abs(adapted).sum()) + sum(float(np.abs(a.B.numpy()).sum()) for a in adapters)
report("lora", ts[0], ts[1] + ts[2], step, (ids[0], labels[0]), c)
