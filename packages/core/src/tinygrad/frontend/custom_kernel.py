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


def kernel_ast(fxn: Callable[..., UOp], tensors: tuple[TensorBase, ...]) -> UOp:
  """What `fxn` builds on parameters shaped like `tensors`, as codegen's AST (named by KernelInfo)."""
  for i, t in enumerate(tensors):
    if not all(isinstance(s, int) for s in t.shape): raise ValueError(f"custom_kernel: argument {i} has a symbolic shape {t.shape}; give it a buffer of fixed size")
    if isinstance(t.device, tuple): raise ValueError(f"custom_kernel: argument {i} is sharded over {t.device}; call the kernel per shard")
  params = [param(i, t.shape, t.dtype, max(prod(t.shape), 1)) for i, t in enumerate(tensors)]
  sink = fxn(*params)
  if not isinstance(sink, UOp): raise TypeError(f"custom_kernel: fxn must return a UOp (the kernel's SINK), got {type(sink).__name__}")
  if sink.op is Ops.PROGRAM: return sink.replace(arg=dataclasses.replace(sink.arg, n_params=len(tensors)))  # source or binary: as it is
  if sink.op is not Ops.SINK: sink = sink.sink()  # one store (or END of stores): its SINK
  if not isinstance(sink.arg, KernelInfo): sink = sink.replace(arg=KernelInfo())
  return finalize_kernel(sink)


def custom_kernel(tensors: tuple[TensorT, ...], fxn: Callable[..., UOp], grad_fxn: Callable[..., Any] | None = None) -> list[TensorT]:
  devices = {t.device for t in tensors}
  if len(devices) != 1: raise ValueError(f"custom_kernel: every argument must be on one device, got {sorted(map(str, devices))}; move them with .to()")
  call = UOp(Ops.CALL, tensors[0].dtype, tuple(t.uop for t in tensors), CustomKernel(kernel_ast(fxn, tensors), grad_fxn))
  return [type(t)(UOp(Ops.AFTER, t.dtype, (t.uop, call)), requires_grad=t.requires_grad) for t in tensors]
