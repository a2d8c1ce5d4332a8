"""Shared pytest setup for the core suite: the compile_only marker, the NULL-device check and deterministic seeds."""
import numpy as np
import pytest
from tinygrad import Context, Device, Tensor


def pytest_configure(config):
  config.addinivalue_line("markers", "compile_only: valid on the NULL device, where kernels compile but never run (nox runs `-m compile_only` there)")
  config.addinivalue_line("markers", "devices(n): needs n instances of the session's device kind (GPUs: skipped on a machine with fewer)")


def is_null_device() -> bool:
  """True when the default device is NULL: kernels compile but there is no data to read back."""
  return Device.DEFAULT.startswith("NULL")


def require_instances(n: int) -> None:
  """Skip unless instances 0..n-1 of the session's device kind open here: CPU, PYTHON and NULL have as many as asked
  for, a GPU kind only as many as the machine has."""
  kind = Device.DEFAULT.split(":")[0]
  try: Device[f"{kind}:{n - 1}"]
  except Exception as e:  # noqa: BLE001  the device's own error says why (e.g. 'this machine has 1 GPU(s)')
    pytest.skip(f"needs {n} {kind} devices: {e}")


@pytest.fixture(autouse=True)
def _enough_instances(request):
  if (m := request.node.get_closest_marker("devices")) is not None: require_instances(m.args[0])


@pytest.fixture
def null_device() -> bool:
  return is_null_device()


@pytest.fixture(autouse=True)
def _seed():
  np.random.seed(0)
  Tensor.manual_seed(0)
  yield


@pytest.fixture(autouse=True)
def _no_program_cache():
  """Lowered programs aren't served from the on-disk cache (engine/program_cache.py), nor lowered in the compile pool's processes
  (PARALLEL_COMPILE, on by default on machines of more than two cores): tests patch the lowering (opts, heuristics, passes) in
  this process, which neither the cache's key nor a worker sees (on a 16-core GPU machine a test recording the opts saw none).
  test_program_cache.py and test_parallel_compile.py turn them on where they are the subject."""
  with Context(PCACHE=0, PARALLEL_COMPILE=0): yield


def _told_gpu(monkeypatch, shuffles: bool):
  import tinygrad.codegen.gpudims as gpudims
  from tinygrad.engine import realize
  r = Device.renderer(Device.DEFAULT)
  monkeypatch.setattr(r, "has_local", True)
  if not shuffles: monkeypatch.setattr(r, "shuffle_lanes", 0)
  monkeypatch.setattr(realize, "_runner_cache", {})
  monkeypatch.setattr(gpudims, "GROUP_MIN_BLOCKS", 1)  # small tests: several outputs per block, as big kernels have
  return r


@pytest.fixture(params=["shuffle", "smem"])
def gpu(request, monkeypatch):
  """The default device's renderer told it is GPU-style (has_local): on PYTHON, grouped kernels run in the interpreter.
  Each test runs twice: grouped reductions combining through the renderer's warp shuffles where it has them (PYTHON: 32
  lanes, as CUDA), and through shared memory only (shuffle_lanes 0, codegen/group.py)."""
  return _told_gpu(monkeypatch, request.param == "shuffle")


@pytest.fixture
def gpu_shuffles(monkeypatch):
  """`gpu` with the renderer's own shuffles only (not parametrized: for request.getfixturevalue)."""
  return _told_gpu(monkeypatch, True)
