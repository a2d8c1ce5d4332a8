"""The chat page in headless Chromium (Debian `chromium`): it loads, sends a message, and shows the streamed answer.
Chromium is driven over the DevTools pipe by tinygrad.viz.browser (standard library only)."""
import os

import pytest
from live_server import start, stop
from tinygrad.viz.browser import DevTools, Page, find_chromium

CHROMIUM = find_chromium()


def test_chat_page_streams_an_answer(chat_llm):
  if CHROMIUM is None:
    # CI installs chromium (.ci/run), so there its absence is a failure rather than a quiet skip
    if os.environ.get("CI", "").lower() in ("1", "true"): pytest.fail("CI must run the chat page test: apt-get install chromium")
    pytest.skip("chromium is not installed (apt-get install chromium)")
  srv = start(chat_llm)
  dt = DevTools(CHROMIUM)
  try:
    page = Page(dt, f"http://127.0.0.1:{srv.server_address[1]}/?q=hello")
    js = ("(() => { const a = document.querySelector('.msg.assistant'); const u = document.querySelector('.msg.user');"
          " const m = (document.getElementById('model') || {}).textContent;"
          " return {user: u && u.textContent, done: !!(a && a.dataset.done), n: a ? a.textContent.length : -1, model: m,"
          " stats: (document.getElementById('stats') || {}).textContent, error: (document.querySelector('.error') || {}).textContent || null}; })()")
    page.wait(f"(s => s.done || s.error)({js})", timeout=120, state=js)
    state = page.js(js)
    assert state.get("error") is None and state.get("done"), state
    assert state["user"] == "hello" and state["model"] == "· tiny"
    assert state["stats"].endswith(" s") and " tokens in " in state["stats"]
  finally:
    dt.close()
    stop(srv)
