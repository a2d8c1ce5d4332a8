import time

from tinygrad import Tensor, TinyJit, Variable, dtypes, nn

from bench import init

V, D, H, L, MAXT, B = 96, 64, 4, 2, 72, 1
Dh = D // H
class Attn:
  def __init__(self):
    self.qkv, self.o = nn.Linear(D, 3*D, bias=False), nn.Linear(D, D, bias=False)
    self.ln1, self.ln2 = nn.RMSNorm(D), nn.RMSNorm(D)
    self.up, self.down = nn.Linear(D, 4*D, bias=False), nn.Linear(4*D, D, bias=False)
    self.cache_k = Tensor.zeros(B, H, MAXT, Dh).contiguous().realize()
    self.cache_v = Tensor.zeros(B, H, MAXT, Dh).contiguous().realize()
  def __call__(self, x, pos):
    q, k, v = self.qkv(self.ln1(x)).reshape(B, 1, 3, H, Dh).transpose(1, 3).chunk(3, dim=2)
    q, k, v = q.squeeze(2), k.squeeze(2), v.squeeze(2)  # B,H,1,Dh
    self.cache_k[:, :, pos:pos+1, :].assign(k).realize()
    self.cache_v[:, :, pos:pos+1, :].assign(v).realize()
    keys, vals = self.cache_k[:, :, 0:pos+1, :], self.cache_v[:, :, 0:pos+1, :]
    a = q.scaled_dot_product_attention(keys, vals).transpose(1, 2).reshape(B, 1, D)
    x = x + self.o(a)
    return x + self.down(self.up(self.ln2(x)).silu())
class LM:
  def __init__(self):
    self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(MAXT, D)
    self.layers = [Attn() for _ in range(L)]
    self.head = nn.Linear(D, V, bias=False)
m = LM(); init(m)
for l in m.layers: l.cache_k.assign(Tensor.zeros(B, H, MAXT, Dh)).realize(); l.cache_v.assign(Tensor.zeros(B, H, MAXT, Dh)).realize()
@TinyJit
def gen(tok, pos):
  x = m.tok(tok) + m.pos(Tensor.full((B, 1), pos, dtype=dtypes.int32))  # pos embedding by Variable
  for l in m.layers: x = l(x, pos)
  return m.head(x)[:, -1].argmax(-1).reshape(B, 1).realize()
tok = Tensor([[5]], dtype=dtypes.int32).realize(); toks = []
times = []
for n in range(1, 41):
  st = time.perf_counter()
  tok = gen(tok, Variable("pos", 1, 64).bind(n))
  toks.append(tok.item())
  times.append(time.perf_counter() - st)
print(f"kvcache first {times[0]:.2f}s capture {sum(times[1:3]):.2f}s step {sum(times[10:])/len(times[10:])*1e3:.2f}ms chk {sum(toks):.4f} toks {toks[:12]}")
