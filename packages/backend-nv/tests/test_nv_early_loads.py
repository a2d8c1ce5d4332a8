"""Streamed inputs loaded before the wait for the kernel before (core codegen/early_loads.py) on CUDA: the rendered kernel
(wait after the matrix's loads, `tg_early_params` naming that parameter), the graph's edge rule (graph.py `_early_conflict`:
plain where the kernel before takes such a buffer, a view into it included) without a GPU, and on a GPU a JIT whose matrix
the kernel before writes: the right values, through a plain edge."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tinygrad_backend_nv.graph as graph
from nv_harness import make_renderer, needs_gpu
from tinygrad import Device, Tensor, TinyJit, dtypes
from tinygrad.device.plugin import KernelLaunch
from tinygrad.helpers import Context


def _matvec_src(n: int, k: int, early: int = 16, **settings) -> str:
  from tinygrad.codegen.program import get_program
  from tinygrad.schedule.kernelize import create_schedule
  from tinygrad.uop.ops import Ops
  out = Tensor.empty(1, k) @ Tensor.empty(n, k, dtype=dtypes.half).T.cast(dtypes.float)
  items, _ = create_schedule([out.uop])
  (ast,) = [it.ast for it in items if it.ast.op is Ops.SINK]
  with Context(EARLY_LOADS=early, **settings): return get_program(ast, make_renderer("CUDA", "sm_90")).src


@pytest.mark.parametrize("n,k,loads,few_lanes,bounds", [(2048, 2048, 8, 1, "256, 2"), (2048, 2048, 4, 0, "256, 2"), (2048, 8192, 16, 1, "256, 2")])
def test_matvec_waits_after_its_matrix_loads(n: int, k: int, loads: int, few_lanes: int, bounds: str) -> None:
  """The matrix's loads, all of a lane's, before the wait (32 lanes a row where that makes them fit EARLY_LOADS: fewer, fuller
  blocks; EARLY_FEW_LANES=0 keeps 64), and registers capped so that the whole grid is resident at once (132 SMs), unless that
  leaves a thread fewer than EARLY_ONE_WAVE_MIN_REGS (512 blocks of 256 threads: 4 an SM, 64 registers; those keep
  REDUCE_WARPS's 2 an SM)."""
  src = _matvec_src(n, k, EARLY_FEW_LANES=few_lanes)
  body = src[src.index("__global__"):]
  wait = body.index("griddepcontrol.wait")
  assert body[:wait].count("halfx8 val") == loads and "float4 val" not in body[:wait]  # the matrix, whole; not the vector
  assert "float4 val" in body[wait:]
  assert 'tg_early_params = 4ull' in src  # parameter 2: the matrix (0 is the output, 1 the vector)
  assert f"__launch_bounds__({bounds})" in src


def test_a_grid_of_more_than_one_wave_loads_nothing_early() -> None:
  """A vocabulary's product (128256 rows: many waves) is not unrolled for early loads, and waits first."""
  src = _matvec_src(128256, 2048, early=8)
  body = src[src.index("__global__"):]
  assert body.index("griddepcontrol.wait") < body.index("halfx8 val") and "tg_early_params" not in src


def test_matvec_off_waits_first() -> None:
  src = _matvec_src(2048, 2048, early=0)
  body = src[src.index("__global__"):]
  assert body.index("griddepcontrol.wait") < body.index("halfx8 val") and "tg_early_params" not in src


def _launch(bufs: tuple[int, ...], early: int = 0) -> KernelLaunch:
  return KernelLaunch(SimpleNamespace(early_params=early, name="k"), bufs)


def test_edge_is_plain_where_the_kernel_before_takes_an_early_buffer(monkeypatch) -> None:
  allocs = {0x1000: 0x1000, 0x1100: 0x1000, 0x2000: 0x2000, 0x3000: 0x3000}  # 0x1100: a view into the allocation at 0x1000
  ok = SimpleNamespace(CUDA_SUCCESS=0)
  monkeypatch.setattr(graph, "cu", SimpleNamespace(CUresult=ok, cuMemGetAddressRange=lambda p: (0, allocs.get(p, p), 64) if p in allocs else (1, 0, 0)))
  matvec = _launch((0x3000, 0x2000, 0x1100), early=0b100)  # reads parameter 2 (a view of 0x1000) before its wait
  assert graph._early_conflict(_launch((0x1000, 0x2000)), matvec)  # the kernel before writes (or reads) that allocation
  assert not graph._early_conflict(_launch((0x2000,)), matvec)  # it takes only the vector: the matrix may load early
  assert not graph._early_conflict(_launch((0x1000,)), _launch((0x3000, 0x1000)))  # nothing loaded early: PDL as before
  assert graph._early_conflict(_launch((0x9000,)), _launch((0x9000,) * 70, early=1 << 63))  # bit 63: parameter 63 and later


@needs_gpu
def test_jit_matvec_of_a_matrix_the_kernel_before_writes() -> None:
  """The matrix is written by the kernel right before the product in the graph: its early loads would read it half written,
  so that edge must be plain; the product of a constant matrix after it keeps its programmatic edge. Replayed with new inputs."""
  from tinygrad_backend_nv.compiler import arch_number
  rng = np.random.default_rng(0)
  n, k = 2048, 2048
  w_np, v_np = rng.standard_normal((n, k)).astype(np.float16), rng.standard_normal((k, k)).astype(np.float16)
  w, v = Tensor(w_np, device="CUDA").realize(), Tensor(v_np, device="CUDA").realize()

  @TinyJit
  def f(x: Tensor, s: Tensor) -> Tensor:
    scaled = (w * s).contiguous()  # a kernel writing the next kernel's matrix
    y = x @ scaled.T.cast(dtypes.float)
    return (y @ v.T.cast(dtypes.float)).contiguous()

  for i in range(4):
    x_np = rng.standard_normal((1, k)).astype(np.float32)
    s = float(i + 1)
    with Context(EARLY_LOADS=16): got = f(Tensor(x_np, device="CUDA").realize(), Tensor([s], dtype=dtypes.half, device="CUDA").realize()).numpy()
    ref = (x_np @ (w_np * np.float16(s)).astype(np.float32).T) @ v_np.astype(np.float32).T
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-1)
  g = f.graph.graph if f.graph is not None else None
  if g is not None and isinstance(g, graph.CUDAGraph) and arch_number(Device.renderer("CUDA").arch) >= 90:
    early = [i for i, lc in enumerate(g.launches) if getattr(lc.program, "early_params", 0)]
    assert early and any(not g.programmatic[i] for i in early) and any(g.programmatic[i] for i in early)
