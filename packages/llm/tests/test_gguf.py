"""The GGUF reader: header, every metadata type, alignment, tensor infos and bytes, split files, and errors on bad files."""
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gguf_raw import Typed, kv_bytes, write_gguf
from tinygrad.llm.gguf import ARRAY, UINT8, UINT16, UINT32, GGUFError, read_gguf, split_paths

gguf = pytest.importorskip("gguf")


def write_all_types(path, alignment=None):
  w = gguf.GGUFWriter(str(path), "llama")
  if alignment is not None: w.add_custom_alignment(alignment)
  w.add_uint8("t.u8", 200)
  w.add_int8("t.i8", -100)
  w.add_uint16("t.u16", 60000)
  w.add_int16("t.i16", -30000)
  w.add_uint32("t.u32", 4_000_000_000)
  w.add_int32("t.i32", -2_000_000_000)
  w.add_float32("t.f32", 1.5)
  w.add_bool("t.bool", True)
  w.add_string("t.str", "héllo ✓")
  w.add_uint64("t.u64", 2 ** 63 + 5)
  w.add_int64("t.i64", -(2 ** 62))
  w.add_float64("t.f64", 2.0 ** -30)
  w.add_array("t.arr_int", [1, 2, 3])
  w.add_array("t.arr_str", ["a", "bc", ""])
  w.add_array("t.arr_float", [0.5, -1.25])
  w.add_array("t.arr_nested", [[1, 2], [3]])
  a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  b = np.arange(7, dtype=np.float16)
  w.add_tensor("a", a)
  w.add_tensor("b", b)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return a, b


def test_metadata_types_and_tensors(tmp_path):
  p = tmp_path / "m.gguf"
  a, b = write_all_types(p)
  g = read_gguf(p)
  assert g.version == 3
  m = g.metadata
  assert m["general.architecture"] == "llama"
  assert (m["t.u8"], m["t.i8"], m["t.u16"], m["t.i16"], m["t.u32"], m["t.i32"]) == (200, -100, 60000, -30000, 4_000_000_000, -2_000_000_000)
  assert m["t.f32"] == 1.5 and m["t.bool"] is True and m["t.str"] == "héllo ✓"
  assert m["t.u64"] == 2 ** 63 + 5 and m["t.i64"] == -(2 ** 62) and m["t.f64"] == 2.0 ** -30
  assert m["t.arr_int"] == [1, 2, 3] and m["t.arr_str"] == ["a", "bc", ""] and m["t.arr_float"] == [0.5, -1.25]
  assert m["t.arr_nested"] == [[1, 2], [3]]
  assert g.tensors["a"].shape == (2, 3, 4) and g.tensors["a"].type_name == "F32"
  assert g.tensors["b"].shape == (7,) and g.tensors["b"].type_name == "F16"
  np.testing.assert_array_equal(g.tensor_bytes("a").numpy(), a.view(np.uint8).reshape(-1))
  np.testing.assert_array_equal(g.tensor_bytes("b").numpy(), b.view(np.uint8).reshape(-1))


@pytest.mark.parametrize("alignment", [64, 256])
def test_alignment(tmp_path, alignment):
  p = tmp_path / "m.gguf"
  a, b = write_all_types(p, alignment)
  g = read_gguf(p)
  assert g.alignment == alignment
  assert all(t.offset % alignment == 0 for t in g.tensors.values())
  np.testing.assert_array_equal(g.tensor_bytes("b").numpy(), b.view(np.uint8).reshape(-1))


def test_version_2(tmp_path):
  p = tmp_path / "m.gguf"
  a, b = write_all_types(p)
  raw = bytearray(p.read_bytes())
  raw[4:8] = struct.pack("<I", 2)  # v2 and v3 share the little-endian layout
  p.write_bytes(raw)
  g = read_gguf(p)
  assert g.version == 2
  np.testing.assert_array_equal(g.tensor_bytes("a").numpy(), a.view(np.uint8).reshape(-1))


def test_split_files(tmp_path):
  base = tmp_path / "s.gguf"
  w = gguf.GGUFWriter(str(base), "llama", split_max_tensors=1)
  arrs = {f"t{i}": np.full((4,), i, np.float32) for i in range(3)}
  for k, v in arrs.items(): w.add_tensor(k, v)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  parts = sorted(str(p) for p in tmp_path.iterdir())
  assert len(parts) == 3 and parts[0].endswith("-00001-of-00003.gguf")
  g = read_gguf(parts[0])
  assert g.parts == parts and g.metadata["general.architecture"] == "llama"
  for k, v in arrs.items(): np.testing.assert_array_equal(g.tensor_bytes(k).numpy(), v.view(np.uint8))
  assert split_paths(parts[1], 3) == parts


def test_missing_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.gguf"): read_gguf(tmp_path / "nope.gguf")


def test_not_gguf(tmp_path):
  p = tmp_path / "x.gguf"
  p.write_bytes(b"PK\x03\x04" + b"\0" * 100)
  with pytest.raises(GGUFError, match=r"not a GGUF file: magic is b'PK\\x03\\x04'.*offset 0"): read_gguf(p)
  p.write_bytes(b"GG")
  with pytest.raises(GGUFError, match="smaller than a GGUF header"): read_gguf(p)


def test_bad_version(tmp_path):
  p = tmp_path / "m.gguf"
  write_all_types(p)
  raw = bytearray(p.read_bytes())
  raw[4:8] = struct.pack("<I", 7)
  p.write_bytes(raw)
  with pytest.raises(GGUFError, match="unsupported GGUF version 7"): read_gguf(p)
  raw[4:8] = struct.pack("<I", 1)
  p.write_bytes(raw)
  with pytest.raises(GGUFError, match="version 1 is not supported"): read_gguf(p)


@pytest.mark.parametrize("cut", [30, 100, 300, -40])
def test_truncated(tmp_path, cut):
  p = tmp_path / "m.gguf"
  write_all_types(p)
  raw = p.read_bytes()
  p.write_bytes(raw[:cut] if cut > 0 else raw[:len(raw) + cut])
  with pytest.raises(GGUFError, match=r"truncated.*offset \d+"): read_gguf(p)


def test_corrupt_counts_and_types(tmp_path):
  p = tmp_path / "m.gguf"
  write_all_types(p)
  raw = bytearray(p.read_bytes())
  bad = bytearray(raw)
  bad[8:16] = struct.pack("<Q", 10 ** 15)  # tensor count
  p.write_bytes(bad)
  with pytest.raises(GGUFError, match="tensors can't fit"): read_gguf(p)
  # the first metadata value type (after the first key) set to 99
  key_len = struct.unpack_from("<Q", raw, 24)[0]
  bad = bytearray(raw)
  bad[32 + key_len:36 + key_len] = struct.pack("<I", 99)
  p.write_bytes(bad)
  with pytest.raises(GGUFError, match=r"unknown value type 99 \(at byte offset \d+\)"): read_gguf(p)
  # a string length far past the end
  bad = bytearray(raw)
  bad[24:32] = struct.pack("<Q", 2 ** 40)
  p.write_bytes(bad)
  with pytest.raises(GGUFError, match="claims 1099511627776 bytes"): read_gguf(p)


def test_unknown_tensor_type(tmp_path):
  p = tmp_path / "m.gguf"
  w = gguf.GGUFWriter(str(p), "llama")
  w.add_tensor("x", np.zeros(4, np.float32))
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  raw = bytearray(p.read_bytes())
  at = raw.index(b"x\x01\x00\x00\x00") + 1 + 4 + 8  # name, n_dims, one dim -> type
  raw[at:at + 4] = struct.pack("<I", 77)
  p.write_bytes(raw)
  with pytest.raises(GGUFError, match="tensor 'x' has unknown ggml type 77"): read_gguf(p)


# ---- hostile files (issue 20): bounded time and memory, a GGUFError naming the file

def run_limited(code: str, timeout: float = 60, mem_gb: int = 2) -> subprocess.CompletedProcess:
  """`code` in a fresh interpreter with at most `mem_gb` of address space: unbounded memory or a hang fails the test instead of the machine."""
  import resource
  def limit() -> None: resource.setrlimit(resource.RLIMIT_AS, (mem_gb << 30, mem_gb << 30))
  try: return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, preexec_fn=limit)
  except subprocess.TimeoutExpired: pytest.fail(f"hung for more than {timeout} s:\n{code}")


def test_split_count_huge_is_refused(tmp_path):
  # a 51-byte file saying it is one of 2^31 parts: the list of part names grew without bound
  p = tmp_path / "m-00001-of-00002.gguf"
  write_gguf(p, {"split.count": Typed(UINT32, 2 ** 31)}, [])
  assert p.stat().st_size == 51
  out = run_limited(f"""
    from tinygrad.llm.gguf import read_gguf, GGUFError
    try: read_gguf({str(p)!r})
    except GGUFError as e: print("GGUFError", e)
  """)
  assert out.returncode == 0 and "GGUFError" in out.stdout and "split.count" in out.stdout and str(p) in out.stdout, out
  # a count that disagrees with the name is refused too (it would look for parts that can't exist)
  write_gguf(p, {"split.count": Typed(UINT16, 3)}, [])
  with pytest.raises(GGUFError, match="split into 3 files"): read_gguf(p)
  write_gguf(p, {"split.count": "two"}, [])
  with pytest.raises(GGUFError, match=f"{p}: metadata split.count is two"): read_gguf(p)


def test_deeply_nested_arrays(tmp_path):
  p = tmp_path / "deep.gguf"
  deep = b"".join(struct.pack("<IQ", ARRAY, 1) for _ in range(5000)) + struct.pack("<IQ", UINT8, 0)
  body = kv_bytes("x", Typed(UINT8, 0))[:-5] + struct.pack("<I", ARRAY) + deep  # key "x", type ARRAY, then the nest
  p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + body)
  with pytest.raises(GGUFError, match=f"{p}: metadata 'x'.*nested more than 32 deep"): read_gguf(p)
  # 30 levels still load
  ok = b"".join(struct.pack("<IQ", ARRAY, 1) for _ in range(29)) + struct.pack("<IQ", UINT8, 1) + b"\7"
  p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv_bytes("x", Typed(UINT8, 0))[:-5] + struct.pack("<I", ARRAY) + ok)
  v = read_gguf(p).metadata["x"]
  for _ in range(29): v = v[0]
  assert v == [7]


def test_array_counts_bounded_by_the_bytes_left(tmp_path):
  # 2^40 empty arrays would each need a 12-byte header: refused before any is read
  p = tmp_path / "many.gguf"
  p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv_bytes("x", Typed(UINT8, 0))[:-5] + struct.pack("<IIQ", ARRAY, ARRAY, 2 ** 40) + b"\0" * 64)
  with pytest.raises(GGUFError, match=f"{p}: .*claims 1099511627776 elements"): read_gguf(p)


def test_file_shrinking_while_parsed(tmp_path, monkeypatch):
  # the header is read with pread, not through a memory map (where a file truncated meanwhile was a SIGBUS): a file shorter
  # than its size said a moment ago reads short, a GGUFError
  from types import SimpleNamespace

  from tinygrad.llm import gguf as gguf_mod
  p = tmp_path / "m.gguf"
  write_all_types(p)
  size = p.stat().st_size
  p.write_bytes(p.read_bytes()[:200])
  monkeypatch.setattr(gguf_mod.os, "fstat", lambda fd: SimpleNamespace(st_size=size))  # the size before it shrank
  with pytest.raises(GGUFError, match=f"{p}: file is truncated: it shrank to 200 bytes while being read"): read_gguf(p)
