"""Elementwise ops: arithmetic, comparisons, math functions, activations, python operators, broadcasting."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tinygrad.dtype import ConstType, DType, dtypes, least_upper_dtype, least_upper_float, to_dtype
from tinygrad.uop.ops import GroupOp, Ops, UOp

if TYPE_CHECKING:
  from tinygrad.tensor import Tensor


def _broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  ndim = max(len(s) for s in shapes)
  padded = [(1,) * (ndim - len(s)) + s for s in shapes]
  out = []
  for dims in zip(*padded):
    sizes = {d for d in dims if d != 1}
    if len(sizes) > 1:
      raise ValueError(f"shapes {' and '.join(str(s) for s in shapes)} can't be broadcast together: "
                       f"sizes {sorted(sizes)} meet at one axis (each axis must match or be 1)")
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)


class ElementwiseMixin:
  __slots__ = ()

  # ---- elementwise
  def _broadcasted(self, other: Tensor | ConstType, reverse: bool = False) -> tuple[Tensor, Tensor]:
    x: Tensor = self
    if isinstance(other, type(self)):
      y = other
      if y.device != x.device: raise ValueError(f"tensors are on different devices: {x.device} and {y.device}; move one with .to()")
      if x.dtype != y.dtype:
        dt = least_upper_dtype(x.dtype, y.dtype)
        x, y = x.cast(dt), y.cast(dt)
    else:
      if isinstance(other, UOp):  # a symbolic int (bound Variable)
        y = type(self)(other, device=x.device, dtype=x.dtype if dtypes.is_int(x.dtype) or dtypes.is_float(x.dtype) else None)
        x = x.cast(y.dtype)
        if reverse: x, y = y, x
        shape = _broadcast_shape(x.shape, y.shape)
        return x.expand(shape), y.expand(shape)
      if not isinstance(other, (int, float, bool)): raise TypeError(f"can't combine a Tensor with {type(other).__name__}")
      dt = x.dtype
      if isinstance(other, float) and not dtypes.is_float(dt): dt = dtypes.default_float
      elif isinstance(other, int) and not isinstance(other, bool) and dt == dtypes.bool: dt = dtypes.default_int
      x = x.cast(dt)
      y = type(self)(other, device=x.device, dtype=dt)
    if reverse: x, y = y, x
    shape = _broadcast_shape(x.shape, y.shape)
    return x.expand(shape), y.expand(shape)

  def _alu(self, op: Ops, *srcs: Tensor) -> Tensor:
    out_dtype = dtypes.bool if op in GroupOp.Comparison else srcs[0].dtype if op is Ops.WHERE else self.dtype
    rgs = [t.requires_grad for t in (self, *srcs)]
    rg = True if any(rgs) else None if None in rgs else False
    return type(self)(UOp(op, out_dtype, (self.uop, *(s.uop for s in srcs))), requires_grad=rg)

  def _binary(self, op: Ops, other: Tensor | ConstType, reverse: bool = False) -> Tensor:
    x, y = self._broadcasted(other, reverse)
    return x._alu(op, y)

  def add(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor: return self._binary(Ops.ADD, x, reverse)
  def sub(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._alu(Ops.ADD, -b) if a.dtype != dtypes.bool else a._alu(Ops.XOR, b)
  def mul(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor: return self._binary(Ops.MUL, x, reverse)
  def div(self, x: Tensor | ConstType, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if rounding_mode is not None:
      if rounding_mode not in ("trunc", "floor"): raise ValueError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
      if dtypes.is_int(a.dtype):
        q = a._alu(Ops.IDIV, b)
        if rounding_mode == "trunc": return q
        return (q * b).ne(a).logical_and((a < 0).ne(b < 0)).where(q - 1, q)
      q = a.cast(least_upper_float(a.dtype)) / b.cast(least_upper_float(b.dtype))
      return q.trunc() if rounding_mode == "trunc" else q.floor()
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    return a._alu(Ops.FDIV, b)
  def idiv(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor: return self._binary(Ops.IDIV, x, reverse)
  def maximum(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.MAX, x)
  def minimum(self, x: Tensor | ConstType) -> Tensor:
    a, b = self._broadcasted(x)
    return -((-a).maximum(-b)) if a.dtype != dtypes.bool else a.logical_and(b)
  def where(self, x: Tensor | ConstType, y: Tensor | ConstType) -> Tensor:
    cond = self if self.dtype == dtypes.bool else self.ne(0)
    if isinstance(x, type(self)): a, b = x._broadcasted(y)
    elif isinstance(y, type(self)): b, a = y._broadcasted(x)
    else:
      dt = dtypes.from_py([x, y])
      a, b = type(self)(x, device=self.device, dtype=dt), type(self)(y, device=self.device, dtype=dt)
    shape = _broadcast_shape(cond.shape, a.shape, b.shape)
    return cond.expand(shape)._alu(Ops.WHERE, a.expand(shape), b.expand(shape))
  def __neg__(self) -> Tensor: return self.logical_not() if self.dtype == dtypes.bool else self._alu(Ops.NEG)
  def neg(self) -> Tensor: return -self
  def logical_not(self) -> Tensor: return self.ne(True)
  def logical_and(self, x: Tensor | ConstType) -> Tensor: return self.cast(dtypes.bool)._binary(Ops.AND, x if isinstance(x, type(self)) else bool(x))
  def logical_or(self, x: Tensor | ConstType) -> Tensor: return self.cast(dtypes.bool)._binary(Ops.OR, x if isinstance(x, type(self)) else bool(x))
  def bitwise_and(self, x: Tensor | int) -> Tensor: return self._binary(Ops.AND, x)
  def bitwise_or(self, x: Tensor | int) -> Tensor: return self._binary(Ops.OR, x)
  def bitwise_xor(self, x: Tensor | int) -> Tensor: return self._binary(Ops.XOR, x)
  def lshift(self, x: int) -> Tensor: return self._binary(Ops.SHL, x)
  def rshift(self, x: int) -> Tensor: return self._binary(Ops.SHR, x)

  def cast(self, dtype: DType | str) -> Tensor:
    dt = to_dtype(dtype)
    return self if dt == self.dtype else type(self)(UOp(Ops.CAST, dt, (self.uop,)), requires_grad=self.requires_grad)
  def bitcast(self, dtype: DType | str) -> Tensor:
    dt = to_dtype(dtype)
    if dt.itemsize != self.dtype.itemsize: raise ValueError(f"bitcast needs dtypes of one size: {self.dtype!r} is {self.dtype.itemsize} bytes, {dt!r} is {dt.itemsize}")
    return self if dt == self.dtype else type(self)(UOp(Ops.BITCAST, dt, (self.uop,)))
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)

  def _float_unary(self, op: Ops) -> Tensor: return self.cast(least_upper_float(self.dtype))._alu(op)
  def exp2(self) -> Tensor: return self._float_unary(Ops.EXP2)
  def log2(self) -> Tensor: return self._float_unary(Ops.LOG2)
  def sqrt(self) -> Tensor: return self._float_unary(Ops.SQRT)
  def sin(self) -> Tensor: return self._float_unary(Ops.SIN)
  def reciprocal(self) -> Tensor: return self._float_unary(Ops.RECIPROCAL)
  def trunc(self) -> Tensor: return self if not dtypes.is_float(self.dtype) else self._alu(Ops.TRUNC)
  def exp(self) -> Tensor: return self.mul(1 / math.log(2)).exp2()
  def log(self) -> Tensor: return self.log2().mul(math.log(2))
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def cos(self) -> Tensor: return ((math.pi / 2) - self.cast(least_upper_float(self.dtype))).sin()
  def tan(self) -> Tensor: return self.sin() / self.cos()
  def floor(self) -> Tensor:
    t = self.trunc()
    return (self < t).where(t - 1, t) if dtypes.is_float(self.dtype) else self
  def ceil(self) -> Tensor:
    t = self.trunc()
    return (self > t).where(t + 1, t) if dtypes.is_float(self.dtype) else self
  def abs(self) -> Tensor: return self * self.sign()
  def sign(self) -> Tensor: return self.ne(0).where((self < 0).where(self.full_like(-1), self.full_like(1)), self.full_like(0))
  def square(self) -> Tensor: return self * self
  def pow(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor:
    if not reverse and isinstance(x, (int, float)) and not isinstance(x, bool):
      if x == 0: return self.ones_like()
      if x == 1: return self
      if x == 2: return self * self
      if x == 0.5: return self.sqrt()
      if x == -1: return self.reciprocal()
      if isinstance(x, int) and 0 < x <= 8 and not dtypes.is_float(self.dtype): return math.prod([self] * x)  # type: ignore[return-value]
    base, ex = self._broadcasted(x, reverse)
    base, ex = base.cast(least_upper_float(base.dtype)), ex.cast(least_upper_float(ex.dtype))
    # |b|^e with the sign fixed for negative bases with integral exponents; NaN for non-integral ones
    mag = base.abs().log2().mul(ex).exp2()
    is_int_ex = ex.trunc().eq(ex)
    odd = (ex.abs() - (ex.abs() / 2).trunc() * 2).eq(1)
    signed = (base < 0).where(is_int_ex.where(odd.where(-mag, mag), float("nan")), mag)
    return base.eq(0).logical_and(ex.eq(0)).where(1.0, signed)

  # activations used by the MLP path; the full set comes with the Tensor API
  def relu(self) -> Tensor: return self.maximum(0)
  def sigmoid(self) -> Tensor: return (1 + (self * (-1 / math.log(2))).exp2()).reciprocal()
  def tanh(self) -> Tensor: return 2.0 * ((2.0 * self).sigmoid()) - 1.0
  def leaky_relu(self, neg_slope: float = 0.01) -> Tensor: return (self < 0).where(self * neg_slope, self)
  def gelu(self) -> Tensor: return 0.5 * self * (1 + (math.sqrt(2 / math.pi) * (self + 0.044715 * self * self * self)).tanh())
  def silu(self) -> Tensor: return self * self.sigmoid()
  def swish(self) -> Tensor: return self.silu()

  # comparisons
  def __lt__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.CMPLT, x)
  def __gt__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.CMPLT, x, reverse=True)
  def __ge__(self, x: Tensor | ConstType) -> Tensor: return (self < x).logical_not()
  def __le__(self, x: Tensor | ConstType) -> Tensor: return (self > x).logical_not()
  def eq(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.CMPEQ, x)
  def ne(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.CMPNE, x)
  def __eq__(self, x: object) -> Tensor: return self.eq(x)  # type: ignore[override, arg-type]
  def __ne__(self, x: object) -> Tensor: return self.ne(x)  # type: ignore[override, arg-type]

  # python operators
  def __add__(self, x: Tensor | ConstType) -> Tensor: return self.add(x)
  def __radd__(self, x: ConstType) -> Tensor: return self.add(x, True)
  def __sub__(self, x: Tensor | ConstType) -> Tensor: return self.sub(x)
  def __rsub__(self, x: ConstType) -> Tensor: return self.sub(x, True)
  def __mul__(self, x: Tensor | ConstType) -> Tensor: return self.mul(x)
  def __rmul__(self, x: ConstType) -> Tensor: return self.mul(x, True)
  def __truediv__(self, x: Tensor | ConstType) -> Tensor: return self.div(x)
  def __rtruediv__(self, x: ConstType) -> Tensor: return self.div(x, True)
  def __floordiv__(self, x: Tensor | ConstType) -> Tensor: return self.div(x, rounding_mode="floor")
  def __rfloordiv__(self, x: ConstType) -> Tensor: return self.div(x, True, rounding_mode="floor")
  def __pow__(self, x: Tensor | ConstType) -> Tensor: return self.pow(x)
  def __rpow__(self, x: ConstType) -> Tensor: return self.pow(x, True)
  def __matmul__(self, x: Tensor) -> Tensor: return self.matmul(x)
  def __rmatmul__(self, x: Tensor) -> Tensor: return x.matmul(self)
  def __and__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.AND, x)
  def __or__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.OR, x)
  def __xor__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.XOR, x)
  def __invert__(self) -> Tensor: return self.logical_not() if self.dtype == dtypes.bool else self ^ -1
  def __lshift__(self, x: int) -> Tensor: return self.lshift(x)
  def __rshift__(self, x: int) -> Tensor: return self.rshift(x)
  def __iadd__(self, x: Tensor | ConstType) -> Tensor: return self.assign(self + x)
  def __isub__(self, x: Tensor | ConstType) -> Tensor: return self.assign(self - x)
  def __imul__(self, x: Tensor | ConstType) -> Tensor: return self.assign(self * x)
  def __itruediv__(self, x: Tensor | ConstType) -> Tensor: return self.assign(self / x)
