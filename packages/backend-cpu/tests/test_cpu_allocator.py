"""The CPU allocator's buffer views (TinyJit's memory plan places intermediates in views of shared blocks)."""
import pytest
from tinygrad_backend_cpu.runtime import CPUAllocator


def test_views_read_and_write_their_own_bytes():
  a = CPUAllocator()
  base = a.alloc(64)
  a.copyin(base, memoryview(bytes(range(64))))
  v = a.view(base, 16, 8)
  vv = a.view(v, 4, 4)  # a view of a view is a view of the base
  assert (v.addr - base.addr, vv.addr - base.addr) == (16, 20)
  out = memoryview(bytearray(8))
  a.copyout(out, v)
  assert bytes(out) == bytes(range(16, 24))
  assert bytes(a.as_memoryview(vv)) == bytes(range(20, 24))
  a.copyin(vv, memoryview(b"\xff" * 4))
  whole = memoryview(bytearray(64))
  a.copyout(whole, base)
  assert bytes(whole[16:24]) == bytes(range(16, 20)) + b"\xff" * 4 and bytes(whole[:16]) == bytes(range(16))


def test_view_out_of_bounds_is_an_error():
  a = CPUAllocator()
  base = a.alloc(32)
  with pytest.raises(ValueError, match="out of bounds"): a.view(base, 24, 16)
  with pytest.raises(ValueError, match="out of bounds"): a.view(base, -1, 4)
