"""Recompute or store (schedule/recompute.py): a long elementwise value read by several kernels gets a buffer, a short one is
computed in each kernel that reads it, a broadcast one never gets a buffer of its broadcast size."""
import numpy as np
import pytest
from tinygrad import Device, Tensor, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters
from tinygrad.uop.ops import GroupOp, Ops


def alu_ops(si) -> int: return sum(1 for u in si.ast.toposort() if u.op in GroupOp.ALU)
def exp_ops(si) -> int: return sum(1 for u in si.ast.toposort() if u.op is Ops.EXP2)


def recurrence(steps: int) -> tuple[list[Tensor], list[np.ndarray]]:
  """c_t = sigmoid(c_{t-1} * a + b): each step's state read by its own reduction (a sum over rows) and by the next step."""
  rng = np.random.default_rng(0)
  a_np, b_np, c_np = (rng.uniform(-1, 1, size=(4, 8)).astype(np.float32) for _ in range(3))
  a, b, c = Tensor(a_np), Tensor(b_np), Tensor(c_np)
  outs, refs = [], []
  for _ in range(steps):
    c = (c * a + b).sigmoid()
    c_np = 1 / (1 + np.exp(-(c_np * a_np + b_np)))
    outs.append(c.sum(axis=1))
    refs.append(c_np.sum(axis=1))
  return outs, refs


def test_a_long_shared_chain_is_stored_every_few_steps():
  outs, refs = recurrence(40)
  total = Tensor.stack(*outs)
  per_step = exp_ops(Tensor.rand(4, 8).realize().sigmoid().schedule()[0])
  exps = sum(exp_ops(si) for si in total.schedule())  # per_step a step, computed how many times
  with Context(RECOMPUTE_MAX_OPS=0):
    inlined = sum(exp_ops(si) for si in Tensor.stack(*recurrence(40)[0]).schedule())
  assert inlined == per_step * 40 * 41 // 2  # each step's sum computes every step before it again
  assert exps <= per_step * 3 * 40, exps  # a few steps again at most
  np.testing.assert_allclose(total.numpy(), np.stack(refs), rtol=1e-5, atol=1e-5)


@pytest.mark.compile_only
def test_a_short_shared_value_is_recomputed():
  a, b = Tensor.rand(4, 8).realize(), Tensor.rand(4, 8).realize()
  h = (a + b) * 2  # read by two kernels, two ops: no buffer of its own
  assert len(h.sum(axis=0).schedule(h.max(axis=1))) == 2


def test_a_broadcast_value_is_not_stored_at_its_broadcast_size():
  x, w1, w2 = Tensor.rand(4, 1).realize(), Tensor.rand(4, 64).realize(), Tensor.rand(4, 64).realize()
  z = x
  for i in range(30): z = (z * 1.01 + i).sin()  # 60 ops on 4 elements
  y1, y2 = (z.expand(4, 64) * w1).sum(axis=1), (z.expand(4, 64) * w2).max(axis=1)
  sched = y1.schedule(y2)
  assert len(sched) == 3  # z stored once, two reductions read it
  assert sorted(si.bufs[0].size for si in sched) == [4, 4, 4]
  zr = x.numpy()
  for i in range(30): zr = np.sin(zr * np.float32(1.01) + i)
  np.testing.assert_allclose(y1.numpy(), (zr * w1.numpy()).sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.compile_only
def test_unrolled_lstm_training_kernels_stay_short():
  # session 23: every kernel of the backward inlined the whole history (2,900-node kernels for 2 positions: minutes to
  # compile 8); stored states keep each kernel to a few steps' ops whatever the length
  Tensor.manual_seed(0)
  cell, head = nn.LSTMCell(8, 16), nn.Linear(16, 4)
  for p in get_parameters([cell, head]): p.requires_grad_(True).realize()
  xs = Tensor.rand(4, 8, 8).realize()
  hc, outs = None, []
  for t in range(8):
    hc = cell(xs[:, t], hc)
    outs.append(head(hc[0]))
  loss = Tensor.stack(*outs, dim=1).square().mean()
  grads = loss.gradient(*get_parameters([cell, head]))
  longest = max(alu_ops(si) for si in grads[0].schedule(*grads[1:]))
  assert longest < 400, longest


@pytest.mark.compile_only
def test_random_weights_never_realized_are_stored_not_recomputed_per_row():
  # a layer whose weights were never realized: the random bits (~100 ops an element) broadcast over every row of the matmul
  def matmul_xors() -> int:
    x, w = Tensor.rand(64, 96).realize(), Tensor.rand(96, 128)
    return sum(1 for u in (x @ w).schedule()[-1].ast.toposort() if u.op is Ops.XOR)
  assert matmul_xors() == 0  # the bits in kernels of their own, the matmul loads them
  with Context(RECOMPUTE_MAX_OPS=0, STORE_OPERANDS=0): assert matmul_xors() > 0  # (a CPU stores a matmul's computed operand too)
  if not Device.renderer(Device.DEFAULT).has_local:  # a CPU stores the matmul's computed operand anyway (schedule/stored_operands.py)
    with Context(RECOMPUTE_MAX_OPS=0): assert matmul_xors() == 0


@pytest.mark.compile_only
def test_a_tiny_reduction_with_a_long_epilogue_is_not_register_blocked():
  from tinygrad.codegen.heuristics import hand_coded_opts
  from tinygrad.codegen.opt import OptOps
  a, b, c = Tensor.rand(4, 16).realize(), Tensor.rand(16, 16).realize(), Tensor.rand(4, 16).realize()
  plain = (a @ b).schedule()[-1].ast
  long = ((a @ b) * c.sigmoid() * (1 - c.sigmoid()) + c.tanh() * c.exp()).schedule()[-1].ast
  assert any(o.op is OptOps.UPCAST for o in hand_coded_opts(plain))  # a small plain matmul still blocks its outputs
  assert not any(o.op is OptOps.UPCAST for o in hand_coded_opts(long))  # 64 copies of the epilogue: not for 1,024 multiply-adds


def test_stored_values_stay_graphs_for_the_tensors_that_hold_them():
  # a layer with lazily initialized weights: its random weights are stored while the forward runs (broadcast, long); the
  # tensors keep their graphs, so a gradient taken afterwards through the graph built before still reaches them
  layer = nn.Linear(4, 3)
  layer.weight.requires_grad_(True)
  layer.bias.requires_grad_(True)
  x = Tensor(np.ones((2, 4), np.float32))
  out = layer(x)
  values = out.numpy()
  (out * 2).sum().backward()
  assert layer.weight.grad is not None and layer.bias.grad is not None
  np.testing.assert_allclose(layer.weight.grad.numpy(), np.full((3, 4), 4.0), rtol=1e-6)
  np.testing.assert_allclose(layer.bias.grad.numpy(), np.full(3, 4.0), rtol=1e-6)
  np.testing.assert_allclose(values, x.numpy() @ layer.weight.numpy().T + layer.bias.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.compile_only
def test_a_value_broadcast_into_a_conv_weight_gradient_is_stored():
  # the upstream gradient of a conv (here ~30 ops an element, under RECOMPUTE_MAX_OPS) is read by the weight gradient once for
  # every (cin, ky, kx): stored once instead (it was recomputed 800 times a value in an MNIST-style CNN's backward)
  def weight_gradient_exps() -> int:
    x, w = Tensor.rand(2, 4, 8, 8).realize(), Tensor.rand(6, 4, 3, 3).realize().requires_grad_(True)
    g = Tensor.rand(2, 6, 8, 8).realize()
    for _ in range(2): g = (g * 0.5).exp() + g
    (dw,) = x.conv2d(w, padding=1).gradient(w, gradient=g)
    (si,) = [si for si in dw.schedule() if si.bufs[0].size == w.numel()]
    return sum(1 for u in si.ast.toposort() if u.op is Ops.EXP2)
  assert weight_gradient_exps() == 0  # loaded from its buffer
  with Context(BROADCAST_MAX_OPS=0): assert weight_gradient_exps() > 0  # computed for every (cin, ky, kx)



@pytest.mark.compile_only
def test_a_row_kernels_broadcast_reduction_is_not_stored():
  # softmax of a long expression: 1 / sum(exp(...)) is broadcast along the row and holds 30+ ops, but a row kernel computes
  # it once a row (schedule/rows.py): still one kernel
  x = Tensor.rand(16, 64).realize()
  assert len((x.exp() + 1).log().softmax(-1).schedule()) == 1


def _rk4_oscillators(steps: int) -> tuple[Tensor, np.ndarray]:
  """RK4 on a (B, 2) state whose derivative is a concatenation of slices of it: each stage reads the one before at two
  positions (y[:, :1], y[:, 1:]), so inlined stages multiply."""
  w_np = np.linspace(1, 3, 8, dtype=np.float32).reshape(8, 1)
  w = Tensor(w_np)
  def f(y): return Tensor.cat(y[:, 1:], -w * w * y[:, :1], dim=1)
  def f_np(y): return np.concatenate([y[:, 1:], -w_np * w_np * y[:, :1]], 1)
  y, y_np = Tensor.ones(8, 2).contiguous().realize(), np.ones((8, 2), np.float64)
  for _ in range(steps):
    k1 = f(y); k2 = f(y + 0.005 * k1); k3 = f(y + 0.005 * k2); k4 = f(y + 0.01 * k3)
    y = y + 0.01 / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    k1n = f_np(y_np); k2n = f_np(y_np + 0.005 * k1n); k3n = f_np(y_np + 0.005 * k2n); k4n = f_np(y_np + 0.01 * k3n)
    y_np = y_np + 0.01 / 6 * (k1n + 2 * k2n + 2 * k3n + k4n)
  return y, y_np


def test_a_value_read_at_several_positions_in_one_kernel_is_stored():
  # inlined, 3 RK4 steps are one kernel of a few thousand ALU ops (index pushing copies each stage for each position it is
  # read at: 2 steps took 9 s to schedule, 3 minutes); stored where positions x ops pass VIEW_RECOMPUTE_MAX
  y, ref = _rk4_oscillators(3)
  sched = y.schedule()
  assert max(alu_ops(si) for si in sched) < 400, [alu_ops(si) for si in sched]
  assert len(sched) <= 8, len(sched)
  np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-6)
  y1, ref1 = _rk4_oscillators(1)
  with Context(VIEW_RECOMPUTE_MAX=0): assert len(y1.schedule()) == 1  # one step alone is still one kernel when not limited
  np.testing.assert_allclose(y1.numpy(), ref1, rtol=1e-5, atol=1e-6)
