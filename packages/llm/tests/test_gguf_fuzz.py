"""Seeded, bounded fuzzing of the GGUF loader (LLM.load: read_gguf, the tokenizer, Transformer.from_gguf): random byte
damage to the header, metadata and tensor infos, and hostile contents (huge counts, deep nesting, NaN/negative/zero
settings, wrong value types, tensor infos with huge or misaligned offsets, wrong shapes and types). Every case must load
or raise the loader's error (GGUFError, which UnsupportedModel is, or UnsupportedQuantization) naming the file; a crash,
hang or any other error fails. Each case runs in a worker process with a timeout and a memory limit (core's
tests/fuzz_harness.py). FUZZ_CASES=N sets the number of cases, FUZZ_SEED=N the seed (20)."""
from __future__ import annotations

import os
import random
import struct
import sys

import pytest
from gguf_raw import Typed, kv_bytes, model_parts, write_gguf
from llm_synth import SynthConfig, write_model
from tinygrad.llm.gguf import ARRAY, FLOAT32, INT32, STRING, UINT8, UINT32, UINT64, read_gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "tests"))
from fuzz_harness import mutate_bytes, run_cases  # noqa: E402

pytest.importorskip("gguf")

HOSTILE = [0, -1, 1, 3, 2 ** 31, 2 ** 63 - 1, -(2 ** 63), float("nan"), float("inf"), -1e-5, 0.0, 1e300, "x", True, [], [1, 2],
           Typed(UINT32, 2 ** 32 - 1), Typed(INT32, -(2 ** 31)), Typed(FLOAT32, float("nan")), Typed(UINT8, 255)]


def deep_array(depth: int) -> bytes:
  return b"".join(struct.pack("<IQ", ARRAY, 1) for _ in range(depth)) + struct.pack("<IQ", UINT8, 0)


def hostile_model(rng: random.Random, meta: dict, tensors: list, path: str) -> str:
  meta, tensors = dict(meta), list(tensors)
  kind = rng.choice(["metadata", "metadata", "tokenizer", "tensor_shape", "tensor_type", "drop", "duplicate", "offset", "counts", "split", "deep", "alignment"])
  if kind == "metadata":
    for _ in range(rng.randint(1, 3)): meta[rng.choice([k for k in meta if not k.startswith("tokenizer.ggml.t")])] = rng.choice(HOSTILE)
  elif kind == "tokenizer":
    key = rng.choice([k for k in meta if k.startswith("tokenizer")] + ["tokenizer.ggml.add_bos_token", "tokenizer.ggml.eot_token_id", "tokenizer.chat_template"])
    meta[key] = rng.choice([*HOSTILE, ["a", "b"], [1] * 64, ["x"] * 64, "<0xZZ>", "llama", "gpt2", None])
    if meta[key] is None: del meta[key]
  elif kind == "tensor_shape":
    i = rng.randrange(len(tensors))
    n, s, ty, raw = tensors[i]
    shape = rng.choice([(), (0,), (2 ** 40,), (s[-1],), tuple(reversed(s)), (*s, 1), (1, *s), (2 ** 31, 2 ** 31, 2 ** 31, 2 ** 31)])
    tensors[i] = (n, shape, ty, raw)
  elif kind == "tensor_type":
    i = rng.randrange(len(tensors))
    n, s, ty, raw = tensors[i]
    tensors[i] = (n, s, rng.choice([0, 1, 2, 8, 12, 14, 30, 4, 99, 2 ** 31]), raw)
  elif kind == "drop": del tensors[rng.randrange(len(tensors))]
  elif kind == "duplicate": tensors.append(tensors[rng.randrange(len(tensors))])
  elif kind == "split": meta["split.count"] = rng.choice([2, 2 ** 31, Typed(UINT32, 2 ** 32 - 1), 0, -1, "2", Typed(UINT64, 2 ** 64 - 1)])
  elif kind == "alignment": meta["general.alignment"] = rng.choice([0, 3, 2 ** 40, -32, Typed(UINT32, 1), Typed(UINT32, 2 ** 31), "32"])
  write_gguf(path, meta, tensors)
  raw = bytearray(open(path, "rb").read())
  if kind == "offset":  # one tensor info's data offset, found after its name
    n = tensors[rng.randrange(len(tensors))][0].encode()
    at = raw.index(struct.pack("<Q", len(n)) + n) + 8 + len(n)
    n_dims = struct.unpack_from("<I", raw, at)[0]
    at += 4 + 8 * n_dims + 4
    raw[at:at + 8] = struct.pack("<Q", rng.choice([1, 31, 2 ** 63, 2 ** 64 - 32, len(raw), 32 * rng.randrange(1 << 20)]))
  elif kind == "counts":  # the tensor or metadata count of the header
    at = rng.choice([8, 16])
    raw[at:at + 8] = struct.pack("<Q", rng.choice([2 ** 31, 2 ** 63, 2 ** 64 - 1, struct.unpack_from("<Q", raw, at)[0] + rng.randint(-2, 2)]))
  elif kind == "deep":  # an extra metadata entry of nested arrays, the kv count bumped
    extra = kv_bytes("fuzz.deep", Typed(UINT8, 0))[:-5] + struct.pack("<I", ARRAY) + deep_array(rng.choice([31, 32, 33, 5000, 100_000]))
    start = 24
    raw[16:24] = struct.pack("<Q", struct.unpack_from("<Q", raw, 16)[0] + 1)
    raw[start:start] = extra
    if rng.random() < 0.5: raw[start + len(extra) - 12:start + len(extra) - 4] = struct.pack("<Q", rng.choice([2 ** 40, STRING]))
  with open(path, "wb") as f: f.write(raw)
  return kind


def test_fuzz_gguf(tmp_path, capsys):
  rng = random.Random(int(os.environ.get("FUZZ_SEED", 20)))
  bases = []
  for arch, qtype in (("llama", "F32"), ("qwen2", "Q8_0"), ("qwen3moe", "Q8_0")):
    src = str(tmp_path / f"base-{arch}-{qtype}.gguf")
    moe = arch == "qwen3moe"
    write_model(src, SynthConfig(arch=arch, dim=64, ff_dim=64, head_dim=16, n_experts=4 if moe else 0, n_experts_used=2 if moe else 0), qtype)
    g = read_gguf(src)
    header_end = min(t.offset for t in g.tensors.values())
    bases.append((src, open(src, "rb").read(), header_end, *model_parts(src)))
  paths = []
  for i in range(int(os.environ.get("FUZZ_CASES", 1500))):
    src, raw, header_end, meta, tensors = bases[i % len(bases)]
    p = str(tmp_path / f"case{i:04d}.gguf")
    if i % 2:
      kind, bad = mutate_bytes(rng, raw, hot=header_end)
      with open(p, "wb") as f: f.write(bad)
    else: kind = hostile_model(rng, meta, tensors, p)
    os.rename(p, p := p.replace(".gguf", f"-{kind}.gguf"))
    paths.append(p)
  paths = [str(tmp_path / os.path.basename(bases[0][0]))] + paths  # the valid bases load
  rep = run_cases("gguf", paths)
  with capsys.disabled(): print(f"\n{rep.line()}")
  assert not rep.failures, f"{rep.line()}\n" + "\n".join(f"{p}: {r}" for p, r in rep.failures[:20])
  assert rep.results[0][1]["kind"] == "loaded", rep.results[0]
