"""The LLVM renderer's sums of accumulators as vector reductions (lane_sums.py): a few vectors times a short W.T (its loop fully
unrolled by LLVM) is SIMD code, not scalar multiply-adds; values equal numpy's; sums of other values are not touched."""
import re

import numpy as np
import pytest
from tinygrad import Context, Device, Tensor
from tinygrad.codegen.program import get_program


def _program(t: Tensor):
  with Context(DEV="CPU:LLVM"):
    (item,) = [it for it in t.schedule() if it.ast.op.name == "SINK"]
    return get_program(item.ast, Device.renderer("CPU"))


def _fmas(asm: str, kind: str) -> int: return len(re.findall(rf"\bvfmadd\d+{kind}\b", asm))


@pytest.mark.parametrize("m,k", [(8, 128), (4, 128), (8, 96)])
def test_few_vectors_with_short_rows_are_simd(m: int, k: int):
  prog = _program(Tensor.empty(m, k) @ Tensor.empty(1024, k).T)
  assert "@llvm.vector.reduce.fadd" in prog.src
  with Context(DEV="CPU:LLVM"): asm = Device.renderer("CPU").compiler.assembly(prog.src)
  assert _fmas(asm, "ss") == 0 and _fmas(asm, "ps") > 0, (_fmas(asm, "ss"), _fmas(asm, "ps"))
  with Context(LANE_SUMS=0):
    off = _program(Tensor.empty(m, k) @ Tensor.empty(1024, k).T)  # (the chain of scalar adds: what LLVM left scalar)
  assert "@llvm.vector.reduce.fadd" not in off.src


@pytest.mark.parametrize("m,k,n,dtype", [(8, 128, 1024, np.float32), (3, 96, 50, np.float32), (16, 128, 256, np.float16),
                                         (1, 2048, 64, np.float32), (5, 64, 33, np.float32)])
def test_few_vectors_match_numpy(m: int, k: int, n: int, dtype):
  rng = np.random.default_rng(m * k + n)
  x, w = rng.standard_normal((m, k), np.float32), rng.standard_normal((n, k), np.float32).astype(dtype)
  with Context(DEV="CPU:LLVM"): got = (Tensor(x) @ Tensor(w).T.float()).numpy()
  np.testing.assert_allclose(got, x.astype(np.float64) @ w.astype(np.float64).T, rtol=1e-4, atol=1e-4)


def test_sums_of_other_values_are_left_alone():
  """Four tensors added elementwise (loads from memory, not accumulators) stay scalar adds; a float64 row sum (unrolled into
  accumulators) is a reduction, and right."""
  a, b, c, d = (Tensor.empty(64) for _ in range(4))
  assert "@llvm.vector.reduce" not in _program(a + b + c + d).src
  x = np.random.default_rng(0).standard_normal((4, 256))
  assert "@llvm.vector.reduce.fadd.v" in _program(Tensor.empty(4, 256, dtype="float64").sum(1)).src
  with Context(DEV="CPU:LLVM"): got = Tensor(x).sum(1).numpy()
  np.testing.assert_allclose(got, x.sum(1), rtol=1e-12)
