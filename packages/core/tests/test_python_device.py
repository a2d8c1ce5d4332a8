"""The PYTHON device runs hand-built linearized programs (docs/linear-ir.md) exactly; NULL compiles but never runs."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from tinygrad.device.devstring import Target
from tinygrad.dtype import DType, dtypes
from tinygrad.runtime.null import NullProgram, open_null
from tinygrad.runtime.python import PythonAllocator, PythonProgram, PythonRenderer, open_python
from tinygrad.uop.ops import Ops, UOp

f32, i32 = dtypes.float32, dtypes.int32
NP = {dtypes.float32: np.float32, dtypes.int32: np.int32, dtypes.float16: np.float16, dtypes.uint32: np.uint32,
      dtypes.bool: np.bool_, dtypes.uint16: np.uint16, dtypes.uint8: np.uint8, dtypes.int64: np.int64}


# ---- building programs

def glob(n: int, dt: DType, size: int = -1) -> UOp: return UOp(Ops.DEFINE_GLOBAL, dt.ptr(size), (), n)
def const(dt: DType, x: Any) -> UOp: return UOp.const(dt, x)
def rng(end: UOp, i: int = 0) -> UOp: return UOp(Ops.RANGE, i32, (end,), (i, "loop"))
def end(r: UOp, *deps: UOp) -> UOp: return UOp(Ops.END, dtypes.void, (r, *deps))
def alu(op: Ops, dt: DType, *src: UOp) -> UOp: return UOp(op, dt, src)
def load(idx: UOp, *gate_alt: UOp) -> UOp: return UOp(Ops.LOAD, idx.dtype.base, (idx, *gate_alt))  # type: ignore[attr-defined]


def compile_prog(uops: list[UOp], name: str = "k") -> PythonProgram:
  renderer = PythonRenderer(Target("PYTHON"))
  return PythonProgram(name, renderer.compiler.compile(renderer.render(name, uops)))


def run(uops: list[UOp], *arrays: np.ndarray, name: str = "k", **kwargs: Any) -> list[np.ndarray]:
  """Run the program on copies of `arrays` (buffer i = arrays[i]); returns the buffers afterwards."""
  bufs = [bytearray(a.tobytes()) for a in arrays]
  compile_prog(uops, name)(*bufs, **kwargs)
  return [np.frombuffer(b, dtype=a.dtype).copy() for a, b in zip(arrays, bufs, strict=True)]


def elementwise(fn: Any, n: int, out_dt: DType, in_dts: tuple[DType, ...]) -> list[UOp]:
  """for i < n: out[i] = fn(loads of in[j][i]...)"""
  out, ins = glob(0, out_dt, n), [glob(j + 1, dt, n) for j, dt in enumerate(in_dts)]
  r = rng(const(i32, n))
  idxs = [b.index(r) for b in ins]
  lds = [load(x) for x in idxs]
  res = fn(*lds)
  body = [u for u in res.toposort() if u not in lds and u.op not in (Ops.DEFINE_GLOBAL, Ops.RANGE, Ops.INDEX, Ops.CONST)]
  consts = [u for u in res.toposort() if u.op is Ops.CONST]
  st = out.index(r).store(res)
  pairs = [u for p in zip(idxs, lds, strict=True) for u in p]
  return list(dict.fromkeys([out, *ins, *consts, r.src[0], r, *pairs, *body, out.index(r), st, end(r, st)]))


# ---- loops

def test_add_loop():
  a, b = np.arange(16, dtype=np.float32) * 0.5, np.linspace(-3, 3, 16, dtype=np.float32)
  prog = elementwise(lambda x, y: alu(Ops.ADD, f32, x, y), 16, f32, (f32, f32))
  out = run(prog, np.zeros(16, np.float32), a, b)[0]
  np.testing.assert_array_equal(out, a + b)


def test_buffers_without_access_are_no_parameters():
  """A kernel whose DEFINE_GLOBAL 1 was simplified away (a view that reads only padding) numbers its globals 0 and 2; the
  engine then passes just those two buffers, in order, as the compiled renderers take them. All three work too."""
  a = np.arange(4, dtype=np.float32)
  out, inp = glob(0, f32, 4), glob(2, f32, 4)
  r = rng(const(i32, 4))
  ld = load(inp.index(r))
  st = out.index(r).store(ld)
  prog = compile_prog([out, inp, const(i32, 4), r, inp.index(r), ld, out.index(r), st, end(r, st)])
  bufs = [bytearray(4 * 4), bytearray(a.tobytes())]
  prog(*bufs)
  np.testing.assert_array_equal(np.frombuffer(bufs[0], np.float32), a)
  full = [bytearray(4 * 4), bytearray(4 * 4), bytearray((a + 1).tobytes())]
  prog(*full)
  np.testing.assert_array_equal(np.frombuffer(full[0], np.float32), a + 1)
  with pytest.raises(TypeError, match="takes 3 buffers, got 1"): prog(bytearray(16))


def test_loop_with_end_zero_runs_nothing():
  out = glob(0, f32, 4)
  r = rng(const(i32, 0))
  st = out.index(r).store(const(f32, 1.0))
  res = run([out, const(i32, 0), r, const(f32, 1.0), out.index(r), st, end(r, st)], np.full(4, 7, np.float32))[0]
  np.testing.assert_array_equal(res, np.full(4, 7, np.float32))


def test_nested_loops():
  n, m = 3, 5
  out, a = glob(0, i32, n * m), glob(1, i32, n * m)
  r0, r1 = rng(const(i32, n), 0), rng(const(i32, m), 1)
  idx = alu(Ops.ADD, i32, alu(Ops.MUL, i32, r0, const(i32, m)), r1)
  ld = load(a.index(idx))
  val = alu(Ops.ADD, i32, alu(Ops.MUL, i32, ld, const(i32, 2)), r0)
  st = out.index(idx).store(val)
  e1 = end(r1, st)
  prog = [out, a, const(i32, n), const(i32, m), const(i32, 2), r0, r1, idx.src[0], idx, a.index(idx), ld, val.src[0], val,
          out.index(idx), st, e1, end(r0, e1)]
  src = np.arange(n * m, dtype=np.int32) - 4
  res = run(prog, np.zeros(n * m, np.int32), src)[0]
  np.testing.assert_array_equal(res.reshape(n, m), src.reshape(n, m) * 2 + np.arange(n, dtype=np.int32)[:, None])


def test_reduction_with_define_reg():
  n, m = 4, 6
  out, a = glob(0, f32, n), glob(1, f32, n * m)
  acc = UOp(Ops.DEFINE_REG, f32.ptr(1, "reg"), (), 0)
  zero = const(i32, 0)
  r0, r1 = rng(const(i32, n), 0), rng(const(i32, m), 1)
  init = acc.index(zero).store(const(f32, 0.0))
  idx = alu(Ops.ADD, i32, alu(Ops.MUL, i32, r0, const(i32, m)), r1)
  ld, cur = load(a.index(idx)), load(acc.index(zero))
  upd = acc.index(zero).store(alu(Ops.ADD, f32, cur, ld))
  e1 = end(r1, upd)
  total = load(acc.index(zero))
  st = out.index(r0).store(total)
  prog = [out, a, acc, zero, const(i32, n), const(i32, m), const(f32, 0.0), r0, acc.index(zero), init, r1, idx.src[0], idx,
          a.index(idx), ld, cur, upd.src[1], upd, e1, total, out.index(r0), st, end(r0, st)]
  src = np.random.default_rng(0).standard_normal(n * m).astype(np.float32)
  res = run(prog, np.zeros(n, np.float32), src)[0]
  expect = np.zeros(n, np.float32)
  for j in range(m): expect += src.reshape(n, m)[:, j]  # same order of float32 additions
  np.testing.assert_array_equal(res, expect)


# ---- memory

def test_gated_load_and_store():
  n = 8
  out, a = glob(0, f32, n), glob(1, f32, n)
  r = rng(const(i32, n))
  shifted = alu(Ops.ADD, i32, r, const(i32, 3))
  ok = alu(Ops.CMPLT, dtypes.bool, shifted, const(i32, n))
  ld = load(a.index(shifted), ok, const(f32, -1.0))  # out of bounds when the gate is false: must not be touched
  even = alu(Ops.CMPEQ, dtypes.bool, alu(Ops.MOD, i32, r, const(i32, 2)), const(i32, 0))
  st = out.index(r).store(ld, even)
  prog = [out, a, const(i32, n), const(i32, 3), const(f32, -1.0), const(i32, 2), const(i32, 0), r, shifted, ok,
          a.index(shifted), ld, even.src[0], even, out.index(r), st, end(r, st)]
  src = np.arange(n, dtype=np.float32) + 10
  res = run(prog, np.full(n, 99, np.float32), src)[0]
  expect = np.where(np.arange(n) % 2 == 0, np.where(np.arange(n) + 3 < n, np.roll(src, -3), -1), 99).astype(np.float32)
  np.testing.assert_array_equal(res, expect)


@pytest.mark.parametrize("bad", [5, -1])
def test_out_of_bounds_raises(bad: int):
  out, a = glob(0, f32, 4), glob(1, f32, 4)
  r = rng(const(i32, 4))
  idx = alu(Ops.ADD, i32, r, const(i32, bad if bad < 0 else 1))
  ld = load(a.index(idx))
  st = out.index(r).store(ld)
  prog = [out, a, const(i32, 4), const(i32, bad if bad < 0 else 1), r, idx, a.index(idx), ld, out.index(r), st, end(r, st)]
  with pytest.raises(IndexError, match=r"kernel 'E_oob'.*buffer 1"):
    run(prog, np.zeros(4, np.float32), np.ones(4, np.float32), name="E_oob")


def test_out_of_bounds_store_into_register():
  acc = UOp(Ops.DEFINE_REG, f32.ptr(2, "reg"), (), 0)
  st = acc.index(const(i32, 2)).store(const(f32, 1.0))
  with pytest.raises(IndexError, match="register"):
    run([acc, const(i32, 2), const(f32, 1.0), acc.index(const(i32, 2)), st])


# ---- dtypes

def test_casts():
  n = 6
  src = np.array([-2.7, -0.5, 0.0, 1.5, 2.9, 1000.25], dtype=np.float32)
  prog = elementwise(lambda x: UOp(Ops.CAST, i32, (x,)), n, i32, (f32,))
  np.testing.assert_array_equal(run(prog, np.zeros(n, np.int32), src)[0], np.trunc(src).astype(np.int32))
  prog = elementwise(lambda x: UOp(Ops.CAST, dtypes.float16, (x,)), n, dtypes.float16, (f32,))
  np.testing.assert_array_equal(run(prog, np.zeros(n, np.float16), src)[0], src.astype(np.float16))
  prog = elementwise(lambda x: UOp(Ops.CAST, f32, (x,)), n, f32, (dtypes.float16,))
  np.testing.assert_array_equal(run(prog, np.zeros(n, np.float32), src.astype(np.float16))[0], src.astype(np.float16).astype(np.float32))


def bf16_bits(x: np.ndarray) -> np.ndarray:
  """float32 -> bfloat16 bits, round to nearest even (numpy has no bfloat16)."""
  b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
  return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def test_bfloat16_buffers():
  n = 5
  src = np.array([1.0, -3.140625, 1.00390625, 65504.0, 1e-3], dtype=np.float32)
  to_bf = elementwise(lambda x: UOp(Ops.CAST, dtypes.bfloat16, (x,)), n, dtypes.bfloat16, (f32,))
  bits = run(to_bf, np.zeros(n, np.uint16), src)[0]
  np.testing.assert_array_equal(bits, bf16_bits(src))
  from_bf = elementwise(lambda x: alu(Ops.MUL, f32, UOp(Ops.CAST, f32, (x,)), const(f32, 2.0)), n, f32, (dtypes.bfloat16,))
  back = run(from_bf, np.zeros(n, np.float32), bits)[0]
  np.testing.assert_array_equal(back, (bits.astype(np.uint32) << 16).view(np.float32) * 2)


def test_fp8_store():
  src = np.array([1.0, -2.0, 0.5, 448.0], dtype=np.float32)
  prog = elementwise(lambda x: UOp(Ops.CAST, dtypes.fp8e4m3, (x,)), 4, dtypes.fp8e4m3, (f32,))
  np.testing.assert_array_equal(run(prog, np.zeros(4, np.uint8), src)[0], np.array([0x38, 0xC0, 0x30, 0x7E], np.uint8))


def test_bitcast():
  src = np.array([1.0, -0.0, np.inf, 3.5], dtype=np.float32)
  prog = elementwise(lambda x: UOp(Ops.BITCAST, dtypes.uint32, (x,)), 4, dtypes.uint32, (f32,))
  np.testing.assert_array_equal(run(prog, np.zeros(4, np.uint32), src)[0], src.view(np.uint32))
  ints = np.array([0x3F800000, -1, 0, 0x40490FDB], dtype=np.int32)
  prog = elementwise(lambda x: UOp(Ops.BITCAST, f32, (x,)), 4, f32, (i32,))
  np.testing.assert_array_equal(run(prog, np.zeros(4, np.float32), ints)[0].view(np.int32), ints)


def test_bool_buffer_and_compare():
  a = np.array([1.0, np.nan, -2.0, 5.0], np.float32)
  b = np.array([2.0, 1.0, -2.0, np.nan], np.float32)
  prog = elementwise(lambda x, y: alu(Ops.CMPLT, dtypes.bool, x, y), 4, dtypes.bool, (f32, f32))
  np.testing.assert_array_equal(run(prog, np.zeros(4, np.bool_), a, b)[0], a < b)
  prog = elementwise(lambda x, y: alu(Ops.CMPNE, dtypes.bool, x, y), 4, dtypes.bool, (f32, f32))
  np.testing.assert_array_equal(run(prog, np.zeros(4, np.bool_), a, b)[0], a != b)


def test_int_division_is_c_style():
  a = np.array([7, -7, 7, -7, 0, 5], np.int32)
  b = np.array([2, 2, -2, -2, 3, 0], np.int32)
  q = run(elementwise(lambda x, y: alu(Ops.IDIV, i32, x, y), 6, i32, (i32, i32)), np.zeros(6, np.int32), a, b)[0]
  m = run(elementwise(lambda x, y: alu(Ops.MOD, i32, x, y), 6, i32, (i32, i32)), np.zeros(6, np.int32), a, b)[0]
  np.testing.assert_array_equal(q, [3, -3, -3, 3, 0, 0])  # truncates toward zero; x/0 gives 0 (exec_alu's choice)
  np.testing.assert_array_equal(m, [1, -1, 1, -1, 0, 0])


def test_int32_wraps():
  a = np.array([2**31 - 1, -2**31, 123456789], np.int32)
  out = run(elementwise(lambda x: alu(Ops.MUL, i32, alu(Ops.ADD, i32, x, const(i32, 1)), const(i32, 3)), 3, i32, (i32,)),
            np.zeros(3, np.int32), a)[0]
  with np.errstate(over="ignore"): np.testing.assert_array_equal(out, (a + np.int32(1)) * np.int32(3))


def test_float_math():
  a = np.array([0.25, 1.0, 2.0, 9.0], np.float32)
  b = np.array([4.0, -1.0, 0.5, 3.0], np.float32)
  cases = [
    (lambda x, y: UOp(Ops.MULACC, f32, (x, y, x)), lambda x, y: x * y + x),
    (lambda x, y: alu(Ops.MAX, f32, x, y), np.maximum),
    (lambda x, y: alu(Ops.FDIV, f32, x, y), lambda x, y: x / y),
    (lambda x, y: UOp(Ops.WHERE, f32, (alu(Ops.CMPLT, dtypes.bool, x, y), x, y)), lambda x, y: np.where(x < y, x, y)),
    (lambda x, y: alu(Ops.SQRT, f32, x), lambda x, y: np.sqrt(x)),
    (lambda x, y: alu(Ops.EXP2, f32, x), lambda x, y: np.exp2(x)),
    (lambda x, y: alu(Ops.NEG, f32, y), lambda x, y: -y),
  ]
  for fn, ref in cases:
    out = run(elementwise(fn, 4, f32, (f32, f32)), np.zeros(4, np.float32), a, b)[0]
    np.testing.assert_allclose(out, ref(a, b).astype(np.float32), rtol=1e-6)


# ---- parameters and launch

def test_define_var():
  out = glob(0, i32, 10)
  n = UOp(Ops.DEFINE_VAR, i32, (), ("n", 0, 10))
  k = UOp(Ops.DEFINE_VAR, i32, (), ("k", -5, 5))
  r = rng(n)
  val = alu(Ops.MUL, i32, r, k)
  st = out.index(r).store(val)
  prog = compile_prog([out, n, k, r, val, out.index(r), st, end(r, st)])
  buf = bytearray(40)
  prog(buf, vals=(4, 3))
  np.testing.assert_array_equal(np.frombuffer(buf, np.int32), [0, 3, 6, 9, 0, 0, 0, 0, 0, 0])
  prog(buf, 10, -2)  # vars may also follow the buffers positionally
  np.testing.assert_array_equal(np.frombuffer(buf, np.int32), np.arange(10) * -2)
  with pytest.raises(ValueError, match="outside its range"): prog(buf, vals=(11, 0))
  with pytest.raises(TypeError, match="2 int vars"): prog(buf, vals=(1,))


def test_special_threads():
  out = glob(0, i32, 6)
  g = UOp(Ops.SPECIAL, i32, (), ("gidx0", 6))
  val = alu(Ops.MUL, i32, g, g)
  st = out.index(g).store(val)
  buf = bytearray(24)
  compile_prog([out, g, val, out.index(g), st])(buf, global_size=(6, 1, 1))
  np.testing.assert_array_equal(np.frombuffer(buf, np.int32), np.arange(6) ** 2)


def test_wait_returns_time():
  out = glob(0, f32, 1)
  st = out.index(const(i32, 0)).store(const(f32, 2.0))
  prog = compile_prog([out, const(i32, 0), const(f32, 2.0), out.index(const(i32, 0)), st])
  buf = bytearray(4)
  assert prog(buf) is None
  t = prog(buf, wait=True)
  assert isinstance(t, float) and t >= 0.0 and np.frombuffer(buf, np.float32)[0] == 2.0


# ---- renderer and structure errors

def test_renderer():
  r = PythonRenderer(Target("PYTHON", "PYTHON", "sm_80"))
  assert (r.device, r.name, r.arch) == ("PYTHON", "PYTHON", "sm_80")
  src = r.render("E_1", elementwise(lambda x: alu(Ops.NEG, f32, x), 1, f32, (f32,)))
  assert "E_1" in src and "NEG" in src  # readable for DEBUG output
  with pytest.raises(ValueError, match="REDUCE_AXIS"): r.render("bad", [UOp(Ops.REDUCE_AXIS, f32, (), None)])
  with pytest.raises(ValueError, match="vector"): r.render("bad", [UOp(Ops.CONST, f32.vec(4), (), 1.0)])
  with pytest.raises(ValueError, match="not a PYTHON program"): PythonProgram("x", b"int main() {}")


def test_bad_loop_structure():
  r0, r1 = rng(const(i32, 2), 0), rng(const(i32, 2), 1)
  with pytest.raises(ValueError, match="innermost"): compile_prog([const(i32, 2), r0, r1, end(r0), end(r1)])
  with pytest.raises(ValueError, match="no END"): compile_prog([const(i32, 2), r0])


# ---- devices

def test_python_device_allocator():
  dev = open_python(1, Target("PYTHON"))
  assert dev.device == "PYTHON:1" and dev.runs_kernels and isinstance(dev.allocator, PythonAllocator)
  buf = dev.allocator.alloc(8)
  dev.allocator.copyin(buf, memoryview(np.array([1.5, -2.0], np.float32).tobytes()))
  out = memoryview(bytearray(8))
  dev.allocator.copyout(out, buf)
  np.testing.assert_array_equal(np.frombuffer(out, np.float32), [1.5, -2.0])
  view = dev.allocator.view(buf, 4, 4)  # type: ignore[attr-defined]
  prog = dev.runtime("k", PythonRenderer().render("k", elementwise(lambda x: alu(Ops.ADD, f32, x, x), 1, f32, (f32,))))  # type: ignore[misc]
  prog(view, buf)  # out = the second float, in = the first
  np.testing.assert_array_equal(np.frombuffer(buf, np.float32), [1.5, 3.0])


def test_null_device():
  dev = open_null(0, Target("NULL"))
  assert dev.device == "NULL" and not dev.runs_kernels
  buf = dev.allocator.alloc(16)
  dev.allocator.copyin(buf, memoryview(bytes(16)))
  prog = dev.runtime("k", b"anything")  # type: ignore[misc]
  assert isinstance(prog, NullProgram) and prog(buf, wait=True) == 0.0 and prog(buf) is None
  with pytest.raises(RuntimeError, match="NULL device .* DEV=CPU or DEV=PYTHON"): dev.allocator.copyout(memoryview(bytearray(16)), buf)


def test_builtin_plugin_registers():
  from tinygrad.runtime import builtin
  devices: list[Any] = []
  renderers: list[Any] = []
  builtin.register_devices(devices.append)
  builtin.register_renderers(renderers.append)
  assert {d.name: d.runs_kernels for d in devices} == {"PYTHON": True, "NULL": False, "DISK": False}
  (spec,) = renderers
  assert (spec.device, spec.name, spec.default) == ("PYTHON", "PYTHON", True) and spec.accepts("sm_80")
  assert isinstance(spec.make(Target("PYTHON", "PYTHON", "sm_80")), PythonRenderer)


def test_nan_and_inf_constants():
  prog = elementwise(lambda x: alu(Ops.ADD, f32, x, const(f32, math.inf)), 2, f32, (f32,))
  out = run(prog, np.zeros(2, np.float32), np.array([1.0, -math.inf], np.float32))[0]
  assert out[0] == np.inf and np.isnan(out[1])


# ---- the interpreter's precompiled conversions (uop/alu.py) against the reference ones they replace in its hot paths

_EDGE_VALUES = [0, 1, -1, True, False, 0.5, -0.5, 2.5, -2.5, 3.7, 1e10, -1e10, 2 ** 40 + 3, -(2 ** 63), 2 ** 64 - 1, 65504.0, 65520.0,
                3.5e38, -3.5e38, 1e-45, 1e-8, math.inf, -math.inf, math.nan]


def _same(a: Any, b: Any) -> bool:
  return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or (a == b and type(a) is type(b))


@pytest.mark.parametrize("dt", [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint32, dtypes.int64, dtypes.uint64,
                                dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.fp8e4m3, dtypes.fp8e5m2],
                         ids=lambda dt: dt.name)
def test_caster_is_cast_scalar(dt: DType):
  """caster(dt) against C's conversion written out here: floats to ints truncate toward zero (NaN and inf to 0), ints wrap,
  floats round as dtype.truncate does."""
  from tinygrad.dtype import truncate
  from tinygrad.uop.alu import caster
  def cast_scalar(x: Any, dt: DType) -> Any:
    if dt == dtypes.bool: return bool(x)
    if dtypes.is_int(dt):
      if isinstance(x, float):
        if math.isnan(x) or math.isinf(x): return 0
        x = math.trunc(x)
      return truncate(dt, int(x))
    return truncate(dt, float(x))
  values = _EDGE_VALUES + list(np.random.default_rng(0).uniform(-1e6, 1e6, 200)) + [int(x) for x in np.random.default_rng(1).integers(-2 ** 62, 2 ** 62, 50)]
  for x in values:
    x = float(x) if isinstance(x, np.floating) else x
    assert _same(caster(dt)(x), cast_scalar(x, dt)), (dt, x)


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32, dtypes.float64], ids=lambda dt: dt.name)
def test_bit_readers_and_writers_are_from_bits_and_to_bits(dt: DType):
  from tinygrad.uop.alu import bits_reader, bits_writer, from_bits, to_bits
  rng = np.random.default_rng(2)
  for bits in [0, 1, (1 << (8 * dt.itemsize)) - 1] + [int(b) for b in rng.integers(0, 1 << min(8 * dt.itemsize, 63), 2000)]:
    value = from_bits(bits, dt)
    assert _same(bits_reader(dt)(bits), value), (dt, bits)
    if value == value: assert bits_writer(dt)(value) == to_bits(value, dt), (dt, bits)


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32, dtypes.int8, dtypes.uint32, dtypes.bool], ids=lambda dt: dt.name)
def test_alu_closures_round_as_truncate_does(dt: DType):
  """alu_fn's closures (one an arity) give exec's reference: the op on Python values, then dtype.truncate."""
  from tinygrad.dtype import truncate
  from tinygrad.uop.alu import _ALU, alu_fn
  pairs = [(1.5, 2.25), (65504.0, 65504.0), (3e38, 3e38), (-7, 3), (1e-30, 1e-30), (100, 200), (True, False)]
  for op in (Ops.ADD, Ops.MUL, Ops.SUB, Ops.MAX):
    for a, b in pairs:
      a, b = (int(a), int(b)) if dtypes.is_int(dt) or dt == dtypes.bool else (float(a), float(b))
      assert _same(alu_fn(op, dt)(a, b), truncate(dt, _ALU[op](a, b))), (op, dt, a, b)
  assert _same(alu_fn(Ops.SQRT, dtypes.float32)(2), truncate(dtypes.float32, math.sqrt(2)))
  assert alu_fn(Ops.WHERE, dtypes.float16)(True, 1.0, 2.0) == 1.0
