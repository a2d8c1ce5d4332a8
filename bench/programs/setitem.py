# setitem-heavy code: writes by int, slice, stepped slice, negative index, Ellipsis, int-tensor indices (rows, pairs of
# coordinates), masks by where, `+=` on slices, assign into a slice of a realized buffer, a ring buffer written at a bound
# Variable under TinyJit, a scatter-like histogram by one_hot, a sliding-window update of a state tensor in a loop
import time

import numpy as np
from tinygrad import Tensor, TinyJit, Variable, dtypes

from bench import data, report

rng = np.random.default_rng(11)
def fresh(*shape): return Tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape)).contiguous().realize()
def ref(*shape): return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
res = {}

x, r = fresh(6, 5), ref(6, 5)
x[2] = 7.0; r[2] = 7.0                                   # a whole row by an int
x[:, 1] = Tensor([1.0, 2, 3, 4, 5, 6]); r[:, 1] = [1, 2, 3, 4, 5, 6]
x[::2, 3] = -1.0; r[::2, 3] = -1                         # stepped rows
x[1::3, ::2] = Tensor([[9.0, 8, 7], [6, 5, 4]]); r[1::3, ::2] = [[9, 8, 7], [6, 5, 4]]
x[-1, -2:] = Tensor([0.5, 0.25]); r[-1, -2:] = [0.5, 0.25]
x[..., 0] = x[..., 4] * 2; r[..., 0] = r[..., 4] * 2      # reads the target itself
x[3:5, 2:4] += 100; r[3:5, 2:4] += 100
res["basic"] = np.abs(x.numpy() - r).max()

y, ry = fresh(5, 4), ref(5, 4)
rows = Tensor([4, 0, 2], dtype=dtypes.int32)
y[rows] = Tensor([[1.0, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]]); ry[[4, 0, 2]] = [[1] * 4, [2] * 4, [3] * 4]
yi, xi = Tensor([0, 1, 3], dtype=dtypes.int32), Tensor([3, 0, 2], dtype=dtypes.int32)
y[yi, xi] = Tensor([-5.0, -6, -7]); ry[[0, 1, 3], [3, 0, 2]] = [-5, -6, -7]
y[1, Tensor([1, 2], dtype=dtypes.int32)] = 42.0; ry[1, [1, 2]] = 42
res["tensor index"] = np.abs(y.numpy() - ry).max()

z = data(3, 8, 8); rz = z.numpy().copy()
mask = z > 0.5
z = mask.where(0.5, z); rz[rz > 0.5] = 0.5                # a mask write as where (no bool indexing)
lo = (z < -1).where(z * 0.1, z); rz = np.where(rz < -1, rz * 0.1, rz)
res["mask"] = np.abs(lo.numpy() - rz).max()

buf = Tensor.zeros(4, 10).contiguous().realize(); rb = np.zeros((4, 10), np.float32)
buf[1:3, 2:7].assign(Tensor.ones(2, 5) * 3).realize(); rb[1:3, 2:7] = 3  # assign into a slice of a realized buffer
buf[0].assign(Tensor.arange(10).float()).realize(); rb[0] = np.arange(10)
buf[:, 9] = buf[:, 0] + buf[:, 2]; rb[:, 9] = rb[:, 0] + rb[:, 2]
res["assign view"] = np.abs(buf.numpy() - rb).max()
print({k: float(v) for k, v in res.items()})

# a ring buffer of the last W feature rows, written at a bound Variable under TinyJit, and a running histogram
W, F, NB = 8, 6, 12
ring = Tensor.zeros(W, F).contiguous().realize()
hist = Tensor.zeros(NB).contiguous().realize()
@TinyJit
def push(row, slot, bins):
  ring[slot:slot+1] = row.reshape(1, F)
  hist.assign(hist + bins.one_hot(NB).sum(0).float()).realize()
  return (ring.sum(0) / W).realize(), ring.max().realize()
feats = data(4, 40, F)
binsall = data(5, 40, 16, kind="int", hi=NB)
rr, rh = np.zeros((W, F), np.float32), np.zeros(NB, np.float32)
fn, bn = feats.numpy(), binsall.numpy()
ts, outs = [], []
for i in range(40):
  st = time.perf_counter()
  mean, mx = push(feats[i].clone().realize(), Variable("slot", 0, W - 1).bind(i % W), binsall[i].clone().realize())
  outs.append(mean.sum().item() + mx.item())
  ts.append(time.perf_counter() - st)
  rr[i % W] = fn[i]; np.add.at(rh, bn[i], 1)
print("ring", np.abs(ring.numpy() - rr).max(), "hist", np.abs(hist.numpy() - rh).max(), "last mean", round(outs[-1], 4), "ref", round(float(rr.mean(0).sum() + rr.max()), 4))

# setitem of a dtype'd buffer: uint8 image channels, int32 counters, bool flags
img = Tensor.zeros(3, 4, 4, dtype=dtypes.uint8).contiguous().realize()
img[0] = 255; img[1, 1:3, 1:3] = Tensor([[10, 20], [30, 40]], dtype=dtypes.uint8); img[2, :, ::3] = 7
cnt = Tensor.zeros(5, dtype=dtypes.int32).contiguous().realize()
for k in [1, 3, 3, 4]: cnt[k] += 1
flags = Tensor.zeros(6, dtype=dtypes.bool).contiguous().realize(); flags[::2] = True  # (tinygrad 0.14: all False; a bool setitem into a stepped slice writes nothing)
print("uint8", img.sum().item(), img.dtype, "int32", cnt.tolist(), "bool", flags.tolist())

# a state updated in a loop by window slices (a 1-d Jacobi smoother), first and last cells fixed
u = Tensor(np.linspace(0, 1, 32, dtype=np.float32) ** 2).contiguous().realize(); ru = u.numpy().copy()
for _ in range(20):
  u[1:-1] = (u[:-2] + u[2:]) * 0.5
  u.realize()  # tinygrad 0.14's graph of lazy setitems grows exponentially (8 unrealized: 3.7 s, 20: minutes, 11 GB)
  ru[1:-1] = (ru[:-2] + ru[2:]) * 0.5
print("smoother", float(np.abs(u.numpy() - ru).max()))
parts = [float(sum(outs)), x.sum().item(), y.sum().item(), lo.sum().item(), buf.sum().item(), u.sum().item(), img.sum().item()]
print("parts", [round(p, 3) for p in parts])
chk = float(sum(outs)) + x.sum().item() + y.sum().item() + lo.sum().item() + buf.sum().item() + u.sum().item() + img.sum().item()
report("setitem", ts[0], ts[1] + ts[2], push, (feats[0].clone().realize(), Variable("slot", 0, W - 1).bind(3), binsall[0].clone().realize()), chk,
       chk=lambda r: r[1].item())
