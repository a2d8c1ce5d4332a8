"""Tensor: a lazy n-dimensional array. Operations build a UOp graph; `realize()` schedules it into kernels,
compiles them for the device and runs them."""
from __future__ import annotations

import contextlib
import itertools
import math
import os
import pathlib
import struct
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from tinygrad.device.registry import Device
from tinygrad.dtype import ConstType, DType, _from_np_dtype, _to_np_dtype, dtypes, to_dtype  # noqa: F401  (the two np ones: tinygrad.tensor exports them)
from tinygrad.engine.linear import to_linear
from tinygrad.engine.realize import buffer_of, run_schedule, split_policy
from tinygrad.frontend.conv import ConvMixin
from tinygrad.frontend.custom_kernel import custom_kernel
from tinygrad.frontend.disk import assign_bytes, disk_view, is_storage_device, range_view
from tinygrad.frontend.functional import FunctionalMixin
from tinygrad.frontend.indexing import IndexingMixin
from tinygrad.frontend.linalg import LinalgMixin
from tinygrad.frontend.multi import MultiMixin, assign_value, canonical_device, is_realized_multi, multi_assign, multi_empty, replicate
from tinygrad.gradient import compute_gradient
from tinygrad.helpers import TRAINING, InvalidArgumentError, InvalidDTypeError, JitError, all_int, argfix, argsort, make_tuple, prod
from tinygrad.schedule.kernelize import (
  buffer_view,
  create_schedule,
  is_buffer_view,
  is_contiguous_buffer,
  is_strided_view,
  is_writable_view,
  mark_applied,
  max_size,
  new_buffer,
)
from tinygrad.schedule.multi import has_multi, lower_roots, lowered_key, realized
from tinygrad.uop.ops import Ops, UOp
from tinygrad.uop.symbolic import sint_le, sint_simplify, sint_val

_all_tensors: weakref.WeakSet[Tensor] = weakref.WeakSet()
# what a realized tensor's node became (its buffer view), for as long as a lazy graph still holds the node: backward() of a
# graph built before the tensor was realized gives that node's gradient to the tensor (tinygrad 0.14 substitutes the buffer
# into every live graph instead)
_became: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
# the graph a tensor had before a realize of other tensors computed it on the way (an intermediate the schedule gave a buffer,
# `pr` in `pr.topk(2)[1].realize()`), by the buffer view it now is: gradients of graphs built from it later still reach the
# tensors it was computed from, as in tinygrad 0.14 (which leaves such a tensor's graph as it was). A tensor realized itself
# (`t.realize()`) is cut from its graph, in both.
_grad_origin: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()


def _autograd_graph(u: UOp) -> UOp:
  """u with each buffer view that stands for an intermediate's earlier graph (_grad_origin) replaced by that graph."""
  for _ in range(16):  # an earlier graph may itself hold views of intermediates realized before it
    if not _grad_origin: break
    sub = {n: o for n in u.toposort(gate=lambda x: x.op is not Ops.DETACH) if (o := _grad_origin.get(n)) is not None}
    if not sub: break
    u = u.substitute(sub)
  return u


def _data_to_bytes(data: Any, dtype: DType) -> tuple[bytes, tuple[int, ...]]:
  """Python/numpy data -> raw bytes in `dtype` and its shape."""
  if _is_numpy(data):
    return _numpy_to_bytes(data, dtype), tuple(data.shape)
  shape = _list_shape(data)
  flat = _flatten(data)
  if (raw := _pack_plain(flat, dtype)) is not None: return raw, shape
  from tinygrad.uop.alu import cast_scalar, to_bits
  for x in flat: dtypes.check_fits(x, dtype)  # an int that doesn't fit is an error, not a wrapped value
  if dtype.fmt is not None:
    return struct.pack(f"{len(flat)}{dtype.fmt}", *(cast_scalar(x, dtype) for x in flat)), shape
  size_fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[dtype.itemsize]
  return struct.pack(f"{len(flat)}{size_fmt}", *(to_bits(x, dtype) for x in flat)), shape


def _pack_plain(flat: list[Any], dtype: DType) -> bytes | None:
  """The common cases packed at once (ints that fit an int dtype, numbers into float32/64); None for the rest, which the
  per-element conversion handles (wrapping, rounding, overflow errors). A 512-token prompt's ids took 10 ms element by element."""
  if dtype.fmt is None or not flat: return None
  kinds = set(map(type, flat))
  if dtypes.is_int(dtype) and kinds == {int} and dtypes.min(dtype) <= min(flat) and max(flat) <= dtypes.max(dtype):
    return struct.pack(f"{len(flat)}{dtype.fmt}", *flat)
  if dtype in (dtypes.float32, dtypes.float64) and kinds <= {int, float}:
    try: return struct.pack(f"{len(flat)}{dtype.fmt}", *flat)
    except OverflowError: return None  # past float32's range: inf, as a cast gives
  return None


def _numpy_to_bytes(arr: Any, dtype: DType) -> bytes:
  import numpy as np
  if dtype.fmt is not None: return np.ascontiguousarray(arr.astype(np.dtype(dtype.fmt) if dtype != dtypes.bool else np.bool_)).tobytes()
  from tinygrad.uop.alu import to_bits
  size_fmt = {1: np.uint8, 2: np.uint16}[dtype.itemsize]
  flat = np.asarray(arr, dtype=np.float64).reshape(-1)
  return np.array([to_bits(float(x), dtype) for x in flat], dtype=size_fmt).tobytes()


def _list_shape(data: Any) -> tuple[int, ...]:
  if not isinstance(data, (list, tuple)): return ()
  if len(data) == 0: return (0,)
  if not any(isinstance(x, (list, tuple)) for x in data): return (len(data),)  # a row of numbers (no recursion per element)
  inner = [_list_shape(x) for x in data]
  if any(s != inner[0] for s in inner): raise ValueError(f"ragged nested list: sub-lists have shapes {sorted(set(inner))}")
  return (len(data), *inner[0])


def _flatten(data: Any) -> list[Any]:
  if not isinstance(data, (list, tuple)): return [data]
  if not any(isinstance(x, (list, tuple)) for x in data): return list(data)
  return [y for x in data for y in _flatten(x)]


def _numpy_dtype_of(arr: Any) -> DType:
  # by kind and size, not by scalar type: np.longlong ('q', what .numpy() of an int64 tensor gives) is not np.int64 ('l') on Linux
  mapping = {("b", 1): dtypes.bool, ("i", 1): dtypes.int8, ("u", 1): dtypes.uint8, ("i", 2): dtypes.int16, ("u", 2): dtypes.uint16,
             ("i", 4): dtypes.int32, ("u", 4): dtypes.uint32, ("i", 8): dtypes.int64, ("u", 8): dtypes.uint64,
             ("f", 2): dtypes.float16, ("f", 4): dtypes.float32, ("f", 8): dtypes.float64}
  key = (arr.dtype.kind, arr.dtype.itemsize)
  if key not in mapping: raise TypeError(f"numpy dtype {arr.dtype} has no tinygrad equivalent")
  return mapping[key]


class _TensorType(type):
  """Tensor's metaclass, for one class property: `Tensor.training` reads and sets the TRAINING setting, so
  `Tensor.training = True`, `with Tensor.train():`, `with Context(TRAINING=1):` and `TRAINING=1` in the environment are one
  switch (tinygrad 0.14 programs use the Context form, older ones the attribute)."""
  @property
  def training(cls) -> bool: return bool(TRAINING.value)
  @training.setter
  def training(cls, mode: bool) -> None: TRAINING.value = int(bool(mode))
  def __dir__(cls) -> list[str]: return sorted({*super().__dir__(), "training"})


class Tensor(IndexingMixin, ConvMixin, LinalgMixin, FunctionalMixin, MultiMixin, metaclass=_TensorType):
  """A lazy tensor. `Tensor([1, 2, 3])`, `Tensor(np_array)`, `Tensor.rand(2, 3)`; `.numpy()` computes it.
  The ops are the mixins of frontend/ over frontend/base.py's TensorBase (the graph, shape, dtype, device); this class
  adds construction from data, creation, realization and autograd."""
  __slots__ = ("__weakref__",)
  if not TYPE_CHECKING:  # `t.training` on an instance reads the same setting (the class-level one is _TensorType's)
    training = property(lambda self: bool(TRAINING.value))
  _seed: ClassVar[int] = 0
  _rng_counters: ClassVar[dict[Any, Tensor]] = {}

  def __init__(self, data: Any, device: str | tuple[str, ...] | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None):
    if dtype is not None: dtype = to_dtype(dtype)
    symbolic = isinstance(data, UOp) and dtypes.is_int(data.dtype) and data.device is None  # (device last: float nodes skip computing it)
    # a graph node or a Tensor has its device: resolving the default one (the registry checks which devices are available, about
    # 0.1 ms) for every op's result was a quarter of loading SmolLM2 (3400 tensors)
    dev = canonical_device(device) if device is not None or symbolic or not isinstance(data, (UOp, Tensor)) else ""  # multi.py: a tuple too
    self.grad: Tensor | None = None
    self.requires_grad: bool | None = requires_grad
    if symbolic:
      # a symbolic int (a bound Variable or an expression of them) used as a scalar
      self._uop = UOp(Ops.CONST, dtype or data.dtype, (UOp(Ops.DEVICE, arg=dev),), data)
    elif isinstance(data, (UOp, Tensor)):
      u = data if isinstance(data, UOp) else data.uop
      # dtype= and device= convert, as in tinygrad (Tensor(t.uop, dtype=dtypes.float) is a cast) and torch (torch.tensor(t, dtype=))
      if (dtype is not None and u.dtype != dtype) or (device is not None and u.device != dev):
        t = Tensor(u)
        if dtype is not None and t.dtype != dtype: t = t.cast(dtype)
        if device is not None and t.device != dev: t = t.to(dev)
        u = t.uop
      self._uop = u
    elif isinstance(data, (bool, int, float)):
      dtypes.check_fits(data, dtype := dtype or dtypes.from_py(data))
      self._uop = UOp.const(dtype, data, (UOp(Ops.DEVICE, arg=dev),))
      if requires_grad: self._uop = _parameter_node(self._uop)
    elif isinstance(data, pathlib.PurePath):  # a file's bytes, as a DISK tensor (tinygrad 0.14: Tensor(pathlib.Path("f")))
      self._uop = Tensor._from_path(data, device, dtype).uop
    elif isinstance(data, (bytes, bytearray, memoryview)):
      self._uop = _from_bytes(bytes(data), (len(data) // (dtype or dtypes.uint8).itemsize,), dtype or dtypes.uint8, dev)
    else:
      if _is_numpy(data):
        if not data.dtype.isnative: data = data.astype(data.dtype.newbyteorder("="))  # big-endian data: its values, in native order
        dtype = dtype or _numpy_dtype_of(data)
      else:
        # a TypeError and, as tinygrad raises, a RuntimeError
        if not isinstance(data, (list, tuple)): raise InvalidDTypeError(f"can't make a Tensor from {type(data).__name__}")
        dtype = dtype or (dtypes.from_py(_flatten(data)) if _flatten(data) else dtypes.default_float)
      raw, shape = _data_to_bytes(data, dtype)
      self._uop = _from_bytes(raw, shape, dtype, dev)
    _all_tensors.add(self)

  # ---- the graph behind the tensor (uop, shape, dtype, device, ndim, numel, nbytes: TensorBase)
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __repr__(self) -> str: return f"<Tensor {self.shape} {self.dtype!r} on {self.device}{' with grad' if self.grad is not None else ''}>"
  def __hash__(self) -> int: return id(self)
  def __bool__(self) -> bool: raise TypeError("the truth value of a Tensor is ambiguous: use .item(), .any() or .all()")

  # ---- running
  @staticmethod
  def realize_all(*tensors: Tensor) -> None:
    if (planned := Tensor._plan(tensors)) is None: return
    # the NULL device has no data: a copy from it has nothing to move (kernels there compile and do nothing)
    run_schedule([si for si in planned[0] if not (si.ast.op is Ops.COPY and str(si.bufs[1].device).split(":")[0].upper() == "NULL")])
    Tensor._point_at_buffers(*planned)

  @staticmethod
  def _plan(tensors: Sequence[Tensor]) -> tuple[list, dict[UOp, UOp], list[Tensor], list[UOp]] | None:
    """The schedule that realizes these tensors, what each realized node becomes, and the tensors and roots scheduled."""
    owners = [t for t in tensors if not is_buffer_view(t.uop) and not is_realized_multi(t.uop)]
    # each tensor gets a buffer of its own: identical graphs (two Tensor.zeros(3)) must not share one, or an
    # assign to one would change the other. (A sharded root gets its per-device buffers from the lowering.)
    roots = [t.uop if t.uop.op in (Ops.ASSIGN, Ops.CONTIGUOUS, Ops.COPY, Ops.AFTER) or has_multi(t.uop) else _unique_contiguous(t.uop) for t in owners]
    if not roots: return None
    items, becomes = create_schedule(lower_roots(roots), split_policy())
    return items, becomes, owners, roots

  @staticmethod
  def _point_at_buffers(items: list, becomes: dict[UOp, UOp], owners: list[Tensor], roots: list[UOp]) -> None:
    mark_applied(becomes)
    key = lowered_key()
    def point(t: Tensor, node: UOp) -> None:
      if (done := realized(node, becomes, key)) is not None and done is not t._uop: _became[t._uop], t._uop = done, done
    for t, root in zip(owners, roots): point(t, root)
    # every live tensor that was one of the realized nodes now is a view of its buffer(s). (Nodes are not
    # remembered beyond this, but for backward() in _became: after an assign the same graph would read new values; and, for an
    # intermediate that was not one of the tensors realized, for gradients in _grad_origin.)
    owned = {id(t) for t in owners}
    for t in list(_all_tensors):
      old = t._uop
      point(t, old)
      if t._uop is not old and id(t) not in owned and t.requires_grad is not False and dtypes.is_float(old.dtype) \
         and old.op not in (Ops.ASSIGN, Ops.AFTER, Ops.CALL):  # a pending write must not run again in a gradient's graph
        _grad_origin.setdefault(t._uop, old)

  @staticmethod
  def schedule_linear(*tensors: Tensor) -> UOp:
    """The schedule that realizes these tensors as one LINEAR UOp of CALLs (engine/linear.py), not run: the tensors now
    refer to the buffers it fills, so run it (`run_linear`) before reading them."""
    if (planned := Tensor._plan(tensors)) is None: return to_linear([])
    Tensor._point_at_buffers(*planned)
    return to_linear(planned[0])

  def realize(self, *others: Tensor) -> Tensor:
    Tensor.realize_all(self, *others)
    return self

  def schedule(self, *others: Tensor) -> list:
    """The kernels and copies that realizing these tensors would run (not run)."""
    roots = lower_roots([t.uop for t in (self, *others) if not is_buffer_view(t.uop)])
    return create_schedule([r for r in roots if not is_buffer_view(r)], split_policy())[0] if roots else []

  def custom_kernel(self, *others: Tensor | UOp, fxn: Callable[..., UOp], grad_fxn: Callable[..., Any] | None = None) -> list[Tensor]:
    """Run a kernel written in UOps on these tensors (frontend/custom_kernel.py, docs/kernels.md); returns them as the kernel
    left them, lazily. A bound Variable among them reaches `fxn` as the Variable, a kernel parameter (no tensor returned)."""
    return custom_kernel((self, *others), fxn, grad_fxn)

  def _contiguous_buffer(self) -> Any:
    if isinstance(self.device, tuple): return self.to(self.device[0])._contiguous_buffer()  # sharded: gather to read it
    if is_storage_device(self.device):  # a file, or a contiguous part of it, is read as it is
      if not is_writable_view(self.uop):
        self._write_storage_base()
        if range_view(self) is None: self.realize()
      if (view := range_view(self)) is not None: return buffer_of(view.uop.base)
    t = self if is_contiguous_buffer(self.uop) else self.contiguous()
    t.realize()
    return buffer_of(t.uop.base)

  @staticmethod
  def _from_path(path: pathlib.PurePath, device: str | tuple[str, ...] | None, dtype: DType | None) -> Tensor:
    """The file at path viewed as a 1-d DISK tensor of dtype (uint8 by default), moved to device when one is given."""
    size = os.stat(path).st_size  # FileNotFoundError for a missing file, before a DISK device would create it
    dt = dtype or dtypes.uint8
    t = Tensor.empty(size // dt.itemsize, dtype=dt, device=f"DISK:{path}")
    return t if device is None else t.to(device)

  def _write_storage_base(self) -> None:
    """A slice or reshape of a file tensor not written yet (`x.to("disk:f")[10:20]`): the file is written first and this tensor
    viewed over it, since DISK runs no kernel that could gather the slice."""
    chain, u = 0, self.uop
    while u.op in (Ops.RESHAPE, Ops.SHRINK): chain, u = chain + 1, u.src[0]
    if not chain or u.op is Ops.BUFFER or not is_storage_device(u.device if isinstance(u.device, str) else None): return
    self._uop = self.uop.substitute({u: Tensor(u).realize().uop})

  def _flat_data(self) -> memoryview:
    """The elements as a flat memoryview (typed when Python has a format for the dtype)."""
    from tinygrad.engine import realize as realize_mod
    if not all_int(self.shape): return self._at_bound_values()._flat_data()
    if any(c.replayed for c in realize_mod.capturing):
      raise JitError("a tensor's data was read (.item(), .tolist(), .numpy(), .data()) inside a TinyJit function while it "
                     "captures: the replays would reuse this value instead of reading the new one. Return the tensor from the "
                     "jitted function and read it after the call (or run the function without TinyJit)")
    buf = self._contiguous_buffer()
    mv = memoryview(bytearray(buf.nbytes))
    buf.copyout(mv)
    # memoryview can't cast to 'e' (half) before Python 3.12: half stays raw bytes here, tolist decodes it
    castable = self.dtype.fmt is not None and self.dtype.fmt != "e"  # (empty too: a (0,) view of the dtype's items, as tinygrad's)
    return mv.cast(self.dtype.fmt) if castable else mv  # type: ignore[call-overload]

  def data(self) -> memoryview:
    """The elements as a memoryview of the tensor's shape (`t.data()[1, 0]`, `.tolist()`), as tinygrad's: typed when Python
    has a format for the dtype; flat raw bytes for half, bfloat16 and fp8; an empty tensor's is flat, (0,)."""
    if not all_int(self.shape): return self._at_bound_values().data()  # a symbolic shape: read at the bound values
    mv = self._flat_data()
    # (memoryview can't take a shape with a 0 in it: an empty tensor's view stays flat)
    if mv.format == self.dtype.fmt and mv.ndim == 1 and self.numel() > 0 and self.shape != (mv.shape[0] if mv.shape else 0,):
      return mv.cast("B").cast(self.dtype.fmt, self.shape)  # type: ignore[call-overload]
    return mv

  def numpy(self) -> Any:
    if not all_int(self.shape): return self._at_bound_values().numpy()  # a symbolic shape: read at the bound values
    import numpy as np
    raw = bytes(self._flat_data().cast("B"))
    if self.dtype.fmt is not None:
      return np.frombuffer(raw, dtype=np.bool_ if self.dtype == dtypes.bool else np.dtype(self.dtype.fmt)).reshape(self.shape).copy()
    from tinygrad.uop.alu import from_bits
    bits = np.frombuffer(raw, dtype={1: np.uint8, 2: np.uint16}[self.dtype.itemsize])
    if self.dtype == dtypes.bfloat16: return (bits.astype(np.uint32) << 16).view(np.float32).reshape(self.shape)
    return np.array([from_bits(int(b), self.dtype) for b in bits], dtype=np.float32).reshape(self.shape)

  def tolist(self) -> Any:
    if not all_int(self.shape): return self._at_bound_values().tolist()  # a symbolic shape: read at the bound values
    from tinygrad.uop.alu import from_bits
    mv = self._flat_data()
    if self.dtype.fmt == "e": flat = list(struct.unpack(f"{self.numel()}e", bytes(mv)))
    elif self.dtype.fmt is not None: flat = list(mv) if self.numel() > 0 else []
    else:
      raw = bytes(mv.cast("B"))
      flat = [from_bits(int.from_bytes(raw[i:i + self.dtype.itemsize], "little"), self.dtype) for i in range(0, len(raw), self.dtype.itemsize)]
    if self.dtype == dtypes.bool: flat = [bool(x) for x in flat]
    return _unflatten(flat, self.shape)

  def _at_bound_values(self) -> Tensor:
    """A tensor of symbolic shape (x[:, :v]) cut to its size at the values its Variables are bound to (tinygrad can't read it)."""
    return self.shrink(tuple((0, sint_val(s)) for s in self.shape))

  def item(self) -> ConstType:
    if not all_int(self.shape): return self._at_bound_values().item()
    if self.numel() != 1: raise InvalidArgumentError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.reshape(()).tolist()

  def contiguous(self) -> Tensor:
    """This tensor's values in row-major order in a buffer. A tensor that already is a whole buffer in that order is returned
    as a view of the same memory, as in torch and tinygrad (no copy: an assign through either changes both); `clone()` copies."""
    base = self.uop
    while base.op is Ops.RESHAPE: base = base.src[0]  # a realized 2-D tensor is a reshape of its flat buffer
    if base.op is Ops.BUFFER: return Tensor(self.uop, requires_grad=self.requires_grad)
    return Tensor(_unique_contiguous(self.uop), requires_grad=self.requires_grad)
  def detach(self) -> Tensor:
    # False after a tensor that said requires_grad (torch); unset after one that never did, so that backward() gives the detached
    # tensor (and a clone of it) a gradient of its own, as tinygrad 0.14 (which has no requires_grad)
    return Tensor(UOp(Ops.DETACH, self.dtype, (self.uop,)), requires_grad=None if self.requires_grad is None else False)
  def _detached_buffer(self) -> Tensor | None:
    """For a detached buffer or view of one (x.detach() of a realized x), a tensor of what it detaches, to write through."""
    if self.uop.op is not Ops.DETACH or not is_writable_view(self.uop.src[0]): return None
    return Tensor(self.uop.src[0], requires_grad=False)

  def bitcast(self, dtype: DType | str) -> Tensor:
    # on DISK, a contiguous part of a file is reinterpreted in place (a view of its bytes; DISK runs no kernel), as tinygrad's
    # t[a:b].bitcast(dtype) of a file
    if is_storage_device(self.device) and (dt := to_dtype(dtype)) != self.dtype:
      self._write_storage_base()
      if (view := range_view(self)) is None:
        raise RuntimeError(f"bitcast of this {self.shape} view of {self.device}: a non-contiguous view is not supported on DISK")
      old, new = self.dtype.itemsize, dt.itemsize
      if not self.shape or (self.shape[-1] * old) % new:
        raise RuntimeError(f"bitcast {self.dtype!r} -> {dt!r}: the last axis of {self.shape} doesn't hold a whole number of {new}-byte items")
      return disk_view(view, 0, dt, (*self.shape[:-1], self.shape[-1] * old // new))
    return super().bitcast(dtype)

  def to(self, device: str | tuple[str, ...] | None) -> Tensor:
    device = canonical_device(device)  # a tuple of devices replicates (multi.py); from a sharded tensor it gathers
    if device == self.device: return self
    src = self.uop
    # a contiguous part of a file is copied from a view of its bytes: DISK can't run the kernel that would gather it
    if is_storage_device(self.device) and not is_contiguous_buffer(src):
      self._write_storage_base()
      if (view := range_view(self)) is not None: src = view.uop
    out = Tensor(UOp(Ops.COPY, self.dtype, (src, UOp(Ops.DEVICE, arg=device))), requires_grad=self.requires_grad)
    if self.grad is not None: out.grad = self.grad.to(device)
    return out

  def clone(self, device: str | tuple[str, ...] | None = None) -> Tensor:
    """A copy in a buffer of its own (on `device` when given)."""
    src = self.to(device) if device is not None else self
    out = Tensor(_unique_contiguous(src.uop), requires_grad=src.requires_grad)
    if src.grad is not None: out.grad = src.grad.clone()  # the gradient is cloned along (tinygrad; torch's clone has none)
    return out

  def to_(self, device: str | tuple[str, ...] | None) -> Tensor:
    """Move this tensor to device in place (tinygrad's to_)."""
    self.uop = self.to(device).uop
    return self

  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)

  def allclose(self, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Whether every element is close, as a 0-d bool tensor, lazily, as tinygrad's (`a.allclose(b).item()`; torch returns a
    Python bool)."""
    return self.isclose(other, rtol=rtol, atol=atol, equal_nan=equal_nan).all()

  def assign(self, x: Tensor | ConstType | Sequence | Any) -> Tensor:
    """Write x into this tensor's buffer (in place, like tinygrad's assign): a tensor of this dtype, broadcast to this shape
    (a (1,) or (4,) value into a (3, 4) tensor), or a Python scalar, list or numpy array, taken in this dtype."""
    if isinstance(self.device, tuple): return multi_assign(self, x)  # sharded: every device writes its part
    if (inner := self._detached_buffer()) is not None:  # t.detach().assign(x) writes t's buffer (torch: detach shares storage)
      inner.assign(x).realize()
      return self
    if self.uop.op is Ops.BITCAST and (src := self.uop.src[0]).dtype.itemsize == self.dtype.itemsize and \
       (is_writable_view(src) or src.op is Ops.BITCAST):
      # a.bitcast(uint32).assign(bits) writes a's buffer with those bits (tinygrad 0.14); the write runs now, as into a view
      Tensor(src, requires_grad=False).assign(assign_value(self, x).bitcast(src.dtype)).realize()
      return self
    x = assign_value(self, x)
    if is_storage_device(self.device):  # a file: its bytes are written now, and only those (runtime/disk.py)
      if not is_writable_view(self.uop): self._write_storage_base()  # a part of a file not written yet: the file first
      if not is_writable_view(self.uop): self.realize()
      assign_bytes(self, x)
      return self
    if x.device != self.device: x = x.to(self.device)
    # an empty target (x[1:1], a view of a zero-sized dim) has nothing to write; a store kernel for it would drop the
    # zero-sized dim and write its other dims into the buffer (x[1:-1:-2, :2].assign(...) wrote x[0, :2], past its end segfaulted)
    if self.numel() == 0: return self
    if self.uop.op is Ops.ASSIGN and is_contiguous_buffer(self.uop.src[0]):
      # a second pending assign to the whole buffer: chained after the first (which the value may read), not run now, so
      # that a lazy tensor read from the buffer before both still reads it before both (tinygrad 0.14)
      self.uop = UOp(Ops.ASSIGN, self.dtype, (self.uop.src[0], x.uop))
      return self
    if not is_contiguous_buffer(self.uop) and not is_writable_view(self.uop) and not self._rebase_view():
      if self._assign_through(x): return self
      if is_buffer_view(self.uop):  # realizing it would copy it, and the write would never reach the buffer it views
        raise InvalidArgumentError(f"can't assign into this {self.shape} view of another tensor's buffer: a strided (x[::2]), "
                                   "expanded or padded view has no buffer element per element of its own. Assign into the base "
                                   "tensor (x[i, ::2] = v is fine), or make a copy with .contiguous() first")
      if not has_multi(self.uop):
        # a target with no buffer yet (a lazy gradient clipped in place): x becomes a buffer of its own when realized, in one
        # schedule with the rest, as tinygrad's lazy store does. (Realizing the target first ran its graph alone: clipping
        # each parameter's gradient so ran the backward pass once per parameter, 1645 kernels a step for 250.) Lazy readers
        # of the old value keep reading it, as they did
        self.uop = _unique_contiguous(x.uop)
        return self
      self.realize()
    if not is_writable_view(self.uop):  # e.g. an expanded or padded view: there is no buffer slot per element
      self.uop = x.uop
      return self
    view = not is_contiguous_buffer(self.uop)
    self.uop = UOp(Ops.ASSIGN, self.dtype, (self.uop, x.uop))
    # a write into a view (cache[:, a:b].assign(x)) runs now: the tensors of the whole buffer (cache) don't refer to this
    # ASSIGN, so a lazy one would reach them only if this view were realized; tinygrad's readers of the buffer see it
    if view: self.realize()
    return self

  def _assign_through(self, x: Tensor) -> bool:
    """Assign into a strided or negatively stepped view of a buffer (v = t[::2], t[1:0:-1]; its chain has a PAD that a SHRINK
    takes off again), as tinygrad and torch: the buffer gets x at the elements the view reads, the rest unchanged. The map
    from buffer elements to view elements is the view's chain of movement ops replayed on the buffer's element numbers.
    False where the view isn't such a chain over a buffer, or an element is padding or read twice (an expand)."""
    if not is_strided_view(self.uop) or isinstance(self.device, tuple): return False
    chain, u = [], self.uop
    while u.op is not Ops.BUFFER:
      chain.append(u)
      u = u.src[0]
    base = Tensor(u, requires_grad=False)
    n, size = base.numel(), self.numel()
    pos = Tensor.arange(1, n + 1, device=self.device).uop  # element number + 1: padding reads 0
    for node in reversed(chain): pos = node.replace(dtype=pos.dtype, src=(pos, *node.src[1:]))
    at = Tensor(pos, requires_grad=False).flatten()
    if not (at > 0).all().item(): return False  # the view reads padding: those elements have no place in the buffer
    # which view element (+1) each buffer element takes: 0 for those the view doesn't read
    src = (Tensor.arange(1, size + 1, device=self.device) * (at > 0)).cast(dtypes.int32)
    which = Tensor.zeros(n, dtype=dtypes.int32, device=self.device).contiguous().scatter_reduce(0, (at - 1).clip(0, n - 1), src, "amax")
    value = x.cast(self.dtype).flatten().contiguous().realize()  # its own buffer: x may read the buffer written here (v += 1)
    new = (which > 0).where(value.gather(0, (which - 1).clip(0, size - 1)), base)
    base.assign(new).realize()
    return True

  def _rebase_view(self) -> bool:
    """For a view (reshape/permute/shrink/flip) of a tensor that is computed but not yet realized, like a lazy
    `Tensor.zeros(n).contiguous()` or a pending assign: realize that base, which repoints the tensors that are it at its
    new buffer, and make this tensor the same view of that buffer, so a write into the view reaches them. False when the
    base is another computation (it has no buffer of its own to write into)."""
    chain, u = [], self.uop
    while u.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK, Ops.FLIP):
      chain.append(u)
      u = u.src[0]
    if not chain or u.op not in (Ops.CONTIGUOUS, Ops.ASSIGN, Ops.COPY) or isinstance(self.device, tuple): return False
    base = Tensor(u, requires_grad=False).realize()
    if not is_writable_view(base.uop): return False
    new = base.uop
    for node in reversed(chain): new = node.replace(src=(new, *node.src[1:]))
    self.uop = new
    return True

  def replace(self, x: Tensor) -> Tensor:
    if x.shape != self.shape: raise InvalidArgumentError(f"replace shape mismatch: {self.shape} vs {x.shape}")
    self.uop = x.uop
    return self

  # ---- creation
  @staticmethod
  def from_url(url: str, gunzip: bool = False, **kwargs: Any) -> Tensor:
    """The bytes of the file at `url` as a uint8 tensor, downloaded once into the download cache (tinygrad.download.fetch;
    gunzip=True: decompressed). kwargs go to Tensor() (device=...)."""
    from tinygrad.download import fetch
    return Tensor(fetch(url, gunzip=gunzip).read_bytes(), **kwargs)

  @staticmethod
  def empty(*shape: int, device: str | tuple[str, ...] | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    shape = _check_shape(argfix(*shape))
    if isinstance(device, (tuple, list)):
      if isinstance(devs := canonical_device(device), tuple): return Tensor(multi_empty(tuple(shape), dt, devs), **kwargs)
      device = devs  # a tuple of one device is that device
    # a symbolic size (Tensor.empty(v, 2)) gets a buffer for its largest value, viewed at the symbolic shape
    buf = new_buffer(Device.canonicalize(device), max_size(shape), dt)
    return Tensor(buffer_view(buf, tuple(shape)), **kwargs)

  @staticmethod
  def full(shape: tuple[int, ...] | int, fill_value: ConstType, device: str | None = None, dtype: DType | str | None = None,
           **kwargs: Any) -> Tensor:
    shape = make_tuple(shape, 1) if isinstance(shape, (int, UOp)) else tuple(shape)
    # ints >= 0, or symbolic sizes (int expressions of Variables: Tensor.full((1, v+1), -inf))
    if not all(isinstance(s, UOp) and dtypes.is_int(s.dtype) or isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
      # a ValueError and, as tinygrad and torch raise, a RuntimeError
      raise InvalidArgumentError(f"shape must be ints >= 0 (or symbolic sizes of bound Variables), got {shape}")
    # a bound Variable (or an int expression of one) fills with its value, in its dtype (tinygrad)
    dt = to_dtype(dtype) if dtype is not None else fill_value.dtype if isinstance(fill_value, UOp) else dtypes.from_py(fill_value)
    rg = kwargs.pop("requires_grad", None)  # marked on the filled tensor (requires_grad_: a node of its own), not on the scalar
    t = Tensor(fill_value, device=device, dtype=dt, **kwargs)
    return (t.reshape((1,) * len(shape)).expand(shape) if shape else t).requires_grad_(rg)

  @staticmethod
  def zeros(*shape: int, **kwargs: Any) -> Tensor: return Tensor.full(argfix(*shape), 0.0, **kwargs)
  @staticmethod
  def ones(*shape: int, **kwargs: Any) -> Tensor: return Tensor.full(argfix(*shape), 1.0, **kwargs)
  def full_like(self, fill_value: ConstType, **kwargs: Any) -> Tensor:
    return Tensor.full(self.shape, fill_value, **{"dtype": self.dtype, "device": self.device, **kwargs})
  def zeros_like(self, **kwargs: Any) -> Tensor: return self.full_like(0, **kwargs)
  def empty_like(self, dtype: DType | str | None = None, device: str | tuple[str, ...] | None = None) -> Tensor:
    """An uninitialized tensor of self's shape (and dtype and device unless given)."""
    return Tensor.empty(*self.shape, dtype=dtype or self.dtype, device=device or self.device)
  def const_like(self, b: ConstType, dtype: DType | None = None) -> Tensor:
    """A tensor of self's shape and device filled with b (tinygrad's const_like)."""
    return self.full_like(b, dtype=dtype or self.dtype)
  def ones_like(self, **kwargs: Any) -> Tensor: return self.full_like(1, **kwargs)

  @staticmethod
  def arange(start: int | float, stop: int | float | None = None, step: int | float = 1, **kwargs: Any) -> Tensor:
    _check_kwargs("arange", kwargs)
    if stop is None: start, stop = 0, start
    if any(isinstance(x, UOp) for x in (start, stop, step)): return Tensor._arange_symbolic(start, stop, step, **kwargs)
    dtype = kwargs.pop("dtype", None) or dtypes.from_py([start, stop, step])
    dtype = to_dtype(dtype)
    n = max(0, math.ceil((stop - start) / step))
    if n == 0: return Tensor.empty(0, dtype=dtype, **kwargs)
    # an int range that the dtype can't hold raises (tinygrad; torch wraps), before anything is allocated for it
    if dtypes.is_int(dtype) and not all(dtypes.min(dtype) <= math.trunc(v) <= dtypes.max(dtype) for v in (start, start + (n - 1) * step)):
      raise OverflowError(f"arange({start}, {stop}, {step}) has values outside what {dtype!r} holds ({dtypes.min(dtype)}..{dtypes.max(dtype)})")
    idx = Tensor._index(n, kwargs.get("device"))
    return (idx.cast(dtype) * step + start).cast(dtype).requires_grad_(kwargs.get("requires_grad"))

  @staticmethod
  def _arange_symbolic(start: Any, stop: Any, step: Any, **kwargs: Any) -> Tensor:
    """arange(v), arange(v, v+4), arange(0, 10, v): symbolic start, stop or step (bound Variables); ints only, a step > 0."""
    step_ok = step.vmin > 0 if isinstance(step, UOp) else isinstance(step, int) and step > 0
    if not step_ok or any(isinstance(x, float) for x in (start, stop, step)):
      raise NotImplementedError(f"arange with a symbolic bound takes ints and an int step > 0, got ({start}, {stop}, {step}): "
                                "build it from arange(n) of an int n with * and +")
    dtype = to_dtype(kwargs.pop("dtype", None) or dtypes.default_int)
    n = sint_simplify((stop - start + (step - 1)) // step)
    if not sint_le(0, n): raise InvalidArgumentError(f"arange({start}, {stop}, {step}) has a negative size {n} at the bound values")
    idx = Tensor._index(n, kwargs.get("device"))
    return (idx.cast(dtype) * step + start).cast(dtype).requires_grad_(kwargs.get("requires_grad"))

  @staticmethod
  def _index(n: int, device: str | None) -> Tensor:
    """0..n-1 as int32 (int64 past what int32 holds): the IOTA node, which kernels turn into their loop index."""
    dt = dtypes.int32 if (n.vmax if isinstance(n, UOp) else n) <= 2**31 else dtypes.int64
    return Tensor(UOp(Ops.IOTA, dt, (UOp(Ops.DEVICE, arg=canonical_device(device)),), n))  # multi.py: a tuple replicates

  @staticmethod
  def eye(n: int, m: int | None = None, **kwargs: Any) -> Tensor:
    _check_kwargs("eye", kwargs)
    m = n if m is None else m
    if n < 0 or m < 0: raise InvalidArgumentError(f"eye needs sizes >= 0, got n={n}, m={m}")  # tinygrad: ValueError, torch: RuntimeError
    return (Tensor.arange(n, dtype=dtypes.int32, device=kwargs.get("device")).reshape(n, 1) ==
            Tensor.arange(m, dtype=dtypes.int32, device=kwargs.get("device")).reshape(1, m)).cast(
              to_dtype(kwargs.get("dtype") or dtypes.default_float)).requires_grad_(kwargs.get("requires_grad"))

  # ---- random numbers: counter-based (threefry 2x32), so the same seed gives the same values on every device
  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    Tensor._seed, Tensor._rng_counters = seed, {}

  @staticmethod
  def _random_bits(n: int, device: str | None) -> Tensor:
    """n random uint32s. The draw counter lives on the device and advances by a kernel (which TinyJit captures),
    so every call, and every replay of a jitted function, gets new numbers; each call keeps a snapshot of the
    counter, so two lazy draws never read the same value."""
    dev = canonical_device(device)
    if (counter := Tensor._rng_counters.get(dev)) is None:
      counter = Tensor._rng_counters[dev] = Tensor([0], dtype=dtypes.uint32, device=dev).realize()
    start = Tensor(_unique_contiguous(counter.uop))
    Tensor.realize_all(start, counter.assign(counter + n))
    ctr = Tensor._index(n, device).cast(dtypes.uint32) + start.reshape(()).expand(n)
    return _threefry2x32(ctr, Tensor.full((n,), 0, dtype=dtypes.uint32, device=device), Tensor._seed & 0xFFFFFFFF,
                         (Tensor._seed >> 32) ^ 0x1BD11BDA)

  @staticmethod
  def rand(*shape: int, device: str | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """Uniform in [0, 1)."""
    _check_kwargs("rand", kwargs, ("requires_grad",))
    shape = _check_shape(argfix(*shape))
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt): raise InvalidArgumentError(f"rand draws floats, got dtype={dt}: use a float dtype (randint draws ints)")
    n = prod(shape)
    if n == 0: return Tensor.empty(*shape, device=device, dtype=dt, **kwargs)
    bits = Tensor._random_bits(n, device)
    # as many random bits as dt holds exactly (24 for float32; 11 for float16, 8 for bfloat16): more would round the largest
    # draws up to 1.0 in the cast
    m = min(24, dtypes.finfo(dt)[1] + 1)
    u = (bits >> (32 - m)).cast(dtypes.float32) * (1.0 / (1 << m))
    return u.cast(dt).reshape(shape).requires_grad_(kwargs.get("requires_grad"))

  @staticmethod
  def randn(*shape: int, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """Standard normal, by the Box-Muller transform."""
    _check_kwargs("randn", kwargs, ("device", "requires_grad"))
    shape = argfix(*shape)
    u = Tensor.rand(2, *shape, device=kwargs.get("device"))
    z = (u[0].mul(2 * math.pi).cos()) * ((1 - u[1]).log() * -2).sqrt()
    return z.cast(to_dtype(dtype) if dtype is not None else dtypes.default_float).requires_grad_(kwargs.get("requires_grad"))

  @staticmethod
  def normal(*shape: int, mean: float = 0.0, std: float = 1.0, **kwargs: Any) -> Tensor:
    _check_kwargs("normal", kwargs)
    rg = kwargs.pop("requires_grad", None)
    return (std * Tensor.randn(*shape, **kwargs) + mean).requires_grad_(rg)

  @staticmethod
  def randint(*shape: int, low: int = 0, high: int = 10, device: str | None = None, dtype: DType | str | None = None) -> Tensor:
    """Uniform integers in [low, high)."""
    if not (isinstance(low, int) and isinstance(high, int)): raise TypeError(f"randint's low={low!r} and high={high!r} must be ints")
    if high <= low: raise InvalidArgumentError(f"randint needs low < high, got low={low}, high={high}")
    dt = to_dtype(dtype) if dtype is not None else dtypes.int32
    return (Tensor.rand(*shape, device=device) * (high - low) + low).floor().cast(dt)

  @staticmethod
  def linspace(start: float, stop: float, steps: int, **kwargs: Any) -> Tensor:
    """`steps` evenly spaced values from start to stop, both included."""
    _check_kwargs("linspace", kwargs)
    if steps < 0: raise InvalidArgumentError(f"linspace needs steps >= 0, got {steps}")
    dt = to_dtype(kwargs.pop("dtype", None) or dtypes.default_float)
    if dt == dtypes.bool: raise InvalidDTypeError("linspace with dtype=bool is not supported (torch and tinygrad raise too): use a numeric dtype and compare")
    if steps == 1: return Tensor.full((1,), start, dtype=dt, **kwargs)
    idx = Tensor.arange(steps, dtype=dtypes.float32, device=kwargs.get("device"))
    return (start + idx * ((stop - start) / max(steps - 1, 1))).cast(dt).requires_grad_(kwargs.get("requires_grad"))

  def rand_like(self, **kwargs: Any) -> Tensor:
    """Uniform in [0, 1) of self's shape, device and dtype (a float dtype: an int tensor needs dtype=)."""
    return Tensor.rand(*self.shape, **{"device": self.device, "dtype": self.dtype, **kwargs})

  def randn_like(self, **kwargs: Any) -> Tensor:
    return Tensor.randn(*self.shape, **{"device": self.device, "dtype": self.dtype, **kwargs})

  def size(self, dim: int | None = None) -> Any:
    """The shape (like torch's .size()), or one dim of it."""
    return self.shape if dim is None else self.shape[self._axis(dim)]

  @staticmethod
  def uniform(*shape: int, low: float = 0.0, high: float = 1.0, **kwargs: Any) -> Tensor:
    _check_kwargs("uniform", kwargs)
    rg, dt = kwargs.pop("requires_grad", None), kwargs.pop("dtype", None)
    if dt is not None and not dtypes.is_float(dt := to_dtype(dt)):  # an int dtype: drawn as floats, then truncated (as tinygrad)
      return (Tensor.rand(*shape, **kwargs) * (high - low) + low).cast(dt).requires_grad_(rg)
    return (Tensor.rand(*shape, dtype=dt, **kwargs) * (high - low) + low).requires_grad_(rg)

  @staticmethod
  def scaled_uniform(*shape: int, **kwargs: Any) -> Tensor:
    _check_kwargs("scaled_uniform", kwargs)
    rg = kwargs.pop("requires_grad", None)
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(argfix(*shape)) ** -0.5).requires_grad_(rg)

  @staticmethod
  def kaiming_normal(*shape: int, a: float = 0.01, **kwargs: Any) -> Tensor:
    """Normal with std sqrt(2 / (1 + a^2)) / sqrt(fan_in) (torch.nn.init.kaiming_normal_, tinygrad's kaiming_normal)."""
    _check_kwargs("kaiming_normal", kwargs)
    rg = kwargs.pop("requires_grad", None)
    shape = argfix(*shape)
    std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
    return Tensor.normal(*shape, mean=0.0, std=std, **kwargs).requires_grad_(rg)

  @staticmethod
  def glorot_uniform(*shape: int, **kwargs: Any) -> Tensor:
    """Uniform in +-sqrt(6 / (fan_in + fan_out)) (tinygrad's glorot_uniform)."""
    _check_kwargs("glorot_uniform", kwargs)
    rg = kwargs.pop("requires_grad", None)
    shape = argfix(*shape)
    bound = math.sqrt(6 / (shape[0] + prod(shape[1:])))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs).requires_grad_(rg)

  def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """num_samples int32 indices drawn with probabilities proportional to self (1-d or 2-d; torch.multinomial)."""
    if not 1 <= self.ndim <= 2 or num_samples < 1: raise InvalidArgumentError(f"multinomial needs a 1-d or 2-d tensor and num_samples >= 1, got {self.shape}, {num_samples}")
    w = self.unsqueeze(0) if self.ndim == 1 else self
    if not replacement and num_samples > 1:
      if num_samples > w.shape[1]: raise InvalidArgumentError(f"multinomial without replacement can't draw {num_samples} of {w.shape[1]} categories")
      # distinct draws: each category's key log(u)/w (an exponential race: the largest keys are a draw without replacement, a
      # zero weight's key is -inf and comes last)
      keys = Tensor.rand(*w.shape, device=self.device).log() / w.float()
      out = keys.topk(num_samples, dim=1)[1].cast(dtypes.int32)
      return out[0] if self.ndim == 1 else out
    cdf = (cw := w.float().cumsum(1)) / cw[:, -1:]
    u = Tensor.rand(w.shape[0], num_samples, 1, device=self.device)
    out = (cdf.unsqueeze(1) <= u).sum(2, dtype=dtypes.int32)
    return out[0] if self.ndim == 1 else out

  @staticmethod
  def kaiming_uniform(*shape: int, a: float = 0.01, **kwargs: Any) -> Tensor:
    _check_kwargs("kaiming_uniform", kwargs)
    rg = kwargs.pop("requires_grad", None)
    shape = argfix(*shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs).requires_grad_(rg)

  def requires_grad_(self, requires_grad: bool | None = True) -> Tensor:
    if requires_grad and not self.requires_grad: self.uop = _parameter_node(self.uop)
    self.requires_grad = requires_grad
    return self

  def is_param_(self, is_param: bool = True) -> Tensor:
    """tinygrad's is_param_: mark (or unmark) a trainable parameter; here that is requires_grad_."""
    return self.requires_grad_(is_param)

  @property
  def is_param(self) -> bool: return self.requires_grad is not False

  def kernelize(self, *others: Tensor) -> Tensor:
    """Older tinygrad's kernelize(): kernels are formed when the tensor is scheduled (realize/schedule), so this returns self."""
    return self

  def contiguous_backward(self) -> Tensor:
    """tinygrad's contiguous_backward: the same values; our scheduler decides where the gradient is materialized."""
    return self

  @staticmethod
  def randperm(n: int, device: str | None = None, dtype: DType | str = dtypes.int32, **kwargs: Any) -> Tensor:
    """A random permutation of 0..n-1 (torch.randperm, tinygrad's Tensor.randperm): the argsort of n uniform keys."""
    _check_kwargs("randperm", kwargs, ("requires_grad",))
    rg = kwargs.pop("requires_grad", None)
    if n < 0: raise ValueError(f"randperm needs n >= 0, got {n}")
    if n == 0: return Tensor.zeros(0, device=device, dtype=dtype, requires_grad=rg)
    return Tensor.rand(n, device=device, **kwargs).argsort().cast(to_dtype(dtype)).requires_grad_(rg)

  @staticmethod
  def train(mode: bool = True) -> _TrainMode:
    """Set Tensor.training inside a `with` block (or as a decorator), as in tinygrad's `with Tensor.train():`."""
    return _TrainMode(mode)

  @staticmethod
  def test() -> _TrainMode:
    """`with Tensor.test():` runs with Tensor.training False."""
    return _TrainMode(False)

  # ---- autograd
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    """d(self)/d(target) for each target, as new lazy tensors."""
    if gradient is None and self.numel() != 1: raise ValueError(f"gradient of a non-scalar {self.shape} tensor needs gradient=")
    if not all(dtypes.is_float(t.dtype) for t in (self, *targets)):  # tinygrad raises the same; torch won't let an int require grad
      raise RuntimeError(f"only float tensors have gradients: d({self.dtype!r}) / d({', '.join(repr(t.dtype) for t in targets)})")
    seed = gradient.uop if gradient is not None else Tensor.ones(*self.shape, dtype=self.dtype, device=self.device).uop
    root = _autograd_graph(self.uop)
    # a target that is such an intermediate is its earlier graph's node there
    keys = [t.uop if root is self.uop or t.uop not in _grad_origin else _autograd_graph(t.uop) for t in targets]
    grads = compute_gradient(root, seed, set(keys))
    out = []
    for t, key in zip(targets, keys):
      g = grads.get(key)
      # a target the result doesn't depend on (differentiably) gets zeros, as in tinygrad
      out.append(Tensor(g, device=t.device) if g is not None else Tensor.zeros(*t.shape, dtype=t.dtype, device=t.device))
    return out

  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Accumulate d(self)/dt into t.grad for every float tensor t in the graph that isn't marked requires_grad=False: as in
    tinygrad 0.14 (which has no requires_grad), inputs and intermediates the program still holds get theirs too, not only the
    parameters an optimizer marked (a model's weight gradients read without an optimizer). The gradients are lazy: only those
    the program uses are computed."""
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"only float tensors have gradients: backward() of a {self.dtype!r} tensor")
    in_graph = set(_autograd_graph(self.uop).toposort(gate=lambda u: u.op is not Ops.DETACH))
    # nodes of the graph realized since it was built: the tensors now holding their buffers take their gradients (for an
    # assign, that of the assigned value, not of the buffer's old value that the assign read)
    became: dict[UOp, list[UOp]] = {}
    for node in in_graph:
      if (view := _became.get(node)) is not None: became.setdefault(view, []).append(node)
    params = [t for t in list(_all_tensors) if t.requires_grad is not False and dtypes.is_float(t.dtype)
              and (t.uop in in_graph or t.uop in became or (t.uop in _grad_origin and _autograd_graph(t.uop) in in_graph))]
    if not params: raise RuntimeError("backward() found no float tensor in the graph without requires_grad=False")
    seen: dict[UOp, Tensor] = {}
    for t in params: seen.setdefault(t.uop, t)
    targets = [(u, n) for u in seen for n in became.get(u, [u])]
    grads = self.gradient(*(seen[u] if n is u else Tensor(n, device=seen[u].device) for u, n in targets), gradient=gradient)
    summed: dict[UOp, Tensor] = {}
    for (u, _), g in zip(targets, grads): summed[u] = g if u not in summed else summed[u] + g
    for uop, g in summed.items():
      for t in params:
        if t.uop is not uop: continue
        # a second backward adds into the same .grad tensor (torch, tinygrad: `g = x.grad` sees the sum)
        if t.grad is None: t.grad = g
        else: t.grad.uop = (t.grad + g).uop
    return self


class _TrainMode(contextlib.ContextDecorator):
  def __init__(self, mode: bool = True): self.mode = mode
  def __enter__(self) -> None: self.prev, Tensor.training = Tensor.training, self.mode
  def __exit__(self, *exc: object) -> None: Tensor.training = self.prev


def _threefry2x32(x0: Tensor, x1: Tensor, k0: int, k1: int) -> Tensor:
  """Threefry-2x32 with 20 rounds (Salmon et al. 2011), on uint32 tensors: the counter-based generator."""
  rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
  ks = (k0 & 0xFFFFFFFF, k1 & 0xFFFFFFFF, (k0 ^ k1 ^ 0x1BD11BDA) & 0xFFFFFFFF)
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for i in range(5):
    for r in rotations[i % 2]:
      x0 = x0 + x1
      x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
    x0, x1 = x0 + ks[(i + 1) % 3], x1 + ((ks[(i + 2) % 3] + i + 1) & 0xFFFFFFFF)
  return x0


_contiguous_ids = itertools.count()


def _parameter_node(u: UOp) -> UOp:
  """A parameter's graph: a graph without a buffer (Tensor.zeros(3), arange, a scalar) is one node with every identical one
  (hash-consing), so it gets a node of its own, or it would share its gradient with them (two zero-initialized biases: the
  sum of both)."""
  if u.op is Ops.CONTIGUOUS or has_multi(u) or any(x.op is Ops.BUFFER for x in u.toposort()): return u
  return _unique_contiguous(u)


def _unique_contiguous(u: UOp) -> UOp:
  """CONTIGUOUS that never merges with another by hash-consing: its own buffer, even for an identical graph."""
  return UOp(Ops.CONTIGUOUS, u.dtype, (u,), next(_contiguous_ids))


def _from_bytes(raw: bytes, shape: tuple[int, ...], dtype: DType, device: str | tuple[str, ...]) -> UOp:
  if isinstance(device, tuple): return replicate(_from_bytes(raw, shape, dtype, device[0]), device)  # data for several devices
  if is_storage_device(device):  # a file is written only when the tensor is realized (as x.to("DISK:path") would)
    return UOp(Ops.COPY, dtype, (_from_bytes(raw, shape, dtype, "PYTHON"), UOp(Ops.DEVICE, arg=device)))
  buf = new_buffer(device, prod(shape), dtype)
  if raw: buffer_of(buf).copyin(raw)
  return buffer_view(buf, shape)


def _check_kwargs(fn: str, kwargs: dict[str, Any], allowed: tuple[str, ...] = ("device", "dtype", "requires_grad")) -> None:
  """Factories take their options as **kwargs: a misspelled or unknown one is a TypeError (as in tinygrad), not ignored."""
  if bad := [k for k in kwargs if k not in allowed]:
    raise TypeError(f"Tensor.{fn}() got an unexpected keyword argument {bad[0]!r}: its options are device=, dtype= and requires_grad=")


def _check_shape(shape: tuple) -> tuple:
  """A shape to allocate: ints (or symbolic sizes) >= 0. A negative size is an error (torch's message), not a buffer of -1."""
  if (bad := next((s for s in shape if not isinstance(s, UOp) and (not isinstance(s, int) or s < 0)), None)) is not None:
    raise InvalidArgumentError(f"Trying to create tensor with negative dimension {bad}: {list(shape)}" if isinstance(bad, int) else
                       f"a tensor's dimensions must be ints, got {bad!r} in {shape}")
  return shape


def _is_numpy(x: Any) -> bool: return type(x).__module__ == "numpy" and type(x).__name__ == "ndarray"


def _unflatten(flat: list[Any], shape: tuple[int, ...]) -> Any:
  if not shape: return flat[0]
  if 0 in shape[1:]: return [_unflatten([], shape[1:]) for _ in range(shape[0])]
  # innermost dim first, one slice per row: a call per row, not a recursive call per element (tolist of 1M elements: ~0.1 s)
  for d in reversed(shape[1:]): flat = [flat[i:i + d] for i in range(0, len(flat), d)]
  return flat


def _argsort(x: Iterable[int]) -> list[int]: return argsort(list(x))
