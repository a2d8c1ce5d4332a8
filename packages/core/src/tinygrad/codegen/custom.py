"""Hand-written kernels (uop/dsl.py, a SINK whose arg is a KernelInfo): where their loops run.

On a GPU-style renderer (`has_local`) every GLOBAL range becomes a block index and every LOCAL range a thread index of the
block (SPECIAL gidxN / lidxN, N counted from the innermost range: x is the fastest-varying), and their ENDs go. Elsewhere
GLOBAL ranges stay loops; LOCAL ranges, shared memory and barriers need blocks of threads, so they are an error there,
except on a renderer that `runs_blocks` (PYTHON's interpreter), where such a kernel is lowered as for a GPU.
"""
from __future__ import annotations

from tinygrad.dtype import dtypes
from tinygrad.renderer import Renderer
from tinygrad.uop.dsl import KernelInfo, finalize_kernel
from tinygrad.uop.ops import Ops, UOp


def is_hand_written(ast: UOp) -> bool: return ast.op is Ops.SINK and isinstance(ast.arg, KernelInfo)


def lower_hand_ranges(ast: UOp, renderer: Renderer) -> tuple[UOp, tuple, tuple]:
  """(ast, global_size, local_size) with the kernel's GLOBAL/LOCAL ranges mapped to the renderer's threads. (The kernel may
  come as written, straight from uop/dsl.py: finalizing it again changes nothing.)"""
  ast = finalize_kernel(ast)
  nodes = ast.toposort()
  ranges = sorted((n for n in nodes if n.op is Ops.RANGE), key=lambda r: r.arg[0])
  glob = [r for r in ranges if r.arg[1] == "global"]
  loc = [r for r in ranges if r.arg[1] == "local"]
  needs = [n.op.name for n in nodes if n.op in (Ops.DEFINE_LOCAL, Ops.BARRIER)] + ["a LOCAL range"] * bool(loc)
  if not renderer.has_local and not (needs and renderer.runs_blocks):
    if needs:
      raise ValueError(f"kernel {ast.arg.name or ''}: {renderer.name} runs no blocks of threads, so {sorted(set(needs))} can't run there; "
                       "write the kernel with GLOBAL/LOOP ranges for it (check `Device.renderer(dev).has_local or Device.renderer(dev).runs_blocks`)")
    return ast, (1, 1, 1), (1, 1, 1)
  for kind, rs in (("GLOBAL", glob), ("LOCAL", loc)):
    if len(rs) > 3: raise ValueError(f"kernel {ast.arg.name or ''}: {len(rs)} {kind} ranges; a GPU launch has 3 dims, merge some into one")
    if (bad := next((r for r in rs if r.src[0].op is not Ops.CONST), None)) is not None:
      raise ValueError(f"kernel {ast.arg.name or ''}: {kind} range {bad.arg[0]} has a symbolic size; thread dims must be ints")
  mapping: dict[UOp, UOp] = {}
  sizes: dict[str, list[int]] = {"gidx": [], "lidx": []}
  for prefix, rs in (("gidx", glob), ("lidx", loc)):
    for dim, r in enumerate(reversed(rs)):
      mapping[r] = UOp(Ops.SPECIAL, dtypes.int32, (), (f"{prefix}{dim}", r.src[0].arg))
      sizes[prefix].append(r.src[0].arg)
  if not mapping: return ast, (1, 1, 1), (1, 1, 1)
  ast = _drop_ends(ast, set(mapping)).substitute(mapping)
  def dims(xs: list[int]) -> tuple: return tuple(xs + [1] * (3 - len(xs)))
  return ast, dims(sizes["gidx"]), dims(sizes["lidx"])


def _drop_ends(sink: UOp, ranges: set[UOp]) -> UOp:
  """Remove the ENDs of `ranges`: each is replaced, in every node that uses it, by the side effects it ordered."""
  new: dict[UOp, tuple[UOp, ...]] = {}
  for n in sink.toposort():
    src = tuple(x for s in n.src for x in new[s])
    if n.op is Ops.END and n.src[0] in ranges: new[n] = src[1:]
    else: new[n] = (n if src == n.src else n.replace(src=src),)
  return new[sink][0]
