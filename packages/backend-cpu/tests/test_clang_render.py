"""ClangRenderer -> ClangCompiler -> CPUProgram on hand-built linearized programs, checked against tinygrad.uop.alu."""
from __future__ import annotations

import itertools
import math
import os
import platform
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from tinygrad.device.devstring import Target
from tinygrad.dtype import DType, dtypes
from tinygrad.renderer import CompileError, UnsupportedDTypeError
from tinygrad.renderer.builder import ProgramBuilder as Prog
from tinygrad.uop.alu import cast_scalar, eval_scalar, exec_alu, from_bits, to_bits
from tinygrad.uop.ops import GroupOp, Ops, UOp
from tinygrad_backend_cpu.clang import _PROBES, ClangCompiler, ClangRenderer, clang_available, feature_flags, find_c_compiler, is_zig, march_flag
from tinygrad_backend_cpu.runtime import CPUAllocator, CPUProgram

# `uv sync` installs the compiler (the ziglang wheel): in CI its absence is a failure, not a quiet skip
if clang_available() is not None and os.environ.get("CI", "").lower() in ("1", "true"): raise RuntimeError(f"CI must run the CLANG tests: {clang_available()}")
pytestmark = pytest.mark.skipif(clang_available() is not None, reason=str(clang_available()))

RENDERER = ClangRenderer()
IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16,
      dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.uint64: np.uint64,
      dtypes.float16: np.float16, dtypes.bfloat16: np.uint16, dtypes.float32: np.float32, dtypes.float64: np.float64}
_names = itertools.count()


# ---- building programs


def run(p: Prog, bufs: list[np.ndarray], vals: tuple[int, ...] = (), renderer: ClangRenderer = RENDERER) -> list[np.ndarray]:
  """Render, compile, load and run; returns the buffers' contents after the kernel."""
  name = f"clangtest_{next(_names)}"  # MCJIT resolves names across every loaded object: keep them unique
  src = renderer.render(name, p.uops)
  prg = CPUProgram(name, renderer.compiler.compile(src))
  alloc = CPUAllocator()
  handles = []
  for a in bufs:
    handles.append(h := alloc.alloc(max(a.nbytes, 1)))
    alloc.copyin(h, memoryview(a.tobytes()))
  prg(*handles, vals=vals)
  out = []
  for a, h in zip(bufs, handles):
    res = np.empty_like(a)
    alloc.copyout(res.data.cast("B"), h)
    out.append(res)
  return out


# ---- the reference: the same UOps evaluated with alu.py

def ref_eval(u: UOp, env: dict[UOp, object]) -> object: return eval_scalar(u, env)


def to_np(vals: list[object], dt: DType) -> np.ndarray:
  if dt == dtypes.bfloat16: return np.array([to_bits(v, dt) for v in vals], np.uint16)
  return np.array(vals, NP[dt])


def from_np(a: np.ndarray, dt: DType) -> list[object]:
  return [from_bits(int(x), dt) for x in a] if dt == dtypes.bfloat16 else [x.item() for x in a]


def assert_same(actual: np.ndarray, expected: np.ndarray, dt: DType, msg: str = "") -> None:
  """Exact equality; for floats NaN matches NaN and the sign of zero counts."""
  if dt == dtypes.bfloat16: actual, expected = ((x.view(np.uint16).astype(np.uint32) << 16).view(np.float32) for x in (actual, expected))
  if not dtypes.is_float(dt): return np.testing.assert_array_equal(actual, expected, err_msg=msg)
  np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected), err_msg=msg)
  ok = ~np.isnan(expected)
  np.testing.assert_array_equal(actual[ok], expected[ok], err_msg=msg)
  np.testing.assert_array_equal(np.signbit(actual[ok]), np.signbit(expected[ok]), err_msg=f"sign of zero: {msg}")


OutFn = Callable[..., UOp]  # (prog, loaded inputs) -> value to store


def elementwise(ins: Sequence[tuple[DType, Sequence[Any]]], outs: Sequence[tuple[DType, OutFn]], renderer: ClangRenderer = RENDERER) -> None:
  """out_k[i] = fn_k(loaded inputs at i) over a loop; every output is compared with ref_eval of the same UOps."""
  n = len(ins[0][1])
  p = Prog()
  out_bufs = [p.glob(i, dt) for i, (dt, _) in enumerate(outs)]
  in_bufs = [p.glob(len(outs) + i, dt) for i, (dt, _) in enumerate(ins)]
  rng = p.loop(p.const(dtypes.int32, n))
  xs = [p.load(b, rng) for b in in_bufs]
  values = [fn(p, xs) for _, fn in outs]
  stores = [p.store(b, rng, v) for b, v in zip(out_bufs, values)]
  p.end(rng, *stores)
  inputs = [to_np(list(vals), dt) for dt, vals in ins]
  got = run(p, [np.zeros(n, NP[dt]) for dt, _ in outs] + inputs, renderer=renderer)
  loaded = [from_np(a, dt) for a, (dt, _) in zip(inputs, ins)]
  for k, ((dt, _), v) in enumerate(zip(outs, values)):
    expected = [ref_eval(v, dict(zip(xs, [col[i] for col in loaded]))) for i in range(n)]
    assert_same(got[k], to_np(expected, dt), dt, f"output {k} ({dt}): inputs {[col for col in loaded]}\n{renderer.render('k', p.uops)}")


# ---- programs

def test_elementwise_add_loop() -> None:
  p = Prog()
  out, a, b = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32), p.glob(2, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 37))
  st = p.store(out, r, p.alu(Ops.ADD, p.load(a, r), p.load(b, r)))
  p.end(r, st)
  x, y = np.random.default_rng(0).standard_normal((2, 37)).astype(np.float32)
  np.testing.assert_array_equal(run(p, [np.zeros(37, np.float32), x, y])[0], x + y)


def test_render_signature_and_determinism() -> None:
  p = Prog()
  out, a = p.glob(0, dtypes.float32), p.glob(1, dtypes.int32)
  n = p(Ops.DEFINE_VAR, dtypes.int32, (), ("n", 1, 100))
  r = p.loop(n)
  p.end(r, p.store(out, r, p(Ops.CAST, dtypes.float32, (p.load(a, r),))))
  src = RENDERER.render("kern", p.uops)
  assert "void kern(float* restrict data0, int* restrict data1, int var0 /* n */) {" in src
  assert src == ClangRenderer().render("kern", p.uops)
  got = run(p, [np.zeros(8, np.float32), np.arange(8, dtype=np.int32)], vals=(5,))[0]
  np.testing.assert_array_equal(got, [0, 1, 2, 3, 4, 0, 0, 0])


def _sum_program(dt: DType, n_end: UOp | None = None) -> Prog:
  """out[0] = sum(inp[0:n]) through a DEFINE_REG accumulator: store identity, loop, load after END."""
  p = Prog()
  out, inp = p.glob(0, dt), p.glob(1, dt)
  end = n_end if n_end is not None else p(Ops.DEFINE_VAR, dtypes.int32, (), ("n", 0, 1000))
  acc = p(Ops.DEFINE_REG, dt.ptr(1, "reg"), (), 0)
  zero = p.const(dtypes.int32, 0)
  p.store(acc, zero, p.const(dt, 0.0 if dtypes.is_float(dt) else 0))
  r = p.loop(end)
  st = p.store(acc, zero, p.alu(Ops.ADD, p.load(acc, zero), p.load(inp, r)))
  done = p(Ops.AFTER, acc.dtype, (acc, p.end(r, st)))
  p.store(out, zero, p.load(done, zero))
  return p


def test_reduce_with_define_reg() -> None:
  x = np.arange(1, 101, dtype=np.float32)
  assert run(_sum_program(dtypes.float32), [np.zeros(1, np.float32), x], vals=(100,))[0][0] == 5050.0
  assert run(_sum_program(dtypes.float32), [np.zeros(1, np.float32), x], vals=(0,))[0][0] == 0.0
  ints = np.full(64, 2**30, np.int32)  # wraps: 64 * 2^30 = 2^36 = 0 mod 2^32
  assert run(_sum_program(dtypes.int32), [np.ones(1, np.int32), ints], vals=(64,))[0][0] == 0


def test_nested_loops_reduce_rows() -> None:
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
  np.testing.assert_array_equal(run(p, [np.zeros(5, np.float32), x])[0], x.reshape(5, 7).max(axis=1))


def test_gated_load_and_store() -> None:
  p = Prog()
  out, out2, inp = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32), p.glob(2, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 10))
  src_idx = p.alu(Ops.ADD, r, p.const(dtypes.int32, 3))
  in_range = p.alu(Ops.CMPLT, src_idx, p.const(dtypes.int32, 6))  # inp has 6 elements: indexes 6.. are never read
  v = p.load(inp, src_idx, in_range, p.const(dtypes.float32, -1.0))
  even = p.alu(Ops.CMPEQ, p.alu(Ops.MOD, r, p.const(dtypes.int32, 2)), p.const(dtypes.int32, 0))
  p.end(r, p.store(out, r, v), p.store(out2, r, v, even))
  got, got2, _ = run(p, [np.zeros(10, np.float32), np.full(10, 7, np.float32), np.arange(6, dtype=np.float32) * 10])
  np.testing.assert_array_equal(got, [30, 40, 50, -1, -1, -1, -1, -1, -1, -1])
  np.testing.assert_array_equal(got2, [30, 7, 50, 7, -1, 7, -1, 7, -1, 7])


# ---- casts, bitcasts and semantics

CAST_VALUES: dict[DType, list[object]] = {
  dtypes.float32: [0.0, -0.0, 1.5, -1.5, 2.5, -2.7, 100.9, -129.6, 255.5, 256.0, 65504.0, 70000.0, 3e9, -3e9, 2.0**63, -2.0**63,
                   1e20, -1e20, 1e-8, math.inf, -math.inf, math.nan],
  dtypes.float64: [0.0, -0.0, 1.5, -2.5, 255.9, 65519.99, 65520.0, 2.0**31, 2.0**64 + 2**12, -1e300, 1e-300, 5e-324, math.inf, math.nan],
  dtypes.float16: [0.0, -0.0, 1.5, -2.5, 255.9, 65504.0, -65504.0, 6e-8, 1e-4, math.inf, -math.inf, math.nan],
  dtypes.bfloat16: [0.0, -0.0, 1.5, -2.5, 255.0, 3e38, -1e10, 1e-4, math.inf, math.nan],
  dtypes.int32: [0, 1, -1, 127, 128, 255, 256, -129, 2**31 - 1, -2**31, 65504, 65520, 16777217, 123456789],
  dtypes.int64: [0, -1, 2**53 + 1, -2**63, 2**63 - 1, 2**32 + 5, -2**40],
  dtypes.uint8: [0, 1, 127, 128, 255],
  dtypes.bool: [False, True],
}
CAST_TARGETS = [dtypes.bool, dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64,
                dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]


def _cast_to(dst: DType) -> OutFn: return lambda p, xs: p(Ops.CAST, dst, (xs[0],))


@pytest.mark.parametrize("src", list(CAST_VALUES), ids=str)
def test_casts(src: DType) -> None:
  elementwise([(src, [cast_scalar(v, src) for v in CAST_VALUES[src]])], [(dst, _cast_to(dst)) for dst in CAST_TARGETS if dst != src])


@pytest.mark.skipif(not IS_X86, reason="-march=x86-64 is an x86 arch")
def test_half_bf16_without_native_converts() -> None:
  """At baseline x86-64 clang calls out for every half/bf16 conversion: the object's own weak helpers must serve them."""
  base = ClangRenderer(Target("CPU", "CLANG", "x86-64"))
  for src in (dtypes.float16, dtypes.bfloat16, dtypes.float64, dtypes.int64):
    elementwise([(src, [cast_scalar(v, src) for v in CAST_VALUES[src]])],
                [(dst, _cast_to(dst)) for dst in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.int32) if dst != src], base)
  elementwise([(dtypes.float16, [1.5, 3.0, -0.25]), (dtypes.float16, [2.0, 0.0, 3.0])],
              [(dtypes.float16, lambda p, xs: p.alu(Ops.FDIV, xs[0], xs[1])), (dtypes.float16, lambda p, xs: p.alu(Ops.MUL, xs[0], xs[1]))], base)


@pytest.mark.skipif(not IS_X86, reason="-march=x86-64 is an x86 arch")
@np.errstate(all="ignore")  # the sweep includes inf/nan patterns on purpose
def test_half_conversions_exhaustive() -> None:
  """Every half -> float, and float/double -> half rounding (numpy converts correctly), through the soft helpers."""
  base = ClangRenderer(Target("CPU", "CLANG", "x86-64"))
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
    got = run(p, [np.zeros(len(vals), NP[dst]), vals.astype(NP[src])], renderer=base)[0]
    assert_same(got, vals.astype(NP[dst]), dst, f"{src} -> {dst}")


def test_bf16_rounding_matches_alu() -> None:
  vals = [float(x) for x in np.random.default_rng(3).standard_normal(300).astype(np.float32) * 1000] + [3.3895314e38, 3.4e38, 1.0039063]
  vals += [1e-39, -3e-39, 1e-40, 2.0**-130]  # subnormals: AVX512-BF16's convert would flush them (see exact_bf16_flags)
  elementwise([(dtypes.float32, vals)], [(dtypes.bfloat16, _cast_to(dtypes.bfloat16))])
  elementwise([(dtypes.bfloat16, [1.5, -2.0, 3.0e5]), (dtypes.bfloat16, [2.25, 0.1, 1.0e-3])],
              [(dtypes.bfloat16, lambda p, xs, op=op: p.alu(op, xs[0], xs[1])) for op in (Ops.ADD, Ops.MUL, Ops.FDIV, Ops.MAX)])


BITCASTS = [(dtypes.float32, dtypes.int32), (dtypes.float32, dtypes.uint32), (dtypes.int32, dtypes.float32), (dtypes.uint32, dtypes.float32),
            (dtypes.float16, dtypes.int16), (dtypes.uint16, dtypes.float16), (dtypes.float64, dtypes.int64), (dtypes.int64, dtypes.float64),
            (dtypes.bfloat16, dtypes.uint16), (dtypes.uint16, dtypes.bfloat16), (dtypes.int8, dtypes.uint8), (dtypes.uint8, dtypes.int8)]


@pytest.mark.parametrize("src,dst", BITCASTS, ids=str)
def test_bitcast(src: DType, dst: DType) -> None:
  if dtypes.is_float(src): vals = [0.0, -0.0, 1.0, -2.5, 1e-3, math.inf, -math.inf, math.nan]
  else: vals = [0, 1, 5, 127, dtypes.max(src), dtypes.min(src), 0x3F80 if src.itemsize == 2 else 0x3F800000 % (dtypes.max(src) + 1)]
  elementwise([(src, [cast_scalar(v, src) for v in vals])], [(dst, lambda p, xs: p(Ops.BITCAST, dst, (xs[0],)))])


def test_bitcast_of_constant() -> None:
  elementwise([(dtypes.int32, [0])], [(dtypes.float32, lambda p, xs: p(Ops.BITCAST, dtypes.float32, (p.const(dtypes.uint32, 0x40490FDB),))),
                                      (dtypes.float16, lambda p, xs: p(Ops.BITCAST, dtypes.float16, (p.const(dtypes.int16, 0x3C00),)))])


DIV_CASES: dict[DType, tuple[list[int], list[int]]] = {
  dtypes.int32: ([7, -7, 7, -7, 0, 5, -2**31, -2**31, 2**31 - 1, 13, -13, -1], [2, 2, -2, -2, 3, 0, -1, 1, -1, 0, 5, -1]),
  dtypes.int64: ([7, -7, -2**63, -2**63, 2**40 + 1, -5], [-2, 3, -1, 0, -7, 0]),
  dtypes.int8: ([7, -7, -128, -128, 100, 3], [-2, 3, -1, 0, -7, 0]),
  dtypes.uint32: ([7, 2**32 - 1, 0, 2**31, 5], [2, 3, 0, 2**31 + 1, 0]),
  dtypes.uint8: ([7, 255, 0, 200], [2, 0, 3, 7]),
}


@pytest.mark.parametrize("dt", list(DIV_CASES), ids=str)
def test_idiv_mod(dt: DType) -> None:
  a, b = DIV_CASES[dt]
  consts = [3, 0] + ([-3, -1] if dt in (dtypes.int32, dtypes.int64, dtypes.int8) else [])
  outs: list[tuple[DType, OutFn]] = [(dt, lambda p, xs, op=op: p.alu(op, xs[0], xs[1])) for op in (Ops.IDIV, Ops.MOD)]
  outs += [(dt, lambda p, xs, op=op, c=c: p.alu(op, xs[0], p.const(dt, c))) for op in (Ops.IDIV, Ops.MOD) for c in consts]
  elementwise([(dt, a), (dt, b)], outs)


MAX_A = [1.0, math.nan, math.nan, -math.inf, 0.0, -0.0, 2.0, math.inf, -3.0]
MAX_B = [math.nan, 1.0, math.nan, -1.0, -0.0, 0.0, 3.0, math.nan, -3.0]


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16], ids=str)
def test_max_and_compares_with_nan(dt: DType) -> None:
  outs: list[tuple[DType, OutFn]] = [(dt, lambda p, xs: p.alu(Ops.MAX, xs[0], xs[1])),
                                     (dt, lambda p, xs: p.alu(Ops.MAX, xs[0], p.const(dt, math.nan)))]
  outs += [(dtypes.bool, lambda p, xs, op=op: p.alu(op, xs[0], xs[1])) for op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)]
  outs += [(dt, lambda p, xs: p.alu(Ops.WHERE, p.alu(Ops.CMPLT, xs[0], xs[1]), xs[0], p.const(dt, -math.inf)))]
  elementwise([(dt, MAX_A), (dt, MAX_B)], outs)


TRANSCENDENTAL_X = [0.0, -0.0, 0.5, 1.0, -1.0, 2.5, -2.5, 10.0, 100.0, 200.0, -200.0, 1e-3, 3.14159, 1e4, -1e4, 1e-30,
                    math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16], ids=str)
def test_unary_math(dt: DType) -> None:
  xs_in = [cast_scalar(v, dt) for v in TRANSCENDENTAL_X]
  exact = (Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.NEG)  # correctly rounded in both C and alu
  elementwise([(dt, xs_in)], [(dt, lambda p, xs, op=op: p(op, dt, (xs[0],))) for op in exact])
  # libm's exp2/log2/sin may differ from Python's by an ulp: compare with a tolerance
  ops = (Ops.EXP2, Ops.LOG2, Ops.SIN)
  p = Prog()
  outs = [p.glob(i, dt) for i in range(len(ops))]
  inp = p.glob(len(ops), dt)
  r = p.loop(p.const(dtypes.int32, len(xs_in)))
  x = p.load(inp, r)
  p.end(r, *[p.store(o, r, p(op, dt, (x,))) for o, op in zip(outs, ops)])
  got = run(p, [np.zeros(len(xs_in), NP[dt]) for _ in ops] + [np.array(xs_in, NP[dt])])
  rtol = {dtypes.float32: 3e-7, dtypes.float64: 1e-15, dtypes.float16: 1e-3}[dt]
  for g, op in zip(got, ops):
    want: np.ndarray = np.array([exec_alu(op, dt, (v,)) for v in xs_in], NP[dt])
    np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=0, equal_nan=True, err_msg=str(op))


INT_OPS = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.AND, Ops.OR, Ops.XOR, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)
INT_VALUES: dict[DType, tuple[list[int], list[int]]] = {
  dtypes.int32: ([2**31 - 1, -2**31, 65536, 123456789, -5, 0, 7], [1, -1, 65536, 1000, 3, -2**31, -7]),
  dtypes.int64: ([2**63 - 1, -2**63, 2**32, -5], [1, -1, 2**32, 9]),
  dtypes.uint8: ([200, 0, 255, 17], [100, 1, 255, 3]),
  dtypes.int8: ([127, -128, -128, 5], [1, -1, 127, -3]),
  dtypes.uint16: ([65535, 0, 40000], [65535, 1, 3]),
  dtypes.uint32: ([2**32 - 1, 0, 2**31], [1, 1, 2**31]),
}


@pytest.mark.parametrize("dt", list(INT_VALUES), ids=str)
def test_int_ops_wraparound(dt: DType) -> None:
  a, b = INT_VALUES[dt]
  outs: list[tuple[DType, OutFn]] = [(dtypes.bool if op in GroupOp.Comparison else dt, lambda p, xs, op=op: p.alu(op, xs[0], xs[1]))
                                     for op in INT_OPS]
  outs += [(dt, lambda p, xs: p(Ops.NEG, dt, (xs[0],))), (dt, lambda p, xs: p.alu(Ops.MULACC, xs[0], xs[1], xs[0])),
           (dt, lambda p, xs: p.alu(Ops.SHL, xs[0], p.const(dt, 3))), (dt, lambda p, xs: p.alu(Ops.SHR, xs[0], p.const(dt, 2))),
           (dt, lambda p, xs: p.alu(Ops.WHERE, p.alu(Ops.CMPLT, xs[0], xs[1]), xs[1], p.const(dt, dtypes.min(dt))))]
  elementwise([(dt, a), (dt, b)], outs)


def test_float_arith_and_bool_logic() -> None:
  a, b = [1.5, -0.0, 1e30, 3.0, math.inf, 0.0], [2.0, 0.0, 1e30, 0.0, math.inf, 0.0]
  elementwise([(dtypes.float32, a), (dtypes.float32, b)], [(dtypes.float32, lambda p, xs, op=op: p.alu(op, xs[0], xs[1]))
                                                           for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV)])
  ta, tb = [False, False, True, True], [False, True, False, True]
  elementwise([(dtypes.bool, ta), (dtypes.bool, tb)], [(dtypes.bool, lambda p, xs, op=op: p.alu(op, xs[0], xs[1]))
                                                       for op in (Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE, Ops.CMPLT)]
              + [(dtypes.bool, lambda p, xs: p(Ops.NEG, dtypes.bool, (xs[0],)))])


def test_constants_render_exactly() -> None:
  cases: list[tuple[DType, list[Any]]] = [(dtypes.float32, [0.1, -0.0, 3.4028234663852886e38, 1e-45, math.inf, -math.inf, math.nan]),
           (dtypes.float64, [0.1, 5e-324, -1e308]),
           (dtypes.float16, [0.1, -65504.0, 6e-08]), (dtypes.int32, [-2**31, 2**31 - 1]), (dtypes.int64, [-2**63, 2**63 - 1]),
           (dtypes.uint64, [2**64 - 1]), (dtypes.uint32, [2**32 - 1]), (dtypes.int8, [-128]), (dtypes.bool, [True, False])]
  outs = [(dt, lambda p, xs, dt=dt, v=v: p(Ops.NEG, dt, (p.const(dt, cast_scalar(v, dt)),))) for dt, vs in cases for v in vs]
  elementwise([(dtypes.int32, [0])], outs)


# ---- errors, compiler discovery, flags

def test_compile_error_carries_source_and_message() -> None:
  src = "void broken(float* restrict data0) {\n  data0[0] = undefined_thing;\n}\n"
  with pytest.raises(CompileError) as e:
    RENDERER.compiler.compile(src)
  assert "undefined_thing" in e.value.message and "error" in e.value.message
  assert "data0[0] = undefined_thing;" in str(e.value) and "clang" in str(e.value)


def test_unsupported_dtype() -> None:
  # fp8 reaches the renderer only as bytes (the codegen runs pm_fp8_as_bytes, its extra_matcher): raw fp8 uops have no C type
  p = Prog()
  p.glob(0, dtypes.fp8e4m3)
  with pytest.raises(UnsupportedDTypeError, match="CLANG.*fp8e4m3"):
    RENDERER.render("fp8", p.uops)
  assert dtypes.fp8e4m3 in RENDERER.supported_dtypes and dtypes.float16 in RENDERER.supported_dtypes


def test_unknown_op_is_rejected() -> None:
  p = Prog()
  p(Ops.SPECIAL, dtypes.int32, (), ("gidx0", 16))
  with pytest.raises(NotImplementedError, match="gidx0"):
    RENDERER.render("special", p.uops)


def test_target_flags_and_cachekey() -> None:
  r = ClangRenderer(Target("CPU", "CLANG", "x86-64-v3", ("+avx2", "-avx512f", "fma")))
  flags = r.compiler.flags
  march = march_flag(r.compiler.cc, "x86-64-v3")
  assert flags[-3:] == ["-mavx2", "-mno-avx512f", "-mfma"] and march in flags
  assert {"-ffp-contract=off", "-fno-math-errno", "-fPIC", "-O2", "-c"} <= set(r.compiler.flags)
  key = r.compiler.cachekey
  assert os.path.basename(r.compiler.cc[0]) in key and march in key and "version" in key.lower()
  assert key != RENDERER.compiler.cachekey
  with pytest.raises(ValueError):
    feature_flags(("avx2; rm -rf",))


def test_march_names_for_zig() -> None:
  # zig cc rejects LLVM's hyphenated CPU names ("unknown CPU: 'x86'") and takes them with underscores
  zig, zig_path, clang = [sys.executable, "-m", "ziglang", "cc"], ["/opt/zig/zig", "cc"], ["/usr/bin/clang-19"]
  assert march_flag(zig, "x86-64-v3") == march_flag(zig_path, "x86-64-v3") == "-march=x86_64_v3"
  assert march_flag(zig, "skylake-avx512") == "-march=skylake_avx512" and march_flag(zig, "native") == "-march=native"
  assert march_flag(clang, "x86-64-v3") == "-march=x86-64-v3"


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 CPU names")
def test_hyphenated_arch_compiles_half() -> None:
  # with any compiler found here (zig cc on a fresh machine), LLVM's CPU name works and half arithmetic is found
  r = ClangRenderer(Target("CPU", "CLANG", "x86-64"))
  assert r.compiler.probe_error(_PROBES[dtypes.half]) is None, r.compiler.probe_error(_PROBES[dtypes.half])
  assert dtypes.half in r.supported_dtypes


def test_bundled_compiler_when_asked() -> None:
  # the nox sessions set CC to the ziglang wheel's compiler, so CI tests what a fresh machine has, not a clang installed by hand
  if os.environ.get("CC") != "python -m ziglang cc": pytest.skip("CC is not the bundled compiler")
  cc = find_c_compiler()
  assert cc is not None and is_zig(cc), cc


def test_probe_failure_shows_compiler_error() -> None:
  # a CPU the compiler doesn't know must not read as "no half arithmetic": the compiler's own error is in the message
  r = ClangRenderer(Target("CPU", "CLANG", "no-such-cpu-xyz"))
  with pytest.raises(UnsupportedDTypeError) as e: r.render_dtype(dtypes.half)
  assert "no-such-cpu-xyz" in str(e.value) or "no_such_cpu_xyz" in str(e.value)
  assert "failed to compile" in str(e.value) and "check the arch" in str(e.value)


def test_find_c_compiler_order(monkeypatch: pytest.MonkeyPatch) -> None:
  found = find_c_compiler()
  assert found is not None
  monkeypatch.setenv("CC", found[0])
  assert find_c_compiler() == [found[0]]
  monkeypatch.setenv("CC", "definitely-not-a-compiler-xyz")
  assert find_c_compiler() is not None
  monkeypatch.setenv("CC", "")
  monkeypatch.setenv("PATH", "")
  zig = find_c_compiler()
  assert zig is None or (is_zig(zig) and zig[-1] == "cc")
  assert (clang_available() is None) == (zig is not None)


def test_bundled_zig_runs_without_a_python_in_between(monkeypatch: pytest.MonkeyPatch) -> None:
  """CC='python -m ziglang cc' (the nox sessions') runs the wheel's zig binary itself: no interpreter starts for each kernel.
  Compiled binaries are cached by the compiler's name and version, not its path (another venv's zig shares them)."""
  import importlib.util
  if importlib.util.find_spec("ziglang") is None: pytest.skip("no ziglang wheel")
  monkeypatch.setenv("CC", "python -m ziglang cc")
  cc = find_c_compiler()
  assert cc is not None and os.path.basename(cc[0]) == "zig" and cc[1:] == ["cc"], cc
  here, elsewhere = ClangCompiler(cc=cc), ClangCompiler(cc=["/some/other/venv/ziglang/zig", "cc"])
  elsewhere.__dict__["flags"] = here.flags  # (its flags would be probed by running it)
  monkeypatch.setattr(sys.modules[ClangCompiler.__module__], "compiler_version", lambda cc: "clang version 19")
  assert here.cachekey == elsewhere.cachekey and "/" not in here.cachekey.split(":")[1]


def test_zig_cc_path() -> None:
  import importlib.util
  import sys
  if importlib.util.find_spec("ziglang") is None: pytest.skip("ziglang not installed (pip install ziglang)")
  r = ClangRenderer()
  r.compiler = ClangCompiler(cc=[sys.executable, "-m", "ziglang", "cc"])
  elementwise([(dtypes.float16, [1.5, -2.0]), (dtypes.int32, [7, -7])],
              [(dtypes.int32, lambda p, xs: p.alu(Ops.IDIV, xs[1], p(Ops.CAST, dtypes.int32, (xs[0],)))),
               (dtypes.float64, lambda p, xs: p(Ops.CAST, dtypes.float64, (xs[0],)))], r)


def test_gcc_compiles_our_c() -> None:
  """A machine without clang may compile the CLANG renderer's C with gcc ($CC=gcc; the H200 machine's `cc`): bitcasts (the fast
  exp2/log2 use them) and half conversions must not need clang-only builtins (gcc's C has no __builtin_bit_cast)."""
  import shutil
  import subprocess
  import sys
  if shutil.which("gcc") is None:
    if os.environ.get("CI") == "true": pytest.fail("gcc is missing: .ci/run installs it (apt-get install gcc)")
    pytest.skip("no gcc on this machine")
  code = ("import numpy as np\nfrom tinygrad import Tensor, dtypes\n"
          "x = np.array([1.0, -2.5, 3.0, 0.5], np.float32)\nt = Tensor(x)\n"
          "np.testing.assert_allclose(t.exp().numpy(), np.exp(x), rtol=1e-6)\n"
          "assert (t.bitcast(dtypes.int32).numpy() == x.view(np.int32)).all()\n"
          "np.testing.assert_allclose(t.cast(dtypes.half).cast(dtypes.float).numpy(), x.astype(np.float16))\n")
  env = {**os.environ, "CC": "gcc", "DEV": "CPU:CLANG", "CACHELEVEL": "0"}
  res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
