"""A differential fuzzer of backward: seeded random cases of ~130 differentiable ops (unary math and activations, binary
ops with broadcasting, reductions, scans, movement, indexing, scatter/gather, sort/topk, matmul/einsum, conv/pool/norm
layers, losses, attention), each run as `out = op(inputs)`, `(out * w).sum().backward()` with a random upstream w, in
three worker processes: ours, torch 2.13 (CPU, the reference) and tinygrad 0.14.0 (a second opinion). Never two of
the libraries in one process. Inputs are small (float32, some float16; broadcasting, size-1 and zero-size dims,
non-contiguous views by permute/flip/step slices) and mostly ordinary values, but also the points where derivatives
are subtle: 0 and -0.0, ties for max/min/maximum/cummax/pools, equal elements for sort/topk, the kinks of relu, abs,
clip, hardtanh, leaky_relu, hardswish..., duplicate indices, padding modes with negative pads.

  PYTHONPATH=... python bench/grad_fuzz.py                  # 2000 cases, seed 0: a summary and the first differences
  python bench/grad_fuzz.py -n 4000 --seed 3 --show 5
  python bench/grad_fuzz.py --ops max,reduce                # only these ops / groups (--list prints both)
  python bench/grad_fuzz.py --case max/12                   # one case: its programs for each side, and the answers
  python bench/grad_fuzz.py --json /tmp/grad_diffs.json     # every difference, with runnable reproductions

A case `op/k` is a pure function of (seed, op, k). Each side runs the same generated program (its inputs written out,
so the program printed for a difference is its reproduction) and answers the forward values and every input's gradient
(shape, dtype, values). Values compare allclose (rtol 1e-4 float32, 2e-2 float16, atol scaled by the largest reference
value), NaN == NaN and infinities of the same sign. A difference from torch is a `bug` when tinygrad 0.14 agrees with
torch, `tinygrad-like` when we agree with tinygrad 0.14 (a torch/tinygrad disagreement: see docs/differences.md,
Semantics), `alone` when all three differ or tinygrad raised. Differences listed in KNOWN are counted as documented.
Where torch can't run an op in float16 on the CPU, its side computes in float32 and rounds the answers to float16.

Workers: ours is this interpreter (PYTHONPATH kept, so a worktree's sources can come first), torch's is
/tmp/torchvenv/bin/python (--torch-python), tinygrad's /tmp/tgvenv/bin/python with PATH=/tmp/clbin:$PATH (--tg-python);
DEV=CPU for all. A worker that crashes or hangs is restarted and the case counted as a crash/hang.
"""
from __future__ import annotations

import argparse
import ast
import itertools
import json
import math
import os
import random
import re
import signal
import struct
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_fuzz import Side, abs_pythonpath, pick_cases, print_groups  # noqa: E402  the persistent worker process (restarts on crash/hang), the CLI's case choice

NAN, INF = float("nan"), float("inf")
ZEROS = (0.0, -0.0)


# ---- inputs: values drawn in pure Python from the description's seed, so every side computes on the same numbers

def input_values(d: dict[str, Any]) -> list[Any]:
  rng, n, kind = random.Random(d["seed"]), math.prod(d["leaf"]), d["kind"]
  if kind == "idx": return [rng.randrange(d["lo"], d["hi"]) for _ in range(n)]
  if kind == "perm":  # distinct indices along the last dim (no duplicates for scatter)
    rows, last = n // max(d["leaf"][-1], 1), d["leaf"][-1]
    return [v for _ in range(rows) for v in rng.sample(range(d["hi"]), last)] if n else []
  if kind == "bool": return [rng.random() < d.get("p", 0.5) for _ in range(n)]
  lo, hi = d.get("range", (-3.0, 3.0))
  pool, p = d.get("pool", []), d.get("p", 0.0)
  return [rng.choice(pool) if pool and rng.random() < p else round(rng.uniform(lo, hi), rng.choice((1, 2, 2))) for _ in range(n)]


def view_values(d: dict[str, Any]) -> list[Any]:
  """input_values in the order of the tensor the op sees (its view of the leaf applied: T, flip or step), row-major."""
  vals, leaf, v = input_values(d), d["leaf"], d.get("view")
  if v is None or not vals: return vals
  strides = [math.prod(leaf[i + 1:]) for i in range(len(leaf))]
  def at(ix: tuple[int, ...]) -> Any: return vals[sum(i * s for i, s in zip(ix, strides))]
  if v == "T": return [at(ix[::-1]) for ix in itertools.product(*(range(n) for n in leaf[::-1]))]
  if v == "flip": return [at((leaf[0] - 1 - ix[0], *ix[1:])) for ix in itertools.product(*(range(n) for n in leaf))]
  return [at((*ix[:-1], ix[-1] * 2)) for ix in itertools.product(*(range(n) for n in leaf[:-1]), range((leaf[-1] + 1) // 2))]


def wvalues(n: int, seed: int) -> list[float]:
  r = random.Random(seed)
  return [round(r.uniform(-2.0, 2.0), 2) for _ in range(n)]


def _lit(v: Any) -> str:
  if isinstance(v, float) and not math.isfinite(v): return f"float('{v}')"
  if isinstance(v, float) and v == 0.0 and math.copysign(1.0, v) < 0: return "-0.0"
  return repr(v)


def leaf_code(d: dict[str, Any], lib: str, upcast: bool) -> str:
  vals = "[" + ", ".join(_lit(v) for v in input_values(d)) + "]"
  dt = d["dtype"]
  npdt = "np.bool_" if dt == "bool" else f"np.{dt}"
  arr = f"np.array({vals}, dtype={npdt}).reshape({tuple(d['leaf'])})"
  if lib != "torch": return f"Tensor({arr})"
  if dt in ("int32", "int64"): return f"torch.tensor({arr}, dtype=torch.int64)"
  if dt == "bool": return f"torch.tensor({arr})"
  if upcast and dt == "float16": arr += ".astype(np.float32)"
  return f"torch.tensor({arr}, requires_grad=True)"


def view_code(name: str, d: dict[str, Any]) -> str:
  v = d.get("view")
  if v == "T": return f"{name}.permute({', '.join(str(i) for i in range(len(d['leaf']) - 1, -1, -1))})"
  if v == "flip": return f"{name}.flip(0)"
  if v == "step": return f"{name}[..., ::2]"
  return name


PRELUDE = {
  "tinygrad": """import random
import numpy as np
from tinygrad import Tensor, dtypes, nn
Tensor.training = True
def W(o, s): return Tensor(np.array([round(r.uniform(-2.0, 2.0), 2) for r in [random.Random(s)] for _ in range(o.numel())], dtype=np.float32).reshape(o.shape))
def bn2d(x, w, b):
  m = nn.BatchNorm(x.shape[1]); m.weight, m.bias = w, b
  return m(x)
def gn(x, g, w, b):
  m = nn.GroupNorm(g, x.shape[1]); m.weight, m.bias = w, b
  return m(x)
""",
  "torch": """import random
import numpy as np
import torch
import torch.nn.functional as F
def W(o, s): return torch.tensor(np.array([round(r.uniform(-2.0, 2.0), 2) for r in [random.Random(s)] for _ in range(o.numel())], dtype=np.float32).reshape(o.shape))
def bn2d(x, w, b): return F.batch_norm(x.contiguous(), None, None, w, b, training=True, eps=1e-5)  # torch 2.13 CPU: wrong grads for some strides
def gn(x, g, w, b): return F.group_norm(x, g, w, b, eps=1e-5)
""",
}


def program(case: dict[str, Any], lib: str, upcast: bool = False) -> str:
  """The whole case as a runnable program for one side (lib 'tinygrad' is ours and tinygrad 0.14's: the same API)."""
  lines = [PRELUDE["torch" if lib == "torch" else "tinygrad"].rstrip(), "stage = 'forward'"]
  for i, d in enumerate(case["inputs"]):
    lines.append(f"l{i} = {leaf_code(d, lib, upcast)}")
    lines.append(f"x{i} = {view_code(f'l{i}', d)}")
  lines.append("out = " + case["torch" if lib == "torch" else "tg"])
  lines.append("outs = list(out) if isinstance(out, (tuple, list)) else [out]")
  grads = [i for i, d in enumerate(case["inputs"]) if d["dtype"].startswith("float")]
  lines.append(f"leaves = [{', '.join(f'l{i}' for i in grads)}]")
  lines.append("stage = 'backward'")
  lines.append(f"loss = sum((o.float() * W(o, {case['wseed']} + j)).sum() for j, o in enumerate(outs) if o.dtype.is_floating_point)"
               if lib == "torch" else
               f"loss = sum((o.float() * W(o, {case['wseed']} + j)).sum() for j, o in enumerate(outs) if dtypes.is_float(o.dtype))")
  lines.append("if not isinstance(loss, int): loss.backward()")
  lines.append("for l in leaves: print(None if l.grad is None else l.grad.tolist())")
  return "\n".join(lines)


# ---- case generation

class Gen:
  def __init__(self, rng: random.Random):
    self.rng = rng
    self.inputs: list[dict[str, Any]] = []
    self.dt = "float16" if rng.random() < 0.15 else "float32"

  def shape(self, lo: int = 0, hi: int = 3, zero: float = 0.05, maxd: int = 4) -> tuple[int, ...]:
    s = [self.rng.choice((1, 2, 3, maxd)) for _ in range(self.rng.randint(lo, hi))]
    if s and self.rng.random() < zero: s[self.rng.randrange(len(s))] = 0
    return tuple(s)

  def bshape(self, s: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with s."""
    out = list(s[self.rng.randint(0, len(s)):] if self.rng.random() < 0.3 else s)
    out = [1 if self.rng.random() < 0.25 else d for d in out]
    if self.rng.random() < 0.1: out = [self.rng.choice((1, 2))] + out
    return tuple(out)

  def t(self, shape: tuple[int, ...], pool: tuple[float, ...] = (), p: float | None = None, rng: tuple[float, float] | None = None,
        view: bool = True, dtype: str | None = None) -> str:
    """A float input (gets a gradient); `pool` values appear with probability p (drawn if None)."""
    d: dict[str, Any] = {"shape": list(shape), "dtype": dtype or self.dt, "seed": self.rng.randrange(1 << 30), "kind": "float"}
    if pool: d["pool"], d["p"] = list(pool), p if p is not None else self.rng.choice((0.0, 0.3, 0.6, 1.0))
    if rng: d["range"] = list(rng)
    leaf = list(shape)
    if view and shape and self.rng.random() < 0.2:
      v = self.rng.choice(("T", "flip", "step") if len(shape) >= 2 else ("flip", "step"))
      d["view"] = v
      if v == "T": leaf = leaf[::-1]
      if v == "step": leaf[-1] = leaf[-1] * 2
    d["leaf"] = leaf
    self.inputs.append(d)
    return f"x{len(self.inputs) - 1}"

  def idx(self, shape: tuple[int, ...], lo: int, hi: int, kind: str = "idx") -> str:
    self.inputs.append({"shape": list(shape), "leaf": list(shape), "dtype": "int32", "seed": self.rng.randrange(1 << 30), "kind": kind,
                        "lo": lo, "hi": max(hi, lo + 1)})
    return f"x{len(self.inputs) - 1}"

  def mask(self, shape: tuple[int, ...], p: float = 0.5) -> str:
    self.inputs.append({"shape": list(shape), "leaf": list(shape), "dtype": "bool", "seed": self.rng.randrange(1 << 30), "kind": "bool", "p": p})
    return f"x{len(self.inputs) - 1}"

  def axis(self, nd: int) -> int: return self.rng.randrange(-nd, nd) if nd else 0

  def pick(self, *xs: Any) -> Any: return self.rng.choice(xs)


@dataclass
class Op:
  name: str
  group: str
  gen: Callable[[Gen], tuple[str, str]]  # -> (our/tinygrad code, torch code)


OPS: dict[str, Op] = {}


def op(name: str, group: str) -> Callable[[Callable], Callable]:
  def reg(fn: Callable) -> Callable:
    OPS[name] = Op(name, group, fn)
    return fn
  return reg


def make_case(seed: int, opname: str, k: int) -> dict[str, Any]:
  g = Gen(random.Random(f"{seed}/{opname}/{k}"))
  tg, th = OPS[opname].gen(g)
  return {"id": f"{opname}/{k}", "op": opname, "inputs": g.inputs, "tg": tg, "torch": th, "wseed": g.rng.randrange(1 << 30)}


# ---- unary: (ours/tinygrad, torch, value range, special points)

UNARY: dict[str, tuple[str, str, tuple[float, float] | None, tuple[float, ...]]] = {
  "neg": ("-{x}", "-{x}", None, ZEROS),
  "abs": ("{x}.abs()", "{x}.abs()", None, ZEROS),
  "exp": ("{x}.exp()", "{x}.exp()", None, ZEROS + (100.0, -100.0)),
  "exp2": ("{x}.exp2()", "torch.exp2({x})", None, ZEROS + (200.0,)),
  "log": ("{x}.log()", "{x}.log()", (0.05, 4.0), ZEROS + (-1.0, INF)),
  "log2": ("{x}.log2()", "torch.log2({x})", (0.05, 4.0), ZEROS + (-1.0,)),
  "sqrt": ("{x}.sqrt()", "{x}.sqrt()", (0.0, 4.0), ZEROS + (-1.0, INF)),
  "rsqrt": ("{x}.rsqrt()", "{x}.rsqrt()", (0.05, 4.0), ZEROS + (INF,)),
  "sin": ("{x}.sin()", "{x}.sin()", None, ZEROS),
  "cos": ("{x}.cos()", "{x}.cos()", None, ZEROS),
  "tan": ("{x}.tan()", "{x}.tan()", (-1.4, 1.4), ZEROS),
  "tanh": ("{x}.tanh()", "{x}.tanh()", None, ZEROS + (20.0, -20.0)),
  "sigmoid": ("{x}.sigmoid()", "{x}.sigmoid()", None, ZEROS + (50.0, -50.0, 100.0, -100.0)),
  "relu": ("{x}.relu()", "{x}.relu()", None, ZEROS),
  "relu6": ("{x}.relu6()", "F.relu6({x})", (-2.0, 8.0), ZEROS + (6.0,)),
  "leaky_relu": ("{x}.leaky_relu(0.1)", "F.leaky_relu({x}, 0.1)", None, ZEROS),
  "elu": ("{x}.elu(0.5)", "F.elu({x}, 0.5)", None, ZEROS),
  "celu": ("{x}.celu(1.5)", "F.celu({x}, 1.5)", None, ZEROS),
  "selu": ("{x}.selu()", "F.selu({x})", None, ZEROS),
  "gelu": ("{x}.gelu()", "F.gelu({x}, approximate='tanh')", None, ZEROS + (10.0, -10.0)),
  "quick_gelu": ("{x}.quick_gelu()", "{x} * torch.sigmoid(1.702 * {x})", None, ZEROS),
  "silu": ("{x}.silu()", "F.silu({x})", None, ZEROS + (-100.0, 100.0)),
  "mish": ("{x}.mish()", "F.mish({x})", None, ZEROS + (30.0, -30.0)),
  "softplus": ("{x}.softplus()", "F.softplus({x})", None, ZEROS + (30.0, -30.0)),
  "softplus_beta": ("{x}.softplus(2.0)", "F.softplus({x}, 2.0)", None, ZEROS),
  "softsign": ("{x}.softsign()", "F.softsign({x})", None, ZEROS),
  "hardtanh": ("{x}.hardtanh(-0.5, 1.5)", "F.hardtanh({x}, -0.5, 1.5)", None, (-0.5, 1.5, 0.0)),
  "hardsigmoid": ("{x}.hardsigmoid()", "F.hardsigmoid({x})", (-4.0, 4.0), (-3.0, 3.0, 0.0)),
  "hardswish": ("{x}.hardswish()", "F.hardswish({x})", (-4.0, 4.0), (-3.0, 3.0, 0.0)),
  "logsigmoid": ("{x}.logsigmoid()", "F.logsigmoid({x})", None, ZEROS + (50.0, -50.0, -100.0)),
  "square": ("{x}.square()", "{x}.square()", None, ZEROS),
  "reciprocal": ("{x}.reciprocal()", "{x}.reciprocal()", None, ZEROS),
  "sign": ("{x}.sign()", "{x}.sign()", None, ZEROS),
  "floor": ("{x}.floor()", "{x}.floor()", None, (1.0, -1.0, 0.5)),
  "ceil": ("{x}.ceil()", "{x}.ceil()", None, (1.0, -1.0, 0.5)),
  "round": ("{x}.round()", "{x}.round()", None, (0.5, 1.5, -0.5)),
  "trunc": ("{x}.trunc()", "{x}.trunc()", None, (1.0, -1.0)),
  "erf": ("{x}.erf()", "{x}.erf()", None, ZEROS),
  "asin": ("{x}.asin()", "{x}.asin()", (-0.99, 0.99), ZEROS + (1.0, -1.0)),
  "acos": ("{x}.acos()", "{x}.acos()", (-0.99, 0.99), ZEROS + (1.0, -1.0)),
  "atan": ("{x}.atan()", "{x}.atan()", None, ZEROS + (1e4,)),
  "sinh": ("{x}.sinh()", "{x}.sinh()", None, ZEROS),
  "cosh": ("{x}.cosh()", "{x}.cosh()", None, ZEROS),
  "asinh": ("{x}.asinh()", "{x}.asinh()", None, ZEROS + (-100.0,)),
  "acosh": ("{x}.acosh()", "{x}.acosh()", (1.01, 4.0), (1.0,)),
  "atanh": ("{x}.atanh()", "{x}.atanh()", (-0.99, 0.99), ZEROS + (1.0, -1.0)),
  "clip": ("{x}.clip(-1.0, 0.5)", "torch.clamp({x}, -1.0, 0.5)", None, (-1.0, 0.5)),
  "clip_lo": ("{x}.clip(0.0)", "torch.clamp({x}, min=0.0)", None, ZEROS),
  "contiguous": ("{x}.contiguous()", "{x}.contiguous()", None, ()),
  "cast_half": ("{x}.half().float()", "{x}.half().float()", None, (70000.0,)),
}


def _unary(name: str) -> Callable[[Gen], tuple[str, str]]:
  tg, th, rng, pool = UNARY[name]
  def gen(g: Gen) -> tuple[str, str]:
    x = g.t(g.shape(), pool=pool, rng=rng)
    return tg.format(x=x), th.format(x=x)
  return gen


for _n in UNARY: op(_n, "unary")(_unary(_n))


# ---- binary (broadcasting)

BINARY = {
  "add": ("{a} + {b}", "{a} + {b}"), "sub": ("{a} - {b}", "{a} - {b}"), "mul": ("{a} * {b}", "{a} * {b}"),
  "div": ("{a} / {b}", "{a} / {b}"), "pow": ("{a} ** {b}", "{a} ** {b}"),
  "maximum": ("{a}.maximum({b})", "torch.maximum({a}, {b})"), "minimum": ("{a}.minimum({b})", "torch.minimum({a}, {b})"),
  "copysign": ("{a}.copysign({b})", "torch.copysign({a}, {b})"), "logaddexp": ("{a}.logaddexp({b})", "torch.logaddexp({a}, {b})"),
  "mod": ("{a} % {b}", "{a} % {b}"), "fmod": ("{a}.fmod({b})", "torch.fmod({a}, {b})"),
}
BIN_POOLS = {"div": ((1.0, -1.0), ZEROS + (1.0,)), "pow": ((-2.0, -1.0, -0.5, 0.0, -0.0, 0.5, 1.0, 2.0), (0.0, 1.0, 2.0, -1.0, 0.5, 3.0, -2.0)),
             "maximum": ((0.0, 1.0, -1.0), (0.0, 1.0, -1.0)), "minimum": ((0.0, 1.0, -1.0), (0.0, 1.0, -1.0)),
             "copysign": (ZEROS, ZEROS), "logaddexp": ((-INF, 0.0), (-INF, 0.0)), "mod": ((0.0, 3.0), (1.0, 1.5)), "fmod": ((0.0, 3.0), (1.0, 1.5))}


def _binary(name: str) -> Callable[[Gen], tuple[str, str]]:
  tg, th = BINARY[name]
  def gen(g: Gen) -> tuple[str, str]:
    s = g.shape()
    sb = g.bshape(s)
    if g.rng.random() < 0.5: s, sb = sb, s
    pa, pb = BIN_POOLS.get(name, (ZEROS, ZEROS))
    a = g.t(s, pool=pa)
    b = g.t(sb, pool=pb, rng=(0.5, 3.0) if name in ("mod", "fmod") else None)
    return tg.format(a=a, b=b), th.format(a=a, b=b)
  return gen


for _n in BINARY: op(_n, "binary")(_binary(_n))


@op("pow_scalar", "binary")
def _pow_scalar(g: Gen) -> tuple[str, str]:
  x = g.t(g.shape(), pool=(0.0, -0.0, -1.0, -2.0, 1.0))
  e = g.pick(0, 1, 2, 3, 0.5, -1, -0.5, 2.5, -2, 0.0)
  return f"{x} ** {e}", f"{x} ** {e}"


@op("rpow", "binary")
def _rpow(g: Gen) -> tuple[str, str]:
  x = g.t(g.shape(), pool=(0.0, -0.0, 1.0, -1.0, 0.5))
  b = g.pick(2, 0.5, 0, 1, -2, 2.5)
  return f"{b} ** {x}", f"{b} ** {x}"


@op("scalar_arith", "binary")
def _scalar_arith(g: Gen) -> tuple[str, str]:
  x = g.t(g.shape(), pool=ZEROS)
  e = g.pick("1.5 - {x}", "{x} / 0.0", "2.0 / {x}", "{x} * -0.0", "{x}.maximum(0.5)", "{x}.minimum(-0.5)", "({x} * 3).sum() - {x}")
  th = {"{x}.maximum(0.5)": "torch.maximum({x}, torch.tensor(0.5, dtype={x}.dtype))",
        "{x}.minimum(-0.5)": "torch.minimum({x}, torch.tensor(-0.5, dtype={x}.dtype))"}.get(e, e)
  return e.format(x=x), th.format(x=x)


@op("mixed_dtypes", "binary")
def _mixed_dtypes(g: Gen) -> tuple[str, str]:
  """float16 with float32 (promoted to float32): each gradient in its own input's dtype."""
  s = g.shape()
  a, b = g.t(s, dtype="float16"), g.t(g.bshape(s) or (1,), dtype="float32")  # a 0-d float32 would give float16 in torch
  e = g.pick("{a} * {b}", "{b} / {a}", "{a} - {b}", "{a}.maximum({b})", "{a}.float() * {b}", "({a} * {b}).half()", "{b}.half() + {a}")
  th = e.replace("{a}.maximum({b})", "torch.maximum({a}, {b})")
  return e.format(a=a, b=b), th.format(a=a, b=b)


@op("where", "binary")
def _where(g: Gen) -> tuple[str, str]:
  s = g.shape()
  c, a, b = g.mask(g.bshape(s)), g.t(g.bshape(s)), g.t(s)
  return f"{c}.where({a}, {b})", f"torch.where({c}, {a}, {b})"


@op("where_scalar", "binary")
def _where_scalar(g: Gen) -> tuple[str, str]:
  s = g.shape()
  c, a = g.mask(g.bshape(s)), g.t(s)
  return (f"{c}.where({a}, 0.0)", f"torch.where({c}, {a}, 0.0)") if g.rng.random() < 0.5 else (f"{c}.where(1.5, {a})", f"torch.where({c}, 1.5, {a})")


@op("lerp", "binary")
def _lerp(g: Gen) -> tuple[str, str]:
  s = g.shape()
  a, b = g.t(s, pool=ZEROS), g.t(g.bshape(s))
  if g.rng.random() < 0.4:
    w = g.pick(0.0, 0.5, 1.0, 0.25)
    return f"{a}.lerp({b}, {w})", f"torch.lerp({a}, {b}, {w})"
  w = g.t(g.bshape(s), pool=(0.0, 1.0, 0.5), rng=(0.0, 1.0))
  return f"{a}.lerp({b}, {w})", f"torch.lerp({a}, {b}, {w})"


@op("clip_tensor", "binary")
def _clip_tensor(g: Gen) -> tuple[str, str]:
  s = g.shape()
  x, lo, hi = g.t(s, pool=(0.0, -1.0, 1.0), p=0.5), g.t(g.bshape(s), pool=(0.0, -1.0), p=0.6), g.t(g.bshape(s), pool=(0.0, 1.0), p=0.6)
  return f"{x}.clip({lo}, {hi})", f"torch.clamp({x}, {lo}, {hi})"


# ---- reductions

TIES = (0.0, 1.0, -1.0, 2.0)


def _rshape(g: Gen) -> tuple[int, ...]: return g.shape(0, 3, zero=0.06)


def _axes(g: Gen, nd: int, multi: bool = True) -> Any:
  r = g.rng.random()
  if nd == 0 or r < 0.25: return None
  if r < 0.75 or not multi: return g.axis(nd)
  return tuple(g.rng.sample(range(nd), g.rng.randint(1, nd)))


def _th_dim(ax: Any, nd: int) -> str:
  return repr(tuple(range(nd))) if ax is None else repr(ax)


def _reduce(name: str, thname: str, pool: tuple[float, ...] = (), multi: bool = True) -> Callable[[Gen], tuple[str, str]]:
  def gen(g: Gen) -> tuple[str, str]:
    s = _rshape(g)
    x = g.t(s, pool=pool)
    ax, kd = _axes(g, len(s), multi), g.rng.random() < 0.3
    if name == "prod":
      if ax is None: return f"{x}.prod(keepdim={kd})", (f"{x}.prod()" if not kd else f"{x}.reshape(-1).prod().reshape({(1,) * len(s)})")
      return f"{x}.prod({ax}, keepdim={kd})", f"{x}.prod({ax}, keepdim={kd})"
    if ax is None and not kd: return f"{x}.{name}()", f"{x}.{thname}()"
    return f"{x}.{name}({ax}, keepdim={kd})", f"{x}.{thname}({_th_dim(ax, len(s))}, keepdim={kd})"
  return gen


op("sum", "reduce")(_reduce("sum", "sum", ZEROS))
op("mean", "reduce")(_reduce("mean", "mean", ZEROS))
op("prod", "reduce")(_reduce("prod", "prod", ZEROS + (1.0, -1.0), multi=False))
op("max", "reduce")(_reduce("max", "amax", TIES + (-INF, INF)))
op("min", "reduce")(_reduce("min", "amin", TIES + (-INF,)))


def _max_whole(g: Gen) -> tuple[str, str]:
  x = g.t(g.shape(1, 3), pool=TIES, p=0.8)
  return f"{x}.max()", f"{x}.max()"


op("max_whole", "reduce")(_max_whole)


@op("stdvar", "reduce")
def _stdvar(g: Gen) -> tuple[str, str]:
  s = _rshape(g)
  x = g.t(s, pool=(1.0,), p=g.pick(0.0, 0.0, 1.0))  # p=1: all equal, std 0
  fn, ax, kd, c = g.pick("std", "var", "std_mean", "var_mean"), _axes(g, len(s)), g.rng.random() < 0.3, g.pick(0, 1, 1, 2)
  return f"{x}.{fn}({ax}, keepdim={kd}, correction={c})", f"torch.{fn}({x}, {_th_dim(ax, len(s))}, keepdim={kd}, correction={c})"


@op("logsumexp", "reduce")
def _logsumexp(g: Gen) -> tuple[str, str]:
  s = _rshape(g)
  x = g.t(s, pool=(-INF, 0.0, 50.0), p=g.pick(0.0, 0.0, 0.3, 1.0))
  ax, kd = _axes(g, len(s)), g.rng.random() < 0.3
  return f"{x}.logsumexp({ax}, keepdim={kd})", f"torch.logsumexp({x}, {_th_dim(ax, len(s))}, keepdim={kd})"


@op("softmax", "reduce")
def _softmax(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3, zero=0.04)
  x = g.t(s, pool=(-INF, 0.0, 30.0), p=g.pick(0.0, 0.0, 0.3))
  fn, ax = g.pick("softmax", "log_softmax"), g.axis(len(s))
  return f"{x}.{fn}({ax})", f"torch.{fn}({x}, {ax})"


@op("scan", "reduce")
def _scan(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3, zero=0.04)
  fn, ax = g.pick("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"), g.axis(len(s))
  x = g.t(s, pool=TIES if fn in ("cummax", "cummin") else ZEROS + (1.0, -1.0))
  if fn in ("cummax", "cummin"): return f"{x}.{fn}({ax})[0]", f"torch.{fn}({x}, {ax})[0]"
  return f"{x}.{fn}({ax})", f"torch.{fn}({x}, {ax})"


# ---- movement

def _divisor_shape(g: Gen, s: tuple[int, ...]) -> tuple[int, ...]:
  n = math.prod(s)
  if n == 0: return g.pick((0,), (0, *s[1:]), (-1, 0) if len(s) else (0,))
  divs = [d for d in range(1, n + 1) if n % d == 0]
  a = g.rng.choice(divs)
  return g.pick((n,), (a, n // a), (a, -1), (1, n, 1), (-1,))


@op("reshape", "movement")
def _reshape(g: Gen) -> tuple[str, str]:
  s = g.shape(0, 3)
  x, t = g.t(s), _divisor_shape(g, s)
  return f"{x}.reshape({t})", f"{x}.reshape({t})"


@op("permute", "movement")
def _permute(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 4)
  p = tuple(g.rng.sample(range(len(s)), len(s)))
  x = g.t(s)
  return f"{x}.permute({p})", f"{x}.permute({p})"


@op("expand", "movement")
def _expand(g: Gen) -> tuple[str, str]:
  s = tuple(g.pick(1, 1, 2, 3) for _ in range(g.rng.randint(0, 3)))
  t = tuple(d if d != 1 else g.pick(1, 2, 3, 0) for d in s)
  if g.rng.random() < 0.3: t = (2, *t)
  x = g.t(s)
  return f"{x}.expand({t})", f"{x}.expand({t})"


@op("pad", "movement")
def _pad(g: Gen) -> tuple[str, str]:
  mode = g.pick("constant", "constant", "reflect", "replicate", "circular")
  nd = g.rng.randint(1, 3) if mode == "constant" else g.pick(2, 3)
  s = tuple(g.pick(2, 3, 4) for _ in range(nd))
  k = g.rng.randint(1, nd if mode == "constant" else nd - 1)
  lim = 1 if mode != "constant" else 2
  pads = tuple(g.rng.randint(-1, lim + (1 if mode == "circular" else 0)) for _ in range(2 * k))
  x = g.t(s)
  if mode == "constant":
    v = g.pick(0.0, 1.5, -INF)
    return f"{x}.pad({pads}, value={_lit(v)})", f"F.pad({x}, {pads}, value={_lit(v)})"
  return f"{x}.pad({pads}, mode='{mode}')", f"F.pad({x}, {pads}, mode='{mode}')"


@op("pad_pairs", "movement")
def _pad_pairs(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  pads = tuple(None if g.rng.random() < 0.2 else (g.rng.randint(-min(d, 1), 2), g.rng.randint(0, 2)) for d in s)
  x = g.t(s)
  flat = tuple(v for p in reversed(pads) for v in (p or (0, 0))[::1])
  return f"{x}.pad({pads})", f"F.pad({x}, {flat})"


@op("shrink", "movement")
def _shrink(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  arg = []
  for d in s:
    a = g.rng.randint(0, d)
    arg.append((a, g.rng.randint(a, d)))
  x = g.t(s)
  sl = ", ".join(f"{a}:{b}" for a, b in arg)
  return f"{x}.shrink({tuple(arg)})", f"{x}[{sl}]"


@op("flip", "movement")
def _flip(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  ax = tuple(g.rng.sample(range(len(s)), g.rng.randint(1, len(s))))
  x = g.t(s)
  return f"{x}.flip({ax})", f"{x}.flip({ax})"


@op("roll", "movement")
def _roll(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  dims = tuple(g.rng.sample(range(len(s)), g.rng.randint(1, len(s))))
  shifts = tuple(g.rng.randint(-4, 4) for _ in dims)
  x = g.t(s)
  return f"{x}.roll({shifts}, {dims})", f"{x}.roll({shifts}, {dims})"


@op("repeat", "movement")
def _repeat(g: Gen) -> tuple[str, str]:
  s = g.shape(0, 3)
  reps = tuple(g.pick(1, 2, 3, 0) for _ in range(len(s) + g.rng.randint(0, 1)))
  x = g.t(s)
  return f"{x}.repeat({reps})", f"{x}.repeat({reps})"


@op("repeat_interleave", "movement")
def _repeat_interleave(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  n, d = g.pick(1, 2, 3), g.pick(None, g.axis(len(s)))
  x = g.t(s)
  return f"{x}.repeat_interleave({n}, {d})", f"{x}.repeat_interleave({n}, {d})"


@op("cat", "movement")
def _cat(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  d = g.axis(len(s))
  xs = [g.t(tuple(g.pick(0, 1, 2) if i == d % len(s) else v for i, v in enumerate(s))) for _ in range(g.rng.randint(1, 3))]
  return f"{xs[0]}.cat({', '.join(xs[1:])}{', ' if len(xs) > 1 else ''}dim={d})", f"torch.cat([{', '.join(xs)}], {d})"


@op("stack", "movement")
def _stack(g: Gen) -> tuple[str, str]:
  s = g.shape(0, 3)
  d = g.rng.randint(-len(s) - 1, len(s))
  xs = [g.t(s) for _ in range(g.rng.randint(1, 3))]
  return f"{xs[0]}.stack({', '.join(xs[1:])}{', ' if len(xs) > 1 else ''}dim={d})", f"torch.stack([{', '.join(xs)}], {d})"


@op("split", "movement")
def _split(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3, maxd=5)
  d = g.axis(len(s))
  n = s[d]
  if g.rng.random() < 0.5 or n == 0: sz: Any = g.pick(1, 2, 3)
  else:
    cuts = sorted(g.rng.randint(0, n) for _ in range(2))
    sz = [cuts[0], cuts[1] - cuts[0], n - cuts[1]]
  x = g.t(s)
  if g.rng.random() < 0.3:
    c = g.pick(1, 2, 3)
    return f"{x}.chunk({c}, {d})", f"{x}.chunk({c}, {d})"
  return f"{x}.split({sz}, {d})", f"{x}.split({sz}, {d})"


@op("unfold", "movement")
def _unfold(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3, maxd=5)
  d = g.axis(len(s))
  size, step = g.rng.randint(0 if s[d] == 0 else 1, max(s[d], 1)), g.pick(1, 2, 3)
  x = g.t(s)
  return f"{x}.unfold({d}, {size}, {step})", f"{x}.unfold({d}, {size}, {step})"


@op("transpose", "movement")
def _transpose(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 4)
  a, b = g.axis(len(s)), g.axis(len(s))
  x = g.t(s)
  return f"{x}.transpose({a}, {b})", f"{x}.transpose({a}, {b})"


@op("squeeze", "movement")
def _squeeze(g: Gen) -> tuple[str, str]:
  s = tuple(g.pick(1, 1, 2) for _ in range(g.rng.randint(1, 3)))
  x = g.t(s)
  r = g.rng.random()
  if r < 0.3: return f"{x}.squeeze()", f"{x}.squeeze()"
  if r < 0.6:
    a = g.axis(len(s))
    return f"{x}.squeeze({a})", f"{x}.squeeze({a})"
  d = g.rng.randint(-len(s) - 1, len(s))
  return f"{x}.unsqueeze({d})", f"{x}.unsqueeze({d})"


@op("tri", "movement")
def _tri(g: Gen) -> tuple[str, str]:
  s = (*g.shape(0, 1), g.pick(1, 2, 3, 4), g.pick(1, 2, 3, 4))
  fn, d = g.pick("triu", "tril"), g.pick(0, 1, -1, 2)
  x = g.t(s)
  return f"{x}.{fn}({d})", f"{x}.{fn}({d})"


@op("diagonal", "movement")
def _diagonal(g: Gen) -> tuple[str, str]:
  r = g.rng.random()
  if r < 0.4:
    x = g.t((g.pick(1, 2, 3),))
    return f"{x}.diag()", f"torch.diag({x})"
  x = g.t((g.pick(1, 2, 3), g.pick(1, 2, 3)))
  return f"{x}.diagonal()", f"{x}.diagonal()"


@op("flatten", "movement")
def _flatten(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 4)
  a = g.rng.randint(0, len(s) - 1)
  x = g.t(s)
  return f"{x}.flatten({a})", f"{x}.flatten({a})"


# ---- indexing

def _basic_index(g: Gen, s: tuple[int, ...]) -> tuple[str, str]:
  """A basic index (ints, slices with any step, None, ...): its text for us and a torch chain (torch has no negative steps)."""
  items: list[tuple[str, Any]] = []
  for d in s:
    r = g.rng.random()
    if r < 0.25 and d > 0: items.append(("int", g.rng.randint(-d, d - 1)))
    elif r < 0.9:
      st = g.pick(1, 1, 2, -1, -2, None)
      a, b = g.pick(None, 0, 1, -1, -2), g.pick(None, 0, 2, -1, 3)
      items.append(("slice", (a, b, st)))
    else: items.append(("all", None))
    if g.rng.random() < 0.1: items.append(("none", None))
  ours = []
  for kind, v in items:
    if kind == "int": ours.append(str(v))
    elif kind == "slice": ours.append(":".join("" if x is None else str(x) for x in v) if v[2] is not None else
                                      ":".join("" if x is None else str(x) for x in v[:2]))
    elif kind == "none": ours.append("None")
    else: ours.append(":")
  text = ", ".join(ours) if ours else "..."
  # torch: apply dim by dim from the last (ints drop dims; earlier dims keep their place), None last
  chain, dim = "", len(s)
  for kind, v in reversed([it for it in items if it[0] != "none"]):
    dim -= 1
    if kind == "int": chain += f".select({dim}, {v})"
    elif kind == "slice":
      idxs = list(range(s[dim]))[slice(*v)]
      chain += f".index_select({dim}, torch.tensor({idxs}, dtype=torch.int64))"
  # torch puts the Nones (new dims of size 1) where they were: an unsqueeze at each one's output position
  pos = 0
  for kind, _ in items:
    if kind == "none": chain += f".unsqueeze({pos})"
    if kind != "int": pos += 1
  return text, chain


@op("getitem", "index")
def _getitem(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  x = g.t(s)
  text, chain = _basic_index(g, s)
  return f"{x}[{text}]", f"{x}{chain}"


@op("index_tensor", "index")
def _index_tensor(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  x = g.t(s)
  ishape = g.shape(0, 2)
  r = g.rng.random()
  if r < 0.4 or len(s) == 1:  # x[i] with duplicates and negative indices: embedding lookup
    i = g.idx(ishape, -s[0], s[0]) if s[0] else g.idx((0,), 0, 1)
    return f"{x}[{i}]", f"{x}[{i}]"
  if r < 0.7:
    i = g.idx(ishape, 0, s[1]) if s[1] else g.idx((0,), 0, 1)
    return f"{x}[:, {i}]", f"{x}[:, {i}]"
  i, j = g.idx(ishape, 0, max(s[0], 1)), g.idx(g.bshape(ishape), 0, max(s[1], 1))
  if s[0] == 0 or s[1] == 0: return f"{x}[:0]", f"{x}[:0]"
  return f"{x}[{i}, {j}]", f"{x}[{i}, {j}]"


@op("gather", "index")
def _gather(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  d = g.axis(len(s))
  ishape = tuple(g.rng.randint(0, v) if i != d % len(s) else g.pick(1, 2, 3, 4) for i, v in enumerate(s))
  x = g.t(s)
  i = g.idx(ishape, 0, s[d]) if s[d] else g.idx(tuple(0 for _ in s), 0, 1)
  return f"{x}.gather({d}, {i})", f"torch.gather({x}, {d}, {i})"


def _scatter_args(g: Gen, dup: bool) -> tuple[str, int, str, str]:
  s = tuple(g.pick(2, 3, 4) for _ in range(g.rng.randint(1, 2)))
  d = g.axis(len(s))
  ishape = list(s)
  ishape[d % len(s)] = g.rng.randint(1, s[d])
  x = g.t(s, pool=ZEROS + TIES)
  i = g.idx(tuple(ishape), 0, s[d], kind="idx" if dup else "perm") if d % len(s) == len(s) - 1 or dup else g.idx(tuple(ishape), 0, s[d])
  src = g.t(tuple(ishape), pool=ZEROS + TIES)
  return x, d, i, src


@op("scatter", "index")
def _scatter(g: Gen) -> tuple[str, str]:
  x, d, i, src = _scatter_args(g, dup=g.rng.random() < 0.3)
  return f"{x}.scatter({d}, {i}, {src})", f"torch.scatter({x}, {d}, {i}, {src})"


@op("scatter_reduce", "index")
def _scatter_reduce(g: Gen) -> tuple[str, str]:
  x, d, i, src = _scatter_args(g, dup=True)
  red, inc = g.pick("sum", "prod", "mean", "amax", "amin"), g.pick(True, False)
  return (f"{x}.scatter_reduce({d}, {i}, {src}, '{red}', include_self={inc})",
          f"torch.scatter_reduce({x}, {d}, {i}, {src}, '{red}', include_self={inc})")


@op("masked_fill", "index")
def _masked_fill(g: Gen) -> tuple[str, str]:
  s = g.shape()
  x, m, v = g.t(s), g.mask(g.bshape(s)), g.pick(0.0, -INF, 2.5)
  return f"{x}.masked_fill({m}, {_lit(v)})", f"{x}.masked_fill({m}, {_lit(v)})"


@op("masked_select", "index")
def _masked_select(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  x, m = g.t(s), g.mask(s)
  return f"{x}.masked_select({m})", f"torch.masked_select({x}, {m})"


@op("sort", "index")
def _sort(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  x = g.t(s, pool=TIES + ZEROS, p=g.pick(0.0, 0.5, 0.9))
  d, desc = g.axis(len(s)), g.pick(True, False)
  return f"{x}.sort({d}, descending={desc})[0]", f"torch.sort({x}, {d}, descending={desc})[0]"


@op("topk", "index")
def _topk(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 3)
  x = g.t(s, pool=TIES + ZEROS, p=g.pick(0.0, 0.5, 0.9))
  d = g.axis(len(s))
  k, lg = g.rng.randint(0, s[d]), g.pick(True, False)
  return f"{x}.topk({k}, {d}, largest={lg})[0]", f"torch.topk({x}, {k}, {d}, largest={lg})[0]"


# ---- linear algebra

@op("matmul", "linalg")
def _matmul(g: Gen) -> tuple[str, str]:
  m, k, n = g.pick(1, 2, 3), g.pick(0, 1, 2, 3, 4), g.pick(1, 2, 3)
  r = g.rng.random()
  if r < 0.15: sa, sb = (k,), (k, n)
  elif r < 0.3: sa, sb = (m, k), (k,)
  elif r < 0.4: sa, sb = (k,), (k,)
  elif r < 0.7: sa, sb = (m, k), (k, n)
  else:
    b = g.pick(1, 2)
    sa, sb = g.pick((b, m, k), (m, k)), g.pick((2, m and 1 or 1, k, n)[1:], (b, k, n), (2, 1, k, n))
  a, b_ = g.t(sa, pool=ZEROS), g.t(sb)
  return f"{a} @ {b_}", f"{a} @ {b_}"


EINSUMS = (("ij,jk->ik", ((2, 3), (3, 4))), ("bij,bjk->bik", ((2, 2, 3), (2, 3, 1))), ("i,i->", ((4,), (4,))), ("ij->ji", ((2, 3),)),
           ("ii->i", ((3, 3),)), ("ij->", ((2, 3),)), ("i,j->ij", ((2,), (3,))), ("bhqd,bhkd->bhqk", ((1, 2, 3, 4), (1, 2, 2, 4))),
           ("ij,ij->i", ((2, 3), (2, 3))), ("ii->", ((3, 3),)), ("...ij,...jk", ((2, 2, 3), (3, 2))), ("ijk->kj", ((2, 3, 1),)))


@op("einsum", "linalg")
def _einsum(g: Gen) -> tuple[str, str]:
  form, shapes = g.rng.choice(EINSUMS)
  ts = [g.t(s) for s in shapes]
  return f"Tensor.einsum('{form}', {', '.join(ts)})", f"torch.einsum('{form}', {', '.join(ts)})"


@op("linear", "linalg")
def _linear(g: Gen) -> tuple[str, str]:
  i, o = g.pick(1, 2, 3), g.pick(1, 2, 4)
  x, w = g.t((*g.shape(0, 2), i)), g.t((i, o))
  if g.rng.random() < 0.5: return f"{x}.linear({w})", f"F.linear({x}, {w}.T)"
  b = g.t((o,))
  return f"{x}.linear({w}, {b})", f"F.linear({x}, {w}.T, {b})"


@op("dot", "linalg")
def _dot(g: Gen) -> tuple[str, str]:
  k = g.pick(1, 2, 3, 4)
  a, b = g.t((g.pick(1, 2), k)), g.t((k, g.pick(1, 3)))
  return f"{a}.dot({b})", f"{a} @ {b}"


# ---- nn

def _floats_conv(g: Gen, transpose: bool) -> tuple[str, str]:
  grp = g.pick(1, 1, 2)
  cin, cout = grp * g.pick(1, 2), grp * g.pick(1, 2)
  kh, kw = g.pick(1, 2, 3), g.pick(1, 2, 3)
  st, dil, pad = g.pick(1, 1, 2, (1, 2)), g.pick(1, 1, 2), g.pick(0, 0, 1, 2, (1, 0))
  h, w = g.rng.randint(kh + 1, 6), g.rng.randint(kw + 1, 6)
  x = g.t((g.pick(1, 2), cin, h, w))
  wt = g.t((cin, cout // grp, kh, kw) if transpose else (cout, cin // grp, kh, kw))
  b = g.t((cout,)) if g.rng.random() < 0.5 else None
  bs = b or "None"
  if not transpose:
    return (f"{x}.conv2d({wt}, {bs}, groups={grp}, stride={st}, dilation={dil}, padding={pad})",
            f"F.conv2d({x}, {wt}, {bs}, stride={st}, padding={pad}, dilation={dil}, groups={grp})")
  op_ = g.pick(0, 0, 1) if (st if isinstance(st, int) else max(st)) > 1 else 0
  return (f"{x}.conv_transpose2d({wt}, {bs}, groups={grp}, stride={st}, dilation={dil}, padding={pad}, output_padding={op_})",
          f"F.conv_transpose2d({x}, {wt}, {bs}, stride={st}, padding={pad}, output_padding={op_}, groups={grp}, dilation={dil})")


op("conv2d", "nn")(lambda g: _floats_conv(g, False))
op("conv_transpose2d", "nn")(lambda g: _floats_conv(g, True))


@op("conv1d", "nn")
def _conv1d(g: Gen) -> tuple[str, str]:
  x, w = g.t((1, 2, g.pick(3, 5))), g.t((3, 2, g.pick(1, 2, 3)))
  pad = g.pick(0, 1)
  return f"{x}.conv2d({w}, padding={pad})", f"F.conv1d({x}, {w}, padding={pad})"


@op("max_pool2d", "nn")
def _max_pool2d(g: Gen) -> tuple[str, str]:
  k = g.pick((2, 2), (3, 3), (2, 3), (1, 2))
  st, dil, cm = g.pick(None, 1, 2, (1, 2)), g.pick(1, 1, 2), g.pick(False, False, True)
  pad = g.pick(0, 0, 1) if min(k) >= 2 else 0
  x = g.t((g.pick(1, 2), g.pick(1, 2), g.rng.randint(3, 6), g.rng.randint(3, 6)), pool=TIES, p=g.pick(0.0, 0.5, 1.0))
  sts = "None" if st is None else str(st)
  return (f"{x}.max_pool2d({k}, stride={sts}, dilation={dil}, padding={pad}, ceil_mode={cm})",
          f"F.max_pool2d({x}, {k}, stride={sts}, padding={pad}, dilation={dil}, ceil_mode={cm})")


@op("avg_pool2d", "nn")
def _avg_pool2d(g: Gen) -> tuple[str, str]:
  k = g.pick((2, 2), (3, 3), (2, 3), (1, 2))
  st, cm, cip = g.pick(None, 1, 2, (1, 2)), g.pick(False, False, True), g.pick(True, False)
  pad = g.pick(0, 0, 1) if min(k) >= 2 else 0
  x = g.t((g.pick(1, 2), g.pick(1, 2), g.rng.randint(3, 6), g.rng.randint(3, 6)))
  sts = "None" if st is None else str(st)
  return (f"{x}.avg_pool2d({k}, stride={sts}, padding={pad}, ceil_mode={cm}, count_include_pad={cip})",
          f"F.avg_pool2d({x}, {k}, stride={sts}, padding={pad}, ceil_mode={cm}, count_include_pad={cip})")


@op("interpolate", "nn")
def _interpolate(g: Gen) -> tuple[str, str]:
  nd = g.pick(3, 4)
  s = (1, g.pick(1, 2)) + tuple(g.pick(1, 2, 3, 4) for _ in range(nd - 2))
  size = tuple(g.pick(1, 2, 3, 5, 6) for _ in range(nd - 2))
  mode, ac = g.pick("linear", "nearest", "nearest-exact"), g.pick(False, True)
  x = g.t(s)
  thmode = {3: "linear", 4: "bilinear"}[nd] if mode == "linear" else mode
  if mode != "linear": return f"{x}.interpolate({size}, mode='{mode}')", f"F.interpolate({x}, size={size}, mode='{thmode}')"
  return f"{x}.interpolate({size}, mode='linear', align_corners={ac})", f"F.interpolate({x}, size={size}, mode='{thmode}', align_corners={ac})"


@op("layernorm", "nn")
def _layernorm(g: Gen) -> tuple[str, str]:
  s = (*g.shape(0, 2), g.pick(3, 4, 5))  # 3 or more values normalized: with 2 the output is +-1 whatever the input
  x = g.t(s, pool=(1.0,), p=g.pick(0.0, 0.0, 1.0))
  n = g.pick(1, 1, 2) if len(s) >= 2 else 1
  norm = s[len(s) - n:]
  eps = g.pick(1e-5, 1e-3)
  ax = -1 if n == 1 else (-2, -1)
  if g.rng.random() < 0.5: return f"{x}.layernorm({ax}, eps={eps})", f"F.layer_norm({x}, {norm}, eps={eps})"
  w, b = g.t(norm), g.t(norm)
  return f"{x}.layernorm({ax}, eps={eps}) * {w} + {b}", f"F.layer_norm({x}, {norm}, {w}, {b}, eps={eps})"


@op("batchnorm", "nn")
def _batchnorm(g: Gen) -> tuple[str, str]:
  c = g.pick(1, 2, 3)
  x = g.t((g.pick(1, 2, 3), c, g.pick(1, 2), 3), pool=(1.0,), p=g.pick(0.0, 0.0, 1.0))
  w, b = g.t((c,)), g.t((c,))
  return f"bn2d({x}, {w}, {b})", f"bn2d({x}, {w}, {b})"


@op("groupnorm", "nn")
def _groupnorm(g: Gen) -> tuple[str, str]:
  grp = g.pick(1, 2)
  c = grp * g.pick(1, 2)
  x = g.t((g.pick(1, 2), c, g.pick(1, 2, 3), 3))
  w, b = g.t((c,)), g.t((c,))
  return f"gn({x}, {grp}, {w}, {b})", f"gn({x}, {grp}, {w}, {b})"


def _red(g: Gen) -> str: return g.pick("mean", "sum", "none")


@op("cross_entropy", "loss")
def _cross_entropy(g: Gen) -> tuple[str, str]:
  n, c = g.pick(1, 2, 3), g.pick(1, 2, 4)
  x = g.t((n, c), pool=(0.0, -INF), p=g.pick(0.0, 0.0, 0.2))
  red, ls = _red(g), g.pick(0.0, 0.0, 0.1, 0.5)
  if g.rng.random() < 0.3:  # probabilities
    y = g.t((n, c), rng=(0.0, 1.0))
    return (f"{x}.cross_entropy({y}, reduction='{red}', label_smoothing={ls})",
            f"F.cross_entropy({x}, {y}, reduction='{red}', label_smoothing={ls})")
  y = g.idx((n,), 0, c)
  ign = g.pick(-100, -100, 0)  # an ignore_index (ours and torch; tinygrad 0.14 has none)
  kw = "" if ign == -100 else f", ignore_index={ign}"
  return (f"{x}.cross_entropy({y}, reduction='{red}', label_smoothing={ls}{kw})",
          f"F.cross_entropy({x}, {y}, reduction='{red}', label_smoothing={ls}{kw})")


@op("sparse_ce", "loss")
def _sparse_ce(g: Gen) -> tuple[str, str]:
  n, c = g.pick(1, 2, 3, 4), g.pick(2, 3)
  x = g.t((n, c))
  y = g.idx((n,), 0, c)
  ign = g.pick(-1, 1)  # -1: nothing ignored (tinygrad's convention, and no label is -1 here)
  red, ls = _red(g), g.pick(0.0, 0.0, 0.1)
  return (f"{x}.sparse_categorical_crossentropy({y}, ignore_index={ign}, label_smoothing={ls}, reduction='{red}')",
          f"F.cross_entropy({x}, {y}, ignore_index={ign}, label_smoothing={ls}, reduction='{red}')")


@op("nll_loss", "loss")
def _nll_loss(g: Gen) -> tuple[str, str]:
  n, c = g.pick(1, 2, 3, 4), g.pick(2, 3)
  x = g.t((n, c), rng=(-4.0, 0.0))
  ign = g.pick(None, None, 1)
  y = g.idx((n,), 0, c)
  w = g.t((c,), rng=(0.1, 2.0), dtype=g.dt) if g.rng.random() < 0.4 else None
  red = _red(g)
  ws = w or "None"
  return (f"{x}.nll_loss({y}, weight={ws}, ignore_index={ign}, reduction='{red}')",
          f"F.nll_loss({x}, {y}, weight={ws}, ignore_index={-100 if ign is None else ign}, reduction='{red}')")


@op("bce", "loss")
def _bce(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 2)
  x = g.t(s, rng=(0.02, 0.98), pool=(0.0, 1.0), p=g.pick(0.0, 0.0, 0.3))
  y = g.t(s, rng=(0.0, 1.0), pool=(0.0, 1.0), p=0.5)
  red = _red(g)
  return f"{x}.binary_crossentropy({y}, reduction='{red}')", f"F.binary_cross_entropy({x}, {y}, reduction='{red}')"


@op("bce_logits", "loss")
def _bce_logits(g: Gen) -> tuple[str, str]:
  s = g.shape(1, 2)
  x = g.t(s, pool=(0.0, 50.0, -50.0), p=g.pick(0.0, 0.3))
  y = g.t(s, rng=(0.0, 1.0), pool=(0.0, 1.0), p=0.5)
  red = _red(g)
  if s and g.rng.random() < 0.4:
    pw = g.t(s[-1:], rng=(0.5, 3.0))
    return (f"{x}.binary_crossentropy_logits({y}, reduction='{red}', pos_weight={pw})",
            f"F.binary_cross_entropy_with_logits({x}, {y}, reduction='{red}', pos_weight={pw})")
  return f"{x}.binary_crossentropy_logits({y}, reduction='{red}')", f"F.binary_cross_entropy_with_logits({x}, {y}, reduction='{red}')"


@op("sdpa", "nn")
def _sdpa(g: Gen) -> tuple[str, str]:
  b, h, lq, lk, d = g.pick(1, 2), g.pick(1, 2), g.pick(1, 2, 3), g.pick(1, 2, 3), g.pick(1, 2, 4)
  q, k, v = g.t((b, h, lq, d)), g.t((b, h, lk, d)), g.t((b, h, lk, g.pick(1, 3)))
  r = g.rng.random()
  if r < 0.3: return f"{q}.scaled_dot_product_attention({k}, {v}, is_causal=True)", f"F.scaled_dot_product_attention({q}, {k}, {v}, is_causal=True)"
  if r < 0.55:
    m = g.mask((lq, lk), p=0.7)
    return f"{q}.scaled_dot_product_attention({k}, {v}, attn_mask={m})", f"F.scaled_dot_product_attention({q}, {k}, {v}, attn_mask={m})"
  if r < 0.75:
    m = g.t((lq, lk))
    return f"{q}.scaled_dot_product_attention({k}, {v}, attn_mask={m})", f"F.scaled_dot_product_attention({q}, {k}, {v}, attn_mask={m})"
  return f"{q}.scaled_dot_product_attention({k}, {v})", f"F.scaled_dot_product_attention({q}, {k}, {v})"


@op("embedding", "nn")
def _embedding(g: Gen) -> tuple[str, str]:
  vocab, dim = g.pick(2, 3, 5), g.pick(1, 2, 3)
  w, i = g.t((vocab, dim)), g.idx((g.pick(1, 2), g.pick(1, 3, 4)), 0, vocab)
  return f"{w}[{i}]", f"F.embedding({i}, {w})"


@op("masked_softmax", "nn")
def _masked_softmax(g: Gen) -> tuple[str, str]:
  """Attention-style masking: -inf where the mask is set, then softmax (a fully masked row is NaN in torch)."""
  s = (g.pick(1, 2, 3), g.pick(1, 2, 3))
  x, m = g.t(s), g.mask(s, p=g.pick(0.3, 0.7))
  fn = g.pick("softmax", "log_softmax")
  return f"{x}.masked_fill({m}, -float('inf')).{fn}(-1)", f"torch.{fn}({x}.masked_fill({m}, -float('inf')), -1)"


@op("chain", "nn")
def _chain(g: Gen) -> tuple[str, str]:
  """A small MLP step: matmul, activation, softmax; the gradient flows through several rules."""
  x, w1, w2 = g.t((2, 3)), g.t((3, 4)), g.t((4, 2))
  act = g.pick("relu", "tanh", "sigmoid", "gelu")
  tha = {"gelu": "F.gelu({h}, approximate='tanh')"}.get(act, "{h}." + act + "()")
  return f"({x} @ {w1}).{act}().dot({w2}).log_softmax(-1)", "torch.log_softmax(" + tha.format(h=f"({x} @ {w1})") + f" @ {w2}, -1)"


# ---- the workers: one process per side; a case in, its answers out (JSON)

def _arr(t: Any, lib: str, np: Any, half: bool = False) -> dict[str, Any]:
  a = t.detach().numpy() if lib == "torch" else t.numpy()
  if half: a = a.astype(np.float16)
  vals = a.astype(np.float64).reshape(-1).tolist() if a.dtype.kind == "f" else a.reshape(-1).astype(np.int64).tolist()
  return {"shape": list(a.shape), "dtype": str(a.dtype), "values": vals}


def run_case(case: dict[str, Any], lib: str, np: Any, upcast: bool = False) -> dict[str, Any]:
  ns: dict[str, Any] = {}
  src = program(case, "torch" if lib == "torch" else "tinygrad", upcast)
  src = src.replace("for l in leaves: print(", "for l in []: print(")  # the printout is for reproductions
  try: exec(compile(src, f"<{case['id']}>", "exec"), ns)
  except Exception as e:  # noqa: BLE001  any exception is an answer
    halves = any(d["dtype"] == "float16" for d in case["inputs"])
    if lib == "torch" and halves and not upcast: return run_case(case, lib, np, upcast=True)
    return {"raised": type(e).__name__, "stage": ns.get("stage", "setup"), "msg": str(e).split("\n")[0][:240],
            "where": traceback.extract_tb(e.__traceback__)[-1].name}
  fl = [d for d in case["inputs"] if d["dtype"].startswith("float")]
  try:
    outs = [_arr(o, lib, np, upcast and repr(o.dtype) == "torch.float32") for o in ns["outs"]]
    grads = [None if lf.grad is None else _arr(lf.grad, lib, np, upcast and d["dtype"] == "float16") for lf, d in zip(ns["leaves"], fl)]
  except Exception as e:  # noqa: BLE001
    return {"raised": type(e).__name__, "stage": "realize", "msg": str(e).split("\n")[0][:240]}
  return {"outs": outs, "grads": grads, **({"upcast": True} if upcast else {})}


def worker(lib: str) -> None:
  import faulthandler
  faulthandler.register(signal.SIGUSR1, all_threads=True)
  import numpy as np
  proto = os.fdopen(os.dup(1), "w")
  os.dup2(2, 1)
  for line in sys.stdin:
    for case in json.loads(line):
      t0 = time.perf_counter()
      ans = {"id": case["id"], **run_case(case, lib, np)}
      ans["s"] = round(time.perf_counter() - t0, 3)
      proto.write(json.dumps(ans) + "\n")
      proto.flush()


class GradSide(Side):
  def __init__(self, name: str, python: str, env: dict[str, str], timeout: float, log: str, lib: str):
    super().__init__(name, python, env, timeout, log)
    self.lib = lib

  def start(self) -> Any:
    import subprocess
    if self.proc is None or self.proc.poll() is not None:
      with open(self.log, "a") as err:
        self.proc = subprocess.Popen([self.python, os.path.abspath(__file__), "--worker", self.lib], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=err, env=self.env, cwd="/tmp", bufsize=0, start_new_session=True)
      self.buf = b""
    return self.proc


# ---- comparison

def tol(dtype: str) -> float: return {"float16": 2e-2, "float32": 1e-4}.get(dtype, 1e-7)


def diff_arr(a: dict[str, Any] | None, ref: dict[str, Any] | None, zero_none: bool = True, loose: bool = False) -> str | None:
  """None when a matches the reference ref; else shape/dtype/values/none. A missing gradient equals zeros."""
  if a is None or ref is None:
    if a is None and ref is None: return None
    have = a if a is not None else ref
    assert have is not None
    return None if zero_none and all(v == 0 for v in have["values"]) else "none"
  if a["shape"] != ref["shape"]: return "shape"
  if a["dtype"] != ref["dtype"]: return "dtype"
  rt = tol(ref["dtype"]) * (10 if loose else 1)
  fin = [abs(v) for v in ref["values"] if isinstance(v, float) and math.isfinite(v)]
  atol = rt * max([1.0] + fin) * (1.0 if ref["dtype"] != "float16" else 2.0)
  for x, y in zip(a["values"], ref["values"]):
    x, y = float(x), float(y)
    if math.isnan(x) or math.isnan(y):
      if math.isnan(x) != math.isnan(y): return "values"
    elif math.isinf(x) or math.isinf(y):
      if x != y: return "values"
    elif abs(x - y) > atol + rt * abs(y): return "values"
  return None


LOOSE = ("layernorm", "batchnorm", "groupnorm", "stdvar")  # gradients that divide by a small std: 10x the tolerance


def _compare(a: dict[str, Any], b: dict[str, Any], loose: bool = False) -> str | None:
  """The first difference between two sides' answers (None: the same)."""
  if "crash" in a or "crash" in b: return None if a.get("crash") == b.get("crash") else f"crash: {a.get('crash') or b.get('crash')}"
  if "raised" in a or "raised" in b:
    if "raised" in a and "raised" in b: return None
    r = a if "raised" in a else b
    return f"raised in {r['stage']}"
  if len(a["outs"]) != len(b["outs"]): return "outputs"
  for i, (x, y) in enumerate(zip(a["outs"], b["outs"])):
    if (c := diff_arr(x, y, False, loose)): return f"forward {c}" + (f" (output {i})" if len(a["outs"]) > 1 else "")
  for i, (x, y) in enumerate(zip(a["grads"], b["grads"])):
    if (c := diff_arr(x, y, True, loose)): return f"grad x{i} {c}"
  return None


def classify(case: dict[str, Any], ours: dict[str, Any], torch_: dict[str, Any], tg: dict[str, Any]) -> tuple[str, str] | None:
  """(verdict, what) of ours against torch, tinygrad 0.14 as the tie-break; None when ours matches torch."""
  if "raised" in torch_ and "raised" not in ours and "crash" not in ours: return None  # a call torch rejects: not a gradient question
  loose = case["op"] in LOOSE
  def compare(a: dict[str, Any], b: dict[str, Any]) -> str | None: return _compare(a, b, loose)
  what = compare(ours, torch_)
  if what is None: return None
  if "crash" in ours: return "bug", what
  if "raised" in ours:
    return ("tinygrad-like", what) if "raised" in tg else ("bug", what)
  if "raised" in tg or "crash" in tg: return "alone", what
  if compare(tg, torch_) is None: return "bug", what
  if compare(ours, tg) is None: return "tinygrad-like", what
  return "alone", what


def _dups(case: dict[str, Any], i: int) -> bool:
  vals = [v for v in input_values(case["inputs"][i]) if not (isinstance(v, float) and math.isnan(v))]
  return len(set(vals)) < len(vals)


def _f32(x: float) -> float: return struct.unpack("f", struct.pack("f", x))[0]


def _quotient_rounds(case: dict[str, Any]) -> bool:
  """fmod/%: some a / b rounds (in float32) to another integer than the exact quotient: torch's gradient with respect to b
  (-trunc(a / b)) uses the rounded one, ours the one the exact remainder is computed with."""
  a, b = (view_values(d) for d in case["inputs"][:2])
  if len(a) != len(b): return True  # broadcasting: some pair may
  rnd = math.floor if case["op"] == "mod" else math.trunc
  return any(y != 0 and math.isfinite(x) and math.isfinite(y) and rnd(_f32(_f32(x) / _f32(y))) != rnd(Fraction(_f32(x)) / Fraction(_f32(y)))
             for x, y in zip(a, b))


def _bounds_tie(case: dict[str, Any]) -> bool:
  """clip's bounds are equal somewhere (values from the same pools; broadcasting aside)."""
  return bool(set(input_values(case["inputs"][1])) & set(input_values(case["inputs"][2])))


def _has(case: dict[str, Any], i: int, *points: float) -> bool: return any(v in points for v in input_values(case["inputs"][i]))


def _neg_zero(case: dict[str, Any]) -> bool:
  """The first input holds -0.0."""
  return any(isinstance(x, float) and x == 0 and math.copysign(1, x) < 0 for x in input_values(case["inputs"][0]))


def _at_bound(case: dict[str, Any]) -> bool:
  """clip's x equals one of its bounds somewhere (the number bounds of clip / clip_lo, or values of the tensor bounds)."""
  if case["op"] == "clip": return _has(case, 0, -1.0, 0.5)
  if case["op"] == "clip_lo": return _has(case, 0, 0.0)
  return bool(set(input_values(case["inputs"][0])) & (set(input_values(case["inputs"][1])) | set(input_values(case["inputs"][2]))))


def _circular_wraps(case: dict[str, Any]) -> bool:
  """A circular pad of the case is larger than its dim after the negative pads' crop (it would wrap around more than once);
  torch 2.13 checks it against the uncropped size only and fills such an output from uninitialized memory."""
  pads, shape = ast.literal_eval(case["tg"].split(".pad(", 1)[1].split(", mode=", 1)[0]), case["inputs"][0]["shape"]
  for i in range(len(pads) // 2):
    lo, hi = pads[2 * i], pads[2 * i + 1]
    kept = shape[-1 - i] + min(lo, 0) + min(hi, 0)
    if max(lo, 0) > kept or max(hi, 0) > kept: return True
  return False


def _bce_half_certain(case: dict[str, Any]) -> bool:
  """bce of float16 where a probability equals its target at 0 or 1: torch's gradient (p - y) / max(p (1 - p), 1e-12) is
  0 / 0 = NaN there, its 1e-12 rounding to 0 in float16."""
  x, y = case["inputs"][0], case["inputs"][1]
  return x["dtype"] == "float16" and any(p == t and p in (0.0, 1.0) for p, t in zip(view_values(x), view_values(y)))


def _var_full_beyond(case: dict[str, Any]) -> bool:
  """var/var_mean of a 0-d tensor with correction >= 2 (torch.var's dof = 1 - correction < 0): torch's backward of a 0-d input
  (or of dim=None) is NaN where x == mean (always, for one element), not its finite 2 (x - mean) / dof of listed dims."""
  m = re.search(r"correction=(\d+)", case["tg"])
  return case["inputs"][0]["shape"] == [] and ".var" in case["tg"] and m is not None and int(m.group(1)) >= 2


# Deliberate differences (docs/differences.md, Semantics): (reason, predicate on the case, the verdict and its text)
KNOWN: list[tuple[str, Callable[[dict[str, Any], str, str], bool]]] = [
  ("tied maxima of max_pool2d/cummax/cummin share the gradient evenly (tinygrad 0.14, as max()); torch gives it to one",
   lambda c, v, w: v == "tinygrad-like" and (c["op"] == "max_pool2d" or "cummax" in c["tg"] or "cummin" in c["tg"]) and _dups(c, 0)),
  ("scatter with duplicate indices: only the written src element gets the gradient (tinygrad 0.14); torch gives it to all",
   lambda c, v, w: v == "tinygrad-like" and c["op"] == "scatter" and c["inputs"][1]["kind"] == "idx"),
  ("scatter_reduce amax/amin, include_self=False: self's old value takes no share of a tie (tinygrad 0.14); torch counts it",
   lambda c, v, w: v == "tinygrad-like" and c["op"] == "scatter_reduce" and "include_self=False" in c["tg"] and "'am" in c["tg"]),
  ("clip with tensor bounds where x < min == max: min gets the gradient (tinygrad 0.14); torch gives it to none of the three",
   lambda c, v, w: c["op"] == "clip_tensor" and w.startswith("grad x1") and _bounds_tie(c)),
  ("clip at a bound (x == min or x == max): x gets the whole gradient (tinygrad 0.14); torch 2.13 gives it none (number bounds) "
   "or half (tensor bounds)", lambda c, v, w: c["op"] in ("clip", "clip_lo", "clip_tensor") and w.startswith("grad x0") and _at_bound(c)),
  ("x ** -0.5 is rsqrt: -inf at -0.0 (docs above), so the gradient there has the other sign than torch's pow",
   lambda c, v, w: c["op"] == "pow_scalar" and "** -0.5" in c["tg"] and _neg_zero(c)),
  ("x ** 0.5 is sqrt: -0.0 at -0.0 (docs above; torch's float32 and numpy's power too), so the gradient there is -inf; torch's "
   "float16 pow gives +0 and +inf", lambda c, v, w: c["op"] == "pow_scalar" and "** 0.5" in c["tg"] and _neg_zero(c)),
  ("fmod/% at a quotient that rounds to an integer: the gradient with respect to b is -(the exact quotient); torch's and "
   "tinygrad's use the rounded a / b", lambda c, v, w: c["op"] in ("fmod", "mod") and w.startswith("grad x1") and _quotient_rounds(c)),
  ("sort/topk of equal values: which of them gets each output's gradient (ours: the stable order's)",
   lambda c, v, w: c["op"] in ("sort", "topk") and w.startswith("grad") and _dups(c, 0)),
  ("binary_crossentropy's target gradient at a probability of 0 or 1 is the clamped logs' (+-100); torch's and tinygrad's +-inf",
   lambda c, v, w: c["op"] == "bce" and w.startswith("grad x1") and _has(c, 0, 0.0, 1.0)),
  ("binary_crossentropy of float16 where a probability equals its target at 0 or 1: the gradient is 0 (torch's formula); torch's "
   "float16 kernel gives NaN (its eps 1e-12 is 0 in float16: 0 / 0)", lambda c, v, w: c["op"] == "bce" and w.startswith("grad x0")
   and _bce_half_certain(c)),
  ("var with a correction beyond the count: the gradient is torch's finite 2 (x - mean) / (n - correction) of listed dims "
   "also for a 0-d tensor, where torch's full-reduction backward (0-d, or dim=None) gives NaN where x == mean, inf elsewhere",
   lambda c, v, w: c["op"] == "stdvar" and w.startswith("grad x0") and _var_full_beyond(c)),
  ("circular padding larger than the dim left after a negative pad's crop raises (tinygrad 0.14 too); torch 2.13 checks the "
   "uncropped size and fills the output from uninitialized memory", lambda c, v, w: c["op"] == "pad" and "mode='circular'" in c["tg"]
   and w == "raised in forward" and _circular_wraps(c)),
]


def documented(case: dict[str, Any], verdict: str, what: str) -> str | None:
  return next((r for r, p in KNOWN if p(case, verdict, what)), None)


def brief(ans: dict[str, Any], what: str, width: int = 220) -> str:
  if "crash" in ans: return f"CRASH {ans['crash']}"
  if "raised" in ans: return f"raised {ans['raised']} in {ans['stage']} ({ans.get('where', '')}): {ans['msg']}"[:width]
  part: Any = None
  if what.startswith("grad x"):
    i = int(what.split()[1][1:])
    part = ans["grads"][i] if i < len(ans["grads"]) else None
  elif ans.get("outs"): part = ans["outs"][0]
  if part is None: return "None"
  return json.dumps({"shape": part["shape"], "dtype": part["dtype"], "values": [round(v, 5) if isinstance(v, float) else v for v in part["values"]]})[:width]


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("-n", type=int, default=2000, help="number of cases (spread over the ops round-robin)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--ops", default="", help="comma-separated op names or groups (default: all)")
  ap.add_argument("--case", default="", help="run one case, op/k, and print its programs and answers")
  ap.add_argument("--batch", type=int, default=48)
  ap.add_argument("--show", type=int, default=2, help="differences printed per (op, verdict, what)")
  ap.add_argument("--timeout", type=float, default=60.0)
  ap.add_argument("--json", default="")
  ap.add_argument("--list", action="store_true")
  ap.add_argument("--documented", action="store_true", help="also print the documented differences")
  ap.add_argument("--torch-python", default="/tmp/torchvenv/bin/python")
  ap.add_argument("--tg-python", default="/tmp/tgvenv/bin/python")
  ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
  a = ap.parse_args()
  if a.worker: return worker(a.worker)
  if a.list: return print_groups(OPS)
  cases = pick_cases(a, OPS, make_case)

  base = {k: v for k, v in os.environ.items() if k != "DEV"}
  bare = {k: v for k, v in base.items() if k != "PYTHONPATH"}
  if base.get("PYTHONPATH"): base["PYTHONPATH"] = abs_pythonpath()  # workers run in /tmp: relative entries would name nothing
  sides = [GradSide("ours", sys.executable, {**base, "DEV": "CPU"}, a.timeout, "/tmp/grad_fuzz_ours.log", "ours"),
           GradSide("torch", a.torch_python, {**bare, "OMP_NUM_THREADS": "1"}, a.timeout, "/tmp/grad_fuzz_torch.log", "torch"),
           GradSide("tinygrad", a.tg_python, {**bare, "DEV": "CPU", "PATH": "/tmp/clbin:" + bare.get("PATH", "")}, a.timeout,
                    "/tmp/grad_fuzz_tinygrad.log", "tinygrad")]
  results: list[tuple[dict, dict, dict, dict]] = []
  t0 = time.time()
  try:
    with ThreadPoolExecutor(3) as ex:
      for i in range(0, len(cases), a.batch):
        batch = cases[i:i + a.batch]
        futs = [ex.submit(s.run, batch) for s in sides]
        got = [f.result() for f in futs]
        results += [(c, got[0][c["id"]], got[1][c["id"]], got[2][c["id"]]) for c in batch]
        if not a.case and sys.stderr.isatty(): print(f"\r{len(results)}/{len(cases)} cases, {time.time() - t0:.0f} s", end="", file=sys.stderr, flush=True)
  finally:
    for s in sides: s.close()
  if not a.case and sys.stderr.isatty(): print(file=sys.stderr)

  if a.case:
    c, o, t, tg = results[0]
    print("# ours / tinygrad 0.14:\n" + program(c, "tinygrad") + "\n\n# torch:\n" + program(c, "torch") + "\n")
    for name, ans in (("ours", o), ("torch", t), ("tinygrad", tg)): print(f"{name}: {json.dumps({k: v for k, v in ans.items() if k != 'id'})}\n")
    v = classify(c, o, t, tg)
    print("verdict:", v or "same as torch", f"documented: {documented(c, *v)}" if v and documented(c, *v) else "")
    return None

  counts: Counter = Counter()
  docs: Counter = Counter()
  by: dict[tuple[str, str, str], list] = defaultdict(list)
  diffs = []
  torch_rejects = sum(1 for _, _, t, _ in results if "raised" in t)
  for c, o, t, tg in results:
    v = classify(c, o, t, tg)
    if v is None: continue
    verdict, what = v
    reason = documented(c, verdict, what)
    if reason: docs[reason] += 1
    else: counts[verdict] += 1
    if reason and not a.documented: continue
    by[(c["op"], verdict, what)].append((c, o, t, tg))
    diffs.append({"id": c["id"], "verdict": verdict, "what": what, "documented": reason, "ours": o, "torch": t, "tinygrad": tg,
                  "code": program(c, "tinygrad"), "torch_code": program(c, "torch")})
  print(f"{len(results)} cases ({len({c['op'] for c, *_ in results})} ops) in {time.time() - t0:.0f} s, seed {a.seed}; "
        f"differences from torch: " + ", ".join(f"{k} {n}" for k, n in counts.most_common()) + f"; documented {sum(docs.values())}; "
        f"torch rejected {torch_rejects}; restarts: " + ", ".join(f"{s.name} {s.restarts}" for s in sides))
  for reason, n in docs.most_common(): print(f"  documented: {reason}: {n}")
  for (opname, verdict, what), items in sorted(by.items()):
    print(f"\n== {opname}: {verdict}: {what} ({len(items)})")
    for c, o, t, tg in items[:a.show]:
      print(f"  {c['id']}: {c['tg']}   |   torch: {c['torch']}")
      print("    inputs: " + ", ".join(f"x{i}:{d['dtype']}{tuple(d['shape'])}{'/' + d['view'] if d.get('view') else ''}" for i, d in enumerate(c["inputs"])))
      for name, ans in (("ours", o), ("torch", t), ("tinygrad", tg)): print(f"    {name:9s} {brief(ans, what)}")
  if a.json:
    with open(a.json, "w") as f: json.dump(diffs, f, indent=1)
  return None


if __name__ == "__main__":
  main()
