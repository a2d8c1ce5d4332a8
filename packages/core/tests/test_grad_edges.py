"""Gradients at the points where they are subtle (found by bench/grad_fuzz.py against torch 2.13 and tinygrad 0.14):
zero remainders, std of equal values, a correction beyond the count, atanh at +-1, binary cross entropy at probabilities
of 0 and 1. References are closed-form derivatives in float64 numpy."""
import numpy as np
from tinygrad import Tensor, dtypes


def grads(fn, *arrays: np.ndarray, w: np.ndarray | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
  """fn's value and the gradients of (fn(*xs) * w).sum() with respect to each input."""
  xs = [Tensor(a) for a in arrays]
  out = fn(*xs)
  (out * (Tensor(w) if w is not None else 1.0)).sum().backward()
  return out.numpy(), [x.grad.numpy() for x in xs]


def test_fmod_zero_remainder_keeps_gradient():
  # fmod(a, b) = a - trunc(a / b) * b: d/da 1 and d/db -trunc(a / b) also where the remainder is 0 (torch); it was 0 there
  a = np.array([3.0, -3.0, 0.0, -0.0, 2.5, -7.0, 4.5], dtype=np.float32)
  b = np.array([1.5, 1.5, 1.0, 1.0, 1.0, -2.0, 1.5], dtype=np.float32)
  out, (ga, gb) = grads(lambda x, y: x.fmod(y), a, b)
  np.testing.assert_array_equal(out, np.fmod(a, b))
  np.testing.assert_array_equal(np.signbit(out), np.signbit(np.fmod(a, b)))  # a zero remainder keeps a's sign
  np.testing.assert_array_equal(ga, np.ones_like(a))
  np.testing.assert_array_equal(gb, -np.trunc(a.astype(np.float64) / b))


def test_mod_zero_remainder_keeps_gradient():
  # Python's % (a - floor(a / b) * b): d/da 1, d/db -floor(a / b) (torch.remainder)
  a = np.array([3.0, -3.0, 6.0, 2.5, -7.0], dtype=np.float32)
  b = np.array([1.5, 1.5, -2.0, 1.0, -2.0], dtype=np.float32)
  out, (ga, gb) = grads(lambda x, y: x % y, a, b)
  np.testing.assert_array_equal(out, np.mod(a, b))
  np.testing.assert_array_equal(ga, np.ones_like(a))
  np.testing.assert_array_equal(gb, -np.floor(a.astype(np.float64) / b))


def test_std_of_equal_values_has_zero_gradient():
  # std is not differentiable where all values are equal; torch gives the subgradient 0 there (it was inf * 0 = NaN)
  x = np.array([[1.5, 1.5, 1.5], [1.0, 2.0, 4.0]], dtype=np.float32)
  w = np.array([2.0, -1.0], dtype=np.float32)
  out, (g,) = grads(lambda t: t.std(1), x, w=w)
  np.testing.assert_allclose(out, np.std(x.astype(np.float64), axis=1, ddof=1), rtol=1e-6)
  xd = x.astype(np.float64)
  with np.errstate(invalid="ignore"):  # row 0: 0 / 0, replaced
    ref = w[:, None] * (xd - xd.mean(1, keepdims=True)) / (2 * np.std(xd, axis=1, ddof=1)[:, None])  # (x - m) / ((n - 1) std)
  ref[0] = 0.0
  np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-7)
  _, (g2,) = grads(lambda t: t.std_mean(1)[0] + t.std_mean(1)[1], x, w=w)
  np.testing.assert_allclose(g2, ref + w[:, None] / 3, rtol=1e-5, atol=1e-7)


def test_var_with_correction_beyond_count():
  # n - correction < 0: the value is sum / 0 (inf, or NaN for a zero sum; torch), the gradient 2 (x - mean) / (n - correction)
  x = np.array([[1.0, 2.0], [2.0, 2.0]], dtype=np.float32)
  out, (g,) = grads(lambda t: t.var(1, correction=3), x, w=np.array([3.0, 3.0], dtype=np.float32))
  assert out[0] == np.inf and np.isnan(out[1])
  np.testing.assert_array_equal(g, 3.0 * 2 * (x - x.mean(1, keepdims=True)) / (2 - 3))
  _, (g1,) = grads(lambda t: t.var(1, correction=2) + t.mean(1), np.array([[1.0], [2.0]], dtype=np.float32))
  np.testing.assert_array_equal(g1, np.ones((2, 1)))  # N = 1: x - mean is 0, only the mean's gradient is left (not NaN)


def test_var_with_correction_equal_to_count():
  # n - correction == 0: the value is sum / 0, the gradient torch's 2 (x - mean) / 0: +-inf, NaN only where x == mean (it was NaN
  # everywhere: 1/0 also reached the mean, inf - inf)
  x = np.array([[1.0, 3.0, 2.0], [2.0, 2.0, 2.0]], dtype=np.float32)
  w = np.array([1.5, 1.0], dtype=np.float32)
  with np.errstate(divide="ignore", invalid="ignore"):
    ref = w[:, None] * 2 * (x - x.mean(1, keepdims=True)) / np.float32(0)
  out, (g,) = grads(lambda t: t.var(1, correction=3), x, w=w)
  assert out[0] == np.inf and np.isnan(out[1])
  np.testing.assert_array_equal(g, ref)  # [[-inf, inf, NaN], [NaN, NaN, NaN]]
  _, (g2,) = grads(lambda t: t.var_mean(1, correction=3)[0] + t.var_mean(1, correction=3)[1], x, w=w)
  np.testing.assert_array_equal(g2, ref + w[:, None] / 3)


def test_atanh_gradient_at_one_is_inf():
  # d atanh / dx = 1 / (1 - x^2): inf at +-1 (torch); log1p(2x / (1 - x)) gave log1p's 0 slope at inf times inf = NaN
  x = np.array([1.0, -1.0, 0.0, 0.3, 0.5, 0.499, 0.9, -0.99, 1e-8, 0.7, 1.5], dtype=np.float32)
  out, (g,) = grads(lambda t: t.atanh(), x)
  with np.errstate(all="ignore"):
    ref = np.arctanh(x.astype(np.float64))
    dref = 1 / (1 - x.astype(np.float64) ** 2)
  np.testing.assert_allclose(out, ref, rtol=3e-7)
  assert np.isnan(out[-1]) and g[-1] == np.float32(dref[-1])  # outside [-1, 1]: a NaN value, the formula's slope (torch)
  np.testing.assert_allclose(g, dref, rtol=2e-7)
  out16, (g16,) = grads(lambda t: t.atanh(), x.astype(np.float16))
  assert out16.dtype == np.float16 and g16.dtype == np.float16 and g16[0] == np.inf and g16[1] == np.inf


def test_binary_crossentropy_at_zero_and_one():
  # torch's gradient (p - y) / max(p (1 - p), 1e-12) also at p = 0 and 1, with the logs clamped at -100 in the value;
  # the clamped logs' own gradient there was 0 * inf = NaN
  p = np.array([0.0, 0.0, 1.0, 1.0, 0.3, 0.7], dtype=np.float32)
  y = np.array([0.0, 1.0, 0.0, 1.0, 0.4, 1.0], dtype=np.float32)
  out, (gp, gy) = grads(lambda a, b: a.binary_crossentropy(b, reduction="none"), p, y)
  pd, yd = p.astype(np.float64), y.astype(np.float64)
  with np.errstate(divide="ignore"):
    lp, l1p = np.maximum(np.log(pd), -100), np.maximum(np.log(1 - pd), -100)
  np.testing.assert_allclose(out, -(yd * lp + (1 - yd) * l1p), rtol=1e-6)
  np.testing.assert_allclose(gp, (pd - yd) / np.maximum(pd * (1 - pd), 1e-12), rtol=1e-6)
  np.testing.assert_allclose(gy, l1p - lp, rtol=1e-6)  # the clamped logs' (torch: +-inf at 0 and 1)
  _, (gp_mean, _) = grads(lambda a, b: a.binary_crossentropy(b), p, y)
  np.testing.assert_allclose(gp_mean, gp / len(p), rtol=1e-6)
  _, (gh, _) = grads(lambda a, b: a.binary_crossentropy(b, reduction="sum"), p.astype(np.float16), y.astype(np.float16))
  assert gh.dtype == np.float16 and not np.isnan(gh).any()
  assert Tensor(p, dtype=dtypes.half).binary_crossentropy(Tensor(y, dtype=dtypes.half)).dtype == dtypes.half


def test_half_broadcast_gradient_accumulates_in_float32():
  # the gradient of a broadcast half operand sums the upstream gradient over the broadcast axes in float32 and rounds once,
  # as the forward sum does (torch); it summed in half, rounding after each addition (3.162109375 here for 3.1604...)
  g = np.array([1.740234375, 0.199951171875, 0.5, 0.72021484375], dtype=np.float16)
  exact = np.float16(g.astype(np.float64).sum())
  x = Tensor([-1.45], dtype=dtypes.half, requires_grad=True)
  (x + Tensor(np.zeros(4, dtype=np.float16))).backward(Tensor(g))
  assert x.grad.dtype == dtypes.half and x.grad.numpy()[0] == exact
  y = Tensor([-1.45], requires_grad=True)  # through a cast to half: the float32 leaf gets the half sum
  (y.half() + Tensor(np.zeros(4, dtype=np.float16))).float().backward(Tensor(g.astype(np.float32)))
  assert y.grad.numpy()[0] == np.float32(exact)
  z = Tensor(np.ones((3, 1), dtype=np.float16), requires_grad=True)  # an expand inside (N, 1) -> (N, 4)
  (z * Tensor(np.ones((3, 4), dtype=np.float16))).backward(Tensor(np.tile(g, (3, 1))))
  np.testing.assert_array_equal(z.grad.numpy(), np.full((3, 1), exact, dtype=np.float16))


def test_backward_reaches_tensors_realized_after_the_graph_was_built():
  # a loss built from lazy tensors that are realized before backward() (directly, or as a side effect of realizing another
  # gradient) still gives them their gradients, as in tinygrad 0.14; they lost them (.grad None) once they held a buffer
  x_np = np.array([[1.0, 2.0, 3.0]], np.float32)
  x = Tensor(x_np)
  for make in (lambda: Tensor.ones(3).contiguous(), lambda: Tensor([1.0, 1.0, 1.0]) * 2, lambda: Tensor.randn(3) * 1):
    w, f = Tensor([[0.1, 0.2, 0.3]]), make()
    loss = ((x * f) @ w.T).sum()
    f.realize()
    loss.backward()
    assert f.grad is not None
    np.testing.assert_allclose(f.grad.numpy(), x_np[0] * [0.1, 0.2, 0.3], rtol=1e-6)
  w, f = Tensor([[0.1, 0.2, 0.3]]), Tensor.ones(3).contiguous()
  loss = ((x * f) @ w.T).sum()
  loss.gradient(w)[0].realize()  # realizes f on the way
  loss.backward()
  np.testing.assert_allclose(f.grad.numpy(), x_np[0] * [0.1, 0.2, 0.3], rtol=1e-6)


def test_backward_of_an_assign_realized_after_the_graph_was_built():
  # the gradient belongs to the assigned value (what a holds), not to the old value the assign read (that gave 2x)
  a = Tensor([1.0, 2.0, 3.0]).contiguous().realize()
  a.assign(a * 2)
  x = Tensor([1.0, 2.0, 3.0])
  loss = (a * x).sum()
  a.realize()
  loss.backward()
  np.testing.assert_array_equal(a.grad.numpy(), [1.0, 2.0, 3.0])


def test_gradient_through_an_intermediate_realized_on_the_way():
  # realizing topk's indices gives the softmax before it a buffer; the live tensor `pr` used to become that buffer and lose its
  # graph, so a loss built from it afterwards had a zero gradient (a MoE load-balancing loss); now it keeps reaching w
  rng = np.random.default_rng(0)
  x_np, w_np = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
  c_np = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
  def ref() -> np.ndarray:
    lg = x_np.astype(np.float64) @ w_np; p = np.exp(lg - lg.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
    dp = np.broadcast_to(c_np / 5, p.shape)
    dlg = p * (dp - (dp * p).sum(1, keepdims=True))
    return x_np.T @ dlg
  w = Tensor(w_np); w.requires_grad = True
  pr = (Tensor(x_np) @ w).softmax(-1)
  _, idx = pr.topk(2, dim=-1)
  idx.realize()
  loss = (pr.mean(0) * Tensor(c_np)).sum()
  np.testing.assert_allclose(loss.gradient(w)[0].numpy(), ref(), rtol=1e-5, atol=1e-6)
  loss.backward()
  np.testing.assert_allclose(w.grad.numpy(), ref(), rtol=1e-5, atol=1e-6)
  # the same tensor realized by the program itself is cut from its graph (tinygrad 0.14 too)
  pr2 = (Tensor(x_np) @ w).softmax(-1).realize()
  np.testing.assert_array_equal((pr2 * Tensor(c_np)).sum().gradient(w)[0].numpy(), np.zeros((3, 4), np.float32))
