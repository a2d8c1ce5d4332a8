"""The PYTHON interpreter's warps between barriers: a block's warps may take different paths (a loop whose length each warp
reads from shared memory) and meet their shuffles at different times, as on a GPU; a shuffle joins its warp only. Lanes of one
warp that part ways at a shuffle are still an error."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.dsl import AddrSpace, AxisType, KernelInfo
from tinygrad.uop.ops import Ops, UOp


def _warp_sum(v: UOp) -> UOp:
  for m in (16, 8, 4, 2, 1): v = v + UOp(Ops.SHUFFLE, v.dtype, (v,), m)
  return v


def steps_per_warp(warps: int, lane_steps: bool = False):
  """fxn(out (warps * 32,), counts (warps,) int32): warp w sums x = lane + step over counts[w] steps, a warp shuffle sum each
  step, lane 0 storing the warp's total; lane_steps: each lane runs lane % 2 more steps (lanes of a warp part ways)."""
  def kernel(out: UOp, counts: UOp) -> UOp:
    t = UOp.range(warps * 32, 0, AxisType.LOCAL)
    lane, warp = t % 32, t // 32
    n = UOp.placeholder(warps, dtypes.int32, 0, AddrSpace.LOCAL)
    first = t < warps
    shared = n[t].store(counts[first.where(t, 0)], first).barrier()
    steps = n.after(shared)[warp] + (lane % 2 if lane_steps else 0)
    acc = UOp.placeholder(1, dtypes.float32, 1)
    init = acc[0].store(0.0)
    s = UOp.range(steps, 1, AxisType.LOOP)
    cur = acc.after(init, s)
    looped = cur[0].store(cur[0] + _warp_sum((lane + s).cast(dtypes.float32))).end(s)
    return out[t].store(acc.after(looped)[0], lane.eq(0)).end(t).sink(arg=KernelInfo("steps_per_warp"))
  return kernel


def _run(counts: list[int], lane_steps: bool = False) -> np.ndarray:
  warps = len(counts)
  out = Tensor.zeros(warps * 32, device="PYTHON").contiguous()
  cnt = Tensor(np.array(counts, np.int32), device="PYTHON")
  return out.custom_kernel(cnt, fxn=steps_per_warp(warps, lane_steps))[0].numpy().reshape(warps, 32)[:, 0]


def test_warps_loop_different_lengths_between_barriers():
  counts = [0, 3, 1, 5]
  expect = [sum(32 * s + 496 for s in range(c)) for c in counts]  # sum over lanes of (lane + s)
  np.testing.assert_array_equal(_run(counts), np.array(expect, np.float32))


def test_lanes_of_one_warp_parting_at_a_shuffle_is_an_error():
  with pytest.raises(RuntimeError, match="diverged at a SHUFFLE"): _run([2, 2], lane_steps=True)
