"""Behaviour that tinygrad's own test suite expects and tinygrad 0.14 has (round 2: test_symbolic_jit.py, test/null/test_tensor.py,
unit/test_jit.py, unit/test_multitensor.py, ...), found by running that suite against this package: each case failed here before
its fix. References are numpy."""
import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Tensor, TinyJit, Variable

pytestmark = pytest.mark.skipif(is_null_device(), reason="reads values back")


def test_jit_input_with_a_symbolic_shape_replays_with_its_bound_value():
  """x[:, :v.bind(n)] is the same input to a TinyJit for every n (tinygrad compares the unbound shape): the replay runs the
  captured kernels with the value bound in the input's shape, not a JitError about a 'changed' shape (3, i) -> (3, i)."""
  def f(a: Tensor, b: Tensor) -> Tensor: return (a @ b + 1).realize()
  jf = TinyJit(f)
  a, b = Tensor.rand(3, 10).realize(), Tensor.rand(10, 5).realize()
  for i in range(1, 6):
    v = Variable("i", 1, 10).bind(i)
    got = jf(a[:, :v], b[:v, :]).numpy()
    np.testing.assert_allclose(got, a.numpy()[:, :i] @ b.numpy()[:i, :] + 1, rtol=1e-5, atol=1e-6)
  assert len(jf.captured) == 1
  with pytest.raises(Exception, match="changed from shape"): jf(a[:, :Variable("j", 1, 10).bind(2)], b[:2, :])


def test_function_module_and_tinygrad_keywords():
  """tinygrad 0.14 programs import `function` from tinygrad.function and pass its keywords allow_implicit and
  precompile_backward; both were an ImportError / TypeError here."""
  import tinygrad
  from tinygrad.function import function
  assert function is tinygrad.function

  class Model:
    def __init__(self): self.w = Tensor([10.0, 20.0, 30.0]).realize()
    @function(allow_implicit=True, precompile_backward=True)
    def __call__(self, x: Tensor) -> Tensor: return x * self.w

  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  out = Model()(x)
  np.testing.assert_equal(out.numpy(), [10, 40, 90])
  out.sum().backward()
  np.testing.assert_equal(x.grad.numpy(), [10, 20, 30])
  np.testing.assert_equal(function(lambda a: a + 1, allow_implicit=True)(Tensor([1, 2])).numpy(), [2, 3])
  with pytest.raises(NotImplementedError, match="grad_fxn"): function(grad_fxn=lambda *a: a)
