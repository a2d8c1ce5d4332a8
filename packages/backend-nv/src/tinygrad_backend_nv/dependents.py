"""When a kernel lets the kernel after it launch (sm_90+: `griddepcontrol.launch_dependents`, PTX ISA "griddepcontrol").

In a CUDA graph with programmatic edges (graph.py) the next kernel's blocks may be scheduled once every block of this one has
issued the trigger (or exited); they then run up to their own `griddepcontrol.wait`, which still waits for this whole grid to
finish and its memory to be visible. So where the trigger sits changes only when the next blocks become resident, never what
they read after their wait.

By default every kernel triggers at its start. A kernel that loads before its wait (codegen/early_loads.py: q/k/v and o of a
decode step) then issues those loads while the kernel before still streams at full rate: session 34's timelines (bench/README.md)
show the early loads shortening q/k/v and o by about as much as they lengthen the down product and the attention before them.
`LAUNCH_LATE=1` moves a streaming kernel's trigger to after its matrix loads (the loop around the last of them): the next
kernel's early loads then fill the memory pipe while this one drains and reduces. Measured on an H100 (bench/README.md, session
35): Llama-1B's decode step the same within 0.1% (the down product 1.4 us a layer shorter, q/k/v as much longer: the memory is
as busy at the boundary as inside the kernels); `2` (every kernel after its last global load) 19% slower, what launching early
is worth; `3` (the decode attention after its first loads past its wait) 0.3% slower. So the default stays at the start.

ptxas schedules a plain trigger (SASS PREEXIT, no operands) at the kernel's start wherever it is in the source, so the late one
is predicated on the last loaded value (both predicates trigger). That value is kept in a variable the loop assigns: a trigger
inside the loop that tests its step (in C, as an asm operand, or counted inside the asm) made NVVM unroll the loop whole (the
down product 47 -> 56 registers, the gate/up product 60 -> 70: a third wave).
"""
from __future__ import annotations

from tinygrad.device.plugin import GRID_WAIT, ContextVar, Ops, UOp

from tinygrad_backend_nv.streams import indexed_buffer

LAUNCH_LATE = ContextVar("LAUNCH_LATE", 0)  # 1: a streaming kernel triggers its dependents after its matrix loads, not at its start; 2: any kernel after its last global load
TRIGGER = 'asm volatile("griddepcontrol.launch_dependents;");'
LAST_WORD = "tg_last_streamed"  # the last streamed load's first word, for the trigger after its loop


def late_trigger(uops: list[UOp], streamed: set[UOp], spread: bool = False) -> tuple[UOp, UOp | None] | None:
  """(the last streamed load in program order, or with LAUNCH_LATE=2 the last global load of any kernel; the outermost loop
  around it or None) where LAUNCH_LATE is on; None: the trigger stays at the kernel's start. LAUNCH_LATE=3: only a kernel that
  asks for an SM a block (`spread`: few latency-bound blocks, the decode attention), after its first loads past the grid wait."""
  if LAUNCH_LATE.value == 3: return _after_first_round_trip(uops) if spread else None
  if not LAUNCH_LATE.value or (LAUNCH_LATE.value == 1 and not streamed): return None
  copied = _copied(uops)
  found: tuple[UOp, UOp | None] | None = None
  open_ranges: list[UOp] = []
  for u in uops:
    if u.op is Ops.RANGE: open_ranges.append(u)
    elif u.op is Ops.END and open_ranges: open_ranges.pop()
    elif u in streamed or (LAUNCH_LATE.value == 2 and _global_load(u) and u not in copied): found = (u, open_ranges[0] if open_ranges else None)
  return found


def _copied(uops: list[UOp]) -> set[UOp]:
  """Loads that are the source of an asynchronous copy (no value in registers to predicate on)."""
  return {u.src[1] for u in uops if u.op is Ops.STORE and u.arg == "async"}


def _after_first_round_trip(uops: list[UOp]) -> tuple[UOp, None] | None:
  """The last global load, outside loops, between the kernel's grid wait and the next barrier after it."""
  waited, depth, found, copied = False, 0, None, _copied(uops)
  for u in uops:
    if u.op is Ops.BARRIER and u.arg == GRID_WAIT: waited = True
    elif waited and u.op is Ops.BARRIER: break
    elif u.op is Ops.RANGE: depth += 1
    elif u.op is Ops.END: depth -= 1
    elif waited and depth == 0 and _global_load(u) and u not in copied: found = (u, None)
  return found


def _global_load(u: UOp) -> bool:
  """A load of at most 16 bytes from a kernel parameter (global memory)."""
  return u.op is Ops.LOAD and u.arg is None and bool(u.src) and indexed_buffer(u.src[0]).op is Ops.DEFINE_GLOBAL \
    and u.dtype.itemsize * u.dtype.count <= 16


def predicated_trigger(word: str) -> str:
  """The trigger, after the value `word` (an unsigned int) is loaded: ptxas can't move it above that load's completion."""
  return ('asm volatile("{\\n .reg .pred q;\\n setp.ne.u32 q, %0, 0;\\n @q griddepcontrol.launch_dependents;\\n'
          f' @!q griddepcontrol.launch_dependents;\\n}}" :: "r"({word}));')
