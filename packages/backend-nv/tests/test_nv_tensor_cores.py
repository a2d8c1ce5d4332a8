"""Tensor-core matmuls (core's codegen/tensor_core.py) as CUDA C: compiled by NVRTC for sm_80 and sm_90 everywhere, and
run against a float64 reference (into NaN-poisoned outputs) where a GPU is present."""
from __future__ import annotations

import numpy as np
import pytest
from nv_harness import needs_gpu
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.program import get_program
from tinygrad.device.devstring import Target
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops
from tinygrad_backend_nv.cuda import CUDARenderer
from tinygrad_backend_nv.ptx import PTXRenderer

CASES = [  # (A shape, B shape, dtype, bias+relu)
  ((256, 128), (128, 512), dtypes.float16, False),
  ((128, 64), (64, 256), dtypes.bfloat16, True),
  ((3, 64, 32), (3, 32, 64), dtypes.float16, False),
  ((512, 512), (512, 512), dtypes.bfloat16, False),
]


def _graph(sa: tuple, sb: tuple, dt, bias: bool) -> Tensor:
  out = Tensor.empty(*sa, dtype=dt) @ Tensor.empty(*sb, dtype=dt)
  return (out + Tensor.empty(sb[-1], dtype=dt)).relu() if bias else out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}_{c[2].name}{'_bias_relu' if c[3] else ''}")
def test_compiles_with_wmma(arch: str, case: tuple) -> None:
  with Context(DEV=f"NULL:CUDA:{arch}"):
    items, _ = create_schedule([_graph(*case).uop])
  renderer = CUDARenderer(Target("CUDA", "CUDA", arch))
  progs = [get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK]
  tc = [p for p in progs if any(u.op is Ops.WMMA for u in p.uops)]
  assert len(tc) == 1 and [o.op for o in tc[0].opts] == [OptOps.TC]
  assert "mma.sync.aligned.m16n8k16.row.col.f32" in tc[0].src and "__syncthreads();" in tc[0].src and "__shared__" in tc[0].src
  assert len(renderer.compiler.compile(tc[0].src)) > 0


def test_sm75_compiles() -> None:
  """sm_75: m16n8k8 f16 only and no cp.async: the register double-buffered pipeline."""
  with Context(DEV="NULL:CUDA:sm_75"):
    items, _ = create_schedule([_graph(*CASES[0]).uop])
  renderer = CUDARenderer(Target("CUDA", "CUDA", "sm_75"))
  prog = next(p for p in (get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK) if any(u.op is Ops.WMMA for u in p.uops))
  assert "m16n8k8" in prog.src and "cp.async" not in prog.src and "ldmatrix" in prog.src
  assert len(renderer.compiler.compile(prog.src)) > 0


def test_tf32_compiles_when_allowed() -> None:
  renderer = CUDARenderer(Target("CUDA", "CUDA", "sm_90"))
  for allow in (0, 1):
    with Context(DEV="NULL:CUDA:sm_90", ALLOW_TF32=allow):
      items, _ = create_schedule([_graph((128, 64), (64, 128), dtypes.float32, False).uop])
      progs = [get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK]
    tc = [p for p in progs if any(u.op is Ops.WMMA for u in p.uops)]
    assert len(tc) == allow
    if allow:
      assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in tc[0].src
      assert len(renderer.compiler.compile(tc[0].src)) > 0


def test_ptx_falls_back() -> None:
  """Our PTX renderer emits no WMMA yet: it offers no tensor cores, so matmuls take the plain path there."""
  renderer = PTXRenderer(Target("CUDA", "PTX", "sm_90"))
  assert renderer.tensor_cores == ()
  with Context(DEV="NULL:PTX:sm_90"):
    items, _ = create_schedule([_graph(*CASES[0]).uop])
  progs = [get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK]
  assert progs and not any(u.op is Ops.WMMA for p in progs for u in p.uops)


@needs_gpu
@pytest.mark.parametrize("case", [*CASES, ((1024, 2048), (2048, 768), dtypes.float16, True)], ids=lambda c: f"{c[0]}x{c[1]}_{c[2].name}")
def test_gpu_matches_reference(case: tuple) -> None:
  sa, sb, dt, bias = case
  rng = np.random.default_rng(0)
  with Context(DEV="CUDA"):
    a_np, b_np = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    a, b = Tensor(a_np).cast(dt).realize(), Tensor(b_np).cast(dt).realize()
    c = Tensor(rng.standard_normal(sb[-1]).astype(np.float32)).cast(dt).realize()
    expr = a @ b
    if bias: expr = (expr + c).relu()
    out = Tensor.full(expr.shape, float("nan"), dtype=dt).contiguous().realize()  # poisoned: every element must be written
    out.assign(expr).realize()
    got = out.float().numpy().astype(np.float64)
    ref = a.float().numpy().astype(np.float64) @ b.float().numpy().astype(np.float64)
    if bias: ref = np.maximum(ref + c.float().numpy().astype(np.float64), 0)
  tol = 1e-2 if dt == dtypes.float16 else 3e-2
  assert not np.isnan(got).any()
  np.testing.assert_allclose(got, ref, atol=tol * np.abs(ref).max(), rtol=tol)
  Device["CUDA"].synchronize()
