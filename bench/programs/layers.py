# the nn layers the first survey didn't cover: Embedding into Conv1d / ConvTranspose1d with GroupNorm, RMSNorm and
# LayerNorm over sequences; Conv2d + BatchNorm (train vs eval statistics), ConvTranspose2d (stride 2, output_padding),
# InstanceNorm and LayerNorm2d over images; Linear without bias; trained with AdamW under TinyJit
import time

from tinygrad import TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters, get_state_dict

from bench import data, init, report

V, D, T, C = 50, 32, 16, 8
class SeqNet:
  def __init__(self):
    self.emb = nn.Embedding(V, D)
    self.c1 = nn.Conv1d(D, D, 3, padding=1)
    self.gn = nn.GroupNorm(4, D)
    self.c2 = nn.Conv1d(D, D, 4, stride=2, padding=1, bias=False)
    self.up = nn.ConvTranspose1d(D, D, 4, stride=2, padding=1)
    self.ln, self.rms = nn.LayerNorm(D), nn.RMSNorm(D)
    self.head = nn.Linear(D, V, bias=False)
  def __call__(self, tok):
    x = self.emb(tok).transpose(1, 2)                  # B, D, T
    x = self.gn(self.c1(x)).silu()
    x = x + self.up(self.c2(x).gelu())                 # down then up: same length
    x = self.ln(x.transpose(1, 2))
    return self.head(self.rms(x + x.relu()))
class ImgNet:
  def __init__(self):
    self.conv, self.bn = nn.Conv2d(3, C, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(C)
    self.up = nn.ConvTranspose2d(C, C, 3, stride=2, padding=1, output_padding=1)
    self.inorm, self.ln2d = nn.InstanceNorm(C), nn.LayerNorm2d(C)
    self.out = nn.Conv2d(C, 3, 1)
  def __call__(self, x):
    h = self.bn(self.conv(x)).relu()                   # 8x8
    h = self.inorm(self.up(h)).leaky_relu(0.1)         # 16x16
    return self.out(self.ln2d(h))

seq, img = SeqNet(), ImgNet(); init(seq); init(img, seed=1)
tok, tgt = data(1, 4, T, kind="int", hi=V), data(2, 4, T, kind="int", hi=V)
X = data(3, 4, 3, 16, 16)
params = get_parameters(seq) + get_parameters(img)
print("param tensors", len(params), "numel", sum(p.numel() for p in params), "state keys", len(get_state_dict(img)))
opt = nn.optim.AdamW(params, lr=2e-3, weight_decay=0.05)
@TinyJit
def step(tok, tgt, x):
  opt.zero_grad()
  l1 = seq(tok).sparse_categorical_crossentropy(tgt)
  l2 = (img(x) - x).square().mean()
  (l1 + l2).backward()
  opt.step()
  return l1.realize(), l2.realize()
with Context(TRAINING=1):
  ts = []
  for i in range(5):
    st = time.perf_counter()
    l1, l2 = step(tok, tgt, X)
    ts.append(time.perf_counter() - st)
    print(f"  step {i} ce {l1.item():.4f} mse {l2.item():.4f}")
  train_out = img(X).realize()
with Context(TRAINING=0): eval_out = img(X).realize()
print("bn running", round(img.bn.running_mean.sum().item(), 4), round(img.bn.running_var.sum().item(), 4),
      "tracked", img.bn.num_batches_tracked.item())
print("train vs eval out", round(train_out.sum().item(), 3), round(eval_out.sum().item(), 3),
      "differ", bool((train_out - eval_out).abs().max().item() > 1e-4))
# the norms' invariants on the trained layers
x = seq.emb(tok).transpose(1, 2)
g = seq.gn(seq.c1(x))
print("shapes", seq(tok).shape, img(X).shape, seq.up(seq.c2(g)).shape, "gn mean", round(g.mean().item(), 3))
n = nn.InstanceNorm(C, affine=False)(img.up(img.conv(X)))
print("instnorm mean/std", round(n.mean((2, 3)).abs().max().item(), 3), round(n.std((2, 3)).mean().item(), 3))
r = nn.RMSNorm(D, elementwise_affine=False)(seq.emb(tok))
print("rms", round(r.square().mean(-1).mean().item(), 4))
report("layers", ts[0], ts[1] + ts[2], step, (tok, tgt, X), l1.item() + l2.item(), chk=lambda r: r[0].item() + r[1].item())
