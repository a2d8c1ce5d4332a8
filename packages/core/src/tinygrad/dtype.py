"""Data types: scalars, vectors and pointers, and the promotion lattice shared with tinygrad/JAX/torch."""
from __future__ import annotations

import builtins
import math
import struct
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, ClassVar, Final

from tinygrad.helpers import ContextVar, InvalidDTypeError, UnknownDTypeError

ConstType = float | int | bool


@dataclass(frozen=True, eq=True)
class DType:
  """A scalar type (count == 1) or a vector of `count` scalars."""
  priority: int  # orders types inside one kind; promotion picks the lowest common upper bound
  itemsize: int  # bytes per scalar
  name: str
  fmt: str | None  # struct/memoryview format char, None when Python has none (bf16, fp8)
  count: int = 1

  @property
  def nbytes(self) -> int: return self.itemsize * self.count

  @property
  def bitsize(self) -> int:
    """Bits per scalar (bool: 1), as tinygrad's DType.bitsize."""
    return 1 if self.name == "bool" else self.itemsize * 8

  @property
  def min(self) -> ConstType:
    """The lowest value (-inf for floats), as tinygrad's DType.min; the same as dtypes.min(dt)."""
    return dtypes.min(self.scalar())

  @property
  def max(self) -> ConstType:
    """The highest value (inf for floats), as tinygrad's DType.max; the same as dtypes.max(dt)."""
    return dtypes.max(self.scalar())

  def vec(self, count: int) -> DType:
    """The vector of `count` elements of this scalar type."""
    assert self.count == 1, f"can't make a vector of the vector type {self}"
    return self if count == 1 else DType(self.priority, self.itemsize, self.name, None, count)

  def ptr(self, size: int = -1, addrspace: str = "global") -> PtrDType:
    return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self.count, self, size, addrspace)

  def scalar(self) -> DType:
    return self if self.count == 1 else SCALAR_BY_NAME[self.name]

  def __repr__(self) -> str: return f"dtypes.{self.name}" + (f".vec({self.count})" if self.count > 1 else "")

  def __lt__(self, other: DType) -> bool: return (self.priority, self.itemsize, self.name, self.count) < (other.priority, other.itemsize, other.name, other.count)


@dataclass(frozen=True, eq=True)
class PtrDType(DType):
  """A pointer to `base` elements in an address space; size -1 means unknown."""
  base: DType = None  # type: ignore[assignment]
  size: int = -1
  addrspace: str = "global"

  def __repr__(self) -> str: return f"{self.base!r}.ptr({self.size}{'' if self.addrspace == 'global' else ', ' + repr(self.addrspace)})"

  def scalar(self) -> DType: return self


@dataclass(frozen=True, eq=True)
class ImageDType(PtrDType):
  """A buffer laid out as a 2D image of RGBA texels: shape (height, width, 4), `base` half or float per channel. The codegen
  (a renderer with images, IMAGE=1/2) gives a buffer this type; renderers without image types reject it."""
  shape: tuple[int, ...] = ()

  def __repr__(self) -> str: return f"dtypes.{self.name}({self.shape})"


def _image(base: DType, shape: tuple[int, ...]) -> ImageDType:
  if len(shape) != 3 or shape[2] != 4 or not all(isinstance(s, int) and s > 0 for s in shape):
    raise ValueError(f"an image shape is (height, width, 4) of positive ints (RGBA texels), got {shape!r}")
  return ImageDType(base.priority, base.itemsize, f"image{'h' if base == dtypes.float16 else 'f'}", None, 1, base, shape[0] * shape[1] * 4,
                    "global", tuple(shape))


_DEFAULT_CACHE: dict[tuple[str, str], DType] = {}


def _default_dtype(setting: str, kind: str) -> DType:
  """dtypes.default_float / default_int: the dtype the DEFAULT_FLOAT / DEFAULT_INT setting names (any case: HALF, float16)."""
  value = ContextVar._registry[setting].value
  # a DType itself works too (Context(DEFAULT_FLOAT=dtypes.half), as tinygrad's to_dtype takes either)
  name = value.name if isinstance(value, DType) else str(value)
  if (dt := _DEFAULT_CACHE.get((setting, name))) is not None: return dt
  dt = DTYPES_BY_NAME.get(name) or DTYPES_BY_NAME.get(name.lower())
  if dt is None or not (dtypes.is_float(dt) if kind == "float" else dtypes.is_int(dt)):
    known = sorted({n for n, d in DTYPES_BY_NAME.items() if (dtypes.is_float(d) if kind == "float" else dtypes.is_int(d))})
    raise ValueError(f"{setting}={name!r} names no {kind} dtype; use one of {', '.join(known)}")
  _DEFAULT_CACHE[(setting, name)] = dt
  return dt


class _DTypesType(type):
  """dtypes' metaclass: `dtypes.default_float` / `default_int` are the DEFAULT_FLOAT / DEFAULT_INT settings (environment or
  `Context(DEFAULT_FLOAT="HALF")`, as tinygrad 0.14), and assigning them (older tinygrad) sets those settings."""
  @property
  def default_float(cls) -> DType: return _default_dtype("DEFAULT_FLOAT", "float")
  @default_float.setter
  def default_float(cls, dt: DType) -> None: cls._set_default("DEFAULT_FLOAT", dt, "float")
  @property
  def default_int(cls) -> DType: return _default_dtype("DEFAULT_INT", "int")
  @default_int.setter
  def default_int(cls, dt: DType) -> None: cls._set_default("DEFAULT_INT", dt, "int")
  def __dir__(cls) -> list[str]: return sorted({*super().__dir__(), "default_float", "default_int"})
  def _set_default(cls, setting: str, dt: DType | str, kind: str) -> None:
    dt = to_dtype(dt)
    if not (dtypes.is_float(dt) if kind == "float" else dtypes.is_int(dt)): raise ValueError(f"default_{kind} must be {'an int' if kind == 'int' else 'a float'} dtype, got {dt!r}")
    ContextVar._registry[setting].value = dt.name


class dtypes(metaclass=_DTypesType):
  """All dtypes by name, and predicates over them (tinygrad's `dtypes` namespace)."""
  void: Final = DType(-1, 0, "void", None)
  bool: Final = DType(0, 1, "bool", "?")
  int8: Final = DType(1, 1, "char", "b")
  uint8: Final = DType(2, 1, "uchar", "B")
  int16: Final = DType(3, 2, "short", "h")
  uint16: Final = DType(4, 2, "ushort", "H")
  int32: Final = DType(5, 4, "int", "i")
  uint32: Final = DType(6, 4, "uint", "I")
  int64: Final = DType(7, 8, "long", "q")
  uint64: Final = DType(8, 8, "ulong", "Q")
  fp8e4m3: Final = DType(9, 1, "fp8e4m3", None)
  fp8e5m2: Final = DType(10, 1, "fp8e5m2", None)
  float16: Final = DType(11, 2, "half", "e")
  bfloat16: Final = DType(12, 2, "bfloat16", None)
  float32: Final = DType(13, 4, "float", "f")
  float64: Final = DType(14, 8, "double", "d")

  # aliases, as in tinygrad and torch
  char, uchar, short, ushort, long, ulong = int8, uint8, int16, uint16, int64, uint64
  half, float, double = float16, float32, float64
  int, uint = int32, uint32  # builtins.int/bool below: these names shadow the builtins in this class body
  # groups, as tinygrad names them (filled in below the class)
  sints: ClassVar[tuple[DType, ...]]
  uints: ClassVar[tuple[DType, ...]]
  ints: ClassVar[tuple[DType, ...]]
  floats: ClassVar[tuple[DType, ...]]
  all: ClassVar[tuple[DType, ...]]
  fp8_ocp: ClassVar[tuple[DType, ...]]
  fp8s: ClassVar[tuple[DType, ...]]
  int8s: ClassVar[tuple[DType, ...]]
  int16s: ClassVar[tuple[DType, ...]]
  int32s: ClassVar[tuple[DType, ...]]
  int64s: ClassVar[tuple[DType, ...]]
  if TYPE_CHECKING:  # the settings, through _DTypesType's properties
    default_float: ClassVar[DType]
    default_int: ClassVar[DType]

  @staticmethod
  def imageh(shape: tuple[builtins.int, ...]) -> ImageDType:
    """A half image of shape (height, width, 4)."""
    return _image(dtypes.float16, shape)
  @staticmethod
  def imagef(shape: tuple[builtins.int, ...]) -> ImageDType:
    """A float image of shape (height, width, 4)."""
    return _image(dtypes.float32, shape)

  # by the scalar type's name (a name is one scalar type's): the codegen asks these for every node it rewrites, and a test of
  # membership in a tuple of dtypes runs the dataclass __eq__ (a tuple of five fields) per element. A pointer is none of them
  @staticmethod
  def is_float(x: DType) -> builtins.bool: return x.name in _FLOAT_NAMES and not isinstance(x, PtrDType)
  @staticmethod
  def is_int(x: DType) -> builtins.bool: return x.name in _INT_NAMES and not isinstance(x, PtrDType)
  @staticmethod
  def is_unsigned(x: DType) -> builtins.bool: return x.name in _UNSIGNED_NAMES and not isinstance(x, PtrDType)
  @staticmethod
  def is_bool(x: DType) -> builtins.bool: return x.name == "bool" and not isinstance(x, PtrDType)

  @staticmethod
  def from_py(x) -> DType:
    """The dtype a Python value gets: bool, default_int, default_float; lists use their widest element. An int that
    default_int can't hold gets int64, or uint64 from 2**63 on (as numpy); a larger one is an error."""
    if isinstance(x, bool): return dtypes.bool
    if isinstance(x, int):
      for dt in (dtypes.default_int, dtypes.int64, dtypes.uint64):
        if dtypes.min(dt) <= x <= dtypes.max(dt): return dt
      raise OverflowError(f"the int {x} doesn't fit any dtype (int64 holds -2**63..2**63-1, uint64 0..2**64-1)")
    if isinstance(x, float): return dtypes.default_float
    if isinstance(x, (list, tuple)):
      dt = max((dtypes.from_py(v) for v in x), default=dtypes.default_float)
      if dt == dtypes.uint64 and any(isinstance(v, int) and v < 0 for v in x):
        raise OverflowError("no int dtype holds both negative values and values of 2**63 or more: pass dtype= explicitly")
      return dt
    # a TypeError and, as tinygrad raises, a RuntimeError
    raise InvalidDTypeError(f"can't infer a dtype from a {type(x).__name__}: pass dtype= explicitly")

  @staticmethod
  def check_fits(x: ConstType, dt: DType) -> None:
    """Raise (like torch) when a Python int, or a finite float's integer part, is outside what int dtype `dt` holds, and for
    NaN or an infinity (ValueError / OverflowError, as Python's int() and tinygrad). As in torch, an unsigned dtype also takes
    negatives down to -max (they wrap: -1 is 255 as uint8); floats and bools take anything."""
    if not dtypes.is_int(dt) or isinstance(x, bool) or not isinstance(x, (int, float)): return
    if isinstance(x, float) and not math.isfinite(x):
      raise (ValueError if math.isnan(x) else OverflowError)(f"cannot convert float {x} to integer dtype {dt!r}")
    v, hi = math.trunc(x), dtypes.max(dt)
    lo = -hi if dtypes.is_unsigned(dt) else dtypes.min(dt)
    if not lo <= v <= hi:
      raise RuntimeError(f"value {x} cannot be converted to type {'u' * dtypes.is_unsigned(dt)}int{dt.itemsize * 8} without overflow")

  @staticmethod
  def min(dt: DType) -> ConstType:
    if dtypes.is_int(dt): return 0 if dtypes.is_unsigned(dt) else -(2 ** (dt.itemsize * 8 - 1))
    return False if dt == dtypes.bool else -math.inf

  @staticmethod
  def max(dt: DType) -> ConstType:
    if dtypes.is_int(dt): return 2 ** (dt.itemsize * 8) - 1 if dtypes.is_unsigned(dt) else 2 ** (dt.itemsize * 8 - 1) - 1
    return True if dt == dtypes.bool else math.inf

  @staticmethod
  def finfo(dtype: DType) -> tuple[builtins.int, builtins.int]:
    """(exponent bits, mantissa bits) of a float dtype."""
    if dtype.scalar() not in FLOAT_BITS: raise ValueError(f"{dtype} is not a floating point type")  # tinygrad's error (was a KeyError)
    return FLOAT_BITS[dtype.scalar()]

  @staticmethod
  def fields() -> dict[str, DType]: return DTYPES_BY_NAME


SIGNED: Final = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
UNSIGNED: Final = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
INTS: Final = UNSIGNED + SIGNED  # tinygrad's order, as dtypes.all's (floats, ints, bool): programs iterate over them
FLOATS: Final = (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
dtypes.sints, dtypes.uints, dtypes.ints, dtypes.floats = SIGNED, UNSIGNED, INTS, FLOATS
_INT_NAMES, _UNSIGNED_NAMES, _FLOAT_NAMES = (frozenset(dt.name for dt in kind) for kind in (INTS, UNSIGNED, FLOATS))
dtypes.all = (*FLOATS, *INTS, dtypes.bool)
# tinygrad's other groups (its fp8s also hold the fnuz variants, which we don't have)
dtypes.fp8_ocp = dtypes.fp8s = (dtypes.fp8e4m3, dtypes.fp8e5m2)
dtypes.int8s, dtypes.int16s = (dtypes.uint8, dtypes.int8), (dtypes.uint16, dtypes.int16)
dtypes.int32s, dtypes.int64s = (dtypes.uint32, dtypes.int32), (dtypes.uint64, dtypes.int64)
FLOAT_BITS: Final = {dtypes.fp8e4m3: (4, 3), dtypes.fp8e5m2: (5, 2), dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7),
                     dtypes.float32: (8, 23), dtypes.float64: (11, 52)}
DTYPES_BY_NAME: Final[dict[str, DType]] = {
  name: dt for name, dt in vars(dtypes).items() if isinstance(dt, DType) and not name.startswith("default") and name != "void"}
# each dtype's own short name ("int", "uint", "half", ...) finds it too
SCALAR_BY_NAME: Final[dict[str, DType]] = {dt.name: dt for dt in DTYPES_BY_NAME.values()}
DTYPES_BY_NAME.update({name: dt for name, dt in SCALAR_BY_NAME.items() if name not in DTYPES_BY_NAME})

# The promotion lattice: each type lists the types it promotes to directly. The common type of a
# set is the lowest-priority type that every member can reach (as in JAX's and tinygrad's design).
PROMOTES_TO: Final[dict[DType, tuple[DType, ...]]] = {
  dtypes.bool: (dtypes.int8, dtypes.uint8),
  dtypes.int8: (dtypes.int16,), dtypes.int16: (dtypes.int32,), dtypes.int32: (dtypes.int64,),
  dtypes.int64: (dtypes.fp8e4m3, dtypes.fp8e5m2),
  dtypes.uint8: (dtypes.int16, dtypes.uint16), dtypes.uint16: (dtypes.int32, dtypes.uint32),
  dtypes.uint32: (dtypes.int64, dtypes.uint64), dtypes.uint64: (dtypes.fp8e4m3, dtypes.fp8e5m2),
  dtypes.fp8e4m3: (dtypes.float16, dtypes.bfloat16), dtypes.fp8e5m2: (dtypes.float16, dtypes.bfloat16),
  dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,),
  dtypes.float32: (dtypes.float64,), dtypes.float64: (),
}


@cache
def _upper_bounds(dt: DType) -> frozenset[DType]:
  return frozenset({dt}).union(*(_upper_bounds(up) for up in PROMOTES_TO[dt]))


def least_upper_dtype(*ds: DType) -> DType:
  """The smallest dtype that every one of `ds` promotes to."""
  scalars = [d.scalar() for d in ds]
  common = frozenset.intersection(*(_upper_bounds(d) for d in scalars))
  ret = min(common) if common else dtypes.float64
  # ints with no common int type (uint64 with a signed int) meet at the default float, as tinygrad's weak float does,
  # never at the fp8 types that sit just above int64 in the lattice
  if dtypes.is_float(ret) and not any(dtypes.is_float(d) for d in scalars): return dtypes.default_float
  return ret


def least_upper_float(dt: DType) -> DType:
  """`dt` when it is a float, else the default float (what mean/exp/sqrt of ints give)."""
  return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.default_float)


DTypeLike = str | DType  # what dtype= arguments take (tinygrad's type alias, for annotations)


def to_dtype(x: DTypeLike) -> DType:
  """Accept a DType or its name ("float32", "half", ...)."""
  if isinstance(x, DType): return x
  if x in DTYPES_BY_NAME: return DTYPES_BY_NAME[x]
  import difflib
  close = difflib.get_close_matches(x, list(DTYPES_BY_NAME), n=1)
  raise UnknownDTypeError(f"unknown dtype {x!r}" + (f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(DTYPES_BY_NAME)}"))


# ---- converting Python values into a dtype's range (used by constant folding and the interpreter)

def _float_to_bits(x: float, exp_bits: int, man_bits: int) -> float:
  """Round a float to a narrower float format (round-to-nearest-even, saturating like OCP fp8 for e4m3)."""
  if math.isnan(x) or math.isinf(x) or x == 0: return x
  bias = (1 << (exp_bits - 1)) - 1
  m, e = math.frexp(abs(x))  # abs(x) = m * 2**e, 0.5 <= m < 1
  e -= 1  # normalize to 1.xxx
  min_e = 1 - bias
  shift = man_bits - max(e, min_e)
  scaled = abs(x) * 2.0 ** shift
  rounded = round(scaled)  # Python rounds half to even
  return math.copysign(rounded * 2.0 ** -shift, x)


def truncate_fp16(x: float) -> float:
  try: return struct.unpack("e", struct.pack("e", float(x)))[0]
  except OverflowError: return math.copysign(math.inf, x)


def truncate_bf16(x: float) -> float:
  if math.isnan(x) or math.isinf(x): return x
  bits = struct.unpack("I", struct.pack("f", x))[0] if abs(x) < 3.5e38 else None
  if bits is None: return math.copysign(math.inf, x)
  bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
  return struct.unpack("f", struct.pack("I", bits))[0]


def truncate_fp8(x: float, dt: DType) -> float:
  if math.isnan(x): return x
  if dt == dtypes.fp8e4m3:
    if math.isinf(x): return math.nan
    y = _float_to_bits(x, 4, 3)
    return math.copysign(448.0, y) if abs(y) > 448.0 else y  # e4m3fn saturates in conversions
  y = _float_to_bits(x, 5, 2)
  return math.copysign(math.inf, y) if abs(y) > 57344.0 else y


def truncate(dt: DType, x: ConstType) -> ConstType:
  """`x` represented exactly as `dt` stores it: ints wrap around, floats round to the format."""
  dt = dt.scalar()
  if dt == dtypes.bool: return bool(x)
  if dtypes.is_int(dt):
    bits = dt.itemsize * 8
    v = int(x) & ((1 << bits) - 1)
    return v - (1 << bits) if (not dtypes.is_unsigned(dt) and v >= 1 << (bits - 1)) else v
  x = float(x)
  if dt == dtypes.float32:
    try: return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError: return math.copysign(math.inf, x)
  if dt == dtypes.float16: return truncate_fp16(x)
  if dt == dtypes.bfloat16: return truncate_bf16(x)
  if dt in (dtypes.fp8e4m3, dtypes.fp8e5m2): return truncate_fp8(x, dt)
  return x


# ---- numpy and torch interop, by tinygrad 0.14's names in this module (programs and tests import them from here)

# every dtype by its canonical name and aliases (no void), as tinygrad's DTYPES_DICT
DTYPES_DICT: Final[dict[str, DType]] = {name: dt for name, dt in vars(dtypes).items() if isinstance(dt, DType) and name != "void"}
INVERSE_DTYPES_DICT: Final[dict[str, str]] = {**{dt.name: name for name, dt in DTYPES_DICT.items()}, "void": "void"}


def _to_np_dtype(dtype: DType) -> type | None:
  """The numpy scalar type `.numpy()` gives for `dtype` (bfloat16 and fp8 read as float32); None for dtypes numpy lacks."""
  import numpy as np
  if dtype.scalar() in (dtypes.bfloat16, *dtypes.fp8s): return np.float32
  return np.dtype(dtype.fmt).type if dtype.fmt is not None else None


def _from_np_dtype(npdtype) -> DType:
  import numpy as np
  return DTYPES_DICT[np.dtype(npdtype).name]


def _to_torch_dtype(dtype: DType):
  """torch's dtype for `dtype` (fp8 as uint8: torch's fp8 types don't do arithmetic), None where torch has none."""
  import numpy as np
  import torch
  if dtype == dtypes.uint64: return torch.uint64
  if dtype == dtypes.bfloat16: return torch.bfloat16
  if dtype in dtypes.fp8s: return torch.uint8
  try: return torch.from_numpy(np.array([], dtype=_to_np_dtype(dtype))).dtype
  except TypeError: return None


def _from_torch_dtype(torchdtype) -> DType:
  return {v: k for k in DTYPES_DICT.values() if (v := _to_torch_dtype(k)) is not None}[torchdtype]
