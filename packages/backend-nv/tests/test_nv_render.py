"""What the CUDA and PTX renderers emit, and that every arch compiles (NVRTC -> cubin, PTX -> nvJitLink cubin)."""
from __future__ import annotations

import re

import pytest
from nv_harness import Prog, compile_prog
from tinygrad.device.devstring import Target
from tinygrad.dtype import dtypes
from tinygrad.renderer import CompileError, UnsupportedDTypeError
from tinygrad.uop.dsl import GRID_WAIT, KernelInfo
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_nv.compiler import ARCHS, NVRTCCompiler, PTXCompiler, nvjitlink_version, nvrtc_version
from tinygrad_backend_nv.cuda import DYNAMIC_SMEM_SYMBOL, GRID_WAIT_SYMBOL, CUDARenderer, kernel_names
from tinygrad_backend_nv.ptx import PTX_VERSION, PTXRenderer


def _kernel_prog() -> Prog:
  """A bit of everything: thread indices, a var, a loop with a register accumulator, half/bf16, gated load, math."""
  p = Prog()
  out, a, b = p.glob(0, dtypes.float16), p.glob(1, dtypes.float32), p.glob(2, dtypes.bfloat16)
  n = p(Ops.DEFINE_VAR, dtypes.int32, (), ("n", 1, 64))
  g, l = p.special("gidx0", 4), p.special("lidx0", 64)
  i = p.alu(Ops.ADD, p.alu(Ops.MUL, g, p.const(dtypes.int32, 64)), l)
  acc = p(Ops.DEFINE_REG, dtypes.float32.ptr(1, "reg"), (), 0)
  zero = p.const(dtypes.int32, 0)
  p.store(acc, zero, p.const(dtypes.float32, 0.0))
  r = p.loop(n)
  ok = p.alu(Ops.CMPLT, p.alu(Ops.ADD, i, r), p.const(dtypes.int32, 256))
  x = p.load(a, p.alu(Ops.ADD, i, r), ok, p.const(dtypes.float32, 0.0))
  y = p(Ops.CAST, dtypes.float32, (p.load(b, i),))
  st = p.store(acc, zero, p.alu(Ops.MULACC, x, y, p.load(acc, zero)))
  done = p(Ops.AFTER, acc.dtype, (acc, p.end(r, st)))
  v = p.load(done, zero)
  v = p.alu(Ops.ADD, p(Ops.SIN, dtypes.float32, (v,)), p(Ops.LOG2, dtypes.float32, (p(Ops.EXP2, dtypes.float32, (v,)),)))
  p.store(out, i, p(Ops.CAST, dtypes.float16, (v,)))
  return p


# ---- CUDA C

def test_cuda_signature_and_indices() -> None:
  src = CUDARenderer().render("kern", _kernel_prog().uops)
  assert 'extern "C" __global__ void __launch_bounds__(64) kern(half* __restrict__ data0, float* __restrict__ data1, ' \
         'bfloat16* __restrict__ data2, const int var0 /* n */) {' in src
  assert "int gidx0 = blockIdx.x; /* 4 */" in src and "int lidx0 = threadIdx.x; /* 64 */" in src
  assert "fmaf(" in src and "exp2f(" in src and "log2f(" in src and "sinf(" in src
  assert "__sinf" not in src and "__expf" not in src  # the accurate functions, not the fast intrinsics
  assert "struct half" in src and "struct bfloat16" in src and "#include" not in src
  assert kernel_names(src) == ["kern"]
  assert src == CUDARenderer().render("kern", _kernel_prog().uops)  # deterministic


def test_cuda_prelude_only_when_needed() -> None:
  p = Prog()
  out, a = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 4))
  p.end(r, p.store(out, r, p.alu(Ops.MUL, p.load(a, r), p.load(a, r))))
  src = CUDARenderer().render("sq", p.uops)
  assert "struct" not in src and "__launch_bounds__(1)" in src


def test_a_placed_grid_wait_replaces_the_first_statement() -> None:
  """A BARRIER GRID_WAIT (a hand-written kernel's own place for the wait, after what it may load early) is where the sm_90
  kernel waits for the grids before it, and the only wait. It is predicated on the value loaded before it (both ways): a plain
  wait ptxas schedules above loads whose address is not ready yet, so that they issue after it."""
  p = Prog()
  out, a, b = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32), p.glob(2, dtypes.float32)
  zero = p.const(dtypes.int32, 0)
  early = p.load(a, zero)
  p(Ops.BARRIER, dtypes.void, (early,), GRID_WAIT)
  p.store(out, zero, p.alu(Ops.ADD, early, p.load(b, zero)))
  src = CUDARenderer(Target("CUDA", "CUDA", "sm_90")).render("k", p.uops)
  (wait,) = [line for line in src.splitlines() if "griddepcontrol.wait" in line]
  assert src.index("(data1+") < src.index(wait) < src.index("(data2+")
  assert "@p griddepcontrol.wait" in wait and "@!p griddepcontrol.wait" in wait and "&val0" in wait
  NVRTCCompiler("sm_90").compile(src)


def test_a_spread_kernel_reserves_more_than_half_an_sm() -> None:
  """KernelInfo(spread=True) on sm_90+: the kernel asks for more than half an SM's shared memory (dynamic, told to the runtime
  by a global), so at most one of its blocks is resident an SM; its own buffers sit at the start of it. Not on sm_80 (no early
  launch there), and not without the ask. Every sm_90 kernel still waits for the grids before it (a programmatic edge)."""
  p = Prog()
  out, a = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 4))
  p.end(r, p.store(out, r, p.load(a, r)))
  hopper = CUDARenderer(Target("CUDA", "CUDA", "sm_90"))
  spread = hopper.render("cp", [*p.uops, UOp(Ops.SINK, arg=KernelInfo("cp", spread=True))])
  plain = hopper.render("cp", [*p.uops, UOp(Ops.SINK, arg=KernelInfo("cp"))])
  reserved = int(re.search(rf"{DYNAMIC_SMEM_SYMBOL} = (\d+);", spread).group(1))  # type: ignore[union-attr]
  assert hopper.shared_max // 2 < reserved <= hopper.shared_max and "__launch_bounds__(1, 1)" in spread
  assert DYNAMIC_SMEM_SYMBOL not in plain and GRID_WAIT_SYMBOL in plain and GRID_WAIT_SYMBOL in spread
  ampere = CUDARenderer(Target("CUDA", "CUDA", "sm_80")).render("cp", [*p.uops, UOp(Ops.SINK, arg=KernelInfo("cp", spread=True))])
  assert DYNAMIC_SMEM_SYMBOL not in ampere and "griddepcontrol" not in ampere
  NVRTCCompiler("sm_90").compile(spread)


def test_nvrtc_flags_and_cachekey() -> None:
  c = NVRTCCompiler("sm_86")
  assert "--gpu-architecture=sm_86" in c.opts and "--fmad=false" in c.opts
  assert c.cachekey.startswith(f"nvrtc_{nvrtc_version()}_sm_86")
  assert NVRTCCompiler("sm_90").cachekey != c.cachekey


def test_nvrtc_error_carries_log_and_source() -> None:
  src = 'extern "C" __global__ void broken(float* data0) { data0[0] = undefined_thing; }\n'
  with pytest.raises(CompileError) as e:
    NVRTCCompiler("sm_90").compile(src)
  assert "undefined_thing" in e.value.message and "NVRTC" in str(e.value) and "data0[0] = undefined_thing" in str(e.value)


def test_nvrtc_ptx_is_newer_than_what_we_emit() -> None:
  """Why we ship cubins: NVRTC's own PTX ISA version (9.x for NVRTC 13) can be newer than a driver accepts."""
  ptx = NVRTCCompiler("sm_90").ptx(CUDARenderer().render("kern", _kernel_prog().uops))
  version = re.search(r"^\.version (\d+)\.(\d+)", ptx, re.M)
  assert version is not None and ".target sm_90" in ptx
  assert tuple(map(int, PTX_VERSION.split("."))) <= (9, 0)


# ---- PTX

def test_ptx_header_and_params() -> None:
  src = PTXRenderer(Target("CUDA", "PTX", "sm_80")).render("kern", _kernel_prog().uops)
  assert f".version {PTX_VERSION}\n.target sm_80\n.address_size 64" in src
  assert ".visible .entry kern(\n\t.param .u64 data0,\n\t.param .u64 data1,\n\t.param .u64 data2,\n\t.param .s32 var0\n)" in src
  assert ".maxntid 64, 1, 1" in src
  assert "%ctaid.x" in src and "%tid.x" in src
  assert re.search(r"@%p\d+ ld\.global\.f32", src), "the gated load is predicated"
  assert "ex2.approx.f32" in src and "lg2.approx" not in src and "sin.approx" not in src and ".ftz" not in src
  assert "fma.rn.f32" in src and "cvt.rn.f16.f32" in src
  assert ".local" not in src, "the constant-indexed accumulator is a register"


def test_ptx_float_ops_are_not_contracted() -> None:
  p = Prog()
  out, a = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 4))
  x = p.load(a, r)
  p.end(r, p.store(out, r, p.alu(Ops.ADD, p.alu(Ops.MUL, x, x), x)))
  src = PTXRenderer().render("k", p.uops)
  assert "mul.rn.f32" in src and "add.rn.f32" in src and "fma" not in src


def test_ptx_negative_zero_is_its_own_constant() -> None:
  # -0.0 == 0.0 in Python: one register for both made fmod's signed zero remainder +0.0 on CUDA:PTX
  p = Prog()
  out, a = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 4))
  x = p.load(a, r)
  zero = p.alu(Ops.WHERE, p.alu(Ops.CMPLT, x, p.const(dtypes.float32, 0.0)), p.const(dtypes.float32, -0.0), p.const(dtypes.float32, 0.0))
  p.end(r, p.store(out, r, zero))
  src = PTXRenderer().render("k", p.uops)
  assert "0f80000000" in src and "0f00000000" in src


def test_ptx_sm75_bf16_without_cvt() -> None:
  src = PTXRenderer(Target("CUDA", "PTX", "sm_75")).render("k", _kernel_prog().uops)
  assert "cvt.rn.bf16" not in src
  assert "cvt.rn.bf16.f32" in PTXRenderer(Target("CUDA", "PTX", "sm_80")).render("k", _cast_to_bf16().uops)


def _cast_to_bf16() -> Prog:
  p = Prog()
  out, a = p.glob(0, dtypes.bfloat16), p.glob(1, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 4))
  p.end(r, p.store(out, r, p(Ops.CAST, dtypes.bfloat16, (p.load(a, r),))))
  return p


def test_ptx_compiler_modes() -> None:
  src = PTXRenderer().render("k", _kernel_prog().uops)
  text = PTXCompiler("sm_90", use_nvjitlink=False)
  assert text.compile(src) == src.encode() + b"\x00" and text.cachekey == "ptx_sm_90_text"
  if nvjitlink_version() is None: pytest.skip("nvJitLink is not installed")
  assert PTXCompiler("sm_90").compile(src)[:4] == b"\x7fELF"


def test_ptx_error_is_compile_error() -> None:
  if nvjitlink_version() is None: pytest.skip("nvJitLink is not installed")
  bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { not_an_instruction; ret; }\n"
  with pytest.raises(CompileError, match="not_an_instruction"):
    PTXCompiler("sm_90").compile(bad)


def test_fp8_is_a_clear_error() -> None:
  p = Prog()
  p.glob(0, dtypes.fp8e4m3)
  for r in (CUDARenderer(), PTXRenderer()):
    with pytest.raises(UnsupportedDTypeError, match="fp8"):
      r.render("k", p.uops)


# ---- every arch compiles

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["CUDA", "PTX"])
def test_every_arch_compiles_to_a_cubin(kind: str, arch: str) -> None:
  r = (CUDARenderer if kind == "CUDA" else PTXRenderer)(Target("CUDA", kind, arch))
  if kind == "PTX" and nvjitlink_version() is None: pytest.skip("nvJitLink is not installed")
  for prog in (_kernel_prog(), _cast_to_bf16()):
    _, src, lib = compile_prog(prog, r)
    assert lib[:4] == b"\x7fELF", f"{kind} {arch}: not a cubin"
    if kind == "PTX": assert f".target {arch}" in src


def _atomic_sources(dev: str, dtype) -> str:
  """The rendered (and compiled) source of a kernel whose threads each add into 4 neighbouring elements shared with other blocks."""
  from tinygrad import Context, Tensor
  from tinygrad.engine import realize
  from tinygrad.uop.dsl import AxisType
  def kernel(out: UOp, x: UOp) -> UOp:
    b, t = UOp.range(8, 0, AxisType.GLOBAL), UOp.range(32, 1, AxisType.LOCAL)
    adds = [out[t * 4 + j].atomic_add(x[b * 32 + t]) for j in range(4)]  # float4-shaped: must stay four scalar adds
    return UOp.sink(*adds, arg=KernelInfo("adds"))
  with Context(DEV=dev):
    realize.capturing.append(cap := realize.Capture(jit=False))
    try: Tensor.zeros(128, dtype=dtype).contiguous().custom_kernel(Tensor.ones(256, dtype=dtype).contiguous(), fxn=kernel)[0].realize()
    finally: realize.capturing.pop()
  return next(ei.runner.spec.src for ei, _ in cap.items if ei.runner is not None and ei.runner.spec.name.startswith("adds"))


def test_atomic_adds_render_one_per_element() -> None:
  """UOp.atomic_add: CUDA's atomicAdd (64-bit ints as unsigned long long), PTX's red.global.add; neighbouring adds are not merged
  into a vector store (which would not be atomic), and both compile."""
  src = _atomic_sources("NULL:CUDA:sm_90", dtypes.float32)
  assert src.count("atomicAdd(") == 4 and "float4" not in src
  assert _atomic_sources("NULL:CUDA:sm_90", dtypes.int64).count("atomicAdd((unsigned long long*)") == 4
  assert _atomic_sources("NULL:PTX:sm_90", dtypes.float32).count("red.global.add.f32") == 4
  assert _atomic_sources("NULL:PTX:sm_90", dtypes.int64).count("red.global.add.u64") == 4
