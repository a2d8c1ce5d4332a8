"""Finding the compilers: Debian's clang for HIP C (with its ld.lld), llvmlite's LLVM and the ziglang wheel's ld.lld.

HIP C needs a real clang: the ziglang wheel's `zig cc` doesn't compile HIP ("language not recognized"), and no PyPI
wheel ships clang with the AMDGPU target and HIP. Debian's clang-19 knows gfx1100/gfx942, clang-22 also gfx950.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from tinygrad_backend_amd.archs import ToolchainError

CLANG_VERSIONS = (22, 21, 20, 19)  # newest first; older ones lack gfx942 (and the HIP flags we use)
INSTALL_CLANG = "install it with `apt-get install clang-22 lld-22` (Debian/Ubuntu; clang-19 + lld-19 serve all archs but gfx950)"


@dataclass(frozen=True)
class Clang:
  path: str
  major: int


def _version(path: str) -> int | None:
  try: out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
  except OSError: return None
  m = re.search(r"clang version (\d+)", out)
  return int(m.group(1)) if m else None


@functools.cache
def find_clang() -> Clang:
  """The newest clang >= 19 whose ld.lld is installed too (clang links the code object itself)."""
  candidates = [p for p in (os.environ.get("AMD_CLANG"), *(shutil.which(f"clang-{v}") for v in CLANG_VERSIONS), shutil.which("clang")) if p]
  for path in candidates:
    if (major := _version(path)) is None or major < min(CLANG_VERSIONS): continue
    lld = shutil.which(f"ld.lld-{major}") or shutil.which("ld.lld") or os.path.exists(f"/usr/lib/llvm-{major}/bin/ld.lld")
    if not lld: raise ToolchainError(f"found {path} (clang {major}) but not its linker ld.lld-{major}: apt-get install lld-{major}")
    return Clang(path, major)
  seen = ", ".join(f"{p} ({_version(p)})" for p in candidates) or "none on PATH"
  raise ToolchainError(f"the HIP renderer needs clang >= {min(CLANG_VERSIONS)} with lld (found: {seen}); {INSTALL_CLANG}, "
                       "or use the LLVM renderer (DEV=...:LLVM:arch), which needs only the llvmlite and ziglang wheels")


def llvmlite_major() -> int:
  import llvmlite.binding as llvm
  return int(llvm.llvm_version_info[0])


def zig_lld() -> list[str]:
  """The command that runs the ziglang wheel's ld.lld."""
  import importlib.util
  if importlib.util.find_spec("ziglang") is None: raise ToolchainError("the LLVM renderer links with the ziglang wheel's ld.lld: pip install ziglang")
  return [sys.executable, "-m", "ziglang", "ld.lld"]
