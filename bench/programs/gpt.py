import sys

from tinygrad import Tensor, dtypes, nn
from tinygrad.nn.state import get_parameters

from bench import bench, classifier_step

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
step = classifier_step(m, opt)
x = (Tensor.rand(B, T) * V).cast(dtypes.int32).realize(); y = (Tensor.rand(B, T) * V).cast(dtypes.int32).realize()
bench("gpt", step, (x, y))
