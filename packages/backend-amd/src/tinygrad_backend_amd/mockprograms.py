"""How MOCKKFD knows what a kernel computes: renderers for MOCKKFD+AMD targets (HIP and LLVM) that, next to the source
they render, record the PYTHON program of the same linearized uops, and a table from each code object's load image to
those programs.

The source ends with the PYTHON program in a comment: HIP C with `/* MOCK-PYTHON-PROGRAM`, the program's serialized line,
`*/` (clang ignores it); LLVM IR with `; MOCK-PYTHON-PROGRAM`, `; ` + that line, `; MOCK-END` (llvmlite's parser ignores
it). The machinery (the comment, attaching the program to a binary, the table) is core's, tinygrad.device.mock.
The mock's compilers appends that program to the code object it built, after the ELF's last byte, with its
length and a magic (the loader reads only PT_LOAD segments, so nothing of it reaches GPU memory; the disk cache and
compile workers carry it like any code object). When the runtime loads a program it shows the code object to its
interface (`code_object`: nothing on KFD); the mock then records the program under the sha256 of the code object's load
image padded to whole pages, which is exactly what the runtime puts in the program's GPU allocation. At each dispatch the
packet processor hashes the allocation its kernel object points into and looks the program up: a kernel object pointing
anywhere else, or at memory that was overwritten, has no program and is an error.
"""
from __future__ import annotations

import hashlib

from tinygrad.device.plugin import ProgramTable, Target, UOp, attach, detach, program_line, program_of_source, source_with_program

from tinygrad_backend_amd.hip import HIPCompiler, HIPRenderer
from tinygrad_backend_amd.llvmir import AMDLLVMCompiler, AMDLLVMRenderer
from tinygrad_backend_amd.loader import load_code_object

PAGE = 4096
_COMMENTS = {"HIP": ("/* ", "", "*/"), "LLVM": ("; ", "; ", "; MOCK-END")}  # head prefix, program-line prefix, end line
_MAGIC = b"MOCKKFD1"
# sha256 of a padded load image -> kernel name -> (its KernelInfo, its PYTHON program); process-wide: the mock runs here
PROGRAMS = ProgramTable()


def image_key(image: bytes) -> str:
  return hashlib.sha256(image + bytes(-len(image) % PAGE)).hexdigest()


def program_of(src: str) -> bytes:
  """The PYTHON program a MOCKKFD-rendered source (HIP C or LLVM IR) carries."""
  if (program := program_of_source(src, tuple(_COMMENTS.values()))) is None:
    raise ValueError("this source was not rendered for MOCKKFD+AMD: it carries no PYTHON program")
  return program


def register(lib: bytes) -> None:
  """Record the PYTHON program attached to code object `lib` under its load image's key."""
  if (got := detach(lib, _MAGIC)) is None:
    raise ValueError("this code object was not compiled for MOCKKFD+AMD (DEV=MOCKKFD+AMD): the mock can't tell what it computes")
  loaded = load_code_object(got[0])
  if len(loaded.kernels) != 1: raise ValueError(f"expected one kernel in the code object, found {', '.join(loaded.kernels)}")
  (name, info), = loaded.kernels.items()
  PROGRAMS.register(image_key(loaded.image), name, info, got[1])


class MockHIPCompiler(HIPCompiler):
  def __init__(self, arch: str):
    super().__init__(arch)
    self.cachekey = f"mockkfd_{self.cachekey}"  # its binaries carry the program: never shared with the plain HIP compiler's

  def __reduce__(self) -> tuple: return MockHIPCompiler, (self.arch,)
  def compile(self, src: str) -> bytes: return attach(super().compile(src), program_of(src), _MAGIC)


class MockHIPRenderer(HIPRenderer):
  """The HIP renderer, plus the PYTHON program of the same uops as the source's last line (for MOCKKFD's packet processor)."""
  compiler: MockHIPCompiler

  def __init__(self, target: Target | None = None):
    super().__init__(target)
    self.compiler = MockHIPCompiler(self.arch)

  def __reduce__(self) -> tuple: return MockHIPRenderer, (Target(self.device, self.name, self.arch, interface="MOCKKFD"),)

  def render(self, name: str, uops: list[UOp]) -> str:
    return source_with_program(super().render(name, uops), program_line(name, uops, self.tensor_cores), _COMMENTS["HIP"])


class MockLLVMCompiler(AMDLLVMCompiler):
  def __init__(self, arch: str):
    super().__init__(arch)
    self.cachekey = f"mockkfd_{self.cachekey}"

  def __reduce__(self) -> tuple: return MockLLVMCompiler, (self.arch,)
  def compile(self, src: str) -> bytes: return attach(super().compile(src), program_of(src), _MAGIC)


class MockLLVMRenderer(AMDLLVMRenderer):
  """The AMD LLVM renderer, plus the PYTHON program of the same uops in the IR's last comment lines."""
  compiler: MockLLVMCompiler

  def __init__(self, target: Target | None = None):
    super().__init__(target)
    self.compiler = MockLLVMCompiler(self.arch)

  def __reduce__(self) -> tuple: return MockLLVMRenderer, (Target(self.device, self.name, self.arch, interface="MOCKKFD"),)
  def render(self, name: str, uops: list[UOp]) -> str:
    return source_with_program(super().render(name, uops), program_line(name, uops, self.tensor_cores), _COMMENTS["LLVM"])
