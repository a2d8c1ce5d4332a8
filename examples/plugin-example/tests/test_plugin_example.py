"""Installs the example plugin into a fresh environment next to tinygrad-core and runs a tensor program on it."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "plugin-example"
PROGRAM = """
from tinygrad import Tensor, Device
a = Tensor([[1.0, 2.0], [3.0, 4.0]])
out = ((a @ a).relu() + 1).sum(axis=1)
print(Device.DEFAULT, out.device, out.tolist())
"""


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> str:
  uv = shutil.which("uv")
  if uv is None:
    if os.environ.get("CI", "").lower() in ("1", "true"): pytest.fail("CI must run the plugin example: uv is the README's one prerequisite (pip install uv)")
    pytest.skip("uv is needed to build a fresh environment for the plugin")
  env_dir = tmp_path_factory.mktemp("plugin-env") / "venv"
  subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(env_dir)], check=True)
  python = str(env_dir / "bin" / "python")
  # only core and the example: the plugin must work without any other backend installed
  subprocess.run([uv, "pip", "install", "-q", "--python", python, str(ROOT / "packages" / "core"), str(EXAMPLE)], check=True)
  return python


def _run(python: str, code: str, **env: str) -> subprocess.CompletedProcess:
  full_env = {k: v for k, v in os.environ.items() if k not in ("DEV", "PYTHONPATH", "VIRTUAL_ENV")} | env
  return subprocess.run([python, "-c", code], capture_output=True, text=True, env=full_env, timeout=300)


def test_tensor_program_runs_on_plugin_device(venv_python: str) -> None:
  proc = _run(venv_python, PROGRAM, DEV="EXAMPLE")
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.split()[:2] == ["EXAMPLE", "EXAMPLE"]
  assert proc.stdout.strip().endswith("[19.0, 39.0]"), proc.stdout


def test_device_listing_shows_plugin(venv_python: str) -> None:
  proc = _run(venv_python, "import runpy; runpy.run_module('tinygrad.device', run_name='__main__')")
  assert proc.returncode == 0, proc.stderr
  assert "EXAMPLE: ok" in proc.stdout and "renderer C (default)" in proc.stdout


def test_unknown_renderer_for_plugin_device_is_clear(venv_python: str) -> None:
  proc = _run(venv_python, PROGRAM, DEV="EXAMPLE:PTX")
  assert proc.returncode != 0
  assert "unknown renderer for EXAMPLE 'PTX'" in proc.stderr and "installed: C" in proc.stderr, proc.stderr


def test_core_never_imports_the_plugin() -> None:
  core = ROOT / "packages" / "core" / "src"
  hits = [p for p in core.rglob("*.py") if "tinygrad_plugin_example" in p.read_text()]
  assert hits == []
