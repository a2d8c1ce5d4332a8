# linear algebra written with tensor ops, each against numpy: eye / triu / tril (negative diagonals) / linspace / diagonal /
# outer products / cumprod / cummax / cummin / logsumexp / logcumsumexp; a Cholesky factorization column by column (masks
# from arange), forward and back substitution, a Newton-Schulz inverse, Gram-Schmidt QR; then a jitted step that runs a
# power iteration and a Gauss-Seidel sweep on state updated by assign
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import chk, finish, report

N = 8
rng = np.random.default_rng(4)
m_np = rng.standard_normal((N, N)).astype(np.float32)
spd_np = (m_np @ m_np.T + N * np.eye(N)).astype(np.float32)          # symmetric positive definite, diagonally dominant-ish
spd = Tensor(spd_np).realize()
b_np = rng.standard_normal(N).astype(np.float32); b = Tensor(b_np).realize()

# creation and triangular masks
chk("eye", Tensor.eye(4), np.eye(4)); chk("eye rect", Tensor.eye(3, 5), np.eye(3, 5)); chk("eye int", Tensor.eye(3, dtype=dtypes.int32), np.eye(3, dtype=np.int32), exact=True)
chk("triu", spd.triu(), np.triu(spd_np)); chk("triu 2", spd.triu(2), np.triu(spd_np, 2)); chk("triu -1", spd.triu(-1), np.triu(spd_np, -1))
chk("tril", spd.tril(), np.tril(spd_np)); chk("tril -2", spd.tril(-2), np.tril(spd_np, -2)); chk("tril 1 rect", Tensor.ones(3, 5).tril(1), np.tril(np.ones((3, 5)), 1))
chk("linspace", Tensor.linspace(-1, 1, 9), np.linspace(-1, 1, 9)); chk("linspace 1", Tensor.linspace(2, 5, 1), np.linspace(2, 5, 1))
chk("linspace rev", Tensor.linspace(5, -5, 6), np.linspace(5, -5, 6))
chk("diagonal", spd.diagonal(), np.diagonal(spd_np)); chk("diagonal off", spd.diagonal(1), np.diagonal(spd_np, 1))
chk("diagonal -2", spd.diagonal(-2), np.diagonal(spd_np, -2)); chk("diag", Tensor([1.0, 2, 3]).diag(), np.diag([1.0, 2, 3]))
chk("trace", spd.diagonal().sum(), np.trace(spd_np), 1e-4)
chk("outer", b.unsqueeze(1) * b.unsqueeze(0), np.outer(b_np, b_np)); chk("outer einsum", Tensor.einsum("i,j->ij", b, b[:3]), np.outer(b_np, b_np[:3]))
chk("outer matmul", b.reshape(-1, 1) @ b[:3].reshape(1, -1), np.outer(b_np, b_np[:3]))
# cumulative ops
c_np = (rng.random((3, 6)) * 1.5 + 0.25).astype(np.float32); c = Tensor(c_np)
chk("cumprod", c.cumprod(1), np.cumprod(c_np, 1), 1e-5); chk("cumprod 0", c.cumprod(0), np.cumprod(c_np, 0))
chk("cummax", c.cummax(1)[0], np.maximum.accumulate(c_np, 1)); chk("cummin", c.cummin(0)[0], np.minimum.accumulate(c_np, 0))
cm_idx = c.cummax(1)[1].numpy()
chk("cummax idx", np.take_along_axis(c_np, cm_idx.astype(np.int64), 1), np.maximum.accumulate(c_np, 1))
lg_np = (rng.standard_normal((4, 5)) * 30).astype(np.float32); lg = Tensor(lg_np)
ref_lse = np.log(np.exp(lg_np.astype(np.float64) - lg_np.max(1, keepdims=True)).sum(1)) + lg_np.max(1)
chk("logsumexp big", lg.logsumexp(1), ref_lse, 1e-4); chk("logsumexp all", lg.logsumexp(), np.logaddexp.reduce(lg_np.ravel().astype(np.float64)), 1e-4)
chk("logcumsumexp", lg.logcumsumexp(1), np.logaddexp.accumulate(lg_np.astype(np.float64), 1), 1e-4)

# Cholesky, column by column: L[:, j] = (A[:, j] - L @ L[j]) / sqrt(.), masked to rows >= j
def cholesky(a):
  n = a.shape[0]
  rows = Tensor.arange(n)
  L = Tensor.zeros(n, n).contiguous()
  for j in range(n):
    v = a[:, j] - L @ L[j]
    v = (rows >= j).where(v / v[j].sqrt(), 0.0)
    L = (rows.reshape(1, n) == j).where(v.reshape(n, 1), L).realize()
  return L
L = cholesky(spd)
chk("cholesky", L, np.linalg.cholesky(spd_np.astype(np.float64)), 1e-4); chk("L L^T", L @ L.T, spd_np, 1e-3)
chk("cholesky lower", (L.triu(1) == 0).all(), True)
def forward_sub(L, b):  # L y = b
  n = L.shape[0]; y = Tensor.zeros(n).contiguous(); e = Tensor.eye(n)
  for i in range(n): y = (y + e[i] * (b[i] - (L[i] * y).sum()) / L[i, i]).realize()
  return y
def back_sub(U, y):  # U x = y
  n = U.shape[0]; x = Tensor.zeros(n).contiguous(); e = Tensor.eye(n)
  for i in reversed(range(n)): x = (x + e[i] * (y[i] - (U[i] * x).sum()) / U[i, i]).realize()
  return x
xs = back_sub(L.T, forward_sub(L, b))
chk("cholesky solve", xs, np.linalg.solve(spd_np.astype(np.float64), b_np), 1e-4)
# Newton-Schulz inverse: X <- X (2I - A X), X0 = A^T / (|A|_1 |A|_inf)
X = spd.T / (spd.abs().sum(0).max() * spd.abs().sum(1).max())
for _ in range(30): X = (X @ (2 * Tensor.eye(N) - spd @ X)).realize()
chk("newton-schulz inverse", X, np.linalg.inv(spd_np.astype(np.float64)), 1e-4)
# modified Gram-Schmidt QR of a tall matrix
g_np = rng.standard_normal((10, 4)).astype(np.float32); G = Tensor(g_np)
qs = []
for k in range(4):
  v = G[:, k]
  for q in qs: v = v - (q * v).sum() * q
  qs.append((v / (v * v).sum().sqrt()).realize())
Q = Tensor.stack(*qs, dim=1); R = Q.T @ G
chk("QR orthonormal", Q.T @ Q, np.eye(4), 1e-5); chk("QR product", Q @ R, g_np, 1e-5); chk("R upper", R.tril(-1), np.zeros((4, 4)), 1e-5)
qn, rn = np.linalg.qr(g_np.astype(np.float64)); sgn = np.sign(np.diag(rn))
chk("QR vs numpy", Q, qn * sgn, 1e-4)

# a jitted step: one power-iteration step and one Gauss-Seidel sweep, the state updated by assign
v_state = Tensor.ones(N).contiguous().realize()
x_state = Tensor.zeros(N).contiguous().realize()
E = Tensor.eye(N).realize()
@TinyJit
def step(a, rhs):
  w = a @ v_state
  lam = (v_state * w).sum() / (v_state * v_state).sum()      # Rayleigh quotient
  v_state.assign(w / (w * w).sum().sqrt())
  x = x_state
  for i in range(N): x = x + E[i] * (rhs[i] - (a[i] * x).sum()) / a[i, i]
  x_state.assign(x)
  res = (a @ x - rhs).abs().max()
  return Tensor.stack(lam, res).realize()
ts, vals = [], []
for _ in range(60):
  st = time.perf_counter(); vals.append(step(spd, b).numpy()); ts.append(time.perf_counter() - st)
ev = np.linalg.eigvalsh(spd_np.astype(np.float64))
chk("power iteration eigenvalue", vals[-1][0], ev[-1], 1e-4)
chk("power iteration vector", abs(float((v_state.numpy() * np.linalg.eigh(spd_np.astype(np.float64))[1][:, -1]).sum())), 1.0, 1e-3)
chk("gauss-seidel", x_state, np.linalg.solve(spd_np.astype(np.float64), b_np), 1e-4)
print("eigenvalue", round(float(vals[-1][0]), 4), "numpy", round(float(ev[-1]), 4), "gauss-seidel residual", float(vals[-1][1]))
finish()
c = float(vals[-1][0]) + float(L.sum().item()) + float(xs.sum().item()) + float(X.sum().item()) + float(R.abs().sum().item())
report("linalg", ts[0], ts[1] + ts[2], step, (spd, b), c, chk=lambda r: r.numpy()[0])
