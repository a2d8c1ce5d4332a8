"""Collectives on Tensors. Each one realizes its input into a contiguous buffer, then runs as one "call" item of the
engine (like a copy): outside TinyJit it runs at once; inside a capture it is recorded between the kernels that produce
its input and those that read its output, so every replay runs it again on the same buffers (or on the new input
buffers, when a jitted function's argument is passed straight to it). Results are new tensors; no gradient flows
through a collective."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from tinygrad.device.collectives import REDUCE_OPS, ReduceOp
from tinygrad.device.runtime import Buffer
from tinygrad.distributed.group import ProcessGroup, group
from tinygrad.engine.realize import ExecItem, buffer_of, run_exec_items
from tinygrad.helpers import prod
from tinygrad.schedule.kernelize import buffer_view, is_contiguous_buffer, new_buffer
from tinygrad.tensor import Tensor
from tinygrad.uop.ops import Ops


class _Call:
  """The callable a captured item runs: named, so DEBUG output and a TinyJit's item list say what it is."""

  def __init__(self, name: str, fn: Callable[[list[Buffer]], None]): self.name, self.fn = name, fn
  def __call__(self, bufs: list[Buffer]) -> None: self.fn(bufs)
  def __repr__(self) -> str: return f"<collective {self.name}>"


def _input(t: Tensor, g: ProcessGroup) -> Buffer:
  if isinstance(t.device, tuple):
    raise ValueError(f"tinygrad.distributed: a sharded tensor (on {t.device}) can't take part in a collective between processes: "
                     "its shards are already combined in-process; pass one device's tensor")
  if g.backend != "mpi" and t.device != g.device:
    raise ValueError(f"tinygrad.distributed: the tensor is on {t.device}, but this rank's {g.backend} communicator is on {g.device}: "
                     f"move it with .to({g.device!r}) (or create it there)")
  if not is_contiguous_buffer(t.uop): t.replace(t.contiguous())
  t.realize()
  node = t.uop if t.uop.op is Ops.BUFFER else t.uop.src[0]
  return buffer_of(node)


def _run(name: str, t: Tensor, shape: tuple[int, ...], fn: Callable[[Buffer, Buffer], None]) -> Tensor:
  g = group()
  inp = _input(t, g)
  out_node = new_buffer(str(t.device), prod(shape), t.dtype)
  item = ExecItem("call", [buffer_of(out_node), inp], call=_Call(name, lambda bufs: fn(bufs[0], bufs[1])))
  run_exec_items([(item, {})])
  return Tensor(buffer_view(out_node, shape))


def _check_op(op: str) -> ReduceOp:
  if op not in REDUCE_OPS: raise ValueError(f"tinygrad.distributed: unknown reduce op {op!r}; use one of {', '.join(REDUCE_OPS)}")
  return op  # type: ignore[return-value]


def all_reduce(t: Tensor, op: str = "sum") -> Tensor:
  """Every rank gets op(t of rank 0, ..., t of rank n-1), elementwise ("sum", "prod", "max", "min")."""
  rop = _check_op(op)
  comm = group().comm
  return _run(f"all_reduce({rop})", t, t.shape, lambda out, inp: comm.all_reduce(out, inp, rop))


def all_gather(t: Tensor) -> Tensor:
  """Every rank gets the ranks' tensors concatenated along axis 0: shape (world_size * t.shape[0], ...)."""
  g = group()
  if not t.shape: t = t.reshape(1)
  shape = (g.world_size * t.shape[0], *t.shape[1:])
  return _run("all_gather", t, shape, lambda out, inp: g.comm.all_gather(out, inp))


def reduce_scatter(t: Tensor, op: str = "sum") -> Tensor:
  """op over ranks, then rank r keeps the r-th of world_size equal chunks along axis 0 (t.shape[0] must divide evenly)."""
  g, rop = group(), _check_op(op)
  if not t.shape or t.shape[0] % g.world_size:
    raise ValueError(f"tinygrad.distributed.reduce_scatter: axis 0 of shape {t.shape} must split into {g.world_size} equal chunks")
  shape = (t.shape[0] // g.world_size, *t.shape[1:])
  return _run(f"reduce_scatter({rop})", t, shape, lambda out, inp: g.comm.reduce_scatter(out, inp, rop))


def broadcast(t: Tensor, src: int = 0) -> Tensor:
  """Every rank gets rank `src`'s tensor (the others' t gives only shape, dtype and device)."""
  g = group()
  if not 0 <= src < g.world_size: raise ValueError(f"tinygrad.distributed.broadcast: src {src} is not a rank of 0..{g.world_size - 1}")
  return _run(f"broadcast({src})", t, t.shape, lambda out, inp: g.comm.broadcast(out, inp, src))


def barrier() -> None:
  """Wait until every rank got here (inside TinyJit: at this point of every replay)."""
  comm = group().comm
  run_exec_items([(ExecItem("call", [], call=_Call("barrier", lambda bufs: comm.barrier())), {})])


def average_gradients(params: Sequence[Tensor]) -> None:
  """Data parallelism's step: every parameter's `.grad` becomes its mean over the ranks. The gradients travel flattened
  into one tensor, so a step costs one all-reduce, not one per parameter."""
  g, grads = group(), [p.grad for p in params]
  if any(x is None for x in grads): raise RuntimeError("average_gradients: a parameter has no .grad: call loss.backward() first")
  flat = all_reduce(Tensor.cat(*[x.flatten() for x in grads if x is not None])) / g.world_size
  start = 0
  for p, x in zip(params, grads):
    assert x is not None
    p.grad = flat[start:start + x.numel()].reshape(x.shape)
    start += x.numel()
