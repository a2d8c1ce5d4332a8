# model state: get_state_dict / get_parameters, safe_save + safe_load round trip (with metadata), load_state_dict
# strict and non-strict, a disk tensor round trip, and torch_load when torch is importable (else skipped)
import os
import tempfile
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save

from bench import data, init


class Block:
  def __init__(self, c): self.conv, self.bn = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm(c)
  def __call__(self, x): return x + self.bn(self.conv(x)).relu()
class Net:
  def __init__(self):
    self.stem = nn.Conv2d(3, 8, 3, padding=1)
    self.blocks = [Block(8), Block(8)]
    self.head = {"fc": nn.Linear(8, 10), "ln": nn.LayerNorm(8)}
  def __call__(self, x): return self.head["fc"](self.head["ln"](x.sequential([self.stem, *self.blocks]).mean((2, 3))))

st = time.perf_counter()
m = Net(); init(m)
sd = get_state_dict(m)
print("keys", len(sd), sorted(sd)[:4], "params", len(get_parameters(m)))
print("dtypes", sorted({str(v.dtype) for v in sd.values()}), "numel", sum(v.numel() for v in sd.values()))
X, Y = data(1, 16, 3, 12, 12), data(2, 16, kind="int", hi=10)
opt = nn.optim.SGD(get_parameters(m), lr=0.05, momentum=0.9)
@TinyJit
def step(x, y):
  opt.zero_grad()
  loss = m(x).sparse_categorical_crossentropy(y).backward()
  opt.step()
  return loss.realize()
with Context(TRAINING=1):
  for _ in range(4): loss = step(X, Y)
with Context(TRAINING=0): ref = m(X).realize()
print("trained loss", round(loss.item(), 4), "out", round(ref.sum().item(), 3),
      "nbt", get_state_dict(m)["blocks.0.bn.num_batches_tracked"].item())

d = tempfile.mkdtemp()
fn = os.path.join(d, "m.safetensors")
safe_save(get_state_dict(m), fn, metadata={"step": "4", "who": "program-survey"})
_, hdr_len, meta = safe_load_metadata(fn)
print("metadata", meta.get("__metadata__"), "header", hdr_len > 0)
loaded = safe_load(fn)
print("loaded", len(loaded), "devices", sorted({str(v.device).split(":")[0] for v in loaded.values()}))
m2 = Net()
load_state_dict(m2, loaded, verbose=False)
with Context(TRAINING=0): out2 = m2(X).realize()
print("strict reload equal", bool((out2 == ref).all().item()), round(out2.sum().item(), 3))

# non-strict: a model with an extra head and a missing key
class Net3(Net):
  def __init__(self):
    super().__init__()
    self.extra = nn.Linear(4, 4)
partial = {k: v for k, v in safe_load(fn).items() if not k.startswith("head.ln")}
m3 = Net3()
try:
  load_state_dict(m3, partial, strict=True, verbose=False)
  print("strict: no error")
except Exception as e: print("strict raised", type(e).__name__)  # noqa: BLE001  (the two packages' types are printed)
m3 = Net3(); init(m3, seed=5)
load_state_dict(m3, partial, strict=False, verbose=False)
print("non-strict stem equal", bool((m3.stem.weight == m.stem.weight).all().item()),
      "ln kept", round(m3.head["ln"].bias.sum().item(), 4))

# half precision checkpoint
safe_save({k: v.half() if dtypes.is_float(v.dtype) else v for k, v in get_state_dict(m).items()}, os.path.join(d, "h.safetensors"))
h = safe_load(os.path.join(d, "h.safetensors"))
print("half", h["stem.weight"].dtype, round(h["stem.weight"].to("CPU").float().sum().item(), 3), h["blocks.0.bn.num_batches_tracked"].dtype)

# disk tensors: write, read back, slice
dfn = os.path.join(d, "raw.bin")
dt = Tensor.empty(4, 64, dtype=dtypes.float32, device=f"disk:{dfn}")
src = Tensor.arange(256).float().reshape(4, 64) / 7
dt.assign(src.to(dt.device)).realize()
back = dt.to("CPU").realize()
print("disk", os.path.getsize(dfn), round(back.sum().item(), 3), round(dt[1:3].to("CPU").sum().item(), 3))
raw = np.fromfile(dfn, dtype=np.float32)
print("disk bytes match numpy", bool(np.allclose(raw.reshape(4, 64), src.numpy())))

try:
  import torch  # noqa: F401
  have_torch = True
except ImportError: have_torch = False
if have_torch:
  from tinygrad.nn.state import torch_load
  tfn = os.path.join(d, "t.pt")
  torch.save({"w": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(), "b": torch.ones(3, dtype=torch.float16)}, tfn)
  td = torch_load(tfn)
  print("torch_load", td["w"].shape, td["w"].numpy().tolist()[0], td["b"].dtype)
else: print("torch_load skipped (no torch)")
total = time.perf_counter() - st

# step timing: save + load + reload into the model
n_saved = [0]
def roundtrip():
  # a fresh name each time: tinygrad keeps the disk device of a loaded file open, so it can't re-save to that path
  n_saved[0] += 1; f = os.path.join(d, f"r{n_saved[0]}.safetensors")
  safe_save(get_state_dict(m), f)
  load_state_dict(m2, safe_load(f), verbose=False)
  return m2.stem.weight.sum().realize()
st = time.perf_counter(); c = roundtrip().item(); t1 = time.perf_counter() - st
st = time.perf_counter()
for _ in range(5): r = roundtrip()
r.item(); t3 = (time.perf_counter() - st) / 5
print(f"stateio first {total:.2f}s capture {t1:.2f}s step {t3*1e3:.2f}ms chk {loss.item() + c:.4f}")
