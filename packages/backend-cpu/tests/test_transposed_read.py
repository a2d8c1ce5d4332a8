"""Elementwise kernels that write the transpose of what they read (heuristics._transposed_read): the outer output loop, along
which the input is contiguous, is upcast (a contiguous run read, written down a column); values equal numpy for odd shapes
with both CPU renderers."""
import numpy as np
import pytest
from tinygrad import Context, Tensor, dtypes
from tinygrad.codegen.heuristics import hand_coded_opts
from tinygrad.codegen.opt import Opt, OptOps, ranges_of
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_cpu.clang import clang_available


def _kernel(t: Tensor) -> UOp:
  (si,) = [si for si in t.schedule() if si.ast.op is Ops.SINK]
  return si.ast


def _outs(ast: UOp) -> list[int]: return sorted(r.arg[0] for r in ranges_of(ast).values() if r.arg[1] == "global")


def test_transpose_upcasts_the_contiguous_loop():
  with Context(DEV="CPU"):
    ast = _kernel((Tensor.empty(96, 64, dtype=dtypes.uint8).cast(dtypes.float32) * 2).T.contiguous())  # out (64, 96), reads [n, k]
  k, _ = _outs(ast)
  assert hand_coded_opts(ast, threads=2) == [Opt(OptOps.UPCAST, k, 8), Opt(OptOps.THREAD, 0, 2)]
  with Context(DEV="CPU"): ast = _kernel(Tensor.empty(40, 12).T.contiguous())  # 12 rows: 4 divides them, 8 doesn't
  assert hand_coded_opts(ast, threads=1)[0] == Opt(OptOps.UPCAST, _outs(ast)[0], 4)


def test_plain_elementwise_is_left_alone():
  with Context(DEV="CPU"):
    for t in (Tensor.empty(96, 64) * 2, Tensor.empty(64, 96).expand(3, 64, 96) + 1):  # contiguous, or broadcast along an outer loop
      assert not any(o.op is OptOps.UPCAST for o in hand_coded_opts(_kernel(t.contiguous()), threads=1))
    assert not any(o.op is OptOps.UPCAST for o in hand_coded_opts(_kernel(Tensor.empty(31, 13).T.contiguous()), threads=1))  # no divisor


@pytest.mark.parametrize("dev", ["CPU:LLVM", "CPU:CLANG"])
@pytest.mark.parametrize("shape", [(96, 64), (40, 24), (3, 4, 100), (33, 20)])
def test_transpose_matches_numpy(dev, shape):
  if dev == "CPU:CLANG" and clang_available() is not None: pytest.skip(str(clang_available()))
  a = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
  with Context(DEV=dev):
    got = ((Tensor(a).cast(dtypes.float32) * 0.5 - 3).transpose(-1, -2).cast(dtypes.float16).contiguous()).numpy()
  np.testing.assert_array_equal(got, (a.astype(np.float32) * 0.5 - 3).swapaxes(-1, -2).astype(np.float16))
