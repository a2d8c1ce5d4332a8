# point clouds, against numpy: a PointNet classifier (a T-Net predicting a 3 x 3 input transform added to the identity, a
# shared per-point MLP by nn.Conv1d with kernel 1, a max over the points, an MLP head; weights from bench.init) checked
# against a numpy forward, invariance to the order of the points, the critical points (the argmax of the max pool) giving
# the same global feature alone, the T-Net's orthogonality regularizer |I - A A^T|^2; farthest point sampling (a loop of
# minimum / argmax / gather, eager and under TinyJit), a ball query by a radius mask + sort of masked indices (the first
# ns points inside, padded with the first), grouping by gather and by advanced indexing, a set-abstraction layer (the
# shared MLP on relative coordinates, max over each ball), the Chamfer distance by a distance matrix; Adam on the
# classifier with random rotations about z under TinyJit
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam

from bench import chk, finish, init, report

B, N, S, NS, RAD, NCLS = 8, 64, 16, 8, 0.6, 3

def make_clouds(r, n):
  pts, ys = [], []
  for i in range(n):
    c = i % NCLS
    u = r.standard_normal((N, 3))
    if c == 0: p = u / np.linalg.norm(u, axis=1, keepdims=True)                           # sphere
    elif c == 1: p = u / np.abs(u).max(1, keepdims=True)                                    # cube surface
    else:                                                                                  # cylinder
      a = r.uniform(0, 2 * np.pi, N); p = np.stack([np.cos(a), np.sin(a), r.uniform(-1, 1, N)], 1)
    th = r.uniform(0, 2 * np.pi)
    rz = np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]])
    pts.append(p @ rz.T * r.uniform(0.8, 1.2) + r.normal(0, 0.02, (N, 3))); ys.append(c)
  return np.stack(pts).astype(np.float32), np.array(ys, np.int32)

class TNet:
  def __init__(self): self.c1, self.c2, self.fc = nn.Conv1d(3, 16, 1), nn.Conv1d(16, 32, 1), nn.Linear(32, 9)
  def feat(self, x): return self.c2(self.c1(x).relu()).relu()     # x: (B, 3, N) -> (B, 32, N)
  def __call__(self, x): return self.fc(self.feat(x).max(-1)).reshape(-1, 3, 3) + Tensor.eye(3)
class PointNet:
  def __init__(self):
    self.tnet = TNet()
    self.c1, self.c2, self.c3 = nn.Conv1d(3, 32, 1), nn.Conv1d(32, 32, 1), nn.Conv1d(32, 64, 1)
    self.f1, self.f2 = nn.Linear(64, 32), nn.Linear(32, NCLS)
  def features(self, pts):                    # pts: (B, N, 3) -> point features (B, 64, N), transform
    A = self.tnet(pts.transpose(1, 2))
    x = (pts @ A).transpose(1, 2)
    return self.c3(self.c2(self.c1(x).relu()).relu()), A
  def __call__(self, pts):
    f, A = self.features(pts)
    return self.f2(self.f1(f.max(-1)).relu()), A

def relu(v): return np.maximum(v, 0)
def np_conv1(w, b, x): return np.einsum("oi,bin->bon", w[..., 0], x) + b[None, :, None]
def np_pointnet(P, pts):
  t = pts.transpose(0, 2, 1)
  tf = relu(np_conv1(P["tnet.c2.weight"], P["tnet.c2.bias"], relu(np_conv1(P["tnet.c1.weight"], P["tnet.c1.bias"], t)))).max(-1)
  A = (tf @ P["tnet.fc.weight"].T + P["tnet.fc.bias"]).reshape(-1, 3, 3) + np.eye(3)
  x = (pts @ A).transpose(0, 2, 1)
  h = relu(np_conv1(P["c1.weight"], P["c1.bias"], x)); h = relu(np_conv1(P["c2.weight"], P["c2.bias"], h))
  f = np_conv1(P["c3.weight"], P["c3.bias"], h)
  g = relu(f.max(-1) @ P["f1.weight"].T + P["f1.bias"])
  return g @ P["f2.weight"].T + P["f2.bias"], f, A

def fps(p, s):                                # p: (B, N, 3) -> indices (B, s) of farthest point sampling from point 0
  b, n, _ = p.shape
  dist, far, out = Tensor.full((b, n), 1e10), Tensor.zeros(b, dtype=dtypes.int32), []
  for _ in range(s):
    out.append(far)
    c = p.gather(1, far.reshape(b, 1, 1).expand(b, 1, 3))
    dist = dist.minimum(((p - c) ** 2).sum(-1))
    far = dist.argmax(1).cast(dtypes.int32)
  return Tensor.stack(*out, dim=1)
def np_fps(p, s):
  out = np.zeros((p.shape[0], s), np.int64)
  for bi in range(p.shape[0]):
    dist, far = np.full(p.shape[1], 1e10), 0
    for j in range(s):
      out[bi, j] = far; dist = np.minimum(dist, ((p[bi] - p[bi, far]) ** 2).sum(-1)); far = int(dist.argmax())
  return out
def ball_query(p, centers, r, ns):            # -> (B, S, ns): the first ns point indices within r, padded with the first
  n = p.shape[1]
  d2 = ((centers.unsqueeze(2) - p.unsqueeze(1)) ** 2).sum(-1)
  key = (d2 < r * r).where(Tensor.arange(n, dtype=dtypes.int32).reshape(1, 1, n), n)
  idx = key.sort(-1)[0][..., :ns]
  return (idx == n).where(idx[..., :1], idx)
def np_ball_query(p, centers, r, ns):
  out = np.zeros((*centers.shape[:2], ns), np.int64)
  for bi in range(p.shape[0]):
    for si in range(centers.shape[1]):
      inside = np.nonzero(((p[bi] - centers[bi, si]) ** 2).sum(-1) < r * r)[0][:ns]
      out[bi, si] = np.concatenate([inside, np.full(ns - len(inside), inside[0])])
  return out
def group(p, idx):                            # p: (B, N, C), idx: (B, S, ns) -> (B, S, ns, C)
  b, s, ns = idx.shape
  return p.gather(1, idx.reshape(b, s * ns, 1).expand(b, s * ns, p.shape[2])).reshape(b, s, ns, p.shape[2])

pts_np, y_np = make_clouds(np.random.default_rng(0), B)
pts = Tensor(pts_np)
model = PointNet()
init(model)
P = {k: v.numpy().astype(np.float64) for k, v in nn.state.get_state_dict(model).items()}

# the classifier against numpy, order invariance, critical points
logits, A = model(pts)
ref_logits, ref_f, ref_A = np_pointnet(P, pts_np.astype(np.float64))
chk("T-Net transform", A, ref_A, 1e-5)
chk("logits", logits, ref_logits, 1e-4)
perm = np.random.default_rng(1).permutation(N)
chk("logits invariant to the order of points", model(Tensor(pts_np[:, perm]))[0], logits.numpy(), 1e-5)
f, _ = model.features(pts)
# the points that win a max of the T-Net's features or of the global features
crit = np.concatenate([f.argmax(-1).numpy(), model.tnet.feat(pts.transpose(1, 2)).argmax(-1).numpy()], 1)
for bi in range(2):
  cp = np.unique(crit[bi])
  chk(f"critical points alone give the global feature ({len(cp)} of {N})", model.features(Tensor(pts_np[bi:bi + 1, cp]))[0].max(-1)[0],
      f.max(-1).numpy()[bi], 1e-5)
reg = ((Tensor.eye(3) - A @ A.transpose(1, 2)) ** 2).sum((1, 2)).mean()
chk("orthogonality regularizer", reg, ((np.eye(3) - ref_A @ ref_A.transpose(0, 2, 1)) ** 2).sum((1, 2)).mean(), 1e-4)

# sampling and grouping against numpy
fi = fps(pts, S)
ref_fi = np_fps(pts_np.astype(np.float64), S)
chk("farthest point sampling", fi, ref_fi, exact=True)
fps_jit = TinyJit(lambda p: fps(p, S).realize())
for i in range(3):
  q_np = make_clouds(np.random.default_rng(10 + i), B)[0]
  chk(f"farthest point sampling under TinyJit ({i})", fps_jit(Tensor(q_np)), np_fps(q_np.astype(np.float64), S), exact=True)
centers = group(pts, fi.unsqueeze(-1))[:, :, 0]
chk("centers by gather", centers, pts_np[np.arange(B)[:, None], ref_fi], exact=True)
bq = ball_query(pts, centers, RAD, NS)
ref_bq = np_ball_query(pts_np.astype(np.float64), pts_np[np.arange(B)[:, None], ref_fi].astype(np.float64), RAD, NS)
chk("ball query", bq, ref_bq, exact=True)
g = group(pts, bq)
chk("grouping by gather == by advanced indexing", g, pts[Tensor.arange(B).reshape(B, 1, 1), bq].numpy(), exact=True)
rel = g - centers.unsqueeze(2)
chk("neighbors lie within the radius", ((rel ** 2).sum(-1) < RAD * RAD).all(), True, exact=True)
sa1, sa2 = nn.Conv1d(3, 16, 1), nn.Conv1d(16, 32, 1)
init(sa1, seed=3); init(sa2, seed=4)
local = sa2(sa1(rel.reshape(B, S * NS, 3).transpose(1, 2)).relu()).reshape(B, 32, S, NS).max(-1)
relnp = (pts_np.astype(np.float64)[np.arange(B)[:, None, None], ref_bq] - pts_np.astype(np.float64)[np.arange(B)[:, None], ref_fi][:, :, None])
h = relu(np_conv1(sa1.weight.numpy(), sa1.bias.numpy(), relnp.reshape(B, S * NS, 3).transpose(0, 2, 1)))
chk("set abstraction features", local, np_conv1(sa2.weight.numpy(), sa2.bias.numpy(), h).reshape(B, 32, S, NS).max(-1), 1e-5)

# Chamfer distance between each cloud and its next
a, b2 = pts, Tensor(np.roll(pts_np, 1, 0))
dm = ((a.unsqueeze(2) - b2.unsqueeze(1)) ** 2).sum(-1)
cham = dm.min(2).mean(1) + dm.min(1).mean(1)
dn = ((pts_np[:, :, None].astype(np.float64) - np.roll(pts_np, 1, 0)[:, None].astype(np.float64)) ** 2).sum(-1)
chk("Chamfer distance", cham, dn.min(2).mean(1) + dn.min(1).mean(1), 1e-5)

# training: Adam with random rotations about z, under TinyJit
train = [make_clouds(np.random.default_rng(100 + i), 24) for i in range(4)]
def rot(th): return np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]], np.float32)
opt = Adam(nn.state.get_parameters(model), lr=3e-3)
@TinyJit
def step(xb, yb, R):
  opt.zero_grad()
  lg, A = model(xb @ R)
  loss = lg.sparse_categorical_crossentropy(yb) + 1e-3 * ((Tensor.eye(3) - A @ A.transpose(1, 2)) ** 2).sum((1, 2)).mean()
  loss.backward()
  acc = (lg.argmax(-1) == yb).float().mean()
  Tensor.realize(loss, acc, *opt.schedule_step())
  return loss, acc
rr = np.random.default_rng(5)
ts, losses, accs = [], [], []
with Context(TRAINING=1):
  for i in range(40):
    xb, yb = train[i % 4]
    st = time.perf_counter(); lo, ac = step(Tensor(xb), Tensor(yb), Tensor(rot(rr.uniform(0, 2 * np.pi))))
    losses.append(lo.item()); accs.append(ac.item()); ts.append(time.perf_counter() - st)
chk("loss decreases", np.mean(losses[-4:]) < np.mean(losses[:4]) * 0.7, True, exact=True)
test_x, test_y = make_clouds(np.random.default_rng(200), 30)
test_acc = (model(Tensor(test_x))[0].argmax(-1).numpy() == test_y).mean()
print("loss", [round(v, 4) for v in losses[::8]], "train acc", [round(v, 3) for v in accs[::8]], "test acc", round(float(test_acc), 3))
finish()
c = losses[-1] + float(np.abs(logits.numpy()).sum()) + float(cham.sum().item())
report("pointnet", ts[0], ts[1] + ts[2], step, (Tensor(train[0][0]), Tensor(train[0][1]), Tensor(rot(0.3))), c, chk=lambda r: r[0].item())
