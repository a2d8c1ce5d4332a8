"""PARALLEL_COMPILE: a schedule's new kernels lowered and compiled in a pool of processes (engine/realize.py, workers.py) give
the same programs as lowering here, honour this process's Context overrides, and compute the same values."""
import numpy as np
import pytest
from tinygrad import Device, Tensor
from tinygrad.engine import realize
from tinygrad.helpers import Context
from tinygrad.workers import parallel_workers


def _program_and_values(seed: int) -> tuple[Tensor, np.ndarray]:
  rng = np.random.default_rng(seed)
  a, b = rng.standard_normal((33, 17)).astype(np.float32), rng.standard_normal((17, 9)).astype(np.float32)
  # 5+ kernels on every renderer (CUDA fuses more than the CPU does), new for each seed; the pool takes 4 or more
  out = (Tensor(a) @ Tensor(b)).relu().exp().sum(0) + Tensor(a).max(1).sum() * seed + (Tensor(b) @ Tensor(b).T).exp().sum(1)[:9].sqrt()
  out = out + (Tensor(a).T @ Tensor(a)).max(0)[:9]
  return out, np.exp(np.maximum(a @ b, 0)).sum(0) + a.max(1).sum() * seed + np.sqrt(np.exp(b @ b.T).sum(1)[:9]) + (a.T @ a).max(0)[:9]


def _new_runners(fn) -> dict:
  before = set(realize._runner_cache)
  fn()
  return {k: v for k, v in realize._runner_cache.items() if k not in before}


@pytest.mark.parametrize("noopt", [0, 1])
def test_pool_builds_the_same_programs(noopt, monkeypatch):
  if Device.DEFAULT in ("NULL", "DISK"): pytest.skip("needs a device that runs kernels")
  out, ref = _program_and_values(3 + noopt)
  lower_here = realize._program
  def refuse(*args): raise AssertionError("lowered in this process: the pool should have done it")
  with Context(PARALLEL_COMPILE=2, NOOPT=noopt):
    from tinygrad.workers import compile_pool
    compile_pool()  # started (as prestart does): then a schedule of PARALLEL_MIN_KERNELS new kernels uses it
    monkeypatch.setattr(realize, "_program", refuse)  # the workers import their own, unpatched
    new = _new_runners(lambda: out.realize())
    monkeypatch.setattr(realize, "_program", lower_here)
    assert len(new) >= realize.PARALLEL_MIN_KERNELS.value
    for (ast, device, *_), runner in new.items():
      again = lower_here(ast, Device.renderer(device))  # lowered here, under the same Context
      # the same lowered program (its opts, launch sizes, parameters and work estimate); not the PYTHON device's src, whose
      # encoding of the UOps differs between processes (it pickles sets ordered by string hashes, which are seeded per process)
      fields = lambda s: (s.name, s.opts, s.global_size, s.local_size, s.globals, s.outs, s.estimated_ops, s.estimated_mem)  # noqa: E731
      assert fields(runner.spec) == fields(again) and runner.spec.uops == []
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4)


def test_auto_size_leaves_small_machines_alone(monkeypatch):
  import os
  with Context(PARALLEL_COMPILE=-1):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert parallel_workers() == 0
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert parallel_workers() == 8
  with Context(PARALLEL_COMPILE=0): assert parallel_workers() == 0


def test_small_schedules_dont_start_the_pool(monkeypatch):
  """Starting the pool costs more than lowering a few kernels: a schedule with fewer than PARALLEL_START_KERNELS new kernels
  lowers them here when no pool is running."""
  if Device.DEFAULT in ("NULL", "DISK"): pytest.skip("needs a device that runs kernels")
  from tinygrad import workers
  workers.close()
  out, ref = _program_and_values(7)
  with Context(PARALLEL_COMPILE=2):
    out.realize()
    assert workers._pool is None
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4)
