"""One token's feed-forward block as one hand-written kernel (tinygrad/llm/decode_ffn.py): its partials against numpy on the PYTHON
device (which runs blocks of threads and warp shuffles), which kernels a GPU's decode step schedules with it (NULL:CUDA, compile
only), and whole decode steps on MOCK+NV (slow)."""
import numpy as np
import pytest
from tinygrad import Context, Tensor, dtypes
from tinygrad.llm.decode_ffn import ROWS, applies, decode_ffn_kernel


def reference(h, norm, gate_up, down, eps):
  hidden = gate_up.shape[0] // 2
  x = h.astype(np.float64) * norm / np.sqrt((h.astype(np.float64) ** 2).mean() + eps)
  g, u = gate_up[:hidden].astype(np.float64) @ x, gate_up[hidden:].astype(np.float64) @ x
  return down.astype(np.float64) @ (g / (1 + np.exp(-g)) * u)


@pytest.mark.parametrize("dim,hidden,threads,unroll,early,early_down,rows,kloop", [
  (256, 128, 64, 2, False, True, 64, 0),   # two blocks, two warps: 32 gate/up rows a warp (the first group, then a loop); 4 down steps
  (512, 192, 128, 1, True, False, 64, 0),  # three blocks (hidden not a power of two), a down row per lane a step; first weights early
  (256, 64, 256, 2, False, False, 64, 0),  # one block of 8 warps
  (256, 64, 256, 8, True, True, 64, 0),    # one step of the down product (nothing to peel)
  (256, 96, 128, 2, False, True, 32, 0),   # 32 rows a block: 4 lanes a down row, 8 rows a warp at a time
  (512, 128, 256, 1, True, False, 64, 1),  # the gate/up dims in a loop, a load of each a step (early doesn't apply)
  (512, 128, 128, 2, False, True, 32, 2),  # ... two loads of each a step
])
def test_matches_numpy(dim, hidden, threads, unroll, early, early_down, rows, kloop):
  """(early: PYTHON runs one kernel at a time, so the GRID_WAIT barrier only orders the program)"""
  rng = np.random.default_rng(dim + hidden)
  h = (rng.standard_normal(dim) * 3).astype(np.float32)
  norm = rng.standard_normal(dim).astype(np.float32)
  gate_up = (rng.standard_normal((2 * hidden, dim)) * 0.1).astype(np.float16)
  down = (rng.standard_normal((dim, hidden)) * 0.1).astype(np.float16)
  h[::7] = -h[::7] * 8  # large negative gates too: silu's exp must not overflow
  kernel = decode_ffn_kernel(dim, hidden, 1e-5, threads, unroll, early, early_down, rows, kloop)
  args = [Tensor(a, device="PYTHON") for a in (h.reshape(1, 1, dim), norm, gate_up, down)]
  parts = Tensor.empty(hidden // rows, dim, device="PYTHON").custom_kernel(*args, fxn=kernel)[0]
  assert parts.shape == (hidden // rows, dim)
  want = reference(h, norm, gate_up, down, 1e-5)
  np.testing.assert_allclose(parts.sum(0).numpy(), want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_applies_says_where_a_layout_exists():
  assert applies(2048, 8192) and applies(2048, 8192, 512, 4) and applies(256, 256)
  assert not applies(576, 1536)  # SmolLM2's dim: not a multiple of 256 (32 lanes x 8 halves)
  assert not applies(2048, 8100)  # hidden not a multiple of ROWS
  assert not applies(256, 256, 512)  # more threads than dims
  with pytest.raises(ValueError, match="applies"): decode_ffn_kernel(576, 1536, 1e-5)


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
  from llm_synth import SynthConfig, write_model
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=2), "F16")
  on, off = _kernels(path, 1), _kernels(path, 0)
  assert on.count("decode_ffn") == 2 and "decode_ffn" not in off
  assert len(on) <= len(off)
  write_model(q := str(tmp_path / "q.gguf"), SynthConfig(n_layers=2), "Q8_0")  # quantized weights: the Tensor-op form
  assert "decode_ffn" not in _kernels(q, 1)


def test_early_weights_load_before_the_grid_wait():
  """DECODE_FFN_EARLY on Hopper: the first gate/up weights (data3) load before griddepcontrol.wait, h (data1) after it."""
  from tinygrad import Device
  from tinygrad.codegen.program import get_program
  with Context(DEV="NULL:CUDA:sm_90"):
    args = [Tensor.empty(1, 1, 256), Tensor.empty(256), Tensor.empty(512, 256, dtype=dtypes.half), Tensor.empty(256, 256, dtype=dtypes.half)]
    for early in (False, True):
      out = Tensor.empty(256 // ROWS, 256).custom_kernel(*args, fxn=decode_ffn_kernel(256, 256, 1e-5, early=early))[0]
      src = get_program(out.schedule()[-1].ast, Device.renderer(Device.DEFAULT)).src
      body = src[src.index("__global__"):]
      assert body.count("griddepcontrol.wait") == 1
      assert (body.index("(data3+") < body.index("griddepcontrol.wait") < body.index("(data1+")) is early


@pytest.mark.slow
def test_decode_steps_on_a_mock_gpu_match_the_reference(tmp_path):
  """(about a minute) Decode steps on MOCK+NV (the CUDA renderer, kernels run by the PYTHON interpreter) with the FFN kernel."""
  from llm_synth import SynthConfig, reference_forward, write_model
  from tinygrad.llm.model import Transformer
  pytest.importorskip("tinygrad_backend_nv")
  tokens, cfg = [3, 17, 5, 60, 2, 9], SynthConfig(n_layers=1)
  path = str(tmp_path / "m.gguf")
  ref = reference_forward(write_model(path, cfg, "F16"), cfg, tokens)
  with Context(DEV="MOCK+NV", DECODE_FFN=1):
    m = Transformer.from_gguf(path)
    m.forward(m.token_ids(tokens[:3]), 0).realize()  # a prefill chunk: the Tensor-op form
    for i in range(3, len(tokens)):
      got = m.forward(m.token_ids(tokens[i:i + 1]), i).numpy()[0]
      np.testing.assert_allclose(got, ref[i], rtol=0, atol=1e-4 * np.abs(ref[i]).max())
