# a detection postprocess: anchors decoded from (dx, dy, dw, dh) deltas, class scores by sigmoid, the best class per box by
# max/argmax, topk of the scores, boxes gathered by index, an IoU matrix by broadcasting, non-maximum suppression by masks
# (no nonzero: a triangular suppression matrix, then a fixed-point iteration of "kept and not suppressed by a kept box"),
# argsort / sort of the kept scores, per-class offsets for class-aware NMS, and the whole thing under TinyJit for a batch
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import data, report

A, C, K, B = 256, 5, 64, 2
rng = np.random.default_rng(21)
cxy = rng.uniform(0, 24, (A, 2)).astype(np.float32); wh = rng.uniform(4, 20, (A, 2)).astype(np.float32)
anchors = Tensor(np.concatenate([cxy, wh], 1)).realize()        # cx, cy, w, h

def decode(deltas, anc):
  cx = anc[:, 0] + deltas[..., 0] * anc[:, 2]
  cy = anc[:, 1] + deltas[..., 1] * anc[:, 3]
  w, h = anc[:, 2] * deltas[..., 2].clip(-4, 4).exp(), anc[:, 3] * deltas[..., 3].clip(-4, 4).exp()
  return Tensor.stack(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, dim=-1)
def iou(a, b):
  # a: ..., N, 4 and b: ..., M, 4 -> ..., N, M
  a, b = a.unsqueeze(-2), b.unsqueeze(-3)
  lt, rb = a[..., :2].maximum(b[..., :2]), a[..., 2:].minimum(b[..., 2:])
  inter = (rb - lt).relu().prod(-1)
  area = lambda x: (x[..., 2] - x[..., 0]) * (x[..., 3] - x[..., 1])
  return inter / (area(a) + area(b) - inter)
def nms_mask(boxes, scores, thr=0.45, iters=8):
  # boxes sorted by score (descending): box j is suppressed by an earlier kept box i with IoU > thr
  n = boxes.shape[-2]
  over = (iou(boxes, boxes) > thr) & Tensor.ones(n, n, dtype=dtypes.bool).triu(1)  # i < j
  keep = scores > 0.05
  for _ in range(iters):  # keep_j = valid_j and no kept i < j overlaps j
    sup = (over & keep.unsqueeze(-1)).any(-2)
    keep = (scores > 0.05) & ~sup
  return keep

def postprocess(deltas, logits):
  boxes = decode(deltas, anchors)                                   # B, A, 4
  probs = logits.sigmoid()                                          # B, A, C
  score, cls = probs.max(-1), probs.argmax(-1)
  top, idx = score.topk(K, dim=-1)                                  # B, K (sorted)
  tb = boxes.gather(1, idx.unsqueeze(-1).expand(B, K, 4))
  tc = cls.gather(1, idx)
  shifted = tb + tc.unsqueeze(-1).float() * 1000                    # class-aware: boxes of other classes never overlap
  keep = nms_mask(shifted, top)
  kept_scores = keep.where(top, -1.0)
  order = kept_scores.argsort(-1, descending=True)
  srt, _ = kept_scores.sort(-1, descending=True)
  return keep, top, tb, tc, order, srt

deltas, logits = data(1, B, A, 4) * 0.2, data(2, B, A, C) * 2 - 1
keep, top, tb, tc, order, srt = postprocess(deltas, logits)
print("kept per image", keep.sum(-1).tolist(), "top5", [[round(v, 4) for v in r[:5]] for r in top.tolist()], "classes", tc[:, :8].tolist())
print("order", order[:, :6].tolist(), "sorted", [[round(v, 4) for v in r[:4]] for r in srt.tolist()], order.dtype)

# the same NMS in numpy (greedy, one box at a time)
def np_iou(a, b):
  lt, rb = np.maximum(a[:, None, :2], b[None, :, :2]), np.minimum(a[:, None, 2:], b[None, :, 2:])
  inter = np.clip(rb - lt, 0, None).prod(-1)
  ar = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])
  return inter / (ar(a)[:, None] + ar(b)[None] - inter)
tbn, tcn, topn = tb.numpy(), tc.numpy(), top.numpy()
for bi in range(B):
  sh = tbn[bi] + tcn[bi][:, None] * 1000.0
  m = np_iou(sh, sh); kp = []
  for j in range(K):
    if topn[bi, j] > 0.05 and all(m[i, j] <= 0.45 for i in kp): kp.append(j)
  print("image", bi, "greedy agrees", sorted(kp) == np.nonzero(keep.numpy()[bi])[0].tolist())

# IoU matrix properties, a masked threshold by class, and per-class counts
M = iou(tb[0], tb[0])
print("iou diag 1", bool(((M.diagonal() - 1).abs() < 1e-5).all().item()), "symmetric", bool((M - M.T).abs().max().item() < 1e-6),
      "in [0,1]", bool(((M >= 0) & (M <= 1 + 1e-6)).all().item()))
per_cls = (tc.one_hot(C) * keep.unsqueeze(-1)).sum(1)
print("per class kept", per_cls.tolist(), per_cls.dtype)
thr = Tensor([0.3, 0.5, 0.7, 0.6, 0.4])[tc]                       # a per-class score threshold
print("above per-class thr", ((top > thr) & keep).sum().item())

@TinyJit
def step(d, l):
  keep, top, tb, tc, order, srt = postprocess(d, l)
  return (keep.float() * top).sum().realize(), order.realize()
ts = []
for i in range(4):
  d, l = data(10 + i, B, A, 4) * 0.2, data(20 + i, B, A, C) * 2 - 1
  d, l = d.realize(), l.realize()
  st = time.perf_counter(); r = step(d, l); v = r[0].item(); ts.append(time.perf_counter() - st)
chk = (keep.float() * top).sum().item() + srt.sum().item() + order.float().sum().item() / 100 + v
report("detect", ts[0], ts[1] + ts[2], step, (d, l), chk, chk=lambda r: r[0].item())
