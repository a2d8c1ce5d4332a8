"""LLVMRenderer -> LLVMCompiler -> CPUProgram on hand-built linearized programs, checked against tinygrad.uop.alu."""
from __future__ import annotations

import itertools
import math
import pickle
import struct
from typing import Any

import pytest
from tinygrad.device.devstring import Target
from tinygrad.dtype import DType, PtrDType, dtypes, truncate
from tinygrad.renderer import CompileError, UnsupportedDTypeError
from tinygrad.uop.alu import cast_scalar, exec_alu, from_bits, to_bits
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_cpu.llvmir import LLVMCompiler, LLVMRenderer, llvm_available, resolve_cpu_features
from tinygrad_backend_cpu.runtime import CPUAllocator, CPUProgram

pytestmark = pytest.mark.skipif(llvm_available() is not None, reason=str(llvm_available()))

RENDERER = LLVMRenderer(Target("CPU", "LLVM")) if llvm_available() is None else None
ALLOC = CPUAllocator()
_names = itertools.count()
I32 = dtypes.int32
NAN, INF = math.nan, math.inf


# ---- building linearized programs

def glob(i: int, dt: DType) -> UOp: return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), i)
def const(v: Any, dt: DType = I32) -> UOp: return UOp(Ops.CONST, dt, (), v)
def var(name: str, lo: int = 0, hi: int = 100) -> UOp: return UOp(Ops.DEFINE_VAR, I32, (), (name, lo, hi))
def rng(end: UOp, rid: int = 0, *after: UOp) -> UOp: return UOp(Ops.RANGE, I32, (end, *after), (rid, "loop"))
def end(r: UOp, *deps: UOp) -> UOp: return UOp(Ops.END, dtypes.void, (r, *deps))
def index(buf: UOp, i: UOp) -> UOp: return UOp(Ops.INDEX, buf.dtype, (buf, i))
def load(p: UOp, *gate_alt: UOp) -> UOp:
  assert isinstance(p.dtype, PtrDType)
  return UOp(Ops.LOAD, p.dtype.base, (p, *gate_alt))
def store(p: UOp, v: UOp, *gate: UOp) -> UOp: return UOp(Ops.STORE, dtypes.void, (p, v, *gate))
def alu(op: Ops, dt: DType, *src: UOp) -> UOp: return UOp(op, dt, src)


def linearize(*steps: UOp) -> list[UOp]:
  """Each step with its not yet placed sources, in order: the steps fix where loops open and close."""
  out: list[UOp] = []
  for s in steps: out += [u for u in s.toposort() if u not in out]
  return out


# ---- running them

def encode(vals: list[Any], dt: DType) -> bytes:
  return b"".join(to_bits(v, dt).to_bytes(dt.itemsize, "little") for v in vals)


def decode(raw: bytes, dt: DType) -> list[Any]:
  return [from_bits(int.from_bytes(raw[i:i + dt.itemsize], "little"), dt) for i in range(0, len(raw), dt.itemsize)]


def run(uops: list[UOp], bufs: list[tuple[DType, list[Any]]], vals: tuple[int, ...] = (),
        renderer: LLVMRenderer | None = None) -> list[list[Any]]:
  """Render, compile, load and run; bufs are (dtype, initial values) in parameter order. Returns every buffer after."""
  r = renderer or RENDERER
  assert r is not None
  name = f"test_kernel_{next(_names)}"  # one MCJIT engine holds every kernel: names must differ
  prg = CPUProgram(name, r.compiler.compile(r.render(name, uops)))
  dev = []
  for dt, init in bufs:
    dev.append(ALLOC.alloc(max(len(init), 1) * dt.itemsize))
    ALLOC.copyin(dev[-1], memoryview(encode(init, dt)))
  prg(*dev, vals=vals)
  outs = []
  for (dt, init), b in zip(bufs, dev):
    ALLOC.copyout(mv := memoryview(bytearray(len(init) * dt.itemsize)), b)
    outs.append(decode(bytes(mv), dt))
  return outs


def same(got: Any, want: Any, rel: float = 0.0) -> bool:
  if isinstance(want, float) and math.isnan(want): return isinstance(got, float) and math.isnan(got)
  if got == want: return not (isinstance(want, float) and want == 0 and math.copysign(1, got) != math.copysign(1, want))
  return rel > 0 and isinstance(want, float) and math.isfinite(want) and math.isclose(got, want, rel_tol=rel, abs_tol=rel)


def elementwise(build: Any, out_dt: DType, ins: list[tuple[DType, list[Any]]]) -> list[Any]:
  """out[i] = build(in0[i], in1[i], ...) over a loop of len(ins[0][1])."""
  n = len(ins[0][1])
  out, srcs = glob(0, out_dt), [glob(i + 1, dt) for i, (dt, _) in enumerate(ins)]
  r = rng(const(n))
  st = store(index(out, r), build(*[load(index(b, r)) for b in srcs]))
  ins = [(dt, [v if isinstance(v, float) and math.isnan(v) else truncate(dt, v) for v in vs]) for dt, vs in ins]
  return run(linearize(r, st, end(r, st)), [(out_dt, [0] * n), *ins])[0]


def check_alu(op: Ops, dt: DType, rows: list[tuple[Any, ...]], rel: float = 0.0, out_dt: DType | None = None) -> None:
  out_dt = out_dt or (dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt)
  in_dts = [dtypes.bool if op is Ops.WHERE and i == 0 else dt for i in range(len(rows[0]))]
  cols = [[truncate(in_dts[i], r[i]) if not (isinstance(r[i], float) and math.isnan(r[i])) else r[i] for r in rows]
          for i in range(len(rows[0]))]
  got = elementwise(lambda *s: alu(op, out_dt, *s), out_dt, list(zip(in_dts, cols)))
  for i, g in enumerate(got):
    want = exec_alu(op, out_dt, tuple(c[i] for c in cols))
    assert same(g, want, rel), f"{op} {dt} {tuple(c[i] for c in cols)}: got {g!r}, want {want!r}"


# ---- loops

def test_elementwise_add_over_loop():
  a, b = [float(i) * 0.5 for i in range(37)], [1.0 - i for i in range(37)]
  got = elementwise(lambda x, y: alu(Ops.ADD, dtypes.float32, x, y), dtypes.float32, [(dtypes.float32, a), (dtypes.float32, b)])
  assert got == [x + y for x, y in zip(a, b)]


@pytest.mark.parametrize("n", [0, -3])
def test_loop_end_zero_never_runs_body(n: int):
  out = glob(0, I32)
  for end_val, vals in ((const(n), ()), (var("n", -5, 5), (n,))):
    r = rng(end_val)
    st = store(index(out, r), const(7))
    # a body that ran even once would write out[0]
    assert run(linearize(r, st, end(r, st)), [(I32, [-1, -1])], vals=vals)[0] == [-1, -1]


def test_nested_loops():
  out, n, m = glob(0, I32), 5, 7
  r0 = rng(const(n), 0)
  r1 = rng(const(m), 1, r0)  # ordered after r0: opens inside it
  st = store(index(out, alu(Ops.ADD, I32, alu(Ops.MUL, I32, r0, const(m)), r1)), alu(Ops.ADD, I32, alu(Ops.MUL, I32, r0, const(10)), r1))
  e1 = end(r1, st)
  got = run(linearize(r0, r1, st, e1, end(r0, e1)), [(I32, [0] * (n * m))])[0]
  assert got == [i * 10 + j for i in range(n) for j in range(m)]


def test_reduction_with_define_reg():
  """out[i] = max(sum_j x[i,j], 0) and a running max, through DEFINE_REG accumulators stored before, loaded after the loop."""
  n, m, f32 = 4, 9, dtypes.float32
  xs = [float((i * 7 + j * 3) % 11) - 5.0 for i in range(n) for j in range(m)]
  out, x = glob(0, f32), glob(1, f32)
  acc = UOp(Ops.DEFINE_REG, f32.ptr(2, "reg"), (), 0)
  r0 = rng(const(n), 0)
  init0, init1 = store(index(acc, const(0)), const(0.0, f32)), store(index(acc, const(1)), const(-INF, f32))
  r1 = rng(const(m), 1, r0, init0, init1)
  v = load(index(x, alu(Ops.ADD, I32, alu(Ops.MUL, I32, r0, const(m)), r1)))
  s0 = store(index(acc, const(0)), alu(Ops.ADD, f32, load(index(acc, const(0))), v))
  s1 = store(index(acc, const(1)), alu(Ops.MAX, f32, load(index(acc, const(1))), v))
  e1 = end(r1, s0, s1)
  done = UOp(Ops.AFTER, acc.dtype, (acc, e1))  # a distinct node for the loads after the loop
  res = alu(Ops.ADD, f32, load(index(done, const(0))), alu(Ops.MUL, f32, load(index(done, const(1))), const(100.0, f32)))
  st = store(index(out, r0), res)
  got = run(linearize(r0, init0, init1, r1, s0, s1, e1, st, end(r0, st)), [(f32, [0.0] * n), (f32, xs)])[0]
  rows = [xs[i * m:(i + 1) * m] for i in range(n)]
  assert got == [sum(row) + max(row) * 100 for row in rows]


def test_gated_load_and_store():
  """Gated-off lanes never touch memory: their addresses are far outside the buffers."""
  n, far = 16, 1 << 28
  out, x = glob(0, I32), glob(1, I32)
  r = rng(const(n))
  lt5 = alu(Ops.CMPLT, dtypes.bool, r, const(5))
  src_idx = alu(Ops.WHERE, I32, lt5, r, alu(Ops.ADD, I32, r, const(far)))
  v = load(index(x, src_idx), lt5, const(-1))
  even = alu(Ops.CMPEQ, dtypes.bool, alu(Ops.MOD, I32, r, const(2)), const(0))
  dst_idx = alu(Ops.WHERE, I32, even, r, const(-far))
  st = store(index(out, dst_idx), v, even)
  got = run(linearize(r, st, end(r, st)), [(I32, [99] * n), (I32, [10, 11, 12, 13, 14])])[0]
  assert got == [(10 + i if i < 5 else -1) if i % 2 == 0 else 99 for i in range(n)]


def test_gated_load_bool_and_bf16():
  for dt, data, alt in ((dtypes.bool, [True, False, True], False), (dtypes.bfloat16, [1.5, -2.25, 3.0], 7.0)):
    out, x = glob(0, dt), glob(1, dt)
    r = rng(const(6))
    g = alu(Ops.CMPLT, dtypes.bool, r, const(3))
    st = store(index(out, r), load(index(x, r), g, const(alt, dt)))
    assert run(linearize(r, st, end(r, st)), [(dt, [data[0]] * 6), (dt, data)])[0] == data + [alt] * 3


def test_define_var_parameters():
  """out[i] = i*b + a for i < n, vars passed after the buffers in order of appearance."""
  out, n, a, b = glob(0, I32), var("n"), var("a", -100, 100), var("b", -100, 100)
  r = rng(n)
  st = store(index(out, r), alu(Ops.ADD, I32, alu(Ops.MUL, I32, r, b), a))
  got = run(linearize(n, a, b, r, st, end(r, st)), [(I32, [0] * 10)], vals=(6, -3, 4))[0]
  assert got == [i * 4 - 3 for i in range(6)] + [0] * 4


# ---- arithmetic semantics

def test_idiv_mod_c_semantics_and_div_by_zero():
  rows = [(7, 2), (-7, 2), (7, -2), (-7, -2), (5, 0), (-5, 0), (0, 0), (-2 ** 31, -1), (-2 ** 31, 1), (2 ** 31 - 1, -1), (3, 7)]
  for op in (Ops.IDIV, Ops.MOD):
    check_alu(op, I32, rows)
    check_alu(op, dtypes.int8, [(-128, -1), (-7, 3), (100, 0), (127, -2)])
    check_alu(op, dtypes.uint32, [(7, 2), (2 ** 32 - 1, 2), (5, 0), (2 ** 32 - 7, 3)])
    check_alu(op, dtypes.int64, [(-2 ** 63, -1), (-(10 ** 15) - 1, 10 ** 7), (10 ** 12, 0), (5, -3)])


def test_max_propagates_nan():
  rows = [(1.0, 2.0), (2.0, 1.0), (NAN, 1.0), (1.0, NAN), (NAN, NAN), (-INF, NAN), (INF, -INF), (-0.0, 0.0), (0.0, -0.0)]
  for dt in (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16): check_alu(Ops.MAX, dt, rows)
  check_alu(Ops.MAX, I32, [(-5, 3), (2 ** 31 - 1, -2 ** 31)])
  check_alu(Ops.MAX, dtypes.uint32, [(2 ** 32 - 1, 3), (0, 7)])
  check_alu(Ops.MAX, dtypes.bool, [(True, False), (False, False)])


def test_comparisons_with_nan():
  rows = [(1.0, 2.0), (2.0, 1.0), (1.0, 1.0), (NAN, 1.0), (1.0, NAN), (NAN, NAN), (-0.0, 0.0), (-INF, INF)]
  for op, dt in itertools.product((Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ), (dtypes.float32, dtypes.float16, dtypes.bfloat16)):
    check_alu(op, dt, rows)
  for op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
    check_alu(op, I32, [(-1, 1), (3, 3), (5, -5)])
    check_alu(op, dtypes.uint8, [(255, 1), (3, 3), (0, 200)])
    check_alu(op, dtypes.bool, [(False, True), (True, False), (True, True)])


def test_int_wraparound_and_bitwise():
  check_alu(Ops.ADD, I32, [(2 ** 31 - 1, 1), (-2 ** 31, -1)])
  check_alu(Ops.MUL, I32, [(65536, 65536), (123456789, 1000)])
  check_alu(Ops.ADD, dtypes.uint8, [(250, 10), (255, 255)])
  check_alu(Ops.NEG, dtypes.int8, [(-128,), (5,)])
  check_alu(Ops.MUL, dtypes.uint64, [(2 ** 63, 2), (2 ** 40, 2 ** 30)])
  check_alu(Ops.SHL, I32, [(1, 31), (3, 4)])
  check_alu(Ops.SHR, I32, [(-16, 2), (16, 2)])
  check_alu(Ops.SHR, dtypes.uint32, [(2 ** 32 - 16, 2)])
  for op in (Ops.AND, Ops.OR, Ops.XOR):
    check_alu(op, I32, [(0b1100, 0b1010), (-1, 5)])
    check_alu(op, dtypes.bool, [(True, False), (True, True), (False, False)])
  check_alu(Ops.NEG, dtypes.bool, [(True,), (False,)])


def test_float_arithmetic_where_mulacc():
  rows = [(1.5, 2.25, -0.5), (1e30, 1e30, 1.0), (-3.0, 0.1, 7.0), (NAN, 1.0, 2.0), (INF, 0.0, 1.0), (1.0 / 3, 3.0, -1.0)]
  for dt in (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16):
    for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV): check_alu(op, dt, [r[:2] for r in rows] + [(1.0, 0.0), (-1.0, 0.0), (0.0, 0.0)])
    check_alu(Ops.NEG, dt, [(0.0,), (-2.5,), (INF,), (NAN,)])
    check_alu(Ops.MULACC, dt, rows, rel=1e-6 if dt != dtypes.bfloat16 else 1e-2)
  check_alu(Ops.MULACC, I32, [(70000, 70000, 5), (-3, 4, 2)])
  check_alu(Ops.WHERE, dtypes.float32, [(True, 1.0, 2.0), (False, 1.0, NAN)])
  check_alu(Ops.WHERE, dtypes.int64, [(True, 2 ** 40, -1), (False, 1, -2 ** 62)])


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16])
def test_transcendentals(dt: DType):
  rel = {dtypes.float32: 1e-6, dtypes.float64: 1e-14, dtypes.float16: 1e-3, dtypes.bfloat16: 1e-2}[dt]
  xs = [0.0, -0.0, 0.5, 1.0, 2.0, 3.75, -1.5, 10.0, 100.0, -100.0, 1000.0, INF, -INF, NAN]
  for op in (Ops.EXP2, Ops.LOG2, Ops.SIN):
    check_alu(op, dt, [(x,) for x in xs if not (op is Ops.SIN and abs(x) > 100)], rel=rel)
  for op in (Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC): check_alu(op, dt, [(x,) for x in xs] + [(-2.75,), (0.3,)])


# ---- casts and bitcasts

CAST_DTYPES = [dtypes.float32, dtypes.int32, dtypes.uint8, dtypes.bool, dtypes.float16, dtypes.bfloat16, dtypes.int64, dtypes.float64,
               dtypes.int8, dtypes.uint32, dtypes.uint64, dtypes.int16]
CAST_VALUES = [0.0, 1.0, -1.0, 2.5, -3.7, 0.999, 100.25, 255.9, 300.2, -129.5, 40000.0, 65504.0, 1e10, -1e10, 1e19, 3e38,
               1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -8 + 2 ** -30, 2.0 ** 31, -2.0 ** 31, 2 ** 53 + 1, -2.0 ** 63, 2.0 ** 63, 1e-8, NAN, INF, -INF]


@pytest.mark.parametrize("src", CAST_DTYPES, ids=str)
def test_casts(src: DType):
  """Casts from src to every dtype in one kernel, against alu.cast_scalar."""
  xs = list(dict.fromkeys(cast_scalar(v, src) for v in CAST_VALUES if dtypes.is_float(src) or not math.isnan(v)))
  n, dsts = len(xs), [d for d in CAST_DTYPES if d != src]
  bufs = [glob(i, d) for i, d in enumerate(dsts)]
  inp = glob(len(dsts), src)
  r = rng(const(n))
  v = load(index(inp, r))
  sts = [store(index(b, r), UOp(Ops.CAST, d, (v,))) for b, d in zip(bufs, dsts)]
  outs = run(linearize(r, *sts, end(r, *sts)), [(d, [0] * n) for d in dsts] + [(src, xs)])
  for d, got in zip(dsts, outs):
    for x, g in zip(xs, got):
      # float -> int outside [-2**63, 2**64) is the one case alu defines (wraps) that saturating hardware doesn't
      if dtypes.is_float(src) and dtypes.is_int(d) and math.isfinite(x) and not -2 ** 63 <= x < 2 ** 64: continue
      assert same(g, cast_scalar(x, d)), f"cast {src} {x!r} -> {d}: got {g!r}, want {cast_scalar(x, d)!r}"


@pytest.mark.parametrize("src,dst", [(dtypes.float32, I32), (I32, dtypes.float32), (dtypes.float32, dtypes.uint32),
                                     (dtypes.float16, dtypes.int16), (dtypes.uint16, dtypes.float16), (dtypes.bfloat16, dtypes.uint16),
                                     (dtypes.int16, dtypes.bfloat16), (dtypes.float16, dtypes.bfloat16), (dtypes.float64, dtypes.int64),
                                     (dtypes.uint64, dtypes.float64), (dtypes.bool, dtypes.uint8)])
def test_bitcast(src: DType, dst: DType):
  vals = [1.0, -2.5, 0.0, -0.0, INF, NAN, 3.140625] if dtypes.is_float(src) else [0, 1, 0x3F80, 0x7F80, 0xC000]
  vals = [True, False] if src == dtypes.bool else vals
  xs = [v if isinstance(v, float) and math.isnan(v) else truncate(src, v) for v in vals]
  got = elementwise(lambda x: UOp(Ops.BITCAST, dst, (x,)), dst, [(src, xs)])
  for x, g in zip(xs, got):
    want = from_bits(to_bits(x, src), dst)
    assert same(g, want) or (to_bits(g, dst) == to_bits(want, dst)), f"bitcast {src} {x!r} -> {dst}: got {g!r}, want {want!r}"


def test_bf16_float_bits_roundtrip_exact():
  """float32 -> bf16 rounds to nearest even on the bits, as truncate_bf16 does (ties, carries into the exponent)."""
  bits = [0x3F808000, 0x3F818000, 0x3F80C000, 0x7F7FFFFF, 0x00008000, 0xBF808001, 0x3F7FFFFF]
  xs = [struct.unpack("f", struct.pack("I", b))[0] for b in bits]
  got = elementwise(lambda x: UOp(Ops.CAST, dtypes.bfloat16, (x,)), dtypes.bfloat16, [(dtypes.float32, xs)])
  assert got == [truncate(dtypes.bfloat16, x) for x in xs]


def test_no_compiler_runtime_libcalls():
  """Kernels call at most libm: compiler-rt/libgcc helpers (__truncdfhf2, __truncsfbf2, ...) aren't in this process."""
  import re
  ops1 = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.NEG)
  ops2 = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX, Ops.CMPLT)
  for dt in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64):
    bufs = [glob(i, dt) for i in range(3)]
    r = rng(const(17))
    a, b, c = (load(index(x, r)) for x in bufs)
    vals = [alu(op, dt, a) for op in ops1] + [alu(op, dtypes.bool if op is Ops.CMPLT else dt, a, b) for op in ops2]
    vals += [alu(Ops.MULACC, dt, a, b, c)] + [UOp(Ops.CAST, d, (a,)) for d in CAST_DTYPES if d != dt]
    sts = [store(index(glob(3 + i, v.dtype), r), v) for i, v in enumerate(vals)]
    asm = RENDERER.compiler.assembly(RENDERER.render(f"libcalls_{dt.name}", linearize(r, *sts, end(r, *sts))))
    called = set(re.findall(r"(\w+)@(?:GOT|PLT)", asm))
    assert not {f for f in called if f.startswith("__")}, f"{dt}: {sorted(called)}"


# ---- compiler, target and errors

def test_compile_error_carries_source():
  bad = "define void @broken(ptr %data0) {\nentry:\n  %t1 = add i32 %nope, 1\n  ret void\n}\n"
  with pytest.raises(CompileError) as e: LLVMCompiler().compile(bad)
  assert e.value.src == bad and "nope" in str(e.value) and "LLVM" in str(e.value)


def test_compile_error_on_bad_verify():
  bad = "define void @broken2() {\nentry:\n  br label %entry\n}\n"  # the entry block may not be a branch target
  with pytest.raises(CompileError): RENDERER.compiler.compile(bad)


def test_unsupported_dtype():
  out = glob(0, dtypes.fp8e4m3)
  st = store(index(out, const(0)), const(1.0, dtypes.fp8e4m3))
  with pytest.raises(UnsupportedDTypeError): RENDERER.render("fp8", linearize(st))


def test_target_cpu_and_features_from_devstring():
  t = Target("CPU", "LLVM", "x86_64", ("znver2", "avx2", "-avx512f"))
  cpu, feats = resolve_cpu_features(t)
  assert cpu == "znver2" and feats.endswith(",+avx2,-avx512f")
  r = LLVMRenderer(t)
  assert "znver2" in r.compiler.cachekey and "-avx512f" in r.compiler.cachekey and r.compiler.cachekey.startswith("compile_llvm_")
  got = elementwise(lambda x: alu(Ops.MUL, dtypes.float32, x, x), dtypes.float32, [(dtypes.float32, [1.5] * 40)])
  assert got == [2.25] * 40
  # the same kernel compiled for that target runs here too (host features minus avx512f)
  out, x = glob(0, dtypes.float32), glob(1, dtypes.float32)
  rr = rng(const(40))
  st = store(index(out, rr), alu(Ops.MUL, dtypes.float32, load(index(x, rr)), const(3.0, dtypes.float32)))
  assert run(linearize(rr, st, end(rr, st)), [(dtypes.float32, [0.0] * 40), (dtypes.float32, [2.0] * 40)], renderer=r)[0] == [6.0] * 40
  assert resolve_cpu_features(Target("CPU", "LLVM"))[0] == resolve_cpu_features(Target("CPU", "LLVM", "x86_64"))[0]
  r2 = pickle.loads(pickle.dumps(r))  # renderers may be sent to worker processes
  assert (r2.cpu, r2.features, r2.compiler.cachekey) == (r.cpu, r.features, r.compiler.cachekey)


def test_accumulator_budget_follows_the_vector_registers():
  """The register block's budget: 12 free AVX registers of 8 floats, 28 with AVX-512 (of 8 floats where LLVM fills ymm, of 16
  where the kernels are compiled for zmm), SSE's 4 lanes."""
  from tinygrad_backend_cpu.llvmir import accumulator_budget
  assert accumulator_budget("+sse2,+avx,+avx2,+fma,-avx512f") == 96
  assert accumulator_budget("+sse2,+avx,+avx2,+avx512f") == 224
  assert accumulator_budget("+sse2,+avx,+avx2,+avx512f", wide=True) == 448
  assert accumulator_budget("+sse2,-avx") == 48
  assert accumulator_budget("+avx,+avx2,+avx512f,-avx512f") == 96  # DEV=CPU:LLVM:native,-avx512f
  assert accumulator_budget("+neon", "aarch64-unknown-linux-gnu") == 112


def test_wide_vectors_only_with_avx512():
  """512-bit vectors (the prefer-vector-width attribute, and the budget of zmm registers) where avx512f is on and
  WIDE_VECTORS isn't 0; a DEV option '-avx512f' turns them off with the instruction set."""
  from tinygrad import Context
  from tinygrad_backend_cpu.llvmir import wide_vectors
  with Context(WIDE_VECTORS=1):
    assert wide_vectors("+avx,+avx2,+avx512f") and not wide_vectors("+avx,+avx2,+avx512f,-avx512f") and not wide_vectors("+avx,+avx2")
  with Context(WIDE_VECTORS=0): assert not wide_vectors("+avx,+avx2,+avx512f")
  for opts in (("-avx512f",), ()):
    with Context(WIDE_VECTORS=1): r = LLVMRenderer(Target("CPU", "LLVM", "x86_64", opts))
    out, x = glob(0, dtypes.float32), glob(1, dtypes.float32)
    rr = rng(const(64))
    src = r.render("k", linearize(rr, st := store(index(out, rr), load(index(x, rr))), end(rr, st)))
    assert ('"prefer-vector-width"="512"' in src) == r.wide == (r.accumulators == 448)
    if opts: assert not r.wide and r.accumulators == 96
