"""One token's attention as one hand-written kernel (tinygrad/llm/decode_attention.py): its values and cache writes against
numpy on the PYTHON device (which runs blocks of threads), and which kernels a GPU's decode step schedules with it (NULL:CUDA,
compile only); whole decode steps on MOCK+NV (slow here; the other llm tests run them on a GPU with DEV=CUDA)."""
import math

import numpy as np
import pytest
from tinygrad import Context, Tensor, Variable, dtypes
from tinygrad.llm.decode_attention import MAX_LEN, SPAN_PER_HEAD, applies, block_size, combine_split, decode_attention_kernel, o_applies, split_parts


def rope(q: np.ndarray, cos: np.ndarray, sin: np.ndarray, neox: bool) -> np.ndarray:
  H, D = q.shape
  if neox:
    a, b = q[:, :D // 2], q[:, D // 2:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], 1)
  x = q.reshape(H, D // 2, 2)
  return np.stack([x[..., 0] * cos - x[..., 1] * sin, x[..., 1] * cos + x[..., 0] * sin], -1).reshape(H, D)


def rope_tables(rng: np.random.Generator, attn_len: int, head_dim: int, seen: int):
  """RoPE tables of attn_len + 8 random rows, and the token's position (seen - 1: it sees positions 0 .. its own) as the bound
  Variable the kernels take."""
  ang = rng.uniform(0, 2 * math.pi, (attn_len + 8, head_dim // 2))
  return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32), Variable("start_pos", 0, attn_len + 7).bind(seen - 1)


def reference(q_rows, cache, cos, sin, mask, n_heads, n_kv_heads, head_dim, neox):
  q = rope(q_rows[:n_heads * head_dim].reshape(n_heads, head_dim), cos, sin, neox)
  L = mask.shape[1]
  out = np.zeros((n_heads, head_dim), np.float64)
  for h in range(n_heads):
    kv = h // (n_heads // n_kv_heads)
    s = np.where(mask[0], cache[0, kv, :L].astype(np.float64) @ q[h] / math.sqrt(head_dim), -np.inf)
    p = np.exp(s - s.max())
    out[h] = (p / p.sum()) @ cache[1, kv, :L].astype(np.float64)
  return out.reshape(-1)


@pytest.mark.parametrize("warp", [0, 32], ids=["smem_tree", "shuffles"])
@pytest.mark.parametrize("n_heads,n_kv_heads,head_dim,attn_len,seen,neox,cache_dtype", [
  (4, 2, 64, 64, 59, False, np.float16),    # grouped query heads, the shortest bucket (one position a thread)
  (4, 4, 32, 256, 200, True, np.float32),   # NeoX pairs, a float32 cache, two positions a thread, four threads a dimension
  (8, 2, 64, 128, 1, False, np.float16),    # the first position only
  (2, 1, 64, 1024, 700, True, np.float16),  # eight positions a thread: loops, not straight-line code
])
def test_matches_numpy(n_heads, n_kv_heads, head_dim, attn_len, seen, neox, cache_dtype, warp):
  rng = np.random.default_rng(attn_len)
  q_rows = rng.standard_normal(n_heads * head_dim + 2 * n_kv_heads * head_dim).astype(np.float32)  # q, then k and v (unused)
  cache = (rng.standard_normal((2, n_kv_heads, attn_len + 32, head_dim)) * 2).astype(cache_dtype)
  cos_t, sin_t, pos = rope_tables(rng, attn_len, head_dim, seen)
  cos, sin, mask = cos_t[seen - 1:seen], sin_t[seen - 1:seen], (np.arange(attn_len) < seen)[None]
  kernel = decode_attention_kernel(n_heads, n_kv_heads, head_dim, attn_len, neox, warp)
  args = [Tensor(a, device="PYTHON") for a in (q_rows, cache, cos_t, sin_t)]
  got = Tensor.empty(n_heads * head_dim, device="PYTHON").custom_kernel(*args, pos, fxn=kernel)[0].numpy()
  want = reference(q_rows, cache, cos, sin, mask, n_heads, n_kv_heads, head_dim, neox)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("warp", [0, 32], ids=["smem_tree", "shuffles"])
@pytest.mark.parametrize("n_heads,n_kv_heads,head_dim,attn_len,seen,neox,cache_dtype,split", [
  (4, 2, 64, 512, 300, False, np.float16, 4),   # the last part sees nothing (its max -inf: it must add nothing, not NaN)
  (2, 1, 64, 1024, 1024, True, np.float16, 8),  # every position seen
  (4, 4, 32, 256, 1, True, np.float32, 2),      # only the first position
  (2, 2, 64, 1024, 700, False, np.float16, 2),  # 512 positions a block: the loop form
])
def test_split_parts_combine_to_the_heads_rows(n_heads, n_kv_heads, head_dim, attn_len, seen, neox, cache_dtype, split, warp):
  """A block per (head, part of the span) for long spans, the parts' partial sums combined by Tensor ops."""
  rng = np.random.default_rng(attn_len + split)
  q_rows = rng.standard_normal(n_heads * head_dim).astype(np.float32)
  cache = (rng.standard_normal((2, n_kv_heads, attn_len + 8, head_dim)) * 2).astype(cache_dtype)
  cos_t, sin_t, pos = rope_tables(rng, attn_len, head_dim, seen)
  cos, sin, mask = cos_t[seen - 1:seen], sin_t[seen - 1:seen], (np.arange(attn_len) < seen)[None]
  kernel = decode_attention_kernel(n_heads, n_kv_heads, head_dim, attn_len, neox, warp, split=split)
  args = [Tensor(a, device="PYTHON") for a in (q_rows, cache, cos_t, sin_t)]
  parts = Tensor.empty(n_heads * split * (head_dim + 2), device="PYTHON").custom_kernel(*args, pos, fxn=kernel)[0]
  got = combine_split(parts, n_heads, head_dim).numpy()
  want = reference(q_rows, cache, cos, sin, mask, n_heads, n_kv_heads, head_dim, neox)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_split_parts():
  assert split_parts(1024, 9, 64) == 8 and split_parts(2048, 9, 64) == 16  # 72 and 144 blocks of 128 positions
  assert split_parts(512, 9, 64) == 1 and split_parts(2048, 32, 64) == 1  # 4 parts; 512 blocks: the Tensor-op form
  assert split_parts(256, 32, 64, parts=2) == 2 and split_parts(256, 32, 64, parts=3) == 1 and split_parts(96, 2, 64, parts=2) == 1
  with pytest.raises(ValueError, match="split"): decode_attention_kernel(4, 2, 64, 256, False, split=3)
  with pytest.raises(ValueError, match="split"): decode_attention_kernel(4, 2, 64, 256, False, new_kv=(256, 384), split=2)


@pytest.mark.parametrize("grid_wait", [False, True], ids=["", "grid_wait"])
@pytest.mark.parametrize("warp", [0, 32], ids=["smem_tree", "shuffles"])
@pytest.mark.parametrize("n_heads,n_kv_heads,attn_len,seen,neox", [(4, 2, 64, 59, False), (4, 1, 128, 128, True), (2, 2, 1024, 700, False)])
def test_writes_the_new_key_and_value_into_the_cache(n_heads, n_kv_heads, attn_len, seen, neox, warp, grid_wait):
  """new_kv: the token's key (rotated) and value come from the q/k/v buffer; the kernel stores them, rounded to the cache's dtype,
  at the token's position (the bound Variable) and attends over the cache as if they had been written before it ran.
  grid_wait: the early cache loads before a GRID_WAIT barrier, the other buffers after it (PYTHON runs kernels one at a time:
  the barrier only orders the program)."""
  head_dim, rng = 64, np.random.default_rng(seen)
  nq, nkv = n_heads * head_dim, n_kv_heads * head_dim
  qkv = rng.standard_normal(nq + 2 * nkv).astype(np.float32)
  cache = rng.standard_normal((2, n_kv_heads, attn_len + 16, head_dim)).astype(np.float16)
  cos_t, sin_t, pos = rope_tables(rng, attn_len, head_dim, seen)
  cos, sin, mask = cos_t[seen - 1:seen], sin_t[seen - 1:seen], (np.arange(attn_len) < seen)[None]
  want_cache = cache.copy()
  want_cache[0, :, seen - 1] = rope(qkv[nq:nq + nkv].reshape(n_kv_heads, head_dim), cos, sin, neox)
  want_cache[1, :, seen - 1] = qkv[nq + nkv:].reshape(n_kv_heads, head_dim)
  kernel = decode_attention_kernel(n_heads, n_kv_heads, head_dim, attn_len, neox, warp, (nq, nq + nkv), grid_wait)
  args = [Tensor(a, device="PYTHON").contiguous() for a in (qkv, cache, cos_t, sin_t, qkv)]
  out, _, new_cache = Tensor.empty(nq, device="PYTHON").custom_kernel(*args[:4], pos, args[4], fxn=kernel)[:3]
  want = reference(qkv, want_cache, cos, sin, mask, n_heads, n_kv_heads, head_dim, neox)
  np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
  np.testing.assert_array_equal(new_cache.numpy(), want_cache)


@pytest.mark.parametrize("o_parts", [1, 4])
@pytest.mark.parametrize("n_heads,n_kv_heads,attn_len,seen,dim", [(4, 2, 64, 59, 256), (2, 1, 128, 100, 192)])
def test_adds_the_output_projection_into_the_residual(n_heads, n_kv_heads, attn_len, seen, dim, o_parts):
  """o_parts: the kernel also multiplies the heads' rows by the output projection (a float16 (dim, heads * head_dim) matrix) and
  adds the result into the residual stream in place, each of the R blocks of a head its R-th of the rows by atomic adds; the
  cache is written once all the same."""
  head_dim, rng = 64, np.random.default_rng(seen + o_parts)
  nq, nkv = n_heads * head_dim, n_kv_heads * head_dim
  assert o_applies(n_heads, head_dim, attn_len, dim, o_parts, 32) and not o_applies(n_heads, head_dim, attn_len, dim, o_parts, 0)
  qkv = rng.standard_normal(nq + 2 * nkv).astype(np.float32)
  cache = rng.standard_normal((2, n_kv_heads, attn_len + 16, head_dim)).astype(np.float16)
  cos_t, sin_t, pos = rope_tables(rng, attn_len, head_dim, seen)
  cos, sin, mask = cos_t[seen - 1:seen], sin_t[seen - 1:seen], (np.arange(attn_len) < seen)[None]
  wo = (rng.standard_normal((dim, nq)) / math.sqrt(nq)).astype(np.float16)
  residual = rng.standard_normal((1, 1, dim)).astype(np.float32)
  want_cache = cache.copy()
  want_cache[0, :, seen - 1] = rope(qkv[nq:nq + nkv].reshape(n_kv_heads, head_dim), cos, sin, False)
  want_cache[1, :, seen - 1] = qkv[nq + nkv:].reshape(n_kv_heads, head_dim)
  kernel = decode_attention_kernel(n_heads, n_kv_heads, head_dim, attn_len, False, 32, (nq, nq + nkv), True, o_parts=o_parts, dim=dim)
  garbage = np.full((1, 1, dim), 7.0, np.float32)  # the optional last buffer: set to zeros (for the FFN kernel's adds after it)
  args = [Tensor(a, device="PYTHON").contiguous() for a in (residual, qkv, cache, cos_t, sin_t, qkv, wo, garbage)]
  outs = args[0].custom_kernel(*args[1:5], pos, *args[5:], fxn=kernel)
  out, new_cache = outs[0], outs[2]
  np.testing.assert_array_equal(outs[7].numpy(), np.zeros_like(garbage))
  heads = reference(qkv, want_cache, cos, sin, mask, n_heads, n_kv_heads, head_dim, False)
  want = residual.reshape(-1) + wo.astype(np.float64) @ heads
  np.testing.assert_allclose(out.numpy().reshape(-1), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
  np.testing.assert_array_equal(new_cache.numpy(), want_cache)


def test_the_output_projection_needs_a_layout():
  assert not o_applies(4, 64, 64, 250, 1, 32)  # rows of a part: not a whole number of the block's 8 rows a step
  assert not o_applies(4, 128, 128, 512, 1, 32)  # a head's slice of a row: 8 lanes of 16 bytes only for head_dim 64
  with pytest.raises(ValueError, match="o_parts"): decode_attention_kernel(4, 2, 64, 64, False, 32, None, o_parts=4, dim=256)


def test_block_size_says_where_the_kernel_applies():
  assert block_size(64, 64) == 64 and block_size(4096, 64) == 128 and block_size(128, 128) == 128
  assert block_size(2 * MAX_LEN, 64) is None  # the scores would not fit in shared memory
  assert block_size(64, 128) is None  # fewer threads than dimensions
  assert block_size(96, 64) is None
  with pytest.raises(ValueError, match="block_size"): decode_attention_kernel(4, 2, 64, 96, False)


def test_applies_while_the_heads_blocks_have_few_positions_each():
  """A block a query head: past SPAN_PER_HEAD positions a head the Tensor-op form's kernels (more blocks) are faster."""
  assert applies(128, 9, 64) and applies(32 * 9, 9, 64) is False  # 288 is no power of two: block_size says no
  assert applies(256, 9, 64) is (256 <= SPAN_PER_HEAD * 9) and not applies(512, 9, 64)
  assert applies(1024, 32, 64) and not applies(2048, 32, 64)
  assert not applies(96, 32, 64)  # block_size's own limits still hold


def _kernels(path: str, setting: int, tokens: list[int], start: int) -> list[str]:
  """Names (without the hash) of the kernels one forward of these tokens (as ids, as the engine feeds them) runs on NULL:CUDA (compile
  only)."""
  from tinygrad.engine import realize
  from tinygrad.llm.model import Transformer
  with Context(DEV="NULL:CUDA:sm_90", DECODE_ATTENTION=setting, REUSE=0):
    m = Transformer.from_gguf(path, cache_dtype=dtypes.float16)
    realize.capturing.append(cap := realize.Capture(jit=False))
    try: m.forward(m.token_ids(tokens), start).realize()
    finally: realize.capturing.pop()
  return [ei.runner.spec.name.rsplit("_", 1)[0] for ei, _ in cap.items if ei.runner is not None]


def test_the_folded_kernel_takes_an_sm_a_block(tmp_path):
  """Rendered for Hopper, the attention kernel that writes the cache follows the q/k/v product, which fills the GPU: it asks for
  an SM a block (KernelInfo.spread: more than half an SM's shared memory), so that its early-launched blocks don't land packed on
  the SMs with room left, and loads the cache before it waits for the product. The step's other kernels don't; every kernel is
  still launched early (a programmatic edge)."""
  from llm_synth import SynthConfig, write_model
  from tinygrad.engine import realize
  from tinygrad.llm.model import Transformer
  from tinygrad_backend_nv.cuda import DYNAMIC_SMEM_SYMBOL, GRID_WAIT_SYMBOL
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=1), "F16")
  with Context(DEV="NULL:CUDA:sm_90", REUSE=0):
    m = Transformer.from_gguf(path, cache_dtype=dtypes.float16)
    realize.capturing.append(cap := realize.Capture(jit=False))
    try: m.forward(m.token_ids([5]), 3).realize()
    finally: realize.capturing.pop()
  srcs = {ei.runner.spec.name.rsplit("_", 1)[0]: ei.runner.spec.src for ei, _ in cap.items if ei.runner is not None}
  assert all(GRID_WAIT_SYMBOL in src for src in srcs.values())
  assert [name for name, src in srcs.items() if DYNAMIC_SMEM_SYMBOL in src] == ["decode_attention_kv"]
  # the cache (data2) loads before the wait for the q/k/v product, the query (data1) after it
  src = srcs["decode_attention_kv"]
  assert src.index("(data2+") < src.index("griddepcontrol.wait") < src.index("(data1+")


def test_gpu_decode_step_runs_one_attention_kernel_a_layer(tmp_path):
  """A GPU's one-token step: the cache write and one attention kernel a layer (DECODE_ATTENTION=1), or one kernel that also writes
  the cache (2), instead of the Tensor-op form's five kernels; a prefill chunk keeps its own form. The kernel takes the position
  as a parameter and reads the RoPE tables: the Tensor-op form's three kernels before the layers (the rows and the mask) are
  gone too."""
  from llm_synth import SynthConfig, write_model
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=2), "F16")
  on, folded, off = _kernels(path, 1, [5], 3), _kernels(path, 2, [5], 3), _kernels(path, 0, [5], 3)
  assert on.count("decode_attention") == 2 and folded.count("decode_attention_kv") == 2 and not any("decode_attention" in n for n in off)
  # (the cache write: a kernel of its own, or inside)
  assert len(on) == len(off) - 2 * 3 - 3 and len(folded) == len(off) - 2 * 4 - 3, (on, off)
  assert off[2:4] == ["E_32", "E_32"] and on[2] != "E_32"  # the rows of cos and sin, after the embedding's kernels
  assert not any("decode" in n for n in _kernels(path, 1, [1, 2, 3, 4], 0))


def test_gpu_decode_step_adds_the_projection_in_the_attention_kernel(tmp_path):
  """DECODE_ATTN_O=4: the attention kernel also applies the output projection into the residual stream, so the projection's
  kernel is gone from each layer (a quantized projection keeps it)."""
  from llm_synth import SynthConfig, write_model
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=2), "F16")
  with Context(DECODE_ATTN_O=4): on = _kernels(path, 2, [5], 3)
  off = _kernels(path, 2, [5], 3)
  assert on.count("decode_attention_o") == 2 and "decode_attention_kv" not in on and len(on) == len(off) - 2
  write_model(path, SynthConfig(n_layers=2), "Q8_0")
  with Context(DECODE_ATTN_O=4): assert "decode_attention_o" not in _kernels(path, 2, [5], 3)


def test_gpu_decode_step_splits_a_long_span(tmp_path):
  """A long span (1,024 positions, 4 heads: 8 parts) runs a block per (head, 128 positions) and combines the parts where the
  grouped kernel doesn't run (DECODE_GQA=0 here; test_decode_attention_gqa.py has it); DECODE_SPLIT=0 gives the Tensor-op form
  there."""
  from llm_synth import SynthConfig, write_model
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=2, context=1024), "F16")
  with Context(DECODE_SPLIT=0, DECODE_GQA=0): off = _kernels(path, 2, [5], 600)
  with Context(DECODE_GQA=0): on, short = _kernels(path, 2, [5], 600), _kernels(path, 2, [5], 3)
  assert on.count("decode_attention_split") == 2 and not any("decode_attention" in n for n in off)
  assert short.count("decode_attention_kv") == 2 and not any("split" in n for n in short)


@pytest.mark.slow
@pytest.mark.parametrize("setting,o_parts", [(1, 0), (2, 0), (2, 4)])
def test_decode_steps_on_a_mock_gpu_match_the_reference(tmp_path, setting, o_parts):
  """(about a minute each) Decode steps on MOCK+NV (the CUDA renderer, kernels run by the PYTHON interpreter): each step writes
  its key and value into the cache (2: the attention kernel itself), the next step reads them. The float32 path (no norm folded
  into float16 weights, the FFN's activation kept as float32: test_norm_fold.py checks those), so that the tolerance stays tight."""
  from llm_synth import SynthConfig, reference_forward, write_model
  from tinygrad.llm.model import Transformer
  pytest.importorskip("tinygrad_backend_nv")
  tokens, cfg = [3, 17, 5, 60, 2, 9], SynthConfig(n_layers=1)
  path = str(tmp_path / "m.gguf")
  ref = reference_forward(write_model(path, cfg, "F16"), cfg, tokens)
  with Context(DEV="MOCK+NV", DECODE_ATTENTION=setting, DECODE_ATTN_O=o_parts, NORM_FOLD=0, FFN_HALF=0):
    m = Transformer.from_gguf(path)
    m.forward(m.token_ids(tokens[:3]), 0).realize()
    for i in range(3, len(tokens)):
      got = m.forward(m.token_ids(tokens[i:i + 1]), i).numpy()[0]
      np.testing.assert_allclose(got, ref[i], rtol=0, atol=1e-4 * np.abs(ref[i]).max())
