"""The meaning of every elementwise op on Python scalars. Constant folding and the PYTHON device
both use this, so it is the executable definition that every renderer must agree with."""
from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable
from typing import Any

from tinygrad.dtype import DType, dtypes, truncate
from tinygrad.uop.ops import Ops


def _fdiv(a: float, b: float) -> float:
  if b == 0:
    if a == 0 or math.isnan(a): return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)
  return a / b


def _idiv(a: int, b: int) -> int:
  """C integer division: truncates toward zero. Division by zero gives 0 (C leaves it undefined)."""
  if b == 0: return 0
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q


def _mod(a: int, b: int) -> int:
  """C remainder: has the sign of the dividend."""
  return a - b * _idiv(a, b) if b != 0 else 0


def _exp2(x: float) -> float:
  try: return 2.0 ** x
  except OverflowError: return math.inf


def _log2(x: float) -> float:
  if math.isnan(x) or x < 0: return math.nan
  if x == 0: return -math.inf
  return math.log2(x) if not math.isinf(x) else math.inf


def _sin(x: float) -> float: return math.nan if math.isinf(x) else math.sin(x)
def _sqrt(x: float) -> float: return math.nan if x < 0 else math.sqrt(x)
def _recip(x: float) -> float: return _fdiv(1.0, x)
def _trunc(x: float) -> float: return x if math.isinf(x) or math.isnan(x) else float(math.trunc(x))


def _max(a: Any, b: Any) -> Any:
  if isinstance(a, float) and math.isnan(a): return a
  if isinstance(b, float) and math.isnan(b): return b
  return a if a >= b else b


def _pow(a: float, b: float) -> float:
  try: return float(a ** b) if not (a < 0 and b != int(b)) else math.nan
  except (OverflowError, ZeroDivisionError): return math.inf


def exec_alu(op: Ops, dtype: DType, src: tuple[Any, ...]) -> Any:
  """Apply `op` to Python scalars and represent the result exactly as `dtype` would."""
  return alu_fn(op, dtype)(*src)


def _truncator(dt: DType) -> Callable[[Any], Any]:
  """A fast function that represents a Python value as dt stores it (see dtype.truncate)."""
  if dt == dtypes.bool: return bool
  if dtypes.is_int(dt):
    bits = dt.itemsize * 8
    mask, sign = (1 << bits) - 1, 1 << (bits - 1)
    if dtypes.is_unsigned(dt): return lambda x: int(x) & mask
    return lambda x: ((int(x) & mask) ^ sign) - sign
  if dt == dtypes.float64: return float
  if dt in (dtypes.float32, dtypes.float16): return _struct_round(struct.Struct("f" if dt == dtypes.float32 else "e"))
  return lambda x: truncate(dt, x)


def _struct_round(fmt: struct.Struct) -> Callable[[Any], float]:
  """float32 / float16 rounding by a precompiled struct (about 4x faster than dtype.truncate's dispatch: the interpreter calls
  it once an ALU op); values past the format's largest round to inf, as in truncate."""
  pack, unpack = fmt.pack, fmt.unpack
  def trunc(x: Any) -> float:
    try: return unpack(pack(x))[0]
    except OverflowError: return math.copysign(math.inf, x)
  return trunc


@functools.cache
def alu_fn(op: Ops, dtype: DType) -> Callable[..., Any]:
  """`op` on Python scalars for results of `dtype`, with the dispatch decided once (the interpreter's hot path): one closure
  for each arity, since `*src` and a generator of float() calls cost as much as the op itself."""
  fn: Any = _ALU[op]
  trunc = _truncator(dtype.scalar())
  if dtypes.is_int(dtype) or dtype == dtypes.bool or op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE):
    by_arity: dict[int, Callable[..., Any]] = {1: lambda a: trunc(fn(a)), 2: lambda a, b: trunc(fn(a, b)),
                                               3: lambda a, b, c: trunc(fn(a, b, c))}
  else:
    by_arity = {1: lambda a: trunc(fn(float(a))), 2: lambda a, b: trunc(fn(float(a), float(b))),
                3: lambda a, b, c: trunc(fn(float(a), float(b), float(c)))}
  return by_arity[fn.__code__.co_argcount]


_ALU = {
  Ops.NEG: lambda x: (not x) if isinstance(x, bool) else -x, Ops.EXP2: _exp2, Ops.LOG2: _log2, Ops.SIN: _sin, Ops.SQRT: _sqrt,
  Ops.RECIPROCAL: _recip, Ops.TRUNC: _trunc,
  Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b,
  Ops.FDIV: _fdiv, Ops.IDIV: _idiv, Ops.MOD: _mod, Ops.MAX: _max, Ops.POW: _pow,
  Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a != b, Ops.CMPEQ: lambda a, b: a == b,
  Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b,
  # torch's shifts: an amount < 0 or past the width shifts everything out (the result's truncation makes 0, or -1 for
  # a negative value shifted right); 128 is past every width and keeps Python from building huge ints
  Ops.SHL: lambda a, b: a << b if 0 <= b < 128 else 0, Ops.SHR: lambda a, b: a >> (b if 0 <= b < 128 else 127),
  Ops.WHERE: lambda c, a, b: a if c else b, Ops.MULACC: lambda a, b, c: a * b + c,
}


# ---- casts and bitcasts between Python scalars

_BITS_FMT = {1: "B", 2: "H", 4: "I", 8: "Q"}


def to_bits(x: Any, dt: DType) -> int:
  """The raw bits of scalar x stored as dt."""
  dt = dt.scalar()
  if dtypes.is_int(dt) or dt == dtypes.bool: return int(x) & ((1 << (8 * dt.itemsize)) - 1)
  if dt == dtypes.bfloat16: return struct.unpack("I", struct.pack("f", truncate(dtypes.bfloat16, x)))[0] >> 16
  if dt in (dtypes.fp8e4m3, dtypes.fp8e5m2): return fp8_to_bits(float(x), dt)
  return struct.unpack(_BITS_FMT[dt.itemsize], struct.pack(dt.fmt or "f", x))[0]


def from_bits(bits: int, dt: DType) -> Any:
  dt = dt.scalar()
  if dt == dtypes.bool: return bits != 0
  if dtypes.is_int(dt): return truncate(dt, bits)
  if dt == dtypes.bfloat16: return struct.unpack("f", struct.pack("I", (bits & 0xFFFF) << 16))[0]
  if dt in (dtypes.fp8e4m3, dtypes.fp8e5m2): return fp8_from_bits(bits, dt)
  return struct.unpack(dt.fmt or "f", struct.pack(_BITS_FMT[dt.itemsize], bits))[0]


@functools.cache
def bits_reader(dt: DType) -> Callable[[int], Any]:
  """from_bits(bits, dt) with dt's dispatch decided once (the interpreter loads half and bfloat16 buffers as raw bits)."""
  dt = dt.scalar()
  if dt in (dtypes.float16, dtypes.float32, dtypes.float64):
    pack, unpack = struct.Struct(_BITS_FMT[dt.itemsize]).pack, struct.Struct(dt.fmt or "f").unpack
    return lambda bits: unpack(pack(bits))[0]
  return lambda bits: from_bits(bits, dt)


@functools.cache
def bits_writer(dt: DType) -> Callable[[Any], int]:
  """to_bits(x, dt) with dt's dispatch decided once."""
  dt = dt.scalar()
  if dt in (dtypes.float16, dtypes.float32, dtypes.float64):
    pack, unpack = struct.Struct(dt.fmt or "f").pack, struct.Struct(_BITS_FMT[dt.itemsize]).unpack
    return lambda x: unpack(pack(x))[0]
  return lambda x: to_bits(x, dt)


def fp8_from_bits(bits: int, dt: DType) -> float:
  exp_bits, man_bits = dtypes.finfo(dt)
  bias = (1 << (exp_bits - 1)) - 1
  sign = -1.0 if bits & 0x80 else 1.0
  e, m = (bits >> man_bits) & ((1 << exp_bits) - 1), bits & ((1 << man_bits) - 1)
  if dt == dtypes.fp8e4m3 and e == 0xF and m == 0x7: return math.nan
  if dt == dtypes.fp8e5m2 and e == 0x1F: return sign * math.inf if m == 0 else math.nan
  if e == 0: return sign * m * 2.0 ** (1 - bias - man_bits)
  return sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)


def fp8_fnuz_from_bits(bits: int, dt: DType) -> float:
  """The value of fp8 bits read in the FNUZ flavour of dt (e4m3fnuz / e5m2fnuz: bias one higher than OCP's, 0x80 the only
  NaN, no -0, no inf), as AMD CDNA3's fp8 instructions read them."""
  if bits == 0x80: return math.nan
  exp_bits, man_bits = dtypes.finfo(dt)
  bias = 1 << (exp_bits - 1)
  sign = -1.0 if bits & 0x80 else 1.0
  e, m = (bits >> man_bits) & ((1 << exp_bits) - 1), bits & ((1 << man_bits) - 1)
  if e == 0: return sign * m * 2.0 ** (1 - bias - man_bits)
  return sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)


def fp8_to_bits(x: float, dt: DType) -> int:
  x = truncate(dt, x)
  if math.isnan(x): return 0x7F
  sign = 0x80 if math.copysign(1.0, x) < 0 else 0
  x = abs(x)
  if math.isinf(x): return sign | 0x7C  # only e5m2 keeps inf
  exp_bits, man_bits = dtypes.finfo(dt)
  bias = (1 << (exp_bits - 1)) - 1
  if x == 0: return sign
  m, e = math.frexp(x)
  e -= 1
  if e < 1 - bias: return sign | round(x / 2.0 ** (1 - bias - man_bits))  # subnormal
  return sign | ((e + bias) << man_bits) | round((x / 2.0 ** e - 1) * (1 << man_bits))


@functools.cache
def caster(dt: DType) -> Callable[[Any], Any]:
  """The function cast_scalar(x, dt) calls, made once a dtype (the interpreter's CAST steps and tensor-core results take it)."""
  dt = dt.scalar()
  if dt == dtypes.bool: return bool
  trunc = _truncator(dt)
  if dtypes.is_int(dt):
    def to_int(x: Any) -> int:
      if isinstance(x, float):
        if math.isnan(x) or math.isinf(x): return 0
        x = math.trunc(x)
      return trunc(int(x))
    return to_int
  if dt == dtypes.float64: return float
  return lambda x: trunc(float(x))


def cast_scalar(x: Any, dt: DType) -> Any:
  """C-style conversion of a scalar to dt: floats to ints truncate toward zero (NaN and inf to 0), ints wrap."""
  return caster(dt)(x)


def eval_scalar(u: Any, env: dict) -> Any:
  """The value of a scalar UOp expression whose leaves are CONSTs or nodes given in `env` (node -> value), by the
  definitions above: the reference renderer tests compare generated kernels against. Iterative, so deep graphs work."""
  vals = dict(env)
  for n in u.toposort(gate=lambda x: x not in env):
    if n in vals: continue
    src = [vals[s] for s in n.src]
    if n.op is Ops.CONST: vals[n] = n.arg
    elif n.op is Ops.CAST: vals[n] = cast_scalar(src[0], n.dtype)
    elif n.op is Ops.BITCAST: vals[n] = from_bits(to_bits(src[0], n.src[0].dtype), n.dtype)
    else: vals[n] = exec_alu(n.op, n.dtype, tuple(src))
  return vals[u]
