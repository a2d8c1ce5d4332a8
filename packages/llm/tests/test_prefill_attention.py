"""A prefill chunk's attention as one flash-style kernel on tensor cores (tinygrad/llm/prefill_attention.py): its values against
numpy on the PYTHON device with an A100's tensor cores (PYTHON::sm_80 emulates mma.sync and ldmatrix from their lane tables),
which tensor cores it accepts, and that a GPU's prefill schedules it once a layer (NULL:CUDA, compile only). The model's logits
with it are checked in test_model.py (test_prefill_on_tensor_cores); whole prefills on the H200 in bench/README.md."""
import math

import numpy as np
import pytest
from tinygrad import Context, Device, Tensor, dtypes
from tinygrad.llm.prefill_attention import KB, fits, pick_tensor_core, prefill_attention_kernel, split_work


@pytest.fixture(autouse=True)
def a100_tensor_cores():
  with Context(DEV="PYTHON::sm_80"): yield


def rope(q: np.ndarray, cos: np.ndarray, sin: np.ndarray, neox: bool) -> np.ndarray:
  """q (T, H, D) rotated by each row's angles (cos, sin: (T, D/2))."""
  T, H, D = q.shape
  c, s = cos[:, None, :], sin[:, None, :]
  if neox:
    a, b = q[..., :D // 2], q[..., D // 2:]
    return np.concatenate([a * c - b * s, b * c + a * s], -1)
  a, b = q[..., 0::2], q[..., 1::2]
  return np.stack([a * c - b * s, b * c + a * s], -1).reshape(T, H, D)


def reference(q_rows, cache, cos, sin, first, n_heads, n_kv_heads, head_dim, attn_len, neox):
  T = q_rows.shape[0]
  q = rope(q_rows[:, :n_heads * head_dim].reshape(T, n_heads, head_dim).astype(np.float64), cos, sin, neox)
  seen = np.arange(attn_len)[None, :] <= first + np.arange(T)[:, None]  # causal
  out = np.zeros((T, n_heads, head_dim))
  for h in range(n_heads):
    kv = h // (n_heads // n_kv_heads)
    s = np.where(seen, q[:, h] @ cache[0, kv, :attn_len].astype(np.float64).T / math.sqrt(head_dim), -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    out[:, h] = (p / p.sum(-1, keepdims=True)) @ cache[1, kv, :attn_len].astype(np.float64)
  return out.reshape(T, -1)


def run(n_heads, n_kv_heads, rows, attn_len, first, neox, seed=0):
  head_dim, rng = 64, np.random.default_rng(seed)
  width = (n_heads + 2 * n_kv_heads) * head_dim  # q, then k and v (unused): the layer's stacked q/k/v rows
  q_rows = rng.standard_normal((rows, width)).astype(np.float32)
  cache = (rng.standard_normal((2, n_kv_heads, attn_len + 64, head_dim))).astype(np.float16)
  ang = rng.uniform(0, 2 * math.pi, (rows, head_dim // 2))
  cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
  tc = pick_tensor_core(Device.renderer(Device.DEFAULT).tensor_cores, head_dim, attn_len, rows, n_heads // n_kv_heads, 32)
  assert tc is not None and tc.dims == (16, 8, 16), tc
  kernel = prefill_attention_kernel(tc, n_heads, n_kv_heads, head_dim, rows, attn_len, neox)
  args = [Tensor(a) for a in (q_rows, cache, cos, sin, np.array([first], np.int32))]
  got = Tensor.empty(rows, n_heads * head_dim, dtype=dtypes.float16).custom_kernel(*args, fxn=kernel)[0].numpy()
  return got.astype(np.float64), reference(q_rows, cache, cos, sin, first, n_heads, n_kv_heads, head_dim, attn_len, neox)


@pytest.mark.parametrize("n_heads,n_kv_heads,rows,attn_len,first,neox", [
  (4, 2, 32, 64, 16, False),     # grouped heads, the chunk after 16 cached positions, one block of positions
  (4, 2, 32, 64, 0, True),       # NeoX pairs, the first chunk
  (9, 3, 64, 256, 100, True),    # SmolLM2's grouping (3 warps a head group), two shares, some steps fully masked
  (8, 1, 16, 128, 40, False),    # one kv head for eight query heads (one share), one row tile
  (2, 2, 128, 128, 0, False),    # no grouping, eight row tiles, causal within the chunk
])
def test_matches_numpy(n_heads, n_kv_heads, rows, attn_len, first, neox):
  got, want = run(n_heads, n_kv_heads, rows, attn_len, first, neox)
  # q and the probabilities are rounded to half for the tensor cores (as the Tensor-op form rounds them)
  np.testing.assert_allclose(got, want, rtol=0, atol=4e-3 * np.abs(want).max())


@pytest.mark.parametrize("split,async_copies,ldmatrix", [(22, 0, 1), (14, 0, 1), (11, 0, 0), (12, 1, 1), (41, 1, 0)])
def test_every_split_of_the_work_agrees(split, async_copies, ldmatrix):
  """Heads and shares of a block (PA_SPLIT), keys and values copied through registers or by async copies in two stages
  (PA_ASYNC), their fragments read by ldmatrix or element by element (LDMATRIX=0): the same values, whichever warps did which
  blocks of positions."""
  with Context(PA_SPLIT=split, PA_ASYNC=async_copies, LDMATRIX=ldmatrix):
    got, want = run(4, 1, 32, 256, 90, False, seed=split)
  np.testing.assert_allclose(got, want, rtol=0, atol=4e-3 * np.abs(want).max())


def test_which_tensor_cores_fit():
  tcs = Device.renderer(Device.DEFAULT).tensor_cores
  mma = next(tc for tc in tcs if tc.dims == (16, 8, 16) and tc.dtype_in == dtypes.float16)
  assert fits(mma, 64, 128, 32, 4)
  assert not fits(mma, 64, 100, 32, 4)        # attn_len not a multiple of a block of positions
  assert not fits(mma, 64, 128, 24, 4)        # rows not a multiple of the instruction's 16
  assert not fits(mma, 64, 128, 32, 16)       # more heads a group than warps a block
  # an instruction whose accumulator registers are not its A fragment's (tf32's k8 layout): P can't stay in the lane
  assert all(not fits(tc, 64, 128, 32, 4) for tc in tcs if tc.dtype_in != dtypes.float16)
  assert pick_tensor_core(tcs, 64, 128, 32, 4, 16) is not None and pick_tensor_core(tcs, 64, 128, 32, 4, 8) is None  # 32, 16 blocks
  assert split_work(4, 64) == (4, 1) and split_work(4, 512) == (4, 2) and split_work(3, 128) == (3, 2) and KB == 64


def test_bad_shape_is_an_error():
  mma = pick_tensor_core(Device.renderer(Device.DEFAULT).tensor_cores, 64, 128, 32, 4, 16)
  with pytest.raises(ValueError, match="pick_tensor_core"): prefill_attention_kernel(mma, 4, 1, 64, 32, 100, False)


def test_a_gpu_prefill_runs_one_attention_kernel_a_layer(tmp_path):
  """NULL:CUDA (compile only): a prefill chunk's layer schedules the kernel, and no scores matmul or softmax of its own."""
  from test_model import build
  from tinygrad.engine import realize
  from tinygrad.llm.model import Transformer
  path, cfg, _ = build(tmp_path, "llama", "F16", dim=128, ff_dim=128, n_heads=2, n_kv_heads=1)
  for on in (1, 0):
    with Context(DEV="NULL:CUDA:sm_90", PREFILL_ATTENTION=on, PA_MIN_BLOCKS=1):
      model = Transformer.from_gguf(path, cache_dtype=dtypes.float16)
      realize.capturing.append(seen := realize.Capture())
      try: model.forward_all(model.token_ids(list(range(32))), 0).realize()
      finally: realize.capturing.remove(seen)
    names = [it.runner.spec.name for it, _ in seen.items if it.runner is not None]
    assert sum(n.startswith("prefill_attention") for n in names) == (cfg.n_layers if on else 0), names
