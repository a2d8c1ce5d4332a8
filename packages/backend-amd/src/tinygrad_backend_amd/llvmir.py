"""The AMD LLVM renderer: backend-cpu's LLVM IR builder, extended for `amdgcn-amd-amdhsa`, compiled by llvmlite's AMDGPU
target into an object and linked into a code object by the ziglang wheel's ld.lld (so it needs PyPI packages only).

What changes from the CPU's IR: kernels are `amdgpu_kernel` functions with `ptr addrspace(1)` buffers (cast to flat
pointers at entry; LLVM's address-space inference turns the accesses back into global ones), thread indices are the
`llvm.amdgcn.workitem.id.*` / `workgroup.id.*` intrinsics, shared memory is an `addrspace(3)` global, registers are
`addrspace(5)` allocas, and BARRIER is `s.barrier` between workgroup fences. Elementwise code is scalar; the vectors
core's tensor-core lowering makes (fragments: vector LOAD/STORE/VECTORIZE/GEP, vector registers) are LLVM vectors, and
WMMA is the arch's `llvm.amdgcn.wmma.*` / `llvm.amdgcn.mfma.*` intrinsic (tensor_cores.py names it and its operand
type; bf16 vectors are `<n x i16>` bits, int8 ones `<n x i8>` bitcast to the intrinsic's packed i32s). float64
exp2/log2/sin and every sin are our own sequences (the same as the HIP renderer's `tg_*` helpers): AMDGPU has no
instructions for them and we link no device library.
"""
from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from typing import Any

from tinygrad.device.plugin import CompileError, Compiler, DType, DTypeSet, Ops, PtrDType, Renderer, Target, TensorCore, UOp, dtypes
from tinygrad_backend_cpu.llvmir import _FunctionBuilder, const_literal, mem_type, reg_type

from tinygrad_backend_amd.archs import DEFAULT_ARCH, arch_info, check_llvm_version
from tinygrad_backend_amd.codeobject import check_code_object
from tinygrad_backend_amd.fnuz import pm_amd_fp8
from tinygrad_backend_amd.toolchain import llvmlite_major, zig_lld

TRIPLE = "amdgcn-amd-amdhsa"
LOCAL_SIZE = 256


@functools.cache
def _target_machine(arch: str) -> Any:
  import llvmlite.binding as llvm
  llvm.initialize_all_targets()
  llvm.initialize_all_asmprinters()
  return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features="", opt=2, reloc="pic")


def amd_llvm_available() -> str | None:
  try:
    _target_machine(DEFAULT_ARCH)
    zig_lld()
  except (ImportError, RuntimeError) as e: return f"llvmlite can't target AMDGPU here: {e}"
  return None


class AMDLLVMCompiler(Compiler):
  """LLVM IR -> (llvmlite, O2) AMDGPU object -> (ziglang's ld.lld -shared) code object, checked to be one for the arch."""

  def __init__(self, arch: str):
    self.arch = arch
    check_llvm_version(arch, "llvmlite's LLVM", llvmlite_major(), "upgrade llvmlite (pip install -U llvmlite)")
    self.cachekey = f"amd_llvm_{llvmlite_major()}_{arch}"

  def __reduce__(self) -> tuple: return AMDLLVMCompiler, (self.arch,)

  def compile(self, src: str) -> bytes:
    import llvmlite.binding as llvm
    tm = _target_machine(self.arch)
    try:
      mod = llvm.parse_assembly(src)
      mod.verify()
    except RuntimeError as e: raise CompileError(f"LLVM ({self.arch})", src, str(e)) from e
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    obj = bytes(tm.emit_object(mod))
    with tempfile.TemporaryDirectory() as tmp:
      o, out = os.path.join(tmp, "kernel.o"), os.path.join(tmp, "kernel.hsaco")
      with open(o, "wb") as f: f.write(obj)
      proc = subprocess.run([*zig_lld(), "-shared", o, "-o", out], capture_output=True, text=True, check=False)
      if proc.returncode != 0: raise CompileError("ld.lld (ziglang)", src, proc.stderr)
      with open(out, "rb") as f: lib = f.read()
    check_code_object(lib, self.arch)
    return lib


class AMDLLVMRenderer(Renderer):
  device = "AMD"
  name = "LLVM"
  has_local = True
  has_shared = True
  local_max = (LOCAL_SIZE,)
  global_max = (2 ** 31 - 1, 65535, 65535)
  supported_dtypes = DTypeSet({dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64,
                               dtypes.uint64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.void,
                               dtypes.fp8e4m3, dtypes.fp8e5m2})
  extra_matcher = pm_amd_fp8  # fp8 values are bytes converted in the kernel (hip.py says why not v_cvt_*fp8); fnuz.py
  atomic_add = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)  # atomicrmw (the CPU builder's)

  def __init__(self, target: Target | None = None):
    target = target or Target("AMD", "LLVM", DEFAULT_ARCH)
    self.arch = target.arch or DEFAULT_ARCH
    self.shared_max = arch_info(self.arch).lds
    self.compiler = AMDLLVMCompiler(self.arch)

  def __reduce__(self) -> tuple: return AMDLLVMRenderer, (Target(self.device, self.name, self.arch),)

  @property
  def tensor_cores(self):
    from tinygrad_backend_amd.tensor_cores import tensor_cores_for
    return tuple(tensor_cores_for(self.arch))

  def render(self, name: str, uops: list[UOp]) -> str:
    return _AMDFunctionBuilder(name, uops, datalayout=str(_target_machine(self.arch).target_data), tcs=self.tensor_cores).build()


def _vt(dt: DType) -> str:
  """An LLVM vector type for a vector dtype, the same in registers and memory: bf16 elements are their i16 bits."""
  return f"<{dt.count} x {'i16' if dt.scalar() == dtypes.bfloat16 else reg_type(dt.scalar())}>"


_LN2 = 0.6931471805599453094
_INF, _NINF, _NAN = (const_literal(v, dtypes.float64) for v in (float('inf'), float('-inf'), float('nan')))
_EXP2_COEFFS = [1.0 / 87178291200.0, 1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
                1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0]
_SIN_COEFFS = [1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0]
_COS_COEFFS = [1.0 / 20922789888000.0, -1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0, -0.5, 1.0]


class _AMDFunctionBuilder(_FunctionBuilder):
  def __init__(self, name: str, uops: list[UOp], datalayout: str, tcs: tuple[TensorCore, ...] = ()):
    super().__init__(name, uops)
    self.datalayout, self.tcs = datalayout, {tc.name: tc for tc in tcs}
    self.globals_: list[str] = []  # module-level definitions (shared memory)

  def d(self, v: float) -> str: return const_literal(v, dtypes.float64)

  def build(self) -> str:
    params = self._params()
    for u in self.uops: self._render(u)
    threads = 1
    for u in self.uops:
      if u.op is Ops.SPECIAL and u.arg[0].startswith("lidx"): threads *= int(u.arg[1])
    body = ["entry:", *self.allocas, *self.lines, "  ret void"]
    head = f'define amdgpu_kernel void @"{self.name}"({", ".join(params)}) #0 {{'
    attrs = f'attributes #0 = {{ nounwind "amdgpu-flat-work-group-size"="1,{threads}" }}'
    return "\n".join([f'target datalayout = "{self.datalayout}"', f'target triple = "{TRIPLE}"', *self.globals_, *self.decls.values(), "",
                      head, *body, "}", "", attrs, ""])

  def _params(self) -> list[str]:
    bufs = sorted((u for u in self.uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
    for u in bufs:  # flat pointers in the body: address-space inference makes the accesses global again
      self.allocas.append(f"  %data{u.arg}.flat = addrspacecast ptr addrspace(1) %data{u.arg} to ptr")
      self.vals[u] = f"%data{u.arg}.flat"
    variables = [u for u in self.uops if u.op is Ops.DEFINE_VAR]
    for i, u in enumerate(variables): self.vals[u] = f"%var{i}"
    return [f"ptr addrspace(1) noalias %data{u.arg}" for u in bufs] + [f"{reg_type(u.dtype)} %var{i}" for i, u in enumerate(variables)]

  def _render(self, u: UOp) -> None:
    if u.op is Ops.DEFINE_REG: return self.define_reg(u)  # the CPU builder's _HANDLERS would call its own
    if u.op is Ops.SPECIAL: return self.special(u)
    if u.op is Ops.DEFINE_LOCAL: return self.define_local(u)
    if u.op is Ops.BARRIER: return self.barrier(u)
    if u.op is Ops.VECTORIZE: return self.vectorize(u)
    if u.op is Ops.GEP: return self.gep(u)
    if u.op is Ops.WMMA: return self.wmma(u)
    if u.op is Ops.INDEX and isinstance(buf_dt := u.src[0].dtype, PtrDType) and buf_dt.base.count > 1: return self.vec_index(u)
    if u.op is Ops.LOAD and u.dtype.count > 1: return self.vec_load(u)
    if u.op is Ops.STORE and u.src[1].dtype.count > 1: return self.vec_store(u)
    if u.op in (Ops.EXP2, Ops.LOG2, Ops.SIN) and (u.dtype == dtypes.float64 or u.op is Ops.SIN):
      x = self.v(u.src[0])
      t = reg_type(u.dtype)
      if t != "double": x = self.emit(f"fpext {t} {x} to double")
      r = {Ops.EXP2: self.exp2_f64, Ops.LOG2: self.log2_f64, Ops.SIN: self.sin_f64}[u.op](x)
      if t != "double": r = self._float_to_float(r, dtypes.float64, u.dtype)
      self.vals[u] = r
      return None
    return super()._render(u)

  def define_reg(self, u: UOp) -> None:
    assert isinstance(u.dtype, PtrDType)
    n = len(self.allocas)
    et = _vt(u.dtype.base) if u.dtype.base.count > 1 else mem_type(u.dtype.base, True)
    self.allocas.append(f"  %reg{n}.p = alloca [{u.dtype.size} x {et}], align 16, addrspace(5)")
    self.allocas.append(f"  %reg{n} = addrspacecast ptr addrspace(5) %reg{n}.p to ptr")
    self.vals[u] = f"%reg{n}"

  def define_local(self, u: UOp) -> None:
    assert isinstance(u.dtype, PtrDType)
    n = len(self.globals_)
    self.globals_.append(f"@smem{n} = internal addrspace(3) global [{u.dtype.size} x {mem_type(u.dtype.base)}] undef, align 16")
    self.allocas.append(f"  %smem{n} = addrspacecast ptr addrspace(3) @smem{n} to ptr")
    self.vals[u] = f"%smem{n}"

  def special(self, u: UOp) -> None:
    kind, axis = u.arg[0][:4], int(u.arg[0][4:])
    fn = {"gidx": "workgroup", "lidx": "workitem"}.get(kind)
    if fn is None: raise NotImplementedError(f"AMD LLVM renders no thread index {u.arg[0]!r}")
    v = self.call(f"llvm.amdgcn.{fn}.id.{'xyz'[axis]}", "i32")
    self.vals[u] = v if u.dtype.itemsize == 4 else self._int_to_int(v, dtypes.int32, u.dtype)

  def barrier(self, u: UOp) -> None:
    self.lines.append('  fence syncscope("workgroup") release')
    self.decls["llvm.amdgcn.s.barrier"] = "declare void @llvm.amdgcn.s.barrier()"
    self.lines.append("  call void @llvm.amdgcn.s.barrier()")
    self.lines.append('  fence syncscope("workgroup") acquire')

  # ---- vectors (tensor-core fragments and accumulators)
  def vec_index(self, u: UOp) -> None:  # an element of a buffer of vectors (DEFINE_REG of accumulators/fragments)
    assert isinstance(u.src[0].dtype, PtrDType)
    self.vals[u] = self.emit(f"getelementptr inbounds {_vt(u.src[0].dtype.base)}, ptr {self.v(u.src[0])}, {reg_type(u.src[1].dtype)} {self.v(u.src[1])}", "p")

  def _align(self, dt: DType) -> int: return min(16, dt.itemsize * dt.count)  # the lowering keeps vector accesses this aligned

  def vec_load(self, u: UOp) -> None:
    if len(u.src) != 1: raise NotImplementedError(f"AMD LLVM renders no gated vector load ({u.dtype!r})")
    self.vals[u] = self.emit(f"load {_vt(u.dtype)}, ptr {self.v(u.src[0])}, align {self._align(u.dtype)}")

  def vec_store(self, u: UOp) -> None:
    if len(u.src) != 2: raise NotImplementedError(f"AMD LLVM renders no gated vector store ({u.src[1].dtype!r})")
    dt = u.src[1].dtype
    self.lines.append(f"  store {_vt(dt)} {self.v(u.src[1])}, ptr {self.v(u.src[0])}, align {self._align(dt)}")

  def vectorize(self, u: UOp) -> None:
    vec, bf16 = "poison", u.dtype.scalar() == dtypes.bfloat16
    for i, s in enumerate(u.src):
      x = self.v(s)
      if bf16: x = self.float_to_bf16_bits(x)  # bf16-exact floats in registers: their top 16 bits
      vec = self.emit(f"insertelement {_vt(u.dtype)} {vec}, {'i16' if bf16 else reg_type(s.dtype)} {x}, i32 {i}")
    self.vals[u] = vec

  def gep(self, u: UOp) -> None:
    src_t = _vt(u.src[0].dtype)
    if u.dtype.count > 1:
      mask = ", ".join(f"i32 {i}" for i in u.arg)
      self.vals[u] = self.emit(f"shufflevector {src_t} {self.v(u.src[0])}, {src_t} poison, <{len(u.arg)} x i32> <{mask}>")
      return
    x = self.emit(f"extractelement {src_t} {self.v(u.src[0])}, i32 {u.arg[0]}")
    self.vals[u] = self.bf16_bits_to_float(x) if u.dtype == dtypes.bfloat16 else x

  def wmma(self, u: UOp) -> None:
    tc = self.tcs.get(u.arg[0])
    if tc is None: raise NotImplementedError(f"no tensor core {u.arg[0]!r} on this arch")
    ir_in, ret = tc.extra["ir_in"], _vt(u.dtype)
    a, b = (self.v(s) if _vt(s.dtype) == ir_in else self.emit(f"bitcast {_vt(s.dtype)} {self.v(s)} to {ir_in}") for s in u.src[:2])
    c = (ret, self.v(u.src[2]))
    if tc.extra.get("opsel"):  # RDNA3 f16 accumulators: the low halves of 8 registers, the even elements of a <16 x half>
      wide = self.emit(f"shufflevector {ret} {c[1]}, {ret} poison, <16 x i32> <{', '.join(f'i32 {i}, i32 poison' for i in range(8))}>")
      d = self.call(tc.extra["intrinsic"], "<16 x half>", (ir_in, a), (ir_in, b), ("<16 x half>", wide), ("i1", "false"))
      self.vals[u] = self.emit(f"shufflevector <16 x half> {d}, <16 x half> poison, <8 x i32> <{', '.join(f'i32 {2 * i}' for i in range(8))}>")
      return
    if tc.threads == 64: args = [(ir_in, a), (ir_in, b), c, ("i32", "0"), ("i32", "0"), ("i32", "0")]  # MFMA: cbsz, abid, blgp
    elif tc.dtype_in == dtypes.int8: args = [("i1", "true"), (ir_in, a), ("i1", "true"), (ir_in, b), c, ("i1", "false")]  # signed, no clamp
    elif tc.dtype_out == dtypes.float16: args = [(ir_in, a), (ir_in, b), c, ("i1", "false")]  # RDNA4's f16 one keeps an opsel operand
    else: args = [(ir_in, a), (ir_in, b), c]
    self.vals[u] = self.call(tc.extra["intrinsic"], ret, *args)

  # ---- float64 transcendentals (the HIP renderer's tg_exp2/tg_log2/tg_sin, as IR)
  def horner(self, x: str, coeffs: list[float]) -> str:
    p = self.d(coeffs[0])
    for c in coeffs[1:]: p = self.emit(f"fadd double {self.emit(f'fmul double {p}, {x}')}, {self.d(c)}")
    return p

  def exp2_f64(self, x: str) -> str:
    n = self.call("llvm.rint.f64", "double", ("double", x))
    f = self.emit(f"fmul double {self.emit(f'fsub double {x}, {n}')}, {self.d(_LN2)}")
    ordered = self.emit(f"fcmp ord double {x}, 0.0")
    ni = self.emit(f"fptosi double {self.emit(f'select i1 {ordered}, double {n}, double 0.0')} to i32")
    r = self.call("llvm.ldexp.f64.i32", "double", ("double", self.horner(f, _EXP2_COEFFS)), ("i32", ni))
    r = self.emit(f"select i1 {self.emit(f'fcmp ogt double {x}, {self.d(1024.0)}')}, double {_INF}, double {r}")
    r = self.emit(f"select i1 {self.emit(f'fcmp olt double {x}, {self.d(-1080.0)}')}, double 0.0, double {r}")
    return self.emit(f"select i1 {self.emit(f'fcmp uno double {x}, 0.0')}, double {x}, double {r}")

  def log2_f64(self, x: str) -> str:
    fr = self.call("llvm.frexp.f64.i32", "{ double, i32 }", ("double", x))
    m, e = self.emit(f"extractvalue {{ double, i32 }} {fr}, 0"), self.emit(f"extractvalue {{ double, i32 }} {fr}, 1")
    small = self.emit(f"fcmp olt double {m}, {self.d(0.70710678118654752440)}")
    m = self.emit(f"select i1 {small}, double {self.emit(f'fmul double {m}, 2.0')}, double {m}")
    e = self.emit(f"sub i32 {e}, {self.emit(f'zext i1 {small} to i32')}")
    s = self.emit(f"fdiv double {self.emit(f'fsub double {m}, 1.0')}, {self.emit(f'fadd double {m}, 1.0')}")
    p = self.horner(self.emit(f"fmul double {s}, {s}"), [1.0 / k for k in range(23, 0, -2)])
    ln_m = self.emit(f"fmul double {self.emit(f'fmul double 2.0, {s}')}, {p}")
    log2_m = self.emit(f"fmul double {ln_m}, {self.d(1.44269504088896340736)}")
    r = self.emit(f"fadd double {self.emit(f'sitofp i32 {e} to double')}, {log2_m}")
    r = self.emit(f"select i1 {self.emit(f'fcmp oeq double {x}, {_INF}')}, double {x}, double {r}")
    r = self.emit(f"select i1 {self.emit(f'fcmp oeq double {x}, 0.0')}, double {_NINF}, double {r}")
    return self.emit(f"select i1 {self.emit(f'fcmp ult double {x}, 0.0')}, double {_NAN}, double {r}")

  def sin_f64(self, x: str) -> str:
    finite = self.emit(f"fcmp one double {self.call('llvm.fabs.f64', 'double', ('double', x))}, {_INF}")
    xs = self.emit(f"select i1 {finite}, double {x}, double 0.0")
    q = self.call("llvm.rint.f64", "double", ("double", self.emit(f"fmul double {xs}, {self.d(0.63661977236758134308)}")))
    r = xs
    for part in (1.57079632673412561417, 6.07710050630396597660e-11, 2.02226624871116645580e-21, 8.47842766036889956997e-32):
      r = self.emit(f"fsub double {r}, {self.emit(f'fmul double {q}, {self.d(part)}')}")
    quarter = self.call("llvm.floor.f64", "double", ("double", self.emit(f"fmul double {q}, 0.25")))
    four_q = self.emit(f"fmul double {quarter}, 4.0")
    n = self.emit(f"fptosi double {self.emit(f'fsub double {q}, {four_q}')} to i64")  # q mod 4 (exact: q is an integer)
    r2 = self.emit(f"fmul double {r}, {r}")
    r3 = self.emit(f"fmul double {r}, {r2}")
    s = self.emit(f"fadd double {r}, {self.emit(f'fmul double {r3}, {self.horner(r2, _SIN_COEFFS)}')}")
    c = self.horner(r2, _COS_COEFFS)
    v = self.emit(f"select i1 {self.emit(f'trunc i64 {n} to i1')}, double {c}, double {s}")
    neg = self.emit(f"icmp ne i64 {self.emit(f'and i64 {n}, 2')}, 0")
    v = self.emit(f"select i1 {neg}, double {self.emit(f'fneg double {v}')}, double {v}")
    v = self.call("llvm.minnum.f64", "double", ("double", self.call("llvm.maxnum.f64", "double", ("double", v), ("double", "-1.0"))), ("double", "1.0"))
    return self.emit(f"select i1 {finite}, double {v}, double {_NAN}")

