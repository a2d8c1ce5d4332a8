"""The AMD GPU archs we render for, as data: wave size, the LLVM release that first knows the arch, and its ELF mach.

`mach` is EF_AMDGPU_MACH, the low byte of a code object's ELF e_flags (LLVM's `ELF.h`, EF_AMDGPU_MACH_AMDGCN_GFX*).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arch:
  name: str
  family: str     # RDNA3, RDNA4, CDNA3, CDNA4
  wave: int       # lanes per wavefront: RDNA runs wave32 (HIP's default there), CDNA only wave64
  min_llvm: int   # the first LLVM (clang) major version that targets it
  mach: int       # EF_AMDGPU_MACH
  lds: int        # LDS (shared memory) bytes one workgroup may use


ARCHS: dict[str, Arch] = {a.name: a for a in (
  Arch("gfx1100", "RDNA3", 32, 16, 0x41, 64 * 1024),
  Arch("gfx1101", "RDNA3", 32, 16, 0x46, 64 * 1024),
  Arch("gfx1201", "RDNA4", 32, 19, 0x4E, 64 * 1024),
  Arch("gfx942", "CDNA3", 64, 19, 0x4C, 64 * 1024),
  Arch("gfx950", "CDNA4", 64, 20, 0x4F, 160 * 1024),
)}
DEFAULT_ARCH = "gfx1100"  # without a GPU to ask (DEV=NULL:HIP, DEV=AMD:LLVM): the most common consumer part


class ToolchainError(RuntimeError):
  """The compiler found is too old for the arch, or missing: the message says which tool and how to get it."""


def arch_info(arch: str) -> Arch:
  if arch not in ARCHS:
    raise ValueError(f"unknown AMD arch {arch!r}; known: {', '.join(ARCHS)} (e.g. DEV=NULL:HIP:gfx1100)")
  return ARCHS[arch]


def check_llvm_version(arch: str, tool: str, major: int, fix: str) -> None:
  """Raise ToolchainError when `tool` (LLVM `major`) predates `arch`."""
  need = arch_info(arch).min_llvm
  if major < need: raise ToolchainError(f"{arch} needs LLVM >= {need}, but {tool} is LLVM {major}; {fix}")
