"""The PTX renderer: a linearized program (docs/linear-ir.md) as PTX text, assembled by compiler.PTXCompiler.

Scalar code with one virtual register per value (ptxas allocates the real ones). Choices worth knowing:
- `.version 8.0`: the H200's CUDA 13.0 driver (580) JITs PTX ISA <= 9.0, and nvJitLink takes it too.
- Registers by class: .pred (bool), .b16 (8/16-bit ints), .b32, .b64, .f32 (float32, and float16/bfloat16 held as
  float values already rounded to their type), .f64. 8-bit ints live in 16-bit registers, always sign/zero extended:
  ops that can leave the 8-bit range renormalize with cvt.
- Float add/sub/mul carry `.rn`, which also forbids ptxas from contracting them into fma (tinygrad.uop.alu rounds
  each op); MULACC is fma.rn. div/sqrt/rcp are the IEEE `.rn` forms, so float32/float64 +-*/ sqrt are exact.
  float16/bfloat16 compute in float32 and round once (correct: float has >= 2p+2 bits for both).
- Transcendentals: exp2 of float32/16 is ex2.approx.f32 (max error 2 ulp, as CUDA's own exp2f); log2 and sin go
  through float64 sequences here (range reduction + polynomial), accurate to ~1 ulp of float32; the float64 versions
  are good to a few ulp of float64 (sin: for |x| < 2^20; beyond, the Cody-Waite reduction loses digits).
- A float16 NaN is stored as 0x7e00 (numpy's and alu's NaN): registers hold it as a float32 NaN, which keeps no payload.
- Gated loads/stores are predicated instructions: a false gate never touches memory.
- DEFINE_REG arrays indexed only by constants become plain registers; others live in .local memory.
- Tensor-core programs (core's codegen/tensor_core.py): DEFINE_LOCAL is a .shared array (half/bf16 as raw 16 bits),
  BARRIER is bar.sync (after cp.async.commit_group/wait_group on sm_80+), WMMA is mma.sync, a LOAD with arg
  ("matrix", n, trans) is ldmatrix, a STORE with arg "async" is cp.async. Vectors (fragments, accumulators, 16-byte
  copies) are lists of registers: float32 elements one .f32 each, half/bf16 elements packed two to a .b32, the form
  ldmatrix and mma.sync use.
- SHUFFLE (a grouped reduction's butterfly, core's codegen/group.py) is shfl.sync.bfly.b32 over the full warp.
"""
from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, getcontext
from fractions import Fraction

from tinygrad.device.plugin import STORE_ADD, DType, DTypeSet, GroupOp, Ops, PtrDType, Renderer, Target, UnsupportedDTypeError, UOp, dtypes, truncate

from tinygrad_backend_nv.compiler import DEFAULT_ARCH, LOCAL_SIZE, PTXCompiler, arch_number
from tinygrad_backend_nv.streams import streamed_loads

PTX_VERSION = "8.0"

# dtype -> the instruction type its register holds (8-bit ints compute as 16-bit, half/bf16 as f32)
ITYPE: dict[DType, str] = {
  dtypes.bool: "pred", dtypes.int8: "s16", dtypes.uint8: "u16", dtypes.int16: "s16", dtypes.uint16: "u16", dtypes.int32: "s32",
  dtypes.uint32: "u32", dtypes.int64: "s64", dtypes.uint64: "u64", dtypes.float16: "f32", dtypes.bfloat16: "f32", dtypes.float32: "f32",
  dtypes.float64: "f64"}
# instruction type -> register class (name prefix) and its declaration
CLASS = {"pred": "p", "s16": "rs", "u16": "rs", "b16": "rs", "s32": "r", "u32": "r", "b32": "r", "s64": "rd", "u64": "rd", "b64": "rd",
         "f32": "f", "f64": "fd"}
DECL = {"p": ".pred", "rs": ".b16", "r": ".b32", "rd": ".b64", "f": ".f32", "fd": ".f64"}
MOV = {"p": "pred", "rs": "b16", "r": "b32", "rd": "b64", "f": "f32", "fd": "f64"}
# element type in global memory (bool is a byte; half/bf16 are raw 16 bits converted in registers)
MEM = {dtypes.bool: "u8", dtypes.int8: "s8", dtypes.uint8: "u8", dtypes.int16: "s16", dtypes.uint16: "u16", dtypes.int32: "s32",
       dtypes.uint32: "u32", dtypes.int64: "s64", dtypes.uint64: "u64", dtypes.float16: "b16", dtypes.bfloat16: "b16",
       dtypes.float32: "f32", dtypes.float64: "f64"}
SMALL_INTS = (dtypes.int8, dtypes.uint8)
HALFS = (dtypes.float16, dtypes.bfloat16)
NATIVE_OPS = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.NEG, Ops.TRUNC, Ops.ADD, Ops.SUB, Ops.MUL,
                        Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR,
                        Ops.SHL, Ops.SHR, Ops.WHERE, Ops.MULACC})


# ---------------------------------------------------------------- constants

def f32_imm(v: float) -> str:
  if math.isnan(v): return "0f7FC00000"
  return "0f" + struct.pack(">f", v).hex().upper()


def f64_imm(v: float) -> str:
  if math.isnan(v): return "0d7FF8000000000000"
  return "0d" + struct.pack(">d", v).hex().upper()


def imm(v: object, dt: DType) -> str:
  """The PTX immediate of constant v as the register of dt holds it."""
  if dtypes.is_float(dt):
    fv = float(v)  # type: ignore[arg-type]
    if dt == dtypes.float64: return f64_imm(fv)
    return f32_imm(fv if math.isnan(fv) else float(truncate(dt, fv)))
  if dt == dtypes.bool: return "1" if v else "0"
  bits = dt.itemsize * 8
  x = int(v) & ((1 << bits) - 1)  # type: ignore[call-overload]
  if dtypes.is_unsigned(dt): return str(x)
  return str(x - (1 << bits) if x >= 1 << (bits - 1) else x)


# float64 constants of the transcendental sequences, from exact/high-precision values
getcontext().prec = 60
_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")
_LN2 = Decimal(2).ln()


def _split(x: Decimal, n: int) -> list[float]:
  """x as a sum of n doubles (each the rounded remainder)."""
  out = []
  for _ in range(n):
    out.append(float(x))
    x -= Decimal(out[-1])
  return out


def _two_over_pi_words(nwords: int = 24, lead: int = 64) -> list[int]:
  """Bits of 2/pi (weights 2^-1, 2^-2, ...) after `lead` zero bits, as 64-bit words, MSB first: Payne-Hanek's table."""
  bits = 64 * nwords - lead + 64
  one = 1 << (bits + 32)  # fixed point with 32 guard bits

  def atan_inv(n: int) -> int:  # atan(1/n) in fixed point (Taylor series)
    total, term, k, sign = 0, one // n, 1, 1
    while term:
      total += sign * (term // k)
      term //= n * n
      k, sign = k + 2, -sign
    return total

  pi = 16 * atan_inv(5) - 4 * atan_inv(239)  # Machin
  frac = (2 * one * one // pi) >> 32  # 2/pi with `bits` fraction bits
  stream = frac >> (bits - (64 * nwords - lead))  # the first 64*nwords - lead bits
  return [(stream >> (64 * (nwords - 1 - w))) & ((1 << 64) - 1) for w in range(nwords)]


TWO_OVER_PI_WORDS = _two_over_pi_words()
PIO2 = _split(_PI / 2, 3)
TWO_OVER_PI = float(2 / _PI)
INV_LN2 = float(1 / _LN2)
EXP2_COEFFS = [float(_LN2 ** n / math.factorial(n)) for n in range(15)]       # 2^f = sum (f ln2)^n / n!, |f| <= 1/2
SIN_COEFFS = [float(Fraction((-1) ** k, math.factorial(2 * k + 1))) for k in range(1, 8)]  # -1/3!, 1/5!, ... -1/15!
COS_COEFFS = [float(Fraction((-1) ** k, math.factorial(2 * k))) for k in range(1, 9)]      # -1/2!, 1/4!, ... 1/16!
ATANH_COEFFS = [1 / (2 * k + 1) for k in range(1, 11)]                                    # 1/3 .. 1/21


# ---------------------------------------------------------------- the renderer

class PTXRenderer(Renderer):
  """PTX for one sm_XX: `.visible .entry name(.param .u64 data0, ..., .param .s32 var0)`."""
  device = "CUDA"
  name = "PTX"
  has_local = True
  has_shared = False
  shuffle_lanes = 32  # shfl.sync.bfly: grouped reductions combine a warp's partials in registers (core's codegen/group.py)
  local_max = (LOCAL_SIZE,)  # threads per block the codegen uses: see compiler.LOCAL_SIZE
  global_max = (2 ** 31 - 1, 65535, 65535)
  supported_dtypes = DTypeSet(set(ITYPE) | {dtypes.void})
  reg_vectors = False  # register arrays hold f32 accumulators only: tensor-core fragments aren't carried across iterations
  atomic_add = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)  # red.global.add
  compiler: PTXCompiler

  def __init__(self, target: Target | None = None):
    target = target or Target("CUDA", "PTX", DEFAULT_ARCH)
    self.arch = target.arch or DEFAULT_ARCH
    self.sm = arch_number(self.arch)
    if target.device in ("CUDA", "NV"): self.device = target.device
    self.compiler = PTXCompiler(self.arch)

  def __reduce__(self) -> tuple: return PTXRenderer, (Target(self.device, self.name, self.arch),)

  @property
  def tensor_cores(self):
    from tinygrad_backend_nv.tensor_cores import tensor_cores_for
    return tuple(tc for tc in tensor_cores_for(self.arch) if not tc.smem_operands)  # wgmma: CUDA C only for now

  def render(self, name: str, uops: list[UOp]) -> str: return _Kernel(self, name, uops).build()


def _check_dtype(dt: DType) -> None:
  if dt.count != 1:
    if dt.scalar() in (*HALFS, dtypes.float32) and dt.count in (2, 4, 8, 16): return  # fragments, accumulators, wide copies
    raise UnsupportedDTypeError("PTX", dt, "vectors of float16/bfloat16/float32 only")
  if dt not in ITYPE and dt != dtypes.void:
    raise UnsupportedDTypeError("PTX", dt, "fp8 is not supported yet; cast to float16/float32 first" if dtypes.is_float(dt) else "")


@dataclass
class _Reg:
  """A DEFINE_REG: either one register per element (constant indices only) or a .local array."""
  uop: UOp
  elem: DType
  regs: dict[int, str] = field(default_factory=dict)
  vregs: dict[int, list[str]] = field(default_factory=dict)  # vector elements: a list of registers per slot
  local: str | None = None  # name of the .local array


@dataclass
class _Addr:
  """What an INDEX evaluates to: a global/local address register, or a register standing for a DEFINE_REG slot."""
  space: str          # "global", "local", "shared" or "reg"
  dt: DType           # element dtype
  reg: str            # address register, or the slot's value register for "reg"
  vregs: list[str] | None = None  # "reg" slots of vector elements


class _Kernel:
  def __init__(self, r: PTXRenderer, name: str, uops: list[UOp]):
    self.r, self.name, self.uops = r, name, uops
    self.lines: list[str] = []
    self.counts: dict[str, int] = {c: 0 for c in DECL}
    self.vals: dict[UOp, str] = {}
    self.addrs: dict[UOp, _Addr] = {}
    self.regs: dict[UOp, _Reg] = {}
    self.locals: list[str] = []
    self.consts: list[dict[tuple[object, DType], str]] = [{}]  # materialized constants, one scope per open loop
    self.loops: list[UOp] = []  # open RANGEs, innermost last
    self.nlabels = 0
    self.params: list[str] = []
    self.loop_info: dict[UOp, tuple[str, str, str]] = {}  # RANGE -> (body label, exit label, end register)
    self.module_decls: dict[str, str] = {}  # module-scope .const tables, by name
    self.vecs: dict[UOp, list[str]] = {}     # vector values (see the module docstring)
    self.lazy_gep: dict[UOp, tuple[UOp, int]] = {}  # lanes of packed half vectors, unpacked when used as scalars
    self.skip: set[UOp] = set()              # LOADs that only feed async copies
    self.streamed = streamed_loads(uops)     # LOADs read once by one thread: past L1 (streams.py)

  # ---- registers and emission
  def new(self, cls: str) -> str:
    n = self.counts[cls]
    self.counts[cls] = n + 1
    return f"%{cls}{n}"

  def new_for(self, dt: DType) -> str: return self.new(CLASS[ITYPE[dt]])

  def emit(self, ins: str, pred: str | None = None) -> None: self.lines.append(f"\t{'@' + pred + ' ' if pred else ''}{ins};")

  def label(self) -> str:
    self.nlabels += 1
    return f"$L{self.nlabels}"

  def const(self, v: object, dt: DType) -> str:
    """A register holding constant v (materialized once per loop scope, where it dominates every later use)."""
    # floats by repr: -0.0 == 0.0 in Python but not in the register (a zero remainder keeps its sign), and nan != nan
    key = (repr(v) if isinstance(v, float) else v, dt)
    for scope in reversed(self.consts):
      if key in scope: return scope[key]
    reg = self.new_for(dt)
    if dt == dtypes.bool: self.emit(f"setp.ne.u32 {reg}, {self.const(1 if v else 0, dtypes.uint32)}, 0")
    else: self.emit(f"mov.{MOV[CLASS[ITYPE[dt]]]} {reg}, {imm(v, dt)}")
    self.consts[-1][key] = reg
    return reg

  def v(self, u: UOp) -> str:
    if u.op is Ops.CONST: return self.const(u.arg, u.dtype)
    if u in self.lazy_gep and u not in self.vals:
      vec, lane = self.lazy_gep[u]
      lo, hi, out = self.new("rs"), self.new("rs"), self.new("f")
      self.emit(f"mov.b32 {{{lo}, {hi}}}, {self.vecs[vec][lane // 2]}")
      self._half_bits_to_f32(out, hi if lane % 2 else lo, u.dtype)
      self.vals[u] = out
    if u not in self.vals: raise ValueError(f"PTX renderer: {u.op} used before it was defined (kernel {self.name})")
    return self.vals[u]

  # ---- the kernel
  def build(self) -> str:
    self._plan_regs()
    # parameters: buffers by number, then int vars in order of appearance (as the runtime passes them)
    for u in sorted((u for u in self.uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg): self._param_buf(u)
    for i, u in enumerate(dict.fromkeys(u for u in self.uops if u.op is Ops.DEFINE_VAR)): self._param_var(u, i)
    uses: dict[UOp, int] = {}
    for u in self.uops:  # uses as a value (BARRIER/END/SINK sources only order things)
      if u.op not in (Ops.BARRIER, Ops.END, Ops.SINK):
        for x in u.src: uses[x] = uses.get(x, 0) + 1
    self.skip = {u.src[1] for u in self.uops if u.op is Ops.STORE and u.arg == "async" and uses.get(u.src[1]) == 1 and self.r.sm >= 80}
    for u in self.uops:
      if u in self.vals or u in self.addrs or u in self.vecs or u in self.lazy_gep: continue  # hash-consed: a repeated node is the same value
      self._render(u)
    if self.loops: raise ValueError(f"PTX renderer: {len(self.loops)} RANGE(s) not closed by END in kernel {self.name}")
    ntid = [1, 1, 1]
    for u in self.uops:
      if u.op is Ops.SPECIAL and u.arg[0].startswith("lidx"): ntid[int(u.arg[0][4:])] = int(u.arg[1])
    decls = [f"\t.reg {DECL[c]} %{c}<{n}>;" for c, n in self.counts.items() if n]
    head = [f"//\n// Generated by tinygrad_backend_nv (PTX renderer) for {self.r.arch}\n//",
            f".version {PTX_VERSION}", f".target {self.r.arch}", ".address_size 64", "", *self.module_decls.values(),
            f".visible .entry {self.name}(", ",\n".join(f"\t{p}" for p in self.params), ")", f".maxntid {ntid[0]}, {ntid[1]}, {ntid[2]}", "{"]
    return "\n".join([*head, *decls, *self.locals, *self.lines, "\tret;", "}", ""])

  def _plan_regs(self) -> None:
    """DEFINE_REGs whose every INDEX is a constant become registers (ptxas would otherwise keep them in memory)."""
    const_only: dict[UOp, bool] = {}
    for u in self.uops:
      if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_REG:
        const_only[u.src[0]] = const_only.get(u.src[0], True) and u.src[1].op is Ops.CONST
    for u in self.uops:
      if u.op is Ops.DEFINE_REG:
        assert isinstance(u.dtype, PtrDType)
        _check_dtype(u.dtype.base)
        self.regs[u] = _Reg(u, u.dtype.base, local=None if const_only.get(u, True) else f"__acc{len(self.regs)}")

  def _render(self, u: UOp) -> None:
    op = u.op
    if op in (Ops.SINK, Ops.NOOP): return
    _check_dtype(u.dtype if not isinstance(u.dtype, PtrDType) else u.dtype.base)
    if op is Ops.CONST: return  # materialized where used
    if op is Ops.AFTER:
      if u.src[0] in self.addrs: self.addrs[u] = self.addrs[u.src[0]]
      elif u.src[0] in self.vecs: self.vecs[u] = self.vecs[u.src[0]]
      elif u.src[0] in self.skip: self.skip.add(u)
      else: self.vals[u] = self.v(u.src[0])
    elif op is Ops.DEFINE_REG: self._define_reg(u)
    elif op is Ops.DEFINE_LOCAL:
      assert isinstance(u.dtype, PtrDType)
      name = f"__smem{u.arg}"
      self.locals.append(f"\t.shared .align 16 .b8 {name}[{max(u.dtype.size, 1) * u.dtype.base.itemsize}];")
      base = self.vals[u] = self.new("rd")
      self.emit(f"mov.u64 {base}, {name}")
    elif op is Ops.BARRIER:
      if self.r.sm >= 80: self.emit(f"cp.async.commit_group;\n\tcp.async.wait_group {u.arg or 0}")
      self.emit("bar.sync 0")
    elif op is Ops.WMMA: self._wmma(u)
    elif op is Ops.SHUFFLE:  # a .b32 exchange takes any 32-bit register (f32, s32, u32); clamp 31: lanes of the whole warp
      reg = self.vals[u] = self.new(CLASS[ITYPE[u.dtype]])
      self.emit(f"shfl.sync.bfly.b32 {reg}, {self.v(u.src[0])}, {u.arg}, 31, 0xffffffff")
    elif op is Ops.VECTORIZE: self._vectorize(u)
    elif op is Ops.GEP:
      if u.src[0].dtype.scalar() in HALFS: self.lazy_gep[u] = (u.src[0], u.arg[0])
      else: self.vals[u] = self.vecs[u.src[0]][u.arg[0]]
    elif op is Ops.SPECIAL:
      kind, axis = u.arg[0][:4], int(u.arg[0][4:])
      sreg = {"gidx": "%ctaid", "lidx": "%tid"}.get(kind)
      if sreg is None: raise NotImplementedError(f"PTX renders no GPU index {u.arg[0]!r} (known: gidxN, lidxN)")
      reg = self.vals[u] = self.new("r")
      self.emit(f"mov.u32 {reg}, {sreg}.{'xyz'[axis]}")
    elif op is Ops.RANGE: self._range(u)
    elif op is Ops.END: self._end(u)
    elif op is Ops.INDEX: self._index(u)
    elif op is Ops.LOAD: self._load(u)
    elif op is Ops.STORE: self._store(u)
    elif op is Ops.CAST: self.vals[u] = self.cast(self.v(u.src[0]), u.src[0].dtype, u.dtype)
    elif op is Ops.BITCAST: self.vals[u] = self.bitcast(self.v(u.src[0]), u.src[0].dtype, u.dtype)
    elif op in GroupOp.ALU and op in NATIVE_OPS: self.vals[u] = self.alu(op, u.dtype, u.src)
    else: raise NotImplementedError(f"PTX renderer can't render {op} (dtype {u.dtype}, arg {u.arg!r})")

  # ---- parameters and memory
  def _param_buf(self, u: UOp) -> None:
    assert isinstance(u.dtype, PtrDType)
    _check_dtype(u.dtype.base)
    self.params.append(f".param .u64 data{u.arg}")
    raw, reg = self.new("rd"), self.new("rd")
    self.emit(f"ld.param.u64 {raw}, [data{u.arg}]")
    self.emit(f"cvta.to.global.u64 {reg}, {raw}")
    self.vals[u] = reg

  def _param_var(self, u: UOp, i: int) -> None:
    if u.dtype not in (dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64): raise UnsupportedDTypeError("PTX", u.dtype, "int vars only")
    self.params.append(f".param .{ITYPE[u.dtype]} var{i}")
    reg = self.vals[u] = self.new_for(u.dtype)
    self.emit(f"ld.param.{ITYPE[u.dtype]} {reg}, [var{i}]")

  def _define_reg(self, u: UOp) -> None:
    reg = self.regs[u]
    assert isinstance(u.dtype, PtrDType)
    if reg.local is not None:
      size = max(u.dtype.size, 1) * self._local_size(reg.elem)
      self.locals.append(f"\t.local .align 8 .b8 {reg.local}[{size}];")
      base = self.vals[u] = self.new("rd")
      self.emit(f"mov.u64 {base}, {reg.local}")
    else: self.vals[u] = ""

  @staticmethod
  def _local_size(dt: DType) -> int: return 4 if dt in HALFS else dt.itemsize  # half/bf16 stay float in .local

  def _index(self, u: UOp) -> None:
    buf, idx = u.src[0], u.src[1]
    if buf.op is Ops.AFTER: buf = buf.src[0]
    if buf.op is Ops.DEFINE_REG:
      reg = self.regs[buf]
      if reg.local is None and reg.elem.count > 1:
        slot = int(idx.arg)
        if slot not in reg.vregs: reg.vregs[slot] = [self.new("f") for _ in range(reg.elem.count)]
        self.addrs[u] = _Addr("reg", reg.elem, "", reg.vregs[slot])
        return
      if reg.local is None:
        slot = int(idx.arg)
        if slot not in reg.regs: reg.regs[slot] = self.new_for(reg.elem)
        self.addrs[u] = _Addr("reg", reg.elem, reg.regs[slot])
        return
      self.addrs[u] = _Addr("local", reg.elem, self._address(self.vals[buf], idx, self._local_size(reg.elem)))
      return
    if buf.op is Ops.DEFINE_LOCAL:
      assert isinstance(buf.dtype, PtrDType)
      self.addrs[u] = _Addr("shared", buf.dtype.base, self._address(self.vals[buf], idx, buf.dtype.base.itemsize))
      return
    if buf.op is not Ops.DEFINE_GLOBAL: raise NotImplementedError(f"PTX: INDEX into {buf.op}")
    assert isinstance(buf.dtype, PtrDType)
    self.addrs[u] = _Addr("global", buf.dtype.base, self._address(self.vals[buf], idx, buf.dtype.base.itemsize))

  def _address(self, base: str, idx: UOp, size: int) -> str:
    out = self.new("rd")
    if idx.op is Ops.CONST:
      self.emit(f"add.s64 {out}, {base}, {int(idx.arg) * size}")
      return out
    it, i = ITYPE[idx.dtype], self.v(idx)
    if it in ("s32", "u32"): self.emit(f"mul.wide.{it} {out}, {i}, {size}")
    else:
      wide = i if it in ("s64", "u64") else self.cast(i, idx.dtype, dtypes.int64)
      self.emit(f"mul.lo.s64 {out}, {wide}, {size}")
    self.emit(f"add.s64 {out}, {base}, {out}")
    return out

  def _addr_of(self, u: UOp) -> _Addr:
    if u not in self.addrs: raise ValueError(f"PTX renderer: LOAD/STORE needs an INDEX, got {u.op}")
    return self.addrs[u]

  def _load(self, u: UOp) -> None:
    if u in self.skip: return  # its async copy reads the memory itself
    if u.arg is not None or u.dtype.count > 1: return self._vload(u)
    a = self._addr_of(u.src[0])
    gate = self.v(u.src[1]) if len(u.src) == 3 else None
    dst = self.vals[u] = self.new_for(u.dtype)
    if gate is not None: self.emit(f"mov.{MOV[CLASS[ITYPE[u.dtype]]]} {dst}, {self.v(u.src[2])}")
    if a.space == "reg": return self.emit(f"mov.{MOV[CLASS[ITYPE[u.dtype]]]} {dst}, {a.reg}", gate)
    space, dt = a.space, a.dt
    if dt == dtypes.bool:
      tmp = self.new("rs")
      self.emit(f"ld.{space}.u8 {tmp}, [{a.reg}]", gate)
      self.emit(f"setp.ne.u16 {dst}, {tmp}, 0", gate)
    elif dt in HALFS and space in ("global", "shared"):
      tmp = self.new("rs")
      self.emit(f"ld.{space}.b16 {tmp}, [{a.reg}]", gate)
      self._half_bits_to_f32(dst, tmp, dt, gate)
    else: self.emit(f"ld.{self._space(u, space)}.{'f32' if dt in HALFS else MEM[dt]} {dst}, [{a.reg}]", gate)

  def _space(self, u: UOp, space: str) -> str:
    """A load's state space, with the no-L1 hint where it streams (streams.py)."""
    return "global.nc.L1::no_allocate" if space == "global" and u in self.streamed else space

  def _store(self, u: UOp) -> None:
    if u.arg == "async" or u.src[1].dtype.count > 1: return self._vstore(u)
    a = self._addr_of(u.src[0])
    val, dt = self.v(u.src[1]), u.src[1].dtype
    gate = self.v(u.src[2]) if len(u.src) == 3 else None
    if u.arg == STORE_ADD:  # 64-bit ints add as u64 (two's complement: the same bits)
      return self.emit(f"red.global.add.{'u64' if dt in (dtypes.int64, dtypes.uint64) else MEM[dt]} [{a.reg}], {val}", gate)
    if a.space == "reg": return self.emit(f"mov.{MOV[CLASS[ITYPE[dt]]]} {a.reg}, {val}", gate)
    if dt == dtypes.bool:
      tmp = self.new("rs")
      self.emit(f"selp.u16 {tmp}, 1, 0, {val}")
      self.emit(f"st.{a.space}.u8 [{a.reg}], {tmp}", gate)
    elif dt in HALFS and a.space in ("global", "shared"): self.emit(f"st.{a.space}.b16 [{a.reg}], {self._f32_to_half_bits(val, dt)}", gate)
    else: self.emit(f"st.{a.space}.{'f32' if dt in HALFS else MEM[dt]} [{a.reg}], {val}", gate)

  # ---- vectors: fragments, accumulators, 16-byte copies, and the tensor-core instructions
  def _vregs(self, dt: DType) -> list[str]:
    """Fresh registers for a vector value: half/bf16 packed two per .b32, float32 one per .f32."""
    return [self.new("r") for _ in range(dt.count // 2)] if dt.scalar() in HALFS else [self.new("f") for _ in range(dt.count)]

  def _vtype(self, dt: DType) -> str: return "b32" if dt.scalar() in HALFS else "f32"

  def _vload(self, u: UOp) -> None:
    a = self._addr_of(u.src[0])
    if len(u.src) != 1: raise NotImplementedError("PTX: gated vector loads")
    if a.space == "reg":
      assert a.vregs is not None
      out = self.vecs[u] = [self.new("f") for _ in a.vregs]
      for d, x in zip(out, a.vregs): self.emit(f"mov.f32 {d}, {x}")
      return
    regs = self.vecs[u] = self._vregs(u.dtype)
    if u.arg is not None:  # ("matrix", matrices, trans): ldmatrix
      if u.arg[0] != "matrix" or a.space != "shared": raise NotImplementedError(f"PTX: collective load {u.arg!r} from {a.space}")
      self.emit(f"ldmatrix.sync.aligned.m8n8.x{u.arg[1]}{'.trans' if u.arg[2] else ''}.shared.b16 {{{', '.join(regs)}}}, [{a.reg}]")
      return
    vec = f".v{len(regs)}" if len(regs) > 1 else ""
    space = self._space(u, a.space)
    self.emit(f"ld.{space}{vec}.{self._vtype(u.dtype)} {{{', '.join(regs)}}}, [{a.reg}]" if vec else f"ld.{space}.{self._vtype(u.dtype)} {regs[0]}, [{a.reg}]")

  def _vstore(self, u: UOp) -> None:
    a, dt = self._addr_of(u.src[0]), u.src[1].dtype
    if len(u.src) != 2: raise NotImplementedError("PTX: gated vector stores")
    if u.arg == "async" and self.r.sm >= 80:  # cp.async: global -> shared, complete by a later BARRIER
      src = self._addr_of(u.src[1].src[0])
      self.emit(f"cp.async.{'cg' if dt.nbytes == 16 else 'ca'}.shared.global [{a.reg}], [{src.reg}], {dt.nbytes}")
      return
    if dt.count == 1: return self._store(UOp(Ops.STORE, dtypes.void, u.src))  # an "async" scalar copy done at once
    regs = self.vecs[u.src[1]]
    if a.space == "reg":
      assert a.vregs is not None
      for d, x in zip(a.vregs, regs): self.emit(f"mov.f32 {d}, {x}")
      return
    vec = f".v{len(regs)}" if len(regs) > 1 else ""
    self.emit(f"st.{a.space}{vec}.{self._vtype(dt)} [{a.reg}], {{{', '.join(regs)}}}" if vec else f"st.{a.space}.{self._vtype(dt)} [{a.reg}], {regs[0]}")

  def _vectorize(self, u: UOp) -> None:
    if u.dtype.scalar() not in HALFS:
      self.vecs[u] = [self.v(s) for s in u.src]
      return
    out = []
    for lo, hi in zip(u.src[0::2], u.src[1::2]):
      # a pair that is one packed register of another vector (fragments split from an ldmatrix) is that register
      if lo in self.lazy_gep and hi in self.lazy_gep and self.lazy_gep[lo][0] is self.lazy_gep[hi][0] and \
         self.lazy_gep[lo][1] % 2 == 0 and self.lazy_gep[hi][1] == self.lazy_gep[lo][1] + 1:
        out.append(self.vecs[self.lazy_gep[lo][0]][self.lazy_gep[lo][1] // 2])
        continue
      reg = self.new("r")
      self.emit(f"mov.b32 {reg}, {{{self._f32_to_half_bits(self.v(lo), lo.dtype)}, {self._f32_to_half_bits(self.v(hi), hi.dtype)}}}")
      out.append(reg)
    self.vecs[u] = out

  def _wmma(self, u: UOp) -> None:
    tc = next((t for t in self.r.tensor_cores if t.name == u.arg[0]), None)
    if tc is None: raise NotImplementedError(f"PTX: no tensor core {u.arg[0]!r} on {self.r.arch}")
    a, b, c = (self.vecs[s] for s in u.src)
    if tc.dtype_in == dtypes.float32:  # tf32 operands: the f32 bits in .b32 registers
      def bits(xs: list[str]) -> list[str]:
        out = [self.new("r") for _ in xs]
        for d, x in zip(out, xs): self.emit(f"mov.b32 {d}, {x}")
        return out
      a, b = bits(a), bits(b)
    d = self.vecs[u] = [self.new("f") for _ in c]
    self.emit(f"{tc.extra['ptx']} {{{', '.join(d)}}}, {{{', '.join(a)}}}, {{{', '.join(b)}}}, {{{', '.join(c)}}}")

  # ---- half/bf16 <-> bits (values are float32 registers holding exactly representable numbers)
  def _half_bits_to_f32(self, dst: str, bits: str, dt: DType, pred: str | None = None) -> None:
    if dt == dtypes.float16: return self.emit(f"cvt.f32.f16 {dst}, {bits}", pred)
    wide = self.new("r")
    self.emit(f"cvt.u32.u16 {wide}, {bits}", pred)
    self.emit(f"shl.b32 {wide}, {wide}, 16", pred)  # bf16 is the high half of a float
    self.emit(f"mov.b32 {dst}, {wide}", pred)

  def _f32_to_half_bits(self, x: str, dt: DType) -> str:
    out = self.new("rs")
    if dt == dtypes.float16:
      self.emit(f"cvt.rn.f16.f32 {out}, {x}")
      # a NaN is stored as 0x7e00, the quiet NaN numpy and alu write (cvt makes it 0x7fff; the payload of a loaded NaN is
      # already gone: cvt.f32.f16 canonicalizes it)
      p = self.new("p")
      self.emit(f"setp.nan.f32 {p}, {x}, {x}")
      self.emit(f"mov.b16 {out}, 32256", p)
    else:
      wide = self.new("r")
      self.emit(f"mov.b32 {wide}, {x}")
      self.emit(f"shr.u32 {wide}, {wide}, 16")  # x is bf16-exact: the high half is all of it
      self.emit(f"cvt.u16.u32 {out}, {wide}")
    return out

  def round_to(self, x: str, dt: DType) -> str:
    """Round a float32 register to float16/bfloat16 (nearest even) and widen back; other dtypes unchanged."""
    if dt == dtypes.float16:
      bits, out = self.new("rs"), self.new("f")
      self.emit(f"cvt.rn.f16.f32 {bits}, {x}")
      self.emit(f"cvt.f32.f16 {out}, {bits}")
      return out
    if dt != dtypes.bfloat16: return x
    out = self.new("f")
    if self.r.sm >= 80:
      bits = self.new("rs")
      self.emit(f"cvt.rn.bf16.f32 {bits}, {x}")
      self._half_bits_to_f32(out, bits, dt)
      return out
    # sm_75 has no bf16 cvt: round the bits (ties to even), keep NaN a quiet NaN
    b, lsb, r, q, p = self.new("r"), self.new("r"), self.new("r"), self.new("r"), self.new("p")
    self.emit(f"mov.b32 {b}, {x}")
    self.emit(f"bfe.u32 {lsb}, {b}, 16, 1")
    self.emit(f"add.u32 {r}, {b}, 32767")
    self.emit(f"add.u32 {r}, {r}, {lsb}")
    self.emit(f"or.b32 {q}, {b}, 4194304")
    self.emit(f"setp.nan.f32 {p}, {x}, {x}")
    self.emit(f"selp.b32 {r}, {q}, {r}, {p}")
    self.emit(f"and.b32 {r}, {r}, 4294901760")
    self.emit(f"mov.b32 {out}, {r}")
    return out

  # ---- loops
  def _range(self, u: UOp) -> None:
    it = ITYPE[u.dtype]
    end = self.v(u.src[0])
    if u.src[0].dtype != u.dtype: end = self.cast(end, u.src[0].dtype, u.dtype)
    i, p = self.new(CLASS[it]), self.new("p")
    body, done = self.label(), self.label()
    self.emit(f"mov.{MOV[CLASS[it]]} {i}, 0")
    self.emit(f"setp.ge.{it} {p}, {i}, {end}")
    self.emit(f"bra {done}", p)
    self.lines.append(f"{body}:")
    self.vals[u] = i
    self.loops.append(u)
    self.loop_info[u] = (body, done, end)
    self.consts.append({})

  def _end(self, u: UOp) -> None:
    rng = u.src[0]
    if not self.loops or self.loops[-1] is not rng: raise ValueError(f"PTX renderer: END of a loop that is not the innermost open one ({self.name})")
    self.loops.pop()
    self.consts.pop()
    body, done, end = self.loop_info[rng]
    it, i, p = ITYPE[rng.dtype], self.vals[rng], self.new("p")
    self.emit(f"add.{it} {i}, {i}, 1")
    self.emit(f"setp.lt.{it} {p}, {i}, {end}")
    self.emit(f"bra {body}", p)
    self.lines.append(f"{done}:")

  # ---- elementwise
  def alu(self, op: Ops, dt: DType, srcs: tuple[UOp, ...]) -> str:
    s = [self.v(x) for x in srcs]
    if op in GroupOp.Comparison: return self._cmp(op, srcs[0].dtype, s[0], s[1])
    if op is Ops.WHERE: return self._where(dt, *s)
    if dt == dtypes.bool: return self._bool_alu(op, s)
    if dtypes.is_float(dt): return self._float_alu(op, dt, s)
    if op in (Ops.SHL, Ops.SHR): s[1] = self._shift_amount(s[1], srcs[1].dtype)
    return self._int_alu(op, dt, s, srcs)

  def _cmp(self, op: Ops, dt: DType, a: str, b: str) -> str:
    out = self.new("p")
    if dt == dtypes.bool:
      if op is Ops.CMPLT:  # a < b on bools: !a & b
        na = self.new("p")
        self.emit(f"not.pred {na}, {a}")
        self.emit(f"and.pred {out}, {na}, {b}")
      else:
        self.emit(f"xor.pred {out}, {a}, {b}")
        if op is Ops.CMPEQ: self.emit(f"not.pred {out}, {out}")
      return out
    it = ITYPE[dt]
    cmp = {Ops.CMPLT: "lt", Ops.CMPEQ: "eq", Ops.CMPNE: "neu" if dtypes.is_float(dt) else "ne"}[op]  # NaN != x is true
    self.emit(f"setp.{cmp}.{it} {out}, {a}, {b}")
    return out

  def _where(self, dt: DType, c: str, a: str, b: str) -> str:
    if dt == dtypes.bool:
      t1, t2, nc, out = self.new("p"), self.new("p"), self.new("p"), self.new("p")
      self.emit(f"and.pred {t1}, {c}, {a}")
      self.emit(f"not.pred {nc}, {c}")
      self.emit(f"and.pred {t2}, {nc}, {b}")
      self.emit(f"or.pred {out}, {t1}, {t2}")
      return out
    out = self.new_for(dt)
    self.emit(f"selp.{MOV[CLASS[ITYPE[dt]]]} {out}, {a}, {b}, {c}")
    return out

  def _bool_alu(self, op: Ops, s: list[str]) -> str:
    out = self.new("p")
    # python bool arithmetic truncated back to bool: + and max are or, * is and, - is xor
    ops = {Ops.AND: "and", Ops.MUL: "and", Ops.OR: "or", Ops.ADD: "or", Ops.MAX: "or", Ops.XOR: "xor", Ops.SUB: "xor"}
    if op in ops: self.emit(f"{ops[op]}.pred {out}, {s[0]}, {s[1]}")
    elif op is Ops.NEG: self.emit(f"not.pred {out}, {s[0]}")
    elif op is Ops.MULACC:
      t = self.new("p")
      self.emit(f"and.pred {t}, {s[0]}, {s[1]}")
      self.emit(f"or.pred {out}, {t}, {s[2]}")
    else: raise NotImplementedError(f"PTX: {op} on bool")
    return out

  def _shift_amount(self, b: str, dt: DType) -> str:
    """PTX shifts take a .u32 amount."""
    if ITYPE[dt] in ("s32", "u32"): return b
    out = self.new("r")
    self.emit(f"cvt.u32.{ITYPE[dt]} {out}, {b}")
    return out

  def _int_alu(self, op: Ops, dt: DType, s: list[str], srcs: tuple[UOp, ...]) -> str:
    it = ITYPE[dt]
    bits = it[1:]
    out = self.new_for(dt)
    simple = {Ops.ADD: f"add.{it}", Ops.SUB: f"sub.{it}", Ops.MUL: f"mul.lo.{it}", Ops.AND: f"and.b{bits}", Ops.OR: f"or.b{bits}",
              Ops.XOR: f"xor.b{bits}", Ops.SHL: f"shl.b{bits}", Ops.SHR: f"shr.{it}", Ops.MAX: f"max.{it}"}
    if op in simple: self.emit(f"{simple[op]} {out}, {s[0]}, {s[1]}")
    elif op is Ops.NEG: self.emit(f"neg.s{bits} {out}, {s[0]}")
    elif op is Ops.MULACC: self.emit(f"mad.lo.{it} {out}, {s[0]}, {s[1]}, {s[2]}")
    elif op in (Ops.IDIV, Ops.MOD): return self._divmod(op, dt, s[0], s[1], srcs[1])
    else: raise NotImplementedError(f"PTX: {op} on {dt}")
    return self._normalize(out, dt) if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.SHL, Ops.NEG, Ops.MULACC) else out

  def _normalize(self, x: str, dt: DType) -> str:
    """8-bit ints in 16-bit registers: sign/zero extend from bit 7 again after an op that may leave the range."""
    if dt not in SMALL_INTS: return x
    self.emit(f"cvt.{ITYPE[dt]}.{'s8' if dt == dtypes.int8 else 'u8'} {x}, {x}")
    return x

  def _divmod(self, op: Ops, dt: DType, a: str, b: str, bu: UOp) -> str:
    """C division with alu's extensions: x/0 == x%0 == 0, MIN/-1 wraps to MIN (guarded only when b may be 0 or -1)."""
    it = ITYPE[dt]
    ins = "div" if op is Ops.IDIV else "rem"
    out = self.new_for(dt)
    signed = it.startswith("s")
    may_trap = not (bu.op is Ops.CONST and bu.arg != 0 and not (signed and bu.arg == -1))
    if not may_trap:
      self.emit(f"{ins}.{it} {out}, {a}, {b}")
      return self._normalize(out, dt) if op is Ops.IDIV else out
    zero, bad, safe = self.new("p"), self.new("p"), self.new_for(dt)
    self.emit(f"setp.eq.{it} {zero}, {b}, 0")
    if signed and dt not in SMALL_INTS:
      is_min, neg1 = self.new("p"), self.new("p")
      self.emit(f"setp.eq.{it} {is_min}, {a}, {imm(dtypes.min(dt), dt)}")
      self.emit(f"setp.eq.{it} {neg1}, {b}, -1")
      self.emit(f"and.pred {is_min}, {is_min}, {neg1}")
      self.emit(f"or.pred {bad}, {zero}, {is_min}")
    else: bad = zero
    self.emit(f"selp.{MOV[CLASS[it]]} {safe}, 1, {b}, {bad}")  # MIN/1 == MIN and MIN%1 == 0 are the wrapped answers
    self.emit(f"{ins}.{it} {out}, {a}, {safe}")
    if op is Ops.IDIV:
      self.emit(f"selp.{MOV[CLASS[it]]} {out}, 0, {out}, {zero}")
      return self._normalize(out, dt)
    return out  # x % 1 is 0 already

  def _float_alu(self, op: Ops, dt: DType, s: list[str]) -> str:
    ft = ITYPE[dt]
    if op is Ops.MAX:  # alu: a NaN operand wins, else a if a >= b else b
      ge, an, out = self.new("p"), self.new("p"), self.new(CLASS[ft])
      self.emit(f"setp.ge.{ft} {ge}, {s[0]}, {s[1]}")
      self.emit(f"setp.nan.{ft} {an}, {s[0]}, {s[0]}")
      self.emit(f"or.pred {ge}, {ge}, {an}")
      self.emit(f"selp.{ft} {out}, {s[0]}, {s[1]}, {ge}")
      return out
    if op is Ops.NEG:
      out = self.new(CLASS[ft])
      self.emit(f"neg.{ft} {out}, {s[0]}")
      return out
    if op is Ops.TRUNC:  # alu's trunc gives +0.0 for -0.5 and -0.0: adding +0.0 turns -0.0 into +0.0
      t, out = self.new(CLASS[ft]), self.new(CLASS[ft])
      self.emit(f"cvt.rzi.{ft}.{ft} {t}, {s[0]}")
      self.emit(f"add.rn.{ft} {out}, {t}, {f64_imm(0.0) if ft == 'f64' else f32_imm(0.0)}")
      return out
    if op in (Ops.EXP2, Ops.LOG2, Ops.SIN): return self.round_to(self._transcendental(op, dt, s[0]), dt)
    out = self.new(CLASS[ft])
    simple = {Ops.ADD: "add.rn", Ops.SUB: "sub.rn", Ops.MUL: "mul.rn", Ops.FDIV: "div.rn", Ops.MULACC: "fma.rn", Ops.SQRT: "sqrt.rn",
              Ops.RECIPROCAL: "rcp.rn"}
    if op not in simple: raise NotImplementedError(f"PTX: {op} on {dt}")
    self.emit(f"{simple[op]}.{ft} {out}, {', '.join(s)}")
    return self.round_to(out, dt)

  # ---- transcendentals
  def _transcendental(self, op: Ops, dt: DType, x: str) -> str:
    if op is Ops.EXP2 and dt != dtypes.float64:
      out = self.new("f")
      self.emit(f"ex2.approx.f32 {out}, {x}")  # 2 ulp; subnormal results kept (no .ftz)
      return out
    fn: Callable[[str], str] = {Ops.EXP2: self._exp2_f64, Ops.LOG2: self._log2_f64, Ops.SIN: self._sin_f64}[op]
    if dt == dtypes.float64: return fn(x)
    wide, out = self.new("fd"), self.new("f")
    self.emit(f"cvt.f64.f32 {wide}, {x}")
    self.emit(f"cvt.rn.f32.f64 {out}, {fn(wide)}")
    return out

  def _horner(self, z: str, coeffs: list[float]) -> str:
    """coeffs[0] + z*(coeffs[1] + z*(...)) with fma."""
    acc = self.new("fd")
    self.emit(f"mov.f64 {acc}, {f64_imm(coeffs[-1])}")
    for c in reversed(coeffs[:-1]):
      nxt = self.new("fd")
      self.emit(f"fma.rn.f64 {nxt}, {acc}, {z}, {f64_imm(c)}")
      acc = nxt
    return acc

  def _exp2_f64(self, x: str) -> str:
    """2^x = 2^k * 2^f with k = rint(x), |f| <= 1/2: a degree-14 Taylor polynomial, then two exact-exponent scalings
    (so results down in the subnormals are rounded once)."""
    xc, kf, f, k, k1, k2 = self.new("fd"), self.new("fd"), self.new("fd"), self.new("r"), self.new("r"), self.new("r")
    self.emit(f"max.f64 {xc}, {x}, {f64_imm(-1100.0)}")
    self.emit(f"min.f64 {xc}, {xc}, {f64_imm(1100.0)}")
    self.emit(f"cvt.rni.f64.f64 {kf}, {xc}")
    self.emit(f"sub.rn.f64 {f}, {xc}, {kf}")
    p = self._horner(f, EXP2_COEFFS)
    self.emit(f"cvt.rni.s32.f64 {k}, {kf}")
    self.emit(f"shr.s32 {k1}, {k}, 1")
    self.emit(f"sub.s32 {k2}, {k}, {k1}")
    for kk in (k1, k2):
      e, eb, scale, nxt = self.new("r"), self.new("rd"), self.new("fd"), self.new("fd")
      self.emit(f"add.s32 {e}, {kk}, 1023")
      self.emit(f"cvt.u64.u32 {eb}, {e}")
      self.emit(f"shl.b64 {eb}, {eb}, 52")
      self.emit(f"mov.b64 {scale}, {eb}")
      self.emit(f"mul.rn.f64 {nxt}, {p}, {scale}")
      p = nxt
    nan, out = self.new("p"), self.new("fd")
    self.emit(f"setp.nan.f64 {nan}, {x}, {x}")
    self.emit(f"selp.f64 {out}, {x}, {p}, {nan}")
    return out

  def _log2_f64(self, x: str) -> str:
    """log2(x) = e + 2 atanh(s)/ln2 with x = 2^e m, m in [sqrt(1/2), sqrt(2)), s = (m-1)/(m+1), |s| < 0.172."""
    sub, xs, eadj = self.new("p"), self.new("fd"), self.new("r")
    self.emit(f"setp.lt.f64 {sub}, {x}, {f64_imm(2.0 ** -1022)}")  # subnormal (and <= 0, fixed at the end): scale up
    self.emit(f"mul.rn.f64 {xs}, {x}, {f64_imm(2.0 ** 54)}")
    self.emit(f"selp.f64 {xs}, {xs}, {x}, {sub}")
    self.emit(f"selp.s32 {eadj}, -54, 0, {sub}")
    bits, eb, e, mb, m = self.new("rd"), self.new("rd"), self.new("r"), self.new("rd"), self.new("fd")
    self.emit(f"mov.b64 {bits}, {xs}")
    self.emit(f"shr.u64 {eb}, {bits}, 52")
    self.emit(f"cvt.u32.u64 {e}, {eb}")
    self.emit(f"and.b32 {e}, {e}, 2047")
    self.emit(f"sub.s32 {e}, {e}, 1023")
    self.emit(f"add.s32 {e}, {e}, {eadj}")
    self.emit(f"and.b64 {mb}, {bits}, 4503599627370495")
    self.emit(f"or.b64 {mb}, {mb}, 4607182418800017408")  # exponent of 1.0: m in [1, 2)
    self.emit(f"mov.b64 {m}, {mb}")
    big = self.new("p")
    self.emit(f"setp.gt.f64 {big}, {m}, {f64_imm(math.sqrt(2.0))}")
    self.emit(f"mul.rn.f64 {m}, {m}, 0d3FE0000000000000", big)
    self.emit(f"add.s32 {e}, {e}, 1", big)
    num, den, s, z = self.new("fd"), self.new("fd"), self.new("fd"), self.new("fd")
    self.emit(f"sub.rn.f64 {num}, {m}, 0d3FF0000000000000")
    self.emit(f"add.rn.f64 {den}, {m}, 0d3FF0000000000000")
    self.emit(f"div.rn.f64 {s}, {num}, {den}")
    self.emit(f"mul.rn.f64 {z}, {s}, {s}")
    q = self._horner(z, ATANH_COEFFS)
    t, half_ln, ef, out = self.new("fd"), self.new("fd"), self.new("fd"), self.new("fd")
    self.emit(f"mul.rn.f64 {t}, {z}, {q}")
    self.emit(f"fma.rn.f64 {half_ln}, {s}, {t}, {s}")  # atanh(s) = s + s*z*q; ln(m) = 2 atanh(s)
    self.emit(f"cvt.rn.f64.s32 {ef}, {e}")
    self.emit(f"fma.rn.f64 {out}, {half_ln}, {f64_imm(2 * INV_LN2)}, {ef}")
    # specials: log2(+0) = -inf, log2(x<0) = NaN, log2(inf) = inf, NaN stays NaN
    p, res = self.new("p"), self.new("fd")
    self.emit(f"setp.eq.f64 {p}, {x}, 0d0000000000000000")
    self.emit(f"selp.f64 {res}, 0dFFF0000000000000, {out}, {p}")
    self.emit(f"setp.lt.f64 {p}, {x}, 0d0000000000000000")
    self.emit(f"selp.f64 {res}, 0d7FF8000000000000, {res}, {p}")
    self.emit(f"setp.eq.f64 {p}, {x}, 0d7FF0000000000000")
    self.emit(f"selp.f64 {res}, {x}, {res}, {p}")
    self.emit(f"setp.nan.f64 {p}, {x}, {x}")
    self.emit(f"selp.f64 {res}, {x}, {res}, {p}")
    return res

  def _sin_f64(self, x: str) -> str:
    """sin(x): x = k pi/2 + r, |r| <= pi/4, then Taylor sin or cos of r by k mod 4. The reduction is three-part
    Cody-Waite with fma for |x| < 2^20, Payne-Hanek (a 192-bit window of 2/pi's bits) above, so every finite x works."""
    t, k, r0 = self.new("fd"), self.new("fd"), self.new("fd")
    self.emit(f"mul.rn.f64 {t}, {x}, {f64_imm(TWO_OVER_PI)}")
    self.emit(f"cvt.rni.f64.f64 {k}, {t}")
    self.emit(f"fma.rn.f64 {r0}, {k}, {f64_imm(-PIO2[0])}, {x}")
    for part in PIO2[1:]:
      nxt = self.new("fd")
      self.emit(f"fma.rn.f64 {nxt}, {k}, {f64_imm(-part)}, {r0}")
      r0 = nxt
    r, q, ki, kz = self.new("fd"), self.new("r"), self.new("rd"), self.new("p")
    self.emit(f"setp.eq.f64 {kz}, {k}, 0d0000000000000000")
    self.emit(f"selp.f64 {r}, {x}, {r0}, {kz}")  # k == 0: r is x itself (keeps -0.0 and tiny x exact)
    self.emit(f"cvt.rzi.s64.f64 {ki}, {k}")
    self.emit(f"cvt.u32.u64 {q}, {ki}")
    self._payne_hanek(x, r, q)
    z = self.new("fd")
    self.emit(f"mul.rn.f64 {z}, {r}, {r}")
    ps, zs, sn = self._horner(z, SIN_COEFFS), self.new("fd"), self.new("fd")
    self.emit(f"mul.rn.f64 {zs}, {z}, {ps}")
    self.emit(f"fma.rn.f64 {sn}, {r}, {zs}, {r}")
    pc, cs = self._horner(z, COS_COEFFS), self.new("fd")
    self.emit(f"fma.rn.f64 {cs}, {z}, {pc}, 0d3FF0000000000000")
    b0, b1, p0, p1, v, nv, out = self.new("r"), self.new("r"), self.new("p"), self.new("p"), self.new("fd"), self.new("fd"), self.new("fd")
    self.emit(f"and.b32 {b0}, {q}, 1")
    self.emit(f"and.b32 {b1}, {q}, 2")
    self.emit(f"setp.ne.u32 {p0}, {b0}, 0")
    self.emit(f"setp.ne.u32 {p1}, {b1}, 0")
    self.emit(f"selp.f64 {v}, {cs}, {sn}, {p0}")
    self.emit(f"neg.f64 {nv}, {v}")
    self.emit(f"selp.f64 {out}, {nv}, {v}, {p1}")
    return out

  def _payne_hanek(self, x: str, r: str, q: str) -> None:
    """For finite |x| >= 2^20 overwrite r, q with x = (4n + q) pi/2 + r: |x| = M 2^e (M the 53-bit mantissa), and
    |x| 2/pi mod 4 = M * W * 2^-190 mod 4, W the 192 bits of 2/pi from bit e-1 on (earlier bits only add multiples of 4)."""
    init = ", ".join(f"0x{w:016X}" for w in TWO_OVER_PI_WORDS)
    self.module_decls["tg_two_over_pi"] = f".const .align 8 .b64 tg_two_over_pi[{len(TWO_OVER_PI_WORDS)}] = {{{init}}};"
    ax, big, inf_, skip = self.new("fd"), self.new("p"), self.new("p"), self.label()
    self.emit(f"abs.f64 {ax}, {x}")
    self.emit(f"setp.ge.f64 {big}, {ax}, {f64_imm(2.0 ** 20)}")
    self.emit(f"setp.lt.f64 {inf_}, {ax}, 0d7FF0000000000000")
    self.emit(f"and.pred {big}, {big}, {inf_}")
    self.emit(f"bra {skip}", f"!{big}")
    bits, eb, e, m = self.new("rd"), self.new("rd"), self.new("r"), self.new("rd")
    self.emit(f"mov.b64 {bits}, {ax}")
    self.emit(f"shr.u64 {eb}, {bits}, 52")
    self.emit(f"cvt.u32.u64 {e}, {eb}")
    self.emit(f"and.b64 {m}, {bits}, 4503599627370495")
    self.emit(f"or.b64 {m}, {m}, 4503599627370496")  # the implicit 1: M has 53 bits, |x| = M 2^(e - 1075)
    z, w, sh, sh2 = self.new("r"), self.new("r"), self.new("r"), self.new("r")
    self.emit(f"sub.u32 {z}, {e}, 1013")  # bit index of 2^-(e-1) in the table (64 leading zero bits): (e - 1075 - 1) + 64
    self.emit(f"shr.u32 {w}, {z}, 6")
    self.emit(f"and.b32 {sh}, {z}, 63")
    self.emit(f"sub.u32 {sh2}, 64, {sh}")
    # table[i] = the table's word w + i. Every word is loaded at a fixed offset and the four picked by w: indexing the table
    # through its address would leave a relocation in the code, which NVK+NV's loader does not apply (constant-bank offsets
    # ptxas resolves itself). Only |x| >= 2^20 takes this path.
    words = [self.new("rd") for _ in TWO_OVER_PI_WORDS]
    for j, wd in enumerate(words): self.emit(f"ld.const.u64 {wd}, [tg_two_over_pi+{8 * j}]")
    table = [self.new("rd") for _ in range(4)]
    for i, wd in enumerate(table): self.emit(f"mov.b64 {wd}, {words[i]}")
    for j in range(1, len(words) - 3):
      at = self.new("p")
      self.emit(f"setp.eq.u32 {at}, {w}, {j}")
      for i, wd in enumerate(table): self.emit(f"selp.b64 {wd}, {words[j + i]}, {wd}, {at}")
    win = []  # W2 (most significant), W1, W0
    for i in range(3):
      a, b, o = self.new("rd"), self.new("rd"), self.new("rd")
      self.emit(f"shl.b64 {a}, {table[i]}, {sh}")
      self.emit(f"shr.b64 {b}, {table[i + 1]}, {sh2}")  # a shift by 64 gives 0
      self.emit(f"or.b64 {o}, {a}, {b}")
      win.append(o)
    ha, lb, hb, lc, l1, l2 = (self.new("rd") for _ in range(6))
    self.emit(f"mul.hi.u64 {ha}, {m}, {win[2]}")
    self.emit(f"mul.lo.u64 {lb}, {m}, {win[1]}")
    self.emit(f"mul.hi.u64 {hb}, {m}, {win[1]}")
    self.emit(f"mul.lo.u64 {lc}, {m}, {win[0]}")
    self.emit(f"add.cc.u64 {l1}, {lb}, {ha}")  # bits 64..127 of M*W
    self.emit(f"addc.u64 {l2}, {hb}, {lc}")    # bits 128..191: the top two are the quadrant, then the fraction
    q64, fh, fl, frac, top, top32 = *(self.new("rd") for _ in range(5)), self.new("r")
    self.emit(f"shr.b64 {q64}, {l2}, 62")
    self.emit(f"cvt.u32.u64 {q}, {q64}")
    self.emit(f"shl.b64 {fh}, {l2}, 2")
    self.emit(f"shr.b64 {fl}, {l1}, 62")
    self.emit(f"or.b64 {frac}, {fh}, {fl}")
    self.emit(f"shr.u64 {top}, {frac}, 63")  # fraction >= 1/2: round up (the fraction read as signed is then f - 1)
    self.emit(f"cvt.u32.u64 {top32}, {top}")
    self.emit(f"add.u32 {q}, {q}, {top32}")
    f = self.new("fd")
    self.emit(f"cvt.rn.f64.s64 {f}, {frac}")
    self.emit(f"mul.rn.f64 {f}, {f}, {f64_imm(2.0 ** -64)}")
    self.emit(f"mul.rn.f64 {r}, {f}, {f64_imm(PIO2[0])}")
    neg = self.new("p")
    self.emit(f"setp.lt.f64 {neg}, {x}, 0d0000000000000000")
    self.emit(f"neg.f64 {r}, {r}", neg)
    self.emit(f"sub.u32 {q}, 0, {q}", neg)
    self.lines.append(f"{skip}:")

  # ---- conversions
  def cast(self, x: str, src: DType, dst: DType) -> str:
    if src == dst: return x
    if dst == dtypes.bool:
      out = self.new("p")
      if dtypes.is_float(src): self.emit(f"setp.neu.{ITYPE[src]} {out}, {x}, {f64_imm(0.0) if src == dtypes.float64 else f32_imm(0.0)}")
      else: self.emit(f"setp.ne.{ITYPE[src]} {out}, {x}, 0")
      return out
    if src == dtypes.bool:
      out = self.new_for(dst)
      one, zero = (imm(1.0, dst), imm(0.0, dst)) if dtypes.is_float(dst) else ("1", "0")
      self.emit(f"selp.{ITYPE[dst] if dtypes.is_float(dst) else MOV[CLASS[ITYPE[dst]]]} {out}, {one}, {zero}, {x}")
      return out
    if dtypes.is_int(src) and dtypes.is_int(dst): return self._int_to_int(x, src, dst)
    if dtypes.is_int(src): return self._int_to_float(x, src, dst)
    if dtypes.is_int(dst): return self._float_to_int(x, src, dst)
    return self._float_to_float(x, src, dst)

  def _int_to_int(self, x: str, src: DType, dst: DType) -> str:
    st, dt_ = ITYPE[src], ITYPE[dst]
    out = self.new_for(dst)
    if CLASS[st] == CLASS[dt_]: self.emit(f"mov.{MOV[CLASS[dt_]]} {out}, {x}")
    else: self.emit(f"cvt.{dt_}.{st} {out}, {x}")  # widening extends by the source's signedness, narrowing truncates
    return self._normalize(out, dst)

  def _int_to_float(self, x: str, src: DType, dst: DType) -> str:
    # alu converts through a Python float (a double): exact for <= 32-bit ints, one rounding for 64-bit
    wide = self.new("fd")
    self.emit(f"cvt.rn.f64.{ITYPE[src]} {wide}, {x}")
    return self._float_to_float(wide, dtypes.float64, dst)

  def _float_to_float(self, x: str, src: DType, dst: DType) -> str:
    if dst == dtypes.float64:
      if src == dtypes.float64: return x
      out = self.new("fd")
      self.emit(f"cvt.f64.f32 {out}, {x}")
      return out
    if src == dtypes.float64:
      if dst == dtypes.float16:  # one rounding, straight from the double (as alu's struct.pack('e'))
        bits, out = self.new("rs"), self.new("f")
        self.emit(f"cvt.rn.f16.f64 {bits}, {x}")
        self.emit(f"cvt.f32.f16 {out}, {bits}")
        return out
      out = self.new("f")
      self.emit(f"cvt.rn.f32.f64 {out}, {x}")  # bf16: through float, as truncate_bf16
      return self.round_to(out, dst)
    return self.round_to(x, dst)  # between float32 registers: round to the narrower type (float32: unchanged)

  def _float_to_int(self, x: str, src: DType, dst: DType) -> str:
    """alu.cast_scalar: NaN/inf -> 0, else truncate toward zero and wrap modulo 2^bits, computed exactly in float64."""
    if src != dtypes.float64: x = self._float_to_float(x, src, dtypes.float64)
    t, r, p, i = self.new("fd"), self.new("fd"), self.new("p"), self.new("rd")
    self.emit(f"mul.rn.f64 {t}, {x}, {f64_imm(2.0 ** -64)}")
    self.emit(f"cvt.rzi.f64.f64 {t}, {t}")
    self.emit(f"fma.rn.f64 {r}, {t}, {f64_imm(-2.0 ** 64)}, {x}")  # x mod 2^64 (exact), |r| < 2^64
    self.emit(f"setp.ge.f64 {p}, {r}, {f64_imm(2.0 ** 63)}")
    self.emit(f"sub.rn.f64 {r}, {r}, {f64_imm(2.0 ** 64)}", p)
    self.emit(f"setp.lt.f64 {p}, {r}, {f64_imm(-2.0 ** 63)}")
    self.emit(f"add.rn.f64 {r}, {r}, {f64_imm(2.0 ** 64)}", p)
    self.emit(f"cvt.rzi.s64.f64 {i}, {r}")
    self.emit(f"setp.nan.f64 {p}, {r}, {r}")  # NaN (also from inf - inf above) must give 0; cvt gives INT64_MIN
    self.emit(f"selp.b64 {i}, 0, {i}, {p}")
    return self._int_to_int(i, dtypes.int64, dst)

  def bitcast(self, x: str, src: DType, dst: DType) -> str:
    if src.itemsize != dst.itemsize: raise ValueError(f"PTX: bitcast between sizes {src} -> {dst}")
    if dst == dtypes.bool: return self.cast(x, src, dst)  # 1-byte sources only: from_bits makes any nonzero byte true
    if src == dtypes.bool: return self.cast(x, src, dst)
    if src in HALFS: x, src = self._f32_to_half_bits(x, src), dtypes.uint16
    if dst in HALFS:
      bits = self._int_to_int(x, src, dtypes.uint16) if src != dtypes.uint16 else x
      out = self.new("f")
      self._half_bits_to_f32(out, bits, dst)
      return out
    if dtypes.is_int(src) and dtypes.is_int(dst): return self._int_to_int(x, src, dst)
    out = self.new_for(dst)
    self.emit(f"mov.b{src.itemsize * 8} {out}, {x}")
    return out
