"""A long span's decode attention as a block per (kv head, 128 positions) for the whole group of query heads
(tinygrad/llm/decode_attention_gqa.py): its partials and their combining kernel against numpy on the PYTHON device, the cache it
writes, and which kernels a GPU's decode step schedules with it (NULL:CUDA, compile only). A decode step at depth against the
float64 reference runs on the default device (the GPU's kernels with DEV=CUDA)."""

import numpy as np
import pytest
from test_decode_attention import reference, rope, rope_tables
from tinygrad import Context, Tensor, dtypes
from tinygrad.llm.decode_attention import combine_split
from tinygrad.llm.decode_attention_gqa import combine_kernel, gqa_attention_kernel, gqa_parts, group_blocks


def _inputs(n_heads, n_kv_heads, head_dim, attn_len, seen, seed, cache_dtype=np.float16):
  rng = np.random.default_rng(seed)
  qkv = rng.standard_normal((n_heads + 2 * n_kv_heads) * head_dim).astype(np.float32)  # q, then the token's k and v
  cache = (rng.standard_normal((2, n_kv_heads, attn_len + 8, head_dim)) * 2).astype(cache_dtype)
  cos_t, sin_t, pos = rope_tables(rng, attn_len, head_dim, seen)
  return qkv, cache, cos_t, sin_t, pos


def _rows(cos_t, sin_t, attn_len, seen):
  """The reference's inputs: the token's RoPE rows and its mask (it sees positions 0 .. seen - 1)."""
  return cos_t[seen - 1:seen], sin_t[seen - 1:seen], (np.arange(attn_len) < seen)[None]


def _args(qkv, cache, cos_t, sin_t, pos, *more):
  """The kernel's arguments on the PYTHON device: q, the cache, the RoPE tables, the position, then `more`."""
  return [*(Tensor(a, device="PYTHON") for a in (qkv, cache, cos_t, sin_t)), pos, *(Tensor(a, device="PYTHON") for a in more)]


@pytest.mark.parametrize("warp", [0, 32], ids=["smem_tree", "shuffles"])
@pytest.mark.parametrize("n_heads,n_kv_heads,head_dim,attn_len,seen,neox,cache_dtype", [
  (4, 2, 64, 256, 200, False, np.float16),   # two parts, the second partly seen
  (6, 2, 64, 384, 129, True, np.float16),    # three query heads a kv head (SmolLM2's grouping), NeoX pairs, parts unseen
  (3, 1, 64, 256, 1, False, np.float32),     # only the first position: the other part's max is -inf and adds nothing
  (8, 2, 32, 256, 256, True, np.float16),    # head_dim 32: four threads a dimension, every position seen
  (2, 2, 64, 256, 140, False, np.float16),   # as many kv heads as query heads: a group of one
  (4, 2, 128, 256, 150, True, np.float16),   # heads of 128: two threads a position, each half of its key
])
def test_partials_combine_to_the_heads_rows(n_heads, n_kv_heads, head_dim, attn_len, seen, neox, cache_dtype, warp):
  """The partials in combine_split's layout (GQA_ONE_BLOCK=0: parts even where one block would hold the span): the Tensor-op
  combine and the combining kernel both give numpy's rows."""
  qkv, cache, *tables = _inputs(n_heads, n_kv_heads, head_dim, attn_len, seen, attn_len + seen, cache_dtype)
  cos, sin, mask = _rows(*tables[:2], attn_len, seen)
  with Context(GQA_ONE_BLOCK=0):
    S = gqa_parts(attn_len, n_heads, n_kv_heads, head_dim)
    kernel = gqa_attention_kernel(n_heads, n_kv_heads, head_dim, attn_len, neox, warp)
  assert S > 1
  parts = Tensor.empty(n_heads * S * (head_dim + 2), device="PYTHON").custom_kernel(*_args(qkv, cache, *tables), fxn=kernel)[0].realize()
  want = reference(qkv, cache, cos, sin, mask, n_heads, n_kv_heads, head_dim, neox)
  combined = Tensor.empty(n_heads * head_dim, device="PYTHON").custom_kernel(parts, fxn=combine_kernel(n_heads, head_dim, S))[0]
  for got in (combine_split(parts, n_heads, head_dim).numpy(), combined.numpy()):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("warp", [0, 32], ids=["smem_tree", "shuffles"])
@pytest.mark.parametrize("n_heads,n_kv_heads,head_dim,attn_len,seen,neox", [
  (4, 2, 64, 256, 200, False),  # Llama-1B's grouping
  (6, 2, 64, 128, 1, True),     # only the first position
  (4, 2, 128, 256, 256, True),  # heads of 128: 512 threads, two a position
  (2, 2, 64, 512, 300, False),  # a group of one, 512 threads
])
def test_one_block_a_kv_head_writes_the_heads_rows(n_heads, n_kv_heads, head_dim, attn_len, seen, neox, warp):
  """A span of at most GQA_ONE_BLOCK positions is one part: a block a kv head, and the kernel writes the heads' rows (no
  partials, no combining kernel)."""
  qkv, cache, *tables = _inputs(n_heads, n_kv_heads, head_dim, attn_len, seen, attn_len + seen)
  cos, sin, mask = _rows(*tables[:2], attn_len, seen)
  with Context(GQA_ONE_BLOCK=512, GQA_ONE_BLOCK_MIN_GRID=1):
    assert gqa_parts(attn_len, n_heads, n_kv_heads, head_dim) == 1
    kernel = gqa_attention_kernel(n_heads, n_kv_heads, head_dim, attn_len, neox, warp)
  got = Tensor.empty(n_heads * head_dim, device="PYTHON").custom_kernel(*_args(qkv, cache, *tables), fxn=kernel)[0].numpy()
  want = reference(qkv, cache, cos, sin, mask, n_heads, n_kv_heads, head_dim, neox)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("positions,value_dims", [(256, 4), (128, 1), (128, 8)])
@pytest.mark.parametrize("n_heads,n_kv_heads,head_dim,seen", [(4, 2, 64, 300), (4, 2, 128, 400)])
def test_other_block_shapes_give_the_same_rows(positions, value_dims, n_heads, n_kv_heads, head_dim, seen):
  """GQA_BLOCK_POSITIONS (256: the default from 2,048 positions) and GQA_VALUE_DIMS (values a load: 1, 4 or 8) change the
  blocks' layout, not the rows."""
  with Context(GQA_BLOCK_POSITIONS=positions, GQA_VALUE_DIMS=value_dims):
    test_partials_combine_to_the_heads_rows(n_heads, n_kv_heads, head_dim, 512, seen, True, np.float16, 32)


@pytest.mark.parametrize("n_heads,n_kv_heads,D,attn_len,seen,neox,grid_wait", [
  (4, 2, 64, 512, 300, False, True),   # the token's position in the third of four parts
  (6, 3, 64, 256, 256, True, False),   # the last position of the span (no position after it to look at)
  (4, 1, 64, 256, 129, False, True),   # the first position of the second part
  (4, 2, 128, 256, 200, False, True),  # heads of 128: both threads of the token's position use its key
])
@pytest.mark.parametrize("hoist", [1, 0], ids=["hoisted", "where_used"])
@pytest.mark.parametrize("one_block", [0, 512], ids=["parts", "one_block"])
def test_writes_the_new_key_and_value_into_the_cache(n_heads, n_kv_heads, D, attn_len, seen, neox, grid_wait, hoist, one_block):
  """new_kv: the block whose part holds the token's position (the bound Variable) scores and weighs the token's own key
  (rotated) and value, as the cache will hold them, and stores them there; the rest of the cache is unchanged. The same with
  the value's late loads before the first barrier (GQA_HOIST=1) or where they are used, and with the span in parts or one
  block a kv head (GQA_ONE_BLOCK)."""
  qkv, cache, *tables = _inputs(n_heads, n_kv_heads, D, attn_len, seen, attn_len + seen + 1)
  cos, sin, mask = _rows(*tables[:2], attn_len, seen)
  with Context(GQA_HOIST=hoist, GQA_ONE_BLOCK=one_block, GQA_ONE_BLOCK_MIN_GRID=1):
    S = gqa_parts(attn_len, n_heads, n_kv_heads, D)
    kernel = gqa_attention_kernel(n_heads, n_kv_heads, D, attn_len, neox, 32, new_kv=(n_heads * D, (n_heads + n_kv_heads) * D), grid_wait=grid_wait)
  assert (S == 1) == bool(one_block)
  outs = Tensor.empty(n_heads * D if S == 1 else n_heads * S * (D + 2), device="PYTHON").custom_kernel(*_args(qkv, cache, *tables, qkv), fxn=kernel)
  want_cache = cache.copy()
  want_cache[0, :, seen - 1] = rope(qkv[n_heads * D:(n_heads + n_kv_heads) * D].reshape(n_kv_heads, D), cos, sin, neox)
  want_cache[1, :, seen - 1] = qkv[(n_heads + n_kv_heads) * D:].reshape(n_kv_heads, D)
  np.testing.assert_array_equal(outs[2].numpy(), want_cache)
  got = outs[0].numpy() if S == 1 else combine_split(outs[0], n_heads, D).numpy()
  want = reference(qkv, want_cache, cos, sin, mask, n_heads, n_kv_heads, D, neox)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_gqa_parts_says_where_the_kernel_applies():
  with Context(GQA_ONE_BLOCK=0):
    assert gqa_parts(1024, 32, 8, 64) == 8 and gqa_parts(256, 9, 3, 64) == 2 and gqa_parts(128, 32, 8, 64) == 1
    assert gqa_parts(2048, 32, 8, 64) == 8 and gqa_parts(8192, 32, 8, 64) == 32  # 256 positions a block from 2,048 on
    assert gqa_parts(2048, 16, 8, 128) == 16  # ... where a position is one thread
    with Context(GQA_BLOCK_POSITIONS=128): assert gqa_parts(2048, 32, 8, 64) == 16
    assert gqa_parts(1024, 32, 8, 128) == 8  # heads of 128: 256 threads a block, two a position
  with Context(GQA_ONE_BLOCK=512):  # the whole span a block up to 512 positions (1,024 threads at most)
    assert gqa_parts(256, 32, 8, 64) == 1 and gqa_parts(512, 32, 8, 64) == 1 and gqa_parts(1024, 32, 8, 64) == 8
    assert gqa_parts(512, 16, 8, 128) == 1 and gqa_parts(192, 32, 8, 64) == 1
    with Context(GQA_BLOCK_POSITIONS=128): assert gqa_parts(256, 32, 8, 64) == 2
    assert gqa_parts(256, 9, 3, 64) == 2  # fewer kv heads than GQA_ONE_BLOCK_MIN_GRID: 128 positions a block
  assert gqa_parts(256, 32, 8, 64) == 1 and gqa_parts(512, 32, 8, 64) == 4  # the default: one block up to 256 positions
  assert gqa_parts(384 + 64, 32, 8, 64) == 0 and gqa_parts(1024, 32, 8, 96) == 0 and gqa_parts(1024, 9, 2, 64) == 0
  assert gqa_parts(100, 32, 8, 64) == 0  # not a whole number of warps
  with pytest.raises(ValueError, match="gqa_parts"): gqa_attention_kernel(32, 8, 64, 100, False)


def _captured(path: str, gqa: int, start: int, **settings) -> list[tuple[str, str]]:
  """(name without the hash, source) of each kernel one decode step from `start` runs on NULL:CUDA (compile only), in order."""
  from tinygrad.engine import realize
  from tinygrad.llm.model import Transformer
  with Context(DEV="NULL:CUDA:sm_90", DECODE_GQA=gqa, REUSE=0, **settings):
    m = Transformer.from_gguf(path, cache_dtype=dtypes.float16)
    realize.capturing.append(cap := realize.Capture(jit=False))
    try: m.forward(m.token_ids([5]), start).realize()
    finally: realize.capturing.pop()
  return [(ei.runner.spec.name.rsplit("_", 1)[0], ei.runner.spec.src) for ei, _ in cap.items if ei.runner is not None]


def _kernels(path: str, gqa: int, start: int, **settings) -> list[str]: return [name for name, _ in _captured(path, gqa, start, **settings)]


def test_its_blocks_ask_for_an_sm_each_while_the_grid_fits_the_gpu(tmp_path):
  """Behind the q/k/v product (launched early, its cache loads before the grid wait) the kernel's blocks ask for an SM each
  (KernelInfo.spread: more than half an SM's shared memory) while there are at most the GPU's SM count (sm_90: 132) or
  DECODE_GQA_SPREAD of them; past it they would run in waves (measured slower: bench/README.md, session 35)."""
  from llm_synth import SynthConfig, write_model
  from tinygrad_backend_nv.cuda import DYNAMIC_SMEM_SYMBOL
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=1, context=1024), "F16")  # 2 kv heads x 8 parts: 16 blocks
  src = dict(_captured(path, 256, 600))["decode_attention_gqa_kv"]
  assert DYNAMIC_SMEM_SYMBOL in src and src.index("(data2+") < src.index("griddepcontrol.wait") < src.index("(data1+")
  assert DYNAMIC_SMEM_SYMBOL not in dict(_captured(path, 256, 600, DECODE_GQA_SPREAD=15))["decode_attention_gqa_kv"]


def test_a_grid_past_the_gpu_runs_in_one_wave(tmp_path):
  """Past the GPU's SM count (sm_90: 132) the kernel's blocks load the cache before the grid wait, so the CUDA renderer caps its
  registers to one wave (EARLY_ONE_WAVE: 256 blocks of 128 positions, 2 an SM); the values come 4 float16 a load
  (GQA_VALUE_DIMS), which with the cache's dtype held until use is what lets them fit (Llama-1B at 8,192 positions: 170
  registers a thread before). With the default 256 positions a block at this span the grid fits the GPU: an SM a block."""

  from llm_synth import SynthConfig, write_model
  from tinygrad_backend_nv.cuda import DYNAMIC_SMEM_SYMBOL
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=1, n_heads=4, n_kv_heads=4, context=8192), "F16")  # 4 kv heads x 64 parts
  from tinygrad import Device
  with Context(DEV="NULL:CUDA:sm_90"): sms = Device.renderer(Device.DEFAULT).compute_units  # 132, or this machine's sm_90 GPU's
  src = dict(_captured(path, 256, 8000, GQA_BLOCK_POSITIONS=128))["decode_attention_gqa_kv"]
  assert f"__launch_bounds__(128, {-(-256 // sms)})" in src and "halfx4" in src
  if sms >= 128:  # 4 kv heads x 32 parts fit the GPU: an SM a block
    src = dict(_captured(path, 256, 8000))["decode_attention_gqa_kv"]
    assert "__launch_bounds__(256, 1)" in src and DYNAMIC_SMEM_SYMBOL in src


def test_gpu_decode_step_runs_the_grouped_kernel_from_decode_gqa_positions(tmp_path):
  """A GPU's one-token step over DECODE_GQA positions or more: the grouped kernel, which writes the cache, and the combining
  kernel a layer where the span is in parts; a shorter span keeps the one-block-a-head kernel; DECODE_GQA=0 gives the forms
  before it. At 128 positions (the default DECODE_GQA) a block a kv head, no combining kernel."""
  from llm_synth import SynthConfig, write_model
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=2, context=1024), "F16")
  on, short, off = _kernels(path, 256, 600), _kernels(path, 256, 3), _kernels(path, 0, 600)
  assert on.count("decode_attention_gqa_kv") == 2 and on.count("decode_attention_combine") == 2 and len(on) < len(off)
  assert short.count("decode_attention_kv") == 2 and not any("gqa" in n for n in short + off)
  # a 256-position span: one block a kv head (GQA_ONE_BLOCK), no combining kernel; in two parts, one
  one, two = _kernels(path, 256, 200, GQA_ONE_BLOCK_MIN_GRID=1), _kernels(path, 256, 200, GQA_ONE_BLOCK=0)
  assert one.count("decode_attention_gqa_kv") == 2 and "decode_attention_combine" not in one
  assert two.count("decode_attention_combine") == 2 and len(two) == len(one) + 2
  from tinygrad.llm.model import DECODE_GQA
  at_128 = _kernels(path, DECODE_GQA.value, 100)
  assert at_128.count("decode_attention_gqa_kv") == 2 and "decode_attention_combine" not in at_128


@pytest.mark.parametrize("start,settings", [(300, {}), (100, {}), (200, {"GQA_ONE_BLOCK_MIN_GRID": 1})],
                         ids=["512_in_parts", "128_one_block", "256_one_block"])
def test_decode_at_depth_matches_the_reference(tmp_path, start, settings):
  """Decode steps at three positions from `start` against the float64 reference, on the default device (with DEV=CUDA: the
  grouped kernel writing the cache, read back by the next step, over a 512-position span in parts and over 128 and 256 positions
  as one block a kv head; elsewhere the device's own form)."""
  from llm_synth import SynthConfig, reference_forward, write_model
  from tinygrad.llm.model import Transformer
  cfg = SynthConfig(n_layers=1, context=512)
  tokens = [int(t) for t in np.random.default_rng(3).integers(0, cfg.vocab, start + 3)]
  path = str(tmp_path / "m.gguf")
  ref = reference_forward(write_model(path, cfg, "F16"), cfg, tokens)
  with Context(NORM_FOLD=0, FFN_HALF=0, **settings):
    m = Transformer.from_gguf(path)
    m.forward(m.token_ids(tokens[:start]), 0).realize()
    for i in range(start, len(tokens)):
      got = m.forward(m.token_ids(tokens[i:i + 1]), i).numpy()[0]
      np.testing.assert_allclose(got, ref[i], rtol=0, atol=1e-4 * np.abs(ref[i]).max())


def test_no_load_waits_behind_a_barrier(tmp_path):
  """GQA_HOIST (default): every global load of the grouped kernel issues before its first barrier, so none is a round trip to
  memory behind one (with GQA_HOIST=0 the token's value loads after barriers)."""
  import re

  from llm_synth import SynthConfig, write_model
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=1, dim=256, ff_dim=512, n_heads=4, n_kv_heads=2, context=1024), "F16")
  def loads_after_first_barrier(**settings) -> int:
    src = next(src for name, src in _captured(path, 256, 700, **settings) if name == "decode_attention_gqa_kv")
    body = src[src.index("__global__"):]
    return len(re.findall(r"= \(\*\(\(?[a-z0-9]*\*?\)?\(?data\d", body[body.index("__syncthreads()"):]))
  assert loads_after_first_barrier() == 0
  assert loads_after_first_barrier(GQA_HOIST=0) > 0


@pytest.mark.parametrize("blocks", [1, 2, 4])
@pytest.mark.parametrize("one_block", [0, 512], ids=["parts", "one_block"])
def test_a_group_shared_over_blocks_gives_the_same_rows_and_cache(blocks, one_block):
  """GQA_GROUP_BLOCKS: a kv head's query heads in one block or shared over several (each reading the kv head's keys and values), the
  same rows and one write of the token's key and value; a count that doesn't divide the group (3 of 4) is one block."""
  with Context(GQA_GROUP_BLOCKS=blocks):
    test_writes_the_new_key_and_value_into_the_cache(4, 1, 64, 256, 129, False, True, 1, one_block)
    test_writes_the_new_key_and_value_into_the_cache(8, 2, 128, 256, 200, True, True, 1, one_block)
  with Context(GQA_GROUP_BLOCKS=3): assert group_blocks(4, 1) == 1 and group_blocks(6, 2) == 3
  # the rule: the largest divisor of the group that keeps the grid within the SMs
  assert group_blocks(32, 8, 8, 132) == 4 and group_blocks(32, 8, 64, 132) == 2 and group_blocks(32, 8, 256, 132) == 1
  assert group_blocks(9, 3, 6, 132) == 3 and group_blocks(12, 2, 40, 132) == 3
