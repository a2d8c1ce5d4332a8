"""A catalog of small tensor programs, each with a numpy reference.

`Program.build(*inputs)` builds a (lazy) Tensor from numpy inputs with the Tensor API; `Program.reference(*inputs)`
computes the expected values with numpy. `Program.dtype` is the tinygrad dtype the result must have when it differs
from what numpy gives (numpy sums int32 to int64, tinygrad keeps int32; numpy divides ints to float64, tinygrad to
float32; ...). Shapes stay small: the PYTHON device interprets every op.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.dtype import DType

NP_TO_DTYPE: dict[np.dtype, DType] = {
  np.dtype(np.bool_): dtypes.bool, np.dtype(np.int8): dtypes.int8, np.dtype(np.uint8): dtypes.uint8, np.dtype(np.int16): dtypes.int16,
  np.dtype(np.uint16): dtypes.uint16, np.dtype(np.int32): dtypes.int32, np.dtype(np.uint32): dtypes.uint32,
  np.dtype(np.int64): dtypes.int64, np.dtype(np.uint64): dtypes.uint64, np.dtype(np.float16): dtypes.float16,
  np.dtype(np.float32): dtypes.float32, np.dtype(np.float64): dtypes.float64}
DTYPE_TO_NP: dict[DType, np.dtype] = {v: k for k, v in NP_TO_DTYPE.items()}

EXACT, FLOAT, TRANSCENDENTAL = 0.0, 1e-5, 1e-4


@dataclass(frozen=True)
class Inp:
  """One input: a shape and a numpy dtype name, with values drawn uniformly from [low, high) (ints: integers in it)."""
  shape: tuple[int, ...]
  dtype: str = "float32"
  low: float = -3.0
  high: float = 3.0

  def make(self, rng: np.random.Generator) -> np.ndarray:
    dt = np.dtype(self.dtype)
    if dt == np.bool_: return rng.random(self.shape) < 0.5
    if dt.kind in "iu": return rng.integers(int(self.low), int(self.high), size=self.shape).astype(dt)
    return rng.uniform(self.low, self.high, size=self.shape).astype(dt)


@dataclass(frozen=True)
class Program:
  name: str
  build: Callable[..., Tensor]
  reference: Callable[..., np.ndarray]
  inputs: tuple[Inp, ...] = ()
  dtype: DType | None = None  # the tinygrad dtype of the result; None: the one matching the reference's numpy dtype
  tol: float | None = None    # rtol and atol; None: exact for ints/bools, FLOAT for floats
  tags: frozenset[str] = field(default_factory=frozenset)

  def make_inputs(self) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(self.name.encode()))
    return [i.make(rng) for i in self.inputs]

  def expected(self, *inputs: np.ndarray) -> tuple[np.ndarray, DType]:
    ref = np.asarray(self.reference(*inputs))
    dt = self.dtype if self.dtype is not None else NP_TO_DTYPE[ref.dtype]
    return ref, dt

  def tolerance(self, dt: DType) -> float:
    if self.tol is not None: return self.tol
    return FLOAT if dtypes.is_float(dt) else EXACT


# ---- common input specs
def F(*shape: int, low: float = -3.0, high: float = 3.0) -> Inp: return Inp(shape, "float32", low, high)
def POS(*shape: int) -> Inp: return Inp(shape, "float32", 0.1, 4.0)
def I(*shape: int, dtype: str = "int32", low: int = -10, high: int = 10) -> Inp: return Inp(shape, dtype, low, high)
def B(*shape: int) -> Inp: return Inp(shape, "bool")


def _np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)


def _np_log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
  m = x - x.max(axis, keepdims=True)
  return m - np.log(np.exp(m).sum(axis, keepdims=True))


def _np_sigmoid(x: np.ndarray) -> np.ndarray: return 1 / (1 + np.exp(-x))


def _np_gelu(x: np.ndarray) -> np.ndarray: return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _f32(x: np.ndarray) -> np.ndarray: return np.asarray(x, dtype=np.float32)


P = Program
PROGRAMS: list[Program] = [
  # ---- elementwise: arithmetic
  P("add", lambda a, b: Tensor(a) + Tensor(b), lambda a, b: a + b, (F(4, 5), F(4, 5))),
  P("sub", lambda a, b: Tensor(a) - Tensor(b), lambda a, b: a - b, (F(4, 5), F(4, 5))),
  P("mul", lambda a, b: Tensor(a) * Tensor(b), lambda a, b: a * b, (F(4, 5), F(4, 5))),
  P("div", lambda a, b: Tensor(a) / Tensor(b), lambda a, b: a / b, (F(4, 5), POS(4, 5))),
  P("neg", lambda a: -Tensor(a), lambda a: -a, (F(3, 7),)),
  P("broadcast_add", lambda a, b: Tensor(a) + Tensor(b), lambda a, b: a + b, (F(3, 1, 5), F(4, 1))),
  P("scalar_broadcast_float", lambda a: (2.5 - Tensor(a)) * 3 + 1.5 / (Tensor(a) * Tensor(a) + 1), lambda a: (2.5 - a) * 3 + 1.5 / (a * a + 1),
    (F(12,),)),
  P("scalar_broadcast_int", lambda a: Tensor(a) * 3 - 7, lambda a: a * 3 - 7, (I(10,),)),
  P("int_plus_float_scalar", lambda a: Tensor(a) + 0.5, lambda a: _f32(a + 0.5), (I(10,),), dtype=dtypes.float32),
  P("bool_plus_int_scalar", lambda a: Tensor(a) + 1, lambda a: a.astype(np.int32) + 1, (B(9,),), dtype=dtypes.int32),
  P("int_true_div", lambda a, b: Tensor(a) / Tensor(b), lambda a, b: _f32(a / b), (I(10,), I(10, low=1, high=6)), dtype=dtypes.float32),
  P("int_floor_div", lambda a, b: Tensor(a) // Tensor(b), lambda a, b: a // b, (I(12, low=-20, high=20), I(12, low=1, high=6))),
  P("int_floor_div_neg", lambda a, b: Tensor(a) // -Tensor(b), lambda a, b: a // -b, (I(12, low=-20, high=20), I(12, low=1, high=6))),
  P("int8_wraps", lambda a, b: Tensor(a) + Tensor(b), lambda a, b: a + b, (I(16, dtype="int8", low=-100, high=100),) * 2),
  P("uint8_wraps", lambda a, b: Tensor(a) * Tensor(b), lambda a, b: a * b, (I(16, dtype="uint8", low=0, high=40),) * 2),
  P("int64_big", lambda a: Tensor(a) * 3 + (1 << 40), lambda a: a * 3 + (1 << 40), (Inp((8,), "int64", -(1 << 33), 1 << 33),)),
  P("mixed_int_float", lambda a, b: Tensor(a) * Tensor(b), lambda a, b: a * b, (I(6,), F(6,)), dtype=dtypes.float32),
  P("int8_int32_promote", lambda a, b: Tensor(a) + Tensor(b), lambda a, b: a.astype(np.int32) + b, (I(6, dtype="int8"), I(6))),
  P("maximum_minimum", lambda a, b: Tensor(a).maximum(Tensor(b)) - Tensor(a).minimum(Tensor(b)), lambda a, b: np.maximum(a, b) - np.minimum(a, b),
    (F(20,), F(20,))),
  P("maximum_int_scalar", lambda a: Tensor(a).maximum(2).minimum(7), lambda a: np.minimum(np.maximum(a, 2), 7), (I(15,),)),
  P("abs_sign", lambda a: Tensor(a).abs() + Tensor(a).sign() * 10, lambda a: np.abs(a) + np.sign(a) * 10, (I(12,),)),
  P("pow", lambda a, b: Tensor(a) ** Tensor(b) + Tensor(a) ** 3, lambda a, b: a ** b + a ** 3, (POS(10,), F(10, low=-2, high=2)),
    tol=TRANSCENDENTAL),
  P("floor_ceil_trunc", lambda a: Tensor(a).floor() * 100 + Tensor(a).ceil() * 10 + Tensor(a).trunc(),
    lambda a: np.floor(a) * 100 + np.ceil(a) * 10 + np.trunc(a), (F(20, low=-5, high=5),)),
  # ---- elementwise: transcendental
  P("exp2", lambda a: Tensor(a).exp2(), lambda a: np.exp2(a), (F(20, low=-10, high=10),), tol=TRANSCENDENTAL),
  P("log2", lambda a: Tensor(a).log2(), lambda a: np.log2(a), (Inp((20,), "float32", 1e-3, 1e3),), tol=TRANSCENDENTAL),
  P("exp", lambda a: Tensor(a).exp(), lambda a: np.exp(a), (F(20, low=-8, high=8),), tol=TRANSCENDENTAL),
  P("log", lambda a: Tensor(a).log(), lambda a: np.log(a), (POS(20,),), tol=TRANSCENDENTAL),
  P("sqrt", lambda a: Tensor(a).sqrt(), lambda a: np.sqrt(a), (POS(20,),)),
  P("rsqrt", lambda a: Tensor(a).rsqrt(), lambda a: 1 / np.sqrt(a), (POS(20,),)),
  P("sin", lambda a: Tensor(a).sin(), lambda a: np.sin(a), (F(30, low=-10, high=10),), tol=TRANSCENDENTAL),
  P("cos", lambda a: Tensor(a).cos(), lambda a: np.cos(a), (F(30, low=-10, high=10),), tol=TRANSCENDENTAL),
  P("reciprocal", lambda a: Tensor(a).reciprocal(), lambda a: 1 / a, (POS(20,),)),
  P("exp_of_int", lambda a: Tensor(a).exp(), lambda a: _f32(np.exp(a)), (I(10, low=-5, high=5),), dtype=dtypes.float32, tol=TRANSCENDENTAL),
  P("sqrt_of_int", lambda a: Tensor(a).sqrt(), lambda a: _f32(np.sqrt(a)), (I(10, low=0, high=50),), dtype=dtypes.float32),
  P("special_values", lambda: Tensor([-200.0, 200.0, -np.inf, np.nan]).exp2() + Tensor([0.0, np.inf, 1.0, 1.0]).log2() +
    Tensor([4.0, np.inf, 0.0, -1.0]).sqrt(), lambda: np.array([-np.inf, np.inf, 0.0, np.nan], np.float32)),
  P("div_by_zero", lambda: Tensor([1.0, -1.0, 0.0]) / 0.0, lambda: np.array([np.inf, -np.inf, np.nan], np.float32)),
  P("saturating_activations", lambda: Tensor([-100.0, 100.0]).sigmoid() + Tensor([-100.0, 100.0]).tanh(), lambda: np.array([-1.0, 2.0], np.float32)),
  # ---- comparisons, where, bools
  P("less_than", lambda a, b: Tensor(a) < Tensor(b), lambda a, b: a < b, (F(20,), F(20,))),
  P("cmp_all_int", lambda a, b: ((Tensor(a) < Tensor(b)).int() + (Tensor(a) <= Tensor(b)).int() * 2 + (Tensor(a) > Tensor(b)).int() * 4 +
                                 (Tensor(a) >= Tensor(b)).int() * 8 + (Tensor(a) == Tensor(b)).int() * 16 + (Tensor(a) != Tensor(b)).int() * 32),
    lambda a, b: ((a < b) * 1 + (a <= b) * 2 + (a > b) * 4 + (a >= b) * 8 + (a == b) * 16 + (a != b) * 32).astype(np.int32),
    (I(20, low=0, high=4),) * 2),
  P("cmp_float_scalar", lambda a: (Tensor(a) > 0.5).logical_and(Tensor(a) <= 2.0), lambda a: (a > 0.5) & (a <= 2.0), (F(20,),)),
  P("where", lambda c, a, b: Tensor(c).where(Tensor(a), Tensor(b)), lambda c, a, b: np.where(c, a, b), (B(4, 5), F(4, 5), F(1, 5))),
  P("where_scalars", lambda a: (Tensor(a) > 0).where(1.5, -2.0), lambda a: np.where(a > 0, 1.5, -2.0).astype(np.float32), (F(12,),)),
  P("where_int_cond", lambda c, a: (Tensor(c) != 0).where(Tensor(a), 0), lambda c, a: np.where(c != 0, a, 0).astype(np.int32), (I(12, low=-1, high=2), I(12))),
  P("bool_logic", lambda a, b: (Tensor(a) & Tensor(b)) | (~Tensor(a) ^ Tensor(b)), lambda a, b: (a & b) | (~a ^ b), (B(16,), B(16,))),
  P("bool_not_neg", lambda a: Tensor(a).logical_not(), lambda a: ~a, (B(10,),)),
  P("int_bitwise", lambda a, b: (Tensor(a) & Tensor(b)) + (Tensor(a) | Tensor(b)) * 3 + (Tensor(a) ^ Tensor(b)) * 7 + (Tensor(a) << 2),
    lambda a, b: (a & b) + (a | b) * 3 + (a ^ b) * 7 + (a << 2), (I(16, low=0, high=64), I(16, low=0, high=64))),
  # ---- casts and bitcasts
  P("cast_float_to_int", lambda a: Tensor(a).cast(dtypes.int32), lambda a: a.astype(np.int32), (F(20, low=-9, high=9),)),
  P("cast_int_to_float", lambda a: Tensor(a).float() * 0.5, lambda a: a.astype(np.float32) * 0.5, (I(20),)),
  P("cast_float_to_bool", lambda a: Tensor(a).cast("bool"), lambda a: a.astype(np.bool_), (Inp((20,), "float32", -1, 2),)),
  P("cast_via_round", lambda a: (Tensor(a) * 2).cast(dtypes.int32).cast(dtypes.bool), lambda a: (a * 2).astype(np.int32).astype(np.bool_),
    (F(20, low=-1, high=1),)),
  P("cast_bool_to_float", lambda a: Tensor(a).float() + Tensor(a).int(), lambda a: a.astype(np.float32) + a.astype(np.int32),
    (B(10,),), dtype=dtypes.float32),
  P("cast_int32_to_int8", lambda a: Tensor(a).cast(dtypes.int8), lambda a: a.astype(np.int8), (I(16, low=-1000, high=1000),)),
  P("cast_to_half_and_back", lambda a: Tensor(a).half().float(), lambda a: a.astype(np.float16).astype(np.float32), (F(20, low=-100, high=100),)),
  P("half_math", lambda a, b: Tensor(a).half() * Tensor(b).half() + 1, lambda a, b: a.astype(np.float16) * b.astype(np.float16) + np.float16(1),
    (F(12,), F(12,)), tol=1e-3),
  P("cast_to_double", lambda a: Tensor(a).cast(dtypes.float64) * 3, lambda a: a.astype(np.float64) * 3, (F(10,),)),
  P("bitcast_float_bits", lambda a: (Tensor(a).bitcast(dtypes.uint32) >> 23) & 0xFF, lambda a: (a.view(np.uint32) >> 23) & 0xFF, (F(16, low=-100, high=100),)),
  P("bitcast_flip_sign", lambda a: (Tensor(a).bitcast("uint32") ^ 0x80000000).bitcast("float32"), lambda a: -a, (F(16,),)),
  P("bitcast_int_float", lambda a: Tensor(a).bitcast(dtypes.float32), lambda a: a.view(np.float32), (Inp((8,), "int32", 0x3F000000, 0x40000000),)),
  # ---- views
  P("reshape", lambda a: Tensor(a).reshape(2, 3, 4) + 1, lambda a: a.reshape(2, 3, 4) + 1, (F(4, 6),)),
  P("reshape_infer", lambda a: Tensor(a).reshape(-1, 8).contiguous(), lambda a: a.reshape(-1, 8), (F(4, 6),)),
  P("permute", lambda a: Tensor(a).permute(2, 0, 1) * 2, lambda a: a.transpose(2, 0, 1) * 2, (F(2, 3, 4),)),
  P("transpose_T", lambda a: Tensor(a).transpose(0, 2).contiguous() - Tensor(a).T, lambda a: a.swapaxes(0, 2) - a.T, (F(3, 2, 3),)),
  P("expand", lambda a: Tensor(a).expand(2, 3, 4) + 0, lambda a: np.broadcast_to(a, (2, 3, 4)) + 0, (F(3, 1),)),
  P("pad", lambda a: Tensor(a).pad(((1, 2), (0, 1))) + 1, lambda a: np.pad(a, ((1, 2), (0, 1))) + 1, (F(3, 4),)),
  P("pad_value", lambda a: Tensor(a).pad(((2, 0), (1, 1)), value=-1.5), lambda a: np.pad(a, ((2, 0), (1, 1)), constant_values=-1.5), (F(3, 4),)),
  P("pad_negative", lambda a: Tensor(a).pad(((-1, 2), (1, -2))), lambda a: np.pad(a[1:, :-2], ((0, 2), (1, 0))), (F(4, 5),)),
  P("pad_flat_torch_style", lambda a: Tensor(a).pad((1, 2)), lambda a: np.pad(a, ((0, 0), (1, 2))), (F(2, 3),)),
  P("pad_int", lambda a: Tensor(a).pad(((1, 1),), value=7), lambda a: np.pad(a, 1, constant_values=7), (I(5,),)),
  P("shrink", lambda a: Tensor(a).shrink(((1, 3), (0, 2))) * 1, lambda a: a[1:3, 0:2] * 1, (F(4, 5),)),
  P("flip", lambda a: Tensor(a).flip(0) + Tensor(a).flip((0, 1)), lambda a: a[::-1] + a[::-1, ::-1], (F(3, 4),)),
  P("getitem_int", lambda a: Tensor(a)[1] + Tensor(a)[-1], lambda a: a[1] + a[-1], (F(3, 4),)),
  P("getitem_slices", lambda a: Tensor(a)[1:3, ::2].contiguous(), lambda a: a[1:3, ::2], (F(4, 7),)),
  P("getitem_negative_step", lambda a: Tensor(a)[::-1, ::-2].contiguous(), lambda a: a[::-1, ::-2], (F(4, 7),)),
  P("getitem_step3_neg_bounds", lambda a: Tensor(a)[-2:0:-1, 1:-1:3].contiguous(), lambda a: a[-2:0:-1, 1:-1:3], (F(5, 8),)),
  P("getitem_none_ellipsis", lambda a: Tensor(a)[None, 1, ..., None].contiguous(), lambda a: a[None, 1, ..., None], (F(3, 4, 5),)),
  P("getitem_ellipsis_last", lambda a: Tensor(a)[..., 2] * 1, lambda a: a[..., 2] * 1, (F(2, 3, 4),)),
  P("getitem_scalar", lambda a: Tensor(a)[2, 3] * 1, lambda a: a[2, 3] * 1, (F(4, 5),)),
  P("flatten_squeeze_unsqueeze", lambda a: Tensor(a).flatten(1).unsqueeze(-1).squeeze(0).squeeze() * 1, lambda a: a.reshape(1, 12).squeeze(0) * 1,
    (F(1, 3, 4),)),
  P("view_chain", lambda a: Tensor(a).reshape(4, 6).permute(1, 0).flip(0).pad(((1, 1), (0, 2))).shrink(((0, 5), (1, 6))).reshape(1, 5, 5)
    .expand(2, 5, 5) + 1,
    lambda a: np.broadcast_to(np.pad(a.reshape(4, 6).T[::-1], ((1, 1), (0, 2)))[0:5, 1:6].reshape(1, 5, 5), (2, 5, 5)) + 1, (F(2, 12),)),
  P("view_of_view_sum", lambda a: Tensor(a).permute(1, 0)[1:, ::2].reshape(-1) + Tensor(a)[::2, 1:].flatten(), lambda a: a.T[1:, ::2].reshape(-1) +
    a[::2, 1:].flatten(), (F(4, 4),)),
  P("pad_then_shrink_into_padding", lambda a: Tensor(a).pad(((0, 2), (1, 1)), value=1.5).shrink(((3, 5), (0, 2))),
    lambda a: np.pad(a, ((0, 2), (1, 1)), constant_values=1.5)[3:5, 0:2], (F(3, 2),)),
  P("pad_zero_then_shrink_into_padding", lambda a: Tensor(a).pad(((0, 2),)).shrink(((1, 3),)) + 1, lambda a: np.pad(a, (0, 2))[1:3] + 1, (F(1,),)),
  P("empty_elementwise", lambda a: Tensor(a) * 2 + 1, lambda a: a * 2 + 1, (F(0, 3),)),
  P("empty_ones_elementwise", lambda: Tensor.ones(0, 3) + 1, lambda: np.ones((0, 3), np.float32) + 1),
  P("empty_slice", lambda a: Tensor(a)[3:1] + 1, lambda a: a[3:1] + 1, (F(5,),)),
  # ---- reductions
  P("sum_axis0", lambda a: Tensor(a).sum(0), lambda a: a.sum(0), (F(5, 6),)),
  P("sum_axes_keepdim", lambda a: Tensor(a).sum((0, 2), keepdim=True), lambda a: a.sum((0, 2), keepdims=True), (F(3, 4, 5),)),
  P("sum_full", lambda a: Tensor(a).sum(), lambda a: a.sum(), (F(7, 9),)),
  P("max_min_axis", lambda a: Tensor(a).max(1) - Tensor(a).min(-1), lambda a: a.max(1) - a.min(-1), (F(5, 6),)),
  P("max_full_keepdim", lambda a: Tensor(a).max(keepdim=True), lambda a: a.max(keepdims=True), (F(4, 5),)),
  P("mean", lambda a: Tensor(a).mean(1) + Tensor(a).mean(), lambda a: a.mean(1) + a.mean(), (F(4, 6),)),
  P("var_std", lambda a: Tensor(a).var(0) + Tensor(a).std(), lambda a: a.var(0, ddof=1) + a.std(ddof=1), (F(6, 5),)),
  P("var_keepdim_correction0", lambda a: Tensor(a).var(-1, keepdim=True, correction=0), lambda a: a.var(-1, keepdims=True), (F(3, 8),)),
  P("prod", lambda a: Tensor(a).prod(1), lambda a: a.prod(1), (F(4, 5, low=0.5, high=1.5),)),
  P("int_sum", lambda a: Tensor(a).sum(0), lambda a: a.sum(0).astype(np.int32), (I(5, 4),)),
  P("int8_sum_is_int32", lambda a: Tensor(a).sum(), lambda a: np.int32(a.astype(np.int32).sum()), (I(40, dtype="int8", low=-128, high=127),)),
  P("uint8_sum_is_uint32", lambda a: Tensor(a).sum(), lambda a: np.uint32(a.astype(np.uint32).sum()), (I(40, dtype="uint8", low=0, high=255),)),
  P("int_max_min", lambda a: Tensor(a).max(1) * 100 + Tensor(a).min(1), lambda a: a.max(1) * 100 + a.min(1), (I(4, 6),)),
  P("uint_min", lambda a: Tensor(a).min(0), lambda a: a.min(0), (I(4, 6, dtype="uint8", low=0, high=255),)),
  P("int_mean", lambda a: Tensor(a).mean(), lambda a: np.float32(a.mean()), (I(4, 6),), dtype=dtypes.float32),
  P("bool_sum", lambda a: Tensor(a).sum(1), lambda a: a.sum(1).astype(np.int32), (B(4, 7),)),
  P("bool_max_min", lambda a: Tensor(a).max(1).logical_and(Tensor(a).min(1).logical_not()), lambda a: a.max(1) & ~a.min(1), (B(6, 3),)),
  P("argmax", lambda a: Tensor(a).argmax(1), lambda a: a.argmax(1).astype(np.int32), (F(4, 7),)),
  P("argmax_full", lambda a: Tensor(a).argmax(), lambda a: np.int32(a.argmax()), (F(4, 7),)),
  P("logsumexp", lambda a: Tensor(a).logsumexp(1), lambda a: np.log(np.exp(a).sum(1)), (F(4, 6),), tol=TRANSCENDENTAL),
  P("empty_axis_sum_max", lambda a: Tensor(a).sum(0) + Tensor(a).sum(1).sum(), lambda a: a.sum(0) + a.sum(1).sum(), (F(0, 3),)),
  P("int32_min_reductions", lambda: Tensor(np.array([[-2 ** 31, 5], [3, 2 ** 31 - 1]], np.int32)).min(1),
    lambda: np.array([-2 ** 31, 3], np.int32)),
  P("int32_min_minimum", lambda: Tensor(np.array([-2 ** 31, 3, -4], np.int32)).minimum(0), lambda: np.array([-2 ** 31, 0, -4], np.int32)),
  P("int8_min_full", lambda: Tensor(np.array([-128, 5, 127], np.int8)).min(), lambda: np.int8(-128)),
  P("half_sum_accumulates_in_float32", lambda: Tensor(np.full(2000, 0.1, np.float16)).sum() + Tensor(np.ones(4096, np.float16)).sum(),
    lambda: np.float16(np.full(2000, 0.1, np.float16).astype(np.float32).sum()) + np.float16(4096), tol=1e-3),
  P("half_mean", lambda a: Tensor(a).mean(), lambda a: np.float16(a.astype(np.float32).mean()), (Inp((400,), "float16", 0.0, 1.0),), tol=2e-3),
  # ---- matmul
  P("matmul_2d", lambda a, b: Tensor(a) @ Tensor(b), lambda a, b: a @ b, (F(8, 16), F(16, 8)), tol=TRANSCENDENTAL),
  P("matmul_1d_2d", lambda a, b: Tensor(a) @ Tensor(b), lambda a, b: a @ b, (F(6,), F(6, 5)), tol=TRANSCENDENTAL),
  P("matmul_2d_1d", lambda a, b: Tensor(a) @ Tensor(b), lambda a, b: a @ b, (F(5, 6), F(6,)), tol=TRANSCENDENTAL),
  P("dot_1d_1d", lambda a, b: Tensor(a).dot(Tensor(b)), lambda a, b: np.float32(a @ b), (F(9,), F(9,)), tol=TRANSCENDENTAL),
  P("matmul_batched", lambda a, b: Tensor(a) @ Tensor(b), lambda a, b: a @ b, (F(2, 3, 6), F(2, 6, 4)), tol=TRANSCENDENTAL),
  P("matmul_broadcast_batch", lambda a, b: Tensor(a) @ Tensor(b), lambda a, b: a @ b, (F(2, 3, 6), F(6, 4)), tol=TRANSCENDENTAL),
  P("matmul_transposed", lambda a, b: Tensor(a).T @ Tensor(b).T, lambda a, b: a.T @ b.T, (F(6, 4), F(5, 6)), tol=TRANSCENDENTAL),
  P("matmul_int", lambda a, b: Tensor(a) @ Tensor(b), lambda a, b: (a @ b).astype(np.int32), (I(3, 4), I(4, 5))),
  # ---- activations, softmax
  P("relu", lambda a: Tensor(a).relu(), lambda a: np.maximum(a, 0), (F(20,),)),
  P("sigmoid", lambda a: Tensor(a).sigmoid(), lambda a: _np_sigmoid(a), (F(20, low=-8, high=8),), tol=TRANSCENDENTAL),
  P("tanh", lambda a: Tensor(a).tanh(), lambda a: np.tanh(a), (F(20, low=-5, high=5),), tol=TRANSCENDENTAL),
  P("gelu", lambda a: Tensor(a).gelu(), lambda a: _np_gelu(a), (F(20,),), tol=TRANSCENDENTAL),
  P("silu", lambda a: Tensor(a).silu(), lambda a: a * _np_sigmoid(a), (F(20,),), tol=TRANSCENDENTAL),
  P("leaky_relu", lambda a: Tensor(a).leaky_relu(0.1), lambda a: np.where(a < 0, a * np.float32(0.1), a), (F(20,),)),
  P("softmax", lambda a: Tensor(a).softmax(), lambda a: _np_softmax(a), (F(4, 7),), tol=TRANSCENDENTAL),
  P("softmax_axis0", lambda a: Tensor(a).softmax(0), lambda a: _np_softmax(a, 0), (F(4, 7),), tol=TRANSCENDENTAL),
  P("masked_softmax", lambda: Tensor([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, 2.0]]).softmax(),
    lambda: np.array([[1 / (1 + np.e), 0.0, np.e / (1 + np.e)], [0.0, 0.0, 1.0]], np.float32), tol=TRANSCENDENTAL),
  P("log_softmax", lambda a: Tensor(a).log_softmax(), lambda a: _np_log_softmax(a), (F(3, 8),), tol=TRANSCENDENTAL),
  # ---- creation
  P("arange", lambda: Tensor.arange(10), lambda: np.arange(10, dtype=np.int32)),
  P("arange_start_step", lambda: Tensor.arange(2, 20, 3), lambda: np.arange(2, 20, 3, dtype=np.int32)),
  P("arange_negative_step", lambda: Tensor.arange(10, 0, -2), lambda: np.arange(10, 0, -2, dtype=np.int32)),
  P("arange_float", lambda: Tensor.arange(0, 1, 0.125), lambda: np.arange(0, 1, 0.125, dtype=np.float32)),
  P("arange_math", lambda a: Tensor.arange(6) * Tensor(a), lambda a: np.arange(6, dtype=np.float32) * a, (F(6,),)),
  P("eye", lambda: Tensor.eye(4), lambda: np.eye(4, dtype=np.float32)),
  P("eye_rect", lambda: Tensor.eye(3, 5), lambda: np.eye(3, 5, dtype=np.float32)),
  P("full_int", lambda: Tensor.full((2, 3), 7), lambda: np.full((2, 3), 7, dtype=np.int32)),
  P("full_float", lambda: Tensor.full((3,), -2.5), lambda: np.full((3,), -2.5, dtype=np.float32)),
  P("full_bool", lambda: Tensor.full((2, 2), True), lambda: np.full((2, 2), True)),
  P("zeros_ones", lambda: Tensor.zeros(2, 3) + Tensor.ones(2, 3) * 2, lambda: np.zeros((2, 3), np.float32) + np.ones((2, 3), np.float32) * 2),
  P("like", lambda a: Tensor(a).zeros_like() + Tensor(a).ones_like() + Tensor(a).full_like(3), lambda a: np.zeros_like(a) + 1 + 3, (I(2, 3),)),
  # ---- fused chains
  P("fused_add_mul_sum", lambda a, b, c: ((Tensor(a) + Tensor(b)) * Tensor(c)).sum(1), lambda a, b, c: ((a + b) * c).sum(1), (F(4, 6),) * 3),
  P("fused_elementwise_chain", lambda a: ((((Tensor(a) * 2 + 1).exp2().log2() - 1) / 2).abs().sqrt().maximum(0.5) * -1 + 3).relu() + Tensor(a).abs(),
    lambda a: np.maximum(3 - np.maximum(np.sqrt(np.abs(a)), np.float32(0.5)), 0) + np.abs(a), (F(16,),), tol=TRANSCENDENTAL),
  P("layernorm", lambda a: (Tensor(a) - Tensor(a).mean(-1, keepdim=True)) / (Tensor(a).var(-1, keepdim=True, correction=0) + 1e-5).sqrt(),
    lambda a: (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5), (F(4, 8),), tol=TRANSCENDENTAL),
  P("mlp_forward", lambda x, w1, b1, w2: (Tensor(x) @ Tensor(w1) + Tensor(b1)).relu().matmul(Tensor(w2)).softmax(),
    lambda x, w1, b1, w2: _np_softmax(np.maximum(x @ w1 + b1, 0) @ w2), (F(4, 6), F(6, 8), F(8,), F(8, 3)), tol=TRANSCENDENTAL),
  P("attention_like", lambda q, k, v: (Tensor(q) @ Tensor(k).transpose(-1, -2) / math.sqrt(4)).softmax() @ Tensor(v),
    lambda q, k, v: _np_softmax(q @ k.swapaxes(-1, -2) / np.float32(2.0)) @ v, (F(2, 3, 4), F(2, 5, 4), F(2, 5, 4)), tol=TRANSCENDENTAL),
  P("reduce_then_broadcast", lambda a: Tensor(a) - Tensor(a).max(0) + Tensor(a).sum(1, keepdim=True) * Tensor(a).min(),
    lambda a: a - a.max(0) + a.sum(1, keepdims=True) * a.min(), (F(4, 5),)),
  P("sum_of_sums", lambda a: Tensor(a).sum(0).sum(0) + Tensor(a).sum(2).max(), lambda a: a.sum(0).sum(0) + a.sum(2).max(), (F(3, 4, 5),)),
  P("where_of_reductions", lambda a, b: (Tensor(a).sum(1) > Tensor(b).sum(1)).where(Tensor(a).max(1), Tensor(b).min(1) * 2),
    lambda a, b: np.where(a.sum(1) > b.sum(1), a.max(1), b.min(1) * 2), (F(5, 4), F(5, 4))),
  P("int_float_bool_mix", lambda a, b, c: (Tensor(a) * Tensor(c) + Tensor(b)).sum(0) / (Tensor(c).sum(0) + 1),
    lambda a, b, c: _f32((a * c + b).sum(0) / (c.sum(0).astype(np.int32) + 1)), (I(4, 3), F(4, 3), B(4, 3)), dtype=dtypes.float32),
  P("pad_reduce_flip", lambda a: Tensor(a).pad(((1, 1), (2, 0))).flip(1).sum(0) * Tensor(a).flip(0)[0].pad(((1, 1),)),
    lambda a: np.pad(a, ((1, 1), (2, 0)))[:, ::-1].sum(0) * np.pad(a[::-1][0], 1), (F(3, 4),)),
]

for _p in PROGRAMS:  # a program named twice would shadow the other in the test ids
  assert sum(q.name == _p.name for q in PROGRAMS) == 1, _p.name
