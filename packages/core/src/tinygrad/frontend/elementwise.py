"""Elementwise ops: arithmetic, comparisons, logic and bits, math functions and activations, python operators, broadcasting.

Every function is built from the graph's elementwise primitives (EXP2, LOG2, SIN, SQRT, RECIPROCAL, TRUNC, the binary
ALU ops and WHERE), so it becomes part of a generated kernel and gets its gradient from the per-op rules.

Numerics. Transcendentals of float32 are accurate to a few 1e-7 relative over their usual ranges: where the naive
formula cancels (expm1/log1p near 0, tanh/sinh/asinh/atanh near 0, asin/acos near +-1, erf near 0) a Taylor series
or a reformulation is used on that part of the range. Piecewise functions feed each branch a harmless input on
the part of the range where the branch is not selected (`_pick`), so the gradient of the unused branch is 0 and not
0 * inf = nan. float16/bfloat16 compute these in float32 and round the result once.
"""
from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, Self, TypeVar

from tinygrad.dtype import ConstType, DType, dtypes, least_upper_dtype, least_upper_float, to_dtype, truncate
from tinygrad.frontend.base import TensorBase
from tinygrad.helpers import InvalidArgumentError, InvalidDTypeError
from tinygrad.uop.ops import GroupOp, Ops, UOp
from tinygrad.uop.symbolic import sint_eq

TensorT = TypeVar("TensorT", bound="ElementwiseMixin")  # a Tensor, in the helpers of the mixin

LN2 = math.log(2)
LOG2E = 1 / math.log(2)
HALF_PI = math.pi / 2
_LN2_HI, _LN2_LO = 0.693359375, math.log(2) - 0.693359375  # _LN2_HI has 9 significant bits: n * _LN2_HI is exact

_HALF_PI_DIGITS = "1.57079632679489661923132169163975144209858469968755291048747229615390820314310449931401741267"


def _split_half_pi(bits: int, parts: int) -> tuple[int, list[float]]:
  """(bits, pi/2 as a sum of floats of `bits` significant bits each, the last one rounded): n * part is exact for |n| < 2**bits."""
  rest, out = Fraction(_HALF_PI_DIGITS), []
  for _ in range(parts - 1):
    scale = Fraction(2) ** (bits - 1 - math.floor(math.log2(abs(rest))))
    out.append(float(round(rest * scale) / scale))
    rest -= Fraction(out[-1])
  return bits, out + [float(rest)]


# Cody-Waite reduction x - n pi/2 for cos, by itemsize: half the mantissa for n, the other half for each part of pi/2
_HALF_PI_PARTS = {4: _split_half_pi(12, 4), 8: _split_half_pi(26, 4)}

# series coefficients, lowest order first (evaluated by Horner in x**2 where noted)
# erf(x) = x * sum_n c_n x^(2n) for |x| <= 1: c_n = 2/sqrt(pi) (-1)^n / (n! (2n+1))
_ERF_SERIES = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(13)]
# erfc(z) = t exp(-z^2 + P(t)), t = 1/(1 + z/2), z >= 0: fractional error < 1.2e-7 (Numerical Recipes' erfcc fit)
_ERFC_FIT = [-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277]
# asin(x) = x * sum_n c_n x^(2n) for |x| <= 0.5: c_n = (2n)! / (4^n (n!)^2 (2n+1))
_ASIN_SERIES = [math.factorial(2 * n) / (4 ** n * math.factorial(n) ** 2 * (2 * n + 1)) for n in range(14)]
# atan(z) = z * sum_n (-1)^n z^(2n) / (2n+1) for |z| <= tan(pi/8)
_ATAN_SERIES = [(-1) ** n / (2 * n + 1) for n in range(11)]


_UINT_OF_SIZE = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}


def _broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  ndim = max(len(s) for s in shapes)
  padded = [(1,) * (ndim - len(s)) + s for s in shapes]
  out = []
  for dims in zip(*padded):
    sizes = {d for d in dims if d != 1}
    if len(sizes) > 1 and any(isinstance(d, UOp) for d in sizes):  # symbolic sizes: one size when equal for every value
      sizes = {next(d for d in sizes if isinstance(d, UOp))} if all(sint_eq(a, b) for a in sizes for b in sizes) else sizes
    if len(sizes) > 1:
      raise InvalidArgumentError(f"shapes {' and '.join(str(s) for s in shapes)} can't be broadcast together: "
                       f"sizes {sorted(sizes, key=str)} meet at one axis (each axis must match or be 1)")
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)


def _scalar(x: Any) -> ConstType | None:
  """x as a Python scalar when it is one (numpy scalars included), else None."""
  if isinstance(x, (bool, int, float)): return x
  if type(x).__module__ == "numpy" and hasattr(x, "item") and getattr(x, "ndim", None) == 0: return x.item()
  return None


def _scalar_dtype(t: TensorT, y: ConstType) -> DType:
  """The dtype a Python scalar takes next to tensor t (tinygrad's rule): the tensor's dtype when that holds it without
  changing kind (any scalar next to a float tensor, an int next to an int tensor), else the scalar's own dtype."""
  if dtypes.is_float(t.dtype) or (dtypes.is_int(t.dtype) and isinstance(y, int) and not isinstance(y, bool)): return t.dtype
  return dtypes.from_py(y)


def _outside(t: TensorT, x: Any) -> int:
  """+1 (-1) when x is a Python int above (below) every value int tensor t's dtype holds, else 0. Such a scalar would wrap
  into the dtype (2**40 becomes 0 next to an int32): comparisons and clamps with it are answered exactly instead."""
  v = _scalar(x)
  if not dtypes.is_int(t.dtype) or not isinstance(v, int) or isinstance(v, bool): return 0
  return 1 if v > dtypes.max(t.dtype) else -1 if v < dtypes.min(t.dtype) else 0


def _poly(x: TensorT, coeffs: Sequence[float]) -> TensorT:
  """sum_i coeffs[i] * x**i by Horner's rule."""
  acc: Any = coeffs[-1]
  for c in reversed(coeffs[:-1]): acc = x * acc + c
  return acc


def _pick(cond: TensorT, x: TensorT, f_true: Callable[[TensorT], TensorT], f_false: Callable[[TensorT], TensorT], safe_true: float,
          safe_false: float) -> TensorT:
  """cond ? f_true(x) : f_false(x), each branch evaluated on x only where it is picked (elsewhere on its safe value)."""
  return cond.where(f_true(cond.where(x, safe_true)), f_false(cond.where(safe_false, x)))


def _half_exp(z: TensorT) -> TensorT:
  """exp(z)/2 as exp(z/2)**2/2: no overflow before the result overflows, and z/2 is exact."""
  e = (z * 0.5).exp()
  return e * 0.5 * e


def _unary_gradient(out: TensorT, x: TensorT, slope: Callable[[TensorT], TensorT]) -> TensorT:
  """Give out = f(x) the gradient g * slope(x) through gradient.GRAD_OVERRIDES, where f's branches (wheres, NaN outside its
  domain) would give another one than torch's formula (acosh for x < -1: torch 1/sqrt(x*x - 1), finite; its branches NaN)."""
  from tinygrad.gradient import GRAD_OVERRIDES
  x_node, out_node = x.uop, out.uop
  xd = type(x)(x_node, requires_grad=False)
  def given(g: UOp) -> tuple[set[int], dict[UOp, UOp]] | None:
    return set(range(len(out_node.src))), {x_node: (type(x)(g, requires_grad=False) * slope(xd)).cast(x.dtype).uop}
  GRAD_OVERRIDES[out_node] = given
  return out


def _pow_gradient(out: TensorT, base: TensorT, ex: TensorT | builtins.float) -> TensorT:
  """Give `out` = base ** ex (built from exp2/log2, sqrt and wheres for the special cases) torch's gradients through
  gradient.GRAD_OVERRIDES: d/dbase = ex * base ** (ex - 1) (0 where ex is 0), d/dex = out * ln(base) (0 where base is 0 and
  ex >= 0). The ops' own rules give NaN at base 0 (0 * inf) and 0 where a special-case where() picked a constant (x ** 0,
  1 ** x). `ex` is a float for a constant exponent."""
  from tinygrad.gradient import GRAD_OVERRIDES
  # the graph's nodes as they are now (a later assign rebinds the Tensors)
  b_node, out_node = base.uop, out.uop
  b, o = type(base)(b_node, requires_grad=False), type(out)(out_node, requires_grad=False)
  e_node = ex.uop if not isinstance(ex, builtins.float) else None
  e = type(base)(e_node, requires_grad=False) if e_node is not None else ex
  def given(g: UOp) -> tuple[set[int], dict[UOp, UOp]] | None:
    gt = type(base)(g, requires_grad=False)
    if isinstance(e, builtins.float): db = b.pow(e - 1) * e if e != 0 else b.zeros_like()
    else: db = e.eq(0).where(0.0, e * b.pow(e - 1))
    grads: dict[UOp, UOp] = {b_node: (gt * db).cast(b.dtype).uop}
    if e_node is not None and not isinstance(e, builtins.float):
      de = (gt * (b.eq(0) & (e >= 0)).where(0.0, o * b.log())).cast(e.dtype).uop
      grads[e_node] = (type(base)(grads[e_node], requires_grad=False) + type(base)(de, requires_grad=False)).uop if e_node in grads else de
    return set(range(len(out_node.src))), grads
  GRAD_OVERRIDES[out_node] = given
  return out


def _split(x: TensorT) -> tuple[TensorT, TensorT]:
  """x = hi + lo exactly, each with at most half of the mantissa's bits (so hi * hi etc. are exact): hi is x with the low
  mantissa bits cleared (Veltkamp's x * 4097 would overflow near the top of the range). hi carries no gradient, lo all of it."""
  ints, low = (dtypes.int64, (1 << 27) - 1) if x.dtype == dtypes.float64 else (dtypes.int32, (1 << 12) - 1)
  hi = (x.detach().bitcast(ints) & ~low).bitcast(x.dtype)
  return hi, x - hi


def _float_bits(dt: DType) -> tuple[DType, int, int]:
  """(the int dtype of dt's bits, its mantissa bits, its exponent bias) for float32 and float64."""
  return (dtypes.int64, 52, 1023) if dt == dtypes.float64 else (dtypes.int32, 23, 127)


def _exponent(x: TensorT) -> TensorT:
  """The biased exponent field of |x| (an int; 0 for zero and subnormals, the maximum for inf and NaN)."""
  ints, mant, _ = _float_bits(x.dtype)
  return (x.detach().bitcast(ints) >> mant) & (2 * _float_bits(x.dtype)[2] + 1)


def _pow2(k: TensorT, like: TensorT) -> TensorT:
  """2.0 ** k in like's float dtype, for int k in [0, bias]: built from its bits, exactly."""
  ints, mant, bias = _float_bits(like.dtype)
  return ((k.cast(ints) + bias) << mant).bitcast(like.dtype)


def _product_error(a: TensorT, b: TensorT, p: TensorT) -> TensorT:
  """a * b - p exactly, for p = a * b rounded (Dekker's two-product, no FMA needed)."""
  ah, al = _split(a)
  bh, bl = _split(b)
  return ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _int_pow(x: TensorT, n: int) -> TensorT:
  """x ** n for a Python int n, by square and multiply (exact for ints, a few ulps for floats)."""
  if n == 0:  # 1 everywhere (NaN ** 0 too); the branch through x carries a zero gradient
    return x._always().where(type(x)(1, device=x.device, dtype=x.dtype), x)
  if n < 0:
    r = _int_pow(x.reciprocal(), -n)
    return r if dtypes.is_float(x.dtype) else r.cast(x.dtype)
  powers, sq = [], x  # x ** (2 ** i) for the set bits i of n
  while n:
    if n & 1: powers.append(sq)
    n >>= 1
    if n: sq = sq * sq
  acc = powers[0]
  for p in powers[1:]: acc = acc * p
  return acc


def _result_requires_grad(dtype: DType, *inputs: TensorBase) -> bool | None:
  """Like tinygrad: True if any input requires grad, else None if any is undecided, else False; and, as in torch, False for
  an int or bool result (a comparison, an argmax, sampled actions): no gradient flows into it, and backward() must not ask
  for one (a REINFORCE loss fed such actions back in)."""
  if not dtypes.is_float(dtype): return False
  flags = [t.requires_grad for t in inputs]
  return True if any(flags) else None if None in flags else False


def data_free(t: TensorBase) -> bool:
  """On the default device and computed from constants alone (arange, full, ones and math on them, made without a device=):
  no buffer holds any of its data, so it can be made on another device as well, as tinygrad's device-less aranges are. One
  made on another device than the default (`zeros(3, device="CPU:1")`) stays where it was asked for."""
  from tinygrad.device.registry import Device
  return t.device == Device.DEFAULT and not any(u.op in (Ops.BUFFER, Ops.MULTI) for u in t.uop.toposort())


class ElementwiseMixin(TensorBase):
  __slots__ = ()

  # ---- broadcasting and the one place that builds ALU nodes
  def _broadcasted(self, other: Self | ConstType, reverse: bool = False, match_dtype: bool = True) -> tuple[Self, Self]:
    x: Self = self
    if isinstance(other, type(self)):
      y = other
      if y.device != x.device:
        # a tensor computed from constants alone (an arange, a full) holds no data on its device: it is made on the other's
        # (tinygrad's are device-less); tensors with data on different devices are a ValueError, and a RuntimeError as in torch
        if data_free(y): y = y.to(x.device)
        elif data_free(x): x = x.to(y.device)
        else: raise InvalidArgumentError(f"tensors are on different devices: {x.device} and {y.device}; move one with .to()")
    elif isinstance(other, UOp):  # a bound Variable (or an expression of them) used as a scalar
      y = type(self)(other, device=x.device, dtype=x.dtype if not dtypes.is_bool(x.dtype) else dtypes.int32, requires_grad=False)
    else:
      v = _scalar(other)
      if v is None: raise InvalidDTypeError(f"can't combine a Tensor with {type(other).__name__}")  # tinygrad: RuntimeError
      dt = _scalar_dtype(x, v)
      # an int scalar wraps into an int tensor's dtype, as torch's arithmetic does (Tensor(v, dtype=) itself would raise)
      y = type(self)(truncate(dt, v) if dtypes.is_int(dt) else v, device=x.device, dtype=dt, requires_grad=False)
    if match_dtype and x.dtype != y.dtype:
      dt = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(dt), y.cast(dt)
    if reverse: x, y = y, x
    shape = _broadcast_shape(x.shape, y.shape)
    return x.expand(shape), y.expand(shape)

  def _alu(self, op: Ops, *srcs: Self) -> Self:
    out_dtype = dtypes.bool if op in GroupOp.Comparison else srcs[0].dtype if op is Ops.WHERE else self.dtype
    return type(self)(UOp(op, out_dtype, (self.uop, *(s.uop for s in srcs))), requires_grad=_result_requires_grad(out_dtype, self, *srcs))

  def _binary(self, op: Ops, other: Self | ConstType, reverse: bool = False) -> Self:
    x, y = self._broadcasted(other, reverse)
    return x._alu(op, y)

  def _floating(self) -> Self:
    """self, or for ints and bools self cast to the default float: for float-valued functions whose formula would
    overflow or wrap in an int dtype."""
    return self if dtypes.is_float(self.dtype) else self.cast(least_upper_float(self.dtype))

  def _float_pair(self, other: Self | ConstType) -> tuple[Self, Self]:
    """self and other broadcast together, in a float dtype (the promoted one, else the default float): for float-valued
    functions of two arguments. A scalar next to an int tensor would take (and wrap into) its dtype: the tensor becomes
    float first."""
    a, b = self._broadcasted(other) if isinstance(other, type(self)) else self._floating()._broadcasted(other)
    return a._floating(), b._floating()

  def _work(self) -> tuple[Self, DType]:
    """(self in the float dtype the math runs in, the float dtype of the result): halves and fp8 compute in float32."""
    out = least_upper_float(self.dtype)
    return self.cast(dtypes.float32 if out.itemsize < 4 else out), out

  def _inverse(self) -> Self:
    """An order-reversing map that is its own inverse: -x for floats, ~x for ints (no overflow), not x for bools."""
    return -self if dtypes.is_float(self.dtype) else ~self if dtypes.is_int(self.dtype) else self.logical_not()

  def _check_bits(self, what: str) -> None:
    if self.dtype != dtypes.bool and not dtypes.is_int(self.dtype): raise RuntimeError(f"{what} is not supported for {self.dtype!r}: it needs ints or bools")

  # ---- arithmetic
  def add(self, x: Self | ConstType, reverse: bool = False) -> Self: return self._binary(Ops.ADD, x, reverse)
  def sub(self, x: Self | ConstType, reverse: bool = False) -> Self:
    a, b = self._broadcasted(x, reverse)
    return a._alu(Ops.ADD, -b) if a.dtype != dtypes.bool else a._alu(Ops.XOR, b)
  def mul(self, x: Self | ConstType, reverse: bool = False) -> Self: return self._binary(Ops.MUL, x, reverse)

  def div(self, x: Self | ConstType, reverse: bool = False, rounding_mode: str | None = None) -> Self:
    """True division (ints give the default float); rounding_mode "trunc" rounds toward zero, "floor" toward -inf (ints stay ints)."""
    if rounding_mode not in (None, "trunc", "floor"): raise RuntimeError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    if rounding_mode is None and not isinstance(x, type(self)) and not dtypes.is_float(self.dtype):
      # true division of an int tensor and a Python number is float: the number must not wrap into the int dtype first
      # (int8 / 65536 divided by 0), as torch and tinygrad
      return self.cast(least_upper_float(self.dtype)).div(x, reverse)
    a, b = self._broadcasted(x, reverse)
    if rounding_mode is not None and (dtypes.is_int(a.dtype) or a.dtype == dtypes.bool):
      if a.dtype == dtypes.bool: a, b = a.cast(dtypes.int32), b.cast(dtypes.int32)
      q = a._alu(Ops.IDIV, b)
      if rounding_mode == "trunc" or dtypes.is_unsigned(a.dtype): return q
      # floor: one less where the C quotient was rounded up (a remainder, signs differ); x // 0 stays 0, as x % 0 is 0
      return ((q * b).ne(a) & (a < 0).ne(b < 0) & b.ne(0)).where(q - 1, q)
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    q = a._alu(Ops.FDIV, b)
    if rounding_mode != "floor": return q if rounding_mode is None else q.trunc()
    # a/b that underflows to +-0 (x // inf, tiny // huge) is a nonzero quotient: a negative one floors to -1 (Python, numpy, torch)
    q = (q.eq(0) & a.ne(0) & (a < 0).ne(b < 0)).where(-1.0, q.floor())
    # inf // finite nonzero is NaN, as numpy and torch (their floor division goes through fmod(inf, b) = NaN); inf // 0 stays inf
    return (a.isinf() & b.isfinite() & b.ne(0)).where(math.nan, q)

  def idiv(self, x: Self | ConstType, reverse: bool = False) -> Self:
    """Division truncated toward zero, like C (tinygrad's idiv; floats give the truncated float quotient). `//` floors instead."""
    return self.div(x, reverse, rounding_mode="trunc")

  def fmod(self, x: Self | ConstType) -> Self:
    """C remainder: a - trunc(a/b)*b, with the sign of the dividend."""
    a, b = self._broadcasted(x)
    return a._fmod(b)

  def _fmod(self, b: Self) -> Self:
    a: Self = self
    if dtypes.is_int(a.dtype): return a._alu(Ops.MOD, b)
    if a.dtype == dtypes.bool: raise RuntimeError("remainder is not supported for bools (torch raises too): cast to an int dtype first, x.int() % y")
    out = a.dtype
    if out.itemsize < 4: a, b = a.cast(dtypes.float32), b.cast(dtypes.float32)  # halves: exact in float32
    # exact, as C's fmod: each round takes r modulo |b| * 2**k, k chosen so that the quotient q stays below 2**22 (so it
    # is exact) and r - q * (|b| * 2**k) is computed exactly (the product as p + e: Dekker, no FMA needed). Each round
    # removes 22 bits of the exponent gap, three reach 2**66 (all of float16's range). a - trunc(a/b)*b rounded the
    # product: 65536 % 2.122 was off by 3e-4, 1e10 % -6 by 250
    r, bb = a, b.abs()
    for _ in range(3):
      k = (_exponent(r) - _exponent(bb) - 22).maximum(0)
      bk = bb * _pow2(k // 2, bb) * _pow2(k - k // 2, bb)  # exact: a power of two (two factors: k may pass the exponent range)
      q = (r / bk).trunc()
      p = q * bk
      r = (r - p) - _product_error(q, bk, p)
    # a/b rounded to an integer from the wrong side: move r by |b| toward the sign of a
    step = (a < 0).where(-bb, bb)
    r = (r.ne(0) & (r < 0).ne(a < 0)).where(r + step, r)
    r = (r.abs() >= bb).where(r - step, r)
    r = (r.abs() >= bb).where(math.nan, r)  # |a/b| beyond 2**66 (float32/64 only): not reduced in three rounds
    r = (b.isinf() & a.isfinite()).where(a, r)  # x % +-inf is x (the product above is 0 * inf)
    # a zero remainder has the sign of a; its gradient stays r's (1 for a, -trunc(a/b) for b, as torch): z - (r' - r) is z
    # in value (r' - r is +0.0) with r's gradient
    return r.eq(0).where(a._signbit().where(-0.0, 0.0) - (r.detach() - r), r).cast(out)

  def mod(self, x: Self | ConstType, reverse: bool = False) -> Self:
    """Python's %: the remainder has the sign of the divisor (a - floor(a/b)*b)."""
    a, b = self._broadcasted(x, reverse)
    r = a._fmod(b)
    if dtypes.is_unsigned(a.dtype): return r
    return (r.ne(0) & (r < 0).ne(b < 0)).where(r + b, r)

  def _saturated(self, x: Any, is_lower: bool, what: str) -> Any:
    """A lower (upper) bound x for self's values, brought into self's int dtype: one below (above) every value is the
    dtype's min (max), the same bound; one above (below) every value would make every result unrepresentable: an error."""
    if not (side := _outside(self, x)): return x
    if (side < 0) == is_lower: return dtypes.min(self.dtype) if is_lower else dtypes.max(self.dtype)
    raise ValueError(f"{what} {_scalar(x)} is {'above' if is_lower else 'below'} every {self.dtype.name} value "
                     f"({dtypes.min(self.dtype)}..{dtypes.max(self.dtype)}), so no result is representable: cast the tensor to a wider dtype first")

  def maximum(self, x: Self | ConstType) -> Self: return self._binary(Ops.MAX, self._saturated(x, True, "maximum with"))
  def minimum(self, x: Self | ConstType) -> Self:
    a, b = self._broadcasted(self._saturated(x, False, "minimum with"))
    return a._inverse().maximum(b._inverse())._inverse()

  def where(self, x: Self | ConstType, y: Self | ConstType) -> Self:
    """self ? x : y elementwise (self is cast to bool); x and y are promoted to one dtype, all three broadcast."""
    cond = self if self.dtype == dtypes.bool else self.cast(dtypes.bool)
    # an int scalar next to an int tensor takes its dtype: one that doesn't fit raises, as in torch (it used to wrap). A float
    # scalar makes the result float (`where(int_t, 1e20)`), so it is never checked against the int dtype
    if isinstance(x, type(self)) and dtypes.is_int(x.dtype) and isinstance(sy := _scalar(y), int): dtypes.check_fits(sy, x.dtype)
    if isinstance(y, type(self)) and dtypes.is_int(y.dtype) and isinstance(sx := _scalar(x), int): dtypes.check_fits(sx, y.dtype)
    if isinstance(x, type(self)): a, b = x._broadcasted(y)
    elif isinstance(y, type(self)): b, a = y._broadcasted(x)
    else:
      vx, vy = _scalar(x), _scalar(y)
      if vx is None or vy is None: raise TypeError(f"where needs Tensors or scalars, got {type(x).__name__} and {type(y).__name__}")
      dx, dy = _scalar_dtype(self, vx), _scalar_dtype(self, vy)
      dt = least_upper_dtype(dx, dy)
      # two scalars that the condition's int dtype can't hold keep their own dtypes (the condition only picks)
      if _outside(self, vx) or _outside(self, vy): dt = least_upper_dtype(dtypes.from_py(vx), dtypes.from_py(vy))
      a, b = type(self)(vx, device=self.device, dtype=dt, requires_grad=False), type(self)(vy, device=self.device, dtype=dt, requires_grad=False)
    if cond.device != a.device:
      if data_free(cond): cond = cond.to(a.device)
      elif data_free(a) and data_free(b): a, b = a.to(cond.device), b.to(cond.device)
      else: raise InvalidArgumentError(f"where's condition is on {cond.device} but its values on {a.device}; move one with .to()")
    shape = _broadcast_shape(cond.shape, a.shape, b.shape)
    return cond.expand(shape)._alu(Ops.WHERE, a.expand(shape), b.expand(shape))

  def __neg__(self) -> Self: return self.logical_not() if self.dtype == dtypes.bool else self._alu(Ops.NEG)
  def neg(self) -> Self: return -self

  def clamp(self, min_: Self | ConstType | None = None, max_: Self | ConstType | None = None) -> Self:
    """Limit to [min_, max_] (either may be None). The gradient passes where min_ <= x <= max_; NaN stays NaN."""
    if min_ is None and max_ is None: raise RuntimeError("at least one of 'min_' or 'max_' must not be None")
    # bounds beyond an int dtype saturate to it (int8.clip(-1000, 1000) is the identity), as numpy does; they wrapped
    if min_ is not None: min_ = self._saturated(min_, True, "clamp's min")
    if max_ is not None: max_ = self._saturated(max_, False, "clamp's max")
    ret: Self = self
    if min_ is not None:
      a, lo = ret._broadcasted(min_)
      ret = (a < lo).where(lo, a)
    if max_ is not None:
      a, hi = ret._broadcasted(max_)
      ret = (a > hi).where(hi, a)
    return ret
  def clip(self, min_: Self | ConstType | None = None, max_: Self | ConstType | None = None) -> Self: return self.clamp(min_, max_)

  def lerp(self, end: Self | ConstType, weight: Self | ConstType) -> Self:
    """self + (end - self) * weight, evaluated from the nearer end so that weight 0 and 1 give self and end exactly."""
    a, e = self._float_pair(end)  # ints compute in float: end - self would wrap (uint8)
    d = e - a
    if isinstance(weight, type(self)): w = weight
    else: w = type(self)(weight, device=self.device, dtype=a.dtype if dtypes.is_float(a.dtype) else dtypes.default_float)
    near_start = w.abs() < 0.5
    return near_start.where(a + d * w, e - d * (1 - w))

  # ---- comparisons (NaN compares unequal and unordered, as in IEEE and torch). A Python int beyond an int tensor's dtype
  # is above or below every element: the answer is exact (as numpy's), not the comparison with the wrapped scalar (torch's)
  def _known(self, value: bool) -> Self:
    t = self._always()  # computed from self: its shape, device and sharding
    return t if value else t.logical_not()
  def __lt__(self, x: Self | ConstType) -> Self: return self._known(side > 0) if (side := _outside(self, x)) else self._binary(Ops.CMPLT, x)
  def __gt__(self, x: Self | ConstType) -> Self:
    return self._known(side < 0) if (side := _outside(self, x)) else self._binary(Ops.CMPLT, x, reverse=True)
  def __le__(self, x: Self | ConstType) -> Self:
    if side := _outside(self, x): return self._known(side > 0)
    a, b = self._broadcasted(x)
    return (a < b) | a.eq(b) if dtypes.is_float(a.dtype) else (a > b).logical_not()
  def __ge__(self, x: Self | ConstType) -> Self:
    if side := _outside(self, x): return self._known(side < 0)
    a, b = self._broadcasted(x)
    return (a > b) | a.eq(b) if dtypes.is_float(a.dtype) else (a < b).logical_not()
  def eq(self, x: Self | ConstType) -> Self: return self._known(False) if _outside(self, x) else self._binary(Ops.CMPEQ, x)
  def ne(self, x: Self | ConstType) -> Self: return self._known(True) if _outside(self, x) else self._binary(Ops.CMPNE, x)
  def __eq__(self, x: object) -> Self: return self.eq(x)  # type: ignore[override, arg-type]
  def __ne__(self, x: object) -> Self: return self.ne(x)  # type: ignore[override, arg-type]

  def isclose(self, other: Self | ConstType, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Self:
    """|self - other| <= atol + rtol * |other| elementwise (infinities are close only to themselves)."""
    if _outside(self, other): return self.cast(dtypes.float32).isclose(other, rtol, atol, equal_nan)  # a scalar the dtype can't hold doesn't wrap
    a, b = self._broadcasted(other)
    close = a.eq(b)
    if dtypes.is_float(a.dtype): close = close | ((a - b).abs() <= atol + rtol * b.abs()) & a.isfinite() & b.isfinite()
    else: close = close | ((a.cast(dtypes.float32) - b.cast(dtypes.float32)).abs() <= atol + rtol * b.cast(dtypes.float32).abs())
    return close | (a.isnan() & b.isnan()) if equal_nan else close

  # ---- logic and bits
  def logical_not(self) -> Self: return self.cast(dtypes.bool).ne(True)
  def logical_and(self, x: Self | ConstType) -> Self: return self.cast(dtypes.bool)._binary(Ops.AND, x.cast(dtypes.bool) if isinstance(x, type(self)) else bool(x))
  def logical_or(self, x: Self | ConstType) -> Self: return self.cast(dtypes.bool)._binary(Ops.OR, x.cast(dtypes.bool) if isinstance(x, type(self)) else bool(x))
  def logical_xor(self, x: Self | ConstType) -> Self: return self.cast(dtypes.bool)._binary(Ops.XOR, x.cast(dtypes.bool) if isinstance(x, type(self)) else bool(x))

  def _bitwise(self, op: Ops, x: Self | ConstType, reverse: bool = False) -> Self:
    a, b = self._broadcasted(x, reverse)
    a._check_bits(f"bitwise {op.name.lower()}")
    return a._alu(op, b)
  def bitwise_and(self, x: Self | ConstType, reverse: bool = False) -> Self: return self._bitwise(Ops.AND, x, reverse)
  def bitwise_or(self, x: Self | ConstType, reverse: bool = False) -> Self: return self._bitwise(Ops.OR, x, reverse)
  def bitwise_xor(self, x: Self | ConstType, reverse: bool = False) -> Self: return self._bitwise(Ops.XOR, x, reverse)
  def bitwise_not(self) -> Self:
    self._check_bits("bitwise not")
    return self.logical_not() if self.dtype == dtypes.bool else self._alu(Ops.XOR, type(self)(-1, device=self.device, dtype=self.dtype).expand(self.shape))

  def _shift(self, op: Ops, x: Self | int, reverse: bool) -> Self:
    # a negative int amount is out of range as one >= the bit width: 0, or the sign for >> of a signed int (torch)
    if not isinstance(x, (type(self), int)): raise RuntimeError(f"shift amount must be an int or an int Tensor, got {x!r}")
    if isinstance(x, bool) and self.dtype != dtypes.bool: x = int(x)  # True shifts by 1 (tinygrad); bool by bool raises below
    a, b = self._broadcasted(x, reverse)
    if not dtypes.is_int(a.dtype): raise RuntimeError(f"shifts are not supported for {a.dtype!r}: they need ints (cast with .int() first)")
    return a._alu(op, b)
  def lshift(self, x: Self | int, reverse: bool = False) -> Self: return self._shift(Ops.SHL, x, reverse)
  def rshift(self, x: Self | int, reverse: bool = False) -> Self:
    """Shift right: arithmetic (sign-filling) for signed ints, logical for unsigned."""
    return self._shift(Ops.SHR, x, reverse)

  # ---- dtypes
  def cast(self, dtype: DType | str) -> Self:
    dt = to_dtype(dtype)
    return self if dt == self.dtype else type(self)(UOp(Ops.CAST, dt, (self.uop,)), requires_grad=_result_requires_grad(dt, self))
  def bitcast(self, dtype: DType | str) -> Self:
    """The same bytes read as dtype. Between sizes the last axis is reinterpreted (little endian): its byte count must
    divide into the new itemsize. Not differentiable."""
    dt = to_dtype(dtype)
    if self.requires_grad: raise RuntimeError("can't backprop through bitcast: detach() the tensor first")
    if dt == self.dtype: return self
    new, old = dt.itemsize, self.dtype.itemsize
    if new == old: return type(self)(UOp(Ops.BITCAST, dt, (self.uop,)))
    shape: tuple[int, ...] = self.shape
    if not shape or (shape[-1] * old) % new: raise RuntimeError(f"bitcast {self.dtype!r} -> {dt!r}: the last axis of {shape} doesn't hold a whole number of {new}-byte items")
    u_old, u_new = _UINT_OF_SIZE[old], _UINT_OF_SIZE[new]
    u = self.bitcast(u_old)
    lead = shape[:-1]
    if new < old:  # each item splits into k smaller ones, lowest bytes first
      k = old // new
      parts = [(u >> (8 * new * i)).cast(u_new).unsqueeze(-1).pad(((0, 0),) * len(shape) + ((i, k - 1 - i),)) for i in range(k)]
      out = parts[0]
      for p in parts[1:]: out = out | p
      return out.reshape(*lead, shape[-1] * k).bitcast(dt)
    k = new // old  # k items join into one, the first in the lowest bytes
    grouped = u.reshape(*lead, shape[-1] // k, k)
    keep = tuple((0, s) for s in grouped.shape[:-1])
    joined = [grouped.shrink(keep + ((i, i + 1),)).cast(u_new) << (8 * old * i) for i in range(k)]
    acc = joined[0]
    for p in joined[1:]: acc = acc | p
    return acc.reshape(*lead, shape[-1] // k).bitcast(dt)
  def float(self) -> Self: return self.cast(dtypes.float32)
  def half(self) -> Self: return self.cast(dtypes.float16)
  def int(self) -> Self: return self.cast(dtypes.int32)
  def bool(self) -> Self: return self.cast(dtypes.bool)
  def bfloat16(self) -> Self: return self.cast(dtypes.bfloat16)
  def double(self) -> Self: return self.cast(dtypes.float64)
  def long(self) -> Self: return self.cast(dtypes.int64)
  def short(self) -> Self: return self.cast(dtypes.int16)

  # ---- unary math
  def _float_unary(self, op: Ops) -> Self: return self.cast(least_upper_float(self.dtype))._alu(op)
  def exp2(self) -> Self: return self._float_unary(Ops.EXP2)
  def log2(self) -> Self: return self._float_unary(Ops.LOG2)
  def sqrt(self) -> Self: return self._float_unary(Ops.SQRT)
  def sin(self) -> Self: return self._float_unary(Ops.SIN)
  def reciprocal(self) -> Self: return self._float_unary(Ops.RECIPROCAL)
  def exp(self) -> Self:
    """e**x. float32 splits x = n ln2 + r first (Cody-Waite: n*ln2 in two exact parts) so that the rounding of x*log2(e)
    doesn't cost up to 1e-5 relative for large |x|; exp2 of the integer n is exact."""
    x = self.cast(least_upper_float(self.dtype))
    # narrower floats compute in float32 and round once (x * log2(e) rounded to fp8/half first was off by up to 2 of their steps:
    # exp(2.25) as fp8e4m3 gave 11, not 9)
    if x.dtype.itemsize < 4: return x.cast(dtypes.float32).exp().cast(x.dtype)
    if x.dtype != dtypes.float32: return x.mul(LOG2E).exp2()
    n = (x * LOG2E).trunc()
    n = (n > 127).where(127.0, (n < -150).where(-150.0, n))  # 2**n stays finite; r takes the rest (NaN passes)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    return n.exp2() * (r * LOG2E).exp2()
  def log(self) -> Self: return self.log2().mul(LN2)
  def log10(self) -> Self: return self.log2().mul(math.log10(2))
  def rsqrt(self) -> Self: return self.sqrt().reciprocal()
  def square(self) -> Self: return self * self

  def expm1(self) -> Self:
    """exp(x) - 1, accurate near 0 (a Taylor series for |x| <= 1/2)."""
    x, out = self._work()
    def series(z: Self) -> Self:
      p: Any = 1.0
      for k in range(11, 1, -1): p = z * p * (1 / k) + 1
      return z * p
    return _pick(x.abs() <= 0.5, x, series, lambda z: z.exp() - 1, 0.0, 1.0).cast(out)

  def log1p(self) -> Self:
    """log(1 + x), accurate near 0: log(u) * x / (u - 1) with u = 1 + x rounded (Goldberg's trick)."""
    y, out = self._work()
    u = y + 1
    d = u - 1
    exact = d.eq(0)
    ratio = (exact | u.isinf()).where(1.0, y / exact.where(1.0, d))
    return exact.where(y, u.log() * ratio).cast(out)

  def cos(self) -> Self:
    """cos of r = x - n pi/2 (|r| <= pi/4, Cody-Waite), by n mod 4 one of -sin(r), sin(r), +-(1 - 2 sin(r/2)^2): relative
    accuracy also near the zeros (where tan divides by it), for one sin an element. Where n is too large for the reduction (and
    for NaN and inf) n is 0 and r = x: 1 - 2 sin(x/2)^2, accurate in absolute terms."""
    x, out = self._work()
    if x.dtype.itemsize not in _HALF_PI_PARTS:
      s = (x * 0.5).sin()
      return (1 - 2 * s * s).cast(out)
    bits, parts = _HALF_PI_PARTS[x.dtype.itemsize]
    n = (x * (1 / HALF_PI)).round()
    n = (n.abs() < 2.0 ** bits).where(n, 0.0)  # False for NaN and inf too
    r = x
    for p in parts: r = r - n * p
    q = n - 4 * (n * 0.25).floor()  # n mod 4
    odd = (q == 1) | (q == 3)
    s = odd.where(r, r * 0.5).sin()
    c = 1 - 2 * s * s
    return (q == 0).where(c, (q == 1).where(-s, (q == 2).where(-c, s))).cast(out)
  def tan(self) -> Self: return self.sin() / self.cos()

  def asin(self) -> Self:
    x, out = self._work()
    neg = x < 0
    ax = neg.where(-x, x)
    def small(z: Self) -> Self: return z * _poly(z * z, _ASIN_SERIES)
    # |x| > 1/2: asin(a) = pi/2 - 2 asin(sqrt((1 - a) / 2)), whose argument is below 1/2 again
    r = _pick(ax <= 0.5, ax, small, lambda z: HALF_PI - 2 * small(((1 - z) * 0.5).sqrt()), 0.0, 0.75)
    return neg.where(-r, r).cast(out)

  def acos(self) -> Self:
    x, out = self._work()
    def small(z: Self) -> Self: return z * _poly(z * z, _ASIN_SERIES)
    mid, lo = x.abs() <= 0.5, x < -0.5
    m = HALF_PI - small(mid.where(x, 0.0))
    n = math.pi - 2 * small(((1 + lo.where(x, -0.75)) * 0.5).sqrt())
    p = 2 * small(((1 - (mid | lo).where(0.75, x)) * 0.5).sqrt())  # also takes NaN and |x| > 1 (-> NaN)
    return mid.where(m, lo.where(n, p)).cast(out)

  def atan(self) -> Self:
    x, out = self._work()
    neg = x < 0
    ax = neg.where(-x, x)
    le1 = ax <= 1
    r = le1.where(ax, 1 / le1.where(1.0, ax))  # in [0, 1]: atan(a) = pi/2 - atan(1/a) above 1
    z = r / (1 + (1 + r * r).sqrt())  # atan(r) = 2 atan(z), z <= tan(pi/8)
    c = 2 * z * _poly(z * z, _ATAN_SERIES)
    res = le1.where(c, HALF_PI - c)
    return neg.where(-res, res).cast(out)

  def atan2(self, other: Self | ConstType) -> Self:
    """The angle of the point (x=other, y=self), in [-pi, pi], with the signs of zeros and infinities like C's atan2."""
    y, x = self._broadcasted(other)
    y, out = y._work()
    x = x.cast(y.dtype)
    x0 = x.eq(0)
    r = (y / x0.where(1.0, x)).atan()  # quadrant I/IV; the where keeps the unused branch's gradient finite
    both_inf = y.isinf() & x.isinf()
    r = both_inf.where((x > 0).where(math.pi / 4, 3 * math.pi / 4), r)
    ysign = y._signbit()
    left = x._signbit() & (x0.logical_not() | y.eq(0)) & both_inf.logical_not()  # x < 0 or x == -0.0 (with y == 0)
    r = left.where(r + ysign.where(-math.pi, math.pi), r)
    r = (x0 & y.ne(0) & y.eq(y)).where(ysign.where(-HALF_PI, HALF_PI), r)
    r = both_inf.where(ysign.where(-r, r), r)
    return r.cast(out)

  def sinh(self) -> Self:
    x, out = self._work()
    neg = x < 0
    ax = neg.where(-x, x)
    def near0(z: Self) -> Self:
      e = z.expm1()
      return (e + e / (e + 1)) * 0.5
    def far(z: Self) -> Self:
      h = _half_exp(z)
      return h - 0.25 / h
    r = _pick(ax < 1, ax, near0, far, 0.0, 2.0)
    return neg.where(-r, r).cast(out)

  def cosh(self) -> Self:
    x, out = self._work()
    ax = (x < 0).where(-x, x)
    h = _half_exp(ax)
    return (h + 0.25 / h).cast(out)

  def tanh(self) -> Self:
    x, out = self._work()
    neg = x < 0
    ax = neg.where(-x, x)
    em = (ax * -2).expm1()  # in [-1, 0]
    t = -em / (em + 2)
    return neg.where(-t, t).cast(out)

  def asinh(self) -> Self:
    x, out = self._work()
    neg = x < 0
    ax = neg.where(-x, x)
    def moderate(z: Self) -> Self: return (z + z * z / (1 + (z * z + 1).sqrt())).log1p()
    r = _pick(ax > 4096, ax, lambda z: z.log() + LN2, moderate, 8192.0, 1.0)
    return neg.where(-r, r).cast(out)

  def acosh(self) -> Self:
    x, out = self._work()
    def near1(z: Self) -> Self:
      t = z - 1
      return (t + t.sqrt() * (t + 2).sqrt()).log1p()  # NaN for t < 0
    big, mid = x > 4096, (x >= 2) & (x <= 4096)
    b = (big.where(x, 8192.0)).log() + LN2
    m = mid.where(x, 3.0)
    m = (m + ((m - 1) * (m + 1)).sqrt()).log()
    n = near1((big | mid).where(1.5, x))  # x < 1 and NaN give NaN here
    r = big.where(b, mid.where(m, n)).cast(out)
    if not dtypes.is_float(self.dtype): return r
    # torch's gradient 1/sqrt(x*x - 1), (x - 1)(x + 1) exact near 1 and in float32 for narrower floats: finite also for x < -1,
    # where the value is NaN; +inf at -1 (the product is -0 there)
    def slope(z: Self) -> Self:
      d = (z - 1) * (z + 1) if z.dtype.itemsize >= 4 else (z.cast(dtypes.float32) - 1) * (z.cast(dtypes.float32) + 1)
      return d.eq(0).where(0.0, d).sqrt().reciprocal()
    return _unary_gradient(r, self, slope)

  def atanh(self) -> Self:
    x, out = self._work()
    neg = x < 0
    ax = neg.where(-x, x)
    # near 1, (log(1 + x) - log(1 - x)) / 2 (exact there: 1 - x is): its slope at 1 is inf (torch), where log1p(2x / (1 - x))
    # gives log1p's slope 0 at inf times inf = NaN. Each branch gets inputs that keep the other's slope finite
    small = ax < 0.5
    xs, xl = small.where(ax, 0.0), small.where(0.75, ax)
    r = small.where((2 * xs / (1 - xs)).log1p() * 0.5, ((1 + xl).log() - (1 - xl).log()) * 0.5)
    return neg.where(-r, r).cast(out)

  def erf(self) -> Self:
    x, out = self._work()
    neg = x < 0
    ax = neg.where(-x, x)
    def small(z: Self) -> Self: return z * _poly(z * z, _ERF_SERIES)
    def large(z: Self) -> Self:
      t = 1 / (1 + 0.5 * z)
      return 1 - t * (_poly(t, _ERFC_FIT) - z * z).exp()
    r = _pick(ax <= 1, ax, small, large, 0.0, 2.0)
    return neg.where(-r, r).cast(out)

  def trunc(self) -> Self: return self if not dtypes.is_float(self.dtype) else self._alu(Ops.TRUNC)
  def floor(self) -> Self:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self) -> Self:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self) -> Self:
    """Round half to even."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    frac = (self - t).abs()  # exact
    odd = (t - (t * 0.5).trunc() * 2).ne(0)
    away = (frac > 0.5) | (frac.eq(0.5) & odd)
    return away.where((self < 0).where(t - 1, t + 1), t)

  def isnan(self) -> Self: return self.ne(self)
  def isinf(self, detect_positive: builtins.bool = True, detect_negative: builtins.bool = True) -> Self:
    if not dtypes.is_float(self.dtype): return self.full_like(False, dtype=dtypes.bool)
    pos, neg = self.eq(math.inf), self.eq(-math.inf)
    if detect_positive and detect_negative: return pos | neg
    return pos if detect_positive else neg if detect_negative else self.full_like(False, dtype=dtypes.bool)
  def isfinite(self) -> Self: return (self.isinf() | self.isnan()).logical_not()

  def sign(self) -> Self:
    """-1, 0 or 1, and 0 for NaN (as torch.sign); its gradient is 0."""
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype): return self.ne(0).cast(self.dtype)
    return (self < 0).where(-1, (self > 0).where(1, 0)).cast(self.dtype)
  def abs(self) -> Self:
    """|x|; the gradient at 0 is 0 (like torch)."""
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype): return self
    if not dtypes.is_float(self.dtype): return (self < 0).where(-self, self)
    return (self > 0).where(self, (self < 0).where(-self, self - self))
  def copysign(self, other: Self | ConstType) -> Self:
    """|self| with the sign bit of other (so -0.0 counts as negative). Ints stay ints, as in tinygrad (torch gives floats);
    abs and the negation wrap like C (a uint8 made negative is 256 - x)."""
    a, b = self._broadcasted(other)
    if a.dtype == dtypes.bool: return a  # bool with bool (a bool has no sign) stays bool, as in tinygrad
    if dtypes.is_int(a.dtype):  # (a scalar's sign is read before it is cast: uint8 and -1)
      if (v := _scalar(other)) is not None: return -a.abs() if v < 0 else a.abs()
      return (b < 0).where(-a.abs(), a.abs())
    mag = a.abs()
    return b._always().where(b._signbit().where(-mag, mag), b)  # b's gradient is 0 (and not missing)
  def _always(self) -> Self:
    """True everywhere, but computed from self: where(self._always(), y, self) is y with a zero-gradient path to self (so
    that self gets a 0 gradient instead of "not part of the computation"), and self's buffer stays an input of the kernel."""
    return self.eq(self) | self.ne(self)
  def _signbit(self) -> Self:
    if self.dtype.itemsize not in (2, 4, 8) or not dtypes.is_float(self.dtype): return self < 0
    return self.detach().bitcast({2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[self.dtype.itemsize]) < 0

  def logaddexp(self, other: Self | ConstType) -> Self:
    """log(exp(self) + exp(other)) without overflow; ints and bools compute in float (a scalar -1 next to a uint8 is -1)."""
    a, b = self._float_pair(other)
    m = a.maximum(b)
    m = m.isinf().where(0.0, m).detach()
    return ((a - m).exp() + (b - m).exp()).log() + m

  def pow(self, x: Self | ConstType, reverse: builtins.bool = False) -> Self:
    """self ** x with IEEE/torch semantics: negative bases work with integral exponents (odd ones keep the sign), x ** 0 and
    1 ** x are 1 (NaN too), (-1) ** +-inf is 1; ints stay ints (exactly, wrapping like C) for int exponents, and an int
    base with a float exponent is float (as in torch and tinygrad)."""
    v = _scalar(x)
    if not reverse and v is not None:
      if isinstance(v, float) and not dtypes.is_float(self.dtype): return self.cast(dtypes.default_float).pow(v)
      # a bool base with an int exponent is an int, as bool * 2 (torch and tinygrad)
      if self.dtype == dtypes.bool and not isinstance(v, bool): return self.cast(dtypes.default_int).pow(v)
      if isinstance(v, int) and not isinstance(v, builtins.bool) and v < 0 and dtypes.is_int(self.dtype):
        raise RuntimeError(f"integers to negative integer powers are not allowed ({self.dtype!r} ** {v}): cast the base to a float first")
      e = float(v)
      if math.isfinite(e) and e == int(e) and abs(e) <= 2 ** 31: return _int_pow(self, int(e))
      if e == -0.5: return self.rsqrt()  # torch's rsqrt: (-0) ** -0.5 is -inf
      if math.isfinite(e) and e > 0 and (e - 0.5) == int(e - 0.5) and e <= 2 ** 31:  # k + 1/2: x**k * sqrt(x)
        k = int(e - 0.5)
        r = self.sqrt() if k == 0 else _int_pow(self, k) * self.sqrt()
        # (-inf) ** 2.5 is inf, sqrt(-inf) is NaN; the gradient at 0 is 0, not the 0 * inf of x**k * sqrt(x)
        return r if k == 0 else _pow_gradient(self.eq(-math.inf).where(math.inf, r), self, e)
    base, ex = self._broadcasted(x, reverse)
    if base.dtype == ex.dtype == dtypes.bool: return base | ex.logical_not()  # bool ** bool stays bool (tinygrad)
    if (dtypes.is_int(base.dtype) or base.dtype == dtypes.bool) and dtypes.is_int(ex.dtype): return base._pow_int_tensor(ex)
    return base._pow_float(ex)

  def _pow_int_tensor(self, ex: Self) -> Self:
    """int ** int tensor: square and multiply over every bit of the exponent (wraps like C). Negative exponents give
    1/base truncated: 1 for base 1, +-1 for base -1, else 0."""
    base: Self = self if self.dtype != dtypes.bool else self.cast(ex.dtype)
    one = type(self).full(base.shape, 1, dtype=base.dtype, device=base.device)
    acc, sq, e = one, base, ex.abs() if not dtypes.is_unsigned(ex.dtype) else ex
    for bit in range(ex.dtype.itemsize * 8 - (0 if dtypes.is_unsigned(ex.dtype) else 1)):
      acc = ((e >> bit) & 1).ne(0).where(acc * sq, acc)
      if bit + 1 < ex.dtype.itemsize * 8: sq = sq * sq
    if dtypes.is_unsigned(ex.dtype): return acc
    odd = (ex & 1).ne(0)
    neg_pow = base.eq(1).where(1, base.eq(-1).where(odd.where(-1, 1), 0)).cast(base.dtype)
    return (ex < 0).where(neg_pow, acc)

  def _pow_float(self, ex: Self) -> Self:
    b, e = self.cast(least_upper_float(self.dtype)), ex.cast(least_upper_float(ex.dtype))
    if b.dtype != e.dtype: b, e = b.cast(least_upper_dtype(b.dtype, e.dtype)), e.cast(least_upper_dtype(b.dtype, e.dtype))
    mag = (e * b.abs().log2()).exp2()
    is_int = e.trunc().eq(e)
    odd = is_int & e.isinf().logical_not() & (e - (e * 0.5).trunc() * 2).ne(0)  # +-inf counts as even
    # a negative base needs an integral exponent, except -inf: (-inf) ** y is +-inf or +-0 for every y
    signed = (b < 0).where((is_int | b.isinf()).where(odd.where(-mag, mag), math.nan), mag)
    signed = (b.eq(0) & odd & b._signbit()).where(-mag, signed)  # (-0) ** odd keeps the sign: -0 or -inf
    return _pow_gradient((e.eq(0) | b.eq(1) | (b.eq(-1) & e.isinf())).where(1.0, signed), b, e)

  # ---- activations
  def relu(self) -> Self: return (self <= 0).where(0, self)
  def relu6(self) -> Self: return self.hardtanh(0, 6)
  def leaky_relu(self, neg_slope: builtins.float = 0.01) -> Self: return (self > 0).where(self, self * neg_slope)
  def elu(self, alpha: builtins.float = 1.0) -> Self:
    pos = self > 0
    return pos.where(self, alpha * pos.where(0.0, self).expm1())
  def celu(self, alpha: builtins.float = 1.0) -> Self:
    pos = self > 0
    return pos.where(self, alpha * (pos.where(0.0, self) / alpha).expm1())
  def selu(self, alpha: builtins.float = 1.67326, gamma: builtins.float = 1.0507) -> Self: return gamma * self.elu(alpha)
  def sigmoid(self) -> Self:
    """1 / (1 + exp(-x)) through exp(-|x|) <= 1: no overflow, and a finite gradient everywhere."""
    x, out = self._work()
    neg = x < 0
    e = neg.where(x, -x).exp()
    r = 1 / (1 + e)
    return neg.where(e * r, r).cast(out)
  def hardsigmoid(self, alpha: builtins.float = 1 / 6, beta: builtins.float = 0.5) -> Self: return (alpha * self + beta).hardtanh(0, 1)
  def hardtanh(self, min_val: builtins.float = -1, max_val: builtins.float = 1) -> Self:
    """Clamp to [min_val, max_val]; the gradient is 1 strictly inside, 0 at and beyond the edges."""
    return (self <= min_val).where(min_val, (self >= max_val).where(max_val, self))
  def hardswish(self) -> Self:
    x = self._floating()  # ints compute in float: x + 3 would wrap at the top of an int8
    return x * (x + 3).relu6() * (1 / 6)
  def softplus(self, beta: builtins.float = 1.0) -> Self:
    """log(1 + exp(beta x)) / beta, computed as max(y, 0) + log1p(exp(-|y|)): exact for large |x|."""
    x, out = self._work()
    y = x * beta
    r = _pick(y > 0, y, lambda z: z + (-z).exp().log1p(), lambda z: z.exp().log1p(), 0.0, 0.0)
    return (r * (1 / beta)).cast(out)
  def logsigmoid(self) -> Self: return -(-self._floating()).softplus()  # (-x of a uint8 or bool isn't -x)
  def softsign(self) -> Self:
    x = self._floating()  # |int8 -128| wraps
    return x / (1 + x.abs())
  def mish(self) -> Self: return self * self.softplus().tanh()
  def gelu(self, approximate: str = "tanh") -> Self:
    """GELU; approximate="tanh" (tinygrad's default) is written as x * sigmoid(2u) (= x/2 (1 + tanh u)) so that it is accurate
    for negative x too, approximate="none" is torch's default x/2 (1 + erf(x/sqrt 2))."""
    if approximate == "none": return 0.5 * self * (1 + (self * (1 / math.sqrt(2))).erf())
    if approximate != "tanh": raise ValueError(f"gelu approximate must be 'tanh' or 'none', got {approximate!r}")
    return self * (math.sqrt(8 / math.pi) * (self + 0.044715 * self * self * self)).sigmoid()
  def quick_gelu(self) -> Self: return self * (self * 1.702).sigmoid()
  def silu(self) -> Self: return self * self.sigmoid()
  def swish(self) -> Self: return self.silu()

  # ---- python operators
  def __add__(self, x: Self | ConstType) -> Self: return self.add(x)
  def __radd__(self, x: ConstType) -> Self: return self.add(x, True)
  def __sub__(self, x: Self | ConstType) -> Self: return self.sub(x)
  def __rsub__(self, x: ConstType) -> Self: return self.sub(x, True)
  def __mul__(self, x: Self | ConstType) -> Self: return self.mul(x)
  def __rmul__(self, x: ConstType) -> Self: return self.mul(x, True)
  def __truediv__(self, x: Self | ConstType) -> Self: return self.div(x)
  def __rtruediv__(self, x: ConstType) -> Self: return self.div(x, True)
  def __floordiv__(self, x: Self | ConstType) -> Self: return self.div(x, rounding_mode="floor")  # python's //, also for negatives
  def __rfloordiv__(self, x: ConstType) -> Self: return self.div(x, True, rounding_mode="floor")
  def __mod__(self, x: Self | ConstType) -> Self: return self.mod(x)
  def __rmod__(self, x: ConstType) -> Self: return self.mod(x, True)
  def __pow__(self, x: Self | ConstType) -> Self: return self.pow(x)
  def __rpow__(self, x: ConstType) -> Self: return self.pow(x, True)
  def __matmul__(self, x: Self) -> Self: return self.matmul(x)
  def __rmatmul__(self, x: Self) -> Self: return x.matmul(self)
  def __and__(self, x: Self | ConstType) -> Self: return self.bitwise_and(x)
  def __rand__(self, x: ConstType) -> Self: return self.bitwise_and(x, True)
  def __or__(self, x: Self | ConstType) -> Self: return self.bitwise_or(x)
  def __ror__(self, x: ConstType) -> Self: return self.bitwise_or(x, True)
  def __xor__(self, x: Self | ConstType) -> Self: return self.bitwise_xor(x)
  def __rxor__(self, x: ConstType) -> Self: return self.bitwise_xor(x, True)
  def __invert__(self) -> Self: return self.bitwise_not()
  def __lshift__(self, x: Self | builtins.int) -> Self: return self.lshift(x)
  def __rlshift__(self, x: builtins.int) -> Self: return self.lshift(x, True)
  def __rshift__(self, x: Self | builtins.int) -> Self: return self.rshift(x)
  def __rrshift__(self, x: builtins.int) -> Self: return self.rshift(x, True)
  def __abs__(self) -> Self: return self.abs()
  def __iadd__(self, x: Self | ConstType) -> Self: return self.assign(self + x)
  def __isub__(self, x: Self | ConstType) -> Self: return self.assign(self - x)
  def __imul__(self, x: Self | ConstType) -> Self: return self.assign(self * x)
  def __itruediv__(self, x: Self | ConstType) -> Self: return self.assign(self / x)
  def __ifloordiv__(self, x: Self | ConstType) -> Self: return self.assign(self // x)
  def __imod__(self, x: Self | ConstType) -> Self: return self.assign(self % x)
  def __ipow__(self, x: Self | ConstType) -> Self: return self.assign(self ** x)
  def __iand__(self, x: Self | ConstType) -> Self: return self.assign(self & x)
  def __ior__(self, x: Self | ConstType) -> Self: return self.assign(self | x)
  def __ixor__(self, x: Self | ConstType) -> Self: return self.assign(self ^ x)
  def __ilshift__(self, x: Self | builtins.int) -> Self: return self.assign(self << x)
  def __irshift__(self, x: Self | builtins.int) -> Self: return self.assign(self >> x)
  def __imatmul__(self, x: Self) -> Self: return self.assign(self @ x)
