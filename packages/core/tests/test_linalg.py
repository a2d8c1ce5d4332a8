"""qr, svd and newton_schulz (frontend/linalg.py) against numpy, and against values tinygrad 0.14.0 printed for the same
inputs (its sign conventions): shapes square, tall, wide and batched, rank-deficient and zero matrices, float16 and int
inputs, and the errors for what isn't a matrix. Matrices stay small for the PYTHON interpreter."""
import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Tensor, dtypes
from tinygrad.helpers import InvalidArgumentError

pytestmark = pytest.mark.skipif(is_null_device(), reason="the NULL device has no data to read back")

RNG = np.random.default_rng(7)
SHAPES = [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 1, 3, 4), (1, 1), (4, 1), (1, 4)]


def rand(*shape: int) -> np.ndarray: return RNG.standard_normal(shape).astype(np.float32)


def close(got: np.ndarray, expected: np.ndarray, atol: float = 2e-5) -> None:
  assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
  np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=0, atol=atol)


def check_orthogonal(q: np.ndarray, atol: float = 2e-5) -> None:
  """q's columns are orthonormal (q^T q = I)."""
  n = q.shape[-1]
  close(np.swapaxes(q, -1, -2).astype(np.float64) @ q, np.broadcast_to(np.eye(n), (*q.shape[:-2], n, n)), atol)


def matching_signs(ref: np.ndarray, x: np.ndarray) -> np.ndarray:
  """x with each column's sign flipped to agree with ref's (singular vectors are defined up to sign)."""
  return x * np.where((ref.astype(np.float64) * x).sum(-2, keepdims=True) < 0, -1, 1)


# ---- qr
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_qr_shapes_and_factors(shape):
  a = rand(*shape)
  Q, R = Tensor(a).qr()
  m, n = shape[-2:]
  q, r = Q.numpy(), R.numpy()
  assert Q.dtype == R.dtype == dtypes.float32 and q.shape == (*shape[:-2], m, m) and r.shape == shape
  check_orthogonal(q)
  assert (np.tril(r, -1) == 0).all(), "R must be exactly upper triangular"
  close(q @ r, a)
  # numpy's complete QR, up to each column's sign (numpy leaves the last 1x1 step of a square/wide matrix unreflected)
  for idx in np.ndindex(*shape[:-2]):
    nq, nr = np.linalg.qr(a[idx].astype(np.float64), mode="complete")
    k = min(m, n)
    signs = np.sign(np.diag(r[idx])[:k]) * np.sign(np.diag(nr)[:k])
    close(q[idx][:, :k], nq[:, :k] * signs)
    close(r[idx][:k], nr[:k] * signs[:, None])


def test_qr_matches_tinygrad():
  """tinygrad 0.14.0's output for these (its signs: every step reflects, diag(R) = -sign(x0) |x|)."""
  Q, R = Tensor([[1.0, 2.0], [3.0, 4.0]]).qr()
  close(Q.numpy(), np.array([[-0.316228, 0.948683], [-0.948683, -0.316228]]), 1e-6)
  close(R.numpy(), np.array([[-3.162278, -4.427188], [0.0, 0.632455]]), 1e-6)
  Q, R = Tensor([[2.0, -1.0, 0.0], [1.0, 3.0, 1.0]]).qr()
  close(Q.numpy(), np.array([[-0.894427, 0.447214], [-0.447214, -0.894427]]), 1e-6)
  close(R.numpy(), np.array([[-2.236068, -0.447214, -0.447214], [0.0, -3.130495, -0.894427]]), 1e-6)
  Q, R = Tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]).qr()
  close(Q.numpy(), np.array([[0.0, 0.816497, -0.57735], [-0.707107, -0.408248, -0.57735], [-0.707107, 0.408248, 0.57735]]), 1e-6)
  close(R.numpy(), np.array([[-1.414214, -0.707107], [0.0, 1.224745], [0.0, 0.0]]), 1e-6)


def test_qr_zero_column_and_rank_deficient():
  a = np.array([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 6.0]], np.float32)
  Q, R = Tensor(a).qr()
  q, r = Q.numpy(), R.numpy()
  check_orthogonal(q)
  close(q @ r, a)
  assert (r[:, 0] == 0).all()
  Q, R = Tensor.zeros(3, 2).qr()
  close(Q.numpy(), np.eye(3), 0)  # a zero column is no reflection
  close(R.numpy(), np.zeros((3, 2)), 0)


# ---- svd
def check_svd(a: np.ndarray, full_matrices: bool, atol: float = 3e-5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  U, S, Vh = Tensor(a).svd(full_matrices=full_matrices)
  m, n, k = a.shape[-2], a.shape[-1], min(a.shape[-2:])
  batch = a.shape[:-2]
  assert U.shape == (*batch, m, m if full_matrices else k) and S.shape == (*batch, k)
  assert Vh.shape == (*batch, n if full_matrices else k, n)
  u, s, vh = U.numpy(), S.numpy(), Vh.numpy()
  ref = np.linalg.svd(a.astype(np.float64), full_matrices=full_matrices)
  close(s, ref.S, atol)
  assert (np.diff(s, axis=-1) <= 0).all(), "S must be descending"
  close((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, atol)
  check_orthogonal(u, atol)
  check_orthogonal(np.swapaxes(vh, -1, -2), atol)
  # singular vectors of distinct, nonzero singular values equal numpy's up to sign
  gap = np.abs(np.diff(ref.S, axis=-1))
  distinct = np.ones(ref.S.shape, bool)
  distinct[..., 1:] &= gap > 1e-2
  distinct[..., :-1] &= gap > 1e-2
  keep = (distinct & (ref.S > 1e-3))[..., None, :]
  close(np.where(keep, matching_signs(ref.U[..., :k], u[..., :k]), 0), np.where(keep, ref.U[..., :k], 0), 1e-4)
  v, ref_v = np.swapaxes(vh[..., :k, :], -1, -2), np.swapaxes(ref.Vh[..., :k, :], -1, -2)
  close(np.where(keep, matching_signs(ref_v, v), 0), np.where(keep, ref_v, 0), 1e-4)
  return u, s, vh


@pytest.mark.parametrize("shape", SHAPES + [(5, 5), (6, 4)], ids=str)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_against_numpy(shape, full_matrices):
  check_svd(rand(*shape), full_matrices)


def test_svd_matches_tinygrad():
  """tinygrad 0.14.0's output for these: U, S and V transposed (the third result is V^T, not V)."""
  U, S, Vh = Tensor([[1.0, 2.0], [3.0, 4.0]]).svd()
  close(U.numpy(), np.array([[0.404554, -0.914514], [0.914514, 0.404554]]), 2e-6)
  close(S.numpy(), np.array([5.464986, 0.365966]), 2e-6)
  close(Vh.numpy(), np.array([[0.576048, 0.817416], [0.817416, -0.576048]]), 2e-6)
  U, S, Vh = Tensor([[2.0, -1.0, 0.0], [1.0, 3.0, 1.0]]).svd()
  close(U.numpy(), np.array([[-0.160182, 0.987088], [0.987088, 0.160182]]), 2e-6)
  close(S.numpy(), np.array([3.340999, 2.199482]), 2e-6)
  close(Vh.numpy(), np.array([[0.199558, 0.934285, 0.295447], [0.970391, -0.2303, 0.072827], [-0.136083, -0.272166, 0.952579]]), 2e-6)


@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_rank_deficient_and_zero(full_matrices):
  check_svd((rand(6, 2) @ rand(2, 5)).astype(np.float32), full_matrices)
  check_svd((rand(3, 1) @ rand(1, 4)).astype(np.float32), full_matrices)
  u, s, _ = check_svd(np.concatenate([rand(4, 2), np.zeros((4, 1), np.float32)], 1), full_matrices)
  assert s[-1] == 0
  u, s, vh = check_svd(np.zeros((3, 3), np.float32), full_matrices)  # U stays orthogonal where S is exactly 0
  assert (s == 0).all()


def test_svd_scaled_inputs():
  """Large and tiny entries: the sums of squares are taken of the matrix scaled to max |a| = 1."""
  a = rand(4, 3)
  for scale in (1e20, 1e-20):
    U, S, Vh = Tensor(a * np.float32(scale)).svd(full_matrices=False)
    close(S.numpy() / scale, np.linalg.svd(a.astype(np.float64), compute_uv=False), 3e-5)
    close((U.numpy() * S.numpy() / scale) @ Vh.numpy(), a, 3e-5)


def test_dtypes():
  a = rand(4, 3)
  for fn in (lambda t: t.qr(), lambda t: t.svd()):
    half = fn(Tensor(a).half())
    assert all(x.dtype == dtypes.float16 for x in half)  # computed in float32, returned as the input's dtype
    ints = fn(Tensor([[1, 2], [3, 4], [5, 7]]))
    assert all(x.dtype == dtypes.float32 for x in ints)
  U, S, Vh = Tensor(a).half().svd(full_matrices=False)
  close(S.numpy(), np.linalg.svd(a.astype(np.float16).astype(np.float64), compute_uv=False), 5e-3)
  close(Tensor([[1, 2], [3, 4], [5, 7]]).svd()[1].numpy(), np.array([10.191428, 0.367138]), 1e-5)


def test_empty_matrices():
  for shape, full in (((0, 3), True), ((3, 0), True), ((3, 0), False), ((2, 0, 0), True)):
    got = [x.shape for x in Tensor.zeros(*shape).svd(full_matrices=full)]
    assert got == [x.shape for x in np.linalg.svd(np.zeros(shape), full_matrices=full)]
    assert [x.shape for x in Tensor.zeros(*shape).qr()] == [x.shape for x in np.linalg.qr(np.zeros(shape), mode="complete")]


# ---- gradients
def test_gradients():
  """Both are differentiable tensor ops: qr's gradient is tinygrad 0.14.0's for this loss, and d(sum S)/dA = U V^T."""
  x = Tensor([[1.0, 2.0], [3.0, 4.0], [0.0, 1.0]], requires_grad=True)
  Q, R = x.qr()
  (R.sum() + Q[:, 0].sum()).backward()
  assert x.grad is not None
  close(x.grad.numpy(), np.array([[-1.4056306, 0.19086462], [-0.5855489, -1.117714], [-1.8156713, 0.8451543]]), 3e-6)
  a = rand(2, 4, 3)
  x = Tensor(a, requires_grad=True)
  x.svd(full_matrices=False)[1].sum().backward()
  assert x.grad is not None
  u, _, vh = np.linalg.svd(a.astype(np.float64), full_matrices=False)
  close(x.grad.numpy(), u @ vh, 1e-5)


# ---- newton_schulz
def np_newton_schulz(g: np.ndarray, steps: int, params: tuple[float, ...], eps: float = 1e-7) -> np.ndarray:
  if g.shape[-2] > g.shape[-1]: return np.swapaxes(np_newton_schulz(np.swapaxes(g, -1, -2), steps, params, eps), -1, -2)
  x = g / (np.sqrt((g * g).sum((-2, -1), keepdims=True)) + eps)
  for _ in range(steps):
    gram = x @ np.swapaxes(x, -1, -2)
    term, out = x, params[0] * x
    for p in params[1:]:
      term = gram @ term
      out = out + p * term
    x = out
  return x


@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (2, 3, 5), (3, 3)], ids=str)
@pytest.mark.parametrize("params", [(3.4445, -4.775, 2.0315), (2, -1.5, 0.5), (1.5, -0.5)], ids=str)
def test_newton_schulz(shape, params):
  a = rand(*shape)
  got = Tensor(a).newton_schulz(5, params).numpy()
  close(got, np_newton_schulz(a.astype(np.float64), 5, params), 2e-5)


def test_newton_schulz_orthogonalizes():
  """Many steps of the cubic (1.5, -0.5) converge to the orthogonal polar factor U V^T."""
  a = rand(3, 5)
  u, _, vh = np.linalg.svd(a.astype(np.float64), full_matrices=False)
  close(Tensor(a).newton_schulz(30, (1.5, -0.5)).numpy(), u @ vh, 1e-4)
  # tinygrad 0.14.0's output for this input
  close(Tensor([[1.0, 2.0], [3.0, 4.0], [0.0, 1.0]]).newton_schulz(3, (2, -1.5, 0.5)).numpy(),
        np.array([[-0.0616297, 0.5272236], [0.725787, 0.5991089], [-0.4553379, 0.4912808]]), 1e-6)


# ---- errors
@pytest.mark.parametrize("op", ["qr", "svd"])
def test_not_a_matrix_says_how_to_fix(op):
  for t in (Tensor([1.0, 2.0]), Tensor(3.0)):
    with pytest.raises(InvalidArgumentError, match=rf"{op} needs a matrix .* got shape .*reshape\(-1, 1\)"): getattr(t, op)()
  with pytest.raises(ValueError): getattr(Tensor([1.0]), op)()  # InvalidArgumentError is a ValueError, as tinygrad's assert is not


def test_newton_schulz_errors():
  with pytest.raises(InvalidArgumentError, match="2 or more dims.*reshape"): Tensor([1.0, 2.0]).newton_schulz(2, (1.5, -0.5))
  with pytest.raises(InvalidArgumentError, match="at least one polynomial coefficient"): Tensor.ones(2, 2).newton_schulz(2, ())
