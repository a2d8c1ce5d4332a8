"""An OpenAI-compatible HTTP server (stdlib http.server, one thread per connection): GET /v1/models, POST /v1/chat/completions
(streaming SSE or one JSON answer), and a chat web page at /. Requests wait their turn on one lock: the model and its KV cache
serve one generation at a time."""
from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from tinygrad.llm.engine import LLM, ContextLengthExceeded, GenerationStats, SamplingParams

DEFAULT_TEMPERATURE = 0.7  # when a request gives none (OpenAI's default is 1.0; small models ramble at 1.0)


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


def parse_chat_request(body: dict) -> tuple[list[dict], dict]:
  if not isinstance(body, dict): raise RequestError(400, "the request body must be a JSON object")
  messages = body.get("messages")
  if not isinstance(messages, list) or not messages: raise RequestError(400, "'messages' must be a non-empty list", param="messages")
  clean = []
  for m in messages:
    if not isinstance(m, dict) or not isinstance(m.get("role"), str): raise RequestError(400, "each message needs a 'role' and 'content'", param="messages")
    role = "system" if m["role"] == "developer" else m["role"]
    clean.append({"role": role, "content": _text_of(m.get("content"))})
  opts: dict[str, Any] = {}
  max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
  if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
    raise RequestError(400, "max_tokens must be a positive integer", param="max_tokens")
  opts["max_tokens"] = max_tokens
  temperature = body.get("temperature")
  if temperature is not None and (not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not 0 <= temperature <= 2):
    raise RequestError(400, "temperature must be a number between 0 and 2", param="temperature")
  opts["temperature"] = DEFAULT_TEMPERATURE if temperature is None else float(temperature)
  top_p = body.get("top_p")
  if top_p is not None and (not isinstance(top_p, (int, float)) or not 0 < top_p <= 1): raise RequestError(400, "top_p must be in (0, 1]", param="top_p")
  opts["top_p"] = 1.0 if top_p is None else float(top_p)
  top_k = body.get("top_k", 0)
  if not isinstance(top_k, int) or top_k < 0: raise RequestError(400, "top_k must be a non-negative integer", param="top_k")
  opts["top_k"] = top_k
  stop = body.get("stop")
  if stop is None: stop = []
  elif isinstance(stop, str): stop = [stop]
  elif not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)): raise RequestError(400, "stop must be a string or a list of strings", param="stop")
  opts["stop"] = [s for s in stop if s]
  opts["stream"] = bool(body.get("stream", False))
  so = body.get("stream_options") or {}
  opts["include_usage"] = bool(isinstance(so, dict) and so.get("include_usage"))
  seed = body.get("seed")
  if seed is not None and not isinstance(seed, int): raise RequestError(400, "seed must be an integer", param="seed")
  opts["seed"] = seed
  n = body.get("n", 1)
  if n != 1: raise RequestError(400, "only n=1 is supported", param="n")
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


class ChatService:
  """The model behind the HTTP API: one generation at a time."""

  def __init__(self, llm: LLM, model_id: str | None = None):
    self.llm = llm
    self.model_id = model_id or llm.name
    self.lock = threading.Lock()
    self.created = int(time.time())
    self.seed_counter = 0

  def prompt_ids(self, messages: list[dict]) -> list[int]:
    ids = self.llm.chat_ids(messages)
    if len(ids) >= self.llm.max_context:
      raise RequestError(400, f"This model's maximum context length is {self.llm.max_context} tokens. However, your messages resulted in "
                         f"{len(ids)} tokens. Please reduce the length of the messages.", code="context_length_exceeded", param="messages")
    return ids

  def generate(self, ids: list[int], opts: dict, stats: GenerationStats):
    """Yields text pieces (stop strings applied). Must be called with the lock held."""
    self.seed_counter += 1
    params = SamplingParams(temperature=opts["temperature"], top_k=opts["top_k"], top_p=opts["top_p"],
                            seed=opts["seed"] if opts["seed"] is not None else self.seed_counter)
    scanner = StopScanner(opts["stop"])
    for piece in self.llm.stream_text(ids, opts["max_tokens"], params, stats):
      if out := scanner.feed(piece): yield out
      if scanner.hit:
        stats.finish_reason = "stop"
        return
    if out := scanner.flush(): yield out


PAGE_NAME = "chat.html"


def chat_page() -> bytes:
  return resources.files("tinygrad.llm").joinpath(PAGE_NAME).read_bytes()


class Handler(BaseHTTPRequestHandler):
  server_version = "tinygrad-llm"
  protocol_version = "HTTP/1.1"
  service: ChatService  # set on the subclass made by make_server
  quiet = False

  def log_message(self, format: str, *args: Any) -> None:
    if not self.quiet: sys.stderr.write(f"{self.address_string()} - {format % args}\n")

  def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
    self.send_response(status)
    self.send_header("Content-Type", ctype)
    self.send_header("Content-Length", str(len(body)))
    self.send_header("Access-Control-Allow-Origin", "*")
    self.end_headers()
    self.wfile.write(body)

  def _json(self, status: int, obj: Any) -> None: self._send(status, json.dumps(obj).encode())

  def do_OPTIONS(self) -> None:  # CORS preflight
    self.send_response(204)
    self.send_header("Access-Control-Allow-Origin", "*")
    self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
    self.send_header("Access-Control-Allow-Headers", "Content-Type, Authorization")
    self.send_header("Content-Length", "0")
    self.end_headers()

  def do_GET(self) -> None:
    path = self.path.split("?", 1)[0]
    if path in ("/", "/index.html"): return self._send(200, chat_page(), "text/html; charset=utf-8")
    if path in ("/v1/models", "/models"):
      s = self.service
      return self._json(200, {"object": "list", "data": [{"id": s.model_id, "object": "model", "created": s.created, "owned_by": "tinygrad"}]})
    if path == "/health": return self._json(200, {"status": "ok"})
    self._json(404, RequestError(404, f"no route for GET {path}", kind="not_found_error").body())

  def do_POST(self) -> None:
    path = self.path.split("?", 1)[0]
    try:
      length = int(self.headers.get("Content-Length") or 0)
      raw = self.rfile.read(length) if length else b""
      if path not in ("/v1/chat/completions", "/chat/completions"): raise RequestError(404, f"no route for POST {path}", kind="not_found_error")
      try: body = json.loads(raw or b"null")
      except (json.JSONDecodeError, UnicodeDecodeError) as e: raise RequestError(400, f"invalid JSON in the request body: {e}") from None
      messages, opts = parse_chat_request(body)
      ids = self.service.prompt_ids(messages)
    except RequestError as e:
      return self._json(e.status, e.body())
    if opts["stream"]: self._stream(ids, opts)
    else: self._complete(ids, opts)

  def _complete(self, ids: list[int], opts: dict) -> None:
    stats = GenerationStats()
    try:
      with self.service.lock: text = "".join(self.service.generate(ids, opts, stats))
    except ContextLengthExceeded as e:
      return self._json(400, RequestError(400, str(e), code="context_length_exceeded", param="messages").body())
    usage = {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens,
             "total_tokens": stats.prompt_tokens + stats.completion_tokens}
    self._json(200, {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
                     "model": self.service.model_id, "system_fingerprint": "tinygrad",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                                  "finish_reason": stats.finish_reason}], "usage": usage})

  def _stream(self, ids: list[int], opts: dict) -> None:
    cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: dict, finish: str | None = None, usage: dict | None = None, choices: bool = True) -> bytes:
      obj: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": self.service.model_id,
                             "system_fingerprint": "tinygrad",
                             "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else []}
      if usage is not None: obj["usage"] = usage
      return b"data: " + json.dumps(obj).encode() + b"\n\n"

    self.send_response(200)
    self.send_header("Content-Type", "text/event-stream")
    self.send_header("Cache-Control", "no-cache")
    self.send_header("Access-Control-Allow-Origin", "*")
    self.send_header("Connection", "close")
    self.end_headers()
    self.close_connection = True
    stats = GenerationStats()
    try:
      self.wfile.write(chunk({"role": "assistant", "content": ""}))
      self.wfile.flush()
      with self.service.lock:
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
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
      # the client went away: the generator is closed (the lock released) and the server keeps serving
      self.log_message("client disconnected during a streamed reply after %d tokens", stats.completion_tokens)
    except ContextLengthExceeded as e:
      self.wfile.write(b"data: " + json.dumps(RequestError(400, str(e), code="context_length_exceeded").body()).encode() + b"\n\n")


def make_server(llm: LLM, host: str = "127.0.0.1", port: int = 8000, model_id: str | None = None, quiet: bool = False) -> ThreadingHTTPServer:
  service = ChatService(llm, model_id)
  handler = type("BoundHandler", (Handler,), {"service": service, "quiet": quiet})
  server = ThreadingHTTPServer((host, port), handler)
  server.daemon_threads = True
  return server


def serve(llm: LLM, host: str = "127.0.0.1", port: int = 8000) -> None:
  server = make_server(llm, host, port)
  url = f"http://{host}:{server.server_address[1]}"
  print(f"serving {llm.name} at {url}/ (chat page) and {url}/v1 (OpenAI API); Ctrl-C stops", file=sys.stderr, flush=True)
  try: server.serve_forever()
  except KeyboardInterrupt: pass
  finally: server.server_close()
