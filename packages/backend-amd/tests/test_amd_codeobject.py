"""Every kernel of a few whole tensor programs, compiled by both renderers for each arch, is a valid code object for
its target: ELF machine EM_AMDGPU, OS/ABI AMDGPU_HSA, the arch's EF_AMDGPU_MACH, the arch in the metadata note, the
kernel's descriptor symbol, and the arch's wavefront size."""
from __future__ import annotations

import numpy as np
import pytest
from amd_harness import compiled, hip_archs, needs_hip
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops
from tinygrad_backend_amd.archs import ARCHS
from tinygrad_backend_amd.codeobject import EM_AMDGPU, check_code_object, read_code_object

PROGRAMS = {
  "softmax_matmul": lambda: (Tensor.rand(8, 12) @ Tensor.rand(12, 16)).softmax(axis=1),
  "reduce_transcendental": lambda: (Tensor.rand(64, 64).exp2() + 1).log2().sin().sum(axis=0),
  "half_bf16_int": lambda: Tensor.rand(40).cast(dtypes.half).sqrt().cast(dtypes.bfloat16).cast(dtypes.int32) // 3 + Tensor.arange(40),
  "float64": lambda: Tensor(np.linspace(-4, 4, 33)).exp2().log2().sin().max(),
  "group_reduce": lambda: Tensor.rand(4096).sum(),
  # fp8 buffers are bytes, converted by integer code (codegen/fp8.py); its values are checked on MOCKKFD+AMD by core's test_fp8
  "fp8": lambda: Tensor.rand(64).cast(dtypes.fp8e4m3).contiguous().cast(dtypes.float32) + Tensor.rand(64).cast(dtypes.fp8e5m2).cast(dtypes.half),
}


def _check(dev: str, arch: str, program: str) -> None:
  kernels = compiled(dev, PROGRAMS[program])
  assert kernels
  for name, lib, _ in kernels:
    co = check_code_object(lib, arch, name)
    assert co.machine == EM_AMDGPU and co.wavefront_size == ARCHS[arch].wave, (name, co)


# every program for one arch of each wave size and for gfx950; gfx1101 and gfx1201 (gfx1100's code paths) get one
CASES = [(arch, program) for arch in ARCHS for program in (PROGRAMS if arch in ("gfx1100", "gfx942", "gfx950") else ["softmax_matmul"])]


@pytest.mark.parametrize("arch, program", CASES)
def test_llvm_code_objects(arch: str, program: str):
  _check(f"NULL:LLVM:{arch}", arch, program)


@needs_hip
@pytest.mark.parametrize("arch, program", [(a, p) for a, p in CASES if a in (hip_archs() or ARCHS)])
def test_hip_code_objects(arch: str, program: str):
  _check(f"NULL:HIP:{arch}", arch, program)


@needs_hip
@pytest.mark.parametrize("arch, instr", [("gfx1100", "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32"), ("gfx1201", "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12"),
                                         ("gfx942", "__builtin_amdgcn_mfma_f32_16x16x16f16"),
                                         ("gfx950", "__builtin_amdgcn_mfma_f32_16x16x32_f16")])
def test_hip_matmul_uses_tensor_cores(arch: str, instr: str):
  def build():
    a = Tensor.rand(64, 64).cast(dtypes.half).realize()  # NULL runs nothing; the matmul then reads half
    return a @ a
  (name, lib, uops), = compiled(f"NULL:HIP:{arch}", build)
  assert any(u.op is Ops.WMMA for u in uops)
  check_code_object(lib, arch, name)
  from tinygrad import Device
  from tinygrad.helpers import Context
  with Context(DEV=f"NULL:HIP:{arch}"):
    src = Device.renderer(Device.DEFAULT).render(name, uops)
  assert instr + "(" in src


def test_reader_rejects_other_objects():
  with pytest.raises(ValueError, match="not a 64-bit ELF"): read_code_object(b"\x7fELF\x01" + bytes(60))
  (name, lib, _), *_ = compiled("NULL:LLVM:gfx942", PROGRAMS["group_reduce"])
  with pytest.raises(ValueError, match="expected gfx950"): check_code_object(lib, "gfx950")
  with pytest.raises(ValueError, match="no kernel 'nope'"): check_code_object(lib, "gfx942", "nope")
