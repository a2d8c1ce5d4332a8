"""An OpenAI-compatible HTTP server (stdlib http.server, one thread per connection): GET /v1/models, POST /v1/chat/completions
(streaming SSE or one JSON answer), and a chat web page at /. The model and its KV cache serve one generation at a time: requests
wait their turn in a bounded queue (429 when it is full; a streamed request sees its place as SSE comments).

It binds 127.0.0.1 and answers only its own pages: the Host header must name this server (DNS rebinding), a request with an
Origin header must come from the same origin, and POST bodies must be JSON with a Content-Length (no cross-site "simple"
requests). --allow-origin / --allow-host open it up explicitly. Request bodies are size-limited before they are read, a request
must arrive within a deadline (slow and idle clients are dropped), connections are capped, and a client that stops reading a
stream is dropped after a write timeout."""
from __future__ import annotations

import io
import json
import math
import re
import select
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from tinygrad.llm.engine import LLM, ContextLengthExceeded, GenerationStats, SamplingParams
from tinygrad.llm.tokenizer import ChatTemplateError

DEFAULT_TEMPERATURE = 0.7  # when a request gives none (OpenAI's default is 1.0; small models ramble at 1.0)


@dataclass
class ServerOptions:
  allow_origins: set[str] = field(default_factory=set)  # origins besides the server's own that may call it ("*": any)
  allow_hosts: set[str] = field(default_factory=set)    # Host header names besides localhost and the bound address ("*": any)
  max_body: int = 4 << 20          # bytes; larger bodies get 413 before they are read
  request_timeout: float = 30.0    # seconds for a whole request (line, headers, body) to arrive, from when the server waits for it
  write_timeout: float = 30.0      # seconds one write to a client may block (a client that stops reading a stream)
  max_connections: int = 64        # open connections; more get 503 at once
  max_queue: int = 16              # requests waiting for the model besides the running one; more get 429
  max_tokens: int | None = None    # a cap on any request's max_tokens (the remaining context always caps it)


class RequestError(Exception):
  def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None, kind: str = "invalid_request_error"):
    super().__init__(message)
    self.status, self.message, self.code, self.param, self.kind = status, message, code, param, kind

  def body(self) -> dict: return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def _text_of(content: Any) -> str:
  """A message's content: a string, or a list of parts of which the text parts count."""
  if content is None: return ""
  if isinstance(content, str): return content
  if isinstance(content, list):
    out = []
    for part in content:
      if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str): out.append(part["text"])
      elif isinstance(part, str): out.append(part)
      else: raise RequestError(400, "only text content parts are supported", param="messages")
    return "".join(out)
  raise RequestError(400, "message content must be a string or a list of text parts", param="messages")


ROLES = ("system", "developer", "user", "assistant", "tool")
INT64 = 1 << 63


def _is_int(v: Any) -> bool: return isinstance(v, int) and not isinstance(v, bool)
def _is_num(v: Any) -> bool: return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and math.isfinite(v))


def parse_chat_request(body: Any) -> tuple[list[dict], dict]:
  """Validate a chat completion request with the OpenAI API's types, strictly (1.0 is not an integer, "false" not a boolean)."""
  if not isinstance(body, dict): raise RequestError(400, "the request body must be a JSON object")
  if body.get("model") is not None and not isinstance(body["model"], str): raise RequestError(400, "model must be a string", param="model")
  messages = body.get("messages")
  if not isinstance(messages, list) or not messages: raise RequestError(400, "'messages' must be a non-empty list", param="messages")
  clean = []
  for i, m in enumerate(messages):
    if not isinstance(m, dict) or not isinstance(m.get("role"), str): raise RequestError(400, "each message needs a 'role' and 'content'", param=f"messages[{i}]")
    if m["role"] not in ROLES: raise RequestError(400, f"messages[{i}].role must be one of {', '.join(ROLES)}", param=f"messages[{i}].role")
    role = "system" if m["role"] == "developer" else m["role"]
    clean.append({"role": role, "content": _text_of(m.get("content"))})
  opts: dict[str, Any] = {}
  key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
  max_tokens = body.get(key)
  if max_tokens is not None and (not _is_int(max_tokens) or not 1 <= max_tokens < INT64):
    raise RequestError(400, f"{key} must be a positive integer", param=key)
  opts["max_tokens"] = max_tokens  # capped by the remaining context when it runs
  temperature = body.get("temperature")
  if temperature is not None and (not _is_num(temperature) or not 0 <= temperature <= 2):
    raise RequestError(400, "temperature must be a number between 0 and 2", param="temperature")
  opts["temperature"] = DEFAULT_TEMPERATURE if temperature is None else float(temperature)
  top_p = body.get("top_p")
  if top_p is not None and (not _is_num(top_p) or not 0 < top_p <= 1): raise RequestError(400, "top_p must be a number in (0, 1]", param="top_p")
  opts["top_p"] = 1.0 if top_p is None else float(top_p)
  top_k = body.get("top_k")  # (not OpenAI's; llama.cpp's servers take it)
  if top_k is not None and (not _is_int(top_k) or not 0 <= top_k < 1 << 31): raise RequestError(400, "top_k must be an integer in [0, 2^31)", param="top_k")
  opts["top_k"] = top_k or 0
  stop = body.get("stop")
  if stop is None: stop = []
  elif isinstance(stop, str): stop = [stop]
  elif not (isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) for s in stop)):
    raise RequestError(400, "stop must be a string or a list of up to 4 strings", param="stop")
  opts["stop"] = [s for s in stop if s]
  stream = body.get("stream")
  if stream is not None and not isinstance(stream, bool): raise RequestError(400, "stream must be a boolean", param="stream")
  opts["stream"] = bool(stream)
  so = body.get("stream_options")
  if so is not None and (not isinstance(so, dict) or not isinstance(so.get("include_usage", False), bool)):
    raise RequestError(400, "stream_options must be an object with a boolean include_usage", param="stream_options")
  opts["include_usage"] = bool(so and so.get("include_usage"))
  seed = body.get("seed")
  if seed is not None and (not _is_int(seed) or not -INT64 <= seed < INT64): raise RequestError(400, "seed must be an integer", param="seed")
  opts["seed"] = seed
  n = body.get("n")
  if n is not None and not _is_int(n): raise RequestError(400, "n must be an integer", param="n")
  if n not in (None, 1): raise RequestError(400, "only n=1 is supported", param="n")
  return clean, opts


class StopScanner:
  """Cuts generated text at the first stop string; holds back text that could still become one (for streaming)."""

  def __init__(self, stops: list[str]):
    self.stops, self.buf, self.hit = stops, "", False
    self.hold = max((len(s) for s in stops), default=1) - 1

  def feed(self, text: str) -> str:
    if self.hit: return ""
    self.buf += text
    if not self.stops:
      out, self.buf = self.buf, ""
      return out
    at = min((i for i in (self.buf.find(s) for s in self.stops) if i >= 0), default=-1)
    if at >= 0:
      self.hit = True
      out, self.buf = self.buf[:at], ""
      return out
    cut = max(len(self.buf) - self.hold, 0)
    out, self.buf = self.buf[:cut], self.buf[cut:]
    return out

  def flush(self) -> str:
    out, self.buf = ("" if self.hit else self.buf), ""
    return out


class GenerationQueue:
  """First come, first served: the request at the head of the line runs, at most max_waiting wait behind it."""

  def __init__(self, max_waiting: int):
    self.max_waiting, self.cv = max_waiting, threading.Condition()
    self.line: deque[object] = deque()  # the tickets from join, the running request's first

  def join(self) -> object:
    with self.cv:
      if len(self.line) > self.max_waiting:
        raise RequestError(429, f"the server is busy: {len(self.line)} requests are running or queued (at most {self.max_waiting + 1}); "
                           "retry later", code="queue_full", kind="server_error")
      ticket = object()
      self.line.append(ticket)
      return ticket

  def wait(self, ticket: object, timeout: float) -> int:
    """How many requests are ahead of `ticket` (0: its turn), after waiting at most `timeout` for that to change."""
    with self.cv:
      if self.line[0] is not ticket: self.cv.wait(timeout)
      return self.line.index(ticket)

  def leave(self, ticket: object) -> None:
    with self.cv:
      self.line.remove(ticket)
      self.cv.notify_all()


class ChatService:
  """The model behind the HTTP API: one generation at a time, in queue order."""

  def __init__(self, llm: LLM, model_id: str | None = None, options: ServerOptions | None = None):
    self.llm = llm
    self.model_id = model_id or llm.name
    self.options = options or ServerOptions()
    self.queue = GenerationQueue(self.options.max_queue)
    self.created = int(time.time())
    self.seed_counter = 0
    self.dropped = 0  # streams cut short because the client left or stopped reading
    # the most bytes one token stands for (UTF-8 of its text: at least its bytes): a prompt of B bytes has >= B / this tokens
    self.max_token_bytes = max((len(t.encode("utf-8", "replace")) for t in llm.tokenizer.tokens), default=1) or 1

  def _too_long(self, n: int, exact: bool) -> RequestError:
    return RequestError(400, f"This model's maximum context length is {self.llm.max_context} tokens. However, your messages resulted in "
                        f"{'' if exact else 'at least '}{n} tokens. Please reduce the length of the messages.",
                        code="context_length_exceeded", param="messages")

  def prompt_ids(self, messages: list[dict]) -> list[int]:
    # a prompt far over the context is refused before the template and the tokenizer see it
    least = sum(len(m["content"].encode("utf-8", "replace")) for m in messages) // self.max_token_bytes
    if least >= self.llm.max_context: raise self._too_long(least, False)
    try: ids = self.llm.chat_ids(messages)
    except ChatTemplateError as e: raise RequestError(500, str(e), code="chat_template_error", kind="server_error") from None
    if len(ids) >= self.llm.max_context: raise self._too_long(len(ids), True)
    return ids

  def max_new_tokens(self, ids: list[int], requested: int | None) -> int:
    """Capped by the context left after the prompt (and the server's --max-tokens): no request holds the model longer."""
    cap = self.llm.max_context - len(ids)
    if self.options.max_tokens is not None: cap = min(cap, self.options.max_tokens)
    return cap if requested is None else min(cap, requested)

  def generate(self, ids: list[int], opts: dict, stats: GenerationStats):
    """Yields text pieces (stop strings applied). Must be called at the head of the queue."""
    self.seed_counter += 1
    params = SamplingParams(temperature=opts["temperature"], top_k=min(opts["top_k"], self.llm.tokenizer.vocab_size), top_p=opts["top_p"],
                            seed=opts["seed"] if opts["seed"] is not None else self.seed_counter)
    scanner = StopScanner(opts["stop"])
    for piece in self.llm.stream_text(ids, self.max_new_tokens(ids, opts["max_tokens"]), params, stats):
      if out := scanner.feed(piece): yield out
      if scanner.hit:
        stats.finish_reason = "stop"
        return
    if out := scanner.flush(): yield out


PAGE_NAME = "chat.html"


def chat_page() -> bytes:
  return resources.files("tinygrad.llm").joinpath(PAGE_NAME).read_bytes()


class _DeadlineReader(io.RawIOBase):
  """The socket's reads, each with whatever is left of the handler's deadline as its timeout: a client that sends one byte
  every few seconds (slowloris) still runs out of time."""

  def __init__(self, handler: Handler):
    self.handler, self.sock, self.nbytes = handler, handler.connection, 0

  def readable(self) -> bool: return True

  def readinto(self, b) -> int:
    left = self.handler.deadline - time.monotonic()
    if left <= 0: raise TimeoutError("the request took too long to arrive")
    self.sock.settimeout(left)
    n = self.sock.recv_into(b)
    self.nbytes += n
    return n


class ClientGone(Exception):
  """The client closed its connection while its request waited or ran."""


LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
CONTENT_LENGTH = re.compile(r"[0-9]{1,18}")


class Handler(BaseHTTPRequestHandler):
  server_version = "tinygrad-llm"
  protocol_version = "HTTP/1.1"
  service: ChatService  # set on the subclass made by make_server
  server: Server  # (the stdlib types it as any BaseServer, whose address may be a Unix socket's path: make_server's is TCP)
  quiet = False

  def version_string(self) -> str: return self.server_version  # (not the Python version)

  def setup(self) -> None:
    super().setup()
    self.deadline = time.monotonic() + self.service.options.request_timeout
    self._reader = _DeadlineReader(self)
    self.rfile.close()  # (the stdlib's reader: closed, or it would keep the socket's file descriptor open after close)
    self.rfile = io.BufferedReader(self._reader)

  def handle_one_request(self) -> None:
    """The stdlib's, with a deadline for the whole request and a 408 to a client that started one and didn't finish in time."""
    opts = self.service.options
    self.deadline, self._reader.nbytes = time.monotonic() + opts.request_timeout, 0
    self.cors_origin: str | None = None
    self._started, self._sent_connection, self.requestline, self.request_version, self.command = False, False, "", "HTTP/1.1", ""
    try:
      self.raw_requestline = self.rfile.readline(65537)
      if len(self.raw_requestline) > 65536:
        self.requestline, self.request_version, self.command = "", "", ""
        self.send_error(414)
        return
      if not self.raw_requestline:
        self.close_connection = True
        return
      if not self.parse_request(): return
      method = getattr(self, "do_" + self.command, None)
      if method is None:
        self.send_error(501, f"Unsupported method ({self.command!r})")
        return
      method()
      self.wfile.flush()
    except TimeoutError:
      self.close_connection = True
      if self._reader.nbytes and not self._started: self._timed_out()  # (an idle keep-alive connection is just closed)
    except OSError:  # the client is gone
      self.close_connection = True

  def _timed_out(self) -> None:
    self.close_connection = True
    try:
      self.connection.settimeout(1)
      self._error(RequestError(408, "the request took too long to arrive", kind="timeout_error"))
    except OSError: pass

  def log_message(self, format: str, *args: Any) -> None:
    if not self.quiet: sys.stderr.write(f"{self.address_string()} - {format % args}\n")

  def send_response(self, code: int, message: str | None = None) -> None:
    self._started = True
    if self.request_version == "HTTP/0.9": self.request_version = "HTTP/1.0"  # (garbage request lines get a status line too)
    super().send_response(code, message)

  def send_header(self, keyword: str, value: str) -> None:
    if keyword.lower() == "connection": self._sent_connection = True
    super().send_header(keyword, value)

  def end_headers(self) -> None:
    if self.cors_origin is not None:
      self.send_header("Access-Control-Allow-Origin", self.cors_origin)
      self.send_header("Vary", "Origin")
    if self.close_connection and not self._sent_connection: self.send_header("Connection", "close")
    super().end_headers()

  def _send(self, status: int, body: bytes, ctype: str = "application/json", headers: dict[str, str] | None = None) -> None:
    self.send_response(status)
    self.send_header("Content-Type", ctype)
    self.send_header("Content-Length", str(len(body)))
    for k, v in (headers or {}).items(): self.send_header(k, v)
    self.end_headers()
    self.wfile.write(body)

  def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None: self._send(status, json.dumps(obj).encode(), headers=headers)

  def _error(self, e: RequestError) -> None:
    if self.command == "POST" or e.status >= 500: self.close_connection = True  # (its body may be unread)
    self._json(e.status, e.body(), {"Retry-After": "1"} if e.status in (429, 503) else None)

  # ---- who may call
  def _check_caller(self) -> None:
    """Host must name this server (a DNS-rebinding page has its own name there); a browser's Origin must be ours or allowed."""
    opts = self.service.options
    host = self.headers.get("Host")
    if host is not None and "*" not in opts.allow_hosts:
      name = host.strip().lower()
      name = name[1:name.index("]")] if name.startswith("[") and "]" in name else name.rsplit(":", 1)[0] if name.count(":") == 1 else name
      if name not in LOCAL_HOSTS | {str(self.server.server_address[0]).lower()} | {h.lower() for h in opts.allow_hosts}:
        raise RequestError(403, f"the Host {host!r} is not this server's (start it with --allow-host to accept it)", kind="permission_error")
    origin = self.headers.get("Origin")
    if origin is None: return  # not a browser's cross-origin or POST request (curl, SDKs)
    if host is not None and origin.lower() == f"http://{host.strip().lower()}": return  # the chat page itself
    if "*" in opts.allow_origins: self.cors_origin = "*"
    elif origin in opts.allow_origins: self.cors_origin = origin
    else: raise RequestError(403, f"requests from the origin {origin!r} are not allowed (start the server with --allow-origin to allow it)",
                             kind="permission_error")

  def _guarded(self, handler: Callable[[], None]) -> None:
    try:
      self._check_caller()
      handler()
    except RequestError as e:
      if self._started: raise
      self._error(e)
    except TimeoutError:  # reading the body past the deadline (or a write that stalled)
      if self._started: self.close_connection = True
      else: self._timed_out()
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, ClientGone):
      self.close_connection = True
    except Exception as e:  # noqa: BLE001 - one bad request must not take the connection down without an answer
      self.log_error("error handling %s %s: %r", self.command, self.path, e)
      if not self._started: self._error(RequestError(500, f"internal error: {type(e).__name__}", kind="server_error"))
      else: self.close_connection = True

  def do_OPTIONS(self) -> None:  # CORS preflight: answered only for allowed origins (same-origin pages never send one)
    def preflight() -> None:
      if self.cors_origin is None: raise RequestError(403, "no cross-origin access is allowed (start the server with --allow-origin)",
                                                      kind="permission_error")
      self.send_response(204)
      self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
      self.send_header("Access-Control-Allow-Headers", "Content-Type, Authorization")
      self.send_header("Access-Control-Max-Age", "600")
      self.send_header("Content-Length", "0")
      self.end_headers()
    self._guarded(preflight)

  def do_GET(self) -> None: self._guarded(self._get)

  def _get(self) -> None:
    path = self.path.split("?", 1)[0]
    if path in ("/", "/index.html"): return self._send(200, chat_page(), "text/html; charset=utf-8", {"X-Frame-Options": "DENY"})
    if path in ("/v1/models", "/models"):
      s = self.service
      return self._json(200, {"object": "list", "data": [{"id": s.model_id, "object": "model", "created": s.created, "owned_by": "tinygrad"}]})
    if path == "/health": return self._json(200, {"status": "ok"})
    raise RequestError(404, f"no route for GET {path}", kind="not_found_error")

  def do_POST(self) -> None: self._guarded(self._post)

  def _read_body(self) -> bytes:
    """The body, after checking its framing and size (nothing is read from a body that is refused)."""
    te = self.headers.get("Transfer-Encoding")
    if te is not None:
      if te.strip().lower() == "chunked":
        raise RequestError(411, "chunked request bodies are not supported: send a Content-Length", code="length_required")
      raise RequestError(501, f"Transfer-Encoding {te!r} is not supported", kind="server_error")
    lengths = self.headers.get_all("Content-Length") or []
    if not lengths: raise RequestError(411, "a Content-Length header is required", code="length_required")
    if len(set(v.strip() for v in lengths)) != 1 or not CONTENT_LENGTH.fullmatch(lengths[0].strip()):
      raise RequestError(400, f"invalid Content-Length {', '.join(lengths)!r}")
    length = int(lengths[0])
    if length > self.service.options.max_body:
      raise RequestError(413, f"the request body has {length} bytes; the limit is {self.service.options.max_body} (--max-body)",
                         code="request_too_large")
    ctype = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    if ctype != "application/json": raise RequestError(415, "the request body must be JSON (Content-Type: application/json)", code="unsupported_media_type")
    raw = self.rfile.read(length)
    if len(raw) < length: raise ClientGone()
    return raw

  def _post(self) -> None:
    path = self.path.split("?", 1)[0]
    if path not in ("/v1/chat/completions", "/chat/completions"):
      self.close_connection = True  # (its body is not read)
      raise RequestError(404, f"no route for POST {path}", kind="not_found_error")
    raw = self._read_body()
    self.connection.settimeout(self.service.options.write_timeout)  # from here on the socket is written: a stalled reader times out
    try: body = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as e: raise RequestError(400, f"invalid JSON in the request body: {str(e)[:200]}") from None
    messages, opts = parse_chat_request(body)
    ids = self.service.prompt_ids(messages)
    ticket = self.service.queue.join()
    try:
      if opts["stream"]: self._stream(ids, opts, ticket)
      else: self._complete(ids, opts, ticket)
    finally: self.service.queue.leave(ticket)

  def _client_gone(self) -> bool:
    """True if the client closed its side (readable with nothing to read); a pipelined next request is not a close."""
    try:
      if not select.select([self.connection], [], [], 0)[0]: return False
      return self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError: return False
    except (OSError, ValueError): return True

  def _wait_turn(self, ticket: object, on_wait: Callable[[int], None] | None = None) -> None:
    last = -1
    while (ahead := self.service.queue.wait(ticket, 1.0)) > 0:
      if self._client_gone(): raise ClientGone()
      if on_wait is not None and ahead != last: on_wait(ahead)
      last = ahead

  def _complete(self, ids: list[int], opts: dict, ticket: object) -> None:
    stats = GenerationStats()
    self._wait_turn(ticket)
    pieces = []
    try:
      for i, piece in enumerate(self.service.generate(ids, opts, stats)):
        pieces.append(piece)
        if i % 16 == 15 and self._client_gone(): raise ClientGone()  # nobody to answer: free the model for the next request
    except ContextLengthExceeded as e:
      raise RequestError(400, str(e), code="context_length_exceeded", param="messages") from None
    text = "".join(pieces)
    usage = {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens,
             "total_tokens": stats.prompt_tokens + stats.completion_tokens}
    self._json(200, {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
                     "model": self.service.model_id, "system_fingerprint": "tinygrad",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                                  "finish_reason": stats.finish_reason}], "usage": usage})

  def _stream(self, ids: list[int], opts: dict, ticket: object) -> None:
    cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: dict, finish: str | None = None, usage: dict | None = None, choices: bool = True) -> bytes:
      obj: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": self.service.model_id,
                             "system_fingerprint": "tinygrad",
                             "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else []}
      if usage is not None: obj["usage"] = usage
      return b"data: " + json.dumps(obj).encode() + b"\n\n"

    def queued(ahead: int) -> None:  # an SSE comment (clients ignore it) with the request's place in the queue
      self.wfile.write(f": queued, {ahead} ahead\n\n".encode())
      self.wfile.flush()

    self.close_connection = True
    self.send_response(200)
    self.send_header("Content-Type", "text/event-stream")
    self.send_header("Cache-Control", "no-cache")
    self.send_header("X-Queue-Ahead", str(self.service.queue.wait(ticket, 0)))
    self.end_headers()
    stats = GenerationStats()
    try:
      self.wfile.write(chunk({"role": "assistant", "content": ""}))
      self.wfile.flush()
      self._wait_turn(ticket, queued)
      for piece in self.service.generate(ids, opts, stats):
        self.wfile.write(chunk({"content": piece}))
        self.wfile.flush()
      self.wfile.write(chunk({}, stats.finish_reason))
      if opts["include_usage"]:
        usage = {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens,
                 "total_tokens": stats.prompt_tokens + stats.completion_tokens}
        self.wfile.write(chunk({}, usage=usage, choices=False))
      self.wfile.write(b"data: [DONE]\n\n")
      self.wfile.flush()
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, ClientGone, TimeoutError):
      # the client went away (or stopped reading): the generator is closed (the model freed) and the server keeps serving
      self.service.dropped += 1
      self.log_message("client disconnected during a streamed reply after %d tokens", stats.completion_tokens)
    except ContextLengthExceeded as e:
      self.wfile.write(b"data: " + json.dumps(RequestError(400, str(e), code="context_length_exceeded").body()).encode() + b"\n\n")


def _no_constant(name: str) -> Any: raise ValueError(f"{name} is not valid JSON")


class Server(ThreadingHTTPServer):
  """ThreadingHTTPServer with a cap on open connections: past it, a connection gets 503 at once instead of a thread."""
  daemon_threads = True
  request_queue_size = 128
  max_connections = 64

  def __init__(self, *args: Any, **kwargs: Any):
    super().__init__(*args, **kwargs)
    self.active, self.active_lock = 0, threading.Lock()

  def process_request(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
    with self.active_lock:
      full = self.active >= self.max_connections
      if not full: self.active += 1
    if full:
      body = json.dumps(RequestError(503, "too many open connections", kind="server_error").body()).encode()
      sock = request if isinstance(request, socket.socket) else request[1]  # a TCP server's request is its socket
      try:
        sock.settimeout(1)
        sock.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
      except OSError: pass
      self.shutdown_request(request)
      return
    try: super().process_request(request, client_address)
    except Exception:
      with self.active_lock: self.active -= 1
      raise

  def process_request_thread(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
    try: super().process_request_thread(request, client_address)
    finally:
      with self.active_lock: self.active -= 1


def make_server(llm: LLM, host: str = "127.0.0.1", port: int = 8000, model_id: str | None = None, quiet: bool = False,
                options: ServerOptions | None = None) -> Server:
  service = ChatService(llm, model_id, options)
  handler = type("BoundHandler", (Handler,), {"service": service, "quiet": quiet})
  server = Server((host, port), handler)
  server.max_connections = service.options.max_connections
  return server


def serve(llm: LLM, host: str = "127.0.0.1", port: int = 8000, options: ServerOptions | None = None) -> None:
  server = make_server(llm, host, port, options=options)
  url = f"http://{host}:{server.server_address[1]}"
  print(f"serving {llm.name} at {url}/ (chat page) and {url}/v1 (OpenAI API); Ctrl-C stops", file=sys.stderr, flush=True)
  try: server.serve_forever()
  except KeyboardInterrupt: pass
  finally: server.server_close()
