"""Tensors on several devices: `Tensor.shard(devices, axis)` splits a tensor along an axis (or replicates it, axis None),
and every op works on the result as on one tensor whose `.device` is the tuple of devices. These are the Tensor methods;
the MULTI node they build and its lowering to per-device graphs before scheduling are in schedule/multi.py."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

from tinygrad.device.registry import Device
from tinygrad.dtype import DType
from tinygrad.engine.realize import buffer_of
from tinygrad.frontend.movement import MovementMixin
from tinygrad.helpers import InvalidArgumentError, InvalidDTypeError, prod
from tinygrad.schedule.kernelize import buffer_view, is_contiguous_buffer, is_writable_view, new_buffer
from tinygrad.schedule.multi import Devices, copy_to, lower, make_multi, shrink_axis, split_bounds
from tinygrad.uop.ops import Ops, UOp

if TYPE_CHECKING:
  from tinygrad.device.runtime import Buffer

TensorT = TypeVar("TensorT", bound="MultiMixin")

# ---- devices

def canonical_device(device: str | Sequence[str] | None) -> str | Devices:
  """Device.canonicalize, also for a tuple of devices (a sharded tensor's device); a tuple of one device is that device, as in
  tinygrad (Tensor(x, device=("CPU",)) is a plain tensor on CPU)."""
  if isinstance(device, (tuple, list)):
    if not device: raise ValueError("a tuple of devices must name at least one device")
    if len(device) == 1: return Device.canonicalize(device[0])
    devs = tuple(Device.canonicalize(d) for d in device)
    if len(set(devs)) != len(devs): raise ValueError(f"the devices of a sharded tensor must be distinct, got {devs}")
    return devs
  return Device.canonicalize(device)  # type: ignore[arg-type]  # a str or None here


def is_multi(device: Any) -> bool: return isinstance(device, tuple)


# ---- realized sharded tensors

def is_realized_multi(u: UOp) -> bool:
  """A MULTI whose parts are all contiguous buffers (what an assign can write into, and what a TinyJit takes)."""
  return u.op is Ops.MULTI and all(is_contiguous_buffer(s) for s in u.src)


def input_device(t: TensorT) -> Any:
  """A TinyJit input's device, with how it is sharded: kernels captured for one split don't fit another."""
  return t.device if t.uop.op is not Ops.MULTI else f"{t.device} split {'nowhere' if t.uop.arg[0] is None else t.uop.arg}"


def tensor_buffers(t: TensorT) -> list[Buffer]:
  """The buffers behind a realized tensor: one, or one per device of a sharded tensor."""
  return [buffer_of(s.base) for s in t.uop.src] if t.uop.op is Ops.MULTI else [buffer_of(t.uop.base)]


# ---- creation on a tuple of devices (hooks in tensor.py)

def multi_empty(shape: tuple[int, ...], dtype: DType, devices: Devices) -> UOp:
  """Uninitialized, replicated: a buffer of the whole shape on every device."""
  return make_multi([buffer_view(new_buffer(d, prod(shape), dtype), tuple(shape)) for d in devices])


def replicate(x: UOp, devices: Devices) -> UOp: return make_multi([copy_to(x, d) for d in devices])


def assign_value(target: TensorT, x: Any) -> TensorT:
  """The value `target.assign(x)` writes, as tinygrad takes it: a Python scalar, list or numpy array becomes a tensor of the
  target's dtype (and device); a tensor must have the target's dtype and is broadcast to its shape."""
  from tinygrad.frontend.disk import is_storage_device
  T = type(target)
  # (a value for a file is made on the default device: a new buffer on the file's DISK device would be the file itself)
  dev = None if is_storage_device(target.device) else target.device
  if not isinstance(x, T):
    if isinstance(x, (int, float, bool)): return T.full(target.shape, x, dtype=target.dtype, device=dev)
    x = T(x, dtype=target.dtype, device=dev)
  if x.dtype != target.dtype:
    raise InvalidDTypeError(f"assign dtype mismatch: target {target.dtype!r}, value {x.dtype!r}; cast the value first")
  if x.shape != target.shape:
    try: x = x.expand(target.shape)
    except InvalidArgumentError: raise InvalidArgumentError(f"assign shape mismatch: target {target.shape}, value {x.shape}") from None
  return x


_VIEW_OPS = (Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK, Ops.FLIP)


def multi_assign(target: TensorT, x: Any) -> TensorT:
  """Tensor.assign into a sharded tensor: each device writes its part in place."""
  x = assign_value(target, x)
  if x.device != target.device: x = x.to(target.device)
  if not is_realized_multi(target.uop) and is_realized_multi(target.uop.base) and target.uop.op in _VIEW_OPS:
    # a view of sharded buffers (out[:, 2:3]): each device writes its part of the view into its own buffer, now (as a view's
    # assign on one device); a view that crosses the shards (a slice of the sharded axis) has no per-device part to write
    lowered = lower(target.uop)
    if lowered.op is not Ops.MULTI or not all(is_writable_view(s) for s in lowered.src):
      raise NotImplementedError(f"can't assign into this {target.shape} view of a tensor sharded on axis {target.uop.base.arg[0]}: "
                                "it doesn't split into one view per shard. Use setitem on the sharded tensor (t[idx] = v) instead")
    target.uop = UOp(Ops.ASSIGN, target.dtype, (target.uop, x.uop))
    target.realize()
    return target
  if not is_realized_multi(target.uop): target.realize()
  if not is_realized_multi(target.uop):  # a view of sharded buffers: no place to write in, so it just takes the value
    target.uop = x.uop
    return target
  target.uop = UOp(Ops.ASSIGN, target.dtype, (target.uop, x.uop))
  return target


# ---- the Tensor methods

class MultiMixin(MovementMixin):
  __slots__ = ()

  def shard(self, devices: Sequence[str], axis: int | None = None) -> Self:
    """Split along `axis` into one part per device (sizes differ by at most one), or copy whole to every device (axis
    None). The result's `.device` is the tuple of devices; ops on it run on every device, `.to(device)` gathers it."""
    if isinstance(devices, str): raise TypeError(f"shard takes a tuple of devices, got the string {devices!r}")
    devs = canonical_device(tuple(devices))
    if isinstance(devs, str): return self.to(devs)  # one device: no split (tinygrad's shard gives a plain tensor there too)
    t = self
    ax = None if axis is None else t._axis(axis)
    if isinstance(t.device, tuple):
      if t.device == devs and t.uop.op is Ops.MULTI and t.uop.arg[0] == ax: return t
      t = t.to(t.device[0])  # resharding: gather, then split again
    if ax is None: parts, bounds = [t.uop] * len(devs), None
    else:
      bounds = split_bounds(t.shape[ax], len(devs))
      parts = [shrink_axis(t.uop, ax, b) for b in bounds]
    # each shard gets a buffer of its own on its device (a copy, or a contiguous kernel on the tensor's own device)
    from tinygrad.frontend.disk import is_storage_device
    # from a file each part is copied from a view of its bytes (Tensor.to), where a copy of the sliced view needs a kernel on DISK
    if is_storage_device(t.device): srcs = [type(t)(p).to(d).uop for p, d in zip(parts, devs)]
    else: srcs = [UOp(Ops.CONTIGUOUS, p.dtype, (p,)) if p.device == d else copy_to(p, d) for p, d in zip(parts, devs)]
    return type(t)(make_multi(srcs, ax, bounds), requires_grad=t.requires_grad)

  def shard_like(self, y: Self) -> Self:
    """Shard the way y is sharded (its devices and axis), or move to y's device when y is not sharded (tinygrad's shard_like)."""
    t = self
    if not isinstance(y.device, tuple): return t.to(y.device)
    m = lower(y.uop)  # a view of a sharded tensor is a MULTI after lowering
    return t.shard(y.device, m.arg[0] if m.op is Ops.MULTI else None)

  def shard_(self, devices: Sequence[str], axis: int | None = None) -> Self:
    """shard in place: this tensor becomes the sharded one."""
    t = self
    t.uop = t.shard(devices, axis).uop
    return t
