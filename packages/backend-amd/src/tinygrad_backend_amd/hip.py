"""The HIP renderer: a linearized program as HIP C (core's CStyleRenderer), compiled device-only by clang for
`amdgcn-amd-amdhsa` into a code object (clang links it with its ld.lld).

No headers: `-nogpuinc -nogpulib` (no ROCm install), so thread indices, barriers and tensor cores are clang's
`__builtin_amdgcn_*` builtins and vectors are ext_vector_type. Math follows tinygrad.uop.alu where the hardware allows:
float32 exp2/log2/sqrt are LLVM's AMDGPU lowerings (v_exp_f32/v_log_f32 with denormal scaling, ~1 ulp; sqrt correctly
rounded), sin and every float64 transcendental go through the float64 sequences in `_F64_MATH` (no ocml here:
llvm.sin.f64 has no AMDGPU lowering). No FMA contraction (-ffp-contract=off) except for MULACC.
"""
from __future__ import annotations

import os
import subprocess
import tempfile

from tinygrad.device.plugin import CompileError, Compiler, CStyleRenderer, DType, Ops, PtrDType, Target, UOp, dtypes

from tinygrad_backend_amd.archs import DEFAULT_ARCH, ToolchainError, arch_info, check_llvm_version
from tinygrad_backend_amd.codeobject import check_code_object
from tinygrad_backend_amd.fnuz import pm_amd_fp8
from tinygrad_backend_amd.toolchain import INSTALL_CLANG, find_clang

LOCAL_SIZE = 256  # threads per workgroup the codegen uses (4 waves of 64 on CDNA, 8 of 32 on RDNA)
_HALFS = (dtypes.float16, dtypes.bfloat16)

# float64 exp2/log2/sin in plain C: AMDGPU has no instructions for them and we link no device library (ocml).
# exp2: x = n + f (|f| <= 1/2), 2^f by its Taylor series in f*ln2 (15 terms), scaled by 2^n (ldexp).
# log2: x = m * 2^e (m in [sqrt(1/2), sqrt(2))), ln m = 2 atanh(s) with s = (m-1)/(m+1) (|s| < 0.172, 12 terms).
# sin: Cody-Waite reduction by pi/2 in four parts (fdlibm's 33-bit pio2_1..3 and a tail: q*part is exact for
# |x| < 2^20 or so, beyond it loses digits), then the sin/cos series (to r^17, r^16) on [-pi/4, pi/4] by quadrant.
_F64_MATH: dict[str, str] = {
  "tg_exp2": """\
static __attribute__((device)) __attribute__((always_inline)) double tg_exp2(double x) {
  if (x != x) return x;
  if (x > 1024.0) return __builtin_inf();
  if (x < -1080.0) return 0.0;
  double n = __builtin_rint(x), f = (x - n) * 0.6931471805599453094, p = 1.0 / 87178291200.0;
  const double c[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
                        1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};
  for (int i = 0; i < 14; i++) p = p * f + c[i];
  return __builtin_ldexp(p, (int)n);
}""",
  "tg_log2": """\
static __attribute__((device)) __attribute__((always_inline)) double tg_log2(double x) {
  if (x != x || x < 0.0) return __builtin_nan("");
  if (x == 0.0) return -__builtin_inf();
  if (x == __builtin_inf()) return x;
  int e; double m = __builtin_frexp(x, &e);
  if (m < 0.70710678118654752440) { m *= 2.0; e -= 1; }
  double s = (m - 1.0) / (m + 1.0), s2 = s * s, p = 1.0 / 23.0;
  for (int k = 21; k >= 1; k -= 2) p = p * s2 + 1.0 / k;
  return (double)e + 2.0 * s * p * 1.44269504088896340736;
}""",
  "tg_sin": """\
static __attribute__((device)) __attribute__((always_inline)) double tg_sin(double x) {
  if (x - x != 0.0) return __builtin_nan("");
  double q = __builtin_rint(x * 0.63661977236758134308);
  double r = (((x - q * 1.57079632673412561417) - q * 6.07710050630396597660e-11) - q * 2.02226624871116645580e-21) - q * 8.47842766036889956997e-32;
  int n = (int)(q - 4.0 * __builtin_floor(q * 0.25));  /* the quadrant, q mod 4 (exact: q is an integer) */
  double r2 = r * r, s = 1.0 / 355687428096000.0, c = 1.0 / 20922789888000.0;
  const double sc[7] = {-1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0};
  const double cc[8] = {-1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0, -0.5, 1.0};
  for (int i = 0; i < 7; i++) s = s * r2 + sc[i];
  for (int i = 0; i < 8; i++) c = c * r2 + cc[i];
  s = r + r * r2 * s;
  double v = (n & 1) ? c : s;
  v = (n & 2) ? -v : v;
  return __builtin_fmin(__builtin_fmax(v, -1.0), 1.0);  /* past 2^52 the reduction is meaningless: stay in [-1, 1] */
}""",
}

_MATH32 = {"exp2": "__builtin_exp2f", "log2": "__builtin_log2f", "sqrt": "__builtin_sqrtf", "trunc": "__builtin_truncf"}
_MATH64 = {"exp2": "tg_exp2", "log2": "tg_log2", "sin": "tg_sin", "sqrt": "__builtin_sqrt", "trunc": "__builtin_trunc"}


def _mulacc(r: HIPRenderer, dt: DType, a: str, b: str, c: str) -> str:
  # alu: a*b+c with an exact product, rounded once; fma is that for float/double, and for half/bf16 through float
  if dt == dtypes.float32: return f"__builtin_fmaf({a},{b},{c})"
  if dt == dtypes.float64: return f"(({a}*{b})+{c})"  # alu's Python floats round twice too
  if dt in _HALFS: return f"(({r.render_dtype(dt)})__builtin_fmaf((float){a},(float){b},(float){c}))"
  return f"(({a}*{b})+{c})"


class HIPRenderer(CStyleRenderer):
  """HIP C without headers: `extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(1, N))) void name(
  T* __restrict__ data0, ...)`, thread indices, barriers and tensor cores from clang's __builtin_amdgcn_* builtins."""
  device = "AMD"
  name = "HIP"
  has_local = True
  has_shared = True
  supports_float4 = True
  vector_dtypes = (dtypes.float32, dtypes.float16, dtypes.bfloat16)
  local_max = (LOCAL_SIZE,)
  global_max = (2 ** 31 - 1, 65535, 65535)
  kernel_prefix = 'extern "C" __attribute__((global)) '
  buffer_suffix = " __restrict__"
  var_prefix = "const "
  helper_prefix = "static __attribute__((device)) __attribute__((always_inline)) "
  special_index = {"gidx": "(int)__builtin_amdgcn_workgroup_id_{xyz}()", "lidx": "(int)__builtin_amdgcn_workitem_id_{xyz}()"}
  type_map = {**CStyleRenderer.type_map, dtypes.bool: "bool", dtypes.float16: "_Float16", dtypes.bfloat16: "__bf16"}
  code_for_op = {**CStyleRenderer.code_for_op, Ops.MULACC: _mulacc}
  # fp8 values are bytes, converted by integer code in the kernel, not by v_cvt_f32_fp8/v_cvt_pk_fp8_f32: gfx942's converts
  # are the FNUZ formats (bias 8, NaN 0x80, no -0, no inf), not the OCP e4m3fn/e5m2 of dtypes.fp8e4m3/fp8e5m2; gfx950's
  # are OCP, but their overflow/NaN handling (saturation is an instruction modifier) was never checked on hardware here
  extra_matcher = pm_amd_fp8  # fnuz.py: gfx942's fp8 MFMA reads FNUZ
  compiler: HIPCompiler
  atomic_add = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)  # clang's atomic builtin
  render_atomic_add = CStyleRenderer.render_atomic_add_builtin

  def __init__(self, target: Target | None = None):
    target = target or Target("AMD", "HIP", DEFAULT_ARCH)
    self.arch = target.arch or DEFAULT_ARCH
    self.info = arch_info(self.arch)
    self.shared_max = self.info.lds
    self.compiler = HIPCompiler(self.arch)

  def __reduce__(self) -> tuple: return HIPRenderer, (Target(self.device, self.name, self.arch),)

  @property
  def tensor_cores(self):
    from tinygrad_backend_amd.tensor_cores import tensor_cores_for
    return tuple(tensor_cores_for(self.arch))

  # ---- vectors: clang's ext_vector_type (typedefs in the prelude)
  def render_vector_dtype(self, dt: DType) -> str: return f"{_vec_name(self.render_dtype(dt.scalar()))}{dt.count}"
  def render_gep(self, x: str, lane: int, dt: DType | None = None) -> str: return f"{x}[{lane}]"

  # ---- shared memory, barriers, tensor cores
  def render_define_local(self, name: str, dt: PtrDType) -> str:
    return f"__attribute__((shared)) __attribute__((aligned(16))) {self.render_dtype(dt.base)} {name}[{dt.size}];"

  def render_barrier(self, u: UOp) -> str:
    # the fences make LDS writes before the barrier visible to the workgroup after it (what __syncthreads() does)
    return ('__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); '
            '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");')

  def render_wmma(self, u: UOp, operands: list[str]) -> str:
    tc = next((tc for tc in self.tensor_cores if tc.name == u.arg[0]), None)
    if tc is None: raise NotImplementedError(f"{self.arch} has no tensor core {u.arg[0]!r}")
    a, b, c = operands
    if pack := tc.extra.get("pack"):  # int8/fp8 fragments go in as packed ints: a bit cast, same size
      a, b = f"__builtin_bit_cast({pack}, {a})", f"__builtin_bit_cast({pack}, {b})"
    if tc.threads == 64: return f"{tc.extra['builtin']}({a}, {b}, {c}, 0, 0, 0)"  # MFMA: cbsz, abid, blgp = 0 (no broadcast)
    if tc.dtype_in == dtypes.int8: return f"{tc.extra['builtin']}(true, {a}, true, {b}, {c}, false)"  # iu8: both signed, no clamp
    if tc.extra.get("opsel"): return f"tg_{tc.name}({a}, {b}, {c})"  # the helper packs C into / D out of the low halves
    return f"{tc.extra['builtin']}({a}, {b}, {c})"

  # ---- constants and math
  def math_fn_name(self, fn: str, dt: DType) -> str | None:
    return {dtypes.float32: _MATH32, dtypes.float64: _MATH64}.get(dt, {}).get(fn)

  def render_math(self, fn: str, dt: DType, x: str) -> str:
    if fn == "sin" and dt != dtypes.float64: return f"(({self.render_dtype(dt)})tg_sin((double){x}))"  # v_sin_f32 is approximate
    return super().render_math(fn, dt, x)

  # ---- prelude and signature
  def helpers(self) -> list[tuple[str, str]]:
    vec = [(f"{_vec_name(s)}{n}", f"typedef {s} {_vec_name(s)}{n} __attribute__((ext_vector_type({n})));")
           for s in ("float", "_Float16", "__bf16", "int", "unsigned int", "double", "signed char", "unsigned char") for n in (2, 4, 8, 16)]
    # f16-accumulating WMMA on RDNA3 (opsel 0): the 8 accumulators of a lane are the low halves of 8 registers, a half16
    # whose even elements they are
    opsel = [(f"tg_{tc.name}(", f"{self.helper_prefix}half8 tg_{tc.name}(half16 a, half16 b, half8 c) {{\n"
              f"  half16 d = {tc.extra['builtin']}(a, b, __builtin_shufflevector(c, c, {', '.join(f'{i}, -1' for i in range(8))}), false);\n"
              f"  return __builtin_shufflevector(d, d, {', '.join(str(2 * i) for i in range(8))});\n}}")
             for tc in self.tensor_cores if tc.extra.get("opsel")]
    return [*vec, *opsel, *((f"{fn}(", code) for fn, code in _F64_MATH.items()), *super().helpers()]

  def render(self, name: str, uops: list[UOp]) -> str:
    shared = sum(u.dtype.size * u.dtype.base.itemsize for u in uops if u.op is Ops.DEFINE_LOCAL)  # type: ignore[attr-defined]
    if shared > self.shared_max: raise ValueError(f"kernel {name} needs {shared} bytes of LDS; {self.arch} allows {self.shared_max}")
    src = super().render(name, uops)
    threads = 1
    for u in uops:
      if u.op is Ops.SPECIAL and u.arg[0].startswith("lidx"): threads *= int(u.arg[1])
    head = f"{self.kernel_prefix}void {name}("
    return src.replace(head, f"{self.kernel_prefix}__attribute__((amdgpu_flat_work_group_size(1, {threads}))) void {name}(", 1)


def _vec_name(scalar: str) -> str:
  return {"_Float16": "half", "__bf16": "bf16x", "unsigned int": "uint", "signed char": "schar", "unsigned char": "uchar"}.get(scalar, scalar)


class HIPCompiler(Compiler):
  """HIP C -> AMDGPU code object (ELF), by clang -x hip --cuda-device-only; the result is checked to be one for the arch."""

  def __init__(self, arch: str):
    self.arch = arch
    self.clang = find_clang()
    check_llvm_version(arch, f"{self.clang.path}", self.clang.major, INSTALL_CLANG)
    self.cachekey = f"amd_hip_{self.clang.major}_{arch}"

  def __reduce__(self) -> tuple: return HIPCompiler, (self.arch,)

  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
      path, out = os.path.join(tmp, "kernel.hip"), os.path.join(tmp, "kernel.hsaco")
      with open(path, "w") as f: f.write(src)
      cmd = [self.clang.path, "-x", "hip", f"--offload-arch={self.arch}", "--cuda-device-only", "--no-gpu-bundle-output", "-nogpulib",
             "-nogpuinc", "-O3", "-ffp-contract=off", "-fno-exceptions", "-w", "-c", path, "-o", out]
      proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
      if proc.returncode != 0: raise CompileError(f"clang {self.clang.major} (HIP, {self.arch})", src, proc.stderr)
      with open(out, "rb") as f: lib = f.read()
    check_code_object(lib, self.arch)
    return lib


def hip_available() -> str | None:
  try: find_clang()
  except ToolchainError as e: return str(e)
  return None
