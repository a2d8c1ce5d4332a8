"""tinygrad.nn.optim against numpy reimplementations of each update rule, over several steps; and the Optimizer contract."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.nn import optim


@pytest.fixture(autouse=True)
def training():
  old = Tensor.training
  Tensor.training = True
  yield
  Tensor.training = old


# loss(w) = sum(A * w^2) / 2 + sum(C * w) + sum(w)^2 / 4: the gradient A*w + C + sum(w)/2 couples every element
A = np.array([[1.0, 2.0, 0.5], [0.3, 1.5, 1.0]], np.float32)
C = np.array([[0.5, -1.0, 0.2], [1.0, 0.1, -0.4]], np.float32)
W0 = np.array([[0.3, -0.6, 0.9], [-1.2, 0.4, 0.1]], np.float32)


def loss(w: Tensor) -> Tensor: return (Tensor(A) * w * w).sum() / 2 + (Tensor(C) * w).sum() + w.sum().square() / 4
def np_grad(w: np.ndarray) -> np.ndarray: return A * w + C + w.sum() / 2


def run_ours(make, steps: int = 4) -> np.ndarray:
  w = Tensor(W0.copy(), requires_grad=True)
  opt = make([w])
  for _ in range(steps):
    opt.zero_grad()
    loss(w).backward()
    opt.step()
  return w.numpy()


def run_numpy(update, steps: int = 4) -> np.ndarray:
  w, state = W0.astype(np.float64), {}
  for t in range(1, steps + 1): w = update(w, np_grad(w), state, t)
  return w


def np_sgd(lr, momentum=0.0, wd=0.0, nesterov=False, classic=False):
  def update(w, g, st, t):
    g = g + wd * w
    if classic: g = g * lr
    if momentum:
      st["b"] = momentum * st.get("b", 0) + g
      g = g + momentum * st["b"] if nesterov else st["b"]
    return w - (g if classic else lr * g)
  return update


def np_adam(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, lamb=False):
  def update(w, g, st, t):
    st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    up = (st["m"] / (1 - b1 ** t)) / (np.sqrt(st["v"] / (1 - b2 ** t)) + eps) + wd * w
    r = 1.0
    if lamb:
      r1, r2 = np.linalg.norm(w), np.linalg.norm(up)
      r = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
    return w - lr * r * up
  return update


def np_newton_schulz(g, steps=5, coeffs=(3.4445, -4.775, 2.0315), eps=1e-7):
  if g.shape[0] > g.shape[1]: return np_newton_schulz(g.T, steps, coeffs, eps).T
  x = g / (np.linalg.norm(g) + eps)
  a, b, c = coeffs
  for _ in range(steps):
    gram = x @ x.T
    x = a * x + b * gram @ x + c * gram @ gram @ x
  return x


def np_muon(lr, momentum=0.95, wd=0.0, nesterov=True, ns_steps=5):
  def update(w, g, st, t):
    st["b"] = momentum * st.get("b", 0) + g
    g = g + momentum * st["b"] if nesterov else st["b"]
    g = np_newton_schulz(g, ns_steps)
    return w * (1 - wd * lr) - lr * g
  return update


def np_lars(lr, momentum=0.9, wd=1e-4, tcoef=0.001):
  def update(w, g, st, t):
    r1, r2 = np.linalg.norm(w), np.linalg.norm(g)
    r = tcoef * r1 / (r2 + wd * r1) if r1 > 0 and r2 > 0 else 1.0
    g = (g + wd * w) * r * lr
    st["b"] = momentum * st.get("b", 0) + g
    return w - st["b"]
  return update


CASES = {
  "sgd": (lambda p: optim.SGD(p, lr=0.1), np_sgd(0.1)),
  "sgd_momentum": (lambda p: optim.SGD(p, lr=0.1, momentum=0.9), np_sgd(0.1, 0.9)),
  "sgd_nesterov": (lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True), np_sgd(0.1, 0.9, nesterov=True)),
  "sgd_weight_decay": (lambda p: optim.SGD(p, lr=0.1, momentum=0.5, weight_decay=0.1), np_sgd(0.1, 0.5, wd=0.1)),
  "sgd_classic": (lambda p: optim.SGD(p, lr=0.1, momentum=0.9, classic=True), np_sgd(0.1, 0.9, classic=True)),
  "adam": (lambda p: optim.Adam(p, lr=0.05), np_adam(0.05)),
  "adam_betas": (lambda p: optim.Adam(p, lr=0.05, b1=0.5, b2=0.9, eps=1e-4), np_adam(0.05, 0.5, 0.9, 1e-4)),
  "adamw": (lambda p: optim.AdamW(p, lr=0.05, weight_decay=0.2), np_adam(0.05, wd=0.2)),
  "lamb": (lambda p: optim.LAMB(p, lr=0.05, weight_decay=0.1), np_adam(0.05, eps=1e-6, wd=0.1, lamb=True)),
  "lars": (lambda p: optim.LARS(p, lr=10.0), np_lars(10.0)),
  "muon": (lambda p: optim.Muon(p, lr=0.05, weight_decay=0.0), np_muon(0.05)),
  "muon_wd_no_nesterov": (lambda p: optim.Muon(p, lr=0.05, weight_decay=0.1, nesterov=False, momentum=0.8), np_muon(0.05, 0.8, 0.1, False)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_numpy(name):
  make, update = CASES[name]
  np.testing.assert_allclose(run_ours(make), run_numpy(update), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "lamb"])
def test_fused_matches_unfused(name):
  # fused: all parameters flattened into one vector (LAMB's trust ratio then spans all of them, as in tinygrad)
  make = {"sgd_momentum": lambda p, f: optim.SGD(p, lr=0.1, momentum=0.9, fused=f), "adam": lambda p, f: optim.Adam(p, lr=0.05, fused=f),
          "lamb": lambda p, f: optim.LAMB(p, lr=0.05, fused=f)}[name]
  results = []
  for fused in (False, True):
    w1, w2 = Tensor(W0.copy(), requires_grad=True), Tensor(W0[0].copy() * 2, requires_grad=True)
    opt = make([w1, w2], fused)
    for _ in range(3):
      opt.zero_grad()
      (loss(w1) + (w2 * w2 * w1[1]).sum()).backward()
      opt.step()
    results.append((w1.numpy(), w2.numpy()))
  if name == "lamb": assert not np.allclose(results[0][0], results[1][0])  # one trust ratio for everything changes the steps
  else:
    for a, b in zip(*results): np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5)


def test_fused_lamb_matches_numpy_on_the_concatenation():
  w1, w2 = Tensor(W0.copy(), requires_grad=True), Tensor([0.5, -1.5, 2.0], requires_grad=True)
  opt = optim.LAMB([w1, w2], lr=0.05, weight_decay=0.1, fused=True)
  for _ in range(3):
    opt.zero_grad()
    (loss(w1) + (w2 * w2).sum() / 2).backward()
    opt.step()
  update, st = np_adam(0.05, eps=1e-6, wd=0.1, lamb=True), {}
  v = np.concatenate([W0.reshape(-1), [0.5, -1.5, 2.0]]).astype(np.float64)
  for t in range(1, 4): v = update(v, np.concatenate([np_grad(v[:6].reshape(2, 3)).reshape(-1), v[6:]]), st, t)
  np.testing.assert_allclose(np.concatenate([w1.numpy().reshape(-1), w2.numpy()]), v, atol=2e-5, rtol=1e-4)


def test_defaults_like_tinygrad():
  w = Tensor.zeros(2, requires_grad=True).contiguous()
  adam, adamw, lamb, sgd, muon = optim.Adam([w]), optim.AdamW([w]), optim.LAMB([w]), optim.SGD([w]), optim.Muon([w])
  assert (adam.b1, adam.b2, adam.eps, adam.wd) == (0.9, 0.999, 1e-8, 0.0)
  assert (adamw.eps, adamw.wd) == (1e-8, 0.01) and (lamb.eps, lamb.wd, lamb.adam) == (1e-6, 0.0, False)
  assert sgd.lr.numpy().tolist() == pytest.approx([0.001]) and (sgd.momentum, sgd.wd, sgd.nesterov) == (0.0, 0.0, False)
  assert (muon.momentum, muon.nesterov, muon.ns_steps, muon.wd) == (0.95, True, 5, 0.1) and muon.lr.numpy().tolist() == pytest.approx([0.001])
  assert muon.ns_coefficients == (3.4445, -4.775, 2.0315)  # tinygrad 0.14's name and default


def test_grads_come_from_old_weights():
  # d/da (a*b) = b and d/db = a: both updates must read the weights from before the step
  a, b = Tensor([2.0], requires_grad=True), Tensor([3.0], requires_grad=True)
  opt = optim.SGD([a, b], lr=0.5)
  (a * b).sum().backward()
  opt.step()
  assert a.numpy().tolist() == [0.5] and b.numpy().tolist() == [2.0]


def test_buffers_are_realized_from_the_old_weights():
  # a lazy buffer update (like batchnorm's running mean) that reads a weight: the step realizes it before the weight changes
  w = Tensor([1.0, 2.0], requires_grad=True).realize()
  stat = Tensor([0.0], requires_grad=False).realize()
  stat.assign(w.sum().reshape(1))
  opt = optim.SGD([w, stat], lr=0.5)
  (w * w).sum().backward()
  opt.step()
  assert stat.tolist() == [3.0] and w.tolist() == [0.0, 0.0]


def test_zero_grad_and_step_requirements():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = optim.Adam([w])
  (w * w).sum().backward()
  assert w.grad is not None
  opt.zero_grad()
  assert w.grad is None
  with pytest.raises(RuntimeError): opt.step()  # no gradient
  Tensor.training = False
  (w * w).sum().backward()
  with pytest.raises(RuntimeError): opt.step()  # tinygrad requires Tensor.training


def test_params_and_buffers():
  a, b, c = Tensor([1.0]), Tensor([2.0], requires_grad=False), Tensor([3.0], requires_grad=True)
  opt = optim.SGD([a, b, c, c], lr=0.1)
  assert a.requires_grad is True  # None becomes True, as in tinygrad
  assert opt.params == [a, c] and opt.buffers == [b]
  with pytest.raises(ValueError): optim.SGD([Tensor([1.0], requires_grad=False)])


def test_state_buffers_are_distinct():
  w1, w2 = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0], requires_grad=True)
  opt = optim.Adam([w1, w2], lr=0.1)
  (w1 * w1 + w2).sum().backward()
  opt.step()
  np.testing.assert_allclose(opt.m[0].numpy(), [0.2, 0.4], rtol=1e-6)
  np.testing.assert_allclose(opt.m[1].numpy(), [0.1, 0.1], rtol=1e-6)
  np.testing.assert_allclose(opt.v[0].numpy(), [0.004, 0.016], rtol=1e-5)
  np.testing.assert_allclose(opt.b1_t.numpy(), [0.9], rtol=1e-6)
  np.testing.assert_allclose(opt.b2_t.numpy(), [0.999], rtol=1e-6)


def test_learning_rate_is_a_tensor():
  w = Tensor([1.0], requires_grad=True)
  opt = optim.SGD([w], lr=0.5)
  assert opt.lr.dtype == dtypes.float32
  opt.lr.assign(Tensor([0.25])).realize()
  (w * 4).sum().backward()
  opt.step()
  assert w.numpy().tolist() == [0.0]


def test_optimizer_group():
  a, b = Tensor([1.0], requires_grad=True), Tensor([1.0], requires_grad=True)
  group = optim.OptimizerGroup(optim.SGD([a], lr=0.1), optim.SGD([b], lr=0.2))
  (a + b).sum().backward()
  group.step()
  np.testing.assert_allclose([a.item(), b.item()], [0.9, 0.8], rtol=1e-6)
  group.zero_grad()
  assert a.grad is None and b.grad is None


def test_muon_update_is_orthogonal():
  w = Tensor(np.eye(3, dtype=np.float32) * 0, requires_grad=True)
  opt = optim.Muon([w], lr=1.0, momentum=0.0, nesterov=False, ns_steps=10, ns_coefficients=(1.5, -0.5))  # the cubic iteration converges to UV^T
  g = np.array([[2.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.1, 0.0, 3.0]], np.float32)
  (w * Tensor(g)).sum().backward()
  opt.step()
  u = -w.numpy()
  np.testing.assert_allclose(u @ u.T, np.eye(3), atol=2e-2)


def test_step_with_half_params():
  w = Tensor([1.0, -1.0], dtype=dtypes.float16, requires_grad=True)
  opt = optim.Adam([w], lr=0.1)
  (w.float() * 2).sum().backward()
  opt.step()
  assert w.dtype == dtypes.float16
  np.testing.assert_allclose(w.numpy().astype(np.float32), [0.9, -1.1], atol=1e-3)


def test_grad_after_step_is_the_one_used_and_accumulates_as_torch():
  """Without zero_grad, gradients add up as in torch: each backward's gradient is taken at the weights of that backward. The
  lazy .grad read the weights, so after step() it was the gradient at the new weights (w.grad of w*w was 2 * w_new) and the
  next step summed that. Found by api_fuzz seed 79 (optimizer/71, AdamW without zero_grad)."""
  w = Tensor([1.0, 2.0]).contiguous().realize()
  opt = optim.SGD([w], lr=0.25)
  ref_w, ref_g = np.array([1.0, 2.0]), np.zeros(2)
  with Context(TRAINING=1):
    for _ in range(3):
      (w * w).sum().backward()
      opt.step()
      ref_g = ref_g + 2 * ref_w
      ref_w = ref_w - 0.25 * ref_g
      np.testing.assert_allclose(w.grad.numpy(), ref_g, rtol=1e-6)
      np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-6)


def test_gradients_clipped_in_place_by_assign_share_one_backward_pass():
  # p.grad.assign(p.grad * scale) on lazy gradients: the backward pass runs once with the step (it was realized once per
  # parameter at each assign: a 2-layer transformer's clipped AdamW step ran 1645 kernels where tinygrad 0.14 runs 250)
  from tinygrad.helpers import GlobalCounters
  rng = np.random.default_rng(0)
  ws_np = [rng.standard_normal((6, 6)).astype(np.float32) * 0.5 for _ in range(4)]
  x_np = rng.standard_normal((3, 6)).astype(np.float32)
  def run(clip: bool) -> tuple[int, list[np.ndarray]]:
    ws = [Tensor(w).contiguous().realize() for w in ws_np]
    opt = optim.SGD(ws, lr=0.1)
    h = Tensor(x_np)
    for w in ws: h = (h @ w).tanh()
    loss = h.square().sum().backward()
    GlobalCounters.reset()
    gn = Tensor.stack(*[(w.grad * w.grad).sum() for w in ws]).sum().sqrt()
    scale = (0.5 / gn).minimum(1.0)
    for w in ws:
      if clip: w.grad.assign(w.grad * scale)
      else: w.grad = w.grad * scale
    Tensor.realize(loss, *opt.schedule_step())
    return GlobalCounters.kernel_count, [w.numpy() for w in ws]
  k_assign, w_assign = run(True)
  k_replace, w_replace = run(False)
  for a, b in zip(w_assign, w_replace): np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  assert k_assign <= k_replace + len(ws_np), (k_assign, k_replace)
  # the clipped gradient reads the unclipped ones (gn): a lazy reader of the old value still reads it
  g = Tensor([3.0, 4.0]) * 1
  norm = (g * g).sum().sqrt()
  g.assign(g / norm)
  np.testing.assert_allclose(g.numpy(), [0.6, 0.8], rtol=1e-6)
  np.testing.assert_allclose(norm.numpy(), 5.0, rtol=1e-6)
