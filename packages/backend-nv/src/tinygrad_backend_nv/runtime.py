"""The CUDA device at run time, through the driver API (`cuda.bindings.driver`): one primary context per GPU,
cuMemAlloc'd buffers, modules loaded from cubins (or PTX, JIT-compiled by the driver), launches on the legacy
default stream (so copies and kernels are ordered without explicit syncs), events for timing.

Every driver call goes through `check`, which turns an error code into a RuntimeError naming the call, the error and
what usually causes it. Errors from a kernel that faulted (illegal address, ...) are sticky in CUDA: the context is
unusable afterwards, and the message says so.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable
from typing import Any

from tinygrad.device.plugin import Allocator, Compiled, GraphExec, KernelLaunch, getenv

try:
  from cuda.bindings import driver as cu
except ImportError:  # driver_status() explains
  cu = None  # type: ignore[assignment]

_HINTS = {
  "CUDA_ERROR_OUT_OF_MEMORY": "the GPU has too little free memory for this allocation",
  "CUDA_ERROR_NO_DEVICE": "no NVIDIA GPU is visible (check CUDA_VISIBLE_DEVICES and /dev/nvidia*)",
  "CUDA_ERROR_INVALID_DEVICE": "there is no GPU with that index",
  "CUDA_ERROR_INVALID_PTX": "the driver could not JIT-compile the PTX (is its .version newer than this driver takes?)",
  "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the PTX ISA version is newer than this driver supports: compile to a cubin instead",
  "CUDA_ERROR_NO_BINARY_FOR_GPU": "the kernel was compiled for another GPU arch: set DEV=CUDA:CUDA:sm_NN for this GPU",
  "CUDA_ERROR_INVALID_IMAGE": "the binary is not a valid cubin/PTX image for this driver",
  "CUDA_ERROR_ILLEGAL_ADDRESS": "a kernel accessed memory out of bounds; the CUDA context is now unusable (restart the process)",
  "CUDA_ERROR_LAUNCH_FAILED": "a kernel faulted; the CUDA context is now unusable (restart the process)",
  "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "too many registers or threads per block for this kernel: use a smaller local size",
  "CUDA_ERROR_INVALID_VALUE": "an argument was out of range (launch dims above the device limits?)",
  "CUDA_ERROR_NOT_INITIALIZED": "cuInit was not called or failed",
  "CUDA_ERROR_INSUFFICIENT_DRIVER": "the NVIDIA driver is older than this CUDA library needs",
}


class CUDAError(RuntimeError):
  def __init__(self, what: str, name: str, text: str):
    hint = _HINTS.get(name, "")
    super().__init__(f"{what} failed: {name} ({text})" + (f": {hint}" if hint else ""))
    self.what, self.name = what, name


def _error_text(err: Any) -> tuple[str, str]:
  try: name = cu.cuGetErrorName(err)[1].decode()
  except Exception: name = str(err)  # noqa: BLE001  the driver itself may be what failed
  try: text = cu.cuGetErrorString(err)[1].decode()
  except Exception: text = "no description"  # noqa: BLE001
  return name, text


def check(result: Any, what: str) -> Any:
  """Unpack a cuda-bindings result `(CUresult, *values)`: the values (one, a tuple, or None), or raise CUDAError."""
  err, *values = result if isinstance(result, tuple) else (result,)
  if err != cu.CUresult.CUDA_SUCCESS: raise CUDAError(what, *_error_text(err))
  return None if not values else values[0] if len(values) == 1 else tuple(values)


@functools.cache
def driver_status() -> tuple[int, str | None]:
  """(number of GPUs, None) when the driver works, else (0, why not)."""
  if cu is None: return 0, "cuda-bindings is not installed (pip install cuda-bindings)"
  try: check(cu.cuInit(0), "cuInit")
  except CUDAError as e: return 0, f"the CUDA driver failed to initialize: {e}"
  except Exception as e:  # noqa: BLE001  cuda-bindings raises its own error when libcuda.so.1 is missing
    if type(e).__name__ == "DynamicLibNotFoundError": return 0, "no NVIDIA driver on this machine (libcuda.so.1 not found)"
    return 0, f"the NVIDIA driver could not be loaded ({type(e).__name__}: {e})"
  try: count = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
  except CUDAError as e: return 0, str(e)
  return (count, None) if count > 0 else (0, "the NVIDIA driver sees no GPU")


def device_arch(index: int = 0) -> str | None:
  """'sm_90' for GPU `index`, or None without a driver/GPU."""
  count, _ = driver_status()
  if index >= count: return None
  dev = check(cu.cuDeviceGet(index), "cuDeviceGet")
  major = check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")
  minor = check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")
  return f"sm_{major}{minor}"


def device_sm_count(index: int = 0) -> int:
  """The SMs of GPU `index` (132 on an H100 SXM or H200, 114 on an H100 PCIe)."""
  dev = check(cu.cuDeviceGet(index), "cuDeviceGet")
  return int(check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute"))


def device_name(index: int = 0) -> str:
  dev = check(cu.cuDeviceGet(index), "cuDeviceGet")
  return check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName").split(b"\x00", 1)[0].decode()


class _Context:
  """The primary context of one GPU (retained, never destroyed: other libraries in the process may share it)."""

  def __init__(self, index: int):
    count, why = driver_status()
    if why is not None: raise RuntimeError(f"CUDA is not available: {why}")
    if not 0 <= index < count: raise RuntimeError(f"there is no CUDA device {index}: this machine has {count} GPU(s) (CUDA:0..CUDA:{count - 1})")
    self.index = index
    self.device = check(cu.cuDeviceGet(index), "cuDeviceGet")
    self.ctx = check(cu.cuDevicePrimaryCtxRetain(self.device), f"cuDevicePrimaryCtxRetain (GPU {index})")
    _use(self)


# the device whose context was made current last, per thread: switching is needed only when it changes
_current = threading.local()


def _use(ctx: _Context) -> None:
  if getattr(_current, "ctx", None) is not ctx:
    check(cu.cuCtxSetCurrent(ctx.ctx), "cuCtxSetCurrent")
    _current.ctx = ctx


def _host_ptr(mv: memoryview) -> tuple[int, Any]:
  """Address of a contiguous host buffer, and an object that must stay alive while the address is used."""
  if mv.readonly:
    keep: Any = (ctypes.c_char * mv.nbytes).from_buffer_copy(mv)
    return ctypes.addressof(keep), keep
  keep = (ctypes.c_char * mv.nbytes).from_buffer(mv)
  return ctypes.addressof(keep), keep


_peers: set[tuple[int, int]] = set()


def _enable_peer(a: _Context, b: _Context) -> None:
  """Let each of two GPUs read the other's memory directly, once per pair. (Plain peer access: NVLink
  multicast stays off.) Where the hardware can't, copies still work through the driver."""
  for x, y in ((a, b), (b, a)):
    if (x.index, y.index) in _peers: continue
    _peers.add((x.index, y.index))
    can = cu.cuDeviceCanAccessPeer(x.device, y.device)
    if can[0] == cu.CUresult.CUDA_SUCCESS and can[1]:
      _use(x)
      err = cu.cuCtxEnablePeerAccess(y.ctx, 0)[0]
      if err not in (cu.CUresult.CUDA_SUCCESS, cu.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED): check((err,), "cuCtxEnablePeerAccess")


class CUDAAllocator(Allocator):
  """Buffers are CUdeviceptr values (ints). Views are pointer arithmetic on them."""

  def __init__(self, ctx: _Context):
    super().__init__()
    self.ctx = ctx
    self._staging: dict[int, list[memoryview]] = {}

  def _alloc(self, size: int, options: Any) -> int:
    _use(self.ctx)
    try: return int(check(cu.cuMemAlloc(max(size, 1)), f"cuMemAlloc({size} bytes) on CUDA:{self.ctx.index}"))
    except CUDAError as e:
      if e.name == "CUDA_ERROR_OUT_OF_MEMORY": raise MemoryError(str(e)) from e  # Allocator.alloc frees its cache and retries
      raise

  def _free(self, opaque: int, size: int, options: Any) -> None:
    _use(self.ctx)
    check(cu.cuMemFree(opaque), "cuMemFree")

  def view(self, opaque: int, offset: int, size: int) -> int: return opaque + offset

  def _copyin(self, dest: int, src: memoryview) -> None:
    if src.nbytes == 0: return
    _use(self.ctx)
    addr, keep = _host_ptr(src)
    check(cu.cuMemcpyHtoD(dest, addr, src.nbytes), f"cuMemcpyHtoD({src.nbytes} bytes)")
    del keep

  def staging_areas(self, nbytes: int, count: int) -> list[memoryview]:
    """Page-locked host memory (core's AsyncCopyIn): made once per size and kept, as pinning is slow and the areas are reused."""
    areas = self._staging.setdefault(nbytes, [])
    _use(self.ctx)
    while len(areas) < count:
      ptr = int(check(cu.cuMemHostAlloc(nbytes, 0), f"cuMemHostAlloc({nbytes} bytes)"))
      areas.append(memoryview((ctypes.c_char * nbytes).from_address(ptr)).cast("B"))
    return areas[:count]

  def copyin_async(self, dest: int, src: memoryview) -> Callable[[], None]:
    """From page-locked memory on the stream kernels run on (so they see it), without the host waiting: the returned function
    waits until the copy engine has read `src`."""
    _use(self.ctx)
    addr, keep = _host_ptr(src)
    check(cu.cuMemcpyHtoDAsync(dest, addr, src.nbytes, 0), f"cuMemcpyHtoDAsync({src.nbytes} bytes)")
    done = check(cu.cuEventCreate(2), "cuEventCreate")  # 2: CU_EVENT_DISABLE_TIMING
    check(cu.cuEventRecord(done, 0), "cuEventRecord")

    def wait() -> None:
      check(cu.cuEventSynchronize(done), "cuEventSynchronize (async copy)")
      cu.cuEventDestroy(done)
      assert keep is not None  # the host buffer's ctypes view lives until the copy has read it
    return wait

  def _copyout(self, dest: memoryview, src: int) -> None:
    if dest.nbytes == 0: return
    _use(self.ctx)
    if dest.readonly: raise ValueError("copyout needs a writable destination")
    addr, keep = _host_ptr(dest)
    check(cu.cuMemcpyDtoH(addr, src, dest.nbytes), f"cuMemcpyDtoH({dest.nbytes} bytes)")
    del keep

  def transfer(self, dest: int, src: int, nbytes: int, src_allocator: CUDAAllocator) -> None:
    """GPU to GPU (core's copy_buffer): peer access where the GPUs allow it (NVLink/PCIe), else the driver stages it."""
    if src_allocator.ctx is self.ctx: return self.copy_device(dest, src, nbytes)
    _enable_peer(self.ctx, src_allocator.ctx)
    _use(self.ctx)
    check(cu.cuMemcpyPeer(dest, self.ctx.ctx, src, src_allocator.ctx.ctx, nbytes), f"cuMemcpyPeer({nbytes} bytes)")

  def copy_device(self, dest: int, src: int, nbytes: int) -> None:
    """Device-to-device copy within or across GPUs (unified addressing)."""
    _use(self.ctx)
    check(cu.cuMemcpy(dest, src, nbytes), f"cuMemcpy({nbytes} bytes)")


# The split of each SM's L1 between cache and shared memory that a kernel asks for, in percent shared (-1: the driver's choice
# by the kernel's needs), for the kernels that use little shared memory (a reduction's partials; not a tensor-core tile's
# stages, whose occupancy the driver's choice keeps). Without it, a decode step whose kernels differ in their needs (warp
# shuffles: none; 18-lane quantized rows: a few hundred bytes) ran SmolLM2 at 696 us a step against 610 with one split for
# all on the H200 (bench/README.md, "warp shuffles"): an SM seems to reconfigure between kernels of different splits rather
# than run the next kernel's blocks beside the last ones of this one (graph.py's programmatic edges)
SMEM_CARVEOUT = getenv("SMEM_CARVEOUT", 8)
SMEM_CARVEOUT_MAX_BYTES = 16 * 1024


class CUDAProgram:
  """A kernel loaded from a cubin (or NUL-terminated PTX). Called with device pointers, then int32 var values."""

  def __init__(self, ctx: _Context, name: str, lib: bytes):
    self.ctx, self.name, self.lib = ctx, name, lib
    _use(ctx)
    self.module = check(cu.cuModuleLoadData(lib), f"cuModuleLoadData (kernel {name}, {len(lib)} bytes)")
    self.fn = check(cu.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
    self.max_threads = check(cu.cuFuncGetAttribute(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, self.fn),
                             "cuFuncGetAttribute")
    self.shared_bytes = self._dynamic_shared()
    if SMEM_CARVEOUT >= 0: self._ask_for_the_l1_split()
    from tinygrad_backend_nv.cuda import (  # the kernel waits for the grids before it (graph.py's programmatic edges)
      EARLY_PARAMS_SYMBOL,
      GRID_WAIT_SYMBOL,
    )
    self.waits_for_grid = cu.cuModuleGetGlobal(self.module, GRID_WAIT_SYMBOL.encode())[0] == cu.CUresult.CUDA_SUCCESS
    self.early_params = next(iter(self._global_words(EARLY_PARAMS_SYMBOL)), 0)  # buffer parameters read before that wait (a bit each)
    self.tensor_maps = self._tensor_maps()
    from tinygrad_backend_nv import timeline  # block timelines (KERNEL_TIMELINE): the module records into the open Timeline
    if cu.cuModuleGetGlobal(self.module, timeline.TIMELINE_SYMBOL.encode())[0] == cu.CUresult.CUDA_SUCCESS: timeline.register(self)
    self._encoded: dict[tuple, Any] = {}  # (map, buffer address) -> its 128 bytes, 64-byte aligned (encoding costs microseconds)

  def _ask_for_the_l1_split(self) -> None:
    """SMEM_CARVEOUT for a kernel with at most SMEM_CARVEOUT_MAX_BYTES of shared memory (static and dynamic)."""
    static = check(cu.cuFuncGetAttribute(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, self.fn), "cuFuncGetAttribute")
    if static + self.shared_bytes > SMEM_CARVEOUT_MAX_BYTES: return
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    check(cu.cuFuncSetAttribute(self.fn, attr, SMEM_CARVEOUT), f"cuFuncSetAttribute(kernel {self.name}, carveout {SMEM_CARVEOUT}%)")

  def _global_words(self, symbol: str) -> list[int]:
    """A global of the kernel's module as 64-bit words ([] where the module has none)."""
    res = cu.cuModuleGetGlobal(self.module, symbol.encode())
    if res[0] == cu.CUresult.CUDA_ERROR_NOT_FOUND: return []
    ptr, size = check(res, f"cuModuleGetGlobal({symbol})")
    words = (ctypes.c_uint64 * (int(size) // 8))()
    check(cu.cuMemcpyDtoH(ctypes.addressof(words), ptr, int(size)), f"cuMemcpyDtoH({symbol})")
    return [int(w) for w in words]

  def _tensor_maps(self) -> list[tuple[int, ...]]:
    """The tensor maps the kernel takes as parameters after its buffers and vars (cuda.py TENSOR_MAP_SYMBOL), each as
    TENSOR_MAP_WORDS numbers."""
    from tinygrad_backend_nv.cuda import TENSOR_MAP_SYMBOL, TENSOR_MAP_WORDS
    if not (words := self._global_words(TENSOR_MAP_SYMBOL)): return []
    return [tuple(words[1 + i * TENSOR_MAP_WORDS:1 + (i + 1) * TENSOR_MAP_WORDS]) for i in range(words[0])]

  def _encode(self, spec: tuple[int, ...], bufs: tuple[int, ...]) -> Any:
    """One tensor map (a 64-byte aligned copy of its 128 bytes) for the buffer the spec names: 128-byte swizzled boxes."""
    pos, itemsize, offset, rank = spec[:4]
    key = (spec, bufs[pos])
    if (got := self._encoded.get(key)) is not None: return got
    dims, strides, box = spec[4:4 + rank], spec[9:9 + rank - 1], spec[13:13 + rank]
    dtype = {1: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8, 2: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT16,
             4: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT32}[itemsize]
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t  # the bindings take these, not ints, in the lists
    tmap = check(cu.cuTensorMapEncodeTiled(dtype, rank, bufs[pos] + offset, [u64(d) for d in dims], [u64(x) for x in strides],
                                           [u32(b) for b in box], [u32(1)] * rank,
                                           cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
                                           cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                           cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                 f"cuTensorMapEncodeTiled(kernel {self.name}, dims {dims}, strides {strides}, box {box})")
    raw = (ctypes.c_uint8 * 192)()
    at = (ctypes.addressof(raw) + 63) // 64 * 64
    ctypes.memmove(at, tmap.getPtr(), 128)
    if len(self._encoded) > 64: self._encoded.clear()
    self._encoded[key] = got = (raw, at)
    return got

  def arguments(self, bufs: tuple[int, ...], vals: tuple[int, ...]) -> tuple[list[Any], Any]:
    """kernelParams for a launch, a void*[] whose entries point at the argument values (buffers, vars, tensor maps), and
    the values to keep alive until the driver has read them."""
    values: list[Any] = [ctypes.c_uint64(b) for b in bufs] + [ctypes.c_int32(v) for v in vals]
    ptrs = [ctypes.addressof(v) for v in values]
    for spec in self.tensor_maps:
      raw, at = self._encode(spec, tuple(bufs))
      values.append(raw)
      ptrs.append(at)
    return values, (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)

  def _dynamic_shared(self) -> int:
    """Dynamic shared memory the kernel needs (cuda.py renders it as a global in the module when it uses any): each
    launch passes it, and the kernel is allowed it first (above 48 KB a kernel must opt in)."""
    from tinygrad_backend_nv.cuda import DYNAMIC_SMEM_SYMBOL  # the renderer's side of this contract
    res = cu.cuModuleGetGlobal(self.module, DYNAMIC_SMEM_SYMBOL.encode())
    if res[0] == cu.CUresult.CUDA_ERROR_NOT_FOUND: return 0
    ptr, size = check(res, f"cuModuleGetGlobal({DYNAMIC_SMEM_SYMBOL})")
    if int(size) != 4: raise RuntimeError(f"kernel {self.name}: {DYNAMIC_SMEM_SYMBOL} is {int(size)} bytes, expected a 32-bit unsigned")
    value = ctypes.c_uint32()
    check(cu.cuMemcpyDtoH(ctypes.addressof(value), ptr, 4), f"cuMemcpyDtoH({DYNAMIC_SMEM_SYMBOL})")
    n = int(value.value)
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(cu.cuFuncSetAttribute(self.fn, attr, n), f"cuFuncSetAttribute(kernel {self.name}, {n} bytes of dynamic shared memory)")
    return n

  def __call__(self, *bufs: int, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    gx, gy, gz = (tuple(global_size) + (1, 1, 1))[:3]
    lx, ly, lz = (tuple(local_size) + (1, 1, 1))[:3]
    if gx * gy * gz == 0: return 0.0 if wait else None  # nothing to do (empty tensors)
    if lx * ly * lz > self.max_threads:
      raise RuntimeError(f"kernel {self.name}: local size {(lx, ly, lz)} exceeds its limit of {self.max_threads} threads per block")
    _use(self.ctx)
    values, params = self.arguments(tuple(bufs), tuple(vals))
    start = end = None
    if wait:
      start, end = check(cu.cuEventCreate(0), "cuEventCreate"), check(cu.cuEventCreate(0), "cuEventCreate")
      check(cu.cuEventRecord(start, 0), "cuEventRecord")
    check(cu.cuLaunchKernel(self.fn, gx, gy, gz, lx, ly, lz, self.shared_bytes, 0, ctypes.addressof(params), 0),
          f"cuLaunchKernel({self.name}, grid={(gx, gy, gz)}, block={(lx, ly, lz)})")
    if not wait: return None
    try:
      check(cu.cuEventRecord(end, 0), "cuEventRecord")
      check(cu.cuEventSynchronize(end), f"kernel {self.name}")
      return float(check(cu.cuEventElapsedTime(start, end), "cuEventElapsedTime")) * 1e-3
    finally:
      cu.cuEventDestroy(start)
      cu.cuEventDestroy(end)

  def __del__(self) -> None:
    try:
      if cu is not None and getattr(self, "module", None) is not None: cu.cuModuleUnload(self.module)
    except Exception:  # noqa: BLE001  interpreter shutdown
      pass


class CUDADevice(Compiled):
  """One GPU: `CUDA` / `CUDA:1` (or `NV`, `NV:1`, the same driver-API interface)."""

  def __init__(self, device: str, index: int = 0):
    self.ctx = _Context(index)
    self.index = index
    self.arch = device_arch(index)
    super().__init__(device, CUDAAllocator(self.ctx), self._load, graph=self._graph)

  def _load(self, name: str, lib: bytes) -> CUDAProgram: return CUDAProgram(self.ctx, name, lib)

  def _graph(self, launches: list[KernelLaunch]) -> GraphExec:
    from tinygrad_backend_nv.graph import CUDAGraph  # graph.py builds on this module
    return CUDAGraph(self.ctx, launches)

  def synchronize(self) -> None:
    _use(self.ctx)
    check(cu.cuCtxSynchronize(), f"cuCtxSynchronize on {self.device} (a kernel launched before failed)")

  def __repr__(self) -> str: return f"<CUDADevice {self.device} {self.arch}>"


def open_cuda(kind: str, index: int) -> CUDADevice:
  return CUDADevice(kind if index == 0 else f"{kind}:{index}", index)


class Timer:
  """CUDA events around host code: `with Timer(dev) as t: ...; t.seconds` (for benchmarks)."""

  def __init__(self, dev: CUDADevice):
    self.dev = dev
    self.seconds = 0.0

  def __enter__(self) -> Timer:
    _use(self.dev.ctx)
    self.start, self.end = check(cu.cuEventCreate(0), "cuEventCreate"), check(cu.cuEventCreate(0), "cuEventCreate")
    check(cu.cuEventRecord(self.start, 0), "cuEventRecord")
    return self

  def __exit__(self, *exc: object) -> None:
    _use(self.dev.ctx)
    check(cu.cuEventRecord(self.end, 0), "cuEventRecord")
    check(cu.cuEventSynchronize(self.end), "cuEventSynchronize")
    self.seconds = float(check(cu.cuEventElapsedTime(self.start, self.end), "cuEventElapsedTime")) * 1e-3
    cu.cuEventDestroy(self.start)
    cu.cuEventDestroy(self.end)
