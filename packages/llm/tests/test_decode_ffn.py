"""One token's feed-forward block as one hand-written kernel (tinygrad/llm/decode_ffn.py): its partials against numpy on the PYTHON
device (which runs blocks of threads and warp shuffles), which kernels a GPU's decode step schedules with it (NULL:CUDA, compile
only), and whole decode steps on MOCK+NV (slow)."""
import dataclasses

import numpy as np
import pytest
from tinygrad import Context, Tensor, dtypes
from tinygrad.llm.decode_ffn import ROWS, applies, decode_ffn_kernel, down_tiles


def reference(h, norm, gate_up, down, eps):
  hidden = gate_up.shape[0] // 2
  x = h.astype(np.float64) * norm / np.sqrt((h.astype(np.float64) ** 2).mean() + eps)
  g, u = gate_up[:hidden].astype(np.float64) @ x, gate_up[hidden:].astype(np.float64) @ x
  return down.astype(np.float64) @ (g / (1 + np.exp(-g)) * u)


@pytest.mark.parametrize("dim,hidden,threads,tiled", [
  (512, 128, 64, False),    # two blocks of two warps: 32 gate/up rows a warp, 4 down steps
  (1024, 192, 256, True),   # three blocks (hidden not a power of two), the down matrix as tiles
  (512, 64, 512, False),    # one block of 16 warps: 4 rows a warp, one down step
])
def test_matches_numpy(dim, hidden, threads, tiled):
  rng = np.random.default_rng(dim + hidden)
  h = (rng.standard_normal(dim) * 3).astype(np.float32)
  norm = rng.standard_normal(dim).astype(np.float32)
  gate_up = (rng.standard_normal((2 * hidden, dim)) * 0.1).astype(np.float16)
  down = (rng.standard_normal((dim, hidden)) * 0.1).astype(np.float16)
  h[::7] = -h[::7] * 8  # large negative gates too: silu's exp must not overflow
  args = [Tensor(a, device="PYTHON") for a in (h.reshape(1, 1, dim), norm, gate_up, down)]
  if tiled: args[3] = down_tiles(args[3]).contiguous()
  parts = Tensor.empty(hidden // ROWS, dim, device="PYTHON").custom_kernel(*args, fxn=decode_ffn_kernel(dim, hidden, 1e-5, threads))[0]
  want = reference(h, norm, gate_up, down, 1e-5)
  np.testing.assert_allclose(parts.sum(0).numpy(), want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("dim,hidden,threads,tiled", [(512, 128, 64, True), (1024, 192, 256, False)])
def test_accumulates_into_the_next_residual(dim, hidden, threads, tiled):
  """accumulate: the kernel adds h and every block's partials into a zeroed (1, 1, dim) buffer by atomic adds: the residual
  stream after the block, with no kernel that sums partials."""
  rng = np.random.default_rng(dim - hidden)
  h = (rng.standard_normal(dim) * 3).astype(np.float32)
  norm = rng.standard_normal(dim).astype(np.float32)
  gate_up = (rng.standard_normal((2 * hidden, dim)) * 0.1).astype(np.float16)
  down = (rng.standard_normal((dim, hidden)) * 0.1).astype(np.float16)
  args = [Tensor(a, device="PYTHON") for a in (h.reshape(1, 1, dim), norm, gate_up, down)]
  if tiled: args[3] = down_tiles(args[3]).contiguous()
  kernel = decode_ffn_kernel(dim, hidden, 1e-5, threads, accumulate=True)
  out = Tensor.zeros(1, 1, dim, device="PYTHON").contiguous().custom_kernel(*args, fxn=kernel)[0]
  want = h + reference(h, norm, gate_up, down, 1e-5)
  np.testing.assert_allclose(out.numpy().reshape(-1), want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_applies_says_where_a_layout_exists():
  assert applies(2048, 8192) and applies(512, 64, 512) and not applies(512, 64)  # 1,024 threads need dim 1,024 or more
  assert not applies(576, 1536, 64)  # SmolLM2's dim: not a multiple of 512 (two steps of 32 lanes x 8 halves)
  assert not applies(2048, 8100)  # hidden not a multiple of ROWS
  with pytest.raises(ValueError, match="applies"): decode_ffn_kernel(576, 1536, 1e-5)


def _wide():
  from llm_synth import SynthConfig
  return SynthConfig(n_layers=2, dim=1024, ff_dim=128, n_heads=16, n_kv_heads=4)  # a model dim the kernel's 1,024 threads fit


WIDE = _wide()


def _kernels(path: str, setting: int) -> list[str]:
  from tinygrad.engine import realize
  from tinygrad.llm.model import Transformer
  with Context(DEV="NULL:CUDA:sm_90", DECODE_FFN=setting):
    m = Transformer.from_gguf(path, cache_dtype=dtypes.float16)
    realize.capturing.append(cap := realize.Capture(jit=False))
    try: m.forward(m.token_ids([5]), 3).realize()
    finally: realize.capturing.pop()
  return [ei.runner.spec.name.rsplit("_", 1)[0] for ei, _ in cap.items if ei.runner is not None]


def test_gpu_decode_step_runs_one_ffn_kernel_a_layer(tmp_path):
  """A GPU's one-token step with float16 weights: the FFN kernel and the sum of its partials (with the residual) a layer, where
  DECODE_FFN=0 has the gate/up and the down products; the FFN's input is the stream as the o product stores it (no copy)."""
  from llm_synth import write_model
  path = str(tmp_path / "m.gguf")
  write_model(path, WIDE, "F16")
  on, off = _kernels(path, 1), _kernels(path, 0)
  assert on.count("decode_ffn") == 2 and "decode_ffn" not in off
  assert len(on) <= len(off)
  write_model(q := str(tmp_path / "q.gguf"), WIDE, "Q8_0")  # quantized weights: the Tensor-op form
  assert "decode_ffn" not in _kernels(q, 1)


def test_gpu_decode_step_runs_three_kernels_a_layer_where_both_halves_add(tmp_path):
  """DECODE_FFN=2 with DECODE_ATTN_O: the attention kernel adds its projection into the stream and zeroes the next one, the FFN
  kernel adds h and its partials into that: q/k/v, attention, FFN a layer, no kernel summing partials. Without the attention's
  kernel (DECODE_ATTN_O=0) DECODE_FFN=2 is DECODE_FFN=1's form."""
  from llm_synth import write_model
  path = str(tmp_path / "m.gguf")
  write_model(path, WIDE, "F16")
  with Context(DECODE_ATTN_O=4): both = _kernels(path, 2)
  layer = both[both.index("decode_attention_o") - 1:both.index("decode_attention_o") + 2]
  assert layer == ["r_1536_1024", "decode_attention_o", "decode_ffn_add"] and both.count("decode_ffn_add") == 2
  assert _kernels(path, 2) == _kernels(path, 1)


@pytest.mark.slow
@pytest.mark.parametrize("setting,o_parts", [(1, 0), (2, 4)])
def test_decode_steps_on_a_mock_gpu_match_the_reference(tmp_path, setting, o_parts):
  """(about three minutes) Decode steps on MOCK+NV (the CUDA renderer, kernels run by the PYTHON interpreter) with the FFN kernel
  (2, o_parts 4: both halves of the layer adding into the stream)."""
  from llm_synth import reference_forward, write_model
  from tinygrad.llm.model import Transformer
  pytest.importorskip("tinygrad_backend_nv")
  tokens, cfg = [3, 17, 5, 60, 2, 9], dataclasses.replace(WIDE, n_layers=1)
  path = str(tmp_path / "m.gguf")
  ref = reference_forward(write_model(path, cfg, "F16"), cfg, tokens)
  with Context(DEV="MOCK+NV", DECODE_FFN=setting, DECODE_ATTN_O=o_parts):
    m = Transformer.from_gguf(path)
    m.forward(m.token_ids(tokens[:3]), 0).realize()  # a prefill chunk: the Tensor-op form
    for i in range(3, len(tokens)):
      got = m.forward(m.token_ids(tokens[i:i + 1]), i).numpy()[0]
      np.testing.assert_allclose(got, ref[i], rtol=0, atol=1e-4 * np.abs(ref[i]).max())
