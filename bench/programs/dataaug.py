# a data pipeline in tensor land: batches gathered with Tensor indices, stacked and concatenated, augmented (flips chosen per
# sample by a mask, random crops by padding + shrink at offsets, cutout masks built from arange), labels one_hot'd and
# mixed (mixup), normalization in float16 and bfloat16 and back; numpy()/tolist()/item() round trips and Tensor(list) of
# mixed Python types. The augmentation parameters come from numpy, so the checksum compares; one Tensor.rand-driven
# augmentation at the end is checked for invariants only (the random streams differ)
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import data, report

N, C, S, K = 64, 3, 16, 10
imgs, labels = data(1, N, C, S, S), data(2, N, kind="int", hi=K)
rng = np.random.default_rng(3)
mean, std = Tensor([0.1, -0.2, 0.05]).reshape(1, C, 1, 1), Tensor([1.1, 0.9, 1.0]).reshape(1, C, 1, 1)

def augment(x, y, flip, dx, dy, cut, lam, perm):
  b = x.shape[0]
  x = flip.reshape(b, 1, 1, 1).where(x.flip(3), x)                       # per-sample horizontal flip
  xp = x.pad(((0, 0), (0, 0), (2, 2), (2, 2)))                               # crops: pad 2 and shrink at (dy, dx)
  x = Tensor.stack(*[xp[i, :, dy[i]:dy[i] + S, dx[i]:dx[i] + S] for i in range(b)])
  ar = Tensor.arange(S)
  cy, cx = cut[:, 0].reshape(b, 1, 1), cut[:, 1].reshape(b, 1, 1)
  hole = ((ar.reshape(1, S, 1) - cy).abs() < 3) & ((ar.reshape(1, 1, S) - cx).abs() < 3)  # cutout: a 5x5 hole
  x = hole.unsqueeze(1).where(0.0, x)
  x = ((x - mean) / std).cast(dtypes.half)                                   # normalized, stored as half
  oh = y.one_hot(K).float()
  x2, oh2 = x[perm], oh[perm]                                                # mixup with a permuted copy
  xm = (lam * x.float() + (1 - lam) * x2.float()).cast(dtypes.bfloat16)
  return xm, lam * oh + (1 - lam) * oh2

B = 16
@TinyJit
def make_batch(idx, flip, cut, perm):
  x, y = imgs[idx], labels[idx]
  dx, dy = [int(v) for v in offs[0]], [int(v) for v in offs[1]]  # crop offsets: fixed per capture (python ints)
  return [t.realize() for t in augment(x, y, flip, dx, dy, cut, 0.7, perm)]
offs = rng.integers(0, 5, (2, B))
ts, sums, batches = [], [], []
for _ in range(4):
  idx = Tensor(rng.permutation(N)[:B].astype(np.int32))
  flip = Tensor(rng.random(B) < 0.5)
  cut = Tensor(rng.integers(0, S, (B, 2)).astype(np.int32))
  perm = Tensor(rng.permutation(B).astype(np.int32))
  st = time.perf_counter()
  xb, yb = make_batch(idx.realize(), flip.realize(), cut.realize(), perm.realize())
  s = xb.float().sum().item()
  ts.append(time.perf_counter() - st)
  sums.append(round(s, 1)); batches.append((xb.float().clone().realize(), yb.clone().realize()))  # a replay refills xb, yb
print("batch sums", sums, xb.dtype, yb.dtype, xb.shape)
print("soft labels rows sum to 1", bool(((yb.sum(1) - 1).abs() < 1e-6).all().item()), "max", round(yb.max().item(), 2))
allx = Tensor.cat(*[b[0] for b in batches])
ally = Tensor.stack(*[b[1] for b in batches], dim=0)
print("cat", allx.shape, round(allx.mean().item(), 4), "stack", ally.shape, round(ally.argmax(-1).float().mean().item(), 4))
# round trips between numpy, python lists and tensors
npb = allx.numpy()
print("numpy", npb.dtype, npb.shape, round(float(npb[3, 1, 2, 5]), 4), "item", round(allx[3, 1, 2, 5].item(), 4))
lst = ally[0, :2].tolist()
print("tolist", [[round(v, 2) for v in r] for r in lst])
mixed = Tensor([[1, 2.5, True], [False, -3, 0.25]])
ints = Tensor([[1, 2, 3], [True, False, 7]])
bools = Tensor([True, False, True])
print("mixed", mixed.dtype, mixed.tolist(), ints.dtype, ints.sum().item(), bools.dtype, bools.sum().item(), Tensor(npb[:2, 0, 0, :3]).dtype)
hb = Tensor([1.0, 2 ** -10, 65504.0, -2.25, 1 / 3])  # (tinygrad 0.14 on CPU doesn't round float -> half: 1/3 stays 0.33333334)
print("half", hb.half()[:4].tolist(), "bf16", hb.bfloat16().tolist(), "bf16->half", hb.bfloat16().half().float().tolist()[:2])
print("ints", Tensor([3.7, -3.7, 255.9]).cast(dtypes.int32).tolist(), Tensor([300, -1]).cast(dtypes.uint8).tolist(),
      Tensor([1.5, 0.0]).cast(dtypes.bool).tolist(), (Tensor([7, 8]) // 3).tolist(), (Tensor([7, 8]) / 2).dtype)
# a Tensor.rand-driven augmentation: only invariants compare
Tensor.manual_seed(5)
flipr = Tensor.rand(N) < 0.5
bright = Tensor.uniform(N, 1, 1, 1, low=0.8, high=1.2)
aug = flipr.reshape(N, 1, 1, 1).where(imgs.flip(3), imgs) * bright
same = (aug == imgs * bright).reshape(N, -1).all(1) | (aug == imgs.flip(3) * bright).reshape(N, -1).all(1)
print("rand aug", aug.shape, "each sample flipped or not", bool(same.all().item()),
      "brightness in range", bool(((bright >= 0.8) & (bright < 1.2)).all().item()), "flip fraction ok", 10 < flipr.sum().item() < 54)
report("dataaug", ts[0], ts[1] + ts[2], make_batch, (idx, flip, cut, perm), sum(sums), train=False, chk=lambda r: r[0].float().sum().item())
