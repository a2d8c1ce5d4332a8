from tinygrad import Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters

from bench import bench, data, init

NF, NV, E, BAG, B = 4, 1000, 16, 8, 64
class DLRM:
  def __init__(self):
    self.embed = [nn.Embedding(NV, E) for _ in range(NF)]
    self.bot1, self.bot2 = nn.Linear(13, 64), nn.Linear(64, E)
    self.top1, self.top2 = nn.Linear(E + (NF+1)*NF//2, 64), nn.Linear(64, 1)
  def __call__(self, dense, sparse, w):
    d = self.bot2(self.bot1(dense).relu()).relu()                       # B,E
    bags = [(self.embed[i](sparse[:, i]) * w[:, i].unsqueeze(-1)).sum(1) / w[:, i].sum(1, keepdim=True) for i in range(NF)]
    f = Tensor.stack(d, *bags, dim=1)                                   # B,NF+1,E
    z = f @ f.transpose(1, 2)                                           # B,NF+1,NF+1
    iu = [(i, j) for i in range(NF+1) for j in range(i)]
    inter = z.flatten(1)[:, [i*(NF+1)+j for i, j in iu]]
    return self.top2(self.top1(d.cat(inter, dim=1)).relu()).reshape(B)
m = DLRM(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=1e-3)
@TinyJit
def step(dense, sparse, w, y):
  opt.zero_grad()
  loss = m(dense, sparse, w).binary_crossentropy_logits(y).backward()
  opt.step()
  return loss.realize()
bench("embbag", step, (data(1, B, 13), data(2, B, NF, BAG, kind="int", hi=NV), data(3, B, NF, BAG, kind="rand") + 0.1, (data(4, B, kind="rand") > 0.5).float().realize()))
