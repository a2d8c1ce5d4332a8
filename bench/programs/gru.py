import sys

from tinygrad import Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters

from bench import bench

S = int(sys.argv[1]) if len(sys.argv) > 1 else 32
Tensor.manual_seed(0)
Wz, Wr, Wh = nn.Linear(24, 16), nn.Linear(24, 16), nn.Linear(24, 16)
head = nn.Linear(16, 4)
opt = nn.optim.Adam(get_parameters([Wz, Wr, Wh, head]), lr=1e-2)
@TinyJit
def step(x, y):
  opt.zero_grad()
  h = Tensor.zeros(4, 16)
  loss = Tensor(0.0)
  for t in range(S):
    xh = x[:, t].cat(h, dim=1)
    z, r = Wz(xh).sigmoid(), Wr(xh).sigmoid()
    hh = Wh(x[:, t].cat(r * h, dim=1)).tanh()
    h = (1 - z) * h + z * hh
    loss = loss + (head(h) - y[:, t]).square().mean()
  loss.backward(); opt.step()
  return loss.realize()
x = Tensor.randn(4, S, 8).realize(); y = Tensor.randn(4, S, 4).realize()
bench(f"gru S={S}", step, (x, y), n=3)
