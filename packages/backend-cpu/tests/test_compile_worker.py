"""COMPILE_WORKER=1 on the CPU: kernels compile in the worker process, so this process never loads LLVM (llvmlite), even
with an empty compile cache (the host's LLVM cpu/features are detected in the worker too)."""
import os
import subprocess
import sys

SCRIPT = """
import sys
from tinygrad import Tensor
from tinygrad.workers import prestart
prestart()
print((Tensor([1.0, 2.0, 3.0]) * 2 + 1).tolist(), "llvmlite" in sys.modules)
"""


def test_cpu_kernels_compile_in_the_worker(tmp_path):
  env = {**os.environ, "DEV": "CPU:LLVM", "COMPILE_WORKER": "1", "CACHEDB": str(tmp_path / "cache.db")}
  out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
  assert out.returncode == 0, out.stderr
  assert out.stdout.split() == ["[3.0,", "5.0,", "7.0]", "False"], out.stdout
  env.update(COMPILE_WORKER="0", CACHEDB=str(tmp_path / "cache0.db"))  # the control: compiling here loads LLVM
  out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
  assert out.returncode == 0 and out.stdout.split()[-1] == "True", (out.stdout, out.stderr)
