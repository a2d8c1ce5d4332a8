"""Sampling on the device: greedy, temperature, top-k, top-p, the hash RNG, and replaying it under a TinyJit."""
import math
from collections import Counter

import numpy as np
import pytest
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.helpers import Context
from tinygrad.llm.sampling import PARTS, greedy, hash_uniform, one_pass_argmax, sample, sample_temperature

V = 40


@pytest.fixture(scope="module")
def sampler():
  return TinyJit(sample)


def draw(sampler, logits, temperature=1.0, top_k=0, top_p=1.0, seed=0, step=0):
  out = sampler(Tensor(np.asarray(logits, np.float32).reshape(1, -1)), Tensor([temperature], dtype=dtypes.float32),
                Tensor([top_k], dtype=dtypes.int32), Tensor([top_p], dtype=dtypes.float32), Tensor([seed, step], dtype=dtypes.uint32))
  return int(out.item())


def test_greedy():
  x = np.random.default_rng(0).standard_normal(V).astype(np.float32)
  assert int(greedy(Tensor(x.reshape(1, V))).item()) == int(x.argmax())


@pytest.mark.parametrize("n", [7, 1000, 128256])
def test_one_pass_argmax_is_argmax(n):
  """The (value, index) keys' max gives Tensor.argmax's and numpy's index: ties to the first, -0.0 equal to 0.0, NaN largest."""
  rng = np.random.default_rng(n)
  x = rng.standard_normal(n).astype(np.float32)
  x[rng.integers(1, n, 3)] = x.max()  # ties
  x[0] = -np.inf
  cases = [x, -np.abs(x), np.full(n, -np.inf, np.float32)]
  cases[1][min(5, n - 1)], cases[1][min(6, n - 1)] = -0.0, 0.0
  nan = x.copy()
  nan[n // 2], nan[n - 1] = np.nan, -np.nan
  for a in [*cases, nan, x.astype(np.float16)]:
    got = one_pass_argmax(Tensor(a)).numpy()
    assert got.shape == (1,) and got.dtype == np.int32 and int(got[0]) == int(np.argmax(a)) == int(Tensor(a).argmax().item())


def test_one_pass_argmax_refuses_what_its_keys_cant_hold():
  for dt in (dtypes.float64, dtypes.int32):
    with pytest.raises(TypeError, match="Tensor.argmax"): one_pass_argmax(Tensor.zeros(8, dtype=dt))


def test_samplers_take_the_one_pass_argmax_under_the_setting():
  logits = np.random.default_rng(4).standard_normal(3 * PARTS).astype(np.float32)
  x, t = Tensor(logits.reshape(1, -1)), Tensor([0.7], dtype=dtypes.float32)
  with Context(ARGMAX_ONE_PASS=1):
    assert int(greedy(x).item()) == int(logits.argmax())
    got = [int(sample_temperature(x, t, Tensor([3, s], dtype=dtypes.uint32)).item()) for s in range(4)]
  assert got == [int(sample_temperature(x, t, Tensor([3, s], dtype=dtypes.uint32)).item()) for s in range(4)]


def test_hash_uniform():
  u = hash_uniform(Tensor([1, 2], dtype=dtypes.uint32), 4096).numpy()
  assert u.min() > 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.03
  u2 = hash_uniform(Tensor([1, 3], dtype=dtypes.uint32), 4096).numpy()
  assert (u != u2).mean() > 0.99
  np.testing.assert_array_equal(u, hash_uniform(Tensor([1, 2], dtype=dtypes.uint32), 4096).numpy())


def test_distribution_and_filters(sampler):
  probs = np.full(V, 1e-9)
  probs[[3, 7, 11, 20]] = [0.4, 0.3, 0.2, 0.1]
  logits = np.log(probs)
  n = 300
  counts = Counter(draw(sampler, logits, step=i) for i in range(n))
  assert set(counts) <= {3, 7, 11, 20}
  for tok, p in zip([3, 7, 11, 20], [0.4, 0.3, 0.2, 0.1]):
    assert abs(counts[tok] / n - p) < 4 * math.sqrt(p * (1 - p) / n), counts
  # the same seed and step give the same draw; replays see new inputs
  assert draw(sampler, logits, seed=5, step=9) == draw(sampler, logits, seed=5, step=9)
  assert {draw(sampler, logits, top_k=2, step=i) for i in range(60)} == {3, 7}
  assert {draw(sampler, logits, top_k=1, step=i) for i in range(10)} == {3}
  assert {draw(sampler, logits, top_p=0.65, step=i) for i in range(60)} == {3, 7}  # 0.4 < 0.65 <= 0.4 + 0.3
  assert {draw(sampler, logits, top_p=1e-6, step=i) for i in range(10)} == {3}
  # a low temperature sharpens towards the most likely token
  assert Counter(draw(sampler, logits, temperature=0.05, step=i) for i in range(30))[3] >= 29


def test_long_rows_filter_exactly():
  """Rows long enough for the searches' partial sums (a vocabulary past 8 * PARTS, padded to a multiple of PARTS)."""
  n = 8 * PARTS + 37
  rng = np.random.default_rng(1)
  logits = rng.standard_normal(n).astype(np.float32)
  top = np.argsort(-logits)
  jit = TinyJit(sample)
  assert {draw(jit, logits, top_k=3, temperature=3.0, step=i) for i in range(40)} <= set(top[:3].tolist())
  # top-p: the smallest set of most likely tokens holding 30% of the mass
  p = np.exp(logits - logits.max())
  p /= p.sum()
  keep = top[:int(np.searchsorted(np.cumsum(p[top]), 0.3)) + 1]
  drawn = {draw(jit, logits, top_p=0.3, step=i) for i in range(200)}
  assert drawn <= set(keep.tolist()) and len(drawn) > 1


def test_temperature_only_is_sample_without_filters():
  logits = np.random.default_rng(2).standard_normal(3 * PARTS).astype(np.float32)
  x = Tensor(logits.reshape(1, -1))
  t = Tensor([0.7], dtype=dtypes.float32)
  for step in range(5):
    key = Tensor([3, step], dtype=dtypes.uint32)
    want = int(sample(x, t, Tensor([0], dtype=dtypes.int32), Tensor([1.0], dtype=dtypes.float32), key).item())
    assert int(sample_temperature(x, t, key).item()) == want
