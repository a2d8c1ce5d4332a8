"""Everything a backend plugin imports from core: the hook marker and the types it registers.

A backend imports only this module (and the base classes it names) from core.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tinygrad.device.collectives import CollectiveSpec, CommInit, Communicator
from tinygrad.device.devstring import Target
from tinygrad.device.hookspecs import hookimpl
from tinygrad.device.runtime import Allocator, Buffer, Compiled, GraphExec, KernelLaunch, Program
from tinygrad.dtype import DType
from tinygrad.renderer import CompileError, Compiler, Renderer
from tinygrad.renderer.cstyle import CStyleRenderer

__all__ = ["hookimpl", "DeviceSpec", "RendererSpec", "TensorCore", "Target", "Allocator", "Compiled", "Program", "KernelLaunch", "GraphExec", "Renderer",
           "Compiler", "CompileError", "CStyleRenderer", "OpenDevice",
           "CollectiveSpec", "CommInit", "Communicator", "Buffer"]


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


@dataclass(frozen=True)
class TensorCore:
  """One matrix-multiply-accumulate instruction: D(MxN) = A(MxK) @ B(KxN) + C, done by `threads` lanes.

  The lane layouts are data, so the PYTHON device can emulate the instruction exactly:
  `a_layout[lane][i] = (row, k)` says which element of A lane `lane` holds in its i-th register,
  likewise `b_layout[lane][i] = (k, col)` and `c_layout[lane][i] = (row, col)` (C and D share it).
  """
  dims: tuple[int, int, int]  # M, N, K
  dtype_in: DType
  dtype_out: DType
  threads: int
  a_layout: tuple[tuple[tuple[int, int], ...], ...] = ()
  b_layout: tuple[tuple[tuple[int, int], ...], ...] = ()
  c_layout: tuple[tuple[tuple[int, int], ...], ...] = ()
  name: str = ""
  extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
