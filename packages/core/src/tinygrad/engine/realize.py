"""Running a schedule: compile each kernel (cached), bind buffers, launch; copies between devices."""
from __future__ import annotations

import contextlib
import math
import mmap
import operator
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tinygrad.codegen.heuristics import GROUP_MAX_OUTPUTS, GROUP_REDUCE
from tinygrad.codegen.program import ProgramSpec, get_program
from tinygrad.codegen.tensor_core import split_k_slices, tc_setting
from tinygrad.device.registry import Device
from tinygrad.device.runtime import Allocator, AsyncCopyIn, Buffer, Compiled, CopiesBetween, HostMemory, KernelLaunch, Program, Views
from tinygrad.engine import search
from tinygrad.engine.buffers import buffer_of, buffers  # noqa: F401  (buffers: re-exported, as tensor.py and disk.py reach them here)
from tinygrad.engine.memory import RELEASE_AFTER_BYTES, release_dead
from tinygrad.engine.program_cache import cached_program
from tinygrad.helpers import BEAM, CAPTURING, DEBUG, IMAGE, JITBEAM, NOOPT, ContextVar, GlobalCounters, colored
from tinygrad.renderer import Renderer
from tinygrad.schedule.kernelize import ScheduleItem, SplitPolicy
from tinygrad.schedule.split_k import MatmulShape
from tinygrad.uop.ops import Ops, UOp

# tinygrad.viz installs its recorder here when VIZ is on (told of each kernel compiled and each kernel/copy run); None: nothing
recorder: Any = None


class CompiledRunner:
  """A kernel compiled and loaded for one device instance."""

  def __init__(self, spec: ProgramSpec, device: Compiled, renderer: Renderer, lib: bytes | None = None):
    self.spec, self.device = spec, device
    self.lib = lib if lib is not None else spec.lib if spec.lib is not None else renderer.compiler.compile_cached(spec.src)
    self.program: Program = device.runtime(spec.name, self.lib) if device.runtime is not None else _noop
    if recorder is not None: recorder.compiled(spec, self.lib, renderer)
    else: self.spec = spec.runnable()  # (VIZ's recorder knows the program by its spec: kept whole while it records)
    # worked out once: a TinyJit replays this call for every kernel of every step
    # (the thread index, codegen/threads.py, is not a value of ours: the device passes it to each thread)
    self._var_names = tuple(v.arg[0] for v in spec.vars if v.arg[0] != "core_id")
    self._vals_of = _values_getter(self._var_names)
    self._static_dims = spec.launch_dims({}) if all(isinstance(x, int) for x in (*spec.global_size, *spec.local_size)) else None

  def launch(self, bufs: list[Buffer], var_vals: dict[str, int] | None = None) -> KernelLaunch:
    """The program's arguments for these buffers and var values (what a device graph records)."""
    var_vals = var_vals or {}
    if (unbound := [n for n in self._var_names if n not in var_vals]):
      # (a RuntimeError with tinygrad's word, not the KeyError of the lookup)
      raise RuntimeError(f"unbound Variable(s) {unbound} used by kernel {self.spec.name}: bind a value first (v.bind(n))")
    vals = self._vals_of(var_vals)
    global_size, local_size = self._static_dims or self.spec.launch_dims(var_vals)
    # buffers whose every access was simplified away (a view that reads only padding) are not parameters
    params = bufs if len(self.spec.globals) == len(bufs) else [bufs[i] for i in self.spec.globals]
    return KernelLaunch(self.program, tuple(b.opaque for b in params), global_size, local_size, vals)

  def relaunch(self, prev: KernelLaunch, var_vals: dict[str, int]) -> KernelLaunch:
    """`prev` (a launch of this kernel) with these var values, its buffers kept; `prev` itself when nothing changes. A
    device graph's replays rebuild only this for the launches that just the var values change."""
    vals = self._vals_of(var_vals)
    if self._static_dims is not None:  # (prev has them too: launch gave it them)
      return prev if vals == prev.vals else KernelLaunch(prev.program, prev.bufs, prev.global_size, prev.local_size, vals)
    global_size, local_size = self.spec.launch_dims(var_vals)
    if vals == prev.vals and global_size == prev.global_size and local_size == prev.local_size: return prev
    return KernelLaunch(prev.program, prev.bufs, global_size, local_size, vals)

  def __call__(self, bufs: list[Buffer], var_vals: dict[str, int] | None = None, wait: bool = False) -> float | None:
    lc = self.launch(bufs, var_vals)
    return self.program(*lc.bufs, global_size=lc.global_size, local_size=lc.local_size, vals=lc.vals, wait=wait)

  @property
  def varies(self) -> bool:
    """True when var values change its launches (parameters or launch sizes)."""
    return bool(self.spec.vars) or not all(isinstance(x, int) for x in (*self.spec.global_size, *self.spec.local_size))


def _noop(*args: Any, **kwargs: Any) -> float: return 0.0


def _values_getter(names: tuple[str, ...]) -> Callable[[dict[str, int]], tuple[int, ...]]:
  """A function from var values to the tuple of those named, in order (a replay's relaunch calls it for every varying kernel)."""
  if not names: return lambda var_vals: ()
  if len(names) == 1:
    name = names[0]
    return lambda var_vals: (var_vals[name],)
  return operator.itemgetter(*names)


_runner_cache: dict[tuple, CompiledRunner] = {}


def _renders_for_gpu(device: str) -> bool:
  try: return Device.renderer(device).has_local
  except Exception:  # noqa: BLE001  no renderer for this device (DISK...): nothing to tune for
    return False


def _matmul_split(device: str, mm: MatmulShape) -> int:
  return split_k_slices(Device.renderer(device), mm.m, mm.n, mm.batch, mm.k, mm.dtype_in)


def split_policy() -> SplitPolicy:
  """How the scheduler splits big reductions for the devices here (schedule/kernelize.py): the GPU split where the device's
  renderer is GPU-style, except rows that codegen's GROUP heuristic reduces in one kernel; tensor-core matmuls with few output
  tiles in K slices (schedule/split_k.py), as many as the renderer's compute units want."""
  return SplitPolicy(_renders_for_gpu, bool(GROUP_REDUCE.value), GROUP_MAX_OUTPUTS, _matmul_split, _packs_panels)


def _packs_panels(device: str) -> bool:
  try: return not Device.renderer(device).tensor_cores
  except Exception:  # noqa: BLE001  no renderer for this device (DISK...): as before, the rewrite finds no matmul to pack
    return True


def beam_width() -> int:
  """The beam width in force for the kernel being compiled now: JITBEAM while a TinyJit captures, else BEAM."""
  if any(c.jit for c in capturing) and JITBEAM.value: return int(JITBEAM.value)
  return int(BEAM.value)


def opt_setting() -> tuple[int, ...]:
  """What decides the opts of a kernel beyond its AST and renderer (part of the compiled-runner cache key)."""
  return int(NOOPT.value), beam_width(), int(IMAGE.value), *tc_setting()


def _program(ast: UOp, renderer: Renderer) -> ProgramSpec:
  beam = beam_width()
  lower = lambda: get_program(ast, renderer, search.choose_opts(ast, renderer, beam))  # noqa: E731
  return cached_program(ast, renderer, opt_setting(), beam, lower, watched=recorder is not None)


def _runner_key(device: str, ast: UOp, renderer: Renderer) -> tuple:
  # NOOPT/BEAM are in the key: a TinyJit capture under JITBEAM recompiles the kernels its first call ran
  return (ast, device, renderer.device, renderer.name, renderer.arch, opt_setting())


def get_runner(device: str, ast: UOp) -> CompiledRunner:
  renderer = Device.renderer(device)
  key = _runner_key(device, ast, renderer)
  if (runner := _runner_cache.get(key)) is None:
    built = _take_ahead(key)
    spec, lib = built if built is not None else (_program(ast, renderer), None)
    runner = _runner_cache[key] = CompiledRunner(spec, Device[device], renderer, lib)
  return runner


# kernels handed to the compile pool before their first use (engine/ahead.py): runner key -> the pool's (ok, (program, binary))
_ahead: dict[tuple, Future] = {}


def _take_ahead(key: tuple) -> tuple[ProgramSpec, bytes] | None:
  """The program and binary built ahead for this runner key (waiting for it), or None: none was, or building it failed (then
  it is lowered here, where its error, if any, is raised)."""
  if (fut := _ahead.pop(key, None)) is None: return None
  try: ok, res = fut.result()
  except Exception: return None  # noqa: BLE001  (a worker that died: lowered here)
  return res if ok else None


_compile_thread: ThreadPoolExecutor | None = None


def _compile_ahead(items: list[ScheduleItem]) -> None:
  """Lower the schedule's new kernels here and compile each on a worker thread as soon as it is lowered: a compiler that
  releases the GIL (LLVM through llvmlite, NVRTC) compiles one kernel while Python lowers the next. The runners are made once
  every compile is done (loading a program never overlaps a compile). Several new kernels and a pool of compile processes
  (PARALLEL_COMPILE, workers.py): each is lowered and compiled in one of those processes instead, in parallel."""
  global _compile_thread
  new: dict[tuple, tuple[UOp, str, Renderer]] = {}
  for si in items:
    if si.ast.op is Ops.COPY: continue
    device = str(si.bufs[0].device)
    renderer = Device.renderer(device)
    if (key := _runner_key(device, si.ast, renderer)) not in _runner_cache: new.setdefault(key, (si.ast, device, renderer))
  ahead = {key: done for key in list(new) if (done := _take_ahead(key)) is not None}  # built in the pool beforehand (build_ahead)
  for key in ahead: del new[key]
  from tinygrad.workers import pool_started
  enough = len(new) >= (PARALLEL_MIN_KERNELS.value if pool_started() else PARALLEL_START_KERNELS)
  built = _build_in_pool(list(new.values())) if enough else [None] * len(new)
  todo: dict[tuple, tuple[ProgramSpec, str, Renderer, Future | bytes | None]] = {}
  for key, (spec, lib) in ahead.items(): todo[key] = (spec, str(key[1]), Device.renderer(key[1]), lib)
  for (key, (ast, device, renderer)), done in zip(new.items(), built):
    if done is not None:
      todo[key] = (done[0], device, renderer, done[1])
      continue
    spec = _program(ast, renderer)
    if _compile_thread is None: _compile_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tinygrad-compile")
    todo[key] = (spec, device, renderer, None if spec.lib is not None else _compile_thread.submit(renderer.compiler.compile_cached, spec.src))
  libs = {key: spec.lib if lib is None else lib if isinstance(lib, bytes) else lib.result() for key, (spec, _, _, lib) in todo.items()}
  for key, (spec, device, renderer, _) in todo.items(): _runner_cache[key] = CompiledRunner(spec, Device[device], renderer, libs[key])


# fewer new kernels than this are lowered here: handing them to the pool costs more than it saves. H200 (16 cores), cold TTFT
# of bench/llm_ttft.py: 2 -> Llama-1B 3.22 s, SmolLM2 3.37 s; 4 -> 2.82 s, 2.94 s (bench/results/h200/*parallel_min*)
PARALLEL_MIN_KERNELS = ContextVar("PARALLEL_MIN_KERNELS", 4)
# starting the pool's processes costs about a second: a schedule starts it only with this many new kernels (a model's first
# layer, a training step), unless prestart() already did (the llm CLI does, while it loads the model)
PARALLEL_START_KERNELS = 16


def lower_and_compile(ast: UOp, renderer: Renderer, settings: dict[str, Any]) -> tuple[ProgramSpec, bytes]:
  """One kernel, in a compile process: its program (opts chosen as here, under this process's Context overrides) and binary."""
  from tinygrad.helpers import Context, ContextVar
  with Context(**{k: v for k, v in settings.items() if k in ContextVar._registry}):
    spec = _program(ast, renderer)
    return spec.runnable(), spec.lib if spec.lib is not None else renderer.compiler.compile_cached(spec.src)


def _build_in_pool(kernels: list[tuple[UOp, str, Renderer]]) -> list[tuple[ProgramSpec, bytes] | None]:
  """(program, binary) per kernel from the compile pool, None for each one it can't do (lowered here instead): no pool, a setting
  the workers don't honour (BEAM searches with its own pool; DEBUG >= 3 and VIZ watch the lowering in this process), or a failure."""
  from tinygrad.helpers import overridden
  from tinygrad.workers import compile_pool
  if DEBUG >= 3 or recorder is not None or beam_width() or (pool := compile_pool()) is None: return [None] * len(kernels)
  settings = overridden()
  try: results = pool.map(lower_and_compile, [(ast, renderer, settings) for ast, _, renderer in kernels])
  except Exception: return [None] * len(kernels)  # noqa: BLE001  something didn't pickle: lower everything here
  return [res if ok else None for ok, res in results]


@dataclass
class ExecItem:
  """A kernel, copy or call with its buffers, ready to run. A "call" runs `call(bufs)`: e.g. a collective of
  tinygrad.distributed, which TinyJit captures and replays like a copy (reading `bufs` anew each time)."""
  kind: str  # "kernel", "copy" or "call"
  bufs: list[Buffer]
  runner: CompiledRunner | None = None
  call: Callable[[list[Buffer]], None] | None = None

  def run(self, var_vals: dict[str, int] | None = None) -> None:
    for b in self.bufs: b.ensure_allocated()
    if self.kind == "copy":
      (copy_buffer if recorder is None else recorder.copy)(self.bufs[0], self.bufs[1])
      return
    if self.call is not None: return self.call(self.bufs)
    assert self.runner is not None
    timing = DEBUG >= 2 or (recorder is not None and recorder.timing)
    elapsed = self.runner(self.bufs, var_vals, wait=timing)
    GlobalCounters.kernel_count += 1
    GlobalCounters.global_ops += self.runner.spec.estimated_ops
    GlobalCounters.global_mem += self.runner.spec.estimated_mem
    if elapsed is not None: GlobalCounters.time_sum_s += elapsed
    if DEBUG >= 2: _print_kernel(self.runner.spec, elapsed or 0.0)
    if recorder is not None: recorder.ran(self, elapsed)


def _print_kernel(spec: ProgramSpec, elapsed: float) -> None:
  gflops = spec.estimated_ops / max(elapsed, 1e-9) * 1e-9
  gbs = spec.estimated_mem / max(elapsed, 1e-9) * 1e-9
  print(f"*** {spec.device:7s} {GlobalCounters.kernel_count:4d} {colored(f'{spec.name:30s}', 'cyan')} "
        f"{elapsed * 1e6:9.2f} us  {gflops:8.2f} GFLOPS {gbs:8.2f} GB/s  {_opts_str(spec)}")


def _opts_str(spec: ProgramSpec) -> str:
  return " ".join(f"{o.op.name}({o.axis},{o.amount})" for o in spec.opts) or "no opts"


def copy_buffer(dest: Buffer, src: Buffer) -> None:
  """Copy between any two devices: device to device when both allocators are of one kind and can, else straight
  from/into host-visible memory, else through a staging buffer."""
  if dest.nbytes != src.nbytes: raise ValueError(f"copy size mismatch: {src} -> {dest}")
  src_alloc, dest_alloc = Device[src.device].allocator, Device[dest.device].allocator
  if type(src_alloc) is type(dest_alloc) and isinstance(dest_alloc, CopiesBetween):
    Device[src.device].synchronize()
    dest_alloc.transfer(dest.opaque, src.opaque, src.nbytes, src_alloc)
  elif isinstance(src_alloc, HostMemory) and src.base is None:
    Device[src.device].synchronize()
    dest.copyin(src_alloc.as_memoryview(src.opaque)[:src.nbytes])
  elif isinstance(dest_alloc, HostMemory) and dest.base is None:
    Device[dest.device].synchronize()
    src.copyout(dest_alloc.as_memoryview(dest.opaque)[:dest.nbytes])
  elif src.nbytes > _chunked_from(dest_alloc) and isinstance(src_alloc, Views) and isinstance(dest_alloc, Views): _copy_in_chunks(dest, src)
  else:
    with _scratch(src.nbytes) as staging:
      src.copyout(staging)
      dest.copyin(staging)
  if DEBUG >= 2: print(f"*** copy {src.device} -> {dest.device} {src.nbytes} bytes")


# PIPELINE_MIN: copies of more bytes than this into a device with page-locked staging (AsyncCopyIn) go through it too, not only
# those past STAGING_BYTES (-1: STAGING_BYTES): a smaller one otherwise goes through pageable scratch memory and a synchronous copy
PIPELINE_MIN = ContextVar("PIPELINE_MIN", -1)


def _chunked_from(dest_alloc: Allocator) -> int:
  return PIPELINE_MIN.value if PIPELINE_MIN.value >= 0 and isinstance(dest_alloc, AsyncCopyIn) else STAGING_BYTES


# a big copy through host memory (a model's weights from DISK to a GPU) goes through one reused staging area, a view of each side
# at a time: a fresh host buffer the size of each tensor costs more to allocate and fault in than reading the file does
STAGING_BYTES = 16 << 20
_staging: memoryview | None = None
_staging_lock = threading.Lock()


def _copy_in_chunks(dest: Buffer, src: Buffer) -> None:
  global _staging
  src_alloc, dest_alloc = Device[src.device].allocator, Device[dest.device].allocator
  assert isinstance(src_alloc, Views) and isinstance(dest_alloc, Views)
  Device[src.device].synchronize()
  if isinstance(dest_alloc, AsyncCopyIn): return _pipelined_copy_in(dest, src, src_alloc, dest_alloc)
  with _staging_lock:
    if _staging is None: _staging = memoryview(bytearray(STAGING_BYTES))
    for off in range(0, src.nbytes, STAGING_BYTES):
      n = min(STAGING_BYTES, src.nbytes - off)
      src_alloc.copyout(_staging[:n], src_alloc.view(src.opaque, off, n))
      dest_alloc.copyin(dest_alloc.view(dest.opaque, off, n), _staging[:n])


def _pipelined_copy_in(dest: Buffer, src: Buffer, src_alloc: Allocator, dest_alloc: Allocator) -> None:
  """Chunks through two of the destination's page-locked staging areas: chunk i is read into one while chunk i-1 is copied
  from the other (H200, Llama-1B's 2.4 GB of weights from the page cache: the copies were 0.8 s of a 2.4 s load, read then send).
  Reading several chunks at once on threads was tried (session 12-13: STAGING_READERS) and loaded no faster on the H200."""
  assert isinstance(src_alloc, Views) and isinstance(dest_alloc, Views) and isinstance(dest_alloc, AsyncCopyIn)
  with _staging_lock:
    areas = dest_alloc.staging_areas(STAGING_BYTES, 2)
    pending: list[Callable[[], None] | None] = [None, None]
    try:
      for i, off in enumerate(range(0, src.nbytes, STAGING_BYTES)):
        n, slot = min(STAGING_BYTES, src.nbytes - off), i % 2
        if (wait := pending[slot]) is not None: wait()  # the copy that last read this area has read it
        pending[slot] = None
        src_alloc.copyout(areas[slot][:n], src_alloc.view(src.opaque, off, n))
        pending[slot] = dest_alloc.copyin_async(dest_alloc.view(dest.opaque, off, n), areas[slot][:n])
    finally:  # the areas are reused by the next copy: nothing may still read them
      for w in pending:
        if w is not None: w()


@contextlib.contextmanager
def _scratch(nbytes: int) -> Iterator[memoryview]:
  """Host memory for one copy: a big one in anonymous pages (the kernel hands out zeroed pages as they are touched; a bytearray
  writes its zeros first)."""
  if nbytes < STAGING_BYTES:
    yield memoryview(bytearray(nbytes))
    return
  m = mmap.mmap(-1, nbytes)
  view = memoryview(m)
  try: yield view
  finally:
    view.release()
    m.close()


def lower_schedule(items: list[ScheduleItem]) -> list[tuple[ExecItem, dict[str, int]]]:
  if sum(1 for si in items if si.ast.op is not Ops.COPY) > 1: _compile_ahead(items)
  out = []
  for si in items:
    bufs = [buffer_of(b) for b in si.bufs]
    if si.ast.op is Ops.COPY: out.append((ExecItem("copy", bufs), si.var_vals))
    else: out.append((ExecItem("kernel", bufs, get_runner(bufs[0].device, si.ast)), si.var_vals))
  return out


@dataclass
class Capture:
  """What TinyJit records while it captures: every item that runs, and the buffers those items allocated (their contents
  before the capture can't matter, so engine/memory.py may let them share memory)."""
  items: list[tuple[ExecItem, dict[str, int]]] = field(default_factory=list)
  fresh: set[int] = field(default_factory=set)  # id()s of Buffers, kept alive by `items`
  unreleased: int = 0  # bytes of fresh buffers allocated since the last release_dead
  jit: bool = True  # a TinyJit's capture (JITBEAM applies), not tinygrad/reuse.py recording a call
  replayed: bool = False  # TinyJit's own capture, whose items replace the function on later calls: reading data then is an error
  # release_dead's progress: items scanned, fresh buffers not yet released (by id()), bases of views among the items
  scanned: int = 0
  pending: dict[int, Buffer] = field(default_factory=dict)
  view_bases: set[int] = field(default_factory=set)


capturing: list[Capture] = []
JIT_PLAN = ContextVar("JIT_PLAN", 1)  # JIT_PLAN=0: every captured intermediate keeps its own memory (engine/memory.py)


def _capture() -> Capture | None:
  """The capture that records the kernels run now: the innermost one, unless Context(CAPTURING=0) keeps them out of it."""
  return capturing[-1] if capturing and CAPTURING.value else None


def is_zero_fill(si: ScheduleItem) -> bool:
  """A kernel that only stores the constant 0 into its one buffer (`Tensor.zeros(...).contiguous()`)."""
  if si.ast.op is not Ops.SINK or len(si.bufs) != 1: return False
  nodes = si.ast.toposort()
  stores = [n for n in nodes if n.op is Ops.STORE]
  def zero(v: UOp) -> bool: return v.op is Ops.CONST and v.arg == 0 and math.copysign(1.0, v.arg) > 0  # not -0.0
  return bool(stores) and all(n.op is not Ops.LOAD for n in nodes) and all(zero(s.src[1]) for s in stores)


# dry runs (engine/ahead.py): while one is open, a schedule is kept here instead of run (nothing lowered, allocated or executed)
collecting: list[list[ScheduleItem]] = []


def run_schedule(items: list[ScheduleItem]) -> None:
  if collecting: return collecting[-1].extend(items)
  st = time.perf_counter()
  # a zero fill of a buffer not allocated yet is an allocation of zeroed memory where the device has it: no kernel, and no
  # pages touched until they are used (not while TinyJit captures: a replay must fill again)
  if not _capture(): items = [si for si in items if not (si.ast.op is not Ops.COPY and is_zero_fill(si) and buffer_of(si.bufs[0]).allocate_zeroed())]
  run_exec_items(lower_schedule(items))
  if DEBUG >= 3: print(f"ran {len(items)} items in {(time.perf_counter() - st) * 1e3:.2f} ms")


def run_exec_items(exec_items: list[tuple[ExecItem, dict[str, int]]]) -> None:
  """Run lowered items in order; while TinyJit captures, they are recorded for its replays."""
  cap = _capture()
  for ei, var_vals in exec_items:
    if cap is not None:
      fresh = [b for b in ei.bufs if b.base is None and not b.is_allocated()]
      cap.fresh.update(id(b) for b in fresh)
      cap.unreleased += sum(b.nbytes for b in fresh)
    ei.run(var_vals)
  if cap is not None:
    cap.items.extend(exec_items)
    # what the schedules so far no longer need is free for the next ones (checked once enough was allocated: it scans the capture)
    if JIT_PLAN.value and cap.unreleased >= RELEASE_AFTER_BYTES:
      release_dead(cap)
      cap.unreleased = 0
