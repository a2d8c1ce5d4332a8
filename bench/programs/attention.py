# attention and generation: a multi-head self-attention layer written with reshape/transpose, scaled_dot_product_attention
# with is_causal, with a boolean mask (padding) and with an additive float mask (ALiBi-like bias), GQA (enable_gqa), checked
# against attention written out by hand; then beam search with topk over a tiny LM and sampling with multinomial.
# multinomial's random streams differ between the packages: only its invariants (range, shape, frequencies) are compared.
import time

from tinygrad import Tensor, TinyJit, dtypes, nn

from bench import data, init, report

B, T, D, H, V = 2, 12, 32, 4, 40
Dh = D // H
class MHA:
  def __init__(self, kv_heads=H):
    self.q, self.kv, self.o = nn.Linear(D, D), nn.Linear(D, 2 * kv_heads * Dh), nn.Linear(D, D)
    self.kvh = kv_heads
  def __call__(self, x, mask=None, causal=False):
    b, t, _ = x.shape
    q = self.q(x).reshape(b, t, H, Dh).transpose(1, 2)
    k, v = self.kv(x).reshape(b, t, 2, self.kvh, Dh).permute(2, 0, 3, 1, 4)
    a = q.scaled_dot_product_attention(k, v, attn_mask=mask, is_causal=causal, enable_gqa=self.kvh != H)
    return self.o(a.transpose(1, 2).reshape(b, t, D))
def by_hand(m, x, bias):
  q = m.q(x).reshape(B, T, H, Dh).permute(0, 2, 1, 3)
  kv = m.kv(x).reshape(B, T, 2, H, Dh)
  k, v = kv[:, :, 0].permute(0, 2, 3, 1), kv[:, :, 1].permute(0, 2, 1, 3)
  return m.o(((q @ k) / Dh ** 0.5 + bias).softmax(-1).matmul(v).permute(0, 2, 1, 3).flatten(2))

m, g = MHA(), MHA(kv_heads=2); init(m); init(g, seed=3)
x = data(1, B, T, D)
lens = Tensor([T, 7])
pad = (Tensor.arange(T).reshape(1, 1, 1, T) < lens.reshape(B, 1, 1, 1))        # B,1,1,T keys allowed
causal = Tensor.ones(T, T, dtype=dtypes.bool).tril()
alibi = -(Tensor.arange(T).reshape(1, T) - Tensor.arange(T).reshape(T, 1)).abs().float() * Tensor([0.5, 0.25, 0.125, 0.0625]).reshape(1, H, 1, 1)
outs = {
  "causal": m(x, causal=True), "pad": m(x, mask=pad), "pad&causal": m(x, mask=pad & causal),
  "alibi": m(x, mask=alibi), "gqa": g(x, causal=True),
}
for k, o in outs.items(): print(f"  {k:10s} {o.shape} {o.sum().item():.4f}")
ref_causal = by_hand(m, x, causal.where(0.0, -float("inf")))
ref_alibi = by_hand(m, x, alibi)
print("  by hand max diff", round((outs["causal"] - ref_causal).abs().max().item(), 5), round((outs["alibi"] - ref_alibi).abs().max().item(), 5))
print("  padded rows ignore masked keys:", round((m(x, mask=pad)[1, :7] - m(x[1:2, :7].pad(((0, 0), (0, 5), (0, 0))), mask=pad[1:2])[0, :7]).abs().max().item(), 5))

# a tiny LM for decoding
class LM:
  def __init__(self): self.emb, self.att, self.head = nn.Embedding(V, D), MHA(), nn.Linear(D, V)
  def __call__(self, tok): return self.head(self.att(self.emb(tok), causal=True))
lm = LM(); init(lm, seed=7)
lm.head.weight.assign(lm.head.weight * 6).realize()  # peaked next-token distributions: no near-ties between beams
BEAM, STEPS = 4, 6
@TinyJit
def beam_step(toks, scores):
  # toks: BEAM x L (full length, only the prefix matters thanks to causality), scores: BEAM
  logp = lm(toks)[:, -1].log_softmax(-1)                  # BEAM, V
  cand = (scores.reshape(BEAM, 1) + logp).flatten()
  top, idx = cand.topk(BEAM)
  return top.realize(), (idx // V).cast(dtypes.int32).realize(), (idx % V).cast(dtypes.int32).realize()
seqs = [[3] for _ in range(BEAM)]
scores = Tensor([0.0] + [-1e9] * (BEAM - 1)).realize()
times = []
for _ in range(STEPS):
  toks = Tensor([q[-4:] if len(q) >= 4 else [0] * (4 - len(q)) + q for q in seqs], dtype=dtypes.int32)
  st = time.perf_counter()
  scores, src, nxt = beam_step(toks.realize(), scores)
  src, nxt = src.tolist(), nxt.tolist()
  times.append(time.perf_counter() - st)
  seqs = [seqs[b] + [t] for b, t in zip(src, nxt)]
best = scores.tolist()
print("beam", seqs[0], [round(v, 3) for v in best])

# sampling: same seed gives the same draw within a package; invariants only across packages
Tensor.manual_seed(123)
probs = lm(Tensor([[3, 5, 7, 9]]))[:, -1].softmax(-1)
s1 = probs.multinomial(2000, replacement=True)
Tensor.manual_seed(123)
probs2 = lm(Tensor([[3, 5, 7, 9]]))[:, -1].softmax(-1)
s2 = probs2.multinomial(2000, replacement=True)
freq = s1.one_hot(V).float().mean(1)
print("multinomial", s1.shape, s1.dtype, "in range", bool(((s1 >= 0) & (s1 < V)).all().item()), "reproducible", bool((s1 == s2).all().item()),
      "freq err < 0.05", bool((freq - probs).abs().max().item() < 0.05))
nr = Tensor([[1.0, 1, 1, 1, 1, 1, 0, 0]]).multinomial(5, replacement=False)
print("no replacement", nr.shape, "distinct", len(set(nr.tolist()[0])) == 5, "never zero-weight", all(v < 6 for v in nr.tolist()[0]))
tt = Tensor.arange(T).reshape(1, T).float()
print("topk/argsort", tt.topk(3)[1].tolist(), (-tt).argsort(-1)[0, :3].tolist())
report("attention", times[0], times[1] + times[2], beam_step, (toks, scores), sum(best) + sum(o.sum().item() for o in outs.values()), train=False,
       chk=lambda r: r[0].sum().item())
