"""Loads a relocatable x86-64 ELF object (what both CPU renderers compile to) into executable memory of this process.

Loading a cached kernel this way needs no LLVM in the process: importing llvmlite alone maps and touches ~45 MB of
LLVM (its static initializers), which is most of what a small model's CLI would otherwise add to its resident memory.
The object's allocated sections (code, constants, zero-filled data) are laid out in one anonymous mapping, followed by
jump stubs for calls into shared libraries (libm's exp2f, libgcc's half conversions) and GOT slots; relocations are
applied, then the mapping becomes read+execute. Anything this loader doesn't handle raises `UnsupportedObject`, and the
caller falls back to LLVM's MCJIT.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import platform
import struct
from dataclasses import dataclass, field

SHF_ALLOC, SHF_TLS, SHT_RELA, SHT_REL, SHT_NOBITS, SHT_SYMTAB = 0x2, 0x400, 4, 9, 8, 2
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
STT_SECTION = 3
R_X86_64_64, R_X86_64_PC32, R_X86_64_PLT32, R_X86_64_GOTPCREL, R_X86_64_32, R_X86_64_32S = 1, 2, 4, 9, 10, 11
R_X86_64_PC64, R_X86_64_GOTPCRELX, R_X86_64_REX_GOTPCRELX = 24, 41, 42
EM_X86_64 = 62
SKIP_SECTIONS = (".eh_frame",)  # unwind tables: nothing in the process unwinds through a kernel


class UnsupportedObject(ValueError):
  """An object (or host) this loader doesn't handle: load it another way."""


@dataclass
class _Section:
  name: str
  type: int
  flags: int
  offset: int
  size: int
  link: int
  info: int
  align: int
  addr: int = -1  # offset in the image, for allocated sections


@dataclass
class LoadedObject:
  """An object's code and data in executable memory (kept mapped as long as this lives)."""
  mem: mmap.mmap
  base: int
  symbols: dict[str, int] = field(default_factory=dict)  # defined symbols -> absolute address

  def address(self, name: str) -> int:
    if name not in self.symbols: raise KeyError(f"symbol {name!r} is not defined in the object (defined: {', '.join(sorted(self.symbols)) or 'none'})")
    return self.symbols[name]


_libs: list[ctypes.CDLL] = []


def _external(name: str) -> int:
  """The address of a function in this process or in libm / libgcc_s (which hold what kernels call out to)."""
  if not _libs:
    _libs.append(ctypes.CDLL(None))
    for libname in ("m", "gcc_s"):
      if (path := ctypes.util.find_library(libname)) is not None:
        try: _libs.append(ctypes.CDLL(path))
        except OSError: pass
  for lib in _libs:
    try: return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0
    except AttributeError: continue
  raise UnsupportedObject(f"the object calls {name!r}, which is in none of this process's libraries")


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def load_object(lib: bytes) -> LoadedObject:
  """Lay out, relocate and map executable a relocatable ELF64 x86-64 object."""
  if platform.machine().lower() not in ("x86_64", "amd64"): raise UnsupportedObject(f"no ELF loader for {platform.machine()}")
  if lib[:4] != b"\x7fELF" or lib[4] != 2 or lib[5] != 1: raise UnsupportedObject("not a little-endian ELF64 object")
  (e_type, e_machine, _, _, _, e_shoff, _, _, _, _, e_shentsize, e_shnum, e_shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", lib, 16)
  if e_type != 1 or e_machine != EM_X86_64: raise UnsupportedObject(f"not a relocatable x86-64 object (type {e_type}, machine {e_machine})")
  raw = [struct.unpack_from("<IIQQQQIIQQ", lib, e_shoff + i * e_shentsize) for i in range(e_shnum)]
  strtab = raw[e_shstrndx][4]
  def cstr(off: int) -> str: return lib[off:lib.index(b"\0", off)].decode()
  secs = [_Section(cstr(strtab + r[0]), r[1], r[2], r[4], r[5], r[6], r[7], max(r[8], 1)) for r in raw]
  if any(s.flags & SHF_TLS for s in secs): raise UnsupportedObject("thread-local data needs the dynamic linker")
  # layout: allocated sections in file order, each at its alignment
  size = 0
  for s in secs:
    if s.flags & SHF_ALLOC and s.name not in SKIP_SECTIONS:
      size = -(-size // s.align) * s.align
      s.addr, size = size, size + s.size
  symtab = next((i for i, s in enumerate(secs) if s.type == SHT_SYMTAB), None)
  if symtab is None: raise UnsupportedObject("the object has no symbol table")
  st = secs[symtab]
  syms = [struct.unpack_from("<IBBHQQ", lib, st.offset + i * 24) for i in range(st.size // 24)]
  names = [cstr(secs[st.link].offset + s[0]) for s in syms]
  relocs = [(s, r) for s in secs if s.type in (SHT_RELA, SHT_REL) and secs[s.info].addr >= 0 for r in [secs[s.info]]]
  if any(s.type == SHT_REL for s, _ in relocs): raise UnsupportedObject("REL relocations (without addends) are not used on x86-64")
  # external symbols get a 16-byte jump stub (jmp *[rip+0]; .quad target) and a GOT slot, after the sections
  externs = sorted({names[i] for i, s in enumerate(syms) if s[3] == SHN_UNDEF and names[i]})
  stubs = -(-size // 16) * 16
  got = stubs + 16 * len(externs)
  size = got + 8 * (len(externs) + sum(s.size // 24 for s, _ in relocs))  # a GOT slot per reloc at most (local GOT loads)
  mem = mmap.mmap(-1, max(-(-size // mmap.PAGESIZE) * mmap.PAGESIZE, mmap.PAGESIZE), prot=mmap.PROT_READ | mmap.PROT_WRITE)
  base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
  for s in secs:
    if s.addr >= 0 and s.type != SHT_NOBITS: mem[s.addr:s.addr + s.size] = lib[s.offset:s.offset + s.size]
  ext_addr: dict[str, int] = {}
  stub_of: dict[str, int] = {}
  for i, name in enumerate(externs):
    ext_addr[name] = _external(name)
    stub_of[name] = base + stubs + 16 * i
    mem[stubs + 16 * i:stubs + 16 * i + 14] = b"\xff\x25\x00\x00\x00\x00" + struct.pack("<Q", ext_addr[name])
  got_used = got

  def sym_addr(i: int, want_stub: bool) -> int:
    value, shndx, kind = syms[i][4], syms[i][3], syms[i][1] & 0xF
    if shndx == SHN_UNDEF: return stub_of[names[i]] if want_stub else ext_addr[names[i]]
    if shndx == SHN_ABS: return value
    if shndx == SHN_COMMON or shndx >= len(secs): raise UnsupportedObject(f"symbol {names[i]!r} has section index {shndx:#x}")
    if secs[shndx].addr < 0: raise UnsupportedObject(f"symbol {names[i] or secs[shndx].name!r} is in a section that isn't loaded")
    return base + secs[shndx].addr + (0 if kind == STT_SECTION else value)

  for rs, target in relocs:
    for k in range(rs.size // 24):
      r_offset, r_info, addend = struct.unpack_from("<QQq", lib, rs.offset + k * 24)
      typ, si = r_info & 0xFFFFFFFF, r_info >> 32
      at = target.addr + r_offset
      P = base + at
      if typ in (R_X86_64_PC32, R_X86_64_PLT32):
        v = sym_addr(si, want_stub=True) + addend - P
        if not -2**31 <= v < 2**31: raise UnsupportedObject(f"a 32-bit PC-relative relocation to {names[si]!r} is out of range")
        struct.pack_into("<i", mem, at, v)
      elif typ == R_X86_64_64: struct.pack_into("<Q", mem, at, (sym_addr(si, False) + addend) & (2**64 - 1))
      elif typ == R_X86_64_PC64: struct.pack_into("<q", mem, at, sym_addr(si, False) + addend - P)
      elif typ in (R_X86_64_GOTPCREL, R_X86_64_GOTPCRELX, R_X86_64_REX_GOTPCRELX):
        struct.pack_into("<Q", mem, got_used, sym_addr(si, False))
        struct.pack_into("<i", mem, at, base + got_used + addend - P)
        got_used += 8
      elif typ in (R_X86_64_32, R_X86_64_32S):
        v = sym_addr(si, False) + addend
        if not (0 <= v < 2**32 if typ == R_X86_64_32 else -2**31 <= v < 2**31): raise UnsupportedObject("an absolute 32-bit relocation is out of range")
        struct.pack_into("<I" if typ == R_X86_64_32 else "<i", mem, at, v)
      else: raise UnsupportedObject(f"relocation type {typ} (against {names[si] or 'a section'!r}) is not supported")
  if _libc.mprotect(base, len(mem), mmap.PROT_READ | mmap.PROT_EXEC) != 0:
    raise UnsupportedObject(f"mprotect(PROT_READ|PROT_EXEC) failed: errno {ctypes.get_errno()}")
  defined = {names[i]: sym_addr(i, False) for i, s in enumerate(syms) if names[i] and s[3] != SHN_UNDEF and (s[1] & 0xF) != STT_SECTION}
  return LoadedObject(mem, base, defined)
