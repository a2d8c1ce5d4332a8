"""Loading an AMDGPU code object: the image its PT_LOAD segments make, and each kernel's descriptor offset and kernarg
metadata (the msgpack "AMDGPU" note, NT_AMDGPU_METADATA = 32, of LLVM's AMDGPUUsage doc, code object V4/V5).

The image is position independent as long as the object has no dynamic relocations; ours have none (the kernels
reference no global data), and a code object that has some is refused rather than half-loaded.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

PT_LOAD, SHT_RELA, SHT_REL, SHT_DYNSYM, SHT_NOTE = 1, 4, 9, 11, 7
NT_AMDGPU_METADATA = 32
KD_SIZE = 64  # llvm::amdhsa::kernel_descriptor_t


@dataclass(frozen=True)
class KernArg:
  offset: int
  size: int
  kind: str  # .value_kind: "global_buffer", "by_value", "hidden_..."


@dataclass(frozen=True)
class KernelInfo:
  name: str
  kd_offset: int        # the kernel descriptor's offset in the image (symbol "<name>.kd")
  kernarg_size: int     # .kernarg_segment_size: explicit and hidden arguments
  kernarg_align: int
  args: tuple[KernArg, ...]
  max_workgroup: int    # .max_flat_workgroup_size
  wavefront: int


@dataclass(frozen=True)
class LoadedImage:
  image: bytes          # what goes into GPU memory, from offset 0
  kernels: dict[str, KernelInfo]


def _unpack(b: bytes, i: int) -> tuple[Any, int]:
  """One msgpack value at b[i:] (the subset LLVM writes: maps, arrays, strings, ints, bools, nil)."""
  t = b[i]
  if t <= 0x7F: return t, i + 1
  if t >= 0xE0: return t - 0x100, i + 1
  if 0x80 <= t <= 0x8F: return _map(b, i + 1, t & 0xF)
  if 0x90 <= t <= 0x9F: return _arr(b, i + 1, t & 0xF)
  if 0xA0 <= t <= 0xBF: return b[i + 1:i + 1 + (t & 0x1F)].decode(), i + 1 + (t & 0x1F)
  if t == 0xC0: return None, i + 1
  if t in (0xC2, 0xC3): return t == 0xC3, i + 1
  ints = {0xCC: "B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: "b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
  if t in ints: return struct.unpack_from(ints[t], b, i + 1)[0], i + 1 + struct.calcsize(ints[t])
  if t in (0xD9, 0xDA, 0xDB):
    fmt = {0xD9: "B", 0xDA: ">H", 0xDB: ">I"}[t]
    n = struct.unpack_from(fmt, b, i + 1)[0]
    j = i + 1 + struct.calcsize(fmt)
    return b[j:j + n].decode(), j + n
  if t in (0xDC, 0xDD): return _arr(b, i + (3 if t == 0xDC else 5), struct.unpack_from(">H" if t == 0xDC else ">I", b, i + 1)[0])
  if t in (0xDE, 0xDF): return _map(b, i + (3 if t == 0xDE else 5), struct.unpack_from(">H" if t == 0xDE else ">I", b, i + 1)[0])
  raise ValueError(f"code object metadata: msgpack type {t:#x} at {i} is not one LLVM writes")


def _arr(b: bytes, i: int, n: int) -> tuple[list, int]:
  out = []
  for _ in range(n):
    v, i = _unpack(b, i)
    out.append(v)
  return out, i


def _map(b: bytes, i: int, n: int) -> tuple[dict, int]:
  out = {}
  for _ in range(n):
    k, i = _unpack(b, i)
    out[k], i = _unpack(b, i)
  return out, i


def _notes(data: bytes) -> list[tuple[str, int, bytes]]:
  out, i = [], 0
  while i + 12 <= len(data):
    namesz, descsz, ntype = struct.unpack_from("<III", data, i)
    name = data[i + 12:i + 12 + namesz].rstrip(b"\0").decode()
    d = i + 12 + (namesz + 3) // 4 * 4
    out.append((name, ntype, data[d:d + descsz]))
    i = d + (descsz + 3) // 4 * 4
  return out


def load_code_object(lib: bytes) -> LoadedImage:
  if lib[:4] != b"\x7fELF" or lib[4] != 2: raise ValueError("not a 64-bit ELF code object")
  phoff, shoff = struct.unpack_from("<QQ", lib, 32)
  phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", lib, 54)
  loads = [s for s in (struct.unpack_from("<IIQQQQQQ", lib, phoff + i * phentsize) for i in range(phnum)) if s[0] == PT_LOAD]
  image = bytearray(max((p[3] + p[6] for p in loads), default=0))
  for _, _, off, vaddr, _, filesz, _, _ in loads: image[vaddr:vaddr + filesz] = lib[off:off + filesz]
  sections = [struct.unpack_from("<IIQQQQIIQQ", lib, shoff + i * shentsize) for i in range(shnum)]
  if any(s[1] in (SHT_RELA, SHT_REL) and s[5] for s in sections):
    raise ValueError("code object has dynamic relocations (a kernel that references global data by address): the AMD loader doesn't apply them")
  symbols: dict[str, int] = {}
  for s in sections:
    if s[1] != SHT_DYNSYM: continue
    strtab = sections[s[6]]
    for off in range(s[4], s[4] + s[5], 24):
      name_off, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", lib, off)
      symbols[lib[strtab[4] + name_off:lib.index(b"\0", strtab[4] + name_off)].decode()] = value
  meta: dict = {}
  for s in sections:
    if s[1] != SHT_NOTE: continue
    for name, ntype, desc in _notes(lib[s[4]:s[4] + s[5]]):
      if name == "AMDGPU" and ntype == NT_AMDGPU_METADATA: meta = _unpack(desc, 0)[0]
  kernels: dict[str, KernelInfo] = {}
  for k in meta.get("amdhsa.kernels", []):
    sym = k[".symbol"]
    if sym not in symbols: raise ValueError(f"code object metadata names kernel descriptor {sym!r}, which is not a symbol")
    args = tuple(KernArg(a[".offset"], a[".size"], a[".value_kind"]) for a in k.get(".args", []))
    kernels[k[".name"]] = KernelInfo(k[".name"], symbols[sym], k[".kernarg_segment_size"], k[".kernarg_segment_align"], args,
                                     k.get(".max_flat_workgroup_size", 1024), k.get(".wavefront_size", 64))
  if not kernels: raise ValueError("code object has no kernels in its AMDGPU metadata note")
  return LoadedImage(bytes(image), kernels)
