"""The cubin parser on real cubins from our NVRTC path (no GPU needed): code, registers, barriers, shared memory, the params'
place in constant bank 0 (0x210 on sm_90, 0x160 on sm_80..89, as EIATTR_PARAM_CBANK says), and clear errors."""
from __future__ import annotations

import pytest
from tinygrad_backend_nv.compiler import NVRTCCompiler
from tinygrad_backend_nv.cubin import CubinError, Param, Reloc, parse_cubin

ADD = ('extern "C" __global__ void __launch_bounds__(128) add(float* __restrict__ c, const float* __restrict__ a, const int n) '
       "{ int i = blockIdx.x * 128 + threadIdx.x; if (i < n) c[i] = a[i] + 1.0f; }")
SYNC = ('extern "C" __global__ void __launch_bounds__(64) sync3(float* a) { __shared__ float s[64]; s[threadIdx.x] = a[threadIdx.x]; '
        'asm volatile("bar.sync 3, 64;"); a[threadIdx.x] = s[63 - threadIdx.x]; }')
DYN = ('extern "C" __device__ unsigned tg_dynamic_smem = 4096;\nextern __shared__ __align__(16) unsigned char tg_smem[];\n'
       'extern "C" __global__ void __launch_bounds__(256) dyn(float* a) { float* s = (float*)tg_smem; s[threadIdx.x] = a[threadIdx.x]; '
       "__syncthreads(); a[threadIdx.x] = s[255 - threadIdx.x]; }")

GLOBALS = ('extern "C" __device__ unsigned tg_waits_for_grid = 7;\nextern "C" __device__ float zeroed[3];\n'
           'extern "C" __global__ void __launch_bounds__(32) s(float* a) { a[threadIdx.x] = a[threadIdx.x] * 2.0f + zeroed[threadIdx.x % 3]; }')


@pytest.mark.parametrize("arch,offset", [("sm_80", 0x160), ("sm_86", 0x160), ("sm_89", 0x160), ("sm_90", 0x210)])
def test_params_and_resources(arch: str, offset: int) -> None:
  img = parse_cubin(NVRTCCompiler(arch).compile(ADD), "add")
  assert img.param_offset == offset and img.param_size == 20
  assert img.params == [Param(0, 0, 8), Param(1, 8, 8), Param(2, 16, 4)]
  assert img.cbuf0_size == offset + 20 and img.max_threads == 128
  assert 0 < img.registers <= 255 and len(img.text) % 128 == 0 and img.barriers == 0
  assert img.shared == 0  # no shared memory used: not even sm_90's reserved part


def test_barriers_and_dynamic_shared_memory() -> None:
  # sm_90 reserves 1 KB of the shared memory of a block that uses any for the system: NVRTC sizes .nv.shared with it
  sync = parse_cubin(NVRTCCompiler("sm_90").compile(SYNC), "sync3")
  assert sync.barriers == 4 and sync.shared_static == 1024 + 256
  dyn = parse_cubin(NVRTCCompiler("sm_90").compile(DYN), "dyn")
  assert dyn.shared_dynamic == 4096 and dyn.shared == 1024 + 4096 and dyn.barriers == 1


def test_clear_errors() -> None:
  lib = NVRTCCompiler("sm_90").compile(ADD)
  with pytest.raises(CubinError, match="no kernel 'sub' .it has add"): parse_cubin(lib, "sub")
  with pytest.raises(CubinError, match="not a 64-bit ELF cubin"): parse_cubin(b".version 8.0\n.target sm_90\n", "add")


def test_global_variables_and_constant_bank_relocations() -> None:
  """NVRTC keeps each global's address in constant bank 4, as R_CUDA_64 relocations against .nv.global(.init): the image
  lays the globals out (initialized values, zeros) and the relocations say where each address goes."""
  img = parse_cubin(NVRTCCompiler("sm_90").compile(GLOBALS), "s")
  assert len(img.relocs) == 2 and all(r.bank == 4 and r.size == 8 and r.target == "global" for r in img.relocs)
  assert len(img.cbufs[4]) == 16 and {r.offset for r in img.relocs} == {0, 8}  # one 8-byte slot per global
  at = {int.from_bytes(img.globals_image[r.addend:r.addend + 4], "little") for r in img.relocs}
  assert at == {7, 0} and len(img.globals_image) >= 16  # the flag's initial value; `zeroed` (12 bytes) as zeros
  assert Reloc(4, 0, 8, "global", 0) in img.relocs or Reloc(4, 8, 8, "global", 0) in img.relocs


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ptx_sin_needs_no_code_relocations(dtype: str) -> None:
  """NVK+NV applies constant-bank relocations only. The PTX renderer's sin reads its 2/pi table at fixed offsets of a .const
  array (ptxas resolves those), not through the table's address (a relocation in the code, which parse_cubin refuses)."""
  from tinygrad import Tensor, dtypes
  from tinygrad.codegen.program import get_program
  from tinygrad.device.devstring import Target
  from tinygrad.helpers import Context
  from tinygrad.schedule.kernelize import create_schedule
  from tinygrad.uop.ops import Ops
  from tinygrad_backend_nv.compiler import nvjitlink_version
  from tinygrad_backend_nv.ptx import PTXRenderer
  if nvjitlink_version() is None: pytest.skip("nvJitLink is not installed (the PTX renderer's cubins come from it)")
  renderer = PTXRenderer(Target("NV", "PTX", "sm_90"))
  with Context(DEV="NULL:PTX:sm_90"):
    items, _ = create_schedule([Tensor.empty(64, dtype=getattr(dtypes, dtype)).sin().uop])
    prog = next(get_program(it.ast, renderer) for it in items if it.ast.op is Ops.SINK)
  assert "[tg_two_over_pi+8]" in prog.src and ", tg_two_over_pi;" not in prog.src  # fixed offsets, its address never taken
  parse_cubin(renderer.compiler.compile(prog.src), prog.name)
