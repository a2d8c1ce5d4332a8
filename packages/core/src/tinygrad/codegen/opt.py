"""Kernel optimizations as explicit, replayable actions on a kernel AST.

  UPCAST(axis, k)  an output loop (or a row kernel's loop over its outputs, codegen/rows.py) runs k times fewer iterations and each computes k outputs: the body is
                   copied k times with the loop index r -> r*k + c, so the copies share loads of everything
                   that doesn't depend on r (register blocking) and sit side by side for the vectorizer.
  UNROLL(axis, k)  a reduce loop runs k times fewer iterations with k independent accumulators, combined
                   after the loop: k-wide vector accumulation instead of one serial dependency chain.
  THREAD(axis, n)  output loop `axis` (where no such loop: the outermost) is split across n CPU threads (at lowering, threads.py).
  GROUP(axis, G)   GPUs only: the G threads of a block share each reduction over reduce loop `axis` (size N): the loop
                   becomes r*G + g with g a thread index, each thread reduces its strided slice, the G partials meet in
                   shared memory (codegen/group.py). In the AST: REDUCE(x, r) -> REDUCE(REDUCE(x', r_outer), g), with g a
                   RANGE of kind "group" -- the same value, so the kernel stays checkable before lowering.
  TC(t, c)         the whole kernel becomes a tiled tensor-core matmul with the renderer's tensor core t and tile
                   config c (codegen/tensor_core.py; applied at lowering, and alone: no other opt combines with it).

`axis` is a RANGE's id. Actions compose: a list of Opts applied in order is how heuristics and BEAM
describe a kernel, and what the on-disk BEAM cache stores.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from tinygrad.uop.ops import Ops, UOp, identity_element


class OptOps(Enum):
  UPCAST = auto(); UNROLL = auto(); THREAD = auto(); TC = auto(); GROUP = auto(); BLOCK = auto()  # noqa: E702

  def __repr__(self) -> str: return f"OptOps.{self.name}"


@dataclass(frozen=True, order=True)
class Opt:
  op: OptOps
  axis: int
  amount: int

  def __repr__(self) -> str: return f"Opt({self.op.name}, {self.axis}, {self.amount})"


class KernelOptError(ValueError): pass


def ranges_of(ast: UOp) -> dict[int, UOp]:
  """Loop ranges by id."""
  return {n.arg[0]: n for n in ast.toposort() if n.op is Ops.RANGE}


def range_size(r: UOp) -> int | None:
  return r.src[0].arg if r.src[0].op is Ops.CONST else None


def _split(r: UOp, k: int) -> UOp:
  size = range_size(r)
  if size is None: raise KernelOptError(f"can't split loop {r.arg[0]}: its size is symbolic")
  if k < 2 or size % k: raise KernelOptError(f"can't split loop {r.arg[0]} of size {size} by {k}")
  return r.replace(src=(UOp.const(r.dtype, size // k), *r.src[1:]))


def _at(r_outer: UOp, k: int, c: int) -> UOp: return r_outer * k + c if c else r_outer * k


def upcast(ast: UOp, axis: int, k: int) -> UOp:
  r = ranges_of(ast).get(axis)
  if r is None or r.arg[1] not in ("global", "row"):
    raise KernelOptError(f"UPCAST needs an output loop, {axis} is {'missing' if r is None else r.arg[1]}")
  outer = _split(r, k)
  new_src: list[UOp] = []
  for s in ast.src:
    if r in s.toposort(): new_src.extend(s.substitute({r: _at(outer, k, c)}) for c in range(k))
    else: new_src.append(s)
  return ast.replace(src=tuple(new_src))


def unroll(ast: UOp, axis: int, k: int) -> UOp:
  r = ranges_of(ast).get(axis)
  if r is None or r.arg[1] != "reduce": raise KernelOptError(f"UNROLL needs a reduce loop, {axis} is {'missing' if r is None else r.arg[1]}")
  outer = _split(r, k)
  replace: dict[UOp, UOp] = {}
  for red in (n for n in ast.toposort() if n.op is Ops.REDUCE and r in n.src[1:]):
    others = tuple(x for x in red.src[1:] if x is not r)
    parts = [UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute({r: _at(outer, k, c)}), outer, *others), red.arg) for c in range(k)]
    combined = parts[0]
    for p in parts[1:]: combined = UOp(red.arg, red.dtype, (combined, p))
    replace[red] = combined
  return ast.substitute(replace)


def block(ast: UOp, axis: int, k: int) -> UOp:
  """Cache blocking: output loop `axis` becomes an outer loop (same id, size/k) and an inner one of size k that nests inside
  every other output loop (the reduces' loops move one id up). In a matmul blocked over its rows, the columns' loop then runs
  k row tiles over each column panel of B while it is in cache, instead of streaming all of B once per row tile."""
  rngs = ranges_of(ast)
  r = rngs.get(axis)
  if r is None or r.arg[1] != "global": raise KernelOptError(f"BLOCK needs an output loop, {axis} is {'missing' if r is None else r.arg[1]}")
  outer = _split(r, k)
  new_id = max(i for i, x in rngs.items() if x.arg[1] == "global") + 1
  moved = {x: x.replace(arg=(i + 1, *x.arg[1:])) for i, x in rngs.items() if i >= new_id}
  inner = UOp(Ops.RANGE, r.dtype, (UOp.const(r.dtype, k),), (new_id, "global"))
  return ast.substitute({**moved, r: outer * k + inner})


def group(ast: UOp, axis: int, g: int) -> UOp:
  """REDUCE(x, r) -> REDUCE(REDUCE(x[r := r_outer*g + lane], r_outer), lane): `lane` (a "group" RANGE, a thread index once
  lowered) picks neighbouring elements for neighbouring threads. A size g doesn't divide gets ceil(N/g) steps, the
  ones past the end read a clamped element and contribute the reduction's identity."""
  rngs = ranges_of(ast)
  r = rngs.get(axis)
  if r is None or r.arg[1] != "reduce": raise KernelOptError(f"GROUP needs a reduce loop, {axis} is {'missing' if r is None else r.arg[1]}")
  if g < 2: raise KernelOptError(f"GROUP by {g}: needs at least 2 threads")
  if any(x.arg[1] == "group" for x in rngs.values() if range_size(x) != g):
    raise KernelOptError(f"GROUP by {g}: the kernel already groups by another size (one thread index serves every group)")
  size = r.src[0]
  if (n := range_size(r)) is not None and n < g: raise KernelOptError(f"GROUP by {g} of loop {axis} of size {n}: more threads than elements")
  lane = UOp(Ops.RANGE, r.dtype, (UOp.const(r.dtype, g),), (max(rngs) + 1, "group"))
  exact = n is not None and n % g == 0
  outer = r.replace(src=(UOp.const(r.dtype, n // g) if exact and n is not None else (size + (g - 1)) // g, *r.src[1:]))
  idx = outer * g + lane
  valid = None if exact else idx < size
  replace: dict[UOp, UOp] = {}
  for red in (x for x in ast.toposort() if x.op is Ops.REDUCE and r in x.src[1:]):
    # every grouped reduce uses the one lane index: a reduce already grouped over another loop would then only see the
    # pairs of lanes with equal indices (the diagonal), not all G x G of them
    if _free_lanes(red.src[0]) or any(x.arg[1] == "group" for x in red.src[1:]):
      raise KernelOptError(f"GROUP of loop {axis}: its reduction is already grouped over another loop")
    val = red.src[0].substitute({r: idx if valid is None else valid.where(idx, UOp.const(r.dtype, 0))})
    if valid is not None: val = valid.where(val, UOp.const(red.dtype, identity_element(red.arg, red.dtype)))
    inner = UOp(Ops.REDUCE, red.dtype, (val, *(outer if x is r else x for x in red.src[1:])), red.arg)
    replace[red] = UOp(Ops.REDUCE, red.dtype, (inner, lane), red.arg)
  return ast.substitute(replace)


def _free_lanes(u: UOp) -> set[UOp]:
  """Group ranges u depends on that no REDUCE inside u reduces over."""
  nodes = u.toposort()
  return {n for n in nodes if n.op is Ops.RANGE and n.arg[1] == "group"} - {x for n in nodes if n.op is Ops.REDUCE for x in n.src[1:]}


def apply_opt(ast: UOp, opt: Opt) -> UOp:
  if opt.op is OptOps.UPCAST: return upcast(ast, opt.axis, opt.amount)
  if opt.op is OptOps.GROUP: return group(ast, opt.axis, opt.amount)
  if opt.op is OptOps.UNROLL: return unroll(ast, opt.axis, opt.amount)
  if opt.op is OptOps.BLOCK: return block(ast, opt.axis, opt.amount)
  if opt.op is OptOps.THREAD: return ast  # applied when lowering for the device (threads.py)
  if opt.op is OptOps.TC: return ast  # applied when lowering (codegen/tensor_core.py)
  raise KernelOptError(f"unknown opt {opt}")


def apply_opts(ast: UOp, opts: list[Opt]) -> UOp:
  if any(o.op is OptOps.TC for o in opts) and len(opts) > 1: raise KernelOptError(f"TC combines with no other opt: {opts}")
  for o in opts: ast = apply_opt(ast, o)
  return ast
