"""Row kernels: a reduction over the last axis and the elementwise ops that broadcast its result back along that axis, in one
kernel (softmax, log_softmax, RMSNorm, LayerNorm):

  out[r, c] = f(x[r, c], red(x[r, :]))       for each row r: the reductions, then a loop over c writing the outputs

The scheduler (kernelize.find_realizes) keeps such a chain in one kernel when the row is short enough to stay in cache while
it is read again (ROW_FUSE_MAX). In the kernel AST (indexing.kernel_ast) the output loops that no reduction reads become
"row" ranges numbered after the reduce loops, so the reductions run once per row, before them (codegen/rows.py lowers
those loops: vectorized on a CPU, spread over a GROUP's lanes on a GPU).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tinygrad.codegen.rows import row_lanes
from tinygrad.helpers import ContextVar, prod
from tinygrad.uop.ops import GroupOp, Ops, UOp

if TYPE_CHECKING:
  from tinygrad.schedule.kernelize import SplitPolicy

# the longest row fused (elements): the row is read once per reduction and once more for the outputs, so it should stay in
# a core's cache (16384 float32 = 64 KB, an L2's share on the CPUs here, and the 16 KB-64 KB a GPU block keeps in L1/L2)
# ROW_FUSE_MAX=0 turns row kernels off
ROW_FUSE_MAX = ContextVar("ROW_FUSE_MAX", 16384)


def row_limit(red: UOp, policy: SplitPolicy) -> int:
  """The longest row `red` may fuse with its broadcast consumers on its device. On a GPU only where codegen gives every row
  a group of threads (GROUP): a thread per row would write its row alone, uncoalesced. The heuristics group up to
  `policy.group_max_outputs` rows; rows that fit codegen/rows.py's lanes (row_lanes) are grouped however many."""
  device = red.device if isinstance(red.device, str) else red.device[0]
  if not policy.gpu(device): return ROW_FUSE_MAX.value
  rows, n = prod(red.shape), red.src[0].shape[-1] if red.src[0].shape else 0
  if not policy.group_rows or not isinstance(rows, int): return 0
  return ROW_FUSE_MAX.value if rows < policy.group_max_outputs or (isinstance(n, int) and row_lanes(n)) else 0


def row_shape(red: UOp, limit: int) -> tuple[int, ...] | None:
  """The shape red's result may broadcast back to in its kernel: its input's, when it reduces the last axis alone over at
  most `limit` elements (several axes, an inner axis, a symbolic or longer row: None, a buffer as before)."""
  shape, axes = red.src[0].shape, red.arg[1]
  if not shape or axes != (len(shape) - 1,) or not all(isinstance(s, int) for s in shape): return None
  return shape if 1 < shape[-1] <= limit else None


def broadcast_rows(nodes: list[UOp], policy: SplitPolicy) -> set[UOp]:
  """The reductions a row kernel may hold: over a short last axis, with their result (or an elementwise function of it)
  broadcast back along that axis. The reduce split (kernelize.split_reduce) leaves them whole, so that they can fuse."""
  consumers: dict[UOp, list[UOp]] = {}
  for n in nodes:
    for s in n.src: consumers.setdefault(s, []).append(n)
  found: set[UOp] = set()
  for red in (n for n in nodes if n.op is Ops.REDUCE_AXIS):
    if (row := row_shape(red, row_limit(red, policy))) is None: continue
    frontier, seen = [red], {red}
    while frontier and red not in found:
      node = frontier.pop()
      for user in consumers.get(node, []):
        if user.op is Ops.EXPAND and user.shape == row and node.shape == red.shape: found.add(red)
        elif (user.op in GroupOp.Elementwise or user.op is Ops.DETACH) and user.shape == red.shape and user not in seen:
          seen.add(user)
          frontier.append(user)
  return found


def fits_row(user: UOp, row: tuple[int, ...], red: UOp, node: UOp | None = None) -> bool:
  """Can `user` of `node` (a value of red's row kernel) stay in the kernel? The broadcast of a per-row value back to the row,
  an elementwise op on the row, or another reduction of the row (softmax's sum of exp(x - max))."""
  if user.op is Ops.SINK: return True
  if user.op is Ops.EXPAND: return node is not None and node.shape == red.shape and user.shape == row
  if user.op is Ops.REDUCE_AXIS: return user.arg[1] == red.arg[1] and user.src[0].shape == row and (node is None or node.shape == row)
  return (user.op in GroupOp.Elementwise or user.op is Ops.DETACH) and user.shape == row


def reads_other_reduction(node: UOp, red: UOp, row: tuple[int, ...], realize: set[UOp], seen: set[UOp]) -> bool:
  """Does `node` (shape `row`, in red's row kernel) read, inside the kernel, a reduction whose value varies along the row (a
  matmul's output times a norm's scale when the matmul is as wide as the row)? Then that reduction's loop would be the
  kernel's output loop and red would run once per output element, so red gets a buffer instead. Reductions of the same rows,
  and whatever is broadcast along the row, are constant along it. `seen`: nodes already checked for this red."""
  stack = list(node.src)
  while stack:
    u = stack.pop()
    if u in seen or u in realize or u.op is Ops.BUFFER: continue
    seen.add(u)
    if u.op is Ops.REDUCE_AXIS:
      if u.arg[1] == red.arg[1] and u.src[0].shape == row: continue
      return True
    if u.op is Ops.EXPAND and len(u.shape) == len(row) and u.src[0].shape[-1] == 1: continue  # constant along the row
    stack.extend(u.src)
  return False


def mark_row_loops(ast: UOp) -> UOp:
  """Output loops of a kernel with reductions that no reduction reads become "row" ranges, numbered after every other range:
  the reductions run once per iteration of the loops they read, and these loops (over a row's outputs) after them."""
  nodes = ast.toposort()
  reds = [n for n in nodes if n.op is Ops.REDUCE]
  if not reds: return ast
  read = {n for red in reds for n in red.toposort() if n.op is Ops.RANGE}
  ranges = [n for n in nodes if n.op is Ops.RANGE]
  free = sorted((r for r in ranges if r.arg[1] == "global" and r not in read), key=lambda r: r.arg[0])
  if not free: return ast
  next_id = max(r.arg[0] for r in ranges) + 1
  return ast.substitute({r: r.replace(arg=(next_id + i, "row")) for i, r in enumerate(free)})
