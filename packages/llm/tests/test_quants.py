"""Dequantization as Tensor ops, against the `gguf` package's numpy dequantizers on random blocks."""
import contextlib

import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.llm.quants import BLOCK_SIZES, UnsupportedQuantization, dequantize

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize as ref_dequantize  # noqa: E402

# where each format keeps its float16 scales (random bytes there would give NaN/inf)
F16_FIELDS = {"Q8_0": [0], "Q4_0": [0], "Q5_0": [0], "Q4_1": [0, 2], "Q5_1": [0, 2], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}


def random_blocks(type_name: str, n_blocks: int, seed: int = 0) -> np.ndarray:
  rng = np.random.default_rng(seed)
  block_size, type_size = BLOCK_SIZES[type_name]
  if type_name == "F32": return rng.standard_normal(n_blocks).astype(np.float32).view(np.uint8).reshape(n_blocks, 4)
  if type_name == "F16": return rng.standard_normal(n_blocks).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
  if type_name == "BF16":
    return (rng.standard_normal(n_blocks).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(n_blocks, 2)
  blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
  for at in F16_FIELDS[type_name]:
    blocks[:, at:at + 2] = (rng.uniform(-2, 2, n_blocks) * 2.0 ** rng.integers(-12, 2, n_blocks)).astype(np.float16).view(np.uint8).reshape(-1, 2)
  return blocks


@pytest.mark.parametrize("type_name", list(BLOCK_SIZES))
def test_dequantize_matches_gguf(type_name):
  n_blocks = 64 if BLOCK_SIZES[type_name][0] > 1 else 512
  blocks = random_blocks(type_name, n_blocks)
  block_size = BLOCK_SIZES[type_name][0]
  shape = (n_blocks * block_size // 64, 64) if n_blocks * block_size >= 64 else (n_blocks * block_size,)
  qtype = gguf.GGMLQuantizationType[type_name]
  expected = ref_dequantize(blocks.reshape(-1), qtype).astype(np.float32).reshape(shape)
  got = dequantize(Tensor(blocks.reshape(-1)), type_name, shape).numpy()
  np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_unsupported_type():
  with pytest.raises(UnsupportedQuantization, match="Q2_K"):
    dequantize(Tensor(np.zeros(84, np.uint8)), "Q2_K", (256,))


def test_wrong_size():
  with pytest.raises(ValueError, match="doesn't hold"):
    dequantize(Tensor(np.zeros(20, np.uint8)), "Q4_0", (32,))


@pytest.mark.parametrize("type_name", ["Q4_0", "Q4_1", "Q5_1", "Q4_K", "Q6_K"])
@pytest.mark.parametrize("rows", [1, 3])
def test_linear_matches_numpy_on_odd_shapes(type_name, rows):
  """linear() (dequantization fused into the matmul, x stored first on a CPU) against numpy on the gguf package's dequantization:
  7 outputs (no nice divisor) and a reduction of a few blocks."""
  from tinygrad import Device
  from tinygrad.llm.model import QuantWeight, block_dot_form, fuses_cheaply, linear
  from tinygrad.llm.quants import BLOCK_PARTS
  block_size = BLOCK_SIZES[type_name][0]
  n_out, k = 7, 3 * block_size
  blocks = random_blocks(type_name, n_out * 3, seed=rows)
  w_np = ref_dequantize(blocks.reshape(-1), gguf.GGMLQuantizationType[type_name]).astype(np.float32).reshape(n_out, k)
  x_np = np.random.default_rng(1).standard_normal((1, rows, k)).astype(np.float32)
  norm = np.random.default_rng(2).uniform(0.5, 1.5, k).astype(np.float32)
  got = linear(Tensor(x_np) * Tensor(norm), QuantWeight(Tensor(blocks.reshape(-1)), type_name, (n_out, k))).numpy()
  xn = x_np * norm
  # one row on a CPU in block_dot's form 3: x as int8, as llama.cpp has it, within half a step of x per element
  bound = _x_int8_bound(xn, w_np) if rows == 1 and type_name in BLOCK_PARTS and block_dot_form() == 3 and not fuses_cheaply(Device.DEFAULT) else 0
  np.testing.assert_allclose(got, xn @ w_np.T, rtol=1e-4, atol=1e-4 * float(np.abs(w_np).max()) * k ** 0.5 + bound)


def _x_int8_bound(x: np.ndarray, w: np.ndarray) -> float:
  """The largest error int8 x may add to x @ w.T: half a step (1/127 of the block's largest |x|) per element, times |w|."""
  step = np.abs(x.reshape(-1, 32)).max(-1).repeat(32) / 127
  return float((step / 2 * np.abs(w)).sum(-1).max() * 1.01)


def test_nibble_shifts_are_not_a_buffer():
  """The shift amounts that unpack nibbles are computed in the kernel: a Q4_1 matrix-vector product reads only x and the
  weight's bytes (on a CPU: x, as int16 or int8 with one scale per block in block_dot's forms 1 and 3, and x's block sums); a shift table in memory
  made every unpack a guarded variable shift."""
  from tinygrad import Device, TinyJit
  from tinygrad.llm.model import QuantWeight, block_dot_form, fuses_cheaply, linear
  w = QuantWeight(Tensor(random_blocks("Q4_1", 4 * 2).reshape(-1)).realize(), "Q4_1", (4, 64))
  f = TinyJit(lambda x: linear(x, w).contiguous())
  for _ in range(3): f(Tensor.ones(1, 1, 64).contiguous().realize())
  matvec = [ei for ei, _ in f.captured if ei.runner is not None and ei.runner.spec.name.startswith("r_4_")]
  # x: as int16 and its scales, or in float32; its block sums (Q4_1's offsets); on a GPU x itself
  n_x = 1 if fuses_cheaply(Device.DEFAULT) else 3 if block_dot_form() in (1, 3) else 2
  assert len(matvec) == 1 and len(matvec[0].runner.spec.globals) == 2 + n_x  # out, x, raw


@pytest.mark.parametrize("panel_rows", [16, None])
def test_prefill_chunk_linear_split_over_threads(panel_rows):
  """32 rows times a Q4_1 W (a prefill chunk), split between the threads (THREAD) on a CPU. On a GPU with half tensor cores: x and W
  rounded to float16, a tensor-core matmul (whatever PANEL_MIN_ROWS says). On a CPU with PANEL_MIN_ROWS <= 32: W dequantized
  once into a float16 (in, out) panel and a matmul over it, the values numpy's product with W rounded to float16; with the default
  (more rows than 32): W dequantized in float32 inside the matmul kernel, the values numpy's float32 product."""
  from tinygrad import Device, TinyJit
  from tinygrad.helpers import Context
  from tinygrad.llm.model import PANEL_MIN_ROWS, QuantWeight, fuses_cheaply, linear, uses_tensor_cores
  n_out, k = 96, 384
  blocks = random_blocks("Q4_1", n_out * k // 32, seed=3)
  w_np = ref_dequantize(blocks.reshape(-1), gguf.GGMLQuantizationType["Q4_1"]).astype(np.float32).reshape(n_out, k)
  w = QuantWeight(Tensor(blocks.reshape(-1)).realize(), "Q4_1", (n_out, k))
  x_np = np.random.default_rng(4).standard_normal((1, 32, k)).astype(np.float32)
  with Context(PANEL_MIN_ROWS=panel_rows) if panel_rows else contextlib.nullcontext():
    assert (PANEL_MIN_ROWS.value <= 32) == bool(panel_rows)
    f = TinyJit(lambda x: linear(x, w).contiguous())
    for _ in range(3): got = f(Tensor(x_np).realize()).numpy()
  if uses_tensor_cores(Tensor(x_np), w):  # a GPU with half tensor cores: x and W as float16, sums in float32 (the docstring's first form)
    np.testing.assert_allclose(got, x_np.astype(np.float16).astype(np.float32) @ w_np.astype(np.float16).astype(np.float32).T,
                               rtol=1e-4, atol=1e-3)
    return
  half = bool(panel_rows) and not fuses_cheaply(Device.DEFAULT)
  want = x_np @ (w_np.astype(np.float16).astype(np.float32) if half else w_np).T
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 if half else 1e-4)
  if not half:  # float32 weights: far closer than the half-rounded product is
    assert np.abs(got - want).max() < 0.1 * np.abs(x_np @ w_np.astype(np.float16).astype(np.float32).T - want).max()
  if Device.DEFAULT.startswith("CPU") and getattr(Device.renderer(Device.DEFAULT), "threads", 1) > 1:
    opts = [o.op.name for ei, _ in f.captured if ei.runner is not None for o in ei.runner.spec.opts]
    assert "THREAD" in opts


@pytest.mark.parametrize("type_name,n_out", [("Q4_1", 40), ("Q8_0", 24), ("Q4_K", 12), ("Q6_K", 7)])
def test_weight_panel_matches_gguf(type_name, n_out):
  """QuantWeight.panel: the weight transposed to (in, out) float16, equal to the gguf package's dequantization rounded to half;
  on a CPU its kernel reads each quantization block as one contiguous run (an UPCAST of the `in` loop, heuristics._transposed_read)."""
  from tinygrad import Device
  from tinygrad.llm.model import QuantWeight
  block_size = BLOCK_SIZES[type_name][0]
  k = 2 * max(block_size, 64)
  blocks = random_blocks(type_name, n_out * k // block_size, seed=5)
  want = ref_dequantize(blocks.reshape(-1), gguf.GGMLQuantizationType[type_name]).astype(np.float32).reshape(n_out, k)
  panel = QuantWeight(Tensor(blocks.reshape(-1)).realize(), type_name, (n_out, k)).panel()
  np.testing.assert_array_equal(panel.numpy(), want.T.astype(np.float16))
  if Device.DEFAULT.startswith("CPU"):
    from tinygrad.codegen.heuristics import hand_coded_opts
    from tinygrad.codegen.opt import OptOps
    from tinygrad.uop.ops import Ops
    panel = QuantWeight(Tensor(blocks.reshape(-1)).realize(), type_name, (n_out, k)).panel()
    (ast,) = [si.ast for si in panel.schedule() if si.ast.op is Ops.SINK]
    assert any(o.op is OptOps.UPCAST and o.amount >= 8 for o in hand_coded_opts(ast, threads=1))


@pytest.mark.parametrize("type_name", ["Q8_0", "Q4_0", "Q4_1"])
@pytest.mark.parametrize("form", [0, 1, 2, 3])
def test_block_dot_matches_numpy(type_name, form):
  """A one-row linear() in each form (model.BLOCK_DOT: 0 dequantized weights; 1 block_dot with x as int16; 2 block_dot with
  float32 x; 3 with x as int8: byte dot-product instructions where the CPU has them) against numpy on the gguf package's
  dequantization: 7 outputs, 5 blocks, an all-zero block of x."""
  from tinygrad.helpers import Context
  from tinygrad.llm.model import QuantWeight, linear
  n_out, k = 7, 5 * 32
  blocks = random_blocks(type_name, n_out * 5, seed=form)
  w_np = ref_dequantize(blocks.reshape(-1), gguf.GGMLQuantizationType[type_name]).astype(np.float64).reshape(n_out, k)
  x_np = np.random.default_rng(form).standard_normal((1, 1, k)).astype(np.float32) * np.repeat([1, 1e-3, 0, 30, 1], 32)
  with Context(BLOCK_DOT=form): got = linear(Tensor(x_np), QuantWeight(Tensor(blocks.reshape(-1)), type_name, (n_out, k))).numpy()
  ref = x_np.reshape(1, k) @ w_np.T
  # int16 (int8) x: each element within half a step (1/32767, 1/127 of its block's largest) of x, so the error is below that
  # times sum |w|
  top = {1: 32767, 3: 127}.get(form)
  bound = (np.abs(x_np.reshape(5, 32)).max(-1).repeat(32) / top / 2 * np.abs(w_np)).sum(-1) if top else 0
  err = np.abs(got.reshape(-1) - ref.reshape(-1))
  assert np.all(err <= 1e-5 * np.abs(ref).max() + bound * 1.01), (err, bound)


@pytest.mark.parametrize("dtype,top", [("int16", 32767), ("int8", 127)])
def test_x_ints_round_each_block(dtype, top):
  from tinygrad import dtypes
  from tinygrad.llm.model import x_ints
  x = np.random.default_rng(0).standard_normal((1, 3, 32)).astype(np.float32) * np.array([1, 1e4, 0], np.float32).reshape(1, 3, 1)
  xq, dx = x_ints(Tensor(x), getattr(dtypes, dtype))
  xq_np, dx_np = xq.numpy(), dx.numpy()
  assert xq_np.dtype == np.dtype(dtype) and np.abs(xq_np[0, :2]).max(-1).tolist() == [top, top] and not xq_np[0, 2].any()
  assert np.all(np.abs(xq_np * dx_np[..., None] - x) <= dx_np[..., None] * 0.5001)


def test_block_dot_form_by_cpu(monkeypatch):
  """BLOCK_DOT set wins (3, int8 x, is opt-in: see block_dot_form); unset (-1), int16 x on AMD cores (fast horizontal integer
  sums), float x elsewhere, with or without byte dot-product instructions."""
  from tinygrad.helpers import Context
  from tinygrad.llm import model
  with Context(BLOCK_DOT=0): assert model.block_dot_form() == 0
  with Context(BLOCK_DOT=1): assert model.block_dot_form() == 1
  with Context(BLOCK_DOT=3): assert model.block_dot_form() == 3
  for vendor, form in (("AuthenticAMD", 1), ("GenuineIntel", 2), ("", 2)):
    monkeypatch.setattr(model, "_cpu_vendor", lambda vendor=vendor: vendor)
    with Context(BLOCK_DOT=-1): assert model.block_dot_form() == form


def test_dot_products_follow_the_renderer():
  """Byte dot products (what BLOCK_DOT=3 runs on) where the device's renderer lists them: the LLVM renderer for a CPU with
  AVX-512 VNNI, not one told to leave it off (DEV's -avx512vnni), nor the C renderer; unset, form 3 is never chosen."""
  from tinygrad import Device
  from tinygrad.helpers import Context
  from tinygrad.llm import model
  if not Device.DEFAULT.startswith("CPU"): pytest.skip("a CPU renderer's choice")
  with Context(BLOCK_DOT=-1):
    for dev in ("CPU:LLVM", "CPU:LLVM:x86_64,-avx512vnni,-avxvnni", "CPU:CLANG"):
      with Context(DEV=dev):
        try: has = bool(Device.renderer(Device.DEFAULT).dot_products)
        except Exception as e: pytest.skip(f"{dev}: {e}")
        assert model.block_dot_form(Device.DEFAULT) != 3
        if "-avx512vnni" in dev or "CLANG" in dev: assert not has


@pytest.mark.parametrize("type_name", ["Q4_1", "F16"])
@pytest.mark.parametrize("siblings,half", [(1, 1), (1, 0), (0, 1)])
def test_one_token_gate_up_as_sibling_products(monkeypatch, siblings, half, type_name):
  """One token through a stacked gate/up FFN (Q4_1 or F16) in the GPU form (fuses_cheaply): with GATE_UP_SIBLINGS=1 the gate's and
  the up's products are two reductions of one kernel that stores silu(gate) * up (one kernel fewer than the stacked product and
  a kernel combining its halves), as float16 (FFN_HALF=1, the default: numpy's product rounded to float16 the same way) or
  float32; every form matches numpy (on the gguf package's dequantization for Q4_1)."""
  import tinygrad.llm.model as model
  from tinygrad.helpers import Context
  from tinygrad.uop.ops import Ops
  monkeypatch.setattr(model, "fuses_cheaply", lambda device: True)
  k, n = 64, 32
  if type_name == "Q4_1":
    q = gguf.GGMLQuantizationType["Q4_1"]
    gu_raw, down_raw = random_blocks("Q4_1", 2 * n * k // 32).reshape(-1), random_blocks("Q4_1", k * n // 32, seed=1).reshape(-1)
    gu_w, down_w = ref_dequantize(gu_raw, q).reshape(2 * n, k), ref_dequantize(down_raw, q).reshape(k, n)
  else:
    rng = np.random.default_rng(3)
    gu_raw, down_raw = (rng.standard_normal(2 * n * k) / 8).astype(np.float16), (rng.standard_normal(k * n) / 8).astype(np.float16)
    gu_w, down_w = gu_raw.astype(np.float32).reshape(2 * n, k), down_raw.astype(np.float32).reshape(k, n)
  ffn = model.FeedForward({model.GATE_UP: model.QuantWeight(Tensor(gu_raw), type_name, (2 * n, k)),
                           "ffn_down.weight": model.QuantWeight(Tensor(down_raw), type_name, (k, n))})
  x_np = (np.random.default_rng(2).standard_normal((1, 1, k)) * 1e-2).astype(np.float32)  # gate values where silu is not flat
  with Context(GATE_UP_SIBLINGS=siblings, FFN_HALF=half):
    out = ffn(Tensor(x_np))
    kernels = [si for si in out.schedule() if si.ast.op is Ops.SINK]
    got = out.numpy()
  gu = x_np @ gu_w.T
  act = gu[..., :n] / (1 + np.exp(-gu[..., :n])) * gu[..., n:]
  if siblings and half: act = act.astype(np.float16).astype(np.float32)  # only the sibling form stores it (as float16)
  np.testing.assert_allclose(got, act @ down_w.T, rtol=1e-4, atol=1e-4)
  assert len(kernels) == (2 if siblings else 3)
