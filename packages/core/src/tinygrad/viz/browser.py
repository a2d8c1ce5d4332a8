"""Headless Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe), with the standard library only.

`python -m tinygrad.viz TRACE --screenshot OUT.png` renders a trace's page to a PNG with it (for CI logs and docs),
and the browser tests of the VIZ page and of the LLM chat page drive their pages through it."""
from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
from typing import Any


def find_chromium() -> str | None:
  return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


class DevTools:
  """One Chromium process: fd 3 takes commands, fd 4 gives replies, each a JSON message ended by NUL."""

  def __init__(self, binary: str):
    to_chrome_r, self._w = os.pipe()
    self._r, from_chrome_w = os.pipe()

    def fds() -> None:  # dup first: the pipes may already sit on 3 or 4
      a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
      os.dup2(a, 3)
      os.dup2(b, 4)
    self._profile = tempfile.mkdtemp(prefix="tg-chromium-")
    self.proc = subprocess.Popen([binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                                  # no background connections: the machines have no network, and refused ones slow the start
                                  "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
                                  f"--user-data-dir={self._profile}", "about:blank"],
                                 preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    self._buf, self._id = b"", 0

  def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
    self._id += 1
    msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
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

  def close(self) -> None:
    self.proc.kill()
    self.proc.wait()
    for fd in (self._r, self._w): os.close(fd)
    shutil.rmtree(self._profile, ignore_errors=True)

  def __enter__(self) -> DevTools: return self
  def __exit__(self, *_: object) -> None: self.close()


class Page:
  """A tab: evaluate JavaScript (values come back through JSON), wait for a condition, screenshot, mouse events."""

  def __init__(self, dt: DevTools, url: str, width: int = 1500, height: int = 950):
    self.dt = dt
    target = dt.call("Target.createTarget", url="about:blank")["targetId"]
    self.session = dt.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    dt.call("Emulation.setDeviceMetricsOverride", self.session, width=width, height=height, deviceScaleFactor=1, mobile=False)
    dt.call("Page.navigate", self.session, url=url)

  def js(self, expression: str) -> Any:
    result = self.dt.call("Runtime.evaluate", self.session, expression=f"JSON.stringify({expression})", returnByValue=True)["result"]
    return json.loads(result["value"]) if "value" in result else None  # undefined: the page is not there yet

  def wait(self, expression: str, timeout: float = 60, state: str = "null") -> Any:
    """Poll `expression` until it is truthy; on timeout the error shows the JavaScript `state` expression's value."""
    deadline = time.time() + timeout
    while time.time() < deadline:
      if (value := self.js(expression)): return value
      time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout}s waiting for {expression}: state {self.js(state)}")

  def screenshot(self, path: str | pathlib.Path) -> pathlib.Path:
    (path := pathlib.Path(path)).parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(self.dt.call("Page.captureScreenshot", self.session, format="png")["data"]))
    return path

  def mouse(self, kind: str, x: float, y: float, **kw: Any) -> None:
    self.dt.call("Input.dispatchMouseEvent", self.session, type=kind, x=x, y=y, **kw)
