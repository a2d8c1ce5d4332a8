"""Shared helpers for backend-nv's tests: hand-built linearized programs, the alu reference, and a runner that
compiles with a renderer (always: NVRTC and nvJitLink work without a GPU) and runs on the GPU when there is one."""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from tinygrad.device.devstring import Target
from tinygrad.dtype import DType, dtypes
from tinygrad.renderer import Renderer
from tinygrad.renderer.builder import ProgramBuilder as Prog
from tinygrad.schedule.kernelize import SplitPolicy
from tinygrad.uop.alu import eval_scalar, from_bits, to_bits
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_nv.cuda import CUDARenderer
from tinygrad_backend_nv.ptx import PTXRenderer
from tinygrad_backend_nv.runtime import device_arch, driver_status

# the tests schedule tensors of the default (CPU-style) device and compile the kernels for a GPU: a schedule without CPU panels
# (schedule/pack.py), as a GPU's is, so that a matmul stays the matmul the tensor cores take
GPU_SCHEDULE = SplitPolicy(packs=lambda device: False)

GPU_COUNT, NO_GPU_REASON = driver_status()
HAS_GPU = GPU_COUNT > 0
GPU_ARCH = device_arch(0) if HAS_GPU else None
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason=f"needs an NVIDIA GPU: {NO_GPU_REASON}")

NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16,
      dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.uint64: np.uint64,
      dtypes.float16: np.float16, dtypes.bfloat16: np.uint16, dtypes.float32: np.float32, dtypes.float64: np.float64}
_names = itertools.count()


def make_renderer(kind: str, arch: str | None = None) -> Renderer:
  """The renderer under test: for the GPU's arch when there is one (so the cubin runs there), else sm_90."""
  arch = arch or (GPU_ARCH if GPU_ARCH in ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90") else "sm_90")
  return (CUDARenderer if kind == "CUDA" else PTXRenderer)(Target("CUDA", kind, arch))


RENDERERS = ["CUDA", "PTX"]


def compile_prog(p: Prog, renderer: Renderer, name: str | None = None) -> tuple[str, str, bytes]:
  name = name or f"nvtest_{next(_names)}"
  src = renderer.render(name, p.uops)
  return name, src, renderer.compiler.compile(src)


def run(p: Prog, bufs: list[np.ndarray], renderer: Renderer, vals: tuple[int, ...] = (), global_size=(1, 1, 1),
        local_size=(1, 1, 1)) -> list[np.ndarray] | None:
  """Render and compile (always); on a GPU also run and return the buffers' contents after the kernel, else None."""
  name, _, lib = compile_prog(p, renderer)
  if not HAS_GPU: return None
  from tinygrad_backend_nv.runtime import open_cuda
  dev = open_cuda("CUDA", 0)
  prg = dev.runtime(name, lib)  # type: ignore[misc]
  handles = []
  for a in bufs:
    handles.append(h := dev.allocator.alloc(max(a.nbytes, 1)))
    dev.allocator.copyin(h, memoryview(a.tobytes()))
  prg(*handles, vals=vals, global_size=global_size, local_size=local_size)
  dev.synchronize()
  out = []
  for a, h in zip(bufs, handles):
    res = np.empty_like(a)
    dev.allocator.copyout(res.data.cast("B"), h)
    out.append(res)
  for a, h in zip(bufs, handles): dev.allocator.free(h, max(a.nbytes, 1))
  return out


# ---- the reference: the same UOps evaluated with alu.py

def ref_eval(u: UOp, env: dict[UOp, object]) -> object: return eval_scalar(u, env)


def to_np(vals: list[object], dt: DType) -> np.ndarray:
  if dt == dtypes.bfloat16: return np.array([to_bits(v, dt) for v in vals], np.uint16)
  return np.array(vals, NP[dt])


def from_np(a: np.ndarray, dt: DType) -> list[object]:
  return [from_bits(int(x), dt) for x in a] if dt == dtypes.bfloat16 else [x.item() for x in a]


def as_float(a: np.ndarray, dt: DType) -> np.ndarray:
  return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32) if dt == dtypes.bfloat16 else a


def assert_same(actual: np.ndarray, expected: np.ndarray, dt: DType, msg: str = "") -> None:
  """Exact equality; for floats NaN matches NaN and the sign of zero counts."""
  actual, expected = as_float(actual, dt), as_float(expected, dt)
  if not dtypes.is_float(dt): return np.testing.assert_array_equal(actual, expected, err_msg=msg)
  np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected), err_msg=msg)
  ok = ~np.isnan(expected)
  np.testing.assert_array_equal(actual[ok], expected[ok], err_msg=msg)
  np.testing.assert_array_equal(np.signbit(actual[ok]), np.signbit(expected[ok]), err_msg=f"sign of zero: {msg}")


OutFn = Callable[..., UOp]  # (prog, loaded inputs) -> value to store


def elementwise(ins: Sequence[tuple[DType, Sequence[Any]]], outs: Sequence[tuple[DType, OutFn]], renderer: Renderer,
                rtol: float | None = None) -> None:
  """out_k[i] = fn_k(loaded inputs at i) over a loop; each output is compared with ref_eval of the same UOps
  (exactly, or with rtol for approximations)."""
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
  got = run(p, [np.zeros(n, NP[dt]) for dt, _ in outs] + inputs, renderer)
  if got is None: return  # compiled; nothing to run it on
  loaded = [from_np(a, dt) for a, (dt, _) in zip(inputs, ins)]
  for k, ((dt, _), v) in enumerate(zip(outs, values)):
    expected = to_np([ref_eval(v, dict(zip(xs, [col[i] for col in loaded]))) for i in range(n)], dt)
    msg = f"output {k} ({dt}, {v.op}): inputs {loaded}\n{renderer.render('k', p.uops)}"
    if rtol is None: assert_same(got[k], expected, dt, msg)
    else: np.testing.assert_allclose(as_float(got[k], dt).astype(np.float64), as_float(expected, dt).astype(np.float64), rtol=rtol,
                                     atol=0, equal_nan=True, err_msg=msg)


def matvec_prog(gate: bool = False, store_into_matrix: bool = False) -> tuple[Prog, object, object]:
  """out[g * 4 + l] = sum_r W[(g * 4 + l) * 64 + r] * x[r]: (prog, the matrix's load, the vector's load)."""
  p = Prog()
  out, w, x = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32), p.glob(2, dtypes.float32)
  g, lane = p.special("gidx0", 8), p.special("lidx0", 4)
  row = p.alu(Ops.ADD, p.alu(Ops.MUL, g, p.const(dtypes.int32, 4)), lane)
  acc = p(Ops.DEFINE_REG, dtypes.float32.ptr(1, "reg"), (), 0)
  zero = p.const(dtypes.int32, 0)
  p.store(acc, zero, p.const(dtypes.float32, 0.0))
  r = p.loop(p.const(dtypes.int32, 64))
  at = p.alu(Ops.ADD, p.alu(Ops.MUL, row, p.const(dtypes.int32, 64)), r)
  wv = p.load(w, at, p.alu(Ops.CMPLT, r, p.const(dtypes.int32, 60)), p.const(dtypes.float32, 0.0)) if gate else p.load(w, at)
  xv = p.load(x, r)
  st = p.store(acc, zero, p.alu(Ops.MULACC, wv, xv, p.load(acc, zero)))
  done = p(Ops.AFTER, acc.dtype, (acc, p.end(r, st)))
  p.store(w if store_into_matrix else out, row, p.load(done, zero))
  return p, wv, xv
