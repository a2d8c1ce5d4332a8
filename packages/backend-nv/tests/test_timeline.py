"""timeline.py: block timelines (KERNEL_TIMELINE=1) rendered into sm_90 kernels, recorded on a GPU, and read back as phases."""
from __future__ import annotations

import numpy as np
import pytest
from nv_harness import GPU_ARCH, Prog, needs_gpu
from tinygrad.device.devstring import Target
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad_backend_nv import timeline
from tinygrad_backend_nv.compiler import NVRTCCompiler
from tinygrad_backend_nv.cuda import CUDARenderer


def _copy_prog() -> Prog:
  """out[g] = a[g]: one thread a block."""
  p = Prog()
  out, a = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32)
  g = p.special("gidx0", 8)
  p.store(out, g, p.load(a, g))
  return p


def test_sm90_kernels_stamp_their_blocks_and_others_do_not():
  """Stamps at the start, after the grid wait and at the end (after a block barrier, thread 0 appends the record), the module's
  timeline pointer declared; it compiles. sm_80 kernels don't wait for a grid, so they get none. Off by default."""
  p = _copy_prog()
  with Context(KERNEL_TIMELINE=1):
    src = CUDARenderer(Target("CUDA", "CUDA", "sm_90")).render("k", p.uops)
    ampere = CUDARenderer(Target("CUDA", "CUDA", "sm_80")).render("k", p.uops)
  start, wait, end = (src.index(s) for s in ("tg_stamps[0] = tg_stamps[1] = tg_now()", "griddepcontrol.wait", "__syncthreads();"))
  assert start < wait < src.index("tg_stamps[1] = tg_now()", wait) < src.index("(data1+") < end
  assert f"{timeline.TIMELINE_SYMBOL} = 0;" in src
  assert f"{timeline.kernel_id('k')}ull << 32" in src
  NVRTCCompiler("sm_90").compile(src)
  assert "tg_now" not in ampere and "tg_now" not in CUDARenderer(Target("CUDA", "CUDA", "sm_90")).render("k", p.uops)


def _rec(name: str, launch: int, block: int, sm: int, start: int, released: int, end: int, recorded: int) -> tuple[int, ...]:
  return (timeline.kernel_id(name), launch, sm, block, start, released, end, recorded)


def test_launches_and_phases_from_records():
  """Two kernels, a then b: b's blocks start before a ends (early launch) and are released 400 ns after a's last block is done;
  b's second block ends 1 us after its first (the tail); a's second launch comes after."""
  recs = [_rec("a", 0, 0, 0, 0, 100, 3000, 3200), _rec("a", 0, 1, 1, 0, 150, 3500, 3600),
          _rec("b", 0, 0, 2, 2000, 4000, 6000, 6100), _rec("b", 0, 1, 3, 2100, 4050, 7000, 7300),
          _rec("a", 1, 0, 0, 7500, 7800, 9000, 9100), _rec("a", 1, 1, 1, 7600, 7900, 9200, 9300)]
  names = {timeline.kernel_id(n): n for n in ("a", "b")}
  seq = timeline.launches(recs, names)
  assert [(x.name, x.launch, x.blocks, x.sms) for x in seq] == [("a", 0, 2, 2), ("b", 0, 2, 2), ("a", 1, 2, 2)]
  rows = timeline.phases(seq)
  b = rows[1]
  assert b["wait"] == pytest.approx(0.4) and b["run"] == pytest.approx(2.5) and b["tail"] == pytest.approx(0.5)
  assert b["record"] == pytest.approx(0.3) and b["span"] == pytest.approx(3.5) and b["release_spread"] == pytest.approx(0.05)
  table = timeline.by_kernel(rows)
  assert [r["name"] for r in table] == ["a", "b"] and table[0]["launches"] == 2 and table[1]["wait_mean"] == pytest.approx(0.4)


@needs_gpu
@pytest.mark.skipif(GPU_ARCH is None or int(GPU_ARCH[3:]) < 90, reason="block timelines need sm_90+ (the grid wait)")
def test_a_kernel_records_its_blocks_on_the_gpu():
  """Two launches of an 8-block kernel into an open Timeline: 16 records, launches 0 and 1, stamps in order, the right result."""
  from nv_harness import make_renderer
  from tinygrad_backend_nv.runtime import open_cuda
  p = _copy_prog()
  with Context(KERNEL_TIMELINE=1):
    renderer = make_renderer("CUDA")
    src = renderer.render("tl_copy", p.uops)
  dev = open_cuda("CUDA", 0)
  prg = dev.runtime("tl_copy", renderer.compiler.compile(src))  # type: ignore[misc]
  a = np.arange(8, dtype=np.float32)
  out_buf, a_buf = dev.allocator.alloc(32), dev.allocator.alloc(32)
  dev.allocator.copyin(a_buf, memoryview(a.tobytes()))
  with timeline.Timeline(dev, capacity=64) as tl:
    for _ in range(2): prg(out_buf, a_buf, global_size=(8, 1, 1), local_size=(1, 1, 1))
    dev.synchronize()
    recs = tl.records()
  out = np.empty(8, dtype=np.float32)
  dev.allocator.copyout(out.data.cast("B"), out_buf)
  np.testing.assert_array_equal(out, a)
  assert len(recs) == 16 and sorted({r[1] for r in recs}) == [0, 1] and sorted(r[3] for r in recs if r[1] == 0) == list(range(8))
  assert all(r[0] == timeline.kernel_id("tl_copy") and r[4] <= r[5] <= r[6] <= r[7] for r in recs)
