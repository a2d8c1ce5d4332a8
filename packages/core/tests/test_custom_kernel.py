"""Kernels written by hand in UOps (uop/dsl.py) and run through Tensor.custom_kernel on the session's device: a sum (with
a shared-memory reduction and a barrier where the device runs blocks of threads, a loop elsewhere) and a matmul with a
backward, against the Tensor versions; their place in the schedule among ordinary kernels; opts only when asked."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.program import get_program
from tinygrad.uop.dsl import AddrSpace, AxisType, KernelInfo, program
from tinygrad.uop.ops import Ops, UOp

LANES = 16


def renderer():
  return Device.renderer(Device.DEFAULT)


def has_blocks() -> bool:
  r = renderer()
  return r.has_local or r.runs_blocks


def sum_loop(B: UOp, A: UOp) -> UOp:
  """B[0] = sum(A): one loop, B[0] is the accumulator."""
  r = UOp.range(A.shape[0], 0, AxisType.REDUCE)
  acc = B.after(B[0].store(0.0), r)  # B inside loop r, after the init
  return acc[0].store(acc[0] + A[r]).end(r).sink(arg=KernelInfo("custom_sum"))


def sum_local(B: UOp, A: UOp) -> UOp:
  """B[0] = sum(A) by LANES threads: each sums a strided slice in a register, the partials meet in shared memory, and after a
  barrier thread 0 adds them up."""
  lane = UOp.range(LANES, 0, AxisType.LOCAL)
  r = UOp.range(A.shape[0] // LANES, 1, AxisType.REDUCE)
  part = UOp.placeholder(1, A.dtype.base, 0, AddrSpace.REG)
  a = part.after(part.after(lane)[0].store(0.0), r)
  summed = a[0].store(a[0] + A[r * LANES + lane]).end(r)
  shared = UOp.placeholder(LANES, A.dtype.base, 1, AddrSpace.LOCAL)
  bar = shared[lane].store(part.after(summed)[0]).barrier()
  r2 = UOp.range(LANES, 2, AxisType.REDUCE)
  tot = UOp.placeholder(1, A.dtype.base, 2, AddrSpace.REG)
  t = tot.after(tot.after(lane)[0].store(0.0), r2)
  done = t[0].store(t[0] + shared.after(bar)[r2]).end(r2)
  return B[0].store(tot.after(done)[0], lane.eq(0)).end(lane).sink(arg=KernelInfo("custom_sum_local"))


def matmul(C: UOp, A: UOp, B: UOp) -> UOp:
  (M, K), N = A.shape, B.shape[1]
  i, j, k = UOp.range(M, 0, AxisType.GLOBAL), UOp.range(N, 1, AxisType.GLOBAL), UOp.range(K, 2, AxisType.REDUCE)
  acc = UOp.placeholder(1, C.dtype.base, 0, AddrSpace.REG)
  a = acc.after(acc.after(i, j)[0].store(0.0), k)  # reset per output, then inside loop k
  summed = a[0].store(a[0] + A[i, k] * B[k, j]).end(k)
  return C[i, j].store(acc.after(summed)[0]).end(i, j).sink(arg=KernelInfo("custom_matmul"))


def matmul_backward(gradient: UOp, call: UOp) -> tuple[UOp | None, ...]:
  _, A, B = call.src
  return None, (Tensor(gradient) @ Tensor(B).T).uop, (Tensor(A).T @ Tensor(gradient)).uop


def custom_sum(a: Tensor) -> Tensor:
  fxn = sum_local if has_blocks() else sum_loop
  return Tensor.empty(1, dtype=a.dtype, device=a.device).custom_kernel(a, fxn=fxn)[0]


def custom_matmul(a: Tensor, b: Tensor) -> Tensor:
  out = Tensor.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
  return out.custom_kernel(a, b, fxn=matmul, grad_fxn=matmul_backward)[0]


runs = pytest.mark.skipif(is_null_device(), reason="the NULL device runs no kernels (the compile_only test runs there)")


@runs
def test_custom_sum_equals_tensor_sum():
  x = Tensor.rand(256)
  got = custom_sum(x)
  assert got.shape == (1,)
  np.testing.assert_allclose(got.numpy()[0], x.sum().numpy(), rtol=1e-5)
  np.testing.assert_allclose(got.numpy()[0], x.numpy().sum(), rtol=1e-5)


@runs
def test_custom_sum_of_a_lazy_input_fused_into_later_ops():
  """The argument is an expression (computed into a buffer first); the result feeds ordinary kernels."""
  x = Tensor.arange(64).float()
  s = custom_sum(x * 2 + 1)
  out = (s * 3 - x[:1]).relu()
  assert out.tolist() == [3 * (2 * sum(range(64)) + 64)]


@runs
def test_custom_matmul_and_its_gradient():
  a, b = Tensor.randn(6, 5, requires_grad=True), Tensor.randn(5, 7, requires_grad=True)
  c = custom_matmul(a, b)
  (c * c).sum().backward()
  got_c, ga, gb = c.numpy(), a.grad.numpy(), b.grad.numpy()
  a.grad = b.grad = None
  ref = a @ b
  (ref * ref).sum().backward()
  np.testing.assert_allclose(got_c, ref.numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ga, a.grad.numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(gb, b.grad.numpy(), rtol=1e-5, atol=1e-5)


def add_into(B: UOp, A: UOp) -> UOp:
  """B += A, in place."""
  i = UOp.range(A.shape[0], 0, AxisType.GLOBAL)
  return B[i].store(B[i] + A[i]).end(i).sink(arg=KernelInfo("add_into"))


@runs
def test_in_place_kernel_runs_once_per_call_in_order():
  acc = Tensor.zeros(4).contiguous().realize()
  x = Tensor([1.0, 2.0, 3.0, 4.0])
  before = acc * 1  # reads the old contents: must run before the kernel overwrites them
  once = acc.custom_kernel(x, fxn=add_into)[0]
  twice = once.custom_kernel(x * 10, fxn=add_into)[0]  # chained: the second kernel runs on the first one's result
  Tensor.realize_all(before, twice)
  assert before.tolist() == [0, 0, 0, 0]
  assert twice.tolist() == [11, 22, 33, 44]
  assert acc.tolist() == [11, 22, 33, 44]  # the kernels wrote acc's own buffer
  assert (once + 0).tolist() == [11, 22, 33, 44]  # realized: reading it again does not run the kernel again


@pytest.mark.compile_only
def test_schedule_holds_the_kernel_among_ordinary_ones():
  x = Tensor.rand(64).realize()
  s = custom_sum(x.exp())
  items = (s + 1).schedule()
  names = [it.ast.arg.name if isinstance(it.ast.arg, KernelInfo) else None for it in items]
  assert len(items) == 3 and names[1] in ("custom_sum", "custom_sum_local"), names  # exp, the custom kernel, +1


@runs
def test_hand_written_kernel_gets_only_the_opts_it_asks_for():
  a = Tensor.rand(64, 64).realize()
  b = Tensor.rand(64, 64).realize()
  (item,) = [it for it in custom_matmul(a, b).schedule() if isinstance(it.ast.arg, KernelInfo)]
  assert get_program(item.ast, renderer()).opts == []  # the heuristics would upcast a 64x64 matmul

  def double(B: UOp, A: UOp) -> UOp:
    i = UOp.range(A.shape[0], 0, AxisType.GLOBAL)
    return B[i].store(A[i] * 2).sink(arg=KernelInfo("double", (Opt(OptOps.UPCAST, 0, 4),)))  # the loop is left open: codegen closes it
  x = Tensor.arange(32).float()
  out = Tensor.empty(32).custom_kernel(x, fxn=double)[0]
  (item,) = [it for it in out.schedule() if isinstance(it.ast.arg, KernelInfo)]
  spec = get_program(item.ast, renderer())
  assert spec.name.startswith("double_") and spec.opts == [Opt(OptOps.UPCAST, 0, 4)]
  assert out.tolist() == [2.0 * i for i in range(32)]


@runs
def test_errors_say_what_to_do():
  x = Tensor.rand(8)
  with pytest.raises(NotImplementedError, match="grad_fxn"):
    x.requires_grad_()
    Tensor.empty(1).custom_kernel(x, fxn=sum_loop)[0].sum().backward()
  with pytest.raises(TypeError, match="SINK"):
    Tensor.empty(1).custom_kernel(x, fxn=lambda B, A: 3)
  with pytest.raises(IndexError, match="one per axis"):
    Tensor.empty(1).custom_kernel(x, fxn=lambda B, A: B[0].store(A[0, 1]).sink())
  if not has_blocks():
    with pytest.raises(ValueError, match="runs no blocks"):
      Tensor.empty(1).custom_kernel(Tensor.rand(64), fxn=sum_local)[0].realize()


@pytest.mark.compile_only
@pytest.mark.parametrize("build", ["sum", "matmul"])
def test_hand_written_kernels_compile(build: str):
  """Every renderer (NULL:CUDA too) compiles both kernels; the sum with shared memory and a barrier where it has blocks."""
  x = Tensor.empty(256)
  out = custom_sum(x) if build == "sum" else custom_matmul(Tensor.empty(8, 16), Tensor.empty(16, 4))
  (item,) = [it for it in out.schedule() if isinstance(it.ast.arg, KernelInfo)]
  r = renderer()
  spec = get_program(item.ast, r)
  r.compiler.compile_cached(spec.src)
  if build == "sum" and has_blocks():
    assert any(u.op is Ops.BARRIER for u in spec.uops) and spec.local_size == (LANES, 1, 1)



def test_dtype_of_placeholder():
  p = UOp.placeholder((2, 3), dtypes.half, 0, AddrSpace.LOCAL)
  assert p.shape == (2, 3) and p.src[0].dtype.addrspace == "local" and p.src[0].dtype.size == 6


# ---- kernels handed in as the backend's source or binary (a PROGRAM UOp)

C_ADD_ONE = """void add_one(float* restrict data0, const float* restrict data1) {
  for (int i = 0; i < 4; i++) data0[i] = data1[i] + 1.0f;
}"""

CUDA_ADD_ONE = """extern "C" __global__ void add_one(float* data0, const float* data1) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 4) data0[i] = data1[i] + 1.0f;
}"""


@runs
def test_c_source_and_binary_kernels_run_on_clang():
  if renderer().name != "CLANG": pytest.skip("the source is C: CPU:CLANG compiles it")
  x = Tensor([1.0, 2.0, 3.0, 4.0])
  out = Tensor.empty(4).custom_kernel(x * 2, fxn=lambda o, a: program("add_one", src=C_ADD_ONE))[0]
  assert (out * 10).tolist() == [30.0, 50.0, 70.0, 90.0]  # a lazy input before it, an ordinary kernel after it
  lib = renderer().compiler.compile(C_ADD_ONE)
  out = Tensor.empty(4).custom_kernel(x, fxn=lambda o, a: program("add_one", binary=lib))[0]
  assert out.tolist() == [2.0, 3.0, 4.0, 5.0]


@pytest.mark.compile_only
def test_cuda_source_kernel_compiles_through_custom_kernel():
  """On NULL:CUDA the source goes through NVRTC like a generated kernel (on a GPU it would also run)."""
  if renderer().name != "CUDA": pytest.skip("CUDA C needs the CUDA renderer's compiler (DEV=NULL:CUDA or CUDA)")
  x = Tensor([1.0, 2.0, 3.0, 4.0]).realize()
  out = Tensor.empty(4).custom_kernel(x, fxn=lambda o, a: program("add_one", src=CUDA_ADD_ONE, local_size=(32,)))[0]
  (item,) = out.schedule()
  spec = get_program(item.ast, renderer())
  assert spec.name == "add_one" and spec.globals == [0, 1] and spec.local_size == (32, 1, 1)
  assert len(renderer().compiler.compile_cached(spec.src)) > 0
  out.realize()
  if not is_null_device(): assert out.tolist() == [2.0, 3.0, 4.0, 5.0]  # on a GPU it ran


def test_program_needs_source_or_binary():
  with pytest.raises(ValueError, match="src="):
    program("k")


def add_both(X: UOp, Y: UOp) -> UOp:
  """X += 1 and Y += 10, in place: two outputs of one kernel."""
  i = UOp.range(X.shape[0], 0, AxisType.GLOBAL)
  return UOp.sink(X[i].store(X[i] + 1.0), Y[i].store(Y[i] + 10.0), arg=KernelInfo("add_both"))  # codegen closes loop i


@runs
def test_kernel_with_two_outputs_runs_once():
  x, y = Tensor.zeros(3).contiguous().realize(), Tensor.zeros(3).contiguous().realize()
  x2, y2 = x.custom_kernel(y, fxn=add_both)
  assert x2.tolist() == [1.0, 1.0, 1.0]  # runs the kernel
  assert y2.tolist() == [10.0, 10.0, 10.0]  # the same run's other output: not run again
  assert (x2 + y2).tolist() == [11.0, 11.0, 11.0]


def mean_and_variance(out: UOp, a: UOp) -> UOp:
  """out = [mean(a), mean((a - mean)^2)] in one thread: the second loop's accumulator starts after the first loop has ended
  (a RANGE whose start waits for side effects that hold another such RANGE)."""
  n = a.shape[0]
  r1, r2 = UOp.range(n, 0, AxisType.REDUCE), UOp.range(n, 1, AxisType.REDUCE)
  s = UOp.placeholder(1, dtypes.float32, 0, AddrSpace.REG)
  acc = s.after(s[0].store(0.0), r1)
  mean_done = out[0].store(s.after(acc[0].store(acc[0] + a[r1]).end(r1))[0] / n)
  m = out.after(mean_done)[0]
  v = UOp.placeholder(1, dtypes.float32, 1, AddrSpace.REG)
  acc2 = v.after(v.after(mean_done)[0].store(0.0), r2)
  var_done = acc2[0].store(acc2[0] + (a[r2] - m) * (a[r2] - m)).end(r2)
  return out[1].store(v.after(var_done)[0] / n).sink(arg=KernelInfo("mean_var"))


@runs
def test_a_loop_after_a_loop_that_computes_what_it_uses():
  x = np.random.default_rng(1).standard_normal(50).astype(np.float32)
  got = Tensor.empty(2).custom_kernel(Tensor(x), fxn=mean_and_variance)[0].numpy()
  np.testing.assert_allclose(got, [x.mean(), x.var()], rtol=1e-5, atol=1e-6)


def shifted_copy(B: UOp, A: UOp, shift: UOp) -> UOp:
  """B[i] = A[(i + shift) % n] + shift: a Variable in the index math and as a value."""
  i = UOp.range(A.shape[0], 0, AxisType.GLOBAL)
  return B[i].store(A[(i + shift) % A.shape[0]] + shift.cast(A.dtype.base)).sink(arg=KernelInfo("shifted_copy"))


@runs
def test_a_bound_variable_is_a_kernel_parameter():
  """One kernel for every value of the Variable: eager calls and a TinyJit's replays pass the bound value."""
  from tinygrad import TinyJit, Variable
  x = Tensor.arange(8).float().realize()
  v = Variable("shift", 0, 7)
  for s in (0, 3):
    out = Tensor.empty(8).custom_kernel(x, v.bind(s), fxn=shifted_copy)
    assert len(out) == 2  # the two tensors: the Variable returns none
    assert out[0].tolist() == [float((i + s) % 8 + s) for i in range(8)]
  (item,) = Tensor.empty(8).custom_kernel(x, v.bind(5), fxn=shifted_copy)[0].schedule()
  assert item.var_vals == {"shift": 5} and [u.arg[0] for u in item.ast.toposort() if u.op is Ops.DEFINE_VAR] == ["shift"]

  @TinyJit
  def step(a: Tensor, shift: UOp) -> Tensor: return Tensor.empty(8).custom_kernel(a, shift, fxn=shifted_copy)[0].realize()
  for s in (1, 2, 6, 4):
    assert step(x, v.bind(s)).tolist() == [float((i + s) % 8 + s) for i in range(8)], s


def test_custom_kernel_arguments_are_checked():
  from tinygrad import Variable
  x = Tensor.rand(8)
  with pytest.raises(TypeError, match="bound to a value"):
    Tensor.empty(8).custom_kernel(x, Variable("shift", 0, 7), fxn=shifted_copy)
  with pytest.raises(ValueError, match="passed twice"):
    Tensor.empty(8).custom_kernel(x, Variable("s", 0, 7).bind(1), Variable("s", 0, 7).bind(1), fxn=lambda B, A, s, t: B[0].store(A[s]).sink())
  with pytest.raises(ValueError, match="buffers only"):  # a kernel as source has no place for a Variable's value
    Tensor.empty(8).custom_kernel(x, Variable("s", 0, 7).bind(1), fxn=lambda B, A, s: program("copy", src="void copy() {}"))
  with pytest.raises(ValueError, match="at least one tensor"):
    from tinygrad.frontend.custom_kernel import custom_kernel
    custom_kernel((Variable("s", 0, 7).bind(1),), fxn=lambda s: s)
