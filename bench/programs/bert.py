import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters

from bench import bench, data, init

V, D, H, L, T, B = 128, 64, 4, 2, 32, 4
class Layer:
  def __init__(self):
    self.q, self.k, self.v, self.o = [nn.Linear(D, D) for _ in range(4)]
    self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
    self.fc1, self.fc2 = nn.Linear(D, 4*D), nn.Linear(4*D, D)
  def __call__(self, x, mask):
    q, k, v = [f(x).reshape(B, T, H, D//H).transpose(1, 2) for f in (self.q, self.k, self.v)]
    a = q.scaled_dot_product_attention(k, v, attn_mask=mask).transpose(1, 2).reshape(B, T, D)
    x = self.ln1(x + self.o(a))
    return self.ln2(x + self.fc2(self.fc1(x).gelu()))
class Bert:
  def __init__(self):
    self.tok, self.pos, self.typ = nn.Embedding(V, D), nn.Embedding(T, D), nn.Embedding(2, D)
    self.ln = nn.LayerNorm(D)
    self.layers = [Layer() for _ in range(L)]
    self.mlm, self.mlm_ln, self.cls = nn.Linear(D, D), nn.LayerNorm(D), nn.Linear(D, 2)
  def __call__(self, ids, tt, mask):
    x = self.ln(self.tok(ids) + self.pos(Tensor.arange(T).reshape(1, T)) + self.typ(tt))
    m = mask.reshape(B, 1, 1, T) > 0
    for l in self.layers: x = l(x, m)
    mlm = self.mlm_ln(self.mlm(x).gelu()) @ self.tok.weight.T
    return mlm, self.cls(x[:, 0].tanh())
m = Bert(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=1e-3)
@TinyJit
def step(ids, tt, mask, lab, nsp):
  opt.zero_grad()
  mlm, c = m(ids, tt, mask)
  loss = mlm.sparse_categorical_crossentropy(lab, ignore_index=-1) + c.sparse_categorical_crossentropy(nsp)
  loss.backward(); opt.step()
  return loss.realize()
ids = data(1, B, T, kind="int", hi=V); tt = data(2, B, T, kind="int", hi=2)
mask = Tensor([[1]*T]*2 + [[1]*(T-8) + [0]*8]*2).realize()
lab = np.random.default_rng(3).integers(0, V, (B, T)); lab[np.random.default_rng(4).random((B, T)) > 0.3] = -1
lab = Tensor(lab.astype(np.int32)).realize(); nsp = data(5, B, kind="int", hi=2)
bench("bert", step, (ids, tt, mask, lab, nsp))
