"""What VIZ records while a program runs: each kernel's rewrite steps, its source and disassembly, every run's time.

The recorder is reached only through hooks that are None while VIZ is off (uop/rewrite.py's `tracer`,
engine/realize.py's `recorder`) and through pipeline functions swapped in `install` (codegen/program.py's stages),
so a program without VIZ pays one None check per graph_rewrite and per kernel run, nothing else.
Memory is bounded: steps per kernel, stored graph nodes, matches per step and profile events are capped, and the trace
says what the caps dropped.
"""
from __future__ import annotations

import linecache
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from tinygrad.device.registry import Device
from tinygrad.engine.realize import copy_buffer
from tinygrad.helpers import getenv
from tinygrad.uop import rewrite
from tinygrad.uop.ops import UOp
from tinygrad.uop.rewrite import PatternMatcher
from tinygrad.viz import trace as fmt

LIMITS = {"max_steps_per_kernel": getenv("VIZ_MAX_STEPS", 200), "max_nodes": getenv("VIZ_MAX_NODES", 200_000),
          "max_matches_per_step": getenv("VIZ_MAX_MATCHES", 500), "max_events": getenv("VIZ_MAX_EVENTS", 100_000),
          "max_schedules": 1000}
# codegen/program.py's stages that are not graph_rewrites (those are recorded by the tracer itself)
STAGES = ("apply_opts", "lower_tensor_core", "lower_groups", "to_thread_indices", "split_for_threads", "lower_reduces", "close_loops",
          "vectorize_memory")
# codegen/program.py's calls during which nothing is recorded: BEAM lowers and times many candidates there
PAUSED = ("choose_opts",)


class _RecordingMatcher(PatternMatcher):
  """`pm` for graph_rewrite: rewrites the same, and notes which rule fired on what."""

  def __init__(self, pm: PatternMatcher, on_match: Callable[[UOp, UOp, Any], None]):  # no super().__init__: pm has the rules
    self.pm, self.on_match = pm, on_match

  def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
    if (hit := self.pm.rewrite_with_rule(u, ctx)) is None: return None
    self.on_match(u, hit[0], (hit[1], hit[2]))
    return hit[0]


class Recorder:
  def __init__(self) -> None:
    self.trace = fmt.empty({"argv": sys.argv, "pid": os.getpid(), "created": time.time(), "limits": LIMITS,
                            "profile": os.environ.get("PROFILE", "1") != "0",
                            "dropped": {"steps": 0, "graphs": 0, "matches": 0, "events": 0, "schedules": 0}})
    self.node_ids: dict[UOp, int] = {}  # keeps the recorded UOps alive, so their indices stay valid
    self.rule_ids: dict[Any, int] = {}
    self.kernel_of_ast: dict[UOp, int] = {}
    self.kernel_of_spec: dict[int, int] = {}  # id(ProgramSpec) -> kernel index
    self.current: int | None = None  # the kernel being generated, None: outside any (its rewrites go to the "schedule" group)
    self.outside: int | None = None
    self.t0 = time.perf_counter()
    self.pause = 0  # > 0: inside a PAUSED call
    # PROFILE=0: no timeline, and no wait for each kernel to finish (the run counts are still recorded)
    self.timing = os.environ.get("PROFILE", "1") != "0"

  # --- graphs
  def node(self, u: UOp) -> int | None:
    """The index of `u` in the node table, adding it and whatever it reaches; None once the node cap is hit."""
    if (i := self.node_ids.get(u)) is not None: return i
    new = u.toposort(gate=lambda n: n not in self.node_ids)
    if len(self.node_ids) + len(new) > LIMITS["max_nodes"]: return None
    nodes = self.trace["nodes"]
    for n in new:
      if n in self.node_ids: continue
      self.node_ids[n] = len(nodes)
      arg = "" if n.arg is None else repr(n.arg)
      nodes.append([n.op.name, repr(n.dtype).removeprefix("dtypes."), arg if len(arg) <= 80 else arg[:77] + "...",
                    [self.node_ids[s] for s in n.src]])
    return self.node_ids[u]

  def rule(self, rule: tuple[Any, Any]) -> int:
    """The index of a (pattern, function) rule in the rules table: where its function is, its source line, what it matches."""
    if (i := self.rule_ids.get(rule)) is None:
      pat, fn = rule
      code = getattr(fn, "__code__", None)
      loc = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code else repr(fn)
      text = linecache.getline(code.co_filename, code.co_firstlineno).strip() if code else ""
      ops = "any op" if pat.ops is None else ",".join(sorted(o.name for o in pat.ops))
      i = self.rule_ids[rule] = len(self.trace["rules"])
      self.trace["rules"].append([loc, text[:200], ops])
    return i

  # --- kernels and steps
  def kernel(self, name: str, kind: str = "kernel") -> int:
    self.trace["kernels"].append({"name": name, "kind": kind, "device": "", "src": "", "disasm": "", "opts": [], "ops": 0, "mem": 0,
                                  "global_size": [], "local_size": [], "steps": [], "dropped_steps": 0, "runs": 0, "time_s": 0.0})
    return len(self.trace["kernels"]) - 1

  def _target(self) -> dict[str, Any]:
    if self.current is not None: return self.trace["kernels"][self.current]
    if self.outside is None: self.outside = self.kernel("schedule and other rewrites", "group")
    return self.trace["kernels"][self.outside]

  def step(self, name: str, kind: str, loc: str, before: UOp, after: UOp, matches: list[tuple[UOp, UOp, Any]]) -> None:
    k = self._target()
    if len(k["steps"]) >= LIMITS["max_steps_per_kernel"]:
      k["dropped_steps"] += 1
      self.trace["meta"]["dropped"]["steps"] += 1
      return
    b, a = self.node(before), self.node(after)
    if b is None or a is None: self.trace["meta"]["dropped"]["graphs"] += 1
    kept = matches[:LIMITS["max_matches_per_step"]]
    self.trace["meta"]["dropped"]["matches"] += len(matches) - len(kept)
    k["steps"].append({"name": name, "kind": kind, "loc": loc, "before": b, "after": a, "more_matches": len(matches) - len(kept),
                       "matches": [[self.rule(rule), self.node(m), self.node(r)] for m, r, rule in kept]})

  def graph_rewrite(self, root: UOp, pm: PatternMatcher, ctx: Any, bottom_up: bool, name: str) -> UOp:
    """uop/rewrite.py's tracer: the rewrite, recorded as one step when a rule fired (until the kernel's step cap)."""
    k = self._target()
    recording = not self.pause and len(k["steps"]) < LIMITS["max_steps_per_kernel"]
    matches: list[tuple[UOp, UOp, Any]] = []
    # the rewrite itself, with the hook off: rewrites made inside a rule's function are part of this step
    rewrite.tracer = None
    try: out = rewrite.graph_rewrite(root, _RecordingMatcher(pm, lambda u, r, fn: matches.append((u, r, fn))) if recording else pm, ctx, bottom_up)
    finally: rewrite.tracer = self.graph_rewrite
    if not recording and not self.pause and out is not root:  # over the step cap: counted, not stored
      k["dropped_steps"] += 1
      self.trace["meta"]["dropped"]["steps"] += 1
    if matches:
      caller = sys._getframe(2)  # graph_rewrite's caller names the pass when it didn't
      loc = f"{os.path.basename(caller.f_code.co_filename)}:{caller.f_lineno}"
      self.step(name or caller.f_code.co_name, "rewrite", loc, root, out, matches)
    return out

  def stage(self, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (a pipeline stage taking the kernel's graph first and returning it, alone or first of a tuple), recorded as a step."""
    def staged(sink: UOp, *args: Any, **kwargs: Any) -> Any:
      out = fn(sink, *args, **kwargs)
      after = out[0] if isinstance(out, tuple) else out
      if isinstance(after, UOp) and after is not sink and not self.pause:
        self.step(fn.__name__, "stage", f"{fn.__module__}.{fn.__name__}", sink, after, [])
      return out
    staged.__wrapped__ = fn  # type: ignore[attr-defined]
    return staged

  def paused(self, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, with nothing recorded while it runs."""
    def quiet(*args: Any, **kwargs: Any) -> Any:
      self.pause += 1
      try: return fn(*args, **kwargs)
      finally: self.pause -= 1
    quiet.__wrapped__ = fn  # type: ignore[attr-defined]
    return quiet

  def get_program(self, fn: Callable[..., Any]) -> Callable[..., Any]:
    """engine/realize.py's get_program, recorded: the kernel's steps are the rewrites made while it runs."""
    def traced(ast: UOp, renderer: Any, *args: Any, **kwargs: Any) -> Any:
      prev, self.current = self.current, self.kernel("(generating)")
      try:
        self.step("kernel AST", "stage", "schedule", ast, ast, [])
        spec = fn(ast, renderer, *args, **kwargs)
      finally: idx, self.current = self.current, prev
      k = self.trace["kernels"][idx]
      k.update(name=spec.name, device=f"{renderer.device}:{renderer.name}" + (f":{renderer.arch}" if renderer.arch else ""), src=spec.src,
               opts=[f"{o.op.name}({o.axis},{o.amount})" for o in spec.opts], ops=spec.estimated_ops, mem=spec.estimated_mem,
               global_size=[str(x) for x in spec.global_size], local_size=[str(x) for x in spec.local_size])
      self.kernel_of_spec[id(spec)] = idx
      return spec
    traced.__wrapped__ = fn  # type: ignore[attr-defined]
    return traced

  # --- engine/realize.py's recorder hooks
  def compiled(self, spec: Any, lib: bytes, renderer: Any) -> None:
    if (idx := self.kernel_of_spec.get(id(spec))) is None: return
    try: text = renderer.compiler.disassemble(lib)
    except Exception as e:  # noqa: BLE001  a missing tool must not break the program being traced
      text = f"(no disassembly: {e})"
    self.trace["kernels"][idx]["disasm"] = text[:500_000]

  def ran(self, ei: Any, elapsed: float | None) -> None:
    spec = ei.runner.spec
    idx = self.kernel_of_spec.get(id(spec), -1)
    dur = elapsed or 0.0
    if idx >= 0:
      self.trace["kernels"][idx]["runs"] += 1
      self.trace["kernels"][idx]["time_s"] += dur
    if self.timing: self.event(ei.bufs[0].device, spec.name, "kernel", idx, time.perf_counter() - dur, dur, spec.estimated_ops, spec.estimated_mem)

  def copy(self, dest: Any, src: Any) -> None:
    st = time.perf_counter()
    copy_buffer(dest, src)
    if not self.timing: return
    Device[dest.device].synchronize()
    dur = time.perf_counter() - st
    self.event(f"{src.device} -> {dest.device}", f"copy {src.nbytes} bytes", "copy", -1, st, dur, 0, src.nbytes)

  def event(self, dev: str, name: str, kind: str, kernel: int, st: float, dur: float, ops: int, mem: int) -> None:
    if len(self.trace["events"]) >= LIMITS["max_events"]:
      self.trace["meta"]["dropped"]["events"] += 1
      return
    self.trace["events"].append({"dev": dev, "name": name, "kind": kind, "kernel": kernel, "st": round((st - self.t0) * 1e6, 3),
                                 "dur": round(dur * 1e6, 3), "ops": ops, "mem": mem})

  def schedule(self, fn: Callable[..., Any]) -> Callable[..., Any]:
    """engine/realize.py's lower_schedule, recorded: the order of each schedule's kernels and copies."""
    def traced(items: list, *args: Any, **kwargs: Any) -> Any:
      out = fn(items, *args, **kwargs)
      if not out: return out
      if len(self.trace["schedules"]) >= LIMITS["max_schedules"]: self.trace["meta"]["dropped"]["schedules"] += 1
      else: self.trace["schedules"].append([-1 if ei.runner is None else self.kernel_of_spec.get(id(ei.runner.spec), -1) for ei, _ in out])
      return out
    traced.__wrapped__ = fn  # type: ignore[attr-defined]
    return traced
