"""streams.py: which loads the CUDA renderer sends past L1 (read once, by one thread), and the kernels that get them."""
from __future__ import annotations

import pytest
from nv_harness import matvec_prog
from tinygrad import Context, Device, Tensor
from tinygrad.dtype import dtypes
from tinygrad.engine import realize
from tinygrad.uop.ops import Ops
from tinygrad_backend_nv.streams import ahead_loads, stream_load_helper, streamed_loads


def test_a_matrix_row_load_streams_and_the_vector_load_does_not():
  p, wv, xv = matvec_prog()
  assert streamed_loads(p.uops) == {wv}
  assert xv not in streamed_loads(p.uops)


@pytest.mark.parametrize("gate,store_into_matrix", [(True, False), (False, True)])
def test_gated_loads_and_buffers_the_kernel_writes_do_not_stream(gate, store_into_matrix):
  """A gated load renders as a select; a buffer the kernel also stores to must not be read through the non-coherent path."""
  p, _, _ = matvec_prog(gate, store_into_matrix)
  assert streamed_loads(p.uops) == set()


def test_streamed_loads_can_be_turned_off():
  p, _, _ = matvec_prog()
  with Context(STREAM_LOADS=0): assert streamed_loads(p.uops) == set()


def test_helpers_are_one_ptx_load_of_their_size():
  """Volatile: NVVM keeps them after the kernel's griddepcontrol.wait (a pure asm could be hoisted above it)."""
  assert all("asm volatile(" in stream_load_helper(n) for n in (4, 8, 16))
  assert "ld.global.nc.L1::no_allocate.u32 %0, [%1];" in stream_load_helper(4)
  assert "ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" in stream_load_helper(8)
  assert "ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" in stream_load_helper(16)


def _sources(build, dev: str = "NULL:CUDA:sm_90") -> dict[str, str]:
  """name -> source of every kernel the tensors from build() run on dev (NULL: compiled, with NVRTC or nvJitLink, not run)."""
  with Context(DEV=dev):
    realize.capturing.append(cap := realize.Capture(jit=False))
    try: Tensor.realize_all(*build())
    finally: realize.capturing.pop()
  return {ei.runner.spec.name: ei.runner.spec.src for ei, _ in cap.items if ei.runner is not None}


def test_a_float16_matrix_vector_product_streams_its_rows():
  """The GPU decode step's form: a float16 matrix times a float32 vector. Its rows' 16-byte loads go through tg_ld_stream16,
  the vector's float4 loads don't, and the kernel compiles. (EARLY_LOADS off: a product this small otherwise loads its rows
  before the grid wait, outside any loop, and those don't stream.)"""
  realize._runner_cache.clear()  # its key holds the AST, not the settings: a product rendered with early loads may be there
  with Context(EARLY_LOADS=0):
    srcs = _sources(lambda: [(Tensor.empty(512, 2048, dtype=dtypes.float16).cast(dtypes.float32) * Tensor.empty(2048)).sum(1)])
  (src,) = [s for n, s in srcs.items() if n.startswith("r_")]
  loads = [line for line in src.splitlines() if " val" in line and "= " in line]
  assert any("tg_ld_stream16(((halfx8*)" in line for line in loads)
  assert all("tg_ld_stream" not in line for line in loads if line.strip().startswith("float4"))
  realize._runner_cache.clear()  # its key holds the AST, not the renderer's settings
  try:
    with Context(STREAM_LOADS=0, EARLY_LOADS=0):
      srcs = _sources(lambda: [(Tensor.empty(512, 2048, dtype=dtypes.float16).cast(dtypes.float32) * Tensor.empty(2048)).sum(1)])
  finally: realize._runner_cache.clear()  # later tests get kernels rendered with the default again
  assert all("tg_ld_stream" not in s for s in srcs.values())


def test_a_products_blocks_reserve_shared_memory_to_spread_over_the_sms():
  """MV_BALANCE (default 1): a streamed product whose grid needs at most 8 blocks an SM reserves enough shared memory that an
  sm_90 SM (228 KB, 1 KB of it a block's) holds ceil(blocks / SMs) of them and not one more; 0: it reserves none."""
  import re

  from tinygrad_backend_nv.cuda import BLOCK_SHARED_OVERHEAD, DYNAMIC_SMEM_SYMBOL
  SM_SHARED_90 = 228 * 1024  # an sm_90 SM's shared memory (H100, H200)

  def product_source(**settings) -> str:
    realize._runner_cache.clear()  # its key holds the AST, not the renderer's settings
    try:
      with Context(EARLY_LOADS=0, **settings):
        srcs = _sources(lambda: [(Tensor.empty(2048, 8192, dtype=dtypes.float16).cast(dtypes.float32) * Tensor.empty(8192)).sum(1)])
    finally: realize._runner_cache.clear()
    (src,) = [s for n, s in srcs.items() if n.startswith("r_")]
    return src
  src = product_source()
  blocks = int(re.search(r"blockIdx\.x; /\* (\d+) \*/", src).group(1))
  with Context(DEV="NULL:CUDA:sm_90"): sms = Device.renderer(Device.DEFAULT).compute_units  # 132, or this machine's sm_90 GPU's
  per_sm = -(-blocks // sms)
  assert 1 < per_sm <= 8, blocks  # (the heuristics' grid for this shape; else pick another)
  reserved = int(re.search(DYNAMIC_SMEM_SYMBOL + r" = (\d+);", src).group(1))
  assert per_sm * (reserved + BLOCK_SHARED_OVERHEAD) <= SM_SHARED_90 < (per_sm + 1) * (reserved + BLOCK_SHARED_OVERHEAD)
  assert DYNAMIC_SMEM_SYMBOL not in product_source(MV_BALANCE=0)


def test_elementwise_kernels_keep_plain_loads():
  """No loop around the loads: nothing to stream past."""
  srcs = _sources(lambda: [Tensor.empty(4096) + Tensor.empty(4096)])
  assert all("tg_ld_stream" not in s for s in srcs.values())


def test_ptx_streams_a_float32_matrix_vector_product():
  """PTX's form: the rows' loads as ld.global.nc.L1::no_allocate, the vector's plain."""
  realize._runner_cache.clear()
  srcs = _sources(lambda: [(Tensor.empty(512, 2048) * Tensor.empty(2048)).sum(1)], "NULL:PTX:sm_90")
  (src,) = [s for n, s in srcs.items() if n.startswith("r_")]
  loads = [line.strip() for line in src.splitlines() if line.strip().startswith("ld.global")]
  assert any(line.startswith("ld.global.nc.L1::no_allocate.") for line in loads)
  assert any(line.startswith("ld.global.f32") for line in loads)


def test_loads_ahead_are_off_by_default_and_cover_the_loop_with_a_streamed_load():
  """STREAM_AHEAD (an A/B switch, measured slower: streams.py): the streamed row and the vector it multiplies, both in the loop."""
  p, wv, xv = matvec_prog()
  assert ahead_loads(p.uops, streamed_loads(p.uops)) == {}
  with Context(STREAM_AHEAD=2):
    (loop, loads), = ahead_loads(p.uops, streamed_loads(p.uops)).items()
  assert loop.op is Ops.RANGE and set(loads) == {wv, xv}


def _render(p, **settings) -> str:
  from tinygrad.device.devstring import Target
  from tinygrad_backend_nv.compiler import NVRTCCompiler
  from tinygrad_backend_nv.cuda import CUDARenderer
  with Context(**settings): src = CUDARenderer(Target("CUDA", "CUDA", "sm_90")).render("mv", p.uops)
  NVRTCCompiler("sm_90").compile(src)
  return src


def test_a_load_ahead_is_issued_before_its_loop_and_a_step_on_inside_it():
  """STREAM_AHEAD=1: each load of step 0 before the loop; in step r the value loaded before, and the load of step r + 1 issued
  (not past the last step)."""
  p, _, _ = matvec_prog()
  src = _render(p, STREAM_AHEAD=1)
  loop = src.index("for (int ridx0")
  assert src.index("float ahead0 = tg_ld_stream4(") < loop and src.index("float ahead1 = (*(data2+") < loop
  assert "if (ridx0 < 63) ahead0 = tg_ld_stream4((data1+" in src[loop:] and "(ridx0+1)" in src[loop:]


def test_early_loads_go_before_a_wait_that_depends_on_them():
  """STREAM_EARLY=1: the matrix's first loads before the grid wait, which is predicated on their values (ptxas would otherwise
  schedule the wait first), and the module lists the matrix's parameter for the graph; the vector's first loads (written by the
  kernel before) come after the wait."""
  p, _, _ = matvec_prog()
  src = _render(p, STREAM_AHEAD=1, STREAM_EARLY=1)
  (wait,) = [line for line in src.splitlines() if "griddepcontrol.wait" in line]
  assert src.index("tg_ld_stream4((data1+") < src.index(wait) < src.index("(*(data2+") and "&ahead0" in wait
  assert "tg_early_params = 2ull;" in src  # data1, the second parameter
