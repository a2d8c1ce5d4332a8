"""Looking at the compiler: how many kernels an expression becomes, and the code generated for one of them.

  1. Fusion: `t.schedule()` lists the kernels (and copies) that realizing t would run, without running them.
     Elementwise chains fuse into one kernel, a reduction fuses with its inputs and its elementwise tail;
     a reduced value broadcast back over its input (softmax) needs a kernel boundary.
  2. One kernel: each schedule item carries the kernel's AST (a UOp graph that stores into its output buffer).
     `tinygrad.codegen.program.get_program(ast, renderer)` optimizes, lowers, linearizes and renders it; this
     is what DEBUG=4 prints for every kernel that gets compiled.
  3. `python -m tinygrad.device`: the installed devices, renderers and archs, and whether each works here.

  uv run python examples/kernels.py                  # the default device's renderer (LLVM IR on the CPU)
  DEV=CPU:CLANG uv run python examples/kernels.py    # the same kernels rendered as C
  DEV=PYTHON uv run python examples/kernels.py       # the PYTHON device's program listing
  NOOPT=1 uv run python examples/kernels.py          # no optimizations (no upcast/unroll): plain loops
"""
import subprocess
import sys

from tinygrad import Context, Device, GlobalCounters, Tensor
from tinygrad.codegen.program import get_program


def fusion() -> None:
  a, b = Tensor.rand(64, 64).realize(), Tensor.rand(64, 64).realize()
  exprs = {
    "a + b": lambda: a + b,
    "((a + b) * 2).exp().sqrt()": lambda: ((a + b) * 2).exp().sqrt(),
    "(a * b).sum()": lambda: (a * b).sum(),
    "(a @ b + 1).relu()": lambda: (a @ b + 1).relu(),
    "a.sum(axis=1) * 3 + 1": lambda: a.sum(axis=1) * 3 + 1,
    "a - a.mean(axis=1, keepdim=True)": lambda: a - a.mean(axis=1, keepdim=True),
    "a.softmax(axis=1)": lambda: a.softmax(axis=1),
    "(a + 1).contiguous() * 2": lambda: (a + 1).contiguous() * 2,
    "a.T.contiguous()": lambda: a.T.contiguous(),
  }
  print("kernels per expression (t.schedule(), nothing runs):")
  for text, make in exprs.items(): print(f"   {len(make().schedule()):2d}  {text}")

  GlobalCounters.reset()
  (a @ b + 1).relu().realize()
  print(f"   realizing (a @ b + 1).relu() ran {GlobalCounters.kernel_count} kernel, {GlobalCounters.global_ops} estimated ops")


def one_kernel() -> None:
  x, w = Tensor.rand(4, 8).realize(), Tensor.rand(8).realize()
  (item,) = (x * w).sum(axis=1).relu().schedule()  # a matrix-vector product with a relu: one kernel
  print("\nthe kernel of (x * w).sum(axis=1).relu(), x: (4, 8), w: (8,)")
  print(f"   its buffers: {[f'{b.dtype}[{b.arg[1]}]' for b in item.bufs]} (the output first)")
  print("   its AST:")
  print("   " + str(item.ast).replace("\n", "\n   "))

  renderer = Device.renderer(Device.DEFAULT)
  prog = get_program(item.ast, renderer)
  print(f"\nget_program(ast, {renderer!r}):")
  print(f"   name {prog.name}, optimizations {prog.opts or 'none'}, global size {prog.global_size}")
  print(f"   estimated {prog.estimated_ops} ops and {prog.estimated_mem} bytes moved")
  lines = prog.src.splitlines()
  print("\n".join("   | " + line for line in lines[:40]) + (f"\n   | ... ({len(lines) - 40} more lines)" if len(lines) > 40 else ""))

  # the same AST through another renderer: rendering needs no compiler, only the renderer's plugin
  if Device.DEFAULT.startswith("CPU") and "CLANG" not in renderer.name:
    with Context(DEV="CPU:CLANG", NOOPT=1):
      prog = get_program(item.ast, Device.renderer("CPU"))
    print("\nthe same kernel as C (DEV=CPU:CLANG) with NOOPT=1:")
    print("\n".join("   | " + line for line in prog.src.splitlines()))


def devices() -> None:
  print("\n$ python -m tinygrad.device")
  out = subprocess.run([sys.executable, "-m", "tinygrad.device"], capture_output=True, text=True, check=True).stdout
  print("\n".join("   " + line for line in out.splitlines()))


if __name__ == "__main__":
  fusion()
  one_kernel()
  devices()
