"""The CPU device at run time: page-aligned host memory, and kernels loaded in-process from ELF objects.

Both renderers (CLANG and LLVM) compile to a relocatable object. elf.py loads it (x86-64) without LLVM in the process, so
running kernels from the compile cache never imports llvmlite; elsewhere LLVM's MCJIT (through llvmlite) links it, resolving
calls to libm. Either way no system linker is needed.
"""
from __future__ import annotations

import ctypes
import functools
import mmap
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tinygrad.device.plugin import Allocator, Compiled, ContextVar, KernelLaunch, Target

from tinygrad_backend_cpu.elf import LoadedObject, UnsupportedObject, load_object
from tinygrad_backend_cpu.graph import CPUGraph
from tinygrad_backend_cpu.native_graph import NativeCPUGraph
from tinygrad_backend_cpu.threadpool import run_parallel


class CPUBuffer:
  """Host memory owned by an anonymous mmap (page aligned, so vector loads never straddle a page start), or a view of
  `size` bytes at `offset` of another buffer's mapping (which the view keeps alive)."""
  __slots__ = ("mem", "addr", "size", "offset")
  mem: mmap.mmap
  addr: int
  size: int
  offset: int

  def __init__(self, size: int, base: CPUBuffer | None = None, offset: int = 0):
    self.size, self.offset = size, (base.offset + offset if base is not None else 0)
    self.mem = base.mem if base is not None else mmap.mmap(-1, max(size, 1))
    self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.mem)) + self.offset


class CPUAllocator(Allocator):
  def _alloc(self, size: int, options: Any) -> CPUBuffer: return CPUBuffer(size)
  # a new anonymous mapping reads as zeros and takes no memory until a page is touched (a KV cache that is mostly unused)
  def alloc_zeroed(self, size: int, options: Any = None) -> CPUBuffer: return CPUBuffer(size)
  def _copyin(self, dest: CPUBuffer, src: memoryview) -> None: dest.mem[dest.offset:dest.offset + src.nbytes] = src
  def _copyout(self, dest: memoryview, src: CPUBuffer) -> None: dest[:] = src.mem[src.offset:src.offset + dest.nbytes]

  def as_memoryview(self, buf: CPUBuffer) -> memoryview: return memoryview(buf.mem)[buf.offset:buf.offset + buf.size]

  def view(self, opaque: CPUBuffer, offset: int, size: int) -> CPUBuffer:
    if offset < 0 or size < 0 or offset + size > opaque.size:
      raise ValueError(f"a view of bytes {offset}..{offset + size} is out of bounds for a CPU buffer of {opaque.size} bytes")
    return CPUBuffer(size, opaque, offset)


if TYPE_CHECKING:
  import llvmlite.binding as llvm

  from tinygrad_backend_cpu.llvmir import LLVMCompiler

_engine: llvm.ExecutionEngine | None = None


def _mcjit() -> llvm.ExecutionEngine:
  global _engine
  if _engine is None:
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2, reloc="pic")
    _engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
  return _engine


class CPUProgram:
  """A kernel loaded from an ELF object. Arguments: buffers (as pointers), then int values of symbolic vars."""

  def __init__(self, name: str, lib: bytes):
    self.name = name
    self._image: LoadedObject | None = None
    try:
      self._image = load_object(lib)
      addr = self._image.address(name)
    except (UnsupportedObject, KeyError):
      self._image = None
      addr = self._load_mcjit(name, lib)
    self.address = addr  # for native graphs (native_graph.py), which call kernels through pointers
    self.fxn = ctypes.CFUNCTYPE(None)(addr)

  def _load_mcjit(self, name: str, lib: bytes) -> int:
    import llvmlite.binding as llvm
    engine = _mcjit()
    self._obj = llvm.ObjectFileRef.from_data(lib)
    engine.add_object_file(self._obj)
    engine.finalize_object()
    addr = engine.get_function_address(name)
    if not addr: raise RuntimeError(f"kernel {name} not found in its compiled object")
    return addr

  def __call__(self, *bufs: CPUBuffer, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    call = self.prepare(bufs, vals, global_size[0])
    start = time.perf_counter()
    call()
    return time.perf_counter() - start if wait else None

  def prepare(self, bufs: tuple[CPUBuffer, ...], vals: tuple[int, ...], threads: int) -> Callable[[], None]:
    """A call with no arguments that runs this kernel: its ctypes arguments built once (a graph keeps it for every replay).
    With threads > 1 each thread gets its core id as the last argument."""
    fxn, args = self.fxn, (*(ctypes.c_void_p(b.addr) for b in bufs), *(ctypes.c_int32(v) for v in vals))
    if threads > 1:
      per_thread = [(*args, ctypes.c_int32(core_id)) for core_id in range(threads)]
      return lambda: run_parallel(lambda core_id: fxn(*per_thread[core_id]), threads)
    return lambda: fxn(*args)


NATIVE_GRAPH = ContextVar("CPU_NATIVE_GRAPH", 1)  # 0: replay TinyJit's kernels one Python call each (graph.py)


def cpu_graph(launches: list[KernelLaunch]) -> NativeCPUGraph | CPUGraph:
  """TinyJit's graph on the CPU: native (one generated function per thread, native_graph.py) where LLVM can compile it, else
  the launches as prepared Python calls."""
  from tinygrad_backend_cpu.llvmir import llvm_available
  if NATIVE_GRAPH.value and llvm_available() is None: return NativeCPUGraph(launches, _graph_compiler().compile_cached, CPUProgram)
  return CPUGraph(launches)


@functools.cache
def _graph_compiler() -> LLVMCompiler:
  from tinygrad_backend_cpu.llvmir import LLVMCompiler
  return LLVMCompiler(opt=0)  # the graph is loads and calls: nothing for the optimizer to do, and 0.45 -> 0.03 s per 640 launches


class CPUDevice(Compiled):
  def __init__(self, device: str):
    super().__init__(device, CPUAllocator(), CPUProgram, graph=cpu_graph)


def open_cpu(index: int, target: Target) -> CPUDevice:
  return CPUDevice("CPU" if index == 0 else f"CPU:{index}")
