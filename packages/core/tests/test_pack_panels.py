"""Panel packing of a matmul's transposed operand on CPU-style devices (schedule/pack.py): x @ W.T with W a realized buffer
copies W into panels first (a kernel of its own) once the reduction is PACK_MIN_REDUCE_T (16) long, so the register block
reads contiguous panels instead of gathering 16 of W's rows at every step (2 cores: 512x512 @ (512x128).T 62 -> 247 GFLOP/s,
128x256 @ (128x256).T 15 -> 86). GPUs never pack."""
import numpy as np
import pytest
from tinygrad import Device, Tensor
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops

pytestmark = pytest.mark.skipif(Device.DEFAULT.split(":")[0] not in ("CPU", "PYTHON", "NULL") or ":sm_" in Device.DEFAULT,
                                reason="panels are packed on CPU-style devices only")


def kernels(t: Tensor) -> int: return sum(1 for si in t.schedule() if si.ast.op is Ops.SINK)


@pytest.mark.parametrize("rows,k,packed", [(256, 128, True), (256, 16, True), (256, 8, False), (64, 128, True), (32, 128, True),
                                           (8, 128, False), (64, 576, False), (256, 576, True)])
def test_transposed_operand_is_packed(rows: int, k: int, packed: bool):
  """From a reduction of 16 with 256+ rows of x, from 64 rows where the reduction is shorter than 512 (fewer rows, or longer
  reductions with few rows, take the few-vectors form, codegen/heuristics.py, faster without a copy), from 16 there where x is
  at least half W's size (W here has 64 rows: the few-vectors form doesn't take inputs alike in size); a matrix-vector product
  never."""
  rng = np.random.default_rng(k)
  xs, ws = rng.standard_normal((rows, k)).astype(np.float32), rng.standard_normal((64, k)).astype(np.float32)
  x, w = Tensor(xs).realize(), Tensor(ws).realize()
  with Context(RELAYOUT_NARROW=0):  # (K = 8: copied contiguous along N instead, test_relayout_narrow.py)
    assert kernels(x @ w.T) == (2 if packed else 1)
    with Context(PACK_MIN_REDUCE_T=1024): assert kernels(x @ w.T) == 1
  if Device.DEFAULT != "NULL": np.testing.assert_allclose((x @ w.T).numpy(), xs @ ws.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows,k,packed", [(128, 128, True), (128, 640, True), (64, 128, False), (32, 640, False), (1, 256, False)])
def test_float16_operand_read_as_float_is_packed(rows: int, k: int, packed: bool):
  """x @ W.T.float() with W a float16 buffer: its panels hold W as float (one copy kernel), from 128 rows of x at any reduction
  length (PACK_MIN_ROWS_CAST; below, the few-vectors form converts each element it reads and is faster); PACK_CASTS=0 reads W
  in place."""
  rng = np.random.default_rng(rows + k)
  xs, ws = rng.standard_normal((rows, k)).astype(np.float32), rng.standard_normal((64, k)).astype(np.float16)
  x, w = Tensor(xs).realize(), Tensor(ws).realize()
  out = x @ w.T.float()
  assert kernels(out) == (2 if packed else 1)
  with Context(PACK_CASTS=0): assert kernels(x @ w.T.float()) == 1
  if Device.DEFAULT == "CPU" or (Device.DEFAULT == "PYTHON" and k <= 128):  # (the interpreter: the short ones)
    np.testing.assert_allclose(out.numpy(), xs @ ws.astype(np.float32).T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows,n,packed", [(32, 1024, False), (32, 64, True), (16, 256, False)])
def test_short_reduction_packs_few_rows_only_where_w_is_not_much_bigger(rows: int, n: int, packed: bool):
  """K = 128: 32 rows of x times a W more than twice their size take the few-vectors form in place; against a W of x's size
  (which that form doesn't take) W is packed."""
  x, w = Tensor.empty(rows, 128), Tensor.empty(n, 128)
  assert kernels(x @ w.T) == (2 if packed else 1)
