# integer and bit programs: xorshift32 and a murmur3-style finalizer on uint32 (multiplication wrapping mod 2**32), rotations,
# popcount by masks and shifts, float <-> bits by bitcast (exponent / mantissa fields, uniform floats built from random bits),
# `//`, `%` and truncating division on negative ints (floor vs trunc), int8/uint8/int16 wraparound, bitwise ops on bools, and a PRNG state
# stepped by assign under TinyJit; each against numpy
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import report

U = dtypes.uint32
def xorshift32(x):
  x = x ^ (x << 13)
  x = x ^ (x >> 17)
  return x ^ (x << 5)
def fmix32(h):
  h = h ^ (h >> 16); h = h * 0x85EBCA6B
  h = h ^ (h >> 13); h = h * 0xC2B2AE35
  return h ^ (h >> 16)
def rotl(x, r): return (x << r) | (x >> (32 - r))
def popcount(x):
  x = x - ((x >> 1) & 0x55555555)
  x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
  x = (x + (x >> 4)) & 0x0F0F0F0F
  return (x * 0x01010101) >> 24
def np_xorshift32(x):
  x = x ^ (x << np.uint32(13)); x = x ^ (x >> np.uint32(17)); return x ^ (x << np.uint32(5))
def np_fmix32(h):
  h = h ^ (h >> np.uint32(16)); h = h * np.uint32(0x85EBCA6B)
  h = h ^ (h >> np.uint32(13)); h = h * np.uint32(0xC2B2AE35)
  return h ^ (h >> np.uint32(16))

seeds = np.arange(1, 257, dtype=np.uint32) * np.uint32(2654435761)
s, rs = Tensor(seeds), seeds.copy()
with np.errstate(over="ignore"):
  for _ in range(5): s, rs = xorshift32(s), np_xorshift32(rs)
  h, rh = fmix32(s), np_fmix32(rs)
  rr = (rh << np.uint32(7)) | (rh >> np.uint32(25))
  rpc = np.array([bin(int(v)).count("1") for v in rh], dtype=np.uint32)
print("dtypes", s.dtype, h.dtype, rotl(h, 7).dtype, popcount(h).dtype)
ok = {"xorshift": (s.numpy() == rs).all(), "fmix": (h.numpy() == rh).all(), "rotl": (rotl(h, 7).numpy() == rr).all(),
      "popcount": (popcount(h).numpy() == rpc).all()}
# floats from bits: 23 random mantissa bits under exponent 127 give [1, 2); minus 1 is uniform in [0, 1)
u01 = ((h >> 9) | 0x3F800000).bitcast(dtypes.float32) - 1.0
ru01 = ((rh >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32) - 1.0
ok["uniform"] = (u01.numpy() == ru01).all()
# float fields: exponent and mantissa of float32 values, and frexp by bits
f = Tensor([1.0, -2.5, 3.0e-3, 1e30, 0.15625, -7.0])
bits = f.bitcast(U); rbits = f.numpy().view(np.uint32)
exp, man, sign = (bits >> 23) & 0xFF, bits & 0x7FFFFF, bits >> 31
ok["fields"] = (exp.numpy() == (rbits >> 23) & 0xFF).all() and (man.numpy() == rbits & 0x7FFFFF).all() and (sign.numpy() == rbits >> 31).all()
back = ((sign << 31) | (exp << 23) | man).bitcast(dtypes.float32)
ok["roundtrip"] = (back.numpy() == f.numpy()).all()
ib = f.bitcast(dtypes.int32); ok["int bits"] = (ib.numpy() == f.numpy().view(np.int32)).all()
hb = Tensor([1.0, -2.0, 0.5], dtype=dtypes.half).bitcast(dtypes.uint16)
ok["half bits"] = hb.tolist() == np.array([1.0, -2.0, 0.5], np.float16).view(np.uint16).tolist()
print({k: bool(v) for k, v in ok.items()})

# signed division and remainder: // floors and % takes the divisor's sign (Python, numpy, torch); idiv truncates
a = Tensor([7, -7, 7, -7, 0, 13, -13, 5], dtype=dtypes.int32); b = Tensor([2, 2, -2, -2, 3, 4, 4, -3], dtype=dtypes.int32)
an, bn = a.numpy(), b.numpy()
print("floordiv", (a // b).tolist(), (a // b).tolist() == (an // bn).tolist())
print("mod", (a % b).tolist(), (a % b).tolist() == (an % bn).tolist())
tr = a.div(b, rounding_mode="trunc")
print("trunc", tr.tolist(), tr.dtype, tr.tolist() == (np.trunc(an / bn)).astype(np.int32).tolist())
print("scalar", (a // 3).tolist(), (a % 3).tolist(), (a % -3).tolist(), (-a // 4).tolist())
print("div float", (a / b).dtype, [round(v, 4) for v in (a / b).tolist()],
      "floor", a.div(b, rounding_mode="floor").tolist())
# wraparound of narrow ints
i8 = Tensor([100, -100, 127, -128], dtype=dtypes.int8)
u8 = Tensor([200, 10, 255, 0], dtype=dtypes.uint8)
i16 = Tensor([30000, -30000], dtype=dtypes.int16)
print("int8", (i8 + i8).tolist(), (i8 * 3).tolist(), (-i8).tolist(), "uint8", (u8 + 100).tolist(), (u8 - 20).tolist(), (~u8).tolist(),
      "int16", (i16 * 2).tolist(), "uint32", (Tensor([0, 1], dtype=U) - 2).tolist(), (Tensor([2**31], dtype=U) * 2).tolist())
print("bool ops", (Tensor([True, False, True]) ^ Tensor([True, True, False])).tolist(), (Tensor([True, False]) & True).tolist(),
      (~Tensor([True, False])).tolist(), "int xor", (Tensor([5, -6]) ^ 3).tolist(), (Tensor([5, -6]) | 8).tolist(), (~Tensor([5, -6])).tolist())
print("shifts", (Tensor([1, -16, 1024]) << 3).tolist(), (Tensor([1, -16, 1024]) >> 2).tolist(), (Tensor([2**31], dtype=U) >> 31).tolist(),
      "pow2", (Tensor([1], dtype=dtypes.int64) << Tensor([40], dtype=dtypes.int64)).tolist())
# a hash table by open addressing: bucket = fmix32(key) % buckets, counts per bucket by one_hot
keys = Tensor(np.arange(1000, 1512, dtype=np.uint32))
bucket = (fmix32(keys) % 64).cast(dtypes.int32)
with np.errstate(over="ignore"): rbucket = (np_fmix32(np.arange(1000, 1512, dtype=np.uint32)) % np.uint32(64)).astype(np.int32)
counts = bucket.one_hot(64).sum(0)
print("buckets", (bucket.numpy() == rbucket).all(), counts.max().item(), counts.min().item(), counts.dtype)

# a PRNG state in a buffer, stepped by assign under TinyJit; each call returns a batch of uniforms and their mean
state = Tensor(seeds.copy()).contiguous().realize()
@TinyJit
def draw(scale):
  nxt = xorshift32(state)
  state.assign(nxt).realize()
  # (nxt is still lazy: realized after the assign it would read the new state and step twice; read the state instead)
  u = ((fmix32(state) >> 9) | 0x3F800000).bitcast(dtypes.float32) - 1.0
  return (u * scale).mean().realize()
rst = seeds.copy(); ts, means, rmeans = [], [], []
sc = Tensor([2.0]).realize()
for _ in range(12):
  st = time.perf_counter(); means.append(draw(sc).item()); ts.append(time.perf_counter() - st)
  with np.errstate(over="ignore"):
    rst = np_xorshift32(rst)
    rmeans.append(float(((((np_fmix32(rst) >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32) - 1.0) * 2).mean()))
print("jit prng", np.allclose(means, rmeans, rtol=1e-6), "state", (state.numpy() == rst).all(), [round(m, 4) for m in means[:4]])
chk = sum(means) + u01.sum().item() + popcount(h).sum().item() / 1000 + float((a // b).sum().item() + (a % b).sum().item() + tr.sum().item())
report("bitops", ts[0], ts[1] + ts[2], draw, (sc,), chk)
