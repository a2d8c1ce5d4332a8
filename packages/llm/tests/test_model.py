"""Models against a numpy reference forward pass on tiny synthetic GGUFs with random weights (one file per quantization type).

Tolerance: both sides use the same dequantized weights (ours dequantized inside the matmul kernels, the reference by the `gguf`
package), ours computes in float32 and the reference in float64, so logits agree to |ours - ref| <= 1e-4 * max|ref| + 1e-5.
"""
import numpy as np
import pytest
from gguf_raw import Typed, model_parts, write_gguf
from llm_synth import SynthConfig, logits_tol, reference_forward, write_model
from tinygrad.helpers import Context
from tinygrad.llm.engine import LLM
from tinygrad.llm.gguf import UINT32, GGUFError
from tinygrad.llm.model import Transformer, UnsupportedModel
from tinygrad.llm.quants import UnsupportedQuantization

TOKENS = [3, 17, 5, 60, 2, 9, 33, 8, 1, 4, 6]
INT8_X_TOL = 2e-2  # x quantized to int8 per block (block_dot's form 3, llama.cpp's rounding): logits within this of the largest


@pytest.fixture(autouse=True)
def _x_as_int16():
  """A decode step's products on Q4_0/Q4_1/Q8_0 weights with x as int16 (block_dot's form 1), whose rounding is below float32's
  tolerance here: where the CPU has vpdpbusd the default is int8 x, which errs as llama.cpp does (~1e-2 of the largest logit:
  test_decode_step_in_each_matvec_form checks it at INT8_X_TOL). Tests that set BLOCK_DOT themselves override this."""
  with Context(BLOCK_DOT=1): yield


def check(ours, ref, tol: float | None = None):
  np.testing.assert_allclose(ours, ref, rtol=0, atol=(tol or logits_tol()) * np.abs(ref).max() + 1e-5)


def build(tmp_path, arch="llama", qtype="F32", **kw):
  moe = arch == "qwen3moe"
  cfg = SynthConfig(arch=arch, n_experts=4 if moe else 0, n_experts_used=2 if moe else 0, **kw)
  path = str(tmp_path / f"{arch}-{qtype}.gguf")
  weights = write_model(path, cfg, qtype, tie_embeddings=arch == "qwen3")
  return path, cfg, weights


def test_llama_f32_prefill_and_jitted_decode(tmp_path):
  path, cfg, w = build(tmp_path, "llama", "F32")
  ref = reference_forward(w, cfg, TOKENS)
  check(Transformer.from_gguf(path).logits(TOKENS, all_logits=True).numpy()[0], ref)
  # the engine: prefill in chunks of 4 (the last one padded), then one-token decode; both TinyJit'd with a symbolic position
  llm = LLM.load(path, prefill_chunk=4)
  assert llm.jit
  logits, reused = llm.prefill(TOKENS[:6])
  assert reused == 0
  check(logits.numpy()[0], ref[5])
  for i in range(6, len(TOKENS)):
    check(llm._run_chunk([TOKENS[i]], i).numpy()[0], ref[i])
    llm.cached.append(TOKENS[i])
  # a new prompt that shares a prefix reuses the cache
  logits, reused = llm.prefill(TOKENS[:8] + [7])
  assert reused == 8
  check(logits.numpy()[0], reference_forward(w, cfg, TOKENS[:8] + [7])[-1])


@pytest.mark.parametrize("qtype", ["Q4_1", "Q8_0"])
def test_decode_step_in_each_matvec_form(tmp_path, qtype):
  """A decode step (one row: model.block_dot on a CPU) gives the reference's logits in each form of linear (BLOCK_DOT 0: every
  weight dequantized; 1: x as int16; 2: float32 x with the lanes kept), and the forms agree with each other as closely; with x
  as int8 (3: llama.cpp's rounding; vpdpbusd where the CPU has it) within INT8_X_TOL."""
  from tinygrad.llm.model import fuses_cheaply
  path, cfg, w = build(tmp_path, "llama", qtype)
  ref = reference_forward(w, cfg, TOKENS[:6])
  got = {}
  for form in (0, 1, 2, 3):
    with Context(BLOCK_DOT=form):
      llm = LLM.load(path, prefill_chunk=4)
      llm.prefill(TOKENS[:5])
      got[form] = llm._run_chunk([TOKENS[5]], 5).numpy()[0]
    check(got[form], ref[5], INT8_X_TOL if form == 3 else None)
  check(got[1], got[0])
  check(got[2], got[0])
  if not fuses_cheaply(llm.model.norm.device):  # a different computation did run
    assert not np.array_equal(got[1], got[0]) and not np.array_equal(got[3], got[0])


def test_decode_across_attention_spans(tmp_path):
  """Attention spans a power-of-two prefix of the cache (64, 128, then max_context): decoding across each boundary (a new TinyJit
  capture per span) still matches the reference, and the prefill chunks pick their span by where they end."""
  path, cfg, w = build(tmp_path, "llama", "F32", context=160)
  tokens = [int(t) for t in np.random.default_rng(0).integers(0, cfg.vocab, 140)]
  ref = reference_forward(w, cfg, tokens)
  llm = LLM.load(path, prefill_chunk=32)
  logits, _ = llm.prefill(tokens[:60])
  check(logits.numpy()[0], ref[59])
  for i in list(range(60, 68)):
    check(llm._run_chunk([tokens[i]], i).numpy()[0], ref[i])
    llm.cached.append(tokens[i])
  logits, reused = llm.prefill(tokens[:126])
  assert reused == 68
  check(logits.numpy()[0], ref[125])
  for i in range(126, 131):
    check(llm._run_chunk([tokens[i]], i).numpy()[0], ref[i])
    llm.cached.append(tokens[i])
  assert sorted(llm._decode_jits) == [64, 128, 160]


QUANTS = ["F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]


@pytest.mark.parametrize("qtype", [pytest.param(q, marks=[] if q in ("Q4_1", "Q6_K") else pytest.mark.slow) for q in QUANTS])
def test_llama_quantized(tmp_path, qtype):
  path, cfg, w = build(tmp_path, "llama", qtype)
  check(Transformer.from_gguf(path).logits(TOKENS[:7], all_logits=True).numpy()[0], reference_forward(w, cfg, TOKENS[:7]))


PANEL_ROWS = 16  # the panel tests' PANEL_MIN_ROWS: chunks of 16 and more read panels (the default is higher: model.PANEL_MIN_ROWS)


@pytest.mark.parametrize("qtype", ["Q4_1", pytest.param("Q6_K", marks=pytest.mark.slow)])
def test_cpu_prefill_reads_half_panels(tmp_path, qtype):
  """A CPU prefill chunk of >= PANEL_MIN_ROWS tokens multiplies by each quantized matrix dequantized into a float16 panel: its
  logits are the reference's with the layers' matrices rounded to half, in one chunk or cut into several; the decode step after
  it (a matrix-vector product on the quantized bytes, over the cache the chunks wrote) stays within float32's tolerance."""
  from tinygrad.llm.model import fuses_cheaply
  path, cfg, w = build(tmp_path, "llama", qtype, context=128)
  tokens = [int(t) for t in np.random.default_rng(3).integers(0, cfg.vocab, 2 * PANEL_ROWS + 3)]
  halved = {k: v.astype(np.float16).astype(np.float32) if k.startswith("blk.") and v.ndim == 2 else v for k, v in w.items()}
  ref, ref_half = reference_forward(w, cfg, tokens), reference_forward(halved, cfg, tokens)
  for chunk in (128, PANEL_ROWS):  # one chunk of 64 (34 tokens, padded); three of 16
    with Context(PANEL_MIN_ROWS=PANEL_ROWS):
      llm = LLM.load(path, prefill_chunk=chunk)
      if fuses_cheaply(llm.model.norm.device): pytest.skip("a GPU-style device prefills without panels")
      # the output head (one row: a matrix-vector product) with x in float32: x as int16 (block_dot's default) errs by about
      # as much as the half rounding this test tells apart
      with Context(BLOCK_DOT=2): ours = llm.prefill(tokens[:-1])[0].numpy()[0]
    check(ours, ref_half[-2])
    # much closer to the half-panel reference than that is to the exact one: the panels are what ran
    assert np.abs(ours - ref_half[-2]).max() < 0.1 * np.abs(ref_half[-2] - ref[-2]).max()
    check(llm._run_chunk(tokens[-1:], len(tokens) - 1).numpy()[0], ref[-1])


def test_cpu_prefill_below_panel_rows_is_float32(tmp_path):
  """A CPU prefill chunk of fewer than PANEL_MIN_ROWS tokens (the default's 16- and 64-token chunks) multiplies by the weights
  dequantized in float32 inside the matmul kernels: its logits are the exact reference's within float32's tolerance, and much
  closer to it than the half-rounded weights' logits are (a panel would have rounded them)."""
  from tinygrad.llm.model import PANEL_MIN_ROWS, fuses_cheaply
  path, cfg, w = build(tmp_path, "llama", "Q4_1", context=128)
  tokens = [int(t) for t in np.random.default_rng(3).integers(0, cfg.vocab, 2 * PANEL_ROWS + 3)]
  halved = {k: v.astype(np.float16).astype(np.float32) if k.startswith("blk.") and v.ndim == 2 else v for k, v in w.items()}
  ref, ref_half = reference_forward(w, cfg, tokens), reference_forward(halved, cfg, tokens)
  for chunk in (64, PANEL_ROWS):
    assert chunk < PANEL_MIN_ROWS.value
    llm = LLM.load(path, prefill_chunk=chunk)
    if fuses_cheaply(llm.model.norm.device): pytest.skip("a GPU-style device prefills on tensor cores")
    with Context(BLOCK_DOT=2): ours = llm.prefill(tokens[:-1])[0].numpy()[0]
    check(ours, ref[-2])
    assert np.abs(ours - ref[-2]).max() < 0.1 * np.abs(ref_half[-2] - ref[-2]).max()


@pytest.mark.parametrize("arch,qtype", [pytest.param("qwen2", "Q8_0", marks=pytest.mark.slow), ("qwen3", "Q4_K"), ("qwen3moe", "Q5_0")])
def test_architectures(tmp_path, arch, qtype):
  path, cfg, w = build(tmp_path, arch, qtype)
  ref = reference_forward(w, cfg, TOKENS[:7])
  check(Transformer.from_gguf(path).logits(TOKENS[:7], all_logits=True).numpy()[0], ref)
  # and through the engine: a prefill chunk, then one token at a time (the MoE model runs eagerly: its router reads back its choice)
  llm = LLM.load(path, prefill_chunk=4)
  assert llm.jit == (arch != "qwen3moe")
  check(llm.prefill(TOKENS[:4])[0].numpy()[0], ref[3])
  for i in (4, 5, 6):
    check(llm._run_chunk([TOKENS[i]], i).numpy()[0], ref[i])
    llm.cached.append(TOKENS[i])


def test_matrices_stacked_where_types_match(tmp_path):
  """q/k/v and gate/up are stacked into one matrix each at load when their types match, and kept apart when a GGUF quantizes
  them differently; the logits are the reference's either way."""
  for types, stacked in ((None, True), ({"attn_v.weight": "Q8_0", "ffn_up.weight": "Q8_0"}, False)):
    cfg = SynthConfig(arch="llama")
    path = str(tmp_path / f"llama-{stacked}.gguf")
    w = write_model(path, cfg, "Q4_0", types=types)
    model = Transformer.from_gguf(path, max_context=64)
    attn, ffn = model.layers[0].attn, model.layers[0].ffn
    assert (attn.wqkv is not None, ffn.gate_up is not None) == (stacked, stacked)
    assert (attn.wq is None) == stacked and (ffn.gate is None) == stacked
    check(model.logits(TOKENS, all_logits=True).numpy()[0], reference_forward(w, cfg, TOKENS))


def test_float_weights_load_without_conversion_kernels(tmp_path):
  """F16 and F32 tensors are read from the file as their own dtype: the copies bring the values, so loading runs only the
  kernels that build something (the rope tables, the cache; a stack whose parts are not back to back in the file), none per
  weight, and every weight holds the file's values exactly."""
  from tinygrad import dtypes
  from tinygrad.helpers import GlobalCounters
  cfg = SynthConfig(arch="llama", n_layers=4)
  path = str(tmp_path / "f16.gguf")
  w = write_model(path, cfg, "F16")
  GlobalCounters.reset()
  with Context(NORM_FOLD=0):  # a GPU folds the norms into q/k/v and gate/up at load, a kernel each (test_norm_fold.py)
    model = Transformer.from_gguf(path, max_context=64)
  # q, k, v and gate, up back to back in this file: each stack is one read (a copy), so only the whole model's few kernels
  # run: the rope tables (3: the frequencies, cos, sin) and, where the allocator has no zeroed memory (CUDA), one zero fill
  # of each layer's KV cache; 8 a layer before the native reads, 2 a layer before the stacks were read whole
  from tinygrad import Device
  zero_fills = 0 if hasattr(Device[Device.DEFAULT].allocator, "alloc_zeroed") else cfg.n_layers
  assert (base := GlobalCounters.kernel_count) <= 3 + zero_fills, f"{base} kernels to load {cfg.n_layers} layers"
  layer = model.layers[0]
  assert layer.attn.wo.raw.dtype == dtypes.float16 and layer.attn_norm.dtype == dtypes.float32
  np.testing.assert_array_equal(layer.attn.wo.raw.numpy().reshape(w["blk.0.attn_output.weight"].shape), w["blk.0.attn_output.weight"].astype(np.float16))
  np.testing.assert_array_equal(layer.attn_norm.numpy(), w["blk.0.attn_norm.weight"])
  check(model.logits(TOKENS, all_logits=True).numpy()[0], reference_forward(w, cfg, TOKENS))
  # llama.cpp's order (k, output, q, v): q, k and v are read apart and concatenated by a kernel a layer; gate and up still one read
  path = str(tmp_path / "f16-kqv.gguf")
  w = write_model(path, cfg, "F16", kqv_order=True)
  GlobalCounters.reset()
  with Context(NORM_FOLD=0): model = Transformer.from_gguf(path, max_context=64)
  assert GlobalCounters.kernel_count == base + cfg.n_layers, (GlobalCounters.kernel_count, base)
  np.testing.assert_array_equal(model.layers[1].attn.wqkv.raw.numpy().reshape(-1, cfg.dim),
                                np.concatenate([w[f"blk.1.attn_{n}.weight"] for n in "qkv"]).astype(np.float16))
  check(model.logits(TOKENS, all_logits=True).numpy()[0], reference_forward(w, cfg, TOKENS))


def test_unsupported(tmp_path):
  import gguf
  p = str(tmp_path / "gpt2.gguf")
  w = gguf.GGUFWriter(p, "gpt2")
  w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
  with pytest.raises(UnsupportedModel, match="architecture 'gpt2' is not supported"): Transformer.from_gguf(p)
  p = str(tmp_path / "q2k.gguf")
  w = gguf.GGUFWriter(p, "llama")
  for k, v in {"block_count": 0, "embedding_length": 256, "attention.head_count": 4}.items(): w.add_uint32(f"llama.{k}", v)
  w.add_tensor("token_embd.weight", np.zeros((2, 84), np.uint8), raw_shape=(2, 84), raw_dtype=gguf.GGMLQuantizationType.Q2_K)
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
  with pytest.raises(UnsupportedQuantization, match="'token_embd.weight' is Q2_K, which is not supported"): Transformer.from_gguf(p)


# ---- hostile metadata and tensors (issue 20): an UnsupportedModel (a GGUFError) naming the key or tensor and the file

def synth_parts(tmp_path, qtype="F32"):
  from llm_synth import write_model
  src = str(tmp_path / "src.gguf")
  write_model(src, SynthConfig(), qtype)
  return model_parts(src)


BAD_METADATA = [
  ("llama.rope.freq_base", float("nan")), ("llama.rope.freq_base", -10000.0), ("llama.rope.freq_base", 0.0),
  ("llama.attention.layer_norm_rms_epsilon", float("nan")), ("llama.attention.layer_norm_rms_epsilon", -1e-5),
  ("llama.attention.layer_norm_rms_epsilon", 0.0), ("llama.attention.layer_norm_rms_epsilon", float("inf")),
  ("llama.attention.head_count", 0), ("llama.attention.head_count", -4), ("llama.attention.head_count_kv", 3),
  ("llama.attention.head_count_kv", 0), ("llama.context_length", 0), ("llama.context_length", -5), ("llama.context_length", 2 ** 40),
  ("llama.embedding_length", 0), ("llama.attention.key_length", 63), ("llama.vocab_size", 2 ** 40), ("llama.block_count", "1"),
  ("llama.block_count", -1), ("llama.rope.freq_base", "fast"), ("llama.attention.head_count", [4, 4]), ("llama.expert_used_count", 2)]


@pytest.mark.parametrize("key,value", BAD_METADATA, ids=[f"{k.split('.', 1)[1]}={v}" for k, v in BAD_METADATA])
def test_bad_metadata_is_refused(tmp_path, key, value):
  meta, tensors = synth_parts(tmp_path)
  meta[key] = value
  p = tmp_path / "bad.gguf"
  write_gguf(p, meta, tensors)
  with pytest.raises(UnsupportedModel, match=f"{p}: .*{key.split('.', 1)[1]}") as e: Transformer.from_gguf(str(p))
  assert isinstance(e.value, GGUFError)


def test_huge_block_count_fails_fast(tmp_path):
  # block_count 2^31 looped over every layer index (forever, in effect)
  meta, tensors = synth_parts(tmp_path)
  for n in (2 ** 31, 1000):
    meta["llama.block_count"] = Typed(UINT32, n)
    write_gguf(tmp_path / "bad.gguf", meta, tensors)
    with pytest.raises(UnsupportedModel, match=f"{tmp_path / 'bad.gguf'}: .*block_count is {n}"): Transformer.from_gguf(str(tmp_path / "bad.gguf"))


def _drop(tensors, name): return [t for t in tensors if t[0] != name]
def _reshape(tensors, name, shape): return [(n, shape if n == name else s, ty, raw) for n, s, ty, raw in tensors]


BAD_TENSORS = [  # each raised a bare KeyError / IndexError / ZeroDivisionError, or loaded and failed later
  ("head_count 0", lambda m, t: ({**m, "llama.attention.head_count": 0, "llama.attention.key_length": None}, t), "head_count"),
  ("missing attn_output", lambda m, t: (m, _drop(t, "blk.0.attn_output.weight")), "'blk.0.attn_output.weight' is missing"),
  ("missing ffn_down", lambda m, t: (m, _drop(t, "blk.0.ffn_down.weight")), "'blk.0.ffn_down.weight' is missing"),
  ("missing output_norm", lambda m, t: (m, _drop(t, "output_norm.weight")), "'output_norm.weight' is missing"),
  ("1-D embedding", lambda m, t: (m, _reshape(t, "token_embd.weight", (64 * 256,))), "'token_embd.weight' has shape"),
  ("empty vocabulary", lambda m, t: ({**m, "llama.vocab_size": 0, "tokenizer.ggml.tokens": []}, _reshape(t, "token_embd.weight", (0, 256))),
   "vocabulary is empty"),
  ("q of the wrong width", lambda m, t: (m, _reshape(t, "blk.0.attn_q.weight", (256, 128))), "'blk.0.attn_q.weight' has shape"),
  ("norm of the wrong size", lambda m, t: (m, _reshape(t, "blk.0.attn_norm.weight", (128,))), "'blk.0.attn_norm.weight' has shape"),
  ("no architecture", lambda m, t: ({k: v for k, v in m.items() if k != "general.architecture"}, t), "architecture None is not supported")]


@pytest.mark.parametrize("case,edit,match", BAD_TENSORS, ids=[c[0] for c in BAD_TENSORS])
def test_bad_tensors_are_refused(tmp_path, case, edit, match):
  meta, tensors = edit(*synth_parts(tmp_path))
  meta = {k: v for k, v in meta.items() if v is not None}
  p = tmp_path / "bad.gguf"
  write_gguf(p, meta, tensors)
  with pytest.raises(UnsupportedModel, match=f"{p}: .*{match}"): Transformer.from_gguf(str(p))


def test_rewritten_model_still_loads(tmp_path):
  # the raw writer's copy of a valid model loads and computes the same logits (so the cases above differ only in what they break)
  from llm_synth import write_model
  src = str(tmp_path / "src.gguf")
  write_model(src, SynthConfig(), "F32")
  write_gguf(tmp_path / "copy.gguf", *model_parts(src))
  a, b = Transformer.from_gguf(src), Transformer.from_gguf(str(tmp_path / "copy.gguf"))
  np.testing.assert_array_equal(a.logits([1, 2, 3]).numpy(), b.logits([1, 2, 3]).numpy())


BAD_TOKENIZER = [("tokenizer.ggml.tokens", 5), ("tokenizer.ggml.tokens", []), ("tokenizer.ggml.tokens", [1, 2]),
                 ("tokenizer.ggml.token_type", [1, 2]), ("tokenizer.ggml.token_type", "x"), ("tokenizer.ggml.bos_token_id", 10 ** 6),
                 ("tokenizer.ggml.eos_token_id", -1), ("tokenizer.ggml.model", 3), ("tokenizer.ggml.model", "wordpiece"),
                 ("tokenizer.ggml.merges", [1]), ("tokenizer.ggml.pre", [1]), ("tokenizer.ggml.add_bos_token", 2), ("tokenizer.chat_template", 7)]


@pytest.mark.parametrize("key,value", BAD_TOKENIZER, ids=[f"{k.split('.')[-1]}={v!r}"[:40] for k, v in BAD_TOKENIZER])
def test_bad_tokenizer_metadata_is_refused(tmp_path, key, value):
  # these were TypeError/AttributeError/IndexError from inside the tokenizer (no file name), found by the GGUF fuzzer
  meta, tensors = synth_parts(tmp_path)
  meta[key] = value
  p = tmp_path / "bad.gguf"
  write_gguf(p, meta, tensors)
  with pytest.raises(UnsupportedModel, match=f"{p}: .*(tokenizer|{key})"): LLM.load(str(p), max_context=64)


def test_prefill_chunk_sizes(tmp_path):
  """Prompts are cut into power-of-two chunks up to prefill_chunk, from 32 on a GPU and from 16 on a CPU (a short rest pads to
  the smallest chunk that holds it, not to the longest), each size with its own capture; logits still match the reference."""
  from tinygrad.llm.model import fuses_cheaply
  path, cfg, w = build(tmp_path, "llama", "F32", context=256)
  tokens = [int(t) for t in np.random.default_rng(1).integers(0, cfg.vocab, 170)]
  ref = reference_forward(w, cfg, tokens)
  llm = LLM.load(path, prefill_chunk=128)
  ns = (2, 32, 33, 64, 65, 128, 500)
  if fuses_cheaply(llm.model.norm.device):
    assert llm.chunks == [32, 64, 128]
    assert [llm._chunk_size(n) for n in ns] == [32, 32, 64, 64, 128, 128, 128]
  else:
    assert llm.chunks == [16, 32, 64, 128]
    assert [llm._chunk_size(n) for n in ns] == [16, 32, 64, 64, 128, 128, 128]
  logits, _ = llm.prefill(tokens)  # 128 + 42 (padded to 64)
  check(logits.numpy()[0], ref[-1])
  assert sorted(size for size, _ in llm._prefill_jits) == [llm._chunk_size(42), 128]
  with pytest.raises(ValueError, match="slack"): LLM.load(path, prefill_chunk=100_000)


@pytest.mark.parametrize("one_kernel", [1, 0], ids=["flash", "tensor_ops"])
@pytest.mark.parametrize("qtype", ["F16", "Q8_0"])
def test_prefill_on_tensor_cores(tmp_path, qtype, one_kernel):
  """A chunk of >= TC_MIN_ROWS tokens on a device with float16 tensor cores (PYTHON::sm_80 emulates an A100's bit-exactly): the
  matmuls read half activations and weights (F16 as stored, a quantized weight dequantized to half by its own kernel) and
  accumulate in float32 on the tensor cores, and so does attention over a float16 cache: one flash-style kernel a layer
  (prefill_attention.py), or with PREFILL_ATTENTION=0 its two matmuls; logits match the float64 reference to half precision's
  tolerance."""
  from tinygrad import Tensor, dtypes
  from tinygrad.codegen.opt import OptOps
  from tinygrad.engine import realize
  from tinygrad.helpers import Context
  from tinygrad.llm.model import TC_MIN_ROWS, uses_tensor_cores
  path, cfg, w = build(tmp_path, "llama", qtype, dim=128, ff_dim=128, n_heads=2, n_kv_heads=1)
  tokens = TOKENS + TOKENS[:TC_MIN_ROWS - len(TOKENS)]
  with Context(DEV="PYTHON::sm_80", PREFILL_ATTENTION=one_kernel, PA_MIN_BLOCKS=1):  # a toy model's chunk is a block or two
    model = Transformer.from_gguf(path, cache_dtype=dtypes.float16)  # a half cache: attention on tensor cores too
    assert len(tokens) == TC_MIN_ROWS and uses_tensor_cores(Tensor.empty(1, TC_MIN_ROWS, cfg.dim), model.layers[0].ffn.down)
    realize.capturing.append(seen := realize.Capture())  # what runs, as TinyJit records it
    try: logits = model.logits(tokens).numpy()[0]
    finally: realize.capturing.remove(seen)
  names = [it.runner.spec.name for it, _ in seen.items if it.runner is not None]
  tc = [it.runner.spec.name for it, _ in seen.items if it.runner is not None and any(o.op is OptOps.TC for o in it.runner.spec.opts)]
  # qkv, output, gate/up, down (and attention's scores and probabilities x values without the one kernel)
  assert len(tc) >= (4 if one_kernel else 6) * cfg.n_layers, tc
  assert sum(n.startswith("prefill_attention") for n in names) == (cfg.n_layers if one_kernel else 0), names
  ref = reference_forward(w, cfg, tokens)[-1]
  np.testing.assert_allclose(logits, ref, rtol=0, atol=5e-3 * np.abs(ref).max())
