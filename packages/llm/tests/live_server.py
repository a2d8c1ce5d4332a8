"""A live local server over a tiny random chat model (byte-level vocabulary, ChatML template), for the server, abuse and chat
page tests: `chat_model` writes and loads the model once per test session, `start` serves it on a free port in a thread."""
from __future__ import annotations

import pathlib
import threading

from llm_synth import SynthConfig, write_model
from tinygrad.llm.engine import LLM

CTX = 96  # the context: the tests cap max_tokens against it


def chat_model(folder: pathlib.Path) -> LLM:
  from tinygrad.llm.__main__ import warmup
  path = str(folder / "chat.gguf")
  write_model(path, SynthConfig(dim=64, ff_dim=128, n_heads=2, n_kv_heads=1, head_dim=32, vocab=260, context=CTX), "F32")
  llm = LLM.load(path, max_context=CTX, prefill_chunk=16)
  warmup(llm)
  return llm


def start(llm: LLM, quiet: bool = True, **options):
  """A started server (port 0: a free one); `options` are ServerOptions fields. Handler crashes are collected in `.crashes`."""
  from tinygrad.llm.server import ServerOptions, make_server
  srv = make_server(llm, "127.0.0.1", 0, model_id="tiny", quiet=quiet, options=ServerOptions(**options) if options else None)
  srv.crashes = []
  srv.handle_error = lambda request, address: srv.crashes.append(address)  # (socketserver calls it when a handler raises)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  return srv


def stop(srv) -> None:
  srv.shutdown()
  srv.server_close()
