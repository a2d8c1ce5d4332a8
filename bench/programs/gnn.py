# a graph neural network on an edge list: node degrees by scatter_reduce / one_hot sums, symmetric normalization, message
# passing by gather (x[src]) and segment sums (scatter_reduce "sum" and "amax", index_put-like one_hot matmuls), a GCN and a
# GAT-style attention layer (a softmax per destination node: segment max, exp, segment sum, gather back), a node
# classification loss on a mask, Adam under TinyJit; each aggregation checked against numpy's add.at / maximum.at
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context

from bench import data, init, report

NN, E, F, HID, C = 40, 160, 12, 24, 4
rng = np.random.default_rng(17)
src_np, dst_np = rng.integers(0, NN, E).astype(np.int32), rng.integers(0, NN, E).astype(np.int32)
src_np, dst_np = np.concatenate([src_np, np.arange(NN, dtype=np.int32)]), np.concatenate([dst_np, np.arange(NN, dtype=np.int32)])  # self loops
src, dst = Tensor(src_np).realize(), Tensor(dst_np).realize()
EE = src_np.shape[0]

def seg_sum(vals, idx, n):  # vals: E, F -> n, F (sum of the rows with each index)
  return Tensor.zeros(n, vals.shape[1]).scatter_reduce(0, idx.reshape(-1, 1).expand(-1, vals.shape[1]), vals, reduce="sum")
def seg_max(vals, idx, n):
  return Tensor.full((n, vals.shape[1]), -1e9).scatter_reduce(0, idx.reshape(-1, 1).expand(-1, vals.shape[1]), vals, reduce="amax")
def seg_sum_onehot(vals, idx, n): return idx.one_hot(n).float().T @ vals

deg = Tensor.zeros(NN, dtype=dtypes.int32).scatter_reduce(0, dst, Tensor.ones(EE, dtype=dtypes.int32), reduce="sum")
rdeg = np.zeros(NN, np.int32); np.add.at(rdeg, dst_np, 1)
print("degrees", (deg.numpy() == rdeg).all(), deg.dtype, "one_hot degrees", (dst.one_hot(NN).sum(0).numpy() == rdeg).all())
v = data(1, EE, 3); vn = v.numpy()
rs = np.zeros((NN, 3), np.float32); np.add.at(rs, dst_np, vn)
rm = np.full((NN, 3), -1e9, np.float32); np.maximum.at(rm, dst_np, vn)
print("seg sum", float(np.abs(seg_sum(v, dst, NN).numpy() - rs).max()), "one_hot", float(np.abs(seg_sum_onehot(v, dst, NN).numpy() - rs).max()),
      "seg max", float(np.abs(seg_max(v, dst, NN).numpy() - rm).max()))
print("scatter mean", float(np.abs(Tensor.zeros(NN, 3).scatter_reduce(0, dst.reshape(-1, 1).expand(-1, 3), v, reduce="mean", include_self=False).numpy()
      - rs / np.maximum(rdeg, 1)[:, None]).max()))

class GCN:
  def __init__(self): self.l1, self.l2 = nn.Linear(F, HID), nn.Linear(HID, HID)
  def __call__(self, x):
    norm = (deg.float().rsqrt()[src] * deg.float().rsqrt()[dst]).reshape(-1, 1)   # 1/sqrt(d_i d_j) per edge
    for l in (self.l1, self.l2): x = seg_sum(l(x)[src] * norm, dst, NN).relu()
    return x
class GAT:
  def __init__(self): self.w, self.a_src, self.a_dst, self.out = nn.Linear(HID, HID, bias=False), nn.Linear(HID, 1, bias=False), nn.Linear(HID, 1, bias=False), nn.Linear(HID, C)
  def __call__(self, x):
    h = self.w(x)
    e = (self.a_src(h)[src] + self.a_dst(h)[dst]).leaky_relu(0.2)                # E, 1
    e = e - seg_max(e, dst, NN)[dst]                                               # a softmax over each node's incoming edges
    w = e.exp(); att = w / seg_sum(w, dst, NN)[dst]
    return self.out(seg_sum_onehot(att * h[src], dst, NN).elu())
class Model:
  def __init__(self): self.gcn, self.gat = GCN(), GAT()
  def __call__(self, x): return self.gat(self.gcn(x))
m = Model(); init(m)
opt = nn.optim.Adam(nn.state.get_parameters(m), lr=5e-3)
x, y = data(2, NN, F), data(3, NN, kind="int", hi=C)
train_mask = Tensor(rng.random(NN) < 0.6).realize()
@TinyJit
def step(x, y):
  opt.zero_grad()
  logp = m(x).log_softmax(-1)
  nll = -logp.gather(1, y.reshape(-1, 1)).squeeze(1)
  loss = (nll * train_mask).sum() / train_mask.sum()
  loss.backward(); opt.step()
  acc = ((logp.argmax(-1) == y) & ~train_mask).sum() / (~train_mask).sum()
  return loss.realize(), acc.realize()
losses, ts = [], []
with Context(TRAINING=1):
  for _ in range(8):
    st = time.perf_counter(); l, acc = step(x, y); losses.append(l.item()); ts.append(time.perf_counter() - st)
print("losses", [round(v, 4) for v in losses], "held-out acc", round(acc.item(), 4))
# the attention weights into each node sum to 1
h = m.gat.w(m.gcn(x)); e = (m.gat.a_src(h)[src] + m.gat.a_dst(h)[dst]).leaky_relu(0.2)
w = (e - seg_max(e, dst, NN)[dst]).exp(); att = w / seg_sum(w, dst, NN)[dst]
print("attention sums", bool((seg_sum(att, dst, NN) - 1).abs().max().item() < 1e-5))
report("gnn", ts[0], ts[1] + ts[2], step, (x, y), sum(losses), train=True, chk=lambda r: r[0].item())
