"""Loading files that torch wrote: `torch.save` in the zip format and the legacy (`_use_new_zipfile_serialization=False`)
format, every dtype bit-exact (bf16 included), non-contiguous tensors (transposes, slices, offsets into shared storage,
broadcasts, overlapping strides), whole training checkpoints; safetensors built from torch tensors; and malicious
pickles, which must be refused without running anything."""
from __future__ import annotations

import json
import os
import pickle
import struct
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.nn.state import get_state_dict, load_state_dict, safe_load, safe_save, torch_load

from .helpers import torch

FORMATS = {"zip": True, "legacy": False}
TORCH_DTYPES = [(torch.float32, dtypes.float32), (torch.float16, dtypes.float16), (torch.bfloat16, dtypes.bfloat16),
                (torch.float64, dtypes.float64), (torch.int8, dtypes.int8), (torch.int16, dtypes.int16), (torch.int32, dtypes.int32),
                (torch.int64, dtypes.int64), (torch.uint8, dtypes.uint8), (torch.bool, dtypes.bool),
                (torch.uint16, dtypes.uint16), (torch.uint32, dtypes.uint32), (torch.uint64, dtypes.uint64)]


def torch_bytes(t) -> bytes:
  """The elements of a torch tensor in row-major order, as raw bytes."""
  return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def our_bytes(t: Tensor) -> bytes:
  return bytes(t.data().cast("B")) if t.numel() else b""


def same(ours: Tensor, theirs, what: str = "") -> None:
  assert ours.shape == tuple(theirs.shape), f"{what}: shape {ours.shape} != {tuple(theirs.shape)}"
  assert our_bytes(ours) == torch_bytes(theirs), f"{what}: bytes differ"


def sample(dt, shape, seed=0):
  g = torch.Generator().manual_seed(seed)
  if dt == torch.bool: return torch.rand(shape, generator=g) < 0.5
  if dt.is_floating_point: return (torch.randn(shape, generator=g, dtype=torch.float64) * 1000).to(dt)
  info = torch.iinfo(dt)
  lo, hi = max(info.min, -(2**62)), min(info.max, 2**62)
  return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dt)


def save(obj, path, fmt: str):
  torch.save(obj, path, _use_new_zipfile_serialization=FORMATS[fmt])
  return path


# ---- dtypes, bit-exact

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("tdt,dt", TORCH_DTYPES, ids=[str(t[0]).split(".")[1] for t in TORCH_DTYPES])
def test_every_dtype_bit_exact(tmp_path, fmt, tdt, dt):
  x = sample(tdt, (5, 7))
  if tdt.is_floating_point:  # the awkward values too
    x[0, :5] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 1e-40], dtype=torch.float64).to(tdt)
  out = torch_load(save({"x": x}, tmp_path / "x.pt", fmt))
  assert out["x"].dtype == dt and out["x"].device.startswith("DISK:"), "contiguous tensors stay lazy on DISK"
  same(out["x"].to(None), x, str(tdt))


@pytest.mark.parametrize("fmt", FORMATS)
def test_scalars_and_empty(tmp_path, fmt):
  sd = {"s": torch.tensor(2.5), "i": torch.tensor(-7, dtype=torch.int64), "e": torch.zeros(0, 3), "b": torch.tensor(True)}
  out = torch_load(save(sd, tmp_path / "x.pt", fmt))
  for k, v in sd.items(): same(out[k].to(None), v, k)


# ---- layouts

def layouts():
  g = torch.Generator().manual_seed(1)
  base = torch.randn(6, 8, generator=g)
  big = torch.randn(4, 5, 6, generator=g)
  return {
    "transposed": base.t(),
    "permuted3d": big.permute(2, 0, 1),
    "sliced": base[1:5:2, ::3],
    "offset_view": base[3:],  # starts inside the storage it shares with "transposed"
    "column": base[:, 5],
    "broadcast": torch.randn(3, 1, generator=g).expand(3, 4),
    "broadcast_mid": torch.randn(2, 1, 3, generator=g).expand(2, 4, 3).transpose(0, 2),
    "overlapping": torch.randn(10, generator=g).as_strided((4, 3), (2, 1)),
    "bf16_t": torch.randn(4, 6, generator=g).to(torch.bfloat16).t(),
    "fp16_sliced": torch.randn(5, 5, generator=g).half()[::2, 1:],
    "bool_t": (torch.randn(3, 4, generator=g) > 0).t(),
    "int64_permuted": torch.arange(24).reshape(2, 3, 4).permute(1, 2, 0),
    "size1_strides": torch.randn(1, 4, 1, generator=g).as_strided((1, 4, 1), (99, 1, 7)),
    "uint16_t": torch.arange(12).reshape(3, 4).to(torch.uint16).t(),
  }


@pytest.mark.parametrize("fmt", FORMATS)
def test_non_contiguous_layouts(tmp_path, fmt):
  sd = layouts()
  out = torch_load(save(sd, tmp_path / "x.pt", fmt))
  for k, v in sd.items():
    same(out[k], v, k)
    assert out[k].dtype == {torch.bfloat16: dtypes.bfloat16, torch.float16: dtypes.float16, torch.bool: dtypes.bool,
                            torch.int64: dtypes.int64, torch.uint16: dtypes.uint16}.get(v.dtype, dtypes.float32), k


@pytest.mark.parametrize("fmt", FORMATS)
def test_checkpoint_structure(tmp_path, fmt):
  model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2, bias=False), torch.nn.BatchNorm1d(2))
  opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
  model(torch.randn(5, 3)).sum().backward()
  opt.step()
  ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "params": [model[0].weight, (1.5, "x")],
          "nested": {"a": [torch.arange(3)], "b": None}}
  out = torch_load(save(ckpt, tmp_path / "ckpt.pt", fmt))
  assert out["epoch"] == 3 and out["params"][1] == (1.5, "x") and out["nested"]["b"] is None
  assert list(out["model"]) == list(model.state_dict())
  for k, v in model.state_dict().items(): same(out["model"][k].to(None), v, k)
  same(out["params"][0].to(None), model[0].weight, "parameter")
  same(out["nested"]["a"][0].to(None), torch.arange(3), "nested")
  assert out["optimizer"]["param_groups"][0]["lr"] == 0.1
  for i, st in opt.state_dict()["state"].items(): same(out["optimizer"]["state"][i]["momentum_buffer"].to(None), st["momentum_buffer"])


def test_load_state_dict_from_torch_module(tmp_path):
  torch.manual_seed(0)
  tm = torch.nn.Linear(5, 3)

  class Linear:
    def __init__(self): self.weight, self.bias = Tensor.zeros(3, 5), Tensor.zeros(3)

    def __call__(self, x: Tensor) -> Tensor: return x @ self.weight.T + self.bias

  ours = Linear()
  load_state_dict(ours, torch_load(save(tm.state_dict(), tmp_path / "lin.pt", "zip")), verbose=False)
  x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
  np.testing.assert_allclose(ours(Tensor(x)).numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_shared_storage_loads_once_per_tensor(tmp_path):
  base = torch.arange(20, dtype=torch.float32)
  sd = {"a": base[:10], "b": base[10:], "c": base.view(4, 5)}
  for fmt in FORMATS:
    out = torch_load(save(sd, tmp_path / f"{fmt}.pt", fmt))
    for k, v in sd.items(): same(out[k].to(None), v, f"{fmt} {k}")


def test_compressed_zip_entries(tmp_path):
  x = sample(torch.float32, (4, 4))
  src = save({"x": x, "t": x.t()}, tmp_path / "x.pt", "zip")
  dst = tmp_path / "deflated.pt"
  with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    for info in zin.infolist(): zout.writestr(info.filename, zin.read(info))
  out = torch_load(dst)
  same(out["x"], x, "x")
  same(out["t"], x.t(), "t")


def test_accepts_a_tensor_of_the_file(tmp_path):
  x = sample(torch.int32, (3,))
  path = save({"x": x}, tmp_path / "x.pt", "zip")
  same(torch_load(Tensor(path.read_bytes()))["x"], x)


def test_truncated_legacy_file(tmp_path):
  path = save({"x": torch.zeros(1000)}, tmp_path / "x.pt", "legacy")
  path.write_bytes(path.read_bytes()[:-100])
  with pytest.raises(ValueError, match="truncated"): torch_load(path)


# ---- refusing code

class Evil:
  def __init__(self, marker): self.marker = str(marker)
  def __reduce__(self): return (os.system, (f"touch {self.marker}",))


class EvilEval:
  def __init__(self, marker): self.marker = str(marker)
  def __reduce__(self): return (eval, (f"open({self.marker!r}, 'w').write('x')",))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("evil,glob", [(Evil, f"{os.system.__module__}.system"), (EvilEval, "builtins.eval")])
def test_malicious_pickle_is_refused(tmp_path, fmt, evil, glob):
  marker = tmp_path / "pwned"
  path = save({"w": torch.zeros(2), "payload": evil(marker)}, tmp_path / "evil.pt", fmt)
  with pytest.raises(pickle.UnpicklingError, match=f"'{glob}'.* which is not allowed"): torch_load(path)
  assert not marker.exists(), "the payload ran"


def test_malicious_plain_pickle_is_refused(tmp_path):
  marker = tmp_path / "pwned"
  path = tmp_path / "evil.pkl"
  path.write_bytes(pickle.dumps(Evil(marker)))
  with pytest.raises(pickle.UnpicklingError, match=f"'{os.system.__module__}.system'"): torch_load(path)
  assert not marker.exists()
  # a zip checkpoint whose data.pkl was swapped for the payload
  good = save({"w": torch.zeros(2)}, tmp_path / "good.pt", "zip")
  bad = tmp_path / "swapped.pt"
  with zipfile.ZipFile(good) as zin, zipfile.ZipFile(bad, "w") as zout:
    for info in zin.infolist(): zout.writestr(info.filename, pickle.dumps(Evil(marker)) if info.filename.endswith("data.pkl") else zin.read(info))
  with pytest.raises(pickle.UnpicklingError, match="not allowed"): torch_load(bad)
  assert not marker.exists()


def test_whole_module_is_refused_with_advice(tmp_path):
  path = save(torch.nn.Linear(2, 2), tmp_path / "module.pt", "zip")
  with pytest.raises(pickle.UnpicklingError, match=r"torch\.nn\.modules\.linear\.Linear.*state_dict\(\)"): torch_load(path)


# ---- safetensors with torch tensors

def hand_safetensors(tensors: dict, metadata=None) -> bytes:
  names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64", torch.int8: "I8", torch.int16: "I16",
           torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8", torch.bool: "BOOL", torch.uint16: "U16", torch.uint32: "U32",
           torch.uint64: "U64"}
  header, blobs, offset = ({"__metadata__": metadata} if metadata else {}), [], 0
  for k, v in tensors.items():
    raw = torch_bytes(v)
    header[k] = {"dtype": names[v.dtype], "shape": list(v.shape), "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
  j = json.dumps(header).encode()
  return struct.pack("<Q", len(j)) + j + b"".join(blobs)  # unpadded: the format allows any header length


def test_safetensors_from_torch_tensors(tmp_path):
  sd = {str(tdt).split(".")[1]: sample(tdt, (3, 4), i) for i, (tdt, _) in enumerate(TORCH_DTYPES)}
  (tmp_path / "h.safetensors").write_bytes(hand_safetensors(sd, {"format": "pt"}))
  out = safe_load(tmp_path / "h.safetensors")
  for k, v in sd.items(): same(out[k].to(None), v, k)
  # and back out through our safe_save: the same bytes per tensor
  safe_save({k: t.to(None) for k, t in out.items()}, tmp_path / "ours.safetensors")
  raw = (tmp_path / "ours.safetensors").read_bytes()
  n = struct.unpack("<Q", raw[:8])[0]
  header = json.loads(raw[8:8 + n])
  for k, v in sd.items():
    s, e = header[k]["data_offsets"]
    assert raw[8 + n + s:8 + n + e] == torch_bytes(v), k


def test_safetensors_package_round_trip(tmp_path):
  st = pytest.importorskip("safetensors.torch")
  sd = {"w": sample(torch.bfloat16, (4, 3)), "b": sample(torch.int64, (5,)), "m": sample(torch.bool, (2, 2))}
  st.save_file(sd, str(tmp_path / "pkg.safetensors"), metadata={"k": "v"})
  out = safe_load(tmp_path / "pkg.safetensors")
  for k, v in sd.items(): same(out[k].to(None), v, k)
  safe_save(out, tmp_path / "ours.safetensors", metadata={"k": "v"})
  back = st.load_file(str(tmp_path / "ours.safetensors"))
  for k, v in sd.items(): assert torch.equal(back[k], v), k


def test_torch_reads_our_safe_save(tmp_path):
  """Our file parsed with nothing but the spec, the data interpreted by torch."""
  x = Tensor.arange(12, dtype=dtypes.float32).reshape(3, 4) / 3
  safe_save({"x": x, "y": x.cast(dtypes.bfloat16)}, tmp_path / "x.safetensors")
  raw = (tmp_path / "x.safetensors").read_bytes()
  n = struct.unpack("<Q", raw[:8])[0]
  header = json.loads(raw[8:8 + n])
  for k, tdt in (("x", torch.float32), ("y", torch.bfloat16)):
    s, e = header[k]["data_offsets"]
    got = torch.frombuffer(bytearray(raw[8 + n + s:8 + n + e]), dtype=tdt).reshape(header[k]["shape"])
    assert torch.equal(got, (torch.arange(12, dtype=torch.float32).reshape(3, 4) / 3).to(tdt)), k


def test_state_dict_names_match_torch(tmp_path):
  """A torch state dict saved, loaded and saved again by us keeps names, order and values."""
  model = torch.nn.Sequential(OrderedDict(fc=torch.nn.Linear(2, 3), out=torch.nn.Linear(3, 1)))
  loaded = torch_load(save(model.state_dict(), tmp_path / "m.pt", "zip"))
  assert list(get_state_dict(loaded)) == list(model.state_dict())
  for k, v in model.state_dict().items(): same(loaded[k].to(None), v, k)
