"""A differential fuzzer of the Tensor API against tinygrad 0.14.0: seeded random calls of ~200 Tensor operations (elementwise
with broadcasting and mixed dtypes, reductions, movement, indexing, scatter/gather, sort, creation, nn-style methods, matmul
and einsum) on small tensors full of edge values (0, -0.0, NaN, +-inf, huge, int min/max), run in two worker processes:
ours and tinygrad 0.14's (never imported in one process). Each side answers "raised X" or the result's shape, dtype and
values; a difference is one side raising and the other not, or another shape, dtype or values (ints and bools exactly,
floats allclose with NaN == NaN and infinities of the same sign; rtol 1e-5 for float32, 1e-2 for float16).

Besides single calls, scenarios (SCENARIOS: multi-step programs run by each worker with its own tinygrad, answering a list
of results, where a step that raises answers "raised" and any two raises are equal): group `inplace` (assign, +=/-=/*=/
/=//= on tensors and on basic views incl. negative steps, `x[i] += v`, setitem with broadcasting, tensor and bool indices;
each reads the base and an earlier view after the write; in-place updates of is_param tensors after backward), `optim`
(a few steps of each nn.optim optimizer and OptimizerGroup on a linear layer with a frozen scale; lr as a Tensor, with and
without zero_grad), `modules` (each nn module built on both sides, its state set from the case's seed: state-dict
keys/shapes/dtypes, outputs, state after train-mode calls). Group `dtype` also holds single calls with every dtype pair
(small positive values) and Tensor(ndarray)/Tensor(list) dtype inference. numpy references of setitem, assign and `op=`
say which side is off there.

  uv run python bench/api_fuzz.py                          # 3000 cases, seed 0: a summary and the first differences
  uv run python bench/api_fuzz.py -n 6000 --seed 7 --show 40
  uv run python bench/api_fuzz.py --ops sum,max,reduce     # only these ops / groups (--list prints both)
  uv run python bench/api_fuzz.py --case sum/12            # one case: its code, and both sides' answers in full
  uv run python bench/api_fuzz.py --json /tmp/diffs.json   # every difference, with a runnable reproduction
  uv run python bench/api_fuzz.py --documented --show 1     # also the documented ones, to audit the explanations

A case is named `op/k` and is a pure function of (seed, op, k): the same name gives the same case whatever --ops or -n
are. Inputs are built inside each worker from a JSON description (shape, dtype, seed, kind), so both sides compute on
the same numpy array. Where the sides differ and numpy has the op (unary math, the softmax family, remainders, indexing,
einsum, pow of ints, ...), a float64 numpy reference says which side is off. Differences that docs/differences.md lists
as deliberate (KNOWN below), and those where only tinygrad is off numpy, are counted apart (`documented`).
Workers: ours is this interpreter (`uv run python`, with this PYTHONPATH: a worktree's sources first), tinygrad's is /tmp/tgvenv/bin/python with PATH=/tmp/clbin:$PATH
(--tg-python); DEV=CPU for both. A worker that crashes or hangs is restarted and the case counted as a crash/hang.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

NAN, INF = float("nan"), float("inf")
DTYPES = ("float32", "float16", "int32", "int8", "uint8", "int64", "bool")
DTYPE_WEIGHTS = (4, 1, 2, 1, 1, 1, 1)
FLOATS, INTS = ("float32", "float16", "float64"), ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
INT_RANGE = {"int8": (-128, 127), "int16": (-1 << 15, (1 << 15) - 1), "int32": (-1 << 31, (1 << 31) - 1), "int64": (-1 << 63, (1 << 63) - 1),
             "uint8": (0, 255), "uint16": (0, 65535), "uint32": (0, (1 << 32) - 1), "uint64": (0, (1 << 64) - 1)}


# ---- encoding of Python arguments as JSON (tuples, slices, Ellipsis, dtypes and input tensors are tagged)

@dataclass(frozen=True)
class Ref:
  """The i-th input tensor of a case."""
  i: int


@dataclass(frozen=True)
class NP:
  """The i-th input as a numpy array (for Tensor(ndarray))."""
  i: int


@dataclass(frozen=True)
class NPS:
  """A numpy scalar (np.<dtype>(value)), as an operand."""
  dtype: str
  value: Any


@dataclass(frozen=True)
class DT:
  """A dtype by name (dtypes.<name>)."""
  name: str


def encode(x: Any) -> Any:
  if isinstance(x, Ref): return {"$t": x.i}
  if isinstance(x, NP): return {"$np": x.i}
  if isinstance(x, NPS): return {"$nps": [x.dtype, x.value]}
  if isinstance(x, DT): return {"$dtype": x.name}
  if isinstance(x, tuple): return {"$tuple": [encode(v) for v in x]}
  if isinstance(x, list): return [encode(v) for v in x]
  if isinstance(x, slice): return {"$slice": [x.start, x.stop, x.step]}
  if x is Ellipsis: return {"$ell": 1}
  if isinstance(x, dict): return {k: encode(v) for k, v in x.items()}
  return x


def decode(x: Any, xs: list[Any], dtypes: Any, arrs: list[Any] | None = None) -> Any:
  if isinstance(x, list): return [decode(v, xs, dtypes, arrs) for v in x]
  if not isinstance(x, dict): return x
  if "$t" in x: return xs[x["$t"]]
  if "$np" in x: return arrs[x["$np"]] if arrs is not None else None
  if "$nps" in x:
    import numpy as np
    return getattr(np, x["$nps"][0])(x["$nps"][1])
  if "$dtype" in x: return getattr(dtypes, x["$dtype"])
  if "$tuple" in x: return tuple(decode(v, xs, dtypes, arrs) for v in x["$tuple"])
  if "$slice" in x: return slice(*x["$slice"])
  if "$ell" in x: return Ellipsis
  return {k: decode(v, xs, dtypes, arrs) for k, v in x.items()}


def show(x: Any) -> str:
  """An encoded argument as Python source (for reproductions)."""
  if isinstance(x, list): return "[" + ", ".join(show(v) for v in x) + "]"
  if isinstance(x, float) and not math.isfinite(x): return f"float('{x}')"
  if not isinstance(x, dict): return repr(x)
  if "$t" in x: return f"x{x['$t']}"
  if "$np" in x: return f"x{x['$np']}.numpy()"
  if "$nps" in x: return f"np.{x['$nps'][0]}({x['$nps'][1]!r})"
  if "$dtype" in x: return f"dtypes.{x['$dtype']}"
  if "$tuple" in x: return "(" + ", ".join(show(v) for v in x["$tuple"]) + ("," if len(x["$tuple"]) == 1 else "") + ")"
  if "$slice" in x: return ":".join("" if v is None else str(v) for v in x["$slice"])
  if "$ell" in x: return "..."
  return "{" + ", ".join(f"{k!r}: {show(v)}" for k, v in x.items()) + "}"


# ---- input values: pure Python from the description's seed, so both workers (and the driver) draw the same numbers

def _float_edges(dt: str) -> list[float]:
  big = 60000.0 if dt == "float16" else 1e30
  return [0.0, -0.0, NAN, INF, -INF, big, -big, 1e-30 if dt != "float16" else 1e-6, 0.5, -0.5, 1.0, -1.0, 2.5, -1.5, 3.0, 100.0]


def _int_edges(dt: str) -> list[int]:
  lo, hi = INT_RANGE[dt]
  return [v for v in (0, -1, 1, lo, hi, lo + 1, hi - 1, 100, -100, 1000, -1000, 7, -7) if lo <= v <= hi]


def input_values(desc: dict[str, Any]) -> list[Any]:
  rng, dt, kind = random.Random(desc["seed"]), desc["dtype"], desc.get("kind", "any")
  n, edge = math.prod(desc["shape"]), desc.get("edge", 0.0)
  if kind == "idx": return [rng.randrange(desc["lo"], desc["hi"]) for _ in range(n)]
  if dt == "bool": return [rng.random() < desc.get("p", 0.5) for _ in range(n)]
  if dt in FLOATS:
    if kind == "unit": return [round(rng.uniform(0.02, 0.98), 3) for _ in range(n)]
    if kind == "pos": return [round(rng.uniform(0.1, 4.0), 3) for _ in range(n)]
    if kind == "binary": return [float(rng.randrange(2)) for _ in range(n)]
    edges = _float_edges(dt)
    return [rng.choice(edges) if rng.random() < edge else round(rng.uniform(-4.0, 4.0), rng.choice((0, 1, 3))) for _ in range(n)]
  lo, hi = INT_RANGE[dt]
  if kind == "pos": return [rng.randrange(1, min(hi, 20) + 1) for _ in range(n)]
  edges, small = _int_edges(dt), (0, 20) if lo == 0 else (-10, 10)
  return [rng.choice(edges) if rng.random() < edge else rng.randint(*small) for _ in range(n)]


def build_input(desc: dict[str, Any], np: Any) -> Any:
  """The numpy array of an input description (views are applied on the Tensor by the worker)."""
  npdt = {"bool": np.bool_, "float32": np.float32, "float16": np.float16, "float64": np.float64}.get(desc["dtype"]) or getattr(np, desc["dtype"])
  with np.errstate(all="ignore"):
    return np.array(input_values(desc), dtype=npdt).reshape(desc["shape"])


# ---- case generation

class Gen:
  """Draws one case: inputs (as descriptions) and the call that uses them."""
  def __init__(self, rng: random.Random):
    self.rng = rng
    self.inputs: list[dict[str, Any]] = []

  def dtype(self, pool: tuple[str, ...] = DTYPES) -> str:
    if pool == DTYPES: return self.rng.choices(DTYPES, DTYPE_WEIGHTS)[0]
    return self.rng.choice(pool)

  def shape(self, lo: int = 0, hi: int = 3, zero: float = 0.08, maxd: int = 4) -> tuple[int, ...]:
    nd = self.rng.randint(lo, hi)
    s = [self.rng.choice((1, 2, 3, maxd)) if self.rng.random() < 0.8 else 1 for _ in range(nd)]
    if s and self.rng.random() < zero: s[self.rng.randrange(nd)] = 0
    return tuple(s)

  def bshape(self, s: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with s: leading dims dropped or added, some dims set to 1."""
    r = self.rng.random()
    out = list(s[self.rng.randint(0, len(s)):] if r < 0.3 else s)
    out = [1 if self.rng.random() < 0.25 else d for d in out]
    if self.rng.random() < 0.1: out = [self.rng.choice((1, 2))] + out
    if self.rng.random() < 0.03 and out: out[self.rng.randrange(len(out))] = 5  # doesn't broadcast: both must raise
    return tuple(out)

  def tensor(self, shape: tuple[int, ...], dtype: str | None = None, kind: str = "any", **kw: Any) -> Ref:
    dt = dtype or self.dtype()
    edge = self.rng.choice((0.0, 0.0, 0.15, 0.4)) if kind == "any" else 0.0
    desc = {"shape": list(shape), "dtype": dt, "seed": self.rng.randrange(1 << 30), "kind": kind, "edge": edge, **kw}
    if self.rng.random() < 0.12 and len(shape) >= 2 and "view" not in kw: desc["view"] = self.rng.choice(("T", "flip"))
    self.inputs.append(desc)
    return Ref(len(self.inputs) - 1)

  def idx(self, shape: tuple[int, ...], lo: int, hi: int, dtype: str = "int32") -> Ref:
    """An int tensor of values in [lo, hi) (lo clamped to the dtype)."""
    lo = max(lo, INT_RANGE[dtype][0])
    return self.tensor(shape, dtype, kind="idx", lo=lo, hi=max(hi, lo + 1))

  def scalar(self, kind: str = "any") -> Any:
    r = self.rng
    if kind == "int": return r.choice((0, 1, 2, 3, -1, -2, 7, 100, -129, 300, 1 << 31, 1 << 40))
    if kind == "small": return r.choice((0, 1, 2, 3, -1, -2, 0.5, -1.5, 2.5))
    return r.choice((0, 1, 2, 3, -1, -3, 7, 0.5, -2.5, 1.5, 0.0, -0.0, True, False, NAN, INF, -INF, 1e10, 200, -129, 1 << 31, 1e-3, 65536))

  def axis(self, nd: int, multi: bool = True, none: bool = True) -> Any:
    r = self.rng.random()
    if (nd == 0 or r < 0.2) and none: return None
    if nd == 0: return self.rng.choice((0, -1))
    if r < 0.65 or not multi: return self.rng.randrange(-nd, nd) if self.rng.random() < 0.97 else nd  # nd: out of range
    k = self.rng.randint(0, nd)
    return tuple(d - nd if self.rng.random() < 0.3 else d for d in self.rng.sample(range(nd), k))


@dataclass
class Op:
  name: str
  group: str
  gen: Callable[[Gen], tuple[Any, str, tuple, dict]]  # -> (self: Ref | None for a Tensor classmethod, method, args, kwargs)
  accum: bool = False  # sums many inputs: the float tolerance grows with the inputs' magnitude


OPS: dict[str, Op] = {}


def op(name: str, group: str, accum: bool = False) -> Callable[[Callable], Callable]:
  def reg(fn: Callable) -> Callable:
    OPS[name] = Op(name, group, fn, accum)
    return fn
  return reg


def make_case(seed: int, opname: str, k: int) -> dict[str, Any]:
  g = Gen(random.Random(f"{seed}/{opname}/{k}"))
  self_, method, args, kwargs = OPS[opname].gen(g)
  return {"id": f"{opname}/{k}", "op": opname, "inputs": g.inputs, "self": None if self_ is None else self_.i, "method": method,
          "args": encode(list(args)), "kwargs": encode(kwargs)}


# ---- the op table: elementwise

UNARY = ("neg abs exp exp2 log log2 log10 sqrt rsqrt sin cos tan tanh sigmoid relu relu6 reciprocal floor ceil trunc round sign square erf "
         "atan asin acos sinh cosh asinh acosh atanh softplus silu swish gelu elu celu selu leaky_relu hardswish hardsigmoid hardtanh mish "
         "logsigmoid softsign quick_gelu isnan isinf isfinite logical_not bitwise_not __invert__ __neg__ contiguous float half int bool long "
         "short double").split()
UNARY_ARGS: dict[str, Callable[[Gen], dict]] = {
  "leaky_relu": lambda g: {"neg_slope": g.rng.choice((0.01, 0.2, -1.0))}, "elu": lambda g: {"alpha": g.rng.choice((1.0, 0.5, 2))},
  "celu": lambda g: {"alpha": g.rng.choice((1.0, 0.5))}, "softplus": lambda g: {"beta": g.rng.choice((1.0, 2.0, 0.5))},
  "hardtanh": lambda g: {"min_val": g.rng.choice((-1, -2.5, 0)), "max_val": g.rng.choice((1, 2.5))},
  "gelu": lambda g: {"approximate": g.rng.choice(("tanh", "none"))} if g.rng.random() < 0.5 else {},
  "isinf": lambda g: {"detect_positive": g.rng.random() < 0.5, "detect_negative": g.rng.random() < 0.5},
}


def _unary(name: str) -> Callable[[Gen], tuple]:
  def gen(g: Gen) -> tuple:
    x = g.tensor(g.shape())
    return x, name, (), UNARY_ARGS[name](g) if name in UNARY_ARGS else {}
  return gen


for _n in UNARY: op(_n, "unary")(_unary(_n))

BINARY = ("add sub mul div mod fmod pow maximum minimum bitwise_and bitwise_or bitwise_xor lshift rshift copysign logaddexp eq ne "
          "__lt__ __gt__ __le__ __ge__ __eq__ __ne__ __add__ __sub__ __mul__ __truediv__ __floordiv__ __mod__ __pow__ __and__ __or__ "
          "__xor__ __lshift__ __rshift__").split()
REVERSED = "__radd__ __rsub__ __rmul__ __rtruediv__ __rfloordiv__ __rmod__ __rpow__ __rand__ __ror__ __rxor__ __rlshift__ __rrshift__".split()
SHIFTS = ("lshift", "rshift", "__lshift__", "__rshift__", "__rlshift__", "__rrshift__")


def _operand(g: Gen, name: str, s: tuple[int, ...]) -> Any:
  if name in SHIFTS and g.rng.random() < 0.7:  # shift amounts: small non-negative ints, sometimes a tensor of them
    return g.rng.choice((0, 1, 2, 3, 7, 31)) if g.rng.random() < 0.6 else g.idx(g.bshape(s), 0, 8, g.dtype(("int32", "int8", "uint8", "int64")))
  if g.rng.random() < 0.5: return g.scalar()
  return g.tensor(g.bshape(s))


def _binary(name: str) -> Callable[[Gen], tuple]:
  def gen(g: Gen) -> tuple:
    s = g.shape()
    x = g.tensor(s)
    if name in REVERSED: return x, name, (g.scalar() if name not in SHIFTS else g.rng.choice((1, 3, -4, 255)),), {}
    y = _operand(g, name, s)
    if isinstance(y, Ref) and g.rng.random() < 0.3: x, y = y, x  # the broadcast side on the left
    return x, name, (y,), {}
  return gen


for _n in BINARY + REVERSED: op(_n, "binary")(_binary(_n))


@op("div_rounding", "binary")
def _div_rounding(g: Gen) -> tuple:
  s = g.shape()
  return g.tensor(s), "div", (_operand(g, "div", s),), {"rounding_mode": g.rng.choice((None, "trunc", "floor"))}


@op("where", "ternary")
def _where(g: Gen) -> tuple:
  s = g.shape()
  c = g.tensor(g.bshape(s), "bool" if g.rng.random() < 0.85 else g.dtype())
  def side() -> Any: return g.scalar() if g.rng.random() < 0.4 else g.tensor(g.bshape(s) if g.rng.random() < 0.5 else s)
  return c, "where", (side(), side()), {}


@op("masked_fill", "ternary")
def _masked_fill(g: Gen) -> tuple:
  s = g.shape()
  v = g.scalar() if g.rng.random() < 0.8 else g.tensor((), g.dtype())
  return g.tensor(s), "masked_fill", (g.tensor(g.bshape(s), "bool" if g.rng.random() < 0.9 else g.dtype()), v), {}


@op("clip", "ternary")
def _clip(g: Gen) -> tuple:
  s = g.shape()
  def bound() -> Any:
    r = g.rng.random()
    return None if r < 0.2 else g.tensor(g.bshape(s)) if r < 0.35 else g.scalar()
  lo, hi = bound(), bound()
  return g.tensor(s), g.rng.choice(("clip", "clamp")), (lo, hi), {}


@op("lerp", "ternary")
def _lerp(g: Gen) -> tuple:
  s = g.shape()
  dt = g.dtype(("float32", "float16")) if g.rng.random() < 0.9 else g.dtype()
  w = g.rng.choice((0.0, 0.25, 1.0, 2.0)) if g.rng.random() < 0.6 else g.tensor(g.bshape(s), dt, kind="unit")
  return g.tensor(s, dt), "lerp", (g.tensor(g.bshape(s), dt), w), {}


@op("isclose", "ternary")
def _isclose(g: Gen) -> tuple:
  s = g.shape()
  kw = {"rtol": g.rng.choice((1e-5, 0.1)), "atol": g.rng.choice((1e-8, 0.5)), "equal_nan": g.rng.random() < 0.5}
  return g.tensor(s), "isclose", (g.tensor(g.bshape(s)) if g.rng.random() < 0.8 else g.scalar(),), kw


CAST_TARGETS = DTYPES + ("float64", "int16", "uint32", "uint16", "uint64")


@op("cast", "dtype")
def _cast(g: Gen) -> tuple:
  return g.tensor(g.shape()), "cast", (DT(g.rng.choice(CAST_TARGETS)),), {}


@op("bitcast", "dtype")
def _bitcast(g: Gen) -> tuple:
  src = g.dtype()
  same = {"float32": ("int32", "uint32"), "int32": ("float32", "uint32"), "float16": ("int16", "uint16"), "int8": ("uint8", "bool"),
          "uint8": ("int8",), "int64": ("float64", "uint64"), "bool": ("uint8",)}[src]
  tgt = g.rng.choice(same) if g.rng.random() < 0.7 else g.rng.choice(CAST_TARGETS)
  s = g.shape(1)
  return g.tensor(s, src), "bitcast", (DT(tgt),), {}


# ---- reductions

REDUCE = ("sum", "prod", "mean", "max", "min", "std", "var", "any", "all", "argmax", "argmin", "logsumexp", "std_mean", "var_mean")


def _reduce(name: str) -> Callable[[Gen], tuple]:
  def gen(g: Gen) -> tuple:
    s = g.shape(zero=0.15)
    x = g.tensor(s)
    kw: dict[str, Any] = {}
    multi = name not in ("argmax", "argmin")
    if g.rng.random() < 0.85: kw["axis"] = g.axis(len(s), multi)
    if g.rng.random() < 0.5: kw["keepdim"] = g.rng.random() < 0.5
    if name in ("sum", "prod") and g.rng.random() < 0.25: kw["dtype"] = DT(g.rng.choice(("float32", "int32", "int64", "float16", "int8")))
    if name in ("std", "var", "std_mean", "var_mean") and g.rng.random() < 0.4: kw["correction"] = g.rng.choice((0, 1, 2))
    return x, name, (), kw
  return gen


for _n in REDUCE: op(_n, "reduce", accum=True)(_reduce(_n))


def _along(name: str, kw_name: str = "axis") -> Callable[[Gen], tuple]:
  def gen(g: Gen) -> tuple:
    s = g.shape(zero=0.12)
    ax = g.rng.randrange(-len(s), len(s)) if s and g.rng.random() < 0.95 else g.rng.choice((0, -1, len(s)))
    kw = {kw_name: ax} if g.rng.random() < 0.85 or name in ("cumprod",) else {}
    if name in ("softmax", "log_softmax", "softmin") and g.rng.random() < 0.2: kw["dtype"] = DT(g.rng.choice(("float32", "float16")))
    return g.tensor(s), name, (), kw
  return gen


for _n in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "softmax", "log_softmax", "softmin"): op(_n, "reduce", accum=True)(_along(_n))


# ---- movement

def _reshape_target(g: Gen, s: tuple[int, ...]) -> tuple[int, ...]:
  n = math.prod(s)
  if g.rng.random() < 0.05: return (n + 1,)
  dims, rest = [], n
  for _ in range(g.rng.randint(0, 3)):
    d = g.rng.choice([d for d in (1, 2, 3, 4) if rest % d == 0] if rest else (0, 1, 2))
    dims.append(d)
    rest = rest // d if d else 0
  if rest != 1 or not dims: dims.append(rest)
  if g.rng.random() < 0.4 and n: dims[g.rng.randrange(len(dims))] = -1
  g.rng.shuffle(dims)
  return tuple(dims)


@op("reshape", "movement")
def _reshape(g: Gen) -> tuple:
  s = g.shape(0, 4)
  t = _reshape_target(g, s)
  return g.tensor(s), g.rng.choice(("reshape", "view")), (t,) if g.rng.random() < 0.6 else t, {}


@op("permute", "movement")
def _permute(g: Gen) -> tuple:
  s = g.shape(0, 4)
  order = list(range(len(s)))
  g.rng.shuffle(order)
  order = [o - len(s) if g.rng.random() < 0.2 else o for o in order]
  if g.rng.random() < 0.05: order = order + [0]
  return g.tensor(s), "permute", (tuple(order),) if g.rng.random() < 0.5 else tuple(order), {}


@op("expand", "movement")
def _expand(g: Gen) -> tuple:
  s = g.shape(0, 3)
  t = [g.rng.choice((2, 3)) if d == 1 and g.rng.random() < 0.6 else (-1 if g.rng.random() < 0.3 else d) for d in s]
  if g.rng.random() < 0.3: t = [g.rng.choice((1, 2))] + t
  if g.rng.random() < 0.05 and t: t[-1] = 7
  return g.tensor(s), "expand", (tuple(t),) if g.rng.random() < 0.5 else tuple(t), {}


@op("pad", "movement")
def _pad(g: Gen) -> tuple:
  s = g.shape(1, 3)
  mode = g.rng.choice(("constant", "constant", "reflect", "replicate", "circular"))
  npad = len(s) if g.rng.random() < 0.5 else g.rng.randint(1, len(s))
  pads = [(g.rng.randint(-1, 2), g.rng.randint(-1, 2)) for _ in range(npad)]
  if g.rng.random() < 0.5: arg: Any = tuple(v for p in pads for v in p)  # flat, torch order (last dim first)
  else: arg = tuple(pads + [None] * 0) if len(pads) == len(s) else tuple(v for p in pads for v in p)
  kw: dict[str, Any] = {"mode": mode}
  if mode == "constant" and g.rng.random() < 0.5: kw["value"] = g.scalar()
  return g.tensor(s), "pad", (arg,), kw


@op("shrink", "movement")
def _shrink(g: Gen) -> tuple:
  s = g.shape(1, 3)
  arg = []
  for d in s:
    a = g.rng.randint(0, d)
    arg.append(None if g.rng.random() < 0.2 else (a, g.rng.randint(a, d)))
  return g.tensor(s), "shrink", (tuple(arg),), {}


@op("flip", "movement")
def _flip(g: Gen) -> tuple:
  s = g.shape(0, 3)
  ax = g.axis(len(s), none=False)
  return g.tensor(s), "flip", (ax,) if ax != () else ((),), {}


@op("repeat", "movement")
def _repeat(g: Gen) -> tuple:
  s = g.shape(0, 3)
  reps = tuple(g.rng.choice((1, 2, 3, 0)) for _ in range(len(s) + g.rng.choice((0, 0, 1))))
  return g.tensor(s), "repeat", (reps,) if g.rng.random() < 0.5 else reps, {}


@op("repeat_interleave", "movement")
def _repeat_interleave(g: Gen) -> tuple:
  s = g.shape(0, 3)
  kw = {"dim": g.rng.randrange(-len(s), len(s))} if s and g.rng.random() < 0.7 else {}
  return g.tensor(s), "repeat_interleave", (g.rng.choice((1, 2, 3, 0)),), kw


@op("roll", "movement")
def _roll(g: Gen) -> tuple:
  s = g.shape(1, 3)
  if g.rng.random() < 0.5: return g.tensor(s), "roll", (g.rng.randint(-5, 5),), {"dims": g.rng.randrange(-len(s), len(s))} if g.rng.random() < 0.8 else {}
  k = g.rng.randint(1, len(s))
  dims = tuple(g.rng.sample(range(len(s)), k))
  return g.tensor(s), "roll", (tuple(g.rng.randint(-5, 5) for _ in dims), dims), {}


@op("squeeze", "movement")
def _squeeze(g: Gen) -> tuple:
  s = g.shape(0, 4)
  s = tuple(1 if g.rng.random() < 0.4 else d for d in s)
  return g.tensor(s), "squeeze", (g.rng.randrange(-len(s), len(s)),) if s and g.rng.random() < 0.6 else (), {}


@op("unsqueeze", "movement")
def _unsqueeze(g: Gen) -> tuple:
  s = g.shape(0, 3)
  return g.tensor(s), "unsqueeze", (g.rng.randint(-len(s) - 1, len(s) + (1 if g.rng.random() < 0.05 else 0)),), {}


@op("transpose", "movement")
def _transpose(g: Gen) -> tuple:
  s = g.shape(0, 4)
  if not s or g.rng.random() < 0.2: return g.tensor(s), "transpose", (), {}
  return g.tensor(s), "transpose", (g.rng.randrange(-len(s), len(s)), g.rng.randrange(-len(s), len(s))), {}


@op("T", "movement")
def _T(g: Gen) -> tuple: return g.tensor(g.shape(0, 3)), "T", (), {}


@op("flatten", "movement")
def _flatten(g: Gen) -> tuple:
  s = g.shape(0, 4)
  n = max(len(s), 1)
  kw = {"start_dim": g.rng.randrange(-n, n)} if g.rng.random() < 0.7 else {}
  if g.rng.random() < 0.7: kw["end_dim"] = g.rng.randrange(-n, n)
  return g.tensor(s), "flatten", (), kw


@op("unflatten", "movement")
def _unflatten(g: Gen) -> tuple:
  s = g.shape(1, 3)
  d = g.rng.randrange(len(s))
  n = s[d]
  sizes = g.rng.choice([(n,), (1, n), (n, 1)] + ([(2, n // 2), (-1, 2)] if n and n % 2 == 0 else []) + [(2, 2)])
  return g.tensor(s), "unflatten", (d - len(s) if g.rng.random() < 0.3 else d, sizes), {}


@op("cat", "movement")
def _cat(g: Gen) -> tuple:
  s = g.shape(1, 3)
  d = g.rng.randrange(len(s))
  dt = g.dtype()
  others = []
  for _ in range(g.rng.randint(0, 3)):
    o = list(s)
    o[d] = g.rng.choice((0, 1, 2))
    if g.rng.random() < 0.05: o = o[1:]
    others.append(g.tensor(tuple(o), dt if g.rng.random() < 0.8 else g.dtype()))
  return g.tensor(s, dt), "cat", tuple(others), {"dim": d - len(s) if g.rng.random() < 0.3 else d}


@op("stack", "movement")
def _stack(g: Gen) -> tuple:
  s = g.shape(0, 3)
  dt = g.dtype()
  others = [g.tensor(s if g.rng.random() < 0.95 else s + (1,), dt if g.rng.random() < 0.8 else g.dtype()) for _ in range(g.rng.randint(0, 2))]
  return g.tensor(s, dt), "stack", tuple(others), {"dim": g.rng.randint(-len(s) - 1, len(s))}


@op("split", "movement")
def _split(g: Gen) -> tuple:
  s = g.shape(1, 3)
  d = g.rng.randrange(len(s))
  if g.rng.random() < 0.5: sizes: Any = g.rng.choice((1, 2, 3))
  else:
    sizes, left = [], s[d]
    while left > 0:
      sizes.append(g.rng.randint(1, left) if g.rng.random() < 0.9 else 0)
      left -= sizes[-1]
    if g.rng.random() < 0.1: sizes.append(1)
  return g.tensor(s), "split", (sizes,), {"dim": d} if g.rng.random() < 0.8 else {}


@op("chunk", "movement")
def _chunk(g: Gen) -> tuple:
  s = g.shape(1, 3)
  return g.tensor(s), "chunk", (g.rng.choice((1, 2, 3, 4)),), {"dim": g.rng.randrange(-len(s), len(s))}


@op("shrink_to", "movement")
def _shrink_to(g: Gen) -> tuple:
  s = g.shape(1, 3)
  return g.tensor(s), "shrink_to", (tuple(g.rng.randint(0, d) if g.rng.random() < 0.8 else None for d in s),), {}


@op("pad_to", "movement")
def _pad_to(g: Gen) -> tuple:
  s = g.shape(1, 3)
  return g.tensor(s), "pad_to", (tuple(d + g.rng.randint(0, 2) if g.rng.random() < 0.8 else None for d in s),), {}


@op("diagonal", "movement")
def _diagonal(g: Gen) -> tuple:
  s = g.shape(2, 3)
  kw = {"offset": g.rng.randint(-2, 2)} if g.rng.random() < 0.5 else {}
  if g.rng.random() < 0.4: kw.update(dim1=g.rng.randrange(len(s)), dim2=g.rng.randrange(len(s)))
  return g.tensor(s), "diagonal", (), kw


@op("diag", "movement")
def _diag(g: Gen) -> tuple: return g.tensor(g.shape(1, 1)), "diag", (), {}


@op("unfold", "movement")
def _unfold(g: Gen) -> tuple:
  s = g.shape(1, 3)
  d = g.rng.randrange(len(s))
  return g.tensor(s), "unfold", (d, g.rng.randint(0, s[d] + 1), g.rng.randint(1, 3)), {}


@op("meshgrid", "movement")
def _meshgrid(g: Gen) -> tuple:
  dt = g.dtype()
  others = tuple(g.tensor(g.shape(1, 1), dt) for _ in range(g.rng.randint(1, 2)))
  return g.tensor(g.shape(1, 1), dt), "meshgrid", others, {"indexing": g.rng.choice(("ij", "xy"))}


@op("rearrange", "movement")
def _rearrange(g: Gen) -> tuple:
  form, s, kw = g.rng.choice((("a b -> b a", (2, 3), {}), ("a b c -> a (b c)", (2, 3, 2), {}), ("(a b) c -> a b c", (6, 2), {"a": 2}),
                              ("a ... -> ... a", (2, 3, 4), {}), ("a b -> (b a)", (3, 1), {}), ("a 1 b -> b a", (2, 1, 3), {})))
  return g.tensor(s), "rearrange", (form,), kw


@op("masked_select", "movement")
def _masked_select(g: Gen) -> tuple:
  s = g.shape(1, 3)
  return g.tensor(s), "masked_select", (g.tensor(g.bshape(s), "bool"),), {}


@op("nonzero", "movement")
def _nonzero(g: Gen) -> tuple: return g.tensor(g.shape(1, 2)), "nonzero", (), {}


# ---- indexing

def _index(g: Gen, s: tuple[int, ...], adv: bool = True) -> tuple[Any, tuple[int, ...] | None]:
  """A random index for shape s, and (for setitem) the indexed shape, or None when it can't be known here."""
  idx: list[Any] = []
  d, ell = 0, False
  while d < len(s) and (g.rng.random() < 0.85 or not idx):
    r, n = g.rng.random(), s[d]
    if r < 0.1: idx.append(None); continue
    if r < 0.15 and not ell: idx.append(Ellipsis); ell = True; d = len(s) - g.rng.randint(0, len(s) - d); continue
    if r < 0.4:
      v = g.rng.randint(-n, n - 1) if n else 0
      if g.rng.random() < 0.05: v = n + g.rng.randint(0, 2)  # out of range
      idx.append(v)
    elif r < 0.8 or not adv:
      step = g.rng.choice((None, None, 1, 2, 3, -1, -2))
      idx.append(slice(g.rng.choice((None, 0, 1, -1, -2, 5)), g.rng.choice((None, None, 2, -1, 0, 10)), step))
    elif r < 0.9: idx.append(g.idx(g.shape(1, 2, zero=0.05, maxd=3), -n, max(n, 1)))
    elif r < 0.95: idx.append([g.rng.randint(-n, max(n - 1, 0)) for _ in range(g.rng.randint(1, 3))])
    else: idx.append(g.tensor(s[d:d + 1], "bool"))  # a bool mask along one dim
    d += 1
  if len(idx) == 1 and g.rng.random() < 0.6: return idx[0], _indexed_shape(s, idx[0])
  return tuple(idx), _indexed_shape(s, tuple(idx))


def _indexed_shape(s: tuple[int, ...], idx: Any) -> tuple[int, ...] | None:
  """numpy's shape for a basic index (None for anything with tensors, or an index numpy rejects)."""
  if any(isinstance(i, (Ref, list)) for i in (idx if isinstance(idx, tuple) else (idx,))): return None
  import numpy as np
  try: return tuple(np.empty(s)[idx].shape)
  except (IndexError, ValueError, TypeError): return None


@op("getitem", "index")
def _getitem(g: Gen) -> tuple:
  s = g.shape(1, 4, zero=0.05)
  x = g.tensor(s)
  return x, "__getitem__", (_index(g, s)[0],), {}


@op("setitem", "index")
def _setitem(g: Gen) -> tuple:
  s = g.shape(1, 3, zero=0.05)
  dt = g.dtype()
  x = g.tensor(s, dt, view="none")
  index, out = _index(g, s, adv=g.rng.random() < 0.3)
  r = g.rng.random()
  if r < 0.5 or out is None: v: Any = g.scalar() if g.rng.random() < 0.8 else g.rng.choice((1, 2, -1))
  else: v = g.tensor(g.bshape(out) if r < 0.7 else out, dt if g.rng.random() < 0.85 else g.dtype())
  return x, "__setitem__", (index, v), {}


@op("gather", "index")
def _gather(g: Gen) -> tuple:
  s = g.shape(1, 3)
  d = g.rng.randrange(len(s))
  ishape = tuple(g.rng.randint(0 if g.rng.random() < 0.1 else 1, max(n, 1)) if i != d else g.rng.randint(1, 4) for i, n in enumerate(s))
  idx = g.idx(ishape, 0 if g.rng.random() < 0.9 else -s[d], max(s[d], 1), g.dtype(("int32", "int64", "int8", "uint8")))
  return g.tensor(s), "gather", (d - len(s) if g.rng.random() < 0.2 else d, idx), {}


def _scatter_args(g: Gen) -> tuple[Ref, int, Ref, tuple[int, ...], str]:
  s = g.shape(1, 3, zero=0.03)
  dt = g.dtype()
  d = g.rng.randrange(len(s))
  ishape = tuple(g.rng.randint(1, max(n, 1)) for n in s)
  idx = g.idx(ishape, 0, max(s[d], 1), g.dtype(("int32", "int64")))
  return g.tensor(s, dt), d, idx, ishape, dt


@op("scatter", "index")
def _scatter(g: Gen) -> tuple:
  x, d, idx, ishape, dt = _scatter_args(g)
  src = g.tensor(tuple(n + g.rng.randint(0, 1) for n in ishape), dt) if g.rng.random() < 0.6 else g.scalar("small")
  kw = {"reduce": g.rng.choice(("add", "multiply"))} if g.rng.random() < 0.4 else {}
  return x, "scatter", (d, idx, src), kw


@op("scatter_reduce", "index")
def _scatter_reduce(g: Gen) -> tuple:
  x, d, idx, ishape, dt = _scatter_args(g)
  src = g.tensor(ishape, dt)
  kw = {"include_self": g.rng.random() < 0.5} if g.rng.random() < 0.6 else {}
  return x, "scatter_reduce", (d, idx, src, g.rng.choice(("sum", "prod", "mean", "amax", "amin"))), kw


# ---- sorting

@op("sort", "sort")
def _sort(g: Gen) -> tuple:
  s = g.shape(0, 3, zero=0.1)
  kw: dict[str, Any] = {"dim": g.rng.randrange(-len(s), len(s))} if s and g.rng.random() < 0.7 else {}
  if g.rng.random() < 0.5: kw["descending"] = g.rng.random() < 0.5
  return g.tensor(s), g.rng.choice(("sort", "argsort")), (), kw


@op("topk", "sort")
def _topk(g: Gen) -> tuple:
  s = g.shape(1, 3, zero=0.05)
  d = g.rng.randrange(-len(s), len(s))
  kw = {"dim": d, "largest": g.rng.random() < 0.6}
  if g.rng.random() < 0.3: kw["sorted_"] = True
  return g.tensor(s), "topk", (g.rng.randint(0 if g.rng.random() < 0.1 or not s[d] else 1, s[d] + (1 if g.rng.random() < 0.05 else 0)),), kw


# ---- creation

def _maybe_dtype(g: Gen, p: float = 0.4) -> dict[str, Any]:
  return {"dtype": DT(g.dtype())} if g.rng.random() < p else {}


@op("arange", "creation")
def _arange(g: Gen) -> tuple:
  r = g.rng
  if r.random() < 0.5: args: tuple = (r.randint(-3, 6),) if r.random() < 0.3 else (r.randint(-5, 5), r.randint(-5, 8), r.choice((1, 2, 3, -1, -2)))
  else: args = (r.choice((0, 0.5, -1.5, 2)), r.choice((3, 2.7, -2, 5.5)), r.choice((0.5, 0.3, -0.7, 1, 1.5, -0.25)))
  return None, "arange", args, _maybe_dtype(g, 0.3)


@op("linspace", "creation")
def _linspace(g: Gen) -> tuple:
  r = g.rng
  return None, "linspace", (r.choice((0, -1, 2.5, 10)), r.choice((1, 5, -3.5, 0)), r.choice((0, 1, 2, 5, 7))), _maybe_dtype(g, 0.3)


@op("eye", "creation")
def _eye(g: Gen) -> tuple:
  args = (g.rng.randint(0, 4),) + ((g.rng.randint(0, 4),) if g.rng.random() < 0.5 else ())
  return None, "eye", args, _maybe_dtype(g)


@op("full", "creation")
def _full(g: Gen) -> tuple:
  return None, "full", (g.shape(0, 3), g.scalar()), _maybe_dtype(g, 0.5)


@op("zeros_ones", "creation")
def _zeros_ones(g: Gen) -> tuple:
  s = g.shape(0, 3)
  return None, g.rng.choice(("zeros", "ones")), s if g.rng.random() < 0.5 else (s,), _maybe_dtype(g, 0.5)


@op("like", "creation")
def _like(g: Gen) -> tuple:
  x = g.tensor(g.shape(0, 3))
  m = g.rng.choice(("zeros_like", "ones_like", "full_like"))
  return x, m, (g.scalar(),) if m == "full_like" else (), _maybe_dtype(g, 0.4)


@op("tri", "creation")
def _tri(g: Gen) -> tuple:
  s = g.shape(1, 3)
  return g.tensor(s), g.rng.choice(("tril", "triu")), (g.rng.randint(-3, 3),) if g.rng.random() < 0.7 else (), {}


@op("from_list", "creation")
def _from_list(g: Gen) -> tuple:
  r = g.rng
  pool = (0, 1, -2, 3, 2.5, -0.0, True, False, 255, -1, 1 << 31, NAN, INF)
  data: Any = [r.choice(pool) for _ in range(r.randint(0, 4))]
  if r.random() < 0.3: data = [data, [r.choice(pool) for _ in data]]
  if r.random() < 0.1: data = r.choice(pool)
  kw = {"dtype": DT(r.choice(DTYPES))} if r.random() < 0.4 else {}
  return None, "__call__", (data,), kw


# ---- nn-style methods

def _floats(g: Gen) -> str: return g.dtype(("float32", "float32", "float32", "float16"))


@op("layernorm", "nn", accum=True)
def _layernorm(g: Gen) -> tuple:
  s = g.shape(1, 3, zero=0.05)
  kw: dict[str, Any] = {"axis": g.axis(len(s), none=False)} if g.rng.random() < 0.5 else {}
  if g.rng.random() < 0.3: kw["eps"] = g.rng.choice((1e-5, 0.1, 0.0))
  return g.tensor(s, _floats(g) if g.rng.random() < 0.9 else g.dtype()), "layernorm", (), kw


@op("batchnorm", "nn")
def _batchnorm(g: Gen) -> tuple:
  s = (g.rng.randint(1, 2), g.rng.randint(1, 3)) + g.shape(0, 2)
  dt = _floats(g)
  c = (s[1],)
  w = g.tensor(c, dt) if g.rng.random() < 0.7 else None
  b = g.tensor(c, dt) if g.rng.random() < 0.7 else None
  return g.tensor(s, dt), "batchnorm", (w, b, g.tensor(c, dt), g.tensor(c, dt, kind="pos")), {}


def _conv_args(g: Gen, transpose: bool) -> tuple:
  r = g.rng
  groups = r.choice((1, 1, 1, 2))
  cin, cout = groups * r.randint(1, 2), groups * r.randint(1, 2)
  k = (r.randint(1, 3), r.randint(1, 3))
  hw = (r.randint(1, 6), r.randint(1, 6))
  dt = _floats(g) if r.random() < 0.85 else g.dtype()
  x = g.tensor((r.randint(1, 2), cin) + hw, dt)
  w = g.tensor((cin, cout // groups) + k if transpose else (cout, cin // groups) + k, dt)
  kw: dict[str, Any] = {}
  if r.random() < 0.5: kw["bias"] = g.tensor((cout,), dt)
  if groups > 1: kw["groups"] = groups
  if r.random() < 0.5: kw["stride"] = r.choice((1, 2, (1, 2), (2, 1)))
  if r.random() < 0.4: kw["dilation"] = r.choice((1, 2, (2, 1)))
  if r.random() < 0.5: kw["padding"] = r.choice((0, 1, 2, (1, 0), (0, 1, 1, 0))) if not transpose else r.choice((0, 1, (1, 0)))
  if transpose and r.random() < 0.3: kw["output_padding"] = r.choice((0, 1))
  return x, w, kw


@op("conv2d", "nn", accum=True)
def _conv2d(g: Gen) -> tuple:
  x, w, kw = _conv_args(g, False)
  return x, "conv2d", (w,), kw


@op("conv_transpose2d", "nn", accum=True)
def _conv_transpose2d(g: Gen) -> tuple:
  x, w, kw = _conv_args(g, True)
  return x, "conv_transpose2d", (w,), kw


@op("pool2d", "nn", accum=True)
def _pool2d(g: Gen) -> tuple:
  r = g.rng
  s = (r.randint(1, 2), r.randint(1, 2), r.randint(1, 6), r.randint(1, 6))
  if r.random() < 0.15: s = s[1:]
  m = r.choice(("avg_pool2d", "max_pool2d"))
  kw: dict[str, Any] = {"kernel_size": r.choice(((2, 2), (3, 3), (1, 2), (2, 1), 2, 3))}
  ks = kw["kernel_size"] if isinstance(kw["kernel_size"], tuple) else (kw["kernel_size"],) * 2
  if r.random() < 0.5: kw["stride"] = r.choice((1, 2, (1, 2), 3))
  if r.random() < 0.4: kw["padding"] = r.choice((0, 1, (min(ks) // 2, 0)))
  if r.random() < 0.3: kw["dilation"] = r.choice((1, 2))
  if r.random() < 0.4: kw["ceil_mode"] = r.random() < 0.6
  if m == "avg_pool2d" and r.random() < 0.4: kw["count_include_pad"] = r.random() < 0.5
  if m == "max_pool2d" and r.random() < 0.3: kw["return_indices"] = True
  dt = _floats(g) if r.random() < 0.8 else g.dtype()
  return g.tensor(s, dt), m, (), kw


@op("interpolate", "nn", accum=True)
def _interpolate(g: Gen) -> tuple:
  r = g.rng
  nd = r.randint(1, 2)
  s = (1, r.randint(1, 2)) + tuple(r.randint(1, 5) for _ in range(nd))
  size = tuple(r.randint(1, 6) for _ in range(nd))
  kw: dict[str, Any] = {"mode": r.choice(("linear", "nearest", "nearest-exact"))}
  if r.random() < 0.4: kw["align_corners"] = r.random() < 0.5
  dt = _floats(g) if r.random() < 0.8 else g.dtype(("uint8", "int32"))
  return g.tensor(s, dt, kind="any" if r.random() < 0.3 else "pos"), "interpolate", (size,), kw


@op("one_hot", "nn")
def _one_hot(g: Gen) -> tuple:
  s = g.shape(0, 2)
  n = g.rng.randint(1, 5)
  return g.idx(s, -1 if g.rng.random() < 0.1 else 0, n + (1 if g.rng.random() < 0.1 else 0), g.dtype(("int32", "int64", "uint8"))), "one_hot", (n,), {}


def _reduction(g: Gen) -> dict[str, Any]: return {"reduction": g.rng.choice(("mean", "sum", "none"))} if g.rng.random() < 0.5 else {}


@op("cross_entropy", "nn", accum=True)
def _cross_entropy(g: Gen) -> tuple:
  n, c = g.rng.randint(1, 3), g.rng.randint(1, 4)
  s = (n, c) if g.rng.random() < 0.8 else (c,)
  dt = _floats(g)
  y = g.tensor(s, dt, kind="unit") if g.rng.random() < 0.5 else g.idx(s[:-1] if len(s) == 2 else (), 0, c)
  kw = _reduction(g)
  if g.rng.random() < 0.3: kw["label_smoothing"] = g.rng.choice((0.1, 0.5))
  return g.tensor(s, dt), "cross_entropy", (y,), kw


@op("sparse_categorical_crossentropy", "nn", accum=True)
def _scce(g: Gen) -> tuple:
  n, c = g.rng.randint(1, 3), g.rng.randint(1, 4)
  kw = _reduction(g)
  if g.rng.random() < 0.3: kw["ignore_index"] = g.rng.choice((0, 1))
  if g.rng.random() < 0.3: kw["label_smoothing"] = g.rng.choice((0.1, 0.5))
  return g.tensor((n, c), _floats(g)), "sparse_categorical_crossentropy", (g.idx((n,), 0, c),), kw


@op("nll_loss", "nn", accum=True)
def _nll_loss(g: Gen) -> tuple:
  n, c = g.rng.randint(1, 3), g.rng.randint(1, 4)
  dt = _floats(g)
  kw = _reduction(g)
  if g.rng.random() < 0.3: kw["weight"] = g.tensor((c,), dt, kind="pos")
  if g.rng.random() < 0.3: kw["ignore_index"] = g.rng.choice((0, 1, -100))
  return g.tensor((n, c), dt), "nll_loss", (g.idx((n,), 0, c),), kw


@op("binary_crossentropy", "nn", accum=True)
def _bce(g: Gen) -> tuple:
  s = g.shape(0, 2)
  dt = _floats(g)
  y = g.tensor(s, dt, kind=g.rng.choice(("binary", "unit")))
  return g.tensor(s, dt, kind="unit"), "binary_crossentropy", (y,), _reduction(g)


@op("binary_crossentropy_logits", "nn", accum=True)
def _bce_logits(g: Gen) -> tuple:
  s = g.shape(0, 2)
  dt = _floats(g)
  kw = _reduction(g)
  if g.rng.random() < 0.3 and s: kw["pos_weight"] = g.tensor(s[-1:], dt, kind="pos")
  return g.tensor(s, dt), "binary_crossentropy_logits", (g.tensor(s, dt, kind="binary"),), kw


@op("sdpa", "nn", accum=True)
def _sdpa(g: Gen) -> tuple:
  r = g.rng
  b, h, lq, lk, d, dv = (r.randint(1, 2), r.randint(1, 2), r.randint(1, 3), r.randint(1, 3), r.randint(1, 4), r.randint(1, 3))
  dt = _floats(g)
  lead = (b, h) if r.random() < 0.7 else (b,)
  q, k, v = g.tensor(lead + (lq, d), dt), g.tensor(lead + (lk, d), dt), g.tensor(lead + (lk, dv), dt)
  kw: dict[str, Any] = {}
  if r.random() < 0.3: kw["attn_mask"] = g.tensor((lq, lk), "bool", p=0.7) if r.random() < 0.6 else g.tensor((lq, lk), dt)
  elif r.random() < 0.3: kw["is_causal"] = True
  return q, "scaled_dot_product_attention", (k, v), kw


@op("linear", "nn", accum=True)
def _linear(g: Gen) -> tuple:
  dt = _floats(g) if g.rng.random() < 0.8 else g.dtype()
  i, o = g.rng.randint(1, 4), g.rng.randint(1, 4)
  x = g.tensor(g.shape(0, 2) + (i,), dt)
  w = g.tensor((i, o), dt) if g.rng.random() < 0.9 else g.tensor((i,), dt)
  return x, "linear", (w,) + ((g.tensor((o,), dt),) if g.rng.random() < 0.5 else ()), {}


@op("normalize", "nn", accum=True)
def _normalize(g: Gen) -> tuple:
  s = g.shape(1, 3)
  kw = {"dim": g.rng.randrange(-len(s), len(s))}
  if g.rng.random() < 0.3: kw["p"] = g.rng.choice((1.0, 3.0))
  return g.tensor(s, _floats(g)), "normalize", (), kw


@op("dropout_eval", "nn")
def _dropout(g: Gen) -> tuple: return g.tensor(g.shape()), "dropout", (g.rng.choice((0.0, 0.5)),), {}


# ---- matmul, dot, einsum

def _mm_shapes(g: Gen) -> tuple[tuple[int, ...], tuple[int, ...]]:
  r = g.rng
  m, k, n = r.randint(1, 4), r.choice((0, 1, 2, 3, 5)) if r.random() < 0.9 else 0, r.randint(1, 4)
  a, b = (m, k) if r.random() < 0.8 else (k,), (k, n) if r.random() < 0.8 else (k,)
  if r.random() < 0.5: a = g.shape(0, 2, zero=0) + a
  if r.random() < 0.5: b = g.shape(0, 2, zero=0) + b
  if r.random() < 0.05: b = (k + 1,) + b[1:]  # inner dims don't match
  return a, b


@op("matmul", "matmul", accum=True)
def _matmul(g: Gen) -> tuple:
  a, b = _mm_shapes(g)
  dt = g.dtype()
  x, y = g.tensor(a, dt), g.tensor(b, dt if g.rng.random() < 0.8 else g.dtype())
  m = g.rng.choice(("matmul", "dot", "__matmul__"))
  kw = {"dtype": DT(g.rng.choice(("float32", "int32", "float16")))} if m != "__matmul__" and g.rng.random() < 0.2 else {}
  return x, m, (y,), kw


EINSUMS = (("ij,jk->ik", ((2, 3), (3, 4))), ("bij,bjk->bik", ((2, 2, 3), (2, 3, 1))), ("i,i->", ((4,), (4,))), ("ij->ji", ((2, 3),)),
           ("ii->i", ((3, 3),)), ("ii", ((3, 3),)), ("i,j->ij", ((2,), (3,))), ("...ij,...jk->...ik", ((2, 2, 3), (3, 2))),
           ("bhqd,bhkd->bhqk", ((1, 2, 3, 4), (1, 2, 2, 4))), ("ij,ij->i", ((2, 3), (2, 3))), ("ijk->", ((2, 3, 2),)), ("i->", ((0,),)),
           ("ij,jk", ((2, 3), (3, 2))), ("ab,bc,cd->ad", ((2, 3), (3, 2), (2, 2))), ("i,i", ((3,), (3,))), ("ji", ((2, 3),)),
           ("ij,kj->ik", ((2, 0), (3, 0))), ("ij,j->i", ((2, 3), (2,))))


@op("einsum", "matmul", accum=True)
def _einsum(g: Gen) -> tuple:
  form, shapes = g.rng.choice(EINSUMS)
  dt = g.dtype()
  ts = tuple(g.tensor(s, dt if g.rng.random() < 0.85 else g.dtype()) for s in shapes)
  kw = {"dtype": DT(g.rng.choice(("float32", "int32")))} if g.rng.random() < 0.1 else {}
  return None, "einsum", (form,) + (ts if g.rng.random() < 0.8 else (list(ts),)), kw


# ---- scenarios: multi-step programs (in-place updates, optimizers, nn modules). A scenario case calls SCENARIOS[name] in
# each worker with the tinygrad it imports, the case's input tensors and the JSON params; it returns a list of results
# (tensors, Python values, or Raised for a step that raised: equal to any other raise, as exception types differ on purpose)

SCENARIOS: dict[str, Callable[..., list[Any]]] = {}


def scenario(name: str, group: str, accum: bool = False) -> Callable[[Callable], Callable]:
  """Registers a scenario (the function run in the workers) and its generator (the decorated function's `gen` attribute)."""
  def reg(fn: Callable) -> Callable:
    SCENARIOS[name] = fn
    op(name, group, accum)(lambda g: (None, "$" + name, (), fn.gen(g)))  # type: ignore[attr-defined]
    return fn
  return reg


@dataclass(frozen=True)
class Raised:
  """A scenario step that raised: equal to any other raise (exception types differ on purpose), its message kept for KNOWN."""
  msg: str


def _try(fn: Callable[[], Any]) -> Any:
  try: return fn()
  except Exception as e:  # noqa: BLE001  a step raising on either side is an answer
    return Raised(f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")


def _snap(t: Any, Tensor: Any) -> Any:
  """A copy of t's values now (a later in-place update must not change what a step recorded), or Raised."""
  return _try(lambda: Tensor(t.numpy()))


def _basic_index(g: Gen, s: tuple[int, ...]) -> Any:
  """A basic (view) index: ints, slices (negative steps too), None and Ellipsis, no tensors."""
  return _index(g, s, adv=False)[0]


# -- in-place updates and aliasing

AUG = ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__")


def _inplace_value(g: Gen, out: tuple[int, ...] | None, dt: str, adv: bool = False) -> Any:
  r = g.rng.random()
  if r < 0.35 or out is None: return g.scalar() if g.rng.random() < 0.7 else g.rng.choice((1, 2, -1, 0.5, True))
  if adv: return g.tensor(g.rng.choice(((), (1,))), dt if g.rng.random() < 0.8 else g.dtype(), edge=0.0)  # duplicates: one value
  shape = g.bshape(out) if r < 0.7 else out
  return g.tensor(shape, dt if g.rng.random() < 0.75 else g.dtype(), edge=0.0, view="none")


def _inplace_base(g: Gen, s: tuple[int, ...], dt: str) -> Ref: return g.tensor(s, dt, view="none", edge=0.0)


def sc_assign(env: dict[str, Any], xs: list[Any], target: Any = None, early: Any = None, value: Any = None) -> list[Any]:
  """x (realized), an earlier view of it, then `x[target].assign(value)` (or x.assign): x, the earlier view, the target."""
  T = env["Tensor"]
  x = xs[0].contiguous().realize()
  e = x[early] if early is not None else None
  t = x[target] if target is not None else x
  res = [_try(lambda: (t.assign(value), "ok")[1])]
  return res + [_snap(x, T), _snap(e, T) if e is not None else None, _snap(t, T)]


def sc_augmented(env: dict[str, Any], xs: list[Any], method: str = "__iadd__", target: Any = None, early: Any = None, value: Any = None,
                 form: str = "view") -> list[Any]:
  """`v = x[target]; v += value` (form view: v is rebound to the result) or `x[target] += value` (form item: Python calls
  x.__setitem__(target, x[target].__iadd__(value))), with an earlier view of x: x, the earlier view, the updated tensor."""
  T = env["Tensor"]
  x = xs[0].contiguous().realize()
  e = x[early] if early is not None else None
  if form == "item":
    def run() -> Any:
      x.__setitem__(target, getattr(x[target], method)(value))
      return x
    out = _try(run)
  elif target is None: out = _try(lambda: getattr(x, method)(value))
  else: out = _try(lambda: getattr(x[target], method)(value))
  return [_snap(x, T), _snap(e, T) if e is not None else None, out if isinstance(out, Raised) else _snap(out, T)]


def sc_setitem(env: dict[str, Any], xs: list[Any], index: Any = None, early: Any = None, value: Any = None, realize: bool = True) -> list[Any]:
  """x[index] = value with an earlier view of x (realized x, as tinygrad 0.14 writes through its views only then): x and the view."""
  T = env["Tensor"]
  x = xs[0].contiguous().realize() if realize else xs[0]
  e = x[early] if early is not None else None
  res = [_try(lambda: (x.__setitem__(index, value), "ok")[1])]
  return res + [_snap(x, T), _snap(e, T) if e is not None else None]


def sc_param_inplace(env: dict[str, Any], xs: list[Any], how: str = "setitem", backward: bool = True, value: Any = 1) -> list[Any]:
  """An in-place update of a trainable tensor (is_param) whose gradient was just computed: x, its grad, a second gradient."""
  T = env["Tensor"]
  x = xs[0].contiguous().realize().is_param_(True)
  if backward: (x * x).sum().backward()
  def run() -> str:
    if how == "setitem": x[0] = value
    elif how == "assign": x.assign(T.full(x.shape, value, dtype=x.dtype))
    else: x.__iadd__(value)
    return "ok"
  res = [_try(run), _snap(x, T), _snap(x.grad, T) if x.grad is not None else None]
  def regrad() -> Any:
    x.grad = None
    (x * 3).sum().backward()
    return x.grad
  g2 = _try(regrad)
  return res + [g2 if isinstance(g2, Raised) else _snap(g2, T)]


def _gen_assign(g: Gen) -> dict[str, Any]:
  s = g.shape(1, 3, zero=0.03)
  dt = g.dtype()
  _inplace_base(g, s, dt)
  early = _basic_index(g, s) if g.rng.random() < 0.6 else None
  if g.rng.random() < 0.5: target, out = None, s
  else:
    target = _basic_index(g, s)
    out = _indexed_shape(s, target)
  return {"target": target, "early": early, "value": _inplace_value(g, out, dt)}


def _gen_augmented(g: Gen) -> dict[str, Any]:
  s = g.shape(1, 3, zero=0.03)
  dt = g.dtype()
  _inplace_base(g, s, dt)
  early = _basic_index(g, s) if g.rng.random() < 0.6 else None
  target = _basic_index(g, s) if g.rng.random() < 0.6 else None
  out = s if target is None else _indexed_shape(s, target)
  form = g.rng.choice(("view", "item")) if target is not None else "view"
  value = g.scalar("small") if g.rng.random() < 0.4 else _inplace_value(g, out, dt)
  return {"method": g.rng.choice(AUG), "target": target, "early": early, "value": value, "form": form}


def _gen_setitem(g: Gen) -> dict[str, Any]:
  s = g.shape(1, 3, zero=0.03)
  dt = g.dtype()
  _inplace_base(g, s, dt)
  early = _basic_index(g, s) if g.rng.random() < 0.7 else None
  index, out = _index(g, s, adv=g.rng.random() < 0.5)
  adv = out is None
  return {"index": index, "early": early, "value": _inplace_value(g, out, dt, adv), "realize": g.rng.random() < 0.9}


def _gen_param_inplace(g: Gen) -> dict[str, Any]:
  g.tensor(g.shape(1, 2, zero=0), g.dtype(("float32", "float32", "float16")), view="none", edge=0.0)
  return {"how": g.rng.choice(("setitem", "assign", "iadd")), "backward": g.rng.random() < 0.7, "value": g.rng.choice((1, 2.5, -1))}


for _name, _fn, _gen in (("assign", sc_assign, _gen_assign), ("augmented", sc_augmented, _gen_augmented), ("setitem_alias", sc_setitem, _gen_setitem),
                         ("param_inplace", sc_param_inplace, _gen_param_inplace)):
  _fn.gen = _gen  # type: ignore[attr-defined]
  scenario(_name, "inplace")(_fn)


# -- optimizers: a fixed small model (a linear layer and a frozen scale) trained a few steps on identical data

OPTIMS: dict[str, Callable[[Gen], dict[str, Any]]] = {
  "SGD": lambda g: {k: v for k, v in (("momentum", g.rng.choice((0.0, 0.9, 0.5))), ("weight_decay", g.rng.choice((0.0, 0.0, 0.1))),
                                      ("nesterov", g.rng.random() < 0.4), ("classic", g.rng.random() < 0.3)) if g.rng.random() < 0.8},
  "Adam": lambda g: {k: v for k, v in (("b1", g.rng.choice((0.9, 0.5))), ("b2", g.rng.choice((0.999, 0.9))), ("eps", g.rng.choice((1e-8, 1e-3))))
                     if g.rng.random() < 0.5},
  "AdamW": lambda g: {k: v for k, v in (("weight_decay", g.rng.choice((0.01, 0.0, 0.5))), ("b1", 0.8)) if g.rng.random() < 0.6},
  "LAMB": lambda g: {k: v for k, v in (("weight_decay", g.rng.choice((0.0, 0.1))), ("adam", g.rng.random() < 0.5), ("eps", 1e-6)) if g.rng.random() < 0.6},
  "LARS": lambda g: {k: v for k, v in (("momentum", g.rng.choice((0.9, 0.0))), ("weight_decay", g.rng.choice((1e-4, 0.0))),
                                       ("nesterov", g.rng.random() < 0.3), ("classic", g.rng.random() < 0.3)) if g.rng.random() < 0.6},
  "Muon": lambda g: {k: v for k, v in (("momentum", g.rng.choice((0.95, 0.5))), ("weight_decay", g.rng.choice((0.1, 0.0))),
                                       ("ns_steps", g.rng.choice((5, 2))), ("nesterov", g.rng.random() < 0.5)) if g.rng.random() < 0.6},
}


def _loss(kind: str, w: Any, b: Any, s: Any, X: Any, Y: Any) -> Any:
  y = (X @ w.T + b) * s
  if kind == "mse": return ((y - Y) ** 2).mean()
  if kind == "tanh": return (((y * 0.1).tanh() - Y.tanh()) ** 2).sum()  # scaled: a saturated tanh's gradient is rounding noise
  if kind == "ce": return y.log_softmax(-1).mul(Y.softmax(-1)).sum(-1).mean().neg()
  return (w * w).sum() * 0.5 + (b - 1).square().sum()  # quadratic


def sc_optim(env: dict[str, Any], xs: list[Any], opt: str = "SGD", kw: dict[str, Any] | None = None, lr: float = 0.01, lr_tensor: bool = False,
             loss: str = "mse", steps: int = 3, zero_grad: bool = True, group: bool = False, frozen_in_list: bool = False,
             fused: bool = False) -> list[Any]:
  """`steps` steps of nn.optim.<opt> on w (o, i) and b (o,) (scale s frozen: is_param False): the loss, w and b after each, s at the end;
  lr_tensor: opt.lr (a tensor) assigned a new value after each step.
  (Not s.grad: tinygrad 0.14 gives every float tensor a grad, is_param or not; docs/differences.md.)"""
  T, optim = env["Tensor"], env["optim"]
  w, b = xs[0].contiguous().realize(), xs[1].contiguous().realize()
  s = xs[2].contiguous().realize().is_param_(False)
  X, Y = xs[3], xs[4]
  lr_arg: Any = lr
  params = [w, b] + ([s] if frozen_in_list else [])
  kw = {**(kw or {}), **({"fused": True} if fused else {})}
  o = optim.OptimizerGroup(getattr(optim, opt)([w], lr=lr_arg, **kw), optim.SGD([b], lr=lr_arg)) if group else getattr(optim, opt)(params, lr=lr_arg, **kw)
  out: list[Any] = []
  with env["Context"](TRAINING=1):
    for _ in range(steps):
      if zero_grad: o.zero_grad()
      lo = _loss(loss, w, b, s, X, Y)
      lo.backward()
      o.step()
      out += [_snap(lo, T), _snap(w, T), _snap(b, T)]
      if lr_tensor:  # a schedule: the lr tensor updated in place (a Tensor lr in the constructor raises in both)
        for sub in (o.optimizers if group else [o]): sub.lr.assign(sub.lr * 0.5 + 0.01).realize()
  return out + [_snap(s, T)]


def _gen_optim(g: Gen) -> dict[str, Any]:
  r = g.rng
  o, i, n = r.randint(1, 3), r.randint(1, 4), r.randint(1, 3)
  g.tensor((o, i), "float32", view="none", edge=0.0)
  g.tensor((o,), "float32", view="none", edge=0.0)
  g.tensor((o,), "float32", kind="pos", view="none")
  g.tensor((n, i), "float32", edge=0.0)
  g.tensor((n, o), "float32", edge=0.0)
  opt = r.choice(tuple(OPTIMS))
  return {"opt": opt, "kw": OPTIMS[opt](g), "lr": r.choice((0.01, 0.1, 0.5, 0.0)), "lr_tensor": r.random() < 0.2,
          "loss": r.choice(("mse", "tanh", "ce", "quad")), "steps": r.randint(1, 3), "zero_grad": r.random() < 0.8, "group": r.random() < 0.15,
          "frozen_in_list": r.random() < 0.3, **({"fused": True} if r.random() < 0.2 else {})}


sc_optim.gen = _gen_optim  # type: ignore[attr-defined]
scenario("optimizer", "optim", accum=True)(sc_optim)


# -- nn modules: built on both sides, every state tensor set from the case's seed, then run forward

MODULES: dict[str, Callable[[Gen], tuple[list[Any], tuple[int, ...], str]]] = {  # -> (constructor args, input shape, input kind)
  "Linear": lambda g: ([g.rng.randint(1, 4), g.rng.randint(1, 3), g.rng.random() < 0.8], (), ""),
  "Conv2d": lambda g: ([2, g.rng.choice((1, 2, 4)), g.rng.choice((1, 2, 3, (1, 2)))], (), ""),
  "ConvTranspose2d": lambda g: ([2, g.rng.choice((1, 2, 4)), g.rng.choice((1, 2, 3))], (), ""),
  "Conv1d": lambda g: ([2, g.rng.choice((1, 3)), g.rng.choice((1, 2))], (), ""),
  "BatchNorm": lambda g: ([g.rng.randint(1, 3)], (), ""),
  "BatchNorm2d": lambda g: ([g.rng.randint(1, 3)], (), ""),
  "LayerNorm": lambda g: ([g.rng.choice((3, (2, 3)))], (), ""),
  "LayerNorm2d": lambda g: ([2], (), ""),
  "GroupNorm": lambda g: ([g.rng.choice((1, 2)), 4], (), ""),
  "InstanceNorm": lambda g: ([g.rng.randint(1, 3)], (), ""),
  "RMSNorm": lambda g: ([g.rng.randint(1, 4)], (), ""),
  "Embedding": lambda g: ([g.rng.randint(1, 5), g.rng.randint(1, 3)], (), ""),
  "LSTMCell": lambda g: ([g.rng.randint(1, 3), g.rng.randint(1, 3), g.rng.random() < 0.8], (), ""),
}


def _module_input_shape(kind: str, args: list[Any], kw: dict[str, Any], g: Gen) -> tuple[int, ...]:
  r = g.rng
  if kind == "Linear": return g.shape(0, 2, zero=0.05) + (args[0],)
  if kind in ("Conv2d", "ConvTranspose2d"): return (r.randint(1, 2), args[0], r.randint(2, 5), r.randint(2, 5))
  if kind == "Conv1d": return (r.randint(1, 2), args[0], r.randint(2, 6))
  if kind == "BatchNorm": return (r.randint(2, 3), args[0]) + ((r.randint(1, 3),) if r.random() < 0.5 else ())
  if kind == "BatchNorm2d": return (r.randint(1, 2), args[0], r.randint(1, 3), r.randint(1, 3))
  if kind == "LayerNorm": return (r.randint(1, 2),) + ((args[0],) if isinstance(args[0], int) else tuple(args[0]))
  if kind == "LayerNorm2d": return (1, args[0], r.randint(1, 3), r.randint(1, 3))
  if kind == "GroupNorm": return (r.randint(1, 2), args[1], r.randint(1, 3))
  if kind == "InstanceNorm": return (r.randint(1, 2), args[0], r.randint(2, 4))
  if kind == "RMSNorm": return g.shape(0, 2, zero=0.05) + (args[0],)
  if kind == "Embedding": return g.shape(1, 2, zero=0.05)
  return (r.randint(1, 2), args[0])  # LSTMCell


def _set_state(env: dict[str, Any], m: Any, seed: int) -> list[Any]:
  """Every float tensor of m's state dict set from (seed, key); returns the keys with shapes and dtypes."""
  T, np = env["Tensor"], env["np"]
  sd = env["get_state_dict"](m)
  for k in sorted(sd):
    t = sd[k]
    name = repr(t.dtype)
    if name not in ("dtypes.float", "dtypes.half"): continue
    desc = {"shape": list(t.shape), "dtype": "float32" if name == "dtypes.float" else "float16", "seed": f"{seed}/{k}",
            "kind": "pos" if "var" in k else "any", "edge": 0.0}
    t.assign(T(build_input(desc, np)))
  return [[k, list(sd[k].shape), repr(sd[k].dtype)] for k in sorted(sd)]


def sc_module(env: dict[str, Any], xs: list[Any], kind: str = "Linear", args: Any = (), kw: dict[str, Any] | None = None, seed: int = 0,
              train: bool = False, steps: int = 1, hc: bool = False) -> list[Any]:
  """nn.<kind>(*args, **kw), its state set from the seed, called on x (`steps` times, in training mode if `train`): the state
  dict's keys/shapes/dtypes, the outputs, and the state after."""
  T, nn = env["Tensor"], env["nn"]
  m = getattr(nn, kind)(*args, **(kw or {}))
  keys = _set_state(env, m, seed)
  out: list[Any] = [{"py": json.dumps(keys)}]
  with env["Context"](TRAINING=int(train)):
    for _ in range(steps):
      if kind == "LSTMCell": y: Any = m(xs[0], (xs[1], xs[2]) if hc else None)
      else: y = m(xs[0])
      out += [_snap(t, T) for t in (y if isinstance(y, tuple) else (y,))]
  sd = env["get_state_dict"](m)
  return out + [_snap(sd[k], T) for k in sorted(sd)]


def _gen_module(g: Gen) -> dict[str, Any]:
  r = g.rng
  kind = r.choice(tuple(MODULES))
  args = MODULES[kind](g)[0]
  kw: dict[str, Any] = {}
  if kind in ("Conv2d", "ConvTranspose2d", "Conv1d"):
    if r.random() < 0.4: kw["stride"] = r.choice((1, 2))
    if r.random() < 0.4: kw["padding"] = r.choice((0, 1))
    if r.random() < 0.2: kw["bias"] = False
    if r.random() < 0.2 and kind != "Conv1d": kw["groups"] = 2
    if r.random() < 0.2: kw["dilation"] = 2
  if kind in ("BatchNorm", "BatchNorm2d"):
    if r.random() < 0.3: kw["affine"] = False
    if r.random() < 0.3: kw["track_running_stats"] = False
    if r.random() < 0.3: kw["momentum"] = r.choice((0.5, 1.0))
  if kind in ("LayerNorm", "LayerNorm2d") and r.random() < 0.3: kw["elementwise_affine"] = False
  if kind in ("GroupNorm", "InstanceNorm") and r.random() < 0.3: kw["affine"] = False
  if kind == "RMSNorm" and r.random() < 0.3: kw["elementwise_affine"] = False
  if kind in ("LayerNorm", "GroupNorm", "InstanceNorm", "BatchNorm", "RMSNorm") and r.random() < 0.2: kw["eps"] = r.choice((1e-3, 0.1))
  s = _module_input_shape(kind, args, kw, g)
  if kind == "Embedding": g.idx(s, 0, args[0], g.dtype(("int32", "int64")))
  else: g.tensor(s, "float32" if r.random() < 0.9 else "float16", edge=0.0 if r.random() < 0.8 else 0.1)
  hc = kind == "LSTMCell" and r.random() < 0.6
  if kind == "LSTMCell":
    g.tensor((s[0], args[1]), "float32", edge=0.0)
    g.tensor((s[0], args[1]), "float32", edge=0.0)
  return {"kind": kind, "args": args, "kw": kw, "seed": r.randrange(1 << 20), "train": r.random() < 0.5, "steps": r.randint(1, 2), "hc": hc}


sc_module.gen = _gen_module  # type: ignore[attr-defined]
scenario("module", "modules", accum=True)(sc_module)


def sc_state_load(env: dict[str, Any], xs: list[Any], kind: str = "Linear", args: Any = (), kw: dict[str, Any] | None = None, seed: int = 0,
                  change: str = "none", strict: bool = True, **_: Any) -> list[Any]:
  """nn.state: module A's state (set from the seed) loaded into a fresh module B by load_state_dict, after a change to the
  state dict (a key dropped, a shape or dtype changed, a scalar reshaped to (1,)): whether it raised, get_parameters' shapes
  and dtypes, B's output on x and its state."""
  T, nn, st = env["Tensor"], env["nn"], env["state"]
  a, b = getattr(nn, kind)(*args, **(kw or {})), getattr(nn, kind)(*args, **(kw or {}))
  _set_state(env, a, seed)
  _set_state(env, b, seed + 1)  # (not its random init: what a failed or partial load leaves must be the same on both sides)
  sd = {k: T(v.numpy()) for k, v in st.get_state_dict(a).items()}
  keys = sorted(sd)
  if not keys: change = "none"  # (a module without state: LayerNorm(elementwise_affine=False))
  if change == "drop": del sd[keys[0]]
  elif change == "shape": sd[keys[-1]] = sd[keys[-1]].reshape(-1, 1)
  elif change == "dtype": sd[keys[-1]] = sd[keys[-1]].cast(env["dtypes"].float16 if sd[keys[-1]].dtype != env["dtypes"].float16 else env["dtypes"].float32)
  elif change == "scalar": sd = {k: v.reshape(1) if v.shape == () else v for k, v in sd.items()}
  res: list[Any] = [_try(lambda: (st.load_state_dict(b, sd, strict=strict, verbose=False), "ok")[1])]
  res.append({"py": json.dumps([[list(p.shape), repr(p.dtype)] for p in st.get_parameters(b)])})
  y = _try(lambda: b(xs[0]) if kind != "LSTMCell" else b(xs[0])[0])
  res.append(y if isinstance(y, Raised) else _snap(y, T))
  sdb = st.get_state_dict(b)
  return res + [_snap(sdb[k], T) for k in sorted(sdb)]


def _gen_state_load(g: Gen) -> dict[str, Any]:
  p = _gen_module(g)
  return {**p, "change": g.rng.choice(("none", "none", "drop", "shape", "dtype", "scalar")), "strict": g.rng.random() < 0.6}


sc_state_load.gen = _gen_state_load  # type: ignore[attr-defined]
scenario("state_load", "modules", accum=True)(sc_state_load)


# ---- result dtypes of mixed operations (small positive values: the edge cases are the binary ops' job)

ALL_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64")
MIXED = {"dt_add": "add", "dt_sub": "sub", "dt_mul": "mul", "dt_div": "div", "dt_floordiv": "__floordiv__", "dt_pow": "pow", "dt_lt": "__lt__",
         "dt_eq": "__eq__", "dt_maximum": "maximum", "dt_minimum": "minimum", "dt_radd": "__radd__", "dt_rsub": "__rsub__", "dt_rmul": "__rmul__",
         "dt_rtruediv": "__rtruediv__", "dt_rpow": "__rpow__"}


def _mixed(name: str) -> Callable[[Gen], tuple]:
  def gen(g: Gen) -> tuple:
    s = g.shape(0, 2, zero=0.02)
    x = g.tensor(s, g.rng.choice(ALL_DTYPES), kind="pos")
    r = g.rng.random()
    if r < 0.5 or name.startswith("dt_r"): y: Any = g.rng.choice((2, 3, 0.5, 1.5, True, False, 1, 2.0))
    else: y = g.tensor(g.bshape(s) if g.rng.random() < 0.3 else s, g.rng.choice(ALL_DTYPES), kind="pos")
    return x, MIXED[name], (y,), {}
  return gen


for _n in MIXED: op(_n, "dtype")(_mixed(_n))


@op("dt_np_scalar", "dtype")
def _dt_np_scalar(g: Gen) -> tuple:
  """A numpy scalar operand (np.float32(2.5), np.int64(3), np.bool_(True): from indexing an array) of a tensor op."""
  s = g.shape(0, 2, zero=0.02)
  x = g.tensor(s, g.rng.choice(ALL_DTYPES), kind="pos")
  dt = g.rng.choice(ALL_DTYPES)
  v = {"bool": True}.get(dt, 2.5 if dt.startswith("float") else 3)
  return x, g.rng.choice(("add", "mul", "__add__", "__mul__", "__truediv__", "maximum", "__lt__", "__eq__", "pow", "sub", "__radd__", "__rmul__")), \
    (NPS("bool_" if dt == "bool" else dt, v),), {}


@op("dt_where", "dtype")
def _dt_where(g: Gen) -> tuple:
  s = g.shape(0, 2, zero=0.02)
  def side() -> Any: return g.rng.choice((2, 0.5, True, 1.0)) if g.rng.random() < 0.4 else g.tensor(s, g.rng.choice(ALL_DTYPES), kind="pos")
  return g.tensor(s, "bool"), "where", (side(), side()), {}


@op("dt_from_numpy", "dtype")
def _dt_from_numpy(g: Gen) -> tuple:
  x = g.tensor(g.shape(0, 2, zero=0.05), g.rng.choice(ALL_DTYPES), kind="pos")
  kw = {"dtype": DT(g.rng.choice(ALL_DTYPES))} if g.rng.random() < 0.3 else {}
  return None, "__call__", (NP(x.i),), kw


@op("dt_from_list", "dtype")
def _dt_from_list(g: Gen) -> tuple:
  r = g.rng
  pool = r.choice(((0, 1, -2, 3), (True, False), (0.5, -1.5, 2.0), (True, 2), (True, 0.5), (1, 2.5), (True, 1, 0.5), (255, 256, -1)))
  shape = g.shape(0, 2, zero=0.1)
  def fill(dims: tuple[int, ...]) -> Any: return r.choice(pool) if not dims else [fill(dims[1:]) for _ in range(dims[0])]
  data = fill(shape)
  if r.random() < 0.2 and isinstance(data, list) and data: data = tuple(data)
  kw = {"dtype": DT(r.choice(ALL_DTYPES))} if r.random() < 0.3 else {}
  return None, "__call__", (data,), kw


# ---- the worker: one process per side, cases in (one JSON list a line), one answer a line out

def _flat(v: Any) -> list[Any]:
  if not isinstance(v, list): return [v]
  out: list[Any] = []
  for x in v: out.extend(_flat(x))
  return out


def _result(out: Any, Tensor: Any) -> Any:
  if isinstance(out, Tensor):
    return {"shape": list(out.shape), "dtype": repr(out.dtype), "values": _flat(out.tolist())}
  if isinstance(out, (tuple, list)): return {"list": [_result(o, Tensor) for o in out]}
  if isinstance(out, dict) and set(out) == {"py"}: return out
  if isinstance(out, Raised): return {"raised": out.msg}
  if out is None or isinstance(out, (bool, int, float, str)): return {"py": out}
  return {"py": repr(out)}


def run_case(case: dict[str, Any], Tensor: Any, dtypes: Any, np: Any, env: dict[str, Any] | None = None) -> dict[str, Any]:
  ans: dict[str, Any] = {"id": case["id"]}
  try:
    xs, arrs = [], [build_input(desc, np) for desc in case["inputs"]]
    for desc in case["inputs"]:
      t = Tensor(build_input(desc, np))
      if desc.get("view") == "T": t = Tensor(build_input({**desc, "shape": desc["shape"][::-1]}, np)).permute(*range(len(desc["shape"]) - 1, -1, -1))
      elif desc.get("view") == "flip": t = t.flip(0)
      xs.append(t)
    args, kwargs = decode(case["args"], xs, dtypes, arrs), decode(case["kwargs"], xs, dtypes, arrs)
  except Exception as e:  # noqa: BLE001  a bad case description is the fuzzer's bug: reported apart
    return {**ans, "setup": f"{type(e).__name__}: {e}"}
  try:
    if case["method"].startswith("$"):  # a scenario: a list of results
      ans["out"] = _result(SCENARIOS[case["method"][1:]]({**(env or {}), "Tensor": Tensor, "dtypes": dtypes, "np": np}, xs, *args, **kwargs), Tensor)
      return ans
    target = Tensor if case["self"] is None else xs[case["self"]]
    attr = Tensor if case["method"] == "__call__" else getattr(target, case["method"])
    out = attr(*args, **kwargs) if callable(attr) else attr
    if case["method"] == "__setitem__": out = target
    ans["out"] = _result(out, Tensor)
  except Exception as e:  # noqa: BLE001  any exception is an answer ("raised")
    ans["raised"], ans["msg"] = type(e).__name__, str(e).split("\n")[0][:300]
  return ans


def worker() -> None:
  import faulthandler
  faulthandler.register(signal.SIGUSR1, all_threads=True)  # the driver asks for the stacks of a hung worker (into its log)
  import numpy as np
  from tinygrad import Tensor, dtypes, nn
  from tinygrad.helpers import Context
  from tinygrad.nn import optim, state
  from tinygrad.nn.state import get_state_dict
  env = {"nn": nn, "optim": optim, "Context": Context, "get_state_dict": get_state_dict, "state": state}
  proto = os.fdopen(os.dup(1), "w")
  os.dup2(2, 1)  # anything printed by the library goes to stderr, not into the answers
  for line in sys.stdin:
    for case in json.loads(line):
      t0 = time.perf_counter()
      ans = run_case(case, Tensor, dtypes, np, env)
      ans["s"] = round(time.perf_counter() - t0, 3)
      proto.write(json.dumps(ans) + "\n")
      proto.flush()


# ---- the driver

def abs_pythonpath() -> str:
  """$PYTHONPATH with relative entries made absolute: workers run in /tmp, where `packages/core/src` would name nothing and
  the venv's installed tinygrad (another checkout's) would be imported silently."""
  return os.pathsep.join(os.path.abspath(p) if p else p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep))


class Side:
  """A persistent worker process; restarted when it crashes or hangs."""
  def __init__(self, name: str, python: str, env: dict[str, str], timeout: float, log: str):
    self.name, self.python, self.env, self.timeout, self.log = name, python, env, timeout, log
    self.proc: subprocess.Popen | None = None
    self.restarts, self.buf = 0, b""

  def start(self) -> subprocess.Popen:
    if self.proc is None or self.proc.poll() is not None:
      with open(self.log, "a") as err:
        self.proc = subprocess.Popen([self.python, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=err, env=self.env, cwd="/tmp", bufsize=0, start_new_session=True)
      self.buf = b""
    return self.proc

  def kill(self) -> None:
    if self.proc is not None and self.proc.poll() is None:
      os.killpg(self.proc.pid, signal.SIGKILL)
      self.proc.wait()
    self.proc, self.restarts = None, self.restarts + 1

  def _readline(self, proc: subprocess.Popen) -> bytes | None:
    """The next answer line; b"" when the worker died, None when it sent nothing for `timeout` seconds. (Our own buffer:
    select() on a buffered file misses lines already read into its buffer.)"""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    while b"\n" not in self.buf:
      if not select.select([fd], [], [], self.timeout)[0]: return None
      chunk = os.read(fd, 1 << 16)
      if not chunk: return b""
      self.buf += chunk
    line, self.buf = self.buf.split(b"\n", 1)
    return line

  def run(self, cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    answers: dict[str, dict[str, Any]] = {}
    todo = list(cases)
    while todo:
      proc = self.start()
      assert proc.stdin is not None
      try: proc.stdin.write(json.dumps(todo).encode() + b"\n")
      except BrokenPipeError: pass
      while todo:
        line = self._readline(proc)
        if not line:  # died (EOF) or hung (timeout): blame the case in progress, go on with a new worker
          if line is None:
            with open(self.log, "a") as err: err.write(f"\n@@ {self.name} worker hung on {todo[0]['id']}: stacks follow\n")
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            why = "hang"
          else:
            try: why = f"crash (exit {proc.wait(10)})"
            except subprocess.TimeoutExpired: why = "crash (closed its output)"
          answers[todo[0]["id"]] = {"id": todo[0]["id"], "crash": why}
          todo.pop(0)
          self.kill()
          break
        a = json.loads(line)
        answers[a["id"]] = a
        todo = [c for c in todo if c["id"] != a["id"]]
    return answers

  def close(self) -> None:
    if self.proc is not None and self.proc.poll() is None:
      assert self.proc.stdin is not None
      self.proc.stdin.close()
      try: self.proc.wait(5)
      except subprocess.TimeoutExpired: self.kill()


# ---- comparison

# tinygrad 0.14's weak dtypes (a Python scalar's) are the default float/int once realized (docs/differences.md, dtypes.weakint)
WEAK = {"dtypes.weakfloat": "dtypes.float", "dtypes.weakint": "dtypes.int"}
TOL = {"dtypes.float": (1e-5, 1e-6), "dtypes.half": (1e-2, 1e-3), "dtypes.double": (1e-7, 1e-9)}


def _magnitude(case: dict[str, Any]) -> tuple[float, int]:
  """The largest finite |value| among a case's inputs and their total size (for the tolerance of sums)."""
  mag, n = 0.0, 1
  for desc in case["inputs"]:
    vals = [abs(float(v)) for v in input_values(desc)]
    mag = max([mag] + [v for v in vals if math.isfinite(v)])
    n = max(n, len(vals))
  return mag, n


def compare_values(a: dict[str, Any], b: dict[str, Any], accum: tuple[float, int] | None) -> str | None:
  """None when equal, else the category: shape / dtype / values."""
  if "list" in a or "list" in b:
    if "list" not in a or "list" not in b: return "type"
    if len(a["list"]) != len(b["list"]): return "shape"
    return next((c for x, y in zip(a["list"], b["list"]) if (c := compare_values(x, y, accum))), None)
  if "raised" in a or "raised" in b:  # a scenario's step
    return None if "raised" in a and "raised" in b else "ours step raised" if "raised" in a else "tinygrad step raised"
  if "py" in a or "py" in b:
    if a.get("py") == b.get("py") or (isinstance(a.get("py"), float) and isinstance(b.get("py"), float) and math.isclose(a["py"], b["py"])):
      return None
    return "type" if "py" not in a or "py" not in b else "values"
  if a["shape"] != b["shape"]: return "shape"
  if WEAK.get(a["dtype"], a["dtype"]) != WEAK.get(b["dtype"], b["dtype"]): return "dtype"
  va, vb = a["values"], b["values"]
  if len(va) != len(vb): return "shape"
  dt = WEAK.get(a["dtype"], a["dtype"])
  if dt not in TOL: return None if va == vb else "values"
  rtol, atol = TOL[dt]
  if accum is not None: atol += rtol * accum[0] * accum[1]
  for x, y in zip(va, vb):
    x, y = float(x), float(y)
    if math.isnan(x) or math.isnan(y):
      if math.isnan(x) != math.isnan(y): return "values"
    elif math.isinf(x) or math.isinf(y):
      if x != y: return "values"
    elif abs(x - y) > atol + rtol * abs(y): return "values"
  return None


def input_array(desc: dict[str, Any], np: Any) -> Any:
  """An input's values as the worker's Tensor holds them (its view applied), for references."""
  if desc.get("view") == "T": return build_input({**desc, "shape": desc["shape"][::-1]}, np).transpose()
  a = build_input(desc, np)
  return a[::-1] if desc.get("view") == "flip" else a


# numpy (float64) references of unary math: when the two sides differ, the one that matches it is right
def _np_refs() -> dict[str, Callable[..., Any]]:
  import numpy as np
  erf = np.vectorize(math.erf, otypes=[np.float64])
  def sig(x: Any) -> Any: return 0.5 * (1 + np.tanh(0.5 * x))
  def sp(x: Any, beta: float = 1.0) -> Any: return np.logaddexp(0, beta * x) / beta
  def elu(x: Any, alpha: float = 1.0) -> Any: return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))
  def gelu(x: Any, approximate: str = "tanh") -> Any:
    if approximate == "none": return 0.5 * x * (1 + erf(x / math.sqrt(2)))
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
  return {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
          "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "sigmoid": sig, "reciprocal": lambda x: 1 / x, "atan": np.arctan,
          "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
          "erf": erf, "softplus": sp, "silu": lambda x: x * sig(x), "swish": lambda x: x * sig(x), "mish": lambda x: x * np.tanh(sp(x)),
          "logsigmoid": lambda x: -np.logaddexp(0, -x), "softsign": lambda x: x / (1 + np.abs(x)), "gelu": gelu, "elu": elu,
          "celu": lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0) / alpha)),
          "selu": lambda x: 1.0507 * elu(x, 1.67326), "quick_gelu": lambda x: x * sig(1.702 * x),
          "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6, "hardsigmoid": lambda x: np.clip(x / 6 + 0.5, 0, 1),
          "isnan": np.isnan, "isfinite": np.isfinite,
          "isinf": lambda x, detect_positive=True, detect_negative=True: (np.isposinf(x) & detect_positive) | (np.isneginf(x) & detect_negative)}


_REFS: dict[str, Callable[..., Any]] = {}
NP_DTYPES = {"dtypes.float": "float32", "dtypes.half": "float16", "dtypes.double": "float64", "dtypes.char": "int8", "dtypes.uchar": "uint8",
             "dtypes.short": "int16", "dtypes.ushort": "uint16", "dtypes.int": "int32", "dtypes.uint": "uint32", "dtypes.long": "int64",
             "dtypes.ulong": "uint64", "dtypes.bool": "bool"}


def _ref_values(case: dict[str, Any], np: Any) -> Any:
  """numpy's values for the case (float64 math), or None where there is no reference."""
  if not _REFS: _REFS.update(_np_refs())
  op, args = MIXED.get(case["op"], case["op"]), case["args"]  # (the dtype group's ops are the binary ops they call)
  kw = {k: tuple(v["$tuple"]) if isinstance(v, dict) and "$tuple" in v else v for k, v in case["kwargs"].items()}
  if case["self"] is None:
    if op in ("arange", "linspace", "eye") and "dtype" not in kw:
      return np.arange(*args) if op == "arange" else np.linspace(*args) if op == "linspace" else np.eye(*args)
    if op == "linspace" and kw["dtype"].get("$dtype") in INT_RANGE:  # truncated, then wrapped like a 64-bit int (docs/differences.md)
      return np.trunc(np.linspace(*args)).astype(np.int64)
    if op == "einsum" and "dtype" not in kw:
      refs = args[1] if isinstance(args[1], list) else args[1:]
      arrs = [input_array(case["inputs"][a["$t"]], np) for a in refs]
      return np.einsum(args[0], *[a.astype(np.float64 if a.dtype.kind == "f" else np.int64) for a in arrs])
    if op == "einsum" and kw["dtype"].get("$dtype") in FLOATS:  # numpy's dtype= casts the operands first (float64 here)
      refs = args[1] if isinstance(args[1], list) else args[1:]
      return np.einsum(args[0], *[input_array(case["inputs"][a["$t"]], np).astype(np.float64) for a in refs])
    if op == "einsum" and kw["dtype"].get("$dtype") in ("int32", "int64"):  # int operands: exact in int64, wrapped to dtype=
      refs = args[1] if isinstance(args[1], list) else args[1:]
      arrs = [input_array(case["inputs"][a["$t"]], np) for a in refs]
      if all(a.dtype.kind in "iub" for a in arrs):
        return np.einsum(args[0], *[a.astype(np.int64) for a in arrs]).astype(kw["dtype"]["$dtype"])
    return None
  x = input_array(case["inputs"][case["self"]], np)
  xf = x.astype(np.float32 if x.dtype.kind in "iub" else x.dtype).astype(np.float64)  # ints become float32 first
  if op in _REFS and not args: return _REFS[op](xf, **kw)
  if op in ("relu", "relu6", "hardtanh") and not args:
    lo, hi = (0, None) if op == "relu" else (0, 6) if op == "relu6" else (kw.get("min_val", -1), kw.get("max_val", 1))
    return np.clip(x, lo, hi)
  if op == "pad" and kw.get("mode", "constant") == "constant" and x.ndim:
    arg = args[0]["$tuple"]
    pairs = [tuple(p["$tuple"]) if isinstance(p, dict) else (0, 0) for p in arg] if isinstance(arg[0], dict) or arg[0] is None else \
      ([(0, 0)] * (x.ndim - len(arg) // 2) + [(arg[i], arg[i + 1]) for i in range(len(arg) - 2, -1, -2)])
    if len(pairs) != x.ndim: return None
    crop = x[tuple(slice(max(-b, 0), x.shape[i] - max(-a, 0)) for i, (b, a) in enumerate(pairs))]
    return np.pad(crop.astype(np.float64), [(max(b, 0), max(a, 0)) for b, a in pairs], constant_values=kw.get("value", 0.0))
  if op == "normalize":
    p, d = kw.get("p", 2.0), kw["dim"]
    return xf / np.maximum(np.sum(np.abs(xf) ** p, axis=d, keepdims=True) ** (1 / p), 1e-12)
  if op in ("logcumsumexp",) and x.ndim: return np.logaddexp.accumulate(xf, axis=kw.get("axis", 0))
  if op in ("softmax", "log_softmax", "softmin", "logsumexp"):
    if "dtype" in kw: xf = x.astype(kw["dtype"]["$dtype"]).astype(np.float64)
    ax = kw.get("axis", None if op == "logsumexp" else -1)
    if x.size == 0: return None
    if x.ndim == 0: ax = None if ax in (0, -1, None) else ax
    z = -xf if op == "softmin" else xf
    m = np.max(z, axis=ax, keepdims=True)
    if op == "logsumexp": m = np.where(np.isfinite(m), m, 0)  # all -inf: -inf, a +inf: +inf
    ls = np.log(np.sum(np.exp(z - m), axis=ax, keepdims=True))  # lse - m: z - m - ls keeps ls where |m| is huge (1e19)
    if op == "logsumexp": return ls + m if kw.get("keepdim") or x.ndim == 0 else np.squeeze(ls + m, axis=ax)
    return z - m - ls if op == "log_softmax" else np.exp(z - m - ls)
  if op == "cat" and all(isinstance(a, dict) and "$t" in a for a in args):  # exact values: float64 if any operand is a float, else int64
    arrs = [x] + [input_array(case["inputs"][a["$t"]], np) for a in args]
    wide = np.float64 if any(a.dtype.kind == "f" for a in arrs) else np.int64
    return np.concatenate([a.astype(wide) for a in arrs], axis=kw.get("dim", 0))
  if op in ("getitem", "setitem"):
    idx = _np_index(args[0], case["inputs"], np)
    if idx is None: return None
    if op == "getitem": return x[idx]
    v = args[1]
    y = x.copy()
    y[idx] = input_array(case["inputs"][v["$t"]], np) if isinstance(v, dict) else v
    return y
  if op == "matmul" and not kw and isinstance(args[0], dict):
    y = input_array(case["inputs"][args[0]["$t"]], np)
    return np.matmul(*[a.astype(np.float64 if a.dtype.kind == "f" else np.int64) for a in (x, y)])
  if op == "sdpa":  # torch's math: softmax(q k^T / sqrt(d) + mask) v, a row masked everywhere gives 0 (its safe softmax)
    k, v = (input_array(case["inputs"][a["$t"]], np).astype(np.float64) for a in args[:2])
    sc = np.matmul(xf, np.swapaxes(k, -1, -2)) / math.sqrt(x.shape[-1])
    if kw.get("is_causal"): sc = np.where(np.tril(np.ones(sc.shape[-2:], bool)), sc, -np.inf)
    if "attn_mask" in kw:
      m = input_array(case["inputs"][kw["attn_mask"]["$t"]], np)
      sc = np.where(m, sc, -np.inf) if m.dtype == np.bool_ else sc + m.astype(np.float64)
    mx = sc.max(-1, keepdims=True)
    dead = mx == -np.inf
    e = np.exp(sc - np.where(dead, 0, mx))
    w = np.where(dead, 0, e / np.where(dead, 1, e.sum(-1, keepdims=True)))
    return np.matmul(w, v)
  if op == "lerp" and isinstance(args[0], dict):  # torch's formula: from the nearer end
    def f64(a: Any) -> Any: return a.astype(np.float32 if a.dtype.kind in "iub" else a.dtype).astype(np.float64)
    e = f64(input_array(case["inputs"][args[0]["$t"]], np))
    w = f64(input_array(case["inputs"][args[1]["$t"]], np)) if isinstance(args[1], dict) else np.float64(args[1])
    return np.where(np.abs(w) < 0.5, xf + w * (e - xf), e - (e - xf) * (1 - w))
  if op == "isclose":
    o = args[0]
    y = input_array(case["inputs"][o["$t"]], np) if isinstance(o, dict) else o
    return np.isclose(x.astype(np.float64), np.asarray(y).astype(np.float64), **kw)
  if op in ("pow", "__pow__", "__rpow__") and len(args) == 1 and x.dtype.kind in "iub":  # int ** int wraps like C (exact mod 2**64 first)
    e = input_array(case["inputs"][args[0]["$t"]], np) if isinstance(args[0], dict) else args[0]
    if isinstance(e, float) or np.asarray(e).dtype.kind not in "iub" or (x.dtype.kind == "b" and np.asarray(e).dtype.kind == "b"): return None
    b, e = (np.asarray(e, np.int64), x.astype(np.int64)) if op == "__rpow__" else (x.astype(np.int64), np.asarray(e, np.int64))
    # a negative exponent: 1 / base truncated (1 for base 1, +-1 for base -1, else 0; torch raises)
    neg = np.where(b == 1, 1, np.where(b == -1, np.where(e % 2 == 1, -1, 1), 0))
    return np.where(e < 0, neg, np.power(b, np.maximum(e, 0)))
  # a float tensor and one Python scalar (torch: the scalar is rounded to the tensor's dtype first)
  fns = {"fmod": np.fmod, "mod": np.remainder, "__mod__": np.remainder, "__rmod__": lambda a, b: np.remainder(b, a), "mul": np.multiply,
         "__mul__": np.multiply, "__rmul__": np.multiply, "div": np.divide, "__truediv__": np.divide, "__rtruediv__": lambda a, b: b / a,
         "add": np.add, "__add__": np.add, "__radd__": np.add, "sub": np.subtract, "__sub__": np.subtract, "__rsub__": lambda a, b: b - a,
         "logaddexp": np.logaddexp, "pow": np.power, "__floordiv__": np.floor_divide, "__rfloordiv__": lambda a, b: np.floor_divide(b, a)}
  if op in fns and len(args) == 1 and not kw and isinstance(args[0], (int, float)) and (not isinstance(args[0], bool) or op == "logaddexp"):
    if x.dtype.kind == "f": return fns[op](x.astype(np.float64), np.float64(x.dtype.type(args[0])))
    if isinstance(args[0], float) or op == "logaddexp": return fns[op](xf, np.float64(np.float32(args[0])))  # an int tensor and a float: float32
  if op in fns and len(args) == 1 and not kw and isinstance(args[0], dict) and "$t" in args[0]:  # two tensors, one of them float
    y = input_array(case["inputs"][args[0]["$t"]], np)
    if "f" not in (x.dtype.kind, y.dtype.kind) and op != "logaddexp": return None
    # an int operand becomes the float operand's dtype first (torch's promotion: int32 // float16 is float16, 2**31 - 1 in it inf)
    ft = np.result_type(*[a.dtype for a in (x, y) if a.dtype.kind == "f"]) if "f" in (x.dtype.kind, y.dtype.kind) else np.float32
    def f64(a: Any) -> Any: return a.astype(ft if a.dtype.kind in "iub" else a.dtype).astype(np.float64)
    return fns[op](f64(x), f64(y))
  return None


def _np_index(idx: Any, inputs: list[dict[str, Any]], np: Any, lists: bool = False) -> Any:
  """An encoded index as numpy's (tensors as arrays), or None for what numpy reads otherwise (a list of ints; with `lists`, one
  reads as an index array: where duplicates can't matter)."""
  one = not (isinstance(idx, dict) and "$tuple" in idx)
  out = []
  for i in ([idx] if one else idx["$tuple"]):
    if isinstance(i, list) and lists: out.append(np.asarray(i, dtype=np.int64))
    elif isinstance(i, list): return None
    elif isinstance(i, dict) and "$t" in i: out.append(input_array(inputs[i["$t"]], np))
    elif isinstance(i, dict) and "$slice" in i: out.append(slice(*i["$slice"]))
    elif isinstance(i, dict) and "$ell" in i: out.append(Ellipsis)
    else: out.append(i)
  return out[0] if one else tuple(out)


def _written_ref(case: dict[str, Any], out: dict[str, Any], np: Any) -> dict[str, Any] | None:
  """For the setitem_alias and assign scenarios: `out` with x (its 2nd result) replaced by numpy's x[index] = value."""
  kw, items = case["kwargs"], out.get("list", [])
  if len(items) < 2 or "values" not in items[1] or items[1]["dtype"] not in NP_DTYPES: return None
  x = input_array(case["inputs"][0], np).copy()
  idx = kw.get("index", kw.get("target"))
  v = kw["value"]
  idx = Ellipsis if idx is None else _np_index(idx, case["inputs"], np, lists=not isinstance(v, dict))  # a scalar value: duplicates write alike
  if idx is None or isinstance(v, dict) and "$t" not in v: return None
  val = input_array(case["inputs"][v["$t"]], np) if isinstance(v, dict) else v
  if isinstance(val, float) and x.dtype.kind in "iu" and math.isfinite(val):  # truncated, then wrapped like a 64-bit int (docs)
    val = np.array(int(val), np.int64).astype(x.dtype)
  elif type(val) is int and x.dtype.kind == "u" and -INT_RANGE[x.dtype.name][1] <= val < 0:  # uint8 = -1 is 255 (torch, docs)
    val = np.array(val, np.int64).astype(x.dtype)
  with np.errstate(all="ignore"):
    try: x[idx] = val
    except (ValueError, TypeError, IndexError, OverflowError): return None
  x = x.astype(NP_DTYPES[items[1]["dtype"]])
  return {"list": [items[0], {**items[1], "shape": list(x.shape), "values": x.reshape(-1).tolist()}, *items[2:]]}


AUG_NP = {"__iadd__": "add", "__isub__": "subtract", "__imul__": "multiply", "__itruediv__": "divide", "__ifloordiv__": "floor_divide"}


def _augmented_ref(case: dict[str, Any], out: dict[str, Any], np: Any) -> dict[str, Any] | None:
  """For the augmented scenario: `out` with x (its 1st result) replaced by numpy's x[target] op= value (computed in float64 or
  int64, then cast to x's dtype: ints wrap), where x is a float tensor or the value an int."""
  kw, items = case["kwargs"], out.get("list", [])
  if not items or "values" not in items[0] or items[0]["dtype"] not in NP_DTYPES: return None
  x = input_array(case["inputs"][0], np).copy()
  v = kw["value"]
  val = input_array(case["inputs"][v["$t"]], np) if isinstance(v, dict) and "$t" in v else v
  if x.dtype.kind != "f" and (kw["method"] == "__itruediv__" or np.asarray(val).dtype.kind == "f"): return None  # a float result: both raise
  idx = Ellipsis if kw["target"] is None else _np_index(kw["target"], case["inputs"], np)
  if idx is None: return None
  wide = np.float64 if x.dtype.kind == "f" else np.int64
  with np.errstate(all="ignore"):
    try:
      r = getattr(np, AUG_NP[kw["method"]])(x[idx].astype(wide), np.asarray(val).astype(np.float64 if x.dtype.kind == "f" else np.int64))
      x[idx] = r.astype(x.dtype)
    except (ValueError, TypeError, IndexError, OverflowError): return None
  return {"list": [{**items[0], "shape": list(x.shape), "values": x.reshape(-1).tolist()}, *items[1:]]}


def reference(case: dict[str, Any], out: dict[str, Any]) -> dict[str, Any] | None:
  """numpy's answer in the shape of `out` (the dtype taken from it), or None when there is none."""
  import numpy as np
  if case["op"] in ("setitem_alias", "assign"): return _written_ref(case, out, np)
  if case["op"] == "augmented": return _augmented_ref(case, out, np)
  if "dtype" not in out or out["dtype"] not in NP_DTYPES: return None
  with np.errstate(all="ignore"):
    try: r = _ref_values(case, np)
    except (ValueError, TypeError, IndexError, OverflowError, np.exceptions.AxisError): return None
    if r is None: return None
    r = np.asarray(r).astype(NP_DTYPES[out["dtype"]])
  return {"shape": list(r.shape), "values": r.reshape(-1).tolist(), "dtype": out["dtype"]}


def classify(case: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> str | None:
  if "setup" in ours or "setup" in theirs: return "fuzzer setup error"
  if "crash" in theirs: return f"tinygrad {theirs['crash']}"
  if "crash" in ours: return f"ours {ours['crash']}"
  if "raised" in ours and "raised" in theirs: return None
  if "raised" in ours: return "ours raised"
  if "raised" in theirs: return "tinygrad raised"
  accum = _magnitude(case) if OPS[case["op"]].accum else None
  c = compare_values(ours["out"], theirs["out"], accum)
  if c not in ("values", "shape", "tinygrad step raised") or (ref := reference(case, ours["out"])) is None: return c
  ours_ok, theirs_ok = compare_values(ours["out"], ref, None) is None, compare_values(theirs["out"], ref, None) is None
  if ours_ok and theirs_ok: return f"{c}, both near numpy"  # each within the tolerance of numpy's, not of each other's
  return f"{c}, tinygrad's off numpy (ours matches)" if ours_ok else f"{c}, ours off numpy (tinygrad matches)" if theirs_ok else f"{c}, both off numpy"


def documented(case: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any], cat: str) -> str | None:
  """The docs/differences.md entry (or the numpy verdict) that explains this difference, or None."""
  import numpy as np
  if cat.endswith("tinygrad's off numpy (ours matches)"): return "tinygrad 0.14 wrong or inaccurate: ours matches numpy (float64)"
  if cat.endswith("both near numpy"): return "both within the float tolerance of numpy's (float64) answer"
  facts = Facts(case, ours, theirs)
  for reason, pred in KNOWN:
    try:
      with np.errstate(all="ignore"):
        if pred(facts, cat): return reason
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
      pass
  return None


class Facts:
  """What the predicates of KNOWN ask about a case."""
  def __init__(self, case: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]):
    import numpy as np
    self.case, self.ours, self.theirs, self.op, self.np = case, ours, theirs, MIXED.get(case["op"], case["op"]), np
    self.dtypes = [d["dtype"] for d in case["inputs"]]
    self.arrays = [input_array(d, np) for d in case["inputs"]]
    self.scalars = [a for a in case["args"] if isinstance(a, (int, float)) and not isinstance(a, bool)]
    self.kw = case["kwargs"]

  @property
  def x(self) -> Any: return self.arrays[self.case["self"]] if self.case["self"] is not None else None
  @property
  def xdt(self) -> str: return self.dtypes[self.case["self"]]
  def any_nan(self) -> bool: return any(a.dtype.kind == "f" and bool(self.np.isnan(a).any()) for a in self.arrays)
  def any_inf(self) -> bool: return any(a.dtype.kind == "f" and bool(self.np.isinf(a).any()) for a in self.arrays)
  def empty(self) -> bool: return any(a.size == 0 for a in self.arrays)
  def int_out_of(self, dt: str) -> bool:
    """A Python int argument beyond an int dtype."""
    if dt not in INT_RANGE: return False
    lo, hi = INT_RANGE[dt]
    return any(isinstance(v, int) and not (lo <= v <= hi) for v in self.scalars + [self.kw.get("value")] if v is not None)
  def out(self, side: str) -> dict[str, Any]: return (self.ours if side == "ours" else self.theirs)["out"]
  def half_unrounded(self) -> bool:
    """tinygrad's float16 result holds values a float16 can't (it skipped the rounding): documented."""
    o = self.theirs["out"]
    outs = o["list"] if "list" in o else [o]
    return any(t.get("dtype") == "dtypes.half" and any(isinstance(v, float) and math.isfinite(v) and float(self.np.float16(v)) != v
                                                        for v in t["values"]) for t in outs)


def _is(*ops: str) -> Callable[[Facts], bool]: return lambda f: f.op in ops


def _cast_target(f: Facts) -> str:
  return f.case["args"][0]["$dtype"] if f.op == "cast" else {"int": "int32", "long": "int64", "short": "int16"}[f.op]


def _cast_wraps(f: Facts) -> bool:
  """A float input with a value the int target can't hold (NaN, inf, or out of its range)."""
  lo, hi = INT_RANGE.get(_cast_target(f), (0, 1))
  return f.xdt in FLOATS and bool((~f.np.isfinite(f.x) | (f.x < lo) | (f.x > hi + 1)).any())


def _zero_divisor(f: Facts) -> bool:
  """The divisor of a division/remainder case holds a zero (-0.0 and False included)."""
  if f.op.startswith("__r"): return bool((f.x == 0).any())
  d = f.case["args"][0]
  return bool((f.arrays[d["$t"]] == 0).any()) if isinstance(d, dict) else d == 0


def _mod_gap(f: Facts) -> float:
  """log2 of the largest |dividend / divisor| of a remainder case (0 where a side is 0 or not finite)."""
  np = f.np
  a = f.x.astype(np.float64)
  d = f.case["args"][0]
  b = f.arrays[d["$t"]].astype(np.float64) if isinstance(d, dict) else np.float64(d)
  if f.op == "__rmod__": a, b = b, a
  with np.errstate(all="ignore"):
    q = np.abs(np.asarray(a) / np.asarray(b))
  q = q[np.isfinite(q) & (q > 0)]
  return float(np.log2(q.max())) if q.size else 0.0


def _wide_shift(f: Facts) -> bool:
  """A shift amount at least the shifted dtype's width, or negative."""
  if f.op in ("__rlshift__", "__rrshift__"): amount, width = f.x, 8 * f.x.dtype.itemsize  # (not __rshift__, also "__r...")
  else:
    d = f.case["args"][0]
    amount, width = (f.arrays[d["$t"]] if isinstance(d, dict) else f.np.asarray(d)), 8 * f.x.dtype.itemsize
  return bool(((amount < 0) | (amount >= width)).any())


def _unpack(v: Any) -> Any: return v["$tuple"] if isinstance(v, dict) else v


def _nan_count(ans: dict[str, Any]) -> int:
  o = ans["out"]
  return sum(1 for t in (o["list"] if "list" in o else [o]) for v in t.get("values", []) if isinstance(v, float) and math.isnan(v))


def _step_raised(f: Facts, side: str, *texts: str) -> bool:
  """A scenario step of `side` raised with one of these texts in its message."""
  o = (f.ours if side == "ours" else f.theirs).get("out", {})
  return any("raised" in t and any(s in t["raised"] for s in texts) for t in o.get("list", []))


def _empty_shape_mismatch(f: Facts) -> bool:
  """tinygrad's scenario step raised "shape mismatch: objects cannot be broadcast" where a shape in the message has a 0, or where
  numpy's x[index] is empty (an empty selection; tinygrad's message may name only its masks' shapes)."""
  msgs = [t["raised"] for t in f.theirs.get("out", {}).get("list", [])
          if "raised" in t and ("shape mismatch" in t["raised"] or "size mismatch" in t["raised"])]
  shapes = [tuple(int(v) for v in body.split(",") if v.strip()) for m in msgs for body in re.findall(r"\(([\d, ]+)\)", m)]
  return bool(msgs) and (any(0 in shape for shape in shapes) or _selects_nothing(f))


def _selects_nothing(f: Facts) -> bool:
  """numpy's x[index] of the case's setitem is empty (lists of ints read as index arrays)."""
  idx = f.kw.get("index")
  if idx is None: return False
  try: return f.arrays[0][_np_index(idx, f.case["inputs"], f.np, lists=True)].size == 0
  except (IndexError, ValueError, TypeError): return False


def _tg_empty(f: Facts) -> bool:
  o = f.theirs.get("out", {})
  return "shape" in o and 0 in o["shape"]


MODS = ("mod", "fmod", "__mod__", "__rmod__")
# ops where a Python int beyond an int tensor's dtype wraps (int arithmetic, as torch), is compared exactly, or raises (fills)
WRAPS = ("add", "sub", "mul", "mod", "pow", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor", "copysign", "lshift", "rshift",
         "eq", "ne", "__lt__", "__gt__", "__le__", "__ge__", "__eq__", "__ne__", "__add__", "__sub__", "__mul__", "__floordiv__", "__mod__",
         "__pow__", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "__radd__", "__rsub__", "__rmul__", "__rfloordiv__", "__rmod__",
         "__rpow__", "__rand__", "__ror__", "__rxor__", "__rlshift__", "__rrshift__", "div_rounding", "clip", "where", "masked_fill", "like",
         "full", "setitem", "scatter", "from_list", "fmod")
DIVS = ("div", "div_rounding", "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__") + MODS
BITS = ("bitwise_and", "bitwise_or", "bitwise_xor", "__and__", "__or__", "__xor__", "__rand__", "__ror__", "__rxor__", "bitwise_not", "__invert__",
        "lshift", "rshift", "__lshift__", "__rshift__", "__rlshift__", "__rrshift__")
NAN_ORDER = ("max", "min", "argmax", "argmin", "sort", "topk", "cummax", "cummin", "maximum", "minimum", "clip", "pool2d", "scatter_reduce")
TG_REJECTS = ("diagonal", "flip", "sort", "topk", "masked_select", "masked_fill", "scatter", "where", "einsum", "squeeze", "one_hot")
# (the docs/differences.md entry, predicate on (facts, category)): a difference that matches it is deliberate
KNOWN: list[tuple[str, Callable[[Facts, str], bool]]] = [
  (".T of a tensor with <2 dims works, of 3+ dims reverses all dims (numpy/torch)", lambda f, c: f.op == "T"),
  ("max/min/argmax over an empty axis raise (torch)", lambda f, c: _is("max", "min", "argmax", "argmin")(f) and c == "ours raised" and f.empty()),
  ("argmax(keepdim=True) without an axis keeps every dim", lambda f, c: _is("argmax", "argmin")(f) and c == "shape" and f.kw.get("axis") is None),
  ("NaN in max/min/argmax/sort/topk as torch", lambda f, c: (_is(*NAN_ORDER)(f) and c.startswith("values") and f.any_nan())
   or (_is("maximum", "minimum", "clip")(f) and any(isinstance(v, float) and math.isnan(v) for v in f.case["args"]))),
  ("round()/floor()/ceil() of an int or bool tensor keep its dtype (torch)", lambda f, c: _is("round", "floor", "ceil", "trunc")(f) and f.xdt not in FLOATS),
  ("var/std of an int tensor are computed in float", lambda f, c: _is("var", "std", "var_mean", "std_mean")(f) and f.xdt not in FLOATS),
  ("a float cast to an int dtype it doesn't fit wraps like a 64-bit int", lambda f, c: _is("cast", "int", "long", "short")(f)
   and (c == "values" or (c == "tinygrad raised" and (f.theirs["raised"] == "OverflowError" or "convert float NaN" in f.theirs["msg"])))
   and _cast_wraps(f)),
  ("a Python int beyond an int tensor's dtype: arithmetic wraps (torch), comparisons are exact, where/full raise",
   lambda f, c: _is(*WRAPS)(f) and any(f.int_out_of(dt) for dt in f.dtypes)),
  ("a Python int beyond int32 is int64 (numpy/torch)", lambda f, c: c == "dtype" and (any(isinstance(v, int) and abs(v) >= 1 << 31 for v in f.scalars)
   or (f.op == "from_list" and any(isinstance(v, int) and abs(v) >= 1 << 31 for v in _flat(f.case["args"][0]))))),
  ("x % 0.0 is NaN (IEEE/torch)", lambda f, c: _is(*MODS)(f) and c.startswith("values") and _zero_divisor(f)),
  ("int // 0 and int % 0 are 0; tinygrad 0.14 crashes (SIGFPE) or returns garbage", lambda f, c: _is(*DIVS)(f) and _zero_divisor(f)
   and (c == "tinygrad crash (exit -8)" or c.startswith("values"))),
  ("x * 0, 0 / x and x / inf follow IEEE (NaN for inf * 0, 0 / 0, inf / inf); tinygrad 0.14 folds them to 0",
   lambda f, c: _is("mul", "__mul__", "__rmul__", "div", "__truediv__", "__rtruediv__", *MODS)(f) and c.startswith("values")
   and (f.any_inf() or f.any_nan() or any(isinstance(v, (int, float)) and (v == 0 or math.isinf(v)) for v in f.case["args"]))),
  ("a Python float is rounded to the tensor's float dtype first (torch); tinygrad 0.14 may fold it in double",
   lambda f, c: _is(*DIVS)(f) and c.startswith("values") and any(isinstance(v, float) and math.isfinite(v) and float(f.np.float32(v)) != v for v in f.scalars)),
  ("a value beyond float16's range cast to float16 is inf; tinygrad may keep unrounded float32 values", lambda f, c: c.startswith("values") and f.half_unrounded()),
  ("a value beyond float16's range cast to float16 is inf; tinygrad may keep unrounded float32 values: also a Python scalar next to a float16 tensor",
   lambda f, c: c == "values" and f.case["self"] is not None and f.xdt == "float16"
   and any(isinstance(v, (int, float)) and math.isfinite(v) and abs(v) > 65504 for v in f.scalars)),
  ("arange with a float step and an int dtype is computed in float and cast", lambda f, c: f.op == "arange" and "dtype" in f.kw),
  ("pow follows IEEE/torch (negative bases, -0, +-inf, int ** int wraps)", lambda f, c: _is("pow", "__pow__", "__rpow__")(f)
   and (c == "tinygrad raised" or f.any_inf() or f.any_nan() or any(a.dtype.kind == "f" and (f.np.signbit(a)).any() for a in f.arrays)
        or any(isinstance(v, float) and (not math.isfinite(v) or (v == 0 and math.copysign(1, v) < 0)) for v in f.case["args"]))),
  ("bool - bool is XOR; tinygrad 0.14 gives a | ~b (torch raises)", lambda f, c: _is("sub", "__sub__", "__rsub__")(f) and all(d == "bool" for d in f.dtypes)),
  ("`int << t` and `int >> t` work; tinygrad 0.14 fails its UOp verification", lambda f, c: _is("__rlshift__", "__rrshift__")(f)
   and (c == "tinygrad raised" or _tg_empty(f))),
  ("tinygrad 0.14 internal error (UOp verification failed)", lambda f, c: c == "tinygrad raised" and f.theirs["msg"].startswith("UOp verification failed")),
  ("bitwise ops check dtypes also on empty tensors (tinygrad 0.14 doesn't)", lambda f, c: _is(*BITS)(f) and c == "ours raised" and _tg_empty(f)),
  ("conv2d multiplies its zero padding (conv_transpose2d also its inserted zeros) by the weights: NaN from non-finite weights",
   lambda f, c: _is("conv2d", "conv_transpose2d")(f) and c.startswith("values") and (f.any_inf() or f.any_nan())),
  ("a Python float next to an int tensor gives float32 (tinygrad 0.14: a weak float that a float16 tensor makes float16)",
   lambda f, c: c == "dtype" and any(isinstance(v, float) for v in f.case["args"]) and "float16" in f.dtypes and f.out("ours")["dtype"] == "dtypes.float"),
  ("a float cast to an int dtype it doesn't fit wraps like a 64-bit int: also a float scattered into an int tensor",
   lambda f, c: _is("scatter", "scatter_reduce")(f) and f.xdt not in FLOATS and any(isinstance(v, float) for v in f.case["args"])),
  ("a float cast to an int dtype it doesn't fit wraps like a 64-bit int: also a sum's dtype=", lambda f, c: "dtype" in f.kw and f.kw["dtype"]["$dtype"] in INT_RANGE
   and any(a.dtype.kind == "f" and not (f.np.abs(a.astype(f.np.float64)) < 2 ** 31).all() for a in f.arrays)),
  ("interpolate(mode='linear', align_corners=True) to a size of 1 takes the first element (torch)", lambda f, c: f.op == "interpolate"
   and f.kw.get("align_corners") and 1 in _unpack(f.case["args"][0])),
  ("reflect/replicate padding of a tensor with a zero-sized dim: tinygrad 0.14 raises for reflect also where that dim isn't padded",
   lambda f, c: f.op == "pad" and f.kw.get("mode") == "reflect" and c == "tinygrad raised" and f.empty()),
  ("sign(NaN) is 0 (torch)", lambda f, c: f.op == "sign" and f.any_nan()),
  ("lerp is torch's formula: NaN in start or end gives NaN", lambda f, c: f.op == "lerp" and (f.any_nan() or f.any_inf())),
  ("bool % bool raises (torch)", lambda f, c: _is(*MODS)(f) and c == "ours raised" and all(d == "bool" for d in f.dtypes)),
  ("ints and bools in float-valued functions compute in float", lambda f, c: f.op in ("logcumsumexp", "lerp", "logaddexp") and c == "dtype"
   and any(d not in FLOATS for d in f.dtypes)),
  ("float % is exact while |x / y| < 2**66; beyond it (float32, float64) it is NaN", lambda f, c: _is(*MODS)(f) and c.startswith("values")
   and _nan_count(f.ours) > _nan_count(f.theirs) and _mod_gap(f) > 60),
  ("einsum without a summed index keeps the input dtype (torch)", lambda f, c: f.op == "einsum" and c == "dtype"),
  ("binary_crossentropy_logits at a logit of -inf with target 1 is inf", lambda f, c: f.op == "binary_crossentropy_logits" and f.any_inf()),
  ("comparisons with NaN are False (IEEE/torch); tinygrad 0.14's >= and <= are `not <`", lambda f, c: _is("__ge__", "__le__")(f)
   and (f.any_nan() or any(isinstance(v, float) and math.isnan(v) for v in f.case["args"]))),
  ("shifts by the bit width or more, or by a negative amount, give 0 (tinygrad 0.14: C's undefined result, or raises)",
   lambda f, c: _is(*SHIFTS)(f) and _wide_shift(f)),
  ("tinygrad 0.14 hangs folding 2 ** (a huge int) in Python, or raises when the int it made doesn't fit a float",
   lambda f, c: _is("exp2", "pow", "__pow__", "__rpow__", "exp")(f) and (c == "tinygrad hang" or (c == "tinygrad raised"
   and f.theirs["raised"] == "OverflowError" and "int too large to convert to float" in f.theirs["msg"]))),
  ("tinygrad 0.14's C compile fails (clang error)", lambda f, c: c == "tinygrad raised" and f.theirs["raised"] == "CalledProcessError"),
  ("a value beyond the dtype raises (torch), also in Tensor(list, dtype=) and setitem", lambda f, c: c == "ours raised"
   and "without overflow" in f.ours["msg"]),
  ("interpolate(mode='linear') of an int tensor rounds to nearest (torch)", lambda f, c: f.op == "interpolate" and f.xdt not in FLOATS),
  ("Float `//` (`rounding_mode=\"floor\"`) of a quotient that underflows to 0 (`-2.0 // inf`) is -1 where the signs differ; `inf // 2` is NaN",
   lambda f, c: _is("__floordiv__", "__rfloordiv__", "div_rounding")(f) and f.kw.get("rounding_mode", "floor") == "floor" and c.startswith("values")
   and (f.any_inf() or any(isinstance(v, float) and (math.isinf(v) or 0 < abs(v) < 1e-30 or abs(v) > 1e30) for v in f.case["args"]))),
  ("bool // bool is int32 (tinygrad 0.14: float)", lambda f, c: _is("__floordiv__", "__rfloordiv__", "div_rounding")(f) and c == "dtype"),
  ("pooling with padding above half the kernel (torch rejects it): windows wholly in the padding", lambda f, c: f.op == "pool2d"
   and max(f.np.atleast_1d(_unpack(f.kw.get("padding", 0)))) * 2 > min(f.np.atleast_1d(_unpack(f.kw["kernel_size"])))),
  ("losses and attention propagate non-finite inputs as torch; a mean over no targets is NaN, a fully masked attention row 0",
   lambda f, c: OPS[f.op].group == "nn" and c.startswith("values") and (f.any_nan() or f.any_inf()
   or (("ignore_index" in f.kw or "attn_mask" in f.kw) and _nan_count(f.ours) != _nan_count(f.theirs)))),
  ("bitcast to bool of bytes other than 0/1: nonzero is True (tinygrad 0.14 keeps the raw byte)", lambda f, c: f.op == "bitcast" and "bool" in str(f.case["args"])),
  # scenarios (in-place updates, optimizers, modules)
  ("a float16 result cast back to float is rounded to half here; tinygrad 0.14 may keep float32 precision (a module or optimizer on float16 input)",
   lambda f, c: f.op in ("module", "optimizer", "state_load") and c == "values" and ("float16" in f.dtypes or f.kw.get("change") == "dtype")),
  ("load_state_dict(strict=True) with missing keys raises before loading anything; tinygrad 0.14 has loaded the tensors before the missing one",
   lambda f, c: f.op == "state_load" and f.kw["change"] == "drop" and f.kw["strict"] and c == "values"
   and _step_raised(f, "ours", "missing from the state dict") and _step_raised(f, "tinygrad", "KeyError")),
  ("without zero_grad gradients add up as torch (each taken at the weights of its backward); tinygrad 0.14 re-evaluates the lazy earlier ones at the new weights",
   lambda f, c: f.op == "optimizer" and not f.kw["zero_grad"] and f.kw["steps"] > 1 and c == "values"),
  ("nn.Conv2d/ConvTranspose2d with channels not divisible by groups raise (torch); tinygrad 0.14 builds a zero-sized weight",
   lambda f, c: c == "ours raised" and "divisible by groups" in f.ours["msg"]),
  ("tinygrad 0.14's C compile fails (clang error): in a scenario step", lambda f, c: c == "tinygrad step raised" and _step_raised(f, "tinygrad", "CalledProcessError")),
  ("calls tinygrad 0.14 rejects that work here as in torch: setitem of a value of another dtype (cast)",
   lambda f, c: c == "tinygrad step raised" and _step_raised(f, "tinygrad", "setitem dtype mismatch")),
  ("a value beyond the dtype raises (torch), also in Tensor(list, dtype=) and setitem: in a scenario step",
   lambda f, c: c == "ours step raised" and _step_raised(f, "ours", "without overflow")),
  ("setitem on a tensor with requires_grad raises (torch: an in-place op on a leaf that requires grad); tinygrad 0.14 writes it",
   lambda f, c: f.op == "param_inplace" and c == "ours step raised" and _step_raised(f, "ours", "requires grad")),
  ("`x[i] += v` and setitem work while other views of x exist (torch); tinygrad 0.14 raises \"can't setitem on a tensor with other uses\"",
   lambda f, c: c == "tinygrad step raised" and _step_raised(f, "tinygrad", "can't setitem on a tensor with other uses")),
  ("a setitem that selects nothing (an empty slice or index tensor) writes nothing (torch); tinygrad 0.14 raises a shape mismatch",
   lambda f, c: f.op == "setitem_alias" and c == "tinygrad step raised" and _empty_shape_mismatch(f)),
  ("a setitem value with extra leading size-1 dims broadcasts (torch); tinygrad 0.14 raises", lambda f, c: f.op == "setitem_alias"
   and c == "tinygrad step raised" and _step_raised(f, "tinygrad", "cannot broadcast tensor to fewer dimensions")),
  ("int // 0 and int % 0 are 0; tinygrad 0.14 crashes (SIGFPE) or returns garbage: `x //= 0`", lambda f, c: f.op == "augmented"
   and f.kw["method"] == "__ifloordiv__" and (f.kw["value"] in (0, False) or (isinstance(f.kw["value"], dict) and "$t" in f.kw["value"]
                                                and bool((f.arrays[f.kw["value"]["$t"]] == 0).any())))),
  ("a Python int beyond an int tensor's dtype: arithmetic wraps (torch): `x += 1000` of an int8 x", lambda f, c: f.op == "augmented"
   and isinstance(f.kw["value"], int) and f.dtypes[0] in INT_RANGE and not INT_RANGE[f.dtypes[0]][0] <= f.kw["value"] <= INT_RANGE[f.dtypes[0]][1]),
  ("calls tinygrad 0.14 rejects that work here as in torch: numpy scalars as operands (Python scalars of their kind)",
   lambda f, c: f.case["op"] == "dt_np_scalar" and c == "tinygrad raised" and f.theirs["msg"].startswith("Could not infer dtype")),
  ("calls tinygrad 0.14 rejects that work here as in torch: conv_transpose2d whose output has a spatial size of 0 (empty)",
   lambda f, c: f.op == "conv_transpose2d" and c == "tinygrad raised" and 0 in f.out("ours")["shape"]),
  ("calls tinygrad 0.14 rejects that work here as in torch", lambda f, c: c == "tinygrad raised" and (
    (f.op == "scatter" and "reduce" in f.kw) or (f.op == "where" and f.xdt != "bool") or (_is(*TG_REJECTS)(f) and any(a.ndim == 0 for a in f.arrays))
    or f.op in ("diagonal", "masked_select") or (f.op == "logsumexp" and isinstance(f.kw.get("axis"), dict)) or f.op == "setitem"
    or (_is(*DIVS)(f) and f.theirs["raised"] == "ZeroDivisionError") or (f.op == "unfold" and f.theirs["raised"] == "ZeroDivisionError"))),
]


# ---- reports

def render(case: dict[str, Any]) -> str:
  """A case as a runnable snippet (against either package)."""
  import numpy as np
  lines = ["import numpy as np", "from tinygrad import Tensor, dtypes"]
  for i, desc in enumerate(case["inputs"]):
    shape = desc["shape"][::-1] if desc.get("view") == "T" else desc["shape"]
    arr = build_input({**desc, "shape": shape}, np)
    vals = ", ".join(f"float('{v}')" if isinstance(v, float) and not math.isfinite(v) else repr(v) for v in arr.reshape(-1).tolist())
    npdt = "np.bool_" if desc["dtype"] == "bool" else f"np.{desc['dtype']}"
    view = {"T": f".permute(*range({len(shape) - 1}, -1, -1))", "flip": ".flip(0)"}.get(desc.get("view", ""), "")
    lines.append(f"x{i} = Tensor(np.array([{vals}], dtype={npdt}).reshape({tuple(shape)})){view}")
  args = [show(a) for a in case["args"]] + [f"{k}={show(v)}" for k, v in case["kwargs"].items()]
  target = "Tensor" if case["self"] is None else f"x{case['self']}"
  m = case["method"]
  if m.startswith("$"):
    lines[0:0] = ["import sys; sys.path.insert(0, 'bench')", "import api_fuzz", "from tinygrad import nn", "from tinygrad.helpers import Context",
                  "from tinygrad.nn import optim", "from tinygrad.nn.state import get_state_dict"]
    kw = ", ".join(f"{k}={show(v)}" for k, v in case["kwargs"].items())
    xs = ", ".join(f"x{i}" for i in range(len(case["inputs"])))
    lines.append("env = dict(Tensor=Tensor, dtypes=dtypes, np=np, nn=nn, optim=optim, Context=Context, get_state_dict=get_state_dict, state=nn.state)")
    lines.append(f"out = api_fuzz.SCENARIOS[{m[1:]!r}](env, [{xs}], {kw})")
    lines.append("print([o if not isinstance(o, Tensor) else (o.shape, o.dtype, o.tolist()) for o in out])")
    return "\n".join(lines)
  if m == "__call__": lines.append(f"out = Tensor({', '.join(args)})")
  elif m == "__setitem__": lines.append(f"{target}[{show(case['args'][0])}] = {show(case['args'][1])}; out = {target}")
  elif m == "__getitem__": lines.append(f"out = {target}[{show(case['args'][0])}]")
  elif m == "T": lines.append(f"out = {target}.T")
  else: lines.append(f"out = {target}.{m}({', '.join(args)})")
  lines.append("print(out.shape, out.dtype, out.tolist()) if isinstance(out, Tensor) else print(out)")
  return "\n".join(lines)


def brief(ans: dict[str, Any], width: int = 160) -> str:
  if "crash" in ans: return f"CRASH {ans['crash']}"
  if "raised" in ans: return f"raised {ans['raised']}: {ans['msg']}"[:width]
  return json.dumps(ans.get("out"))[:width]


def print_groups(ops: dict[str, Any]) -> None:
  """--list: the ops by group (ops: name -> an object with .name and .group)."""
  groups: dict[str, list[str]] = defaultdict(list)
  for o in ops.values(): groups[o.group].append(o.name)
  for gname, names in groups.items(): print(f"{gname} ({len(names)}): {' '.join(names)}")


def pick_cases(a: argparse.Namespace, ops: dict[str, Any], make_case: Callable[[int, str, int], dict[str, Any]]) -> list[dict[str, Any]]:
  """The cases a run asks for: --case op/k alone, else -n cases cycling through the ops (or groups) --ops names."""
  if a.case:
    opname, k = a.case.rsplit("/", 1)
    return [make_case(a.seed, opname, int(k))]
  want = [w for w in a.ops.split(",") if w]
  pool = [o.name for o in ops.values() if not want or o.name in want or o.group in want]
  if not pool: raise SystemExit(f"no op matches --ops {a.ops!r}: see --list")
  return [make_case(a.seed, pool[i % len(pool)], i // len(pool)) for i in range(a.n)]


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("-n", type=int, default=3000, help="number of cases (spread over the ops round-robin)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--ops", default="", help="comma-separated op names or groups (default: all)")
  ap.add_argument("--case", default="", help="run one case, op/k, and print it in full")
  ap.add_argument("--batch", type=int, default=64)
  ap.add_argument("--show", type=int, default=3, help="differences printed per (op, category)")
  ap.add_argument("--timeout", type=float, default=30.0, help="seconds without an answer before a worker counts as hung")
  ap.add_argument("--json", default="", help="write every difference (with its reproduction) to this file")
  ap.add_argument("--list", action="store_true", help="print the ops by group")
  ap.add_argument("--documented", action="store_true", help="also print (and write to --json) the documented differences")
  ap.add_argument("--ours-python", default=sys.executable)
  ap.add_argument("--tg-python", default="/tmp/tgvenv/bin/python")
  ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  a = ap.parse_args()
  if a.worker: return worker()
  if a.list: return print_groups(OPS)
  cases = pick_cases(a, OPS, make_case)

  base = {k: v for k, v in os.environ.items() if k not in ("DEV", "PYTHONPATH")}
  keep = {"PYTHONPATH": abs_pythonpath()} if os.environ.get("PYTHONPATH") else {}  # our sources (a worktree) go first
  ours = Side("ours", a.ours_python, {**base, **keep, "DEV": "CPU"}, a.timeout, "/tmp/api_fuzz_ours.log")
  theirs = Side("tinygrad", a.tg_python, {**base, "DEV": "CPU", "PATH": "/tmp/clbin:" + base.get("PATH", "")}, a.timeout, "/tmp/api_fuzz_tinygrad.log")
  results: list[tuple[dict, dict, dict]] = []
  t0 = time.time()
  try:
    with ThreadPoolExecutor(2) as ex:  # both workers at once, a batch each
      for i in range(0, len(cases), a.batch):
        batch = cases[i:i + a.batch]
        mine, tg = ex.submit(ours.run, batch), ex.submit(theirs.run, batch)
        got_ours, got_tg = mine.result(), tg.result()
        results += [(c, got_ours[c["id"]], got_tg[c["id"]]) for c in batch]
        if not a.case and sys.stderr.isatty(): print(f"\r{len(results)}/{len(cases)} cases, {time.time() - t0:.0f} s", end="", file=sys.stderr, flush=True)
  finally:
    ours.close(); theirs.close()
  if not a.case and sys.stderr.isatty(): print(file=sys.stderr)

  if a.case:
    c, o, t = results[0]
    print(render(c), "\n")
    print("ours:    ", json.dumps({k: v for k, v in o.items() if k != "id"}))
    print("tinygrad:", json.dumps({k: v for k, v in t.items() if k != "id"}))
    print("verdict: ", classify(c, o, t) or "same", (documented(c, o, t, classify(c, o, t) or "") or "") if classify(c, o, t) else "")
    return None

  diffs: list[dict[str, Any]] = []
  cats, docs, by_op = Counter(), Counter(), defaultdict(list)  # type: ignore[var-annotated]
  for c, o, t in results:
    cat = classify(c, o, t)
    if cat is None: continue
    reason = documented(c, o, t, cat)
    if reason: docs[reason] += 1
    else: cats[cat] += 1
    if reason and not a.documented: continue
    by_op[(c["op"], f"{cat}, documented: {reason}" if reason else cat)].append((c, o, t))
    diffs.append({"id": c["id"], "category": cat, "documented": reason, "ours": o, "tinygrad": t, "code": render(c)})
  print(f"{len(results)} cases in {time.time() - t0:.0f} s; {sum(cats.values())} undocumented differences, {sum(docs.values())} documented; "
        f"worker restarts: ours {ours.restarts}, tinygrad {theirs.restarts}")
  for cat, n in cats.most_common(): print(f"  {cat}: {n}")
  for i, side in enumerate(("ours", "tinygrad")):
    slow = sorted(((r[i + 1]["s"], r[0]["id"]) for r in results if "s" in r[i + 1]), reverse=True)[:4]
    print(f"  slowest on {side}: " + ", ".join(f"{cid} {s:.1f} s" for s, cid in slow))
  for reason, n in docs.most_common(): print(f"  documented: {reason}: {n}")
  for (opname, cat), items in sorted(by_op.items()):
    print(f"\n== {opname}: {cat} ({len(items)})")
    for c, o, t in items[:a.show]:
      args = ", ".join([show(x) for x in c["args"]] + [f"{k}={show(v)}" for k, v in c["kwargs"].items()])
      ins = ", ".join(f"x{i}:{d['dtype']}{tuple(d['shape'])}{'/' + d['view'] if d.get('view') else ''}" for i, d in enumerate(c["inputs"]))
      print(f"  {c['id']}: {'Tensor' if c['self'] is None else 'x' + str(c['self'])}.{c['method']}({args})  [{ins}]")
      print(f"    ours:     {brief(o)}\n    tinygrad: {brief(t)}")
  if a.json:
    with open(a.json, "w") as f: json.dump(diffs, f, indent=1)
  return None


if __name__ == "__main__":
  main()
