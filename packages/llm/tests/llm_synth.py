"""Tiny synthetic GGUF models written with the `gguf` package (random weights), and a numpy reference forward pass.

The reference dequantizes with `gguf.quants.dequantize` (independent of ours) and implements the architectures from their
definitions: RMSNorm, RoPE (llama's GGUF layout rotates adjacent pairs, qwen's rotates halves), grouped-query causal attention,
SwiGLU, and top-k softmax routing with renormalized weights for qwen3moe.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

gguf = __import__("gguf")
from gguf.quants import dequantize as ref_dequantize  # noqa: E402

BLOCKS = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22),
          "Q5_1": (32, 24), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210)}
F16_FIELDS = {"Q8_0": [0], "Q4_0": [0], "Q5_0": [0], "Q4_1": [0, 2], "Q5_1": [0, 2], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}


def logits_tol() -> float:
  """Logits' tolerance against the float64 reference, as a fraction of the largest: 1e-4 where the model computes in float32;
  1e-3 on a GPU-style device (renderer with blocks of threads), whose decode step stores the FFN's activation as float16 and
  reads float16 weights with the norms folded in (model.FFN_HALF, fold_norm), as prefill rounds its matmuls' inputs."""
  from tinygrad import Device
  from tinygrad.llm.model import fuses_cheaply
  return 1e-3 if fuses_cheaply(Device.DEFAULT) else 1e-4


CHAT_SPECIALS = ("<|im_start|>", "<|im_end|>")
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@dataclass
class SynthConfig:
  arch: str = "llama"
  n_layers: int = 1
  dim: int = 256
  ff_dim: int = 256
  n_heads: int = 4
  n_kv_heads: int = 2
  head_dim: int = 64
  vocab: int = 64
  n_experts: int = 0
  n_experts_used: int = 0
  context: int = 64
  rope_base: float = 10000.0
  eps: float = 1e-5


def random_quant(rng: np.random.Generator, type_name: str, shape: tuple[int, ...], scale: float) -> np.ndarray:
  """Random bytes of a tensor in a GGML format (valid float16 scales), as the (rows..., bytes) uint8 array gguf writes."""
  block, size = BLOCKS[type_name]
  n = int(np.prod(shape))
  if type_name == "F32": return (rng.standard_normal(shape) * scale).astype(np.float32)
  if type_name == "F16": return (rng.standard_normal(shape) * scale).astype(np.float16)
  if type_name == "BF16":
    bits = ((rng.standard_normal(n) * scale).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits.view(np.uint8).reshape(*shape[:-1], shape[-1] * 2)
  blocks = rng.integers(0, 256, size=(n // block, size), dtype=np.uint8)
  for at in F16_FIELDS[type_name]:
    # scales sized so that dequantized values are about `scale`: quants are up to ~32 (q6) / 16 (q4, q5) / 128 (q8) / 63*16 (k scales)
    k = {"Q8_0": 64, "Q4_0": 8, "Q4_1": 8, "Q5_0": 16, "Q5_1": 16, "Q4_K": 8 * 32, "Q5_K": 16 * 32, "Q6_K": 32 * 64}[type_name]
    blocks[:, at:at + 2] = (rng.uniform(0.3, 1.0, len(blocks)) * scale / k).astype(np.float16).view(np.uint8).reshape(-1, 2)
  if type_name in ("Q4_1", "Q5_1"):  # the min m: shift values to be centred
    k = 8 if type_name == "Q4_1" else 16
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32).reshape(-1)
    blocks[:, 2:4] = (-d * k).astype(np.float16).view(np.uint8).reshape(-1, 2)
  if type_name in ("Q4_K", "Q5_K"):  # dmin: centre the values likewise
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32).reshape(-1)
    blocks[:, 2:4] = (d * (8 if type_name == "Q4_K" else 16)).astype(np.float16).view(np.uint8).reshape(-1, 2)
  return blocks.reshape(*shape[:-1], shape[-1] // block * size)


def to_float(arr: np.ndarray, type_name: str, shape: tuple[int, ...]) -> np.ndarray:
  if type_name in ("F32", "F16"): return arr.astype(np.float32).reshape(shape)
  return ref_dequantize(arr.reshape(-1), gguf.GGMLQuantizationType[type_name]).astype(np.float32).reshape(shape)


def write_model(path: str, cfg: SynthConfig, qtype: str = "F32", seed: int = 0, tie_embeddings: bool = False,
                types: dict[str, str] | None = None, kqv_order: bool = False) -> dict[str, np.ndarray]:
  """Write a GGUF model with random weights; return its weights as float32 (dequantized by the gguf package). `types`: another
  type for some layer tensors, by name without the layer prefix (e.g. {"attn_v.weight": "Q8_0"}, as mixed GGUFs have).
  kqv_order: a layer's attention matrices in the order llama.cpp's converter writes them (k, output, q, v: q, k and v not
  back to back in the file), else q, k, v, output."""
  rng = np.random.default_rng(seed)
  w = gguf.GGUFWriter(path, cfg.arch)
  a = cfg.arch
  w.add_block_count(cfg.n_layers)
  w.add_context_length(cfg.context)
  w.add_embedding_length(cfg.dim)
  w.add_feed_forward_length(cfg.ff_dim)
  w.add_head_count(cfg.n_heads)
  w.add_head_count_kv(cfg.n_kv_heads)
  w.add_key_length(cfg.head_dim)
  w.add_value_length(cfg.head_dim)
  w.add_rope_freq_base(cfg.rope_base)
  w.add_layer_norm_rms_eps(cfg.eps)
  w.add_uint32(f"{a}.vocab_size", cfg.vocab)
  if cfg.n_experts:
    w.add_expert_count(cfg.n_experts)
    w.add_expert_used_count(cfg.n_experts_used)
    w.add_expert_feed_forward_length(cfg.ff_dim)
  w.add_tokenizer_model("gpt2")
  w.add_tokenizer_pre("default")
  if cfg.vocab >= 256 + len(CHAT_SPECIALS):  # every byte, the chat markers, and a ChatML template: a chat-capable (if random) model
    from tinygrad.llm.tokenizer import BYTE_TO_CHAR
    tokens = [BYTE_TO_CHAR[b] for b in range(256)] + list(CHAT_SPECIALS)
    tokens += [f"<unused{i}>" for i in range(cfg.vocab - len(tokens))]
    w.add_token_list(tokens)
    w.add_token_types([1] * 256 + [3] * (len(tokens) - 256))
    w.add_bos_token_id(256)
    w.add_eos_token_id(257)
    w.add_chat_template(CHATML)
  else:  # a few single-character tokens are enough for logits tests
    w.add_token_list([chr(0x21 + i) for i in range(cfg.vocab)])
    w.add_token_types([1] * cfg.vocab)
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
  w.add_token_merges([])
  out: dict[str, np.ndarray] = {}

  def add(name: str, shape: tuple[int, ...], type_name: str, scale: float) -> None:
    type_name = (types or {}).get(name.split(".", 2)[-1] if name.startswith("blk.") else name, type_name)
    arr = random_quant(rng, type_name, shape, scale)
    if type_name in ("F32", "F16"): w.add_tensor(name, arr)
    else: w.add_tensor(name, arr, raw_shape=arr.shape, raw_dtype=gguf.GGMLQuantizationType[type_name])
    out[name] = to_float(arr, type_name, shape)

  def norm(name: str, n: int) -> None:
    arr = (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    w.add_tensor(name, arr)
    out[name] = arr

  hd, H, Hkv, D, F = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.dim, cfg.ff_dim
  add("token_embd.weight", (cfg.vocab, D), qtype, 1.0)
  norm("output_norm.weight", D)
  if not tie_embeddings: add("output.weight", (cfg.vocab, D), qtype, 0.1)
  for i in range(cfg.n_layers):
    p = f"blk.{i}."
    norm(p + "attn_norm.weight", D)
    norm(p + "ffn_norm.weight", D)
    attn = {"attn_q.weight": ((H * hd, D), D ** -0.5), "attn_k.weight": ((Hkv * hd, D), D ** -0.5),
            "attn_v.weight": ((Hkv * hd, D), D ** -0.5), "attn_output.weight": ((D, H * hd), (H * hd) ** -0.5)}
    order = ("attn_k.weight", "attn_output.weight", "attn_q.weight", "attn_v.weight") if kqv_order else tuple(attn)
    for n in order: add(p + n, attn[n][0], qtype, attn[n][1])
    if a == "qwen2":
      for n, m in (("q", H), ("k", Hkv), ("v", Hkv)):
        arr = (0.1 * rng.standard_normal(m * hd)).astype(np.float32)
        w.add_tensor(p + f"attn_{n}.bias", arr)
        out[p + f"attn_{n}.bias"] = arr
    if a in ("qwen3", "qwen3moe"):
      norm(p + "attn_q_norm.weight", hd)
      norm(p + "attn_k_norm.weight", hd)
    if cfg.n_experts:
      add(p + "ffn_gate_inp.weight", (cfg.n_experts, D), "F32", 1.0)
      add(p + "ffn_gate_exps.weight", (cfg.n_experts, F, D), qtype, D ** -0.5)
      add(p + "ffn_up_exps.weight", (cfg.n_experts, F, D), qtype, D ** -0.5)
      add(p + "ffn_down_exps.weight", (cfg.n_experts, D, F), qtype, F ** -0.5)
    else:
      add(p + "ffn_gate.weight", (F, D), qtype, D ** -0.5)
      add(p + "ffn_up.weight", (F, D), qtype, D ** -0.5)
      add(p + "ffn_down.weight", (D, F), qtype, F ** -0.5)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  assert os.path.exists(path)
  return out


# ---- the numpy reference

def _rms(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
  return x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps) * w


def _rope(x: np.ndarray, positions: np.ndarray, base: float, neox: bool) -> np.ndarray:
  """x (T, H, D). Rotation of pair j by angle pos * base^(-2j/D); pairs are (2j, 2j+1), or (j, j+D/2) for neox."""
  T, H, D = x.shape
  out = x.astype(np.float64).copy()
  theta = positions[:, None].astype(np.float64) * base ** (-2.0 * np.arange(D // 2) / D)[None, :]  # (T, D/2)
  c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
  if neox: i0, i1 = np.arange(D // 2), np.arange(D // 2) + D // 2
  else: i0, i1 = np.arange(0, D, 2), np.arange(1, D, 2)
  a, b = x[..., i0], x[..., i1]
  out[..., i0], out[..., i1] = a * c - b * s, a * s + b * c
  return out


def _silu(x: np.ndarray) -> np.ndarray: return x / (1 + np.exp(-x))


def reference_forward(wts: dict[str, np.ndarray], cfg: SynthConfig, tokens: list[int]) -> np.ndarray:
  """Logits (T, vocab) of a whole sequence from position 0, in float64."""
  T, H, Hkv, hd = len(tokens), cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
  neox = cfg.arch != "llama"
  x = wts["token_embd.weight"][tokens].astype(np.float64)
  pos = np.arange(T)
  for i in range(cfg.n_layers):
    p = f"blk.{i}."
    h = _rms(x, wts[p + "attn_norm.weight"], cfg.eps)
    q = h @ wts[p + "attn_q.weight"].T
    k = h @ wts[p + "attn_k.weight"].T
    v = h @ wts[p + "attn_v.weight"].T
    if cfg.arch == "qwen2": q, k, v = q + wts[p + "attn_q.bias"], k + wts[p + "attn_k.bias"], v + wts[p + "attn_v.bias"]
    q, k, v = q.reshape(T, H, hd), k.reshape(T, Hkv, hd), v.reshape(T, Hkv, hd)
    if cfg.arch in ("qwen3", "qwen3moe"): q, k = _rms(q, wts[p + "attn_q_norm.weight"], cfg.eps), _rms(k, wts[p + "attn_k_norm.weight"], cfg.eps)
    q, k = _rope(q, pos, cfg.rope_base, neox), _rope(k, pos, cfg.rope_base, neox)
    att = np.zeros((T, H, hd))
    for head in range(H):
      kvh = head // (H // Hkv)
      s = q[:, head] @ k[:, kvh].T / np.sqrt(hd)
      s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
      s = np.exp(s - s.max(-1, keepdims=True))
      att[:, head] = (s / s.sum(-1, keepdims=True)) @ v[:, kvh]
    x = x + att.reshape(T, H * hd) @ wts[p + "attn_output.weight"].T
    h = _rms(x, wts[p + "ffn_norm.weight"], cfg.eps)
    if cfg.n_experts:
      logits = h @ wts[p + "ffn_gate_inp.weight"].T
      probs = np.exp(logits - logits.max(-1, keepdims=True))
      probs /= probs.sum(-1, keepdims=True)
      y = np.zeros_like(x)
      for t in range(T):
        top = np.argsort(-probs[t])[:cfg.n_experts_used]
        wsum = probs[t, top].sum()
        for e in top:
          g = h[t] @ wts[p + "ffn_gate_exps.weight"][e].T
          u = h[t] @ wts[p + "ffn_up_exps.weight"][e].T
          y[t] += probs[t, e] / wsum * ((_silu(g) * u) @ wts[p + "ffn_down_exps.weight"][e].T)
      x = x + y
    else:
      x = x + (_silu(h @ wts[p + "ffn_gate.weight"].T) * (h @ wts[p + "ffn_up.weight"].T)) @ wts[p + "ffn_down.weight"].T
  out_w = wts.get("output.weight", wts["token_embd.weight"])
  return _rms(x, wts["output_norm.weight"], cfg.eps) @ out_w.T
