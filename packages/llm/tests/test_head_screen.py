"""The int8 screen of a float16 output matrix (head_screen.py): its bounds hold (every row's screened logit within its slack of
the exact one), it keeps few rows, the argmax over the kept rows' exact logits is the full product's (ties, a zero vector, NaN
and infinite values included) and so is the temperature draw's token (on MOCK+NV, where the screened-rows kernel runs as the CUDA
renderer emits it), and the model builds it only where it pays and runs (a float16 matrix on a GPU with 32-lane warp shuffles, HEAD_SCREEN unset)."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Context, Tensor, dtypes
from tinygrad.llm.head_screen import ScreenedHead, kernel_applies
from tinygrad.llm.model import QuantWeight, linear, screens
from tinygrad.llm.sampling import greedy


def _matrix(rows: int, dim: int, seed: int = 0) -> np.ndarray:
  return (np.random.default_rng(seed).standard_normal((rows, dim)) * dim ** -0.5).astype(np.float16)


def test_bounds_hold_and_few_rows_are_kept():
  """On the CPU (Tensor ops only): |exact - screened| <= slack * ||h|| for every row, the argmax row is kept, and of 4,096 random
  rows only a few are (the bound is ~0.4 against logits of spread 1)."""
  w = _matrix(4096, 512)
  sc = ScreenedHead(Tensor(w))
  rng = np.random.default_rng(1)
  for _ in range(3):
    h = rng.standard_normal((1, 512)).astype(np.float32)
    approx, keep = (t.numpy() for t in sc.candidates(Tensor(h)))
    exact = w.astype(np.float64) @ h[0].astype(np.float64)
    bound = sc.slack.numpy() * np.linalg.norm(h)
    assert np.all(np.abs(exact - approx) <= bound)
    assert keep[exact.argmax()] and 1 <= keep.sum() <= 64


def test_the_scale_of_a_row_follows_its_largest_weight():
  w = _matrix(8, 256)
  w[3] = 0  # an all-zero row: scale stays finite, its slack 0
  w[5, 7] = np.inf  # a non-finite row: always kept
  sc = ScreenedHead(Tensor(w))
  q, slack = sc.q.numpy(), sc.slack.numpy()
  assert np.abs(q[[0, 1, 2, 4, 6, 7]]).max(1).tolist() == [127] * 6
  assert slack[3] == 0 and np.all(q[3] == 0) and slack[5] == np.inf and np.all(np.isfinite(slack[[0, 1, 2, 4, 6, 7]]))


def _cases(w: np.ndarray) -> list[np.ndarray]:
  dim = w.shape[1]
  rng = np.random.default_rng(2)
  tie = w[17:18].astype(np.float32) * 3  # rows 17 and 200 hold the same weights: an exact tie, the lower index wins
  nan = rng.standard_normal((1, dim)).astype(np.float32)
  nan[0, 5] = np.nan
  return [rng.standard_normal((1, dim)).astype(np.float32), tie, np.zeros((1, dim), np.float32), nan]


def _screen_on_mock_nv(w: np.ndarray) -> tuple[ScreenedHead, Tensor]:
  """The screen of w, built and realized on the CPU, then copied to MOCK+NV (where every kernel runs in the Python interpreter,
  so building it there took most of these tests' minutes); and the exact float16 product's weight on the CPU, for references."""
  wt = Tensor(w, device="CPU").realize()
  sc = ScreenedHead(wt)
  Tensor.realize_all(*sc.tensors)
  with Context(DEV="MOCK+NV"):
    for name in ("w", "q", "scale", "slack"): setattr(sc, name, getattr(sc, name).to("NV").realize())
  return sc, wt


def _full(h: np.ndarray | Tensor, wt: Tensor) -> Tensor:
  """The full product's logits (1, vocab), on the CPU."""
  return linear((h if isinstance(h, Tensor) else Tensor(h, device="CPU")).to("CPU"), QuantWeight(wt.reshape(-1), "F16", wt.shape))


def test_screened_argmax_is_the_full_products_on_mock_nv():
  pytest.importorskip("tinygrad_backend_nv")
  w = _matrix(300, 256)
  w[200] = w[17]
  sc, wt = _screen_on_mock_nv(w)
  with Context(DEV="MOCK+NV"):
    for h in _cases(w):
      logits = sc.logits(Tensor(h)).numpy()[0]
      full = _full(h, wt)
      assert greedy(Tensor(logits).reshape(1, -1)).item() == greedy(full).item() == sc.next_token(Tensor(h)).item()
      kept = np.isfinite(logits) | np.isnan(logits)
      np.testing.assert_allclose(logits[kept], full.numpy()[0][kept], rtol=1e-6, atol=1e-6)  # the kept rows' exact logits
    assert greedy(sc.logits(Tensor(_cases(w)[1]))).item() == 17


def test_screened_temperature_draw_is_the_full_draws_on_mock_nv():
  """With a temperature and Gumbel noise (sampling.sample_temperature's draw): the screened draw picks the token the draw over
  every logit picks, for several keys and temperatures."""
  from tinygrad.llm.sampling import gumbel_noise, noisy_argmax, sample_temperature
  pytest.importorskip("tinygrad_backend_nv")
  w = _matrix(300, 256, seed=3)
  rng = np.random.default_rng(4)
  sc, wt = _screen_on_mock_nv(w)
  with Context(DEV="MOCK+NV"):
    for step, temp in enumerate((0.7, 0.1, 2.0)):
      h = Tensor(rng.standard_normal((1, 256)).astype(np.float32))
      key, t = Tensor([11, step], dtype=dtypes.uint32), Tensor([temp], dtype=dtypes.float32)
      noise = gumbel_noise(key, 300).contiguous()
      got = noisy_argmax(sc.logits(h, t, noise) / t.reshape(1, 1), noise).item()
      assert got == sample_temperature(_full(h, wt), t.to("CPU"), key.to("CPU")).item()
      assert sc.next_token(h, t, noise).item() == got  # each block's best row, then the best of the blocks
      assert 1 <= sc.candidates(h, t, noise)[1].numpy().sum() <= 30


def test_next_token_orders_infinities_and_nan_as_argmax_does_on_mock_nv():
  """Rows with infinite weights (always candidates) give infinite or NaN logits: next_token's order keys pick what Tensor.argmax
  picks over the full product (+inf over finite values, NaN over everything, the first of equals), across the blocks' bests."""
  pytest.importorskip("tinygrad_backend_nv")
  w = _matrix(600, 256, seed=5)
  h = np.abs(np.random.default_rng(6).standard_normal((1, 256))).astype(np.float32)  # positive: an infinite weight's sign decides
  cases = [{}, {420: np.inf}, {420: np.inf, 300: np.inf}, {300: -np.inf, 420: np.inf}, {100: np.nan, 420: np.inf}]
  for case in cases:
    wc = w.copy()
    for r, v in case.items(): wc[r, 3] = v
    sc, wt = _screen_on_mock_nv(wc)
    want = greedy(_full(h, wt)).item()
    with Context(DEV="MOCK+NV"):
      assert sc.next_token(Tensor(h)).item() == want, case
  assert want == 100  # (the NaN row)


def test_best_of_blocks_takes_the_largest_key_and_its_first_index():
  """best_of_blocks_kernel over 1,200 blocks' (key, index) pairs (several a thread): the largest key, ties to the lowest index."""
  from tinygrad.llm.head_screen import best_of_blocks_kernel
  pytest.importorskip("tinygrad_backend_nv")
  n = 1200
  rng = np.random.default_rng(7)
  keys = rng.integers(0, 2 ** 31, n, dtype=np.uint32)
  index = np.arange(n, dtype=np.uint32) * 256 + rng.integers(0, 256, n, dtype=np.uint32)
  for top in ([5], [700, 40, 1100], [552, 1064, 40], [1199]):  # (40, 552, 1064: one thread's)
    k = keys.copy()
    k[top] = 0xFFFFFFF0
    with Context(DEV="MOCK+NV"):
      best = Tensor(np.concatenate([k, index]))
      got = Tensor.empty(1, dtype=dtypes.int32).custom_kernel(best, fxn=best_of_blocks_kernel(n))[0].item()
    assert got == index[min(top)]


def test_screened_rows_kernel_loads_a_row_only_when_it_is_kept():
  """The kernel as rendered for sm_90: a row's matrix loads sit in a loop whose length is the row's flag (0 or 1)."""
  from tinygrad.engine import realize
  with Context(DEV="NULL:CUDA:sm_90"):
    sc = ScreenedHead(Tensor.empty(128256, 2048, dtype=dtypes.float16))
    realize.capturing.append(cap := realize.Capture(jit=False))
    try: sc.logits(Tensor.empty(1, 2048)).realize()
    finally: realize.capturing.pop()
  srcs = {ei.runner.spec.name: ei.runner.spec.src for ei, _ in cap.items if ei.runner is not None}
  (src,) = (s for n, s in srcs.items() if n.startswith("screened_rows"))
  loop = src[src.index("ridx1 < val"):]
  assert "halfx8" in loop and "halfx8" not in src[src.index("__global__"):src.index("ridx1 < val")]
  assert any("i8x8 val" in s for s in srcs.values())  # the screen itself: 8 int8 weights a load


def test_next_token_takes_five_kernels_and_no_pass_over_every_logit():
  """Rendered for sm_90 (Llama-1B's head): the screen's product, ||h||, the lower bounds' partial maxima, the screened rows with
  each block's best, and the best of the blocks; with HEAD_BEST=0, session 38's argmax passes over every screened logit. h is
  lazy, as the model's final norm (E_2048 here): the head reads it where that kernel stores it, with no copy between."""
  from tinygrad.engine import realize
  names = {}
  for setting in (1, 0):
    with Context(DEV="NULL:CUDA:sm_90", HEAD_BEST=setting):
      sc = ScreenedHead(Tensor.empty(128256, 2048, dtype=dtypes.float16))
      Tensor.realize_all(*sc.tensors)
      realize.capturing.append(cap := realize.Capture(jit=False))
      try: sc.next_token((Tensor.empty(1, 2048).contiguous().realize() * 2).contiguous()).realize()
      finally: realize.capturing.pop()
    names[setting] = [ei.runner.spec.name.rsplit("_", 1)[0] for ei, _ in cap.items if ei.runner is not None]
  assert names[1] == ["E_2048", "r_128256_2048", "r_2048", "r_501_256", "screened_rows_best", "best_of_blocks"]
  assert len(names[0]) > len(names[1]) and "screened_rows" in names[0]


@pytest.mark.parametrize("dev,quant,dim,setting,expect", [("NULL:CUDA:sm_90", "F16", 256, 1, True), ("NULL:CUDA:sm_90", "F16", 256, 0, False),
                                                          ("CPU", "F16", 256, 1, False), ("NULL:CUDA:sm_90", "Q8_0", 256, 1, False),
                                                          ("NULL:CUDA:sm_90", "F16", 128, 1, False), ("NULL:HIP:gfx950", "F16", 256, 1, False)])
def test_the_model_screens_float16_heads_on_gpus(tmp_path, dev, quant, dim, setting, expect):
  from llm_synth import SynthConfig, write_model
  from tinygrad.llm.model import Transformer
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=1, dim=dim, ff_dim=256, n_heads=dim // 64, n_kv_heads=2, vocab=300), quant)
  with Context(DEV=dev, HEAD_SCREEN=setting):
    m = Transformer.from_gguf(path)
    assert (m.screen is not None) == expect == screens(m.output)
  assert kernel_applies(256) and not kernel_applies(128)


@pytest.mark.slow
def test_greedy_decode_through_the_screen_matches_the_full_head(tmp_path):
  """(about five minutes) Tokens of LLM.generate on MOCK+NV (its decode steps go through the screen), greedy and drawn with a
  temperature, equal those with HEAD_SCREEN=0."""
  from llm_synth import SynthConfig, write_model
  from tinygrad.llm.engine import LLM, SamplingParams
  path = str(tmp_path / "m.gguf")
  write_model(path, SynthConfig(n_layers=1, dim=256, ff_dim=512, n_heads=4, n_kv_heads=2, vocab=600), "F16")
  toks = []
  for setting in (1, 0):
    with Context(DEV="MOCK+NV", HEAD_SCREEN=setting):
      llm = LLM.load(path, max_context=64)
      assert (llm.model.screen is not None) == bool(setting)
      toks.append([list(llm.generate([3, 17, 5, 60], 6, SamplingParams(temperature=t, seed=5, ignore_eos=True))) for t in (0.0, 0.8)])
  assert toks[0] == toks[1] and [len(t) for t in toks[0]] == [6, 6]
