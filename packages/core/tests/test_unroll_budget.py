"""codegen/heuristics.py `_cap_unrolls`: a small CPU reduction with a long body (a focal loss over a batch) unrolls by as
many copies of its body as fit UNROLL_BODY_BUDGET ops, not by 16 (LLVM compiled the 16 copies for 2 s); values unchanged."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.codegen.heuristics import hand_coded_opts
from tinygrad.codegen.opt import OptOps
from tinygrad.helpers import Context


def _focal(z: Tensor, y: Tensor) -> Tensor:
  logp, log1mp = -(-z).softplus(), -z.softplus()
  p = logp.exp()
  return (y * -0.75 * (1 - p) ** 2.0 * logp + (1 - y) * -0.25 * p ** 2.0 * log1mp).mean()


def _unrolls(t: Tensor) -> list[int]:
  return [o.amount for o in hand_coded_opts(t.schedule()[-1].ast, 1, wide_loads=False, gpu=False) if o.op is OptOps.UNROLL]


@pytest.mark.compile_only
def test_long_body_small_reduction_unrolls_less():
  z, y = Tensor.empty(64), Tensor.empty(64)
  assert _unrolls(_focal(z, y)) == [4]  # ~160 ops a copy: 4 fit 1024
  with Context(UNROLL_BODY_BUDGET=0): assert _unrolls(_focal(z, y)) == [16]
  assert _unrolls(z.sum()) == [16]  # a short body keeps 16
  assert _unrolls(_focal(Tensor.empty(8192), Tensor.empty(8192))) == [16]  # many iterations: vectorized as before


def test_values():
  rng = np.random.default_rng(0)
  zn, yn = rng.standard_normal(64).astype(np.float32) * 3, (rng.random(64) < 0.3).astype(np.float32)
  p = 1 / (1 + np.exp(-zn.astype(np.float64)))
  ref = -(yn * 0.75 * (1 - p) ** 2 * np.log(p) + (1 - yn) * 0.25 * p ** 2 * np.log(1 - p)).mean()
  np.testing.assert_allclose(_focal(Tensor(zn), Tensor(yn)).numpy(), ref, rtol=1e-5)
