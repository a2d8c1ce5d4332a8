"""How MOCK+NV knows what a kernel computes: a renderer for MOCK+NV targets that, next to the CUDA C it renders, records
the PYTHON program of the same linearized uops, and a table from each kernel's code (its `.text` bytes) to that program.

The CUDA source ends with the PYTHON program in a comment (`/* MOCKNV-PYTHON`, the program's serialized line, `*/`; NVRTC
ignores it). The mock's compiler appends that program to the cubin it built, after the ELF's last byte, with its length
and a magic (the cubin parser reads sections by their offsets, so nothing of it reaches GPU memory; the disk cache and
compile workers carry it like any cubin). When the runtime loads a kernel it shows the cubin to its interface
with the GPU address it uploaded the code to (`program`: nothing on NVK); the mock records the program there. (Not by the
code's hash: kernels that differ only in their uops' dtypes, bool and uint8 copies, compile to the same SASS but not the
same PYTHON program.) At each launch the GPFIFO processor looks up the program address and checks that the code there is
still the kernel's: a program address pointing anywhere else, or at code that was overwritten, is an error.
"""
from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from typing import Any

from tinygrad.device.plugin import Target, UOp, python_interpreter

from tinygrad_backend_nv.compiler import NVRTCCompiler
from tinygrad_backend_nv.cubin import KernelImage, parse_cubin
from tinygrad_backend_nv.cuda import CUDARenderer

_TAG = "/* MOCKNV-PYTHON"
_MAGIC = b"MOCKNV01"


def code_key(code: bytes) -> str: return hashlib.sha256(code).hexdigest()


def program_of(src: str) -> bytes:
  *_, head, program, end = src.rstrip("\n").rsplit("\n", 3)
  if (head, end) != (_TAG, "*/"): raise ValueError("this CUDA source was not rendered for MOCK+NV: it carries no PYTHON program")
  return program.encode()


def attach(lib: bytes, program: bytes) -> bytes: return lib + program + struct.pack("<Q", len(program)) + _MAGIC


def describe(lib: bytes, name: str, function: Callable[..., Any] | None = None) -> tuple[KernelImage, bytes | Callable[..., Any]]:
  """Kernel `name` of cubin `lib` and what it computes: the PYTHON program attached to the cubin, or `function`."""
  img = parse_cubin(lib, name)
  if function is not None: return img, function
  if lib[-8:] != _MAGIC: raise ValueError(f"kernel {name}'s cubin was not compiled for MOCK+NV (DEV=MOCK+NV): the mock can't tell what it computes")
  (n,) = struct.unpack("<Q", lib[-16:-8])
  return img, lib[-16 - n:-16]


def load(name: str, program: bytes) -> Any: return python_interpreter.load(name, program)


class MockNVRTCCompiler(NVRTCCompiler):
  @property
  def cachekey(self) -> str:  # type: ignore[override]
    return f"mocknv_{super().cachekey}"  # its binaries carry the program: never shared with the plain compiler's

  def __reduce__(self) -> tuple: return MockNVRTCCompiler, (self.arch,)
  def compile(self, src: str) -> bytes: return attach(super().compile(src), program_of(src))


class MockCUDARenderer(CUDARenderer):
  """The CUDA renderer, plus the PYTHON program of the same uops as the source's last lines (for MOCK+NV's processor)."""

  def __init__(self, target: Target | None = None):
    super().__init__(target)
    self.compiler = MockNVRTCCompiler(self.arch)

  def __reduce__(self) -> tuple: return MockCUDARenderer, (Target(self.device, self.name, self.arch, interface="MOCK"),)

  def render(self, name: str, uops: list[UOp]) -> str:
    src = super().render(name, uops)
    program = python_interpreter.encode(name, uops, self.tensor_cores).decode().rsplit("\n", 1)[-1]
    return f"{src}\n{_TAG}\n{program}\n*/\n"
