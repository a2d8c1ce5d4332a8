# the helpers and properties users touch around the math, each against numpy or plain python: Device.DEFAULT, Context
# (TRAINING / DEBUG nested and restored), getenv, GlobalCounters (reset, kernel_count, global_ops), dropout in and out of
# TRAINING, Tensor.gradient, backward, detach, realize
# of many tensors at once, numpy() / tolist() / item() / data() of non-contiguous views (transpose, stepped
# slices, flips, expands, pads, permutes) and of 0-d / 1-d / bool / half tensors, len / iteration / shape / ndim / numel /
# element_size / nbytes, dtypes.default_float switched by Context and restored, clone / contiguous / to; then a jitted step that
# trains the unfrozen half of a model (the optimizer gets the second layer only)
import time

import numpy as np
from tinygrad import Device, Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import DEBUG as DEBUG_VAR
from tinygrad.helpers import Context, GlobalCounters, getenv

from bench import chk, data, finish, init, report

# devices and contexts
print("device", Device.DEFAULT, "tensor device", Tensor([1]).device)
chk("device is CPU", np.array(Device.DEFAULT), np.array("CPU"), exact=True)
chk("getenv default", getenv("SURELY_NOT_SET_R4", 7), 7, exact=True)
before = DEBUG_VAR.value
with Context(DEBUG=0, TRAINING=1):
  with Context(TRAINING=0):
    d0 = Tensor.ones(1000).dropout(0.5)
  d1 = Tensor.ones(1000).dropout(0.5)
  chk("debug inside", DEBUG_VAR.value, 0, exact=True)
chk("debug restored", DEBUG_VAR.value, before, exact=True)
chk("dropout off outside TRAINING", d0, np.ones(1000), exact=True)
d1n = d1.numpy()
chk("dropout on: values 0 or 2", np.isin(d1n, [0.0, 2.0]).all(), True, exact=True)
chk("dropout on: about half", abs(float((d1n == 0).mean()) - 0.5) < 0.1, True, exact=True)
chk("dropout p=0 in TRAINING", Tensor.ones(8).dropout(0.0), np.ones(8), exact=True)
# GlobalCounters
GlobalCounters.reset()
chk("counters reset", np.array([GlobalCounters.kernel_count, GlobalCounters.global_ops]), np.array([0, 0]), exact=True)
(Tensor.ones(64, 64).contiguous() @ Tensor.ones(64, 64).contiguous()).realize()
k1, ops1, mem1 = GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem
chk("counters count a matmul", k1 >= 1 and ops1 >= 64 * 64 * 64 and mem1 > 0, True, exact=True)
print("kernels", k1, "ops", ops1, "mem", mem1)
# gradients: Tensor.gradient, backward, detach
# (tinygrad 0.14's Tensor has no requires_grad at all, neither argument nor attribute: every float tensor in the graph gets a
# gradient from backward(), and a frozen layer is one the optimizer is not given)
w, b = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 10), Tensor([0.5, -0.5])
frozen = Tensor.ones(3).contiguous()
x_np = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], np.float32); x = Tensor(x_np)
loss = ((x * frozen) @ w.T + b).square().sum()
gw, gb = loss.gradient(w, b)
pre = x_np @ (np.arange(6, dtype=np.float32).reshape(2, 3) / 10).T + np.array([0.5, -0.5], np.float32)
chk("Tensor.gradient w", gw, 2 * pre.T @ x_np, 1e-5); chk("Tensor.gradient b", gb, 2 * pre.sum(0), 1e-5)
loss.backward()
chk("backward w.grad", w.grad, 2 * pre.T @ x_np, 1e-5)
chk("backward frozen.grad", frozen.grad, (2 * pre @ (np.arange(6, dtype=np.float32).reshape(2, 3) / 10) * x_np).sum(0), 1e-5)
wd = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 10)
gd, = ((wd.detach() * 3 + wd) * x[0]).sum().gradient(wd)
chk("detach cuts the path", gd, np.broadcast_to(x_np[0], (2, 3)), 1e-6)
# realize many at once, schedule()
a1, a2, a3 = Tensor.arange(5) * 2, Tensor.ones(3, 3).sum(0), (Tensor.arange(4).float() / 4).exp()
r = Tensor.realize(a1, a2, a3)
chk("realize returns first", r is a1, True, exact=True)
chk("realize many", np.concatenate([a1.numpy(), a2.numpy(), a3.numpy()]), np.concatenate([np.arange(5) * 2, np.full(3, 3.0), np.exp(np.arange(4) / 4)]), 1e-6)
# (Tensor.schedule() is gone in tinygrad 0.14: schedule_linear / linear_with_vars return a LINEAR UOp there, not compared)
# numpy / tolist / item of views
base_np = np.arange(24, dtype=np.float32).reshape(2, 3, 4); base = Tensor(base_np).realize()
views = {"transpose": (base.permute(2, 0, 1), base_np.transpose(2, 0, 1)), "step slice": (base[:, ::2, 1::2], base_np[:, ::2, 1::2]),
         "flip": (base.flip(1), base_np[:, ::-1]), "expand": (base[:, :1, :].expand(2, 5, 4), np.broadcast_to(base_np[:, :1, :], (2, 5, 4))),
         "pad": (base.pad(((0, 0), (1, 0), (0, 2))), np.pad(base_np, ((0, 0), (1, 0), (0, 2)))), "T": (base[0].T, base_np[0].T),
         "shrink": (base[1, 1:, 2:], base_np[1, 1:, 2:]), "neg step": (base[:, ::-2], base_np[:, ::-2]),
         "reshape of T": (base[0].T.reshape(12), base_np[0].T.reshape(12)), "0-size": (base[:, 3:], base_np[:, 3:])}
for k, (t, ref) in views.items():
  chk(f"numpy of {k}", t, ref, exact=True); chk(f"tolist of {k}", np.array(t.tolist(), dtype=np.float32).reshape(ref.shape), ref, exact=True)
chk("numpy is C-contiguous", base.permute(2, 0, 1).numpy().flags["C_CONTIGUOUS"], True, exact=True)
chk("numpy is a copy", (lambda n: (n.__setitem__((0, 0, 0), 99.0), base.numpy()[0, 0, 0])[1])(base.numpy()), 0.0, exact=True)
chk("tolist 0-d", np.array([Tensor(2.5).tolist(), Tensor(7).tolist()]), np.array([2.5, 7.0]), exact=True)
chk("tolist 0-d types", np.array([type(Tensor(7).tolist()).__name__, type(Tensor(True).tolist()).__name__]), np.array(["int", "bool"]), exact=True)
chk("tolist bool", np.array(Tensor([True, False, True]).tolist()), np.array([True, False, True]), exact=True)
chk("tolist bool 2-d", np.array((base > 10)[0].tolist()), base_np[0] > 10, exact=True)
chk("tolist half", np.array(Tensor([0.1, 2.5], dtype=dtypes.float16).tolist()), np.array([0.1, 2.5], np.float16).astype(np.float64), exact=True)
chk("tolist of a view of a view", np.array(base.permute(1, 0, 2)[::2, :, ::3].tolist()), base_np.transpose(1, 0, 2)[::2, :, ::3], exact=True)
chk("item of a slice", base[1, 2, 3].item(), 23.0, exact=True); chk("item of a 1-element", base[1:, 2:, 3:].item(), 23.0, exact=True)
chk("data of a view", np.frombuffer(bytes(base.permute(2, 1, 0).contiguous().data()), np.float32), base_np.transpose(2, 1, 0).ravel(), exact=True)
chk("data memoryview shape", np.array(base[0].data().tolist()), base_np[0], exact=True)
# properties
chk("len / iter", np.array([len(base), len(list(base)), len(base[0])]), np.array([2, 2, 3]), exact=True)
chk("iter rows", np.stack([r.numpy() for r in base[0]]), base_np[0], exact=True)
chk("shape / ndim / numel", np.array([*base.shape, base.ndim, base.numel()]), np.array([2, 3, 4, 3, 24]), exact=True)
chk("element_size / nbytes", np.array([base.element_size(), base.nbytes(), base.half().nbytes(), Tensor([1], dtype=dtypes.int64).element_size()]),
    np.array([4, 96, 48, 8]), exact=True)
# default_float switched by Context(DEFAULT_FLOAT=...), then restored (tinygrad 0.14's dtypes.default_float has no setter)
with Context(DEFAULT_FLOAT="HALF"):
  chk("default_float half", np.array(Tensor([1.5, 2.0]).numpy().dtype.name), np.array("float16"), exact=True)
  chk("default_float arange", np.array(Tensor.arange(0, 1, 0.5).numpy().dtype.name), np.array("float16"), exact=True)
chk("default_float restored", np.array(Tensor([1.5]).numpy().dtype.name), np.array("float32"), exact=True)
# clone / contiguous / to
cl = base.clone(); cl2 = base.permute(2, 1, 0).contiguous()
chk("clone", cl, base_np, exact=True); chk("contiguous permute", cl2, base_np.transpose(2, 1, 0), exact=True)
chk("to same device", base.to(Device.DEFAULT), base_np, exact=True)

# a jitted step: a 2-layer model whose first layer is frozen, trained with SGD on the rest
class Model:
  def __init__(self): self.l1, self.l2 = nn.Linear(8, 16), nn.Linear(16, 3)
  def __call__(self, x): return self.l2(self.l1(x).relu().dropout(0.0))
m = Model(); init(m)
l1_before = m.l1.weight.numpy().copy()
trainable = nn.state.get_parameters(m.l2)   # l1 is frozen: not given to the optimizer
opt = nn.optim.SGD(trainable, lr=0.1)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = m(x).sparse_categorical_crossentropy(y).backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
xb, yb = data(1, 16, 8), data(2, 16, kind="int", hi=3)
ts, losses = [], []
with Context(TRAINING=1, DEBUG=0):
  for _ in range(10):
    st = time.perf_counter(); losses.append(step(xb, yb).item()); ts.append(time.perf_counter() - st)
chk("frozen layer unchanged", m.l1.weight, l1_before, exact=True)
chk("loss decreases", losses[-1] < losses[0], True, exact=True)
chk("trainable count", len(trainable), 2, exact=True)
print("losses", [round(v, 4) for v in losses[::3]])
finish()
report("helpers", ts[0], ts[1] + ts[2], step, (xb, yb), sum(losses) + float(a3.sum().item()))
