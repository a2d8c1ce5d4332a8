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
import torch_files as TF
from conftest import is_null_device
from tinygrad import Device, Tensor, dtypes
from tinygrad.frontend.disk import disk_view
from tinygrad.nn.state import (
  SafetensorsError,
  TorchLoadError,
  disk_file,
  get_parameters,
  get_state_dict,
  load_state_dict,
  safe_load,
  safe_load_metadata,
  safe_save,
  torch_load,
)
from tinygrad.runtime.disk import DiskFile

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


# ---- hostile and damaged files (issue 20): each fails with the format's error naming the file, in bounded time and memory



def run_isolated(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
  """Run `code` in a fresh interpreter (a crash or hang there is a failed assertion here, not a dead test worker)."""
  try: return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
  except subprocess.TimeoutExpired: pytest.fail(f"hung for more than {timeout} s:\n{code}")


def test_safe_load_deeply_nested_header(tmp_path):
  fn = tmp_path / "deep.safetensors"
  j = b"[" * 200_000
  fn.write_bytes(struct.pack("<Q", len(j)) + j)
  with pytest.raises(SafetensorsError, match=f"{fn}: the safetensors header nests too deeply"): safe_load(fn)


def test_safe_load_errors_are_safetensors_errors_naming_the_file(tmp_path):
  fn = tmp_path / "bad.safetensors"
  for raw in [b"\1\2", struct.pack("<Q", 99) + b"{}", struct.pack("<Q", 2) + b"[]", struct.pack("<Q", 6) + b'{"a":1}',
              struct.pack("<Q", 5000) + b'{"a":' + b"9" * 4990 + b"}"]:
    fn.write_bytes(raw)
    with pytest.raises(SafetensorsError, match=str(fn)): safe_load(fn)


@pytest.mark.parametrize("when", ["after_first_read", "before_first_read"])
def test_safe_load_file_truncated_while_loaded(tmp_path, when):
  # a DISK read of a file that shrank after it was mapped was a SIGBUS (the process died): now it is an EOFError naming the file
  fn = tmp_path / "w.safetensors"
  safe_save({"a": Tensor.arange(4096, dtype=dtypes.float32), "b": Tensor.arange(4096, dtype=dtypes.float32)}, fn)
  out = run_isolated(f"""
    import os
    from tinygrad.nn.state import safe_load
    w = safe_load({str(fn)!r})
    {"w['a'].to(None).numpy()" if when == "after_first_read" else "pass"}
    os.truncate({str(fn)!r}, 4096)
    try: w["b"].to(None).numpy()
    except EOFError as e: print("EOFError", e)
  """)
  assert out.returncode == 0, f"the process died (rc {out.returncode}): {out.stderr[-2000:]}"
  assert "EOFError" in out.stdout and str(fn) in out.stdout, out.stdout + out.stderr


def test_safe_load_file_truncated_between_size_check_and_copy(tmp_path):
  # the race a size check before the copy leaves open: the file shrinks right after the check (os.fstat reports its old size
  # here). Copying out of a mapping then touched pages past the end of the file: SIGBUS, the process died. Reads go through
  # pread now, which comes back short instead, and the short read is an EOFError naming the file.
  fn = tmp_path / "w.safetensors"
  safe_save({"a": Tensor.arange(4096, dtype=dtypes.float32), "b": Tensor.arange(4096, dtype=dtypes.float32)}, fn)
  out = run_isolated(f"""
    import os
    import tinygrad.runtime.disk as disk
    from tinygrad.nn.state import safe_load
    w = safe_load({str(fn)!r})
    w["a"].to(None).numpy()
    old = os.stat({str(fn)!r})
    disk.os = type("os_with_stale_fstat", (), {{"__getattr__": lambda self, k: getattr(os, k), "fstat": staticmethod(lambda fd: old)}})()
    os.truncate({str(fn)!r}, 4096)
    try: w["b"].to(None).numpy()
    except EOFError as e: print("EOFError", e)
  """)
  assert out.returncode == 0, f"the process died (rc {out.returncode}): {out.stderr[-2000:]}"
  assert "EOFError" in out.stdout and str(fn) in out.stdout, out.stdout + out.stderr


def zip_with_pickle(path, pkl: bytes, extra: dict[str, bytes] | None = None) -> None:
  import zipfile
  with zipfile.ZipFile(path, "w") as z:
    z.writestr("archive/data.pkl", pkl)
    for k, v in (extra or {}).items(): z.writestr(k, v)


def test_torch_load_shared_nested_persistent_id_fails_fast(tmp_path):
  # 60 levels of (t, t): a few hundred bytes of pickle whose repr is 2^60 long; the error message used to expand it
  fn = tmp_path / "pid.pt"
  t: tuple = ()
  for _ in range(60): t = (t, t)

  class P(TF._Pickler):
    def persistent_id(self, obj): return t if obj == "x" else None
  import io
  f = io.BytesIO()
  P(f, protocol=2).dump({"a": "x"})
  zip_with_pickle(fn, f.getvalue())
  assert fn.stat().st_size < 2000
  out = run_isolated(f"""
    from tinygrad.nn.state import torch_load, TorchLoadError
    try: torch_load({str(fn)!r})
    except TorchLoadError as e: print("TorchLoadError", str(e)[:500])
  """, timeout=60)
  assert out.returncode == 0 and "TorchLoadError" in out.stdout and "unsupported persistent id" in out.stdout and str(fn) in out.stdout, out


def test_torch_load_overlapping_strides_is_one_strided_copy(tmp_path):
  # (n, n) with strides (1, 1): x[i, j] = storage[i + j]. It was gathered element by element in Python (minutes)
  import time
  n = 4000
  fn = tmp_path / "hankel.pt"
  storage = TF.Storage("0", np.arange(2 * n - 1, dtype=np.float32))
  fn.write_bytes(TF.zip_checkpoint({"x": TF.Rebuild(storage, 0, (n, n), (1, 1))}))
  assert fn.stat().st_size < 40_000
  start = time.perf_counter()
  x = torch_load(fn)["x"].numpy()
  assert time.perf_counter() - start < 20
  i, j = np.random.default_rng(0).integers(0, n, (2, 100))
  np.testing.assert_array_equal(x[i, j], (i + j).astype(np.float32))
  # expanding far beyond what the file holds is refused (one element seen as a 1e5 x 1e5 tensor)
  fn.write_bytes(TF.zip_checkpoint({"x": TF.Rebuild(TF.Storage("0", np.ones(1, np.float32)), 0, (10**5, 10**5), (0, 0))}))
  small = torch_load(fn)["x"]  # broadcast strides stay a lazy expand
  assert small.shape == (10**5, 10**5)
  fn.write_bytes(TF.zip_checkpoint({"x": TF.Rebuild(TF.Storage("0", np.ones(20_000, np.float32)), 0, (10**4, 10**4, 2), (1, 1, 1))}))
  with pytest.raises(TorchLoadError, match=f"{fn}: .*overlapping strides .* into 800000000"): torch_load(fn)


def test_torch_load_reads_only_referenced_zip_entries(tmp_path):
  # a small zip holding an unused 64 MiB compressed entry (and a used one of which the tensor needs 12 bytes): neither is inflated
  import tracemalloc
  import zipfile
  fn = tmp_path / "bomb.pt"
  big = TF.Storage("1", np.zeros(3, np.float32))
  obj = {"x": TF.Rebuild(big, 0, (3,), (1,))}
  with zipfile.ZipFile(fn, "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("archive/data.pkl", TF.dumps(obj))
    for name in ("archive/data/0", "archive/data/1"):
      with z.open(name, "w", force_zip64=True) as e:
        for _ in range(64): e.write(bytes(1 << 20))
  assert fn.stat().st_size < 2 << 20
  tracemalloc.start()
  try:
    out = torch_load(fn)
    peak = tracemalloc.get_traced_memory()[1]
  finally: tracemalloc.stop()
  assert peak < 16 << 20, f"loading allocated {peak} bytes"
  assert out["x"].tolist() == [0.0, 0.0, 0.0]


def test_torch_load_compressed_data_pkl_is_bounded(tmp_path):
  import zipfile
  fn = tmp_path / "pklbomb.pt"
  with zipfile.ZipFile(fn, "w", zipfile.ZIP_DEFLATED) as z:
    with z.open("archive/data.pkl", "w", force_zip64=True) as e:
      for _ in range(80): e.write(b"0" * (1 << 20))
  with pytest.raises(TorchLoadError, match=f"{fn}: zip entry archive/data.pkl is larger than"): torch_load(fn)


BUILD_ON_GLOBAL = [
  ("function", b"\x80\x02ctorch._utils\n_rebuild_parameter\n}X\x04\x00\x00\x00evilK\x01sb."),
  ("slots", b"\x80\x02ctorch\nFloatStorage\nN}X\x05\x00\x00\x00dtypeK\x01s\x86b."),
  ("rebuild_method", b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n}X\x04\x00\x00\x00evilK\x01sb."),
  ("class", b"\x80\x02ccollections\nOrderedDict\n}X\x04\x00\x00\x00evilK\x01sb.")]


@pytest.mark.parametrize("case,pkl", BUILD_ON_GLOBAL, ids=[c[0] for c in BUILD_ON_GLOBAL])
def test_torch_load_build_cannot_mutate_our_objects(tmp_path, case, pkl):
  # BUILD on a global the unpickler handed out set attributes on our own functions for the whole process
  from tinygrad.nn import state
  fn = tmp_path / "build.pt"
  zip_with_pickle(fn, pkl)
  with pytest.raises(TorchLoadError, match=f"{fn}: .*sets the state of"): torch_load(fn)
  assert not hasattr(state._rebuild_parameter, "evil") and not hasattr(OrderedDict, "evil")
  assert not hasattr(state._Unpickler._rebuild_tensor_v2, "evil")


def test_torch_load_ordered_dict_metadata_still_loads(tmp_path):
  # torch's state dicts are OrderedDicts with a _metadata attribute, set by BUILD: that stays allowed
  od: OrderedDict = OrderedDict(w=TF.tensor("0", np.arange(3, dtype=np.float32)))
  od._metadata = {"": {"version": 1}}  # type: ignore[attr-defined]
  fn = tmp_path / "sd.pt"
  fn.write_bytes(TF.zip_checkpoint(od))
  out = torch_load(fn)
  assert out._metadata == {"": {"version": 1}} and out["w"].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("fmt", ["zip", "legacy"])
def test_torch_load_round_trip_hand_built(tmp_path, fmt):
  a, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(5, dtype=np.int64)
  obj = {"a": TF.tensor("0", a), "b": [TF.tensor("1", b)], "t": TF.Rebuild(TF.Storage("0", a), 0, (4, 3), (1, 4))}
  fn = tmp_path / "ok.pt"
  fn.write_bytes(TF.zip_checkpoint(obj) if fmt == "zip" else TF.legacy_checkpoint(obj))
  out = torch_load(fn)
  np.testing.assert_array_equal(out["a"].numpy(), a)
  np.testing.assert_array_equal(out["b"][0].numpy(), b)
  np.testing.assert_array_equal(out["t"].numpy(), a.T)


def test_torch_load_errors_name_the_file(tmp_path):
  fn = tmp_path / "bad.pt"
  good = TF.zip_checkpoint({"a": TF.tensor("0", np.arange(4, dtype=np.float32))})
  cases = [b"\x80\x02}q\x00(X\x01", b"PK\x03\x04" + b"\0" * 40, good[:len(good) // 2], good.replace(b"_rebuild_tensor_v2", b"_rebuild_tensor_v9")]
  for raw in cases:
    fn.write_bytes(raw)
    with pytest.raises(TorchLoadError, match=str(fn)): torch_load(fn)
  for pkl in [b"garbage", b"\x80\x02(((((", b"\x80\x02K\x01b.", b"\x80\x02Q."]:
    zip_with_pickle(fn, pkl)
    with pytest.raises(TorchLoadError, match=str(fn)): torch_load(fn)


def test_torch_load_pickle_lengths_bounded_by_the_file(tmp_path):
  # found by the fuzzer: a legacy checkpoint whose pickle claims a 2^60-byte string was a MemoryError (the read allocated it)
  import pickle
  fn = tmp_path / "len.pt"
  headers = b"".join(pickle.dumps(x, protocol=2) for x in (TF.LEGACY_MAGIC, 1001, {"little_endian": True}))
  fn.write_bytes(headers + b"\x80\x02\x8d" + struct.pack("<Q", 2 ** 60) + b"abc")
  with pytest.raises(TorchLoadError, match=str(fn)): torch_load(fn)
  fn.write_bytes(headers + b"\x80\x02c" + b"x" * (4 << 20))  # a GLOBAL line with no end
  with pytest.raises(TorchLoadError, match=str(fn)): torch_load(fn)
  fn.write_bytes(headers + b"\x80\x05\x96" + struct.pack("<Q", 2 ** 60) + b"abc")  # BYTEARRAY8 allocates before it reads
  with pytest.raises(TorchLoadError, match=f"{fn}: .*protocol-5 bytearray"): torch_load(fn)


def test_safe_load_header_size_is_bounded(tmp_path):
  # the header is parsed whole: like the reference implementation, more than 100 MB is refused before reading it
  fn = tmp_path / "big_header.safetensors"
  with open(fn, "wb") as f:
    f.write(struct.pack("<Q", 100_000_001))
    f.truncate(100_000_001 + 8)  # sparse: the size is real, the bytes cost nothing
  with pytest.raises(SafetensorsError, match=f"{fn}: the safetensors header claims 100000001 bytes, more than the format's limit"): safe_load(fn)


def test_torch_load_other_compressions_fail_cleanly(tmp_path):
  # found by the fuzzer: a damaged bz2 entry raised a bare OSError("Invalid data stream")
  import zipfile
  fn = tmp_path / "bz2.pt"
  with zipfile.ZipFile(fn, "w", zipfile.ZIP_BZIP2) as z: z.writestr("archive/data.pkl", TF.dumps({"a": 1}))
  raw = bytearray(fn.read_bytes())
  at = raw.index(b"BZh") + 10
  raw[at:at + 8] = b"\xff" * 8
  fn.write_bytes(raw)
  with pytest.raises(TorchLoadError, match=str(fn)): torch_load(fn)
