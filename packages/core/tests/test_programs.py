"""Every program in the catalog: on NULL it must compile (realize), elsewhere its values must match numpy.
The result's dtype and shape follow tinygrad semantics on every device."""
import numpy as np
import pytest
from programs import DTYPE_TO_NP, PROGRAMS, Program
from tinygrad import dtypes


@pytest.mark.compile_only
@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program(prog: Program, null_device: bool):
  inputs = prog.make_inputs()
  ref, dt = prog.expected(*inputs)
  t = prog.build(*inputs)
  assert t.shape == ref.shape, f"{prog.name}: shape {t.shape}, numpy gives {ref.shape}"
  assert t.dtype == dt, f"{prog.name}: dtype {t.dtype!r}, expected {dt!r}"
  if null_device:
    t.realize()
    return
  out = t.numpy()
  assert out.shape == ref.shape
  if dt == dtypes.bfloat16: expected = ref.astype(np.float32)
  else:
    assert out.dtype == DTYPE_TO_NP[dt], f"{prog.name}: numpy() gave {out.dtype} for {dt!r}"
    expected = ref.astype(out.dtype)
  tol = prog.tolerance(dt)
  if tol == 0: np.testing.assert_array_equal(out, expected, err_msg=prog.name)
  else: np.testing.assert_allclose(out, expected, rtol=tol, atol=tol, err_msg=prog.name)


@pytest.mark.compile_only
def test_catalog_size():
  assert len(PROGRAMS) >= 60
