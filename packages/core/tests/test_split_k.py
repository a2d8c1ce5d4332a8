"""Split-K (schedule/split_k.py): recognizing matmuls in the lazy graph, how many slices codegen asks for, and the split
matmul's values on emulated tensor cores (PYTHON::sm_80) against numpy."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen import tensor_core
from tinygrad.codegen.program import get_program
from tinygrad.codegen.tensor_core import split_k_slices
from tinygrad.engine.realize import split_policy
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.schedule.split_k import MatmulShape, matmul_shape
from tinygrad.uop.ops import Ops


def _reduce(t: Tensor):
  return next(u for u in t.uop.toposort() if u.op is Ops.REDUCE_AXIS)


def test_matmul_shape() -> None:
  h = dtypes.float16
  a, b = Tensor.empty(64, 256, dtype=h), Tensor.empty(256, 128, dtype=h)
  assert matmul_shape(_reduce(a.matmul(b, dtype=dtypes.float32))) == MatmulShape(64, 128, 1, 256, h)
  assert matmul_shape(_reduce(a @ b)) == MatmulShape(64, 128, 1, 256, h)
  assert matmul_shape(_reduce(a.T.T @ b.T.T)) == MatmulShape(64, 128, 1, 256, h)  # transposed views: the same matmul
  batched = Tensor.empty(3, 64, 256) @ Tensor.empty(3, 256, 32)
  assert matmul_shape(_reduce(batched)) == MatmulShape(64, 32, 3, 256, dtypes.float32)
  # not matmuls (to split): a matrix-vector product (one row: no axis the weight repeats along), a plain sum, a row-wise dot product, a max, operands of two dtypes
  assert matmul_shape(_reduce(Tensor.empty(1, 256) @ Tensor.empty(256, 128))) is None
  assert matmul_shape(_reduce(Tensor.empty(64, 256).sum(1))) is None
  assert matmul_shape(_reduce((Tensor.empty(64, 256) * Tensor.empty(64, 256)).sum(1))) is None
  assert matmul_shape(_reduce((Tensor.empty(64, 1, 256) * Tensor.empty(1, 32, 256)).max(2))) is None
  assert matmul_shape(_reduce(Tensor.empty(64, 256, dtype=h).float() @ Tensor.empty(256, 32))) is None


def _renderer(compute_units: int, dtype_in=dtypes.float16) -> SimpleNamespace:
  return SimpleNamespace(compute_units=compute_units, tensor_cores=[SimpleNamespace(dtype_in=dtype_in, tile_configs=(object(),))])


@pytest.mark.parametrize("mnk,slices", [((64, 2048, 8192), 4), ((128, 2048, 8192), 2), ((64, 3072, 2048), 1), ((64, 16384, 2048), 1),
                                        ((512, 2048, 8192), 1), ((1, 2048, 8192), 1), ((64, 2048, 1000), 1)])
def test_slices_fill_one_wave(mnk: tuple[int, int, int], slices: int) -> None:
  """132 compute units (an H200): doubled while the tiles of 64x64 fit in one wave and every slice keeps 2048 of K."""
  m, n, k = mnk
  assert split_k_slices(_renderer(132), m, n, 1, k, dtypes.float16) == slices


def test_no_slices_without_the_model() -> None:
  assert split_k_slices(_renderer(0), 64, 2048, 1, 8192, dtypes.float16) == 1  # compute units unknown (PTX, AMD)
  assert split_k_slices(_renderer(132), 64, 2048, 1, 8192, dtypes.float32) == 1  # no tensor core for the inputs' dtype
  assert split_k_slices(_renderer(132), 64, 2048, 8, 8192, dtypes.float16) == 1  # a batch of 8 fills the chip already
  with Context(SPLIT_K=0): assert split_k_slices(_renderer(132), 64, 2048, 1, 8192, dtypes.float16) == 1


@pytest.mark.skipif(not Device.tensor_cores("sm_80"), reason="no plugin provides NVIDIA tensor cores (tinygrad-backend-nv)")
@pytest.mark.skipif(not Device.DEFAULT.startswith("PYTHON"), reason="emulated on PYTHON::sm_80: runs in the PYTHON session")
@pytest.mark.parametrize("dt", [dtypes.bfloat16])
def test_split_matmul_on_tensor_cores(monkeypatch, dt) -> None:
  """With a renderer that says it has 8 compute units (and a 32-element minimum slice), a 64x64x128 matmul runs as 2 slices of
  K on the tensor cores plus a kernel that sums them and adds the bias; the values are numpy's. (PYTHON is not GPU-style for the
  scheduler: the test says it is.)"""
  from tinygrad.engine import realize
  monkeypatch.setattr(tensor_core, "SPLIT_K_MIN_CHUNK", 32)
  monkeypatch.setattr(realize, "_renders_for_gpu", lambda device: True)
  with Context(DEV="PYTHON::sm_80"):
    monkeypatch.setattr(Device.renderer("PYTHON"), "compute_units", 8)
    rng = np.random.default_rng(0)
    an, bn, cn = (rng.standard_normal(s).astype(np.float32) for s in ((64, 128), (128, 64), (64,)))
    a, b = Tensor(an).cast(dt).realize(), Tensor(bn).cast(dt).realize()
    out = a.matmul(b, dtype=dtypes.float32) + Tensor(cn)
    items, _ = create_schedule([out.uop], split_policy())
    kernels = [it.ast for it in items if it.ast.op is Ops.SINK]
    progs = [get_program(ast, Device.renderer("PYTHON")) for ast in kernels]
    assert len(progs) == 2 and any(u.op is Ops.WMMA for u in progs[0].uops) and not any(u.op is Ops.WMMA for u in progs[1].uops)
    assert progs[0].name.startswith("r_2_64_64_64"), progs[0].name  # the slices: a batch of 2 matmuls of K=64
    ref = a.float().numpy().astype(np.float64) @ b.float().numpy().astype(np.float64) + cn
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-3 * np.abs(ref).max(), rtol=1e-3)
