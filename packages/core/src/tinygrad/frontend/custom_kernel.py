"""`Tensor.custom_kernel`: a kernel written by hand in UOps (uop/dsl.py) as one lazy node of the tensor graph.

`fxn` gets one kernel parameter per tensor (a buffer UOp with the tensor's shape and dtype, parameter i for tensor i) and
returns the kernel, a SINK of stores. The graph gets CALL(*tensors) holding that kernel, and each tensor is returned as
AFTER(tensor, CALL): its value once the kernel has run. The scheduler gives every argument a buffer (schedule/kernelize.py)
and runs the kernel where its inputs are ready, like any other kernel; what reads a returned tensor runs after it.
`fxn` may also return a PROGRAM (uop/dsl.py `program`): the kernel as the backend's source or binary, run as it is.
`grad_fxn(gradient, call)` gives autograd a backward: the gradient of the returned tensor and the CALL (whose sources are the
tensors passed in) -> one gradient UOp (or None) per argument. (One output of a kernel can carry a gradient: the gradients of
several would arrive summed.) An argument that is not one whole buffer (a slice, a permuted view) is copied into a buffer of
its own first, and the kernel writes that copy: the returned tensor has the result, the tensor passed in is unchanged.
A bound Variable (`Variable("pos", 0, 1023).bind(5)`) may stand among the tensors: `fxn` gets the Variable itself there, a
symbolic int the kernel takes as a parameter, so one compiled kernel (and one TinyJit capture) serves every value; the
scheduler passes the bound value. It takes no buffer and returns no tensor (the parameters of the tensors after it keep
their numbers: parameter i is the i-th tensor).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from tinygrad.frontend.base import TensorBase
from tinygrad.helpers import prod
from tinygrad.uop.dsl import CustomKernel, KernelInfo, finalize_kernel, param
from tinygrad.uop.ops import Ops, UOp

TensorT = TypeVar("TensorT", bound=TensorBase)


def kernel_ast(fxn: Callable[..., UOp], args: tuple[TensorBase | UOp, ...]) -> UOp:
  """What `fxn` builds on parameters shaped like the tensors among `args` (and the Variables of its bound Variables), as
  codegen's AST (named by KernelInfo)."""
  params: list[UOp] = []
  tensors = 0
  for i, t in enumerate(args):
    if isinstance(t, UOp):
      params.append(t.src[0])
      continue
    if not all(isinstance(s, int) for s in t.shape): raise ValueError(f"custom_kernel: argument {i} has a symbolic shape {t.shape}; give it a buffer of fixed size")
    if isinstance(t.device, tuple): raise ValueError(f"custom_kernel: argument {i} is sharded over {t.device}; call the kernel per shard")
    params.append(param(tensors, t.shape, t.dtype, max(prod(t.shape), 1)))
    tensors += 1
  sink = fxn(*params)
  if not isinstance(sink, UOp): raise TypeError(f"custom_kernel: fxn must return a UOp (the kernel's SINK), got {type(sink).__name__}")
  if sink.op is Ops.PROGRAM:  # source or binary: as it is
    if tensors < len(args): raise ValueError("custom_kernel: a kernel given as source or binary (a PROGRAM) takes buffers only, not Variables")
    return sink.replace(arg=dataclasses.replace(sink.arg, n_params=tensors))
  if sink.op is not Ops.SINK: sink = sink.sink()  # one store (or END of stores): its SINK
  if not isinstance(sink.arg, KernelInfo): sink = sink.replace(arg=KernelInfo())
  return finalize_kernel(sink)


def custom_kernel(args: tuple[TensorT | UOp, ...], fxn: Callable[..., UOp], grad_fxn: Callable[..., Any] | None = None) -> list[TensorT]:
  """The kernel on `args` (tensors and bound Variables); the tensors as it leaves them, in order."""
  for i, a in enumerate(args):
    if isinstance(a, UOp) and a.op is not Ops.BIND:
      raise TypeError(f"custom_kernel: argument {i} is a {a.op.name} node; pass tensors, or Variables bound to a value (Variable(...).bind(n))")
  tensors = tuple(a for a in args if not isinstance(a, UOp))
  if not tensors: raise ValueError("custom_kernel: pass at least one tensor (the kernel's buffers)")
  devices = {t.device for t in tensors}
  if len(devices) != 1: raise ValueError(f"custom_kernel: every argument must be on one device, got {sorted(map(str, devices))}; move them with .to()")
  binds = tuple(a for a in args if isinstance(a, UOp))
  if len(names := [b.src[0].arg[0] for b in binds]) != len(set(names)): raise ValueError(f"custom_kernel: a Variable is passed twice ({names}); pass it once")
  call = UOp(Ops.CALL, tensors[0].dtype, tuple(t.uop for t in tensors), CustomKernel(kernel_ast(fxn, args), grad_fxn, binds))
  return [type(t)(UOp(Ops.AFTER, t.dtype, (t.uop, call)), requires_grad=t.requires_grad) for t in tensors]
