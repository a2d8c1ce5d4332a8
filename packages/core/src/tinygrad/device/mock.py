"""What every mock GPU interface shares (DESIGN.md's mock section: MOCKKFD+AMD, MOCK+NV): a backend's mock writes its
ioctl surface and its packet decoder, and takes from here
- `MockVA`: a process's GPU address space in host memory. Ranges are reserved page-aligned (backed by anonymous maps, so
  GPU and host addresses are the same numbers), allocations are placed inside them, and `find` gives the allocation that
  holds a whole address range, or None for an unmapped gap, a freed allocation or a range past an allocation's end;
- kernels that carry their PYTHON program: the mock's renderer ends its source with the PYTHON program of the uops it
  rendered in a comment (`source_with_program`), its compiler moves the program behind the binary (`attach`: after the
  last byte any loader reads), and the mock, shown the binary when the runtime loads it (`detach`), records it in a
  `ProgramTable` under a key of its choosing (a hash of what lands in GPU memory) and, at a dispatch, looks the packet's
  kernel up there and gets a program to run with core's PYTHON interpreter on views of its memory;
- the packet-level tests' kernel (`add_kernel`, `add_inputs`, `read_floats`): c = a + b, loaded and fed by hand.
"""
from __future__ import annotations

import bisect
import ctypes
import mmap
import struct
from typing import Any, Generic, Protocol, TypeVar

from tinygrad.codegen.program import ProgramSpec, get_program
from tinygrad.device.runtime import Compiled, Program
from tinygrad.dtype import dtypes
from tinygrad.renderer import Renderer
from tinygrad.uop.ops import Ops, UOp

PROGRAM_TAG = "MOCK-PYTHON-PROGRAM"


class Allocation(Protocol):
  va: int
  size: int


A = TypeVar("A", bound=Allocation)


class MockVA(Generic[A]):
  """Reserved ranges (start -> the host map backing it) and the allocations placed in them, sorted by start."""

  def __init__(self) -> None:
    self.reserved: dict[int, mmap.mmap] = {}
    self.starts: list[int] = []
    self.at: dict[int, A] = {}

  def reserve(self, size: int) -> int:
    backing = mmap.mmap(-1, size)
    va = ctypes.addressof(ctypes.c_char.from_buffer(backing))
    self.reserved[va] = backing
    return va

  def release(self, va: int) -> bool:
    """Give back the range reserved at va (False: none is). A range some view still points into stays mapped."""
    if (m := self.reserved.pop(va, None)) is None: return False
    try: m.close()
    except BufferError: self.reserved[va] = m  # a memoryview of it is still alive: keep the memory rather than pull it away
    return True

  def reservation(self, va: int, size: int) -> int | None:
    """The start of the reserved range holding [va, va + size), or None."""
    return next((start for start, m in self.reserved.items() if start <= va and va + size <= start + len(m)), None)

  def overlaps(self, va: int, size: int) -> bool:
    i = bisect.bisect_left(self.starts, va + size)
    return i > 0 and self.at[self.starts[i - 1]].va + self.at[self.starts[i - 1]].size > va

  def add(self, alloc: A) -> None:
    bisect.insort(self.starts, alloc.va)
    self.at[alloc.va] = alloc

  def remove(self, alloc: A) -> None:
    self.starts.remove(alloc.va)
    del self.at[alloc.va]

  def find(self, addr: int, size: int = 1) -> A | None:
    """The allocation holding [addr, addr + size), or None."""
    i = bisect.bisect_right(self.starts, addr) - 1
    if i < 0: return None
    a = self.at[self.starts[i]]
    return a if addr + size <= a.va + a.size else None

  @staticmethod
  def view(addr: int, size: int) -> memoryview: return memoryview((ctypes.c_char * size).from_address(addr)).cast("B")


# ---- kernels that carry their PYTHON program

def program_line(name: str, uops: list, tensor_cores: Any) -> str:
  """The PYTHON program of a linearized kernel, as the one line a source comment carries."""
  from tinygrad.device.plugin import python_interpreter  # filled in by runtime/python.py (see PythonInterpreter)
  return python_interpreter.encode(name, uops, tuple(tensor_cores)).decode().rsplit("\n", 1)[-1]


def source_with_program(src: str, program: str, comment: tuple[str, str, str]) -> str:
  """src, then three comment lines in the source's language: `comment` = (head prefix, program-line prefix, end line)."""
  head, pre, end = comment
  return f"{src}\n{head}{PROGRAM_TAG}\n{pre}{program}\n{end}\n"


def program_of_source(src: str, comments: tuple[tuple[str, str, str], ...]) -> bytes | None:
  """The program a source made by source_with_program (with one of these comment styles) carries, or None."""
  lines = src.rstrip("\n").rsplit("\n", 3)
  if len(lines) < 3: return None
  head, program, end = lines[-3:]
  for h, pre, e in comments:
    if (head, end) == (h + PROGRAM_TAG, e) and program.startswith(pre): return program[len(pre):].encode()
  return None


def attach(lib: bytes, program: bytes, magic: bytes) -> bytes:
  """The binary, the program, its length and an 8-byte magic."""
  assert len(magic) == 8
  return lib + program + struct.pack("<Q", len(program)) + magic


def detach(lib: bytes, magic: bytes) -> tuple[bytes, bytes] | None:
  """(the binary, its program) from attach's output, or None for a binary without one."""
  if lib[-8:] != magic: return None
  (n,) = struct.unpack("<Q", lib[-16:-8])
  return lib[:-16 - n], lib[-16 - n:-16]


class ProgramTable:
  """key (what the mock can see of a loaded binary, e.g. a hash of its image) -> kernel name -> (the backend's metadata
  of that kernel, its PYTHON program); programs are loaded once, when first dispatched."""

  def __init__(self) -> None:
    self.programs: dict[str, dict[str, tuple[Any, bytes]]] = {}
    self.loaded: dict[tuple[str, str], Program] = {}

  def register(self, key: str, name: str, meta: Any, program: bytes) -> None: self.programs.setdefault(key, {})[name] = (meta, program)
  def kernels(self, key: str) -> dict[str, tuple[Any, bytes]] | None: return self.programs.get(key)

  def load(self, key: str, name: str) -> Program:
    from tinygrad.device.plugin import python_interpreter
    if (key, name) not in self.loaded: self.loaded[(key, name)] = python_interpreter.load(name, self.programs[key][name][1])
    return self.loaded[(key, name)]


# ---- the kernel a mock's packet-level tests dispatch by hand: c = a + b over n floats (buffers c, a, b)

def add_kernel(renderer: Renderer, n: int = 64) -> tuple[ProgramSpec, bytes]:
  """(program, binary) of c = a + b, rendered and compiled by `renderer` (a mock's: it attaches the PYTHON program)."""
  c, a, b = (UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), (), i) for i in range(3))
  i = UOp.range(n, 0, "global")
  ast = c.index(i).store(a.index(i).load() + b.index(i).load()).sink()
  spec = get_program(ast, renderer)
  return spec, renderer.compiler.compile_cached(spec.src)


def add_inputs(dev: Compiled, kernel: tuple[ProgramSpec, bytes], n: int = 64) -> tuple[ProgramSpec, Program, list]:
  """The kernel loaded on `dev` and its three buffers: c unwritten, a = 0, 1, ..., n-1, b = 100 everywhere."""
  spec, lib = kernel
  if dev.runtime is None: raise RuntimeError(f"{dev.device} runs no kernels (it has no runtime)")
  prg = dev.runtime(spec.name, lib)
  bufs = [dev.allocator.alloc(n * 4) for _ in range(3)]
  dev.allocator.copyin(bufs[1], memoryview(struct.pack(f"{n}f", *range(n))))
  dev.allocator.copyin(bufs[2], memoryview(struct.pack(f"{n}f", *[100.0] * n)))
  return spec, prg, bufs


def read_floats(dev: Compiled, buf: Any, n: int = 64) -> list[float]:
  out = memoryview(bytearray(n * 4))
  dev.allocator.copyout(out, buf)
  return list(out.cast("f"))
