"""Tokenizers from GGUF metadata: byte-level BPE (`tokenizer.ggml.model == "gpt2"`, with the pre-tokenizer presets of Llama 3,
SmolLM, Qwen2/3 and GPT-2) and SentencePiece-style BPE (`"llama"`); special tokens; streaming UTF-8-safe decoding; chat templates."""
from __future__ import annotations

import codecs
import datetime
import heapq
import json
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import regex

# token types (llama.cpp's llama_token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# ---- pre-tokenizers: each preset is a list of regexes applied in turn (text a regex doesn't match stays a piece of its own)
_GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
_QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
PRE_TOKENIZERS: dict[str, list[str]] = {
  "default": [_GPT2], "gpt2": [_GPT2], "gpt-2": [_GPT2],
  "llama3": [_LLAMA3], "llama-bpe": [_LLAMA3], "llama-v3": [_LLAMA3], "dbrx": [_LLAMA3], "smaug-bpe": [_LLAMA3],
  "qwen2": [_QWEN2], "qwen35": [_QWEN2], "deepseek-r1-qwen": [_QWEN2], "megrez": [_QWEN2],
  # SmolLM (like StarCoder): every digit on its own, then GPT-2's rules
  "smollm": [r"\p{N}", _GPT2], "starcoder": [r"\p{N}", _GPT2], "refact": [r"\p{N}", _GPT2], "codeshell": [_GPT2],
}

EOG_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "<|eom_id|>",
             "<|return|>", "<|call|>", "<｜end▁of▁sentence｜>")


def _bytes_to_unicode() -> dict[int, str]:
  """GPT-2's byte <-> printable character table: bytes that print stay themselves, the others map to 256 + n."""
  keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
  out, n = {}, 0
  for b in range(256):
    if b in keep: out[b] = chr(b)
    else:
      out[b] = chr(256 + n)
      n += 1
  return out


BYTE_TO_CHAR = _bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def _merge_pairs(parts: list[str], rank_of: Callable[[str, str], Any]) -> list[str]:
  """BPE: merge the adjacent pair of lowest rank (the leftmost of equal ranks) until no pair has a rank, in O(n log n).

  A heap of candidate pairs (rank, left index) over a linked list of symbols; a merge bumps the left symbol's version and kills
  the right one, so stale heap entries are skipped when popped. The same merges as rescanning all pairs after every merge, which
  is quadratic (16 KB of 'a' took seconds)."""
  n = len(parts)
  if n < 2: return parts
  nxt, prv, ver = list(range(1, n + 1)), list(range(-1, n - 1)), [0] * n
  nxt[-1] = -1
  heap = [(r, i, 0, 0) for i in range(n - 1) if (r := rank_of(parts[i], parts[i + 1])) is not None]
  heapq.heapify(heap)
  while heap:
    _, i, vi, vj = heapq.heappop(heap)
    j = nxt[i]
    if ver[i] != vi or j < 0 or ver[j] != vj: continue  # a symbol of this pair changed since it was pushed
    parts[i] += parts[j]
    ver[i], ver[j] = ver[i] + 1, -1
    k = nxt[j]
    nxt[i] = k
    if k >= 0: prv[k] = i
    if (h := prv[i]) >= 0 and (r := rank_of(parts[h], parts[i])) is not None: heapq.heappush(heap, (r, h, ver[h], ver[i]))
    if k >= 0 and (r := rank_of(parts[i], parts[k])) is not None: heapq.heappush(heap, (r, i, ver[i], ver[k]))
  out, i = [], 0
  while i >= 0:
    out.append(parts[i])
    i = nxt[i]
  return out


class Tokenizer:
  """`encode(text) -> ids`, `decode(ids) -> text`, `decoder()` for streaming, `render_chat(messages) -> text`."""

  def __init__(self, tokens: list[str], token_types: list[int] | None = None, model: str = "gpt2", pre: str | None = None,
               merges: list[str] | None = None, scores: list[float] | None = None, bos_id: int | None = None, eos_id: int | None = None,
               eot_id: int | None = None, unk_id: int | None = None, add_bos: bool = False, add_space_prefix: bool = True,
               chat_template: str | None = None, extra_eog: Iterable[int] = ()):
    if model not in ("gpt2", "llama"): raise ValueError(f"tokenizer model {model!r} is not supported (supported: 'gpt2' byte-level BPE, 'llama' SentencePiece)")
    self.tokens, self.model = tokens, model
    self.types = token_types if token_types is not None else [NORMAL] * len(tokens)
    self.vocab = {t: i for i, t in enumerate(tokens)}
    self.bos_id, self.eos_id, self.unk_id, self.add_bos, self.add_space_prefix = bos_id, eos_id, unk_id, add_bos, add_space_prefix
    self.chat_template = chat_template
    self.special = {t: i for i, t in enumerate(tokens) if self.types[i] in (CONTROL, USER_DEFINED)}
    self._special_re = regex.compile("|".join(regex.escape(t) for t in sorted(self.special, key=len, reverse=True))) if self.special else None
    self.eog_ids = {i for i in (eos_id, eot_id) if i is not None} | set(extra_eog) | {self.vocab[t] for t in EOG_TEXTS if t in self.vocab}
    self._cache: dict[str, list[int]] = {}
    if model == "gpt2":
      # keyed by the merge's own "left right" string (byte-level pieces never hold a space): no tuple and no two new strings
      # per merge, which for a 49k-merge vocabulary is ~8 MB less resident memory
      self.ranks = {m: i for i, m in enumerate(merges or [])}  # no merges: every byte is its own token
      preset = (pre or "default").lower()
      if preset not in PRE_TOKENIZERS:
        warnings.warn(f"unknown tokenizer pre-tokenizer {pre!r}; using GPT-2's rules (known: {', '.join(sorted(PRE_TOKENIZERS))})", stacklevel=2)
        preset = "default"
      self.pre = preset
      self.splitters = [regex.compile(p) for p in PRE_TOKENIZERS[preset]]
    else:
      self.scores = scores if scores is not None else [0.0] * len(tokens)
      self.byte_ids = {}
      for i, t in enumerate(tokens):
        if self.types[i] == BYTE and len(t) == 6 and t.startswith("<0x"): self.byte_ids[int(t[3:5], 16)] = i

  @staticmethod
  def from_gguf(metadata: dict[str, Any]) -> Tokenizer:
    g = lambda k, d=None: metadata.get(f"tokenizer.ggml.{k}", d)
    if "tokenizer.ggml.tokens" not in metadata: raise ValueError("the GGUF has no tokenizer (tokenizer.ggml.tokens is missing)")
    return Tokenizer(g("tokens"), g("token_type"), g("model", "gpt2"), g("pre"), g("merges"), g("scores"), g("bos_token_id"),
                     g("eos_token_id"), g("eot_token_id"), g("unknown_token_id"), bool(g("add_bos_token", g("model") == "llama")),
                     bool(g("add_space_prefix", True)), metadata.get("tokenizer.chat_template"),
                     [i for i in (g("eom_token_id"),) if i is not None])

  @property
  def vocab_size(self) -> int: return len(self.tokens)

  # ---- encoding
  def encode(self, text: str, add_bos: bool | None = None, parse_special: bool = True) -> list[int]:
    """Text -> token ids. Special tokens written in the text (e.g. from a chat template) become their ids."""
    ids: list[int] = []
    if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None and not (parse_special and text.startswith(self.tokens[self.bos_id])):
      ids.append(self.bos_id)
    pos, first = 0, True
    if parse_special and self._special_re is not None:
      for m in self._special_re.finditer(text):
        if m.start() > pos:
          ids += self._encode_plain(text[pos:m.start()], first)
        ids.append(self.special[m.group()])
        pos, first = m.end(), False
    if pos < len(text): ids += self._encode_plain(text[pos:], first)
    return ids

  def _encode_plain(self, text: str, first: bool) -> list[int]:
    if self.model == "llama": return self._encode_spm(text, first)
    pieces = [text]
    for splitter in self.splitters:
      new = []
      for piece in pieces:
        at = 0
        for m in splitter.finditer(piece):
          if m.start() > at: new.append(piece[at:m.start()])
          if m.group(): new.append(m.group())
          at = m.end()
        if at < len(piece): new.append(piece[at:])
      pieces = new
    out: list[int] = []
    for piece in pieces: out += self._bpe("".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8")))
    return out

  def _bpe(self, word: str) -> list[int]:
    """Byte-level BPE on one pre-token: merge the lowest-ranked adjacent pair until none is left."""
    if (cached := self._cache.get(word)) is not None: return cached
    if word in self.vocab and len(word) == 1: return [self.vocab[word]]
    parts = _merge_pairs(list(word), self._bpe_rank)
    out = []
    for p in parts:
      if p in self.vocab: out.append(self.vocab[p])
      else: out += [self.vocab[c] for c in p if c in self.vocab]  # a merge product missing from the vocabulary: fall back to pieces
    if len(word) <= 64 and len(self._cache) < 100_000: self._cache[word] = out  # (long words are rare: keep memory bounded)
    return out

  def _bpe_rank(self, a: str, b: str) -> int | None: return self.ranks.get(a + " " + b)

  def _spm_rank(self, a: str, b: str) -> float | None:
    tid = self.vocab.get(a + b)  # the best score merges first: rank by -score
    return -self.scores[tid] if tid is not None and self.types[tid] in (NORMAL, USER_DEFINED, UNUSED) else None

  def _encode_spm(self, text: str, first: bool) -> list[int]:
    """SentencePiece-style BPE: spaces become '▁', then the adjacent pair whose merge is in the vocabulary with the best score
    merges first; characters missing from the vocabulary fall back to byte tokens <0xXX>."""
    if not text: return []
    text = text.replace(" ", "▁")
    if first and self.add_space_prefix: text = "▁" + text
    parts = _merge_pairs(list(text), self._spm_rank)
    out = []
    for p in parts:
      if p in self.vocab: out.append(self.vocab[p])
      else:
        for b in p.encode("utf-8"):
          if b in self.byte_ids: out.append(self.byte_ids[b])
          elif self.unk_id is not None: out.append(self.unk_id)
    return out

  # ---- decoding
  def token_bytes(self, tid: int, skip_special: bool = True) -> bytes:
    """The bytes one token stands for (control tokens are empty when skip_special)."""
    if not 0 <= tid < len(self.tokens): raise ValueError(f"token id {tid} is out of range for a vocabulary of {len(self.tokens)}")
    text, kind = self.tokens[tid], self.types[tid]
    if kind == CONTROL: return b"" if skip_special else text.encode("utf-8")
    if kind == USER_DEFINED: return text.encode("utf-8")
    if self.model == "llama":
      if kind == BYTE: return bytes([int(text[3:5], 16)])
      return text.replace("▁", " ").encode("utf-8")
    return bytes(CHAR_TO_BYTE[c] for c in text if c in CHAR_TO_BYTE) if all(c in CHAR_TO_BYTE for c in text) else text.encode("utf-8")

  def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
    raw = b"".join(self.token_bytes(i, skip_special) for i in ids)
    text = raw.decode("utf-8", errors="replace")
    if self.model == "llama" and self.add_space_prefix and text.startswith(" "): text = text[1:]
    return text

  def decoder(self, skip_special: bool = True) -> StreamDecoder: return StreamDecoder(self, skip_special)

  # ---- chat
  def render_chat(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **extra: Any) -> str:
    """The prompt text for a conversation: the GGUF's chat template (jinja2), or a plain fallback if it has none or it fails."""
    if self.chat_template:
      try: return _render_template(self.chat_template, messages, add_generation_prompt, self._tok(self.bos_id), self._tok(self.eos_id), **extra)
      except Exception as e:  # noqa: BLE001 - a broken template in a file must not stop the chat
        warnings.warn(f"the model's chat template failed ({type(e).__name__}: {e}); using a plain template", stacklevel=2)
    return self._fallback_chat(messages, add_generation_prompt)

  def _tok(self, tid: int | None) -> str: return self.tokens[tid] if tid is not None and 0 <= tid < len(self.tokens) else ""

  def _fallback_chat(self, messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
    if "<|im_start|>" in self.vocab:
      out = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
      return out + ("<|im_start|>assistant\n" if add_generation_prompt else "")
    if "<|start_header_id|>" in self.vocab:
      out = self._tok(self.bos_id) + "".join(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>" for m in messages)
      return out + ("<|start_header_id|>assistant<|end_header_id|>\n\n" if add_generation_prompt else "")
    out = "".join(f"{m['role'].capitalize()}: {m['content']}\n" for m in messages)
    return out + ("Assistant:" if add_generation_prompt else "")


class StreamDecoder:
  """Token ids in, text out as soon as it is complete UTF-8 (a character split over tokens waits for its last byte)."""

  def __init__(self, tok: Tokenizer, skip_special: bool = True):
    self.tok, self.skip_special = tok, skip_special
    self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    self.first = True

  def add(self, tid: int) -> str:
    text = self.utf8.decode(self.tok.token_bytes(tid, self.skip_special))
    if self.first and text:
      self.first = False
      if self.tok.model == "llama" and self.tok.add_space_prefix and text.startswith(" "): text = text[1:]
    return text

  def flush(self) -> str: return self.utf8.decode(b"", final=True)


def _render_template(template: str, messages: list[dict[str, Any]], add_generation_prompt: bool, bos: str, eos: str, **extra: Any) -> str:
  import jinja2
  from jinja2.sandbox import ImmutableSandboxedEnvironment

  def raise_exception(msg: str) -> None: raise jinja2.TemplateError(msg)
  env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
  env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False, **kw: json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)
  env.globals["raise_exception"] = raise_exception
  env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
  return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos,
                                          tools=None, **extra)
