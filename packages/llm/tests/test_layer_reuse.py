"""The layers replay the first layer's kernels on their own weights (tinygrad/reuse.py): same logits as building every layer's
graph (REUSE=0) and as the numpy reference, eagerly and through the engine's TinyJit captures."""
import numpy as np
import pytest
from llm_synth import SynthConfig, logits_tol, reference_forward, write_model
from tinygrad import Context, reuse
from tinygrad.llm.engine import LLM
from tinygrad.llm.model import Transformer

TOKENS = [3, 17, 5, 60, 2, 9, 33, 8, 1]


def check(ours, ref):
  np.testing.assert_allclose(ours, ref, rtol=0, atol=logits_tol() * np.abs(ref).max() + 1e-5)


@pytest.mark.parametrize("arch,qtype", [("llama", "Q4_1"), ("qwen3", "F16")])
def test_reused_layers_match_built_ones_and_the_reference(tmp_path, arch, qtype):
  cfg = SynthConfig(arch=arch, n_layers=3)
  path = str(tmp_path / f"{arch}-{qtype}.gguf")
  w = write_model(path, cfg, qtype, tie_embeddings=arch == "qwen3")
  ref = reference_forward(w, cfg, TOKENS[:5])
  with Context(REUSE=0): plain = Transformer.from_gguf(path).logits(TOKENS[:5], all_logits=True).numpy()[0]
  model = Transformer.from_gguf(path)
  before = dict(reuse.stats)
  got = model.logits(TOKENS[:5], all_logits=True).numpy()[0]
  assert (reuse.stats["misses"] - before["misses"], reuse.stats["hits"] - before["hits"]) == (1, cfg.n_layers - 1)
  np.testing.assert_array_equal(got, plain)  # the same kernels on the same data
  check(got, ref)


def test_engine_prefill_and_decode_with_reused_layers(tmp_path):
  cfg = SynthConfig(n_layers=3)
  path = str(tmp_path / "llama-F32.gguf")
  w = write_model(path, cfg, "F32")
  ref = reference_forward(w, cfg, TOKENS)
  llm = LLM.load(path, prefill_chunk=4)
  before = dict(reuse.stats)
  check(llm.prefill(TOKENS[:6])[0].numpy()[0], ref[5])  # a chunk of 4 and a padded chunk of 2: one capture
  for i in range(6, len(TOKENS)):  # one-token decode: a second capture, replayed
    check(llm._run_chunk([TOKENS[i]], i).numpy()[0], ref[i])
    llm.cached.append(TOKENS[i])
  # a capture records the first layer and replays it for the other two: prefill and decode, once each
  assert (reuse.stats["misses"] - before["misses"], reuse.stats["hits"] - before["hits"]) == (2, 2 * (cfg.n_layers - 1))


def test_moe_layers_are_not_reused(tmp_path):
  cfg = SynthConfig(arch="qwen3moe", n_layers=2, n_experts=4, n_experts_used=2)
  path = str(tmp_path / "moe.gguf")
  w = write_model(path, cfg, "F32")
  model = Transformer.from_gguf(path)
  before = dict(reuse.stats)
  check(model.logits(TOKENS[:4], all_logits=True).numpy()[0], reference_forward(w, cfg, TOKENS[:4]))
  assert reuse.stats == before  # the router reads its choice back: every layer's graph is built
