"""TinyJit: run a function once, capture the kernels it runs on the second call, replay them after.

Replaying skips everything Python does to build, schedule and compile the graph: the captured kernels run
on the new input buffers, with the values of bound symbolic Variables passed as kernel parameters.
When every captured kernel runs on one device that offers `graph` (CUDA graphs), the replay is one graph
launch: only the launches whose inputs or var values changed are updated first. GRAPH=0 turns that off.
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tinygrad.device.runtime import Buffer, GraphExec, KernelLaunch
from tinygrad.engine import realize
from tinygrad.engine.memory import plan_memory
from tinygrad.engine.realize import ExecItem
from tinygrad.frontend import sort_network
from tinygrad.frontend.multi import input_device, is_realized_multi, tensor_buffers
from tinygrad.helpers import DEBUG, ContextVar, GlobalCounters, JitError  # noqa: F401  (JitError: tinygrad.jit.JitError, as before)
from tinygrad.schedule.kernelize import is_contiguous_buffer
from tinygrad.tensor import Tensor
from tinygrad.uop.ops import GroupOp, Ops, UOp

JIT = ContextVar("JIT", 1)  # JIT=0 runs jitted functions eagerly every time
GRAPH = ContextVar("GRAPH", 1)  # GRAPH=0: replay kernel by kernel even where the device has graphs
ReturnType = TypeVar("ReturnType")
# tinygrad keeps TinyJit in tinygrad.engine.jit: `from tinygrad.engine.jit import TinyJit` finds this module under that name
sys.modules.setdefault("tinygrad.engine.jit", sys.modules[__name__])
vars(sys.modules["tinygrad.engine"])["jit"] = sys.modules[__name__]  # as an import would set it




@dataclass(frozen=True)
class InputSpec:
  shape: tuple
  dtype: Any
  device: str


def _flatten_args(args: tuple, kwargs: dict) -> tuple[list[tuple[str, Any]], dict[str, int]]:
  """(name, Tensor) for every tensor argument (also those directly inside a list, tuple or dict argument, as in tinygrad),
  and the values of bound Variables among the arguments."""
  tensors: list[tuple[str, Any]] = []
  var_vals: dict[str, int] = {}
  items = [(f"arg {i}", a) for i, a in enumerate(args)] + [(f"argument {k!r}", v) for k, v in sorted(kwargs.items())]
  for name, value in items:
    if isinstance(value, Tensor): tensors.append((name, value))
    elif isinstance(value, UOp) and value.op is Ops.BIND: var_vals[value.src[0].arg[0]] = value.src[1].arg
    elif isinstance(value, (list, tuple, dict)):
      for j, v in (value.items() if isinstance(value, dict) else enumerate(value)):
        if isinstance(v, Tensor): tensors.append((f"{name}[{j!r}]", v))
  return tensors, var_vals


def _unbound_shape(shape: tuple, var_vals: dict[str, int]) -> tuple:
  """The shape with its bound Variables unbound (what a capture's kernels are compiled for), adding their values to var_vals:
  x[:, :v.bind(3)] and x[:, :v.bind(5)] are the same input to a TinyJit, which replays with v = 3 or 5."""
  out = []
  for s in shape:
    if isinstance(s, UOp) and (binds := [n for n in s.toposort() if n.op is Ops.BIND]):
      for b in binds: var_vals[b.src[0].arg[0]] = b.src[1].arg
      s = s.substitute({b: b.src[0] for b in binds})
    out.append(s)
  return tuple(out)


def _returned_tensors(ret: Any, capturing: bool = False) -> list[Tensor]:
  """The tensors in a jitted function's return value (a tensor, or lists, tuples and dicts of them). While capturing, any
  other value is a JitError, as in tinygrad: a replay returns the captured value again, which would be stale."""
  if isinstance(ret, Tensor): return [ret]
  if isinstance(ret, (list, tuple, dict)):
    return [t for r in (ret.values() if isinstance(ret, dict) else ret) for t in _returned_tensors(r, capturing)]
  if capturing and ret is not None:
    raise JitError(f"a jitted function returned a non-Tensor value of type {type(ret).__name__}: a replay would return the value "
                   "of the capturing call again. Return tensors (Tensor(n) for a number) or compute the value outside the TinyJit")
  return []


def _map_returned(ret: Any, fn: Callable[[Tensor], Tensor]) -> Any:
  """ret (a tensor, or lists, tuples and dicts of them) with every tensor t replaced by fn(t)."""
  if isinstance(ret, Tensor): return fn(ret)
  if isinstance(ret, dict): return {k: _map_returned(v, fn) for k, v in ret.items()}
  if isinstance(ret, (list, tuple)): return type(ret)(_map_returned(v, fn) for v in ret)
  return ret


def _rebind(ret: Any, var_vals: dict[str, int]) -> None:
  """A returned tensor of symbolic shape (x[:, :v] * 2) takes this call's values: the Variables in its view's shapes (the
  args of its movement ops) are rebound."""
  def arg_of(a: Any) -> Any:
    if isinstance(a, tuple): return tuple(arg_of(x) for x in a)
    if not isinstance(a, UOp): return a
    binds = {n: n.src[0].bind(var_vals[n.src[0].arg[0]]) for n in a.toposort() if n.op is Ops.BIND and n.src[0].arg[0] in var_vals}
    return a.substitute(binds) if binds else a
  for t in _returned_tensors(ret):
    if all(isinstance(s, int) for s in t.shape): continue
    new: dict[UOp, UOp] = {}
    for n in t.uop.toposort():
      src, arg = tuple(new[x] for x in n.src), arg_of(n.arg) if n.op in GroupOp.Movement else n.arg
      new[n] = n if src == n.src and arg == n.arg else UOp(n.op, n.dtype, src, arg)
    t._uop = new[t.uop]


class TinyJit(Generic[ReturnType]):
  """Decorate a function whose tensor work should be captured: `@TinyJit def step(x): ...`.

  Call 1 runs normally, call 2 runs and captures its kernels, later calls replay them. Inputs must keep
  their shapes, dtypes and devices (a change is an error: use a symbolic Variable for sizes that vary);
  the returned tensors are the same objects every call, refilled by each replay.

  `capture_after`: how many calls run normally before the capturing one (default 1: the first call may realize
  one-time work, e.g. lazily loaded weights, that a replay must not repeat). 0 captures on the first call, for a
  function whose every tensor outside its inputs is already realized: one scheduling pass fewer.

  `prune=True` (tinygrad's): captured kernels that neither read an input nor a buffer that such a kernel uses are one-time
  work (weights computed from weights): they run once at the capture and not in replays. `TinyJit(prune=True)` without a
  function is a decorator, as in tinygrad."""

  def __new__(cls, fxn: Callable[..., ReturnType] | None = None, *args: Any, **kwargs: Any) -> Any:
    if fxn is None: return lambda f: cls(f, *args, **kwargs)  # @TinyJit(prune=True)
    return super().__new__(cls)

  def __init__(self, fxn: Callable[..., ReturnType], capture_after: int = 1, prune: bool = False):
    if capture_after < 0: raise ValueError(f"capture_after must be >= 0, got {capture_after}")
    self.fxn = fxn
    self.capture_after = capture_after
    self.prune = prune
    self.cnt = 0
    self.captured: list[tuple[ExecItem, dict[str, int]]] = []
    self.input_specs: list[InputSpec] = []
    self.input_names: list[str] = []
    self.input_slots: list[list[tuple[int, int]]] = []  # per input: (item index, buffer index) where it is used
    self.captured_mem: set[int] = set()  # id()s of the memory (a view's base) of the captured buffers outside the input slots
    self.ret: Any = None
    self.ret_inputs: dict[int, int] = {}  # id() of a returned tensor that is an input of the capturing call -> that input's index
    self.graph: _JitGraph | None = None  # the device graph replaying the captured kernels, when there is one
    self.graph_tried = False
    functools.update_wrapper(self, fxn)  # type: ignore[arg-type]

  def __get__(self, obj: Any, objtype: Any = None) -> Any: return functools.partial(self.__call__, obj)  # methods

  def reset(self) -> None:
    self.cnt, self.captured, self.input_specs, self.input_names, self.input_slots, self.ret = 0, [], [], [], [], None
    self.ret_inputs = {}
    self.captured_mem = set()
    self.graph, self.graph_tried = None, False

  def __call__(self, *args: Any, **kwargs: Any) -> ReturnType:
    tensors, var_vals = _flatten_args(args, kwargs)
      # inputs become plain buffers, so the captured kernels can be pointed at them
    needs = [t for _, t in tensors if not (is_contiguous_buffer(t.uop) or is_realized_multi(t.uop))]  # multi: sharded inputs
    for t in needs: t.replace(t.contiguous())
    Tensor.realize_all(*(t for _, t in tensors))
    bufs = [id(b) for _, t in tensors for b in tensor_buffers(t)]
    if len(set(bufs)) != len(bufs):  # the captured kernels could not tell the two apart in a replay with different tensors
      raise JitError("duplicate inputs to JIT: the same tensor (or buffer) is passed twice; pass it once, or .clone() one of them")
    # called while another TinyJit captures: run as plain code, so that capture records these kernels as its own (a replay of
    # this one's items inside it would share their ExecItems and buffers with this capture, and each plan would rewrite the other's)
    if any(c.jit for c in realize.capturing): return self._run_and_realize(args, kwargs)
    if not JIT.value or self.cnt < self.capture_after:
      self.cnt += 1
      return self._run_and_realize(args, kwargs)
    if self.cnt == self.capture_after: return self._capture(args, kwargs, tensors)
    self._check_inputs(tensors, var_vals)
    self.cnt += 1  # the number of calls so far, as tinygrad's (replays included)
    self._replay([b for _, t in tensors for b in tensor_buffers(t)], var_vals)  # a sharded input has a buffer per device
    _rebind(self.ret, var_vals)
    if self.ret_inputs:  # a returned input (`return b.assign(a + 1)`) is this call's input, which the replay wrote
      return _map_returned(self.ret, lambda t: tensors[self.ret_inputs[id(t)]][1] if id(t) in self.ret_inputs else t)
    return self.ret

  def _run_and_realize(self, args: tuple, kwargs: dict) -> Any:
    ret = self.fxn(*args, **kwargs)
    Tensor.realize_all(*_returned_tensors(ret))
    return ret

  def _capture(self, args: tuple, kwargs: dict, tensors: list[tuple[str, Any]]) -> Any:
    realize.capturing.append(realize.Capture(replayed=True))
    try: ret = self._run_and_realize(args, kwargs)
    finally: capture = realize.capturing.pop()
    captured = capture.items
    if not captured:
      raise JitError(f"TinyJit captured no kernels from {getattr(self.fxn, '__name__', 'the function')}: nothing was realized "
                     "inside it, so a replay would do nothing. Return the tensors it computes (they are realized) or "
                     "call .realize() on its assigns inside the function")
    _returned_tensors(ret, capturing=True)
    self.cnt += 1
    self.input_specs = [InputSpec(_unbound_shape(t.shape, {}), t.dtype, input_device(t)) for _, t in tensors]  # multi: with the sharding
    self.input_names = [name for name, _ in tensors]
    inputs = [b for _, t in tensors for b in tensor_buffers(t)]
    onetime: list[tuple[ExecItem, dict[str, int]]] = []
    if self.prune:  # as tinygrad's prune_linear: an item is needed when it shares a buffer with an input or a needed item
      needed, kept = {id(b) for b in inputs}, list[tuple[ExecItem, dict[str, int]]]()
      for item in captured:
        if needed.isdisjoint(ids := {id(b) for b in item[0].bufs}): onetime.append(item)
        else: kept, needed = kept + [item], needed | ids
      captured = kept
      for ei, _ in onetime: capture.fresh -= {id(b) for b in ei.bufs}  # their results must outlive the plan: own memory
    self.captured = captured
    if realize.JIT_PLAN.value:  # intermediates share memory: a replay holds the largest set alive at once, not all of them
      saved = plan_memory(captured, capture.fresh, {id(b) for b in inputs})  # outputs: self.ret's tensors keep theirs
      if DEBUG >= 1: print(f"TinyJit memory plan: {saved / 1e6:.2f} MB of intermediates shared")
    self.input_slots = [[(i, j) for i, (ei, _) in enumerate(captured) for j, b in enumerate(ei.bufs) if b is buf] for buf in inputs]
    slots = {s for sl in self.input_slots for s in sl}
    self.captured_mem = {id(_mem(b)) for i, (ei, _) in enumerate(captured) for j, b in enumerate(ei.bufs) if (i, j) not in slots}
    for ei, vals in onetime: ei.run(vals)  # again: the capturing call may have released what they wrote
    self.ret = ret
    self.ret_inputs = {id(r): i for r in _returned_tensors(ret) for i, (_, t) in enumerate(tensors) if r is t or r.uop is t.uop}
    if DEBUG >= 1 and self.prune: print(f"TinyJit pruned {len(onetime)} one-time kernels/copies")
    if DEBUG >= 1: print(f"TinyJit captured {len(captured)} kernels/copies of {getattr(self.fxn, '__name__', 'fn')}")
    return ret

  def _check_inputs(self, tensors: list[tuple[str, Any]], var_vals: dict[str, int]) -> None:
    if len(tensors) != len(self.input_specs):
      raise JitError(f"jitted function was captured with {len(self.input_specs)} tensor inputs, now called with {len(tensors)}")
    if (names := [name for name, _ in tensors]) != self.input_names:
      raise JitError(f"args mismatch in JIT: the tensor inputs were {self.input_names} at the capture, now {names}")
    for (name, t), spec in zip(tensors, self.input_specs):
      now = InputSpec(_unbound_shape(t.shape, var_vals), t.dtype, input_device(t))
      if now != spec:
        raise JitError(f"{name} of the jitted function changed from shape {spec.shape} {spec.dtype!r} on {spec.device} to "
                       f"shape {now.shape} {now.dtype!r} on {now.device}; a TinyJit replays fixed kernels: keep inputs the same, "
                       "use a symbolic Variable for a size that varies, or call .reset()")

  def _replay(self, inputs: list[Buffer], var_vals: dict[str, int]) -> None:
    # an input whose memory the captured kernels also use outside its slots (the function's own output fed back in:
    # `scores = step(scores)`) would be overwritten by one replayed kernel before another reads it: replay on a copy, as
    # tinygrad's CapturedJit does with inputs that its kernels write
    inputs = [_copy_of(b) if id(_mem(b)) in self.captured_mem else b for b in inputs]
    for buf, slots in zip(inputs, self.input_slots):
      for i, j in slots: self.captured[i][0].bufs[j] = buf
    if not self.graph_tried and GRAPH.value and DEBUG < 2:  # the first replay with graphs on: every captured buffer exists now
      self.graph_tried = True
      self.graph = _JitGraph.build(self.captured, {i for slots in self.input_slots for i, _ in slots})
      if DEBUG >= 1 and self.graph is not None: print(f"TinyJit replays {len(self.captured)} kernels as one device graph")
    if self.graph is not None and GRAPH.value and DEBUG < 2: return self.graph.run(var_vals)
    for ei, captured_vals in self.captured:
      ei.run({**captured_vals, **var_vals} if captured_vals else var_vals)


def _mem(b: Buffer) -> Buffer: return b.base if b.base is not None else b


def _copy_of(b: Buffer) -> Buffer:
  out = Buffer(b.device, b.size, b.dtype).ensure_allocated()
  realize.copy_buffer(out, b)
  return out


class _JitGraph:
  """The captured kernels as one device graph, with the launch each one was last given."""

  def __init__(self, graph: GraphExec, launches: list[KernelLaunch], dynamic: list[int], captured: list[tuple[ExecItem, dict[str, int]]],
               input_items: set[int] | None = None):
    self.graph, self.launches = graph, launches
    self.input_items = input_items or set()  # launches whose buffers may change (they read an input); the others only vals
    # what a replay looks at per varying launch, worked out once (a decode step replays this for every kernel, every token)
    varying = set(dynamic)
    self.plan = [(i, ei, ei.runner, vals, i in self.input_items) for i, (ei, vals) in enumerate(captured)
                 if i in varying and ei.runner is not None]  # (build: every item has a runner)
    runners = [ei.runner for ei, _ in captured if ei.runner is not None]
    self.ops, self.mem = sum(r.spec.estimated_ops for r in runners), sum(r.spec.estimated_mem for r in runners)

  @staticmethod
  def build(captured: list[tuple[ExecItem, dict[str, int]]], input_items: set[int]) -> _JitGraph | None:
    """A graph when GRAPH is on and every item is a kernel of one device that has graphs, else None."""
    if not GRAPH.value or DEBUG >= 2 or not captured: return None
    if any(ei.kind != "kernel" or ei.runner is None for ei, _ in captured): return None  # copies run from Python
    devices = {id(ei.runner.device): ei.runner.device for ei, _ in captured if ei.runner is not None}
    if len(devices) != 1 or (make := next(iter(devices.values())).graph) is None: return None
    launches = [ei.runner.launch(ei.bufs, vals) for ei, vals in captured if ei.runner is not None]
    try: graph = make(launches)
    except NotImplementedError as e:
      if DEBUG >= 1: print(f"TinyJit: no device graph ({e}); replaying kernel by kernel")
      return None
    # only launches that read an input or depend on var values can change between calls
    dynamic = [i for i, (ei, _) in enumerate(captured) if i in input_items or (ei.runner is not None and ei.runner.varies)]
    return _JitGraph(graph, launches, dynamic, captured, input_items)

  def run(self, var_vals: dict[str, int]) -> None:
    """Replay: update the launches whose buffers or var values changed, then launch the graph. (The captured items it was
    built from are the JIT's: their buffers are this call's inputs already.)"""
    launches = self.launches
    for i, ei, runner, captured_vals, reads_input in self.plan:
      vals = {**captured_vals, **var_vals} if captured_vals else var_vals
      if reads_input:
        for b in ei.bufs: b.ensure_allocated()
        launch = runner.launch(ei.bufs, vals)
        if launch == launches[i]: continue
      else:  # the same buffers: only var values and sizes can change, and relaunch gives the old launch when neither did
        launch = runner.relaunch(launches[i], vals)
        if launch is launches[i]: continue
      self.graph.update(i, launch)
      launches[i] = launch
    self.graph()
    GlobalCounters.kernel_count += len(self.launches)
    GlobalCounters.global_ops += self.ops
    GlobalCounters.global_mem += self.mem


sort_network.JIT = TinyJit  # the frontend's sorting network replays its stages through TinyJit (it can't import this module)
