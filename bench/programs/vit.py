
from tinygrad import Tensor, TinyJit, nn

from bench import bench

P, D, H, L = 4, 96, 4, 4
class Att:
  def __init__(self): self.ln1, self.ln2, self.qkv, self.o, self.f1, self.f2 = nn.LayerNorm(D), nn.LayerNorm(D), nn.Linear(D, 3*D), nn.Linear(D, D), nn.Linear(D, 4*D), nn.Linear(4*D, D)
  def __call__(self, x):
    B, N, _ = x.shape
    q, k, v = [t.reshape(B, N, H, D//H).transpose(1, 2) for t in self.qkv(self.ln1(x)).chunk(3, dim=-1)]
    x = x + self.o(q.scaled_dot_product_attention(k, v).transpose(1, 2).reshape(B, N, D))
    return x + self.f2(self.f1(self.ln2(x)).gelu())
Tensor.manual_seed(0)
emb = nn.Conv2d(3, D, P, stride=P); blocks = [Att() for _ in range(L)]; head = nn.Linear(D, 10)
@TinyJit
def fwd(x):
  h = emb(x).flatten(2).transpose(1, 2)
  for b in blocks: h = b(h)
  return head(h.mean(1)).softmax().realize()
x = Tensor.randn(8, 3, 32, 32).realize()
bench("vit", fwd, (x,), train=False, chk=lambda r: float(r.numpy().sum()))
