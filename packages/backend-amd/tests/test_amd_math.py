"""The float64 exp2/log2/sin sequences both renderers emit (AMDGPU has no instructions for them, and we link no device
library), run on the host against Python's math: the HIP C helpers compiled by clang for x86, the LLVM IR ones JIT-ed
by llvmlite. The same source is what the GPU gets, so this checks their arithmetic without a GPU."""
from __future__ import annotations

import ctypes
import math
import os
import subprocess
import tempfile

import numpy as np
import pytest
from amd_harness import needs_hip
from tinygrad.device.plugin import dtypes

XS = [0.0, -0.0, 1e-300, 5e-324, 0.5, 1.0, 2.0, 3.0, -3.7, 10.25, 1023.9, 1024.5, -1074.0, -1080.5, math.pi, 1e5 + 0.3, -12345.678, 1e7,
      1e-8, 0.7071, 1.4142, 123456789.0, float("inf"), float("-inf"), float("nan")]
_rng = np.random.default_rng(0)  # and a sweep: exp2's whole range, log2 over many binades, sin where the reduction is exact
XS += [float(v) for v in (*_rng.uniform(-1070, 1023, 200), *(10.0 ** _rng.uniform(-300, 300, 200)), *_rng.uniform(-1e5, 1e5, 200))]
REFS = {"exp2": lambda x: 2.0 ** x if x < 1024 else math.inf, "log2": lambda x: math.log2(x) if x > 0 else (-math.inf if x == 0 else math.nan),
        "sin": lambda x: math.sin(x) if math.isfinite(x) else math.nan}


def _check(fn: str, f) -> None:
  for x in XS:
    if fn == "log2" and x < 0: ref = math.nan
    elif fn == "exp2" and x == -math.inf: ref = 0.0
    elif fn == "exp2" and x == math.inf: ref = math.inf
    else: ref = REFS[fn](x) if not math.isnan(x) else math.nan
    got = f(x)
    if fn == "sin" and 1e9 < abs(x) < math.inf: assert -1 <= got <= 1, (x, got)  # the reduction is exact to |x| ~ 2^20: documented
    elif math.isnan(ref): assert math.isnan(got), (fn, x, got)
    elif math.isinf(ref) or ref == 0: assert got == ref, (fn, x, got)
    else:
      tol = 4 * np.spacing(abs(ref)) if not (fn == "sin" and abs(x) > 1e6) else 1e-9  # sin: Cody-Waite loses digits for huge |x|
      assert abs(got - ref) <= tol, (fn, x, got, ref, (got - ref) / np.spacing(abs(ref)))


@needs_hip
@pytest.mark.parametrize("fn", ["exp2", "log2", "sin"])
def test_hip_f64_helpers(fn: str):
  from tinygrad_backend_amd.hip import _F64_MATH
  from tinygrad_backend_amd.toolchain import find_clang
  src = "\n".join(_F64_MATH.values()).replace("static __attribute__((device)) __attribute__((always_inline))", "static inline")
  src += "".join(f'\nextern "C" double host_{f}(double x) {{ return tg_{f}(x); }}' for f in ("exp2", "log2", "sin"))
  with tempfile.TemporaryDirectory() as tmp:
    path, so = os.path.join(tmp, "m.cpp"), os.path.join(tmp, "m.so")
    with open(path, "w") as f: f.write(src)
    subprocess.run([find_clang().path, "-x", "c++", "-O2", "-ffp-contract=off", "-shared", "-fPIC", path, "-o", so, "-lm"], check=True)
    lib = ctypes.CDLL(so)
  host = getattr(lib, f"host_{fn}")
  host.restype, host.argtypes = ctypes.c_double, [ctypes.c_double]
  _check(fn, host)


@pytest.mark.parametrize("fn", ["exp2", "log2", "sin"])
def test_llvm_f64_sequences(fn: str):
  import llvmlite.binding as llvm
  from tinygrad_backend_amd.llvmir import _AMDFunctionBuilder
  b = _AMDFunctionBuilder("f", [], datalayout="")
  out = getattr(b, f"{fn}_f64")("%x")
  ir = "\n".join([*b.decls.values(), "define double @f(double %x) {", "entry:", *b.lines, f"  ret double {out}", "}"])
  llvm.initialize_native_target()
  llvm.initialize_native_asmprinter()
  mod = llvm.parse_assembly(ir)
  mod.verify()
  tm = llvm.Target.from_default_triple().create_target_machine()
  engine = llvm.create_mcjit_compiler(mod, tm)
  engine.finalize_object()
  f = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(engine.get_function_address("f"))
  _check(fn, f)
  assert dtypes.float64.itemsize == 8
