"""The one IR: `Ops` and the immutable, hash-consed `UOp` node `(op, dtype, src, arg)`.

The same node type describes tensor graphs, kernel ASTs, linearized programs and schedules. Which ops
appear where is documented next to each op below; `uop/verify.py` checks it.
"""
from __future__ import annotations

import math
import weakref
from _weakref import _remove_dead_weakref  # type: ignore[attr-defined]  # (WeakValueDictionary removes dead entries with it)
from collections.abc import Callable, Iterator
from enum import Enum, auto
from typing import Any

from tinygrad.dtype import ConstType, DType, PtrDType, dtypes, truncate
from tinygrad.helpers import prod


class Ops(Enum):
  # --- tensor graph (lazy Tensor) ---
  DEVICE = auto()       # arg: device name; the source of BUFFER/CONST that says where they live
  BUFFER = auto()       # arg: (unique id, size); src: (DEVICE,); shape (size,)
  CONST = auto()        # arg: value; tensor graph: src (DEVICE,) shape (); kernels: no src
  RESHAPE = auto()      # arg: new shape
  PERMUTE = auto()      # arg: axis order
  EXPAND = auto()       # arg: new shape (size-1 axes grow)
  PAD = auto()          # arg: ((before, after), ...) zero padding
  SHRINK = auto()       # arg: ((start, end), ...)
  FLIP = auto()         # arg: tuple of bools, one per axis
  REDUCE_AXIS = auto()  # arg: (reduce op ADD|MUL|MAX, axes); keeps reduced axes as size 1
  COPY = auto()         # src: (x, DEVICE) copies x to another device
  CONTIGUOUS = auto()   # forces x into its own buffer
  DETACH = auto()       # x without gradient
  ASSIGN = auto()       # src: (target, value) writes value into target's buffer
  IOTA = auto()         # arg: n; src: (DEVICE,); shape (n,): element i is i (int32)
  INDEX_AT = auto()     # src: (tensor, gate, *idx): the tensor's element at idx where gate holds (scheduler only)
  CALL = auto()         # tensor graph: src: the tensors a hand-written kernel reads and writes, in parameter order; arg: uop.dsl.CustomKernel
                        # schedule (Tensor.schedule_linear): src: the BUFFERs; arg: (kernel AST or COPY, var values)
  LINEAR = auto()       # src: CALLs, in the order they run (a schedule as one UOp)
  MULTI = auto()        # src: one tensor per device; arg: (axis, bounds): sharded along axis (bounds: (start, end) per device),
                        # or (None, None): replicated. Its device is the tuple of devices (schedule/multi.py lowers it)
  # --- kernels and programs ---
  SINK = auto()         # groups outputs / side effects; a kernel AST is SINK(STORE...)
  DEFINE_GLOBAL = auto()  # arg: parameter number; dtype: PtrDType of a buffer
  DEFINE_VAR = auto()   # arg: (name, min, max); an int parameter (symbolic size)
  DEFINE_REG = auto()   # arg: id; dtype: PtrDType(addrspace="reg"), a small private array (accumulators)
  DEFINE_LOCAL = auto()  # arg: id; dtype: PtrDType(addrspace="local"), an array shared by the threads of a block
  BARRIER = auto()      # src: side effects (stores) it waits for; every thread of the block reaches it before any passes
  WMMA = auto()         # src: (A fragment, B fragment, C accumulator) vectors; dtype: the accumulator vector;
                        # arg: (TensorCore name, dims, dtype_in name, dtype_out name); one warp-wide matrix multiply-add
  SHUFFLE = auto()      # src: (x,); arg: lane mask m; x as the lane (this lane ^ m) of the same warp has it: a butterfly
                        # exchange that every lane of the warp runs together (Renderer.shuffle_lanes; codegen/group.py)
  RANGE = auto()        # src: (end, *order_after); arg: (id, kind); a loop variable 0..end-1
  END = auto()          # src: (range, *side_effects); closes the loop of `range` after side effects
  REDUCE = auto()       # src: (value, *ranges); arg: reduce op; value reduced over the ranges
  SPECIAL = auto()      # arg: (name, size); a GPU thread/group index
  INDEX = auto()        # src: (buf, idx); pointer to buf[idx]
  LOAD = auto()         # src: (ptr,) or (ptr, gate, alt): *ptr, or alt when gate is false
  STORE = auto()        # src: (ptr, value) or (ptr, value, gate); arg: None, "async" (a global -> shared copy: renderer.async_copy)
                        # or "add": *ptr += value atomically, no value returned (STORE_ADD: a sum over threads and blocks)
  AFTER = auto()        # src: (x, *deps): x, ordered after deps; tensor graph: (tensor, CALL): the tensor after the kernel wrote it
  VECTORIZE = auto()    # src: scalars -> one vector value
  GEP = auto()          # arg: (lane,); one lane of a vector
  BIND = auto()         # src: (DEFINE_VAR, CONST) a symbolic variable with its value
  NOOP = auto()
  PROGRAM = auto()      # src: (SOURCE, BINARY or both); arg: uop.dsl.ProgramInfo: a kernel handed in as the backend's source or binary
  SOURCE = auto()       # arg: program text in the renderer's language (C, CUDA C, LLVM IR, ...)
  BINARY = auto()       # arg: bytes the device's runtime loads
  # --- elementwise: unary ---
  EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIPROCAL = auto(); NEG = auto(); TRUNC = auto()  # noqa: E702
  CAST = auto(); BITCAST = auto()  # noqa: E702
  # --- elementwise: binary ---
  ADD = auto(); SUB = auto(); MUL = auto(); FDIV = auto(); IDIV = auto(); MOD = auto(); MAX = auto(); POW = auto()  # noqa: E702
  CMPLT = auto(); CMPNE = auto(); CMPEQ = auto()  # noqa: E702
  AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto()  # noqa: E702
  # --- elementwise: ternary ---
  WHERE = auto(); MULACC = auto()  # noqa: E702

  def __repr__(self) -> str: return f"Ops.{self.name}"
  # members are singletons: identity hashing (in C) agrees with Enum's equality, and Enum's own __hash__ is a Python call made
  # for every UOp interned (its key holds the op)
  __hash__ = object.__hash__


STORE_ADD = "add"  # a STORE's arg: an atomic add into the element (UOp.atomic_add)


class GroupOp:
  Unary = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.NEG, Ops.TRUNC})
  Binary = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.POW, Ops.CMPLT, Ops.CMPNE,
                      Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR})
  Ternary = frozenset({Ops.WHERE, Ops.MULACC})
  ALU = Unary | Binary | Ternary
  Elementwise = ALU | {Ops.CAST, Ops.BITCAST}
  Movement = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP})
  Comparison = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})
  Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR})
  Associative = frozenset({Ops.ADD, Ops.MUL, Ops.AND, Ops.OR, Ops.MAX})
  Reduce = frozenset({Ops.ADD, Ops.MUL, Ops.MAX})


def identity_element(op: Ops, dt: DType) -> ConstType:
  """The value a reduction starts from."""
  if op is Ops.ADD: return 0 if not dtypes.is_float(dt) else 0.0
  if op is Ops.MUL: return 1 if not dtypes.is_float(dt) else 1.0
  if op is Ops.MAX: return -448.0 if dt.scalar() == dtypes.fp8e4m3 else dtypes.min(dt)  # e4m3fn has no -inf (it would be NaN)
  raise ValueError(f"{op} is not a reduce op")


class _Interned(weakref.ref):
  """A weak reference to an interned UOp, holding its key: when the UOp dies, its entry goes."""
  __slots__ = ("key",)
  key: tuple


# the interning table: (op, dtype, src, arg) -> a weak reference to the one UOp with them. A plain dict of weak references,
# not a WeakValueDictionary, whose Python-level get/set stood out in profiles of building and scheduling a model's graph (a
# warm start of the llm bench took about 1 s less CPU with this)
_interned: dict[tuple, _Interned] = {}


def _forget(ref: _Interned) -> None:
  # (in C, atomically: removes the entry only if it still holds a dead reference; a new UOp with that key may have replaced it)
  _remove_dead_weakref(_interned, ref.key)


class UOp:
  """An immutable IR node. Equal (op, dtype, src, arg) give the same object, so `is` is equality."""
  __slots__ = ("op", "dtype", "src", "arg", "__weakref__", "__dict__")

  op: Ops
  dtype: DType
  src: tuple[UOp, ...]
  arg: Any

  def __new__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None) -> UOp:
    # -0.0 == 0.0 in Python, but they are different constants: the sign goes into the key
    key = (op, dtype, src, arg) if not (type(arg) is float and arg == 0.0) else (op, dtype, src, arg, math.copysign(1.0, arg))
    try:
      if (ref := _interned.get(key)) is not None and (hit := ref()) is not None: return hit
    except TypeError as e:  # an unhashable arg is a bug in the caller, name it
      raise TypeError(f"UOp arg must be hashable, got {type(arg).__name__} for {op}") from e
    self = object.__new__(cls)
    object.__setattr__(self, "op", op)
    object.__setattr__(self, "dtype", dtype)
    object.__setattr__(self, "src", src)
    object.__setattr__(self, "arg", arg)
    ref = _Interned(self, _forget)
    ref.key = key
    _interned[key] = ref
    return self

  def __reduce__(self) -> tuple: return UOp, (self.op, self.dtype, self.src, self.arg)
  def __setattr__(self, name: str, value: Any) -> None: raise AttributeError("UOp is immutable")
  def __delattr__(self, name: str) -> None: raise AttributeError("UOp is immutable")
  # hash and == are object's own (identity, in C): interning makes identity equality; a Python __hash__ here was called millions
  # of times per schedule (every set and dict of UOps)
  def __bool__(self) -> bool:
    # a comparison that the variables' ranges decide (start_pos > 0 with start_pos in [1, 8]) is that answer, as in tinygrad
    if self.dtype == dtypes.bool and len(nodes := self.toposort()) <= 64 and any(n.op is Ops.DEFINE_VAR for n in nodes) and \
       all(n.op in _SIZE_OPS or n.op in GroupOp.Comparison for n in nodes):
      try: lo, hi = self.vmin, self.vmax
      except Exception: lo, hi = False, True  # noqa: BLE001  (no range known: undecided)
      if lo == hi: return bool(lo)
    if any(n.op is Ops.BIND for n in self.toposort()):  # a size of a symbolic shape met a Python `if`: that op has no symbolic support
      raise NotImplementedError(f"this op doesn't support a symbolic size here (it asked whether {render_expr(self)} holds, which depends "
                                "on a bound Variable's value): shrink the symbolic dim to a fixed size first, or work on a fixed-size "
                                "tensor with a mask built from Tensor(var) (docs/jit.md, Symbolic Variables)")
    raise TypeError("a UOp has no truth value; compare with .op / .arg, or use .simplify()")

  def replace(self, **kwargs: Any) -> UOp:
    new = {"op": self.op, "dtype": self.dtype, "src": self.src, "arg": self.arg} | kwargs
    return UOp(new["op"], new["dtype"], tuple(new["src"]), new["arg"])

  def __repr__(self) -> str: return render_expr(self) if _is_symbolic_int(self) else pretty(self)

  # ---- graph traversal (iterative: graphs can be deep)
  def toposort(self, gate: Callable[[UOp], bool] | None = None) -> list[UOp]:
    """Nodes reachable from self, children before parents. `gate(node)` False stops the walk below node. The ungated order is
    remembered on the node (a graph never changes; the passes walk the same graphs many times): a copy is returned."""
    if gate is None:
      # kept without self (always last): a list holding its own node would be a reference cycle, and the node (with the
      # buffers it holds) would then live until the cycle collector ran instead of dying with its last reference
      if (below := self.__dict__.get("_toposort")) is None: below = self.__dict__["_toposort"] = self._walk(None)[:-1]
      return [*below, self]
    return self._walk(gate)

  def _walk(self, gate: Callable[[UOp], bool] | None) -> list[UOp]:
    # depth first with an iterator over each node's sources: a node is entered once (marked then: the graph is acyclic) and
    # appended once all its sources are
    order: list[UOp] = []
    seen: set[UOp] = {self}
    empty: tuple[UOp, ...] = ()
    stack = [(self, iter(self.src if gate is None or gate(self) else empty))]
    while stack:
      node, srcs = stack[-1]
      for s in srcs:
        if s not in seen:
          seen.add(s)
          stack.append((s, iter(s.src if gate is None or gate(s) else empty)))
          break
      else:
        stack.pop()
        order.append(node)
    return order

  def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
    """Replace nodes by identity throughout the graph."""
    new: dict[UOp, UOp] = {}
    for node in self.toposort():
      if node in mapping: new[node] = mapping[node]
      else:
        src = tuple(new[s] for s in node.src)
        new[node] = node if src == node.src else node.replace(src=src)
    return new[self]

  # ---- constructors
  @staticmethod
  def const(dtype: DType, value: ConstType, src: tuple[UOp, ...] = ()) -> UOp:
    if isinstance(value, UOp): return value
    v = truncate(dtype, value) if not (isinstance(value, float) and math.isnan(value)) else value
    return UOp(Ops.CONST, dtype, src, v)

  def const_like(self, value: ConstType) -> UOp: return UOp.const(self.dtype, value)

  def alu(self, op: Ops, *src: UOp) -> UOp:
    out_dtype = dtypes.bool if op in GroupOp.Comparison else self.dtype
    return UOp(op, out_dtype, (self, *src))

  def cast(self, dtype: DType) -> UOp: return self if self.dtype == dtype else UOp(Ops.CAST, dtype, (self,))
  def bitcast(self, dtype: DType) -> UOp: return UOp(Ops.BITCAST, dtype, (self,))
  def sink(self, *more: UOp, arg: Any = None) -> UOp: return UOp(Ops.SINK, dtypes.void, (self, *more), arg)
  def index(self, idx: UOp) -> UOp: return UOp(Ops.INDEX, self.dtype, (self, idx))
  def load(self, *gate_alt: UOp, dtype: DType | None = None) -> UOp:
    return UOp(Ops.LOAD, dtype or self.dtype.base if isinstance(self.dtype, PtrDType) else self.dtype, (self, *gate_alt))
  def store(self, value: UOp | ConstType, *gate: UOp, arg: str | None = None) -> UOp:
    if not isinstance(value, UOp): value = UOp.const(self.dtype.base if isinstance(self.dtype, PtrDType) else self.dtype, value)
    return UOp(Ops.STORE, dtypes.void, (self, value, *gate), arg)
  def atomic_add(self, value: UOp | ConstType, *gate: UOp) -> UOp:
    """*self += value as one indivisible step (STORE_ADD): threads and blocks adding into the same element all count, in an order
    that may differ from run to run (float sums may then differ in the last bits). Renderer.atomic_add says which dtypes."""
    return self.store(value, *gate, arg=STORE_ADD)

  # ---- writing kernels by hand (uop/dsl.py: tinygrad's names)
  @staticmethod
  def range(end: int | UOp, rid: int, kind: Any = "loop") -> UOp:
    """A loop 0..end-1 with id `rid` (loops nest in id order); kind: a uop.dsl.AxisType."""
    from tinygrad.uop.dsl import make_range
    return make_range(end, rid, kind)

  @staticmethod
  def placeholder(shape: int | tuple[int, ...], dtype: DType, slot: int, addrspace: Any = "reg") -> UOp:
    """A kernel-local array (uop.dsl.AddrSpace.REG: per thread; LOCAL: shared by a block's threads)."""
    from tinygrad.uop.dsl import placeholder
    return placeholder(shape, dtype, slot, addrspace)

  def __getitem__(self, idx: Any) -> UOp:
    from tinygrad.uop.dsl import index
    return index(self, idx)

  def after(self, *deps: UOp) -> UOp: return UOp(Ops.AFTER, self.dtype, (self, *deps))
  def end(self, *ranges: UOp) -> UOp:
    from tinygrad.uop.dsl import end
    return end(self, ranges)
  def barrier(self, *more: UOp) -> UOp: return UOp(Ops.BARRIER, dtypes.void, (self, *more))
  def where(self, a: UOp | ConstType, b: UOp | ConstType) -> UOp:
    a_, b_ = _as_uop(a, b), _as_uop(b, a)
    return UOp(Ops.WHERE, a_.dtype, (self, a_, b_))

  # ---- python operators build ALU nodes (index math and tests read naturally)
  def _binop(self, op: Ops, other: Any, reverse: bool = False) -> UOp:
    if getattr(other, "uop", None) is not None: return NotImplemented  # a Tensor: v - t is the Tensor's t.__rsub__(v)
    other_uop = other if isinstance(other, UOp) else UOp.const(self.dtype, other)
    return other_uop.alu(op, self) if reverse else self.alu(op, other_uop)
  def __add__(self, x: Any) -> UOp: return self._binop(Ops.ADD, x)
  def __radd__(self, x: Any) -> UOp: return self._binop(Ops.ADD, x, True)
  def __sub__(self, x: Any) -> UOp: return self._binop(Ops.ADD, x.neg() if isinstance(x, UOp) else x if getattr(x, "uop", None) is not None else -x)
  def __rsub__(self, x: Any) -> UOp: return self.neg()._binop(Ops.ADD, x, True)
  def __mul__(self, x: Any) -> UOp: return self._binop(Ops.MUL, x)
  def __rmul__(self, x: Any) -> UOp: return self._binop(Ops.MUL, x, True)
  def __floordiv__(self, x: Any) -> UOp: return self._binop(Ops.IDIV, x)
  def __mod__(self, x: Any) -> UOp: return self._binop(Ops.MOD, x)
  def __truediv__(self, x: Any) -> UOp: return self._binop(Ops.FDIV, x)
  def __neg__(self) -> UOp: return self.neg()
  def __lt__(self, x: Any) -> UOp: return self._binop(Ops.CMPLT, x)
  def __gt__(self, x: Any) -> UOp: return self._binop(Ops.CMPLT, x, True)
  def __ge__(self, x: Any) -> UOp: return (self < x).logical_not()
  def __le__(self, x: Any) -> UOp: return (self > x).logical_not()
  def __and__(self, x: Any) -> UOp: return self._binop(Ops.AND, x)
  def __or__(self, x: Any) -> UOp: return self._binop(Ops.OR, x)
  def __xor__(self, x: Any) -> UOp: return self._binop(Ops.XOR, x)
  def ne(self, x: Any) -> UOp: return self._binop(Ops.CMPNE, x)
  def eq(self, x: Any) -> UOp: return self._binop(Ops.CMPEQ, x)
  def neg(self) -> UOp:
    return self.logical_not() if self.dtype == dtypes.bool else UOp(Ops.NEG, self.dtype, (self,))
  def logical_not(self) -> UOp: return self.ne(True)
  def maximum(self, x: Any) -> UOp: return self._binop(Ops.MAX, x)
  def minimum(self, x: Any) -> UOp: return -((-self).maximum(-x))

  # ---- properties
  def _derived(self, name: str, compute: Callable[[UOp], Any]) -> Any:
    """A property computed from the sources' values of the same property, bottom-up without recursion
    (graphs can be deeper than Python's recursion limit); cached on each node."""
    if name in self.__dict__: return self.__dict__[name]
    if all(name in s.__dict__ for s in self.src):  # the common case, a new node over known sources: no walk
      self.__dict__[name] = value = compute(self)
      return value
    for node in self.toposort(gate=lambda n: name not in n.__dict__):
      if name not in node.__dict__: node.__dict__[name] = compute(node)
    return self.__dict__[name]

  @property
  def shape(self) -> tuple[int, ...]:
    """The shape of a tensor-graph node (kernel nodes have none)."""
    return self._derived("shape", _shape)

  @property
  def size(self) -> int: return prod(self.shape)

  @property
  def device(self) -> str | tuple[str, ...]: return self._derived("device", _device)

  @property
  def vmin_vmax(self) -> tuple[ConstType, ConstType]:
    from tinygrad.uop.symbolic import value_range
    return self._derived("vmin_vmax", value_range)

  @property
  def vmin(self) -> ConstType: return self.vmin_vmax[0]
  @property
  def vmax(self) -> ConstType: return self.vmin_vmax[1]

  @property
  def base(self) -> UOp:
    """The node under any movement ops."""
    node = self
    while node.op in GroupOp.Movement: node = node.src[0]
    return node

  def simplify(self) -> UOp:
    from tinygrad.uop.rewrite import graph_rewrite
    from tinygrad.uop.symbolic import symbolic
    return graph_rewrite(self, symbolic)

  def render(self) -> str:
    """Index math as readable text (for errors and debugging)."""
    return render_expr(self)

  def __iter__(self) -> Iterator[UOp]: raise TypeError("a UOp is not iterable")

  # ---- symbolic variables
  def bind(self, value: int) -> UOp:
    """This Variable with a value: BIND(var, value)."""
    if self.op is not Ops.DEFINE_VAR: raise TypeError(f"only a Variable can be bound, not a {self.op}")
    name, lo, hi = self.arg
    if not isinstance(value, int) or not lo <= value <= hi: raise ValueError(f"Variable {name!r} bound to {value!r}, outside [{lo}, {hi}]")
    return UOp(Ops.BIND, dtypes.int32, (self, UOp.const(dtypes.int32, value)))

  @property
  def expr(self) -> str:
    """A Variable's name (of a bound one too), as tinygrad's `Variable.expr`: the key of its value in var_vals."""
    if self.op is Ops.BIND: return self.src[0].arg[0]
    if self.op is not Ops.DEFINE_VAR: raise AttributeError(f"expr is a Variable's name; a {self.op} has none")
    return self.arg[0]

  def unbind(self) -> tuple[UOp, int]:
    if self.op is not Ops.BIND: raise TypeError(f"unbind needs a bound Variable, not a {self.op}")
    return self.src[0], self.src[1].arg

  @property
  def val(self) -> int:
    """The value of a symbolic expression whose Variables are all bound."""
    from tinygrad.uop.symbolic import sym_infer
    binds = {n.src[0].arg[0]: n.src[1].arg for n in self.toposort() if n.op is Ops.BIND}
    return sym_infer(self, binds)


def _as_uop(x: Any, like: Any) -> UOp:
  if isinstance(x, UOp): return x
  dt = like.dtype if isinstance(like, UOp) else dtypes.from_py(x)
  return UOp.const(dt, x)


def _device(u: UOp) -> Any:
  if u.op is Ops.DEVICE: return u.arg
  if u.op is Ops.COPY: return u.src[1].arg
  if u.op is Ops.MULTI: return tuple(s.__dict__["device"] for s in u.src)  # a sharded/replicated tensor: all its devices
  for s in u.src:
    if (d := s.__dict__["device"]) is not None: return d
  return None


def _sint(x: Any) -> Any:
  """A symbolic size simplified; a plain int when it is constant ((p+1) - p is 1)."""
  if not isinstance(x, UOp): return x
  s = x.simplify()
  return s.arg if s.op is Ops.CONST else s


def _shape(u: UOp) -> tuple[int, ...]:
  op, arg = u.op, u.arg
  if op is Ops.BUFFER: return (arg[1],)
  if op is Ops.IOTA: return (arg,)
  if op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_REG, Ops.DEFINE_LOCAL): return (u.dtype.size,)  # type: ignore[attr-defined]  # a kernel's buffer
  if op in (Ops.CONST, Ops.DEVICE, Ops.BIND, Ops.DEFINE_VAR): return ()
  if op in (Ops.RESHAPE, Ops.EXPAND): return tuple(arg)
  src_shape = u.src[0].shape
  if op is Ops.PERMUTE: return tuple(src_shape[i] for i in arg)
  if op is Ops.PAD: return tuple(_sint(s + b + a) for s, (b, a) in zip(src_shape, arg))
  if op is Ops.SHRINK: return tuple(_sint(e - b) for b, e in arg)
  if op is Ops.REDUCE_AXIS: return tuple(1 if i in arg[1] else s for i, s in enumerate(src_shape))
  if op is Ops.ASSIGN: return u.src[0].shape
  if op is Ops.MULTI:  # the logical shape: the shards joined along the sharded axis
    return tuple(max(e for _, e in arg[1]) if i == arg[0] else s for i, s in enumerate(src_shape))
  if op is Ops.SINK: return ()
  # elementwise, cast, copy, contiguous, detach, flip: the shape of the first source that has one
  return src_shape


# ---- printing

def render_expr(u: UOp) -> str:
  """A short infix rendering of scalar index math; other nodes show their op."""
  names = {Ops.ADD: "+", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "==",
           Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^", Ops.SUB: "-", Ops.FDIV: "/", Ops.SHL: "<<", Ops.SHR: ">>"}
  out: dict[UOp, str] = {}
  for n in u.toposort():
    if n.op is Ops.CONST: out[n] = repr(n.arg)
    elif n.op is Ops.RANGE: out[n] = f"r{n.arg[0]}"
    elif n.op is Ops.DEFINE_VAR: out[n] = n.arg[0]
    elif n.op is Ops.BIND: out[n] = out[n.src[0]]
    elif n.op is Ops.SPECIAL: out[n] = n.arg[0]
    elif n.op in names and len(n.src) == 2: out[n] = f"({out[n.src[0]]}{names[n.op]}{out[n.src[1]]})"
    elif n.op is Ops.NEG: out[n] = f"(-{out[n.src[0]]})"
    elif n.op is Ops.MAX: out[n] = f"max({out[n.src[0]]}, {out[n.src[1]]})"
    elif n.op is Ops.WHERE: out[n] = f"({out[n.src[0]]} ? {out[n.src[1]]} : {out[n.src[2]]})"
    else: out[n] = f"{n.op.name}({', '.join(out[s] for s in n.src)})"
  return out[u]


_SIZE_OPS = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.BIND, Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.NEG, Ops.MAX})


def _is_symbolic_int(u: UOp) -> bool:
  """A size of a symbolic shape (an int expression of Variables): printed as its expression, `(4, (v+1))`."""
  if u.dtype != dtypes.int32 or u.op not in _SIZE_OPS or u.op is Ops.CONST: return False
  nodes = u.toposort()
  return len(nodes) <= 64 and all(n.op in _SIZE_OPS and (n.op is not Ops.CONST or not n.src) for n in nodes) and any(n.op is Ops.DEFINE_VAR for n in nodes)


def pretty(u: UOp, max_nodes: int = 200) -> str:
  """The graph as numbered lines, shared nodes printed once."""
  nodes = u.toposort()
  if len(nodes) > max_nodes: return f"UOp({u.op}, {u.dtype}, <{len(nodes)} nodes>, arg={u.arg!r})"
  ids = {n: i for i, n in enumerate(nodes)}
  lines = [f"  %{ids[n]} = {n.op.name} {n.dtype!r} [{', '.join(f'%{ids[s]}' for s in n.src)}] {n.arg!r}" for n in nodes]
  return "UOp(\n" + "\n".join(lines) + "\n)"


def sint_to_uop(x: int | UOp, dtype: DType = dtypes.int32) -> UOp:
  return x if isinstance(x, UOp) else UOp.const(dtype, x)


def Variable(name: str, min_val: int, max_val: int, dtype: DType = dtypes.int32) -> UOp:
  """A symbolic int in [min_val, max_val]: `v = Variable("start_pos", 0, 1023).bind(5)` gives a bound value
  that shapes and tensor math can use; kernels take it as a parameter, so one compiled kernel (and one
  TinyJit capture) serves every value."""
  if not isinstance(name, str) or not name.isidentifier(): raise ValueError(f"a Variable name must be an identifier, got {name!r}")
  if not (isinstance(min_val, int) and isinstance(max_val, int)) or min_val > max_val:
    raise ValueError(f"Variable {name!r} needs int bounds with min <= max, got [{min_val}, {max_val}]")
  # tinygrad's dtype= (int64 for bounds past int32): kernels take variables as int32 parameters here, so only int32 is taken
  if dtype != dtypes.int32: raise NotImplementedError(f"Variable {name!r}: only dtypes.int32 variables are supported, got {dtype!r}")
  if not dtypes.min(dtype) <= min_val <= max_val <= dtypes.max(dtype):
    raise ValueError(f"Variable {name!r}'s bounds [{min_val}, {max_val}] don't fit {dtype!r}")
  return UOp(Ops.DEFINE_VAR, dtype, (), (name, min_val, max_val))


UOp.variable = staticmethod(Variable)  # type: ignore[attr-defined]  # tinygrad's spelling (its Variable is UOp.variable)


def __getattr__(name: str) -> Any:
  # tinygrad keeps sym_infer (a symbolic expression's value for var_vals) in tinygrad.uop.ops; ours is in uop.symbolic,
  # which imports this module, so it is looked up on first use
  if name == "sym_infer":
    from tinygrad.uop.symbolic import sym_infer
    return sym_infer
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
