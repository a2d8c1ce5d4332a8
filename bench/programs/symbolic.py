# symbolic shapes: one TinyJit capture serves every length through a bound Variable. Masked mean / attention pooling over
# the first n positions of a fixed buffer (reductions over a symbolic axis), a chunked prefill that writes chunks of
# variable length L at variable offset P into a cache (shrink + assign with two Variables), and attention of one query over
# the cache's first P+L rows. Results are checked against the same computation on concrete shapes (no JIT)
import time

from tinygrad import Tensor, TinyJit, Variable, nn

from bench import data, init, report

B, MAXT, D, CH = 2, 48, 16, 8
feats = data(1, B, MAXT, D)
proj = nn.Linear(D, D); init(proj)
score = nn.Linear(D, 1, bias=False); init(score, seed=2)

def pool(x):
  h = proj(x).gelu()                                       # B, n, D
  w = score(h).softmax(1)                                  # attention weights over the n positions
  return (w * h).sum(1) + h.mean(1) + x.max(1)
@TinyJit
def pool_n(n):
  return pool(feats[:, :n]).realize()
ts, out = [], []
for n in [5, 9, 17, 32, 48, 3, 12]:
  st = time.perf_counter()
  r = pool_n(Variable("n", 1, MAXT).bind(n))
  ts.append(time.perf_counter() - st)
  ref = pool(feats[:, :n])
  out.append(round(r.sum().item(), 4))
  assert r.shape == (B, D)
  print(f"  n={n:2d} pooled {out[-1]:9.4f} max diff to concrete {(r - ref).abs().max().item():.6f}")

cache = Tensor.zeros(MAXT, D).contiguous().realize()
src = data(2, MAXT, D)                                      # the whole "prompt"; chunks of it are fed in
wq = nn.Linear(D, D); init(wq, seed=3)
@TinyJit
def prefill(chunk, p, l):
  cache[p:p + l].assign(chunk[:l]).realize()
  keys = cache[:p + l]                                      # everything written so far
  q = wq(chunk[l - 1:l])                                    # the chunk's last row asks
  att = (q @ keys.T / D ** 0.5).softmax(-1) @ keys
  return att.realize(), keys.sum().realize()
pos, chunks, sums = 0, [5, 8, 3, 8, 1, 7, 8], []
vp, vl = Variable("p", 0, MAXT - CH), Variable("l", 1, CH)
pts = []
for L in chunks:
  chunk = src[pos:pos + CH].pad(((0, max(0, pos + CH - MAXT)), None)).contiguous().realize() if pos + CH > MAXT else src[pos:pos + CH].contiguous().realize()
  st = time.perf_counter()
  att, ks = prefill(chunk, vp.bind(pos), vl.bind(L))
  pts.append(time.perf_counter() - st)
  pos += L
  ref_keys = src[:pos]
  ref = ((wq(src[pos - 1:pos]) @ ref_keys.T / D ** 0.5).softmax(-1) @ ref_keys)
  sums.append(round(att.sum().item(), 4))
  print(f"  prefill to {pos:2d} att {sums[-1]:8.4f} keys {ks.item():9.4f} diff {(att - ref).abs().max().item():.6f}")
print("cache rows written", pos, "rest zero", cache[pos:].abs().sum().item())
print(f"symbolic pool first {ts[0]:.2f}s capture {ts[1] + ts[2]:.2f}s steps {sum(ts[3:]) / len(ts[3:]) * 1e3:.2f}ms; prefill first {pts[0]:.2f}s "
      f"capture {pts[1] + pts[2]:.2f}s steps {sum(pts[3:]) / len(pts[3:]) * 1e3:.2f}ms")
report("symbolic", ts[0], ts[1] + ts[2], pool_n, (Variable("n", 1, MAXT).bind(20),), sum(out) + sum(sums), train=False, chk=lambda r: r.sum().item())
