"""Shared pytest setup for the core suite: the compile_only marker, the NULL-device check and deterministic seeds."""
import numpy as np
import pytest
from tinygrad import Device, Tensor


def pytest_configure(config):
  config.addinivalue_line("markers", "compile_only: valid on the NULL device, where kernels compile but never run (nox runs `-m compile_only` there)")


def is_null_device() -> bool:
  """True when the default device is NULL: kernels compile but there is no data to read back."""
  return Device.DEFAULT.startswith("NULL")


@pytest.fixture
def null_device() -> bool:
  return is_null_device()


@pytest.fixture(autouse=True)
def _seed():
  np.random.seed(0)
  Tensor.manual_seed(0)
  yield
