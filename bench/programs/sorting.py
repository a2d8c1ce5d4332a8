# sorting and searching, each against numpy: sort / argsort of sizes 1 to 1000 (not powers of two), descending, along
# dim 0, of int32 / uint8 / float16 / bool, with ties (values, a permutation; stability printed) and nan / inf / -0.0;
# topk on ties; searchsorted left / right by comparisons; unique values / inverse / counts by sort and cumsum; a histogram
# by one_hot; median and quantiles (linear) by sort; ranks by argsort of argsort; the mode by counts; a merge of two
# sorted arrays; a jitted retrieval step (scores, per-row topk, a re-ranking by sort)
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import chk, finish, report

rng = np.random.default_rng(33)
for n in (1, 2, 5, 100, 1000):
  a = rng.standard_normal(n).astype(np.float32)
  v, i = Tensor(a).sort()
  chk(f"sort {n}", v, np.sort(a), exact=True); chk(f"argsort of sort {n}", i, np.argsort(a, kind="stable"), exact=True)
  vd, idd = Tensor(a).sort(descending=True)
  chk(f"sort descending {n}", vd, np.sort(a)[::-1], exact=True); chk(f"argsort descending {n}", idd, np.argsort(-a, kind="stable"), exact=True)
  chk(f"argsort {n}", Tensor(a).argsort(), np.argsort(a, kind="stable"), exact=True)
m = rng.standard_normal((37, 5)).astype(np.float32)
chk("sort along dim 0", Tensor(m).sort(dim=0)[0], np.sort(m, 0), exact=True)
chk("argsort along dim 0 descending", Tensor(m).argsort(dim=0, descending=True), np.argsort(-m, 0, kind="stable"), exact=True)
for dt, arr in [(dtypes.int32, rng.integers(-10**9, 10**9, 50).astype(np.int32)), (dtypes.uint8, rng.integers(0, 256, 50).astype(np.uint8)),
                (dtypes.float16, rng.standard_normal(50).astype(np.float16))]:
  chk(f"sort {dt}", Tensor(arr).sort()[0], np.sort(arr), exact=True)
  chk(f"sort {dt} descending", Tensor(arr).sort(descending=True)[0], np.sort(arr)[::-1], exact=True)
bools = rng.random(20) > 0.5
chk("sort bool", Tensor(bools).sort()[0], np.sort(bools), exact=True)
# ties: the values are sorted and the indices a permutation that gathers them; whether equal keys keep their order is printed
ties = rng.integers(0, 4, 64).astype(np.float32)
tv, ti = Tensor(ties).sort()
chk("sort with ties", tv, np.sort(ties), exact=True)
chk("tie indices a permutation", np.sort(ti.numpy()), np.arange(64), exact=True)
chk("tie indices gather the sorted values", Tensor(ties)[ti], np.sort(ties), exact=True)
print("sort keeps equal keys in order (stable):", bool((ti.numpy() == np.argsort(ties, kind="stable")).all()))
# special values: nan sorts last (numpy, torch), -inf first; -0.0 and 0.0 are equal keys
sp = np.array([3.0, np.nan, -np.inf, 0.0, np.inf, -0.0, -2.0, np.nan], np.float32)
chk("sort inf / -0.0 (finite part)", np.abs(Tensor(sp[[0, 2, 3, 4, 5, 6]]).sort()[0].numpy()), np.abs(np.sort(sp[[0, 2, 3, 4, 5, 6]])), exact=True)
print("sort with nan:", Tensor(sp).sort()[0].tolist(), "numpy:", np.sort(sp).tolist())

# topk on ties: the values are right and the indices point at them, each once
tk = np.array([5, 1, 5, 3, 5, 3, 0, 1], np.float32)
for k, largest in [(3, True), (4, True), (2, False), (3, False)]:
  v, i = Tensor(tk).topk(k, largest=largest)
  refv = np.sort(tk)[::-1][:k] if largest else np.sort(tk)[:k]
  chk(f"topk k={k} largest={largest}", v, refv, exact=True)
  chk(f"topk k={k} largest={largest} indices", tk[i.numpy()], refv, exact=True)
  chk(f"topk k={k} largest={largest} distinct", len(set(i.tolist())), k, exact=True)
rows = rng.integers(0, 3, (6, 10)).astype(np.float32)
chk("row topk values", Tensor(rows).topk(4, dim=1)[0], -np.sort(-rows, 1)[:, :4], exact=True)

# searchsorted by comparisons
edges_np = np.sort(rng.integers(0, 20, 15)).astype(np.float32); q_np = rng.integers(-2, 23, 40).astype(np.float32)
edges, q = Tensor(edges_np), Tensor(q_np)
left, right = (edges.unsqueeze(0) < q.unsqueeze(1)).sum(1), (edges.unsqueeze(0) <= q.unsqueeze(1)).sum(1)
chk("searchsorted left", left, np.searchsorted(edges_np, q_np, "left"), exact=True)
chk("searchsorted right", right, np.searchsorted(edges_np, q_np, "right"), exact=True)

# unique by sort: first occurrences, inverse indices, counts
u_np = rng.integers(0, 9, 50).astype(np.int32)
s = Tensor(u_np).sort()[0]
first = Tensor.ones(1, dtype=dtypes.bool).cat(s[1:] != s[:-1])
nuniq = int(first.sum().item())
slot = first.cast(dtypes.int32).cumsum() - 1                   # position of each sorted value among the unique ones
uniq = Tensor.zeros(nuniq, dtype=dtypes.int32).scatter_reduce(0, slot, s, "amax", include_self=False)
ur, ui, uc = np.unique(u_np, return_inverse=True, return_counts=True)
chk("unique values", uniq, ur, exact=True)
chk("unique inverse", (Tensor(u_np).unsqueeze(1) > uniq.unsqueeze(0)).sum(1), ui, exact=True)
chk("unique counts", slot.one_hot(nuniq).sum(0), uc, exact=True)

# a histogram by one_hot, values outside the range dropped
h_np = (rng.standard_normal(500) * 2).astype(np.float32)
lo, hi, nb = -3.0, 3.0, 12
b = ((Tensor(h_np) - lo) / ((hi - lo) / nb)).floor()
b = ((b == nb) & (Tensor(h_np) == hi)).where(nb - 1, b)   # numpy's last bin is closed
inside = (b >= 0) & (b < nb)
hist = (b.clip(0, nb - 1).cast(dtypes.int32).one_hot(nb) * inside.unsqueeze(1)).sum(0)
chk("histogram", hist, np.histogram(h_np, nb, (lo, hi))[0], exact=True)

# order statistics
o_np = rng.standard_normal((4, 31)).astype(np.float32)
so = Tensor(o_np).sort(dim=1)[0]
chk("median (odd)", so[:, 15], np.median(o_np, 1), exact=True)
def quantile(sorted_t, qs, n):
  pos = Tensor(qs) * (n - 1)
  lo_i = pos.floor().cast(dtypes.int32); hi_i = (lo_i + 1).clip(0, n - 1)
  return sorted_t[:, lo_i].lerp(sorted_t[:, hi_i], pos - pos.floor())
qs = np.array([0.0, 0.1, 0.25, 0.5, 0.9, 1.0], np.float32)
chk("quantiles (linear)", quantile(so, qs, 31), np.quantile(o_np, qs, axis=1).T, 1e-5)
chk("ranks", Tensor(o_np).argsort(dim=1).argsort(dim=1), np.argsort(np.argsort(o_np, 1), 1), exact=True)
mo_np = rng.integers(0, 6, (3, 40)).astype(np.int32)
counts = Tensor(mo_np).one_hot(6).sum(1)
chk("mode (smallest of the most frequent)", counts.argmax(1), np.array([np.bincount(r, minlength=6).argmax() for r in mo_np]), exact=True)
chk("kth smallest by topk", Tensor(o_np).topk(5, dim=1, largest=False)[0][:, -1], np.sort(o_np, 1)[:, 4], exact=True)
a1, a2 = np.sort(rng.standard_normal(13)).astype(np.float32), np.sort(rng.standard_normal(8)).astype(np.float32)
chk("merge of two sorted arrays", Tensor(a1).cat(Tensor(a2)).sort()[0], np.sort(np.concatenate([a1, a2])), exact=True)

# a jitted retrieval step: scores of queries against a corpus, top 8 per query, re-ranked by a second score
corpus_np = rng.standard_normal((300, 16)).astype(np.float32); corpus = Tensor(corpus_np).realize()
prior_np = rng.random(300).astype(np.float32); prior = Tensor(prior_np).realize()
@TinyJit
def retrieve(qv):
  sc = qv @ corpus.T
  v, i = sc.topk(8, dim=1)
  rer = v + prior[i] * 0.5
  order = rer.argsort(dim=1, descending=True)
  out = (i.gather(1, order), rer.sort(dim=1, descending=True)[0])
  Tensor.realize(*out)
  return out
ts, outs = [], []
for _ in range(3):
  qv_np = rng.standard_normal((5, 16)).astype(np.float32)
  st = time.perf_counter(); ids, sc = retrieve(Tensor(qv_np)); outs.append((ids.numpy(), sc.numpy(), qv_np)); ts.append(time.perf_counter() - st)
ids_np, sc_np, qv_np = outs[2]
ref_sc = qv_np @ corpus_np.T; top = np.argsort(-ref_sc, 1, kind="stable")[:, :8]
rer = np.take_along_axis(ref_sc, top, 1) + prior_np[top] * 0.5
o = np.argsort(-rer, 1, kind="stable")
chk("retrieval ids", ids_np, np.take_along_axis(top, o, 1), exact=True)
chk("retrieval scores", sc_np, np.take_along_axis(rer, o, 1), 1e-5)
finish()
c = float(sc_np.sum()) + float(ids_np.sum()) / 1000 + float(hist.sum().item()) + float(uniq.sum().item())
report("sorting", ts[0], ts[1] + ts[2], retrieve, (Tensor(qv_np),), c, chk=lambda r: r[1].sum().item())
