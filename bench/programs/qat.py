# quantization-aware training and int8 / int4 weight packing, against numpy: per-channel symmetric fake quantization with
# a straight-through estimator (x + (q - x).detach()), its gradient equal to the quantized layer's; int8 weights from
# round + clip + cast, packed four to a uint32 by bitcast to uint8, shifts and a sum (equal to numpy's .view(uint32)) and
# unpacked by shifts, masks and bitcast back; int4 nibbles two to a uint8 with sign extension by (v ^ 8) - 8; a dequantized
# matmul (scale before and after the product), an int8 x int8 matmul accumulated in int32; an MLP trained with fake-quant
# weights and activations by Adam under TinyJit, then exported to packed int8 and run from the unpacked weights
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters, get_state_dict

from bench import chk, finish, init, report

rng = np.random.default_rng(616)
O, I, N = 12, 16, 32

def scales(w): return (w.abs().max(axis=1, keepdim=True) / 127).maximum(1e-8)
def fake_quant(w, s, lo=-128, hi=127): return (w / s).round().clip(lo, hi) * s
def ste(w, s): return w + (fake_quant(w, s) - w).detach()
def quant_int8(w, s): return (w / s).round().clip(-128, 127).cast(dtypes.int8)
def np_scales(w): return np.maximum(np.abs(w).max(1, keepdims=True) / 127, 1e-8)
def np_quant(w, s): return np.clip(np.round(w / s), -128, 127)

w_np = rng.standard_normal((O, I)).astype(np.float32); w_np[3] *= 10; w_np[5, 2] = 0.5 / 127 * np.abs(w_np[5]).max() * 127  # a scale-1 tie
s_np = np_scales(w_np.astype(np.float64)).astype(np.float32)
W = Tensor(w_np)
S = scales(W)
chk("per-channel scales", S, s_np, 1e-7)
q = quant_int8(W, S)
q_np = np_quant(w_np, S.numpy()).astype(np.int8)
chk("int8 weights", q, q_np, exact=True)
chk("fake quant", fake_quant(W, S), q_np.astype(np.float32) * S.numpy(), 1e-6)

# packing: four int8 to a uint32 (little-endian, as numpy's view), two int4 to a uint8
shifts = Tensor([0, 8, 16, 24], dtype=dtypes.uint32)
packed = (q.bitcast(dtypes.uint8).cast(dtypes.uint32).reshape(O, I // 4, 4) << shifts).sum(-1, dtype=dtypes.uint32)
chk("packed uint32 == numpy view", packed, q_np.view(np.uint32), exact=True)
unpacked = ((packed.unsqueeze(-1) >> shifts) & 0xFF).cast(dtypes.uint8).bitcast(dtypes.int8).reshape(O, I)
chk("unpacked int8", unpacked, q_np, exact=True)
chk("or-packing equals sum-packing", (q.bitcast(dtypes.uint8).cast(dtypes.uint32).reshape(O, I // 4, 4) << shifts)[..., 0]
    | (q.bitcast(dtypes.uint8).cast(dtypes.uint32).reshape(O, I // 4, 4) << shifts)[..., 1]
    | (q.bitcast(dtypes.uint8).cast(dtypes.uint32).reshape(O, I // 4, 4) << shifts)[..., 2]
    | (q.bitcast(dtypes.uint8).cast(dtypes.uint32).reshape(O, I // 4, 4) << shifts)[..., 3], q_np.view(np.uint32), exact=True)
s4 = (W.abs().max(axis=1, keepdim=True) / 7).maximum(1e-8)
q4 = (W / s4).round().clip(-8, 7).cast(dtypes.int8)
q4_np = np.clip(np.round(w_np / s4.numpy()), -8, 7).astype(np.int8)
chk("int4 values", q4, q4_np, exact=True)
nib = q4.bitcast(dtypes.uint8) & 0x0F
p4 = (nib.reshape(O, I // 2, 2)[..., 0] | (nib.reshape(O, I // 2, 2)[..., 1] << 4)).cast(dtypes.uint8)
p4_np = ((q4_np.view(np.uint8) & 0xF)[:, 0::2] | ((q4_np.view(np.uint8) & 0xF)[:, 1::2] << 4)).astype(np.uint8)
chk("int4 packed", p4, p4_np, exact=True)
lo, hi = (p4 & 0x0F).cast(dtypes.int8), (p4 >> 4).cast(dtypes.int8)
u4 = Tensor.stack((lo ^ 8) - 8, (hi ^ 8) - 8, dim=-1).reshape(O, I)
chk("int4 unpacked with sign extension", u4, q4_np, exact=True)

# dequantized matmuls and an int8 x int8 product accumulated in int32
x_np = rng.standard_normal((N, I)).astype(np.float32)
X = Tensor(x_np)
deq = q_np.astype(np.float64) * S.numpy().astype(np.float64)
chk("dequant matmul (scale first)", X @ (unpacked.float() * S).T, x_np @ deq.T, 1e-5)
chk("dequant matmul (scale after)", (X @ unpacked.float().T) * S.T, x_np @ deq.T, 1e-5)
sx = float(np.abs(x_np).max() / 127)
xq_np = np.clip(np.round(x_np / sx), -128, 127).astype(np.int8)
xq = (X / sx).round().clip(-128, 127).cast(dtypes.int8)
chk("int8 activations", xq, xq_np, exact=True)
acc = xq.cast(dtypes.int32) @ unpacked.cast(dtypes.int32).T
chk("int8 x int8 -> int32", acc, xq_np.astype(np.int32) @ q_np.astype(np.int32).T, exact=True)
chk("int32 product dtype", str(acc.dtype), str(dtypes.int32), exact=True)

# STE: the gradient through fake quantization is the gradient at the quantized weights
Wg = Tensor(w_np); Wg.requires_grad = True
y_np = rng.standard_normal((N, O)).astype(np.float32)
loss = ((X @ ste(Wg, scales(Wg).detach()).T - Tensor(y_np)) ** 2).mean()
loss.backward()
out_np = x_np.astype(np.float64) @ deq.T
chk("ste loss", loss, ((out_np - y_np) ** 2).mean(), 1e-5)
chk("ste gradient", Wg.grad, (2 * (out_np - y_np) / (N * O)).T @ x_np, 1e-5)

# QAT: an MLP with fake-quantized weights (per channel) and activations (a fixed per-tensor scale), Adam under TinyJit
class QMLP:
  def __init__(self): self.l1, self.l2 = nn.Linear(I, 24), nn.Linear(24, 4)
  def __call__(self, x, qat=True):
    w1 = ste(self.l1.weight, scales(self.l1.weight).detach()) if qat else self.l1.weight
    w2 = ste(self.l2.weight, scales(self.l2.weight).detach()) if qat else self.l2.weight
    h = (x @ w1.T + self.l1.bias).relu()
    if qat: h = h + (fake_quant(h, 6 / 255, 0, 255) - h).detach()   # uint8 activations in [0, 6]
    return h @ w2.T + self.l2.bias
model = QMLP(); init(model, seed=61)
Pm = {k: v.numpy().astype(np.float64) for k, v in get_state_dict(model).items()}
labels_np = (x_np[:, :4] @ rng.standard_normal((4, 4))).argmax(1).astype(np.int32)
def np_qforward(p, x):
  q1 = np_quant(p["l1.weight"], np_scales(p["l1.weight"])) * np_scales(p["l1.weight"])
  q2 = np_quant(p["l2.weight"], np_scales(p["l2.weight"])) * np_scales(p["l2.weight"])
  h = np.maximum(x @ q1.T + p["l1.bias"], 0); h = np.clip(np.round(h / (6 / 255)), 0, 255) * (6 / 255)
  return h @ q2.T + p["l2.bias"]
ref = np_qforward(Pm, x_np.astype(np.float64))
chk("qat forward", model(X), ref, 1e-4)
opt = nn.optim.Adam(get_parameters(model), lr=0.01)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = model(x).sparse_categorical_crossentropy(y).backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
Y = Tensor(labels_np)
ts, losses = [], []
with Context(TRAINING=1):
  for _ in range(20):
    st = time.perf_counter(); losses.append(step(X, Y).item()); ts.append(time.perf_counter() - st)
r0 = ref - ref.max(1, keepdims=True); r0 = -(r0[np.arange(N), labels_np] - np.log(np.exp(r0).sum(1))).mean()
chk("qat first loss", losses[0], r0, 1e-4)
chk("qat loss decreases", losses[-1] < losses[0] * 0.7, True, exact=True)
print("losses", [round(v, 4) for v in losses[::5]])

# export: int8 weights packed to uint32, unpacked, dequantized; the int8 model equals the fake-quant one
def export(w):
  s = scales(w); qq = quant_int8(w, s)
  pk = (qq.bitcast(dtypes.uint8).cast(dtypes.uint32).reshape(w.shape[0], -1, 4) << shifts).sum(-1, dtype=dtypes.uint32).realize()
  return pk, s.realize()
def load(pk, s, cols):
  return ((pk.unsqueeze(-1) >> shifts) & 0xFF).cast(dtypes.uint8).bitcast(dtypes.int8).reshape(-1, cols).float() * s
(p1, s1), (p2, s2) = export(model.l1.weight), export(model.l2.weight)
chk("packed dtype / bytes", (str(p1.dtype), p1.nbytes()), (str(dtypes.uint32), 24 * I), exact=True)
h = (X @ load(p1, s1, I).T + model.l1.bias).relu()
h = (h / (6 / 255)).round().clip(0, 255) * (6 / 255)
out_int = h @ load(p2, s2, 24).T + model.l2.bias
chk("int8 export == fake-quant model", out_int, model(X).numpy(), 1e-5)
acc_q = float((out_int.argmax(1).numpy() == labels_np).mean())
print("train accuracy (int8 model)", acc_q)
finish()
c = losses[-1] + float(acc.abs().sum().item()) / 1e5 + acc_q
report("qat", ts[0], ts[1] + ts[2], step, (X, Y), c)
