"""engine/ahead.py: a dry run schedules without lowering, allocating or running; build_ahead hands the new kernels to the compile
pool and a later realize takes them from there (nothing lowered here) with the same values; a kernel the pool fails on is
lowered here, where its error is raised."""
import numpy as np
import pytest
from tinygrad import Device, Tensor
from tinygrad.engine import ahead, realize
from tinygrad.engine.buffers import buffer_of
from tinygrad.helpers import Context


def test_dry_run_runs_nothing(monkeypatch):
  def refuse(*args): raise AssertionError("a dry run lowered a kernel")
  monkeypatch.setattr(realize, "_program", refuse)
  with ahead.dry_run() as items:
    x = Tensor.empty(64)
    y = ((x + 1).contiguous() * 2).realize()
  assert len(items) == 2 and all(si.ast.op is not realize.Ops.COPY for si in items)
  assert not buffer_of(y.uop.base).is_allocated() and not buffer_of(x.uop.base).is_allocated()


def test_built_ahead_is_taken_not_lowered(monkeypatch):
  if Device.DEFAULT in ("NULL", "DISK"): pytest.skip("needs a device that runs kernels")
  rng = np.random.default_rng(7)
  a, b = rng.standard_normal((19, 23)).astype(np.float32), rng.standard_normal((23, 5)).astype(np.float32)
  def graph(x: Tensor, w: Tensor) -> Tensor: return ((x @ w).relu().contiguous() + x.max(1, keepdim=True)).exp()
  with Context(PARALLEL_COMPILE=2):
    with ahead.dry_run() as items: graph(Tensor.empty(19, 23), Tensor.empty(23, 5)).realize()
    assert ahead.build_ahead(items) == len(items) >= 2
    lower_here = realize._program
    def refuse(*args): raise AssertionError("lowered in this process: it was built ahead")
    monkeypatch.setattr(realize, "_program", refuse)
    out = graph(Tensor(a), Tensor(b)).numpy()
    monkeypatch.setattr(realize, "_program", lower_here)
  np.testing.assert_allclose(out, np.exp(np.maximum(a @ b, 0) + a.max(1, keepdims=True)), rtol=1e-5)


def test_failed_ahead_is_lowered_here():
  """A kernel whose build failed in the pool (here: a future that says so) is lowered where it is used, as without build_ahead."""
  from concurrent.futures import Future
  if Device.DEFAULT in ("NULL", "DISK"): pytest.skip("needs a device that runs kernels")
  x = Tensor(np.arange(8, dtype=np.float32))
  with ahead.dry_run() as items: (Tensor.empty(8) * 3 + 1).realize()
  (si,) = items
  key = realize._runner_key(Device.DEFAULT, si.ast, Device.renderer(Device.DEFAULT))
  realize._runner_cache.pop(key, None)
  failed: Future = Future()
  failed.set_result((False, RuntimeError("the pool's compiler crashed")))
  realize._ahead[key] = failed
  np.testing.assert_equal((x * 3 + 1).numpy(), np.arange(8) * 3 + 1)
  assert key not in realize._ahead and key in realize._runner_cache
