"""Tokenizers from GGUF metadata: byte-level BPE (`tokenizer.ggml.model == "gpt2"`, with the pre-tokenizer presets of Llama 3,
SmolLM, Qwen2/3 and GPT-2) and SentencePiece-style BPE (`"llama"`); special tokens; streaming UTF-8-safe decoding; chat templates."""
from __future__ import annotations

import codecs
import datetime
import functools
import heapq
import itertools
import json
import re
import secrets
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import regex

# a chat template (from the model file: untrusted) may run this long and produce this many characters (or any one value as long).
# The first render also compiles the template under the tracer: on a loaded 2-core machine that alone took over 2 s
TEMPLATE_TIME_S = 5.0
TEMPLATE_MAX_CHARS = 1 << 22
TEMPLATE_MAX_INT_BITS = 1 << 14  # ints a template builds with * (squaring in a loop doubles the size each time)
SLOW_FILTER_CHARS = 1 << 14  # input of the filters that are superlinear in C (striptags' regex) or slow in Python (urlize, wordwrap)


class ChatTemplateError(ValueError):
  """The model's chat template ran past its limits (time, size): the model can't chat."""


class TemplateLimit(BaseException):
  """Raised inside a template render that went past a limit. A BaseException, so that no `except Exception` in jinja or in
  code the template calls swallows it (a raise from the trace function also unsets it: the render must end)."""


class _NotWhileCompiling(Exception):
  """A filter called while jinja compiles the template (constant folding): refused, so it runs later, under the limits."""


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


class SpecialTokens:
  """Finds special tokens in text: leftmost, and the longest at that position. A dict lookup per (candidate position, distinct
  length), candidates being the positions of a special token's first character: building it is linear in the vocabulary
  (one alternation regex of every special token took seconds to compile for a vocabulary with tens of thousands of them)."""

  def __init__(self, special: dict[str, int]):
    self.special = special
    self.lengths = sorted({len(t) for t in special}, reverse=True)
    self._starts = regex.compile("[" + "".join(regex.escape(c) for c in sorted({t[0] for t in special})) + "]")

  def finditer(self, text: str) -> Iterable[tuple[int, int, str]]:
    """(start, end, token) of each special token in text, left to right, not overlapping."""
    pos = 0
    while (m := self._starts.search(text, pos)) is not None:
      at = m.start()
      found = next((text[at:at + n] for n in self.lengths if text[at:at + n] in self.special), None)
      if found is None: pos = at + 1
      else:
        yield at, at + len(found), found
        pos = at + len(found)

  def sub(self, repl: Callable[[str], str], text: str) -> str:
    out, pos = [], 0
    for start, end, tok in self.finditer(text): out += [text[pos:start], repl(tok)]; pos = end  # noqa: E702
    return "".join(out) + text[pos:]


class Tokenizer:
  """`encode(text) -> ids`, `decode(ids) -> text`, `decoder()` for streaming, `render_chat(messages) -> text`."""

  def __init__(self, tokens: list[str], token_types: list[int] | None = None, model: str = "gpt2", pre: str | None = None,
               merges: list[str] | None = None, scores: list[float] | None = None, bos_id: int | None = None, eos_id: int | None = None,
               eot_id: int | None = None, unk_id: int | None = None, add_bos: bool = False, add_space_prefix: bool = True,
               chat_template: str | None = None, extra_eog: Iterable[int] = ()):
    if model not in ("gpt2", "llama"): raise ValueError(f"tokenizer model {model!r} is not supported (supported: 'gpt2' byte-level BPE, 'llama' SentencePiece)")
    self.tokens, self.model = tokens, model
    self.types = token_types if token_types is not None else [NORMAL] * len(tokens)
    self.vocab = dict(zip(tokens, range(len(tokens))))  # (a later duplicate wins, as in a comprehension; built in C)
    self.bos_id, self.eos_id, self.unk_id, self.add_bos, self.add_space_prefix = bos_id, eos_id, unk_id, add_bos, add_space_prefix
    self.chat_template = chat_template
    self.special = {t: i for i, t in enumerate(tokens) if self.types[i] in (CONTROL, USER_DEFINED)}
    self._specials = SpecialTokens(self.special) if self.special else None
    self.eog_ids = {i for i in (eos_id, eot_id) if i is not None} | set(extra_eog) | {self.vocab[t] for t in EOG_TEXTS if t in self.vocab}
    self._cache: dict[str, list[int]] = {}
    self.source = "the model"  # named in errors about the chat template (LLM.load sets the file name)
    self.template_time_s = TEMPLATE_TIME_S
    if model == "gpt2":
      # keyed by the merge's own "left right" string (byte-level pieces never hold a space): no tuple and no two new strings
      # per merge, which for a 49k-merge vocabulary is ~8 MB less resident memory
      self.ranks = dict(zip(merges or [], itertools.count()))  # no merges: every byte is its own token
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
    def g(key: str, default: Any = None) -> Any: return metadata.get(f"tokenizer.ggml.{key}", default)
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
    if parse_special and self._specials is not None:
      for start, end, tok in self._specials.finditer(text):
        if start > pos: ids += self._encode_plain(text[pos:start], first)
        ids.append(self.special[tok])
        pos, first = end, False
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
    """The prompt text for a conversation: the GGUF's chat template (jinja2), or a plain fallback if it has none or it fails.
    Raises ChatTemplateError if the template runs past its time or size limits."""
    if self.chat_template:
      try:
        return _render_template(self.chat_template, messages, add_generation_prompt, self._tok(self.bos_id), self._tok(self.eos_id),
                                self.template_time_s, **extra)
      except TemplateLimit as e:
        raise ChatTemplateError(f"the chat template of {self.source} {e}; it is not usable (a broken or hostile file?)") from None
      except Exception as e:  # noqa: BLE001 - a broken template in a file must not stop the chat
        warnings.warn(f"the chat template failed ({self.source}: {type(e).__name__}: {e}); using a plain template", stacklevel=2)
    return self._fallback_chat(messages, add_generation_prompt)

  def encode_chat(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **extra: Any) -> list[int]:
    """The prompt ids of a conversation. Message text is text: a special token typed in it (`<|im_end|>`) is encoded as plain
    text; only the template's own literal parts produce special tokens. Each special token found in a message is wrapped in
    random markers before rendering; after rendering, matches that sit between markers are plain, and the markers are dropped."""
    if self._specials is None: return self.encode(self.render_chat(messages, add_generation_prompt, **extra))
    rand = secrets.SystemRandom()
    mark = ["".join(chr(rand.randrange(0xF0000, 0xFFFFE)) for _ in range(8)) for _ in range(2)]  # (plane-15 private use: unguessable)
    specials = self._specials
    shield = lambda v: specials.sub(lambda t: mark[0] + t + mark[1], v) if isinstance(v, str) else v
    text = self.render_chat([{k: shield(v) for k, v in m.items()} for m in messages], add_generation_prompt, **extra)
    ids: list[int] = []
    if self.add_bos and self.bos_id is not None and not text.startswith(self.tokens[self.bos_id]): ids.append(self.bos_id)
    unmark = lambda t: t.replace(mark[0], "").replace(mark[1], "")
    pos, first = 0, True
    for start, end, tok in specials.finditer(text):
      if text.endswith(mark[0], 0, start) and text.startswith(mark[1], end): continue  # typed by a user: plain text
      if start > pos: ids += self._encode_plain(unmark(text[pos:start]), first)
      ids.append(self.special[tok])
      pos, first = end, False
    if pos < len(text): ids += self._encode_plain(unmark(text[pos:]), first)
    return ids

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


_HUGE_FORMAT = re.compile(r"%[^a-zA-Z%]*(\*|\d{6,})|\{[^{}]*\d{6,}")  # printf / str.format fields with 6+ digit widths
_render_state = threading.local()  # .left: characters a render may still build (size-increasing operations spend it)


def _limit_size(n: int, what: str) -> None:
  if n > TEMPLATE_MAX_CHARS: raise TemplateLimit(f"built a value of {n} items with {what} (the limit is {TEMPLATE_MAX_CHARS})")


def _spend(n: int, what: str) -> None:
  """A value of n characters (or items) is about to be built: each is bounded, and so is their sum over a render (a pipeline
  like range(10**5)|map('center', 10**5)|join makes many values that are each small enough)."""
  _limit_size(n, what)
  left = getattr(_render_state, "left", None)
  if left is None: return  # (compile-time constant folding: only the size of one value is checked)
  _render_state.left = left - n
  if _render_state.left < 0: raise TemplateLimit(f"built too many characters in all (the last with {what})")


def _size(x: Any) -> int:
  """About how many characters str(x) has (containers included), counting no further than just past the limit."""
  total, stack = 0, [x]
  while stack and total <= TEMPLATE_MAX_CHARS:
    v = stack.pop()
    if isinstance(v, str): total += len(v)
    elif isinstance(v, (list, tuple, set, frozenset)):
      total += 2 + 2 * len(v)
      if total <= TEMPLATE_MAX_CHARS: stack.extend(v)
    elif isinstance(v, dict):
      total += 2 + 4 * len(v)
      if total <= TEMPLATE_MAX_CHARS:
        stack.extend(v.keys())
        stack.extend(v.values())
    else: total += 8  # numbers, None, undefined: short
  return total


def _counted(items: Any, sep: str, what: str) -> Any:
  """The items of a join, each paid for as it is consumed (a generator's total is not known in advance)."""
  for x in items:
    _spend(_size(x) + len(sep), what)
    yield x


def _check_args(name: str, args: Iterable[Any]) -> None:
  for a in args:
    if isinstance(a, int) and not isinstance(a, bool) and abs(a) > TEMPLATE_MAX_CHARS: raise TemplateLimit(f"passed {a} to {name}")


def _bounded_filter(name: str, f: Callable) -> Callable:
  """A filter that pays for what it builds before building it (center, indent, replace, join, tojson, string) and refuses
  arguments that would make a huge value; any string it returns is paid for too."""
  @functools.wraps(f)  # (keeps jinja's pass_context / pass_eval_context marks: those filters get the context first)
  def run(*args: Any, **kwargs: Any) -> Any:
    # jinja folds filters of constants at compile time ('a'|slice(4000000) ran there, unbounded); it catches this and defers
    if getattr(_render_state, "left", None) is None: raise _NotWhileCompiling(name)
    _check_args(f"the '{name}' filter", list(args) + list(kwargs.values()))
    lead = 1 if getattr(f, "jinja_pass_arg", None) is not None else 0  # (context / eval_ctx / environment, value, ...)
    rest = list(args[lead:])
    value = rest[0] if rest else None
    if name in ("striptags", "urlize", "wordwrap") and isinstance(value, str) and len(value) > SLOW_FILTER_CHARS:
      raise TemplateLimit(f"passed {len(value)} characters to the '{name}' filter (the limit is {SLOW_FILTER_CHARS})")
    if name == "center" and isinstance(value, str): _spend(max(len(value), rest[1] if len(rest) > 1 else kwargs.get("width", 80)), "center")
    if name == "indent" and isinstance(value, str):
      width = kwargs.get("width", rest[1] if len(rest) > 1 else 4)
      _spend(len(value) + value.count("\n") * (width if isinstance(width, int) else len(str(width))), "indent")
    if name == "replace" and isinstance(value, str) and len(rest) >= 3:
      _spend((value.count(str(rest[1])) + 1) * (len(str(rest[2])) + 1) + len(value), "replace")
    if name == "join" and rest:
      sep = str(rest[1] if len(rest) > 1 else kwargs.get("d", ""))
      args = (*args[:lead], _counted(value, sep, "join"), *args[lead + 1:])
    if name in ("string", "tojson", "pprint"): _spend(_size(value), name)
    if name == "slice" and len(rest) > 1 and isinstance(rest[1], int):  # one list per slice, empty or not: paid for first
      _spend(8 * abs(rest[1]), "slice")  # ('a'|slice(4000000) built 4M lists, ~250 MB, before a deadline check came)
    if name == "format" and isinstance(value, str) and _HUGE_FORMAT.search(value): raise TemplateLimit("used a huge format width")
    out = f(*args, **kwargs)
    if isinstance(out, str) and name not in ("center", "indent", "replace", "join", "string", "tojson", "pprint"): _spend(len(out), name)
    if isinstance(out, (list, tuple)): _spend(_size(out), name)  # (list, sort, unique, ...: bounded by their input, but they add up)
    return out
  return run


@functools.lru_cache(maxsize=4)
def _compile_template(template: str):
  """The template compiled in a bounded jinja2 sandbox (see _render_template); cached: compiling takes ~10 ms a chat."""
  import jinja2
  from jinja2.compiler import CodeGenerator
  from jinja2.sandbox import ImmutableSandboxedEnvironment

  class Gen(CodeGenerator):
    def visit_Concat(self, node, frame) -> None:  # `a ~ b`: through a size check (jinja folds constant ones at compile time)
      self.write("environment.bounded_concat((")
      for arg in node.nodes:
        self.visit(arg, frame)
        self.write(", ")
      self.write("))")

  class Env(ImmutableSandboxedEnvironment):
    code_generator_class = Gen
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def bounded_concat(self, parts: tuple) -> str:
      _spend(sum(_size(p) for p in parts), "~")
      return "".join(str(p) for p in parts)

    def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
      seq = (str, list, tuple)
      if operator == "*":
        for a, b in ((left, right), (right, left)):
          if isinstance(a, seq) and isinstance(b, int): _spend(len(a) * b, "*")
        if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > TEMPLATE_MAX_INT_BITS:
          raise TemplateLimit(f"multiplied ints of {left.bit_length()} and {right.bit_length()} bits")
      elif operator == "+" and isinstance(left, seq) and isinstance(right, seq): _spend(len(left) + len(right), "+")
      elif operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right * abs(left).bit_length() > 4096:
        raise TemplateLimit(f"computed {left} ** {right}")
      elif operator == "%" and isinstance(left, str):
        if _HUGE_FORMAT.search(left): raise TemplateLimit("used a huge % format width")
        _spend(len(left) + _size(right), "%")
      return super().call_binop(context, operator, left, right)

    def call(__self, __context, __obj, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - jinja's own signature
      name = getattr(__obj, "__name__", "a function")
      _check_args(name, list(args) + list(kwargs.values()))
      target = getattr(__obj, "__self__", None)
      if isinstance(target, str):
        if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int): _spend(args[0], name)
        if name == "join" and args: args = (_counted(args[0], target, "join"), *args[1:])
        if name == "replace" and len(args) >= 2: _spend((target.count(str(args[0])) + 1) * (len(str(args[1])) + 1) + len(target), "replace")
        if name == "expandtabs": _spend(len(target) * (args[0] if args and isinstance(args[0], int) else 8), "expandtabs")
      out = super().call(__context, __obj, *args, **kwargs)
      if isinstance(out, str) and not (isinstance(target, str) and name in ("center", "ljust", "rjust", "zfill", "replace", "expandtabs", "join")):
        _spend(len(out), name)
      if isinstance(out, (list, tuple)): _spend(_size(out), name)  # str.split & co: many small strings
      return out

    def wrap_str_format(self, value: Any) -> Callable | None:  # '{:>99999999}'.format(x): the sandbox wraps it on attribute access
      target = getattr(value, "__self__", None)
      if isinstance(target, str) and getattr(value, "__name__", "") in ("format", "format_map") and _HUGE_FORMAT.search(target):
        def refuse(*args: Any, **kwargs: Any) -> str: raise TemplateLimit("used a huge format width")
        return refuse
      return super().wrap_str_format(value)

  def raise_exception(msg: str) -> None: raise jinja2.TemplateError(msg)

  def tojson(x: Any, indent: int | None = None, ensure_ascii: bool = False, **kw: Any) -> str:
    if indent is not None and not 0 <= indent <= 16: raise TemplateLimit(f"used tojson(indent={indent})")
    return json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)

  def finalize(value: Any) -> Any:  # every {{ value }} before it becomes a string (str() of a list of big strings)
    _limit_size(_size(value), "{{ }}")
    return value
  env = Env(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"], finalize=finalize)
  env.filters["tojson"] = tojson
  env.filters = {k: _bounded_filter(k, f) for k, f in env.filters.items()}
  env.globals.pop("lipsum", None)  # lipsum(n) makes n paragraphs
  env.globals["raise_exception"] = raise_exception
  env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
  return env.from_string(template)


def _rearm_after_swallowed_limit(unraisable: Any) -> None:
  """sys.unraisablehook while renders run. A raise from a trace function unsets it; when the frame it raised in was a
  finalizer (a __del__ or weakref callback the garbage collector ran in the middle of the template), Python swallows the
  exception, and the render would go on untraced and unbounded. So a swallowed TemplateLimit re-installs this thread's
  tracer, whose next check raises again in the template's own code."""
  tracer = getattr(_render_state, "tracer", None)
  if isinstance(unraisable.exc_value, TemplateLimit) and tracer is not None: sys.settrace(tracer)
  else: _previous_unraisablehook(unraisable)


_previous_unraisablehook: Callable[[Any], Any] = sys.unraisablehook


def _install_rearm_hook() -> None:
  # installed once for the process (renders may run in several threads); it delegates everything else to the hook before it
  global _previous_unraisablehook
  if sys.unraisablehook is not _rearm_after_swallowed_limit:
    _previous_unraisablehook, sys.unraisablehook = sys.unraisablehook, _rearm_after_swallowed_limit


def _render_template(template: str, messages: list[dict[str, Any]], add_generation_prompt: bool, bos: str, eos: str,
                     time_s: float = TEMPLATE_TIME_S, **extra: Any) -> str:
  """Render a chat template from a model file in jinja2's immutable sandbox, bounded. Operations that build values (string and
  list repetition, + and ~, % and format, center/indent/replace/join/..., str methods) check the size first: one value is at
  most TEMPLATE_MAX_CHARS, and all of them together at most a budget of a few times that plus the messages' size. Powers and
  numeric arguments are bounded, the output is capped, and a deadline is checked on every line the template's code runs
  (loops, macros, recursion) and on every Python call made meanwhile (filters and methods: sort keys, urlize, ...) via
  sys.settrace, and between output pieces. Raises TemplateLimit past a limit. What runs in C without calling back (a
  regex, a sort, str methods) can't be interrupted: its input is bounded instead (one value's size; the superlinear
  filters' input to SLOW_FILTER_CHARS), so each such call is bounded in time and memory."""
  size = _size(messages)
  deadline = time.monotonic() + time_s

  def on_line(frame, event: str, arg: Any):
    if time.monotonic() > deadline: raise TemplateLimit(f"ran for over {time_s:g} s")
    return on_line

  def on_call(frame, event: str, arg: Any):
    # every Python call checks the deadline (time spent inside a filter runs no template line); lines are traced only in
    # the template's own code (jinja compiles it with this file name)
    if time.monotonic() > deadline: raise TemplateLimit(f"ran for over {time_s:g} s")
    return on_line if frame.f_code.co_filename == "<template>" else None
  before = sys.gettrace()
  _install_rearm_hook()
  _render_state.tracer = on_call
  sys.settrace(on_call)
  try:
    compiled = _compile_template(template)  # (under the deadline too: a template from the file may be huge)
    _render_state.left = 4 * TEMPLATE_MAX_CHARS + 8 * size
    out, n = [], 0
    for piece in compiled.generate(messages=messages, add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos,
                                   tools=None, **extra):
      n += len(piece)
      if n > TEMPLATE_MAX_CHARS + 2 * size: raise TemplateLimit(f"produced over {n} characters")
      # (also here: a raise from the trace function unsets it, and code that swallowed that raise would run on unbounded)
      if time.monotonic() > deadline: raise TemplateLimit(f"ran for over {time_s:g} s")
      out.append(piece)
    return "".join(out)
  finally:
    sys.settrace(before)
    _render_state.left = _render_state.tracer = None
