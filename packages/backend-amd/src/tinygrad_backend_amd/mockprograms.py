"""How MOCKKFD knows what a kernel computes: a renderer for MOCKKFD+AMD targets that, next to the HIP C it renders,
records the PYTHON program of the same linearized uops, and a table from each code object's load image to those programs.

The HIP source carries the PYTHON program as its last line, a `//` comment (clang ignores it; the on-disk compile cache
keys on it like on the rest of the source). `compile_cached` then keys the table by the sha256 of the code object's load
image, padded with zeros to whole pages, which is exactly what the runtime puts in the program's GPU allocation. At each
dispatch the packet processor hashes the allocation its kernel object points into and looks the program up: a packet
whose kernel object points anywhere else, or at memory that was overwritten, has no program and is an error.
"""
from __future__ import annotations

import hashlib

from tinygrad.device.plugin import Target, UOp, python_interpreter

from tinygrad_backend_amd.hip import HIPCompiler, HIPRenderer
from tinygrad_backend_amd.loader import KernelInfo, load_code_object

PAGE = 4096
_TAG = "// MOCKKFD-PYTHON "
# sha256 of a padded load image -> kernel name -> (its metadata, its PYTHON program); process-wide: the mock runs here
PROGRAMS: dict[str, dict[str, tuple[KernelInfo, bytes]]] = {}


def image_key(image: bytes) -> str:
  return hashlib.sha256(image + bytes(-len(image) % PAGE)).hexdigest()


def register(lib: bytes, src: str) -> None:
  """Record the PYTHON program carried by `src` for the code object `lib` compiled from it."""
  tail = src.rstrip("\n").rsplit("\n", 1)[-1]
  if not tail.startswith(_TAG): raise ValueError("this HIP source was not rendered for MOCKKFD+AMD: it carries no PYTHON program")
  loaded = load_code_object(lib)
  if len(loaded.kernels) != 1: raise ValueError(f"expected one kernel in the code object, found {', '.join(loaded.kernels)}")
  (name, info), = loaded.kernels.items()
  PROGRAMS.setdefault(image_key(loaded.image), {})[name] = (info, tail[len(_TAG):].encode())


class MockHIPCompiler(HIPCompiler):
  def __reduce__(self) -> tuple: return MockHIPCompiler, (self.arch,)

  # both ways in: compile_cached (from the disk cache, or a compile worker process) and compile (BEAM's timing runs)
  def compile_cached(self, src: str) -> bytes:
    lib = super().compile_cached(src)
    register(lib, src)
    return lib

  def compile(self, src: str) -> bytes:
    lib = super().compile(src)
    register(lib, src)
    return lib


class MockHIPRenderer(HIPRenderer):
  """The HIP renderer, plus the PYTHON program of the same uops as the source's last line (for MOCKKFD's packet processor)."""
  compiler: MockHIPCompiler

  def __init__(self, target: Target | None = None):
    super().__init__(target)
    self.compiler = MockHIPCompiler(self.arch)

  def __reduce__(self) -> tuple: return MockHIPRenderer, (Target(self.device, self.name, self.arch, interface="MOCKKFD"),)

  def render(self, name: str, uops: list[UOp]) -> str:
    src = super().render(name, uops)
    program = python_interpreter.encode(name, uops, self.tensor_cores).decode().rsplit("\n", 1)[-1]
    return f"{src}\n{_TAG}{program}\n"
