"""`@function`: a function (a model's `__call__`) whose tensor graph is built once per input signature and reused.

The first call with tensors of a given (shape, dtype, device), and the same other arguments, runs the Python body on
placeholder tensors (buffers never allocated) and keeps the graph it returns; every call then puts its own tensors where the
placeholders were. So the body is one unit: its Python runs once, and each call's graph is the same nodes over other inputs,
which the scheduler turns into the same kernels (compiled once per process). With `precompile=True` the first call also
compiles those kernels right away, so later calls (and the first realize) compile nothing.

The result is lazy and differentiable like the body's own. What the body must be: a function of its tensor arguments and of
realized tensors (weights, updated in place by an optimizer's assign); it may not realize anything while traced (random
numbers, `.item()`, `.numpy()`: their values would be fixed into every call), which is an error.
"""
from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable
from typing import Any

from tinygrad.engine.realize import lower_schedule, split_policy
from tinygrad.frontend.base import TensorBase
from tinygrad.helpers import GlobalCounters, prod
from tinygrad.schedule.kernelize import buffer_view, create_schedule, is_buffer_view, new_buffer
from tinygrad.schedule.multi import lower, lower_roots, make_multi
from tinygrad.uop.ops import Ops, UOp


class function:
  """Decorator: `@function` or `@function(precompile=True)`, on a function or a method.

  tinygrad's other keywords are accepted for its programs: `allow_implicit` (tinygrad raises, unless it is True, when the body
  reads realized tensors that are not arguments, e.g. a model's weights; here that is always allowed) and `precompile_backward`
  (here the backward's kernels compile when the gradient is realized, as any other). `grad_fxn` is not supported
  (docs/differences.md)."""

  def __init__(self, fxn: Callable[..., Any] | None = None, *, precompile: bool = False, precompile_backward: bool = False,
               allow_implicit: bool = False, grad_fxn: Callable[..., Any] | None = None):
    if grad_fxn is not None:
      raise NotImplementedError("@function(grad_fxn=...) is not supported (docs/differences.md): write the custom gradient as a Tensor "
                                "function, or use Tensor.custom_kernel(..., grad_fxn=)")
    self.fxn, self.precompile = fxn, precompile
    self.precompile_backward, self.allow_implicit = precompile_backward, allow_implicit
    # signature -> (placeholders, outputs' uops, the tensor class the outputs are rebuilt as)
    self.traces: dict[tuple, tuple[tuple[UOp, ...], Any, type[TensorBase]]] = {}
    self._bound: weakref.WeakKeyDictionary[Any, function] = weakref.WeakKeyDictionary()  # per instance, for methods
    if fxn is not None: functools.update_wrapper(self, fxn)

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    if self.fxn is None:  # @function(precompile=...) receiving the function
      if len(args) != 1 or kwargs or not callable(args[0]): raise TypeError("@function(precompile=...) decorates one function")
      return function(args[0], precompile=self.precompile, precompile_backward=self.precompile_backward, allow_implicit=self.allow_implicit)
    key = tuple(_signature(a) for a in args) + tuple((k, _signature(v)) for k, v in sorted(kwargs.items()))
    if (trace := self.traces.get(key)) is None: trace = self.traces[key] = self._trace(args, kwargs)
    holders, outs, cls = trace
    inputs = [a.uop for a in (*args, *kwargs.values()) if isinstance(a, TensorBase)]
    mapping = dict(zip(holders, inputs))
    def rebuild(u: UOp) -> TensorBase: return cls(u.substitute(mapping))
    return rebuild(outs) if isinstance(outs, UOp) else type(outs)(rebuild(u) for u in outs)

  def __get__(self, obj: Any, objtype: Any = None) -> Any:
    """As a method: one traced function per instance (its weights are part of the graph)."""
    if obj is None: return self
    if (bound := self._bound.get(obj)) is None:
      assert self.fxn is not None
      bound = self._bound[obj] = function(self.fxn.__get__(obj, objtype), precompile=self.precompile,
                                          precompile_backward=self.precompile_backward, allow_implicit=self.allow_implicit)
    return bound

  def _trace(self, args: tuple, kwargs: dict) -> tuple[tuple[UOp, ...], Any, type[TensorBase]]:
    def holder(a: Any) -> Any:
      if not isinstance(a, TensorBase): return a
      if isinstance(a.device, tuple) and (m := lower(a.uop)).op is Ops.MULTI:  # sharded: a placeholder part per device, split alike
        return type(a)(make_multi([buffer_view(new_buffer(p.device, prod(p.shape), a.dtype), p.shape) for p in m.src], *m.arg))
      return type(a).empty(*a.shape, dtype=a.dtype, device=a.device)
    p_args, p_kwargs = tuple(holder(a) for a in args), {k: holder(v) for k, v in kwargs.items()}
    holders = tuple(a.uop for a in (*p_args, *p_kwargs.values()) if isinstance(a, TensorBase))
    ran = GlobalCounters.kernel_count
    assert self.fxn is not None
    out = self.fxn(*p_args, **p_kwargs)
    if GlobalCounters.kernel_count != ran:
      raise RuntimeError(f"@function {getattr(self.fxn, '__qualname__', self.fxn)}: the body ran kernels while traced (random numbers, .item(), "
                         ".numpy() or realize inside it); their results would be the same in every call. Move them out of the function")
    outs: Any
    if isinstance(out, TensorBase): outs, cls = out.uop, type(out)
    elif isinstance(out, (tuple, list)) and all(isinstance(t, TensorBase) for t in out):
      outs, cls = type(out)(t.uop for t in out), type(out[0]) if out else TensorBase  # (an empty tuple rebuilds no tensor)
    else: raise TypeError(f"@function {getattr(self.fxn, '__qualname__', self.fxn)} must return a Tensor or a tuple/list of Tensors, got {type(out).__name__}")
    if self.precompile: _compile(list(outs) if not isinstance(outs, UOp) else [outs])
    return holders, outs, cls


def _signature(a: Any) -> Any:
  if isinstance(a, TensorBase):  # a sharded one: with its split
    return ("tensor", a.shape, a.dtype, (a.device, lower(a.uop).arg) if isinstance(a.device, tuple) else a.device)
  try: hash(a)
  except TypeError as e: raise TypeError(f"@function: argument {a!r} is neither a Tensor nor hashable; it is part of the function's signature") from e
  return ("value", a)


def _compile(roots: list[UOp]) -> None:
  """Compile the kernels of the traced graph now (on its placeholders: the same ASTs every call schedules)."""
  roots = [r if r.op in (Ops.ASSIGN, Ops.CONTIGUOUS, Ops.COPY, Ops.AFTER) else UOp(Ops.CONTIGUOUS, r.dtype, (r,), -1) for r in roots if not is_buffer_view(r)]
  roots = [r for r in lower_roots(roots) if not is_buffer_view(r)]  # a sharded graph: its per-device kernels
  if roots: lower_schedule(create_schedule(roots, split_policy())[0])


# tinygrad keeps `function` in tinygrad.function: `from tinygrad.function import function` finds this module under that name
# (the attribute tinygrad.function stays the decorator, as `from tinygrad import function` gives in tinygrad)
sys.modules.setdefault("tinygrad.function", sys.modules[__name__])
