"""threadpool.run_parallel: every index runs once, on distinct threads, and a worker's exception reaches the caller."""
import os
import subprocess
import sys
import threading

import pytest
from tinygrad_backend_cpu.threadpool import run_parallel


def test_each_index_once_on_its_own_thread():
  for n in (1, 2, 4, 3):
    seen: dict[int, int] = {}
    run_parallel(lambda i, seen=seen: seen.__setitem__(i, threading.get_ident()), n)
    assert sorted(seen) == list(range(n)) and len(set(seen.values())) == n


def test_a_worker_error_is_raised_and_the_pool_still_works():
  with pytest.raises(ZeroDivisionError): run_parallel(lambda i: None if i != 2 else 1 // 0, 3)
  out = [0] * 3
  run_parallel(lambda i: out.__setitem__(i, i + 1), 3)
  assert out == [1, 2, 3]


def test_a_forked_child_starts_its_own_workers():
  run_parallel(lambda i: None, 2)  # the parent's worker exists
  pid = os.fork()
  if pid == 0:  # the child: a parallel launch must not wait for the parent's worker, which doesn't exist here
    import signal
    signal.alarm(20)  # a hang ends the child (SIGALRM), and the test fails instead of hanging
    out = [0, 0]
    run_parallel(lambda i: out.__setitem__(i, 1), 2)
    os._exit(0 if out == [1, 1] else 1)
  _, status = os.waitpid(pid, 0)
  assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin to")
def test_each_thread_of_a_run_has_a_core_of_its_own_and_the_callers_mask_comes_back():
  before = os.sched_getaffinity(0)
  masks: dict[int, set[int]] = {}
  run_parallel(lambda i: masks.__setitem__(i, os.sched_getaffinity(0)), 2)
  assert all(len(m) == 1 for m in masks.values()) and masks[0] != masks[1]
  assert os.sched_getaffinity(0) == before


def test_pinning_can_be_turned_off():
  code = ("import os; from tinygrad_backend_cpu.threadpool import run_parallel; m = {}; "
          "run_parallel(lambda i: m.__setitem__(i, os.sched_getaffinity(0)), 2); print(m[0] == m[1] == os.sched_getaffinity(0))")
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CPU_PIN": "0"}, capture_output=True, text=True, check=True)
  assert out.stdout.strip() == "True"
