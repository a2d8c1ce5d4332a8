"""What a device instance is at run time: an allocator, a program loader and synchronize."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import GlobalCounters


class Program(Protocol):
  """A loaded kernel. Called with device buffers (opaque), launch sizes and int values of symbolic vars.
  With wait=True it synchronizes and returns the run time in seconds."""

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None: ...


@dataclass(frozen=True)
class KernelLaunch:
  """One launch of a loaded kernel: exactly what `Program.__call__` receives. Device graphs are built from these."""
  program: Program
  bufs: tuple[Any, ...]
  global_size: tuple[int, ...] = (1, 1, 1)
  local_size: tuple[int, ...] = (1, 1, 1)
  vals: tuple[int, ...] = ()


class GraphExec(Protocol):
  """A device graph of kernel launches, made by a device's optional `graph(launches)` (e.g. a CUDA graph). TinyJit
  builds one after it captured a function whose kernels all run on one device, and replays it instead of launching
  each kernel from Python. `__call__()` runs the launches in order (asynchronously, like a Program); `update(i, launch)`
  changes launch i (other buffers, var values, launch sizes; the same program) for the following calls. A device
  that can't put some launches in a graph raises NotImplementedError from `graph(...)`: the JIT then runs them
  one by one."""

  def update(self, i: int, launch: KernelLaunch) -> None: ...
  def __call__(self) -> None: ...


class Allocator:
  """Device memory. Subclasses implement `_alloc`, `_free`, `_copyin`, `_copyout`; freed blocks are kept by size
  and reused (an LRU-style cache) so repeated kernels don't pay for allocation."""

  def __init__(self) -> None:
    self.cache: dict[tuple[int, Any], list[Any]] = defaultdict(list)

  def alloc(self, size: int, options: Any = None) -> Any:
    if (cached := self.cache.get((size, options))): return cached.pop()
    try: return self._alloc(size, options)
    except MemoryError:
      self.free_cache()
      return self._alloc(size, options)

  def free(self, opaque: Any, size: int, options: Any = None) -> None: self.cache[(size, options)].append(opaque)

  def free_cache(self) -> None:
    for (size, options), blocks in self.cache.items():
      for b in blocks: self._free(b, size, options)
    self.cache.clear()

  def copyin(self, dest: Any, src: memoryview) -> None: self._copyin(dest, src)
  def copyout(self, dest: memoryview, src: Any) -> None: self._copyout(dest, src)

  # what an allocator may also offer: the Protocols below (checked with isinstance)

  def _alloc(self, size: int, options: Any) -> Any: raise NotImplementedError
  def _free(self, opaque: Any, size: int, options: Any) -> None: pass
  def _copyin(self, dest: Any, src: memoryview) -> None: raise NotImplementedError
  def _copyout(self, dest: memoryview, src: Any) -> None: raise NotImplementedError


@runtime_checkable
class Views(Protocol):
  """Buffers that are views of other buffers' memory (TinyJit's memory planning, disk_view)."""
  def view(self, opaque: Any, offset: int, size: int) -> Any: ...


@runtime_checkable
class ZeroedAlloc(Protocol):
  """Fresh memory that reads as zeros without being written (Buffer.allocate_zeroed: a zero fill costs no kernel)."""
  def alloc_zeroed(self, size: int) -> Any: ...


@runtime_checkable
class HostMemory(Protocol):
  """Memory the host sees directly (CPU, PYTHON): copies to and from other devices need no staging copy."""
  def as_memoryview(self, opaque: Any) -> memoryview: ...


@runtime_checkable
class AsyncCopyIn(Protocol):
  """Host memory the device copies from while the host goes on (page-locked memory and a GPU's copy engine): a big copy from
  DISK reads the next chunk while the last one is on its way (engine/realize.py). `staging_areas` are the allocator's own,
  made once; the function `copyin_async` returns waits until the copy has read its source."""
  def staging_areas(self, nbytes: int, count: int) -> list[memoryview]: ...
  def copyin_async(self, dest: Any, src: memoryview) -> Callable[[], None]: ...


@runtime_checkable
class CopiesBetween(Protocol):
  """Device-to-device copies between instances of one kind (GPU peer copies)."""
  def transfer(self, dest: Any, src: Any, nbytes: int, src_allocator: Allocator) -> None: ...


class Compiled:
  """A device instance (e.g. "CPU", "CUDA:1"): memory, a loader for compiled kernels, synchronize, and optionally
  `graph(launches: list[KernelLaunch]) -> GraphExec` (see GraphExec) for TinyJit replays.
  The renderer/compiler is chosen per DEV target and looked up through the registry."""

  def __init__(self, device: str, allocator: Allocator, runtime: Callable[[str, bytes], Program] | None,
               graph: Callable[[list[KernelLaunch]], GraphExec] | None = None, runs_kernels: bool = True):
    self.device, self.allocator, self.runtime, self.graph = device, allocator, runtime, graph
    self.runs_kernels = runs_kernels

  def synchronize(self) -> None: pass

  @property
  def renderer(self) -> Any:
    """The renderer that compiles for this device under the current DEV (tinygrad's `Device[d].renderer`)."""
    from tinygrad.device.registry import Device
    return Device.renderer(self.device)

  def __repr__(self) -> str: return f"<{type(self).__name__} {self.device}>"


class Buffer:
  """`size` elements of `dtype` on `device`, allocated lazily. May be a view (`base`, `offset`) of another."""

  def __init__(self, device: str, size: int, dtype: DType, opaque: Any = None, base: Buffer | None = None, offset: int = 0):
    if size < 0: raise ValueError(f"buffer size must be >= 0, got {size}")
    self.device, self.size, self.dtype = device, size, dtype
    self.base, self.offset = base, offset
    self._opaque = opaque
    if opaque is not None: self._account(+1)

  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize

  def is_allocated(self) -> bool: return self._opaque is not None

  def _allocator(self) -> Allocator:
    from tinygrad.device.registry import Device
    return Device[self.device].allocator

  def ensure_allocated(self) -> Buffer:
    if self._opaque is None:
      if self.base is not None:
        self.base.ensure_allocated()
        self._opaque = self._allocator().view(self.base._opaque, self.offset * self.dtype.itemsize, self.nbytes)  # type: ignore[attr-defined]
      else:
        self._opaque = self._allocator().alloc(max(self.nbytes, 1))
        self._account(+1)
    return self

  def allocate_zeroed(self) -> bool:
    """Allocate memory that reads as zeros without writing it, where the allocator can (`alloc_zeroed`: e.g. fresh anonymous
    pages, which take no memory until touched). False, and nothing done, when it can't or the buffer is already allocated."""
    if self._opaque is not None or self.base is not None or not isinstance(alloc := self._allocator(), ZeroedAlloc): return False
    self._opaque = alloc.alloc_zeroed(max(self.nbytes, 1))
    self._account(+1)
    return True

  @property
  def opaque(self) -> Any: return self.ensure_allocated()._opaque

  def _account(self, sign: int) -> None:
    if self.base is None:
      GlobalCounters.mem_used += sign * self.nbytes
      GlobalCounters.mem_used_per_device[self.device] += sign * self.nbytes

  def copyin(self, data: memoryview | bytes) -> Buffer:
    mv = memoryview(data).cast("B")
    if mv.nbytes != self.nbytes: raise ValueError(f"copyin of {mv.nbytes} bytes into a buffer of {self.nbytes} bytes ({self.size} x {self.dtype})")
    self._allocator().copyin(self.opaque, mv)
    return self

  def copyout(self, dest: memoryview) -> memoryview:
    from tinygrad.device.registry import Device
    Device[self.device].synchronize()
    self._allocator().copyout(dest.cast("B"), self.opaque)
    return dest

  def as_bytes(self) -> bytes:
    out = memoryview(bytearray(self.nbytes))
    self.copyout(out)
    return out.tobytes()

  def deallocate(self) -> None:
    """Give the memory back now (to the allocator's cache); a later use allocates again. Not for views."""
    if self.base is not None: raise ValueError(f"{self} is a view: deallocate its base")
    if self._opaque is None: return
    self._allocator().free(self._opaque, max(self.nbytes, 1))
    self._account(-1)
    self._opaque = None

  def __del__(self) -> None:
    if getattr(self, "_opaque", None) is None or self.base is not None: return
    try:
      self._allocator().free(self._opaque, max(self.nbytes, 1))
      self._account(-1)
    except Exception:  # noqa: BLE001  interpreter shutdown: the registry may be gone already
      return

  def __repr__(self) -> str:
    return f"<Buffer {self.device} {self.size} {self.dtype}{' allocated' if self.is_allocated() else ''}>"


def default_dtype_for_bytes() -> DType: return dtypes.uint8
