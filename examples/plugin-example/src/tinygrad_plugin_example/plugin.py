"""Device EXAMPLE: C kernels compiled by the system C compiler into shared libraries, loaded with ctypes.

Only `tinygrad.device.plugin` (and the base classes it exports) is imported from core.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from tinygrad.device.plugin import (
  Allocator,
  Compiled,
  CompileError,
  Compiler,
  CStyleRenderer,
  DeviceSpec,
  RegisterDevice,
  RegisterRenderer,
  RendererSpec,
  Target,
  hookimpl,
)


def _cc() -> list[str] | None:
  """$CC (a command line, e.g. "python -m ziglang cc"), else cc, gcc or clang on PATH, else the ziglang wheel's clang (a
  dependency of this package, so a fresh machine without a C compiler still runs the example)."""
  if (cc := os.environ.get("CC", "").strip()): return shlex.split(cc)
  if (found := next(([p] for p in map(shutil.which, ("cc", "gcc", "clang")) if p), None)) is not None: return found
  return [sys.executable, "-m", "ziglang", "cc"] if importlib.util.find_spec("ziglang") is not None else None


class SharedLibCompiler(Compiler):
  """C source -> a shared library (.so bytes)."""

  def __init__(self) -> None:
    self.cachekey = f"example_so_{_cc()}"

  def compile(self, src: str) -> bytes:
    cc = _cc()
    if cc is None: raise CompileError("example", src, "no C compiler found (set CC or install gcc)")
    with tempfile.TemporaryDirectory() as tmp:
      out = os.path.join(tmp, "kernel.so")
      proc = subprocess.run([*cc, "-x", "c", "-", "-shared", "-fPIC", "-O2", "-lm", "-o", out], input=src.encode(), capture_output=True)
      if proc.returncode != 0: raise CompileError(" ".join(cc), src, proc.stderr.decode())
      with open(out, "rb") as f: return f.read()


class ExampleRenderer(CStyleRenderer):
  device = "EXAMPLE"
  name = "C"
  # gcc has no half/bfloat16 arithmetic on every target; keep the example to the common types
  type_map = {k: v for k, v in CStyleRenderer.type_map.items() if v not in ("half", "__bf16")}

  def __init__(self, target: Target | None = None):
    self.arch = (target.arch if target else "") or "host"
    self.compiler = SharedLibCompiler()


class SharedLibProgram:
  """Writes the library to a file (content-addressed) and loads it with ctypes.CDLL."""

  def __init__(self, name: str, lib: bytes):
    path = os.path.join(tempfile.gettempdir(), f"tinygrad_example_{hashlib.sha256(lib).hexdigest()[:16]}.so")
    if not os.path.exists(path):
      with open(path + ".tmp", "wb") as f: f.write(lib)
      os.replace(path + ".tmp", path)
    self.fxn = getattr(ctypes.CDLL(path), name)

  def __call__(self, *bufs: Any, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait: bool = False) -> float | None:
    self.fxn(*[ctypes.c_void_p(ctypes.addressof(b)) for b in bufs], *[ctypes.c_int32(v) for v in vals])
    return 0.0 if wait else None


class CtypesAllocator(Allocator):
  def _alloc(self, size: int, options: Any) -> Any: return (ctypes.c_uint8 * size)()
  def _copyin(self, dest: Any, src: memoryview) -> None: ctypes.memmove(dest, bytes(src), src.nbytes)
  def _copyout(self, dest: memoryview, src: Any) -> None: dest[:] = bytes(src)[:dest.nbytes]


def open_example(index: int, target: Target) -> Compiled:
  return Compiled("EXAMPLE" if index == 0 else f"EXAMPLE:{index}", CtypesAllocator(), SharedLibProgram)


def _available() -> str | None: return None if _cc() else "no C compiler found (set CC or install gcc)"


@hookimpl
def register_devices(register: RegisterDevice) -> None:
  register(DeviceSpec("EXAMPLE", {"": open_example}, available=_available, package="tinygrad-plugin-example"))


@hookimpl
def register_renderers(register: RegisterRenderer) -> None:
  register(RendererSpec(device="EXAMPLE", name="C", make=ExampleRenderer, default=True, available=_available,
                        package="tinygrad-plugin-example"))
