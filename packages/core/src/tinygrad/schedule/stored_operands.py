"""A CPU matmul's computed operand stored once, not computed again for every register block that reads it.

Elementwise ops fuse into the kernel that reads them. In a matmul (a REDUCE_AXIS(ADD) of a MUL, one reduction axis) an operand
is read once per register block along the output axis it doesn't move with: A (the rows) once per 16-column panel of B, B once
per block of A's rows. An operand computed in the kernel (`relu(h + b)` before the next layer, `g * (h > 0)` in a weight
gradient, random weights never realized) is then computed N/16 times per element: in an MLP's 128x512 @ 512x512 the relu of
the bias add cost 8 scalar compare-and-selects per 8 vector multiply-adds (45-70 GFLOP/s where the same product over buffers
runs 200+). Stored first (a small elementwise kernel of its own, one write), the matmul reads a buffer, which pack.py can
also pack.

Only elementwise values over buffers and whole reduction outputs (a row reduction broadcast inside, a norm's or a softmax's,
keeps the value fused: a row kernel's), not wider than what they
read (a broadcast sum would store more than it saves), reused by STORE_OPERAND_MIN_REUSE or more outputs. CPU-style devices
only (kernelize's SplitPolicy): a GPU's matmul reads its operands once per tile, and tinygrad.llm fuses its norms into them.
"""
from __future__ import annotations

from collections.abc import Callable

from tinygrad.helpers import ContextVar
from tinygrad.schedule.recompute import _elements
from tinygrad.uop.ops import GroupOp, Ops, UOp

STORE_OPERANDS = ContextVar("STORE_OPERANDS", 1)  # 0: a matmul's computed operands fuse into it
STORE_OPERAND_MIN_REUSE = 64  # output elements that read each element of the operand: below that recomputing is cheap
# ALU ops (casts aside) an element costs, at least: one multiply (a norm's weight, `(x * g) @ W.T`) stays fused. Measured on
# 2 cores: 64x256 (x * g) @ (1024x256 half).T 0.55 ms fused, 2.0 stored: LLVM's SLP vectorizer leaves the plain x @ W.T of
# that kernel form scalar (128 scalar FMAs a step; with the multiply inside, 8 vector ones)
STORE_OPERAND_MIN_OPS = 2
STORE_OPERAND_MIN_ROWS = 16  # ... and that read each element of the other operand (see store_computed_operands)
_LEAVES = (Ops.BUFFER, Ops.CONTIGUOUS, Ops.IOTA, Ops.CONST, Ops.DEVICE)


def computed_value(base: UOp) -> bool:
  """base is elementwise math (STORE_OPERAND_MIN_OPS ALU ops or more, casts aside) over buffers, iotas, constants and whole
  reduction outputs (no row statistic broadcast inside), and holds no more elements than the widest thing it reads."""
  if base.op not in GroupOp.ALU and base.op is not Ops.CAST: return False
  if base.shape is None or not all(isinstance(s, int) for s in base.shape): return False
  widest = alu = 0  # (a cast alone, a half cache or weight read as float, is as cheap as the load it converts: not stored)
  for n in base.toposort(gate=lambda u: u.op not in _LEAVES and u.op is not Ops.REDUCE_AXIS):
    # a reduction's full output (the matmul before: its own kernel) is data read; a narrower one broadcast (a norm's or a
    # softmax's row statistics) would make this a row kernel's value, which stays fused
    if n.op is Ops.REDUCE_AXIS and (n is base or _elements(n) != _elements(base)): return False
    if n.op not in _LEAVES and n.op not in GroupOp.Movement and n.op not in GroupOp.ALU and n.op not in (Ops.CAST, Ops.REDUCE_AXIS):
      return False  # something realized on its own (a copy, an assign, a call): not this rewrite's
    if n.op in (Ops.BUFFER, Ops.CONTIGUOUS, Ops.IOTA, Ops.REDUCE_AXIS) and n.shape is not None: widest = max(widest, _elements(n))
    alu += n.op in GroupOp.ALU
  return alu >= STORE_OPERAND_MIN_OPS and _elements(base) <= widest


def _reductions_stored(base: UOp) -> UOp:
  """base reading each reduction inside it from a buffer of its own: fused into the stored value's kernel, a reduction that
  other kernels read too (the forward's product, whose relu mask the backward reads) would be computed twice."""
  reds = [n for n in base.toposort(gate=lambda u: u.op not in _LEAVES and u.op is not Ops.REDUCE_AXIS) if n.op is Ops.REDUCE_AXIS]
  return base.substitute({n: UOp(Ops.CONTIGUOUS, n.dtype, (n,)) for n in reds}) if reds else base


def store_computed_operands(r: UOp, reused: Callable[[UOp, UOp, int], bool]) -> UOp | None:
  """r (a CPU REDUCE_AXIS) with each computed operand of its product read from a stored copy, or None where none applies.
  `reused(op, r, n)`: whether op's element serves n or more outputs of r (pack.py's _reused). Not for a matrix-vector product
  (fewer than STORE_OPERAND_MIN_ROWS outputs for the other operand's element: a CPU decode step's `(x * g) @ W.T`), whose
  vector is small and whose weight is read once: a kernel more would cost more than the vector's recomputed ops."""
  if not STORE_OPERANDS.value or r.arg[0] is not Ops.ADD or (x := r.src[0]).op is not Ops.MUL: return None
  if not all(isinstance(s, int) for s in x.shape) or sum(1 for a in r.arg[1] if x.shape[a] > 1) != 1: return None
  new = []
  for op in x.src:
    base = op.base
    other = x.src[1] if op is x.src[0] else x.src[0]
    if computed_value(base) and reused(op, r, STORE_OPERAND_MIN_REUSE) and reused(other, r, STORE_OPERAND_MIN_ROWS):
      op = op.substitute({base: UOp(Ops.CONTIGUOUS, base.dtype, (_reductions_stored(base),))})
    new.append(op)
  return None if tuple(new) == x.src else r.replace(src=(x.replace(src=tuple(new)),))
