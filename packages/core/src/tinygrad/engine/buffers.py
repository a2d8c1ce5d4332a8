"""The runtime Buffer behind each BUFFER node of a tensor graph (realize.py fills them, memory.py asks which are live)."""
from __future__ import annotations

import weakref

from tinygrad.device.runtime import Buffer
from tinygrad.uop.ops import UOp

# weak: a buffer lives as long as some graph refers to its node
buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()


def buffer_of(u: UOp) -> Buffer:
  """The Buffer for a BUFFER node, created (not yet allocated) on first use."""
  if (b := buffers.get(u)) is None:
    b = buffers[u] = Buffer(str(u.device), u.arg[1], u.dtype)
  return b
