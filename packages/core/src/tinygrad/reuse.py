"""Reusing a callable's kernels across objects of one structure: the layers of a model build the same graph over their own
weights, so scheduling and lowering the first layer is enough for all of them.

`KernelReuse()(block, *args)` is `block(*args)`, realized (its tensor arguments are realized first, as TinyJit's are). The
first call for a structure (the block's attributes and the arguments: their types, shapes, dtypes, devices, plain values,
symbolic Variables, which of them are the same object) runs it normally and records the kernels and copies it ran
(realize.Capture). A later call for the same structure replays those items on this call's buffers, building no graph:
  - every tensor of the block (found through its attributes) and every tensor argument is an *input*; an item's buffer that
    was an input's buffer becomes the same input's buffer of this call;
  - a buffer the recorded call allocated (an intermediate, or the returned tensor's) becomes a new buffer of its size;
  - a bound Variable's value is this call's (the arguments' BINDs).
A recording is kept only when every buffer its items use is one of those two kinds, and the callable returned one tensor on
its own buffer: a buffer reached any other way (a global, a closure, data copied in from the host) disables reuse for that
structure, so hidden state can't leak from one object to another; so does a block that rebinds its own tensors (a replay
would not). Like TinyJit, the callable must not decide anything from tensor data (a `.tolist()` that picks which kernels run: e.g. an MoE router): a replay would repeat the first decision.
Inside a TinyJit capture the replayed items are captured like any others. REUSE=0 turns it off (every call runs normally).
"""
from __future__ import annotations

import dataclasses
import enum
import types
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from tinygrad.device.runtime import Buffer
from tinygrad.dtype import DType
from tinygrad.engine import realize
from tinygrad.engine.buffers import buffers
from tinygrad.engine.memory import release_dead
from tinygrad.engine.realize import Capture, ExecItem
from tinygrad.frontend.multi import input_device, is_realized_multi, tensor_buffers
from tinygrad.helpers import DEBUG, ContextVar
from tinygrad.schedule.kernelize import buffer_view, is_contiguous_buffer, new_buffer
from tinygrad.tensor import Tensor
from tinygrad.uop.ops import Ops, UOp

REUSE = ContextVar("REUSE", 1)
stats = {"hits": 0, "misses": 0, "uncacheable": 0}


class _Unreusable(Exception):
  """This call can't be recorded for reuse (its reason in the message): it runs normally."""


@dataclass(frozen=True)
class _Recording:
  # per item: kind, runner, call, and per buffer (True, input index) or (False, new buffer index); the Variables it takes
  items: tuple[tuple[str, Any, Any, tuple[tuple[bool, int], ...], tuple[str, ...]], ...]
  new: tuple[tuple[str, int, DType], ...]  # (device, elements, dtype) of each buffer a call allocates
  out: int  # which new buffer the returned tensor is
  out_shape: tuple


class KernelReuse:
  """One cache of recordings (keep one per kind of block: a model's layers). `max_entries` bounds it (oldest dropped)."""

  def __init__(self, max_entries: int = 32):
    self.max_entries = max_entries
    self.recordings: dict[Hashable, _Recording | None] = {}  # None: this structure can't be reused

  def __call__(self, block: Callable[..., Tensor], *args: Any) -> Tensor:
    if not REUSE.value: return _realized(block(*args))
    # tensor arguments become buffers (as TinyJit's inputs do): what a replay points the recorded kernels at
    Tensor.realize_all(*(a for a in args if isinstance(a, Tensor) and not _is_buffer(a)))
    views = [a for a in args if isinstance(a, Tensor) and not _is_buffer(a)]  # realized as a view (a permute) of a buffer
    for t in views: t.replace(t.contiguous())
    Tensor.realize_all(*views)
    tensors: list[Tensor] = []
    binds: dict[str, int] = {}
    # (the opt setting too: the recorded runners were lowered under it)
    seen: dict[int, int] = {}
    try: structure = (type(block), _signature(block, tensors, binds, seen), _signature(args, tensors, binds, seen), realize.opt_setting())
    except _Unreusable as e:
      if DEBUG >= 2: print(f"KernelReuse: runs {type(block).__name__} normally: {e}")
      return _realized(block(*args))
    inputs = [b for t in tensors for b in tensor_buffers(t)]
    first: dict[int, int] = {}
    key = (structure, tuple(first.setdefault(id(b), i) for i, b in enumerate(inputs)))  # which inputs share a buffer
    if key not in self.recordings: return self._record(key, block, args, inputs, binds, tensors)
    if (rec := self.recordings[key]) is None: return _realized(block(*args))
    stats["hits"] += 1
    return _replay(rec, inputs, binds)

  def _record(self, key: Hashable, block: Callable[..., Tensor], args: tuple, inputs: list[Buffer], binds: dict[str, int],
              tensors: list[Tensor]) -> Tensor:
    realize.capturing.append(capture := Capture(jit=False))
    try: ret = _realized(block(*args))
    finally: realize.capturing.pop()
    if realize.capturing:  # inside a TinyJit capture: what ran is part of it
      outer = realize.capturing[-1]
      outer.items.extend(capture.items)
      outer.fresh |= capture.fresh
      outer.unreleased += capture.unreleased
      # the block's intermediates are dead now: free them before the next block allocates its own (else two blocks' worth of
      # memory is in use at once while the capture runs: +10 MB of peak RSS for a SmolLM2 prefill chunk)
      if realize.JIT_PLAN.value:
        release_dead(outer)
        outer.unreleased = 0
    try:
      after: list[Tensor] = []
      _signature(block, after, {}, {})
      if [id(t) for t in after] != [id(t) for t in tensors[:len(after)]]: raise _Unreusable("it rebinds tensors of its own")
      rec: _Recording | None = _recording(capture, inputs, binds, ret)
      stats["misses"] += 1
    except _Unreusable as e:
      if DEBUG >= 1: print(f"KernelReuse: won't reuse {type(block).__name__}'s kernels: {e}")
      rec = None
      stats["uncacheable"] += 1
    if len(self.recordings) >= self.max_entries: del self.recordings[next(iter(self.recordings))]
    self.recordings[key] = rec
    return ret


def _is_buffer(t: Tensor) -> bool: return is_contiguous_buffer(t.uop) or is_realized_multi(t.uop)


def _realized(ret: Any) -> Any: return ret.realize() if isinstance(ret, Tensor) else ret


def _signature(v: Any, tensors: list[Tensor], binds: dict[str, int], seen: dict[int, int]) -> Hashable:
  """What a call's kernels may depend on, with tensors (collected in `tensors`) as their shape, dtype and device only, and
  bound Variables (their values collected in `binds`) as the Variable. An object reached again is its first visit's number."""
  if v is None or isinstance(v, (bool, int, float, str, bytes, DType, enum.Enum)): return v
  if isinstance(v, Tensor):
    if (at := next((i for i, t in enumerate(tensors) if t is v), None)) is not None: return ("T@", at)  # the same tensor again
    if not _is_buffer(v): raise _Unreusable(f"a tensor of shape {v.shape} is not realized")
    tensors.append(v)
    return ("T", v.shape, v.dtype, input_device(v))
  if isinstance(v, UOp):
    if v.op is Ops.BIND:
      name, value = v.src[0].arg[0], v.src[1].arg
      if binds.setdefault(name, value) != value: raise _Unreusable(f"Variable {name!r} is bound to two values")
      return ("BIND", v.src[0])
    if v.op is Ops.DEFINE_VAR or v.op is Ops.CONST: return v
    raise _Unreusable(f"an argument is a {v.op.name} node")
  if id(v) in seen: return ("seen", seen[id(v)])  # (a cycle, or an object reached twice: its signature is there already)
  seen[id(v)] = len(seen)
  if isinstance(v, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, type)): return v  # its identity
  if isinstance(v, (list, tuple)): return (type(v).__name__, tuple(_signature(x, tensors, binds, seen) for x in v))
  if isinstance(v, dict): return ("dict", tuple((k, _signature(x, tensors, binds, seen)) for k, x in v.items()))
  if dataclasses.is_dataclass(v) or hasattr(v, "__dict__"):
    fields = vars(v) if hasattr(v, "__dict__") else {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
    return (type(v), tuple((k, _signature(x, tensors, binds, seen)) for k, x in fields.items()))
  raise _Unreusable(f"can't tell what a {type(v).__name__} changes")


def _recording(capture: Capture, inputs: list[Buffer], binds: dict[str, int], ret: Any) -> _Recording:
  input_at = {id(b): i for i, b in enumerate(inputs)}
  new_at: dict[int, int] = {}
  new: list[tuple[str, int, DType]] = []
  items = []
  for ei, vals in capture.items:
    if unbound := [n for n in vals if n not in binds]: raise _Unreusable(f"a kernel takes Variable {unbound[0]!r}, which no argument binds")
    slots = []
    for b in ei.bufs:
      if id(b) in input_at: slots.append((True, input_at[id(b)]))
      elif id(b) in capture.fresh and b.base is None:
        if id(b) not in new_at:
          new_at[id(b)] = len(new)
          new.append((b.device, b.size, b.dtype))
        slots.append((False, new_at[id(b)]))
      else: raise _Unreusable(f"a kernel uses a buffer ({b.device}, {b.size} x {b.dtype}) that is neither an input nor made by the call")
    items.append((ei.kind, ei.runner, ei.call, tuple(slots), tuple(vals)))
  if not isinstance(ret, Tensor) or not is_contiguous_buffer(ret.uop): raise _Unreusable("it doesn't return one realized tensor")
  if (out := new_at.get(id(tensor_buffers(ret)[0]))) is None: raise _Unreusable("the tensor it returns is not on a buffer it made")
  return _Recording(tuple(items), tuple(new), out, ret.shape)


def _replay(rec: _Recording, inputs: list[Buffer], binds: dict[str, int]) -> Tensor:
  fresh = [Buffer(device, size, dtype) for device, size, dtype in rec.new]
  items: list[tuple[ExecItem, dict[str, int]]] = []
  for kind, runner, call, slots, names in rec.items:
    try: vals = {n: binds[n] for n in names}
    except KeyError as e: raise RuntimeError(f"KernelReuse: a recorded kernel takes Variable {e} that this call doesn't bind") from None
    items.append((ExecItem(kind, [inputs[i] if is_input else fresh[i] for is_input, i in slots], runner, call), vals))
  device, size, dtype = rec.new[rec.out]
  node = new_buffer(device, size, dtype)
  buffers[node] = fresh[rec.out]  # the returned tensor's node (a live tensor's buffer: memory planning keeps it)
  realize.run_exec_items(items)
  return Tensor(buffer_view(node, rec.out_shape))
