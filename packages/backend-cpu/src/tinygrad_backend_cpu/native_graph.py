"""TinyJit's launches on the CPU replayed by one native function per thread, not one Python call per kernel.

A decode step of a small LLM is ~600 kernels, many of a few microseconds. Launched from Python each costs a ctypes call,
and each kernel split over threads (THREAD) two lock hand-offs to wake a worker and wait for it (tens of microseconds in a
VM). Here the whole graph is one generated LLVM function, `tg_graph(table, core, counter)`, that every thread of the team
runs once per replay: it calls each kernel in order, through function pointers and arguments read from `table`, a kernel
split over threads on every core (its core id as the last argument) and any other kernel on core 0 only; where the
threads' work meets (before and after a split kernel) they wait at a spinning barrier on `counter`. A replay is thus one
wake-up of the team, not one per split kernel.

The IR depends only on the launches' shapes (buffer and value counts, thread counts), never on addresses, so it compiles
once per graph shape and comes from the compile cache afterwards. Buffer addresses and var values live in `table` (one
64-bit slot each), which `update` rewrites in place."""
from __future__ import annotations

import ctypes
import platform
from collections.abc import Callable

from tinygrad.device.plugin import KernelLaunch

from tinygrad_backend_cpu.threadpool import run_parallel

# (buffers, values, threads) of one launch: what the generated code depends on
Shape = tuple[int, int, int]


def launch_shape(launch: KernelLaunch) -> Shape: return (len(launch.bufs), len(launch.vals), max(launch.global_size[0], 1))


# spins at a barrier before the waiting thread starts giving its core away (sched_yield every YIELD_EVERY spins after that).
# A pure spin is pathological where the OS put both threads on one core (a VM's 2 vCPUs, a busy machine): the spinner then
# burns its whole time slice while the thread it waits for can't run. Measured on the 2-core VM (bench/README.md, session 13):
# 512^2 matmuls under TinyJit ran at 70-100 GFLOP/s in whole runs of 10 calls, at random, instead of 280-330.
SPINS_BEFORE_YIELD = 2048
YIELD_EVERY = 16
SYS_SCHED_YIELD_X86_64 = 24  # Linux x86-64 syscall number (arch/x86/entry/syscalls/syscall_64.tbl)


def _barrier_ir(x86: bool, linux: bool = True) -> str:
  """Each thread adds one to the counter, then spins until all `target` arrivals (threads x barriers so far) are in. The
  counter only grows within a replay (reset to 0 before it), so one counter serves every barrier. On x86-64 Linux a thread
  that has spun SPINS_BEFORE_YIELD times yields its core every YIELD_EVERY spins (a raw syscall: the kernels link nothing)."""
  pause = "  call void @llvm.x86.sse2.pause()\n" if x86 else ""
  decl = "declare void @llvm.x86.sse2.pause()\n" if x86 else ""
  yields = x86 and linux
  head = "  %n = phi i32 [ 0, %entry ], [ %n1, %wait ]" + (", [ %n1, %yield ]" if yields else "") + "\n"
  tail = "  br label %spin\n"
  if yields:
    tail = (f"  %late = icmp uge i32 %n1, {SPINS_BEFORE_YIELD}\n  %lo = and i32 %n1, {YIELD_EVERY - 1}\n"
            "  %turn = icmp eq i32 %lo, 0\n  %go = and i1 %late, %turn\n  br i1 %go, label %yield, label %spin\n"
            f"yield:\n  %r = call i64 asm sideeffect \"syscall\", \"={{rax}},0,~{{rcx}},~{{r11}},~{{memory}}\"(i64 {SYS_SCHED_YIELD_X86_64})\n"
            "  br label %spin\n")
  return (f"{decl}define internal void @tg_barrier(ptr %ctr, i32 %target) {{\n"
          "entry:\n  %old = atomicrmw add ptr %ctr, i32 1 seq_cst, align 4\n  br label %spin\n"
          f"spin:\n{head}  %now = load atomic i32, ptr %ctr acquire, align 4\n  %done = icmp uge i32 %now, %target\n"
          f"  br i1 %done, label %out, label %wait\nwait:\n{pause}  %n1 = add i32 %n, 1\n{tail}out:\n  ret void\n}}\n")


def render_graph(shapes: list[Shape], team: int, x86: bool = True, linux: bool = True) -> str:
  """The LLVM IR of tg_graph for launches of these shapes, run by `team` threads. Table layout per launch: the kernel's
  address, its buffers' addresses, then its values (i32 in the low half of a 64-bit slot)."""
  lines = ["define void @tg_graph(ptr %tab, i32 %core, ptr %ctr) {", "entry:", "  %is0 = icmp eq i32 %core, 0", "  br label %L0"]
  slot, barriers = 0, 0
  for i, (nb, nv, threads) in enumerate(shapes):
    lines.append(f"L{i}:")
    if threads >= team: lines.append(f"  br label %R{i}")
    else:
      cond = "%is0" if threads == 1 else f"%c{i}"
      if threads > 1: lines.append(f"  %c{i} = icmp ult i32 %core, {threads}")
      lines.append(f"  br i1 {cond}, label %R{i}, label %E{i}")
    lines.append(f"R{i}:")
    args = []
    for k in range(1 + nb + nv):
      lines.append(f"  %p{i}_{k} = getelementptr inbounds i64, ptr %tab, i64 {slot + k}")
      ty = "ptr" if k <= nb else "i32"
      lines.append(f"  %a{i}_{k} = load {ty}, ptr %p{i}_{k}, align 8")
      if k: args.append(f"{ty} %a{i}_{k}")
    if threads > 1: args.append("i32 %core")
    lines.append(f"  call void %a{i}_0({', '.join(args)})")
    lines.append(f"  br label %E{i}")
    lines.append(f"E{i}:")
    slot += 1 + nb + nv
    # threads meet where a split kernel starts or ends; kernels that all run on core 0 follow each other without a barrier
    nxt = shapes[i + 1][2] if i + 1 < len(shapes) else None
    if team > 1 and nxt is not None and (threads > 1 or nxt > 1):
      barriers += 1
      lines.append(f"  call void @tg_barrier(ptr %ctr, i32 {team * barriers})")
    lines.append(f"  br label %L{i + 1}" if nxt is not None else "  ret void")
  lines.append("}")
  return "\n".join(lines) + "\n" + _barrier_ir(x86, linux)


def table_slots(launch: KernelLaunch) -> list[int]:
  """The launch's table entries: kernel address, buffer addresses, values (as unsigned 64-bit slots)."""
  prog: object = launch.program
  return [prog.address, *(b.addr for b in launch.bufs), *(v & 0xFFFFFFFF for v in launch.vals)]  # type: ignore[attr-defined]


class NativeCPUGraph:
  """A GraphExec (see tinygrad.device.runtime) whose replay is tg_graph on each thread of the team."""

  def __init__(self, launches: list[KernelLaunch], compile_lib: Callable[[str], bytes], load: Callable[[str, bytes], object]):
    if any(not hasattr(lc.program, "address") for lc in launches): raise NotImplementedError("a CPU graph holds only CPU kernels")
    self._compile_lib, self._load = compile_lib, load
    self.counter = (ctypes.c_uint32 * 16)()  # a cache line of its own
    self._set(list(launches))

  def _set(self, launches: list[KernelLaunch]) -> None:
    """Lay out the table for these launches, fill it, and load the code for their shapes."""
    self.launches = launches
    self.team = max(launch_shape(lc)[2] for lc in launches)
    self._offsets: list[int] = []
    n = 0
    for lc in launches:
      self._offsets.append(n)
      n += 1 + len(lc.bufs) + len(lc.vals)
    self.table = (ctypes.c_uint64 * max(n, 1))()
    for i, lc in enumerate(launches): self._write(i, lc)
    self._build()

  def _write(self, i: int, launch: KernelLaunch) -> None:
    o = self._offsets[i]
    for k, v in enumerate(table_slots(launch)): self.table[o + k] = v

  def _build(self) -> None:
    shapes = [launch_shape(lc) for lc in self.launches]
    src = render_graph(shapes, self.team, x86=platform.machine().lower() in ("x86_64", "amd64"), linux=platform.system() == "Linux")
    self.program = self._load("tg_graph", self._compile_lib(src))  # kept: it owns the code's memory
    fxn = self.program.fxn  # type: ignore[attr-defined]
    tab, ctr = ctypes.addressof(self.table), ctypes.addressof(self.counter)
    self._per_core = [(ctypes.c_void_p(tab), ctypes.c_int32(core), ctypes.c_void_p(ctr)) for core in range(self.team)]
    self._run = lambda core: fxn(*self._per_core[core])

  def update(self, i: int, launch: KernelLaunch) -> None:
    old = self.launches[i]
    if launch.program is old.program and launch.bufs is old.bufs and launch.global_size == old.global_size:
      self.launches[i] = launch  # only var values changed (a new position each step): their slots, nothing else
      o = self._offsets[i] + 1 + len(launch.bufs)
      for k, v in enumerate(launch.vals): self.table[o + k] = v & 0xFFFFFFFF
      return None
    if launch_shape(launch) != launch_shape(old):  # another thread count or signature: new code, new layout
      return self._set(self.launches[:i] + [launch] + self.launches[i + 1:])
    self.launches[i] = launch
    self._write(i, launch)

  def __call__(self) -> None:
    self.counter[0] = 0
    if self.team == 1: self._run(0)
    else: run_parallel(self._run, self.team)
