"""Kernels built before they are needed: a dry run of a computation keeps the schedules it would run (nothing is lowered,
allocated or executed, so its tensors may be buffers that hold nothing yet), and `build_ahead` hands their new kernels to the
compile pool (workers.py) without waiting. When a later schedule meets one of those kernels it takes the pool's program and
binary (engine/realize.py `_take_ahead`), waiting for it if need be; one the pool failed on is lowered there as usual, so its
error is raised where it would have been.

The llm package dry-runs a model's first prompt over weights not read yet: the prefill's kernels compile in the pool's
processes while this one reads the file."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tinygrad.device.registry import Device
from tinygrad.engine import realize
from tinygrad.helpers import DEBUG
from tinygrad.schedule.kernelize import ScheduleItem
from tinygrad.uop.ops import Ops

stats = {"submitted": 0}


@contextlib.contextmanager
def dry_run() -> Iterator[list[ScheduleItem]]:
  """Inside, realizing tensors schedules them (they then refer to their buffers, unallocated) but runs nothing: the schedule
  items are appended to the list this yields. A readback of a dry-run tensor is an error of the caller's (it holds nothing)."""
  items: list[ScheduleItem] = []
  realize.collecting.append(items)
  try: yield items
  finally: realize.collecting.pop()


def build_ahead(items: list[ScheduleItem]) -> int:
  """Start building the kernels of these items that no runner exists for yet in the compile pool; returns how many. Nothing
  without a pool, or under settings the pool doesn't honour (realize._build_in_pool)."""
  from tinygrad.helpers import overridden
  from tinygrad.workers import compile_pool
  if DEBUG >= 3 or realize.recorder is not None or realize.beam_width() or (pool := compile_pool()) is None: return 0
  new: dict[tuple, tuple] = {}
  for si in items:
    if si.ast.op is Ops.COPY: continue
    device = str(si.bufs[0].device)
    renderer = Device.renderer(device)
    key = realize._runner_key(device, si.ast, renderer)
    if key not in realize._runner_cache and key not in realize._ahead: new.setdefault(key, (si.ast, renderer))
  settings = overridden()
  futures = pool.submit(realize.lower_and_compile, [(ast, renderer, settings) for ast, renderer in new.values()])
  realize._ahead.update(zip(new, futures))
  stats["submitted"] += len(new)
  return len(new)
