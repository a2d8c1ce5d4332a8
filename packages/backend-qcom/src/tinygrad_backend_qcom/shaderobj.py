"""The shader object the QCOM runtime puts in GPU memory, and the argument layout in the constant file.

Our compiler (compiler.py) returns an OpenCL implementation's program binary; on an Adreno that would be the binary of
Qualcomm's OpenCL compiler, which holds native code. This runtime has never run on an Adreno and does not parse that
format: it uploads a small, self-describing image (magic, kernel name, program binary) and points SP_CS_OBJ_START at
it. The mock command processor (mockkgsl.py) recognizes the image and runs the binary in it; real hardware would need
the native code extracted from the vendor binary instead (not built: docs/backends.md).

Constants (CP_LOAD_STATE6 ST6_CONSTANTS, vec4 = 16 bytes): c0 = (nbufs, nvals, 0, 0), then each buffer's 64-bit GPU
address (lo, hi), then each int Variable's value (int32), zero-padded to whole vec4s: the order of the kernel's
parameters (buffers in DEFINE_GLOBAL order, then Variables).
"""
from __future__ import annotations

import struct

MAGIC = b"TGQCOMCL"
_HEADER = struct.Struct("<8sII")  # magic, name length, binary length


def pack_image(name: str, binary: bytes) -> bytes:
  raw = name.encode()
  data = _HEADER.pack(MAGIC, len(raw), len(binary)) + raw + binary
  return data + b"\0" * (-len(data) % 8)  # whole 64-bit instructions (SP_CS_INSTRLEN counts those)


def unpack_image(data: bytes) -> tuple[str, bytes]:
  """(kernel name, program binary); ValueError when `data` is not a shader image."""
  if len(data) < _HEADER.size or data[:8] != MAGIC:
    raise ValueError(f"not a QCOM shader image (first bytes {bytes(data[:8])!r}, expected {MAGIC!r}): SP_CS_OBJ_START points at "
                     "memory the runtime did not load a program into")
  _, n, m = _HEADER.unpack_from(data)
  if _HEADER.size + n + m > len(data):
    raise ValueError(f"QCOM shader image is truncated: it declares {_HEADER.size + n + m} bytes but SP_CS_INSTRLEN covers {len(data)}")
  return data[_HEADER.size:_HEADER.size + n].decode(), bytes(data[_HEADER.size + n:_HEADER.size + n + m])


def pack_constants(addrs: list[int], vals: list[int]) -> bytes:
  words = [len(addrs), len(vals), 0, 0]
  for a in addrs: words += [a & 0xffffffff, a >> 32]
  words += [v & 0xffffffff for v in vals]
  words += [0] * (-len(words) % 4)
  return struct.pack(f"<{len(words)}I", *words)


def unpack_constants(data: bytes) -> tuple[list[int], list[int]]:
  """(buffer addresses, int32 values) from a constant file image (ValueError if it's too short for what c0 declares)."""
  nbufs, nvals = struct.unpack_from("<II", data)
  need = 16 + 8 * nbufs + 4 * nvals
  if need > len(data):
    raise ValueError(f"the constants declare {nbufs} buffers and {nvals} values ({need} bytes) but only {len(data)} bytes were loaded")
  addrs = [lo | hi << 32 for lo, hi in struct.iter_unpack("<II", data[16:16 + 8 * nbufs])]
  vals = list(struct.unpack_from(f"<{nvals}i", data, 16 + 8 * nbufs))
  return addrs, vals
