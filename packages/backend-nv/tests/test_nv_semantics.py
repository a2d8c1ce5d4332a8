"""Both renderers (CUDA C and PTX) against tinygrad.uop.alu, op by op, on hand-built programs.

Every program is rendered and compiled here (NVRTC / nvJitLink need no GPU); with a GPU it also runs, and each value
must equal alu's (bit for bit, NaN matching NaN and the sign of zero counting), or be within a stated tolerance for
the transcendentals.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from nv_harness import NP, RENDERERS, OutFn, Prog, assert_same, elementwise, make_renderer, run, to_np
from tinygrad.dtype import DType, dtypes
from tinygrad.renderer import Renderer
from tinygrad.uop.alu import cast_scalar, exec_alu
from tinygrad.uop.ops import GroupOp, Ops


@functools.cache
def R(kind: str) -> Renderer: return make_renderer(kind)


pytestmark = pytest.mark.parametrize("kind", RENDERERS)


def test_elementwise_add_loop(kind: str) -> None:
  p = Prog()
  out, a, b = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32), p.glob(2, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 37))
  p.end(r, p.store(out, r, p.alu(Ops.ADD, p.load(a, r), p.load(b, r))))
  x, y = np.random.default_rng(0).standard_normal((2, 37)).astype(np.float32)
  if (got := run(p, [np.zeros(37, np.float32), x, y], R(kind))) is not None: np.testing.assert_array_equal(got[0], x + y)


def test_thread_indices(kind: str) -> None:
  """out[gidx0*32 + lidx0] = gidx0 * 1000 + lidx0 over 5 blocks of 32 threads."""
  p = Prog()
  out = p.glob(0, dtypes.int32)
  g, l = p.special("gidx0", 5), p.special("lidx0", 32)
  idx = p.alu(Ops.ADD, p.alu(Ops.MUL, g, p.const(dtypes.int32, 32)), l)
  p.store(out, idx, p.alu(Ops.ADD, p.alu(Ops.MUL, g, p.const(dtypes.int32, 1000)), l))
  got = run(p, [np.zeros(160, np.int32)], R(kind), global_size=(5, 1, 1), local_size=(32, 1, 1))
  if got is not None: np.testing.assert_array_equal(got[0], (np.arange(160) // 32) * 1000 + np.arange(160) % 32)


def _sum_program(dt: DType, dynamic_index: bool = False) -> Prog:
  """out[0] = sum(inp[0:n]) through a DEFINE_REG accumulator: store identity, loop, load after END."""
  p = Prog()
  out, inp = p.glob(0, dt), p.glob(1, dt)
  end = p(Ops.DEFINE_VAR, dtypes.int32, (), ("n", 0, 1000))
  acc = p(Ops.DEFINE_REG, dt.ptr(2, "reg"), (), 0)
  zero = p.const(dtypes.int32, 0)
  # a non-constant index keeps the accumulator in .local memory (PTX); it is always 0 here
  slot = p.alu(Ops.MUL, end, zero) if dynamic_index else zero
  p.store(acc, slot, p.const(dt, 0.0 if dtypes.is_float(dt) else 0))
  r = p.loop(end)
  st = p.store(acc, slot, p.alu(Ops.ADD, p.load(acc, slot), p.load(inp, r)))
  done = p(Ops.AFTER, acc.dtype, (acc, p.end(r, st)))
  p.store(out, zero, p.load(done, slot))
  return p


@pytest.mark.parametrize("dynamic", [False, True])
def test_reduce_with_define_reg(kind: str, dynamic: bool) -> None:
  x = np.arange(1, 101, dtype=np.float32)
  for n, want in ((100, 5050.0), (0, 0.0)):
    if (got := run(_sum_program(dtypes.float32, dynamic), [np.zeros(1, np.float32), x], R(kind), vals=(n,))) is not None:
      assert got[0][0] == want
  ints = np.full(64, 2**30, np.int32)  # wraps: 64 * 2^30 = 2^36 = 0 mod 2^32
  if (got := run(_sum_program(dtypes.int32, dynamic), [np.ones(1, np.int32), ints], R(kind), vals=(64,))) is not None: assert got[0][0] == 0
  halves = np.full(10, 0.1, np.float16)
  if (got := run(_sum_program(dtypes.float16, dynamic), [np.zeros(1, np.float16), halves], R(kind), vals=(10,))) is not None:
    want = np.float16(0)
    for h in halves: want = np.float16(want + h)
    assert got[0][0] == want


def test_nested_loops_reduce_rows(kind: str) -> None:
  p = Prog()
  out, inp = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32)
  acc = p(Ops.DEFINE_REG, dtypes.float32.ptr(1, "reg"), (), 0)
  zero = p.const(dtypes.int32, 0)
  ri = p.loop(p.const(dtypes.int32, 5), 0)
  p.store(acc, zero, p.const(dtypes.float32, -math.inf))
  rj = p.loop(p.const(dtypes.int32, 7), 1)
  idx = p.alu(Ops.ADD, p.alu(Ops.MUL, ri, p.const(dtypes.int32, 7)), rj)
  st = p.store(acc, zero, p.alu(Ops.MAX, p.load(acc, zero), p.load(inp, idx)))
  done = p(Ops.AFTER, acc.dtype, (acc, p.end(rj, st)))
  p.end(ri, p.store(out, ri, p.load(done, zero)))
  x = np.random.default_rng(1).standard_normal(35).astype(np.float32)
  if (got := run(p, [np.zeros(5, np.float32), x], R(kind))) is not None: np.testing.assert_array_equal(got[0], x.reshape(5, 7).max(axis=1))


def test_gated_load_and_store(kind: str) -> None:
  p = Prog()
  out, out2, inp = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32), p.glob(2, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 10))
  src_idx = p.alu(Ops.ADD, r, p.const(dtypes.int32, 3))
  in_range = p.alu(Ops.CMPLT, src_idx, p.const(dtypes.int32, 6))  # inp has 6 elements: indexes 6.. are never read
  v = p.load(inp, src_idx, in_range, p.const(dtypes.float32, -1.0))
  even = p.alu(Ops.CMPEQ, p.alu(Ops.MOD, r, p.const(dtypes.int32, 2)), p.const(dtypes.int32, 0))
  p.end(r, p.store(out, r, v), p.store(out2, r, v, even))
  got = run(p, [np.zeros(10, np.float32), np.full(10, 7, np.float32), np.arange(6, dtype=np.float32) * 10], R(kind))
  if got is not None:
    np.testing.assert_array_equal(got[0], [30, 40, 50, -1, -1, -1, -1, -1, -1, -1])
    np.testing.assert_array_equal(got[1], [30, 7, 50, 7, -1, 7, -1, 7, -1, 7])


@pytest.mark.parametrize("dt", [dtypes.bool, dtypes.int8, dtypes.float16, dtypes.bfloat16, dtypes.float64], ids=str)
def test_gated_load_store_of_dtype(kind: str, dt: DType) -> None:
  """out[i] = (i < 4 ? inp[i] : alt), stored unless i == 6 (where out keeps its old contents)."""
  vals = [cast_scalar(x, dt) for x in {dtypes.bool: [True, False, True, True], dtypes.int8: [-128, 5, 127, -1]}.get(dt, [1.5, -2.25, 1e-3, -0.0])]
  alt, old = cast_scalar({dtypes.bool: False, dtypes.int8: 9}.get(dt, 7.0), dt), cast_scalar(1, dt)
  p = Prog()
  out, inp = p.glob(0, dt), p.glob(1, dt)
  r = p.loop(p.const(dtypes.int32, 8))
  v = p.load(inp, r, p.alu(Ops.CMPLT, r, p.const(dtypes.int32, 4)), p.const(dt, alt))
  p.end(r, p.store(out, r, v, p.alu(Ops.CMPNE, r, p.const(dtypes.int32, 6))))
  got = run(p, [to_np([old] * 8, dt), to_np(vals, dt)], R(kind))
  if got is not None: assert_same(got[0], to_np(vals + [alt, alt, old, alt], dt), dt)


# ---- casts, bitcasts and semantics

CAST_VALUES: dict[DType, list[object]] = {
  dtypes.float32: [0.0, -0.0, 1.5, -1.5, 2.5, -2.7, 100.9, -129.6, 255.5, 256.0, 65504.0, 70000.0, 3e9, -3e9, 2.0**63, -2.0**63,
                   1e20, -1e20, 1e-8, 1e-40, math.inf, -math.inf, math.nan],
  dtypes.float64: [0.0, -0.0, 1.5, -2.5, 255.9, 65519.99, 65520.0, 2.0**31, 2.0**64 + 2**12, -1e300, 1e-300, 5e-324, math.inf, math.nan],
  dtypes.float16: [0.0, -0.0, 1.5, -2.5, 255.9, 65504.0, -65504.0, 6e-8, 1e-4, math.inf, -math.inf, math.nan],
  dtypes.bfloat16: [0.0, -0.0, 1.5, -2.5, 255.0, 3e38, -1e10, 1e-4, math.inf, math.nan],
  dtypes.int32: [0, 1, -1, 127, 128, 255, 256, -129, 2**31 - 1, -2**31, 65504, 65520, 16777217, 123456789],
  dtypes.int64: [0, -1, 2**53 + 1, -2**63, 2**63 - 1, 2**32 + 5, -2**40],
  dtypes.uint64: [0, 2**64 - 1, 2**63, 2**53 + 1],
  dtypes.int16: [0, -1, 32767, -32768, 255, -129],
  dtypes.uint8: [0, 1, 127, 128, 255],
  dtypes.int8: [0, 1, -1, 127, -128],
  dtypes.bool: [False, True],
}
CAST_TARGETS = [dtypes.bool, dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64,
                dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]


def _cast_to(dst: DType) -> OutFn: return lambda p, xs: p(Ops.CAST, dst, (xs[0],))


@pytest.mark.parametrize("src", list(CAST_VALUES), ids=str)
def test_casts(kind: str, src: DType) -> None:
  elementwise([(src, [cast_scalar(v, src) for v in CAST_VALUES[src]])], [(dst, _cast_to(dst)) for dst in CAST_TARGETS if dst != src], R(kind))


def test_bf16_rounding_matches_alu(kind: str) -> None:
  vals = [float(x) for x in np.random.default_rng(3).standard_normal(300).astype(np.float32) * 1000] + [3.3895314e38, 3.4e38, 1.0039063]
  vals += [1e-39, -3e-39, 1e-40, 2.0**-130]
  elementwise([(dtypes.float32, vals)], [(dtypes.bfloat16, _cast_to(dtypes.bfloat16))], R(kind))
  elementwise([(dtypes.bfloat16, [1.5, -2.0, 3.0e5]), (dtypes.bfloat16, [2.25, 0.1, 1.0e-3])],
              [(dtypes.bfloat16, lambda p, xs, op=op: p.alu(op, xs[0], xs[1])) for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX)], R(kind))


@np.errstate(all="ignore")
def test_half_conversions_sweep(kind: str) -> None:
  """Every half -> float, and float/double -> half rounding near every half (numpy converts correctly)."""
  rng = np.random.default_rng(2)
  halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
  floats = np.concatenate([halves.astype(np.float32) + np.float32(2.0**-30) * (rng.random(65536, dtype=np.float32) - 0.5),
                           rng.integers(0, 2**32, 65536, dtype=np.uint64).astype(np.uint32).view(np.float32)])
  doubles = np.concatenate([halves.astype(np.float64) * (1 + 2.0**-12), halves.astype(np.float64) * (1 - 2.0**-40), [2.0**-25, 65520.0]])
  for src, vals in ((dtypes.float16, halves), (dtypes.float32, floats), (dtypes.float64, doubles)):
    dst = dtypes.float32 if src == dtypes.float16 else dtypes.float16
    p = Prog()
    out, inp = p.glob(0, dst), p.glob(1, src)
    r = p.loop(p.const(dtypes.int32, len(vals)))
    p.end(r, p.store(out, r, p(Ops.CAST, dst, (p.load(inp, r),))))
    got = run(p, [np.zeros(len(vals), NP[dst]), vals.astype(NP[src])], R(kind))
    if got is not None: assert_same(got[0], vals.astype(NP[dst]), dst, f"{src} -> {dst}")


BITCASTS = [(dtypes.float32, dtypes.int32), (dtypes.float32, dtypes.uint32), (dtypes.int32, dtypes.float32), (dtypes.uint32, dtypes.float32),
            (dtypes.float16, dtypes.int16), (dtypes.uint16, dtypes.float16), (dtypes.float64, dtypes.int64), (dtypes.int64, dtypes.float64),
            (dtypes.bfloat16, dtypes.uint16), (dtypes.uint16, dtypes.bfloat16), (dtypes.int8, dtypes.uint8), (dtypes.uint8, dtypes.int8),
            (dtypes.float16, dtypes.bfloat16), (dtypes.uint8, dtypes.bool), (dtypes.bool, dtypes.int8)]


@pytest.mark.parametrize("src,dst", BITCASTS, ids=str)
def test_bitcast(kind: str, src: DType, dst: DType) -> None:
  if src == dtypes.bool: vals: list[object] = [False, True]
  elif dtypes.is_float(src): vals = [0.0, -0.0, 1.0, -2.5, 1e-3, math.inf, -math.inf, math.nan]
  else: vals = [0, 1, 5, 127, dtypes.max(src), dtypes.min(src), 0x3F80 if src.itemsize == 2 else 0x3F800000 % (int(dtypes.max(src)) + 1)]
  elementwise([(src, [cast_scalar(v, src) for v in vals])], [(dst, lambda p, xs: p(Ops.BITCAST, dst, (xs[0],)))], R(kind))


def test_bitcast_of_constant(kind: str) -> None:
  elementwise([(dtypes.int32, [0])], [(dtypes.float32, lambda p, xs: p(Ops.BITCAST, dtypes.float32, (p.const(dtypes.uint32, 0x40490FDB),))),
                                      (dtypes.float16, lambda p, xs: p(Ops.BITCAST, dtypes.float16, (p.const(dtypes.int16, 0x3C00),)))], R(kind))


DIV_CASES: dict[DType, tuple[list[int], list[int]]] = {
  dtypes.int32: ([7, -7, 7, -7, 0, 5, -2**31, -2**31, 2**31 - 1, 13, -13, -1], [2, 2, -2, -2, 3, 0, -1, 1, -1, 0, 5, -1]),
  dtypes.int64: ([7, -7, -2**63, -2**63, 2**40 + 1, -5], [-2, 3, -1, 0, -7, 0]),
  dtypes.int16: ([7, -7, -32768, -32768, 300, -5], [-2, 3, -1, 0, -7, 0]),
  dtypes.int8: ([7, -7, -128, -128, 100, 3], [-2, 3, -1, 0, -7, 0]),
  dtypes.uint32: ([7, 2**32 - 1, 0, 2**31, 5], [2, 3, 0, 2**31 + 1, 0]),
  dtypes.uint8: ([7, 255, 0, 200], [2, 0, 3, 7]),
}


@pytest.mark.parametrize("dt", list(DIV_CASES), ids=str)
def test_idiv_mod(kind: str, dt: DType) -> None:
  a, b = DIV_CASES[dt]
  consts = [3, 0] + ([-3, -1] if not dtypes.is_unsigned(dt) else [])
  outs: list[tuple[DType, OutFn]] = [(dt, lambda p, xs, op=op: p.alu(op, xs[0], xs[1])) for op in (Ops.IDIV, Ops.MOD)]
  outs += [(dt, lambda p, xs, op=op, c=c: p.alu(op, xs[0], p.const(dt, c))) for op in (Ops.IDIV, Ops.MOD) for c in consts]
  elementwise([(dt, a), (dt, b)], outs, R(kind))


MAX_A = [1.0, math.nan, math.nan, -math.inf, 0.0, -0.0, 2.0, math.inf, -3.0]
MAX_B = [math.nan, 1.0, math.nan, -1.0, -0.0, 0.0, 3.0, math.nan, -3.0]


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16], ids=str)
def test_max_and_compares_with_nan(kind: str, dt: DType) -> None:
  outs: list[tuple[DType, OutFn]] = [(dt, lambda p, xs: p.alu(Ops.MAX, xs[0], xs[1])),
                                     (dt, lambda p, xs: p.alu(Ops.MAX, xs[0], p.const(dt, math.nan)))]
  outs += [(dtypes.bool, lambda p, xs, op=op: p.alu(op, xs[0], xs[1])) for op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)]
  outs += [(dt, lambda p, xs: p.alu(Ops.WHERE, p.alu(Ops.CMPLT, xs[0], xs[1]), xs[0], p.const(dt, -math.inf)))]
  elementwise([(dt, MAX_A), (dt, MAX_B)], outs, R(kind))


TRANSCENDENTAL_X = [0.0, -0.0, 0.5, 1.0, -1.0, 2.5, -2.5, 10.0, 100.0, 200.0, -200.0, 1e-3, 3.14159, 1e4, -1e4, 1e-30, 1.0001, 0.9999,
                    -1075.5, 1023.9, 1e-310, 1048576.5, 1e30, -3e38, 3.4028234663852886e38, 1e300, -1.7976931348623157e308,
                    math.inf, -math.inf, math.nan]
# exp2/log2/sin: CUDA's exp2f/sinf are within 2 ulp, log2f 1 ulp; PTX's exp2 is ex2.approx.f32 (2 ulp), its log2/sin
# are computed in float64. float64: CUDA's are within 1-2 ulp, PTX's float64 sequences within a few.
TRANSCENDENTAL_RTOL = {dtypes.float32: 3e-7, dtypes.float64: 2e-15, dtypes.float16: 1e-3, dtypes.bfloat16: 8e-3}


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16], ids=str)
def test_unary_math(kind: str, dt: DType) -> None:
  xs_in = [cast_scalar(v, dt) for v in TRANSCENDENTAL_X]
  exact = (Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.NEG)  # correctly rounded on the GPU and in alu
  elementwise([(dt, xs_in)], [(dt, lambda p, xs, op=op: p(op, dt, (xs[0],))) for op in exact], R(kind))
  for op in (Ops.EXP2, Ops.LOG2, Ops.SIN):
    elementwise([(dt, xs_in)], [(dt, lambda p, xs, op=op: p(op, dt, (xs[0],)))], R(kind), rtol=TRANSCENDENTAL_RTOL[dt])


def test_sin_exp2_log2_sweep(kind: str) -> None:
  """float32 over wide ranges, against alu in float64 then rounded: max error a few ulp (see TRANSCENDENTAL_RTOL)."""
  rng = np.random.default_rng(4)
  xs = np.concatenate([rng.uniform(-100, 100, 2000), rng.uniform(-1e5, 1e5, 500), rng.uniform(-1, 1, 500),
                       rng.uniform(1, 2, 500) * 2.0 ** rng.integers(20, 128, 500)]).astype(np.float32)
  pos = (np.abs(xs.astype(np.float64)) * 10.0 ** rng.integers(-30, 30, len(xs)) + 1e-38).clip(0, 3e38).astype(np.float32)
  for op, vals in ((Ops.SIN, xs), (Ops.EXP2, np.clip(xs, -140, 120)), (Ops.LOG2, pos)):
    p = Prog()
    out, inp = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32)
    r = p.loop(p.const(dtypes.int32, len(vals)))
    p.end(r, p.store(out, r, p(op, dtypes.float32, (p.load(inp, r),))))
    got = run(p, [np.zeros(len(vals), np.float32), vals], R(kind))
    if got is None: continue
    want = np.array([exec_alu(op, dtypes.float64, (float(v),)) for v in vals])
    # sin near its zeros is relative-error sensitive: there an absolute error of 2^-26 passes too
    atol = 2.0 ** -26 if op is Ops.SIN else 0.0
    err = np.abs(got[0].astype(np.float64) - want)
    bad = ~(err <= 4e-7 * np.abs(want) + atol)
    assert not bad.any(), f"{op}: x={vals[bad][:8]} got={got[0][bad][:8]} want={want[bad][:8]}"


INT_OPS = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.AND, Ops.OR, Ops.XOR, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)
INT_VALUES: dict[DType, tuple[list[int], list[int]]] = {
  dtypes.int32: ([2**31 - 1, -2**31, 65536, 123456789, -5, 0, 7], [1, -1, 65536, 1000, 3, -2**31, -7]),
  dtypes.int64: ([2**63 - 1, -2**63, 2**32, -5], [1, -1, 2**32, 9]),
  dtypes.uint64: ([2**64 - 1, 0, 2**63], [1, 1, 2**63]),
  dtypes.uint8: ([200, 0, 255, 17], [100, 1, 255, 3]),
  dtypes.int8: ([127, -128, -128, 5], [1, -1, 127, -3]),
  dtypes.int16: ([32767, -32768, 300, -5], [1, -1, 300, 7]),
  dtypes.uint16: ([65535, 0, 40000], [65535, 1, 3]),
  dtypes.uint32: ([2**32 - 1, 0, 2**31], [1, 1, 2**31]),
}


@pytest.mark.parametrize("dt", list(INT_VALUES), ids=str)
def test_int_ops_wraparound(kind: str, dt: DType) -> None:
  a, b = INT_VALUES[dt]
  outs: list[tuple[DType, OutFn]] = [(dtypes.bool if op in GroupOp.Comparison else dt, lambda p, xs, op=op: p.alu(op, xs[0], xs[1]))
                                     for op in INT_OPS]
  outs += [(dt, lambda p, xs: p(Ops.NEG, dt, (xs[0],))), (dt, lambda p, xs: p.alu(Ops.MULACC, xs[0], xs[1], xs[0])),
           (dt, lambda p, xs: p.alu(Ops.SHL, xs[0], p.const(dt, 3))), (dt, lambda p, xs: p.alu(Ops.SHR, xs[0], p.const(dt, 2))),
           (dt, lambda p, xs: p.alu(Ops.WHERE, p.alu(Ops.CMPLT, xs[0], xs[1]), xs[1], p.const(dt, dtypes.min(dt))))]
  elementwise([(dt, a), (dt, b)], outs, R(kind))


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16], ids=str)
def test_float_arith(kind: str, dt: DType) -> None:
  a = [cast_scalar(v, dt) for v in [1.5, -0.0, 1e30, 3.0, math.inf, 0.0, 0.1, 1e-3, 7.0, -2.5e-5]]
  b = [cast_scalar(v, dt) for v in [2.0, 0.0, 1e30, 0.0, math.inf, 0.0, 0.2, 3e4, 3.0, 1.1]]
  outs: list[tuple[DType, OutFn]] = [(dt, lambda p, xs, op=op: p.alu(op, xs[0], xs[1])) for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV)]
  if dt in (dtypes.float32, dtypes.float64):  # MULACC of float32/64: one rounding vs alu's two (half: through float) -- see renderers
    outs.append((dt, lambda p, xs: p.alu(Ops.ADD, p.alu(Ops.MUL, xs[0], xs[1]), xs[0])))
  elementwise([(dt, a), (dt, b)], outs, R(kind))


def test_mulacc(kind: str) -> None:
  """MULACC rounds once for float32 (fma: alu's product is exact in double too) and for float16 (fma in float)."""
  a, b, c = [1.5, 0.1, 3.0, -7.25, 1e-3], [2.0, 0.3, 1e20, 0.5, 1e-3], [0.25, -0.03, -3e20, 8.0, 1.0]
  for dt in (dtypes.float32, dtypes.float16):
    xs = [[cast_scalar(v, dt) for v in col] for col in (a, b, c)]
    elementwise([(dt, xs[0]), (dt, xs[1]), (dt, xs[2])], [(dt, lambda p, v: p.alu(Ops.MULACC, v[0], v[1], v[2]))], R(kind), rtol=1e-6)


def test_bool_logic(kind: str) -> None:
  ta, tb = [False, False, True, True], [False, True, False, True]
  elementwise([(dtypes.bool, ta), (dtypes.bool, tb)], [(dtypes.bool, lambda p, xs, op=op: p.alu(op, xs[0], xs[1]))
                                                       for op in (Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE, Ops.CMPLT, Ops.CMPEQ, Ops.ADD,
                                                                  Ops.MUL, Ops.MAX)]
              + [(dtypes.bool, lambda p, xs: p(Ops.NEG, dtypes.bool, (xs[0],))),
                 (dtypes.bool, lambda p, xs: p.alu(Ops.WHERE, xs[0], xs[1], p(Ops.NEG, dtypes.bool, (xs[1],))))], R(kind))


def test_constants_render_exactly(kind: str) -> None:
  cases: list[tuple[DType, list[object]]] = [
    (dtypes.float32, [0.1, -0.0, 3.4028234663852886e38, 1e-45, math.inf, -math.inf, math.nan]), (dtypes.float64, [0.1, 5e-324, -1e308]),
    (dtypes.float16, [0.1, -65504.0, 6e-08, math.inf]), (dtypes.bfloat16, [0.1, -3e38, math.nan]), (dtypes.int32, [-2**31, 2**31 - 1]),
    (dtypes.int64, [-2**63, 2**63 - 1]), (dtypes.uint64, [2**64 - 1]), (dtypes.uint32, [2**32 - 1]), (dtypes.int8, [-128]),
    (dtypes.uint8, [255]), (dtypes.int16, [-32768]), (dtypes.bool, [True, False])]
  outs = [(dt, lambda p, xs, dt=dt, v=v: p(Ops.NEG, dt, (p.const(dt, cast_scalar(v, dt)),))) for dt, vs in cases for v in vs]
  elementwise([(dtypes.int32, [0])], outs, R(kind))


def test_int64_index_and_uint_loop(kind: str) -> None:
  """An int64 index expression and a loop of another int width still address the right elements."""
  p = Prog()
  out, inp = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 16))
  i64 = p(Ops.CAST, dtypes.int64, (r,))
  rev = p.alu(Ops.SUB, p.const(dtypes.int64, 15), i64)
  p.end(r, p.store(out, rev, p.load(inp, i64)))
  x = np.arange(16, dtype=np.float32)
  if (got := run(p, [np.zeros(16, np.float32), x], R(kind))) is not None: np.testing.assert_array_equal(got[0], x[::-1])
