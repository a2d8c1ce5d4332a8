"""tinygrad.device.mock, the machinery mock GPU interfaces share (MOCKKFD+AMD uses it; backend-amd's tests run it end
to end): the address space with its gaps, programs carried by sources and binaries, and the program table."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
from tinygrad import Device, Tensor
from tinygrad.codegen.program import get_program
from tinygrad.device.mock import MockVA, ProgramTable, attach, detach, program_line, program_of_source, source_with_program
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops


@dataclass
class _Alloc:
  va: int
  size: int


def test_address_space_finds_whole_ranges_only():
  va = MockVA[_Alloc]()
  base = va.reserve(4 * 4096)
  assert va.reservation(base + 4096, 4096) == base and va.reservation(base + 3 * 4096, 8192) is None
  a, b = _Alloc(base, 4096), _Alloc(base + 2 * 4096, 4096)
  va.add(b)
  va.add(a)
  assert va.find(base + 100, 16) is a and va.find(base + 4090, 16) is None  # runs past a's end
  assert va.find(base + 4096) is None and va.find(base + 2 * 4096 + 5) is b  # the gap, then b
  assert va.overlaps(base + 2048, 4096) and va.overlaps(base + 4096, 8192) and not va.overlaps(base + 4096, 4096)
  va.remove(a)
  assert va.find(base) is None
  ctypes.c_uint32.from_address(base + 8).value = 0xDEADBEEF
  assert bytes(MockVA.view(base + 8, 4)) == (0xDEADBEEF).to_bytes(4, "little")
  assert va.release(base) and not va.release(base)


def test_programs_travel_with_sources_and_binaries():
  styles = (("/* ", "", "*/"), ("; ", "; ", "; END"))
  for style in styles:
    assert program_of_source(source_with_program("int x;", "PROG 1 2", style), styles) == b"PROG 1 2"
  assert program_of_source("int x;\n/* a comment */\n", styles) is None
  lib = attach(b"\x7fELF" + bytes(60), b"the program", b"TESTMAGC")
  assert detach(lib, b"TESTMAGC") == (b"\x7fELF" + bytes(60), b"the program") and detach(lib, b"OTHERMAG") is None


def test_table_runs_the_program_on_views():
  """The PYTHON program of a real kernel (c = a + b), recorded under a key and run on memoryviews like a mock dispatch."""
  with Context(DEV="PYTHON"):
    a, b = Tensor.empty(8), Tensor.empty(8)
    items, _ = create_schedule([(a + b).uop])
    r = Device.renderer(Device.DEFAULT)
    spec = get_program(next(it.ast for it in items if it.ast.op is Ops.SINK), r)
    line = program_line(spec.name, spec.uops, ())
  table = ProgramTable()
  table.register("key", spec.name, {"meta": 1}, line.encode())
  assert table.kernels("key") == {spec.name: ({"meta": 1}, line.encode())} and table.kernels("nope") is None
  x, y, out = np.arange(8, dtype=np.float32), np.full(8, 10, dtype=np.float32), np.zeros(8, dtype=np.float32)
  assert spec.globals == [0, 1, 2] and spec.outs == [0]  # c = a + b: data0 is the output
  gs, ls = spec.launch_dims({})
  table.load("key", spec.name)(*(memoryview(v).cast("B") for v in (out, x, y)), global_size=gs, local_size=ls, vals=())
  assert table.load("key", spec.name) is table.load("key", spec.name)
  np.testing.assert_array_equal(out, x + y)
