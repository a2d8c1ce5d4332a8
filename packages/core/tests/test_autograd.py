"""Gradients: `Tensor.gradient` and `.backward()` against central finite differences (in float64 numpy) or hand-derived
numpy gradients where the function has a kink (ties in max/maximum)."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes


def away_from_zero(*shape: int, low: float = 0.3, high: float = 2.0) -> np.ndarray:
  """Values with |x| in [low, high): no kinks of relu/abs/max near the inputs."""
  return (np.random.uniform(low, high, size=shape) * np.random.choice([-1.0, 1.0], size=shape)).astype(np.float32)


def distinct(*shape: int) -> np.ndarray:
  """A permutation of evenly spaced values: no ties, and gaps wider than the finite-difference step."""
  n = int(np.prod(shape))
  return (np.random.permutation(n).astype(np.float32) * 0.25 - n / 8).reshape(shape)


def numeric_grads(fn, arrays: list[np.ndarray], eps: float = 1e-4) -> list[np.ndarray]:
  """d(fn)/d(array) for each array, by central differences in float64; fn returns a scalar."""
  xs = [a.astype(np.float64) for a in arrays]
  out = []
  for x in xs:
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
      old = x[i]
      x[i] = old + eps
      hi = fn(*xs)
      x[i] = old - eps
      lo = fn(*xs)
      x[i] = old
      g[i] = (hi - lo) / (2 * eps)
    out.append(g)
  return out


def check_grads(fn_t, fn_np, *arrays: np.ndarray, tol: float = 2e-3):
  """Compare the gradient of sum(fn(x) * w) for a fixed random w with finite differences."""
  out_shape = np.asarray(fn_np(*[a.astype(np.float64) for a in arrays])).shape
  w = np.random.uniform(-1, 1, size=out_shape)
  ts = [Tensor(a, requires_grad=True) for a in arrays]
  loss = (fn_t(*ts) * Tensor(w.astype(np.float32))).sum()
  grads = loss.gradient(*ts)
  expected = numeric_grads(lambda *xs: float((np.asarray(fn_np(*xs)) * w).sum()), list(arrays))
  for i, (g, e, t) in enumerate(zip(grads, expected, ts)):
    assert g.shape == t.shape, f"grad {i}: shape {g.shape}, input shape {t.shape}"
    assert g.dtype == dtypes.float32
    np.testing.assert_allclose(g.numpy(), e, rtol=tol, atol=tol, err_msg=f"gradient of input {i}")


def _np_softmax(x, axis=-1):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)


def _np_log_softmax(x, axis=-1):
  m = x - x.max(axis, keepdims=True)
  return m - np.log(np.exp(m).sum(axis, keepdims=True))


COND = np.random.default_rng(1).uniform(-1, 1, size=(3, 4)).astype(np.float32)

CASES = [
  ("add", lambda a, b: a + b, lambda a, b: a + b, lambda: [away_from_zero(3, 4), away_from_zero(3, 4)]),
  ("add_broadcast", lambda a, b: a + b, lambda a, b: a + b, lambda: [away_from_zero(3, 4), away_from_zero(4)]),
  ("sub", lambda a, b: a - b, lambda a, b: a - b, lambda: [away_from_zero(3, 4), away_from_zero(3, 1)]),
  ("rsub_scalar", lambda a: 2 - a, lambda a: 2 - a, lambda: [away_from_zero(5)]),
  ("mul", lambda a, b: a * b, lambda a, b: a * b, lambda: [away_from_zero(3, 4), away_from_zero(3, 4)]),
  ("mul_self", lambda a: a * a * a, lambda a: a * a * a, lambda: [away_from_zero(6)]),
  ("div", lambda a, b: a / b, lambda a, b: a / b, lambda: [away_from_zero(3, 4), away_from_zero(3, 4, low=0.5)]),
  ("rdiv_scalar", lambda a: 1.5 / a, lambda a: 1.5 / a, lambda: [away_from_zero(5, low=0.5)]),
  ("neg", lambda a: -a, lambda a: -a, lambda: [away_from_zero(5)]),
  ("exp", lambda a: a.exp(), np.exp, lambda: [away_from_zero(6)]),
  ("log", lambda a: a.log(), np.log, lambda: [np.random.uniform(0.5, 3, size=6).astype(np.float32)]),
  ("sqrt", lambda a: a.sqrt(), np.sqrt, lambda: [np.random.uniform(0.5, 3, size=6).astype(np.float32)]),
  ("sin", lambda a: a.sin(), np.sin, lambda: [away_from_zero(6, high=3)]),
  ("cos", lambda a: a.cos(), np.cos, lambda: [away_from_zero(6, high=3)]),
  ("reciprocal", lambda a: a.reciprocal(), lambda a: 1 / a, lambda: [away_from_zero(6, low=0.5)]),
  ("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), lambda: [away_from_zero(3, 4)]),
  ("sigmoid", lambda a: a.sigmoid(), lambda a: 1 / (1 + np.exp(-a)), lambda: [away_from_zero(6)]),
  ("tanh", lambda a: a.tanh(), np.tanh, lambda: [away_from_zero(6)]),
  ("maximum", lambda a, b: a.maximum(b), np.maximum, lambda: [distinct(3, 4), distinct(3, 4) + 0.125]),
  ("where", lambda a, b: (Tensor(COND) > 0).where(a, b), lambda a, b: np.where(COND > 0, a, b), lambda: [away_from_zero(3, 4), away_from_zero(3, 4)]),
  ("where_self_cond", lambda a: (a > 0).where(a * 2, a.exp()), lambda a: np.where(a > 0, a * 2, np.exp(a)), lambda: [away_from_zero(3, 4)]),
  ("sum_axis", lambda a: a.sum(1), lambda a: a.sum(1), lambda: [away_from_zero(3, 4)]),
  ("sum_keepdim", lambda a: a.sum(0, keepdim=True) * a, lambda a: a.sum(0, keepdims=True) * a, lambda: [away_from_zero(3, 4)]),
  ("sum_full", lambda a: a.sum() * a.sum(), lambda a: a.sum() * a.sum(), lambda: [away_from_zero(3, 4)]),
  ("max_axis", lambda a: a.max(1), lambda a: a.max(1), lambda: [distinct(3, 4)]),
  ("max_full", lambda a: a.max(), lambda a: a.max(), lambda: [distinct(3, 4)]),
  ("min_axis", lambda a: a.min(0), lambda a: a.min(0), lambda: [distinct(3, 4)]),
  ("prod", lambda a: a.prod(1), lambda a: a.prod(1), lambda: [away_from_zero(3, 4, low=0.5, high=1.5)]),
  ("mean", lambda a: a.mean(0), lambda a: a.mean(0), lambda: [away_from_zero(3, 4)]),
  ("mean_full", lambda a: a.mean() * a, lambda a: a.mean() * a, lambda: [away_from_zero(3, 4)]),
  ("var", lambda a: a.var(1), lambda a: a.var(1, ddof=1), lambda: [away_from_zero(3, 5)]),
  ("matmul", lambda a, b: a @ b, lambda a, b: a @ b, lambda: [away_from_zero(3, 4), away_from_zero(4, 5)]),
  ("matmul_vec", lambda a, b: a @ b, lambda a, b: a @ b, lambda: [away_from_zero(4), away_from_zero(4, 3)]),
  ("matmul_batched", lambda a, b: a @ b, lambda a, b: a @ b, lambda: [away_from_zero(2, 2, 3), away_from_zero(3, 2)]),
  ("reshape", lambda a: a.reshape(2, 6) * Tensor(np.arange(12, dtype=np.float32).reshape(2, 6)),
   lambda a: a.reshape(2, 6) * np.arange(12).reshape(2, 6), lambda: [away_from_zero(3, 4)]),
  ("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), lambda: [away_from_zero(2, 3, 2)]),
  ("expand", lambda a: a.expand(3, 4) * a.expand(3, 4), lambda a: np.broadcast_to(a, (3, 4)) ** 2, lambda: [away_from_zero(3, 1)]),
  ("pad", lambda a: a.pad(((1, 2), (0, 1))), lambda a: np.pad(a, ((1, 2), (0, 1))), lambda: [away_from_zero(2, 3)]),
  ("pad_value", lambda a: a.pad(((1, 0), (2, 1)), value=3.0) ** 2, lambda a: np.pad(a, ((1, 0), (2, 1)), constant_values=3.0) ** 2,
   lambda: [away_from_zero(2, 3)]),
  ("shrink", lambda a: a.shrink(((1, 3), (0, 2))), lambda a: a[1:3, 0:2], lambda: [away_from_zero(4, 3)]),
  ("flip", lambda a: a.flip(0) * a, lambda a: a[::-1] * a, lambda: [away_from_zero(4, 3)]),
  ("getitem", lambda a: a[1:, ::-2], lambda a: a[1:, ::-2], lambda: [away_from_zero(3, 5)]),
  ("softmax", lambda a: a.softmax(), _np_softmax, lambda: [away_from_zero(3, 5)]),
  ("softmax_axis0", lambda a: a.softmax(0), lambda a: _np_softmax(a, 0), lambda: [away_from_zero(3, 5)]),
  ("log_softmax", lambda a: a.log_softmax(), _np_log_softmax, lambda: [away_from_zero(3, 5)]),
  ("chain", lambda a, b: ((a * b).exp() + (a - b).sin()).log() @ b.T,
   lambda a, b: np.log(np.exp(a * b) + np.sin(a - b) + 0) @ b.T, lambda: [np.random.uniform(0.2, 1, (2, 3)).astype(np.float32),
                                                                           np.random.uniform(0.2, 1, (2, 3)).astype(np.float32)]),
]


@pytest.mark.parametrize("name,fn_t,fn_np,make", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_finite_differences(name, fn_t, fn_np, make):
  check_grads(fn_t, fn_np, *make())


def test_maximum_ties_split_evenly():
  a = Tensor([1.0, 2.0, 3.0, -1.0], requires_grad=True)
  b = Tensor([1.0, 0.0, 3.0, 5.0], requires_grad=True)
  ga, gb = a.maximum(b).sum().gradient(a, b)
  np.testing.assert_allclose(ga.numpy(), [0.5, 1.0, 0.5, 0.0])
  np.testing.assert_allclose(gb.numpy(), [0.5, 0.0, 0.5, 1.0])


def test_minimum_ties_split_evenly():
  a = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  b = Tensor([1.0, 0.0, 4.0], requires_grad=True)
  ga, gb = a.minimum(b).sum().gradient(a, b)
  np.testing.assert_allclose(ga.numpy(), [0.5, 0.0, 1.0])
  np.testing.assert_allclose(gb.numpy(), [0.5, 1.0, 0.0])


def test_max_reduce_ties_split_evenly():
  x = Tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, 5.0, 1.0]], requires_grad=True)
  (g,) = x.max(1).sum().gradient(x)
  np.testing.assert_allclose(g.numpy(), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3], [0, 1, 0]], rtol=1e-6)
  x_full = Tensor([4.0, 1.0, 4.0, 4.0], requires_grad=True)
  (g_full,) = x_full.max().gradient(x_full)
  np.testing.assert_allclose(g_full.numpy(), [1 / 3, 0, 1 / 3, 1 / 3], rtol=1e-6)


def test_prod_gradient_with_zeros():
  # d(prod x)/dx_j is the product of the others, also where x has zeros (tinygrad doesn't divide by x there)
  x = Tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]], requires_grad=True)
  (g,) = x.prod(1).sum().gradient(x)
  np.testing.assert_allclose(g.numpy(), [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [8.0, 4.0, 2.0]])


def test_relu_gradient_hand_derived():
  x = Tensor([-2.0, -0.5, 0.5, 3.0], requires_grad=True)
  (g,) = (x.relu() * Tensor([1.0, 2.0, 3.0, 4.0])).sum().gradient(x)
  np.testing.assert_allclose(g.numpy(), [0, 0, 3, 4])


def test_sparse_categorical_crossentropy():
  logits = away_from_zero(4, 5)
  labels = np.array([0, 3, 4, 1], dtype=np.int32)
  x = Tensor(logits, requires_grad=True)
  loss = x.sparse_categorical_crossentropy(Tensor(labels))
  assert loss.shape == ()
  expected_loss = -_np_log_softmax(logits.astype(np.float64))[np.arange(4), labels].mean()
  np.testing.assert_allclose(loss.numpy(), expected_loss, rtol=1e-4, atol=1e-5)
  (g,) = loss.gradient(x)
  onehot = np.eye(5)[labels]
  np.testing.assert_allclose(g.numpy(), (_np_softmax(logits.astype(np.float64)) - onehot) / 4, rtol=1e-4, atol=1e-5)


def test_sparse_categorical_crossentropy_ignore_index():
  logits = away_from_zero(4, 3)
  labels = np.array([2, -100, 0, -100], dtype=np.int32)
  x = Tensor(logits, requires_grad=True)
  loss = x.sparse_categorical_crossentropy(Tensor(labels), ignore_index=-100)
  lp = _np_log_softmax(logits.astype(np.float64))
  np.testing.assert_allclose(loss.numpy(), -(lp[0, 2] + lp[2, 0]) / 2, rtol=1e-4, atol=1e-5)
  (g,) = loss.gradient(x)
  expected = (_np_softmax(logits.astype(np.float64)) - np.eye(3)[np.maximum(labels, 0)]) / 2
  expected[[1, 3]] = 0
  np.testing.assert_allclose(g.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_sparse_categorical_crossentropy_default_ignores_nothing():
  # tinygrad: ignore_index=-1 (the default) masks nothing; a label of -1 matches no class, so its row adds 0 but still counts
  logits = away_from_zero(2, 3)
  loss = Tensor(logits).sparse_categorical_crossentropy(Tensor([1, -1]))
  np.testing.assert_allclose(loss.numpy(), -_np_log_softmax(logits.astype(np.float64))[0, 1] / 2, rtol=1e-4, atol=1e-5)


def test_gradient_with_explicit_seed():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  (g,) = (x * x * 3).gradient(x, gradient=Tensor([1.0, 0.5, -1.0]))
  np.testing.assert_allclose(g.numpy(), [6.0, 6.0, -18.0])


def test_gradient_of_many_targets_and_unused_path():
  a, b, c = (Tensor(np.full((2, 2), v, np.float32), requires_grad=True) for v in (1.0, 2.0, 3.0))
  loss = (a * b + b * c).sum()
  ga, gb, gc = loss.gradient(a, b, c)
  np.testing.assert_allclose(ga.numpy(), np.full((2, 2), 2.0))
  np.testing.assert_allclose(gb.numpy(), np.full((2, 2), 4.0))
  np.testing.assert_allclose(gc.numpy(), np.full((2, 2), 2.0))


def test_detach_blocks_gradient():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  (g,) = (x.detach() * x).sum().gradient(x)
  np.testing.assert_allclose(g.numpy(), [1.0, 2.0, 3.0])


def test_gradient_target_not_in_graph_is_zeros():
  # as in tinygrad: a target the result doesn't depend on differentiably gets a zero gradient, not an error
  x = Tensor([1.0, 2.0], requires_grad=True)
  y = Tensor([3.0, 4.0], requires_grad=True)
  np.testing.assert_array_equal((x * 2).sum().gradient(y)[0].numpy(), [0, 0])
  # only reached through a comparison: no path for a gradient either
  np.testing.assert_array_equal((y > 0).where(x, 0.0).sum().gradient(y)[0].numpy(), [0, 0])
  (y.sign() * x).sum().backward()
  np.testing.assert_array_equal(y.grad.numpy(), [0, 0])


def test_gradient_of_non_scalar_needs_seed():
  x = Tensor([1.0, 2.0], requires_grad=True)
  with pytest.raises((ValueError, RuntimeError, AssertionError)):
    (x * 2).gradient(x)


def test_requires_grad_propagation():
  a = Tensor([1.0, 2.0], requires_grad=True)
  b = Tensor([3.0, 4.0])
  assert a.requires_grad is True
  assert b.requires_grad is None
  assert (a * 2).requires_grad is True
  assert (a + b).requires_grad is True
  assert (b + a).requires_grad is True
  assert (b * 2).requires_grad is None
  assert a.reshape(2, 1).requires_grad is True
  assert a.sum().requires_grad is True
  assert a.exp().requires_grad is True
  assert a[1:].requires_grad is True
  assert a.detach().requires_grad is False
  f1, f2 = Tensor([1.0], requires_grad=False), Tensor([2.0], requires_grad=False)
  assert (f1 + f2).requires_grad is False  # all inputs say False: False (None only when some input is undecided)
  assert (f1 + b[:1]).requires_grad is None


def test_requires_grad_constructor_forms():
  assert Tensor.ones(2, requires_grad=True).requires_grad is True
  assert Tensor.rand(2, requires_grad=True).requires_grad is True
  assert Tensor.zeros(2).requires_grad_().requires_grad is True


def test_constant_filled_parameters_get_gradients_of_their_own():
  # two Tensor.zeros(3) are one graph node until realized (hash-consing): marked as parameters (requires_grad=True, an
  # optimizer), each must still get only its own gradient, as in tinygrad and torch. Both got the sum of the two (7s here)
  x = Tensor([1.0, 2.0, 3.0])
  b1, b2 = Tensor.zeros(3, requires_grad=True), Tensor.zeros(3, requires_grad=True)
  ((x + b1) * 2 + (x + b2) * 5).sum().backward()
  np.testing.assert_array_equal(b1.grad.numpy(), [2.0, 2.0, 2.0])
  np.testing.assert_array_equal(b2.grad.numpy(), [5.0, 5.0, 5.0])
  w = Tensor.ones(1, 1).requires_grad_()  # a weight of ones times an input of ones: d/dw is 5 (it was 10)
  (Tensor.ones(5, 1) @ w).sum().backward()
  np.testing.assert_array_equal(w.grad.numpy(), [[5.0]])
  from tinygrad import nn
  c1, c2 = Tensor.zeros(3), Tensor.zeros(3)  # tinygrad style: plain tensors, marked by the optimizer
  opt = nn.optim.SGD([c1, c2], lr=1.0)
  with Tensor.train():
    opt.zero_grad()
    ((x + c1) * 2 + (x + c2) * 5).sum().backward()
    opt.step()
  np.testing.assert_array_equal(c1.numpy(), [-2.0, -2.0, -2.0])
  np.testing.assert_array_equal(c2.numpy(), [-5.0, -5.0, -5.0])
  s1, s2 = Tensor(0.5, requires_grad=True), Tensor(0.5, requires_grad=True)  # scalar parameters
  (s1 * 2 + s2 * 5).backward()
  assert s1.grad.item() == 2.0 and s2.grad.item() == 5.0
  a = Tensor.arange(3).float().requires_grad_()  # any graph without a buffer (arange, full)
  assert a.tolist() == [0.0, 1.0, 2.0] and Tensor.full((2,), 1.5, requires_grad=True).tolist() == [1.5, 1.5]


def test_backward_sets_grad():
  x = Tensor([1.0, -2.0, 3.0], requires_grad=True)
  w = Tensor([[1.0, 2.0], [0.0, 1.0], [1.0, -1.0]], requires_grad=True)
  loss = (x @ w).relu().sum()
  ret = loss.backward()
  assert ret is loss
  assert x.grad is not None and w.grad is not None
  # x @ w = [4, -3]: relu passes only the first column
  np.testing.assert_allclose(x.grad.numpy(), [1.0, 0.0, 1.0])
  np.testing.assert_allclose(w.grad.numpy(), [[1.0, 0.0], [-2.0, 0.0], [3.0, 0.0]])
  assert x.grad.shape == x.shape and w.grad.shape == w.shape


def test_backward_accumulates_across_calls():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  (x * 2).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])
  (x * x).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [4.0, 6.0, 8.0])
  x.grad = None
  (x * 3).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0, 3.0])


def test_backward_fills_every_float_tensor_not_marked_requires_grad_false():
  # tinygrad 0.14 has no requires_grad: backward() gives every float tensor in the graph a gradient (inputs, intermediates, a
  # model's weights without an optimizer). requires_grad=False (and detach) still opt out, as in torch
  x = Tensor([1.0, 2.0], requires_grad=True)
  c, k = Tensor([5.0, 6.0]), Tensor([1.0, 1.0], requires_grad=False)
  h = x * c
  (h * k).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [5.0, 6.0])
  np.testing.assert_allclose(c.grad.numpy(), [1.0, 2.0])
  np.testing.assert_allclose(h.grad.numpy(), [1.0, 1.0])
  assert k.grad is None
  from tinygrad import nn
  m = nn.Linear(3, 2)
  m(Tensor([[1.0, 2.0, 3.0]])).sum().backward()  # values from tinygrad 0.14: the weight's gradient sums to 12
  assert m.weight.grad is not None and m.weight.grad.numpy().sum() == 12.0


def test_second_use_of_same_input():
  x = Tensor([0.5, 1.5], requires_grad=True)
  y = x.exp()
  loss = (y * y + y).sum()
  (g,) = loss.gradient(x)
  e = np.exp(np.array([0.5, 1.5]))
  np.testing.assert_allclose(g.numpy(), 2 * e * e + e, rtol=1e-5)


def test_backward_skips_int_tensors_derived_from_parameters():
  # REINFORCE: actions sampled (argmax/multinomial) from a policy's output are ints that inherited requires_grad; fed back
  # into the loss they are not targets (tinygrad 0.14 runs this; ours raised "only float tensors have gradients")
  from tinygrad import nn
  Tensor.manual_seed(3)
  layer = nn.Linear(4, 3)
  layer.weight.requires_grad_(True)
  x = Tensor(np.arange(8, dtype=np.float32).reshape(2, 4) / 8)
  actions = layer(x).argmax(-1)
  (layer(x).log_softmax().gather(1, actions.unsqueeze(1)).sum()).backward()
  got = layer.weight.grad.numpy()
  layer.weight.grad = None
  (layer(x).log_softmax().gather(1, actions.detach().unsqueeze(1)).sum()).backward()
  np.testing.assert_allclose(got, layer.weight.grad.numpy(), rtol=1e-6)
  assert actions.grad is None
