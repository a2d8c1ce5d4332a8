"""The VIZ page over HTTP on 127.0.0.1 only: the static files shipped in the package, and the trace at /trace.json."""
from __future__ import annotations

import http.server
import pathlib
import signal
import sys
import threading
from functools import partial
from typing import Any

STATIC = pathlib.Path(__file__).parent / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".json": "application/json", ".txt": "text/plain; charset=utf-8"}


class Handler(http.server.BaseHTTPRequestHandler):
  def __init__(self, trace_path: str, *args: Any, **kwargs: Any):
    self.trace_path = trace_path
    super().__init__(*args, **kwargs)

  def do_GET(self) -> None:
    route = self.path.split("?", 1)[0]
    if route == "/trace.json": file = pathlib.Path(self.trace_path)
    else:
      file = (STATIC / (route.lstrip("/") or "index.html")).resolve()
      if STATIC.resolve() not in file.parents or not file.is_file(): return self.send_error(404)
    body = file.read_bytes()
    self.send_response(200)
    self.send_header("Content-Type", TYPES.get(file.suffix, "application/octet-stream"))
    self.send_header("Content-Length", str(len(body)))
    self.send_header("Cache-Control", "no-store")
    self.end_headers()
    self.wfile.write(body)

  def log_message(self, format: str, *args: Any) -> None: pass  # quiet: the program's own output matters more


def make_server(trace_path: str, port: int = 0) -> http.server.ThreadingHTTPServer:
  """A server for `trace_path` (not started); port 0 picks a free one."""
  try: return http.server.ThreadingHTTPServer(("127.0.0.1", port), partial(Handler, trace_path))
  except OSError:
    if port == 0: raise
    return http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, trace_path))  # taken: any free port


def serve(trace_path: str, port: int = 8000) -> None:
  """Serve until Ctrl-C."""
  srv = make_server(trace_path, port)
  # Ctrl-C must stop it even when this process was started with SIGINT ignored (a background job of a shell, a pytest-xdist
  # worker's child: an ignored disposition is inherited, and Python then installs no KeyboardInterrupt handler)
  if threading.current_thread() is threading.main_thread(): signal.signal(signal.SIGINT, signal.default_int_handler)
  print(f"VIZ: serving {trace_path} at http://127.0.0.1:{srv.server_address[1]}/ (Ctrl-C stops)", file=sys.stderr, flush=True)
  try: srv.serve_forever()
  except KeyboardInterrupt: pass
  finally: srv.server_close()
