"""Real multi-process jobs on the CPU: 2 and 3 MPI ranks (mpiexec from the mpich wheel) run every collective against
numpy, and the data-parallel example trained on 2 ranks equals one process training on the whole batch."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parents[3]
WORKER = HERE / "collectives_worker.py"
EXAMPLE = ROOT / "examples" / "data_parallel_mlp.py"
HANG = 240  # seconds: only so a broken job fails instead of hanging CI


def mpiexec() -> str | None:
  near = pathlib.Path(sys.executable).parent / "mpiexec"  # the mpich wheel installs it beside python
  return str(near) if near.exists() else shutil.which("mpiexec")


MPI_MISSING = mpiexec() is None or not shutil.which("true") or __import__("importlib").util.find_spec("mpi4py") is None
# `uv sync` installs mpi4py and the mpich wheel (mpiexec): in CI their absence is a failure, not a quiet skip
if MPI_MISSING and os.environ.get("CI", "").lower() in ("1", "true"): raise RuntimeError("CI must run the MPI tests: uv sync installs mpi4py and mpich")
pytestmark = pytest.mark.skipif(MPI_MISSING, reason="needs mpi4py and mpiexec: pip install mpi4py mpich (uv sync installs them)")


def run_mpi(n: int, *argv: str) -> subprocess.CompletedProcess:
  env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
  p = subprocess.run([mpiexec(), "-n", str(n), sys.executable, *argv], capture_output=True, text=True, timeout=HANG, env=env)
  assert p.returncode == 0, f"mpiexec -n {n} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
  return p


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_match_numpy(n):
  out = run_mpi(n, str(WORKER), "mpi").stdout
  assert sorted(re.findall(r"rank (\d+): \d+ checks passed", out)) == [str(r) for r in range(n)], out  # lines may interleave


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  return _train(tmp_path_factory.mktemp("ref"), 1)


def test_bootstrap_through_mpi():
  """Under mpirun without MASTER_ADDR, a backend's bootstrap (NCCL's unique id) goes through MPI instead of the store."""
  out = run_mpi(2, str(WORKER), "store").stdout
  assert sorted(re.findall(r"rank (\d+): \d+ checks passed \(store on [^,]*, world \d+, bootstrap MPIBootstrap\)", out)) == ["0", "1"], out


def _train(tmp_path, n: int) -> tuple[list[np.ndarray], dict]:
  out = tmp_path / f"w{n}.npz"
  argv = [str(EXAMPLE), "--steps", "6", "--batch", "12", "--out", str(out)]
  if n == 1: p = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=HANG)
  else: p = run_mpi(n, *argv)
  assert p.returncode == 0, p.stderr
  weights = np.load(out)
  return [weights[k] for k in sorted(weights.files)], json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("n", [2, 3])
def test_data_parallel_example_equals_one_process(tmp_path, n, reference):
  ref, ref_summary = reference
  dp, summary = _train(tmp_path, n)
  assert summary["world_size"] == n
  for a, b in zip(dp, ref): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert summary["last_loss"] < summary["first_loss"]  # it trained
  np.testing.assert_allclose(summary["last_loss"], ref_summary["last_loss"], rtol=1e-5)
