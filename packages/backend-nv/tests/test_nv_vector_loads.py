"""16-byte loads of int8 and uint8 (core codegen/vectorize.py, the CUDA renderer's i8x16 / u8x16 structs; tinygrad.llm's int8
screen of the output matrix reads them): rendered for sm_90, and run on MOCK+NV (the CUDA renderer's kernels run by the PYTHON
interpreter) against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from nv_harness import make_renderer
from tinygrad import Context, Tensor, dtypes


def _srcs(out: Tensor, **settings) -> list[str]:
  from tinygrad.codegen.program import get_program
  from tinygrad.schedule.kernelize import create_schedule
  from tinygrad.uop.ops import Ops
  items, _ = create_schedule([out.uop])
  r = make_renderer("CUDA", "sm_90")
  with Context(**settings): return [get_program(it.ast, r).src for it in items if it.ast.op is Ops.SINK]


@pytest.mark.parametrize("dt,name", [(dtypes.int8, "i8"), (dtypes.uint8, "u8")])
@pytest.mark.parametrize("wide", [0, 1])
def test_byte_matrix_rows_load_8_or_16_bytes_at_once(dt, name, wide):
  """A lane of a byte matrix-vector product reads 8 bytes a load (16 with BYTE_WIDE=1), as a struct of bytes."""
  (src,) = _srcs((Tensor.empty(1, 2048) * Tensor.empty(512, 2048, dtype=dt).cast(dtypes.float)).sum(1), BYTE_WIDE=wide)
  vec = f"{name}x{16 if wide else 8}"
  assert f"struct __align__({16 if wide else 8}) {vec} " in src and f"{vec} val" in src
  assert "signed char val" not in src and "unsigned char val" not in src  # no byte loaded alone


def test_bytes_become_floats_by_bit_moves():
  """BYTE_FLOATS (on): the renderer's expression, and its arithmetic for every byte (numpy, the same bit operations): exact."""
  src = _srcs(Tensor.empty(64, dtype=dtypes.int8).cast(dtypes.float) + Tensor.empty(64, dtype=dtypes.uint8).cast(dtypes.float))[0]
  assert "__uint_as_float(0x4B000000u | ((unsigned char)(" in src and ") ^ 0x80u)) - 8388736.0f)" in src
  assert "__uint_as_float(0x4B000000u | (unsigned char)(" in src and ")) - 8388608.0f)" in src
  b = np.arange(256, dtype=np.uint32)
  as_float = lambda bits: bits.astype(np.uint32).view(np.float32)
  np.testing.assert_array_equal(as_float(0x4B000000 | b) - np.float32(8388608.0), b.astype(np.float32))
  signed = b.astype(np.uint8).view(np.int8)
  np.testing.assert_array_equal(as_float(0x4B000000 | (b ^ 0x80)) - np.float32(8388736.0), signed.astype(np.float32))


def test_byte_products_compute_right_on_mock_nv():
  rng = np.random.default_rng(0)
  h = rng.standard_normal((1, 256)).astype(np.float32)
  q = rng.integers(-127, 128, (24, 256)).astype(np.int8)
  u = rng.integers(0, 256, (24, 256)).astype(np.uint8)
  with Context(DEV="MOCK+NV"):
    got_q = (Tensor(h) * Tensor(q).cast(dtypes.float)).sum(1).numpy()
    got_u = (Tensor(h) * Tensor(u).cast(dtypes.float)).sum(1).numpy()
  np.testing.assert_allclose(got_q, (h.astype(np.float64) * q).sum(1), rtol=1e-5, atol=1e-3)
  np.testing.assert_allclose(got_u, (h.astype(np.float64) * u).sum(1), rtol=1e-5, atol=1e-3)
