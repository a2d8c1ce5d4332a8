# mixed-precision training: float32 master weights cast to float16 (and bfloat16) for the forward, the loss in float32,
# static loss scaling (loss * S backward, gradients / S), an overflow check on the gradients that skips the step, SGD with
# momentum on the masters by hand under TinyJit; cast round trips float -> half -> float and float -> bfloat16 -> float
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.nn.state import get_parameters

from bench import data, report

IN, HID, OUT, N = 48, 96, 10, 64
def param(rng, *shape): return Tensor((rng.uniform(-1, 1, shape) / np.sqrt(shape[0])).astype(np.float32)).realize()
class MLP:
  def __init__(self, dt):
    self.dt = dt
    rng = np.random.default_rng(5)  # the same masters for every precision
    self.w1, self.b1, self.w2, self.b2 = param(rng, IN, HID), param(rng, HID), param(rng, HID, HID), param(rng, HID)
    self.w3 = param(rng, HID, OUT)
  def __call__(self, x):
    c = lambda t: t.cast(self.dt)                                     # the low-precision copies of the masters
    h = (x.cast(self.dt) @ c(self.w1) + c(self.b1)).gelu()
    h = h + (h @ c(self.w2) + c(self.b2)).relu()
    return (h @ c(self.w3)).float()                                   # logits back in float32 for the loss

def make_step(m, scale):
  params = get_parameters(m)
  moms = [Tensor.zeros(*p.shape).contiguous().realize() for p in params]
  @TinyJit
  def step(x, y):
    for p in params: p.grad = None
    loss = m(x).sparse_categorical_crossentropy(y)
    (loss * scale).backward()
    grads = [p.grad.float() / scale for p in params]
    finite = Tensor.stack(*[g.abs().max() for g in grads]).max() < float("inf")
    for p, g, mo in zip(params, grads, moms):
      mo.assign(finite.where(mo * 0.9 + g, mo))
      p.assign(finite.where(p - 0.05 * mo, p))
    Tensor.realize(loss, finite, *params, *moms)
    return loss
  return step, params

x, y = data(1, N, IN), data(2, N, kind="int", hi=OUT)
res = {}
for name, dt, scale in [("half", dtypes.half, 1024.0), ("bf16", dtypes.bfloat16, 1.0), ("half-overflow", dtypes.half, 2.0 ** 24)]:
  m = MLP(dt); step, params = make_step(m, scale)
  losses, ts = [], []
  for _ in range(6):
    st = time.perf_counter(); losses.append(round(step(x, y).item(), 4)); ts.append(time.perf_counter() - st)
  print(name, "losses", losses, "grad dtypes", sorted({str(p.grad.dtype) for p in params}), "master dtype", params[0].dtype)
  res[name] = (m, step, losses, ts)
# with a scale of 2**24 the float16 gradients overflow: every step is skipped, the loss stays where it started
print("overflow skipped every step", len(set(res["half-overflow"][2])) == 1)

# the float32 model trained the same way, no scaling: the half run follows it
m32 = MLP(dtypes.float32); step32, _ = make_step(m32, 1.0)
l32 = [round(step32(x, y).item(), 4) for _ in range(6)]
print("float32 losses", l32, "half within 2e-2", bool(np.allclose(res["half"][2], l32, atol=2e-2)))

# cast round trips
v = Tensor([1.0, 1 / 3, 65504.0, 1e-8, -2.5e-5, 3.14159265, 70000.0, 1e5])
print("half", v.half().float().tolist())  # (tinygrad 0.14 on CPU folds the round trip away: the float32 values)
print("bf16", v.bfloat16().float().tolist())
print("half->bf16", v[:4].half().bfloat16().float().tolist(), "bf16->half", v[:4].bfloat16().half().float().tolist())
print("half int", Tensor([2049, 4097, -70], dtype=dtypes.int32).half().tolist(), "bf16 int", Tensor([257, 1023], dtype=dtypes.int32).bfloat16().cast(dtypes.int32).tolist())
a, b = data(3, 32, 64), data(4, 64, 16)
hp = (a.half() @ b.half()); bp = (a.bfloat16() @ b.bfloat16())
print("matmul dtypes", hp.dtype, bp.dtype, "err half", round((hp.float() - a @ b).abs().max().item(), 3), "err bf16", round((bp.float() - a @ b).abs().max().item(), 2))
print("mixed promote", (a.half() + a[:, :1].float()).dtype, (a.half() * a.bfloat16()).dtype, (a.half().sum()).dtype, a.bfloat16().mean().dtype)
chk = sum(res["half"][2]) + sum(res["bf16"][2]) + sum(l32)
ts = res["half"][3]
report("mixedprec", ts[0], ts[1] + ts[2], res["half"][1], (x, y), chk)
