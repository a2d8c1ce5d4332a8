"""Tensor: a lazy n-dimensional array. Operations build a UOp graph; `realize()` schedules it into kernels,
compiles them for the device and runs them."""
from __future__ import annotations

import math
import struct
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from tinygrad.device.registry import Device
from tinygrad.dtype import ConstType, DType, dtypes, least_upper_dtype, least_upper_float, to_dtype
from tinygrad.engine.realize import buffer_of, run_schedule
from tinygrad.gradient import compute_gradient
from tinygrad.helpers import all_int, argfix, argsort, make_tuple, prod
from tinygrad.schedule.kernelize import buffer_view, create_schedule, is_buffer_view, is_contiguous_buffer, new_buffer
from tinygrad.uop.ops import GroupOp, Ops, UOp

_all_tensors: weakref.WeakSet[Tensor] = weakref.WeakSet()


def _broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  ndim = max(len(s) for s in shapes)
  padded = [(1,) * (ndim - len(s)) + s for s in shapes]
  out = []
  for dims in zip(*padded):
    sizes = {d for d in dims if d != 1}
    if len(sizes) > 1:
      raise ValueError(f"shapes {' and '.join(str(s) for s in shapes)} can't be broadcast together: "
                       f"sizes {sorted(sizes)} meet at one axis (each axis must match or be 1)")
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)


def _data_to_bytes(data: Any, dtype: DType) -> tuple[bytes, tuple[int, ...]]:
  """Python/numpy data -> raw bytes in `dtype` and its shape."""
  try:
    import numpy as np
  except ImportError:  # pragma: no cover - numpy is a dependency, but keep lists working without it
    np = None
  if np is not None and isinstance(data, np.ndarray):
    return _numpy_to_bytes(data, dtype), tuple(data.shape)
  shape = _list_shape(data)
  flat = _flatten(data)
  from tinygrad.uop.alu import cast_scalar, to_bits
  if dtype.fmt is not None:
    return struct.pack(f"{len(flat)}{dtype.fmt}", *(cast_scalar(x, dtype) for x in flat)), shape
  size_fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[dtype.itemsize]
  return struct.pack(f"{len(flat)}{size_fmt}", *(to_bits(x, dtype) for x in flat)), shape


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
  inner = [_list_shape(x) for x in data]
  if any(s != inner[0] for s in inner): raise ValueError(f"ragged nested list: sub-lists have shapes {sorted(set(inner))}")
  return (len(data), *inner[0])


def _flatten(data: Any) -> list[Any]:
  if not isinstance(data, (list, tuple)): return [data]
  return [y for x in data for y in _flatten(x)]


def _numpy_dtype_of(arr: Any) -> DType:
  import numpy as np
  mapping = {np.bool_: dtypes.bool, np.int8: dtypes.int8, np.uint8: dtypes.uint8, np.int16: dtypes.int16, np.uint16: dtypes.uint16,
             np.int32: dtypes.int32, np.uint32: dtypes.uint32, np.int64: dtypes.int64, np.uint64: dtypes.uint64,
             np.float16: dtypes.float16, np.float32: dtypes.float32, np.float64: dtypes.float64}
  if arr.dtype.type not in mapping: raise TypeError(f"numpy dtype {arr.dtype} has no tinygrad equivalent")
  return mapping[arr.dtype.type]


class Tensor:
  """A lazy tensor. `Tensor([1, 2, 3])`, `Tensor(np_array)`, `Tensor.rand(2, 3)`; `.numpy()` computes it."""
  __slots__ = ("_uop", "requires_grad", "grad", "__weakref__")
  training: ClassVar[bool] = False
  _seed: ClassVar[int] = 0
  _rng_counter: ClassVar[int] = 0

  def __init__(self, data: Any, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None):
    if dtype is not None: dtype = to_dtype(dtype)
    device = Device.canonicalize(device)
    self.grad: Tensor | None = None
    self.requires_grad: bool | None = requires_grad
    if isinstance(data, UOp): self._uop = data
    elif isinstance(data, Tensor): self._uop = data.uop
    elif isinstance(data, (bool, int, float)):
      self._uop = UOp.const(dtype or dtypes.from_py(data), data, (UOp(Ops.DEVICE, arg=device),))
    elif isinstance(data, (bytes, bytearray, memoryview)):
      self._uop = _from_bytes(bytes(data), (len(data) // (dtype or dtypes.uint8).itemsize,), dtype or dtypes.uint8, device)
    else:
      if _is_numpy(data):
        dtype = dtype or _numpy_dtype_of(data)
      else:
        if not isinstance(data, (list, tuple)): raise TypeError(f"can't make a Tensor from {type(data).__name__}")
        dtype = dtype or (dtypes.from_py(_flatten(data)) if _flatten(data) else dtypes.default_float)
      raw, shape = _data_to_bytes(data, dtype)
      self._uop = _from_bytes(raw, shape, dtype, device)
    _all_tensors.add(self)

  # ---- the graph behind the tensor
  @property
  def uop(self) -> UOp: return self._uop

  @uop.setter
  def uop(self, value: UOp) -> None: self._uop = value

  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return self.uop.device
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return prod(self.shape)
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.element_size()
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __repr__(self) -> str: return f"<Tensor {self.shape} {self.dtype!r} on {self.device}{' with grad' if self.grad is not None else ''}>"
  def __hash__(self) -> int: return id(self)
  def __bool__(self) -> bool: raise TypeError("the truth value of a Tensor is ambiguous: use .item(), .any() or .all()")

  # ---- running
  @staticmethod
  def realize_all(*tensors: Tensor) -> None:
    roots = [t.uop for t in tensors if not is_buffer_view(t.uop)]
    if not roots: return
    items, becomes = create_schedule(roots)
    run_schedule(items)
    # every live tensor that was one of the realized nodes now is a view of its buffer. (Nodes are not
    # remembered beyond this: after an assign the same graph would read new values.)
    for t in list(_all_tensors):
      if (done := becomes.get(t._uop)) is not None: t._uop = done

  def realize(self, *others: Tensor) -> Tensor:
    Tensor.realize_all(self, *others)
    return self

  def schedule(self, *others: Tensor) -> list:
    """The kernels and copies that realizing these tensors would run (not run)."""
    roots = [t.uop for t in (self, *others) if not is_buffer_view(t.uop)]
    return create_schedule(roots)[0] if roots else []

  def _contiguous_buffer(self) -> Any:
    t = self if is_contiguous_buffer(self.uop) else self.contiguous()
    t.realize()
    return buffer_of(t.uop.base)

  def data(self) -> memoryview:
    """The elements as a flat memoryview (typed when Python has a format for the dtype)."""
    buf = self._contiguous_buffer()
    mv = memoryview(bytearray(buf.nbytes))
    buf.copyout(mv)
    return mv.cast(self.dtype.fmt) if self.dtype.fmt is not None and self.numel() > 0 else mv

  def numpy(self) -> Any:
    import numpy as np
    raw = bytes(self.data().cast("B"))
    if self.dtype.fmt is not None:
      return np.frombuffer(raw, dtype=np.bool_ if self.dtype == dtypes.bool else np.dtype(self.dtype.fmt)).reshape(self.shape).copy()
    from tinygrad.uop.alu import from_bits
    bits = np.frombuffer(raw, dtype={1: np.uint8, 2: np.uint16}[self.dtype.itemsize])
    if self.dtype == dtypes.bfloat16: return (bits.astype(np.uint32) << 16).view(np.float32).reshape(self.shape)
    return np.array([from_bits(int(b), self.dtype) for b in bits], dtype=np.float32).reshape(self.shape)

  def tolist(self) -> Any:
    from tinygrad.uop.alu import from_bits
    mv = self.data()
    if self.dtype.fmt is not None: flat = list(mv) if self.numel() > 0 else []
    else:
      raw = bytes(mv.cast("B"))
      flat = [from_bits(int.from_bytes(raw[i:i + self.dtype.itemsize], "little"), self.dtype) for i in range(0, len(raw), self.dtype.itemsize)]
    if self.dtype == dtypes.bool: flat = [bool(x) for x in flat]
    return _unflatten(flat, self.shape)

  def item(self) -> ConstType:
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.reshape(()).tolist()

  def contiguous(self) -> Tensor: return Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)), requires_grad=self.requires_grad)
  def detach(self) -> Tensor: return Tensor(UOp(Ops.DETACH, self.dtype, (self.uop,)), requires_grad=False)

  def to(self, device: str | None) -> Tensor:
    device = Device.canonicalize(device)
    if device == self.device: return self
    out = Tensor(UOp(Ops.COPY, self.dtype, (self.uop, UOp(Ops.DEVICE, arg=device))), requires_grad=self.requires_grad)
    if self.grad is not None: out.grad = self.grad.to(device)
    return out

  def clone(self) -> Tensor: return self.contiguous()

  def assign(self, x: Tensor | ConstType) -> Tensor:
    """Write x into this tensor's buffer (in place, like tinygrad's assign)."""
    x = x if isinstance(x, Tensor) else Tensor.full(self.shape, x, dtype=self.dtype, device=self.device)
    if x.shape != self.shape: raise ValueError(f"assign shape mismatch: target {self.shape}, value {x.shape}")
    if x.dtype != self.dtype: raise TypeError(f"assign dtype mismatch: target {self.dtype!r}, value {x.dtype!r}; cast the value first")
    if x.device != self.device: x = x.to(self.device)
    if not is_contiguous_buffer(self.uop): self.realize()
    if not is_contiguous_buffer(self.uop):
      self.uop = x.uop
      return self
    self.uop = UOp(Ops.ASSIGN, self.dtype, (self.uop, x.uop))
    return self

  def replace(self, x: Tensor) -> Tensor:
    if x.shape != self.shape: raise ValueError(f"replace shape mismatch: {self.shape} vs {x.shape}")
    self.uop = x.uop
    return self

  # ---- creation
  @staticmethod
  def empty(*shape: int, device: str | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    shape = argfix(*shape)
    buf = new_buffer(Device.canonicalize(device), prod(shape), dt)
    return Tensor(buffer_view(buf, tuple(shape)), **kwargs)

  @staticmethod
  def full(shape: tuple[int, ...] | int, fill_value: ConstType, device: str | None = None, dtype: DType | str | None = None,
           **kwargs: Any) -> Tensor:
    shape = make_tuple(shape, 1) if isinstance(shape, int) else tuple(shape)
    if not all_int(shape) or any(s < 0 for s in shape): raise ValueError(f"shape must be non-negative ints, got {shape}")
    dt = to_dtype(dtype) if dtype is not None else dtypes.from_py(fill_value)
    t = Tensor(fill_value, device=device, dtype=dt, **kwargs)
    return t.reshape((1,) * len(shape)).expand(shape) if shape else t

  @staticmethod
  def zeros(*shape: int, **kwargs: Any) -> Tensor: return Tensor.full(argfix(*shape), 0.0, **kwargs)
  @staticmethod
  def ones(*shape: int, **kwargs: Any) -> Tensor: return Tensor.full(argfix(*shape), 1.0, **kwargs)
  def full_like(self, fill_value: ConstType, **kwargs: Any) -> Tensor:
    return Tensor.full(self.shape, fill_value, **{"dtype": self.dtype, "device": self.device, **kwargs})
  def zeros_like(self, **kwargs: Any) -> Tensor: return self.full_like(0, **kwargs)
  def ones_like(self, **kwargs: Any) -> Tensor: return self.full_like(1, **kwargs)

  @staticmethod
  def arange(start: int | float, stop: int | float | None = None, step: int | float = 1, **kwargs: Any) -> Tensor:
    if stop is None: start, stop = 0, start
    dtype = kwargs.pop("dtype", None) or dtypes.from_py([start, stop, step])
    dtype = to_dtype(dtype)
    n = max(0, math.ceil((stop - start) / step))
    if n == 0: return Tensor.empty(0, dtype=dtype, **kwargs)
    idx = Tensor._index(n, kwargs.get("device"))
    return (idx.cast(dtype) * step + start).cast(dtype).requires_grad_(kwargs.get("requires_grad"))

  @staticmethod
  def _index(n: int, device: str | None) -> Tensor:
    """0..n-1 as int32: the IOTA node, which kernels turn into their loop index."""
    return Tensor(UOp(Ops.IOTA, dtypes.int32, (UOp(Ops.DEVICE, arg=Device.canonicalize(device)),), n))

  @staticmethod
  def eye(n: int, m: int | None = None, **kwargs: Any) -> Tensor:
    m = n if m is None else m
    return (Tensor.arange(n, dtype=dtypes.int32, device=kwargs.get("device")).reshape(n, 1) ==
            Tensor.arange(m, dtype=dtypes.int32, device=kwargs.get("device")).reshape(1, m)).cast(kwargs.get("dtype") or dtypes.default_float)

  # ---- random numbers: counter-based (threefry 2x32), so the same seed gives the same values on every device
  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    Tensor._seed, Tensor._rng_counter = seed, 0

  @staticmethod
  def _random_bits(n: int, device: str | None) -> Tensor:
    counter = Tensor._rng_counter
    Tensor._rng_counter += n
    ctr = Tensor._index(n, device).cast(dtypes.uint32) + (counter & 0xFFFFFFFF)
    return _threefry2x32(ctr, Tensor.full((n,), (counter >> 32) & 0xFFFFFFFF, dtype=dtypes.uint32, device=device),
                         Tensor._seed & 0xFFFFFFFF, (Tensor._seed >> 32) ^ 0x1BD11BDA)

  @staticmethod
  def rand(*shape: int, device: str | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """Uniform in [0, 1)."""
    shape = argfix(*shape)
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    n = prod(shape)
    if n == 0: return Tensor.empty(*shape, device=device, dtype=dt, **kwargs)
    bits = Tensor._random_bits(n, device)
    u = (bits >> 8).cast(dtypes.float32) * (1.0 / (1 << 24))
    return u.cast(dt).reshape(shape).requires_grad_(kwargs.get("requires_grad"))

  @staticmethod
  def randn(*shape: int, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """Standard normal, by the Box-Muller transform."""
    shape = argfix(*shape)
    u = Tensor.rand(2, *shape, device=kwargs.get("device"))
    z = (u[0].mul(2 * math.pi).cos()) * ((1 - u[1]).log() * -2).sqrt()
    return z.cast(to_dtype(dtype) if dtype is not None else dtypes.default_float).requires_grad_(kwargs.get("requires_grad"))

  @staticmethod
  def uniform(*shape: int, low: float = 0.0, high: float = 1.0, **kwargs: Any) -> Tensor:
    rg = kwargs.pop("requires_grad", None)
    return (Tensor.rand(*shape, **kwargs) * (high - low) + low).requires_grad_(rg)

  @staticmethod
  def scaled_uniform(*shape: int, **kwargs: Any) -> Tensor:
    rg = kwargs.pop("requires_grad", None)
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(argfix(*shape)) ** -0.5).requires_grad_(rg)

  @staticmethod
  def kaiming_uniform(*shape: int, a: float = 0.01, **kwargs: Any) -> Tensor:
    rg = kwargs.pop("requires_grad", None)
    shape = argfix(*shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs).requires_grad_(rg)

  def requires_grad_(self, requires_grad: bool | None = True) -> Tensor:
    self.requires_grad = requires_grad
    return self

  # ---- movement (views: never copy)
  def _view(self, op: Ops, arg: Any) -> Tensor: return Tensor(UOp(op, self.dtype, (self.uop,), arg), requires_grad=self.requires_grad)

  def reshape(self, shape: int | Sequence[int], *args: int) -> Tensor:
    new = list(argfix(shape, *args))
    if new.count(-1) > 1: raise ValueError(f"only one -1 allowed in reshape, got {tuple(new)}")
    if -1 in new:
      known = prod(s for s in new if s != -1)
      if known == 0 or self.numel() % known: raise ValueError(f"can't reshape {self.shape} to {tuple(new)}")
      new[new.index(-1)] = self.numel() // known
    if any(s < 0 for s in new): raise ValueError(f"reshape sizes must be >= 0 (or one -1), got {tuple(new)}")
    if prod(new) != self.numel(): raise ValueError(f"can't reshape {self.shape} ({self.numel()} elements) to {tuple(new)} ({prod(new)} elements)")
    return self if tuple(new) == self.shape else self._view(Ops.RESHAPE, tuple(new))

  def view(self, *shape: int) -> Tensor: return self.reshape(argfix(*shape))

  def permute(self, order: int | Sequence[int], *args: int) -> Tensor:
    axes = tuple(self._axis(a) for a in argfix(order, *args))
    if sorted(axes) != list(range(self.ndim)): raise ValueError(f"permute needs each of the {self.ndim} axes once, got {axes}")
    return self if axes == tuple(range(self.ndim)) else self._view(Ops.PERMUTE, axes)

  def expand(self, shape: int | Sequence[int], *args: int) -> Tensor:
    new = argfix(shape, *args)
    if len(new) < self.ndim: raise ValueError(f"can't expand {self.shape} to fewer dims {new}")
    base = (1,) * (len(new) - self.ndim) + self.shape
    target = tuple(b if n == -1 else n for b, n in zip(base, new))
    for b, n in zip(base, target):
      if b != n and b != 1: raise ValueError(f"can't expand {self.shape} to {tuple(new)}: only size-1 axes can grow")
    t = self.reshape(base) if base != self.shape else self
    return t if target == t.shape else t._view(Ops.EXPAND, target)

  def pad(self, padding: Sequence[tuple[int, int] | None] | Sequence[int], value: float = 0.0) -> Tensor:
    """Pad with a constant. `padding` per axis as (before, after) pairs, or torch-style flat ints from the last axis."""
    if padding and isinstance(padding[0], int):
      flat = list(padding)
      if len(flat) % 2: raise ValueError("flat padding needs pairs of ints")
      pairs = [(0, 0)] * (self.ndim - len(flat) // 2) + [(flat[i], flat[i + 1]) for i in range(len(flat) - 2, -1, -2)]
    else: pairs = [p if p is not None else (0, 0) for p in padding]  # type: ignore[misc]
    if len(pairs) != self.ndim: raise ValueError(f"padding has {len(pairs)} axes, tensor has {self.ndim}")
    if all(p == (0, 0) for p in pairs): return self
    if any(b < 0 or a < 0 for b, a in pairs):  # negative padding shrinks
      t = self.shrink(tuple((max(0, -b), s - max(0, -a)) for (b, a), s in zip(pairs, self.shape)))
      return t.pad(tuple((max(0, b), max(0, a)) for b, a in pairs), value)
    out = self._view(Ops.PAD, tuple((int(b), int(a)) for b, a in pairs))
    if value == 0: return out
    mask = Tensor.ones(*self.shape, dtype=dtypes.bool, device=self.device)._view(Ops.PAD, tuple(pairs))
    return mask.where(out, value)

  def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
    bounds = tuple(a if a is not None else (0, s) for a, s in zip(arg, self.shape))
    if len(bounds) != self.ndim: raise ValueError(f"shrink has {len(bounds)} axes, tensor has {self.ndim}")
    for (b, e), s in zip(bounds, self.shape):
      if not 0 <= b <= e <= s: raise ValueError(f"shrink {bounds} is out of bounds for shape {self.shape}")
    return self if all(b == (0, s) for b, s in zip(bounds, self.shape)) else self._view(Ops.SHRINK, bounds)

  def flip(self, axis: int | Sequence[int], *args: int) -> Tensor:
    axes = {self._axis(a) for a in argfix(axis, *args)}
    return self._view(Ops.FLIP, tuple(i in axes for i in range(self.ndim))) if axes else self

  def _axis(self, axis: int) -> int:
    n = max(self.ndim, 1)
    if not -n <= axis < n: raise IndexError(f"axis {axis} is out of range for a tensor with {self.ndim} dims")
    return axis % n

  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    order = list(range(self.ndim))
    a, b = self._axis(dim0), self._axis(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)

  @property
  def T(self) -> Tensor: return self.permute(tuple(reversed(range(self.ndim))))

  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._axis(start_dim), self._axis(end_dim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  def unsqueeze(self, dim: int) -> Tensor:
    dim = dim % (self.ndim + 1)
    return self.reshape(self.shape[:dim] + (1,) + self.shape[dim:])

  def squeeze(self, dim: int | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dim = self._axis(dim)
    return self if self.shape[dim] != 1 else self.reshape(self.shape[:dim] + self.shape[dim + 1:])

  def __getitem__(self, index: Any) -> Tensor:
    """Basic indexing: ints, slices (with steps), None and Ellipsis."""
    idx = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for i in idx if i is Ellipsis) > 1: raise IndexError("an index can only have one Ellipsis")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise IndexError(f"too many indices ({n_real}) for a tensor with {self.ndim} dims")
    if Ellipsis in idx:
      at = idx.index(Ellipsis)
      idx = idx[:at] + [slice(None)] * (self.ndim - n_real) + idx[at + 1:]
    idx += [slice(None)] * (self.ndim - sum(1 for i in idx if i is not None))
    t, axis, new_shape_ops = self, 0, []
    shrink, flips, steps, squeeze_axes = [], [], [], []
    for i in idx:
      if i is None:
        new_shape_ops.append(("new", len(shrink)))
        continue
      size = self.shape[axis]
      if isinstance(i, bool) or not isinstance(i, (int, slice)): raise TypeError(f"unsupported index {i!r}: use ints, slices, None or ...")
      if isinstance(i, int):
        if not -size <= i < size: raise IndexError(f"index {i} is out of bounds for axis {axis} with size {size}")
        i %= size
        shrink.append((i, i + 1))
        flips.append(False)
        steps.append(1)
        squeeze_axes.append(len(shrink) - 1)
      else:
        start, stop, step = i.indices(size)
        if step > 0: lo, hi = start, max(start, stop)
        else: lo, hi = max(stop + 1, 0) if stop < start else start + 1, start + 1
        if step < 0 and stop >= start: lo = hi = 0
        shrink.append((lo, hi))
        flips.append(step < 0)
        steps.append(abs(step))
      axis += 1
    t = t.shrink(tuple(shrink))
    if any(flips): t = t.flip(tuple(a for a, f in enumerate(flips) if f))
    if any(s != 1 for s in steps): t = t._strided(steps)
    # drop int-indexed axes and insert None axes
    shape, out = list(t.shape), []
    none_positions = [p for kind, p in new_shape_ops]
    for a in range(len(shape) + 1):
      out.extend([1] * none_positions.count(a))
      if a < len(shape) and a not in squeeze_axes: out.append(shape[a])
    return t.reshape(tuple(out))

  def _strided(self, steps: list[int]) -> Tensor:
    """Every steps[i]-th element along each axis: pad up to a multiple, reshape, take index 0."""
    t = self
    for axis, step in enumerate(steps):
      if step == 1: continue
      size = t.shape[axis]
      n = -(-size // step)
      pads = [(0, 0)] * t.ndim
      pads[axis] = (0, n * step - size)
      t = t.pad(pads)
      t = t.reshape(t.shape[:axis] + (n, step) + t.shape[axis + 1:])
      t = t.shrink(tuple((0, 1) if a == axis + 1 else None for a in range(t.ndim)))  # type: ignore[misc]
      t = t.reshape(t.shape[:axis + 1] + t.shape[axis + 2:])
    return t

  # ---- elementwise
  def _broadcasted(self, other: Tensor | ConstType, reverse: bool = False) -> tuple[Tensor, Tensor]:
    x: Tensor = self
    if isinstance(other, Tensor):
      y = other
      if y.device != x.device: raise ValueError(f"tensors are on different devices: {x.device} and {y.device}; move one with .to()")
      if x.dtype != y.dtype:
        dt = least_upper_dtype(x.dtype, y.dtype)
        x, y = x.cast(dt), y.cast(dt)
    else:
      if not isinstance(other, (int, float, bool)): raise TypeError(f"can't combine a Tensor with {type(other).__name__}")
      dt = x.dtype
      if isinstance(other, float) and not dtypes.is_float(dt): dt = dtypes.default_float
      elif isinstance(other, int) and not isinstance(other, bool) and dt == dtypes.bool: dt = dtypes.default_int
      x = x.cast(dt)
      y = Tensor(other, device=x.device, dtype=dt)
    if reverse: x, y = y, x
    shape = _broadcast_shape(x.shape, y.shape)
    return x.expand(shape), y.expand(shape)

  def _alu(self, op: Ops, *srcs: Tensor) -> Tensor:
    out_dtype = dtypes.bool if op in GroupOp.Comparison else srcs[0].dtype if op is Ops.WHERE else self.dtype
    rg = any(t.requires_grad for t in (self, *srcs)) or None
    return Tensor(UOp(op, out_dtype, (self.uop, *(s.uop for s in srcs))), requires_grad=rg)

  def _binary(self, op: Ops, other: Tensor | ConstType, reverse: bool = False) -> Tensor:
    x, y = self._broadcasted(other, reverse)
    return x._alu(op, y)

  def add(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor: return self._binary(Ops.ADD, x, reverse)
  def sub(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._alu(Ops.ADD, -b) if a.dtype != dtypes.bool else a._alu(Ops.XOR, b)
  def mul(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor: return self._binary(Ops.MUL, x, reverse)
  def div(self, x: Tensor | ConstType, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if rounding_mode is not None:
      if rounding_mode not in ("trunc", "floor"): raise ValueError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
      if dtypes.is_int(a.dtype):
        q = a._alu(Ops.IDIV, b)
        if rounding_mode == "trunc": return q
        return (q * b).ne(a).logical_and((a < 0).ne(b < 0)).where(q - 1, q)
      q = a.cast(least_upper_float(a.dtype)) / b.cast(least_upper_float(b.dtype))
      return q.trunc() if rounding_mode == "trunc" else q.floor()
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    return a._alu(Ops.FDIV, b)
  def idiv(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor: return self._binary(Ops.IDIV, x, reverse)
  def maximum(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.MAX, x)
  def minimum(self, x: Tensor | ConstType) -> Tensor:
    a, b = self._broadcasted(x)
    return -((-a).maximum(-b)) if a.dtype != dtypes.bool else a.logical_and(b)
  def where(self, x: Tensor | ConstType, y: Tensor | ConstType) -> Tensor:
    cond = self if self.dtype == dtypes.bool else self.ne(0)
    if isinstance(x, Tensor): a, b = x._broadcasted(y)
    elif isinstance(y, Tensor): b, a = y._broadcasted(x)
    else:
      dt = dtypes.from_py([x, y])
      a, b = Tensor(x, device=self.device, dtype=dt), Tensor(y, device=self.device, dtype=dt)
    shape = _broadcast_shape(cond.shape, a.shape, b.shape)
    return cond.expand(shape)._alu(Ops.WHERE, a.expand(shape), b.expand(shape))
  def __neg__(self) -> Tensor: return self.logical_not() if self.dtype == dtypes.bool else self._alu(Ops.NEG)
  def neg(self) -> Tensor: return -self
  def logical_not(self) -> Tensor: return self.ne(True)
  def logical_and(self, x: Tensor | ConstType) -> Tensor: return self.cast(dtypes.bool)._binary(Ops.AND, x if isinstance(x, Tensor) else bool(x))
  def logical_or(self, x: Tensor | ConstType) -> Tensor: return self.cast(dtypes.bool)._binary(Ops.OR, x if isinstance(x, Tensor) else bool(x))
  def bitwise_and(self, x: Tensor | int) -> Tensor: return self._binary(Ops.AND, x)
  def bitwise_or(self, x: Tensor | int) -> Tensor: return self._binary(Ops.OR, x)
  def bitwise_xor(self, x: Tensor | int) -> Tensor: return self._binary(Ops.XOR, x)
  def lshift(self, x: int) -> Tensor: return self._binary(Ops.SHL, x)
  def rshift(self, x: int) -> Tensor: return self._binary(Ops.SHR, x)

  def cast(self, dtype: DType | str) -> Tensor:
    dt = to_dtype(dtype)
    return self if dt == self.dtype else Tensor(UOp(Ops.CAST, dt, (self.uop,)), requires_grad=self.requires_grad)
  def bitcast(self, dtype: DType | str) -> Tensor:
    dt = to_dtype(dtype)
    if dt.itemsize != self.dtype.itemsize: raise ValueError(f"bitcast needs dtypes of one size: {self.dtype!r} is {self.dtype.itemsize} bytes, {dt!r} is {dt.itemsize}")
    return self if dt == self.dtype else Tensor(UOp(Ops.BITCAST, dt, (self.uop,)))
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)

  def _float_unary(self, op: Ops) -> Tensor: return self.cast(least_upper_float(self.dtype))._alu(op)
  def exp2(self) -> Tensor: return self._float_unary(Ops.EXP2)
  def log2(self) -> Tensor: return self._float_unary(Ops.LOG2)
  def sqrt(self) -> Tensor: return self._float_unary(Ops.SQRT)
  def sin(self) -> Tensor: return self._float_unary(Ops.SIN)
  def reciprocal(self) -> Tensor: return self._float_unary(Ops.RECIPROCAL)
  def trunc(self) -> Tensor: return self if not dtypes.is_float(self.dtype) else self._alu(Ops.TRUNC)
  def exp(self) -> Tensor: return self.mul(1 / math.log(2)).exp2()
  def log(self) -> Tensor: return self.log2().mul(math.log(2))
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def cos(self) -> Tensor: return ((math.pi / 2) - self.cast(least_upper_float(self.dtype))).sin()
  def tan(self) -> Tensor: return self.sin() / self.cos()
  def floor(self) -> Tensor:
    t = self.trunc()
    return (self < t).where(t - 1, t) if dtypes.is_float(self.dtype) else self
  def ceil(self) -> Tensor:
    t = self.trunc()
    return (self > t).where(t + 1, t) if dtypes.is_float(self.dtype) else self
  def abs(self) -> Tensor: return self * self.sign()
  def sign(self) -> Tensor: return self.ne(0).where((self < 0).where(self.full_like(-1), self.full_like(1)), self.full_like(0))
  def square(self) -> Tensor: return self * self
  def pow(self, x: Tensor | ConstType, reverse: bool = False) -> Tensor:
    if not reverse and isinstance(x, (int, float)) and not isinstance(x, bool):
      if x == 0: return self.ones_like()
      if x == 1: return self
      if x == 2: return self * self
      if x == 0.5: return self.sqrt()
      if x == -1: return self.reciprocal()
      if isinstance(x, int) and 0 < x <= 8 and not dtypes.is_float(self.dtype): return math.prod([self] * x)  # type: ignore[return-value]
    base, ex = self._broadcasted(x, reverse)
    base, ex = base.cast(least_upper_float(base.dtype)), ex.cast(least_upper_float(ex.dtype))
    # |b|^e with the sign fixed for negative bases with integral exponents; NaN for non-integral ones
    mag = base.abs().log2().mul(ex).exp2()
    is_int_ex = ex.trunc().eq(ex)
    odd = (ex.abs() - (ex.abs() / 2).trunc() * 2).eq(1)
    signed = (base < 0).where(is_int_ex.where(odd.where(-mag, mag), float("nan")), mag)
    return base.eq(0).logical_and(ex.eq(0)).where(1.0, signed)

  # activations used by the MLP path; the full set comes with the Tensor API
  def relu(self) -> Tensor: return self.maximum(0)
  def sigmoid(self) -> Tensor: return (1 + (self * (-1 / math.log(2))).exp2()).reciprocal()
  def tanh(self) -> Tensor: return 2.0 * ((2.0 * self).sigmoid()) - 1.0
  def leaky_relu(self, neg_slope: float = 0.01) -> Tensor: return (self < 0).where(self * neg_slope, self)
  def gelu(self) -> Tensor: return 0.5 * self * (1 + (math.sqrt(2 / math.pi) * (self + 0.044715 * self * self * self)).tanh())
  def silu(self) -> Tensor: return self * self.sigmoid()
  def swish(self) -> Tensor: return self.silu()

  # comparisons
  def __lt__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.CMPLT, x)
  def __gt__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.CMPLT, x, reverse=True)
  def __ge__(self, x: Tensor | ConstType) -> Tensor: return (self < x).logical_not()
  def __le__(self, x: Tensor | ConstType) -> Tensor: return (self > x).logical_not()
  def eq(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.CMPEQ, x)
  def ne(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.CMPNE, x)
  def __eq__(self, x: object) -> Tensor: return self.eq(x)  # type: ignore[override, arg-type]
  def __ne__(self, x: object) -> Tensor: return self.ne(x)  # type: ignore[override, arg-type]

  # python operators
  def __add__(self, x: Tensor | ConstType) -> Tensor: return self.add(x)
  def __radd__(self, x: ConstType) -> Tensor: return self.add(x, True)
  def __sub__(self, x: Tensor | ConstType) -> Tensor: return self.sub(x)
  def __rsub__(self, x: ConstType) -> Tensor: return self.sub(x, True)
  def __mul__(self, x: Tensor | ConstType) -> Tensor: return self.mul(x)
  def __rmul__(self, x: ConstType) -> Tensor: return self.mul(x, True)
  def __truediv__(self, x: Tensor | ConstType) -> Tensor: return self.div(x)
  def __rtruediv__(self, x: ConstType) -> Tensor: return self.div(x, True)
  def __floordiv__(self, x: Tensor | ConstType) -> Tensor: return self.div(x, rounding_mode="floor")
  def __rfloordiv__(self, x: ConstType) -> Tensor: return self.div(x, True, rounding_mode="floor")
  def __pow__(self, x: Tensor | ConstType) -> Tensor: return self.pow(x)
  def __rpow__(self, x: ConstType) -> Tensor: return self.pow(x, True)
  def __matmul__(self, x: Tensor) -> Tensor: return self.matmul(x)
  def __rmatmul__(self, x: Tensor) -> Tensor: return x.matmul(self)
  def __and__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.AND, x)
  def __or__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.OR, x)
  def __xor__(self, x: Tensor | ConstType) -> Tensor: return self._binary(Ops.XOR, x)
  def __invert__(self) -> Tensor: return self.logical_not() if self.dtype == dtypes.bool else self ^ -1
  def __lshift__(self, x: int) -> Tensor: return self.lshift(x)
  def __rshift__(self, x: int) -> Tensor: return self.rshift(x)
  def __iadd__(self, x: Tensor | ConstType) -> Tensor: return self.assign(self + x)
  def __isub__(self, x: Tensor | ConstType) -> Tensor: return self.assign(self - x)
  def __imul__(self, x: Tensor | ConstType) -> Tensor: return self.assign(self * x)
  def __itruediv__(self, x: Tensor | ConstType) -> Tensor: return self.assign(self / x)

  # ---- reductions
  def _reduce(self, op: Ops, axis: int | Sequence[int] | None, keepdim: bool) -> Tensor:
    axes = tuple(range(self.ndim)) if axis is None else tuple(sorted({self._axis(a) for a in ((axis,) if isinstance(axis, int) else axis)}))
    if self.ndim == 0: return self
    if any(self.shape[a] == 0 for a in axes):  # reducing nothing gives the identity
      from tinygrad.uop.ops import identity_element
      out_shape = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
      t = Tensor.full(out_shape, identity_element(op, self.dtype), dtype=self.dtype, device=self.device)
    else:
      t = Tensor(UOp(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, axes)), requires_grad=self.requires_grad)
    return t if keepdim else t.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

  def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else _sum_dtype(self.dtype)
    return self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
  def prod(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else _sum_dtype(self.dtype)
    return self.cast(acc)._reduce(Ops.MUL, axis, keepdim)
  def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor: return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    if dtypes.is_unsigned(self.dtype): return dtypes.max(self.dtype) - (dtypes.max(self.dtype) - self).max(axis, keepdim)
    if self.dtype == dtypes.bool: return self.logical_not().max(axis, keepdim).logical_not()
    return -((-self).max(axis, keepdim))
  def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    out_dt = least_upper_float(self.dtype)
    total = self.cast(out_dt).sum(axis, keepdim)
    count = prod(self.shape) // max(prod(total.shape), 1) if self.numel() else 0
    return total.div(count) if count else total * float("nan")
  def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    sq = (self - self.mean(axis, keepdim=True)).square().sum(axis, keepdim)
    n = self.numel() // max(sq.numel(), 1)
    return sq.div(max(n - correction, 0))
  def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    return self.var(axis, keepdim, correction).sqrt()

  def softmax(self, axis: int = -1) -> Tensor:
    e = (self - self.max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)
  def log_softmax(self, axis: int = -1) -> Tensor:
    m = self - self.max(axis, keepdim=True)
    return m - m.exp().sum(axis, keepdim=True).log()
  def logsumexp(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    m = self.max(axis, keepdim=True)
    out = (self - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.squeeze(axis) if axis is not None else out.reshape(())
  def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    if axis is None: return self.flatten().argmax(0)
    axis = self._axis(axis)
    n = self.shape[axis]
    is_max = self.eq(self.max(axis, keepdim=True))
    idx_shape = tuple(n if i == axis else 1 for i in range(self.ndim))
    rev = (n - Tensor.arange(n, dtype=dtypes.int32, device=self.device)).reshape(idx_shape)
    return (n - (is_max.cast(dtypes.int32) * rev).max(axis, keepdim)).cast(dtypes.int32)
  def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor: return (-self).argmax(axis, keepdim)

  # ---- linear algebra
  def dot(self, w: Tensor) -> Tensor:
    if self.ndim == 0 or w.ndim == 0: raise ValueError(f"matmul needs at least 1 dim on both sides, got {self.shape} and {w.shape}")
    x, w_ = self, w
    k_x = x.shape[-1]
    k_w = w_.shape[-2] if w_.ndim > 1 else w_.shape[0]
    if k_x != k_w: raise ValueError(f"matmul shape mismatch: {self.shape} @ {w.shape} (inner sizes {k_x} and {k_w} differ)")
    dt = least_upper_dtype(x.dtype, w_.dtype)
    x, w_ = x.cast(dt), w_.cast(dt)
    n_mid = min(x.ndim - 1, w_.ndim - 1, 1)
    x = x.reshape(*x.shape[:-1], *([1] * n_mid), x.shape[-1])
    w_ = w_.reshape(*w_.shape[:-2], *([1] * n_mid), *w_.shape[-min(w_.ndim, 2):]).transpose(-1, -min(w_.ndim, 2))
    return (x * w_).sum(-1, dtype=_sum_dtype(dt)).cast(dt) if dtypes.is_float(dt) else (x * w_).sum(-1).cast(dt)
  def matmul(self, x: Tensor, reverse: bool = False) -> Tensor: return x.dot(self) if reverse else self.dot(x)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    out = self * weight if weight.ndim == 1 else self.dot(weight)
    return out + bias if bias is not None else out

  # ---- losses used by training loops
  def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0) -> Tensor:
    log_probs = self.log_softmax(-1)
    classes = self.shape[-1]
    y = Y.reshape(-1, 1)
    counter = Tensor.arange(classes, dtype=dtypes.int32, device=self.device).reshape(1, classes)
    one_hot = counter.eq(y.cast(dtypes.int32))
    valid = y.ne(ignore_index)
    loss = -(log_probs.reshape(-1, classes) * one_hot).sum(-1, keepdim=True) * valid
    if label_smoothing: loss = (1 - label_smoothing) * loss - label_smoothing * log_probs.reshape(-1, classes).mean(-1, keepdim=True) * valid
    return loss.sum() / valid.sum()
  def cross_entropy(self, Y: Tensor, label_smoothing: float = 0.0) -> Tensor:
    return self.sparse_categorical_crossentropy(Y, label_smoothing=label_smoothing)

  # ---- autograd
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    """d(self)/d(target) for each target, as new lazy tensors."""
    if gradient is None and self.numel() != 1: raise ValueError(f"gradient of a non-scalar {self.shape} tensor needs gradient=")
    seed = gradient.uop if gradient is not None else Tensor.ones(*self.shape, dtype=self.dtype, device=self.device).uop
    target_uops = {t.uop: t for t in targets}
    grads = compute_gradient(self.uop, seed, set(target_uops))
    out = []
    for t in targets:
      g = grads.get(t.uop)
      if g is None: raise RuntimeError(f"{t} is not part of the computation of this tensor, so it has no gradient")
      out.append(Tensor(g, device=t.device))
    return out

  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Accumulate d(self)/dt into t.grad for every tensor t with requires_grad=True in the graph."""
    in_graph = set(self.uop.toposort(gate=lambda u: u.op is not Ops.DETACH))
    params = [t for t in list(_all_tensors) if t.requires_grad and t.uop in in_graph]
    if not params: raise RuntimeError("backward() found no tensor with requires_grad=True in the graph")
    seen: dict[UOp, Tensor] = {}
    for t in params: seen.setdefault(t.uop, t)
    grads = self.gradient(*seen.values(), gradient=gradient)
    for uop, g in zip(seen, grads):
      for t in params:
        if t.uop is uop: t.grad = g if t.grad is None else t.grad + g
    return self


def _sum_dtype(dt: DType) -> DType:
  """Accumulation dtype of sum like tinygrad/torch: small ints and bool sum as int32 (uints as uint32), halves as themselves."""
  if dt == dtypes.bool or (dtypes.is_int(dt) and dt.itemsize < 4): return dtypes.uint32 if dtypes.is_unsigned(dt) else dtypes.int32
  return dt


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


def _from_bytes(raw: bytes, shape: tuple[int, ...], dtype: DType, device: str) -> UOp:
  buf = new_buffer(device, prod(shape), dtype)
  if raw: buffer_of(buf).copyin(raw)
  return buffer_view(buf, shape)


def _is_numpy(x: Any) -> bool: return type(x).__module__ == "numpy" and type(x).__name__ == "ndarray"


def _unflatten(flat: list[Any], shape: tuple[int, ...]) -> Any:
  if not shape: return flat[0]
  step = prod(shape[1:])
  return [_unflatten(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _argsort(x: Iterable[int]) -> list[int]: return argsort(list(x))
