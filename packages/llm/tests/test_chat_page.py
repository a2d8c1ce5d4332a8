"""The chat page in headless Chromium (Debian `chromium`): it loads, sends a message, and shows the streamed answer.
Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe), with the standard library only."""
import json
import os
import shutil
import subprocess
import threading
import time

import pytest
from llm_synth import SynthConfig, write_model
from tinygrad.llm.engine import LLM

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


class DevTools:
  def __init__(self, binary: str):
    to_chrome_r, self._w = os.pipe()
    self._r, from_chrome_w = os.pipe()

    def fds():  # the child's fd 3 reads our commands, its fd 4 writes the replies (dup first: the pipes may already sit on 3 or 4)
      a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
      os.dup2(a, 3)
      os.dup2(b, 4)
    self.proc = subprocess.Popen([binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                                  # no background connections: the machines have no network, and refused ones slow the start
                                  "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
                                  f"--user-data-dir={os.environ.get('TMPDIR', '/tmp')}/tg-llm-chromium-{os.getpid()}", "about:blank"],
                                 preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    self._buf, self._id = b"", 0

  def call(self, method: str, session: str | None = None, **params):
    self._id += 1
    msg = {"id": self._id, "method": method, "params": params}
    if session: msg["sessionId"] = session
    os.write(self._w, json.dumps(msg).encode() + b"\0")
    while True:
      while b"\0" not in self._buf:
        chunk = os.read(self._r, 1 << 16)
        if not chunk: raise RuntimeError("chromium closed the DevTools pipe")
        self._buf += chunk
      raw, self._buf = self._buf.split(b"\0", 1)
      reply = json.loads(raw)
      if reply.get("id") == self._id:
        if "error" in reply: raise RuntimeError(reply["error"])
        return reply["result"]

  def close(self):
    self.proc.kill()
    self.proc.wait()


def test_chat_page_streams_an_answer(tmp_path):
  if CHROMIUM is None:
    # CI installs chromium (.ci/run), so there its absence is a failure rather than a quiet skip
    if os.environ.get("CI", "").lower() in ("1", "true"): pytest.fail("CI must run the chat page test: apt-get install chromium")
    pytest.skip("chromium is not installed (apt-get install chromium)")
  from tinygrad.llm.__main__ import warmup
  from tinygrad.llm.server import make_server
  path = str(tmp_path / "chat.gguf")
  write_model(path, SynthConfig(dim=64, ff_dim=128, n_heads=2, n_kv_heads=1, head_dim=32, vocab=260, context=64), "F32")
  llm = LLM.load(path, max_context=64, prefill_chunk=16)
  warmup(llm)
  srv = make_server(llm, "127.0.0.1", 0, model_id="tiny", quiet=True)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  dt = DevTools(CHROMIUM)
  try:
    target = dt.call("Target.createTarget", url=f"http://127.0.0.1:{srv.server_address[1]}/?q=hello")["targetId"]
    session = dt.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    js = ("(() => { const a = document.querySelector('.msg.assistant'); const u = document.querySelector('.msg.user');"
          " const m = (document.getElementById('model') || {}).textContent;"
          " return JSON.stringify({user: u && u.textContent, done: !!(a && a.dataset.done), n: a ? a.textContent.length : -1, model: m,"
          " stats: (document.getElementById('stats') || {}).textContent, error: (document.querySelector('.error') || {}).textContent || null}); })()")
    deadline, state = time.time() + 120, {}
    while time.time() < deadline:
      result = dt.call("Runtime.evaluate", session, expression=js, returnByValue=True)["result"]
      state = json.loads(result["value"]) if "value" in result else {}  # not yet loaded
      if state.get("done") or state.get("error"): break
      time.sleep(0.2)
    assert state.get("error") is None and state.get("done"), state
    assert state["user"] == "hello" and state["model"] == "· tiny"
    assert state["stats"].endswith(" s") and " tokens in " in state["stats"]
  finally:
    dt.close()
    srv.shutdown()
    srv.server_close()
