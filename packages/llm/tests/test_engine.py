"""The engine's decode loop: steps run ahead of the host, each reading its token from a ring on the device and writing the token
it samples back, and the host reads the ring once per batch. The tokens must be the ones a step-at-a-time loop would pick."""
import numpy as np
import pytest
from llm_synth import SynthConfig, reference_forward, write_model
from tinygrad import Tensor, dtypes
from tinygrad.llm import engine
from tinygrad.llm.engine import LLM, GenerationStats, SamplingParams
from tinygrad.llm.model import Transformer

PROMPT = [3, 17, 5, 60, 2]


@pytest.fixture
def small_ring(monkeypatch):
  monkeypatch.setattr(engine, "RING", 8)  # 20 tokens wrap the ring twice


def model_path(tmp_path, qtype: str) -> tuple[str, SynthConfig, dict]:
  cfg = SynthConfig(context=64)
  path = str(tmp_path / f"llama-{qtype}.gguf")
  return path, cfg, write_model(path, cfg, qtype)


def stepwise(llm: LLM, ids: list[int], n: int, params: SamplingParams) -> list[int]:
  """One token at a time, each read back before the next step (the loop the engine replaced)."""
  llm.cached = []
  logits, _ = llm.prefill(ids)
  out = [llm.sample(logits, params, len(ids))]
  while len(out) < n:
    logits = llm._run_chunk([out[-1]], len(llm.cached))
    llm.cached.append(out[-1])
    out.append(llm.sample(logits, params, len(llm.cached)))
  return out


@pytest.mark.parametrize("qtype", ["F16", "Q8_0"])  # a native embedding table, and one gathered as bytes then dequantized
def test_greedy_decode_matches_reference(tmp_path, small_ring, qtype):
  path, cfg, w = model_path(tmp_path, qtype)
  llm = LLM.load(path)
  stats = GenerationStats()
  got = list(llm.generate(PROMPT, max_new_tokens=20, params=SamplingParams(ignore_eos=True), stats=stats))
  want: list[int] = []
  for _ in range(20): want.append(int(reference_forward(w, cfg, PROMPT + want)[-1].argmax()))
  assert got == want
  assert stats.completion_tokens == 20 and stats.finish_reason == "length"
  assert llm.cached == PROMPT + got[:-1]  # the last token was never fed back


def test_sampled_decode_matches_stepwise(tmp_path, small_ring):
  path, _, _ = model_path(tmp_path, "F32")
  llm = LLM.load(path)
  params = SamplingParams(temperature=0.9, top_k=8, top_p=0.95, seed=11, ignore_eos=True)
  llm.cached = []
  got = list(llm.generate(PROMPT, max_new_tokens=18, params=params))
  assert got == stepwise(llm, PROMPT, 18, params)
  assert len(set(got)) > 3  # really sampled, not one repeated token


def test_temperature_only_decode_is_the_filtered_draw_without_filters(tmp_path, small_ring):
  """Without top-k/top-p the step draws with the Gumbel argmax alone (no threshold searches): the tokens the filtered sampler
  draws with its filters off, from the same (seed, position) keys."""
  path, _, _ = model_path(tmp_path, "F32")
  llm = LLM.load(path)
  V = llm.model.cfg.vocab_size
  params = SamplingParams(temperature=0.8, seed=5, ignore_eos=True)
  assert llm._sampling_mode(params) == "temperature" and llm._sampling_mode(SamplingParams(temperature=0.8, top_k=V)) == "temperature"
  assert llm._sampling_mode(SamplingParams()) == "greedy" and llm._sampling_mode(SamplingParams(temperature=1, top_p=0.5)) == "filtered"
  llm.cached = []
  got = list(llm.generate(PROMPT, max_new_tokens=16, params=params))
  assert got == stepwise(llm, PROMPT, 16, params)
  assert len(set(got)) > 3
  llm.cached = []
  llm._sampling_mode = lambda _params: "filtered"  # type: ignore[method-assign]  # the searching sampler, filters off
  assert list(llm.generate(PROMPT, max_new_tokens=16, params=params)) == got


def test_stop_inside_a_batch_keeps_the_cache_consistent(tmp_path, small_ring):
  path, cfg, w = model_path(tmp_path, "F32")
  llm = LLM.load(path)
  free = list(llm.generate(PROMPT, max_new_tokens=12, params=SamplingParams(ignore_eos=True)))
  stop = free[6]
  first = free.index(stop)
  llm.cached = []
  llm._batch = 8  # the stop token comes from the middle of a batch: the steps after it ran and are dropped
  stats = GenerationStats()
  got = list(llm.generate(PROMPT, max_new_tokens=12, params=SamplingParams(stop_ids={stop}, ignore_eos=True), stats=stats))
  assert got == free[:first] and stats.finish_reason == "stop"
  assert llm.cached == PROMPT + got
  # the next turn reuses the cache; rows the dropped steps wrote past it are overwritten
  follow = PROMPT + got + [9, 4]
  logits, reused = llm.prefill(follow)
  assert reused == len(PROMPT) + len(got)
  ref = reference_forward(w, cfg, follow)[-1]
  np.testing.assert_allclose(logits.numpy()[0], ref, rtol=0, atol=1e-4 * np.abs(ref).max() + 1e-5)


@pytest.mark.parametrize("qtype", ["F32", "F16", "Q4_1", "Q6_K"])
def test_embed_ids_matches_host_rows(tmp_path, qtype):
  cfg = SynthConfig()
  path = str(tmp_path / f"m-{qtype}.gguf")
  write_model(path, cfg, qtype)
  model = Transformer.from_gguf(path)
  ids = [0, 5, cfg.vocab - 1, 17]
  on_device = model.embed_ids(Tensor([ids], dtype=dtypes.int32)).numpy()
  np.testing.assert_array_equal(on_device, model.embed(model.token_rows(ids)).numpy())


@pytest.mark.parametrize("qtype", ["F16", "Q4_1"])
def test_prefill_from_ids_matches_host_rows(tmp_path, qtype):
  """The engine feeds tokens as ids on the device (token_ids: a kernel gathers the rows; reading 512 rows on the host cost an
  H200 prefill 2.6 ms): the logits must be those of the rows read from the file, and a bad id an error before any kernel."""
  cfg = SynthConfig()
  path = str(tmp_path / f"m-{qtype}.gguf")
  write_model(path, cfg, qtype)
  model = Transformer.from_gguf(path)
  ids = [0, 5, cfg.vocab - 1, 17, 17]
  by_rows = model.forward_all(model.token_rows(ids), 0).numpy()
  model = Transformer.from_gguf(path)  # a fresh cache
  np.testing.assert_array_equal(model.forward_all(model.token_ids(ids), 0).numpy(), by_rows)
  for bad in (-1, cfg.vocab):
    with pytest.raises(ValueError, match="out of range"):
      model.token_ids([1, bad])


def test_generation_does_not_import_numpy(tmp_path):
  """The CLI's resident memory stays small partly because numpy is never imported (about 10 MB): loading, prefill and the
  decode loop (reading the ring back included) use none of it."""
  import subprocess
  import sys
  path, _, _ = model_path(tmp_path, "Q8_0")
  code = ("import sys\nfrom tinygrad.llm.engine import LLM, SamplingParams\n"
          f"llm = LLM.load({path!r})\n"
          "out = list(llm.generate([3, 17, 5], max_new_tokens=6, params=SamplingParams(ignore_eos=True)))\n"
          "assert len(out) == 6, out\nprint('numpy' in sys.modules)")
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-2000:]
  assert res.stdout.strip() == "False"
