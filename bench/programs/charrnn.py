import sys

from tinygrad import Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters

from bench import bench, data, init

V, E, Hd, B = 64, 32, 64, 8
S = int(sys.argv[1]) if len(sys.argv) > 1 else 24
class RNN:
  def __init__(self): self.embed, self.cell, self.head = nn.Embedding(V, E), nn.LSTMCell(E, Hd), nn.Linear(Hd, V)
m = RNN(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=2e-3)
@TinyJit
def step(x, y):
  opt.zero_grad()
  e = m.embed(x)
  hc = None; outs = []
  for t in range(S):
    hc = m.cell(e[:, t], hc)
    outs.append(hc[0])
  logits = m.head(Tensor.stack(*outs, dim=1))
  loss = logits.sparse_categorical_crossentropy(y).backward()
  opt.step()
  return loss.realize()
bench(f"charrnn S={S}", step, (data(1, B, S, kind="int", hi=V), data(2, B, S, kind="int", hi=V)))
