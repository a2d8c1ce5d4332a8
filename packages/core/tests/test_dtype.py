"""dtypes: the promotion lattice, name lookup, truncation into a dtype's range, limits, from_py, vectors and pointers.

The lattice is tinygrad's (JAX-style): bool -> {int8, uint8}; signed ints chain; uintN -> {intN*2, uintN*2};
int64 and uint64 -> {fp8e4m3, fp8e5m2} -> {float16, bfloat16} -> float32 -> float64. The common type is the
lowest-priority type that every input reaches. Like tinygrad 0.14 (and unlike torch, which refuses
uint64 + int64), int64 + uint64 gives fp8e4m3: the smallest float in the lattice above both.
"""
from __future__ import annotations

import itertools
import math
import pickle
import struct

import pytest
from tinygrad.dtype import DTYPES_BY_NAME, FLOATS, INTS, DType, PtrDType, dtypes, least_upper_dtype, least_upper_float, to_dtype, truncate

pytestmark = pytest.mark.compile_only  # pure IR: no device involved

D = dtypes
ALL = [D.bool, D.int8, D.uint8, D.int16, D.uint16, D.int32, D.uint32, D.int64, D.uint64,
       D.fp8e4m3, D.fp8e5m2, D.float16, D.bfloat16, D.float32, D.float64]


# ---- promotion

PROMOTIONS = [
  # same type
  *[(dt, dt, dt) for dt in ALL],
  # bool is the bottom: bool + x = x
  *[(D.bool, dt, dt) for dt in ALL],
  # signed and unsigned ints: the smallest signed type that holds both (torch and tinygrad agree)
  (D.int8, D.uint8, D.int16), (D.int8, D.int16, D.int16), (D.uint8, D.uint16, D.uint16), (D.int16, D.uint8, D.int16),
  (D.int16, D.uint16, D.int32), (D.int8, D.uint16, D.int32), (D.int32, D.uint16, D.int32), (D.int32, D.uint32, D.int64),
  (D.int8, D.uint32, D.int64), (D.int64, D.uint32, D.int64), (D.uint8, D.uint64, D.uint64), (D.uint32, D.uint64, D.uint64),
  # 64-bit mixed sign has no int above it: the default float (tinygrad 0.14's weak float, float32 in memory; numpy: float64;
  # torch raises), never the fp8 types the lattice puts just above the ints
  (D.int64, D.uint64, D.float32), (D.int8, D.uint64, D.float32), (D.int32, D.uint64, D.float32), (D.bool, D.int8, D.int8),
  # int + float -> that float, whatever the int's size (torch: int32 + float16 = float16)
  (D.int32, D.float16, D.float16), (D.int64, D.float16, D.float16), (D.uint64, D.bfloat16, D.bfloat16),
  (D.int8, D.float32, D.float32), (D.uint8, D.float64, D.float64), (D.int64, D.fp8e5m2, D.fp8e5m2), (D.uint32, D.fp8e4m3, D.fp8e4m3),
  # floats
  (D.float16, D.bfloat16, D.float32), (D.fp8e4m3, D.fp8e5m2, D.float16), (D.fp8e4m3, D.bfloat16, D.bfloat16),
  (D.fp8e5m2, D.float16, D.float16), (D.float16, D.float32, D.float32), (D.bfloat16, D.float64, D.float64),
  (D.float32, D.float64, D.float64), (D.fp8e4m3, D.float64, D.float64),
]


@pytest.mark.parametrize("a,b,expected", PROMOTIONS, ids=lambda x: x.name if isinstance(x, DType) else None)
def test_least_upper_dtype(a: DType, b: DType, expected: DType):
  assert least_upper_dtype(a, b) == expected
  assert least_upper_dtype(b, a) == expected


@pytest.mark.parametrize("a,b", list(itertools.product(ALL, ALL)), ids=lambda x: x.name)
def test_promotion_is_an_upper_bound(a: DType, b: DType):
  c = least_upper_dtype(a, b)
  assert c == least_upper_dtype(b, a)
  # the result is at least as wide as each input in its own kind: promoting it with either input changes nothing
  assert least_upper_dtype(c, a) == c and least_upper_dtype(c, b) == c
  # and the result never loses "floatness"
  if dtypes.is_float(a) or dtypes.is_float(b): assert dtypes.is_float(c)


def test_promotion_is_associative():
  # the n-ary form doesn't depend on the order of its arguments
  for a, b, c in itertools.product(ALL, repeat=3):
    assert len({least_upper_dtype(*p) for p in itertools.permutations((a, b, c))}) == 1, (a, b, c)
  # pairwise promotion is associative too, except where uint64 meets a signed int: that pair has no int above it and
  # gives the default float (float32), which then stays float32 next to a smaller float (tinygrad's weak float would
  # give the smaller float; we have no weak dtypes, docs/differences.md)
  # (and through the two fp8 types: fp8e4m3 + fp8e5m2 is float16, which next to bfloat16 is float32, as in tinygrad)
  signed = (D.int8, D.int16, D.int32, D.int64)
  for a, b, c in itertools.product([dt for dt in ALL if dt not in (D.fp8e4m3, D.fp8e5m2)], repeat=3):
    if D.uint64 in (a, b, c) and any(d in signed for d in (a, b, c)): continue
    ab_c = least_upper_dtype(least_upper_dtype(a, b), c)
    assert ab_c == least_upper_dtype(a, least_upper_dtype(b, c)) == least_upper_dtype(a, b, c), (a, b, c)
  assert least_upper_dtype(least_upper_dtype(D.int8, D.uint64), D.fp8e5m2) == D.float32
  assert least_upper_dtype(D.int8, least_upper_dtype(D.uint64, D.fp8e5m2)) == D.fp8e5m2 == least_upper_dtype(D.int8, D.uint64, D.fp8e5m2)


def test_promotion_of_many_and_of_vectors():
  assert least_upper_dtype(D.bool, D.int8, D.uint8) == D.int16
  assert least_upper_dtype(D.int8) == D.int8
  assert least_upper_dtype(D.uint8, D.int8, D.float16, D.bfloat16) == D.float32
  # vectors promote by their scalar type
  assert least_upper_dtype(D.float16.vec(4), D.float32) == D.float32


@pytest.mark.parametrize("dt,expected", [
  (D.bool, D.float32), (D.int8, D.float32), (D.uint8, D.float32), (D.int32, D.float32), (D.int64, D.float32), (D.uint64, D.float32),
  (D.float16, D.float16), (D.bfloat16, D.bfloat16), (D.fp8e4m3, D.fp8e4m3), (D.fp8e5m2, D.fp8e5m2), (D.float32, D.float32),
  (D.float64, D.float64)], ids=lambda x: x.name)
def test_least_upper_float(dt: DType, expected: DType):
  assert least_upper_float(dt) == expected


# ---- names

@pytest.mark.parametrize("name,expected", [
  ("float32", D.float32), ("float", D.float32), ("half", D.float16), ("float16", D.float16), ("double", D.float64), ("bfloat16", D.bfloat16),
  ("int8", D.int8), ("char", D.int8), ("uchar", D.uint8), ("short", D.int16), ("long", D.int64), ("ulong", D.uint64), ("bool", D.bool),
  ("fp8e4m3", D.fp8e4m3), ("fp8e5m2", D.fp8e5m2)])
def test_to_dtype_by_name(name: str, expected: DType):
  assert to_dtype(name) == expected


@pytest.mark.parametrize("dt", ALL, ids=lambda x: x.name)
def test_to_dtype_accepts_dtypes_and_their_own_names(dt: DType):
  assert to_dtype(dt) is dt
  # the name a dtype prints with must be accepted back (int32 is named "int", uint32 "uint", as in tinygrad)
  assert to_dtype(dt.name) == dt


def test_to_dtype_unknown_suggests():
  with pytest.raises(ValueError, match=r"unknown dtype 'flaot32'.*did you mean 'float32'"):
    to_dtype("flaot32")
  with pytest.raises(ValueError, match=r"unknown dtype 'bfloat61'.*did you mean 'bfloat16'"):
    to_dtype("bfloat61")
  # nothing close: the known names are listed
  with pytest.raises(ValueError, match=r"unknown dtype 'zzzz'.*known: .*float32"):
    to_dtype("zzzz")


def test_dtype_names_table():
  assert "void" not in DTYPES_BY_NAME
  assert all(isinstance(v, DType) and not isinstance(v, PtrDType) for v in DTYPES_BY_NAME.values())
  assert set(DTYPES_BY_NAME.values()) == set(ALL)


# ---- truncate: ints wrap

@pytest.mark.parametrize("dt,x,expected", [
  (D.int8, 127, 127), (D.int8, 128, -128), (D.int8, -129, 127), (D.int8, 255, -1), (D.int8, 256, 0),
  (D.uint8, -1, 255), (D.uint8, 256 + 5, 5), (D.uint8, 255, 255),
  (D.int16, 2**15, -2**15), (D.uint16, 2**16 + 1, 1), (D.uint16, -2, 2**16 - 2),
  (D.int32, 2**31, -2**31), (D.int32, 2**31 - 1, 2**31 - 1), (D.int32, -2**31 - 1, 2**31 - 1), (D.int32, 2**32 + 7, 7),
  (D.uint32, -1, 2**32 - 1), (D.uint32, 2**32, 0),
  (D.int64, 2**63, -2**63), (D.int64, -2**63 - 1, 2**63 - 1), (D.uint64, -1, 2**64 - 1), (D.uint64, 2**64 + 3, 3),
  # floats into ints truncate toward zero first
  (D.int8, 3.7, 3), (D.int8, -3.7, -3), (D.uint8, 255.9, 255),
  (D.bool, 0, False), (D.bool, 2, True), (D.bool, 0.0, False), (D.bool, -0.5, True)])
def test_truncate_ints(dt: DType, x, expected):
  out = truncate(dt, x)
  assert out == expected and type(out) is type(expected)


@pytest.mark.parametrize("dt", [d for d in INTS], ids=lambda x: x.name)
def test_truncate_int_is_modular(dt: DType):
  bits = dt.itemsize * 8
  for x in [0, 1, -1, 12345, -12345, 2**bits - 1, 2**bits, 2**(bits - 1), -2**(bits - 1), 3 * 2**bits + 17]:
    out = truncate(dt, x)
    assert dtypes.min(dt) <= out <= dtypes.max(dt)
    assert (out - x) % 2**bits == 0


# ---- truncate: floats round to nearest, ties to even

def _f32(x: float) -> float: return struct.unpack("f", struct.pack("f", x))[0]


@pytest.mark.parametrize("dt,x,expected", [
  # float32
  (D.float32, 0.1, _f32(0.1)), (D.float32, 1e39, math.inf), (D.float32, -1e39, -math.inf), (D.float32, 1e-46, 0.0),
  (D.float32, 3.4028234663852886e38, 3.4028234663852886e38), (D.float32, 1 + 2**-24, 1.0), (D.float32, 1 + 3 * 2**-24, 1 + 2**-22),
  # float16: max 65504, halfway to 65536 rounds (to even) to inf; smallest subnormal 2**-24
  (D.float16, 0.1, 0.0999755859375), (D.float16, 65504.0, 65504.0), (D.float16, 65519.0, 65504.0), (D.float16, 65520.0, math.inf),
  (D.float16, -70000.0, -math.inf), (D.float16, 2**-24, 2**-24), (D.float16, 2**-25, 0.0), (D.float16, 3 * 2**-26, 2**-24),
  (D.float16, 1 + 2**-11, 1.0), (D.float16, 1 + 3 * 2**-11, 1 + 2**-9), (D.float16, 2049.0, 2048.0), (D.float16, 2051.0, 2052.0),
  # bfloat16: 8 bits of mantissa
  (D.bfloat16, 1 + 2**-8, 1.0), (D.bfloat16, 1 + 3 * 2**-8, 1 + 2**-6), (D.bfloat16, 1 + 2**-8 + 2**-20, 1 + 2**-7),
  (D.bfloat16, 0.1, 0.10009765625), (D.bfloat16, 257.0, 256.0), (D.bfloat16, 259.0, 260.0), (D.bfloat16, 1e39, math.inf),
  (D.bfloat16, 3.3895313892515355e38, 3.3895313892515355e38), (D.bfloat16, 3.397e38, math.inf), (D.bfloat16, -3.45e38, -math.inf),
  # fp8e4m3 (e4m3fn): max 448, no inf; finite overflow saturates to +-448, smallest subnormal 2**-9
  (D.fp8e4m3, 1.0, 1.0), (D.fp8e4m3, 1.0625, 1.0), (D.fp8e4m3, 1.1875, 1.25), (D.fp8e4m3, 1.9375, 2.0), (D.fp8e4m3, 0.3, 0.3125),
  (D.fp8e4m3, 448.0, 448.0), (D.fp8e4m3, 464.0, 448.0), (D.fp8e4m3, 500.0, 448.0), (D.fp8e4m3, 1e6, 448.0), (D.fp8e4m3, -1e6, -448.0),
  (D.fp8e4m3, 2**-9, 2**-9), (D.fp8e4m3, 2**-10, 0.0), (D.fp8e4m3, 3 * 2**-10, 2**-8), (D.fp8e4m3, 2**-6, 2**-6),
  # fp8e5m2: max 57344, keeps inf; halfway to 65536 rounds (to even) to inf; smallest subnormal 2**-16
  (D.fp8e5m2, 1.0, 1.0), (D.fp8e5m2, 1.125, 1.0), (D.fp8e5m2, 1.375, 1.5), (D.fp8e5m2, 57344.0, 57344.0), (D.fp8e5m2, 61439.0, 57344.0),
  (D.fp8e5m2, 61440.0, math.inf), (D.fp8e5m2, -1e6, -math.inf), (D.fp8e5m2, math.inf, math.inf), (D.fp8e5m2, -math.inf, -math.inf),
  (D.fp8e5m2, 2**-16, 2**-16), (D.fp8e5m2, 2**-17, 0.0), (D.fp8e5m2, 3 * 2**-17, 2**-15),
  # float64 is exact
  (D.float64, 0.1, 0.1), (D.float64, 1e300, 1e300),
])
def test_truncate_floats(dt: DType, x: float, expected: float):
  out = truncate(dt, x)
  assert isinstance(out, float)
  assert out == expected, f"truncate({dt}, {x!r}) = {out!r}, expected {expected!r}"
  # rounding is odd-symmetric
  assert truncate(dt, -x) == -expected


@pytest.mark.parametrize("dt", FLOATS, ids=lambda x: x.name)
def test_truncate_float_specials(dt: DType):
  assert math.isnan(truncate(dt, math.nan))
  assert truncate(dt, 0.0) == 0.0 and math.copysign(1.0, truncate(dt, -0.0)) == -1.0
  if dt == D.fp8e4m3:
    # e4m3fn has no infinity: inf is NaN (as with torch's float8_e4m3fn), while finite overflow saturates
    assert math.isnan(truncate(dt, math.inf)) and math.isnan(truncate(dt, -math.inf))
  else:
    assert truncate(dt, math.inf) == math.inf and truncate(dt, -math.inf) == -math.inf
  # tiny values flush to a signed zero (float64 holds them)
  if dt != D.float64:
    tiny = truncate(dt, -1e-300)
    assert tiny == 0.0 and math.copysign(1.0, tiny) == -1.0


@pytest.mark.parametrize("dt", [D.float16, D.bfloat16, D.fp8e4m3, D.fp8e5m2], ids=lambda x: x.name)
def test_truncate_float_is_idempotent_and_monotone(dt: DType):
  xs = sorted({i * 0.37 - 50 for i in range(300)} | {2.0**e for e in range(-20, 16)} | {-(2.0**e) for e in range(-20, 16)})
  outs = [truncate(dt, x) for x in xs]
  for x, y in zip(outs, outs[1:]):
    assert x <= y or (math.isnan(x) or math.isnan(y))
  for y in outs:
    assert truncate(dt, y) == y


def test_truncate_vector_dtype_uses_scalar():
  assert truncate(D.float16.vec(4), 0.1) == truncate(D.float16, 0.1)
  assert truncate(D.int8.vec(2), 200) == -56


# ---- limits

@pytest.mark.parametrize("dt,lo,hi", [
  (D.bool, False, True), (D.int8, -128, 127), (D.uint8, 0, 255), (D.int16, -2**15, 2**15 - 1), (D.uint16, 0, 2**16 - 1),
  (D.int32, -2**31, 2**31 - 1), (D.uint32, 0, 2**32 - 1), (D.int64, -2**63, 2**63 - 1), (D.uint64, 0, 2**64 - 1),
  *[(dt, -math.inf, math.inf) for dt in FLOATS]], ids=lambda x: x.name if isinstance(x, DType) else None)
def test_min_max(dt: DType, lo, hi):
  assert dtypes.min(dt) == lo and dtypes.max(dt) == hi
  assert type(dtypes.min(dt)) is type(lo) and type(dtypes.max(dt)) is type(hi)
  # integer limits survive truncation unchanged
  if not dtypes.is_float(dt): assert truncate(dt, lo) == lo and truncate(dt, hi) == hi


def test_predicates():
  assert all(dtypes.is_int(dt) and not dtypes.is_float(dt) for dt in INTS)
  assert all(dtypes.is_float(dt) and not dtypes.is_int(dt) for dt in FLOATS)
  assert not dtypes.is_int(D.bool) and not dtypes.is_float(D.bool) and dtypes.is_bool(D.bool)
  assert [dt for dt in ALL if dtypes.is_unsigned(dt)] == [D.uint8, D.uint16, D.uint32, D.uint64]
  assert dtypes.finfo(D.float16) == (5, 10) and dtypes.finfo(D.bfloat16) == (8, 7) and dtypes.finfo(D.fp8e4m3) == (4, 3)


# ---- from_py

@pytest.mark.parametrize("x,expected", [
  (True, D.bool), (False, D.bool), (0, D.int32), (-7, D.int32), (2**40, D.int64), (2**31, D.int64), (2**63, D.uint64), (1.0, D.float32), (math.inf, D.float32),
  ([1, 2], D.int32), ([1, 2.0], D.float32), ([True, False], D.bool), ([True, 1], D.int32), ((1, 2.5), D.float32),
  ([[1, 2], [3.0, 4]], D.float32), ([[True], [2]], D.int32), ([], D.float32)])
def test_from_py(x, expected: DType):
  assert dtypes.from_py(x) == expected


def test_from_py_rejects_other_types():
  with pytest.raises(TypeError, match="str"):
    dtypes.from_py("1.0")
  with pytest.raises(TypeError):
    dtypes.from_py(None)


# ---- vectors and pointers

@pytest.mark.parametrize("dt", ALL, ids=lambda x: x.name)
def test_vec(dt: DType):
  v = dt.vec(4)
  assert v.count == 4 and v.itemsize == dt.itemsize and v.nbytes == 4 * dt.itemsize and v.name == dt.name
  assert v != dt and v == dt.vec(4) and hash(v) == hash(dt.vec(4))
  assert v.scalar() == dt
  assert dt.vec(1) is dt and dt.scalar() is dt
  assert dtypes.is_float(v) == dtypes.is_float(dt) and dtypes.is_int(v) == dtypes.is_int(dt)
  assert dtypes.is_unsigned(v) == dtypes.is_unsigned(dt)
  with pytest.raises(AssertionError):
    v.vec(2)


def test_vec_repr():
  assert repr(D.float32.vec(4)) == "dtypes.float.vec(4)"
  assert repr(D.float16) == "dtypes.half"


def test_ptr():
  p = D.float32.ptr(16)
  assert isinstance(p, PtrDType) and p.base == D.float32 and p.size == 16 and p.addrspace == "global"
  assert p != D.float32 and p == D.float32.ptr(16) and p != D.float32.ptr(8) and p != D.float32.ptr(16, "reg")
  assert p.scalar() is p
  assert p.itemsize == 4
  assert D.float32.ptr().size == -1
  assert repr(p) == "dtypes.float.ptr(16)"
  assert repr(D.int32.ptr(1, "reg")) == "dtypes.int.ptr(1, 'reg')"
  vp = D.float16.vec(4).ptr(2)
  assert vp.base == D.float16.vec(4) and vp.count == 4
  assert len({p, D.float32.ptr(16), D.float32}) == 2


@pytest.mark.parametrize("dt", [*ALL, D.float32.vec(4), D.int8.ptr(8), D.half.ptr(4, "reg")], ids=repr)
def test_dtype_pickles(dt: DType):
  assert pickle.loads(pickle.dumps(dt)) == dt


def test_dtype_order_follows_priority():
  assert sorted(ALL, key=lambda d: d.priority) == ALL
  assert sorted(reversed(ALL)) == ALL
