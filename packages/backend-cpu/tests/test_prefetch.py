"""Software prefetches (core codegen/prefetch.py, rendered by the LLVM renderer): a 1x1 convolution's channel loop, which
steps a whole input plane (12.5 KB) a step while its outer loop walks the planes forward, gets one prefetch of the line its
next pixel blocks read; loops the hardware prefetchers follow (row-contiguous sums, a 3x3 window's taps) or whose sweep
would not stay in L1 (a 4096-row column sum) get none; results are the same with and without; SW_PREFETCH=0 turns it off."""
import numpy as np
import pytest
from tinygrad import Context, Tensor
from tinygrad.codegen.prefetch import _index_nodes, _strides, mark_prefetches
from tinygrad.codegen.program import get_program
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_cpu.llvmir import LLVMRenderer, llvm_available

pytestmark = pytest.mark.skipif(llvm_available() is not None, reason="llvmlite can't target this host")


def _sources(t: Tensor, ahead: int = 64) -> list[str]:
  renderer = LLVMRenderer()
  renderer.prefetch_ahead = ahead
  return [get_program(si.ast, renderer).src for si in t.schedule() if si.ast.op is Ops.SINK]


def _prefetches(srcs: list[str]) -> int: return sum(s.count("call void @llvm.prefetch.p0") for s in srcs)


def test_a_1x1_conv_prefetches_the_next_lines_of_its_planes():
  x, w = Tensor.empty(8, 256, 56, 56), Tensor.empty(64, 256, 1, 1)
  srcs = _sources(x.conv2d(w))
  assert _prefetches(srcs) == 1
  body = next(s for s in srcs if "llvm.prefetch" in s)
  assert "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)" in body
  # no inbounds on the prefetch's address: it may lie past the buffer, where a prefetch does nothing
  assert any(line.strip().startswith("%p") and "getelementptr float, ptr %p" in line for line in body.splitlines())
  with Context(SW_PREFETCH=0): assert _prefetches(_sources(x.conv2d(w))) == 0
  assert _prefetches(_sources(x.conv2d(w), ahead=0)) == 0


@pytest.mark.parametrize("make", [
  lambda: Tensor.empty(8, 64, 56, 56).conv2d(Tensor.empty(64, 64, 3, 3), padding=1),  # taps: loops inside the channel loop
  lambda: Tensor.empty(4096, 4096).sum(0),  # a 1 MB sweep per column block: would not stay in L1
  lambda: Tensor.empty(4096, 4096).sum(1),  # contiguous: the hardware follows it
  lambda: Tensor.empty(512, 512) @ Tensor.empty(512, 512),
])
def test_loads_the_hardware_prefetches_get_none(make):
  assert _prefetches(_sources(make())) == 0


def test_strides_of_a_piecewise_index():
  """An index with divisions (a window's rows) is linear in a loop only piecewise: the stride is found at sample points where
  it agrees, and not given where it doesn't (a sampled guess: a prefetch is only a hint, a wrong one costs time, not results)."""
  from tinygrad.dtype import dtypes
  r0 = UOp(Ops.RANGE, dtypes.int, (UOp.const(dtypes.int, 256),), (0, "reduce"))
  r1 = UOp(Ops.RANGE, dtypes.int, (UOp.const(dtypes.int, 56),), (1, "global"))
  linear = r0 * 3136 + r1 * 8
  assert _strides(linear, [r0, r1]) == {r0: 3136, r1: 8}
  wrapped = r0 * 3136 + (r1 * 8) % 160  # jumps back every 20 steps of r1
  assert _strides(wrapped, [r0, r1]) == {r0: 3136}
  assert set(_index_nodes(linear)) >= {r0, r1}


def test_mark_prefetches_leaves_gathers_alone():
  """An index read from memory has no stride: nothing to prefetch."""
  x, idx = Tensor.empty(4096, 64), Tensor.empty(64, dtype="int32")
  for si in x[idx.clip(0, 4095)].sum(0).schedule():
    if si.ast.op is Ops.SINK: assert mark_prefetches(si.ast, 64) is si.ast


@pytest.mark.parametrize("shape", [(2, 64, 20, 20, 48), (1, 40, 33, 31, 16), (3, 256, 14, 12, 8)])
def test_results_equal_with_and_without_prefetches(shape):
  n, ci, h, w_, co = shape
  rng = np.random.default_rng(0)
  x, w = rng.standard_normal((n, ci, h, w_)).astype(np.float32), rng.standard_normal((co, ci, 1, 1)).astype(np.float32)
  outs = []
  for on in (0, 1):
    with Context(SW_PREFETCH=on, PCACHE=0): outs.append(Tensor(x).conv2d(Tensor(w)).numpy())
  np.testing.assert_array_equal(outs[0], outs[1])
  np.testing.assert_allclose(outs[1], np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0]), rtol=1e-4, atol=1e-4)
