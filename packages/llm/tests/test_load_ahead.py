"""LLM.load(ahead=...): the first prompt's kernels built in the compile pool while the weights load (engine/ahead.py). The
prompt then lowers nothing in this process, and its logits, token and first decode step are the plain path's bit for bit; a
file the load rejects raises the same error with it."""
import numpy as np
import pytest
from llm_synth import SynthConfig, write_model
from tinygrad import Device
from tinygrad.engine import ahead, realize
from tinygrad.helpers import Context
from tinygrad.llm.engine import LLM, guessed_prompt_sizes
from tinygrad.llm.model import UnsupportedModel

PROMPT = [3, 17, 5, 60, 2, 9, 41]


def first_prompt(llm: LLM) -> tuple[np.ndarray, int, list[int]]:
  """The prompt's logits, its greedy token, and the ring after the first decode step (the token that step sampled)."""
  logits, _ = llm.prefill(PROMPT)
  tok = int(llm._greedy(logits).item())
  llm._step_for(llm.model.attn_len(len(PROMPT) + 1), "greedy")(llm._v_start.bind(len(PROMPT)), [])
  return logits.numpy(), tok, llm._ring.tolist()


@pytest.mark.parametrize("qtype", ["F16", "Q8_0"])
def test_ahead_matches_the_plain_path(tmp_path, monkeypatch, qtype):
  if Device.DEFAULT in ("NULL", "DISK"): pytest.skip("needs a device that runs kernels")
  path = str(tmp_path / f"m-{qtype}.gguf")
  write_model(path, SynthConfig(context=64), qtype)
  with Context(PARALLEL_COMPILE=2):
    with Context(AHEAD_GUESS=""): want = first_prompt(LLM.load(path))  # nothing built ahead
    realize._runner_cache.clear()  # every kernel new again: built ahead, or lowered here
    before = ahead.stats["submitted"]
    llm = LLM.load(path, ahead=len(PROMPT))
    assert ahead.stats["submitted"] > before
    lower_here = realize._program
    def refuse(*args): raise AssertionError("the first prompt lowered a kernel here: it should have been built ahead")
    monkeypatch.setattr(realize, "_program", refuse)
    got = first_prompt(llm)
    monkeypatch.setattr(realize, "_program", lower_here)
  np.testing.assert_array_equal(got[0], want[0])
  assert got[1:] == want[1:]


def test_ahead_by_messages_and_off(tmp_path):
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(context=64), "F32")
  with Context(PARALLEL_COMPILE=2):
    before = ahead.stats["submitted"]
    LLM.load(path, ahead=[{"role": "user", "content": "hi"}])
    assert ahead.stats["submitted"] > before
    mid = ahead.stats["submitted"]
    with Context(AHEAD=0): LLM.load(path, ahead=40)  # another chunk size (new kernels), but AHEAD=0 builds none
    assert ahead.stats["submitted"] == mid
  with Context(PARALLEL_COMPILE=0): LLM.load(path, ahead=40)  # no pool: nothing to build in
  assert ahead.stats["submitted"] == mid


def test_ahead_keeps_load_errors(tmp_path):
  path = str(tmp_path / "bad.gguf")
  write_model(path, SynthConfig(context=64), "F32")
  data = bytearray(open(path, "rb").read())
  key = b"llama.block_count"
  at = data.index(key) + len(key) + 4  # the value's type (uint32), then the value
  data[at:at + 4] = (1 << 15).to_bytes(4, "little")
  open(path, "wb").write(bytes(data))
  with Context(PARALLEL_COMPILE=2):
    with pytest.raises(UnsupportedModel, match="block_count") as plain: LLM.load(path)
    with pytest.raises(UnsupportedModel, match="block_count") as with_ahead: LLM.load(path, ahead=5)
  assert str(plain.value) == str(with_ahead.value)


def first_prompt_sampled(llm: LLM) -> tuple[int, list[int]]:
  """The prompt's first token and the next, sampled with a temperature (the server's default) and a seed, as LLM.generate does."""
  from tinygrad.llm.engine import SamplingParams
  params = SamplingParams(temperature=0.7, seed=3)
  llm.cached = []
  logits, _ = llm.prefill(PROMPT)
  tok = llm.sample(logits, params, len(PROMPT))
  return tok, llm._decode_batch(tok, len(PROMPT), 1, params)


def test_load_without_a_prompt_builds_typical_ones(tmp_path, monkeypatch):
  """Not told the first prompt (a server, a script), LLM.load on a GPU builds the kernels of AHEAD_GUESS's prompt lengths,
  sampled greedily and with a temperature: a prompt of 1-32 tokens then uses the 32-token guess's chunk and span, and lowers
  nothing here either way."""
  if Device.DEFAULT in ("NULL", "DISK"): pytest.skip("needs a device that runs kernels")
  from tinygrad.llm import engine
  monkeypatch.setattr(engine, "fuses_cheaply", lambda device: True)  # guesses (and a GPU's prompt chunks) on any device
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(context=64), "F16")
  with Context(PARALLEL_COMPILE=2):
    with Context(AHEAD_GUESS=""):
      plain = LLM.load(path)
      want, want_sampled = first_prompt(plain), first_prompt_sampled(plain)
    realize._runner_cache.clear()
    before = ahead.stats["submitted"]
    with Context(AHEAD_GUESS="32"): llm = LLM.load(path)
    assert ahead.stats["submitted"] > before
    lower_here = realize._program
    def refuse(*args): raise AssertionError("a guessed prompt length lowered a kernel here: it should have been built ahead")
    monkeypatch.setattr(realize, "_program", refuse)
    got, got_sampled = first_prompt(llm), first_prompt_sampled(llm)
    monkeypatch.setattr(realize, "_program", lower_here)
  np.testing.assert_array_equal(got[0], want[0])
  assert got[1:] == want[1:] and got_sampled == want_sampled


def test_guessed_prompt_sizes(monkeypatch):
  from tinygrad.llm import engine
  assert guessed_prompt_sizes("CPU") == []  # a CPU compiles less than it loads: no guesses
  monkeypatch.setattr(engine, "fuses_cheaply", lambda device: True)  # a GPU
  assert guessed_prompt_sizes("CUDA") == [64, 128, 32]
  with Context(AHEAD_GUESS="16, 256"): assert guessed_prompt_sizes("CUDA") == [16, 256]
  with Context(AHEAD_GUESS=""): assert guessed_prompt_sizes("CUDA") == []
  with Context(AHEAD_GUESS="64,lots"), pytest.raises(ValueError, match="AHEAD_GUESS='64,lots'.*integers"): guessed_prompt_sizes("CUDA")
