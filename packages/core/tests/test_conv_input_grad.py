"""conv2d's input gradient as a transposed convolution (frontend/conv.py's _input_gradient through gradient.GRAD_OVERRIDES):
equal to the windows' adjoint (CONV_INPUT_GRAD=0) for padding, dilation, groups, odd sizes, asymmetric kernels and a gradient
that arrives from two uses, and without the adjoint's window-sized buffer."""
import numpy as np
import pytest
from tinygrad import Context, Tensor
from tinygrad.helpers import prod
from tinygrad.uop.ops import Ops

CASES = [((2, 4, 9, 7), (6, 4, 3, 3), {"padding": 1}),
         ((1, 3, 8, 8), (4, 3, 3, 3), {}),                              # valid: the border's gradient comes from fewer windows
         ((1, 4, 10, 9), (4, 2, 3, 3), {"padding": 2, "dilation": 2, "groups": 2}),
         ((2, 2, 7, 11), (3, 2, 5, 3), {"padding": (2, 1)}),            # a 5x3 kernel
         ((1, 2, 8, 8), (2, 2, 3, 3), {"padding": "same"}),
         ((1, 1, 6, 6), (1, 1, 2, 2), {"padding": (1, 0, 0, 1)}),      # even kernel, asymmetric padding (left, right, top, bottom)
         ((2, 4, 9, 7), (6, 4, 3, 3), {"padding": 1, "stride": 2}),     # stride 2 on odd sizes: phases of 2x2, 2x1, 1x2, 1x1 taps
         ((1, 4, 10, 10), (4, 2, 3, 3), {"stride": 2, "groups": 2}),    # an even size that the last window doesn't reach
         ((1, 2, 11, 9), (3, 2, 5, 3), {"padding": (1, 2), "stride": (3, 2)}),
         ((1, 1, 8, 8), (2, 1, 4, 4), {"padding": 1, "stride": 2})]     # ResNet-style 4x4 stride 2 (each phase 2x2 taps)


def _grads(xs, ws, kw, on: int):
  rng = np.random.default_rng(prod(xs) + prod(ws))
  x, w = rng.standard_normal(xs, np.float32), rng.standard_normal(ws, np.float32)
  with Context(CONV_INPUT_GRAD=on):
    tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    y = tx.conv2d(tw, **kw)
    ((y * y).sum() + y.relu().sum()).backward()  # the output's gradient from two uses
    return tx.grad.numpy(), tw.grad.numpy()


@pytest.mark.parametrize("xs,ws,kw", CASES)
def test_equals_the_windows_adjoint(xs, ws, kw):
  (dx1, dw1), (dx0, dw0) = _grads(xs, ws, kw, 1), _grads(xs, ws, kw, 0)
  np.testing.assert_allclose(dx1, dx0, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(dw1, dw0, rtol=1e-4, atol=1e-4)


def test_no_window_sized_buffer():
  """The windows' adjoint writes a buffer of input x taps elements (9x the input for a 3x3 kernel); the transposed
  convolution's kernels write nothing bigger than the padded output gradient."""
  x, w = Tensor.empty(2, 8, 16, 16), Tensor.empty(8, 8, 3, 3)
  g = Tensor.empty(2, 8, 16, 16)
  for on, small in ((1, True), (0, False)):
    with Context(CONV_INPUT_GRAD=on):
      items = x.conv2d(w, padding=1).gradient(x, gradient=g)[0].schedule()
    biggest = max(max(b.size for b in si.bufs) for si in items if si.ast.op is Ops.SINK)
    assert (biggest <= 2 * 2 * 8 * 18 * 18) == small


def test_one_tap_per_window_keeps_the_rules():
  """A 1x1 stride-2 conv's windows don't overlap (each input element has at most one tap): the windows' adjoint is cheap and
  stays."""
  x, w, g = Tensor.empty(1, 4, 9, 9), Tensor.empty(4, 4, 1, 1), Tensor.empty(1, 4, 5, 5)
  with Context(CONV_INPUT_GRAD=1): a = [si.ast for si in x.conv2d(w, stride=2).gradient(x, gradient=g)[0].schedule()]
  with Context(CONV_INPUT_GRAD=0): b = [si.ast for si in x.conv2d(w, stride=2).gradient(x, gradient=g)[0].schedule()]
  assert len(a) == len(b)


@pytest.mark.parametrize("on", [1, 0])
def test_input_realized_between_forward_and_backward(on):
  """The gradient goes to the node of the forward's graph: realizing the input (its Tensor then points at a buffer) after the
  conv and before backward must not lose it."""
  rng = np.random.default_rng(7)
  a, w = rng.standard_normal((1, 2, 6, 6), np.float32), rng.standard_normal((3, 2, 3, 3), np.float32)
  with Context(CONV_INPUT_GRAD=on):
    ta, tw = Tensor(a, requires_grad=True), Tensor(w, requires_grad=True)
    x = ta * 2  # lazy: its Tensor is rebound to a buffer by the realize below
    y = x.conv2d(tw, padding=1)
    x.realize()
    y.sum().backward()
    got = ta.grad.numpy()
  ones = np.ones((1, 3, 6, 6), np.float32)
  ref = np.zeros_like(a)  # d/da sum(conv(2a, w)) = 2 * (the transposed conv of ones): computed directly
  for c in range(2):
    for i in range(6):
      for j in range(6):
        for o in range(3):
          for di in range(3):
            for dj in range(3):
              oi, oj = i - di + 1, j - dj + 1
              if 0 <= oi < 6 and 0 <= oj < 6: ref[0, c, i, j] += 2 * w[o, c, di, dj] * ones[0, o, oi, oj]
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
