"""Links of a running chain (schedule/recompute.py, chain_links): a value read by one kernel a step and inlined into the next
step's value (farthest point sampling's running minimum, read by each step's argmax) is stored as the epilogue of the reduction
it reads, so every step is the same kernels (compiled once) instead of a kernel a step that holds every earlier step."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import GroupOp

B, N = 4, 32


def points() -> np.ndarray: return np.random.default_rng(0).standard_normal((B, N, 3)).astype(np.float32)


def np_fps(p: np.ndarray, s: int) -> np.ndarray:
  out = np.zeros((p.shape[0], s), np.int64)
  for bi in range(p.shape[0]):
    dist, far = np.full(p.shape[1], 1e10), 0
    for j in range(s):
      out[bi, j] = far
      dist = np.minimum(dist, ((p[bi] - p[bi, far]) ** 2).sum(-1))
      far = int(dist.argmax())
  return out


def fps_steps(pts: Tensor, s: int, each=None) -> Tensor:
  """Farthest point sampling from point 0, lazily (each(far) after every step, if given); `dist` is never realized."""
  dist, far, out = Tensor.full((B, N), 1e10), Tensor.zeros(B, dtype=dtypes.int32), []
  for _ in range(s):
    out.append(far)
    c = pts.gather(1, far.reshape(B, 1, 1).expand(B, 1, 3))
    dist = dist.minimum(((pts - c) ** 2).sum(-1))
    far = dist.argmax(1).cast(dtypes.int32)
    if each is not None: each(far)
  return Tensor.stack(*out, dim=1)


def alu_total(sched) -> int: return sum(sum(1 for u in si.ast.toposort() if u.op in GroupOp.ALU) for si in sched)


@pytest.mark.parametrize("steps", [12, 20])
def test_lazy_fps_is_the_same_kernels_every_step(steps):
  p = points()
  out = fps_steps(Tensor(p).realize(), steps)
  sched = out.schedule()
  with Context(CHAIN_LINKS=0):
    inlined = fps_steps(Tensor(p).realize(), steps).schedule()
  assert len(sched) <= len(inlined)  # the running minimum took the place of each step's sum: no kernel more
  # gather, sum + minimum, argmax: the first step's, the others', and the last two steps' (whose minimum no later step reads
  # twice: no link), the stack
  assert len({si.ast for si in sched}) <= 10, len({si.ast for si in sched})
  assert len({si.ast for si in inlined}) >= steps  # without: each step's argmax held the minimum of every earlier step
  assert alu_total(sched) < alu_total(inlined)  # no step computes the earlier steps' minima again
  np.testing.assert_equal(out.numpy(), np_fps(p.astype(np.float64), steps))


def test_eager_fps_compiles_a_bounded_number_of_kernels():
  """.numpy() of each step's index (which doesn't realize `dist` or the index itself): each step's schedule runs the whole history
  again, but in kernels that earlier steps compiled already."""
  p = points()
  pts = Tensor(p).realize()
  asts: list[set] = []
  chosen: list[np.ndarray] = []
  def each(far: Tensor) -> None:
    asts.append({si.ast for si in far.schedule()})
    chosen.append(far.numpy())
  fps_steps(pts, 14, each)
  new = [len(a - set().union(*asts[:i])) for i, a in enumerate(asts)]
  # once the chain has CHAIN_MIN_LINKS links (a few steps) no kernel is new; without, one a step until RECOMPUTE_MAX_OPS
  assert sum(new[8:]) == 0, new
  np.testing.assert_equal(np.stack(chosen, 1)[:, :-1], np_fps(p.astype(np.float64), 14)[:, 1:])


def test_a_chain_without_a_reduction_to_absorb_is_not_stored():
  """A running value read by a kernel a step that reads no reduction of its own: storing it would add a kernel, so it stays
  inlined (up to RECOMPUTE_MAX_OPS)."""
  x_np = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
  x, h, outs = Tensor(x_np).realize(), Tensor(x_np).realize(), []
  for _ in range(4):
    h = h * 0.5 + x
    outs.append(h.sum(1))
  total = Tensor.stack(*outs)
  with Context(CHAIN_LINKS=0): n0 = len(Tensor.stack(*outs).schedule())
  assert len(total.schedule()) == n0
  ref, hr = [], x_np.copy()
  for _ in range(4):
    hr = hr * np.float32(0.5) + x_np
    ref.append(hr.sum(1))
  np.testing.assert_allclose(total.numpy(), np.stack(ref), rtol=1e-5)


def test_a_residual_chain_of_matmuls_stays_correct_and_no_kernel_more():
  """h_k = h_{k-1} + h_{k-1} @ w_k, each h_k also summed: a chain whose links absorb the matmuls."""
  rng = np.random.default_rng(2)
  ws_np = [rng.standard_normal((8, 8)).astype(np.float32) * 0.3 for _ in range(8)]
  x_np = rng.standard_normal((4, 8)).astype(np.float32)
  def build():
    h, outs = Tensor(x_np), []
    for w in ws_np:
      h = h + h @ Tensor(w)
      outs.append(h.square().sum(1))
    return Tensor.stack(*outs)
  total = build()
  with Context(CHAIN_LINKS=0): n0 = len(build().schedule())
  assert len(total.schedule()) <= n0
  ref, hr = [], x_np.astype(np.float64)
  for w in ws_np:
    hr = hr + hr @ w
    ref.append((hr ** 2).sum(1))
  np.testing.assert_allclose(total.numpy(), np.stack(ref), rtol=1e-4)


def test_fusion_unchanged():
  a, b = Tensor.rand(16, 16).realize(), Tensor.rand(16, 16).realize()
  assert len((a + b).sum().schedule()) == 1
  assert len((a * 2).softmax(-1).schedule()) == 1
  h = (a + b) * 2  # read by two kernels, short, no chain: computed in each
  assert len(h.sum(axis=0).schedule(h.max(axis=1))) == 2
