"""Generation: a model and its tokenizer, prefill in fixed-size chunks and one-token decode (each a TinyJit over a symbolic start
position), sampling, KV-cache reuse across chat turns, and streaming text out."""
from __future__ import annotations

import os
import time
from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tinygrad import Device, Tensor, TinyJit, UOp, Variable, dtypes, reuse
from tinygrad.engine.realize import buffer_of
from tinygrad.helpers import DEBUG, ContextVar
from tinygrad.llm.gguf import GGUFFile, read_gguf
from tinygrad.llm.model import CACHE_SLACK, Transformer, UnsupportedModel, check_tokenizer_metadata, fuses_cheaply, scalar, select_rows
from tinygrad.llm.sampling import greedy, sample, sample_temperature
from tinygrad.llm.tokenizer import Tokenizer

PREFILL_CHUNK = 32
# a GPU prefills in chunks of up to GPU_PREFILL_CHUNK tokens (powers of two from PREFILL_CHUNK): fewer, fuller tensor-core matmuls
# (every chunk reads all the weights once).
GPU_PREFILL_CHUNK = 512
# a CPU in chunks of up to CPU_PREFILL_CHUNK tokens, powers of two from CPU_MIN_CHUNK: each chunk decodes every weight again
# (model.linear), which more rows share (SmolLM2 layer's four matmuls on 2 cores: ~1.3-1.5 ms for 16 rows, 2.8 for 64, 5.2 for 128). Powers
# of two, and not past 64: each size used keeps its own capture and its buffers (SmolLM2: +13 MB of peak RSS for the 64-token one,
# +27 MB for a 128-token one, which prefilled only ~6% faster per token)
CPU_PREFILL_CHUNK, CPU_MIN_CHUNK = 64, 16
# decode runs ahead of the host: each step reads its token from, and writes the next one into, a ring of recent tokens on the
# device, so steps are queued back to back and the host reads the ring once per batch of steps. A batch is sized to run about
# BATCH_S (streamed text stays smooth on a slow device), at most RING steps.
RING = 256
BATCH_S = 0.1


# AHEAD=0: LLM.load(ahead=...) builds nothing ahead (every kernel is built when the first prompt needs it)
AHEAD = ContextVar("AHEAD", 1)
# LLM.load without `ahead`, on a GPU: the prompt lengths whose kernels are built ahead all the same (the first prompt isn't known,
# so typical ones: a chat prompt of 33-64 tokens, 65-128, up to 32; each length stands for its prefill chunk and attention span,
# and they share the decode step's products). A prompt of another size still builds its own when it comes. "" guesses nothing
AHEAD_GUESS = ContextVar("AHEAD_GUESS", "64,128,32")
# OPEN_EARLY=1: LLM.load opens the device on a thread while it parses the file (Device.open_early)
OPEN_EARLY = ContextVar("OPEN_EARLY", 0)


def _empty_ids(T: int, device: str) -> Tensor:
  return Tensor.empty(1, T, dtype=dtypes.int32, device=device)


def first_prompt_ahead(g: GGUFFile, tok: Tokenizer, ahead: int | list[dict] | list[int], max_context: int | None = None,
                       cache_dtype=dtypes.float32, prefill_chunk: int | None = None, modes: tuple[str, ...] = ("greedy",)) -> int:
  """Start building the kernels of a first prompt (`ahead` tokens, these chat messages, or a list of token counts: each of those
  prompts) in the compile pool, before the weights are read: a dry run (engine/ahead.py) of the prompt on a skeleton of the
  model (its first layer over empty buffers: the other layers run the same kernels) collects them, the pool's processes lower
  and compile them while this process reads the file, and the real run takes them from there. The first token and decode step
  are sampled in each of `modes` (for the first prompt only: sampling's kernels are the same for every prompt length). Returns
  how many kernels went to the pool (0 without a pool, for a mixture-of-experts model, which runs eagerly on its router's data,
  or when the file isn't a model: from_gguf raises that later, as without this)."""
  from tinygrad.engine.ahead import build_ahead, dry_run
  from tinygrad.workers import compile_pool
  if compile_pool() is None: return 0
  if isinstance(ahead, int): sizes = [ahead]
  elif all(isinstance(m, int) for m in ahead): sizes = list(ahead)  # type: ignore[arg-type]
  else: sizes = [len(tok.encode_chat(ahead, add_generation_prompt=True))]  # type: ignore[arg-type]
  saved = dict(reuse.stats)  # the skeleton's layer is recorded for nothing (its dry run ran no kernels): not counted
  try:
    with dry_run() as items:
      skeleton = Transformer.from_gguf(g, max_context=max_context, cache_dtype=cache_dtype, skeleton=True)
      if skeleton.is_moe: return 0
      llm = LLM(skeleton, tok, prefill_chunk=prefill_chunk, jit=False)
      for i, n in enumerate(sizes): llm._dry_first_prompt(n, modes if i == 0 else ("greedy",))
  except Exception as e:  # noqa: BLE001  a file the real load rejects (it raises there, with its message), or a dry run that can't
    if DEBUG >= 1: print(f"LLM.load: nothing built ahead ({type(e).__name__}: {e})")
    return 0
  finally: reuse.stats.update(saved)
  return build_ahead(items)  # (zero fills too: a device without zeroed allocations runs them as kernels)


def guessed_prompt_sizes(device: str) -> list[int]:
  """AHEAD_GUESS's prompt lengths where LLM.load isn't told the first prompt: on a GPU (where compiling is most of a cold first
  token), none on a CPU."""
  if not fuses_cheaply(device): return []
  try: return [int(n) for n in str(AHEAD_GUESS.value).replace(" ", "").split(",") if n]
  except ValueError as e: raise ValueError(f"AHEAD_GUESS={AHEAD_GUESS.value!r}: give prompt lengths as integers separated by commas (or \"\")") from e


class ContextLengthExceeded(ValueError):
  """The prompt (plus at least one new token) doesn't fit in the model's context."""


@dataclass
class GenerationStats:
  prompt_tokens: int = 0
  cached_tokens: int = 0        # prompt tokens whose keys/values were already in the cache
  completion_tokens: int = 0
  prefill_s: float = 0.0
  decode_s: float = 0.0
  finish_reason: str = "length"

  @property
  def prefill_tps(self) -> float: return (self.prompt_tokens - self.cached_tokens) / self.prefill_s if self.prefill_s else 0.0
  @property
  def decode_tps(self) -> float: return max(self.completion_tokens - 1, 0) / self.decode_s if self.decode_s else 0.0


@dataclass
class SamplingParams:
  temperature: float = 0.0
  top_k: int = 0
  top_p: float = 1.0
  seed: int = 0
  stop_ids: set[int] = field(default_factory=set)
  ignore_eos: bool = False  # don't stop at the tokenizer's end-of-generation tokens (benchmarks)


class LLM:
  def __init__(self, model: Transformer, tokenizer: Tokenizer, name: str = "model", prefill_chunk: int | None = None, jit: bool | None = None):
    self.model, self.tokenizer, self.name = model, tokenizer, name
    self.max_context = model.max_context
    gpu = fuses_cheaply(model.norm.device)
    if prefill_chunk is None: prefill_chunk = GPU_PREFILL_CHUNK if gpu else CPU_PREFILL_CHUNK
    if not 1 <= prefill_chunk <= CACHE_SLACK: raise ValueError(f"prefill_chunk {prefill_chunk} is not in 1..{CACHE_SLACK} (the KV cache's slack)")
    self.chunk = min(prefill_chunk, self.max_context)
    # the chunk sizes a prompt is cut into: powers of two from PREFILL_CHUNK (a GPU) or CPU_MIN_CHUNK (a CPU) up to self.chunk (a
    # short prompt pads to the smallest that holds it, not to the longest: less padded work, at the cost of one more capture per
    # size used)
    self.chunks = sorted({c for c in ((PREFILL_CHUNK if gpu else CPU_MIN_CHUNK) << i for i in range(16)) if c < self.chunk} | {self.chunk})
    # a TinyJit replays fixed kernels, so the MoE router's host-side expert choice can't be inside one: those models run eagerly
    self.jit = (not model.is_moe) if jit is None else jit
    self.cached: list[int] = []  # tokens whose keys/values are at positions 0.. of the cache
    self._v_start = model.position_var
    # every tensor the jitted pieces read besides their inputs (weights, cache, rope tables) is realized at load, so they capture
    # on their first call: one scheduling pass fewer before the first token and on the first step into a new attention span
    self._wrap = (lambda f: TinyJit(f, capture_after=0)) if self.jit else (lambda f: f)
    # one prefill and one decode capture per attention span (a power of two, Transformer.attn_len): attention's work grows with
    # the position instead of always spanning max_context; a new span is captured the first time a position reaches it
    self._prefill_jits: dict[tuple[int, int], Any] = {}  # (chunk size, attn_len) -> capture
    self._v_last: dict[int, UOp] = {}  # chunk size -> the chunk's last real token, a symbolic index
    self._decode_jits: dict[int, Any] = {}
    self._sample = self._wrap(sample)
    self._sample_temperature = self._wrap(sample_temperature)
    self._greedy = self._wrap(greedy)
    self._step_jits: dict[tuple[int, str], Any] = {}  # (attn_len, sampling mode) -> the decode step with its sampler
    self._ring = Tensor.zeros(RING, dtype=dtypes.int32, device=model.norm.device).contiguous().realize()
    self._batch = 1  # decode steps per readback, adapted to the device's speed (BATCH_S)
    self._ring_holds: tuple[int, int] | None = None  # (position, token) the ring is known to hold there

  @staticmethod
  def load(path: str, max_context: int | None = None, cache_dtype=dtypes.float32, ahead: int | list[dict] | list[int] | None = None,
           **kwargs) -> LLM:
    """The model and tokenizer of a GGUF file. `ahead`: the first prompt expected (its token count, its chat messages, or a list of
    token counts): the kernels of its prefill, sample and first decode step are built in the compile pool while the weights are read
    (first_prompt_ahead). Without it, on a GPU, those of typical first prompts are (AHEAD_GUESS)."""
    if OPEN_EARLY.value: Device.open_early(Device.DEFAULT)  # the device opens (a GPU's context) while the file is parsed
    g: GGUFFile = read_gguf(path)
    check_tokenizer_metadata(g)
    try: tok = Tokenizer.from_gguf(g.metadata)
    except ValueError as e: raise UnsupportedModel(f"{path}: {e}") from e  # well-typed but unsupported (a tokenizer model, a byte token)
    tok.source = os.path.basename(path)
    if AHEAD.value:
      # where no prompt is given: typical ones (on a GPU), sampled greedily (a script's default) and with a temperature (the server's)
      guessed = ahead is None
      if guessed: ahead = guessed_prompt_sizes(Device.DEFAULT) or None
      if ahead is not None:
        first_prompt_ahead(g, tok, ahead, max_context=max_context, cache_dtype=cache_dtype, prefill_chunk=kwargs.get("prefill_chunk"),
                           modes=("greedy", "temperature") if guessed else ("greedy",))
    model = Transformer.from_gguf(g, max_context=max_context, cache_dtype=cache_dtype)
    name = g.get("general.name") or os.path.basename(path)
    return LLM(model, tok, name=name, **kwargs)

  # ---- the jitted pieces: pure functions of (token rows, start position) over the model's KV cache
  def _jit_for(self, jits: dict, key: Any, attn_len: int) -> Any:
    if (fn := jits.get(key)) is None:
      def run(rows: Tensor, start_pos, last=None) -> Tensor: return self.model.forward(rows, start_pos, last, attn_len=attn_len).realize()
      fn = jits[key] = self._wrap(run)
    return fn

  def _chunk_size(self, n: int) -> int:
    """The chunk that holds the next n prompt tokens: the smallest size >= n, else the largest."""
    return next((c for c in self.chunks if c >= n), self.chunks[-1])

  def _run_chunk(self, ids: list[int], start: int) -> Tensor:
    """Logits after `ids` (at most one chunk) written at positions start.."""
    n = len(ids)
    L = self.model.attn_len(start + n)
    if n == 1: return self._jit_for(self._decode_jits, L, L)(self.model.token_ids(ids), self._v_start.bind(start))
    size = self._chunk_size(n)
    padded = ids + [ids[-1]] * (size - n)  # the padding's keys/values land past the prompt, where the next tokens overwrite them
    last = self._v_last.setdefault(size, Variable(f"last{size}", 0, size - 1)).bind(n - 1)
    return self._jit_for(self._prefill_jits, (size, L), L)(self.model.token_ids(padded), self._v_start.bind(start), last)

  def _dry_first_prompt(self, n: int, modes: tuple[str, ...] = ("greedy",)) -> None:
    """What the first prompt of n tokens runs (its prefill chunks, the sample of each of these modes, its first decode step),
    realized with rows that hold nothing: under engine/ahead.py's dry run, to collect its kernels. The pieces are this LLM's own
    (built with jit=False: the same graphs a capture makes), with inputs realized as TinyJit realizes them."""
    device = self.model.norm.device
    n = max(1, min(n, self.max_context - 1))
    pos, logits = 0, None
    while pos < n:
      k = min(self.chunk, n - pos)
      L = self.model.attn_len(pos + k)
      if k == 1: logits = self._jit_for(self._decode_jits, L, L)(_empty_ids(1, device), self._v_start.bind(pos))
      else:
        size = self._chunk_size(k)
        last = self._v_last.setdefault(size, Variable(f"last{size}", 0, size - 1)).bind(k - 1)
        logits = self._jit_for(self._prefill_jits, (size, L), L)(_empty_ids(size, device), self._v_start.bind(pos), last)
      pos += k
    assert logits is not None
    for mode in modes:
      params = SamplingParams(temperature=0.0 if mode == "greedy" else 0.7)
      assert self._sampling_mode(params) == mode, f"no dry run for sampling mode {mode!r}"
      knobs = self._knobs(params)
      if mode == "greedy": self._greedy(logits).realize()
      else: self._sample_temperature(logits, knobs[0], Tensor([params.seed, n], dtype=dtypes.uint32)).realize()
      self._step_for(self.model.attn_len(n + 1), mode)(self._v_start.bind(n), knobs)

  def _knobs(self, params: SamplingParams) -> list[Tensor]:
    """A decode step's sampling inputs: none for greedy; else temperature, top-k, top-p and seed, each a (1,) tensor."""
    if self._sampling_mode(params) == "greedy": return []
    return [Tensor([params.temperature], dtype=dtypes.float32), Tensor([params.top_k], dtype=dtypes.int32),
            Tensor([params.top_p], dtype=dtypes.float32), Tensor([params.seed & 0xFFFFFFFF], dtype=dtypes.uint32)]

  def _sampling_mode(self, params: SamplingParams) -> str:
    """greedy (temperature 0), temperature (top-k and top-p off: the Gumbel draw alone, no threshold searches over the vocabulary)
    or filtered. A top_k of at least the vocabulary's size keeps every token, as 0 does."""
    if params.temperature <= 0: return "greedy"
    return "filtered" if 0 < params.top_k < self.model.cfg.vocab_size or params.top_p < 1 else "temperature"

  def _step_for(self, attn_len: int, mode: str) -> Any:
    """The decode step: the token at start_pos from the ring -> the model -> the sampled next token into the ring at start_pos + 1.
    mode: `_sampling_mode`'s."""
    if (fn := self._step_jits.get((attn_len, mode))) is None:
      model, ring = self.model, self._ring
      def step(start_pos: UOp, knobs: list[Tensor]) -> Tensor:
        tok = select_rows(ring, start_pos % RING, 1).reshape(1, 1)
        pos = scalar(start_pos, ring.device) + 1
        # greedy and temperature draws through the head's int8 screen (head_screen.py), where the model has one
        if mode == "greedy": nxt = model.greedy_next(tok, start_pos, attn_len=attn_len)
        else:  # the draw depends on (seed, position of the new token), as in LLM.sample
          temperature, top_k, top_p, seed = knobs
          key = seed.cat(pos.cast(dtypes.uint32).reshape(1))
          if mode == "filtered": nxt = sample(model.forward(tok, start_pos, attn_len=attn_len), temperature, top_k, top_p, key)
          else: nxt = model.drawn_next(tok, start_pos, temperature, key, attn_len=attn_len)
        at = Tensor.arange(RING, dtype=dtypes.int32, device=ring.device) == pos % RING
        return ring.assign(at.where(nxt, ring)).realize()
      fn = self._step_jits[(attn_len, mode)] = self._wrap(step)
    return fn

  def _decode_batch(self, tok: int, pos: int, n: int, params: SamplingParams) -> list[int]:
    """Run n decode steps from `tok` at position `pos`, queued back to back on the device; the n tokens they sample."""
    if self._ring_holds != (pos, tok):  # a new generation (the batch before this one left its last token in the ring)
      ring = array("i", bytes(4 * RING))
      ring[pos % RING] = tok
      # data in, straight into the ring's buffer: an assign would schedule a copy (about 1 ms of host time per generation)
      buffer_of(self._ring.uop.base).copyin(memoryview(ring).cast("B"))
    mode, knobs = self._sampling_mode(params), self._knobs(params)
    for p in range(pos, pos + n): self._step_for(self.model.attn_len(p + 1), mode)(self._v_start.bind(p), knobs)
    out = self._ring.data()  # a typed view, read in place (not .numpy(): the CLI never imports numpy, ~10 MB of resident memory)
    toks = [int(out[(p + 1) % RING]) for p in range(pos, pos + n)]
    self._ring_holds = (pos + n, toks[-1])
    return toks

  def prefill(self, ids: list[int]) -> tuple[Tensor, int]:
    """Put `ids` in the cache (reusing the longest prefix already there); the logits after the last one, and how many were reused."""
    if not ids: raise ValueError("can't generate from an empty prompt")
    if len(ids) >= self.max_context:
      raise ContextLengthExceeded(f"the prompt has {len(ids)} tokens; the context holds {self.max_context} (with room for one new token)")
    reuse = 0
    while reuse < min(len(ids) - 1, len(self.cached)) and self.cached[reuse] == ids[reuse]: reuse += 1
    self.cached = self.cached[:reuse]
    pos, logits = reuse, None
    while pos < len(ids):
      n = min(self.chunk, len(ids) - pos)  # a chunk may run past the end of the cache: positions past it are masked out
      logits = self._run_chunk(ids[pos:pos + n], pos)
      pos += n
    self.cached = list(ids)
    assert logits is not None
    return logits, reuse

  def sample(self, logits: Tensor, params: SamplingParams, position: int = 0) -> int:
    """The next token from logits. The random draw depends on (seed, position): the same prompt and seed give the same answer."""
    if (mode := self._sampling_mode(params)) == "greedy": return int(self._greedy(logits).item())
    key = Tensor([params.seed & 0xFFFFFFFF, position & 0xFFFFFFFF], dtype=dtypes.uint32)
    if mode == "temperature": return int(self._sample_temperature(logits, Tensor([params.temperature], dtype=dtypes.float32), key).item())
    out = self._sample(logits, Tensor([params.temperature], dtype=dtypes.float32), Tensor([params.top_k], dtype=dtypes.int32),
                       Tensor([params.top_p], dtype=dtypes.float32), key)
    return int(out.item())

  def generate(self, ids: list[int], max_new_tokens: int | None = None, params: SamplingParams | None = None,
               stats: GenerationStats | None = None) -> Iterator[int]:
    """Yield new token ids (the end-of-generation token is not yielded) until a stop token, max_new_tokens, or a full context."""
    params = params or SamplingParams()
    stats = stats if stats is not None else GenerationStats()
    stop = params.stop_ids if params.ignore_eos else self.tokenizer.eog_ids | params.stop_ids
    stats.prompt_tokens = len(ids)
    t0 = time.perf_counter()
    logits, stats.cached_tokens = self.prefill(ids)
    tok = self.sample(logits, params, len(ids))
    stats.prefill_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    limit = self.max_context - len(ids)
    if max_new_tokens is not None: limit = min(limit, max_new_tokens)
    n = 0
    ahead: deque[int] = deque()  # tokens sampled by steps already run, not yet yielded
    while True:
      if tok in stop:
        stats.finish_reason = "stop"
        break
      n += 1
      stats.completion_tokens = n
      yield tok
      if n >= limit:
        stats.finish_reason = "length"
        break
      if not ahead:  # the next batch; tokens past a stop token are computed and dropped (their cache rows are never used)
        k, tb = min(self._batch, limit - n), time.perf_counter()
        ahead.extend(self._decode_batch(tok, len(self.cached), k, params))
        self._batch = max(1, min(RING, int(BATCH_S * k / max(time.perf_counter() - tb, 1e-6))))
        stats.decode_s = time.perf_counter() - t1
      self.cached.append(tok)
      tok = ahead.popleft()

  # ---- text in, text out
  def chat_ids(self, messages: list[dict]) -> list[int]:
    return self.tokenizer.encode_chat(messages, add_generation_prompt=True)  # (message text never becomes special tokens)

  def stream_text(self, ids: list[int], max_new_tokens: int | None = None, params: SamplingParams | None = None,
                  stats: GenerationStats | None = None) -> Iterator[str]:
    dec = self.tokenizer.decoder()
    for tok in self.generate(ids, max_new_tokens, params, stats):
      if text := dec.add(tok): yield text
    if text := dec.flush(): yield text
