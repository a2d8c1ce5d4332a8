"""A differential fuzzer against torch: small random programs (a chain of ops) over random shapes (zero-sized dims,
broadcasting, non-contiguous views), dtypes and values (NaN, +-inf, -0, huge, denormal), forward and backward.

Seeded and bounded: each test id is one program, `seed` reproduces it (`pytest -k "fuzz and 17"`); the set is fixed so CI
runs the same programs every time. Forward values must match with NaN and inf in the same places; gradients are compared
for programs whose inputs are finite and whose output is finite (where the formulas for NaN gradients may legitimately
differ, e.g. a where() that masks NaN). A divergence found here is fixed, or listed as deliberate in docs/differences.md
and kept out of the generator below with the reason."""
from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tinygrad import Tensor, dtypes

from .helpers import compare, torch

F = torch.nn.functional
N_PROGRAMS = 200
SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 3e38, -3e38, 1e-40, -1e-40, 1e-30, 88.0, -88.0], np.float32)


def _is_ours(x: Any) -> bool: return isinstance(x, Tensor)


# ---- the ops: (name, arity, fn(x[, y]) for both libraries, differentiable, int-safe)
def _t(ours: Callable[..., Any], theirs: Callable[..., Any]) -> Callable[..., Any]:
  return lambda *a: ours(*a) if _is_ours(a[0]) else theirs(*a)


UNARY: list[tuple[str, Callable[..., Any], bool, bool]] = [
  ("neg", lambda x: -x, True, True), ("abs", lambda x: x.abs(), True, True), ("square", lambda x: x * x, True, True),
  ("exp", lambda x: x.exp(), True, False), ("log", lambda x: x.log(), True, False), ("sqrt", lambda x: x.sqrt(), True, False),
  ("sin", lambda x: x.sin(), True, False), ("cos", lambda x: x.cos(), True, False), ("tanh", lambda x: x.tanh(), True, False),
  ("sigmoid", lambda x: x.sigmoid(), True, False), ("relu", lambda x: x.relu(), True, False),
  ("reciprocal", lambda x: x.reciprocal(), True, False), ("exp2", lambda x: x.exp2(), True, False),
  ("log2", lambda x: x.log2(), True, False), ("floor", lambda x: x.floor(), False, False), ("ceil", lambda x: x.ceil(), False, False),
  ("trunc", lambda x: x.trunc(), False, False), ("sign", lambda x: x.sign(), False, False), ("erf", lambda x: x.erf(), True, False),
  ("atan", lambda x: x.atan(), True, False), ("softplus", _t(lambda x: x.softplus(), F.softplus), True, False),
  ("silu", _t(lambda x: x.silu(), F.silu), True, False), ("gelu", _t(lambda x: x.gelu(), lambda x: F.gelu(x, approximate="tanh")), True, False),
  ("elu", _t(lambda x: x.elu(), F.elu), True, False), ("leaky_relu", _t(lambda x: x.leaky_relu(0.1), lambda x: F.leaky_relu(x, 0.1)), True, False),
  ("clamp", lambda x: x.clamp(-1.5, 2.5), True, True), ("add_scalar", lambda x: x + 3, True, True), ("mul_scalar", lambda x: x * -2, True, True),
  ("pow2", lambda x: x ** 2, True, True), ("pow_half", lambda x: x ** 0.5, True, False),
  ("rsub", lambda x: 1 - x, True, True), ("div_scalar", lambda x: x / 4, True, False),
]
BINARY: list[tuple[str, Callable[..., Any], bool, bool]] = [
  ("add", lambda x, y: x + y, True, True), ("sub", lambda x, y: x - y, True, True), ("mul", lambda x, y: x * y, True, True),
  ("div", lambda x, y: x / y, True, False), ("maximum", _t(lambda x, y: x.maximum(y), torch.maximum), True, True),
  ("minimum", _t(lambda x, y: x.minimum(y), torch.minimum), True, True),
  ("where_gt", _t(lambda x, y: (x > y).where(x, y), lambda x, y: torch.where(x > y, x, y)), True, True),
  ("pow", lambda x, y: x ** y, True, False),
]


def _axis_ops(ndim: int, rng: random.Random) -> list[tuple[str, Callable[..., Any], bool, bool]]:
  """Reductions and movement ops for a tensor of ndim dims (ndim >= 1)."""
  ax = rng.randrange(ndim)
  perm = list(range(ndim))
  rng.shuffle(perm)
  def tmax(x: Any) -> Any: return x.max(ax) if _is_ours(x) else x.max(ax).values
  def tmin(x: Any) -> Any: return x.min(ax) if _is_ours(x) else x.min(ax).values
  ops: list[tuple[str, Callable[..., Any], bool, bool]] = [
    (f"sum{ax}", lambda x: x.sum(ax), True, True), (f"mean{ax}", lambda x: x.mean(ax), True, False),
    (f"cumsum{ax}", lambda x: x.cumsum(ax), True, True), (f"flip{ax}", lambda x: x.flip(ax), True, True),
    (f"permute{perm}", lambda x: x.permute(*perm), True, True), ("reshape_flat", lambda x: x.reshape(-1), True, True),
    (f"slice_step2_{ax}", lambda x: x[(slice(None),) * ax + (slice(None, None, 2),)], True, True),
    (f"pad{ax}", _t(lambda x: x.pad(tuple((1, 2) if i == ax else None for i in range(x.ndim))),
                    lambda x: F.pad(x, [0, 0] * (x.ndim - 1 - ax) + [1, 2])), True, True),
    (f"cat_self{ax}", _t(lambda x: x.cat(x.flip(ax), dim=ax), lambda x: torch.cat([x, x.flip(ax)], ax)), True, True),
    (f"softmax{ax}", lambda x: x.softmax(ax), True, False), (f"log_softmax{ax}", lambda x: x.log_softmax(ax), True, False),
    (f"logsumexp{ax}", lambda x: x.logsumexp(ax), True, False), (f"std{ax}", lambda x: x.std(ax), True, False),
  ]
  ops += [(f"max{ax}", tmax, False, True), (f"min{ax}", tmin, False, True)]  # gradients of ties differ by design (see docs)
  if ndim >= 2: ops += [("tril", lambda x: x.tril(), True, True), ("transpose", lambda x: x.transpose(-1, -2), True, True)]
  return ops


def _shape(rng: random.Random) -> tuple[int, ...]:
  ndim = rng.choice([1, 2, 2, 3])
  return tuple(0 if rng.random() < 0.08 else rng.choice([1, 2, 3, 4, 5]) for _ in range(ndim))


def _values(rng: random.Random, shape: tuple[int, ...], dt: str, special: bool) -> np.ndarray:
  nrng = np.random.default_rng(rng.randrange(2 ** 31))
  if dt == "int32": return nrng.integers(-20, 20, size=shape).astype(np.int32)
  x = nrng.uniform(-3, 3, size=shape).astype(np.float32)
  if special and x.size:
    mask = nrng.random(size=shape) < 0.3
    x[mask] = nrng.choice(SPECIALS, size=int(mask.sum()))
  return x


def _program(seed: int) -> tuple[list[np.ndarray], list[tuple[str, Callable[..., Any], bool]], bool]:
  """Inputs, a chain of ops (name, fn, differentiable) and whether the inputs hold special values."""
  rng = random.Random(seed)
  dt = "int32" if rng.random() < 0.2 else "float32"
  special = dt == "float32" and rng.random() < 0.5
  shape = _shape(rng)
  # a second input that broadcasts against the first: some dims set to 1, or leading dims dropped
  other = tuple(1 if rng.random() < 0.3 else s for s in shape)[rng.randrange(len(shape)):] or (1,)
  inputs = [_values(rng, shape, dt, special), _values(rng, other, dt, special)]
  chain: list[tuple[str, Callable[..., Any], bool]] = []
  ndim = len(shape)
  # the binary op (the second input always takes part) comes before any op that changes the shape, so that it broadcasts
  kinds = [rng.choice(["unary", "axis"]) for _ in range(rng.randint(1, 3))]
  first_axis = kinds.index("axis") if "axis" in kinds else len(kinds)
  kinds.insert(rng.randint(0, first_axis), "binary")
  for kind in kinds:
    if kind == "axis" and ndim == 0: kind = "unary"
    pool = UNARY if kind == "unary" else BINARY if kind == "binary" else _axis_ops(ndim, rng)
    pool = [p for p in pool if dt == "float32" or p[3]]
    # std squares its input in float32 (torch's CPU accumulates in double): above ~1e19 it overflows (docs/differences.md)
    if special: pool = [p for p in pool if not p[0].startswith("std")]
    name, fn, diff, _ = rng.choice(pool)
    if kind == "axis":
      if name.startswith(("sum", "mean", "max", "min", "logsumexp", "std")): ndim -= 1
      elif name == "reshape_flat": ndim = 1
    chain.append((f"{kind}:{name}", fn, diff))
  return inputs, chain, special


def _run(x: Any, y: Any, chain: list[tuple[str, Callable[..., Any], bool]]) -> Any:
  for name, fn, _ in chain: x = fn(x, y) if name.startswith("binary:") else fn(x)
  return x


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("seed", range(N_PROGRAMS))
def test_fuzz(seed: int) -> None:
  inputs, chain, special = _program(seed)
  desc = f"seed {seed}: shapes {[a.shape for a in inputs]} {inputs[0].dtype} {[c[0] for c in chain]}"
  is_float = inputs[0].dtype == np.float32
  grad = is_float and not special and all(d for _, _, d in chain)
  ours_in = [Tensor(a, requires_grad=grad) for a in inputs]
  theirs_in = [torch.tensor(a, requires_grad=grad) for a in inputs]
  try: theirs = _run(theirs_in[0], theirs_in[1], chain)
  except (RuntimeError, IndexError, ValueError):  # torch rejects it (e.g. max over an empty axis): so must we
    with pytest.raises((RuntimeError, IndexError, ValueError)): _run(ours_in[0], ours_in[1], chain).realize()
    return
  ours = _run(ours_in[0], ours_in[1], chain)
  if ours.dtype != dtypes.bool and theirs.dtype == torch.int64 and ours.dtype == dtypes.int32: theirs = theirs.int()
  compare(ours, theirs, 1e-5, 2e-4, f"forward, {desc}")
  if not grad or not bool(torch.isfinite(theirs).all()): return
  theirs.sum().backward()
  ours.sum().backward()
  for i, (o, t) in enumerate(zip(ours_in, theirs_in)):
    if t.grad is None: continue
    assert o.grad is not None, f"input {i}: torch has a gradient, we have none; {desc}"
    # NaN in a gradient comes from a NaN intermediate times a zero upstream (0 * NaN): formula-dependent (docs/differences.md)
    if not bool(torch.isfinite(t.grad).all()): continue
    # gradients are sums of terms that can cancel (exactly, for an input that log_softmax is invariant to): the tolerance
    # scales with the largest gradient of any input
    scale = max((float(u.grad.abs().max()) for u in theirs_in if u.grad is not None and u.grad.numel()), default=1.0)
    compare(o.grad, t.grad, 1e-4 * max(1.0, scale), 2e-3, f"gradient of input {i}, {desc}")
