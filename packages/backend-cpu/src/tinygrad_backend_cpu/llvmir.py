"""The CPU:LLVM renderer: a linearized program as LLVM IR text, compiled with llvmlite into a relocatable ELF object.

Scalar code only. Loops become basic blocks with a phi counter; gated loads/stores become branches so that a false
gate never touches memory. Semantics follow `tinygrad.uop.alu`: NaN-propagating MAX, C division with x/0 == 0,
C-style casts where NaN/inf -> int gives 0 and out-of-range values wrap.

dtype handling worth knowing:
- bool is i1 in registers, i8 in memory.
- bfloat16 lives in registers as a float holding a bf16-exact value (rounded after every op) and in memory as i16:
  LLVM's x86 backend lowers float->bfloat to a `__truncsfbf2` libcall unless the CPU has avx512bf16, and that
  symbol is not in this process, so MCJIT would jump to address 0.
- double->half is done as double->float with round-to-odd, then float->half; that is correctly rounded and avoids
  the `__truncdfhf2` libcall (libgcc_s, which the process usually hasn't loaded).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import math
import platform
import re
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tinygrad.device.plugin import (
  STORE_ADD,
  CompileError,
  Compiler,
  ContextVar,
  DotProduct,
  DType,
  DTypeSet,
  Ops,
  PtrDType,
  Renderer,
  Target,
  UnsupportedDTypeError,
  UOp,
  diskcache_get,
  diskcache_put,
  dtypes,
  offload,
  pm_fast_transcendentals,
  pm_fp8_as_bytes,
  truncate,
)

from tinygrad_backend_cpu.lane_sums import lane_sums
from tinygrad_backend_cpu.masked_loads import MaskedLoad, group_masked_loads
from tinygrad_backend_cpu.threadpool import cpu_threads

if TYPE_CHECKING:
  import llvmlite.binding as llvm


# ---------------------------------------------------------------- llvm setup and target selection
# llvmlite is imported only to compile: its import alone maps and touches ~45 MB of LLVM, and a process that runs kernels
# from the compile cache (loaded by elf.py) needs none of it. What the renderer needs of LLVM up front (the host's cpu
# name, features and triple, LLVM's version) is kept in the disk cache per CPU and llvmlite version.

_llvm: Any = None


def _binding() -> Any:
  """llvmlite.binding, imported and initialized on first use."""
  global _llvm
  if _llvm is None:
    import llvmlite.binding as binding
    # llvm.initialize() raises in llvmlite 0.50; native target + asm printer is all we need
    binding.initialize_native_target()
    binding.initialize_native_asmprinter()
    binding.initialize_native_asmparser()  # inline asm: the native graph's barrier yields with a raw syscall (native_graph.py)
    _load_libgcc(binding)
    _llvm = binding
  return _llvm


def _load_libgcc(binding: Any) -> None:
  """Best effort: half<->float libcalls (__extendhfsf2, __truncsfhf2) are only emitted when f16c is off, and live in
  libgcc_s. Loading it makes them resolvable by MCJIT in this process instead of jumping to address 0."""
  import ctypes.util
  if (path := ctypes.util.find_library("gcc_s")) is None: return
  try: binding.load_library_permanently(path)
  except RuntimeError: pass


@dataclass(frozen=True)
class HostInfo:
  cpu: str        # LLVM's name for the host cpu
  features: str   # LLVM's host features, flattened: "+sse2,-avx512f,..."
  triple: str
  llvm_version: str

  @property
  def feature_names(self) -> set[str]: return {f[1:] for f in self.features.split(",") if f}  # on and off: what LLVM knows


def _cpu_signature() -> str | None:
  """What identifies this CPU to LLVM's host detection (the first processor's model and flags), or None off Linux."""
  try:
    with open("/proc/cpuinfo") as f: text = f.read()
  except OSError: return None
  first = text.split("\n\n", 1)[0]
  keep = [line for line in first.splitlines() if line.split(":")[0].strip() in ("vendor_id", "cpu family", "model", "model name", "stepping", "flags", "Features", "CPU implementer", "CPU part")]
  return "\n".join(keep) if keep else None


@functools.cache
def host_info() -> HostInfo:
  """The host as LLVM sees it: from the disk cache when this CPU and llvmlite version were seen before, else from llvmlite."""
  if importlib.util.find_spec("llvmlite") is None: raise ImportError("llvmlite is not installed (pip install llvmlite)")
  sig = _cpu_signature()
  key = None
  if sig is not None:
    key = hashlib.sha256(f"{platform.machine()}\n{importlib.metadata.version('llvmlite')}\n{sig}".encode()).hexdigest()
    if isinstance(hit := diskcache_get("cpu_llvm_host", key), HostInfo): return hit
  info = offload(_detect_host)
  return diskcache_put("cpu_llvm_host", key, info) if key is not None else info


def _detect_host() -> HostInfo:
  llvm = _binding()
  info = HostInfo(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(), llvm.get_process_triple(),
                  ".".join(map(str, llvm.llvm_version_info)))
  llvm.Target.from_triple(info.triple)  # raises when llvmlite can't target this host: not worth caching
  return info


def llvm_available() -> str | None:
  """None when llvmlite can compile for this host, else why not."""
  try: host_info()
  except ImportError as e: return str(e) if "llvmlite" in str(e) else f"llvmlite is not installed (pip install llvmlite): {e}"
  except (RuntimeError, OSError) as e:  # llvmlite reports a missing target as RuntimeError
    return f"llvmlite can't target this host: {e}"
  return None


_HOST_ARCH_NAMES = ("", "native", "host", "x86_64", "amd64", "aarch64", "arm64")  # x86-64 is LLVM's generic cpu


def resolve_cpu_features(target: Target) -> tuple[str, str]:
  """(cpu, features) for a DEV target: cpu from arch (or a cpu name among opts); features are the host's, then opts.

  Opts are appended after the host features, in order, so '-avx512f' also turns off what implies it (avx512bw, ...),
  which it wouldn't if it were merged into the host map and then re-enabled by a later '+avx512bw'."""
  host = host_info()
  host_arch = host.triple.split("-")[0]
  names = host.feature_names
  cpu = "" if target.arch in _HOST_ARCH_NAMES or target.arch == host_arch else target.arch
  extra: list[str] = []
  for opt in target.opts:
    if opt[0] in "+-": extra.append(opt)
    elif opt in names: extra.append("+" + opt)
    else: cpu = opt  # not a feature LLVM knows for this host: a cpu name (e.g. znver2)
  return cpu or host.cpu, ",".join([host.features, *extra]).strip(",")


# AVX-512 hosts: let LLVM fill 512-bit registers. LLVM prefers 256-bit vectors on Intel's AVX-512 parts (the clock penalty of
# older ones), which halves what a register-blocked matmul's multiply-adds do per instruction: a 2048 matmul on one core of a
# Sapphire Rapids-class VM ran at 111 GFLOP/s with ymm registers, 163 with zmm (a 32x8 block; numpy's OpenBLAS 169).
# WIDE_VECTORS=0 leaves the width to LLVM
WIDE_VECTORS = ContextVar("WIDE_VECTORS", 1)
# accumulators' sums as vector reductions (lane_sums.py): 0 off (a chain of scalar adds), 1 in order, 2 in any order (a tree)
LANE_SUMS = ContextVar("LANE_SUMS", 2)


def features_on(features: str) -> set[str]:
  """The features LLVM's feature string leaves on, applied in order: a later '-avx512f' (a DEV option) turns off the host's."""
  on: set[str] = set()
  for f in filter(None, features.split(",")): (on.add if f[0] == "+" else on.discard)(f[1:])
  return on


def wide_vectors(features: str) -> bool:
  """True when kernels are compiled for 512-bit vectors (avx512f on, WIDE_VECTORS not 0)."""
  return bool(WIDE_VECTORS.value) and "avx512f" in features_on(features)


def accumulator_budget(features: str, triple: str = "", wide: bool = False) -> int:
  """float32 accumulators a register block may hold without spilling, from LLVM's feature string: the vector registers
  minus 4 (the operands of the multiply-adds and a broadcast), times the lanes LLVM fills: 8 with AVX, where LLVM vectorizes
  with ymm registers even where AVX-512 offers 32 of them, unless `wide` (wide_vectors: 16 lanes a zmm register)."""
  on = features_on(features)
  if "avx512f" in on: return 28 * (16 if wide else 8)
  if "avx" in on: return 12 * 8
  if triple.startswith(("aarch64", "arm64")) or "neon" in on: return 28 * 4
  return 12 * 4  # SSE: 16 xmm registers of 4 floats


def dot_products(features: str, wide: bool = False) -> tuple[DotProduct, ...]:
  """The integer dot-product instructions LLVM's feature string leaves on, widest first (the 512-bit ones only where kernels use
  zmm registers, `wide`): vpdpbusd (4 products of an unsigned and a signed byte into each int32 lane) and vpdpwssd (2 products
  of int16s)."""
  on = features_on(features)
  kinds = (("vpdpbusd", 4, dtypes.uint8, dtypes.int8), ("vpdpwssd", 2, dtypes.int16, dtypes.int16))
  if {"avx512f", "avx512vnni"} <= on:
    widths: tuple[tuple[int, str, str], ...] = ((16, "avx512", "512"),) if wide else ()  # (lanes, extension, bits)
    widths += ((8, "avx512", "256"),) if "avx512vl" in on else ()
  elif {"avx2", "avxvnni"} <= on: widths = ((8, "avxvnni", "256"),)
  else: return ()
  return tuple(DotProduct(lanes, f"llvm.x86.{ext}.{op}.{bits}", group, a, b) for op, group, a, b in kinds for lanes, ext, bits in widths)


# ---------------------------------------------------------------- compiler

class LLVMCompiler(Compiler):
  """LLVM IR text -> optimized (O2 pipeline of the new pass manager) relocatable object, as bytes."""

  def __init__(self, cpu: str = "", features: str = "", opt: int = 2):
    host = host_info()
    self.cpu = cpu or host.cpu
    self.features = features
    self.triple = host.triple
    self.opt = opt  # 0: no IR passes and LLVM's fast instruction selection (glue code: native graphs), 20x faster to compile
    self._tm: Any = None
    self.cachekey = f"compile_llvm_{host.llvm_version}_{self.triple}_{self.cpu}_{features}" + (f"_O{opt}" if opt != 2 else "")

  @property
  def tm(self) -> Any:
    """The target machine, made on the first compile (this is what imports llvmlite)."""
    if self._tm is None:
      llvm = _binding()
      # small code model: with the large (llvmlite's jitdefault) model, once one loaded object has called out through
      # its GOT, objects loaded after it read wrong constant-pool data (@GOTOFF) or crash (seen with llvmlite 0.50 MCJIT)
      self._tm = llvm.Target.from_triple(self.triple).create_target_machine(
        cpu=self.cpu, features=self.features, opt=self.opt, reloc="pic", codemodel="small")
    return self._tm

  def __reduce__(self) -> tuple: return LLVMCompiler, (self.cpu, self.features, self.opt)  # the TargetMachine doesn't pickle

  def _parse(self, src: str) -> llvm.ModuleRef:
    llvm = _binding()
    try:
      mod = llvm.parse_assembly(src)
      mod.verify()
    except RuntimeError as e: raise CompileError("LLVM", src, str(e)) from e
    mod.triple = self.tm.triple
    mod.data_layout = str(self.tm.target_data)
    return mod

  def optimize(self, mod: llvm.ModuleRef) -> None:
    """The default per-module O2 pipeline, with the loop and SLP vectorizers on (as clang -O2 has them)."""
    llvm = _binding()
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pto.loop_vectorization, pto.slp_vectorization, pto.loop_unrolling = True, True, True
    pb = llvm.create_pass_builder(self.tm, pto)
    pb.getModulePassManager().run(mod, pb)

  def compile(self, src: str) -> bytes:
    mod = self._parse(src)
    if self.opt: self.optimize(mod)
    return bytes(self.tm.emit_object(mod))

  def disassemble(self, lib: bytes) -> str:
    """objdump's disassembly of the object when objdump exists (LLVM's disassembler isn't exposed by llvmlite)."""
    import shutil
    import subprocess
    import tempfile
    if (objdump := shutil.which("objdump")) is None: return super().disassemble(lib)
    with tempfile.NamedTemporaryFile(suffix=".o") as f:
      f.write(lib)
      f.flush()
      return subprocess.run([objdump, "-d", "--no-show-raw-insn", f.name], capture_output=True, text=True, check=False).stdout

  def assembly(self, src: str) -> str:
    """The optimized machine assembly of `src` (for debugging; `disassemble` only gets the object)."""
    mod = self._parse(src)
    self.optimize(mod)
    return self.tm.emit_assembly(mod)


# ---------------------------------------------------------------- types and constants

_REG_TYPE: dict[DType, str] = {
  dtypes.bool: "i1", dtypes.int8: "i8", dtypes.uint8: "i8", dtypes.int16: "i16", dtypes.uint16: "i16",
  dtypes.int32: "i32", dtypes.uint32: "i32", dtypes.int64: "i64", dtypes.uint64: "i64",
  dtypes.float16: "half", dtypes.bfloat16: "float", dtypes.float32: "float", dtypes.float64: "double",
}
_SUFFIX = {"half": "f16", "float": "f32", "double": "f64"}


def reg_type(dt: DType) -> str:
  """The LLVM type of a value of dtype dt in a register."""
  if dt == dtypes.void: return "void"
  if dt.count != 1 or dt not in _REG_TYPE:
    hint = "fp8 should have become bytes (pm_fp8_as_bytes)" if dt.scalar() in (dtypes.fp8e4m3, dtypes.fp8e5m2) else "scalar dtypes only"
    raise UnsupportedDTypeError("LLVM", dt, hint)
  return _REG_TYPE[dt]


def vec_type(dt: DType) -> str:
  """The LLVM type of a vector value (a dot product's operands and lanes: codegen/dot.py)."""
  return f"<{dt.count} x {reg_type(dt.scalar())}>"


def mem_type(dt: DType, reg: bool = False) -> str:
  """The LLVM type of an element in memory; `reg` arrays (DEFINE_REG) are private, so bf16 stays float there."""
  if dt == dtypes.bool: return "i8"
  if dt == dtypes.bfloat16 and not reg: return "i16"
  return reg_type(dt)


def suffix(t: str) -> str: return _SUFFIX.get(t, t)


def const_literal(value: object, dt: DType) -> str:
  """An exact LLVM literal: float/double as 64-bit hex of the (rounded) value, half as 0xH, ints in signed form."""
  t = reg_type(dt)
  if dt == dtypes.bool: return "true" if value else "false"
  if dtypes.is_int(dt):
    bits = dt.itemsize * 8
    v = int(value) & ((1 << bits) - 1)  # type: ignore[call-overload]
    return str(v - (1 << bits) if v >= 1 << (bits - 1) else v)
  fv = float(value)  # type: ignore[arg-type]
  if t == "half":
    fv = fv if math.isnan(fv) else float(truncate(dtypes.float16, fv))
    return "0xH" + struct.pack(">e", fv).hex().upper()
  if not math.isnan(fv): fv = float(truncate(dt, fv))  # bf16 values are exact in float too
  return "0x" + struct.pack(">d", fv).hex().upper()


# ---------------------------------------------------------------- renderer

NATIVE_OPS = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.NEG, Ops.TRUNC, Ops.ADD, Ops.SUB, Ops.MUL,
                        Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR,
                        Ops.SHL, Ops.SHR, Ops.WHERE, Ops.MULACC})

_NAME_RE = re.compile(r"[A-Za-z_.$][A-Za-z0-9_.$]*")


PREFETCH_AHEAD = 64  # bytes past a far-striding load's footprint (one line: 64-512 measured alike)


class LLVMRenderer(Renderer):
  """Renders a linearized program for the CPU as LLVM IR: `define void @name(ptr noalias %data0, ..., i32 %var0, ...)`."""
  threads = cpu_threads()
  device = "CPU"
  name = "LLVM"
  supported_dtypes = DTypeSet(set(_REG_TYPE) | {dtypes.void, dtypes.fp8e4m3, dtypes.fp8e5m2})  # fp8: bytes, see pm_fp8_as_bytes
  # libm's exp2f and log2f are one element per call: as arithmetic, loops vectorize. fp8 is a byte converted in the kernel
  extra_matcher = pm_fast_transcendentals + pm_fp8_as_bytes
  atomic_add = (dtypes.float32, dtypes.float64, *dtypes.ints)  # atomicrmw (fadd, add): a kernel's threads may add into one element

  def __init__(self, target: Target | None = None):
    self.target = target if target is not None else Target("CPU", "LLVM")
    self.cpu, self.features = resolve_cpu_features(self.target)
    self.arch = self.cpu
    self.wide = wide_vectors(self.features)
    self.accumulators = accumulator_budget(self.features, host_info().triple, self.wide)
    # software prefetches measured on x86 only (an AVX-512 Xeon: a 1x1 conv's channel loop, codegen/prefetch.py)
    self.prefetch_ahead = PREFETCH_AHEAD if host_info().triple.startswith("x86_64") else 0
    self.dot_products = dot_products(self.features, self.wide)
    self.compiler = LLVMCompiler(self.cpu, self.features)

  def __reduce__(self) -> tuple: return LLVMRenderer, (self.target,)

  def render(self, name: str, uops: list[UOp]) -> str:
    return _FunctionBuilder(name, uops, attrs=' "prefer-vector-width"="512"' if self.wide else "").build()


@dataclass
class _FunctionBuilder:
  """Emits one function. `vals` maps a UOp to its LLVM operand text; `cur` is the label of the open basic block."""
  name: str
  uops: list[UOp]
  vals: dict[UOp, str] = field(default_factory=dict)
  lines: list[str] = field(default_factory=list)
  allocas: list[str] = field(default_factory=list)
  decls: dict[str, str] = field(default_factory=dict)
  cur: str = "entry"
  ntmp: int = 0
  masked: dict[UOp, MaskedLoad] = field(default_factory=dict)  # by the lane rendered first (masked_loads.py)
  sums: dict[UOp, list[UOp]] = field(default_factory=dict)  # accumulators' sums by their root ADD (lane_sums.py)
  sum_inner: set[UOp] = field(default_factory=set)  # those sums' inner ADDs: not rendered
  attrs: str = ""  # more function attributes (the vector width)

  # ---- small emit helpers
  def tmp(self, hint: str = "t") -> str:
    self.ntmp += 1
    return f"%{hint}{self.ntmp}"

  def emit(self, rhs: str, hint: str = "t") -> str:
    """Emit `%tN = rhs` and return %tN."""
    out = self.tmp(hint)
    self.lines.append(f"  {out} = {rhs}")
    return out

  def label(self, lbl: str) -> None:
    self.lines.append(f"{lbl}:")
    self.cur = lbl

  def call(self, fn: str, ret: str, *args: tuple[str, str]) -> str:
    """Call an intrinsic (declared once), args as (type, value)."""
    self.decls[fn] = f"declare {ret} @{fn}({', '.join(t for t, _ in args)})"
    return self.emit(f"call {ret} @{fn}({', '.join(f'{t} {v}' for t, v in args)})")

  def v(self, u: UOp) -> str: return self.vals[u]

  # ---- the function
  def build(self) -> str:
    params = self._params()
    self.uops, self.masked = group_masked_loads(self.uops)
    if LANE_SUMS.value: self.sums, self.sum_inner = lane_sums(self.uops)
    for u in self.uops: self._render(u)
    fname = self.name if _NAME_RE.fullmatch(self.name) else '"' + self.name.replace('"', "\\22") + '"'
    body = ["entry:", *self.allocas, *self.lines, "  ret void"]
    head = f"define void @{fname}({', '.join(params)}) #0 {{"
    return "\n".join([*self.decls.values(), "", head, *body, "}", "", f"attributes #0 = {{ nounwind{self.attrs} }}", ""])

  def _params(self) -> list[str]:
    bufs = sorted((u for u in self.uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
    for u in bufs: self.vals[u] = f"%data{u.arg}"
    variables = [u for u in self.uops if u.op is Ops.DEFINE_VAR]
    for i, u in enumerate(variables): self.vals[u] = f"%var{i}"
    return [f"ptr noalias %data{u.arg}" for u in bufs] + [f"{reg_type(u.dtype)} %var{i}" for i, u in enumerate(variables)]

  def _render(self, u: UOp) -> None:
    if u.op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.SINK, Ops.NOOP) or u in self.sum_inner: return
    if (lanes := self.sums.get(u)) is not None: self.vals[u] = self._lane_sum(u.dtype, lanes); return
    if u.op is Ops.CONST: self.vals[u] = const_literal(u.arg, u.dtype)
    elif u.op is Ops.AFTER: self.vals[u] = self.v(u.src[0])
    elif (fn := _HANDLERS.get(u.op)) is not None: fn(self, u)
    elif u.op in NATIVE_OPS: self.vals[u] = self._alu(u)
    else: raise NotImplementedError(f"LLVMRenderer can't render {u.op} (dtype {u.dtype!r})")

  # ---- memory and control flow
  def define_reg(self, u: UOp) -> None:
    assert isinstance(u.dtype, PtrDType)
    name = f"%reg{len(self.allocas)}"
    self.allocas.append(f"  {name} = alloca [{u.dtype.size} x {mem_type(u.dtype.base, True)}], align 16")
    self.vals[u] = name

  def range_(self, u: UOp) -> None:
    i, t = self.ntmp + 1, reg_type(u.dtype)
    self.ntmp += 1
    r, lt = f"%r{i}", "ult" if dtypes.is_unsigned(u.dtype) else "slt"
    bound = self._int_to_int(self.v(u.src[0]), u.src[0].dtype, u.dtype)  # icmp needs one type
    self.lines.append(f"  br label %L{i}_head")
    pred = self.cur
    self.label(f"L{i}_head")
    self.lines.append(f"  {r} = phi {t} [ 0, %{pred} ], [ %r{i}_next, %L{i}_latch ]")
    cond = self.emit(f"icmp {lt} {t} {r}, {bound}")
    self.lines.append(f"  br i1 {cond}, label %L{i}_body, label %L{i}_exit")
    self.label(f"L{i}_body")
    self.vals[u] = r

  def end(self, u: UOp) -> None:
    rng = u.src[0]
    i, t = self.v(rng)[2:], reg_type(rng.dtype)
    self.lines.append(f"  br label %L{i}_latch")
    self.label(f"L{i}_latch")
    self.lines.append(f"  %r{i}_next = add nuw nsw {t} %r{i}, 1")  # r < end, so r+1 can't overflow
    self.lines.append(f"  br label %L{i}_head")
    self.label(f"L{i}_exit")

  def index(self, u: UOp) -> None:
    buf, idx = u.src[0], u.src[1]
    assert isinstance(buf.dtype, PtrDType)
    et = mem_type(buf.dtype.base, buf.dtype.addrspace == "reg")
    self.vals[u] = self.emit(f"getelementptr inbounds {et}, ptr {self.v(buf)}, {reg_type(idx.dtype)} {self.v(idx)}", "p")

  def _load_value(self, idx: UOp, dt: DType) -> str:
    assert isinstance(idx.dtype, PtrDType)
    is_reg = idx.dtype.addrspace == "reg"
    raw = self.emit(f"load {mem_type(dt, is_reg)}, ptr {self.v(idx)}")
    if dt == dtypes.bool: return self.emit(f"icmp ne i8 {raw}, 0")
    if dt == dtypes.bfloat16 and not is_reg: return self.bf16_bits_to_float(raw)
    return raw

  def load(self, u: UOp) -> None:
    if (group := self.masked.get(u)) is not None: self._masked_load(group)
    if u in self.vals: return  # a lane of a masked load emitted before
    if len(u.src) == 1:
      if isinstance(u.arg, tuple) and u.arg[0] == "prefetch": self._prefetch(u.src[0], u.arg[1])
      self.vals[u] = self._load_value(u.src[0], u.dtype)
      return
    # gated: branch around the load, so a false gate never touches memory
    gate, alt, i = self.v(u.src[1]), self.v(u.src[2]), self.ntmp + 1
    self.ntmp += 1
    pred = self.cur
    self.lines.append(f"  br i1 {gate}, label %G{i}_load, label %G{i}_done")
    self.label(f"G{i}_load")
    val = self._load_value(u.src[0], u.dtype)
    loaded_in = self.cur
    self.lines.append(f"  br label %G{i}_done")
    self.label(f"G{i}_done")
    self.vals[u] = self.emit(f"phi {reg_type(u.dtype)} [ {val}, %{loaded_in} ], [ {alt}, %{pred} ]")

  def _prefetch(self, idx: UOp, ahead: tuple[int, ...]) -> None:
    """Prefetch (read, into every cache level) the elements `ahead` past idx: codegen/prefetch.py. No inbounds: a prefetch
    never faults, so its address may lie past the buffer."""
    self.decls["llvm.prefetch.p0"] = "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)"
    buf = idx.src[0]
    assert isinstance(buf.dtype, PtrDType)
    for n in ahead:
      ptr = self.emit(f"getelementptr {mem_type(buf.dtype.base)}, ptr {self.v(idx)}, i32 {n}", "p")
      self.lines.append(f"  call void @llvm.prefetch.p0(ptr {ptr}, i32 0, i32 3, i32 1)")

  def _masked_load(self, g: MaskedLoad) -> None:
    """One llvm.masked.load for the group's lanes: lane k reads first_index + k where its gate holds, else its alt."""
    n, buf = len(g.lanes), g.lanes[0].src[0].src[0]
    vt, mt = f"<{n} x float>", f"<{n} x i1>"
    mask = "poison"
    for k, lane in enumerate(g.lanes): mask = self.emit(f"insertelement {mt} {mask}, i1 {self.v(lane.src[1])}, i32 {k}")
    # (no inbounds: lane 0's address may lie before the buffer, where its gate is false and nothing is read)
    ptr = self.emit(f"getelementptr float, ptr {self.v(buf)}, {reg_type(g.first_index.dtype)} {self.v(g.first_index)}", "p")
    alts = ", ".join(f"float {const_literal(lane.src[2].arg, dtypes.float32)}" for lane in g.lanes)
    vec = self.call(f"llvm.masked.load.v{n}f32.p0", vt, ("ptr", ptr), ("i32", "4"), (mt, mask), (vt, f"<{alts}>"))
    for k, lane in enumerate(g.lanes): self.vals[lane] = self.emit(f"extractelement {vt} {vec}, i32 {k}")

  def _store_value(self, idx: UOp, val: UOp, add: bool = False) -> None:
    assert isinstance(idx.dtype, PtrDType)
    is_reg, dt, v = idx.dtype.addrspace == "reg", val.dtype, self.v(val)
    if add:  # an atomic add (STORE_ADD); monotonic: only the sum must come out whole, nothing is ordered by it
      self.lines.append(f"  atomicrmw {'fadd' if dtypes.is_float(dt) else 'add'} ptr {self.v(idx)}, {mem_type(dt, is_reg)} {v} monotonic")
      return
    if dt == dtypes.bool: v = self.emit(f"zext i1 {v} to i8")
    elif dt == dtypes.bfloat16 and not is_reg: v = self.float_to_bf16_bits(v)
    self.lines.append(f"  store {mem_type(dt, is_reg)} {v}, ptr {self.v(idx)}")

  def store(self, u: UOp) -> None:
    add = u.arg == STORE_ADD
    if len(u.src) == 2: return self._store_value(u.src[0], u.src[1], add)
    i = self.ntmp + 1
    self.ntmp += 1
    self.lines.append(f"  br i1 {self.v(u.src[2])}, label %S{i}_store, label %S{i}_done")
    self.label(f"S{i}_store")
    self._store_value(u.src[0], u.src[1], add)
    self.lines.append(f"  br label %S{i}_done")
    self.label(f"S{i}_done")

  def _lane_sum(self, dt: DType, lanes: list[UOp]) -> str:
    """The accumulators' sum as one vector reduction (lane_sums.py): where SLP starts vectorizing the lanes' work."""
    et, vt = reg_type(dt), f"<{len(lanes)} x {reg_type(dt)}>"
    vec = self._build_vector(vt, et, [self.v(lane) for lane in lanes])
    fn = f"llvm.vector.reduce.fadd.v{len(lanes)}{'f32' if dt == dtypes.float32 else 'f64'}"
    self.decls[fn] = f"declare {et} @{fn}({et}, {vt})"
    return self.emit(f"call {'reassoc ' if LANE_SUMS.value >= 2 else ''}{et} @{fn}({et} -0.0, {vt} {vec})")

  # ---- vectors: only a byte dot product's operands and lanes (codegen/dot.py); everything else is scalar
  def vectorize(self, u: UOp) -> None:
    vt, et = vec_type(u.dtype), reg_type(u.dtype.scalar())
    if all(s.op is Ops.CONST for s in u.src):
      self.vals[u] = f"<{', '.join(f'{et} {self.v(s)}' for s in u.src)}>"
      return
    self.vals[u] = self._build_vector(vt, et, [self.v(s) for s in u.src])

  def _build_vector(self, vt: str, et: str, values: list[str]) -> str:
    """A vector of type vt from scalar operands of type et, one insertelement each."""
    vec = "poison"
    for k, x in enumerate(values): vec = self.emit(f"insertelement {vt} {vec}, {et} {x}, i32 {k}")
    return vec

  def gep(self, u: UOp) -> None: self.vals[u] = self.emit(f"extractelement {vec_type(u.src[0].dtype)} {self.v(u.src[0])}, i32 {u.arg[0]}")

  def wmma(self, u: UOp) -> None:
    """A dot-product instruction: its intrinsic (a name LLVMRenderer.dot_products lists) on (C, A, B)."""
    name = u.arg[0]
    if not re.fullmatch(r"llvm\.x86\.(avx512|avxvnni)\.vpdp(busd|wssd)\.(256|512)", name): raise NotImplementedError(f"LLVMRenderer renders no WMMA {name}")
    a, b, c = u.src
    self.vals[u] = self.call(name, vec_type(u.dtype), (vec_type(c.dtype), self.v(c)), (vec_type(a.dtype), self.v(a)), (vec_type(b.dtype), self.v(b)))

  # ---- bfloat16 (float in registers, i16 in memory)
  def bf16_bits_to_float(self, bits: str) -> str:
    wide = self.emit(f"zext i16 {bits} to i32")
    return self.emit(f"bitcast i32 {self.emit(f'shl i32 {wide}, 16')} to float")

  def float_to_bf16_bits(self, x: str) -> str:
    """x is already bf16-exact, so its low 16 bits are zero."""
    b = self.emit(f"bitcast float {x} to i32")
    return self.emit(f"trunc i32 {self.emit(f'lshr i32 {b}, 16')} to i16")

  def round_bf16(self, x: str) -> str:
    """Round a float to the nearest bf16 (ties to even), as dtype.truncate_bf16 does; NaN stays a quiet NaN."""
    b = self.emit(f"bitcast float {x} to i32")
    lsb = self.emit(f"and i32 {self.emit(f'lshr i32 {b}, 16')}, 1")
    r = self.emit(f"add i32 {self.emit(f'add i32 {b}, 32767')}, {lsb}")
    quiet = self.emit(f"or i32 {b}, 4194304")
    isnan = self.emit(f"fcmp uno float {x}, 0.0")
    picked = self.emit(f"select i1 {isnan}, i32 {quiet}, i32 {r}")
    return self.emit(f"bitcast i32 {self.emit(f'and i32 {picked}, -65536')} to float")

  # ---- elementwise
  def _alu(self, u: UOp) -> str:
    dt = u.dtype
    if u.op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ): return self._cmp(u)
    if u.op is Ops.WHERE:
      c, a, b = (self.v(s) for s in u.src)
      return self.emit(f"select i1 {c}, {reg_type(dt)} {a}, {reg_type(dt)} {b}")
    if dtypes.is_float(dt):
      out = self._float_alu(u.op, reg_type(dt), [self.v(s) for s in u.src])
      rounds = dt == dtypes.bfloat16 and u.op not in (Ops.NEG, Ops.TRUNC, Ops.MAX)
      return self.round_bf16(out) if rounds else out
    if dt == dtypes.bool: return self._bool_alu(u.op, [self.v(s) for s in u.src])
    # LLVM wants both operands in one type (a shift amount may come in another int type)
    srcs = [self._int_to_int(self.v(s), s.dtype, dt) if dtypes.is_int(s.dtype) else self.v(s) for s in u.src]
    # nsw where the bounds prove no signed overflow (index math: LLVM then knows neighbouring lanes' addresses are
    # consecutive after the sign extension, which it needs to vectorize them; a bound that might overflow is the dtype's)
    nsw = u.op in (Ops.ADD, Ops.MUL) and not dtypes.is_unsigned(dt) and (u.vmin, u.vmax) != (dtypes.min(dt), dtypes.max(dt))
    return self._int_alu(u.op, reg_type(dt), dtypes.is_unsigned(dt), srcs, nsw)

  def _cmp(self, u: UOp) -> str:
    dt = u.src[0].dtype
    t, a, b = reg_type(dt), self.v(u.src[0]), self.v(u.src[1])
    if dtypes.is_float(dt):
      pred = {Ops.CMPLT: "olt", Ops.CMPNE: "une", Ops.CMPEQ: "oeq"}[u.op]  # NaN: != true, others false
      return self.emit(f"fcmp {pred} {t} {a}, {b}")
    lt = "ult" if dtypes.is_unsigned(dt) or dt == dtypes.bool else "slt"
    return self.emit(f"icmp {({Ops.CMPLT: lt, Ops.CMPNE: 'ne', Ops.CMPEQ: 'eq'})[u.op]} {t} {a}, {b}")

  def _float_alu(self, op: Ops, t: str, s: list[str]) -> str:
    simple = {Ops.ADD: "fadd", Ops.SUB: "fsub", Ops.MUL: "fmul", Ops.FDIV: "fdiv"}
    unary = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt"}
    if op in simple: return self.emit(f"{simple[op]} {t} {s[0]}, {s[1]}")
    if op in unary: return self.call(f"llvm.{unary[op]}.{suffix(t)}", t, (t, s[0]))
    if op is Ops.TRUNC:  # alu truncates through a Python int, so -0.5 and -0.0 give +0.0: adding +0.0 does the same
      return self.emit(f"fadd {t} {self.call(f'llvm.trunc.{suffix(t)}', t, (t, s[0]))}, {const_literal(0.0, _FLOAT_OF[t])}")
    if op is Ops.NEG: return self.emit(f"fneg {t} {s[0]}")
    if op is Ops.RECIPROCAL: return self.emit(f"fdiv {t} {const_literal(1.0, _FLOAT_OF[t])}, {s[0]}")
    if op is Ops.MAX:
      # alu._max: a NaN operand wins, else `a if a >= b else b` (llvm.maxnum would drop the NaN)
      ge = self.emit(f"fcmp oge {t} {s[0]}, {s[1]}")
      pick = self.emit(f"select i1 {ge}, {t} {s[0]}, {t} {s[1]}")
      a_nan = self.emit(f"fcmp uno {t} {s[0]}, {s[0]}")
      return self.emit(f"select i1 {a_nan}, {t} {s[0]}, {t} {pick}")
    if op is Ops.MULACC: return self._mulacc(t, s)
    raise NotImplementedError(f"LLVMRenderer: {op} on floats")

  def _mulacc(self, t: str, s: list[str]) -> str:
    """alu computes a*b+c in double (a*b exact for narrower inputs), then rounds to the dtype."""
    if t == "double": return self.emit(f"fadd double {self.emit(f'fmul double {s[0]}, {s[1]}')}, {s[2]}")
    if t == "float": return self.call("llvm.fma.f32", t, (t, s[0]), (t, s[1]), (t, s[2]))  # ~ the same, and fast
    # half: exactly alu's double computation (llvm.fma.f16 would become an f64 fma plus a __truncdfhf2 libcall)
    a, b, c = (self.emit(f"fpext half {x} to double") for x in s)
    acc = self.emit(f"fadd double {self.emit(f'fmul double {a}, {b}')}, {c}")
    return self.emit(f"fptrunc float {self._double_to_float_odd(acc)} to half")

  def _bool_alu(self, op: Ops, s: list[str]) -> str:
    # python bool arithmetic, truncated back to bool: + and max are or, * is and
    ops = {Ops.AND: "and", Ops.MUL: "and", Ops.OR: "or", Ops.ADD: "or", Ops.MAX: "or", Ops.XOR: "xor", Ops.SUB: "xor"}
    if op in ops: return self.emit(f"{ops[op]} i1 {s[0]}, {s[1]}")
    if op is Ops.NEG: return self.emit(f"xor i1 {s[0]}, true")
    if op is Ops.MULACC: return self.emit(f"or i1 {self.emit(f'and i1 {s[0]}, {s[1]}')}, {s[2]}")
    raise NotImplementedError(f"LLVMRenderer: {op} on bool")

  def _int_alu(self, op: Ops, t: str, unsigned: bool, s: list[str], nsw: bool = False) -> str:
    simple = {Ops.ADD: "add", Ops.SUB: "sub", Ops.MUL: "mul", Ops.AND: "and", Ops.OR: "or", Ops.XOR: "xor", Ops.SHL: "shl",
              Ops.SHR: "lshr" if unsigned else "ashr"}
    if op in simple: return self.emit(f"{simple[op]}{' nsw' if nsw else ''} {t} {s[0]}, {s[1]}")  # else no nsw/nuw: ints wrap
    if op is Ops.NEG: return self.emit(f"sub {t} 0, {s[0]}")
    if op is Ops.MAX: return self.call(f"llvm.{'umax' if unsigned else 'smax'}.{t}", t, (t, s[0]), (t, s[1]))
    if op is Ops.MULACC: return self.emit(f"add {t} {self.emit(f'mul {t} {s[0]}, {s[1]}')}, {s[2]}")
    if op in (Ops.IDIV, Ops.MOD): return self._divmod(op, t, unsigned, s[0], s[1])
    raise NotImplementedError(f"LLVMRenderer: {op} on ints")

  def _divmod(self, op: Ops, t: str, unsigned: bool, a: str, b: str) -> str:
    """C division/remainder with alu's extensions: x/0 == x%0 == 0, and MIN/-1 wraps to MIN (x86 idiv would trap)."""
    zero = self.emit(f"icmp eq {t} {b}, 0")
    bad = zero
    if not unsigned:
      bits = int(t[1:])
      is_min = self.emit(f"icmp eq {t} {a}, {-(1 << (bits - 1))}")
      overflow = self.emit(f"and i1 {is_min}, {self.emit(f'icmp eq {t} {b}, -1')}")
      bad = self.emit(f"or i1 {zero}, {overflow}")
    safe_b = self.emit(f"select i1 {bad}, {t} 1, {t} {b}")  # MIN/1 == MIN and MIN%1 == 0 are the wrapped answers
    kind = ("u" if unsigned else "s") + ("div" if op is Ops.IDIV else "rem")
    out = self.emit(f"{kind} {t} {a}, {safe_b}")
    return out if op is Ops.MOD else self.emit(f"select i1 {zero}, {t} 0, {t} {out}")  # x%1 is 0 already

  # ---- casts
  def cast(self, u: UOp) -> None: self.vals[u] = self._cast(self.v(u.src[0]), u.src[0].dtype, u.dtype)

  def _cast(self, x: str, src: DType, dst: DType) -> str:
    if src == dst: return x
    st, dt_ = reg_type(src), reg_type(dst)
    if dst == dtypes.bool:
      return self.emit(f"fcmp une {st} {x}, {'0.0' if st != 'half' else '0xH0000'}" if dtypes.is_float(src) else f"icmp ne {st} {x}, 0")
    if src == dtypes.bool:
      return self.emit(f"zext i1 {x} to {dt_}") if dtypes.is_int(dst) else self._round_to(self.emit(f"uitofp i1 {x} to {dt_}"), dst)
    if dtypes.is_int(src) and dtypes.is_int(dst): return self._int_to_int(x, src, dst)
    if dtypes.is_int(src): return self._int_to_float(x, src, dst)
    if dtypes.is_int(dst): return self._float_to_int(x, src, dst)
    return self._float_to_float(x, src, dst)

  def _round_to(self, x: str, dst: DType) -> str: return self.round_bf16(x) if dst == dtypes.bfloat16 else x

  def _int_to_int(self, x: str, src: DType, dst: DType) -> str:
    st, dt_ = reg_type(src), reg_type(dst)
    if st == dt_: return x
    if src.itemsize > dst.itemsize: return self.emit(f"trunc {st} {x} to {dt_}")
    return self.emit(f"{'zext' if dtypes.is_unsigned(src) else 'sext'} {st} {x} to {dt_}")

  def _int_to_float(self, x: str, src: DType, dst: DType) -> str:
    conv, st = "uitofp" if dtypes.is_unsigned(src) else "sitofp", reg_type(src)
    if src.itemsize == 8 and dst != dtypes.float64:
      # alu converts through a Python float (double) first; do the same so the double rounding matches
      return self._float_to_float(self.emit(f"{conv} {st} {x} to double"), dtypes.float64, dst)
    return self._round_to(self.emit(f"{conv} {st} {x} to {reg_type(dst)}"), dst)

  def _float_to_int(self, x: str, src: DType, dst: DType) -> str:
    """cast_scalar: NaN/inf -> 0, else truncate toward zero and wrap. One plain (vectorizable) fptosi to i64 on a
    guarded input gives the exact bits for -2**63 <= x < 2**64 + 2**63; narrower ints take the low bits."""
    if src == dtypes.float16: x, src = self.emit(f"fpext half {x} to float"), dtypes.float32
    t, lit = reg_type(src), (lambda v: const_literal(v, _FLOAT_OF[reg_type(src)]))
    # [2**63, 2**64) only fits unsigned: x - 2**64 is exact there (Sterbenz) and has the same 64-bit pattern
    big = self.emit(f"fcmp oge {t} {x}, {lit(2.0 ** 63)}")
    adj = self.emit(f"select i1 {big}, {t} {self.emit(f'fsub {t} {x}, {lit(2.0 ** 64)}')}, {t} {x}")
    # fptosi is poison out of range: convert 0 instead (NaN and inf fail this compare, and alu gives 0 for them)
    lo, hi = self.emit(f"fcmp oge {t} {adj}, {lit(-2.0 ** 63)}"), self.emit(f"fcmp olt {t} {adj}, {lit(2.0 ** 63)}")
    ok = self.emit(f"and i1 {lo}, {hi}")
    val = self.emit(f"fptosi {t} {self.emit(f'select i1 {ok}, {t} {adj}, {t} 0.0')} to i64")
    return val if dst.itemsize == 8 else self.emit(f"trunc i64 {val} to {reg_type(dst)}")

  def _float_to_float(self, x: str, src: DType, dst: DType) -> str:
    st, dt_ = reg_type(src), reg_type(dst)
    if dst == dtypes.bfloat16:
      if st == "half": x = self.emit(f"fpext half {x} to float")
      elif st == "double": x = self.emit(f"fptrunc double {x} to float")  # as truncate_bf16: double -> float -> bf16
      return self.round_bf16(x)
    if st == dt_: return x  # bf16 -> float32: already a float
    if _WIDTH[st] < _WIDTH[dt_]: return self.emit(f"fpext {st} {x} to {dt_}")
    if st == "double" and dt_ == "half": x, st = self._double_to_float_odd(x), "float"
    return self.emit(f"fptrunc {st} {x} to {dt_}")

  def _double_to_float_odd(self, x: str) -> str:
    """double -> float rounding to odd: then float -> half is correctly rounded (float has >= 11+2 bits)."""
    f = self.emit(f"fptrunc double {x} to float")
    back = self.emit(f"fpext float {f} to double")
    inexact = self.emit(f"fcmp one double {back}, {x}")
    away = self.emit(f"fcmp ogt double {self.call('llvm.fabs.f64', 'double', ('double', back))}, "
                     f"{self.call('llvm.fabs.f64', 'double', ('double', x))}")
    bits = self.emit(f"bitcast float {f} to i32")
    toward_zero = self.emit(f"select i1 {away}, i32 {self.emit(f'sub i32 {bits}, 1')}, i32 {bits}")
    odd = self.emit(f"select i1 {inexact}, i32 {self.emit(f'or i32 {toward_zero}, 1')}, i32 {bits}")
    return self.emit(f"bitcast i32 {odd} to float")

  def bitcast(self, u: UOp) -> None:
    src, dst, x = u.src[0].dtype, u.dtype, self.v(u.src[0])
    if src == dtypes.bfloat16: x, src = self.float_to_bf16_bits(x), dtypes.uint16
    if dst == dtypes.bool: self.vals[u] = self._cast(x, src, dst); return
    if src == dtypes.bool: x, src = self.emit(f"zext i1 {x} to i8"), dtypes.uint8
    if dst == dtypes.bfloat16:
      bits = x if src.itemsize == 2 and dtypes.is_int(src) else self.emit(f"bitcast {reg_type(src)} {x} to i16")
      self.vals[u] = self.bf16_bits_to_float(bits)
      return
    st, dt_ = reg_type(src), reg_type(dst)
    self.vals[u] = x if st == dt_ else self.emit(f"bitcast {st} {x} to {dt_}")


_WIDTH = {"half": 16, "float": 32, "double": 64}
_FLOAT_OF = {"half": dtypes.float16, "float": dtypes.float32, "double": dtypes.float64}
_HANDLERS = {
  Ops.DEFINE_REG: _FunctionBuilder.define_reg, Ops.RANGE: _FunctionBuilder.range_, Ops.END: _FunctionBuilder.end,
  Ops.INDEX: _FunctionBuilder.index, Ops.LOAD: _FunctionBuilder.load, Ops.STORE: _FunctionBuilder.store,
  Ops.CAST: _FunctionBuilder.cast, Ops.BITCAST: _FunctionBuilder.bitcast,
  Ops.VECTORIZE: _FunctionBuilder.vectorize, Ops.GEP: _FunctionBuilder.gep, Ops.WMMA: _FunctionBuilder.wmma,
}
