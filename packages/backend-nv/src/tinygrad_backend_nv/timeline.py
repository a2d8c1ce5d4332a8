"""Block timelines of generated kernels on the GPU (KERNEL_TIMELINE=1, sm_90+; bench/gpu_timeline.py prints them).

Event timers around a device graph give a step's time, not where it goes between kernels: how long a kernel's blocks wait for
the one before, how long its blocks run, how late its last block ends. With KERNEL_TIMELINE=1 the CUDA renderer has every block
stamp %globaltimer when it starts, when its grid wait returns and when all its threads are done, and thread 0 append a record
to the buffer of the open `Timeline` (each module's `tg_timeline` pointer, set by the runtime): the kernel (a CRC of its name),
which launch of that module it is, the block, its SM, the three stamps. Off by default: the block-end barrier, the atomics and
the stores cost time (compare timelines with timelines, not with plain steps).
"""
from __future__ import annotations

import ctypes
import statistics
import weakref
import zlib
from dataclasses import dataclass
from typing import Any

from tinygrad.device.plugin import ContextVar

KERNEL_TIMELINE = ContextVar("KERNEL_TIMELINE", 0)
TIMELINE_SYMBOL = "tg_timeline"  # the module's pointer to the open Timeline's buffer (0: record nothing)
RECORD_WORDS = 6  # id << 32 | launch, sm << 32 | block, start, after the wait, end, recorded (ns of %globaltimer)
HEADER_WORDS = 2  # records appended so far, capacity

NOW_HELPER = ('static __device__ __forceinline__ unsigned long long tg_now() {\n'
              '  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;\n}')
# the stamps live in shared memory, written by thread 0: held in registers through the kernel they cost registers (a product
# kernel of 40 went to 44, one block less an SM)
START = ("  __shared__ unsigned long long tg_stamps[2];\n"
         "  if (threadIdx.x + threadIdx.y + threadIdx.z == 0) tg_stamps[0] = tg_stamps[1] = tg_now();\n")
AFTER_WAIT = "  if (threadIdx.x + threadIdx.y + threadIdx.z == 0) tg_stamps[1] = tg_now();\n"
SHARED_BYTES = 16  # what START adds to a block's shared memory


def kernel_id(name: str) -> int: return zlib.crc32(name.encode())


def declarations() -> str:
  return (f'extern "C" __device__ unsigned long long *{TIMELINE_SYMBOL} = 0;\n'
          'extern "C" __device__ unsigned tg_timeline_blocks_done = 0;\n')


def block_end(name: str) -> str:
  """Source for the end of a kernel's body: once every thread of the block is there, thread 0 appends the block's record.
  The launch number counts the module's blocks done before (the same kernel's launches in a graph are apart, in order)."""
  return (f"  __syncthreads();\n"
          f"  if (threadIdx.x + threadIdx.y + threadIdx.z == 0 && {TIMELINE_SYMBOL} != 0) {{\n"
          f"    unsigned long long t2 = tg_now(); unsigned sm; asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(sm));\n"
          f"    unsigned blocks = gridDim.x * gridDim.y * gridDim.z, block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
          f"    unsigned launch = atomicAdd(&tg_timeline_blocks_done, 1u) / blocks;\n"
          f"    unsigned long long i = atomicAdd({TIMELINE_SYMBOL}, 1ull);\n"
          f"    if (i < {TIMELINE_SYMBOL}[1]) {{\n"
          f"      unsigned long long *r = {TIMELINE_SYMBOL} + {HEADER_WORDS} + i * {RECORD_WORDS};\n"
          f"      r[0] = ({kernel_id(name)}ull << 32) | launch; r[1] = ((unsigned long long)sm << 32) | block;\n"
          f"      r[2] = tg_stamps[0]; r[3] = tg_stamps[1]; r[4] = t2; r[5] = tg_now();\n"
          f"    }}\n  }}\n")


# modules loaded with a timeline pointer (runtime.CUDAProgram registers them): an opened Timeline points them all at its buffer
_modules: weakref.WeakSet = weakref.WeakSet()
_open: list[Timeline] = []


def register(program: Any) -> None:
  """A CUDAProgram whose module has TIMELINE_SYMBOL: pointed at the open Timeline now, or when one opens."""
  _modules.add(program)
  if _open: _open[-1]._point(program)


def registers(program: Any) -> int:
  """Registers a thread of a loaded CUDAProgram's kernel."""
  from tinygrad_backend_nv.runtime import check, cu
  return int(check(cu.cuFuncGetAttribute(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, program.fn), "cuFuncGetAttribute"))


@dataclass
class Launch:
  """One launch of a kernel as its blocks recorded it (ns of %globaltimer)."""
  name: str
  launch: int
  blocks: int
  sms: int
  first_start: int
  first_released: int  # the first block past its grid wait
  last_released: int
  median_end: int
  last_end: int
  last_recorded: int  # the last block's stamp after its record's atomics (its exit follows)


class Timeline:
  """A record buffer on a CUDA device that every module with a timeline pointer writes to while it is open.

    with Timeline(Device["CUDA"]) as tl:   # kernels rendered with KERNEL_TIMELINE=1
      ...; tl.reset(); run(); Device["CUDA"].synchronize()
      launches = tl.launches({kernel_id(n): n for n in names})
  """

  def __init__(self, dev: Any, capacity: int = 1 << 20):
    from tinygrad_backend_nv.runtime import _use, check, cu
    self._cu, self._check, self.dev, self.capacity = cu, check, dev, capacity
    _use(dev.ctx)
    self.nbytes = (HEADER_WORDS + capacity * RECORD_WORDS) * 8
    self.ptr = int(check(cu.cuMemAlloc(self.nbytes), "cuMemAlloc (timeline)"))
    self.reset()

  def __enter__(self) -> Timeline:
    _open.append(self)
    for p in list(_modules): self._point(p)
    return self

  def __exit__(self, *exc: object) -> None:
    _open.remove(self)
    for p in list(_modules): self._point(p, 0)
    self._check(self._cu.cuMemFree(self.ptr), "cuMemFree (timeline)")

  def _point(self, program: Any, address: int | None = None) -> None:
    from tinygrad_backend_nv.runtime import _use
    _use(program.ctx)
    at, _ = self._check(self._cu.cuModuleGetGlobal(program.module, TIMELINE_SYMBOL.encode()), f"cuModuleGetGlobal({TIMELINE_SYMBOL})")
    value = ctypes.c_uint64(self.ptr if address is None else address)
    self._check(self._cu.cuMemcpyHtoD(at, ctypes.addressof(value), 8), "cuMemcpyHtoD (timeline pointer)")

  def reset(self) -> None:
    """Forget what was recorded (the device must be idle)."""
    header = (ctypes.c_uint64 * HEADER_WORDS)(0, self.capacity)
    self._check(self._cu.cuMemcpyHtoD(self.ptr, ctypes.addressof(header), ctypes.sizeof(header)), "cuMemcpyHtoD (timeline)")

  def records(self) -> list[tuple[int, ...]]:
    """(kernel id, launch, sm, block, start, released, end, recorded) per block recorded since reset (the device must be idle).
    `recorded`: after the record's atomics, when the block is about to exit (what the grid's completion waits for)."""
    count = ctypes.c_uint64()
    self._check(self._cu.cuMemcpyDtoH(ctypes.addressof(count), self.ptr, 8), "cuMemcpyDtoH (timeline)")
    n = min(int(count.value), self.capacity)
    words = (ctypes.c_uint64 * (n * RECORD_WORDS))()
    if n: self._check(self._cu.cuMemcpyDtoH(ctypes.addressof(words), self.ptr + HEADER_WORDS * 8, ctypes.sizeof(words)), "cuMemcpyDtoH (timeline)")
    out: list[tuple[int, ...]] = []
    for i in range(n):
      a, b, t0, t1, t2, t3 = words[i * RECORD_WORDS:(i + 1) * RECORD_WORDS]
      out.append((a >> 32, a & 0xFFFFFFFF, b >> 32, b & 0xFFFFFFFF, t0, t1, t2, t3))
    return out


def launches(records: list[tuple[int, ...]], names: dict[int, str]) -> list[Launch]:
  """The records grouped by launch, in the order the launches were released."""
  groups: dict[tuple[int, int], list[tuple[int, ...]]] = {}
  for r in records: groups.setdefault((r[0], r[1]), []).append(r)
  out = []
  for (kid, launch), rs in groups.items():
    ends = [r[6] for r in rs]
    out.append(Launch(names.get(kid, f"kernel_{kid:08x}"), launch, len(rs), len({r[2] for r in rs}), min(r[4] for r in rs),
                      min(r[5] for r in rs), max(r[5] for r in rs), int(statistics.median(ends)), max(ends), max(r[7] for r in rs)))
  return sorted(out, key=lambda x: (x.first_released, x.first_start))


def phases(seq: list[Launch]) -> list[dict[str, Any]]:
  """Per launch (in release order), in us: `wait` from the launch before's last block being done (its record written) to this
  one's first release (the grid dependency's latency), `run` from that release to its median block's end, `tail` from there to
  its last block's end, `record` what the last block's record took (the timeline's own cost, inside the next launch's wait
  otherwise), `span` from the end of the launch before to its own end (its share of the chain), `release_spread` from its
  first block's release to its last's (blocks that became resident only later, as the SMs drained)."""
  out = []
  for i, x in enumerate(seq):
    prev_end, prev_done = (seq[i - 1].last_end, seq[i - 1].last_recorded) if i else (x.first_start, x.first_start)
    out.append({"name": x.name, "blocks": x.blocks, "sms": x.sms, "wait": (x.first_released - prev_done) / 1e3,
                "run": (x.median_end - x.first_released) / 1e3, "tail": (x.last_end - x.median_end) / 1e3,
                "record": (x.last_recorded - x.last_end) / 1e3, "span": (x.last_end - prev_end) / 1e3,
                "release_spread": (x.last_released - x.first_released) / 1e3})
  return out


def by_kernel(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """phases() summed and averaged per kernel name, the largest total span first."""
  acc: dict[str, list[dict[str, Any]]] = {}
  for r in rows: acc.setdefault(r["name"], []).append(r)
  out = []
  for name, rs in acc.items():
    out.append({"name": name, "launches": len(rs), "blocks": rs[0]["blocks"], "span_total": round(sum(r["span"] for r in rs), 2),
                **{f"{k}_mean": round(statistics.fmean(r[k] for r in rs), 3) for k in ("wait", "run", "tail", "record", "span", "release_spread")}})
  return sorted(out, key=lambda r: -r["span_total"])
