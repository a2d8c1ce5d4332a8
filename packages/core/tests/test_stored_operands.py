"""schedule/stored_operands.py: a CPU matmul's computed operand gets a kernel of its own (stored once) instead of being computed
again by every register block that reads it; what stays fused; values against numpy."""
import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.engine.realize import split_policy
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.schedule.stored_operands import computed_value
from tinygrad.uop.ops import Ops


@pytest.fixture(autouse=True)
def cpu_style():
  if Device.renderer(Device.DEFAULT).has_local or Device.renderer(Device.DEFAULT).tensor_cores:
    pytest.skip("a CPU-style renderer's schedule (GPUs and emulated tensor cores read operands once per tile)")


def _kernels(t: Tensor) -> list:
  items, _ = create_schedule([t.uop], split_policy())
  return [it.ast for it in items if it.ast.op is Ops.SINK]


def _matmul_ops(t: Tensor) -> set[Ops]:
  """The ops of the kernel holding the product's reduction."""
  (ast,) = [a for a in _kernels(t) if any(u.op is Ops.REDUCE for u in a.toposort())][-1:]
  return {u.op for u in ast.toposort()}


@pytest.mark.compile_only
def test_relu_of_a_bias_add_before_a_matmul_is_stored():
  h, b, w = Tensor.empty(128, 512), Tensor.empty(512), Tensor.empty(512, 512)
  out = (h + b).relu() @ w
  relu = {Ops.MAX, Ops.CMPLT, Ops.WHERE}
  assert not relu & _matmul_ops(out)  # the relu ran in a kernel before, once an element
  with Context(STORE_OPERANDS=0): assert relu & _matmul_ops(out)  # fused: once an element per 16-column panel


@pytest.mark.compile_only
def test_what_stays_fused():
  x, g, w = Tensor.empty(64, 256), Tensor.empty(256), Tensor.empty(1024, 256)
  # one multiply (a norm's weight): cheap, and the stored form ran slower (module docstring)
  assert Ops.MUL in {u.op for a in _kernels((x * g) @ w.T) for u in a.toposort()}
  assert len(_kernels((x * g) @ w.T)) == len(_kernels(x @ w.T))
  # a matrix-vector product: the vector is recomputed for a few rows only
  v = Tensor.empty(1, 256)
  assert len(_kernels((v + 1).relu() @ w.T)) == 1
  # a softmax (row statistics broadcast inside): a row kernel's value
  s = Tensor.empty(64, 64)
  base = (s - s.max(-1, keepdim=True)).exp()
  assert not computed_value((base / base.sum(-1, keepdim=True)).uop)


@pytest.mark.compile_only
def test_computed_value_needs_real_math_no_wider_than_its_inputs():
  a, b = Tensor.empty(64, 64), Tensor.empty(64)
  assert computed_value(((a + b).relu()).uop)
  assert not computed_value(a.cast(dtypes.float16).uop)  # a cast alone converts as it loads
  assert not computed_value((a * 2).uop)  # one op
  assert not computed_value((Tensor.empty(64, 1) + Tensor.empty(1, 64)).relu().uop)  # an outer sum: wider than what it reads


@pytest.mark.parametrize("on", [1, 0])
def test_mlp_training_step_matches_numpy(on):
  rng = np.random.default_rng(0)
  xn, w1n, b1n, w2n = (rng.standard_normal(s).astype(np.float32) for s in ((32, 24), (24, 80), (80,), (80, 72)))
  with Context(STORE_OPERANDS=on):
    x, w1, b1, w2 = Tensor(xn), Tensor(w1n, requires_grad=True), Tensor(b1n, requires_grad=True), Tensor(w2n, requires_grad=True)
    out = ((x @ w1 + b1).relu() @ w2).relu()
    out.square().sum().backward()
    got = [out.numpy(), w1.grad.numpy(), b1.grad.numpy(), w2.grad.numpy()]
  hp = xn @ w1n + b1n
  h = np.maximum(hp, 0)
  op = h @ w2n
  o = np.maximum(op, 0)
  do = 2 * o * (op > 0)
  dh = (do @ w2n.T) * (hp > 0)
  for g, want in zip(got, [o, xn.T @ dh, dh.sum(0), h.T @ do]): np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-3)
