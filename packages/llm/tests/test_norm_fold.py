"""The RMSNorm weights folded into the float16 products after them (model.fold_norm), on GPU-style devices only, and the GPU
decode step with it (and its FFN activation stored as float16) against the float64 reference."""
import numpy as np
import pytest
from tinygrad import Context, Tensor
from tinygrad.llm.model import QuantWeight, fold_norm


def _f16(rows: int, cols: int, seed: int) -> tuple[np.ndarray, QuantWeight]:
  w = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float16)
  return w, QuantWeight(Tensor(w.reshape(-1)).realize(), "F16", (rows, cols))


def test_fold_norm_scales_each_column_in_place():
  norm = np.random.default_rng(0).uniform(0.5, 2.0, 32).astype(np.float32)
  (a, wa), (b, wb) = _f16(8, 32, 1), _f16(16, 32, 2)
  raw_before = wa.raw
  assert fold_norm(Tensor(norm), wa, None, wb)  # a missing part (None) is skipped
  assert wa.raw is raw_before  # the same buffer: no second copy of the weights
  for w, q in ((a, wa), (b, wb)):
    np.testing.assert_array_equal(q.raw.numpy().reshape(w.shape), (w.astype(np.float32) * norm).astype(np.float16))


def test_fold_norm_changes_nothing_unless_every_matrix_is_float16():
  norm = Tensor(np.full(32, 2.0, np.float32))
  w, wf = _f16(8, 32, 3)
  q8 = QuantWeight(Tensor(np.zeros(8 * 34, np.uint8)).realize(), "Q8_0", (8, 32))
  assert not fold_norm(norm, wf, q8)  # a quantized part would need requantizing
  assert not fold_norm(Tensor(np.ones(16, np.float32)), wf)  # a norm of another width
  assert not fold_norm(norm)
  np.testing.assert_array_equal(wf.raw.numpy().reshape(w.shape), w)


def _model(tmp_path, quant: str, dev: str, **settings):
  from llm_synth import SynthConfig, write_model
  from tinygrad.llm.model import Transformer
  path = str(tmp_path / f"{quant}.gguf")
  write_model(path, SynthConfig(n_layers=2), quant)
  with Context(DEV=dev, **settings): return Transformer.from_gguf(path)


@pytest.mark.parametrize("dev,quant,folded", [("NULL:CUDA:sm_90", "F16", True), ("CPU", "F16", False), ("NULL:CUDA:sm_90", "Q8_0", False)])
def test_blocks_fold_on_gpus_with_float16_weights(tmp_path, dev, quant, folded):
  """A GPU-style device folds (its products read x alone); a CPU keeps x * norm (its matmuls store x once anyway); quantized
  products keep their norms; NORM_FOLD=0 turns it off."""
  m = _model(tmp_path, quant, dev)
  assert all(b.attn_norm_folded == b.ffn_norm_folded == folded for b in m.layers)
  assert not any(b.attn_norm_folded for b in _model(tmp_path, quant, dev, NORM_FOLD=0).layers)


@pytest.mark.slow
def test_gpu_decode_steps_with_folded_norms_match_the_reference(tmp_path):
  """(about a minute) Decode steps on MOCK+NV (the CUDA renderer, kernels run by the PYTHON interpreter) with the defaults: the
  norms folded into the float16 q/k/v and gate/up matrices, silu(gate) * up stored as float16. Both round to float16 what the
  float32 path keeps (as prefill's tensor-core matmuls round their inputs), hence a tolerance of 2e-3 of the largest logit."""
  from llm_synth import SynthConfig, reference_forward, write_model
  from tinygrad.llm.model import Transformer
  pytest.importorskip("tinygrad_backend_nv")
  tokens, cfg = [3, 17, 5, 60, 2, 9], SynthConfig(n_layers=1)
  path = str(tmp_path / "m.gguf")
  ref = reference_forward(write_model(path, cfg, "F16"), cfg, tokens)
  with Context(DEV="MOCK+NV"):
    m = Transformer.from_gguf(path)
    assert m.layers[0].attn_norm_folded and m.layers[0].ffn_norm_folded
    m.forward(m.token_ids(tokens[:3]), 0).realize()
    for i in range(3, len(tokens)):
      got = m.forward(m.token_ids(tokens[i:i + 1]), i).numpy()[0]
      np.testing.assert_allclose(got, ref[i], rtol=0, atol=2e-3 * np.abs(ref[i]).max())
