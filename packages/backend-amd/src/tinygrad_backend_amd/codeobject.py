"""Reading an AMDGPU code object (an ELF shared object): its machine, arch and kernels, to check what we compiled.

Layout from the ELF spec and LLVM's AMDGPU usage doc: e_machine EM_AMDGPU (0xe0), OS/ABI ELFOSABI_AMDGPU_HSA (64),
the arch in e_flags (EF_AMDGPU_MACH) and in the metadata note's "amdhsa.target" string ("amdgcn-amd-amdhsa--gfx950"),
and each kernel's descriptor as the symbol "<name>.kd".
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from tinygrad_backend_amd.archs import ARCHS

EM_AMDGPU = 0xE0
ELFOSABI_AMDGPU_HSA = 64
_TARGET = re.compile(rb"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)")


@dataclass(frozen=True)
class CodeObject:
  machine: int
  osabi: int
  mach: int         # EF_AMDGPU_MACH from e_flags
  target: str       # the arch named in the metadata note
  kernels: tuple[str, ...]
  wavefront_size: int | None


def read_code_object(lib: bytes) -> CodeObject:
  if lib[:4] != b"\x7fELF" or lib[4] != 2: raise ValueError("not a 64-bit ELF file")
  e_type, machine = struct.unpack_from("<HH", lib, 16)
  if e_type != 3: raise ValueError(f"ELF type {e_type}, expected a shared object (3): was the object linked?")
  (flags,) = struct.unpack_from("<I", lib, 48)
  shoff, = struct.unpack_from("<Q", lib, 40)
  shentsize, shnum, shstrndx = struct.unpack_from("<HHH", lib, 58)
  sections = [struct.unpack_from("<IIQQQQIIQQ", lib, shoff + i * shentsize) for i in range(shnum)]
  notes = b"".join(lib[s[4]:s[4] + s[5]] for s in sections if s[1] == 7)  # SHT_NOTE
  m = _TARGET.search(notes)
  kernels: list[str] = []
  for s in sections:
    if s[1] != 11: continue  # SHT_DYNSYM
    strtab = sections[s[6]]
    for off in range(s[4], s[4] + s[5], 24):
      name_off = struct.unpack_from("<I", lib, off)[0]
      name = lib[strtab[4] + name_off:lib.index(b"\0", strtab[4] + name_off)].decode()
      if name.endswith(".kd"): kernels.append(name[:-3])
  wave = re.search(rb"\.wavefront_size([\x20-\x7f])", notes)  # msgpack positive fixint right after the key
  return CodeObject(machine, lib[7], flags & 0xFF, m.group(1).decode() if m else "", tuple(kernels), wave.group(1)[0] if wave else None)


def check_code_object(lib: bytes, arch: str, name: str | None = None) -> CodeObject:
  """The code object, after checking it is an AMDGPU HSA code object for `arch` (and holds kernel `name`)."""
  co = read_code_object(lib)
  if co.machine != EM_AMDGPU or co.osabi != ELFOSABI_AMDGPU_HSA: raise ValueError(f"not an AMDGPU HSA code object (machine {co.machine:#x}, OS/ABI {co.osabi})")
  if co.mach != ARCHS[arch].mach or co.target != arch:
    raise ValueError(f"code object is for mach {co.mach:#x} / target {co.target!r}, expected {arch} ({ARCHS[arch].mach:#x})")
  if name is not None and name not in co.kernels: raise ValueError(f"code object has no kernel {name!r} (it has {', '.join(co.kernels)})")
  return co
