"""QCOMCL's OpenCL C: what each arch renders (native half on Adreno, 16-bit storage elsewhere), and that the OpenCL
front end (PoCL's here) accepts it."""
from __future__ import annotations

import pytest
from tinygrad import Tensor, dtypes
from tinygrad.codegen.program import lower_kernel
from tinygrad.device.devstring import Target
from tinygrad.renderer import CompileError, UnsupportedDTypeError
from tinygrad_backend_qcom.opencl import cl_status
from tinygrad_backend_qcom.qcomcl import QCOMCLRenderer

needs_cl = pytest.mark.skipif(cl_status()[1] is not None, reason=f"no OpenCL device: {cl_status()[1]}")


def render(t: Tensor, arch: str, opts: tuple[str, ...] = ()) -> tuple[QCOMCLRenderer, list[str]]:
  r = QCOMCLRenderer(Target("NULL", "QCOMCL", arch, opts))
  return r, [r.render(f"k{i}", lower_kernel(item.ast, r)) for i, item in enumerate(t.schedule()) if item.ast.op.name == "SINK"]


def _half_program() -> Tensor:
  a = Tensor.empty(64, dtype=dtypes.float16)
  return ((a * a + 1).exp2() / 3).cast(dtypes.float16)


def test_adreno_renders_native_half() -> None:
  _, (src,) = render(_half_program(), "a630")
  assert "#pragma OPENCL EXTENSION cl_khr_fp16 : enable" in src and "#pragma OPENCL FP_CONTRACT OFF" in src
  assert "__kernel void k0(__global half* restrict data0, __global half* restrict data1)" in src
  assert "vload_half" not in src and "double" not in src and "cl_khr_fp64" not in src


def test_without_fp16_half_is_16_bits_in_memory_and_rounded_floats_in_registers() -> None:
  _, (src,) = render(_half_program(), "cl_fp64")
  assert "cl_khr_fp16" not in src and "__global half* restrict data0" in src
  assert "vload_half(0, " in src and "vstore_half(" in src and "tg_rh(" in src
  assert "half alu" not in src and "half val" not in src  # no half-typed values: those need cl_khr_fp16


def test_adreno_has_no_double() -> None:
  with pytest.raises(UnsupportedDTypeError, match="double"): render(Tensor.empty(8, dtype=dtypes.float64) + 1, "a630")


def test_thread_indices_and_local_memory() -> None:
  _, srcs = render(Tensor.empty(4, 5000).sum(axis=1), "a640")
  src = "\n".join(srcs)
  assert "get_group_id(0)" in src or "get_local_id(0)" in src
  if "__local" in src: assert "barrier(CLK_LOCAL_MEM_FENCE);" in src


def test_options_reach_the_renderer() -> None:
  r, _ = render(Tensor.empty(4) + 1, "a630", ("IMAGE_PITCH_ALIGNMENT=128", "LOCAL_SIZE=64"))
  assert r.options == {"IMAGE_PITCH_ALIGNMENT": 128, "LOCAL_SIZE": 64} and r.local_max == (64,)
  assert r.params()["IMAGE_PITCH_ALIGNMENT"] == 128


@needs_cl
@pytest.mark.parametrize("arch", ["a630", "a740", "cl", "cl_fp64"])
def test_float_and_int_kernels_compile(arch: str) -> None:
  x, i = Tensor.empty(16, 33), Tensor.empty(16, 33, dtype=dtypes.int32)
  r, srcs = render(((x @ x.T).softmax(axis=1).sum() + (i // 3 % 5).max().cast(dtypes.float32)), arch)
  for src in srcs: assert r.compiler.compile(src)


@needs_cl
def test_half_kernels_compile_or_say_why() -> None:
  r, (src,) = render(_half_program(), "cl_fp64")
  assert r.compiler.compile(src)
  r, (src,) = render(_half_program(), "a630")
  from tinygrad_backend_qcom.compiler import compile_context
  from tinygrad_backend_qcom.opencl import device_info
  if device_info(compile_context()[1])["fp16"]: assert r.compiler.compile(src)
  else:
    with pytest.raises(CompileError, match="lacks"): r.compiler.compile(src)
