"""Memory planning for TinyJit captures: the intermediate buffers of a captured function share device memory.

A capture keeps every buffer its kernels used, so without planning a jitted function holds all of its intermediate
results at once (for an LLM prefill: every layer's activations, tens of MB). A captured buffer is *internal* when
  - a captured item allocated it (it was fresh when that item ran, so what it held before the capture can't matter),
  - nothing outside the capture can reach it any more: no live tensor refers to it, it is not an input of the
    function, and it is neither a view nor the base of one.
Two steps use that:
  - while the function runs (`release_dead`, after a realize once a few MB were allocated since the last time): internal
    buffers go back to the allocator, so the capturing call reuses memory much as an uncaptured call would (its peak is
    not the sum of all intermediates);
  - once it returned (`plan_memory`): internal buffers whose uses (first..last captured item) don't overlap become views
    of one shared block. A kernel reads and writes its buffers at once, so two buffers of one item never share a block.
Captures replay one at a time on a device's queue and an internal buffer holds nothing from one replay to the next, so
the blocks of different captures can be the same memory too: a plan takes each block from the device's existing blocks
(the smallest free one that is large enough) before it makes a new one. An LLM keeps one capture per prefill chunk size
and attention span; their activations are the same sizes, and now share one set of blocks instead of one set each.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tinygrad.device.registry import Device
from tinygrad.device.runtime import Buffer, Views
from tinygrad.dtype import dtypes
from tinygrad.engine.buffers import buffers

if TYPE_CHECKING:
  from tinygrad.engine.realize import Capture, ExecItem

Items = list[tuple["ExecItem", dict[str, int]]]
RELEASE_AFTER_BYTES = 4 << 20  # a capturing call releases dead intermediates each time it allocated this much since the last time
# the shared blocks of every capture's plan, by device: a later plan reuses them (weak: a block goes when no capture uses it)
_blocks: dict[str, list[weakref.ref[Buffer]]] = {}


@dataclass
class _Block:
  """Memory shared by internal buffers whose uses don't overlap."""
  device: str
  size: int = 0
  busy_until: int = -1  # the last item that uses its current member
  members: list[int] = field(default_factory=list)  # id()s of the buffers placed in it


def _reachable(items: Items, keep: set[int]) -> set[int]:
  """id()s of the buffers that something besides the captured items may use: live tensors' buffers (and their bases), the
  bases of views among the items, and `keep`."""
  out = set(keep)
  for b in list(buffers.values()):  # the Buffers behind live BUFFER nodes
    out.add(id(b))
    if b.base is not None: out.add(id(b.base))
  for ei, _ in items:
    for b in ei.bufs:
      if b.base is not None: out.add(id(b.base))  # a view keeps its base's memory in use in ways use ranges don't see
  return out


def _uses(items: Items) -> tuple[dict[int, Buffer], dict[int, int], dict[int, int]]:
  """Every (non-view) buffer of the items by id(), with the index of the first and last item that uses it."""
  objs: dict[int, Buffer] = {}
  first: dict[int, int] = {}
  last: dict[int, int] = {}
  for i, (ei, _) in enumerate(items):
    for b in ei.bufs:
      if b.base is not None: continue
      first.setdefault(id(b), i)
      last[id(b)] = i
      objs[id(b)] = b
  return objs, first, last


def release_dead(capture: Capture) -> None:
  """Deallocate the capture's internal buffers now (every item that uses them has run): later kernels of the capturing call
  reuse their memory through the allocator's cache. A replay allocates again whatever `plan_memory` doesn't place.
  Incremental: items are scanned once (their fresh buffers wait in `capture.pending` until dead), so a long capture (an LLM's
  every layer) doesn't rescan its first items at each call."""
  for ei, _ in capture.items[capture.scanned:]:
    for b in ei.bufs:
      if b.base is not None: capture.view_bases.add(id(b.base))  # a view keeps its base's memory in use
      elif id(b) in capture.fresh: capture.pending[id(b)] = b
  capture.scanned = len(capture.items)
  live: set[int] = set()
  for b in list(buffers.values()):  # the Buffers behind live BUFFER nodes
    live.add(id(b))
    if b.base is not None: live.add(id(b.base))
  for k, b in list(capture.pending.items()):
    if k in live or k in capture.view_bases: continue
    if b.is_allocated(): b.deallocate()
    del capture.pending[k]  # nothing can reach it again: no later item uses it


def plan_memory(items: Items, fresh: set[int], keep: set[int]) -> int:
  """Make the internal buffers of `items` share memory, in place (their ExecItems get views of shared blocks).
  `fresh`: id()s of the buffers the captured items allocated; `keep`: id()s of buffers that must stay as they are (the
  function's inputs). Returns how many bytes the internal buffers need less than one allocation each."""
  reachable = _reachable(items, keep)
  objs, first, last = _uses(items)
  internal = sorted((k for k in objs if k in fresh and k not in reachable and isinstance(Device[objs[k].device].allocator, Views)),
                    key=lambda k: first[k])
  # greedy, in order of first use: reuse a free block (the smallest that fits, else the largest, grown), or start a new one
  blocks: list[_Block] = []
  for k in internal:
    dev, nbytes = objs[k].device, objs[k].nbytes
    free = [blk for blk in blocks if blk.device == dev and blk.busy_until < first[k]]
    fits = [blk for blk in free if blk.size >= nbytes]
    blk = min(fits, key=lambda x: x.size) if fits else (max(free, key=lambda x: x.size) if free else None)
    if blk is None: blocks.append(blk := _Block(dev))
    blk.size, blk.busy_until = max(blk.size, nbytes), last[k]
    blk.members.append(k)
  replace: dict[int, Buffer] = {}
  taken: set[int] = set()  # blocks of other captures this plan uses (two blocks of one plan are in use at once: never the same)
  for blk in sorted(blocks, key=lambda b: -b.size):  # the largest first: each takes the smallest existing block that fits
    shared = _existing_block(blk.device, blk.size, taken)
    if shared is None:
      if len(blk.members) < 2: continue  # nothing to share: it keeps its own buffer
      shared = Buffer(blk.device, max(blk.size, 1), dtypes.uint8)  # allocated on first use, like any buffer
      _blocks.setdefault(blk.device, []).append(weakref.ref(shared))
      taken.add(id(shared))
    for k in blk.members: replace[k] = Buffer(blk.device, objs[k].size, objs[k].dtype, base=shared, offset=0)
  for ei, _ in items: ei.bufs[:] = [replace.get(id(b), b) for b in ei.bufs]
  for k in replace: objs[k].deallocate()  # the replaced buffers' memory goes back to the allocator ...
  for dev in {objs[k].device for k in replace}: Device[dev].allocator.free_cache()  # ... and from there to the device
  return sum(objs[k].nbytes for k in internal) - sum(blk.size for blk in blocks)


def _existing_block(device: str, nbytes: int, taken: set[int]) -> Buffer | None:
  """The smallest block an earlier plan made on `device` that holds nbytes and this plan doesn't use yet (marked taken)."""
  alive = [b for r in _blocks.get(device, []) if (b := r()) is not None]
  _blocks[device] = [weakref.ref(b) for b in alive]
  fits = [b for b in alive if b.nbytes >= nbytes and id(b) not in taken]
  if not fits: return None
  best = min(fits, key=lambda b: b.nbytes)
  taken.add(id(best))
  return best
