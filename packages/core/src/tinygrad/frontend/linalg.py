"""Matrix decompositions as tensor ops: `qr` (Householder reflections), `svd` (one-sided Jacobi rotations after a QR) and
`newton_schulz` (the odd matrix polynomial that Muon orthogonalizes its updates with).

All three are plain tensor ops over the last two dims, batched over the leading ones, so they run on every device and stay
lazy like any other op, differentiable included. There is no data-dependent control flow: the matrix sizes fix the number
of steps, and the Python loops below unroll into one fixed graph whose steps each write a buffer (`_buffered`). That is
why `svd` runs a set number of Jacobi sweeps (enough for the quadratic convergence to reach the dtype's precision at
the matrix size) instead of stopping when the columns are orthogonal.

Shapes and conventions are tinygrad 0.14's (which are numpy's "complete"/`full_matrices` ones):
- `qr()` of (..., m, n): Q (..., m, m) orthogonal, R (..., m, n) upper triangular. Every reflection sends its column to
  -sign(x0) * |x| (sign(0) = +1), the last one of a square or wide matrix included (numpy leaves that last 1x1 alone).
- `svd(full_matrices)` of (..., m, n) with k = min(m, n): U (..., m, m) or (..., m, k), S (..., k) descending, and V^T
  (..., n, n) or (..., k, n): the third result is V transposed, so `U[..., :k] * S[..., None, :] @ Vh[..., :k, :]` is the
  input. The signs of singular vectors are this algorithm's (as between any two SVDs, only U and V^T together are fixed).
Float16/bfloat16 inputs are computed in float32 and cast back; integer inputs are computed in float32 and returned in the
default float dtype.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Self, TypeVar

from tinygrad.dtype import DType, dtypes
from tinygrad.frontend.functional import FunctionalMixin
from tinygrad.gradient import GRAD_OVERRIDES
from tinygrad.helpers import InvalidArgumentError, all_int
from tinygrad.uop.ops import UOp

TensorT = TypeVar("TensorT", bound="LinalgMixin")


def _check_matrix(x: LinalgMixin, op: str, example: str) -> None:
  """A clear error for what a decomposition can't take: fewer than 2 dims, or symbolic sizes."""
  if x.ndim < 2:
    raise InvalidArgumentError(f"{op} needs a matrix or a batch of matrices (2 or more dims, the last two are the matrix), "
                               f"got shape {x.shape}: for a vector as one column use {example}")
  if not all_int(x.shape):
    raise InvalidArgumentError(f"{op} needs concrete sizes, got shape {x.shape}: bind the Variables "
                               "(or shrink to a fixed size) before decomposing")


def _work_dtype(dt: DType) -> DType:
  """The dtype the decompositions compute in: float32 for ints and for floats narrower than it (a half's 11 bits aren't
  enough for the rotations to converge), the dtype itself otherwise."""
  return dt if dtypes.is_float(dt) and dt.itemsize >= 4 else dtypes.float32


def _result_dtype(dt: DType) -> DType:
  return dt if dtypes.is_float(dt) else dtypes.default_float


def _buffered(x: TensorT) -> TensorT:
  """x in a buffer of its own, and its gradient too. The steps below each use the previous step's result several times;
  left to fusion, every kernel would recompute the whole chain of steps before it (forward and, in the backward pass,
  the chain of gradients), so each step's result and each step's gradient is a buffer."""
  out = x.contiguous()
  before = out.uop.src[0]  # (the closure must not hold out.uop: it is the key of the weak dict)
  def gradient(g: UOp) -> tuple[set[int], dict[UOp, UOp]]: return {0}, {before: type(x)(g, requires_grad=False).contiguous().uop}
  GRAD_OVERRIDES[out.uop] = gradient
  return out


def _batch_eye(like: TensorT, n: int) -> TensorT:
  """The n x n identity in like's dtype and device, broadcast over like's batch dims."""
  return type(like).eye(n, dtype=like.dtype, device=like.device).expand(*like.shape[:-2], n, n)


def _householder_qr(a: TensorT) -> tuple[TensorT, TensorT]:
  """Q, R of a (..., m, n) by min(m, n) Householder reflections H = I - tau v v^T. Reflection i zeroes column i below
  the diagonal: v is that column's part from row i down, with alpha = -sign(x0) |x| subtracted from its first entry, padded
  with i zeros on top. A zero column gets tau = 0 (no reflection)."""
  m, n = a.shape[-2], a.shape[-1]
  R, Q = a, _batch_eye(a, m)
  for i in range(min(m, n)):
    x = R[..., i:, i]  # (..., m - i)
    x0 = x[..., :1]
    norm = x.square().sum(-1, keepdim=True).sqrt()
    head = x0 + (x0 < 0).where(-norm, norm)  # x0 - alpha, |head| = |x0| + |x|
    v = head.cat(x[..., 1:], dim=-1).pad(((0, 0),) * (x.ndim - 1) + ((i, 0),))  # (..., m)
    denom = norm * head.abs()  # v.v / 2
    tau_v = v * (denom > 0).where(1 / (denom > 0).where(denom, 1), 0)  # tau * v, tau = 2 / (v.v)
    R = _buffered(R - tau_v.unsqueeze(-1) * (v.unsqueeze(-2) @ R))
    Q = _buffered(Q - (Q @ v.unsqueeze(-1)) * tau_v.unsqueeze(-2))
  return Q, R.triu()  # below the diagonal only rounding is left: exact zeros


def _jacobi_sweeps(k: int, dt: DType) -> int:
  """Sweeps of one-sided Jacobi for k columns: convergence is quadratic once the columns are nearly orthogonal, and the
  sweeps before that grow with log2(k); measured on random and graded float32 matrices up to 64 columns, ceil(log2 k) + 1
  reach float32's precision, one more is the margin, and float64 takes one more still."""
  return max(1, (k - 1).bit_length()) + 2 + (dt.itemsize >= 8)


def _rotate_pairs(X: TensorT, k: int, h: int) -> TensorT:
  """One round of parallel Jacobi rotations. X is (..., 2k, 2h): the working columns W on top of the accumulated
  rotations V, column j of the left half paired with column j of the right half. Each pair is rotated so that its two W
  columns become orthogonal; V's columns get the same rotation."""
  left, right = X[..., :h], X[..., h:]
  wl, wr = left[..., :k, :], right[..., :k, :]
  # the three dot products in one reduction (one kernel, not three)
  alpha, beta, gamma = (wl.stack(wr, wl) * wl.stack(wr, wr)).sum(-2, keepdim=True).split(1)
  alpha, beta, gamma = alpha.squeeze(0), beta.squeeze(0), gamma.squeeze(0)
  done = gamma == 0  # already orthogonal (or a zero column): no rotation
  zeta = (beta - alpha) / (2 * done.where(1, gamma))
  t_abs = 1 / (zeta.abs() + (1 + zeta.square()).sqrt())  # the smaller root of t^2 + 2 zeta t - 1 = 0: |angle| <= pi/4
  t = done.where(0, (zeta < 0).where(-t_abs, t_abs))
  c = (1 + t.square()).rsqrt()
  s = c * t
  return (c * left - s * right).cat(s * left + c * right, dim=-1)


def _next_pairing(X: TensorT, h: int) -> TensorT:
  """The round-robin schedule (the circle method): column 0 stays, the others move one place around the circle
  left[1] .. left[h-1], right[h-1] .. right[0]. After 2h - 1 rounds every two columns have been paired once."""
  if h < 2: return X
  left, right = X[..., :h], X[..., h:]
  return left[..., :1].cat(right[..., :1], left[..., 1:h - 1], right[..., 1:], left[..., h - 1:], dim=-1)


def _jacobi_svd(W: TensorT) -> tuple[TensorT, TensorT, TensorT]:
  """U, S, V of a square (..., k, k) W, S descending: rotate pairs of W's columns until all are orthogonal, so that
  W V = U diag(S) with V the product of the rotations, S the column norms and U the normalized columns."""
  k = W.shape[-1]
  X = W.cat(_batch_eye(W, k), dim=-2)
  odd = k % 2
  if odd: X = X.pad(((0, 0),) * (X.ndim - 1) + ((1, 0),))  # a zero column in the fixed place: each round one column rests
  h = (k + odd) // 2
  for _ in range(_jacobi_sweeps(k, W.dtype) * (2 * h - 1) if k > 1 else 0):
    X = _buffered(_next_pairing(_rotate_pairs(X, k, h), h))
  X = X[..., odd:]
  W, V = X[..., :k, :], X[..., k:, :]
  S, order = W.square().sum(-2).sqrt().sort(-1, descending=True)
  # the columns in that order, by a permutation matrix: P[j, i] = 1 where column j goes to place i
  P = (type(W).arange(k, dtype=order.dtype, device=W.device).unsqueeze(-1) == order.unsqueeze(-2)).cast(W.dtype)
  W, V = W @ P, V @ P
  U = W / (S > 0).where(S, 1).unsqueeze(-2)  # columns of zero singular values are zero here ...
  Uq, Ur = _householder_qr(U)  # ... and a QR completes them to an orthonormal basis, keeping the other columns' signs
  U = Uq * (Ur.diagonal(0, -2, -1) < 0).where(-1, 1).cast(U.dtype).unsqueeze(-2)
  return U, S, V


class LinalgMixin(FunctionalMixin):
  __slots__ = ()

  def qr(self) -> tuple[Self, Self]:
    """Q, R with self = Q @ R: Q (..., m, m) orthogonal, R (..., m, n) upper triangular (Householder; as tinygrad 0.14,
    which is numpy's mode="complete" up to the sign of R's last diagonal entry when m <= n)."""
    _check_matrix(self, "qr", "t.reshape(-1, 1).qr()")
    out = _result_dtype(self.dtype)
    Q, R = _householder_qr(self.cast(_work_dtype(self.dtype)))
    return Q.cast(out), R.cast(out)

  def svd(self, full_matrices: bool = True) -> tuple[Self, Self, Self]:
    """U, S, V^T with self = U @ diag(S) @ V^T, S (..., min(m, n)) descending. full_matrices: U (..., m, m) and
    V^T (..., n, n); else U (..., m, k) and V^T (..., k, n), k = min(m, n) (tinygrad 0.14's and numpy's shapes; the third
    result is V transposed)."""
    _check_matrix(self, "svd", "t.reshape(-1, 1).svd()")
    out = _result_dtype(self.dtype)
    a = self.cast(_work_dtype(self.dtype))
    m, n = a.shape[-2], a.shape[-1]
    wide = m < n
    if wide: a, m, n = a.transpose(-2, -1), n, m  # the transpose's SVD, with U and V swapped at the end
    k = n
    scale = a.abs().max((-2, -1), keepdim=True) if k else None  # to max |a| = 1: sums of squares neither overflow nor underflow
    if scale is not None:
      scale = (scale > 0).where(scale, 1)
      a = a / scale
    Q, R = _householder_qr(a)  # the Jacobi rotations then work on R's k x k top, which is better conditioned
    Uk, S, V = _jacobi_svd(R[..., :k, :])
    if scale is not None: S = S * scale.squeeze(-1)
    U = Q[..., :k] @ Uk
    if full_matrices and m > k: U = U.cat(Q[..., k:], dim=-1)
    if wide: return V.cast(out), S.cast(out), U.transpose(-2, -1).cast(out)
    return U.cast(out), S.cast(out), V.transpose(-2, -1).cast(out)

  def newton_schulz(self, steps: int, params: Sequence[float], eps: float = 1.0e-7) -> Self:
    """`steps` iterations of G <- sum_i params[i] * (G G^T)^i G from G = self / (|self| + eps) (the Frobenius norm over
    the last two dims): an odd polynomial that pushes the singular values towards 1 and keeps the singular vectors. With
    params (3.4445, -4.775, 2.0315) it is Muon's orthogonalization. Tall matrices are iterated on their transpose."""
    if self.ndim < 2:
      raise InvalidArgumentError(f"newton_schulz needs a matrix or a batch of matrices (2 or more dims), got shape {self.shape}: "
                                 "reshape the tensor to (rows, cols) first")
    if len(params) == 0: raise InvalidArgumentError("newton_schulz needs at least one polynomial coefficient in params, got none")
    if self.shape[-2] > self.shape[-1]: return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    G = self / (self.square().sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      gram, term, acc = G @ G.transpose(-2, -1), G, G * params[0]
      for p in params[1:]:
        term = gram @ term
        acc = acc + p * term
      G = acc
    return G
