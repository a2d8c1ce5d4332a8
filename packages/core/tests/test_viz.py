"""VIZ: the recorder (hooks off by default, steps/rules/source recorded when on, caps), the trace file and its CLI, and the
page itself in headless Chromium (driven over the DevTools pipe, standard library only, as packages/llm's chat page test)."""
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from tinygrad import Tensor
from tinygrad.codegen import program
from tinygrad.engine import realize
from tinygrad.uop import rewrite
from tinygrad.viz import disable, enable, recorder
from tinygrad.viz.browser import DevTools, Page, find_chromium
from tinygrad.viz.cli import report
from tinygrad.viz.trace import graph_of, load, save

pytestmark = pytest.mark.compile_only  # nothing is read back: every test works where kernels only compile (NULL)

# a small training program: two matmuls, relu, backward, an update (no .item(): it must run on NULL too)
PROGRAM = """
from tinygrad import Tensor
Tensor.manual_seed(0)
x = Tensor.rand(32, 8).realize()
w1, w2 = Tensor.rand(8, 16, requires_grad=True).realize(), Tensor.rand(16, 4, requires_grad=True).realize()
for _ in range(3):
  loss = (x @ w1).relu().matmul(w2).softmax().sum()
  loss.backward()
  Tensor.realize_all(w1.assign(w1 - 0.1 * w1.grad), w2.assign(w2 - 0.1 * w2.grad))
  w1.grad = w2.grad = None
"""


def record_program(tmp_path: pathlib.Path, mode: str = "2") -> tuple[subprocess.CompletedProcess, pathlib.Path]:
  path = tmp_path / "trace.json"
  env = {**os.environ, "VIZ": mode, "VIZ_TRACE": str(path)}
  proc = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr
  return proc, path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[subprocess.CompletedProcess, pathlib.Path]:
  return record_program(tmp_path_factory.mktemp("viz"))


def test_off_by_default():
  """Without VIZ nothing is installed: graph_rewrite and ExecItem.run see None, the pipeline functions are the originals."""
  assert "VIZ" not in os.environ or os.environ["VIZ"] in ("", "0")
  assert rewrite.tracer is None and realize.recorder is None
  assert not hasattr(realize.get_program, "__wrapped__") and not hasattr(program.apply_opts, "__wrapped__")


def test_records_steps_rules_and_source():
  rec = enable()
  try:
    a, b = Tensor.rand(5, 7).realize(), Tensor.rand(7, 3).realize()  # shapes no other test uses: generated fresh here
    (a @ b).relu().realize()
  finally: trace = disable()
  assert trace is not None and rewrite.tracer is None and realize.recorder is None and not hasattr(realize.get_program, "__wrapped__")
  kernels = [k for k in trace["kernels"] if k["kind"] == "kernel"]
  assert kernels and all(k["src"] and k["device"] and k["steps"][0]["name"] == "kernel AST" for k in kernels)
  matmul = next(k for k in kernels if k["name"].startswith("r_"))
  names = [s["name"] for s in matmul["steps"]]
  assert "lower_reduces" in names, names
  fired = [m for k in trace["kernels"] for s in k["steps"] for m in s["matches"]]
  assert fired, "some rule fired (building the kernel ASTs at least)"
  loc, text, ops = trace["rules"][fired[0][0]]
  assert ".py:" in loc and text and ops  # where the rule is, its source line, what its pattern matches
  assert all(s["before"] is not None and s["after"] is not None for s in matmul["steps"])
  assert graph_of(trace, matmul["steps"][-1]["after"])[-1] == matmul["steps"][-1]["after"]  # sources first, root last
  assert any(e["kernel"] == trace["kernels"].index(matmul) for e in trace["events"])
  assert rec.trace is trace


def test_profile_0_records_no_timeline(monkeypatch):
  monkeypatch.setenv("PROFILE", "0")
  enable()
  try: (Tensor.rand(4, 19).realize() + 1).realize()
  finally: trace = disable()
  assert trace is not None and not trace["events"] and trace["meta"]["profile"] is False
  assert any(k["runs"] for k in trace["kernels"])  # still counted


def test_caps_bound_what_is_stored(monkeypatch):
  monkeypatch.setitem(recorder.LIMITS, "max_steps_per_kernel", 2)
  monkeypatch.setitem(recorder.LIMITS, "max_nodes", 40)
  monkeypatch.setitem(recorder.LIMITS, "max_events", 1)
  enable()
  try: (Tensor.rand(6, 11).realize() @ Tensor.rand(11, 2).realize()).exp().realize()
  finally: trace = disable()
  assert trace is not None
  assert all(len(k["steps"]) <= 2 for k in trace["kernels"]) and len(trace["nodes"]) <= 40 and len(trace["events"]) <= 1
  dropped = trace["meta"]["dropped"]
  assert dropped["steps"] and dropped["graphs"] and dropped["events"]
  assert trace["meta"]["limits"]["max_nodes"] == 40  # the trace says which caps were in force
  assert "dropped:" in report(trace)


def test_viz2_writes_the_trace_and_the_cli_prints_it(recorded):
  proc, path = recorded
  assert str(path) in proc.stderr and "not serving" in proc.stderr
  trace = load(path)
  names = [k["name"] for k in trace["kernels"] if k["kind"] == "kernel"]
  assert len(names) >= 5 and trace["events"] and trace["schedules"]
  cli = subprocess.run([sys.executable, "-m", "tinygrad.viz", str(path), "--cli"], capture_output=True, text=True, timeout=120)
  assert cli.returncode == 0, cli.stderr
  assert "kernels:" in cli.stdout and "profile:" in cli.stdout and all(n in cli.stdout for n in names)
  assert f"{len(trace['schedules'])} schedules run" in cli.stdout
  n = next(i for i, k in enumerate(trace["kernels"]) if k["name"].startswith("r_"))
  one = subprocess.run([sys.executable, "-m", "tinygrad.viz", str(path), "--cli", "--kernel", str(n)], capture_output=True, text=True, timeout=120)
  assert one.returncode == 0, one.stderr
  assert f"kernel {n}: {trace['kernels'][n]['name']}" in one.stdout and "step   0 stage   kernel AST" in one.stdout
  assert "lower_reduces" in one.stdout and "source:" in one.stdout


def test_viz1_does_not_block_without_a_terminal(tmp_path):
  """VIZ=1 serves at exit only when stdout is a terminal: under pytest (a pipe) it writes the trace, says so, and exits."""
  env = {**os.environ, "VIZ": "1", "VIZ_TRACE": str(tmp_path / "t.json")}
  proc = subprocess.run([sys.executable, "-c", "from tinygrad import Tensor; (Tensor.ones(3) + 1).realize()"], env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0 and "stdout is not a terminal" in proc.stderr and load(tmp_path / "t.json")["kernels"]


def test_viz1_serves_at_exit_on_a_terminal(tmp_path):
  """With stdout on a terminal (a pty here) VIZ=1 serves the page at exit, prints where, and stops on Ctrl-C."""
  import pty
  import re
  import select
  import signal
  import urllib.request
  master, slave = pty.openpty()
  env = {**os.environ, "VIZ": "1", "VIZ_TRACE": str(tmp_path / "t.json"), "VIZ_PORT": "0", "PYTHONFAULTHANDLER": "1"}
  # started with SIGINT ignored, as a shell's background job or a pytest-xdist worker's child is: Ctrl-C must stop it anyway
  # (CI hung here: Python installs no KeyboardInterrupt handler when SIGINT starts out ignored)
  proc = subprocess.Popen([sys.executable, "-c", "from tinygrad import Tensor; (Tensor.ones(3) + 1).realize()"], env=env,
                          stdout=slave, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
  os.close(slave)
  try:
    err, deadline = "", time.time() + 300
    while "serving" not in err and time.time() < deadline and proc.poll() is None:
      if select.select([proc.stderr], [], [], 1)[0]: err += proc.stderr.readline()
    assert (m := re.search(r"http://127\.0\.0\.1:\d+/", err)), err
    assert urllib.request.urlopen(m.group() + "trace.json", timeout=30).status == 200
    assert b"tinygrad VIZ" in urllib.request.urlopen(m.group(), timeout=30).read()
    proc.send_signal(signal.SIGINT)
    # communicate drains stderr while waiting (a full pipe would block the child's last writes); a child that doesn't exit
    # is made to dump every thread's stack (faulthandler, SIGABRT) into the failure message
    try: _, rest = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
      proc.send_signal(signal.SIGABRT)
      raise AssertionError("VIZ=1 did not exit after Ctrl-C; its threads:\n" + proc.communicate(timeout=30)[1][-6000:]) from None
    assert proc.returncode == 0, rest[-3000:]
  finally:
    if proc.poll() is None: proc.kill()
    os.close(master)


def test_server_listens_on_localhost_only(recorded):
  from tinygrad.viz.server import make_server
  srv = make_server(str(recorded[1]), 0)
  try: assert srv.server_address[0] == "127.0.0.1"
  finally: srv.server_close()


def test_bad_trace_files(tmp_path):
  (bad := tmp_path / "bad.json").write_text("{}")
  with pytest.raises(ValueError, match="not a VIZ trace"): load(bad)
  save({"format": "tinygrad-viz", "version": 99}, old := tmp_path / "old.json")
  with pytest.raises(ValueError, match="version 99"): load(old)
  proc = subprocess.run([sys.executable, "-m", "tinygrad.viz", str(bad), "--cli"], capture_output=True, text=True, timeout=120)
  assert proc.returncode == 1 and "not a VIZ trace" in proc.stderr


def test_static_files_ship_with_the_package():
  static = pathlib.Path(realize.__file__).parents[1] / "viz" / "static"
  for name in ("index.html", "viz.js", "viz.css", "vendor/dagre.min.js", "vendor/LICENSE-dagre.txt"): assert (static / name).is_file(), name
  assert "http" not in (static / "index.html").read_text().replace("http-equiv", "")  # offline: nothing from a CDN


# --- the page in headless Chromium

CHROMIUM = find_chromium()
SCREENSHOTS = pathlib.Path(os.environ.get("VIZ_SCREENSHOTS", os.path.join(tempfile.gettempdir(), "tinygrad-viz-screenshots")))


def shoot(page: Page, name: str) -> None: print(f"screenshot: {page.screenshot(SCREENSHOTS / name)}")


def browser_wanted() -> bool:
  # once per CI run is enough: the page doesn't depend on the device, so only the CPU:LLVM session drives it
  return os.environ.get("DEV", "CPU:LLVM").upper() == "CPU:LLVM"


@pytest.mark.skipif(not browser_wanted(), reason="the page is checked once, in the DEV=CPU:LLVM session")
def test_page_in_chromium(recorded):
  if CHROMIUM is None:
    if os.environ.get("CI", "").lower() in ("1", "true"): pytest.fail("CI must run the VIZ page test: apt-get install chromium")
    pytest.skip("chromium is not installed (apt-get install chromium)")
  from tinygrad.viz.server import make_server
  _, path = recorded
  trace = load(path)
  srv = make_server(str(path), 0)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  dt = DevTools(CHROMIUM)
  try:
    page = Page(dt, f"http://127.0.0.1:{srv.server_address[1]}/")
    page.wait("window.vizState && window.vizState.trace !== null && window.vizState.drawn > 0")
    assert page.js("window.vizState.error") is None
    assert page.js("document.querySelectorAll('.krow').length") == len(trace["kernels"])
    # open the kernel with the most rewrite steps (a reduction) and walk through them
    n = max(range(len(trace["kernels"])), key=lambda i: (trace["kernels"][i]["kind"] == "kernel", len(trace["kernels"][i]["steps"])))
    steps = trace["kernels"][n]["steps"]
    assert len(steps) >= 3
    page.js(f"document.querySelector('.krow[data-i=\"{n}\"]').click()")
    assert page.wait("window.vizState.kernel") == n and page.js("window.vizState.step") == 0
    assert page.js("document.getElementById('src').textContent") == trace["kernels"][n]["src"]
    assert page.js("document.getElementById('disasm').textContent").strip()
    shoot(page, "1-kernel-ast.png")
    seen_changed, shot = 0, False
    for s in range(1, len(steps)):
      page.js("document.getElementById('next').click()")
      assert page.js("window.vizState.step") == s
      assert page.js("window.vizState.drawn") > 0 and page.js("document.querySelectorAll('#graph .node').length") > 0
      assert steps[s]["name"] in page.js("document.getElementById('step-label').textContent")
      seen_changed = max(seen_changed, page.js("window.vizState.changed"))
      if steps[s]["matches"] and not shot:  # a rule-rewrite step: pick a match, its nodes are outlined
        # (a match on a node made earlier in the same rewrite, not in the graph drawn, outlines nothing: the first that does)
        assert page.js("[...document.querySelectorAll('.match[data-j]')].some(m => (m.click(), "
                       "document.querySelectorAll('#graph .node.hit').length >= 1))")
        shoot(page, "2-rewrite-step.png")
        shot = True
    assert seen_changed > 0, "some step changed nodes, and the page highlighted them"
    assert shot, "a step where rules fired"
    page.js("(document.getElementById('step').value = 1, document.getElementById('step').dispatchEvent(new Event('input')))")
    assert page.js("window.vizState.step") == 1
    shoot(page, "3-after-first-stage.png")
    # the schedules: each distinct one, its kernels linked
    page.js("document.getElementById('tab-schedule').click()")
    assert page.js("document.querySelectorAll('#schedules a').length") > 0
    shoot(page, "4-schedules.png")
    page.js("document.querySelector('#schedules a').click()")
    assert page.js("document.getElementById('kernel-view').hidden") is False
    # the profile: lanes drawn, hovering a kernel shows its name, time and rates
    page.js("document.getElementById('tab-profile').click()")
    assert page.wait("window.vizState.events") > 0
    shoot(page, "5-profile.png")
    page.mouse("mouseWheel", 600, 200, deltaX=0, deltaY=-400)  # zoom in, then hover the first kernel drawn
    rect = page.wait("tl.rects.length && (() => { const c = document.getElementById('timeline').getBoundingClientRect(); const r = tl.rects[0];"
                     " return {x: c.left + (r.x0 + r.x1) / 2, y: c.top + (r.y0 + r.y1) / 2}; })()")
    page.mouse("mouseMoved", rect["x"], rect["y"])
    tip = page.wait("!document.getElementById('tooltip').hidden && document.getElementById('tooltip').textContent")
    assert "GB/s" in tip and " us" in tip or " ms" in tip
    shoot(page, "6-profile-hover.png")
  finally:
    dt.close()
    srv.shutdown()
    srv.server_close()
  # the same page as a PNG from the command line
  p = subprocess.run([sys.executable, "-m", "tinygrad.viz", str(path), "--screenshot", str(path.parent / "page.png")],
                     capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stderr
  assert (path.parent / "page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gzipped_trace_loads(recorded, tmp_path):
  import gzip
  (gz := tmp_path / "trace.json.gz").write_bytes(gzip.compress(pathlib.Path(recorded[1]).read_bytes()))
  assert load(gz) == load(recorded[1])
  (bad := tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8b" + b"junk")
  with pytest.raises(ValueError, match="not a VIZ trace"): load(bad)
