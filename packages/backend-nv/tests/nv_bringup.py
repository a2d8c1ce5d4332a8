"""Device probe for NVK+NV (the NVIDIA kernel driver's ioctls, no libcuda): opens the GPU step by step, printing each step,
then runs a semaphore-only submission, a copy-engine copy, one compute launch (a+b) and a Tensor matmul checked against
numpy. Never hangs: every wait has a deadline (NV_WAIT_TIMEOUT, default 30 s) and reports GPFIFO GET/PUT and the semaphores.
On a failure it prints the step, the ioctl/escape with its request number, errno and RM status, and exits nonzero.

  python packages/backend-nv/tests/nv_bringup.py            # from the repository root; sets up its own import paths
  DEBUG=2 python packages/backend-nv/tests/nv_bringup.py    # also every RM object allocated, with its handle
  NV_QMD=V03_00 python ...                                  # launch with another QMD version than the class's own
  python packages/backend-nv/tests/nv_bringup.py --mock     # the same steps on MOCK+NV (no GPU)
"""
from __future__ import annotations

import os
import sys
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
for pkg in ("core", "backend-nv", "backend-cpu"):
  if (p := os.path.join(ROOT, "packages", pkg, "src")) not in sys.path: sys.path.insert(0, p)
os.environ.setdefault("TINYGRAD_PLUGIN_MODULES", "tinygrad_backend_nv.plugin,tinygrad_backend_cpu.plugin")
MOCK = "--mock" in sys.argv
os.environ["DEV"] = "MOCK+NV" if MOCK else "NVK+NV"  # before tinygrad reads it: the Tensor step must use this interface
STEP = ["start"]


def step(name: str) -> None:
  STEP[0] = name
  print(f"== {name}", flush=True)


def main() -> int:
  import numpy as np
  from tinygrad_backend_nv import nv_classes as cls
  from tinygrad_backend_nv.nvruntime import NVKDevice, NVKProgram
  step("open NVK+NV (RM client, GPU, device, subdevice, classes, usermode doorbell, VA space, UVM, memory, channel)")
  if MOCK:
    from tinygrad_backend_nv.mocknv import MockNV
    iface = MockNV(arch="sm_90")
  else:
    from tinygrad_backend_nv.iface import NVK
    iface = NVK()
  t0 = time.perf_counter()
  dev = NVKDevice(iface, 0, "", log=lambda m: print(f"   {m}", flush=True))
  print(f"   opened in {time.perf_counter() - t0:.2f} s; {dev.queue_state()}")

  step("semaphore-only GPFIFO submission (a host semaphore release, no engine work)")
  dev.submit(cls.PushBuffer())
  dev.synchronize()
  print(f"   ok: {dev.queue_state()}")

  step("copy engine: host -> vidmem -> host (LAUNCH_DMA through the staging buffer)")
  buf = dev.alloc(1 << 20, what="probe buffer")
  src = np.arange(1 << 18, dtype=np.uint32)
  dev.upload(buf, memoryview(src))
  out = np.zeros_like(src)
  dev.download(memoryview(out).cast("B"), buf)
  if not np.array_equal(src, out): raise RuntimeError(f"copy engine round trip differs at {int(np.argmax(src != out))}")
  print(f"   ok: 1 MB round trip equal; {dev.queue_state()}")

  step(f"compute launch: c = a + b on 1024 floats (QMD {dev.qmd_version}, {cls.class_name(dev.compute_class)})")
  arch = f"sm_{dev.arch_number}"
  source = ('extern "C" __global__ void __launch_bounds__(256) add(float* __restrict__ c, const float* __restrict__ a, '
            "const float* __restrict__ b, const int n) { int i = blockIdx.x * 256 + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }")
  from tinygrad_backend_nv.compiler import NVRTCCompiler
  lib = NVRTCCompiler(arch).compile(source)
  if MOCK: iface.register_function(lib, "add", _mock_add)  # type: ignore[attr-defined]  # the mock can't run SASS: it is told what add computes
  prg = NVKProgram(dev, "add", lib)
  print(f"   kernel: {len(prg.img.text)} bytes of code at {prg.code.va:#x}, {prg.img.registers} registers, params at cbuf0+{prg.img.param_offset:#x}")
  a, b = (np.random.default_rng(i).standard_normal(1024).astype(np.float32) for i in (1, 2))
  bufs = [dev.alloc(4096, what=f"probe {n}") for n in "cab"]
  dev.upload(bufs[1], memoryview(a))
  dev.upload(bufs[2], memoryview(b))
  try: t = prg(*bufs, global_size=(4, 1, 1), local_size=(256, 1, 1), vals=(1024,), wait=True)
  except RuntimeError:
    print(f"   launch did not complete: {dev.queue_state()}")
    raise
  c = np.zeros(1024, dtype=np.float32)
  dev.download(memoryview(c).cast("B"), bufs[0])
  if not np.allclose(c, a + b): raise RuntimeError(f"a + b is wrong: {c[:4]} vs {(a + b)[:4]} ({int(np.sum(~np.isclose(c, a + b)))} of 1024 differ)")
  print(f"   ok: a + b correct, kernel time {t * 1e6:.1f} us; {dev.queue_state()}")

  step("Tensor matmul (DEV=NV through the registry) against numpy")
  from tinygrad import Tensor
  x, y = (np.random.default_rng(i).standard_normal((64, 64)).astype(np.float32) for i in (3, 4))
  got = (Tensor(x, device="NV") @ Tensor(y, device="NV")).numpy()
  if not np.allclose(got, x @ y, atol=1e-3, rtol=1e-3): raise RuntimeError(f"matmul differs from numpy by up to {float(np.abs(got - x @ y).max())}")
  print("   ok: 64x64 matmul matches numpy")
  print("ALL STEPS PASSED")
  return 0


def _mock_add(c, a, b, global_size, local_size, vals) -> None:
  """What the probe's a+b kernel computes, for --mock (MOCK+NV runs a Python function in place of SASS)."""
  import numpy as np
  n = min(vals[0], global_size[0] * local_size[0])
  out = np.frombuffer(c, dtype=np.float32, count=n)
  out[:] = np.frombuffer(a, dtype=np.float32, count=n) + np.frombuffer(b, dtype=np.float32, count=n)


if __name__ == "__main__":
  try: sys.exit(main())
  except Exception as e:  # noqa: BLE001  the probe's job is to say where it failed
    from tinygrad_backend_nv.nvrm import NVError
    print(f"FAILED at step: {STEP[0]}")
    if isinstance(e, NVError): print(f"   call {e.call}, request {e.request:#x}, errno {e.errno}, RM status {e.status:#x}")
    print(f"   {type(e).__name__}: {e}")
    traceback.print_exc()
    sys.exit(1)
