"""Transformer language models from GGUF: llama (Llama 3.x, SmolLM2), qwen2 (qkv bias), qwen3 (qk-norm), qwen3moe (mixture of experts).

Quantized weights stay quantized in memory (raw GGUF bytes in uint8 Tensors); every matmul dequantizes its weight inside the
graph, so the scheduler fuses the dequantization into the matmul kernel.

`Transformer.forward(tokens, start_pos)` is a pure function of the tokens (a (1, T) int32 Tensor of ids on the device:
`token_ids(ids)`; or their rows of the quantized embedding table, a (1, T, row_bytes) uint8 Tensor: `token_rows(ids)`) and the
position of the first one, over a preallocated KV cache that it updates in place. `start_pos` is an int or a bound symbolic
Variable: with a Variable every shape is static, which is what TinyJit needs to replay one capture for many positions (see
engine.py). Attention spans the first `attn_len` positions of the cache (masked past start_pos + T): a power of two that covers
the chunk, so its work follows the position, and the engine keeps one capture per span.

The KV cache is written with an assign into the slice at start_pos (`Attention._write_cache`).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any, overload

from tinygrad import Tensor, Variable, dtypes
from tinygrad.dtype import DType
from tinygrad.helpers import ContextVar
from tinygrad.llm.decode_attention import applies as decode_attention_applies
from tinygrad.llm.decode_attention import combine_split, decode_attention_kernel, split_parts
from tinygrad.llm.decode_attention import o_applies as decode_attention_o_applies
from tinygrad.llm.decode_attention_gqa import combine_kernel as gqa_combine_kernel
from tinygrad.llm.decode_attention_gqa import gqa_attention_kernel, gqa_parts
from tinygrad.llm.decode_attention_gqa import grid_blocks as gqa_grid_blocks
from tinygrad.llm.decode_ffn import ROWS as FFN_ROWS
from tinygrad.llm.decode_ffn import applies as decode_ffn_applies
from tinygrad.llm.decode_ffn import decode_ffn_kernel, down_tiles
from tinygrad.llm.gguf import GGUFError, GGUFFile, load_bytes, read_gguf
from tinygrad.llm.head_screen import HEAD_SCREEN, ScreenedHead
from tinygrad.llm.head_screen import kernel_applies as screen_applies
from tinygrad.llm.prefill_attention import pick_tensor_core, prefill_attention_kernel
from tinygrad.llm.quants import BLOCK_PARTS, BLOCK_SIZES, DEQUANTIZERS, NATIVE_DTYPES, UnsupportedQuantization, dequantize
from tinygrad.llm.sampling import greedy, gumbel_noise, sample_temperature
from tinygrad.reuse import KernelReuse
from tinygrad.uop.ops import UOp

CACHE_SLACK = 512  # >= the longest prefill chunk (engine.py): see Attention._write_cache
BLOCK_DOT = ContextVar("BLOCK_DOT", -1)  # a CPU matrix-vector product: 0 dequantizes each weight; 1, 2, 3: block_dot's forms; -1: by CPU


@functools.cache
def _cpu_vendor() -> str:
  try:
    with open("/proc/cpuinfo") as f: return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("vendor_id")), "")
  except OSError: return ""


def block_dot_form(device: str | None = None) -> int:
  """BLOCK_DOT, or where unset (-1) the faster exact-enough form on this CPU. int8 x (3, llama.cpp's form: byte dot-product
  instructions, renderer.dot_products, x86's vpdpbusd; 1.3-1.5x faster per product on an AVX-512 Xeon) is opt-in: its
  rounding (4-8e-3 of a block's largest, like llama.cpp's) tips SmolLM2's near-tie first answer to "What is the capital of
  France?" from "Paris" to "L'Etoile" (llama.cpp answers the same). Unset: int16 x (1), which sums each block's
  products horizontally, shuffles that AMD's Zen cores issue on several ports and Intel's on one: measured 1.1-1.2x faster
  than float x (2) per product on an AMD EPYC (bench/llm_matvec.py), 1.8x slower in SmolLM2's decode on an Intel Xeon with
  AVX-512 (bench/README.md)."""
  if BLOCK_DOT.value >= 0: return BLOCK_DOT.value
  return 1 if _cpu_vendor() == "AuthenticAMD" else 2


# a CPU matmul with at least this many rows reads a dequantized weight panel (QuantWeight.panel, linear); fewer rows multiply by
# the weight dequantized inside the matmul kernel. Measured on a 2-core AVX-512 Xeon (bench/README.md, session 13), one SmolLM2
# layer's four Q4_1 matmuls, panel / fused: 8 rows 2.49 / 2.03 ms, 16 rows 2.65 / 1.75, 32 rows 3.46 / 2.13, 64 rows 5.03 / 3.96,
# 128 rows 6.55 / 5.69, 256 rows 7.11 / 11.24 (from 256 rows the panel's matmul is cache-blocked and 8x32-wide); with 64 rows of x
# as the fused kernel's lanes (core's conv_lanes DECODED_LANE_WIDTHS): 64 rows 2.77, 128 rows 5.3 / 7.6, 256 rows 10.2 / 9.5
PANEL_MIN_ROWS = ContextVar("PANEL_MIN_ROWS", 256)
# one token on a GPU: the gate's and the up's matrix-vector products as two sibling reductions of one kernel (FeedForward);
# 0: as one product over the stacked matrix, and silu(gate) * up a kernel of its own. Measured on the H200 (bench/README.md):
# SmolLM2's Q4_1 decode step 671 -> 619 us; Llama-1B's F16 step 940 -> 934 us once the kernel got 2 rows a thread as the stacked
# one has (the heuristics had counted the shared vector's loads once per sibling and given it 4: 278 -> 378 us a step)
GATE_UP_SIBLINGS = ContextVar("GATE_UP_SIBLINGS", 1)
# one token on a GPU: attention as one hand-written kernel (decode_attention.py) that also writes the cache where q/k/v are one
# buffer (one kernel a layer; on the H200 Llama-1B 839 -> 823 us a step, SmolLM2 595 -> 536: bench/README.md, session 22);
# 1: after a cache write kernel of its own; 0: the Tensor-op form's four kernels after the cache write
DECODE_ATTENTION = ContextVar("DECODE_ATTENTION", 2)
# one token on a GPU, float16 gate/up and down: 1, the feed-forward block as one kernel split along the hidden dimension
# (decode_ffn.py) and a sum of its partials, its down matrices also stored as decode_ffn.down_tiles (set while loading: 2 bytes
# more a down weight); 0 (the default), the gate/up kernel and the down kernel. Off because slower so far: Llama-1B on the H200
# 821 -> 840 us a step (bench/README.md, session 31)
DECODE_FFN = ContextVar("DECODE_FFN", 0)
# one token on a GPU with a float16 output projection, where the attention kernel writes the cache: R > 0, that kernel also
# applies the projection and adds it into the residual stream (atomic adds, in place: decode_attention.py's o_parts), a block
# per (head, R-th of the rows); 0, the projection and the residual add as a kernel of their own. Off: break-even on an H100 (Llama-1B
# 1,019.7 against 1,019.4 us a step), and with DECODE_FFN=2 (three kernels a layer) 1.2% slower (bench/README.md, session 32).
# Set while loading: a layer whose norms were folded (NORM_FOLD) runs the separate kernels
DECODE_ATTN_O = ContextVar("DECODE_ATTN_O", 0)
# spans past decode_attention.applies: the split kernel (0: the Tensor-op form; 2 or more: that many parts, for experiments)
DECODE_SPLIT = ContextVar("DECODE_SPLIT", 1)
# one token on a GPU: spans of at least this many positions run decode_attention_gqa's kernel (a block per kv head and 128 or
# 256 positions, every query head of the kv head's group in it; a group of one without grouped queries) and the partials' sum
# where there are several parts (0: never). Llama-1B at a 2,048-position span 1,443 -> 1,053 us a step on an H100 (bench/README.md,
# session 35); from 128 positions (one block a kv head there) instead of 256, at a 128-position span on an H100 (session 44):
# Llama-1B 889.1 -> 879.6, Qwen3-1.7B's sizes 1,430.6 -> 1,324.2, SmolLM2 514.7 -> 513.2
DECODE_GQA = ContextVar("DECODE_GQA", 128)
# ... its blocks ask for an SM each while there are at most this many (0: the GPU's SM count; past it, they would run in waves)
DECODE_GQA_SPREAD = ContextVar("DECODE_GQA_SPREAD", 0)
# a GPU's float16 q/k/v and gate/up matrices with the RMSNorm weights before them folded in at load (fold_norm; not
# with DECODE_FFN or DECODE_ATTN_O set while loading, whose kernels take the norm's weight); 0: kept apart
NORM_FOLD = ContextVar("NORM_FOLD", 1)
# a GPU's one-token step stores silu(gate) * up as float16 for the down product (its kernel reads 2 bytes of the vector a column
# instead of 4): Llama-1B 1,037 -> 1,027 us, SmolLM2 540 -> 532 on an H100 (session 33); 0: float32
FFN_HALF = ContextVar("FFN_HALF", 1)
# a prefill chunk's attention on half tensor cores as one flash-style kernel (prefill_attention.py); 0: the four Tensor-op kernels
PREFILL_ATTENTION = ContextVar("PREFILL_ATTENTION", 1)
TC_MIN_ROWS = 16  # a matmul with at least this many rows (tokens) runs on the tensor cores where the device has half-precision ones

SUPPORTED_ARCHS = ("llama", "qwen2", "qwen3", "qwen3moe")
ATTN_BUCKET = 64  # attention spans the cache up to a power of two >= this (see Transformer.attn_len)


class UnsupportedModel(GGUFError):
  """A GGUF file whose model this loader can't run: an unsupported architecture, or metadata or tensors missing or out of
  range (a GGUFError, so a ValueError). The message names the file and the key or tensor."""


MAX_DIM = 1 << 20          # any width (embedding, feed-forward, head dim, vocabulary) past this is a corrupt file, not a model
MAX_CONTEXT = 1 << 24      # context_length: the KV cache is sized by it when no max_context is given
MAX_HEADS = 1 << 12


def _int_key(g: GGUFFile, key: str, default: int | None, lo: int, hi: int) -> int:
  """Metadata `key` as an int in [lo, hi] (its default when absent, an error when that is None)."""
  v = g.get(key, default)
  if v is None: raise UnsupportedModel(f"{g.path}: metadata {key} is missing")
  if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
    raise UnsupportedModel(f"{g.path}: metadata {key} is {str(v)[:60]}, expected an integer from {lo} to {hi}; the file is corrupt or not a model this loader knows")
  return v


def _float_key(g: GGUFFile, key: str, default: float, lo: float, hi: float) -> float:
  """Metadata `key` as a finite number in (lo, hi] (its default when absent): NaN, negative or zero epsilons and RoPE bases
  would load and then compute garbage."""
  v = g.get(key, default)
  if not isinstance(v, (int, float)) or isinstance(v, bool) or not (math.isfinite(v) and lo < v <= hi):
    raise UnsupportedModel(f"{g.path}: metadata {key} is {str(v)[:60]}, expected a finite number above {lo} and at most {hi}; the file is corrupt")
  return float(v)


@dataclass
class ModelConfig:
  arch: str
  n_layers: int
  dim: int
  ff_dim: int
  n_heads: int
  n_kv_heads: int
  head_dim: int
  vocab_size: int
  norm_eps: float = 1e-5
  rope_base: float = 10000.0
  rope_neox: bool = False            # rotate (x[i], x[i + d/2]) pairs (qwen) instead of (x[2i], x[2i+1]) (llama's GGUF layout)
  context_length: int = 2048
  n_experts: int = 0
  n_experts_used: int = 0
  expert_ff_dim: int = 0
  extra: dict[str, Any] = field(default_factory=dict)

  @staticmethod
  def from_gguf(g: GGUFFile) -> ModelConfig:
    """The model's settings from the metadata, each checked (type and range): an error names the key and the file."""
    arch = g.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
      raise UnsupportedModel(f"{g.path}: model architecture {repr(arch)[:60]} is not supported (supported: {', '.join(SUPPORTED_ARCHS)})")
    n_heads = _int_key(g, f"{arch}.attention.head_count", None, 1, MAX_HEADS)
    dim = _int_key(g, f"{arch}.embedding_length", None, 1, MAX_DIM)
    n_kv = _int_key(g, f"{arch}.attention.head_count_kv", n_heads, 1, n_heads)
    if n_heads % n_kv: raise UnsupportedModel(f"{g.path}: {n_heads} attention heads can't be shared by {n_kv} kv heads ({arch}.attention.head_count_kv)")
    if f"{arch}.attention.key_length" not in g.metadata and dim % n_heads:
      raise UnsupportedModel(f"{g.path}: {arch}.embedding_length {dim} is not a multiple of {arch}.attention.head_count {n_heads}")
    head_dim = _int_key(g, f"{arch}.attention.key_length", dim // n_heads, 2, MAX_DIM)
    if head_dim % 2: raise UnsupportedModel(f"{g.path}: metadata {arch}.attention.key_length is {head_dim}, but RoPE needs an even head dimension")
    if "token_embd.weight" in g.tensors and len(g.tensors["token_embd.weight"].shape) == 2: table_rows = g.tensors["token_embd.weight"].shape[0]
    else: table_rows = len(g.get("tokenizer.ggml.tokens", []) or [])
    # vocab_size when given (0 means unset), else the embedding table's rows; Transformer.from_gguf checks the table against it
    vocab = _int_key(g, f"{arch}.vocab_size", None, 1, 1 << 24) if g.get(f"{arch}.vocab_size") else table_rows
    rope_dim = _int_key(g, f"{arch}.rope.dimension_count", head_dim, 1, MAX_DIM)
    if rope_dim != head_dim:
      raise UnsupportedModel(f"{g.path}: partial rotary embeddings (rope.dimension_count {rope_dim} != head dim {head_dim}) are not supported")
    if _int_key(g, f"{arch}.attention.value_length", head_dim, 1, MAX_DIM) != head_dim:
      raise UnsupportedModel(f"{g.path}: attention value_length != key_length is not supported")
    n_experts = _int_key(g, f"{arch}.expert_count", 0, 0, 1 << 12)
    return ModelConfig(
      arch=arch, n_layers=_int_key(g, f"{arch}.block_count", None, 0, 1 << 16), dim=dim,
      ff_dim=_int_key(g, f"{arch}.feed_forward_length", 0, 0, MAX_DIM), n_heads=n_heads, n_kv_heads=n_kv,
      head_dim=head_dim, vocab_size=vocab, norm_eps=_float_key(g, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0),
      rope_base=_float_key(g, f"{arch}.rope.freq_base", 10000.0, 1.0, 1e30), rope_neox=arch != "llama",
      context_length=_int_key(g, f"{arch}.context_length", 2048, 1, MAX_CONTEXT),
      n_experts=n_experts, n_experts_used=_int_key(g, f"{arch}.expert_used_count", 0, 0, n_experts),
      expert_ff_dim=_int_key(g, f"{arch}.expert_feed_forward_length", 0, 0, MAX_DIM))


def check_tokenizer_metadata(g: GGUFFile) -> None:
  """The tokenizer.* metadata has the types and ranges Tokenizer.from_gguf relies on (a list of strings, ids inside it, ...):
  a corrupt file is an UnsupportedModel naming the key and the file, not a TypeError from deep inside the tokenizer."""
  def fail(key: str, want: str) -> UnsupportedModel:
    return UnsupportedModel(f"{g.path}: metadata {key} is {str(g.get(key))[:60]}, expected {want}; the file is corrupt")
  tokens = g.get("tokenizer.ggml.tokens")
  if tokens is None: raise UnsupportedModel(f"{g.path}: the GGUF has no tokenizer (tokenizer.ggml.tokens is missing)")
  # a GGUF array has one element type, so its first element's type is every element's (no pass over a 50k vocabulary)
  if not isinstance(tokens, list) or not tokens or type(tokens[0]) is not str:
    raise fail("tokenizer.ggml.tokens", "a non-empty list of strings")
  n = len(tokens)
  for name, kinds, want in (("token_type", {int}, "integers"), ("scores", {int, float}, "numbers")):
    v = g.get(f"tokenizer.ggml.{name}")
    if v is not None and (not isinstance(v, list) or len(v) != n or type(v[0]) not in kinds):
      raise fail(f"tokenizer.ggml.{name}", f"a list of {n} {want}, one per token")
  merges = g.get("tokenizer.ggml.merges")
  if merges is not None and (not isinstance(merges, list) or (merges and type(merges[0]) is not str)): raise fail("tokenizer.ggml.merges", "a list of strings")
  for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.chat_template"):
    if g.get(key) is not None and not isinstance(g.get(key), str): raise fail(key, "a string")
  for name in ("bos", "eos", "eot", "eom", "unknown"):
    v = g.get(f"tokenizer.ggml.{name}_token_id")
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < n): raise fail(f"tokenizer.ggml.{name}_token_id", f"a token id below {n}")
  for name in ("add_bos_token", "add_space_prefix"):
    if g.get(f"tokenizer.ggml.{name}") is not None and not isinstance(g.get(f"tokenizer.ggml.{name}"), bool): raise fail(f"tokenizer.ggml.{name}", "a bool")


# ---- weights

class QuantWeight:
  """A weight kept as its GGUF bytes; `dequant()` is the lazy float32 tensor (dequantized inside whatever kernel consumes it).
  F16/F32 weights are read from the file as their own dtype (`_read_weight`): `raw` is then a 1-D tensor of that dtype."""

  def __init__(self, raw: Tensor, type_name: str, shape: tuple[int, ...]):
    if type_name not in DEQUANTIZERS: raise UnsupportedQuantization(f"ggml type {type_name} is not supported (supported: {', '.join(DEQUANTIZERS)})")
    self.raw, self.type_name, self.shape = raw, type_name, shape

  def dequant(self) -> Tensor:
    if self.raw.dtype != dtypes.uint8: return self.raw.reshape(self.shape).cast(dtypes.float32)
    return dequantize(self.raw, self.type_name, self.shape)

  def half(self) -> Tensor:
    """The weight as float16 for a tensor-core matmul: the F16 bytes as they are, anything else dequantized by a kernel (each
    prefill chunk: it costs one pass over the weight's bytes, small beside the matmul over the chunk's rows)."""
    if self.raw.dtype == dtypes.float16: return self.raw.reshape(self.shape)
    return self.dequant().cast(dtypes.float16).contiguous()

  def panel(self) -> Tensor:
    """The weight transposed, (in, out) float16, stored: a CPU prefill chunk's matmul operand (see linear)."""
    return self.dequant().T.cast(dtypes.float16).contiguous()

  def rows(self, start: int, end: int) -> QuantWeight:
    """Rows start..end of the outermost axis (e.g. one expert), still quantized (a view of the same bytes)."""
    row = self.raw.shape[0] // self.shape[0]  # bytes per row (elements, for a native weight)
    return QuantWeight(self.raw[start * row:end * row], self.type_name, (end - start, *self.shape[1:]))


def linear(x: Tensor, w: QuantWeight, bias: Tensor | None = None, scale: Tensor | None = None) -> Tensor:
  """x @ W.T (times `scale`, one factor per row of x, then plus bias) with W (out, in) dequantized inside the matmul kernel.
  Quantized weights reduce over (blocks, elements of a block), two loops, so each block's scales are loaded once per block and
  the dequantized weight needs no index division. Many rows (a prefill chunk) on a GPU with half-precision tensor cores: x (scaled)
  and the weight as float16, accumulated in float32 on the tensor cores (what llama.cpp does too); on a CPU with PANEL_MIN_ROWS
  or more: the weight dequantized once into a float16 panel, and a float32 matmul over it; fewer rows (a CPU prefill chunk of up
  to 128 tokens), each weight dequantized in float32 inside the matmul kernel, which reuses it for a block of rows."""
  if uses_tensor_cores(x, w):
    xh = (x if scale is None else x * scale).cast(dtypes.float16).contiguous()  # the matmul reads stored half rows, not a fused cast
    out = xh.matmul(w.half().T, dtype=dtypes.float32)
    return out + bias if bias is not None else out
  block = BLOCK_SIZES[w.type_name][0]
  if block > 1 and len(w.shape) == 2 and math.prod(x.shape[:-1]) >= PANEL_MIN_ROWS.value and not fuses_cheaply(x.device):
    # many rows on a CPU: the weight dequantized once into a (in, out) float16 panel, then a register-blocked matmul reads it
    # (vector loads along the outputs). Below PANEL_MIN_ROWS the panel's kernel (a pass that writes 2 bytes per weight) costs
    # more than decoding every weight again per block of rows inside the matmul
    out = x.contiguous().matmul(w.panel().cast(dtypes.float32))
  elif block == 1 or len(w.shape) != 2: out = x.matmul(w.dequant().T)
  else:
    n_out, k = w.shape
    # on a CPU the rows of x stored once (x is often the residual times a norm's weight): fused, that product would be computed
    # again for every output row, a multiply per weight (a Q4_1 matrix-vector product: 117 -> 108 us)
    if not fuses_cheaply(x.device): x = x.contiguous()
    # one row (a decode step) on a CPU: llama.cpp's form. Several rows keep the form below (its kernel reuses each decoded weight
    # for every row; block_dot's nested sums would take the register-blocking heuristics, not tuned for them)
    if w.type_name in BLOCK_PARTS and math.prod(x.shape[:-1]) == 1 and not fuses_cheaply(x.device) and block_dot_form(x.device):
      return _finish(block_dot(x, w), scale, bias)
    wb = DEQUANTIZERS[w.type_name](w.raw.reshape(-1, BLOCK_SIZES[w.type_name][1])).reshape(n_out, k // block, block)
    out = (x.reshape(*x.shape[:-1], 1, k // block, block) * wb).sum((-1, -2))
  return _finish(out, scale, bias)


def _finish(out: Tensor, scale: Tensor | None, bias: Tensor | None) -> Tensor:
  if scale is not None: out = out * scale
  return out + bias if bias is not None else out


def block_dot(x: Tensor, w: QuantWeight) -> Tensor:
  """x @ W.T for a block format w = q * d + m (quants.BLOCK_PARTS), as llama.cpp computes it: per block the dot product of the
  integers q with x, times d once, plus m times the block's sum of x (summed once per x, not per output). Per weight: a nibble,
  a conversion and a multiply-add, instead of also the scale and offset. One kernel: the block sums nest in the sum over
  blocks (schedule/kernelize.py _nests).
  BLOCK_DOT=1 (x_ints): x quantized per block to int16 (small kernels, once per x), integer dot products that LLVM turns
  into vpmaddwd (16 products per instruction), one float multiply per block; x errs by at most 1/65534 of its block's largest
  magnitude. BLOCK_DOT=2: x in float32, the dot products' vector lanes kept through the sum over blocks (codegen/lanes.py).
  BLOCK_DOT=3: x quantized to int8 as llama.cpp does (errs by at most 1/254 of its block's largest magnitude), the products of
  nibbles and x bytes summed by the CPU's byte dot-product instruction (codegen/dot.py: vpdpbusd, 32 products an instruction)
  into int32 lanes kept through the sum over blocks. The instruction multiplies unsigned by signed bytes: Q8_0's signed q is
  taken as q + 128 with an offset of -128 * d, and the offsets multiply the quantized x's block sums (dx * sum(xq), as
  llama.cpp's Q8_1 keeps them), so the + 128 cancels exactly. Measured: bench/README.md (bench/llm_matvec.py, bench/llm_decode.py)."""
  n_out, k = w.shape
  block, type_size = BLOCK_SIZES[w.type_name]
  q, d, m = BLOCK_PARTS[w.type_name](w.raw.reshape(-1, type_size))
  q, d = q.reshape(n_out, k // block, block), d.reshape(n_out, k // block)
  m = m.reshape(n_out, k // block) if m is not None else None
  xb = x.reshape(*x.shape[:-1], 1, k // block, block)
  xs = xb.sum(-1)  # the block sums of x, for the offsets
  if (form := block_dot_form(x.device)) in (1, 3):
    xq, dx = x_ints(xb, dtypes.int16 if form == 1 else dtypes.int8)
    qi = q.cast(dtypes.int32)
    if form == 3:
      if q.dtype == dtypes.int8: qi, m = qi + 128, d * -128  # Q8_0 (no offset of its own): unsigned bytes
      xs = xq.cast(dtypes.int32).sum(-1).cast(dtypes.float32) * dx
    out = (xq.cast(dtypes.int32) * qi).sum(-1).cast(dtypes.float32) * (d * dx)
  else: out = (xb * q.cast(dtypes.float32)).sum(-1) * d
  if m is not None: out = out + xs.contiguous() * m
  return out.sum(-1)


def x_ints(xb: Tensor, dtype: DType) -> tuple[Tensor, Tensor]:
  """(..., blocks, 32) float32 -> (xq, dx): xq of the signed int dtype (int16, int8) with xq * dx ~ xb, dx one float32 per block
  (its largest magnitude / the dtype's largest value: -128 is never used, so int8 x negates in range), both stored (each
  matrix-vector product reads them once per output)."""
  top = dtypes.max(dtype)
  amax = xb.abs().max(-1).maximum(1e-30).contiguous()  # an all-zero block: xq 0, not 0/0
  xq = (xb * (top / amax).unsqueeze(-1)).round().clip(-top, top).cast(dtype).contiguous()
  return xq, amax * (1 / top)


def stored_unless_tensor_cores(x: Tensor, w: QuantWeight) -> Tensor:
  """x, the input of linear(x, w), made contiguous, except where linear() runs on tensor cores: there it stores x as half
  itself, so an extra float32 copy would be one more kernel and twice the bytes (Llama-1B prefill: two per layer)."""
  return x if uses_tensor_cores(x, w) else x.contiguous()


def uses_tensor_cores(x: Tensor, w: QuantWeight) -> bool:
  """Whether linear(x, w) runs as a half-precision tensor-core matmul: a 2-D weight that is F16 or quantized (an F32 model keeps
  float32), at least TC_MIN_ROWS rows of x, and a device whose renderer has float16 tensor cores accumulating in float32."""
  if len(w.shape) != 2 or w.raw.dtype == dtypes.float32 or math.prod(x.shape[:-1]) < TC_MIN_ROWS: return False
  return has_half_tensor_cores(x.device)


def shuffle_lanes(device: str) -> int:
  """The renderer's warp-shuffle lanes (0: none). Not cached by name: one name (NULL) may stand for several renderers in turn."""
  from tinygrad import Device
  return Device.renderer(device).shuffle_lanes


def atomic_adds(device: str) -> tuple:
  """The dtypes the device's renderer adds into global memory atomically (UOp.atomic_add)."""
  from tinygrad import Device
  return Device.renderer(device).atomic_add


def compute_units(device: str) -> int:
  """The device's SMs or CUs (0: unknown)."""
  from tinygrad import Device
  return Device.renderer(device).compute_units


def has_grid_wait(device: str) -> bool:
  """Whether kernels here wait for the grids before them, a wait a hand-written kernel may place itself (uop.dsl.GRID_WAIT)."""
  from tinygrad import Device
  return Device.renderer(device).grid_wait


def attention_tensor_core(device: str, head_dim: int, attn_len: int, rows: int, group: int, n_kv_heads: int):
  """The tensor core prefill_attention.py runs a chunk's attention on here, or None (the Tensor-op form runs it)."""
  from tinygrad import Device
  return pick_tensor_core(Device.renderer(device).tensor_cores, head_dim, attn_len, rows, group, n_kv_heads)


@functools.cache
def has_half_tensor_cores(device: str) -> bool:
  from tinygrad import Device
  return any(tc.dtype_in == dtypes.float16 and tc.dtype_out == dtypes.float32 for tc in Device.renderer(device).tensor_cores)


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
  return x * rms_scale(x, eps) * weight


def rms_scale(x: Tensor, eps: float) -> Tensor:
  """RMSNorm's factor per row, (..., 1): a norm before a matmul is (x * weight) @ W.T times this, so the matmul kernel applies it
  and the normalized rows are never stored."""
  return (x.square().mean(-1, keepdim=True) + eps).rsqrt()


def norm_scale(x: Tensor, eps: float) -> Tensor:
  """rms_scale for the matmuls after a norm. Stored on a CPU. On a GPU the scheduler decides: a decode step's factor (one
  scalar) is summed inside the matrix-vector product's kernel, in its loop over x (schedule/siblings.py: no kernel of its own;
  SIBLING_REDUCE=0 stores it instead)."""
  scale = rms_scale(x, eps)
  return scale if fuses_cheaply(x.device) else scale.contiguous()


def fuses_cheaply(device: str) -> bool:
  """True on GPU-style devices (threads in blocks), where recomputing a little elementwise work inside the kernels that read
  it (RoPE, softmax's exponentials) costs less than a kernel that stores it; on a CPU the recomputation costs more."""
  from tinygrad import Device
  return bool(Device.renderer(device).has_local)


def screens(w: QuantWeight) -> bool:
  """Whether a decode step screens this output matrix (HEAD_SCREEN): a 2-D float16 one on a GPU with warp shuffles of 32 lanes
  or more (the screened-rows kernel's sums), rows that kernel takes. Quantized matrices have as few bytes as the screen already;
  CPUs were not measured."""
  return (bool(HEAD_SCREEN.value) and len(w.shape) == 2 and w.raw.dtype == dtypes.float16 and screen_applies(w.shape[1])
          and fuses_cheaply(w.raw.device) and shuffle_lanes(w.raw.device) >= 32)


# ---- private helpers built from existing Tensor ops (candidates for core)

def one_hot(idx: Tensor, n: int) -> Tensor:
  """(...,) int -> (..., n) float32 one-hot."""
  return (idx.unsqueeze(-1) == Tensor.arange(n, dtype=dtypes.int32, device=idx.device)).cast(dtypes.float32)


@overload
def scalar(v: int, device: str | None = None) -> int: ...
@overload
def scalar(v: UOp, device: str | None = None) -> Tensor: ...
def scalar(v: int | UOp, device: str | None = None) -> Tensor | int:
  """An int stays an int; a symbolic int (bound Variable) becomes a 0-d int32 Tensor, so it can meet tensors in arithmetic."""
  return v if isinstance(v, int) else Tensor(v, dtype=dtypes.int32, device=device)


def attention_first(cfg: ModelConfig, start_pos: int | UOp, B: int, T: int, L: int, device: str, cache_dtype: DType) -> Tensor | None:
  """The chunk's first position as a (1,) int32 tensor (stored once for every layer) where its attention runs as one kernel on
  the tensor cores (prefill_attention.py, PREFILL_ATTENTION): a GPU with half tensor cores, a float16 cache, a chunk of TC_MIN_ROWS
  rows or more that the kernel takes; else None (no kernel for it: a decode step's graph stays as it is)."""
  if B != 1 or T < TC_MIN_ROWS or not PREFILL_ATTENTION.value or cache_dtype != dtypes.float16 or not has_half_tensor_cores(device): return None
  if attention_tensor_core(device, cfg.head_dim, L, T, cfg.n_heads // cfg.n_kv_heads, cfg.n_kv_heads) is None: return None
  return Tensor(start_pos, dtype=dtypes.int32, device=device).reshape(1).contiguous()


def causal_mask(start_pos: int | UOp, T: int, L: int, device: str) -> Tensor:
  """(T, L) bool: query t (at position start_pos + t) sees cache positions <= start_pos + t."""
  pos_q = Tensor.arange(T, dtype=dtypes.int32, device=device).reshape(T, 1) + scalar(start_pos, device)
  return Tensor.arange(L, dtype=dtypes.int32, device=device).reshape(1, L) <= pos_q


@dataclass(frozen=True)
class DecodePosition:
  """In place of the causal mask, for one token whose attention runs as a hand-written kernel (decode_attention*.py): the
  token's position as a bound Variable, which the kernel takes as a parameter (it reads the RoPE tables' row and masks by it),
  and the positions attention spans. cos and sin are then the whole tables: a step has no kernels for its RoPE rows and mask."""
  position: UOp
  attn_len: int


def span(mask: Tensor | DecodePosition) -> int:
  """The positions attention spans: the mask's width."""
  return mask.attn_len if isinstance(mask, DecodePosition) else mask.shape[1]


def select_rows(table: Tensor, start: int | UOp, n: int) -> Tensor:
  """table[start:start+n] for an int or a symbolic start (a view either way: a symbolic shrink becomes index math)."""
  if isinstance(start, int): return table[start:start + n]
  return table.shrink(((start, start + n),) + tuple((0, s) for s in table.shape[1:]))


def topk_mask(x: Tensor, k: int) -> Tensor:
  """Boolean mask of the k largest values along the last axis (k passes of max; ties may select more)."""
  mask = None
  cur = x
  for _ in range(k):
    hit = cur == cur.max(-1, keepdim=True)
    mask = hit if mask is None else mask.logical_or(hit)
    cur = hit.where(-math.inf, cur)
  assert mask is not None
  return mask


# ---- RoPE

def rope_table(cfg: ModelConfig, max_context: int, freq_factors: Tensor | None) -> tuple[Tensor, Tensor]:
  """cos and sin, each (max_context, head_dim/2), computed in float64 (lazy: Transformer realizes them with the KV caches)."""
  half = cfg.head_dim // 2
  inv = Tensor(cfg.rope_base, dtype=dtypes.float64) ** (Tensor.arange(half, dtype=dtypes.float64) * (-2.0 / cfg.head_dim))
  if freq_factors is not None: inv = inv / freq_factors.cast(dtypes.float64)
  ang = Tensor.arange(max_context, dtype=dtypes.float64).reshape(-1, 1) * inv.reshape(1, -1)
  return ang.cos().cast(dtypes.float32).contiguous(), ang.sin().cast(dtypes.float32).contiguous()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, neox: bool) -> Tensor:
  """x (B, T, H, D), cos/sin (T, D/2). Pairs rotate by their angle; the partner of each element comes from a flip (a view)."""
  B, T, H, D = x.shape
  # the partner's sign, (-1, 1): computed from the index, not data from the host (tinygrad/reuse.py replays only kernels)
  sign = Tensor.arange(2, dtype=dtypes.float32, device=x.device) * 2 - 1
  if neox:  # pairs (i, i + D/2)
    xp = x.reshape(B, T, H, 2, D // 2)
    rot = xp.flip(3) * sign.reshape(1, 1, 1, 2, 1)
    c, s = cos.reshape(1, T, 1, 1, D // 2), sin.reshape(1, T, 1, 1, D // 2)
  else:  # pairs (2i, 2i + 1)
    xp = x.reshape(B, T, H, D // 2, 2)
    rot = xp.flip(4) * sign.reshape(1, 1, 1, 1, 2)
    c, s = cos.reshape(1, T, 1, D // 2, 1), sin.reshape(1, T, 1, D // 2, 1)
  return (xp * c + rot * s).reshape(B, T, H, D)


# ---- the model

class Attention:
  def __init__(self, cfg: ModelConfig, w: dict[str, Any], max_context: int, cache_dtype):
    self.cfg = cfg
    self.wo = w["attn_output.weight"]
    self.wq, self.wk, self.wv = w.get("attn_q.weight"), w.get("attn_k.weight"), w.get("attn_v.weight")
    self.bq, self.bk, self.bv = w.get("attn_q.bias"), w.get("attn_k.bias"), w.get("attn_v.bias")
    # q, k and v as one matrix where their types match (stacked at load: Transformer.from_gguf): one kernel instead of three
    self.wqkv = w.get(QKV)
    self.bqkv = None
    if self.wqkv is not None:  # its parts were not loaded (w.get gave None for each)
      biases = [self.bq, self.bk, self.bv]
      if any(b is not None for b in biases):
        sizes = (cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim)
        self.bqkv = Tensor.cat(*(b if b is not None else Tensor.zeros(n) for b, n in zip(biases, sizes))).contiguous().realize()
    self.q_norm, self.k_norm = w.get("attn_q_norm.weight"), w.get("attn_k_norm.weight")
    self.max_context = max_context
    # the KV cache: (2, kv heads, positions, head dim), written in place
    # CACHE_SLACK rows past the context: a padded prefill chunk written at the last positions stays inside the buffer.
    # Lazy here: Transformer realizes every layer's cache and the rope tables in one schedule (their few distinct kernels then
    # compile side by side in the compile pool, not one after another while the model loads)
    self.cache = Tensor.zeros(2, cfg.n_kv_heads, max_context + CACHE_SLACK, cfg.head_dim, dtype=cache_dtype).contiguous()

  def __call__(self, x: Tensor, scale: Tensor | None, start_pos: int | UOp, cos: Tensor, sin: Tensor, mask: Tensor | DecodePosition,
               first: Tensor | None = None, residual: Tensor | None = None, zeroed: Tensor | None = None) -> Any:
    """x: the layer's input times the norm's weight, `scale` the norm's factor per row (rms_scale), or None for no norm.
    cos/sin: the chunk's RoPE rows; mask (T, attn_len) bool: which cached positions each query sees (causal_mask), or a
    DecodePosition where `kernel_form` names a hand-written kernel (cos/sin are then the whole tables); first: the
    chunk's first position as a (1,) int32 tensor, where a prefill chunk's attention may run as one kernel (attention_first).
    residual: the layer's input, which the output is then added to (maybe in place, where the attention kernel adds it: a
    tensor nothing else reads after this). zeroed (with residual, where o_kernel_parts says the kernel adds the projection): a
    float32 buffer of the residual's shape the kernel also sets to zeros; the result is then (residual after, zeroed after)."""
    if zeroed is not None:
      assert residual is not None and (parts := self.o_kernel_parts(x, span(mask))), "zeroed needs the projection's kernel"
      return self._attention_projected(x, scale, cos, sin, mask, residual, parts, zeroed)
    out, added = self._attention(x, scale, start_pos, cos, sin, mask, first, residual)
    # realized: the stream is read by the norm and the matmul after it (a kernel that added in place left a buffer already)
    return out if residual is None or added else (residual + out).contiguous()

  def kernel_form(self, B: int, T: int, device: str, attn_len: int) -> tuple[str, int]:
    """Which hand-written kernel runs the attention of one token on a GPU (DECODE_ATTENTION), and its parts: ("gqa", parts)
    (decode_attention_gqa), ("one", 1) (decode_attention's block a head), ("split", parts) (its block a (head, part), the
    parts combined after); ("", 0) where none does (more tokens, a CPU, or a span no kernel takes: the Tensor-op form)."""
    cfg = self.cfg
    if not (B == 1 and T == 1 and fuses_cheaply(device) and DECODE_ATTENTION.value): return "", 0
    if (n := self._gqa_parts(attn_len)) > 0: return "gqa", n
    if decode_attention_applies(attn_len, cfg.n_heads, cfg.head_dim): return "one", 1
    split = split_parts(attn_len, cfg.n_heads, cfg.head_dim, DECODE_SPLIT.value) if DECODE_SPLIT.value else 1
    return ("split", split) if split > 1 else ("", 0)

  def _attention(self, x: Tensor, scale: Tensor | None, start_pos: int | UOp, cos: Tensor, sin: Tensor, mask: Tensor | DecodePosition,
                 first: Tensor | None, residual: Tensor | None) -> tuple[Tensor, bool]:
    """The attention block's output (after the output projection) and False, or `residual` with it added and True where one
    kernel does both."""
    if residual is not None and (parts := self.o_kernel_parts(x, span(mask))):
      # the output projection too, added into the residual stream in place by atomic adds (decode_attention.py's o_parts)
      return self._attention_projected(x, scale, cos, sin, mask, residual, parts)[0], True
    cfg = self.cfg
    B, T, _ = x.shape
    nq, nkv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    fused = fuses_cheaply(x.device)
    # realized: left unrealized, the matmuls would be recomputed inside every kernel that reads q, k or v (RoPE reads each
    # element twice, itself and its rotation partner)
    if self.wqkv is not None:
      qkv = linear(x, self.wqkv, self.bqkv, scale).contiguous()
      q, k, v = qkv[..., :nq], qkv[..., nq:nq + nkv], qkv[..., nq + nkv:]
      q_rows = qkv  # a buffer whose rows start with q (for the decode attention kernel)
    else:
      assert self.wq is not None and self.wk is not None and self.wv is not None
      q, k, v = (linear(x, w, b, scale).contiguous() for w, b in ((self.wq, self.bq), (self.wk, self.bk), (self.wv, self.bv)))
      q_rows = q
    q, k, v = q.reshape(B, T, cfg.n_heads, cfg.head_dim), k.reshape(B, T, cfg.n_kv_heads, cfg.head_dim), v.reshape(B, T, cfg.n_kv_heads, cfg.head_dim)
    if self.q_norm is not None: q = q_rows = rms_norm(q, self.q_norm, cfg.norm_eps).contiguous()
    if self.k_norm is not None: k = rms_norm(k, self.k_norm, cfg.norm_eps).contiguous()
    # one token on a GPU: attention as one kernel (decode_attention*.py) instead of four after the cache write; it rotates q
    # itself, and (DECODE_ATTENTION=2, the default) writes the new k and v into the cache where they lie in one buffer (stacked
    # q/k/v, no k norm), instead of the cache write's kernel. It takes the position as a parameter (mask: a DecodePosition) and
    # the whole RoPE tables; the rows the cache write rotates k by are picked from them here
    form, n_parts = self.kernel_form(B, T, x.device, span(mask))
    tables = (cos, sin)
    if isinstance(mask, DecodePosition): cos, sin = select_rows(cos, start_pos, T), select_rows(sin, start_pos, T)
    # q with RoPE: recomputed inside the attention scores' kernel on a GPU, stored once on a CPU (it is read for every position)
    q = apply_rope(q, cos, sin, cfg.rope_neox)
    if not fused: q = q.contiguous()
    k = apply_rope(k, cos, sin, cfg.rope_neox)
    fold = form in ("gqa", "one") and self.wqkv is not None and self.k_norm is None and DECODE_ATTENTION.value == 2
    if not fold: self._write_cache(k[0].permute(1, 0, 2), v[0].permute(1, 0, 2), start_pos)
    if form:
      assert isinstance(mask, DecodePosition), "a hand-written decode kernel takes the position (Transformer.hidden gives it)"
      L, warp, position = mask.attn_len, shuffle_lanes(x.device), mask.position
    if form == "gqa":  # a block per (kv head, part of the span) for the whole group of query heads (writing the cache where q/k/v
      # are one buffer); one part of a short span writes the heads' rows, more parts are combined after
      # (a kv head's query heads shared over blocks while the grid stays within the GPU's SMs: group_blocks)
      sms = compute_units(x.device)
      blocks = gqa_grid_blocks(L, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, sms or 128)
      kernel = gqa_attention_kernel(cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, L, cfg.rope_neox, warp, (nq, nq + nkv) if fold else None,
                                    has_grid_wait(x.device), spread=blocks <= (DECODE_GQA_SPREAD.value or sms or blocks), max_blocks=sms or 128)
      args = (q_rows, self.cache, *tables, position) + ((qkv,) if fold else ())
      if n_parts == 1: out = Tensor.empty(nq, device=x.device).custom_kernel(*args, fxn=kernel)[0]  # the heads' rows
      else:
        partials = Tensor.empty(cfg.n_heads * n_parts * (cfg.head_dim + 2), device=x.device).custom_kernel(*args, fxn=kernel)[0]
        out = Tensor.empty(nq, device=x.device).custom_kernel(partials, fxn=gqa_combine_kernel(cfg.n_heads, cfg.head_dim, n_parts))[0]
      return linear(out.reshape(B, 1, nq), self.wo), False
    if form == "split":  # a longer span: a block per (head, 128 positions), the parts combined after (decode_attention.py)
      kernel = decode_attention_kernel(cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, L, cfg.rope_neox, warp, split=n_parts)
      partials = Tensor.empty(cfg.n_heads * n_parts * (cfg.head_dim + 2), device=x.device).custom_kernel(q_rows, self.cache, *tables, position, fxn=kernel)[0]
      return linear(combine_split(partials, cfg.n_heads, cfg.head_dim).reshape(B, 1, nq), self.wo), False
    if form == "one":
      kernel = decode_attention_kernel(cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, L, cfg.rope_neox, warp, (nq, nq + nkv) if fold else None,
                                       has_grid_wait(x.device))
      args = (q_rows, self.cache, *tables, position) + ((qkv,) if fold else ())
      out = Tensor.empty(nq, device=x.device).custom_kernel(*args, fxn=kernel)[0]
      return linear(out.reshape(B, 1, nq), self.wo), False
    assert isinstance(mask, Tensor)
    on_tc = T >= TC_MIN_ROWS and self.cache.dtype == dtypes.float16 and has_half_tensor_cores(x.device)
    G = cfg.n_heads // cfg.n_kv_heads
    if on_tc and first is not None and (tc := attention_tensor_core(x.device, cfg.head_dim, mask.shape[1], T, G, cfg.n_kv_heads)) is not None:
      # the chunk's attention as one kernel (prefill_attention.py): it rotates q itself and stores half rows for the output matmul
      kernel = prefill_attention_kernel(tc, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, T, mask.shape[1], cfg.rope_neox)
      out = Tensor.empty(T, nq, dtype=dtypes.float16, device=x.device).custom_kernel(q_rows.reshape(T, -1), self.cache, cos, sin, first, fxn=kernel)[0]
      return linear(out.reshape(B, T, nq), self.wo), False
    qh = q[0].permute(1, 0, 2).reshape(cfg.n_kv_heads, G, T, cfg.head_dim)  # q head h uses kv head h // G
    if on_tc: out = self._attend_on_tensor_cores(qh, mask)
    else: out = self._attend(qh, mask, fused)
    # heads next to each other per token; one token's (H, 1, D) already is (1, 1, H*D): a reshape, no copy
    if T == 1: out = out.reshape(B, 1, cfg.n_heads * cfg.head_dim)
    else: out = stored_unless_tensor_cores(out.reshape(cfg.n_heads, T, cfg.head_dim).permute(1, 0, 2).reshape(B, T, cfg.n_heads * cfg.head_dim), self.wo)
    return linear(out, self.wo), False

  def _attention_projected(self, x: Tensor, scale: Tensor | None, cos: Tensor, sin: Tensor, mask: Tensor | DecodePosition, residual: Tensor,
                           parts: int, zeroed: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """One token's attention as decode_attention's kernel with o_parts: the residual after (the projection added in place), and
    `zeroed` after (set to zeros by it), where given. cos/sin: the RoPE tables, mask: the token's DecodePosition."""
    assert isinstance(mask, DecodePosition), "the projection's kernel takes the position (Transformer.hidden gives it)"
    cfg = self.cfg
    nq, nkv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    assert self.wqkv is not None
    qkv = linear(x, self.wqkv, self.bqkv, scale).contiguous()
    kernel = decode_attention_kernel(cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, mask.attn_len, cfg.rope_neox, shuffle_lanes(x.device),
                                     (nq, nq + nkv), has_grid_wait(x.device), o_parts=parts, dim=self.wo.shape[0])
    out = residual.custom_kernel(qkv, self.cache, cos, sin, mask.position, qkv, self.wo.half(), *([zeroed] if zeroed is not None else []),
                                 fxn=kernel)
    return out[0], (out[7] if zeroed is not None else None)  # (the tensors: the position returns none)

  def _gqa_parts(self, attn_len: int) -> int:
    """decode_attention_gqa's parts for a one-token step over attn_len positions on a GPU (0: another form): DECODE_GQA and up
    (a group of one query head where the model has as many kv heads)."""
    cfg = self.cfg
    if not DECODE_GQA.value or attn_len < DECODE_GQA.value: return 0
    return gqa_parts(attn_len, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim)

  def o_kernel_parts(self, x: Tensor, attn_len: int) -> int:
    """decode_attention's o_parts for this step's attention (0: the output projection is a kernel of its own): one token on a GPU
    where the attention kernel writes the cache (q/k/v one matrix, no k norm) and `_o_parts` says yes."""
    cfg = self.cfg
    one_token = math.prod(x.shape[:-1]) == 1 and fuses_cheaply(x.device) and DECODE_ATTENTION.value == 2 and x.dtype == dtypes.float32
    if not one_token or self.wqkv is None or self.k_norm is not None or self.q_norm is not None: return 0
    return self._o_parts(x.device, attn_len) if decode_attention_applies(attn_len, cfg.n_heads, cfg.head_dim) and not self._gqa_parts(attn_len) else 0

  def _o_parts(self, device: str, attn_len: int) -> int:
    """decode_attention's o_parts for this step (0: the output projection as a kernel of its own): DECODE_ATTN_O where the
    projection is float16, the renderer adds float32 atomically and the kernel has a layout."""
    cfg, parts = self.cfg, DECODE_ATTN_O.value
    if not parts or self.wo.raw.dtype != dtypes.float16 or len(self.wo.shape) != 2 or dtypes.float32 not in atomic_adds(device): return 0
    return parts if decode_attention_o_applies(cfg.n_heads, cfg.head_dim, attn_len, self.wo.shape[0], parts, shuffle_lanes(device)) else 0

  def _attend_on_tensor_cores(self, qh: Tensor, mask: Tensor) -> Tensor:
    """Attention of a prefill chunk on a GPU with half tensor cores and a float16 cache: both matmuls read half operands (q and the
    probabilities stored as half, the cache as it is) and accumulate in float32. A query head group's rows are one matrix
    (G*T, D) against its kv head's (D, L): the matmul has one batch axis, the kv head, which both operands index."""
    Hkv, G, T, D = qh.shape
    L = mask.shape[1]
    keys, values = self.cache[0, :, :L], self.cache[1, :, :L]  # (Hkv, L, D) float16
    q16 = qh.cast(dtypes.float16).contiguous().reshape(Hkv, G * T, D)
    # each matmul stored as it comes out: scaling and masking (the mask is the same for every head of a group) fused into it
    # would split the (G*T) rows back into two axes, and the tensor-core lowering wants one row axis per operand
    raw = q16.matmul(keys.transpose(-1, -2), dtype=dtypes.float32).contiguous().reshape(Hkv, G, T, L)
    # scaled, masked and softmaxed in one row kernel (codegen/rows.py: its lanes hold the row, read once), stored as half. Its
    # max and sum stored by kernels of their own (three passes over the scores) took 57 us a layer of Llama-1B's 512-token chunk
    # against 24, each kernel launched alone (pp512 125k -> 137k tok/s on the H200: bench/README.md, session 20)
    probs = mask.where(raw * (1.0 / math.sqrt(D)), -math.inf).softmax(-1).cast(dtypes.float16).contiguous().reshape(Hkv, G * T, L)
    return probs.matmul(values, dtype=dtypes.float32).contiguous().reshape(Hkv, G, T, D)

  def _attend(self, qh: Tensor, mask: Tensor, fused: bool) -> Tensor:
    """Attention in float32: qh (Hkv, G, T, D) against the cache's first L positions -> (Hkv, G, T, D)."""
    cfg = self.cfg
    attn_len = mask.shape[1]
    keys = self.cache[0, :, :attn_len].cast(dtypes.float32)    # (Hkv, L, D)
    values = self.cache[1, :, :attn_len].cast(dtypes.float32)
    scores = qh.matmul(keys.unsqueeze(1).transpose(-1, -2)) * (1.0 / math.sqrt(cfg.head_dim))  # (Hkv, G, T, L)
    scores = mask.where(scores, -math.inf)
    if fused:
      # a GPU: the scores, their max and the exponentials' sum are stored (three small kernels); the exponentials themselves are
      # recomputed inside the sum's kernel and the kernel that weighs the values, and divided by the sum there
      scores = scores.contiguous()
      e = (scores - scores.max(-1, keepdim=True).contiguous()).exp()
      out = (e.matmul(values.unsqueeze(1)) / e.sum(-1, keepdim=True).contiguous()).contiguous()  # (Hkv, G, T, D)
    else:
      # a CPU: the exponentials computed once (realized), not once for the sum and again for the division
      e = (scores - scores.max(-1, keepdim=True)).exp().contiguous()
      probs = (e / e.sum(-1, keepdim=True)).contiguous()
      # realized in its own (Hkv, G, T, D) layout: the kernel keeps a loop per axis (head dim innermost, contiguous in the cache)
      out = probs.matmul(values.unsqueeze(1)).contiguous()  # (Hkv, G, T, D)
    return out

  def _write_cache(self, k: Tensor, v: Tensor, start_pos: int | UOp) -> None:
    """Write k, v (Hkv, T, D) at positions start_pos.. of the cache: an assign into that slice of the cache's buffer, a kernel
    over the T new rows only (under TinyJit start_pos is a symbolic Variable, so one capture serves every position)."""
    T = k.shape[1]
    if T > CACHE_SLACK + 1: raise ValueError(f"a chunk of {T} tokens is longer than the cache's slack ({CACHE_SLACK}): use smaller chunks")
    kv = _stack2(k, v).cast(self.cache.dtype)  # (2, Hkv, T, D)
    window = self.cache.shrink(((0, 2), (0, self.cache.shape[1]), (start_pos, start_pos + T), (0, self.cache.shape[3])))
    window.assign(kv).realize()


def _stack2(a: Tensor, b: Tensor) -> Tensor:
  """Stack two same-shape tensors on a new leading axis (pad + add; fuses)."""
  a, b = a.unsqueeze(0), b.unsqueeze(0)
  return a.pad(((0, 1),) + ((0, 0),) * (a.ndim - 1)) + b.pad(((1, 0),) + ((0, 0),) * (b.ndim - 1))


class FeedForward:
  def __init__(self, w: dict[str, Any]):
    self.gate, self.up, self.down = w.get("ffn_gate.weight"), w.get("ffn_up.weight"), w["ffn_down.weight"]
    # gate and up as one matrix where their types match (stacked at load: Transformer.from_gguf): one matrix-vector kernel
    self.gate_up = w.get(GATE_UP)
    self.down_tiles: Tensor | None = None  # the down matrix as decode_ffn.down_tiles (DECODE_FFN at load)

  def _one_kernel_shape(self, h: Tensor) -> tuple[int, int] | None:
    """(dim, hidden) where decode_ffn.py's kernel applies to one token's h (DECODE_FFN on a GPU with warp shuffles, float16
    gate/up and down, a layout for the shape), else None."""
    gu, down = self.gate_up, self.down
    if not DECODE_FFN.value or gu is None or math.prod(h.shape[:-1]) != 1 or not fuses_cheaply(h.device) or shuffle_lanes(h.device) != 32:
      return None
    if gu.raw.dtype != dtypes.float16 or down.raw.dtype != dtypes.float16: return None
    hidden, dim = gu.shape[0] // 2, gu.shape[1]
    return (dim, hidden) if down.shape == (dim, hidden) and decode_ffn_applies(dim, hidden) else None

  def _kernel_args(self) -> tuple[Tensor, Tensor]:
    assert self.gate_up is not None
    return self.gate_up.half(), self.down_tiles if self.down_tiles is not None else self.down.half()

  def one_kernel(self, h: Tensor, norm: Tensor, eps: float) -> Tensor | None:
    """The block's output for one token on a GPU with float16 gate/up and down, from h (the residual stream, before the norm) and
    the norm's weight: decode_ffn.py's kernel and the sum of its partials. None where it doesn't apply (then __call__)."""
    if (shape := self._one_kernel_shape(h)) is None: return None
    dim, hidden = shape
    parts = Tensor.empty(hidden // FFN_ROWS, dim, device=h.device).custom_kernel(h, norm, *self._kernel_args(), fxn=decode_ffn_kernel(dim, hidden, eps))[0]
    return parts.sum(0).reshape(h.shape)

  def accumulates(self, h: Tensor) -> bool:
    """Whether `accumulate` applies to one token's h: DECODE_FFN=2 where the one-kernel form does and float32 adds are atomic."""
    return DECODE_FFN.value == 2 and h.dtype == dtypes.float32 and self._one_kernel_shape(h) is not None and dtypes.float32 in atomic_adds(h.device)

  def accumulate(self, out: Tensor, h: Tensor, norm: Tensor, eps: float) -> Tensor:
    """h plus the block's output, added into `out` (zeros, h's shape and float32) by decode_ffn's kernel: no kernel sums partials."""
    shape = self._one_kernel_shape(h)
    assert shape is not None, "check accumulates(h) first"
    return out.custom_kernel(h, norm, *self._kernel_args(), fxn=decode_ffn_kernel(*shape, eps, accumulate=True))[0]

  def __call__(self, x: Tensor, scale: Tensor | None = None) -> Tensor:
    if self.gate_up is not None:
      n = self.gate_up.shape[0] // 2
      if GATE_UP_SIBLINGS.value and math.prod(x.shape[:-1]) == 1 and fuses_cheaply(x.device):
        # one token on a GPU: the gate's and the up's products are sibling reductions (schedule/siblings.py), one kernel that
        # loads x once and stores silu(gate) * up, not the two halves for a kernel of its own to combine
        gate, up = linear(x, self.gate_up.rows(0, n), scale=scale), linear(x, self.gate_up.rows(n, 2 * n), scale=scale)
        act = gate.silu() * up
        return linear(act.cast(dtypes.float16).contiguous().cast(dtypes.float32) if FFN_HALF.value else act.contiguous(), self.down)
      gu = linear(x, self.gate_up, scale=scale).contiguous()
      # stored: inside the down projection's kernel silu(gate) * up would be recomputed for every output row (measured on the
      # H200: Llama-1B's down projection 13.6 -> 45 us when it was); on tensor cores linear() stores it itself, as half
      return linear(stored_unless_tensor_cores(gu[..., :n].silu() * gu[..., n:], self.down), self.down)
    # one token: gate and up in one kernel (two matrix-vector products); several: the gate first, so each kernel has one matmul and
    # the CPU heuristics can share each loaded weight across the tokens (two matmuls in one kernel run out of registers)
    assert self.gate is not None and self.up is not None
    g = linear(x, self.gate, scale=scale)
    if x.shape[1] != 1: g = g.contiguous()
    return linear(stored_unless_tensor_cores(g.silu() * linear(x, self.up, scale=scale), self.down), self.down)


class MoEFeedForward:
  """Softmax router, top-k experts with renormalized weights (qwen3moe). The experts every token of the batch chose are read back
  (a few ints), and only those experts' weights are used."""

  def __init__(self, cfg: ModelConfig, w: dict[str, Any]):
    self.cfg = cfg
    self.router: QuantWeight = w["ffn_gate_inp.weight"]
    self.gate, self.up, self.down = w["ffn_gate_exps.weight"], w["ffn_up_exps.weight"], w["ffn_down_exps.weight"]

  def __call__(self, x: Tensor, scale: Tensor | None = None) -> Tensor:
    cfg = self.cfg
    if scale is not None: x = (x * scale).contiguous()  # the experts' inputs, stored once: several kernels read them
    probs = linear(x, self.router).softmax(-1)  # (B, T, E)
    chosen = topk_mask(probs, cfg.n_experts_used)
    weights = chosen.where(probs, 0.0)
    weights = weights / weights.sum(-1, keepdim=True)
    weights = weights.realize()
    used = [e for e, u in enumerate((weights > 0).cast(dtypes.int32).max((0, 1)).tolist()) if u]
    out = None
    for e in used:
      g, u, d = self.gate.rows(e, e + 1), self.up.rows(e, e + 1), self.down.rows(e, e + 1)
      g, u, d = (QuantWeight(m.raw, m.type_name, m.shape[1:]) for m in (g, u, d))
      y = linear((linear(x, g).silu() * linear(x, u)).contiguous(), d) * weights[..., e:e + 1]
      out = y if out is None else out + y
    assert out is not None
    return out


def fold_norm(norm: Tensor, *weights: QuantWeight | None) -> bool:
  """Multiply each float16 matrix's columns by the RMSNorm weight that precedes it, in place: (x * norm) @ W.T == x @ (W * norm).T,
  so the products read x alone. On a GPU a decode step's matrix-vector kernels read x and the norm's weight from L1 for every
  16 bytes of a row (their vector loads cost as much as the matrix's): folded, Llama-1B's step 1,004 -> 968 us on an H100 with
  the row loads' cache hint (bench/README.md, session 33). Only where every matrix is float16 (a quantized one would need
  requantizing): False, and nothing changed, otherwise. The rounding of W * norm to float16 is the one prefill's activations get."""
  ws = [w for w in weights if w is not None]
  if not ws or any(w.raw.dtype != dtypes.float16 or len(w.shape) != 2 or w.shape[1] != norm.shape[0] for w in ws): return False
  for w in ws:  # along the flat buffer, so that each element is read where it is written: one kernel, in place (no copy)
    w.raw.assign((w.raw.cast(dtypes.float32) * norm.reshape(1, -1).expand(w.shape).reshape(-1)).cast(dtypes.float16)).realize()
  return True


class Block:
  def __init__(self, cfg: ModelConfig, w: dict[str, Any], max_context: int, cache_dtype):
    self.cfg = cfg
    self.attn_norm, self.ffn_norm = w["attn_norm.weight"], w["ffn_norm.weight"]
    self.attn = Attention(cfg, w, max_context, cache_dtype)
    self.ffn = MoEFeedForward(cfg, w) if "ffn_gate_inp.weight" in w else FeedForward(w)
    # on a GPU the norms' weights are folded into the float16 products that read them (fold_norm; the flags say where). Not with
    # the one-kernel decode experiments (DECODE_FFN, DECODE_ATTN_O), whose kernels take the norm's weight
    self.attn_norm_folded = self.ffn_norm_folded = False
    if NORM_FOLD.value and fuses_cheaply(self.attn_norm.device) and not DECODE_FFN.value and not DECODE_ATTN_O.value:
      a = self.attn
      self.attn_norm_folded = fold_norm(self.attn_norm, *((a.wqkv,) if a.wqkv is not None else (a.wq, a.wk, a.wv)))
      if isinstance(self.ffn, FeedForward):
        f = self.ffn
        self.ffn_norm_folded = fold_norm(self.ffn_norm, *((f.gate_up,) if f.gate_up is not None else (f.gate, f.up)))

  def __call__(self, x: Tensor, start_pos: int | UOp, cos: Tensor, sin: Tensor, mask: Tensor | DecodePosition, first: Tensor | None = None) -> Tensor:
    # the residual stream is realized; the matmuls after a norm read x times the norm's weight (or x, where the weight is folded
    # into them) and scale their outputs by the norm's factor (norm_scale), so the normalized rows are never stored (an
    # unrealized norm would be recomputed per output row)
    eps = self.cfg.norm_eps
    ffn = self.ffn if isinstance(self.ffn, FeedForward) else None
    if self.attn_norm_folded or self.ffn_norm_folded:
      h = self.attn(x if self.attn_norm_folded else x * self.attn_norm, norm_scale(x, eps), start_pos, cos, sin, mask, first, residual=x)
      return (h + self.ffn(h if self.ffn_norm_folded else h * self.ffn_norm, norm_scale(h, eps))).contiguous()
    if ffn is not None and ffn.accumulates(x) and self.attn.o_kernel_parts(x, span(mask)):
      # one token, each half of the layer one kernel adding into the residual stream: the attention's adds its projection into x in
      # place and zeroes the buffer into which the feed-forward kernel then adds h and its product (atomic adds, no partial sums)
      h, nxt = self.attn(x * self.attn_norm, norm_scale(x, eps), start_pos, cos, sin, mask, first, residual=x,
                         zeroed=Tensor.empty(*x.shape, dtype=x.dtype, device=x.device))
      return ffn.accumulate(nxt, h, self.ffn_norm, eps)
    h = self.attn(x * self.attn_norm, norm_scale(x, eps), start_pos, cos, sin, mask, first, residual=x)
    ffn_out = self.ffn.one_kernel(h, self.ffn_norm, eps) if isinstance(self.ffn, FeedForward) else None
    return (h + (ffn_out if ffn_out is not None else self.ffn(h * self.ffn_norm, norm_scale(h, eps)))).contiguous()


# matrices of a layer stacked into one at load where their types and widths match: the stack's name, its parts. A GGUF may
# quantize them differently (a mixed Q4_K_M file): those stay apart, a kernel each
QKV, GATE_UP = "attn_qkv.weight", "ffn_gate_up.weight"
STACKS = {QKV: ("attn_q.weight", "attn_k.weight", "attn_v.weight"), GATE_UP: ("ffn_gate.weight", "ffn_up.weight")}


def _stackable(g: GGUFFile, names: list[str]) -> bool:
  infos = [g.tensors.get(n) for n in names]
  if any(i is None or len(i.shape) != 2 for i in infos): return False
  return len({(i.type_name, i.shape[1]) for i in infos if i is not None}) == 1


def _read_stack(g: GGUFFile, names: list[str], device: str) -> Tensor:
  """The stack of these tensors' rows on `device` (lazy). Parts that lie back to back in the file (same type, one after another:
  a synthetic file's q, k, v; gate and up in llama.cpp's files) are one read, a copy straight into the stack's buffer; else each
  part is read and a kernel concatenates them (one kernel to compile at load, and the parts held beside the stack meanwhile)."""
  infos = [g.tensors[n] for n in names]
  if all(a.path == b.path and a.offset + a.nbytes == b.offset for a, b in zip(infos, infos[1:])):
    dt = NATIVE_DTYPES.get(infos[0].type_name, dtypes.uint8)
    return load_bytes(infos[0].path, infos[0].offset, sum(i.nbytes for i in infos), device, realize=False, dtype=dt)
  return Tensor.cat(*(_read_weight(g, n, device) for n in names)).contiguous()


def _read_weight(g: GGUFFile, name: str, device: str) -> Tensor:
  """A tensor's data on `device` (lazy): an F16/F32 tensor read as its own dtype (the copy brings the values: no conversion
  kernel to compile and run at load), anything else as its bytes (uint8), for the dequantizers."""
  info = g.tensors[name]
  dt = NATIVE_DTYPES.get(info.type_name)
  if dt is None: return g.tensor_bytes(name, device, realize=False)
  return g.tensor_bytes(name, device, realize=False, dtype=dt)


def _empty_stack(g: GGUFFile, names: list[str], device: str) -> Tensor:
  """What _read_stack would hold (or _read_weight, for one name), without the data: an empty buffer of its dtype and size."""
  infos = [g.tensors[n] for n in names]
  dt = NATIVE_DTYPES.get(infos[0].type_name, dtypes.uint8)
  return Tensor.empty(sum(i.nbytes for i in infos) // dt.itemsize, dtype=dt, device=device)


def _empty_weight(g: GGUFFile, name: str, device: str) -> Tensor: return _empty_stack(g, [name], device)


def _check_tensors(g: GGUFFile, cfg: ModelConfig) -> None:
  """Every tensor the model uses is there, with the shape the metadata implies, before anything is read: a corrupt file is an
  error naming the tensor and the file, not a crash in the middle of loading or garbage at the first forward pass."""
  D, V, hd, H, Hkv = cfg.dim, cfg.vocab_size, cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
  if V < 1: raise UnsupportedModel(f"{g.path}: the vocabulary is empty (no {cfg.arch}.vocab_size, token_embd.weight or tokenizer.ggml.tokens)")
  # a layer is at least 8 tensors: a block_count past what the file holds is corrupt (and isn't looped over)
  if cfg.n_layers * 8 > len(g.tensors):
    raise UnsupportedModel(f"{g.path}: metadata {cfg.arch}.block_count is {cfg.n_layers}, but the file holds only {len(g.tensors)} tensors")

  def check(name: str, shape: tuple[int, ...] | None, required: bool = True) -> tuple[int, ...] | None:
    info = g.tensors.get(name)
    if info is None:
      if required: raise UnsupportedModel(f"{g.path}: tensor {name!r} is missing")
      return None
    if shape is not None and info.shape != shape:
      raise UnsupportedModel(f"{g.path}: tensor {name!r} has shape {info.shape}, but the metadata implies {shape} "
                             f"(embedding {D}, heads {H}/{Hkv} of {hd}, vocabulary {V}); the file is corrupt")
    return info.shape
  check("token_embd.weight", (V, D))
  check("output_norm.weight", (D,))
  check("output.weight", (V, D), required=False)
  check("rope_freqs.weight", (hd // 2,), required=False)
  for i in range(cfg.n_layers):
    p = f"blk.{i}."
    for name, shape in (("attn_norm.weight", (D,)), ("ffn_norm.weight", (D,)), ("attn_output.weight", (D, H * hd)),
                        ("attn_q.weight", (H * hd, D)), ("attn_k.weight", (Hkv * hd, D)), ("attn_v.weight", (Hkv * hd, D))):
      check(p + name, shape)
    for name, shape in (("attn_q.bias", (H * hd,)), ("attn_k.bias", (Hkv * hd,)), ("attn_v.bias", (Hkv * hd,)),
                        ("attn_q_norm.weight", (hd,)), ("attn_k_norm.weight", (hd,))):
      check(p + name, shape, required=False)
    if p + "ffn_gate_inp.weight" in g.tensors:  # mixture of experts
      E = cfg.n_experts
      if not 1 <= cfg.n_experts_used <= E:
        raise UnsupportedModel(f"{g.path}: layer {i} has experts, but {cfg.arch}.expert_used_count is {cfg.n_experts_used} of {E} "
                               f"({cfg.arch}.expert_count)")
      check(p + "ffn_gate_inp.weight", (E, D))
      gate = check(p + "ffn_gate_exps.weight", None)
      assert gate is not None
      F = gate[1] if len(gate) == 3 else -1
      check(p + "ffn_gate_exps.weight", (E, F, D))
      check(p + "ffn_up_exps.weight", (E, F, D))
      check(p + "ffn_down_exps.weight", (E, D, F))
    else:
      gate = check(p + "ffn_gate.weight", None)
      assert gate is not None
      F = gate[0] if len(gate) == 2 else -1
      check(p + "ffn_gate.weight", (F, D))
      check(p + "ffn_up.weight", (F, D))
      check(p + "ffn_down.weight", (D, F))


# tensors that are used as float vectors (norms, biases, rope factors): dequantized once at load
_FLOAT_SUFFIXES = ("norm.weight", ".bias", "rope_freqs.weight")


class Transformer:
  """The model. Tokens enter as ids on the device (`token_ids`), whose rows of the (quantized) embedding table a kernel gathers
  (`embed_ids`: direct loads, no pass over the vocabulary), or as those rows read from the file on the host (`token_rows`). The
  engine uses ids: reading a 512-token chunk's rows on the host took 2.6 ms before its kernels could start (bench/README.md,
  session 20), 40% of the chunk's time on an H200."""

  def __init__(self, cfg: ModelConfig, weights: dict[str, Any], max_context: int | None = None, cache_dtype=dtypes.float32,
               embedding_source: tuple[str, int] | None = None):
    self.cfg = cfg
    self.max_context = min(max_context or cfg.context_length, cfg.context_length)
    # a chunk's first position as a symbolic int: the engine's captures bind it, and an eager one-token step's attention kernels
    # take it (one kernel for every position)
    self.position_var = Variable("start_pos", 0, self.max_context - 1)
    self.tok_embd: QuantWeight = weights["token_embd.weight"]
    self.output: QuantWeight = weights.get("output.weight", self.tok_embd)  # tied embeddings when there is no output.weight
    self.norm = weights["output_norm.weight"]
    # CACHE_SLACK rows past the context, as in the KV cache: a padded chunk near the end reads angles past max_context
    self.cos, self.sin = rope_table(cfg, self.max_context + CACHE_SLACK, weights.get("rope_freqs.weight"))
    self.embedding_source = embedding_source  # (file, offset) of token_embd's bytes, to read rows without the device
    self.row_bytes = self.tok_embd.raw.shape[0] * self.tok_embd.raw.dtype.itemsize // self.tok_embd.shape[0]
    self.layers = []
    self.cache_dtype = cache_dtype
    for i in range(cfg.n_layers):
      prefix = f"blk.{i}."
      lw = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
      self.layers.append(Block(cfg, lw, self.max_context, cache_dtype))
    tiles = []
    for layer in self.layers:
      ffn = layer.ffn
      if (DECODE_FFN.value and isinstance(ffn, FeedForward) and ffn.down.raw.dtype == dtypes.float16 and fuses_cheaply(ffn.down.raw.device)
          and len(ffn.down.shape) == 2 and decode_ffn_applies(*ffn.down.shape)):
        ffn.down_tiles = down_tiles(ffn.down.half()).contiguous()
        tiles.append(ffn.down_tiles)
    # the decode step's int8 screen of a float16 output matrix, on GPUs (head_screen.py; 1 byte more a weight)
    self.screen = ScreenedHead(self.output.raw.reshape(self.output.shape)) if screens(self.output) else None
    Tensor.realize_all(self.cos, self.sin, *(layer.attn.cache for layer in self.layers), *tiles,
                       *(self.screen.tensors if self.screen is not None else ()))
    self.is_moe = any(isinstance(layer.ffn, MoEFeedForward) for layer in self.layers)
    # the layers build one graph over their own weights: the first layer of each structure is scheduled and lowered, the others
    # replay its kernels on their buffers (tinygrad/reuse.py). Not an MoE model: its router picks kernels from tensor data
    self._reuse = None if self.is_moe else KernelReuse()

  @staticmethod
  def from_gguf(g: GGUFFile | str, max_context: int | None = None, device: str | None = None, cache_dtype=dtypes.float32,
                skeleton: bool = False) -> Transformer:
    """The model with its weights read from the file. skeleton=True: its first layer only (every layer has the same kernels)
    over empty buffers of the weights' shapes and dtypes, nothing read: for a dry run (engine/ahead.py) before the real load."""
    from tinygrad import Device
    g = g if isinstance(g, GGUFFile) else read_gguf(g)
    device = device or Device.DEFAULT  # resolved once, not for each of the file's tensors
    cfg = ModelConfig.from_gguf(g)
    weights: dict[str, Any] = {}
    for name, info in g.tensors.items():
      if info.type_name not in DEQUANTIZERS:
        raise UnsupportedQuantization(f"{g.path}: tensor {name!r} is {info.type_name}, which is not supported (supported: {', '.join(DEQUANTIZERS)})")
    _check_tensors(g, cfg)
    if skeleton: cfg = dataclasses.replace(cfg, n_layers=min(cfg.n_layers, 1))
    # loaded a layer at a time: one schedule reads all of a layer's tensors (a schedule per tensor cost more than the reading);
    # each stack is read straight into one buffer (its parts are never kept next to it: peak memory)
    stacked: set[str] = set()
    groups: dict[str, list[str]] = {}
    for name in g.tensors: groups.setdefault(name.split(".")[1] if name.startswith("blk.") else "", []).append(name)
    read_stack, read_weight = (_empty_stack, _empty_weight) if skeleton else (_read_stack, _read_weight)
    for group, names_in in groups.items():
      if skeleton and group not in ("", "0"): continue
      pending: list[Tensor] = []
      if group:
        for stack, parts in STACKS.items():
          names = [f"blk.{group}.{p}" for p in parts]
          if not _stackable(g, names): continue
          infos = [g.tensors[n] for n in names]
          shape = (sum(x.shape[0] for x in infos), infos[0].shape[1])
          raw = read_stack(g, names, device)
          w = weights[f"blk.{group}.{stack}"] = QuantWeight(raw, infos[0].type_name, shape)
          pending.append(w.raw)
          stacked.update(names)
      for name in names_in:
        if name in stacked: continue
        info, raw = g.tensors[name], read_weight(g, name, device)
        if name.endswith(_FLOAT_SUFFIXES):
          if skeleton: weights[name] = Tensor.empty(*info.shape, dtype=dtypes.float32, device=device)
          elif raw.dtype == dtypes.uint8: weights[name] = dequantize(raw, info.type_name, info.shape).contiguous()
          elif raw.dtype == dtypes.float32: weights[name] = raw.reshape(info.shape)  # the copy itself: no kernel
          else: weights[name] = raw.reshape(info.shape).cast(dtypes.float32).contiguous()
        else: weights[name] = QuantWeight(raw, info.type_name, info.shape)
        pending.append(weights[name] if isinstance(weights[name], Tensor) else weights[name].raw)
      Tensor.realize_all(*pending)
    emb = g.tensors["token_embd.weight"]
    return Transformer(cfg, weights, max_context, cache_dtype, (emb.path, emb.offset))

  def _check_ids(self, ids: list[int]) -> None:
    for i in ids:
      if not 0 <= i < self.cfg.vocab_size: raise ValueError(f"token id {i} is out of range for a vocabulary of {self.cfg.vocab_size}")

  def token_ids(self, ids: list[int]) -> Tensor:
    """(1, T) int32 on the model's device: the tokens as `forward` takes them (a kernel gathers their embedding rows)."""
    self._check_ids(ids)
    return Tensor([ids], dtype=dtypes.int32, device=self.norm.device)

  def token_rows(self, ids: list[int]) -> Tensor:
    """(1, T, row_bytes) uint8: the embedding table's rows for these tokens, still quantized (read from the file on the host)."""
    self._check_ids(ids)
    rb = self.row_bytes
    if self.embedding_source is None:  # no file behind the table (a model built in memory): slice its bytes on the device
      table = self.tok_embd.raw if self.tok_embd.raw.dtype == dtypes.uint8 else self.tok_embd.raw.bitcast(dtypes.uint8)  # native: its bytes
      rows = [table[i * rb:(i + 1) * rb] for i in ids]
      return (rows[0].unsqueeze(0) if len(rows) == 1 else Tensor.stack(*rows)).reshape(1, len(ids), rb)
    path, offset = self.embedding_source
    with open(path, "rb") as f:
      data = b"".join(_read_at(f, offset + i * rb, rb) for i in ids)
    return Tensor(data, dtype=dtypes.uint8).reshape(1, len(ids), rb)

  def embed(self, rows: Tensor) -> Tensor:
    """(B, T, row_bytes) uint8 -> (B, T, dim) float32."""
    B, T, rb = rows.shape
    return dequantize(rows.reshape(-1), self.tok_embd.type_name, (B * T, self.cfg.dim)).reshape(B, T, self.cfg.dim)

  def embed_ids(self, ids: Tensor) -> Tensor:
    """(B, T) int32 token ids on the device -> (B, T, dim) float32. The table's rows are picked by a one-hot gather, which the
    compiler turns into direct loads (no pass over the vocabulary): a decode step reads the token the step before it sampled
    without the host seeing it."""
    w = self.tok_embd
    rows = w.raw.reshape(self.cfg.vocab_size, -1)[ids]  # (B, T, row): bytes, or the row itself for a native table
    return rows.cast(dtypes.float32) if w.raw.dtype != dtypes.uint8 else self.embed(rows)

  def attn_len(self, end: int) -> int:
    """How many cache positions attention spans when the last position used is end-1: a power of two from ATTN_BUCKET up (at
    most twice the work needed, and few distinct kernels to compile and TinyJit captures to make), capped at max_context."""
    L = ATTN_BUCKET
    while L < end: L *= 2
    return min(L, self.max_context)

  def forward(self, rows: Tensor, start_pos: int | UOp, last: int | UOp | None = None, attn_len: int | None = None) -> Tensor:
    """Logits (B, vocab) at position `last` of the chunk (default: its end), writing the chunk's keys and values into the cache at
    start_pos.. . Attention spans the first `attn_len` cache positions (default: a bucket that covers the chunk for an int
    start_pos, the whole cache for a symbolic one); positions past start_pos + T are masked, so any attn_len that covers them works."""
    return linear(self.hidden(rows, start_pos, -1 if last is None else last, attn_len), self.output)

  def greedy_next(self, rows: Tensor, start_pos: int | UOp, attn_len: int | None = None) -> Tensor:
    """(1,) int32: the argmax of forward()'s logits for one row of tokens, through the int8 screen of the output matrix where the
    model has one (head_screen.py: the same token, about half the output matrix's bytes read)."""
    h = self.hidden(rows, start_pos, -1, attn_len)
    return self.screen.next_token(h) if self.screen is not None and self._screened() else greedy(linear(h, self.output))

  def _screened(self) -> bool: return self.screen is not None and bool(HEAD_SCREEN.value)  # (HEAD_SCREEN=0 after load: A/B)

  def drawn_next(self, rows: Tensor, start_pos: int | UOp, temperature: Tensor, key: Tensor, attn_len: int | None = None) -> Tensor:
    """(1,) int32: sampling.sample_temperature of forward()'s logits (temperature (1,), key (2,) uint32), through the output
    matrix's int8 screen where the model has one."""
    h = self.hidden(rows, start_pos, -1, attn_len)
    if not self._screened(): return sample_temperature(linear(h, self.output), temperature, key)
    assert self.screen is not None  # (_screened says so)
    noise = gumbel_noise(key, self.cfg.vocab_size).contiguous()  # read by the bounds, the screened rows and the draw
    t = temperature.reshape(1).cast(dtypes.float32)
    return self.screen.next_token(h, t, noise)

  def forward_all(self, rows: Tensor, start_pos: int | UOp, attn_len: int | None = None) -> Tensor:
    """Logits (B, T, vocab) of every position."""
    return linear(self.hidden(rows, start_pos, None, attn_len), self.output)

  def hidden(self, rows: Tensor, start_pos: int | UOp, last: int | UOp | None, attn_len: int | None = None) -> Tensor:
    """The output matrix's input: the last layer's output at position `last` of the chunk (None: every position), normalized."""
    B, T = rows.shape[:2]
    if isinstance(start_pos, int) and start_pos + T > self.max_context:
      raise ValueError(f"context is full: {start_pos} + {T} tokens exceed max_context {self.max_context}")
    # rows: (B, T) token ids on the device (token_ids), or the embedding rows' bytes (token_rows)
    x = (self.embed_ids(rows) if rows.ndim == 2 else self.embed(rows)).contiguous()  # realized: every kernel of the first layer reads it
    if attn_len is not None and not 0 < attn_len <= self.max_context: raise ValueError(f"attn_len {attn_len} is not in 1..{self.max_context}")
    L = attn_len or (self.attn_len(start_pos + T) if isinstance(start_pos, int) else self.max_context)
    mask: Tensor | DecodePosition
    if self.layers and self.layers[0].attn.kernel_form(B, T, x.device, L)[0]:
      # one token whose attention kernels take its position as a parameter (a Variable: one kernel for every step) and read the
      # RoPE tables' row themselves: no kernels for the rows and the mask (3 of a step's 91 for Llama-1B)
      position = start_pos if isinstance(start_pos, UOp) else self.position_var.bind(start_pos)
      cos, sin, mask = self.cos, self.sin, DecodePosition(position, L)
    else:
      # what depends on the position, computed once for every layer: the chunk's RoPE rows and the causal mask (under TinyJit the
      # layers' kernels then don't depend on start_pos, only the cache writes do: fewer launches to update per replayed step)
      cos, sin = select_rows(self.cos, start_pos, T).contiguous(), select_rows(self.sin, start_pos, T).contiguous()
      mask = causal_mask(start_pos, T, L, x.device).contiguous()
    first = attention_first(self.cfg, start_pos, B, T, L, x.device, self.cache_dtype)
    for layer in self.layers:
      # realized layer by layer: scheduling one layer's graph at a time keeps the scheduler's work linear in the depth
      x = layer(x, start_pos, cos, sin, mask, first).realize() if self._reuse is None else self._reuse(layer, x, start_pos, cos, sin, mask, first)
    if last is not None:
      if isinstance(last, int): x = x[:, last, :]
      else: x = (one_hot(Tensor(last, dtype=dtypes.int32, device=x.device).reshape(1), T).reshape(1, T, 1) * x).sum(1)
    return rms_norm(x, self.norm, self.cfg.norm_eps).contiguous()

  def logits(self, ids: list[int], start_pos: int = 0, all_logits: bool = False) -> Tensor:
    """Convenience for tests and scripts: logits for token ids starting at start_pos (eager, exact shapes)."""
    rows = self.token_ids(ids)
    return self.forward_all(rows, start_pos) if all_logits else self.forward(rows, start_pos)


def _read_at(f: Any, offset: int, n: int) -> bytes:
  f.seek(offset)
  return f.read(n)
