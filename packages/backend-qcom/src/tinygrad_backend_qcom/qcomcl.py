"""The QCOMCL renderer: a linearized program as OpenCL C (1.2), the language of Adreno's OpenCL compiler.

Archs say what the target's OpenCL has:
  a6xx / a7xx (Adreno, e.g. a630, a740)  native half (cl_khr_fp16), no double
  cl, cl_fp16, cl_fp64, cl_fp16_fp64       any other OpenCL device (the CL device detects which one it is)

Without cl_khr_fp16 a half is still stored as 16 bits (OpenCL's vload_half / vstore_half work everywhere) but held in
a float register, and every half-valued op is rounded to half right away (tg_rh): the same numbers as half arithmetic,
since float carries enough bits that rounding twice gives the correctly rounded half for + - * / sqrt. bfloat16 (which
OpenCL lacks on every arch) is the same: a ushort in memory, a float in registers, rounded by tg_rb (nearest even).

Options after the arch (`NULL:QCOMCL:a630,IMAGE_PITCH_ALIGNMENT=64`), KEY=VALUE each:
  IMAGE_PITCH_ALIGNMENT  bytes each image row is padded to (a power of two; default 64). Recorded for Adreno's image
                         layouts; the CL device's images (IMAGE=1/2, images.py) are copies, so it changes no kernel.
  LOCAL_SIZE             work-items per work-group the codegen uses (default 256; at most 1024)

Images (IMAGE=1/2, on DEV=CL): buffers images.py chooses are `read_only image2d_t` / `write_only image2d_t` parameters;
the renderer then has float4 vector types (so the codegen groups 4 consecutive floats into one access), and each such
kernel's source lists its images in `// tg.image` lines, which the compiler passes on to the CL device (compiler.py).

Numerics follow tinygrad.uop.alu: no FMA contraction (FP_CONTRACT OFF) except where the IR asks for MULACC, and
correctly rounded float division and sqrt (compiler.BUILD_OPTIONS).
"""
from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import Any

from tinygrad.device.plugin import CStyleRenderer, DType, GroupOp, ImageDType, Ops, PtrDType, Target, UOp, dtypes

from tinygrad_backend_qcom.compiler import CLCompiler
from tinygrad_backend_qcom.images import IMAGE_MAX, image_level, pm_images

ADRENO_ARCHS = ("a6??", "a7??")  # fnmatch patterns; Adreno 6xx and 7xx
GENERIC_ARCHS = ("cl", "cl_fp16", "cl_fp64", "cl_fp16_fp64")
ARCHS = (*ADRENO_ARCHS, *GENERIC_ARCHS)
DEFAULT_ADRENO_ARCH = "a630"
OPTIONS = {"IMAGE_PITCH_ALIGNMENT": 64, "LOCAL_SIZE": 256}

_MATH = ("exp2", "log2", "sin", "sqrt", "trunc")


def is_adreno(arch: str) -> bool: return any(fnmatch.fnmatchcase(arch, p) for p in ADRENO_ARCHS)


def arch_features(arch: str) -> tuple[bool, bool]:
  """(native half, double) for a QCOMCL arch; ValueError for an arch it doesn't know."""
  if is_adreno(arch): return True, False
  if arch in GENERIC_ARCHS: return "fp16" in arch.split("_"), "fp64" in arch.split("_")
  raise ValueError(f"unknown QCOMCL arch {arch!r}: expected an Adreno a6xx/a7xx (e.g. a630) or one of {', '.join(GENERIC_ARCHS)}")


def parse_options(opts: tuple[str, ...]) -> dict[str, int]:
  """KEY=VALUE options from the DEV string, checked against OPTIONS."""
  out = dict(OPTIONS)
  for opt in opts:
    key, eq, value = opt.partition("=")
    if not eq or key.upper() not in OPTIONS:
      raise ValueError(f"unknown QCOMCL option {opt!r}: options are KEY=VALUE with KEY one of {', '.join(OPTIONS)} "
                       f"(e.g. NULL:QCOMCL:a630,IMAGE_PITCH_ALIGNMENT=64)")
    if not value.isdigit() or int(value) <= 0: raise ValueError(f"QCOMCL option {opt!r}: the value must be a positive integer")
    out[key.upper()] = int(value)
  if out["IMAGE_PITCH_ALIGNMENT"] & (out["IMAGE_PITCH_ALIGNMENT"] - 1):
    raise ValueError(f"IMAGE_PITCH_ALIGNMENT={out['IMAGE_PITCH_ALIGNMENT']} is not a power of two")
  if out["LOCAL_SIZE"] > 1024: raise ValueError(f"LOCAL_SIZE={out['LOCAL_SIZE']}: OpenCL devices allow at most 1024 here")
  return out


def _mulacc(r: QCOMCLRenderer, dt: DType, a: str, b: str, c: str) -> str:
  # alu: a*b+c with the exact product. fma is that for float; for half/bf16 the product is exact in float
  if dt == dtypes.float32 or dt in r.emulated: return f"fma({a},{b},{c})"
  if dt == dtypes.float16: return f"((half)fma((float){a},(float){b},(float){c}))"
  return f"(({a}*{b})+{c})"


_ROUND = {dtypes.float16: "tg_rh", dtypes.bfloat16: "tg_rb"}


def _rounded(fn: Callable[..., str]) -> Callable[..., str]:
  """For half/bf16 held in float registers: the op's result rounded to the 16-bit type (comparisons give bools: left alone)."""
  return lambda r, dt, *xs: f"{_ROUND[dt]}({fn(r, dt, *xs)})" if dt in r.emulated else fn(r, dt, *xs)


_ACCESS_MARK = "__tg_access_"  # an image parameter's access qualifier, before render() knows whether the kernel stores to it
_HALF_HELPERS = [  # half in float registers, 16 bits in memory (no cl_khr_fp16 needed)
  ("tg_rh(", "static inline float tg_rh(float x) { ushort h; vstore_half(x, 0, (half*)&h); return vload_half(0, (half*)&h); }"),
  ("tg_rhd(", "static inline float tg_rhd(double x) { ushort h; vstore_half(x, 0, (half*)&h); return vload_half(0, (half*)&h); }"),
  ("tg_h2b(", "static inline ushort tg_h2b(float x) { ushort h; vstore_half(x, 0, (half*)&h); return h; }"),
  ("tg_b2h(", "static inline float tg_b2h(ushort h) { return vload_half(0, (half*)&h); }"),
]
_IMAGE_HELPERS = [  # a nearest-texel sampler with integer coordinates; lane l of a texel
  ("tg_smp", "__constant sampler_t tg_smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;"),
  ("tg_lane(", "static inline float tg_lane(float4 v, int l) { return l == 0 ? v.x : l == 1 ? v.y : l == 2 ? v.z : v.w; }"),
]
_BF16_HELPERS = [  # bfloat16: the top half of a float; float -> bf16 rounds to nearest even, NaN stays NaN (as alu's truncate)
  ("tg_f2bf(", "static inline ushort tg_f2bf(float x) { uint u = as_uint(x);\n"
               "  return (u & 0x7fffffffu) > 0x7f800000u ? (ushort)((u >> 16) | 0x40u) : (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }"),
  ("tg_bf2f(", "static inline float tg_bf2f(ushort b) { return as_float(((uint)b) << 16); }"),
  ("tg_rb(", "static inline float tg_rb(float x) { uint u = as_uint(x);\n"
             "  u = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x400000u) : (u + 0x7fffu + ((u >> 16) & 1u)); return as_float(u & 0xffff0000u); }"),
]


class QCOMCLRenderer(CStyleRenderer):
  """OpenCL C: `__kernel void name(__global T* restrict data0, ..., const int var0)`, one work-item per output."""
  device = "QCOM"
  name = "QCOMCL"
  has_local = True
  has_shared = True
  shared_max = 32 * 1024  # Adreno 6xx/7xx local memory; also OpenCL's guaranteed minimum
  global_max = (2 ** 31 - 1, 65535, 65535)
  kernel_prefix = "__kernel "
  buffer_prefix = "__global "
  var_prefix = "const "
  special_index = {"gidx": "get_group_id({axis})", "lidx": "get_local_id({axis})"}
  int_suffix = {dtypes.uint32: "u", dtypes.int64: "l", dtypes.uint64: "ul"}
  compiler: CLCompiler

  def __init__(self, target: Target | None = None):
    target = target or Target("QCOM", "QCOMCL", DEFAULT_ADRENO_ARCH)
    self.arch = target.arch or DEFAULT_ADRENO_ARCH
    if target.device in ("QCOM", "CL"): self.device = target.device
    self.native_half, self.fp64 = arch_features(self.arch)
    self.options = parse_options(target.opts)
    self.opts = target.opts
    self.local_max = (self.options["LOCAL_SIZE"],)
    self.type_map = {dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort",
                     dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong",
                     dtypes.float16: "half" if self.native_half else "float", dtypes.bfloat16: "float", dtypes.float32: "float"}
    # 16-bit floats this arch can't compute in: 16 bits in memory, float in registers (see the module docstring)
    self.emulated = frozenset({dtypes.bfloat16} if self.native_half else {dtypes.float16, dtypes.bfloat16})
    if self.fp64: self.type_map[dtypes.float64] = "double"
    self.code_for_op = {**CStyleRenderer.code_for_op, Ops.MULACC: _mulacc}
    self.code_for_op = {op: fn if op in GroupOp.Comparison else _rounded(fn) for op, fn in self.code_for_op.items()}
    self.compiler = CLCompiler()
    # images on the CL device only: the kgsl runtime (QCOM) has no texture descriptors yet
    self._float4: bool | None = None
    self.supports_images = self.device == "CL"
    self.extra_matcher = pm_images if self.supports_images else None

  @property
  def image_max(self) -> tuple[int, int]:
    """The largest image (texels a side) a buffer becomes: what the OpenCL devices here take (images run on the CL device only)."""
    from tinygrad_backend_qcom.opencl import image_max
    return image_max() or IMAGE_MAX

  @property
  def supports_float4(self) -> bool:
    # float4 accesses only with images on (IMAGE=0 renders what it always did), unless set on the instance
    if self._float4 is not None: return self._float4
    return self.supports_images and image_level() >= 1

  @supports_float4.setter
  def supports_float4(self, value: bool) -> None: self._float4 = value  # (a renderer attribute like any other: tests set it)

  def __reduce__(self) -> tuple: return QCOMCLRenderer, (Target(self.device, self.name, self.arch, self.opts),)

  @property
  def supported_dtypes(self):
    return frozenset(self.type_map)

  # ---- constants and math
  def render_inf(self, dt: DType) -> str:
    return "INFINITY" if self.render_dtype(dt) == "float" else f"(({self.render_dtype(dt)})INFINITY)"

  def render_nan(self, dt: DType) -> str:
    return "NAN" if self.render_dtype(dt) == "float" else f"(({self.render_dtype(dt)})NAN)"

  def math_fn_name(self, fn: str, dt: DType) -> str | None:
    return fn if fn in _MATH and (dt == dtypes.float32 or dt == dtypes.float64 and self.fp64) else None

  # ---- conversions
  def render_cast(self, x: str, src: DType, dst: DType) -> str:
    if src == dst: return x
    wide = src == dtypes.float64 or dtypes.is_int(src) and src.itemsize >= 4  # alu converts these through a double
    if dst == dtypes.bfloat16: return f"tg_rb((float){x})"  # alu rounds to bf16 through a float
    if dst == dtypes.float16 and dst in self.emulated and src != dtypes.bool:
      return f"tg_rhd((double){x})" if wide and self.fp64 else f"tg_rh((float){x})"
    if src in self.emulated: return self.render_cast(x, dtypes.float32, dst)  # x is a float already
    # a 64-bit int to float rounds twice in alu (through a double); int32 -> double is exact, so it needs no detour
    if dst in (dtypes.float16, dtypes.float32) and self.fp64 and dtypes.is_int(src) and src.itemsize == 8:
      return f"(({self.render_dtype(dst)})(double){x})"
    return super().render_cast(x, src, dst)

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
    if dst == dtypes.bool: return f"({x}!=0)"
    bits, value = {dtypes.float16: ("tg_h2b", "tg_b2h"), dtypes.bfloat16: ("tg_f2bf", "tg_bf2f")}.get(src if src in self.emulated else dst, ("", ""))
    if src in self.emulated: return f"as_{self.render_dtype(dst)}({bits}({x}))"
    if dst in self.emulated: return f"{value}(as_ushort(({self.render_dtype(src)}){x}))"
    return f"as_{self.render_dtype(dst)}(({self.render_dtype(src)}){x})"

  # ---- memory: bool is a byte in memory; half without cl_khr_fp16 goes through vload_half / vstore_half, bf16 is a ushort
  def _memory_type(self, dt: DType) -> str:
    if dt == dtypes.bool: return "uchar"
    if dt == dtypes.bfloat16: return "ushort"
    return "half" if dt == dtypes.float16 else self.render_dtype(dt)

  def render_buffer_param(self, name: str, dt: PtrDType) -> str:
    if isinstance(dt, ImageDType): return f"{_ACCESS_MARK}{name} image2d_t {name}"  # render() fills in read_only / write_only
    return f"__global {self._memory_type(dt.base)}* restrict {name}"

  # ---- vectors (float4, with images on): OpenCL's vector literals take parentheses
  def render_vector_dtype(self, dt: DType) -> str:
    if dt.scalar() != dtypes.float32: return super().render_vector_dtype(dt)
    return f"float{dt.count}"

  def render_vectorize(self, dt: DType, parts: list[str]) -> str: return f"(({self.render_dtype(dt)})({', '.join(parts)}))"

  # ---- images: INDEX -> texel coordinate and lane, LOAD -> read_imagef, STORE -> write_imagef
  def _render_uop(self, k: Any, u: UOp) -> None:
    img = u.src[0].dtype if u.op is Ops.INDEX else u.src[0].src[0].dtype if u.op in (Ops.LOAD, Ops.STORE) and u.src[0].op is Ops.INDEX else None
    r = [k.names.get(s, "") for s in u.src]
    if u.op is Ops.INDEX and not isinstance(img, ImageDType) and isinstance(u.dtype, PtrDType) and u.dtype.base.count > 1:
      # a float4 access to a buffer: OpenCL's pointer casts keep the address space
      k.names[u] = f"((__{u.dtype.addrspace} {self.render_dtype(u.dtype.base)}*){self.render_index(r[0], r[1], u.dtype)})"
      return None
    if not isinstance(img, ImageDType) or u.arg is not None: return super()._render_uop(k, u)
    if u.op is Ops.INDEX:
      coord, width = k.new_name("tex"), img.shape[1]
      k.emit(f"int {coord}_i = {r[1]};")
      k.emit(f"int2 {coord} = (int2)(({coord}_i>>2)%{width}, ({coord}_i>>2)/{width});")
      k.names[u] = coord
    elif u.op is Ops.LOAD:
      read = f"read_imagef({k.names[u.src[0].src[0]]}, tg_smp, {r[0]})"  # a half image reads as float too
      if u.dtype.count == 1:
        read = f"tg_lane({read}, {r[0]}_i&3)"
        if u.dtype == dtypes.float16 and self.native_half: read = f"(half){read}"
      self._declare(k, u, read if len(r) != 3 else f"({r[1]}?{read}:{r[2]})")
    else:
      store = f"write_imagef({k.names[u.src[0].src[0]]}, {r[0]}, {r[1]});"
      k.emit(store if len(r) != 3 else f"if ({r[2]}) {store}")

  def render(self, name: str, uops: list[UOp]) -> str:
    src = super().render(name, uops)
    if _ACCESS_MARK not in src: return src
    images = [u for u in uops if u.op is Ops.DEFINE_GLOBAL and isinstance(u.dtype, ImageDType)]
    stored = {u.src[0].src[0] for u in uops if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}
    position = {a: i for i, a in enumerate(sorted(u.arg for u in uops if u.op is Ops.DEFINE_GLOBAL))}  # the launch's buffer order
    lines = []
    for u in images:
      dt, access = u.dtype, "w" if u in stored else "r"
      assert isinstance(dt, ImageDType)
      src = src.replace(f"{_ACCESS_MARK}data{u.arg} ", "write_only " if access == "w" else "read_only ")
      lines.append(f"// tg.image {position[u.arg]} {access} {dt.shape[0]} {dt.shape[1]} {'h' if dt.base == dtypes.float16 else 'f'}")
    return "\n".join(lines) + "\n" + src

  def render_define_local(self, name: str, dt: PtrDType) -> str:
    if dt.base == dtypes.float16 and not self.native_half:  # half arrays need cl_khr_fp16: 16-bit words seen through a half*
      return f"__local ushort {name}_bits[{dt.size}]; __local half *{name} = (__local half *){name}_bits;"
    return f"__local {self._memory_type(dt.base)} {name}[{dt.size}];"

  def render_define_reg(self, name: str, dt: PtrDType) -> str:
    if dt.base == dtypes.float16 and not self.native_half:
      return f"ushort {name}_bits[{max(dt.size, 1)}]; half *{name} = (half *){name}_bits;"
    if dt.base == dtypes.bfloat16: return f"ushort {name}[{max(dt.size, 1)}];"
    return super().render_define_reg(name, dt)

  def render_load(self, ptr: str, dt: DType, gate: str | None = None, alt: str | None = None) -> str:
    if dt == dtypes.float16 and not self.native_half:
      return f"vload_half(0, {ptr})" if gate is None else f"({gate}?vload_half(0, {ptr}):{alt})"
    if dt == dtypes.bfloat16: return f"tg_bf2f(*{ptr})" if gate is None else f"({gate}?tg_bf2f(*{ptr}):{alt})"
    return super().render_load(ptr, dt, gate, alt)

  def render_store(self, ptr: str, value: str, dt: DType, gate: str | None = None) -> str:
    if dt == dtypes.float16 and not self.native_half:
      store = f"vstore_half({value}, 0, {ptr});"
      return store if gate is None else f"if ({gate}) {store}"
    if dt == dtypes.bfloat16: return super().render_store(ptr, f"tg_f2bf({value})", dtypes.uint16, gate)
    return super().render_store(ptr, value, dt, gate)

  def render_barrier(self, u: UOp) -> str: return "barrier(CLK_LOCAL_MEM_FENCE);"

  # ---- prelude
  def helpers(self) -> list[tuple[str, str]]:
    floats = (dtypes.float32, dtypes.float64) if self.fp64 else (dtypes.float32,)  # the base's float -> int helpers, double only with fp64
    f2i = [(f"tg_f2i_{self.render_dtype(dt)}(", self._f2i_helper(dt)) for dt in floats]
    return [*([] if self.native_half else _HALF_HELPERS), *_BF16_HELPERS, *f2i, *_IMAGE_HELPERS]

  def render_kernel(self, name: str, params: list[str], body: list[str], prelude: list[str]) -> str:
    # extensions only where the kernel uses their types, so a float kernel builds with any OpenCL
    text = "\n".join([*params, *body, *prelude])
    pragmas = ["#pragma OPENCL FP_CONTRACT OFF"]
    if self.native_half and re.search(r"\bhalf\b", text): pragmas.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
    if self.fp64 and re.search(r"\bdouble\b", text): pragmas.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    return super().render_kernel(name, params, body, [*pragmas, *prelude])

  def params(self) -> dict:
    return {**super().params(), "native_half": self.native_half, "fp64": self.fp64, **self.options}
