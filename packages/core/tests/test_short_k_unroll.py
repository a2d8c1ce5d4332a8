"""codegen/heuristics.py `_short_unrolls`: a CPU x @ W.T of the few-vectors form whose reduction is 144-256 long unrolls by 8,
not 16 (LLVM's SLP vectorizer left 16 lanes scalar there); values against numpy either way."""
import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.heuristics import hand_coded_opts
from tinygrad.codegen.opt import OptOps
from tinygrad.engine.realize import split_policy
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops


def _unrolls(k: int) -> list[int]:
  # 16 rows: a float16 W is packed from 32 (schedule/pack.py PACK_MIN_ROWS_CAST), fewer take the few-vectors form
  x, w = Tensor.empty(16, k), Tensor.empty(1024, k, dtype=dtypes.half)
  items, _ = create_schedule([(x @ w.T.cast(dtypes.float32)).uop], split_policy())
  ast = [it.ast for it in items if it.ast.op is Ops.SINK][-1]
  return [o.amount for o in hand_coded_opts(ast, 2, wide_loads=False, gpu=False) if o.op is OptOps.UNROLL]


@pytest.mark.compile_only
def test_unroll_by_k():
  assert _unrolls(256) == [8] and _unrolls(192) == [8]
  assert _unrolls(512) == [16] and _unrolls(128) == [16] and _unrolls(64) == [16]  # measured no better (64: slower) with 8
  with Context(SHORT_K_UNROLL=16): assert _unrolls(256) == [16]


@pytest.mark.parametrize("k", [192, 256])
def test_values(k):
  if Device.renderer(Device.DEFAULT).has_local: pytest.skip("a CPU heuristic")
  rng = np.random.default_rng(0)
  xn, wn = rng.standard_normal((8, k)).astype(np.float32), rng.standard_normal((96, k)).astype(np.float16)
  got = (Tensor(xn) @ Tensor(wn).T.cast(dtypes.float32)).numpy()
  np.testing.assert_allclose(got, xn @ wn.astype(np.float32).T, rtol=1e-4, atol=1e-3)
