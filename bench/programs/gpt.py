import sys
import time

from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters

V, D, H, L, T, B = 64, 64, 4, int(sys.argv[1]) if len(sys.argv) > 1 else 2, 32, 4
class Block:
  def __init__(self):
    self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
    self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
    self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
  def __call__(self, x):
    q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
    q, k, v = [t.reshape(B, T, H, D // H).transpose(1, 2) for t in (q, k, v)]
    a = q.scaled_dot_product_attention(k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
    x = x + self.proj(a)
    return x + self.fc2(self.fc1(self.ln2(x)).gelu())
class GPT:
  def __init__(self):
    self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
    self.blocks = [Block() for _ in range(L)]
    self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)
  def __call__(self, idx):
    x = self.tok(idx) + self.pos(Tensor.arange(T))
    for b in self.blocks: x = b(x)
    return self.head(self.ln(x))
Tensor.manual_seed(0)
m = GPT()
opt = nn.optim.AdamW(get_parameters(m), lr=1e-3)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = m(x).sparse_categorical_crossentropy(y).backward()
  opt.step()
  return loss.realize()
x = (Tensor.rand(B, T) * V).cast(dtypes.int32).realize(); y = (Tensor.rand(B, T) * V).cast(dtypes.int32).realize()
with Context(TRAINING=1):
  st = time.perf_counter(); l = step(x, y).item(); t1 = time.perf_counter() - st
  st = time.perf_counter(); step(x, y).item(); step(x, y).item(); t2 = time.perf_counter() - st
  st = time.perf_counter(); [step(x, y) for _ in range(10)]; step(x,y).item(); t3 = (time.perf_counter() - st) / 11
print(f"gpt L={L} first {t1:.2f}s capture {t2:.2f}s step {t3*1e3:.2f}ms loss {l:.4f}")
