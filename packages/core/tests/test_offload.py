"""tinygrad/workers.py (offload): calls run in the compile worker process with COMPILE_WORKER=1 (results and exceptions come back), and
in this process when the setting is off or the call doesn't pickle."""
import operator
import os

import pytest
from tinygrad import workers as offload
from tinygrad.helpers import Context


@pytest.fixture
def worker():
  with Context(COMPILE_WORKER=1):
    yield
  offload.close()


def in_worker() -> int: return os.getpid()


def test_calls_run_in_the_worker(worker):
  assert offload.offload(operator.add, 2, 3) == 5
  pid = offload.offload(in_worker)
  assert pid != os.getpid() and offload.offload(in_worker) == pid  # one long-lived worker


def test_exceptions_come_back(worker):
  with pytest.raises(ValueError, match="invalid literal"): offload.offload(int, "x")
  assert offload.offload(operator.mul, 4, 5) == 20  # the worker survives a failing call


def test_local_when_off_or_unpicklable():
  assert offload.offload(in_worker) == os.getpid()  # off by default
  with Context(COMPILE_WORKER=1):
    try: assert offload.offload(lambda: os.getpid()) == os.getpid()  # a lambda doesn't pickle: run here
    finally: offload.close()
