"""Shared by the backend-amd tests: which toolchains exist here, and compiling a tensor program's kernels for an arch."""
from __future__ import annotations

import os

import pytest
from tinygrad import Device, Tensor
from tinygrad.codegen.program import get_program
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops
from tinygrad_backend_amd.archs import ARCHS, ToolchainError
from tinygrad_backend_amd.hip import hip_available
from tinygrad_backend_amd.toolchain import find_clang

# CI installs clang-22 (.ci/run), and there a missing one is a failure; elsewhere the HIP tests skip with the reason
HIP_MISSING = hip_available()
if HIP_MISSING is not None and os.environ.get("CI") == "true": raise RuntimeError(f"CI=true but the HIP toolchain is missing: {HIP_MISSING}")
needs_hip = pytest.mark.skipif(HIP_MISSING is not None, reason=f"HIP toolchain: {HIP_MISSING}")


def hip_archs() -> list[str]:
  """The archs the installed clang targets (all of them with clang-22)."""
  if HIP_MISSING is not None: return []
  try: major = find_clang().major
  except ToolchainError: return []
  return [a for a, info in ARCHS.items() if info.min_llvm <= major]


def compiled(dev: str, build) -> list[tuple[str, bytes, list]]:
  """(kernel name, code object, uops) for every kernel of the tensor program `build()` under DEV=dev."""
  with Context(DEV=dev):
    out: Tensor = build()
    items, _ = create_schedule([out.uop])
    renderer = Device.renderer(Device.DEFAULT)
    progs = [get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK]
    return [(p.name, renderer.compiler.compile(p.src), p.uops) for p in progs]
