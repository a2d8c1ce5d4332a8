"""A schedule as one UOp: LINEAR(CALL, CALL, ...), each CALL a kernel AST (or COPY) on its BUFFERs, in the order they run.

`Tensor.schedule_linear(*ts)` returns it without running anything (the tensors then refer to the buffers it fills), and
`run_linear(linear)` runs it. Being a UOp, a schedule can be printed, compared, rewritten or kept and run again.
"""
from __future__ import annotations

from tinygrad.engine.realize import run_schedule
from tinygrad.schedule.kernelize import ScheduleItem
from tinygrad.uop.ops import Ops, UOp


def to_linear(items: list[ScheduleItem]) -> UOp:
  """The schedule's items as CALL(*bufs, arg=(ast, var values)) under one LINEAR."""
  calls = tuple(UOp(Ops.CALL, src=tuple(si.bufs), arg=(si.ast, tuple(sorted(si.var_vals.items())))) for si in items)
  return UOp(Ops.LINEAR, src=calls)


def from_linear(linear: UOp) -> list[ScheduleItem]:
  if linear.op is not Ops.LINEAR: raise TypeError(f"run_linear runs a LINEAR UOp (from Tensor.schedule_linear), got a {linear.op.name}")
  if (bad := next((c for c in linear.src if c.op is not Ops.CALL or not isinstance(c.arg, tuple)), None)) is not None:
    raise TypeError(f"a LINEAR holds CALLs of (kernel AST, var values) on BUFFERs, got a {bad.op.name} with arg {bad.arg!r}")
  return [ScheduleItem(c.arg[0], list(c.src), dict(c.arg[1])) for c in linear.src]


def run_linear(linear: UOp) -> None:
  """Run every call of the schedule, in order."""
  run_schedule(from_linear(linear))
