"""QCOMCL kernels run on the CL device (PoCL in CI) against the PYTHON device (tinygrad.uop.alu), value for value:
bit for bit for exact ops (NaN matching NaN), within a few ulp for the transcendentals. Half goes through the
16-bit-in-memory, float-in-registers path wherever the OpenCL device lacks cl_khr_fp16 (PoCL does)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from tinygrad import Context, Device, Tensor, dtypes
from tinygrad.dtype import DType
from tinygrad_backend_qcom.opencl import cl_status

pytestmark = pytest.mark.skipif(cl_status()[1] is not None, reason=f"no OpenCL device: {cl_status()[1]}")

SPECIAL = [0.0, -0.0, 1.0, -1.5, 0.1, 3.0e4, -7.25e-5, 65504.0, 1e-7, float("inf"), float("-inf"), float("nan"), 2.5, -2.5, 1e30]


def both(fn: Callable[[], Tensor]) -> tuple[np.ndarray, np.ndarray]:
  with Context(DEV="PYTHON"): ref = fn().numpy()
  with Context(DEV="CL:QCOMCL"): got = fn().numpy()
  return got, ref


def exact(fn: Callable[[], Tensor]) -> None:
  got, ref = both(fn)
  assert got.dtype == ref.dtype and got.shape == ref.shape
  if got.dtype.kind == "f":
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_array_equal(got[ok], ref[ok])
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(ref[ok]))
  else: np.testing.assert_array_equal(got, ref)


FLOATS = [dtypes.float32, dtypes.float16, dtypes.float64, dtypes.bfloat16]


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "neg", "sqrt", "recip", "trunc", "lt", "ne", "where", "mulacc"])
def test_float_ops_exact(dt: DType, op: str) -> None:
  a, b = SPECIAL, SPECIAL[::-1]
  ops: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y, "div": lambda x, y: x / y,
    "max": lambda x, y: x.maximum(y), "neg": lambda x, y: -x, "sqrt": lambda x, y: x.abs().sqrt(), "recip": lambda x, y: x.reciprocal(),
    "trunc": lambda x, y: x.trunc(), "lt": lambda x, y: x < y, "ne": lambda x, y: x != y, "where": lambda x, y: (x < y).where(x, y),
    "mulacc": lambda x, y: x * y + x}
  exact(lambda: ops[op](Tensor(a, dtype=dt), Tensor(b, dtype=dt)))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("op", ["exp2", "log2", "sin"])
def test_transcendentals_close(dt: DType, op: str) -> None:
  xs = [0.0, 0.5, 1.0, 2.0, -3.5, 10.0, 0.001, 100.0]
  got, ref = both(lambda: getattr(Tensor(xs, dtype=dt), op)())
  tol = {dtypes.float16: 1e-3, dtypes.bfloat16: 1e-2}.get(dt, 1e-6)
  np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol)


INTS = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64]


@pytest.mark.parametrize("dt", INTS, ids=str)
def test_int_ops_exact(dt: DType) -> None:
  lo, hi = dtypes.min(dt), dtypes.max(dt)
  a = [lo, hi, 0, 1, 7, hi // 3, lo // 2 if lo else 5, 100]
  b = [-1 if lo else 1, 0, 3, hi, 2, 5, 7, 0]
  exact(lambda: Tensor(a, dtype=dt) // Tensor(b, dtype=dt))  # x // 0 == 0, INT_MIN // -1 wraps: as alu has it
  exact(lambda: Tensor(a, dtype=dt) % Tensor(b, dtype=dt))
  exact(lambda: (Tensor(a, dtype=dt) * Tensor(b, dtype=dt) + Tensor(a, dtype=dt)) ^ Tensor(b, dtype=dt))
  exact(lambda: Tensor(a, dtype=dt).maximum(Tensor(b, dtype=dt)))


@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.uint8,
                                 dtypes.bool], ids=str)
@pytest.mark.parametrize("dst", [dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.float64, dtypes.int8, dtypes.int32, dtypes.uint32,
                                 dtypes.int64, dtypes.bool], ids=str)
def test_casts_exact(src: DType, dst: DType) -> None:
  if dtypes.is_float(src): vals: list = [0.0, -0.0, 1.5, -2.5, 300.7, -1e4, 65519.0, 1e9, 3e38 if src != dtypes.float16 else 6e4, 1.00390625]
  elif src == dtypes.bool: vals = [True, False, True]
  else: vals = [v for v in (0, 1, -1, 255, 65519, 2 ** 24 + 1, -(2 ** 31), 2 ** 40 + 3) if dtypes.min(src) <= v <= dtypes.max(src)]
  if dtypes.is_int(dst) and dtypes.is_float(src): vals = vals[:6]  # out-of-range float -> int: alu wraps, covered by the f2i helper below
  exact(lambda: Tensor(vals, dtype=src).cast(dst))


def test_float_to_int_wraps_like_alu() -> None:
  exact(lambda: Tensor([1e10, -1e10, 3e19, float("nan"), float("inf"), -2.5], dtype=dtypes.float32).cast(dtypes.int64))
  exact(lambda: Tensor([1e10, -1e10, 4e9, -3e9], dtype=dtypes.float64).cast(dtypes.int32))


@pytest.mark.parametrize("src,dst", [(dtypes.float16, dtypes.int16), (dtypes.uint16, dtypes.float16), (dtypes.bfloat16, dtypes.uint16), (dtypes.int16, dtypes.bfloat16), (dtypes.float32, dtypes.uint32),
                                     (dtypes.int32, dtypes.float32), (dtypes.float64, dtypes.int64)], ids=str)
def test_bitcasts_exact(src: DType, dst: DType) -> None:
  vals: list = [0.0, -0.0, 1.0, -2.5, 65504.0, 6e-5] if dtypes.is_float(src) else [0, 1, 15360, 31744, 32704, -1, -16384, -7]
  if src == dtypes.uint16: vals = [v & 0xffff for v in vals]
  exact(lambda: Tensor(vals, dtype=src).bitcast(dst))


TOL = {dtypes.float32: 1e-5, dtypes.float16: 2e-3, dtypes.float64: 1e-12, dtypes.bfloat16: 2e-2}


def close(fn: Callable[[], Tensor], dt: DType, terms: int = 1) -> None:
  """Sums may be added in another order here (work-groups share a reduction): equal up to rounding, which grows with
  the number of terms."""
  got, ref = both(fn)
  assert got.dtype == ref.dtype and got.shape == ref.shape
  np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=TOL[dt], atol=TOL[dt] * terms)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_reductions_and_matmul(dt: DType) -> None:
  # inputs from numpy: Tensor.randn computes log/cos, which may differ in the last bit between devices
  x = np.random.default_rng(1).standard_normal((33, 47))
  mk = lambda: Tensor(x, dtype=dt)  # noqa: E731
  close(lambda: mk().sum(axis=1), dt, terms=47)
  exact(lambda: mk().max(axis=0))
  close(lambda: mk() @ mk().T, dt, terms=47)
  close(lambda: mk().softmax(axis=1) if dt != dtypes.float16 else mk().relu().sum(), dt)


def test_grouped_reduce_uses_local_memory() -> None:
  """A long reduction: core splits it over the threads of a work-group (GROUP) through __local memory and barriers."""
  x = np.random.default_rng(2).standard_normal((4, 5000))
  close(lambda: Tensor(x, dtype=dtypes.float32).sum(axis=1), dtypes.float32, terms=5000)
  close(lambda: Tensor(x[:, :300], dtype=dtypes.float16).sum(axis=1), dtypes.float16, terms=300)
  exact(lambda: Tensor.randint(2, 4000, low=-50, high=50).max(axis=1))


def test_symbolic_variable_and_jit() -> None:
  """A symbolic size becomes an int kernel argument (after the buffers); TinyJit replays with new values."""
  from tinygrad import TinyJit, Variable
  n = Variable("n", 1, 20)
  with Context(DEV="CL:QCOMCL"):
    x = Tensor.arange(20).float().realize()
    @TinyJit
    def f(x: Tensor, k) -> Tensor: return (x.shrink(((0, k),)) * 2 + 1).sum()
    got = [f(x, n.bind(k)).item() for k in (5, 7, 9, 20, 3)]
  assert got == [float(sum(2 * i + 1 for i in range(k))) for k in (5, 7, 9, 20, 3)]


def test_kernel_timing_and_copies() -> None:
  with Context(DEV="CL:QCOMCL"):
    dev = Device["CL"]
    x = Tensor.arange(1 << 16).float().realize()
    from tinygrad.engine.realize import run_schedule
    y = x * 3
    run_schedule(y.schedule())
    assert (y.numpy() == np.arange(1 << 16, dtype=np.float32) * 3).all()
    dev.synchronize()
    assert Tensor(np.arange(10, dtype=np.int8)).to("CL").add(1).numpy().tolist() == list(range(1, 11))
    from tinygrad.helpers import GlobalCounters
    GlobalCounters.reset()
    with Context(DEBUG=2): (x + 1).realize()  # DEBUG=2 asks each kernel for its time (an OpenCL profiling event)
    assert GlobalCounters.time_sum_s > 0


def test_buffer_views_become_sub_buffers() -> None:
  """Views at an aligned offset reach kernels as OpenCL sub-buffers; unaligned ones are a clear error."""
  from tinygrad.device.runtime import Buffer
  with Context(DEV="CL:QCOMCL"):
    dev = Device["CL"]
    align = dev.info["base_align"]  # type: ignore[attr-defined]
    base = Buffer("CL", 2 * align, dtypes.uint8).ensure_allocated()
    base.copyin(memoryview(bytes(range(256)) * (2 * align // 256 + 1))[:2 * align])
    view = Buffer("CL", 16, dtypes.uint8, base=base, offset=align).ensure_allocated()
    out = Buffer("CL", 16, dtypes.uint8).ensure_allocated()
    from tinygrad_backend_qcom.runtime import CLProgram
    src = "__kernel void cp(__global uchar* restrict a, __global uchar* restrict b) { int i = get_global_id(0); a[i] = b[i] + 1; }"
    prog = CLProgram(dev, "cp", Device.renderer("CL").compiler.compile(src))  # type: ignore[arg-type]
    prog(out.opaque, view.opaque, global_size=(1, 1, 1), local_size=(16, 1, 1))
    assert list(out.as_bytes()) == [(align + i) % 256 + 1 for i in range(16)]
    bad = Buffer("CL", 16, dtypes.uint8, base=base, offset=3).ensure_allocated()
    with pytest.raises(RuntimeError, match="not aligned"): prog(out.opaque, bad.opaque, local_size=(16, 1, 1))
