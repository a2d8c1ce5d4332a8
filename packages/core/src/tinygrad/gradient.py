"""Reverse-mode autodiff as a transform of the tensor UOp graph: one backward rule per op."""
from __future__ import annotations

import math
import weakref
from collections.abc import Callable

from tinygrad.dtype import dtypes
from tinygrad.helpers import argsort
from tinygrad.uop.ops import GroupOp, Ops, UOp

Grads = tuple[UOp | None, ...]


# ---- tensor-graph builders (shapes already agree here: the Tensor layer broadcasts)

def const_like(u: UOp, value: float) -> UOp:
  c = UOp.const(u.dtype, value, (UOp(Ops.DEVICE, arg=u.device),))
  if u.shape == (): return c
  return UOp(Ops.EXPAND, u.dtype, (UOp(Ops.RESHAPE, u.dtype, (c,), (1,) * len(u.shape)),), u.shape)


def reduce_to(g: UOp, shape: tuple[int, ...]) -> UOp:
  """Sum g over the axes where `shape` has size 1 but g does not (the adjoint of expand). 8- and 16-bit floats accumulate in
  float32 and round once, as Tensor.sum does (torch), not after each addition."""
  axes = tuple(i for i, (a, b) in enumerate(zip(g.shape, shape)) if a != b)
  if not axes: return g
  if dtypes.is_float(g.dtype) and g.dtype.itemsize < 4:
    return UOp(Ops.REDUCE_AXIS, dtypes.float32, (g.cast(dtypes.float32),), (Ops.ADD, axes)).cast(g.dtype)
  return UOp(Ops.REDUCE_AXIS, g.dtype, (g,), (Ops.ADD, axes))


def expand_to(g: UOp, shape: tuple[int, ...]) -> UOp: return g if g.shape == shape else UOp(Ops.EXPAND, g.dtype, (g,), shape)


def _max_grad(g: UOp, ret: UOp, a: UOp, b: UOp) -> Grads:
  # ties split the gradient evenly, as in tinygrad and torch's maximum
  lt, eq = a.alu(Ops.CMPLT, b), a.alu(Ops.CMPEQ, b)
  zero, half, one = const_like(g, 0.0), const_like(g, 0.5), const_like(g, 1.0)
  return g * lt.where(zero, eq.where(half, one)), g * lt.where(one, eq.where(half, zero))


def _reduce_grad(g: UOp, ret: UOp, x: UOp) -> Grads:
  op, _ = ret.arg
  if op is Ops.ADD: return (expand_to(g, x.shape),)
  if op is Ops.MAX:
    hit = x.alu(Ops.CMPEQ, expand_to(ret, x.shape)).where(const_like(x, 1.0), const_like(x, 0.0))
    count = UOp(Ops.REDUCE_AXIS, x.dtype, (hit,), (Ops.ADD, ret.arg[1]))
    return (hit * expand_to(g * count.alu(Ops.RECIPROCAL), x.shape),)
  if op is Ops.MUL:  # d(prod)/dx_i = product of the others: exact with zeros (not ret / x)
    axes = ret.arg[1]
    is_zero = x.alu(Ops.CMPEQ, const_like(x, 0.0))
    nonzero = is_zero.where(const_like(x, 1.0), x)
    prod_nonzero = expand_to(UOp(Ops.REDUCE_AXIS, x.dtype, (nonzero,), (Ops.MUL, axes)), x.shape)
    zeros = expand_to(UOp(Ops.REDUCE_AXIS, x.dtype, (is_zero.where(const_like(x, 1.0), const_like(x, 0.0)),), (Ops.ADD, axes)), x.shape)
    others = zeros.alu(Ops.CMPEQ, const_like(x, 0.0)).where(prod_nonzero / nonzero,
                                                           is_zero.alu(Ops.AND, zeros.alu(Ops.CMPEQ, const_like(x, 1.0))).where(prod_nonzero, const_like(x, 0.0)))
    return (expand_to(g, x.shape) * others,)
  raise NotImplementedError(f"no gradient for reduce {op}")


def _call_grad(g: UOp, ret: UOp, *args: UOp) -> Grads:
  """A custom kernel (Tensor.custom_kernel): its grad_fxn(gradient, call) gives one gradient (or None) per argument."""
  name = ret.arg.ast.arg.name or "without a name"
  if ret.arg.grad_fxn is None: raise NotImplementedError(f"custom kernel {name} has no backward: pass grad_fxn= to custom_kernel")
  grads = tuple(ret.arg.grad_fxn(g, ret))
  if len(grads) != len(args): raise ValueError(f"grad_fxn of custom kernel {name} returned {len(grads)} gradients for {len(args)} arguments")
  return grads


# Gradients a frontend op gives for its own graph (conv2d: its input's, as a transposed convolution, instead of the adjoint of
# the sliding windows, a 9x buffer per 3x3 kernel and a masked sum over it that ran at 9 GFLOP/s). Keyed by the op's MUL
# node: fn(gradient of the MUL) -> (indices of the MUL's sources that get no gradient, {node: gradient}), or None to leave
# the MUL to its rule. Weak keys: an entry lives as long as its graph does.
GRAD_OVERRIDES: weakref.WeakKeyDictionary[UOp, Callable[[UOp], tuple[set[int], dict[UOp, UOp]] | None]] = weakref.WeakKeyDictionary()

LN2 = math.log(2)

RULES: dict[Ops, Callable[..., Grads]] = {
  Ops.ADD: lambda g, ret, a, b: (g, g),
  Ops.SUB: lambda g, ret, a, b: (g, g.neg()),
  Ops.MUL: lambda g, ret, a, b: (g * b, g * a),
  Ops.FDIV: lambda g, ret, a, b: (g / b, (g.neg() * a) / (b * b)),
  Ops.NEG: lambda g, ret, a: (g.neg(),),
  Ops.RECIPROCAL: lambda g, ret, a: (g.neg() * ret * ret,),
  Ops.SQRT: lambda g, ret, a: (g / (ret * const_like(ret, 2.0)),),
  Ops.EXP2: lambda g, ret, a: (g * ret * const_like(ret, LN2),),
  Ops.LOG2: lambda g, ret, a: (g / (a * const_like(a, LN2)),),
  Ops.SIN: lambda g, ret, a: (g * (const_like(a, math.pi / 2) - a).alu(Ops.SIN),),
  Ops.MAX: _max_grad,
  Ops.WHERE: lambda g, ret, c, a, b: (None, c.where(g, const_like(g, 0.0)), c.where(const_like(g, 0.0), g)),
  Ops.CAST: lambda g, ret, a: (g.cast(a.dtype),),
  Ops.TRUNC: lambda g, ret, a: (const_like(g, 0.0),),
  Ops.RESHAPE: lambda g, ret, a: (UOp(Ops.RESHAPE, g.dtype, (g,), a.shape),),
  Ops.PERMUTE: lambda g, ret, a: (UOp(Ops.PERMUTE, g.dtype, (g,), tuple(argsort(ret.arg))),),
  Ops.EXPAND: lambda g, ret, a: (reduce_to(g, a.shape),),
  Ops.PAD: lambda g, ret, a: (UOp(Ops.SHRINK, g.dtype, (g,), tuple((b, b + s) for (b, _), s in zip(ret.arg, a.shape))),),
  Ops.SHRINK: lambda g, ret, a: (UOp(Ops.PAD, g.dtype, (g,), tuple((b, s - e) for (b, e), s in zip(ret.arg, a.shape))),),
  Ops.FLIP: lambda g, ret, a: (UOp(Ops.FLIP, g.dtype, (g,), ret.arg),),
  Ops.REDUCE_AXIS: _reduce_grad,
  Ops.CONTIGUOUS: lambda g, ret, a: (g,),
  # a tensor after a custom kernel wrote it: the gradient goes to the kernel (whose grad_fxn knows it), not the old contents
  Ops.AFTER: lambda g, ret, x, *deps: (None, *(g if d.op is Ops.CALL else None for d in deps)),
  Ops.CALL: _call_grad,
  # a pending write (setitem, assign): the tensor's value is what was written, so the written value gets its gradient and the
  # overwritten contents none (z[:] = x; z.sum().backward() gives x its gradient, as tinygrad and torch)
  Ops.ASSIGN: lambda g, ret, target, value: (None, g),
  Ops.COPY: lambda g, ret, a, dev: (UOp(Ops.COPY, g.dtype, (g, UOp(Ops.DEVICE, arg=a.device))), None),
}
NO_GRADIENT = GroupOp.Comparison | {Ops.BITCAST, Ops.DETACH, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.IDIV, Ops.MOD,
                                    Ops.CONST, Ops.BUFFER, Ops.DEVICE}


def compute_gradient(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
  """d(root)/d(node) for every node on a path from root to a target, seeded with root_grad."""
  # only walk nodes that lead to a target
  order = root.toposort(gate=lambda u: u.op not in (Ops.BUFFER, Ops.DETACH))
  on_path: set[UOp] = set()
  for n in order:
    if n in targets or any(s in on_path for s in n.src): on_path.add(n)
  grads: dict[UOp, UOp] = {root: root_grad}
  for node in reversed(order):
    if node not in grads or node.op in NO_GRADIENT or node in targets and not node.src: continue
    if not any(s in on_path for s in node.src): continue
    if node.op not in RULES: raise NotImplementedError(f"no gradient rule for {node.op}")
    src_grads = RULES[node.op](grads[node], node, *node.src)
    if (override := GRAD_OVERRIDES.get(node)) is not None and (given := override(grads[node])) is not None:
      # a target off the path needs no gradient (a constant exponent of pow); a skipped source on the path gets its
      # gradient through the targets that are on it
      skip, extra = given[0], {t: tg for t, tg in given[1].items() if t in on_path}
      src_grads = tuple(None if i in skip else sg for i, sg in enumerate(src_grads))
      for target, tg in extra.items(): grads[target] = grads[target] + tg if target in grads else tg
    for s, g in zip(node.src, src_grads):
      if g is None or s not in on_path: continue
      if s.dtype != g.dtype and dtypes.is_float(s.dtype): g = g.cast(s.dtype)
      grads[s] = grads[s] + g if s in grads else g
  return grads
