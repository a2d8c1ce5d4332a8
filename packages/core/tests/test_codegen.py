"""Codegen: kernel ASTs from the Tensor API, lowered and linearized for the default renderer, checked for loop structure,
accumulators and hoisting; VERIFY=1 on real programs; and the verifier rejecting hand-broken graphs."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tinygrad.codegen.program as program_mod
from tinygrad import Device, Tensor
from tinygrad.codegen.program import lower_kernel
from tinygrad.device.devstring import Target
from tinygrad.dtype import DType, PtrDType, dtypes
from tinygrad.helpers import Context
from tinygrad.runtime.python import PythonProgram, PythonRenderer
from tinygrad.schedule.indexing import IndexingContext, kernel_ast
from tinygrad.schedule.kernelize import new_buffer
from tinygrad.uop.ops import Ops, UOp, identity_element
from tinygrad.uop.verify import VerifyError, verify_kernel, verify_linear, verify_tensor_graph

i32, f32 = dtypes.int32, dtypes.float32


# ---- helpers

def kernels(*ts: Tensor) -> list[UOp]:
  """The kernel ASTs (SINKs) that realizing ts would run."""
  return [si.ast for si in ts[0].schedule(*ts[1:]) if si.ast.op is Ops.SINK]


def lower(ast: UOp) -> list[UOp]: return lower_kernel(ast, Device.renderer(Device.DEFAULT))


def fused_ast(t: Tensor) -> UOp:
  """One kernel for the whole (unrealized) graph of t, bypassing the scheduler's fusion decisions."""
  return kernel_ast(t.uop, new_buffer(t.device, t.numel(), t.dtype), IndexingContext())


def open_loops(uops: list[UOp]) -> dict[UOp, tuple[UOp, ...]]:
  """The loops open at each uop, checking (independently of verify_linear) that sources come first and loops nest."""
  pos: dict[UOp, int] = {}
  stack: list[UOp] = []
  at: dict[UOp, tuple[UOp, ...]] = {}
  for idx, u in enumerate(uops):
    assert u not in pos, f"{u.op} emitted twice"
    for s in u.src: assert s in pos, f"#{idx} {u.op} uses {s.op} before it is defined"
    if u.op is Ops.END:
      assert stack and stack[-1] is u.src[0], f"#{idx} END does not close the innermost loop"
      stack.pop()
    at[u] = tuple(stack)
    pos[u] = idx
    if u.op is Ops.RANGE: stack.append(u)
  assert not stack, f"{len(stack)} loop(s) never closed"
  return at


def required_loops(uops: list[UOp]) -> dict[UOp, set[UOp]]:
  """The loops each uop must be inside: those its sources need, plus itself for a RANGE, minus the one an END closes.
  Output loops nest in id order, so a RANGE also needs every output loop with a smaller id."""
  outputs = [u for u in uops if u.op is Ops.RANGE and u.arg[1] == "global"]
  req: dict[UOp, set[UOp]] = {}
  for u in uops:
    need = set().union(*(req[s] for s in u.src))
    if u.op is Ops.RANGE: need |= {u, *(g for g in outputs if g.arg[0] < u.arg[0])}
    if u.op is Ops.END: need.discard(u.src[0])
    req[u] = need
  return req


def check_structure(uops: list[UOp]) -> dict[UOp, tuple[UOp, ...]]:
  at = open_loops(uops)
  verify_linear(uops)
  ranges = [u for u in uops if u.op is Ops.RANGE]
  ends = [u for u in uops if u.op is Ops.END]
  assert sorted(id(e.src[0]) for e in ends) == sorted(id(r) for r in ranges), "every RANGE has exactly one END"
  assert all(uops.index(e) > uops.index(e.src[0]) for e in ends)
  # every value is computed in exactly the loops it depends on: nothing loop-invariant stays inside a loop
  req = required_loops(uops)
  for u in uops:
    if u.op in (Ops.SINK, Ops.END): continue
    expect = req[u] - {u} if u.op is Ops.RANGE else req[u]
    assert set(at[u]) == expect, f"#{uops.index(u)} {u.op} is inside loops {[r.arg for r in at[u]]}, needs {[r.arg for r in expect]}"
  return at


def reg_of(ptr: UOp) -> UOp | None:
  while ptr.op is Ops.AFTER: ptr = ptr.src[0]
  if ptr.op is Ops.INDEX: ptr = ptr.src[0]
  return ptr if ptr.op is Ops.DEFINE_REG else None


def accumulators(uops: list[UOp]) -> list[dict]:
  """For each DEFINE_REG: its init store, update stores, the reduce loops it spans and the load of the result."""
  at = open_loops(uops)
  pos = {u: i for i, u in enumerate(uops)}
  out = []
  for reg in (u for u in uops if u.op is Ops.DEFINE_REG):
    stores = [u for u in uops if u.op is Ops.STORE and reg_of(u.src[0]) is reg]
    inits = [s for s in stores if s.src[1].op is Ops.CONST]
    updates = [s for s in stores if s.src[1].op is not Ops.CONST]
    assert len(inits) == 1, f"accumulator {reg.arg} has {len(inits)} init stores"
    assert updates, f"accumulator {reg.arg} is never updated"
    init = inits[0]
    loops = [r for r in at[updates[0]] if r not in at[init]]
    assert loops, "the update must sit in a loop the init is outside of"
    end_of_outer = next(u for u in uops if u.op is Ops.END and u.src[0] is loops[0])
    results = [u for u in uops if u.op is Ops.LOAD and reg_of(u.src[0]) is reg and pos[u] > pos[end_of_outer]]
    out.append({"reg": reg, "init": init, "updates": updates, "loops": loops, "results": results, "at": at, "pos": pos})
  return out


def check_accumulators(uops: list[UOp], n: int | None) -> list[dict]:
  """Check every accumulator; n is how many there must be (None: at least one, as optimizations may copy them)."""
  accs = accumulators(uops)
  if n is None: assert accs, "a kernel with a reduction has no accumulator"
  else: assert len(accs) == n, f"expected {n} accumulators, got {len(accs)}"
  for acc in accs:
    at, pos, init, loops = acc["at"], acc["pos"], acc["init"], acc["loops"]
    assert all(r.arg[1] == "reduce" for r in loops), "an accumulator spans reduce loops only"
    # initialised before its reduce loops, directly outside the outermost of them
    assert all(pos[init] < pos[r] for r in loops)
    assert at[init] == at[loops[0]]
    # updated inside all of them
    for upd in acc["updates"]: assert set(loops) <= set(at[upd])
    # the update is acc = op(acc, x) (or the fused acc + a*b, MULACC(a, b, acc)) for the reduce op whose identity the init stored
    for upd in acc["updates"]:
      val = upd.src[1]
      op = Ops.ADD if val.op is Ops.MULACC else val.op
      assert op in (Ops.ADD, Ops.MUL, Ops.MAX), f"accumulator update is a {val.op}"
      assert any(s.op is Ops.LOAD and reg_of(s.src[0]) is acc["reg"] for s in val.src), "the update must read the accumulator"
      assert init.src[1].arg == identity_element(op, val.dtype)
    # and read after the loops end, at the init's loop depth
    assert acc["results"] and all(at[r] == at[init] for r in acc["results"])
  return accs


def global_loads(uops: list[UOp], size: int) -> list[UOp]:
  """LOADs from the DEFINE_GLOBAL whose pointer size is `size`."""
  return [u for u in uops if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL
          and u.src[0].src[0].dtype.size == size]


# ---- programs

E = Tensor.empty
PROGRAMS: dict[str, Callable[[], Tensor]] = {
  "add": lambda: E(4, 8) + E(4, 8),
  "broadcast": lambda: E(4, 1) * E(4, 8) + 1,
  "sum_all": lambda: E(4, 8).sum(),
  "sum0_outer": lambda: (E(4).reshape(4, 1) * E(4, 8)).sum(0),
  "sum1_outer": lambda: (E(4).reshape(4, 1) * E(4, 8)).sum(1),
  "max1": lambda: E(4, 8).max(1),
  "mean": lambda: E(6, 5).mean(0),
  "sum_two_axes": lambda: E(3, 5, 7).sum((0, 2)),
  "matmul": lambda: E(4, 6) @ E(6, 5),
  "pad": lambda: E(4).pad(((1, 2),)) + 1,
  "pad2d": lambda: E(3, 4).pad(((1, 1), (2, 0))) * 2,
  "pad_sum": lambda: E(5).pad(((2, 3),)).sum(),
  "shrink_flip_permute": lambda: E(4, 6)[1:3].flip(1).permute(1, 0) + 1,
  "where": lambda: (E(4, 8) < E(4, 8)).where(E(4, 8), 0.5),
  "cast": lambda: E(4, 8).cast(i32) + 1,
  "arange": lambda: Tensor.arange(10) * 2,
  "expand_sum": lambda: E(4).reshape(4, 1).expand(4, 8).sum(0),
  "softmax": lambda: E(4, 8).softmax(1),
  "center": lambda: E(4, 8) - E(4, 8).mean(),
  "min_argmax": lambda: E(5, 6).min(1) + E(5, 6).argmax(1).cast(f32),
}


@pytest.fixture(params=[1, 0], ids=["noopt", "opt"])
def noopt(request):
  """Run with and without the hand-coded optimizations (UPCAST/UNROLL copy reduces and accumulators)."""
  with Context(NOOPT=request.param): yield request.param


@pytest.fixture
def no_opts():
  """Exact layouts: one accumulator per REDUCE of the AST, no copies."""
  with Context(NOOPT=1): yield


@pytest.mark.compile_only
@pytest.mark.parametrize("name", PROGRAMS)
def test_lowered_kernels_are_well_formed(name: str, noopt: int):
  asts = kernels(PROGRAMS[name]())
  assert asts
  for ast in asts:
    uops = lower(ast)
    check_structure(uops)
    n_reduce = len([u for u in ast.toposort() if u.op is Ops.REDUCE])
    if n_reduce: check_accumulators(uops, n_reduce if noopt else None)
    else: assert not any(u.op is Ops.DEFINE_REG for u in uops)
    assert not any(u.op in (Ops.REDUCE, Ops.INDEX_AT) for u in uops), "REDUCE/INDEX_AT must be lowered away"


@pytest.mark.compile_only
def test_reduce_accumulator_layout(no_opts):
  (ast,) = kernels((E(4).reshape(4, 1) * E(4, 8)).sum(0))
  uops = lower(ast)
  (acc,) = check_accumulators(uops, 1)
  at, init = acc["at"], acc["init"]
  assert isinstance(acc["reg"].dtype, PtrDType) and acc["reg"].dtype.addrspace == "reg"
  out_loop = [u for u in uops if u.op is Ops.RANGE and u.arg[1] == "global"]
  # one accumulator per output element: initialised inside the output loop, before the reduce loop
  assert at[init] == tuple(out_loop) and init.src[1].arg == 0.0
  assert [r.arg[1] for r in acc["loops"]] == ["reduce"]


@pytest.mark.compile_only
@pytest.mark.parametrize("build,invariant_size", [
  (lambda: (E(4).reshape(4, 1) * E(4, 8)).sum(1), 4),                    # a[i] * b[i, j] summed over j
  (lambda: ((E(4).reshape(4, 1) * 2 + 1) * E(4, 8)).sum(1), 4),          # and arithmetic on a[i]
  (lambda: (E(8).reshape(1, 8) + E(4, 8)).sum(0), 8),                    # a[j] + b[i, j] summed over i
  (lambda: (E(3).reshape(3, 1, 1) * E(3, 5, 6)).sum((1, 2)), 3),         # invariant in two reduce loops
])
def test_loop_invariant_loads_are_hoisted(build, invariant_size: int, noopt: int):
  (ast,) = kernels(build())
  uops = lower(ast)
  at = check_structure(uops)
  accs = check_accumulators(uops, 1 if noopt else None)
  reduce_loops = {r for acc in accs for r in acc["loops"]}
  first_reduce = min(uops.index(r) for r in reduce_loops)
  loads = global_loads(uops, invariant_size)
  assert loads and (len(loads) == 1 or not noopt)
  for ld in loads:
    assert not reduce_loops & set(at[ld]), "a load that doesn't depend on the reduce loop is inside it"
    assert uops.index(ld) < first_reduce


@pytest.mark.compile_only
def test_two_reduce_axes_one_accumulator(no_opts):
  (ast,) = kernels(E(3, 5, 7).sum((0, 2)))
  uops = lower(ast)
  at = check_structure(uops)
  (acc,) = check_accumulators(uops, 1)
  assert len(acc["loops"]) == 2
  outer, inner = acc["loops"]
  assert outer in at[inner] and at[acc["init"]] == at[outer]
  assert set(at[acc["updates"][0]]) >= {outer, inner}


@pytest.mark.compile_only
@pytest.mark.parametrize("build", [
  lambda: E(4, 8).max(1).sum(0),
  lambda: (E(3, 4, 8).max(2) * 2).sum(1),
  lambda: E(3, 4, 8).sum(2).max(1) + 1,
], ids=["max_then_sum", "max_mul_sum", "sum_then_max"])
def test_nested_reduce(build, no_opts):
  ast = fused_ast(build())
  assert len([u for u in ast.toposort() if u.op is Ops.REDUCE]) == 2
  uops = lower(ast)
  check_structure(uops)
  accs = check_accumulators(uops, 2)
  inner, outer = sorted(accs, key=lambda a: len(a["at"][a["init"]]), reverse=True)
  # the inner accumulator restarts on every iteration of the outer reduce loop
  assert outer["loops"][0] in inner["at"][inner["init"]]
  assert set(outer["loops"]) <= set(inner["at"][inner["init"]])


def _run_python(ast: UOp, *inputs: np.ndarray, out_size: int) -> np.ndarray:
  """Lower for the PYTHON renderer and run it directly (independent of DEV)."""
  renderer = PythonRenderer(Target("PYTHON"))
  uops = lower_kernel(ast, renderer)
  prog = PythonProgram("k", renderer.compiler.compile(renderer.render("k", uops)))
  bufs = [bytearray(out_size * 4)] + [bytearray(a.astype(np.float32).tobytes()) for a in inputs]
  prog(*bufs)
  return np.frombuffer(bufs[0], dtype=np.float32)


@pytest.mark.parametrize("shape,fn,ref", [
  ((4, 8), lambda x: x.max(1).sum(0), lambda a: a.max(1).sum(0)),
  ((3, 4, 8), lambda x: x.max(2).sum(1), lambda a: a.max(2).sum(1)),
  ((3, 4, 5), lambda x: x.sum(2).max(1), lambda a: a.sum(2).max(1)),
], ids=["max_sum", "max_sum_3d", "sum_max_3d"])
def test_nested_reduce_values(shape, fn, ref, noopt: int):
  # the inner accumulator must be re-initialised for each outer iteration, or the max would leak across rows
  a = np.random.uniform(-3, 3, size=shape).astype(np.float32)
  a[0] += 10  # row 0 dominates: a max carried over from it would be visible
  x = Tensor.empty(*shape, device="PYTHON")
  y = fn(x)
  ctx = IndexingContext()
  ast = kernel_ast(y.uop, new_buffer("PYTHON", y.numel(), y.dtype), ctx)
  assert len(ctx.buffers) == 2
  np.testing.assert_allclose(_run_python(ast, a, out_size=y.numel()), np.asarray(ref(a), dtype=np.float32).reshape(-1), rtol=1e-5)


@pytest.mark.compile_only
@pytest.mark.parametrize("build,n_gated", [
  (lambda: E(4).pad(((1, 2),)) + 1, 1),
  (lambda: E(3, 4).pad(((1, 1), (2, 0))) * 2, 1),
  (lambda: E(5).pad(((2, 3),)).sum(), 1),
  (lambda: E(4).pad(((1, 0),)) + E(4).pad(((0, 1),)), 2),
])
def test_gated_load_from_pad(build, n_gated: int):
  (ast,) = kernels(build())
  uops = lower(ast)
  check_structure(uops)
  gated = [u for u in uops if u.op is Ops.LOAD and len(u.src) == 3]
  assert len(gated) == n_gated
  for ld in gated:
    assert ld.src[1].dtype == dtypes.bool and ld.src[2].op is Ops.CONST and ld.src[2].arg == 0 and ld.src[2].dtype == ld.dtype
    assert ld.src[0].src[0].op is Ops.DEFINE_GLOBAL
  # valid ? load(gate=valid) : 0 is folded into the gated load
  assert not any(u.op is Ops.WHERE and any(s in gated for s in u.src) for u in uops)


@pytest.mark.compile_only
def test_unpadded_loads_are_not_gated():
  (ast,) = kernels(E(4, 8).sum(1) + E(4))
  assert all(len(u.src) == 1 for u in lower(ast) if u.op is Ops.LOAD)


# ---- VERIFY=1 on real programs

@pytest.mark.compile_only
@pytest.mark.parametrize("name", ["broadcast", "sum1_outer", "sum_two_axes", "matmul", "pad_sum", "softmax", "center", "min_argmax"])
def test_verify_on_tensor_programs(name: str):
  with Context(VERIFY=1):
    for ast in kernels(PROGRAMS[name]()):
      verify_kernel(ast)
      lower(ast)  # verifies the AST and the linearized program


@pytest.mark.compile_only
def test_verify_runs_during_realize(monkeypatch):
  calls = []
  real = program_mod.verify_linear
  monkeypatch.setattr(program_mod, "verify_linear", lambda uops, *a: (calls.append(len(uops)), real(uops, *a))[1])
  a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
  with Context(VERIFY=1):
    # constants unique to this test, so no kernel comes from the compile cache
    ((a * 1.23456 + 0.654321).sum(1) - a.max() * 7.891).realize()
  assert calls, "VERIFY=1 did not check the linearized program"
  calls.clear()
  with Context(VERIFY=0):
    ((a * 2.34567 + 0.765432).sum(1)).realize()
  assert not calls


# ---- the verifier rejects broken graphs

def glob(n: int, dt: DType, size: int = 4) -> UOp: return UOp(Ops.DEFINE_GLOBAL, dt.ptr(size), (), n)
def rng(i: int, n: int) -> UOp: return UOp(Ops.RANGE, i32, (UOp.const(i32, n),), (i, "global"))
def end(r: UOp, *deps: UOp) -> UOp: return UOp(Ops.END, dtypes.void, (r, *deps))


@pytest.mark.compile_only
@pytest.mark.parametrize("make,why", [
  (lambda: UOp(Ops.WHERE, f32, (UOp.const(i32, 1), UOp.const(f32, 1.0), UOp.const(f32, 2.0))), "WHERE's condition must be bool"),
  (lambda: UOp(Ops.WHERE, f32, (UOp.const(dtypes.bool, True), UOp.const(f32, 1.0), UOp.const(i32, 2))), "WHERE's branches"),
  (lambda: UOp(Ops.ADD, f32, (UOp.const(f32, 1.0), UOp.const(i32, 2))), "ADD sources must all be"),
  (lambda: UOp(Ops.CMPLT, i32, (UOp.const(i32, 1), UOp.const(i32, 2))), "comparison must produce bool"),
  (lambda: UOp(Ops.CMPLT, dtypes.bool, (UOp.const(i32, 1), UOp.const(f32, 2.0))), "compared values must have one dtype"),
  (lambda: UOp(Ops.INDEX, f32, (UOp.const(f32, 0.0), UOp.const(i32, 0))), "INDEX needs a pointer"),
  (lambda: glob(0, f32).index(UOp.const(f32, 1.0)), "index must be an int"),
  (lambda: UOp(Ops.LOAD, i32, (glob(0, f32).index(UOp.const(i32, 0)),)), "LOAD dtype"),
  (lambda: UOp(Ops.LOAD, f32, (glob(0, f32).index(UOp.const(i32, 0)), UOp.const(i32, 1), UOp.const(f32, 0.0))), "gated LOAD"),
  (lambda: glob(0, f32).index(UOp.const(i32, 0)).store(UOp.const(i32, 1)), "STORE value"),
  (lambda: UOp(Ops.RANGE, i32, (UOp.const(f32, 4.0),), (0, "global")), "RANGE end must be an int"),
  (lambda: UOp(Ops.END, dtypes.void, (UOp.const(i32, 4),)), "END must close a RANGE"),
  (lambda: UOp(Ops.REDUCE, f32, (UOp.const(f32, 1.0), UOp.const(i32, 4)), Ops.ADD), "REDUCE reduces over RANGEs"),
  (lambda: UOp(Ops.REDUCE, f32, (UOp.const(f32, 1.0), rng(0, 4)), Ops.SUB), "not a reduce op"),
])
def test_verify_kernel_rejects(make, why: str):
  bad = make()
  sink = UOp(Ops.SINK, dtypes.void, (UOp(Ops.NOOP, dtypes.void, (bad,)),))
  with pytest.raises(VerifyError, match=why) as e:
    verify_kernel(sink, "my stage")
  assert "my stage" in str(e.value) and bad.op.name in str(e.value)
  assert isinstance(e.value, AssertionError)


@pytest.mark.compile_only
def test_verify_kernel_finds_a_broken_node_in_a_real_kernel():
  (ast,) = kernels((E(4, 8) < E(4, 8)).where(E(4, 8), 0.5))
  verify_kernel(ast)
  where = next(u for u in ast.toposort() if u.op is Ops.WHERE)
  broken = ast.substitute({where: where.replace(src=(where.src[0].cast(i32), *where.src[1:]))})
  with pytest.raises(VerifyError, match="WHERE's condition must be bool"):
    verify_kernel(broken)
  with Context(VERIFY=1), pytest.raises(VerifyError, match="kernel AST"):
    lower(broken)


def _loop_program() -> tuple[UOp, UOp, UOp, UOp, UOp, UOp]:
  """out[r] = r*2 for r < 4, as (out, four, r, value, store, end)."""
  out = glob(0, i32)
  four = UOp.const(i32, 4)
  r = UOp(Ops.RANGE, i32, (four,), (0, "global"))
  val = r * 2
  st = out.index(r).store(val)
  return out, four, r, val, st, end(r, st)


@pytest.mark.compile_only
def test_verify_linear_accepts_a_good_program():
  out, four, r, val, st, e = _loop_program()
  two, idx = val.src[1], out.index(r)
  verify_linear([out, four, two, r, val, idx, st, e])


@pytest.mark.compile_only
def test_verify_linear_rejects_use_after_end():
  out, four, r, val, st, e = _loop_program()
  two, idx = val.src[1], out.index(r)
  zero = UOp.const(i32, 0)
  late = out.index(zero).store(val)  # val was computed inside the loop
  with pytest.raises(VerifyError, match="outside its loop"):
    verify_linear([out, four, two, zero, r, val, idx, st, e, out.index(zero), late])


@pytest.mark.compile_only
def test_verify_linear_rejects_use_before_definition():
  out, four, r, val, st, e = _loop_program()
  two, idx = val.src[1], out.index(r)
  with pytest.raises(VerifyError, match="used before it is defined"):
    verify_linear([out, four, r, val, two, idx, st, e])


@pytest.mark.compile_only
def test_verify_linear_rejects_bad_nesting():
  out = glob(0, i32, 16)
  four = UOp.const(i32, 4)
  r0, r1 = UOp(Ops.RANGE, i32, (four,), (0, "global")), UOp(Ops.RANGE, i32, (four,), (1, "global"))
  idx = out.index(r0 * 4 + r1)
  st = idx.store(r1)
  body = [out, four, r0, r1, r0 * 4, r0 * 4 + r1, idx, st]
  e1, e0 = end(r1, st), end(r0, st)
  verify_linear([*body, e1, end(r0, e1)])
  with pytest.raises(VerifyError, match="does not close the innermost loop"):
    verify_linear([*body, e0, end(r1, e0)])
  with pytest.raises(VerifyError, match="never closed"):
    verify_linear([*body, e1])


@pytest.mark.compile_only
def test_verify_linear_rejects_bad_nodes_too():
  out, four, r, val, st, e = _loop_program()
  bad = UOp(Ops.ADD, i32, (r, UOp.const(f32, 2.0)))
  with pytest.raises(VerifyError, match="ADD sources"):
    verify_linear([out, four, r, UOp.const(f32, 2.0), bad, end(r, bad)])


@pytest.mark.compile_only
def test_verify_tensor_graph():
  a, b = Tensor.empty(4, 8), Tensor.empty(4, 8)
  verify_tensor_graph((a + b).uop.sink())
  bad = UOp(Ops.ADD, f32, (a.uop, Tensor.empty(8, 4).uop))
  with pytest.raises(VerifyError, match="different shapes"):
    verify_tensor_graph(bad.sink())
