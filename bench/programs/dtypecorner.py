# dtype corners of reductions and arithmetic, against numpy (float64 references rounded once where a narrow float is
# expected): result dtypes of sum / mean / prod / cumsum / max of int8 / uint8 / int16 / bool / half / bfloat16 / uint32;
# half and bfloat16 sums, means, var / std and matmuls accumulated in float32 (4096 terms of 0.1; squares past 65504);
# a half sum past 65504 is inf; int8 / uint8 sums widened; bool arithmetic and bool sums; uint32 / int32 wraparound;
# bitcasts half <-> int16 and bfloat16 <-> uint16; softmax / log_softmax / layernorm in half at large offsets; nan through
# max / min / argmax (printed: tinygrad 0.14 differs, known); a jitted half-precision feature normalization
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import chk, finish, peer, report

rng = np.random.default_rng(88)
RES = {dtypes.int8: ("int32", "float32", "int8", "int32"), dtypes.uint8: ("uint32", "float32", "uint8", "uint32"),
       dtypes.int16: ("int32", "float32", "int16", "int32"), dtypes.bool: ("int32", "float32", "bool", "int32"),
       dtypes.float16: ("float16", "float16", "float16", "float16"), dtypes.bfloat16: ("bfloat16", "bfloat16", "bfloat16", "bfloat16"),
       dtypes.uint32: ("uint32", "float32", "uint32", "uint32")}
for dt, names in RES.items():
  t = Tensor([1, 1, 0], dtype=dt)
  got = [t.sum().dtype, t.mean().dtype, t.prod().dtype, t.cumsum(0).dtype]
  chk(f"result dtypes of {dt}", [g == getattr(dtypes, n) for g, n in zip(got, names)], [True] * 4, exact=True)
  chk(f"max keeps {dt}", t.max().dtype == dt, True, exact=True)

# narrow floats accumulate in float32
h_np = np.full(4096, 0.1, np.float16)
chk("half sum of 4096 x 0.1", Tensor(h_np).sum().float(), np.float16(h_np.astype(np.float64).sum()), exact=True)
chk("half mean", Tensor(h_np).mean().float(), np.float16(h_np.astype(np.float64).mean()), exact=True)
if peer():  # tinygrad 0.14: the half cumsum's last value is 409.59375 (not a half value; torch 409.5), the sum of 70000 half ones 70000 (not inf)
  print("tinygrad 0.14: half cumsum last", Tensor(h_np).cumsum(0)[-1].float().item(), "half sum of 70000 ones", Tensor.ones(70000, dtype=dtypes.float16).sum().float().item(), "(skipped)")
else:
  chk("half cumsum (last)", Tensor(h_np).cumsum(0)[-1].float(), np.float16(h_np.astype(np.float64).sum()), exact=True)
  chk("half sum past 65504 is inf", Tensor.ones(70000, dtype=dtypes.float16).sum().float(), np.float32(np.inf), exact=True)
chk("half mean of 70000 ones", Tensor.ones(70000, dtype=dtypes.float16).mean().float(), 1.0, exact=True)
ar = np.arange(200, dtype=np.float16)
chk("half var (squares past 65504)", Tensor(ar).var().float(), np.float16(np.var(ar.astype(np.float64), ddof=1)), 1e-3)
chk("half std", Tensor(ar).std(correction=0).float(), np.float16(np.std(ar.astype(np.float64))), 1e-3)
b_bits = (np.full(4096, 0.1, np.float32).view(np.uint32) >> 16 << 16).view(np.float32)   # 0.1 truncated to bfloat16
chk("bfloat16 sum", Tensor(b_bits).cast(dtypes.bfloat16).sum().float(), b_bits.astype(np.float64).sum(), exact=True)  # 4096 x 0.099609375 = 408
a_np = (rng.standard_normal((8, 2048)) * 0.5).astype(np.float16); w_np = (rng.standard_normal((2048, 4)) * 0.5).astype(np.float16)
mm = Tensor(a_np) @ Tensor(w_np)
chk("half matmul K=2048 dtype", mm.dtype == dtypes.float16, True, exact=True)
chk("half matmul K=2048 (float32 accumulation)", mm.float(), (a_np.astype(np.float64) @ w_np.astype(np.float64)).astype(np.float16), 2e-3)

# integer widening and wraparound
chk("int8 sum widened", Tensor(np.array([100, 100, 100], np.int8)).sum(), 300, exact=True)
chk("uint8 sum widened", Tensor(np.array([200, 200, 255], np.uint8)).sum(), 655, exact=True)
chk("int8 mean", Tensor(np.array([-128, 127, 127], np.int8)).mean(), np.float32(126 / 3), 1e-6)
chk("uint32 wraps", (Tensor(np.array([1, 0], np.uint32)) - 2), np.array([1, 0], np.uint32) - np.uint32(2), exact=True)
chk("int32 multiply wraps", Tensor(np.array([2**30, 3], np.int32)) * 4, (np.array([2**30, 3], np.int64) * 4).astype(np.int32), exact=True)
chk("uint8 add wraps", Tensor(np.array([250, 3], np.uint8)) + Tensor(np.array([10, 3], np.uint8)), np.array([4, 6], np.uint8), exact=True)

# bools
p_np, q_np = rng.random(10) > 0.5, rng.random(10) > 0.5
p, q = Tensor(p_np), Tensor(q_np)
chk("bool + bool is or", p + q, p_np | q_np, exact=True); chk("bool * bool is and", p * q, p_np & q_np, exact=True)
chk("bool * 3", p * 3, p_np * 3, exact=True); chk("bool sum", p.sum(), p_np.sum(), exact=True)
chk("bool mean", p.mean(), p_np.mean(), 1e-6); chk("bool ^ bool", p ^ q, p_np ^ q_np, exact=True)
chk("bool to float sum", (p.float() - q.float()).abs().sum(), float((p_np != q_np).sum()), exact=True)

# bitcasts
hv = np.array([1.0, -2.0, 65504.0, 6e-8, np.inf], np.float16)
chk("half -> int16 bitcast", Tensor(hv).bitcast(dtypes.int16), hv.view(np.int16), exact=True)
chk("int16 -> half bitcast", Tensor(hv.view(np.int16)).bitcast(dtypes.float16).float(), hv.astype(np.float32), exact=True)
bv = np.array([0x3FC0, 0xC0A0, 0x7F80], np.uint16)
chk("uint16 -> bfloat16 bitcast", Tensor(bv).bitcast(dtypes.bfloat16).float(), (bv.astype(np.uint32) << 16).view(np.float32), exact=True)
chk("bfloat16 -> uint16 bitcast", Tensor(np.array([1.5, -5.0], np.float32)).cast(dtypes.bfloat16).bitcast(dtypes.uint16), np.array([0x3FC0, 0xC0A0], np.uint16), exact=True)

# softmax and log_softmax in half at a large offset; layernorm at +8 (its mean is a half: at +1000 rounded to 0.5, in both packages)
big = (rng.standard_normal((4, 16)) + 1000).astype(np.float16)
def softmax_np(v): e = np.exp(v - v.max(-1, keepdims=True)); return e / e.sum(-1, keepdims=True)
chk("half softmax at +1000", Tensor(big).softmax().float(), softmax_np(big.astype(np.float64)), 2e-3)
chk("half log_softmax at +1000", Tensor(big).log_softmax().float(), np.log(softmax_np(big.astype(np.float64))), 1e-2)
big8 = (rng.standard_normal((4, 16)) + 8).astype(np.float16)
ln = Tensor(big8).layernorm().float()
bd = big8.astype(np.float64); chk("half layernorm at +8", ln, (bd - bd.mean(-1, keepdims=True)) / np.sqrt(bd.var(-1, keepdims=True) + 1e-5), 2e-2)

# nan through max / min / argmax: numpy / torch propagate it (tinygrad 0.14 doesn't: known, printed)
nv = Tensor([1.0, float("nan"), 3.0])
print("max / min / argmax of [1, nan, 3]:", nv.max().item(), nv.min().item(), nv.argmax().item(), "(numpy: nan nan 1)")

@TinyJit
def normalize(x):  # half features: mean / std in float32 accumulation, output half
  mu, sd = x.mean(0), x.std(0)
  return ((x - mu) / (sd + 1e-3)).realize()
F_np = (rng.standard_normal((256, 8)) * 40 + 300).astype(np.float16)
ts, outs = [], []
for i in range(3):
  st = time.perf_counter(); outs.append(normalize(Tensor(F_np + i)).float().numpy()); ts.append(time.perf_counter() - st)
Fd = F_np.astype(np.float64) + 2
chk("jitted half normalization", outs[2], (Fd - Fd.mean(0)) / (Fd.std(0, ddof=1) + 1e-3), 2e-2)
finish()
c = float(outs[2].astype(np.float64).sum()) + float(mm.float().sum().item()) + float(ln.sum().item())
print("checksum parts", float(outs[2].astype(np.float64).sum()), float(mm.float().sum().item()), float(ln.sum().item()))
report("dtypecorner", ts[0], ts[1] + ts[2], normalize, (Tensor(F_np),), c, chk=lambda r: r.float().sum().item())
