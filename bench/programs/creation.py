# tensor creation and dtype edge cases, each against numpy: full / full_like / zeros_like / ones_like with and without
# dtypes, arange with float and negative steps, linspace in int dtypes, eye, tensors from python scalars / lists / numpy
# arrays of every width, int64 and uint64 arithmetic past 2**32 (wraparound, shifts, floor division of negatives), dtype
# promotion, isinf / isnan / isfinite, a nan_to_num by where, clip / clamp with one side / tensor bounds, sign / abs / floor /
# ceil / trunc / round (half to even), float -> int casts of negatives, special values of exp / log / sqrt / pow / division;
# then a jitted step that scrubs non-finite values and keeps int64 counters by assign
import math
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import chk, finish, peer, report

PEER = peer()
# dtypes as numpy sees them (tinygrad 0.14 gives python scalars weak dtypes, dtypes.weakint / weakfloat, that become int32 / float32)
def dt(t, ref_dtype, name): chk(name + " dtype", np.array(t.numpy().dtype.name), np.array(ref_dtype), exact=True)

# full / *_like
f = Tensor.full((2, 3), 7); dt(f, "int32", "full int"); chk("full int", f, np.full((2, 3), 7), exact=True)
dt(Tensor.full((2,), 2.5), "float32", "full float"); dt(Tensor.full((2,), True), "bool", "full bool")
chk("full int8", Tensor.full((3,), -5, dtype=dtypes.int8), np.full(3, -5, np.int8), exact=True)
chk("full uint8 255", Tensor.full((2,), 255, dtype=dtypes.uint8), np.full(2, 255, np.uint8), exact=True)
chk("full 0-d", Tensor.full((), 3.25), np.float32(3.25), exact=True)
xi = Tensor([[1, 2, 3], [4, 5, 6]], dtype=dtypes.int16)
fl = xi.full_like(9); dt(fl, "int16", "full_like keeps dtype"); chk("full_like", fl, np.full((2, 3), 9, np.int16), exact=True)
chk("full_like float value into int", xi.full_like(3.0), np.full((2, 3), 3, np.int16), exact=True)
dt(xi.full_like(1.5, dtype=dtypes.float32), "float32", "full_like dtype")
dt(xi.zeros_like(), "int16", "zeros_like"); dt(xi.ones_like(dtype=dtypes.bool), "bool", "ones_like bool")
chk("ones_like bool", xi.ones_like(dtype=dtypes.bool), np.ones((2, 3), bool), exact=True)
chk("zeros_like float16", Tensor([1.5, 2.5]).zeros_like(dtype=dtypes.float16), np.zeros(2, np.float16), exact=True)
chk("empty shapes", np.array(Tensor.zeros(0, 3).shape + Tensor.full((2, 0), 1).shape), np.array([0, 3, 2, 0]), exact=True)
# arange / linspace / eye
chk("arange float step", Tensor.arange(0, 1, 0.1), np.arange(0, 1, 0.1, dtype=np.float32), 1e-6)
chk("arange neg step", Tensor.arange(5, 0, -1.5), np.arange(5, 0, -1.5, dtype=np.float32), 1e-6)
chk("arange float start", Tensor.arange(0.5, 3), np.arange(0.5, 3, dtype=np.float32))
chk("arange int neg", Tensor.arange(10, -3, -4), np.arange(10, -3, -4), exact=True); dt(Tensor.arange(3), "int32", "arange int")
dt(Tensor.arange(0, 1, 0.25), "float32", "arange float"); chk("arange empty", Tensor.arange(3, 3), np.arange(3, 3))
chk("arange dtype", Tensor.arange(4, dtype=dtypes.float16), np.arange(4, dtype=np.float16), exact=True)
chk("arange int64 big", Tensor.arange(2**33, 2**33 + 3, dtype=dtypes.int64), np.arange(2**33, 2**33 + 3), exact=True)
chk("linspace int", Tensor.linspace(0, 10, 4, dtype=dtypes.int32), np.linspace(0, 10, 4).astype(np.int32), exact=True)
chk("eye bool", Tensor.eye(3, dtype=dtypes.bool), np.eye(3, dtype=bool), exact=True)
# from python / numpy
dt(Tensor([1, 2]), "int32", "list int"); dt(Tensor([1, 2.0]), "float32", "list mixed"); dt(Tensor([True, False]), "bool", "list bool")
dt(Tensor([True, 2]), "int32", "list bool+int"); dt(Tensor(3), "int32", "scalar int"); dt(Tensor(3.0), "float32", "scalar float")
for npd in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64, np.bool_):
  a = (np.arange(-3, 3) % 2 == 0) if npd is np.bool_ else np.array([0, 1, 2, 100, 7, 3]).astype(npd)
  chk(f"from numpy {np.dtype(npd).name}", Tensor(a), a, exact=True)
chk("from numpy uint64 big", Tensor(np.array([2**63 + 5, 2**64 - 1], np.uint64)), np.array([2**63 + 5, 2**64 - 1], np.uint64), exact=True)
chk("from numpy int64 min", Tensor(np.array([-2**63, 2**63 - 1], np.int64)), np.array([-2**63, 2**63 - 1], np.int64), exact=True)
chk("from list int64 big", Tensor([2**40, -2**40], dtype=dtypes.int64), np.array([2**40, -2**40]), exact=True)
chk("non-contiguous numpy", Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]), np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2], exact=True)
chk("fortran numpy", Tensor(np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))), np.arange(6).reshape(2, 3), exact=True)
# int64 / uint64 arithmetic
a64 = np.array([2**40 + 3, -2**35 - 7, 123456789012, -1], np.int64); t64 = Tensor(a64)
chk("int64 add", t64 + 2**33, a64 + 2**33, exact=True); chk("int64 mul", t64 * 3, a64 * 3, exact=True)
chk("int64 mul wrap", t64 * (2**30), a64 * np.int64(2**30), exact=True)
chk("int64 floordiv neg", t64 // 1000, a64 // 1000, exact=True); chk("int64 mod neg", t64 % 1000, a64 % 1000, exact=True)
chk("int64 floordiv by neg", t64 // -7, a64 // -7, exact=True)
chk("int64 shifts", (t64 << 3, t64 >> 2)[0], a64 << 3, exact=True); chk("int64 shr", t64 >> 2, a64 >> 2, exact=True)
chk("int64 sum", t64.sum(), a64.sum(), exact=True); chk("int64 max", t64.max(), a64.max(), exact=True)
chk("int64 cumsum", t64.cumsum(0), a64.cumsum(), exact=True)
u64 = np.array([2**63 + 5, 2**64 - 1, 0, 12345], np.uint64); tu = Tensor(u64)
chk("uint64 add wrap", tu + 1, u64 + np.uint64(1), exact=True); chk("uint64 sub wrap", tu - 6, u64 - np.uint64(6), exact=True)
chk("uint64 shr", tu >> 60, u64 >> np.uint64(60), exact=True); chk("uint64 xor", tu ^ 0xFFFF, u64 ^ np.uint64(0xFFFF), exact=True)
chk("uint64 cmp", tu > 2**63, u64 > np.uint64(2**63), exact=True); chk("uint64 max", tu.max(), u64.max(), exact=True)
chk("uint64 floordiv", tu // 10, u64 // np.uint64(10), exact=True)
chk("int32 overflow wrap", Tensor([2**31 - 1], dtype=dtypes.int32) + 1, np.array([2**31 - 1], np.int32) + np.int32(1), exact=True)
chk("uint32 wrap", Tensor([0], dtype=dtypes.uint32) - 1, np.array([2**32 - 1], np.uint32), exact=True)
# promotion
for (d1, d2, r) in [(dtypes.int8, dtypes.uint8, "int16"), (dtypes.int32, dtypes.float16, "float16"), (dtypes.uint8, dtypes.int64, "int64"),
                    (dtypes.bool, dtypes.int8, "int8"), (dtypes.float16, dtypes.bfloat16, "float32"), (dtypes.uint32, dtypes.int32, "int64")]:
  dt(Tensor([1], dtype=d1) + Tensor([1], dtype=d2), r, f"promote {d1.name}+{d2.name}")
dt(Tensor([1, 2]) + 1.5, "float32", "int + python float"); dt(Tensor([1, 2], dtype=dtypes.int8) * 300, "int8", "int8 * python int")
dt(Tensor([1, 2]) / Tensor([2, 4]), "float32", "int / int"); chk("int / int", Tensor([1, 7]) / Tensor([2, 4]), [0.5, 1.75])
dt(Tensor([1.0], dtype=dtypes.float16) * 2.5, "float16", "half * python float")
# special values
sp = np.array([1.0, -2.5, np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38], np.float32); ts = Tensor(sp)
chk("isinf", ts.isinf(), np.isinf(sp), exact=True); chk("isinf pos only", ts.isinf(detect_negative=False), np.isposinf(sp), exact=True)
chk("isinf neg only", ts.isinf(detect_positive=False), np.isneginf(sp), exact=True)
chk("isnan", ts.isnan(), np.isnan(sp), exact=True); chk("isfinite", ts.isfinite(), np.isfinite(sp), exact=True)
nan2num = ts.isnan().where(0.0, ts.isinf().where(ts.sign() * 1e30, ts))
chk("nan_to_num by where", nan2num, np.nan_to_num(sp, nan=0.0, posinf=1e30, neginf=-1e30))
chk("clip", ts.clip(-1, 2), np.clip(sp, -1, 2)); chk("clamp min only", ts.clamp(min_=0), np.maximum(sp, 0))
chk("clamp max only", ts.clamp(max_=0.5), np.minimum(sp, 0.5))
lo, hi = np.array([0, -5, 0, 0, 0, 1, 1, 0], np.float32), np.array([0.5, -3, 5, 5, 5, 2, 2, 1], np.float32)
chk("clip tensor bounds", ts.clip(Tensor(lo), Tensor(hi)), np.clip(sp, lo, hi))
chk("clip int", Tensor([-7, 0, 9, 300]).clip(-5, 255), np.clip([-7, 0, 9, 300], -5, 255), exact=True)
chk("clip uint8", Tensor([0, 5, 250], dtype=dtypes.uint8).clip(3, 200), np.array([3, 5, 200], np.uint8), exact=True)
r = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, -2.7, 3.5, 1e7 + 0.5], np.float32); tr = Tensor(r)
chk("round half even", tr.round(), np.round(r)); chk("floor", tr.floor(), np.floor(r)); chk("ceil", tr.ceil(), np.ceil(r))
chk("trunc", tr.trunc(), np.trunc(r)); chk("abs", ts.abs(), np.abs(sp)); chk("sign", ts.sign()[:4], np.sign(sp[:4]))
chk("sign zeros", ts.sign()[5:7], [0.0, 0.0])
print("sign(nan):", ts.sign()[4].item(), "(numpy nan; ours 0 as torch.sign; tinygrad 0.14: 1)")
chk("sign int", Tensor([-3, 0, 4]).sign(), np.sign([-3, 0, 4]), exact=True)
chk("round int", Tensor([-3, 0, 4]).round(), [-3, 0, 4], exact=True)
chk("floor half", Tensor([-1.5, 2.5], dtype=dtypes.float16).floor(), np.floor(np.array([-1.5, 2.5], np.float16)), exact=True)
# float -> int casts truncate toward zero, also for negatives; int -> bool; float -> bool
fc = np.array([-1.7, -0.5, -0.0, 0.9, 2.5, -3.99, 100.2], np.float32); tf = Tensor(fc)
chk("float->int32", tf.cast(dtypes.int32), fc.astype(np.int32), exact=True); chk("float->int8", tf.cast(dtypes.int8), fc.astype(np.int8), exact=True)
chk("float->int64", tf.cast(dtypes.int64), fc.astype(np.int64), exact=True); chk("half->int16", tf.half().cast(dtypes.int16), fc.astype(np.float16).astype(np.int16), exact=True)
chk("float->bool", tf.cast(dtypes.bool), fc.astype(bool), exact=True); chk("int->bool", Tensor([0, -2, 3]).cast(dtypes.bool), [False, True, True], exact=True)
chk("bool->float", Tensor([True, False]).float(), [1.0, 0.0], exact=True); chk("int64 big -> float", Tensor([2**40 + 1], dtype=dtypes.int64).float(), np.array([2**40 + 1], np.float32))
chk("float->uint8 in range", Tensor([0.0, 1.9, 254.7]).cast(dtypes.uint8), [0, 1, 254], exact=True)
chk("uint8 -> int8 wrap", Tensor([200, 127, 128], dtype=dtypes.uint8).cast(dtypes.int8), np.array([200, 127, 128], np.uint8).astype(np.int8), exact=True)
if PEER: print("skipped under tinygrad 0.14: float -> half -> float of 70000 (it folds the round trip away: 70000, not inf)")
else: chk("float16 overflow", Tensor([70000.0, -70000.0]).half().float(), np.array([np.inf, -np.inf], np.float32))
# special values of math ops
with np.errstate(all="ignore"):
  xs = np.array([-1.0, 0.0, 1.0, 100.0], np.float32); tx = Tensor(xs)
  chk("log", tx.log(), np.log(xs)); chk("exp overflow", tx.exp(), np.exp(xs)); chk("sqrt", tx.sqrt(), np.sqrt(xs))
  chk("div by zero", tx / 0.0, xs / np.float32(0)); chk("reciprocal", tx.reciprocal(), 1 / xs)
  chk("pow neg base int exp", Tensor([-2.0, -3.0, 0.0]) ** 3, np.array([-8.0, -27.0, 0.0])); chk("pow 0**0", Tensor([0.0]) ** 0, [1.0])
  chk("pow neg base frac", (Tensor([-2.0]) ** 0.5).isnan(), [True], exact=True)
  chk("pow tensor exp", Tensor([2.0, -2.0, 4.0]) ** Tensor([3.0, 2.0, -0.5]), np.array([8.0, 4.0, 0.5]))
  chk("int pow", Tensor([2, 3, -2]) ** 3, np.array([8, 27, -8]), exact=True)
  if PEER: print("skipped under tinygrad 0.14: max of [1, nan, 3] is", Tensor([1.0, np.nan, 3.0]).max().item(), "(numpy: nan)")
  else: chk("max with nan", Tensor([1.0, np.nan, 3.0]).max().isnan(), True, exact=True)
  chk("maximum inf", Tensor([-np.inf, 1.0]).maximum(Tensor([0.0, np.inf])), [0.0, np.inf])
  chk("sum with inf", Tensor([np.inf, -np.inf]).sum().isnan(), True, exact=True)
chk("item types", np.array([type(Tensor(3).item()).__name__, type(Tensor(3.5).item()).__name__, type(Tensor(True).item()).__name__]),
    np.array(["int", "float", "bool"]), exact=True)
chk("tolist uint64", np.array(Tensor(np.array([2**64 - 1], np.uint64)).tolist(), dtype=np.uint64), np.array([2**64 - 1], np.uint64), exact=True)
chk("dtype min/max", np.array([dtypes.int8.min, dtypes.uint16.max, dtypes.int64.max]), np.array([-128, 65535, 2**63 - 1]), exact=True)

# a jitted step: scrub non-finite values, clip, count the scrubbed entries in int64 state, keep a running sum in float64-free form
seen = Tensor.zeros((), dtype=dtypes.int64).contiguous().realize()
total = Tensor.zeros(4).contiguous().realize()
@TinyJit
def step(x):
  bad = x.isfinite().logical_not()
  seen.assign(seen + bad.cast(dtypes.int64).sum() * (2**32))
  clean = bad.where(0.0, x).clip(-10, 10)
  total.assign(total + clean.round() + (clean * 4).floor() / 4)
  out = clean.abs().sum() + total.sum()
  Tensor.realize(out, seen, total)  # (an assign nothing returned depends on runs only if realized inside the captured function)
  return out
rng = np.random.default_rng(2)
batches = []
for i in range(12):
  v = (rng.standard_normal(4) * 8).astype(np.float32)
  v[i % 4] = [np.inf, -np.inf, np.nan, 1.0][i % 4]
  batches.append(Tensor(v).realize())
ts_, vals = [], []
for bt in batches:
  st = time.perf_counter(); vals.append(step(bt).item()); ts_.append(time.perf_counter() - st)
ref_seen, ref_total = 0, np.zeros(4, np.float32)
for bt in batches:
  v = bt.numpy(); bd = ~np.isfinite(v); ref_seen += int(bd.sum()) * 2**32
  cl = np.clip(np.where(bd, 0, v), -10, 10); ref_total += np.round(cl) + np.floor(cl * 4) / 4
chk("jit int64 counter", seen, np.int64(ref_seen), exact=True); chk("jit total", total, ref_total, 1e-5)
print("scrubbed", seen.item() >> 32, "total", [round(v, 2) for v in total.tolist()])
finish()
c = sum(vals) + (seen.item() >> 32) + math.fsum(Tensor.arange(0, 1, 0.1).tolist())
report("creation", ts_[0], ts_[1] + ts_[2], step, (batches[0],), c)
