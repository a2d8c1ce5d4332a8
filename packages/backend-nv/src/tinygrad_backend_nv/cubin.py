"""What `NVK+NV` needs from a cubin (an ELF for one sm_XX) to launch one of its kernels without the CUDA driver.

- the code: section `.text.<kernel>` (uploaded as is; a kernel with relocations in its code is refused);
- its resources: the register count (EIATTR_REGCOUNT in `.nv.info`), barriers (EIATTR_NUM_BARRIERS, absent when none),
  shared memory (the `.nv.shared.<kernel>` section's size: static arrays plus the arch's reserved part, 1 KB on sm_90; and
  the dynamic part our CUDA renderer declares in the global `tg_dynamic_smem`, read from `.nv.global.init`), the stack
  (EIATTR_FRAME_SIZE / EIATTR_MIN_STACK_SIZE / EIATTR_MAX_STACK_SIZE), the block size limit (EIATTR_MAX_THREADS);
- its arguments: constant bank 0 (`.nv.constant0.<kernel>`, whose size is the param offset plus the params' size),
  the params' offset in it (EIATTR_PARAM_CBANK: 0x210 on sm_90, 0x160 on sm_80..89) and each param's offset and size
  (EIATTR_KPARAM_INFO); other constant banks (`.nv.constant<N>`) are bound with their relocations applied;
- its global variables: `.nv.global.init` (initialized) and `.nv.global` (zeroed) laid out in one image the runtime places
  in GPU memory. NVRTC puts the address of each global a kernel may touch in constant bank 4 (`.rela.nv.constant4`, R_CUDA_64
  relocations): a kernel launched with those left 0 faults (seen on the H200 as RM error 31, an MMU fault, for sinf/cosf).
The `.nv.info` records: u8 format (1 none, 2 byte, 3 half-word, 4 sized), u8 attribute, then a u16 value or a u16 size and
that many bytes. Attribute numbers as cuobjdump -elf names them.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

EIATTR_MAX_THREADS = 0x05
EIATTR_PARAM_CBANK = 0x0A
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_NUM_BARRIERS = 0x4C
EIATTR_REGCOUNT = 0x2F
EIFMT_SVAL = 4
SHT_RELA, SHT_REL, SHT_NOBITS = 4, 9, 8
R_CUDA_32, R_CUDA_64 = 1, 2  # absolute addresses, 32 and 64 bits: the relocations constant banks carry
GLOBAL_SECTIONS = (".nv.global.init", ".nv.global")
DYNAMIC_SMEM_SYMBOL = "tg_dynamic_smem"  # cuda.py's contract


@dataclass(frozen=True)
class Reloc:
  """Write an address into a constant bank before upload: `bank`[`offset`] = (base of `target`) + `addend`, `size` bytes.
  `target` is "global" (the kernel's global-variable image) or the index of a constant bank."""
  bank: int
  offset: int
  size: int
  target: str | int
  addend: int


class CubinError(ValueError):
  """A cubin NVK+NV can't launch: the message names the kernel and what is missing or unsupported."""


@dataclass(frozen=True)
class Param:
  ordinal: int
  offset: int  # within the params (add KernelImage.param_offset for constant bank 0)
  size: int


@dataclass
class KernelImage:
  name: str
  text: bytes
  registers: int
  barriers: int
  shared_static: int
  shared_dynamic: int
  local_size: int          # bytes of stack/frame per thread
  max_threads: int         # 0: no launch bound recorded
  param_offset: int
  param_size: int
  cbuf0_size: int
  params: list[Param] = field(default_factory=list)
  cbufs: dict[int, bytes] = field(default_factory=dict)  # other constant banks: index -> initial contents
  globals_image: bytes = b""                               # .nv.global.init and .nv.global, laid out (zeros for .nv.global)
  relocs: list[Reloc] = field(default_factory=list)        # addresses to write into the constant banks once placed

  @property
  def shared(self) -> int: return self.shared_static + self.shared_dynamic


def _records(data: bytes) -> list[tuple[int, bytes | int]]:
  out: list[tuple[int, bytes | int]] = []
  off = 0
  while off + 4 <= len(data):
    fmt, attr, val = data[off], data[off + 1], struct.unpack_from("<H", data, off + 2)[0]
    if fmt == EIFMT_SVAL:
      out.append((attr, data[off + 4:off + 4 + val]))
      off += 4 + val
    else:
      out.append((attr, val))
      off += 4
  return out


def parse_cubin(lib: bytes, name: str) -> KernelImage:
  if lib[:4] != b"\x7fELF" or lib[4] != 2: raise CubinError(f"kernel {name}: not a 64-bit ELF cubin (NVK+NV launches cubins, not PTX: use the CUDA renderer or PTX through nvJitLink)")
  shoff, = struct.unpack_from("<Q", lib, 0x28)
  shentsize, shnum, shstrndx = struct.unpack_from("<HHH", lib, 0x3A)
  secs = [struct.unpack_from("<IIQQQQIIQQ", lib, shoff + i * shentsize) for i in range(shnum)]
  strtab = secs[shstrndx][4]
  cstr = lambda base, o: lib[base + o:lib.index(b"\0", base + o)].decode()  # noqa: E731
  names = [cstr(strtab, s[0]) for s in secs]
  by_name = {n: i for i, n in enumerate(names)}
  body = lambda i: lib[secs[i][4]:secs[i][4] + secs[i][5]] if secs[i][1] != SHT_NOBITS else b""  # noqa: E731
  if f".text.{name}" not in by_name:
    kernels = [n[6:] for n in names if n.startswith(".text.")]
    raise CubinError(f"cubin has no kernel {name!r} (it has {', '.join(kernels) or 'none'})")
  text_idx = by_name[f".text.{name}"]
  for i, s in enumerate(secs):
    if s[1] in (SHT_RELA, SHT_REL) and s[7] == text_idx and s[5]:
      raise CubinError(f"kernel {name}: its code has relocations ({names[i]}): NVK+NV does not link (calls to other functions or global variables in code)")
  # symbols: index -> (name, section, value, size)
  symtab = next((i for i, s in enumerate(secs) if s[1] == 2), None)
  syms: list[tuple[str, int, int, int]] = []
  if symtab is not None:
    st = secs[symtab]
    strs = secs[st[6]][4]
    for off in range(st[4], st[4] + st[5], 24):
      nm, _info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", lib, off)
      syms.append((cstr(strs, nm), shndx, value, size))
  sym_of = {s[0]: i for i, s in enumerate(syms)}
  func_sym = sym_of.get(name)
  regs = frame = min_stack = max_stack = 0
  if ".nv.info" in by_name:
    for attr, val in _records(body(by_name[".nv.info"])):
      if isinstance(val, bytes) and len(val) >= 8:
        sym, v = struct.unpack_from("<II", val)
        if sym != func_sym: continue
        if attr == EIATTR_REGCOUNT: regs = v
        elif attr == EIATTR_FRAME_SIZE: frame = v
        elif attr == EIATTR_MIN_STACK_SIZE: min_stack = v
        elif attr == EIATTR_MAX_STACK_SIZE: max_stack = v
  param_offset = param_size = max_threads = barriers = 0
  params: list[Param] = []
  found_cbank = False
  for attr, val in _records(body(by_name[f".nv.info.{name}"])) if f".nv.info.{name}" in by_name else []:
    if attr == EIATTR_PARAM_CBANK and isinstance(val, bytes):
      _sym, off, size = struct.unpack_from("<IHH", val)
      param_offset, param_size, found_cbank = off, size, True
    elif attr == EIATTR_CBANK_PARAM_SIZE and isinstance(val, int): param_size = val
    elif attr == EIATTR_KPARAM_INFO and isinstance(val, bytes):
      _index, ordinal, off, flags = struct.unpack_from("<IHHI", val)
      params.append(Param(ordinal, off, (flags >> 18) & 0x3FFF))
    elif attr == EIATTR_MAX_THREADS and isinstance(val, bytes): max_threads = struct.unpack_from("<I", val)[0]
    elif attr == EIATTR_NUM_BARRIERS and isinstance(val, int): barriers = val
  if not found_cbank and params: raise CubinError(f"kernel {name}: its .nv.info.{name} has no EIATTR_PARAM_CBANK: the parameters' place in constant bank 0 is unknown")
  params.sort(key=lambda p: p.ordinal)
  c0 = by_name.get(f".nv.constant0.{name}")
  cbuf0_size = secs[c0][5] if c0 is not None else param_offset + param_size
  shared_static = secs[by_name[f".nv.shared.{name}"]][5] if f".nv.shared.{name}" in by_name else 0
  shared_dynamic = 0
  if DYNAMIC_SMEM_SYMBOL in sym_of:
    _, shndx, value, size = syms[sym_of[DYNAMIC_SMEM_SYMBOL]]
    if size != 4 or names[shndx] != ".nv.global.init": raise CubinError(f"kernel {name}: {DYNAMIC_SMEM_SYMBOL} is not a 4-byte initialized global")
    shared_dynamic = struct.unpack_from("<I", body(shndx), value)[0]
  cbufs, bank_of = {}, {}
  for i, n in enumerate(names):
    if n.startswith(".nv.constant") and n[12:].isdigit() and int(n[12:]) != 0: cbufs[int(n[12:])], bank_of[i] = body(i), int(n[12:])
  # the global variables: each section at its alignment in one image
  place: dict[int, int] = {}
  gsize = 0
  for i, n in enumerate(names):
    if n in GLOBAL_SECTIONS:
      place[i] = gsize = -(-gsize // max(secs[i][8], 1)) * max(secs[i][8], 1)
      gsize += secs[i][5]
  image = bytearray(gsize)
  for i, off in place.items(): image[off:off + len(body(i))] = body(i)
  relocs: list[Reloc] = []
  for i, s in enumerate(secs):
    if s[1] not in (SHT_RELA, SHT_REL) or not s[5] or names[s[7]] == ".debug_frame": continue
    if s[7] not in bank_of: raise CubinError(f"kernel {name}: relocations in {names[s[7]]} ({names[i]}): NVK+NV links only constant banks 1..N")
    for off in range(s[4], s[4] + s[5], s[9] or (24 if s[1] == SHT_RELA else 16)):
      where, info = struct.unpack_from("<QQ", lib, off)
      addend = struct.unpack_from("<q", lib, off + 16)[0] if s[1] == SHT_RELA else 0
      rtype, (sym_name, shndx, value, _size) = info & 0xFFFFFFFF, syms[info >> 32]
      if rtype not in (R_CUDA_32, R_CUDA_64): raise CubinError(f"kernel {name}: relocation type {rtype} in {names[i]} (for {sym_name!r}): NVK+NV applies only R_CUDA_32/R_CUDA_64")
      if shndx in place: target: str | int = "global"; addend += place[shndx] + value
      elif shndx in bank_of: target = bank_of[shndx]; addend += value
      else: raise CubinError(f"kernel {name}: {names[i]} points at {sym_name!r} in {names[shndx] if shndx < len(names) else shndx}, which NVK+NV does not place in GPU memory")
      relocs.append(Reloc(bank_of[s[7]], where, 8 if rtype == R_CUDA_64 else 4, target, addend))
  return KernelImage(name=name, text=body(text_idx), registers=regs, barriers=barriers, shared_static=shared_static,
                     shared_dynamic=shared_dynamic, local_size=max(frame, min_stack, max_stack), max_threads=max_threads,
                     param_offset=param_offset, param_size=param_size, cbuf0_size=cbuf0_size, params=params, cbufs=cbufs,
                     globals_image=bytes(image), relocs=relocs)
