"""Everything a backend plugin imports from core: the hook marker, the types it registers, and what a renderer, compiler
and runtime are built from (the IR, dtypes, rewrite rules, base classes, the disk cache, the compile worker).

A backend imports only this module from core (packages/core/tests/test_layers.py checks the in-tree backends and the
example); everything else in core may change.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tinygrad.codegen.fp8 import pm_fp8_as_bytes
from tinygrad.codegen.transcendental import pm_fast_transcendentals
from tinygrad.device.collectives import CollectiveSpec, CommInit, Communicator
from tinygrad.device.devstring import Target
from tinygrad.device.hookspecs import hookimpl
from tinygrad.device.mock import (
  MockVA,
  ProgramTable,
  add_inputs,
  add_kernel,
  attach,
  detach,
  program_line,
  program_of_source,
  read_floats,
  source_with_program,
)
from tinygrad.device.osdriver import MAP_ANONYMOUS, MAP_FIXED, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED, PROT_NONE, PROT_READ, PROT_WRITE, OSDriver
from tinygrad.device.runtime import (
  Allocator,
  AsyncCopyIn,
  Buffer,
  Compiled,
  CopiesBetween,
  GraphExec,
  HostMemory,
  KernelLaunch,
  Program,
  Views,
  ZeroedAlloc,
)
from tinygrad.dtype import DType, ImageDType, PtrDType, dtypes, truncate
from tinygrad.helpers import IMAGE, ContextVar, diskcache_get, diskcache_put, getenv
from tinygrad.renderer import (
  CompileError,
  Compiler,
  DotProduct,
  DTypeSet,
  Renderer,
  TensorCore,
  TileConfig,
  UnsupportedDTypeError,
  fma_tensor_core,
  tc_opt_in,
)
from tinygrad.renderer.cstyle import CStyleRenderer
from tinygrad.uop.dsl import GRID_WAIT
from tinygrad.uop.ops import STORE_ADD, GroupOp, Ops, UOp
from tinygrad.uop.rewrite import PatternMatcher, UPat
from tinygrad.uop.symbolic import split_terms
from tinygrad.workers import offload

__all__ = [
  # the hooks and what they register
  "hookimpl", "DeviceSpec", "RendererSpec", "TensorCore", "TileConfig", "fma_tensor_core", "tc_opt_in", "DotProduct", "Target", "OpenDevice", "RegisterDevice", "RegisterRenderer", "RegisterTensorCores",
  # runtime: device instances, memory (and its optional abilities), loaded kernels, device graphs
  "Compiled", "Allocator", "Views", "ZeroedAlloc", "HostMemory", "AsyncCopyIn", "CopiesBetween", "Program", "KernelLaunch", "GraphExec",
  # renderers and compilers: base classes, the IR they read, dtypes, rewrite rules
  "Renderer", "CStyleRenderer", "Compiler", "CompileError", "UnsupportedDTypeError", "Ops", "GroupOp", "UOp", "STORE_ADD", "PatternMatcher", "UPat",
  "pm_fast_transcendentals", "pm_fp8_as_bytes", "DType", "DTypeSet", "ImageDType", "PtrDType", "dtypes", "truncate",
  "split_terms",  # an index as its terms and constant (which accesses are neighbours)
  "GRID_WAIT",  # the BARRIER arg of the wait for the grids before a kernel, where a hand-written kernel places it (Renderer.grid_wait)
  # settings, the on-disk cache, and the compile worker (COMPILE_WORKER=1)
  "ContextVar", "IMAGE", "getenv", "diskcache_get", "diskcache_put", "offload",
  # collectives (process groups across processes: tinygrad.distributed) and the buffers they move
  "CollectiveSpec", "CommInit", "Communicator", "Buffer",
  # the PYTHON device's interpreter, for a mock device that runs each kernel's uops (MOCKKFD+AMD)
  "python_interpreter",
  # what mock GPU interfaces share (device/mock.py): an address space with gaps, PYTHON programs carried by binaries
  "MockVA", "ProgramTable", "attach", "detach", "program_line", "program_of_source", "source_with_program",
  # the c = a + b kernel a mock's packet-level tests load and feed by hand
  "add_kernel", "add_inputs", "read_floats",
  # what real kernel-driver interfaces share (device/osdriver.py): open/ioctl/mmap through libc, and mmap's flags
  "OSDriver", "PROT_NONE", "PROT_READ", "PROT_WRITE", "MAP_SHARED", "MAP_PRIVATE", "MAP_FIXED", "MAP_ANONYMOUS", "MAP_NORESERVE",
]


class PythonInterpreter:
  """The PYTHON device's interpreter, for a backend whose mock device runs each kernel's uops on its mock memory
  (MOCKKFD+AMD). `encode(name, uops, tensor_cores)` is the PYTHON program of a linearized kernel, `load(name, program)`
  loads one (called with memoryviews, like the PYTHON device's programs). tinygrad.runtime.python fills these in when it
  is imported, which the registry does (through the builtin plugin) before it loads any backend: runtime sits beside
  device, and an import from here would close a cycle."""
  encode: Callable[[str, list[UOp], Sequence[TensorCore]], bytes]
  load: Callable[[str, bytes], Program]

  def __getattr__(self, name: str) -> Callable:
    # not filled in yet: a compile worker process (PARALLEL) renders without having loaded the registry
    from tinygrad.device.registry import registry
    registry.load()
    if name in self.__dict__: return self.__dict__[name]
    raise AttributeError(f"the PYTHON interpreter has no {name!r} (tinygrad.runtime.python did not install it)")


python_interpreter = PythonInterpreter()


class OpenDevice(Protocol):
  def __call__(self, index: int, target: Target) -> Compiled: ...


@dataclass(frozen=True)
class DeviceSpec:
  """A kind of device. `interfaces` maps an interface name ('' is the default) to a function that opens
  instance `index` and returns a `Compiled` runtime. `available()` returns None when the device can run
  here, else a sentence saying why not (shown by `python -m tinygrad.device`)."""
  name: str
  interfaces: dict[str, OpenDevice]
  count: Callable[[], int] = lambda: 1
  available: Callable[[], str | None] = lambda: None
  runs_kernels: bool = True  # False for NULL (compile only) and DISK (storage only)
  package: str = ""          # the distribution that provides it, for error messages
  # with DEV unset, the available device of lowest default_rank is the default (None: never picked by default)
  default_rank: int | None = None
  foreign_renderers: bool = False  # compiles with every other device's renderers (NULL: compile only)
  lends_renderers: bool = True     # its renderers serve foreign_renderers devices too (not PYTHON's interpreter)
  # instances are named by a file path, "DISK:/tmp/w.safetensors": such a name doesn't fit the DEVICE[:N] grammar, its
  # opener gets the path as Target.arch (index 0), and asking it for a renderer is a clear "runs no kernels" error
  path_instances: bool = False
  # interfaces that emulate the device (MOCKKFD for AMD): opened only when DEV names one (MOCKKFD+AMD), never tried by
  # default, and `available()` (which speaks of the real hardware) doesn't gate them
  mock_interfaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class RendererSpec:
  """A renderer (and its compiler) for `device`. `archs` says which archs it accepts: a list of names
  or fnmatch patterns, or a predicate; `default_arch()` is used when the DEV string gives none.
  `make(target)` builds the Renderer for a parsed target (arch filled in)."""
  device: str
  name: str
  make: Callable[[Target], Renderer]
  default: bool = False
  archs: Sequence[str] | Callable[[str], bool] = ("*",)
  default_arch: Callable[[], str] = lambda: ""
  available: Callable[[], str | None] = lambda: None
  package: str = ""

  def accepts(self, arch: str) -> bool:
    import fnmatch
    if callable(self.archs): return self.archs(arch)
    return any(fnmatch.fnmatchcase(arch, pattern) for pattern in self.archs)


# what each hook's `register` callback takes (device/hookspecs.py)
RegisterDevice = Callable[[DeviceSpec], None]
RegisterRenderer = Callable[[RendererSpec], None]
RegisterTensorCores = Callable[[str, Sequence[TensorCore]], None]
