# a llama-style decoder written from scratch: RoPE from sin/cos tables (no complex numbers), RMSNorm, SwiGLU, grouped-query
# attention, a KV cache written by setitem into a Variable slice (`cache[:, start:start+n] = k`, one layer) and by assign
# into a shrunk view (the other), a prefill of the prompt without TinyJit and greedy decoding under TinyJit with a bound
# Variable for the position; the same tokens generated again without the cache (full recompute) must agree
import time

import numpy as np
from tinygrad import Tensor, TinyJit, Variable, dtypes, nn

from bench import init

V, D, H, KVH, L, MAXT, B, FF = 96, 64, 4, 2, 2, 48, 2, 160
Dh = D // H

def rope_tables(maxt, dh, theta=10000.0):
  inv = 1.0 / (theta ** (Tensor.arange(0, dh, 2, dtype=dtypes.float32) / dh))
  ang = Tensor.arange(maxt, dtype=dtypes.float32).reshape(maxt, 1) * inv.reshape(1, dh // 2)
  return ang.cos().contiguous().realize(), ang.sin().contiguous().realize()
def apply_rope(x, cos, sin):
  # x: B, T, heads, Dh with pairs (2i, 2i+1) rotated by the angle of position t and frequency i
  b, t, h, dh = x.shape
  xr = x.reshape(b, t, h, dh // 2, 2)
  x0, x1 = xr[..., 0], xr[..., 1]
  c, s = cos.reshape(1, t, 1, dh // 2), sin.reshape(1, t, 1, dh // 2)
  return Tensor.stack(x0 * c - x1 * s, x0 * s + x1 * c, dim=-1).reshape(b, t, h, dh)

class RMSNorm:
  def __init__(self, d, eps=1e-5): self.weight, self.eps = Tensor.ones(d), eps
  def __call__(self, x): return x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt() * self.weight
class Block:
  def __init__(self, i):
    self.i = i
    self.wq, self.wk, self.wv = nn.Linear(D, H*Dh, bias=False), nn.Linear(D, KVH*Dh, bias=False), nn.Linear(D, KVH*Dh, bias=False)
    self.wo = nn.Linear(H*Dh, D, bias=False)
    self.w1, self.w3, self.w2 = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False), nn.Linear(FF, D, bias=False)
    self.attn_norm, self.ffn_norm = RMSNorm(D), RMSNorm(D)
  def attn(self, x, start, cos, sin, cache):
    b, t, _ = x.shape
    q = apply_rope(self.wq(x).reshape(b, t, H, Dh), cos, sin)
    k = apply_rope(self.wk(x).reshape(b, t, KVH, Dh), cos, sin)
    v = self.wv(x).reshape(b, t, KVH, Dh)
    if cache is not None:
      ck, cv = cache
      if self.i % 2 == 0:
        ck[:, start:start+t] = k; cv[:, start:start+t] = v           # setitem into a Variable slice
      else:
        ck[:, start:start+t].assign(k).realize(); cv[:, start:start+t].assign(v).realize()  # assign into a shrunk view
      k, v = ck[:, 0:start+t], cv[:, 0:start+t]
    rep = H // KVH                                                    # grouped-query attention: repeat the kv heads
    k = k.reshape(b, k.shape[1], KVH, 1, Dh).expand(b, k.shape[1], KVH, rep, Dh).reshape(b, k.shape[1], H, Dh)
    v = v.reshape(b, v.shape[1], KVH, 1, Dh).expand(b, v.shape[1], KVH, rep, Dh).reshape(b, v.shape[1], H, Dh)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    sc = q @ k.transpose(-2, -1) / Dh ** 0.5
    if t > 1:  # prefill: a causal mask over the new positions (start is 0 there)
      sc = sc + Tensor.full((t, t), float("-inf")).triu(1)
    return self.wo((sc.softmax(-1) @ v).transpose(1, 2).reshape(b, t, H*Dh))
  def __call__(self, x, start, cos, sin, cache=None):
    x = x + self.attn(self.attn_norm(x), start, cos, sin, cache)
    h = self.ffn_norm(x)
    return x + self.w2(self.w1(h).silu() * self.w3(h))             # SwiGLU
class Llama:
  def __init__(self):
    self.tok_embeddings = nn.Embedding(V, D)
    self.layers = [Block(i) for i in range(L)]
    self.norm, self.output = RMSNorm(D), nn.Linear(D, V, bias=False)
  def __call__(self, toks, start, caches=None):
    t = toks.shape[1]
    cos, sin = self.cos[start:start+t], self.sin[start:start+t]
    x = self.tok_embeddings(toks)
    for i, l in enumerate(self.layers): x = l(x, start, cos, sin, None if caches is None else caches[i])
    return self.output(self.norm(x))

m = Llama(); init(m)
m.cos, m.sin = rope_tables(MAXT, Dh)
caches = [(Tensor.zeros(B, MAXT, KVH, Dh).contiguous().realize(), Tensor.zeros(B, MAXT, KVH, Dh).contiguous().realize()) for _ in range(L)]
prompt = Tensor(np.random.default_rng(7).integers(0, V, (B, 8)).astype(np.int32)).realize()

@TinyJit
def decode(tok, start):
  return m(tok, start, caches)[:, -1].argmax(-1).cast(dtypes.int32).reshape(B, 1).realize()

st = time.perf_counter()
logits = m(prompt, 0, caches).realize()  # (tinygrad 0.14 refuses a later setitem while a lazy view of the cache lives)
for ck, cv in caches: ck.realize(); cv.realize()
tok = logits[:, -1].argmax(-1).cast(dtypes.int32).reshape(B, 1).realize()
prefill_s = time.perf_counter() - st
print("prefill logits", logits.shape, round(logits.sum().item(), 4), "first tokens", tok.flatten().tolist())
out, times = [tok], []
pos = prompt.shape[1]
for _ in range(24):
  st = time.perf_counter()
  tok = decode(tok, Variable("start", 1, MAXT - 1).bind(pos))
  out.append(tok.clone().realize())
  times.append(time.perf_counter() - st)
  pos += 1
gen = Tensor.cat(*out, dim=1)
print("generated", gen.numpy().tolist())
print("cache k sum", round(sum(ck[:, :pos].sum().item() for ck, _ in caches), 4), "unwritten zero", all(ck[:, pos:].abs().sum().item() == 0 for ck, _ in caches))
# without the cache: the whole sequence at once, greedy tokens must be the same
full = Tensor.cat(prompt, gen[:, :-1], dim=1)
ref = m(full, 0)[:, prompt.shape[1]-1:].argmax(-1).cast(dtypes.int32)
print("no-cache recompute agrees", (ref == gen).all().item())
chk = gen.sum().item() + logits.sum().item()
print(f"llama first {prefill_s + times[0]:.2f}s capture {sum(times[1:3]):.2f}s step {sum(times[6:])/len(times[6:])*1e3:.2f}ms chk {chk:.4f}")
