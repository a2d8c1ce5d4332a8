# the long tail of tensor ops: einsum, scatter / scatter_reduce, interpolate (nearest / linear), avg and max pooling with
# stride and dilation, max_unpool2d, pad modes (reflect, replicate, circular), cumsum / cummax / logcumsumexp, argsort,
# roll, unfold, repeat_interleave, triu, rearrange, split / chunk, masked_select, nonzero, var / std with correction,
# losses (cross_entropy with label smoothing, nll_loss, binary_crossentropy_logits), and a jitted training step that
# backpropagates through most of them
import time

from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters

from bench import data, init, report

tot = 0.0
def show(name, t, r=4):
  global tot
  v = round(t.float().sum().item(), r) + 0.0
  tot += v
  print(f"  {name:20s} {str(t.shape):18s} {t.dtype!s:14s} {v}")

x, y = data(1, 2, 3, 8, 8), data(2, 4, 5)
show("einsum bij,bjk", Tensor.einsum("bij,bjk->bik", data(3, 2, 4, 5), data(4, 2, 5, 3)))
show("einsum trace/outer", Tensor.einsum("ii->", data(5, 4, 4)) + Tensor.einsum("i,j->ij", y[0], y[1]).sum())
idx = Tensor([[0, 2, 1, 0, 4], [3, 3, 0, 1, 2]], dtype=dtypes.int32)
show("scatter", Tensor.zeros(2, 5).scatter(1, idx, y[:2]))
show("scatter_reduce sum", Tensor.ones(2, 5).scatter_reduce(1, idx, y[:2], reduce="sum"))
show("scatter_reduce amax", Tensor.zeros(2, 5).scatter_reduce(1, idx, y[:2], reduce="amax", include_self=False))
show("scatter_reduce mean", Tensor.zeros(2, 5).scatter_reduce(1, idx, y[:2], reduce="mean"))
show("interp nearest", x.interpolate((12, 12), mode="nearest"))
show("interp linear", x.interpolate((5, 11), mode="linear"))
show("interp align", x.interpolate((16, 16), mode="linear", align_corners=True))
show("avg_pool2d", x.avg_pool2d(kernel_size=(3, 3), stride=2, padding=1))
show("avg_pool no pad cnt", x.avg_pool2d(kernel_size=3, stride=2, padding=1, count_include_pad=False))
show("max_pool dilation", x.max_pool2d(kernel_size=2, stride=1, dilation=2))
show("max_pool ceil", x.max_pool2d(kernel_size=3, stride=2, ceil_mode=True))
mp, mi = x.max_pool2d(kernel_size=2, return_indices=True)
show("max_unpool2d", Tensor.max_unpool2d(mp, mi, kernel_size=2))
for mode in ["reflect", "replicate", "circular"]: show(f"pad {mode}", x.pad((2, 1, 1, 2), mode=mode))
show("cumsum/cummax", y.cumsum(1) + y.cummax(0)[0])
show("logcumsumexp", y.logcumsumexp(1))
show("argsort desc", y.argsort(1, descending=True))
show("roll", y.roll((1, -2), (0, 1)) * Tensor.arange(5))
show("unfold", data(6, 10).unfold(0, 3, 2) * Tensor.arange(3))
show("repeat_interleave", y[:, :2].repeat_interleave(3, dim=1) * Tensor.arange(6))
show("triu/tril", data(7, 5, 5).triu(1) - data(7, 5, 5).tril(-1) * 2)
show("rearrange", x.rearrange("b c h w -> b (h w) c")[:, :5] * Tensor.arange(3))
parts = data(8, 10, 3).split([2, 3, 5])
show("split", Tensor.stack(*[p.sum(0) for p in parts]) + Tensor.cat(*data(8, 10, 3).chunk(3, 1), dim=0)[:3])
ms = y.masked_select(y > 0.3)
print("  masked_select", ms.shape, round(ms.sum().item(), 4), "nonzero", (y > 0.3).nonzero().shape)
show("var/std correction", y.var(1, correction=0) + y.std(0, correction=2).sum() + y.var())
show("logsumexp/softmin", y.logsumexp(1) + y.softmin(0).sum(0)[:4])
tgt = Tensor([1, 0, 4, 2])
show("cross_entropy smooth", y.cross_entropy(tgt, label_smoothing=0.1).reshape(1))
show("nll_loss", y.log_softmax(1).nll_loss(tgt).reshape(1) + y.log_softmax(1).nll_loss(tgt, reduction="sum"))
show("bce logits", y.binary_crossentropy_logits((y > 0).float()).reshape(1) + y.sigmoid().binary_crossentropy((y > 0).float()))
show("lerp/erf/clip", y.lerp(y.flip(0), 0.3) + y.erf() + y.clip(-0.5, 0.5))

class Net:
  def __init__(self): self.c, self.l = nn.Conv2d(3, 6, 3, padding=1), nn.Linear(6 * 6 * 6, 5)
  def __call__(self, x):
    h = self.c(x.pad((1, 1, 1, 1), mode="reflect")).relu().avg_pool2d(2)            # 2,6,5,5
    h = h.interpolate((6, 6), mode="linear")
    h = Tensor.einsum("bchw,c->bchw", h, Tensor.arange(6).float() / 6 + 0.5)
    h = h.flatten(1)
    return self.l(h.cumsum(1) / 100 + h.roll(3, 1))
m = Net(); init(m)
opt = nn.optim.SGD(get_parameters(m), lr=0.01, momentum=0.9)
tg2 = Tensor([3, 1])
@TinyJit
def step(x, t):
  opt.zero_grad()
  loss = m(x).cross_entropy(t, label_smoothing=0.1).backward()
  opt.step()
  return loss.realize()
ts, ls = [], []
with Context(TRAINING=1):
  for _ in range(5):
    st = time.perf_counter(); ls.append(step(x, tg2).item()); ts.append(time.perf_counter() - st)
print("  train losses", [round(v, 4) for v in ls])
print(f"opszoo total {tot:.3f}")
report("opszoo", ts[0], ts[1] + ts[2], step, (x, tg2), round(tot, 2) + ls[-1])
