"""Everything a backend plugin imports from core: the hook marker and the types it registers.

A backend imports only this module (and the base classes it names) from core.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tinygrad.device.devstring import Target
from tinygrad.device.hookspecs import hookimpl
from tinygrad.device.runtime import Allocator, Compiled, GraphExec, KernelLaunch, Program
from tinygrad.renderer import CompileError, Compiler, Renderer, TensorCore
from tinygrad.renderer.cstyle import CStyleRenderer

__all__ = ["hookimpl", "DeviceSpec", "RendererSpec", "TensorCore", "Target", "Allocator", "Compiled", "Program", "KernelLaunch", "GraphExec", "Renderer",
           "Compiler", "CompileError", "CStyleRenderer", "OpenDevice"]


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
