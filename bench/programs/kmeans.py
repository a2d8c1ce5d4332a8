# clustering and neighbours, each against numpy: a squared-distance matrix by the matmul expansion and by broadcasting,
# argmin / min / gather of the nearest centroid, cluster sizes by one_hot sums and by scatter_reduce (a bincount), centroid
# updates by one_hot matmuls with empty clusters kept, k-means iterations under TinyJit with the centroids updated by assign
# (against numpy's Lloyd iterations from the same start), k-means++-style seeding by argmax of distances, a kNN classifier
# (topk smallest, labels gathered by index, votes by one_hot sums, argmax); then per-user aggregates of a ratings table by
# scatter_reduce (sum / prod / mean / amax / amin, include_self both ways) against numpy's ufunc.at
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import chk, finish, report

rng = np.random.default_rng(11)
K, D, N = 4, 3, 240
centers = rng.standard_normal((K, D)).astype(np.float32) * 4
x_np = (centers[rng.integers(0, K, N)] + rng.standard_normal((N, D))).astype(np.float32)
x = Tensor(x_np).realize()

def sqdist(a, b):  # (n, d), (k, d) -> (n, k)
  return (a * a).sum(1, keepdim=True) - 2 * a @ b.T + (b * b).sum(1).unsqueeze(0)
def sqdist_np(a, b): return ((a[:, None, :].astype(np.float64) - b[None]) ** 2).sum(-1)
c0_np = x_np[[3, 50, 100, 150]].copy()
c0 = Tensor(c0_np)
d_mm, d_bc = sqdist(x, c0), ((x.unsqueeze(1) - c0.unsqueeze(0)) ** 2).sum(-1)
chk("distance by matmul", d_mm, sqdist_np(x_np, c0_np), 1e-3); chk("distance by broadcast", d_bc, sqdist_np(x_np, c0_np), 1e-4)
a_np = sqdist_np(x_np, c0_np).argmin(1)
chk("argmin", d_bc.argmin(1), a_np, exact=True); chk("min", d_bc.min(1), sqdist_np(x_np, c0_np).min(1), 1e-4)
chk("gather nearest", d_bc.gather(1, d_bc.argmin(1).unsqueeze(1)).squeeze(1), sqdist_np(x_np, c0_np).min(1), 1e-4)
chk("argmin keepdim", d_bc.argmin(1, keepdim=True), a_np[:, None], exact=True)
counts_np = np.bincount(a_np, minlength=K)
assign = d_bc.argmin(1)
chk("bincount by one_hot", assign.one_hot(K).sum(0), counts_np, exact=True)
chk("bincount by scatter_reduce", Tensor.zeros(K, dtype=dtypes.int32).scatter_reduce(0, assign, Tensor.ones(N, dtype=dtypes.int32), "sum"), counts_np, exact=True)
chk("bincount by comparison", (assign.unsqueeze(1) == Tensor.arange(K).unsqueeze(0)).sum(0), counts_np, exact=True)

# k-means++-style seeding: the next seed is the point farthest from the seeds so far (deterministic)
seeds = [0]
for _ in range(K - 1):
  dmin = ((x.unsqueeze(1) - x[Tensor(seeds)].unsqueeze(0)) ** 2).sum(-1).min(1)
  seeds.append(int(dmin.argmax().item()))
ref_seeds = [0]
for _ in range(K - 1): ref_seeds.append(int(sqdist_np(x_np, x_np[ref_seeds]).min(1).argmax()))
chk("farthest-point seeds", np.array(seeds), np.array(ref_seeds), exact=True)

# Lloyd iterations under TinyJit; an empty cluster keeps its centroid
cent = Tensor(c0_np).contiguous().realize()
@TinyJit
def kmeans_step(x):
  d = sqdist(x, cent)
  oh = d.argmin(1).one_hot(K).float()                 # (N, K)
  cnt = oh.sum(0)
  new = (oh.T @ x) / cnt.maximum(1).unsqueeze(1)
  cent.assign((cnt > 0).unsqueeze(1).where(new, cent))
  inertia = d.min(1).sum()
  return Tensor.realize(inertia, cent)
ts, inertias = [], []
for _ in range(12):
  st = time.perf_counter(); inertias.append(kmeans_step(x).item()); ts.append(time.perf_counter() - st)
cn = c0_np.astype(np.float64)
for _ in range(12):
  dd = sqdist_np(x_np, cn); a = dd.argmin(1)
  cn = np.stack([x_np[a == k].mean(0) if (a == k).any() else cn[k] for k in range(K)])
chk("k-means centroids", cent, cn, 1e-4)
chk("k-means assignments", sqdist(x, cent).argmin(1), sqdist_np(x_np, cn).argmin(1), exact=True)
chk("inertia non-increasing", all(b <= a + 1e-3 for a, b in zip(inertias, inertias[1:])), True, exact=True)
# an empty cluster: a centroid far from every point keeps its place
far = Tensor(np.concatenate([c0_np[:3], np.full((1, D), 100, np.float32)])).contiguous().realize()
oh = sqdist(x, far).argmin(1).one_hot(K).float(); cnt = oh.sum(0)
kept = (cnt > 0).unsqueeze(1).where((oh.T @ x) / cnt.maximum(1).unsqueeze(1), far)
chk("empty cluster kept", kept[3], np.full(D, 100, np.float32), exact=True)

# kNN classification
labels_np = sqdist_np(x_np, centers).argmin(1).astype(np.int32); labels = Tensor(labels_np)
q_np = (rng.standard_normal((20, D)) * 4).astype(np.float32); q = Tensor(q_np)
KN = 7
dq = ((q.unsqueeze(1) - x.unsqueeze(0)) ** 2).sum(-1)
vals, idx = dq.topk(KN, dim=1, largest=False)
dq_np = sqdist_np(q_np, x_np); idx_np = np.argsort(dq_np, 1, kind="stable")[:, :KN]
chk("knn distances", vals, np.take_along_axis(dq_np, idx_np, 1), 1e-4)
chk("knn indices", idx, idx_np, exact=True)
votes = labels[idx].one_hot(K).sum(1)
votes_np = np.stack([np.bincount(labels_np[r], minlength=K) for r in idx_np])
chk("knn votes", votes, votes_np, exact=True); chk("knn prediction", votes.argmax(1), votes_np.argmax(1), exact=True)
wvotes = (labels[idx].one_hot(K) / (vals.unsqueeze(-1) + 1e-3)).sum(1)
chk("distance-weighted votes", wvotes, np.stack([np.bincount(labels_np[r], weights=1 / (dq_np[i, r] + 1e-3), minlength=K) for i, r in enumerate(idx_np)]), 1e-4)

# a ratings table: per-user aggregates by scatter_reduce
U, R = 9, 60
users_np = rng.integers(0, U - 1, R).astype(np.int32)                # user U-1 rates nothing
ratings_np = rng.integers(1, 6, R).astype(np.float32) / 2
users, ratings = Tensor(users_np), Tensor(ratings_np)
base_np = np.full(U, 1.5, np.float32); base = Tensor(base_np)
def at(op, include_self, init):
  out = base_np.copy() if include_self else np.full(U, init, np.float32)
  op.at(out, users_np, ratings_np)
  if not include_self: out = np.where(np.bincount(users_np, minlength=U) > 0, out, base_np)
  return out
cnt_np = np.bincount(users_np, minlength=U)
for inc in (True, False):
  chk(f"scatter sum include_self={inc}", base.scatter_reduce(0, users, ratings, "sum", include_self=inc), at(np.add, inc, 0), 1e-5)
  chk(f"scatter prod include_self={inc}", base.scatter_reduce(0, users, ratings, "prod", include_self=inc), at(np.multiply, inc, 1), 1e-4)
  chk(f"scatter amax include_self={inc}", base.scatter_reduce(0, users, ratings, "amax", include_self=inc), at(np.maximum, inc, -np.inf), exact=True)
  chk(f"scatter amin include_self={inc}", base.scatter_reduce(0, users, ratings, "amin", include_self=inc), at(np.minimum, inc, np.inf), exact=True)
  msum = at(np.add, inc, 0)
  mean_ref = np.where(cnt_np > 0, msum / (cnt_np + (1 if inc else 0)).clip(1), base_np) if not inc else msum / (cnt_np + 1)
  chk(f"scatter mean include_self={inc}", base.scatter_reduce(0, users, ratings, "mean", include_self=inc), mean_ref, 1e-5)
# 2-d: per-user, per-genre maxima
G = 3
genre_np = rng.integers(0, G, R)
src2 = Tensor(np.eye(G, dtype=np.float32)[genre_np] * ratings_np[:, None])
m2 = Tensor.zeros(U, G).scatter_reduce(0, users.unsqueeze(1).expand(R, G), src2, "amax", include_self=True)
ref2 = np.zeros((U, G), np.float32); np.maximum.at(ref2, users_np, np.eye(G, dtype=np.float32)[genre_np] * ratings_np[:, None])
chk("scatter amax 2-d", m2, ref2, exact=True)
print("inertia", [round(v, 2) for v in inertias[::3]], "knn predictions", votes.argmax(1).tolist()[:10])
finish()
c = inertias[-1] + float(cent.abs().sum().item()) + float(wvotes.sum().item()) / 100 + float(m2.sum().item())
report("kmeans", ts[0], ts[1] + ts[2], kmeans_step, (x,), c)
