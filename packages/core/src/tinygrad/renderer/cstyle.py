"""CStyleRenderer: renders a linearized program (docs/linear-ir.md) as C-family source.

Every C dialect (CLANG, CUDA C, HIP, OpenCL, plugins) subclasses this and overrides class attributes or small
`render_*` methods; the walk over the program is shared. The output must agree with `tinygrad.uop.alu`.

Extension points, in short:
  type_map / int_suffix               C names of dtypes and literal suffixes (render_dtype, render_const)
  kernel_prefix / buffer_prefix / buffer_suffix / var_prefix   the kernel signature (render_kernel)
  helper_prefix                       how prelude helper functions are declared ("static inline ")
  special_index                       SPECIAL name prefix -> thread-index expression (render_special)
  code_for_op                         op -> fn(renderer, dtype, *operands) -> expression string
  render_div_guard                    IDIV/MOD whose divisor may be 0 or -1 (alu: x/0 == 0, INT_MIN/-1 wraps)
  name_prefix                         variable-name prefix per op (val, alu, cast, ridx, acc)
  render_math / math_fn_name          transcendental function names per dtype (half/bf16 go through float)
  render_inf / render_nan / render_float_literal   float constants
  render_cast / render_float_to_int / render_bitcast   conversions
  render_load / render_store / render_index / render_define_reg / render_range / range_pragma   memory and loops
  render_define_local / render_barrier / render_wmma   shared memory, block barriers, tensor-core instructions
  helpers()                           (trigger, C code) pairs: code is prepended when trigger occurs in the body
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tinygrad.dtype import DType, ImageDType, PtrDType, dtypes
from tinygrad.renderer import Renderer, UnsupportedDTypeError
from tinygrad.uop.ops import STORE_ADD, GroupOp, Ops, UOp

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNSIGNED_OF = {dtypes.int8: dtypes.uint8, dtypes.int16: dtypes.uint16, dtypes.int32: dtypes.uint32, dtypes.int64: dtypes.uint64}
_SIGNED = frozenset(_UNSIGNED_OF)


def _is_float(dt: DType) -> bool: return dtypes.is_float(dt)


def _ptr(u: UOp) -> PtrDType:
  if not isinstance(u.dtype, PtrDType): raise TypeError(f"{u.op} needs a PtrDType, got {u.dtype!r}")
  return u.dtype


def _max(r: CStyleRenderer, dt: DType, a: str, b: str) -> str:
  # alu's MAX propagates NaN from either side: a NaN `a` wins via a!=a, a NaN `b` makes a>=b false
  return f"((({a}>={b})||({a}!={a}))?{a}:{b})" if _is_float(dt) else f"(({a}>{b})?{a}:{b})"


def _neg(r: CStyleRenderer, dt: DType, x: str) -> str: return f"(!{x})" if dt == dtypes.bool else f"(-{x})"


def _trunc(r: CStyleRenderer, dt: DType, x: str) -> str:
  # alu's TRUNC gives +0.0 for -0.5 and -0.0 (math.trunc returns an int); "+0" turns -0.0 into +0.0 and changes nothing else
  return f"({r.render_math('trunc', dt, x)}+0)"


def _math(fn: str) -> Callable[..., str]: return lambda r, dt, x: r.render_math(fn, dt, x)


@dataclass
class _Kernel:
  """Per-render state (the renderer itself holds none, so one instance can render concurrently)."""
  names: dict[UOp, str] = field(default_factory=dict)
  lines: list[str] = field(default_factory=list)
  counters: dict[str, int] = field(default_factory=dict)
  bufs: dict[int, UOp] = field(default_factory=dict)
  vars: list[UOp] = field(default_factory=list)
  depth: int = 1
  skip: set[UOp] = field(default_factory=set)  # LOADs that only feed async copies: the copy reads memory itself

  def new_name(self, prefix: str) -> str:
    n = self.counters.get(prefix, 0)
    self.counters[prefix] = n + 1
    return f"{prefix}{n}"

  def emit(self, line: str) -> None: self.lines.append("  " * self.depth + line)


class CStyleRenderer(Renderer):
  """Base renderer for C-like languages. Subclasses set `device`, `name` and override the knobs below."""
  # ---- kernel signature
  kernel_prefix: str = ""          # before "void", e.g. 'extern "C" __global__ ' or "__kernel "
  buffer_prefix: str = ""          # before a buffer parameter's element type, e.g. "__global "
  buffer_suffix: str = " restrict"  # after the '*' of a buffer parameter
  var_prefix: str = ""             # before an int parameter's type, e.g. "const "
  helper_prefix: str = "static inline "  # how prelude helpers are declared
  # ---- GPU thread indices: SPECIAL name prefix ("gidx", "lidx", ...) -> expression using {axis} (0..2) or {xyz}
  special_index: dict[str, str] = {}
  # ---- C names of dtypes; a dtype missing here can't be rendered (UnsupportedDTypeError)
  type_map: dict[DType, str] = {
    dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
    dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
    dtypes.uint64: "unsigned long long", dtypes.float16: "half", dtypes.bfloat16: "__bf16", dtypes.float32: "float",
    dtypes.float64: "double"}
  int_suffix: dict[DType, str] = {dtypes.uint32: "u", dtypes.int64: "ll", dtypes.uint64: "ull"}
  # names used for values, by op (others get "alu")
  name_prefix: dict[Ops, str] = {Ops.LOAD: "val", Ops.CAST: "cast", Ops.BITCAST: "cast", Ops.RANGE: "ridx", Ops.DEFINE_REG: "acc"}
  # op -> fn(renderer, dtype, *operand strings) -> C expression. dtype is the type the op computes in
  # (the operands' type for comparisons). IDIV/MOD by a possibly-zero divisor are wrapped by render_div_guard.
  code_for_op: dict[Ops, Callable[..., str]] = {
    Ops.NEG: _neg, Ops.RECIPROCAL: lambda r, dt, x: f"(1/{x})",
    Ops.EXP2: _math("exp2"), Ops.LOG2: _math("log2"), Ops.SIN: _math("sin"), Ops.SQRT: _math("sqrt"), Ops.TRUNC: _trunc,
    Ops.ADD: lambda r, dt, a, b: f"({a}+{b})", Ops.SUB: lambda r, dt, a, b: f"({a}-{b})", Ops.MUL: lambda r, dt, a, b: f"({a}*{b})",
    Ops.FDIV: lambda r, dt, a, b: f"({a}/{b})", Ops.IDIV: lambda r, dt, a, b: f"({a}/{b})", Ops.MOD: lambda r, dt, a, b: f"({a}%{b})",
    Ops.MAX: _max, Ops.CMPLT: lambda r, dt, a, b: f"({a}<{b})", Ops.CMPNE: lambda r, dt, a, b: f"({a}!={b})",
    Ops.CMPEQ: lambda r, dt, a, b: f"({a}=={b})", Ops.AND: lambda r, dt, a, b: f"({a}&{b})", Ops.OR: lambda r, dt, a, b: f"({a}|{b})",
    Ops.XOR: lambda r, dt, a, b: f"({a}^{b})", Ops.SHL: lambda r, dt, a, b: f"({a}<<{b})", Ops.SHR: lambda r, dt, a, b: f"({a}>>{b})",
    Ops.WHERE: lambda r, dt, c, a, b: f"({c}?{a}:{b})", Ops.MULACC: lambda r, dt, a, b, c: f"(({a}*{b})+{c})",
  }

  # ---- types and constants
  def render_dtype(self, dt: DType) -> str:
    if isinstance(dt, PtrDType): return self.render_dtype(dt.base) + "*"
    if dt.count > 1: return self.render_vector_dtype(dt)
    if dt == dtypes.void: return "void"
    if (name := self.type_map.get(dt)) is None: raise UnsupportedDTypeError(self.name, dt, self.unsupported_hint(dt))
    return name

  # ---- vector types (for 16-byte memory accesses, see codegen/vectorize.py): dialects with them override these
  def render_vector_dtype(self, dt: DType) -> str:
    raise UnsupportedDTypeError(self.name, dt, "vector types are not rendered by this C dialect")

  def render_vectorize(self, dt: DType, parts: list[str]) -> str: return f"({self.render_dtype(dt)}){{{', '.join(parts)}}}"

  def render_gep(self, x: str, lane: int, dt: DType | None = None) -> str:
    """Lane `lane` of vector x (of dtype dt, for dialects whose vector types differ by element type)."""
    return f"{x}.{'xyzw'[lane]}" if lane < 4 else f"{x}[{lane}]"

  def unsupported_hint(self, dt: DType) -> str:
    if dt in (dtypes.fp8e4m3, dtypes.fp8e5m2): return "fp8 has no C type here; cast to float16/float32 before this kernel"
    return "no C type for it in this dialect"

  def render_inf(self, dt: DType) -> str:
    return {dtypes.float32: "__builtin_inff()", dtypes.float64: "__builtin_inf()"}.get(dt) or f"(({self.render_dtype(dt)})__builtin_inff())"

  def render_nan(self, dt: DType) -> str:
    return {dtypes.float32: '__builtin_nanf("")', dtypes.float64: '__builtin_nan("")'}.get(dt) or \
      f'(({self.render_dtype(dt)})__builtin_nanf(""))'

  def render_float_literal(self, v: float, dt: DType) -> str:
    # repr is the shortest string that round-trips the double; every float32/half/bf16 value is exact as double,
    # so parsing it as float gives the same value. half/bf16 are written as a float cast (exact, no suffix needed).
    s = repr(v)
    if dt == dtypes.float64: return s
    return f"{s}f" if dt == dtypes.float32 else f"(({self.render_dtype(dt)}){s}f)"

  def render_const(self, v: bool | int | float, dt: DType) -> str:
    if dt == dtypes.bool: return "1" if v else "0"
    if _is_float(dt):
      v = float(v)
      if math.isnan(v): s = self.render_nan(dt)
      elif math.isinf(v): s = self.render_inf(dt) if v > 0 else f"(-{self.render_inf(dt)})"
      else: s = self.render_float_literal(v, dt)
      return f"({s})" if s.startswith("-") else s  # so that NEG of it never reads as "--"
    self.render_dtype(dt)  # raises for an unsupported int type
    v = int(v)
    if dt in _SIGNED and v == dtypes.min(dt) and dt.itemsize >= 4:  # -2147483648 would parse as -(a wider literal)
      return f"(-{-v - 1}{self.int_suffix.get(dt, '')}-1)"
    s = f"{v}{self.int_suffix.get(dt, '')}"
    return f"({s})" if v < 0 else s

  # ---- math
  def math_fn_name(self, fn: str, dt: DType) -> str | None:
    """The function computing `fn` ("exp2", "log2", "sin", "sqrt", "trunc") natively in dt, or None to go through float."""
    return {dtypes.float32: f"__builtin_{fn}f", dtypes.float64: f"__builtin_{fn}"}.get(dt)

  def render_math(self, fn: str, dt: DType, x: str) -> str:
    if (name := self.math_fn_name(fn, dt)) is not None: return f"{name}({x})"
    if (fname := self.math_fn_name(fn, dtypes.float32)) is None: raise NotImplementedError(f"{self.name}: no {fn} for {dt}")
    return f"(({self.render_dtype(dt)}){fname}((float){x}))"

  def render_div_guard(self, op: Ops, dt: DType, a: str, b: str) -> str:
    """IDIV/MOD by a divisor that may be 0 (alu: result 0) or -1 (INT_MIN/-1 traps on x86; alu: wraps)."""
    plain = self.code_for_op[op](self, dt, a, b)
    wide_signed = dt in _SIGNED and dt.itemsize >= 4  # narrower types are promoted to int, so no overflow
    if op is Ops.MOD: return f"(({b}==0{f'||{b}==-1' if wide_signed else ''})?0:{plain})"
    if not wide_signed: return f"(({b}==0)?0:{plain})"
    neg = f"(({self.render_dtype(dt)})(0-({self.render_dtype(_UNSIGNED_OF[dt])}){a}))"  # -a, wrapping without UB
    return f"(({b}==0)?0:({b}==-1)?{neg}:{plain})"

  # ---- conversions
  def render_cast(self, x: str, src: DType, dst: DType) -> str:
    if src == dst: return x
    if dst == dtypes.bool: return f"({x}!=0)"
    if _is_float(src) and dtypes.is_int(dst): return f"(({self.render_dtype(dst)}){self.render_float_to_int(x, src)})"
    if {src, dst} == {dtypes.float16, dtypes.bfloat16}:  # no direct conversion in most dialects (clang 19 even crashes on it)
      return f"(({self.render_dtype(dst)})(float){x})"
    return f"(({self.render_dtype(dst)}){x})"

  def render_float_to_int(self, x: str, src: DType) -> str:
    """A 64-bit int that wraps like alu.cast_scalar (C leaves out-of-range conversions undefined): see helpers()."""
    via = src if src in (dtypes.float32, dtypes.float64) else dtypes.float32
    arg = x if via == src else f"(({self.render_dtype(via)}){x})"
    return f"tg_f2i_{self.render_dtype(via).replace(' ', '_')}({arg})"

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
    if dst == dtypes.bool: return f"({x}!=0)"  # alu.from_bits: any nonzero byte is true
    # the source is cast first so an inlined literal has the right size
    return f"__builtin_bit_cast({self.render_dtype(dst)}, ({self.render_dtype(src)}){x})"

  # ---- memory, loops, thread indices
  def render_index(self, buf: str, idx: str, dt: PtrDType) -> str: return f"({buf}+{idx})"

  def render_load(self, ptr: str, dt: DType, gate: str | None = None, alt: str | None = None) -> str:
    return f"(*{ptr})" if gate is None else f"({gate}?(*{ptr}):{alt})"

  def render_store(self, ptr: str, value: str, dt: DType, gate: str | None = None) -> str:
    return f"*{ptr} = {value};" if gate is None else f"if ({gate}) *{ptr} = {value};"

  def render_atomic_add(self, ptr: str, value: str, dt: DType, gate: str | None = None) -> str:
    """*ptr += value atomically (get_program has checked that dt is one of self.atomic_add)."""
    raise NotImplementedError(f"{self.name} renders no atomic add")

  def render_atomic_add_builtin(self, ptr: str, value: str, dt: DType, gate: str | None = None) -> str:
    """render_atomic_add for clang's C dialects (HIP): its __atomic_fetch_add takes floats too."""
    code = f"__atomic_fetch_add({ptr}, {value}, __ATOMIC_RELAXED);"
    return code if gate is None else f"if ({gate}) {code}"

  def render_atomic_add_portable(self, ptr: str, value: str, dt: DType, gate: str | None = None) -> str:
    """render_atomic_add for C that gcc may compile too (the CPU's): integers by __atomic_fetch_add, floats by a compare-and-swap
    loop on their bits (gcc's __atomic builtins take no floats; clang makes the same loop of a float add on x86 and Arm)."""
    if not dtypes.is_float(dt) or dt.itemsize not in (4, 8): return self.render_atomic_add_builtin(ptr, value, dt, gate)
    bits, t = ("unsigned int" if dt.itemsize == 4 else "unsigned long long"), self.render_dtype(dt)
    code = (f"{{ {bits} *tg_p = ({bits} *)({ptr}), tg_old = __atomic_load_n(tg_p, __ATOMIC_RELAXED), tg_new; {t} tg_v = {value}, tg_f; "
            f"do {{ __builtin_memcpy(&tg_f, &tg_old, sizeof(tg_f)); tg_f += tg_v; __builtin_memcpy(&tg_new, &tg_f, sizeof(tg_f)); }} "
            f"while (!__atomic_compare_exchange_n(tg_p, &tg_old, tg_new, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); }}")
    return code if gate is None else f"if ({gate}) {code}"

  def render_define_reg(self, name: str, dt: PtrDType) -> str: return f"{self.render_dtype(dt.base)} {name}[{max(dt.size, 1)}];"

  # ---- shared memory, barriers, tensor cores (GPU dialects override these)
  def render_define_local(self, name: str, dt: PtrDType) -> str:
    raise NotImplementedError(f"{self.name} renders no shared memory (DEFINE_LOCAL)")

  def render_barrier(self, u: UOp) -> str: raise NotImplementedError(f"{self.name} renders no BARRIER")

  def render_sync(self, u: UOp, r: list[str]) -> str:
    """A BARRIER whose arg names a kind ("tile_copy", "mbar_wait", ...: renderer.tile_copy): its sources are its operands."""
    raise NotImplementedError(f"{self.name} renders no {u.arg[0]!r} BARRIER")

  def render_async_copy(self, u: UOp, dst: str, src: str) -> str:
    """STORE(dst, LOAD(src)) with arg "async": the copy completes by the next BARRIER (the LOAD itself is then unused)."""
    return self.render_store(dst, f"(*{src})", u.src[1].dtype)

  def render_collective_load(self, u: UOp, ptr: str) -> str:
    raise NotImplementedError(f"{self.name} renders no collective load {u.arg!r}")

  def render_shuffle(self, x: str, mask: int, dt: DType) -> str:
    """x as lane (this lane ^ mask) of the warp has it (Ops.SHUFFLE; a renderer with shuffle_lanes > 0 renders it)."""
    raise NotImplementedError(f"{self.name} renders no SHUFFLE (its shuffle_lanes is 0)")

  def render_wmma(self, u: UOp, operands: list[str]) -> str:
    raise NotImplementedError(f"{self.name} renders no tensor-core WMMA ({u.arg[0]})")

  def render_range(self, name: str, end: str, dt: DType) -> str:
    return f"for ({self.render_dtype(dt)} {name} = 0; {name} < {end}; {name}++) {{"

  def range_pragma(self, u: UOp) -> str:
    """A line before loop `u`'s header (e.g. CUDA's "#pragma unroll 1" for a loop its compiler must keep rolled); "" for none."""
    return ""

  def render_special(self, name: str, size: int) -> str:
    m = re.fullmatch(r"([A-Za-z_]+?)(\d+)", name)
    if m is None or (tmpl := self.special_index.get(m.group(1))) is None:
      raise NotImplementedError(f"{self.name} renders no GPU thread index {name!r} (known: {sorted(self.special_index)})")
    axis = int(m.group(2))
    return tmpl.format(axis=axis, xyz="xyz"[axis])

  # ---- signature and prelude
  def render_buffer_param(self, name: str, dt: PtrDType) -> str:
    return f"{self.buffer_prefix}{self.render_dtype(dt.base)}*{self.buffer_suffix} {name}"

  def render_var_param(self, name: str, u: UOp) -> str:
    comment = f" /* {u.arg[0]} */" if isinstance(u.arg, tuple) and isinstance(u.arg[0], str) and _IDENT.fullmatch(u.arg[0]) else ""
    return f"{self.var_prefix}{self.render_dtype(u.dtype)} {name}{comment}"

  def render_kernel(self, name: str, params: list[str], body: list[str], prelude: list[str]) -> str:
    head = f"{self.kernel_prefix}void {name}({', '.join(params)}) {{"
    return "\n".join([*prelude, head, *body, "}"]) + "\n"

  def helpers(self) -> list[tuple[str, str]]:
    """(trigger, code): code goes before the kernel when trigger appears in the body. Order is kept (deterministic)."""
    return [(f"tg_f2i_{self.render_dtype(dt).replace(' ', '_')}(", self._f2i_helper(dt)) for dt in (dtypes.float32, dtypes.float64)]

  def _f2i_helper(self, dt: DType) -> str:
    f, ll, ull = self.render_dtype(dt), self.render_dtype(dtypes.int64), self.render_dtype(dtypes.uint64)
    s = "f" if dt == dtypes.float32 else ""
    trunc = self.math_fn_name("trunc", dt)
    # nan/inf -> 0; |x| < 2^63 converts directly; beyond, x is an integer and wraps modulo 2^64 (computed exactly)
    return (f"{self.helper_prefix}{ll} tg_f2i_{f.replace(' ', '_')}({f} x) {{\n"
            f"  if (!(x - x == 0)) return 0;\n"
            f"  if (x >= -0x1p63{s} && x < 0x1p63{s}) return ({ll})x;\n"
            f"  {f} r = x - 0x1p64{s} * {trunc}(x * 0x1p-64{s});\n"
            f"  return ({ll})(r < 0 ? ({ull})0 - ({ull})(-r) : ({ull})r);\n}}")

  def render_prelude(self, body: str) -> list[str]:
    return [code for trigger, code in self.helpers() if trigger in body]

  # ---- the walk
  def render(self, name: str, uops: list[UOp]) -> str:
    k = _Kernel()
    uses: dict[UOp, int] = {}
    for u in uops:  # uses as a value (BARRIER/END/SINK sources only order things)
      if u.op not in (Ops.BARRIER, Ops.END, Ops.SINK):
        for x in u.src: uses[x] = uses.get(x, 0) + 1
    k.skip = {u.src[1] for u in uops if u.op is Ops.STORE and u.arg == "async" and uses.get(u.src[1]) == 1}
    for u in uops:
      if u in k.names: continue  # hash-consed: a repeated node is the same value
      self._render_uop(k, u)
    if k.depth != 1: raise ValueError(f"{self.name}: {k.depth - 1} RANGE(s) not closed by END in kernel {name}")
    params = [self.render_buffer_param(k.names[k.bufs[i]], _ptr(k.bufs[i])) for i in sorted(k.bufs)]
    params += [self.render_var_param(k.names[v], v) for v in k.vars]
    body = "\n".join(k.lines)
    return self.render_kernel(name, params, k.lines, self.render_prelude(body))

  def _declare(self, k: _Kernel, u: UOp, expr: str) -> None:
    name = k.new_name(self.name_prefix.get(u.op, "alu"))
    k.emit(f"{self.render_dtype(u.dtype)} {name} = {expr};")
    k.names[u] = name

  def _render_uop(self, k: _Kernel, u: UOp) -> None:
    op, r = u.op, [k.names.get(s, "") for s in u.src]
    if op is Ops.SINK: return
    if op in (Ops.AFTER, Ops.NOOP): k.names[u] = r[0]  # ordering only: the value of src[0]
    elif op is Ops.CONST: k.names[u] = self.render_const(u.arg, u.dtype)
    elif op is Ops.DEFINE_GLOBAL:
      if isinstance(u.dtype, ImageDType) and not self.supports_images:
        raise UnsupportedDTypeError(self.name, u.dtype, "this renderer has no image types: image buffers (IMAGE=1/2) are QCOMCL's on DEV=CL")
      self.render_dtype(_ptr(u).base)  # fail early on an unsupported dtype
      k.names[u], k.bufs[u.arg] = f"data{u.arg}", u
    elif op is Ops.DEFINE_VAR:
      k.names[u] = f"var{len(k.vars)}"
      k.vars.append(u)
    elif op is Ops.DEFINE_REG:
      k.names[u] = k.new_name(self.name_prefix[op])
      k.emit(self.render_define_reg(k.names[u], _ptr(u)))
    elif op is Ops.DEFINE_LOCAL:
      k.names[u] = k.new_name("smem")
      k.emit(self.render_define_local(k.names[u], _ptr(u)))
    elif op is Ops.BARRIER and isinstance(u.arg, tuple) and u.arg and isinstance(u.arg[0], str): k.emit(self.render_sync(u, r))
    elif op is Ops.BARRIER: k.emit(self.render_barrier(u))
    elif op is Ops.WMMA: self._declare(k, u, self.render_wmma(u, r))
    elif op is Ops.SHUFFLE: self._declare(k, u, self.render_shuffle(r[0], u.arg, u.dtype))
    elif op is Ops.SPECIAL:
      k.names[u] = u.arg[0]
      k.emit(f"{self.render_dtype(u.dtype)} {u.arg[0]} = {self.render_special(u.arg[0], u.arg[1])}; /* {u.arg[1]} */")
    elif op is Ops.RANGE:
      k.names[u] = k.new_name(self.name_prefix[op])
      if pragma := self.range_pragma(u): k.emit(pragma)
      k.emit(self.render_range(k.names[u], r[0], u.dtype))
      k.depth += 1
    elif op is Ops.END:
      k.depth -= 1
      k.emit("}")
    elif op is Ops.INDEX and _ptr(u).base.count > 1:  # a vector access: the element's address as a vector pointer
      k.names[u] = f"(({self.render_dtype(_ptr(u).base)}*){self.render_index(r[0], r[1], _ptr(u))})"
    elif op is Ops.INDEX: k.names[u] = self.render_index(r[0], r[1], _ptr(u))
    elif op is Ops.VECTORIZE: self._declare(k, u, self.render_vectorize(u.dtype, r))
    elif op is Ops.GEP: k.names[u] = self.render_gep(r[0], u.arg[0], u.src[0].dtype)
    elif op is Ops.LOAD and u in k.skip: k.names[u] = ""
    elif op is Ops.LOAD and u.arg is not None: self._declare(k, u, self.render_collective_load(u, r[0]))
    elif op is Ops.LOAD: self._declare(k, u, self.render_load(r[0], u.dtype, *(r[1:3] if len(r) == 3 else ())))
    elif op is Ops.STORE and u.arg == "async": k.emit(self.render_async_copy(u, r[0], k.names[u.src[1].src[0]]))
    elif op is Ops.STORE and u.arg == STORE_ADD:
      k.emit(self.render_atomic_add(r[0], r[1], u.src[1].dtype, r[2] if len(r) == 3 else None))
    elif op is Ops.STORE: k.emit(self.render_store(r[0], r[1], u.src[1].dtype, r[2] if len(r) == 3 else None))
    elif op is Ops.CAST: self._declare(k, u, self.render_cast(r[0], u.src[0].dtype, u.dtype))
    elif op is Ops.BITCAST: self._declare(k, u, self.render_bitcast(r[0], u.src[0].dtype, u.dtype))
    elif op in GroupOp.ALU and op in self.code_for_op: self._declare(k, u, self._render_alu(u, r))
    else: raise NotImplementedError(f"{self.name} renderer can't render {op} (dtype {u.dtype}, arg {u.arg!r})")

  def _render_alu(self, u: UOp, r: list[str]) -> str:
    dt = u.src[0].dtype if u.op in GroupOp.Comparison else u.dtype
    if u.op in (Ops.IDIV, Ops.MOD) and self._divisor_may_trap(u.src[1]): return self.render_div_guard(u.op, dt, r[0], r[1])
    return self.code_for_op[u.op](self, dt, *r)

  @staticmethod
  def _divisor_may_trap(d: UOp) -> bool:
    return not (d.op is Ops.CONST and d.arg != 0 and not (d.dtype in _SIGNED and d.arg == -1))
