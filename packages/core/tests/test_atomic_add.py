"""Atomic adds into global memory (UOp.atomic_add: a STORE with arg STORE_ADD): every thread's and block's add counts where
several add into one element, on the PYTHON interpreter and each CPU renderer; a renderer without them says so; passes that
rebuild or merge stores keep them scalar and atomic."""
import os

import numpy as np
import pytest
from tinygrad import Context, Device, Tensor, dtypes
from tinygrad.renderer import Renderer
from tinygrad.uop.dsl import AxisType, KernelInfo
from tinygrad.uop.ops import STORE_ADD, Ops, UOp


def blocked_sum(n: int, bins: int, gated: bool = False):
  """fxn: out[i % bins] += x[i] by blocks of 32 threads (PYTHON runs blocks); gated: only even i add."""
  def kernel(out: UOp, x: UOp) -> UOp:
    b, t = UOp.range(n // 32, 0, AxisType.GLOBAL), UOp.range(32, 1, AxisType.LOCAL)
    i = b * 32 + t
    return out[i % bins].atomic_add(x[i], *([(i % 2).eq(0)] if gated else [])).end(t, b).sink(arg=KernelInfo("blocked_sum"))
  return kernel


def looped_sum(n: int, bins: int):
  """fxn: out[i % bins] += x[i] over one GLOBAL range (a CPU runs it as a loop)."""
  def kernel(out: UOp, x: UOp) -> UOp:
    i = UOp.range(n, 0, AxisType.GLOBAL)
    return out[i % bins].atomic_add(x[i]).end(i).sink(arg=KernelInfo("looped_sum"))
  return kernel


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("gated", [False, True], ids=["", "gated"])
def test_blocks_adding_into_shared_elements_all_count_on_python(dt, gated):
  x = np.arange(1024).astype(dt) * (1 if dt != np.float32 else 0.5)
  out = Tensor(np.full(8, 3, dt), device="PYTHON").contiguous()
  got = out.custom_kernel(Tensor(x, device="PYTHON"), fxn=blocked_sum(1024, 8, gated))[0].numpy()
  want = 3 + np.where(np.arange(1024) % 2 == 0, x, 0).reshape(-1, 8).sum(0) if gated else 3 + x.reshape(-1, 8).sum(0)
  np.testing.assert_array_equal(got, want.astype(dt))


@pytest.mark.parametrize("renderer", ["CLANG", "LLVM"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.uint64])
def test_cpu_renderers_add_atomically(renderer, dt):
  specs = [r for r in Device.registry.renderers_for("CPU")] if "CPU" in Device.registry.devices else []
  if not any(r.name == renderer and r.available() is None for r in specs):
    # uv sync installs both (the ziglang wheel's clang, llvmlite): in CI their absence is a failure, not a quiet skip
    if os.environ.get("CI") == "true": pytest.fail(f"CPU:{renderer} is missing: uv sync installs it")
    pytest.skip(f"no CPU:{renderer} here")
  with Context(DEV=f"CPU:{renderer}"):
    x = np.arange(4096).astype(dt)
    xt = Tensor(x)
    got = Tensor.zeros(16, dtype=xt.dtype).contiguous().custom_kernel(xt, fxn=looped_sum(4096, 16))[0].numpy()
  np.testing.assert_array_equal(got, x.reshape(-1, 16).sum(0))


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.int32])
def test_clang_renders_float_adds_that_gcc_compiles_too(dt):
  """gcc's __atomic_fetch_add takes no floats (a machine without clang compiles our C with gcc: $CC, or a `cc` that is gcc):
  float adds are a compare-and-swap loop on their bits, integer adds the builtin. Compiled here with gcc where there is one."""
  import shutil
  import subprocess
  pytest.importorskip("tinygrad_backend_cpu")
  from tinygrad_backend_cpu.clang import ClangRenderer
  src = ClangRenderer().render_atomic_add("(data0+alu0)", "val0", dt)
  assert ("__atomic_compare_exchange_n" in src) == dtypes.is_float(dt) and ("__atomic_fetch_add" in src) != dtypes.is_float(dt)
  if (gcc := shutil.which("gcc")) is None:
    if os.environ.get("CI") == "true": pytest.fail("gcc is missing: .ci/run installs it (apt-get install gcc)")
    pytest.skip("no gcc on this machine (the float adds rendered as compare-and-swap loops were checked)")
  c = {dtypes.float32: "float", dtypes.float64: "double", dtypes.int32: "int"}[dt]
  code = f"void k({c}* restrict data0, {c} val0, int alu0) {{ {src} }}"
  res = subprocess.run([gcc, "-x", "c", "-O2", "-c", "-o", "/dev/null", "-"], input=code.encode(), capture_output=True)
  assert res.returncode == 0, res.stderr.decode()


def test_a_renderer_without_atomic_adds_says_so():
  """The error names the dtype, the memory and what the renderer has, and how to get around it."""
  buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(8), (), 0)
  st = buf.index(UOp.const(dtypes.int32, 1)).atomic_add(UOp.const(dtypes.float32, 1.0))
  assert st.op is Ops.STORE and st.arg == STORE_ADD
  with pytest.raises(NotImplementedError, match="no atomic add of dtypes.float.*partial results"): Renderer().check_atomic_add(st)
  class OnlyInts(Renderer): atomic_add = (dtypes.int32,)
  with pytest.raises(NotImplementedError, match="int"): OnlyInts().check_atomic_add(st)
  local = UOp(Ops.DEFINE_LOCAL, dtypes.int32.ptr(8, "local"), (), 0).index(UOp.const(dtypes.int32, 0)).atomic_add(UOp.const(dtypes.int32, 1))
  with pytest.raises(NotImplementedError, match="local memory"): OnlyInts().check_atomic_add(local)


def test_gate_cleanup_keeps_the_add():
  """A gate that is always true is dropped by a rewrite that rebuilds the store: the add must survive it (else a plain store
  would overwrite the other threads' sums)."""
  def kernel(out: UOp, x: UOp) -> UOp:
    b, t = UOp.range(4, 0, AxisType.GLOBAL), UOp.range(32, 1, AxisType.LOCAL)
    i = b * 32 + t
    return out[0].atomic_add(x[i], i < 1000).end(t, b).sink(arg=KernelInfo("gated_true"))
  got = Tensor.zeros(1, device="PYTHON").contiguous().custom_kernel(Tensor(np.ones(128, np.float32), device="PYTHON"), fxn=kernel)[0]
  assert got.item() == 128.0


def test_a_histogram_indexed_by_values_read_in_the_kernel():
  """counts[labels[i]]: an index read from a buffer is its element's value (the DSL loads it), and the adds into shared bins all
  count."""
  def histogram(counts: UOp, labels: UOp) -> UOp:
    i = UOp.range(labels.shape[0], 0, AxisType.GLOBAL)
    return counts[labels[i]].atomic_add(1).end(i).sink(arg=KernelInfo("histogram"))
  labels = np.random.default_rng(0).integers(0, 10, 300).astype(np.int32)
  counts = Tensor.zeros(10, dtype=dtypes.int32, device="PYTHON").contiguous().custom_kernel(Tensor(labels, device="PYTHON"), fxn=histogram)[0]
  assert counts.tolist() == np.bincount(labels, minlength=10).tolist()


def test_get_program_checks_every_renderer_before_it_renders():
  """The check is core's (codegen/program.py), not each renderer's: a renderer that lists no dtypes never sees the add."""
  from tinygrad.codegen.program import get_program
  from tinygrad.runtime.python import PythonRenderer
  class NoAtomics(PythonRenderer): atomic_add = ()
  out = Tensor.zeros(8, device="PYTHON").contiguous().custom_kernel(Tensor(np.ones(1024, np.float32), device="PYTHON"), fxn=blocked_sum(1024, 8))[0]
  ast = out.schedule()[-1].ast
  assert "blocked_sum" in get_program(ast, PythonRenderer()).src  # renders where the dtype is listed
  with pytest.raises(NotImplementedError, match="NoAtomics renders no atomic add"): get_program(ast, NoAtomics())
