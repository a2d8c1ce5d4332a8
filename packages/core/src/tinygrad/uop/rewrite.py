"""Rewrite rules as data: `UPat` patterns, a `PatternMatcher` of (pattern, function) rules, and
`graph_rewrite`, which applies a matcher to every node of a graph until nothing changes.

Rewriting is iterative (an explicit stack), so graphs of any depth work.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tinygrad.dtype import DType
from tinygrad.uop.ops import Ops, UOp

RewriteFn = Callable[..., UOp | None]


class UPat:
  """A pattern over UOps.

  op: an Ops or a set of them (None: any). dtype: a DType or set. arg: exact value (None: any).
  src: a tuple (sources in order), a list (in any order: for commutative ops), or one UPat that every
  source must match. name: bind the matched node to this keyword for the rule's function.
  """
  __slots__ = ("ops", "dtypes", "src", "arg", "name", "allow_any_len", "custom")

  def __init__(self, op: Ops | Iterable[Ops] | None = None, dtype: DType | Iterable[DType] | None = None,
               src: UPat | Sequence[UPat] | None = None, arg: Any = None, name: str | None = None,
               allow_any_len: bool = False, custom: Callable[[UOp], bool] | None = None):
    self.ops: frozenset[Ops] | None = None if op is None else (frozenset({op}) if isinstance(op, Ops) else frozenset(op))
    self.dtypes: frozenset[DType] | None = None if dtype is None else (frozenset({dtype}) if isinstance(dtype, DType) else frozenset(dtype))
    self.src = src
    self.arg = arg
    self.name = name
    self.allow_any_len = allow_any_len
    self.custom = custom

  @staticmethod
  def var(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat: return UPat(dtype=dtype, name=name)

  @staticmethod
  def cvar(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
    return UPat(Ops.CONST, dtype=dtype, name=name)

  @staticmethod
  def const(dtype: DType | Iterable[DType] | None, value: Any) -> UPat: return UPat(Ops.CONST, dtype=dtype, arg=value)

  def named(self, name: str) -> UPat:
    return UPat(self.ops, self.dtypes, self.src, self.arg, name, self.allow_any_len, self.custom)

  # building patterns with operators, mirroring UOp's
  def alu(self, op: Ops, *src: UPat) -> UPat: return UPat(op, src=[self, *src] if op in _COMMUTATIVE else (self, *src))
  def __add__(self, x: UPat) -> UPat: return self.alu(Ops.ADD, x)
  def __mul__(self, x: UPat) -> UPat: return self.alu(Ops.MUL, x)
  def __floordiv__(self, x: UPat) -> UPat: return self.alu(Ops.IDIV, x)
  def __mod__(self, x: UPat) -> UPat: return self.alu(Ops.MOD, x)
  def __lt__(self, x: UPat) -> UPat: return self.alu(Ops.CMPLT, x)
  def __and__(self, x: UPat) -> UPat: return self.alu(Ops.AND, x)
  def __or__(self, x: UPat) -> UPat: return self.alu(Ops.OR, x)

  def __repr__(self) -> str:
    return f"UPat({sorted(o.name for o in self.ops) if self.ops else None}, name={self.name!r}, arg={self.arg!r}, src={self.src!r})"

  def match(self, u: UOp, bindings: dict[str, UOp]) -> list[dict[str, UOp]]:
    """All ways `u` matches, each as the bindings extended with this pattern's names."""
    if self.ops is not None and u.op not in self.ops: return []
    if self.dtypes is not None and u.dtype not in self.dtypes and u.dtype.scalar() not in self.dtypes: return []
    if self.arg is not None and u.arg != self.arg: return []
    if self.custom is not None and not self.custom(u): return []
    if self.name is not None:
      if (prev := bindings.get(self.name)) is not None:
        if prev is not u: return []
      else: bindings = {**bindings, self.name: u}
    if self.src is None: return [bindings]
    if isinstance(self.src, UPat): return _match_all(u.src, [self.src] * len(u.src), bindings)
    if isinstance(self.src, list):
      if len(u.src) != len(self.src): return []
      out: list[dict[str, UOp]] = []
      for perm in _permutations(len(self.src)):
        out.extend(_match_all(u.src, [self.src[i] for i in perm], bindings))
      return out
    if len(u.src) != len(self.src) and not (self.allow_any_len and len(u.src) >= len(self.src)): return []
    return _match_all(u.src[:len(self.src)], list(self.src), bindings)


_COMMUTATIVE = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR})
_PERMS: dict[int, list[tuple[int, ...]]] = {}


def _permutations(n: int) -> list[tuple[int, ...]]:
  if n not in _PERMS: _PERMS[n] = list(itertools.permutations(range(n)))
  return _PERMS[n]


def _match_all(srcs: Sequence[UOp], pats: Sequence[UPat], bindings: dict[str, UOp]) -> list[dict[str, UOp]]:
  candidates = [bindings]
  for s, p in zip(srcs, pats):
    candidates = [b2 for b in candidates for b2 in p.match(s, b)]
    if not candidates: return []
  return candidates


class PatternMatcher:
  """An ordered list of rules. The first rule whose pattern matches and whose function returns a
  UOp (not None) rewrites the node. Rules are indexed by the op they match, so lookup is cheap."""

  def __init__(self, rules: Sequence[tuple[UPat, RewriteFn]]):
    self.rules = list(rules)
    self._by_op: dict[Ops, list[tuple[UPat, RewriteFn, bool]]] = {}
    for pat, fn in self.rules:
      wants_ctx = "ctx" in fn.__code__.co_varnames[:fn.__code__.co_argcount] if hasattr(fn, "__code__") else False
      for op in (pat.ops if pat.ops is not None else Ops):
        self._by_op.setdefault(op, []).append((pat, fn, wants_ctx))

  def __add__(self, other: PatternMatcher) -> PatternMatcher: return PatternMatcher(self.rules + other.rules)

  def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
    for pat, fn, wants_ctx in self._by_op.get(u.op, ()):
      for bindings in pat.match(u, {}):
        result = fn(ctx=ctx, **bindings) if wants_ctx else fn(**bindings)
        if result is not None and result is not u: return result
    return None

  def rewrite_with_rule(self, u: UOp, ctx: Any = None) -> tuple[UOp, UPat, RewriteFn] | None:
    """`rewrite`, also saying which rule fired (for tracing: `tracer` below; not on the hot path)."""
    for pat, fn, wants_ctx in self._by_op.get(u.op, ()):
      for bindings in pat.match(u, {}):
        result = fn(ctx=ctx, **bindings) if wants_ctx else fn(**bindings)
        if result is not None and result is not u: return result, pat, fn
    return None


# tinygrad.viz installs its recorder here when VIZ is on; None (the default) costs graph_rewrite one check per call
tracer: Callable[[UOp, PatternMatcher, Any, bool, str], UOp] | None = None


def graph_rewrite(root: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False, name: str = "") -> UOp:
  """Rewrite every node reachable from `root` with `pm` until no rule applies.

  Default order: a node's sources are rewritten first, then the node (and whatever it became, again).
  bottom_up=True tries the node before its sources, for rules that must see the original parent.
  """
  if tracer is not None: return tracer(root, pm, ctx, bottom_up, name)  # it calls back here with tracer None and its own `pm`
  done: dict[UOp, UOp] = {}
  # stack entries: (node, stage, rewritten_to); stage 0: visit, 1: sources done, 2: forward result
  stack: list[tuple[UOp, int, UOp | None]] = [(root, 0, None)]
  while stack:
    node, stage, target = stack.pop()
    if node in done: continue
    if stage == 0:
      if bottom_up and (new := _rewrite_fixed(pm, node, ctx)) is not node:
        stack.append((node, 2, new))
        stack.append((new, 0, None))
        continue
      stack.append((node, 1, None))
      stack.extend((s, 0, None) for s in reversed(node.src) if s not in done)
    elif stage == 1:
      src = tuple(done[s] for s in node.src)
      rebuilt = node if src == node.src else UOp(node.op, node.dtype, src, node.arg)
      result = pm.rewrite(rebuilt, ctx)
      if result is None:
        done[node] = rebuilt
        if rebuilt is not node: done[rebuilt] = rebuilt
      else:
        stack.append((node, 2, result))
        stack.append((result, 0, None))
    else:
      assert target is not None
      done[node] = done[target]
  return done[root]


def _rewrite_fixed(pm: PatternMatcher, u: UOp, ctx: Any) -> UOp:
  while (new := pm.rewrite(u, ctx)) is not None: u = new
  return u
