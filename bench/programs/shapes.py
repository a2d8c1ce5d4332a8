# reductions and shape ops at edge sizes, each against numpy: 0-size dims (sum / prod / mean / any / all / cumsum over
# them, matmul with an empty inner dim, cat with empty parts), size-1 broadcasting, keepdim, negative dims, flatten /
# unflatten, repeat / repeat_interleave / expand / permute, split / chunk with uneven sizes, squeeze / unsqueeze,
# tuple axes, 0-d tensors; then a jitted step built from these ops
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import data, report

bad = []
def chk(name, t, ref, tol=1e-5):
  ref = np.asarray(ref)
  got = t.numpy() if isinstance(t, Tensor) else np.asarray(t)
  if got.shape != ref.shape or not np.allclose(got, ref, atol=tol, rtol=tol, equal_nan=True): bad.append((name, got.shape, ref.shape))
  return got

a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
t = Tensor(a)
e = np.zeros((3, 0, 4), np.float32); te = Tensor(e)
# empty dims
chk("sum empty", te.sum(1), e.sum(1)); chk("sum empty all", te.sum(), e.sum()); chk("prod empty", te.prod(1), e.prod(1))
chk("mean empty dim0", te.mean(0), e.mean(0) if e.shape[0] else np.zeros((0, 4)))
chk("any empty", te.any(1), e.any(1)); chk("all empty", te.all(1), e.all(1)); chk("cumsum empty", te.cumsum(1), e.cumsum(1))
chk("matmul empty k", Tensor.ones(2, 0) @ Tensor.ones(0, 3), np.zeros((2, 3)))
chk("matmul empty m", (Tensor.ones(0, 5) @ Tensor.ones(5, 3)), np.zeros((0, 3)))
chk("cat empty", Tensor.cat(Tensor.ones(2, 0), Tensor.ones(2, 3), Tensor.ones(2, 0), dim=1), np.ones((2, 3)))
chk("reshape empty", te.reshape(0, 12), e.reshape(0, 12)); chk("permute empty", te.permute(2, 0, 1), e.transpose(2, 0, 1))
chk("pad empty", te.pad(((0, 0), (1, 1), (0, 0))), np.pad(e, ((0, 0), (1, 1), (0, 0))))
chk("expand empty", Tensor.ones(1, 0).expand(4, 0), np.ones((4, 0)))
chk("std empty-ish", Tensor.ones(3, 1).std(1, correction=0), np.zeros(3))
# keepdim, negative dims, tuple axes
chk("sum keep", t.sum(-1, keepdim=True), a.sum(-1, keepdims=True)); chk("max keep tuple", t.max((0, 2), keepdim=True), a.max((0, 2), keepdims=True))
chk("mean neg", t.mean(-2), a.mean(-2)); chk("min tuple", t.min((-1, -3)), a.min((2, 0))); chk("argmax neg", t.argmax(-2), a.argmax(-2))
chk("argmin keep", t.argmin(1, keepdim=True), a.argmin(1)[:, None]); chk("var tuple", t.var((0, 1)), a.var((0, 1), ddof=1), 1e-4)
chk("logsumexp keep", t.logsumexp(-1, keepdim=True), np.log(np.exp(a).sum(-1, keepdims=True)), 1e-4)
chk("sum 0d", Tensor(3.5).sum(), 3.5); chk("max 0d", Tensor(3.5).max(0) if False else Tensor(3.5).max(), 3.5)
chk("cumsum neg", t.cumsum(-1), a.cumsum(-1)); chk("cumprod", Tensor(a[0] / 10).cumprod(0), np.cumprod(a[0] / 10, 0))
chk("cummax", Tensor(a[0, 0][::-1].copy()).cummax(0)[0], np.maximum.accumulate(a[0, 0][::-1]))
# size-1 broadcasting
b1, b2 = np.arange(3, dtype=np.float32).reshape(3, 1), np.arange(4, dtype=np.float32).reshape(1, 1, 4)
chk("bcast 3", Tensor(b1) + Tensor(b2), b1 + b2); chk("bcast where", (t > 0).where(Tensor(b1), Tensor(b2)), np.where(a > 0, b1, b2))
chk("bcast scalar tensor", t * Tensor([2.0]), a * 2); chk("bcast 0d", t - Tensor(1.5), a - 1.5)
chk("maximum bcast", Tensor(b1).maximum(Tensor(b2)), np.maximum(b1, b2))
# flatten / unflatten / repeat / expand / permute
chk("flatten", t.flatten(), a.flatten()); chk("flatten 1", t.flatten(1), a.reshape(2, 12)); chk("flatten mid", t.flatten(0, 1), a.reshape(6, 4))
chk("unflatten", t.flatten(1).unflatten(1, (3, 4)), a); chk("unflatten -1", t.unflatten(-1, (2, 2)), a.reshape(2, 3, 2, 2))
chk("repeat", t.repeat(2, 1, 3), np.tile(a, (2, 1, 3))); chk("repeat more dims", Tensor(b1).repeat(2, 2, 2), np.tile(b1, (2, 2, 2)))
chk("repeat_interleave", Tensor([1.0, 2, 3]).repeat_interleave(2), np.repeat([1.0, 2, 3], 2))
chk("repeat_interleave dim", t.repeat_interleave(2, dim=1), np.repeat(a, 2, axis=1))
chk("expand -1", Tensor(b1).expand(-1, 5), np.broadcast_to(b1, (3, 5))); chk("expand new", Tensor(b1).expand(2, 3, 4), np.broadcast_to(b1, (2, 3, 4)))
chk("permute neg", t.permute(-1, 0, -2), a.transpose(2, 0, 1))
chk("transpose neg", t.transpose(-1, -3), a.swapaxes(-1, -3))
chk("squeeze", Tensor(b2).squeeze(), b2.squeeze()); chk("squeeze dim", Tensor(b2).squeeze(0), b2.squeeze(0)); chk("squeeze no-op", t.squeeze(1), a)
chk("unsqueeze neg", t.unsqueeze(-1), a[..., None]); chk("unsqueeze -4", t.unsqueeze(-4), a[None])
chk("flip tuple", t.flip((0, -1)), a[::-1, :, ::-1]); chk("roll", t.roll(2, -1), np.roll(a, 2, -1))
# split / chunk, uneven
sp = t.split(3, dim=-1); chk("split sizes", np.array([s.shape[-1] for s in sp]), [3, 1]); chk("split last", sp[1], a[..., 3:])
sp2 = t.split([1, 2], dim=1); chk("split list", sp2[1], a[:, 1:]); ch = Tensor.arange(10).chunk(4)
chk("chunk sizes", np.array([c.shape[0] for c in ch]), [3, 3, 3, 1]); chk("chunk 3 of 5", np.array([c.shape[0] for c in Tensor.arange(5).chunk(3)]), [2, 2, 1])
chk("chunk more than size", np.array([c.shape[0] for c in Tensor.arange(3).chunk(5)]), [1, 1, 1])
chk("split empty rest", np.array([s.shape[0] for s in Tensor.arange(6).split(3)]), [3, 3])
chk("stack neg", Tensor.stack(t, t * 2, dim=-1), np.stack([a, a * 2], -1)); chk("cat neg", Tensor.cat(t, t, dim=-2), np.concatenate([a, a], -2))
chk("meshgrid", Tensor.arange(3).reshape(3, 1).expand(3, 2) * 10 + Tensor.arange(2).reshape(1, 2), np.add.outer(np.arange(3) * 10, np.arange(2)))
# reductions of ints and bools keep or widen dtypes
ib = Tensor([[1, 2], [3, 4]], dtype=dtypes.int8); bb = Tensor([[True, False], [True, True]])
print("dtypes", ib.sum().dtype, ib.prod().dtype, ib.max().dtype, ib.mean().dtype, bb.sum().dtype, bb.any().dtype, bb.cumsum(0).dtype,
      Tensor([1, 2], dtype=dtypes.uint8).sum().dtype, Tensor.ones(2, 0, dtype=dtypes.int32).sum(1).dtype)
chk("int sum", ib.sum(0), [4, 6]); chk("bool sum", bb.sum(1), [1, 2]); chk("bool cumsum", bb.cumsum(1), [[1, 1], [1, 2]])
print("shapes", te.sum(1).shape, te.max(0).shape if te.shape[0] else None, Tensor.ones(0).sum().shape, t.sum((0, 1, 2)).shape,
      Tensor(2.0).reshape(1, 1).shape, Tensor.ones(2, 1, 3).expand(2, 0, 3).shape, t[:, :0].sum(-1).shape)
print("mismatches", bad)

# a jitted step through these ops: an attention-style score with broadcasts, an uneven chunked MLP, keepdim normalization
w = data(1, 12, 12)
@TinyJit
def step(x):
  h = x.flatten(1)                                   # B, 12
  parts = h.split([5, 4, 3], dim=-1)
  h = Tensor.cat(*[p.relu() * (i + 1) for i, p in enumerate(parts)], dim=-1) @ w
  s = h.unsqueeze(1) * h.unsqueeze(2)                # B, 12, 12 by broadcast
  s = s - s.max(-1, keepdim=True)
  p = s.exp() / s.exp().sum(-1, keepdim=True)
  out = (p @ h.unsqueeze(-1)).squeeze(-1)
  return (out.repeat(1, 2).unflatten(1, (2, 12)).permute(1, 0, 2).mean((1, 2)).sum() + out.std(-1).mean()).realize()
x = data(2, 8, 3, 4)
ts, vals = [], []
for _ in range(4):
  st = time.perf_counter(); vals.append(step(x).item()); ts.append(time.perf_counter() - st)
# (tinygrad 0.14: t.repeat(2, 1, 3).sum() is 2304, four times numpy's 576, though the repeated values are right)
print("parts", [round(v, 4) for v in vals], t.cumsum(-1).sum().item(), t.repeat(2, 1, 3).sum().item(), np.tile(a, (2, 1, 3)).sum())
c = vals[0] + float(len(bad)) + t.cumsum(-1).sum().item() + t.repeat(2, 1, 3).sum().item() / 10
report("shapes", ts[0], ts[1] + ts[2], step, (x,), c)
