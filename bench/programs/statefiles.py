# state files written byte by byte here and loaded by the package, each against numpy: a GGUF (version 3) with metadata of
# every value type and tensors in F32 / F16 / BF16 / F64 / I8 / I16 / I32 and Q8_0 / Q4_0 / Q4_1 / Q4_K / Q6_K blocks
# (dequantized by numpy here; by the gguf package too where it imports), loaded by path and from a Tensor of its bytes; a
# torch zip checkpoint pickled with stand-in torch classes (float32 / float16 / bfloat16 / int32 / int64 / bool storages, a
# transposed view, two tensors sharing one storage at offsets, nested dicts); safetensors of twelve dtypes by safe_save and
# a hand-written one (metadata, offsets out of order, padded header); then an MLP with Q8_0 weights under TinyJit
import collections
import json
import pathlib
import pickle
import struct
import sys
import tempfile
import time
import types
import zipfile

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.llm.gguf import gguf_load
from tinygrad.nn.state import safe_load, safe_load_metadata, safe_save, torch_load

from bench import chk, finish, report

rng = np.random.default_rng(5)
tmp = pathlib.Path(tempfile.mkdtemp())
def f16(a): return np.asarray(a, np.float32).astype(np.float16)
def bf16_bits(a): return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)  # truncation: exact values below
def bf16_val(bits): return (bits.astype(np.uint32) << 16).view(np.float32)

# ---- quantized blocks and their numpy dequantization
def q8_0(x):  # 32 values: fp16 d, 32 int8
  x = x.reshape(-1, 32); d = f16(np.abs(x).max(1) / 127); q = np.round(x / np.maximum(d.astype(np.float32), 1e-8)[:, None]).astype(np.int8)
  return np.concatenate([d.view(np.uint8).reshape(-1, 2), q.view(np.uint8)], 1).tobytes(), (d.astype(np.float32)[:, None] * q).ravel()
def q4_0(x):  # fp16 d, 16 bytes: low nibbles are values 0-15, high nibbles 16-31; value = (q - 8) * d
  x = x.reshape(-1, 32); d = f16(x[np.arange(len(x)), np.abs(x).argmax(1)] / -8); df = d.astype(np.float32)
  q = np.clip(np.round(x / np.where(df == 0, 1, df)[:, None]) + 8, 0, 15).astype(np.uint8)
  return np.concatenate([d.view(np.uint8).reshape(-1, 2), q[:, :16] | (q[:, 16:] << 4)], 1).tobytes(), ((q.astype(np.float32) - 8) * df[:, None]).ravel()
def q4_1(x):  # fp16 d, fp16 m, 16 bytes; value = q * d + m
  x = x.reshape(-1, 32); m = f16(x.min(1)); d = f16((x.max(1) - x.min(1)) / 15); df, mf = d.astype(np.float32), m.astype(np.float32)
  q = np.clip(np.round((x - mf[:, None]) / df[:, None]), 0, 15).astype(np.uint8)
  hdr = np.concatenate([d.view(np.uint8).reshape(-1, 2), m.view(np.uint8).reshape(-1, 2)], 1)
  return np.concatenate([hdr, q[:, :16] | (q[:, 16:] << 4)], 1).tobytes(), (q * df[:, None] + mf[:, None]).ravel()
def q4_k(nblk):  # random 144-byte blocks: fp16 d, fp16 dmin, 12 bytes of 6-bit scales / mins, 128 bytes of nibbles
  b = rng.integers(0, 256, (nblk, 144)).astype(np.uint8)
  b[:, 0:2] = f16(rng.uniform(0.01, 0.1, nblk)).view(np.uint8).reshape(-1, 2); b[:, 2:4] = f16(rng.uniform(0.01, 0.1, nblk)).view(np.uint8).reshape(-1, 2)
  d, dmin, s, qs = b[:, 0:2].copy().view(np.float16).astype(np.float32), b[:, 2:4].copy().view(np.float16).astype(np.float32), b[:, 4:16].astype(np.int32), b[:, 16:]
  sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], 1)
  mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], 1)
  q = np.stack([qs.reshape(-1, 4, 32) & 15, qs.reshape(-1, 4, 32) >> 4], 2).reshape(-1, 8, 32)
  return b.tobytes(), (d[:, :, None] * sc[:, :, None] * q - dmin[:, :, None] * mn[:, :, None]).ravel()
def q6_k(nblk):  # random 210-byte blocks: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8 scales, fp16 d
  b = rng.integers(0, 256, (nblk, 210)).astype(np.uint8); b[:, 208:210] = f16(rng.uniform(0.001, 0.01, nblk)).view(np.uint8).reshape(-1, 2)
  ql, qh, sc, d = b[:, :128].astype(np.int32), b[:, 128:192].astype(np.int32), b[:, 192:208].view(np.int8).astype(np.float32), b[:, 208:210].copy().view(np.float16).astype(np.float32).ravel()
  y = np.zeros((nblk, 256), np.float32)
  for h in range(2):
    L, H, S = ql[:, 64 * h:64 * h + 64], qh[:, 32 * h:32 * h + 32], sc[:, 8 * h:8 * h + 8]
    for k, (lo, sh, hs) in enumerate([(L[:, :32] & 15, 0, 0), (L[:, 32:] & 15, 2, 2), (L[:, :32] >> 4, 4, 4), (L[:, 32:] >> 4, 6, 6)]):
      q = (lo | (((H >> sh) & 3) << 4)) - 32
      idx = np.arange(32) // 16 + hs
      y[:, 128 * h + 32 * k:128 * h + 32 * k + 32] = d[:, None] * S[:, idx] * q
  return b.tobytes(), y.ravel()

# ---- a GGUF file
def gstr(s): b = s.encode(); return struct.pack("<Q", len(b)) + b
KV = [("general.architecture", 8, "tiny"), ("general.name", 8, "ünïcode ok"), ("u8", 0, 200), ("i8", 1, -5), ("u16", 2, 60000),
      ("i16", 3, -30000), ("u32", 4, 4000000000), ("i32", 5, -2000000000), ("f32", 6, 0.25), ("flag", 7, True), ("u64", 10, 2**40 + 3),
      ("i64", 11, -(2**40)), ("f64", 12, 1 / 3), ("ints", (9, 5), [1, -2, 3]), ("words", (9, 8), ["a", "bc", ""]), ("general.alignment", 4, 64)]
FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
def gval(t, v):
  if t == 8: return gstr(v)
  if isinstance(t, tuple): return struct.pack("<IQ", t[1], len(v)) + b"".join(gval(t[1], x) for x in v)
  return struct.pack("<" + FMT[t], v)
ref, entries = {}, []  # name -> numpy values; (name, shape, type, bytes)
for name, shape, typ, dt in [("f32", (6, 4), 0, np.float32), ("f16", (3, 5), 1, np.float16), ("f64", (5,), 28, np.float64),
                             ("i8", (7,), 24, np.int8), ("i16", (2, 3), 25, np.int16), ("i32", (4,), 26, np.int32)]:
  a = (rng.standard_normal(shape) * (3 if typ in (0, 1, 28) else 5000)).astype(dt) if typ in (0, 1, 28) else rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, shape, dtype=dt)
  ref[name] = a; entries.append((name, shape, typ, a.tobytes()))
bits = bf16_bits(rng.standard_normal((4, 4))); ref["bf16"] = bf16_val(bits); entries.append(("bf16", (4, 4), 30, bits.tobytes()))
for name, fn, shape, typ in [("q8_0", q8_0, (3, 64), 8), ("q4_0", q4_0, (2, 64), 2), ("q4_1", q4_1, (96,), 3)]:
  raw, deq = fn(rng.standard_normal(shape).astype(np.float32)); ref[name] = deq.reshape(shape); entries.append((name, shape, typ, raw))
for name, fn, shape, typ in [("q4_k", q4_k, (2, 256), 12), ("q6_k", q6_k, (3, 256), 14)]:
  raw, deq = fn(shape[0]); ref[name] = deq.reshape(shape); entries.append((name, shape, typ, raw))
W1 = rng.standard_normal((32, 64)).astype(np.float32) * 0.2; W2 = rng.standard_normal((10, 32)).astype(np.float32) * 0.2
for name, w in [("mlp.w1", W1), ("mlp.w2", W2)]:
  raw, deq = q8_0(w); ref[name] = deq.reshape(w.shape); entries.append((name, w.shape, 8, raw))
ALIGN = 64
head = b"GGUF" + struct.pack("<IQQ", 3, len(entries), len(KV)) + b"".join(gstr(k) + struct.pack("<I", t if isinstance(t, int) else 9) + gval(t, v) for k, t, v in KV)
blob, off = b"", []
for _, _, _, raw in entries:
  off.append(len(blob)); blob += raw + b"\0" * (-len(raw) % ALIGN)
head += b"".join(gstr(n) + struct.pack("<I", len(s)) + struct.pack(f"<{len(s)}Q", *reversed(s)) + struct.pack("<IQ", t, o) for (n, s, t, _), o in zip(entries, off))
(tmp / "m.gguf").write_bytes(head + b"\0" * (-len(head) % ALIGN) + blob)
try:  # the gguf package's dequantization agrees with the numpy one above (skipped where it does not import)
  from gguf import GGUFReader
  from gguf.quants import dequantize
  for t in GGUFReader(tmp / "m.gguf").tensors:
    if t.name not in ("q8_0", "q4_0", "q4_1", "q4_k", "q6_k", "mlp.w1", "mlp.w2"): continue
    chk(f"gguf package {t.name}", np.asarray(dequantize(t.data, t.tensor_type), np.float64).reshape(ref[t.name].shape), ref[t.name].astype(np.float64), 1e-6)
except ImportError: print("gguf package not importable: its cross-check skipped")
kv, sd = gguf_load(str(tmp / "m.gguf"))
for k, t, v in KV:
  if t == 0 and isinstance(kv[k], bytes): print(f"gguf kv {k} (UINT8) read as {kv[k]!r}: tinygrad 0.14 reads the type as a char"); continue
  ok = abs(kv[k] - v) < 1e-6 if t in (6, 12) else kv[k] == v
  chk(f"gguf kv {k}", ok, True, exact=True)
for name, a in ref.items():
  want = {"f16": dtypes.float16, "f64": dtypes.float64, "i8": dtypes.int8, "i16": dtypes.int16, "i32": dtypes.int32, "bf16": dtypes.bfloat16}.get(name, dtypes.float32)
  if name == "bf16": print("gguf BF16 tensor loads as", sd[name].dtype)  # bfloat16 in both
  else: chk(f"gguf {name} dtype", sd[name].dtype == want, True, exact=True)
  chk(f"gguf {name}", sd[name].float() if name == "bf16" else sd[name], a, 1e-6, exact=name in ("i8", "i16", "i32", "f16", "f64"))
_, sd2 = gguf_load(Tensor(np.frombuffer((tmp / "m.gguf").read_bytes(), np.uint8)))
chk("gguf from a Tensor", Tensor.cat(*[sd2[n].float().flatten() for n in ref]), np.concatenate([ref[n].astype(np.float32).ravel() for n in ref]), 1e-6)

# ---- a torch zip checkpoint, pickled with stand-in classes named as torch's
STORAGE = {"FloatStorage": np.float32, "HalfStorage": np.float16, "BFloat16Storage": None, "IntStorage": np.int32, "LongStorage": np.int64, "BoolStorage": np.bool_}
fake_torch, fake_utils = types.ModuleType("torch"), types.ModuleType("torch._utils")
for n in STORAGE: setattr(fake_torch, n, type(n, (), {"__module__": "torch"}))
def _rebuild_tensor_v2(*a): raise RuntimeError("only pickled here")
_rebuild_tensor_v2.__module__ = "torch._utils"; fake_utils._rebuild_tensor_v2 = _rebuild_tensor_v2
class Stor:
  def __init__(self, kind, key, numel): self.kind, self.key, self.numel = kind, key, numel
class TT:
  def __init__(self, st, offset, size, stride): self.args = (st, offset, size, stride)
  def __reduce__(self): return (_rebuild_tensor_v2, (*self.args, False, collections.OrderedDict()))
class P(pickle.Pickler):
  def persistent_id(self, o): return ("storage", getattr(fake_torch, o.kind), o.key, "cpu", o.numel) if isinstance(o, Stor) else None
store = {"0": rng.standard_normal(24).astype(np.float32), "1": rng.standard_normal(10).astype(np.float16), "2": rng.integers(-2**40, 2**40, 7),
         "3": rng.random(5) > 0.5, "4": rng.integers(-1000, 1000, 4).astype(np.int32), "5": bf16_bits(rng.standard_normal(3))}
kinds = {"0": "FloatStorage", "1": "HalfStorage", "2": "LongStorage", "3": "BoolStorage", "4": "IntStorage", "5": "BFloat16Storage"}
S = {k: Stor(kinds[k], k, len(v)) for k, v in store.items()}
sd_obj = collections.OrderedDict([("w", TT(S["0"], 0, (4, 6), (6, 1))), ("wt", TT(S["0"], 0, (6, 4), (1, 6))), ("a", TT(S["0"], 6, (2, 3), (3, 1))),
                                  ("b", TT(S["0"], 18, (3, 2), (2, 1))), ("h", TT(S["1"], 0, (10,), (1,))), ("ids", TT(S["2"], 0, (7,), (1,))),
                                  ("mask", TT(S["3"], 0, (5,), (1,))), ("i32", TT(S["4"], 0, (2, 2), (2, 1))), ("bf", TT(S["5"], 0, (3,), (1,)))])
sys.modules["torch"], sys.modules["torch._utils"] = fake_torch, fake_utils
try:
  with zipfile.ZipFile(tmp / "ck.pth", "w") as z:
    buf = __import__("io").BytesIO(); P(buf, protocol=2).dump({"model": sd_obj, "epoch": 3, "lr": 0.125}); z.writestr("archive/data.pkl", buf.getvalue())
    for k, v in store.items(): z.writestr(f"archive/data/{k}", v.tobytes())
    z.writestr("archive/version", "3\n")
finally: del sys.modules["torch"], sys.modules["torch._utils"]
ck = torch_load(str(tmp / "ck.pth"))
s0 = store["0"]
chk("torch epoch / lr", [ck["epoch"], ck["lr"]], [3, 0.125], exact=True)
tref = {"w": s0.reshape(4, 6), "wt": s0.reshape(4, 6).T, "a": s0[6:12].reshape(2, 3), "b": s0[18:24].reshape(3, 2), "h": store["1"], "ids": store["2"],
        "mask": store["3"], "i32": store["4"].reshape(2, 2), "bf": bf16_val(store["5"])}
for k, a in tref.items(): chk(f"torch {k}", ck["model"][k].to("CPU").float() if k == "bf" else ck["model"][k].to("CPU"), a, exact=True)

# ---- safetensors: safe_save of twelve dtypes, and a file written by hand
many = {n: Tensor(a) for n, a in [("f64", rng.standard_normal(3)), ("f32", rng.standard_normal((2, 2)).astype(np.float32)), ("f16", f16(rng.standard_normal(5))),
        ("i8", np.array([-128, 0, 127], np.int8)), ("u8", np.array([0, 255, 7], np.uint8)), ("i16", np.array([-32768, 32767], np.int16)),
        ("u16", np.array([65535, 1], np.uint16)), ("i32", np.array([-2**31, 2**31 - 1], np.int32)), ("u32", np.array([2**32 - 1, 5], np.uint32)),
        ("i64", np.array([-2**62, 2**40], np.int64)), ("u64", np.array([2**64 - 1, 2**63], np.uint64)), ("bool", np.array([True, False, True]))]}
many["bf16"] = Tensor(bf16_val(bf16_bits([1.5, -2.25, 3e38]))).cast(dtypes.bfloat16)
safe_save(many, str(tmp / "many.safetensors"), metadata={"format": "pt"})
back = safe_load(str(tmp / "many.safetensors"))
for k, v in many.items():
  chk(f"safetensors {k} dtype", back[k].dtype == v.dtype, True, exact=True)
  chk(f"safetensors {k}", back[k].to("CPU").float() if k == "bf16" else back[k].to("CPU"), (v.float() if k == "bf16" else v).numpy(), exact=True)
chk("safetensors metadata", safe_load_metadata(str(tmp / "many.safetensors"))[2].get("__metadata__"), {"format": "pt"}, exact=True)
ha, hb = rng.standard_normal((2, 3)).astype(np.float32), np.arange(4, dtype=np.int16)
hdr = json.dumps({"__metadata__": {"k": "v"}, "b": {"dtype": "I16", "shape": [4], "data_offsets": [0, 8]},
                  "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]}}).encode()
hdr += b" " * (-len(hdr) % 8)
(tmp / "hand.safetensors").write_bytes(struct.pack("<Q", len(hdr)) + hdr + hb.tobytes() + ha.tobytes())
hand = safe_load(str(tmp / "hand.safetensors"))
chk("hand safetensors a", hand["a"].to("CPU"), ha, exact=True); chk("hand safetensors b", hand["b"].to("CPU"), hb, exact=True)

# ---- an MLP from the GGUF's Q8_0 weights, under TinyJit
w1, w2 = sd["mlp.w1"].contiguous().realize(), sd["mlp.w2"].contiguous().realize()
@TinyJit
def fwd(x): return (x @ w1.T).gelu() @ w2.T
X = rng.standard_normal((8, 64)).astype(np.float32)
ts, outs = [], []
for i in range(3):
  st = time.perf_counter(); outs.append(fwd(Tensor(X + i)).numpy()); ts.append(time.perf_counter() - st)
def gelu_np(x): return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
chk("q8_0 mlp", outs[2], gelu_np((X + 2) @ ref["mlp.w1"].T) @ ref["mlp.w2"].T, 1e-4)
finish()
c = float(outs[2].sum()) + sum(float(np.abs(a.astype(np.float64)).sum()) % 1000 for a in ref.values()) + float(s0.sum())
report("statefiles", ts[0], ts[1] + ts[2], fwd, (Tensor(X),), c, chk=lambda r: r.sum().item())
