"""Weights in and out: safetensors written by our safe_save (and by hand-built headers), round trips, state dicts of
model objects, load_state_dict, and the DISK device that loading goes through (memory-mapped, reads only what is used)."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from collections import OrderedDict, namedtuple

import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Device, Tensor, dtypes
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save, torch_load
from tinygrad.runtime.disk import DiskFile, disk_file, disk_view

pytestmark = pytest.mark.skipif(is_null_device(), reason="the NULL device has no data to read back")

# (tinygrad dtype, safetensors name, numpy dtype holding the same bits)
DTYPES = [(dtypes.float32, "F32", np.float32), (dtypes.float16, "F16", np.float16), (dtypes.bfloat16, "BF16", np.uint16),
          (dtypes.float64, "F64", np.float64), (dtypes.int8, "I8", np.int8), (dtypes.int16, "I16", np.int16), (dtypes.int32, "I32", np.int32),
          (dtypes.int64, "I64", np.int64), (dtypes.uint8, "U8", np.uint8), (dtypes.uint16, "U16", np.uint16),
          (dtypes.uint32, "U32", np.uint32), (dtypes.uint64, "U64", np.uint64), (dtypes.bool, "BOOL", np.bool_)]


def raw_bytes(t: Tensor) -> bytes:
  """The tensor's bytes as they are on its device (no conversion)."""
  return bytes(t.data().cast("B")) if t.numel() else b""


def sample(np_dt, shape, seed=0) -> np.ndarray:
  rng = np.random.default_rng(seed)
  if np_dt == np.bool_: return rng.random(shape) < 0.5
  if np.issubdtype(np_dt, np.integer):
    info = np.iinfo(np_dt)
    return rng.integers(info.min, info.max, size=shape, dtype=np_dt, endpoint=True)
  return (rng.standard_normal(shape) * 100).astype(np_dt)


def write_safetensors(path, entries: dict, metadata=None, pad=True, extra_header=None) -> None:
  """A safetensors file built by hand: entries maps name -> (dtype name, shape, raw bytes), stored in reverse order."""
  header, blobs, offset = {}, [], 0
  for name, (dt, shape, raw) in reversed(list(entries.items())):
    header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
  if metadata is not None: header["__metadata__"] = metadata
  header.update(extra_header or {})
  j = json.dumps(header).encode()
  if pad: j += b" " * (-len(j) % 8)
  with open(path, "wb") as f: f.write(struct.pack("<Q", len(j)) + j + b"".join(blobs))


# ---- safetensors round trips

@pytest.mark.parametrize("dt,name,np_dt", DTYPES, ids=[d[1] for d in DTYPES])
def test_round_trip_every_dtype(tmp_path, dt, name, np_dt):
  arr = sample(np_dt, (3, 5))
  t = Tensor(arr.tobytes(), dtype=dt).reshape(3, 5)  # exact bits, bf16 included
  safe_save({"x": t}, tmp_path / "a.safetensors")
  header = safe_load_metadata(tmp_path / "a.safetensors")[2]
  assert header["x"] == {"dtype": name, "shape": [3, 5], "data_offsets": [0, arr.nbytes]}
  back = safe_load(tmp_path / "a.safetensors")["x"]
  assert back.dtype == dt and back.shape == (3, 5)
  assert raw_bytes(back.to(None)) == arr.tobytes()


def test_file_layout_matches_the_format(tmp_path):
  a, b = Tensor([[1.0, 2.0], [3.0, 4.0]]), Tensor([7, 8, 9], dtype=dtypes.int16)
  safe_save({"a": a, "b": b}, tmp_path / "x.safetensors", metadata={"format": "pt"})
  raw = (tmp_path / "x.safetensors").read_bytes()
  n = struct.unpack("<Q", raw[:8])[0]
  assert (8 + n) % 8 == 0, "the data must start 8-byte aligned"
  header = json.loads(raw[8:8 + n])
  assert header["__metadata__"] == {"format": "pt"}
  assert header["a"] == {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
  assert header["b"] == {"dtype": "I16", "shape": [3], "data_offsets": [16, 22]}
  data = raw[8 + n:]
  assert data == struct.pack("<4f", 1, 2, 3, 4) + struct.pack("<3h", 7, 8, 9)


def test_round_trip_computed_and_odd_shapes(tmp_path):
  tensors = {"computed": Tensor.arange(12).reshape(3, 4) * 2 + 1, "permuted": Tensor.arange(6, dtype=dtypes.float32).reshape(2, 3).T,
             "scalar": Tensor(3.25), "empty": Tensor.empty(0, 4), "ones": Tensor.ones(2, 1, 3, dtype=dtypes.float16)}
  safe_save(tensors, tmp_path / "x.safetensors")
  back = safe_load(tmp_path / "x.safetensors")
  assert list(back) == list(tensors)
  for k, v in tensors.items():
    assert back[k].shape == v.shape and back[k].dtype == v.dtype, k
    if v.numel(): np.testing.assert_array_equal(back[k].to(None).numpy(), v.numpy(), err_msg=k)


def test_metadata_and_empty_dict(tmp_path):
  safe_save({}, tmp_path / "e.safetensors", metadata={"a": "b"})
  assert safe_load(tmp_path / "e.safetensors") == {}
  _, start, header = safe_load_metadata(str(tmp_path / "e.safetensors"))
  assert header == {"__metadata__": {"a": "b"}} and start == os.path.getsize(tmp_path / "e.safetensors")


def test_hand_built_file(tmp_path):
  a = sample(np.float32, (2, 3), 1)
  b = sample(np.int64, (4,), 2)
  c = sample(np.uint16, (2, 2), 3)  # bf16 bits
  write_safetensors(tmp_path / "h.safetensors", {"a": ("F32", (2, 3), a.tobytes()), "b": ("I64", (4,), b.tobytes()),
                                                  "c": ("BF16", (2, 2), c.tobytes())}, metadata={"who": "hand"}, pad=False)
  out = safe_load(tmp_path / "h.safetensors")
  assert sorted(out) == ["a", "b", "c"]
  np.testing.assert_array_equal(out["a"].to(None).numpy(), a)
  np.testing.assert_array_equal(out["b"].to(None).numpy(), b)
  assert out["c"].dtype == dtypes.bfloat16 and raw_bytes(out["c"].to(None)) == c.tobytes()
  assert safe_load_metadata(tmp_path / "h.safetensors")[2]["__metadata__"] == {"who": "hand"}


def test_safe_load_is_lazy_and_on_disk(tmp_path):
  safe_save({"w": Tensor.arange(10, dtype=dtypes.float32)}, tmp_path / "w.safetensors")
  w = safe_load(tmp_path / "w.safetensors")["w"]
  assert w.device.startswith("DISK:") and w.device.endswith("w.safetensors")
  assert w.numpy().tolist() == list(range(10))  # DISK reads back without a kernel
  moved = w.to(Device.DEFAULT)
  assert moved.device == Device.DEFAULT
  np.testing.assert_array_equal((moved * 2).numpy(), np.arange(10) * 2)


def test_safe_load_accepts_tensors(tmp_path):
  safe_save({"w": Tensor([1.0, 2.0, 3.0])}, tmp_path / "w.safetensors")
  disk = disk_file(tmp_path / "w.safetensors")
  assert safe_load(disk)["w"].to(None).tolist() == [1.0, 2.0, 3.0]
  in_memory = Tensor((tmp_path / "w.safetensors").read_bytes())  # on the default device
  assert safe_load(in_memory)["w"].tolist() == [1.0, 2.0, 3.0]


def test_safe_save_replaces_atomically(tmp_path):
  fn = tmp_path / "w.safetensors"
  safe_save({"w": Tensor([1.0, 2.0])}, fn)
  old = safe_load(fn)["w"]
  old.numpy()  # mapped now
  safe_save({"w": Tensor([5.0, 6.0, 7.0])}, fn)
  assert old.to(None).tolist() == [1.0, 2.0], "tensors loaded before keep reading the file they were loaded from"
  assert safe_load(fn)["w"].to(None).tolist() == [5.0, 6.0, 7.0]
  assert [p.name for p in tmp_path.iterdir()] == ["w.safetensors"], "no temporary file left behind"


@pytest.mark.parametrize("case,match", [
  ("short", "less than the 8-byte header"), ("huge_header", "header claims"), ("bad_json", "not valid JSON"),
  ("bad_dtype", "dtype 'C64'"), ("past_end", "data_offsets"), ("size_mismatch", "span"), ("bad_entry", "malformed entry"),
  ("bad_shape", "bad shape")])
def test_safe_load_errors(tmp_path, case, match):
  fn = tmp_path / "bad.safetensors"
  ok = ("F32", (2,), b"\0" * 8)
  if case == "short": fn.write_bytes(b"\1\2\3")
  elif case == "huge_header": fn.write_bytes(struct.pack("<Q", 10**12) + b"{}")
  elif case == "bad_json": fn.write_bytes(struct.pack("<Q", 4) + b"{no}")
  elif case == "bad_dtype": write_safetensors(fn, {"x": ("C64", (2,), b"\0" * 16)})
  elif case == "past_end": write_safetensors(fn, {"x": ok}, extra_header={"y": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})
  elif case == "size_mismatch": write_safetensors(fn, {"x": ("F32", (3,), b"\0" * 8)})
  elif case == "bad_entry": write_safetensors(fn, {"x": ok}, extra_header={"y": [1, 2]})
  elif case == "bad_shape": write_safetensors(fn, {"x": ("F32", (-2,), b"")})
  with pytest.raises(ValueError, match=match): safe_load(fn)


def test_safe_load_missing_file(tmp_path):
  with pytest.raises(FileNotFoundError): safe_load(tmp_path / "nope.safetensors")


def test_safe_save_errors(tmp_path):
  with pytest.raises(TypeError, match="expected a Tensor"): safe_save({"x": [1, 2]}, tmp_path / "x.safetensors")  # type: ignore[dict-item]
  with pytest.raises(ValueError, match="reserved"): safe_save({"__metadata__": Tensor([1])}, tmp_path / "x.safetensors")


# ---- state dicts

class Linear:
  def __init__(self, i, o):
    self.weight, self.bias = Tensor.ones(o, i), Tensor.zeros(o)


class Model:
  def __init__(self):
    self.l1 = Linear(2, 3)
    self.layers = [Linear(3, 3), Linear(3, 1)]
    self.extra = {"scale": Tensor([2.0])}
    self.name, self.count = "model", 3
    self.me = self  # a cycle


Pair = namedtuple("Pair", ["a", "b"])


def test_get_state_dict_walks_objects():
  m = Model()
  sd = get_state_dict(m)
  assert list(sd) == ["l1.weight", "l1.bias", "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias", "extra.scale"]
  assert sd["layers.1.weight"] is m.layers[1].weight
  assert list(get_state_dict(Pair(Tensor([1]), [Tensor([2])]), prefix="p.")) == ["p.a", "p.b.0"]
  assert list(get_state_dict(OrderedDict(x=Tensor([1]), y=(Tensor([2]), 3)))) == ["x", "y.0"]
  t = Tensor([1])
  assert list(get_state_dict(t, prefix="t.")) == ["t"] and get_state_dict(t, prefix="t.")["t"] is t


def test_get_parameters_dedups_shared():
  m = Model()
  m.layers[1].weight = m.layers[0].bias.reshape(1, 3)  # a different tensor
  m.tied = m.l1.weight
  params = get_parameters(m)
  assert len(params) == 7 and sum(p is m.l1.weight for p in params) == 1


def test_load_state_dict(tmp_path):
  src = Model()
  for i, t in enumerate(get_state_dict(src).values()): t.replace(Tensor.full(t.shape, float(i + 1)))
  safe_save(get_state_dict(src), tmp_path / "m.safetensors")
  dst = Model()
  weight = dst.l1.weight
  loaded = load_state_dict(dst, safe_load(tmp_path / "m.safetensors"), verbose=False)
  assert len(loaded) == 7 and dst.l1.weight is weight, "tensors are replaced in place, not swapped for new objects"
  for i, (k, t) in enumerate(get_state_dict(dst).items()):
    assert t.device == Device.DEFAULT, k
    np.testing.assert_array_equal(t.numpy(), np.full(t.shape, i + 1, dtype=np.float32), err_msg=k)


def test_load_state_dict_dtype_follows_file():
  m = Linear(2, 2)
  load_state_dict(m, {"weight": Tensor([[1, 2], [3, 4]], dtype=dtypes.float16), "bias": Tensor([5, 6], dtype=dtypes.float16)}, verbose=False)
  assert m.weight.dtype == dtypes.float16 and m.weight.tolist() == [[1, 2], [3, 4]]


def test_load_state_dict_errors():
  m = Linear(2, 3)
  with pytest.raises(ValueError, match=r"shape mismatch in layer `weight`: the model has \(3, 2\), the state dict has \(2, 3\)"):
    load_state_dict(m, {"weight": Tensor.ones(2, 3), "bias": Tensor.zeros(3)}, verbose=False)
  with pytest.raises(KeyError, match="missing from the state dict: bias"):
    load_state_dict(m, {"weight": Tensor.ones(3, 2)}, verbose=False)
  with pytest.raises(TypeError, match="expected a Tensor"):
    load_state_dict(m, {"weight": [[1.0]], "bias": Tensor.zeros(3)}, verbose=False)


def test_load_state_dict_not_strict_and_consume():
  m = Linear(2, 3)
  sd = {"weight": Tensor.full((3, 2), 4.0), "unused": Tensor([1])}
  out = load_state_dict(m, sd, strict=False, verbose=False, consume=True)
  assert len(out) == 1 and m.weight.numpy().tolist() == [[4.0, 4.0]] * 3 and m.bias.numpy().tolist() == [0.0] * 3
  assert list(sd) == ["unused"]


def test_load_state_dict_verbose_prints(capsys):
  load_state_dict(Linear(1, 1), {"weight": Tensor([[1.0]]), "bias": Tensor([2.0])})
  assert "loaded 2 tensors" in capsys.readouterr().err


# ---- the DISK device

def test_disk_names():
  assert Device.canonicalize("disk:/tmp/x.bin") == "DISK:/tmp/x.bin"
  assert Device.canonicalize("DISK:relative/Path.BIN") == "DISK:relative/Path.BIN"
  assert not Device["DISK:/tmp/never_opened.bin"].runs_kernels
  with pytest.raises(RuntimeError, match="DISK needs a file path"): Device["DISK"]


def test_disk_empty_and_views(tmp_path):
  fn = tmp_path / "f.bin"
  fn.write_bytes(struct.pack("<6f", *range(6)) + struct.pack("<3h", -1, 2, -3) + b"tail")
  t = Tensor.empty(fn.stat().st_size, dtype=dtypes.uint8, device=f"disk:{fn}")
  assert t.device == f"DISK:{fn}"
  np.testing.assert_array_equal(disk_view(t, 4, dtypes.float32, (2, 2)).to(None).numpy(), [[1, 2], [3, 4]])
  shorts = disk_view(t, 24, dtypes.int16, (3,))
  assert shorts.to(None).tolist() == [-1, 2, -3]
  assert disk_view(shorts, 2, dtypes.int16, (1,)).to(None).tolist() == [2], "a view of a view"
  assert bytes(disk_view(t, 30, dtypes.uint8, (4,)).data()) == b"tail"
  assert disk_view(t, 30, dtypes.uint8, (0,)).to(None).shape == (0,)
  with pytest.raises(ValueError, match="out of bounds"): disk_view(t, 30, dtypes.uint8, (5,))
  with pytest.raises(ValueError, match="out of bounds"): disk_view(t, -1, dtypes.uint8, (1,))


def test_disk_refuses_kernels(tmp_path):
  fn = tmp_path / "f.bin"
  fn.write_bytes(struct.pack("<4f", 1, 2, 3, 4))
  t = disk_view(disk_file(fn), 0, dtypes.float32, (4,))
  with pytest.raises(RuntimeError, match=r"runs no kernels.*\.to\("):
    (t + 1).realize()
  with pytest.raises(RuntimeError, match="runs no kernels"):  # not a byte range of the file: it would take a kernel
    t.flip(0).to(None).realize()
  assert t.shrink(((1, 3),)).to(None).tolist() == [2, 3]  # a byte range is read directly
  assert (t.to(None) + 1).tolist() == [2, 3, 4, 5]


def test_disk_write_through_to(tmp_path):
  fn = tmp_path / "out.bin"
  Tensor([1.5, -2.0, 3.0]).to(f"DISK:{fn}").realize()
  assert fn.read_bytes() == struct.pack("<3f", 1.5, -2.0, 3.0)
  assert Tensor.empty(3, device=f"DISK:{fn}").to(None).tolist() == [1.5, -2.0, 3.0]


def test_disk_short_file_and_missing(tmp_path):
  fn = tmp_path / "short.bin"
  fn.write_bytes(b"abc")
  with pytest.raises(EOFError, match="has 3 bytes"): Tensor.empty(8, dtype=dtypes.uint8, device=f"DISK:{fn}").to(None).realize()
  with pytest.raises(FileNotFoundError): Tensor.empty(8, dtype=dtypes.uint8, device=f"DISK:{tmp_path / 'none.bin'}").numpy()


def test_disk_reads_only_the_view(tmp_path, monkeypatch):
  fn = tmp_path / "big.safetensors"
  safe_save({"big": Tensor.empty(4 << 20, dtype=dtypes.uint8), "small": Tensor([1.0, 2.0, 3.0])}, fn)
  reads: list[int] = []
  real_read = DiskFile.read
  monkeypatch.setattr(DiskFile, "read", lambda self, offset, dest: (reads.append(dest.nbytes), real_read(self, offset, dest))[1])
  out = safe_load(fn)
  header_reads = sum(reads)
  assert header_reads < 1024
  assert out["small"].to(None).tolist() == [1.0, 2.0, 3.0]
  assert sum(reads) - header_reads == 12, "only the 12 bytes of the small tensor were copied"


RSS_SCRIPT = textwrap.dedent("""
  import sys
  from tinygrad.nn.state import safe_load
  def rss_kb():
    for line in open("/proc/self/status"):
      if line.startswith("VmRSS:"): return int(line.split()[1])
  def load_small(fn):
    small = safe_load(fn)["small"].to(None).numpy()
    assert small.tolist() == [1.0, 2.0, 3.0], small
  load_small(sys.argv[2])  # warm up on a tiny file: imports, the copy and the kernel that reads it back
  before = rss_kb()
  load_small(sys.argv[1])
  print(rss_kb() - before)
""")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc to read resident memory")
def test_disk_64mb_file_loads_one_tensor_without_reading_it(tmp_path):
  fn = tmp_path / "big.safetensors"
  big = bytes(range(256)) * (64 << 12)  # 64 MiB of real (non-sparse) data
  write_safetensors(fn, {"big": ("U8", (len(big),), big), "small": ("F32", (3,), struct.pack("<3f", 1, 2, 3))})
  assert fn.stat().st_size > 64 << 20
  write_safetensors(tmp_path / "tiny.safetensors", {"small": ("F32", (3,), struct.pack("<3f", 1, 2, 3))})
  out = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(fn), str(tmp_path / "tiny.safetensors")], capture_output=True, text=True, env=os.environ.copy(), timeout=300)
  assert out.returncode == 0, out.stderr
  grew_kb = int(out.stdout.strip().splitlines()[-1])
  assert grew_kb < 8 << 10, f"resident memory grew by {grew_kb} KiB loading a 12-byte tensor from a 64 MiB file"


def test_torch_load_refuses_non_torch_files(tmp_path):
  fn = tmp_path / "x.pt"
  fn.write_bytes(b"this is not a checkpoint at all")
  with pytest.raises(ValueError, match="neither a zip nor a legacy torch checkpoint"): torch_load(fn)
