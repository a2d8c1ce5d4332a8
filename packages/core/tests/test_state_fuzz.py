"""Seeded, bounded fuzzing of the safetensors and torch loaders: random byte damage (flips, truncations, inserted and
deleted bytes) and hostile contents (huge counts and shapes, deep nesting, wrong dtypes, offsets and strides, globals the
loader must refuse). Every case must load or raise the loader's error naming the file; a crash, hang or any other error
fails the test. Each case runs in a worker process with a timeout and a memory limit (fuzz_harness.py).

The loaders don't depend on the device, so the full run is once per CI run (DEV=CPU:LLVM, or DEV unset); the other
DEVs run every 10th case. FUZZ_CASES=N overrides the number of cases per group, FUZZ_SEED=N the seed (20)."""
from __future__ import annotations

import io
import json
import os
import random
import struct
import zipfile
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest
import torch_files as TF
from conftest import is_null_device
from fuzz_harness import mutate_bytes, run_cases

pytestmark = pytest.mark.skipif(is_null_device(), reason="the NULL device has no data to read back")

FULL = os.environ.get("DEV", "CPU:LLVM") in ("CPU:LLVM", "")


def n_cases(full: int) -> int:
  if "FUZZ_CASES" in os.environ: return int(os.environ["FUZZ_CASES"])
  return full if FULL else max(1, full // 10)


def check(rep, capsys) -> None:
  with capsys.disabled(): print(f"\n{rep.line()}")
  assert not rep.failures, f"{rep.line()}\n" + "\n".join(f"{p}: {r}" for p, r in rep.failures[:20])


# ---- safetensors

def safetensors_file(header: Any, data: bytes, header_len: int | None = None, raw_header: bytes | None = None) -> bytes:
  j = raw_header if raw_header is not None else json.dumps(header).encode()
  return struct.pack("<Q", len(j) if header_len is None else header_len) + j + data


def safetensors_bases() -> list[tuple[dict, bytes]]:
  """(header, data) of a few valid files."""
  out = []
  for dts in ([("F32", (2, 3)), ("I64", (4,)), ("U8", (0,))], [("BF16", (3, 1, 2)), ("BOOL", (5,)), ("F16", ())], [("F64", (1,))]):
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    data = b""
    for i, (dt, shape) in enumerate(dts):
      n = int(np.prod(shape)) * {"F32": 4, "I64": 8, "U8": 1, "BF16": 2, "BOOL": 1, "F16": 2, "F64": 8}[dt]
      header[f"t{i}"] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(data), len(data) + n]}
      data += bytes(random.Random(i).randrange(2) for _ in range(n))
    out.append((header, data))
  return out


HOSTILE_VALUES = [2 ** 63, 2 ** 64 + 1, -1, -(2 ** 63), 10 ** 30, 1.5, float("inf"), True, None, "12", [], {}, [[1]], [1, 2, 3]]


def hostile_safetensors(rng: random.Random, header: dict, data: bytes) -> tuple[str, bytes]:
  h = json.loads(json.dumps(header))
  names = [k for k in h if k != "__metadata__"]
  kind = rng.choice(["dtype", "shape", "offsets", "entry", "metadata", "header_len", "deep", "bigint", "key", "missing"])
  t = h[rng.choice(names)]
  if kind == "dtype": t["dtype"] = rng.choice(["C64", "F32 ", "", "f32", 5, None, ["F32"], "U64", "BOOL", "F8_E4M3", "I8"])
  elif kind == "shape":
    t["shape"] = rng.choice([[2 ** 40], [2 ** 31, 2 ** 31], [-1], [1.5], [True], "abc", [[2]], [2] * 200, [0, 2 ** 62], list(range(1, 30)),
                             [rng.choice(HOSTILE_VALUES)]])
  elif kind == "offsets":
    t["data_offsets"] = rng.choice([[0, 2 ** 64], [-8, 0], [8, 0], [0], [0, 1, 2], [0.0, 8.0], ["0", "8"], None, [len(data), len(data) + 8],
                                    [rng.choice(HOSTILE_VALUES), rng.choice(HOSTILE_VALUES)]])
  elif kind == "entry": h[rng.choice(names)] = rng.choice([[1, 2], 5, "x", None, {"dtype": "F32"}, {"shape": [1], "data_offsets": [0, 4]}])
  elif kind == "metadata": h["__metadata__"] = rng.choice([5, [1], None, {"a": {"b": [1] * 1000}}, "x" * 10000])
  elif kind == "header_len":
    return kind, safetensors_file(h, data, header_len=rng.choice([0, 1, 7, 2 ** 63, 2 ** 64 - 1, len(json.dumps(h)) + rng.randint(-20, 20)]))
  elif kind == "deep":
    opener = rng.choice([b"[", b'{"a":', b"[{\"b\":"])
    return kind, safetensors_file(None, data, raw_header=opener * rng.choice([100, 1000, 50_000, 200_000]))
  elif kind == "bigint": return kind, safetensors_file(None, data, raw_header=b'{"a":{"dtype":"F32","shape":[' + b"9" * rng.choice([20, 5000, 100_000]) + b'],"data_offsets":[0,4]}}')
  elif kind == "key": h["k" * rng.choice([1, 10_000]) + "\u2603"] = t
  else: del t[rng.choice(["dtype", "shape", "data_offsets"])]
  return kind, safetensors_file(h, data)


def test_fuzz_safetensors(tmp_path, capsys):
  rng = random.Random(int(os.environ.get("FUZZ_SEED", 20)))
  bases = safetensors_bases()
  paths = []
  for i in range(n_cases(4000)):
    header, data = bases[i % len(bases)]
    if i % 2: kind, raw = mutate_bytes(rng, safetensors_file(header, data), hot=len(json.dumps(header)) + 8)
    else: kind, raw = hostile_safetensors(rng, header, data)
    p = tmp_path / f"case{i:04d}-{kind}.safetensors"
    p.write_bytes(raw)
    paths.append(str(p))
  check(run_cases("safetensors", paths), capsys)


# ---- torch

def torch_bases() -> list[tuple[str, Any]]:
  """(format, object) of a few valid checkpoints: contiguous, transposed, sliced, broadcast and overlapping layouts."""
  a = np.arange(24, dtype=np.float32).reshape(4, 6)
  sa = TF.Storage("0", a)
  obj = OrderedDict(w=TF.tensor("0", a), b=TF.tensor("1", np.arange(6, dtype=np.int64)), t=TF.Rebuild(sa, 0, (6, 4), (1, 6)),
                    s=TF.Rebuild(sa, 2, (3, 2), (6, 1)), e=TF.Rebuild(sa, 0, (3, 4), (0, 1)), o=TF.Rebuild(sa, 0, (4, 4), (1, 1)),
                    h=TF.tensor("2", np.arange(5, dtype=np.float16)), lst=[TF.tensor("3", np.ones((2, 2), np.uint8)), 3, "x"])
  return [("zip", obj), ("legacy", obj), ("zipc", OrderedDict(w=TF.tensor("0", a)))]


def checkpoint(fmt: str, obj: Any, extra: dict[str, bytes] | None = None) -> bytes:
  if fmt == "legacy": return TF.legacy_checkpoint(obj)
  return TF.zip_checkpoint(obj, extra=extra, compress=fmt == "zipc")


def rezip(raw: bytes, pkl: bytes) -> bytes:
  """A zip checkpoint with its data.pkl replaced (valid CRCs: the damage reaches the unpickler)."""
  f = io.BytesIO()
  with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(f, "w") as dst:
    for info in src.infolist(): dst.writestr(info.filename, pkl if info.filename.endswith("data.pkl") else src.read(info))
  return f.getvalue()


def nested(depth: int, shared: bool) -> Any:
  t: Any = 1
  for _ in range(depth): t = (t, t) if shared else [t]
  return t


def hostile_torch(rng: random.Random) -> tuple[str, bytes]:
  st = TF.Storage("0", np.arange(16, dtype=np.float32))
  pick = lambda: rng.choice([2 ** 62, 2 ** 64, -1, 1.5, None, "3", True, nested(40, True), (), 10 ** 100, 0, 1, 3, 16])  # noqa: E731
  kind = rng.choice(["size", "stride", "offset", "storage", "global", "build", "deep", "pid", "missing", "numel", "dtype", "fn", "overlap"])
  obj: Any
  extra: dict[str, bytes] | None = None
  if kind == "size": obj = {"x": TF.Rebuild(st, 0, rng.choice([(pick(),), (4, pick()), tuple([2] * 70), nested(30, True)]), (1,))}
  elif kind == "stride": obj = {"x": TF.Rebuild(st, 0, (4, 4), rng.choice([(pick(), 1), (4, pick()), (1,), nested(30, True)]))}
  elif kind == "offset": obj = {"x": TF.Rebuild(st, pick(), (4,), (1,))}
  elif kind == "overlap": obj = {"x": TF.Rebuild(st, 0, (rng.choice([2, 8, 100, 10 ** 5]), rng.choice([2, 8, 10 ** 5])), (rng.randint(0, 2), rng.randint(0, 2)))}
  elif kind == "storage":
    st2 = TF.Storage(rng.choice(["0", "1", "../x", "a" * 5000]), np.zeros(4, np.float32), stype=rng.choice(["FloatStorage", "NoStorage", "Tensor"]))
    obj = {"x": TF.Rebuild(st2, 0, (4,), (1,))}
  elif kind == "global": obj = {"x": rng.choice([TF.Global("os", "system"), TF.Global("builtins", "eval"), TF.Global("torch", "load"), TF.Global("torch._utils", "x")])}
  elif kind == "build":
    g = rng.choice([b"ctorch._utils\n_rebuild_parameter\n", b"ctorch\nFloatStorage\n", b"ccollections\nOrderedDict\n", b"ctorch\nfloat32\n"])
    state = rng.choice([b"}X\x04\x00\x00\x00evilK\x01s", b"N}X\x05\x00\x00\x00dtypeK\x01s\x86", b"K\x05"])
    return kind, rezip(checkpoint("zip", {"x": TF.tensor("0", np.zeros(2, np.float32))}), b"\x80\x02" + g + state + b"b.")
  elif kind == "deep":  # lists nested d deep, written as opcodes (the pickler itself would recurse): d EMPTY_LISTs, d - 1 APPENDs
    d = rng.choice([1000, 100_000])
    pkl = b"\x80\x02}X\x01\x00\x00\x00x" + b"]" * d + b"a" * (d - 1) + b"s."
    return kind, rezip(checkpoint("zip", {"x": TF.tensor("0", np.zeros(2, np.float32))}), pkl)
  elif kind == "pid":
    class P(TF._Pickler):
      def persistent_id(self, o: Any) -> Any: return rng.choice([nested(50, True), ("storage",), "x", ("storage", None, "0", "cpu", 4), 5]) if o == "P" else None
    f = io.BytesIO()
    P(f, protocol=2).dump({"x": "P"})
    return kind, rezip(checkpoint("zip", {"x": TF.tensor("0", np.zeros(2, np.float32))}), f.getvalue())
  elif kind == "missing":
    raw = checkpoint("zip", {"x": TF.tensor("0", np.zeros(4, np.float32))})
    return kind, rezip(raw, TF.dumps({"x": TF.Rebuild(TF.Storage("9", np.zeros(4, np.float32)), 0, (4,), (1,))}))
  elif kind == "numel":
    raw = checkpoint("zip", {"x": TF.tensor("0", np.zeros(4, np.float32))})
    big = TF.Storage("0", np.zeros(1, np.float32))
    big.arr = np.zeros(1, np.float32)
    return kind, rezip(raw, TF.dumps({"x": TF.Rebuild(big, 0, (rng.choice([2, 2 ** 40]),), (1,))}))
  elif kind == "dtype": obj = {"x": TF.Rebuild(st, 0, (4,), (1,), fn=rng.choice(["_rebuild_tensor_v3", "_rebuild_tensor", "_rebuild_parameter", "nope"]))}
  else: obj = {"x": TF.Global("torch._tensor", "_rebuild_from_type_v2"), "y": TF.Global("torch", "Size")}
  fmt = rng.choice(["zip", "legacy"])
  return kind, checkpoint(fmt, obj, extra)


def mutate_pickle(rng: random.Random, raw: bytes) -> tuple[str, bytes]:
  with zipfile.ZipFile(io.BytesIO(raw)) as z: pkl = z.read("archive/data.pkl")
  kind, bad = mutate_bytes(rng, pkl, hot=len(pkl))
  return f"pkl-{kind}", rezip(raw, bad)


def test_fuzz_torch(tmp_path, capsys):
  rng = random.Random(int(os.environ.get("FUZZ_SEED", 20)))
  bases = [(fmt, checkpoint(fmt, obj)) for fmt, obj in torch_bases()]
  paths = []
  for i in range(n_cases(2000)):
    fmt, raw = bases[i % len(bases)]
    r = i % 3
    if r == 0: kind, raw = hostile_torch(rng)
    elif r == 1 and fmt == "zip": kind, raw = mutate_pickle(rng, raw)
    else: kind, raw = mutate_bytes(rng, raw, hot=len(raw))
    p = tmp_path / f"case{i:04d}-{fmt}-{kind}.pt"
    p.write_bytes(raw)
    paths.append(str(p))
  check(run_cases("torch", paths), capsys)


def test_fuzz_harness_reports_crashes_and_hangs(tmp_path):
  # the harness itself: a worker that dies or hangs is a counted failure, and the cases after it still run in a new worker
  names = ["clean", "crash", "clean", "hang", "keyerror", "unnamed", "ok"]
  for n in names: (tmp_path / n).write_bytes(b"")
  rep = run_cases("selftest", [str(tmp_path / n) for n in names], timeout=5)
  assert rep.counts == {"clean error": 2, "crash": 1, "hang": 1, "unnamed error": 2, "loaded": 1}, rep.line()
  assert [r["kind"] for _, r in rep.results] == ["clean error", "crash", "clean error", "hang", "unnamed error", "unnamed error", "loaded"]
