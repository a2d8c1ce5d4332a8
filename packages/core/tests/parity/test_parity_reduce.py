"""Parity with torch for reductions: sums/extremes/moments over axes and keepdim, arg reductions, the softmax family,
cumulative ops, sort/argsort/topk. Forward values and gradients of sum(out * upstream) w.r.t. every float input.
Run with the system python, where torch is installed:
  cd packages/core/tests && DEV=CPU:LLVM python -m pytest parity/test_parity_reduce.py -q"""
import numpy as np
import pytest

from .helpers import check, make_inputs, torch


def distinct(*shape, seed=0):
  """A permutation of spaced values: no ties (max/sort gradients are unique)."""
  n = int(np.prod(shape))
  return ((np.random.default_rng(seed).permutation(n) - n / 2) * 0.37).astype(np.float32).reshape(shape)


AXES = [None, 0, 1, -1, (0, 1)]


def _t_axis(axis): return tuple(range(3)) if axis is None else axis


# (id, ours, torch(x, axis, keepdim))
REDUCTIONS = [
  ("sum", lambda x, a, k: x.sum(a, keepdim=k), lambda x, a, k: x.sum(_t_axis(a), keepdim=k)),
  ("mean", lambda x, a, k: x.mean(a, keepdim=k), lambda x, a, k: x.mean(_t_axis(a), keepdim=k)),
  ("max", lambda x, a, k: x.max(a, keepdim=k), lambda x, a, k: x.amax(_t_axis(a), keepdim=k)),
  ("min", lambda x, a, k: x.min(a, keepdim=k), lambda x, a, k: x.amin(_t_axis(a), keepdim=k)),
  ("var", lambda x, a, k: x.var(a, keepdim=k), lambda x, a, k: x.var(_t_axis(a), keepdim=k)),
  ("std", lambda x, a, k: x.std(a, keepdim=k), lambda x, a, k: x.std(_t_axis(a), keepdim=k)),
  ("var_c0", lambda x, a, k: x.var(a, keepdim=k, correction=0), lambda x, a, k: x.var(_t_axis(a), keepdim=k, correction=0)),
  ("logsumexp", lambda x, a, k: x.logsumexp(a, keepdim=k), lambda x, a, k: x.logsumexp(_t_axis(a), keepdim=k)),
]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name,ours,theirs", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reductions(name, ours, theirs, axis, keepdim):
  x = distinct(2, 3, 4)
  check(lambda t: ours(t, axis, keepdim), [], torch_fn=lambda t: theirs(t, axis, keepdim), inputs=[x])


@pytest.mark.parametrize("axis", [None, 0, 2, (0, 2)], ids=str)
def test_prod(axis):
  x = make_inputs([(2, 3, 4)], 0.5, 1.5)[0] * np.where(np.random.default_rng(5).random((2, 3, 4)) < 0.5, -1, 1).astype(np.float32)
  check(lambda t: t.prod(axis), [], torch_fn=lambda t: t.prod() if axis is None else t.prod(axis) if isinstance(axis, int) else t.prod(2).prod(0),
        inputs=[x])


def test_var_mean_std_mean():
  x = distinct(3, 5)
  check(lambda t: t.var_mean(1)[0] * t.var_mean(1)[1], [], torch_fn=lambda t: torch.var_mean(t, 1)[0] * torch.var_mean(t, 1)[1], inputs=[x])
  check(lambda t: t.std_mean(0)[0] + t.std_mean(0)[1], [], torch_fn=lambda t: torch.std_mean(t, 0)[0] + torch.std_mean(t, 0)[1], inputs=[x])


def test_max_with_ties_forward():
  check(lambda t: t.max(1), [], torch_fn=lambda t: t.amax(1), inputs=[np.array([[1.0, 3, 3], [2, 2, 2]], np.float32)], grad=False)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_family(op, axis):
  check(lambda t: getattr(t, op)(axis), [(3, 5)], low=-4, high=4)


def test_softmax_large_logits():
  check(lambda t: t.softmax(1), [], inputs=[np.array([[1000.0, 999.0, -50.0], [-1000.0, -1001.0, -1002.0]], np.float32)])
  check(lambda t: t.log_softmax(0), [], inputs=[np.array([[1000.0, 999.0, -50.0], [-1000.0, -1001.0, -1002.0]], np.float32)])


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions(op, axis, keepdim):
  x = np.array([[1, 3, 3, 0], [2, 2, -1, -1], [-1, -5, 7, -5]], np.float32)  # ties: the first index wins
  check(lambda t: getattr(t, op)(axis, keepdim=keepdim), [], grad=False, inputs=[x])


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("op", ["any", "all"])
def test_any_all(op, axis):
  x = np.array([[True, False, True], [True, True, True]])
  check(lambda t: getattr(t, op)() if axis is None else getattr(t, op)(axis), [], grad=False, inputs=[x])


INT_REDUCTIONS = [("sum", lambda t: t.sum(1)), ("max", lambda t: t.max(1)), ("min", lambda t: t.min(0)), ("prod", lambda t: t.prod(1)),
                  ("mean", lambda t: t.mean(1)), ("cumsum", lambda t: t.cumsum(1)), ("argmax", lambda t: t.argmax(1))]
TORCH_INT = {"max": lambda t: t.amax(1), "min": lambda t: t.amin(0), "mean": lambda t: t.float().mean(1)}


@pytest.mark.parametrize("name,fn", INT_REDUCTIONS, ids=[r[0] for r in INT_REDUCTIONS])
def test_int_reductions(name, fn):
  x = np.random.default_rng(0).integers(-4, 5, size=(3, 4)).astype(np.int32)
  check(fn, [], torch_fn=TORCH_INT.get(name), grad=False, inputs=[x])


# cumulative ops: (id, ours(t, axis), torch(t, axis))
CUMULATIVE = [
  ("cumsum", lambda t, a: t.cumsum(a), lambda t, a: t.cumsum(a)),
  ("cumprod", lambda t, a: t.cumprod(a), lambda t, a: t.cumprod(a)),
  ("cummax", lambda t, a: t.cummax(a)[0], lambda t, a: t.cummax(a).values),
  ("cummin", lambda t, a: t.cummin(a)[0], lambda t, a: t.cummin(a).values),
  ("logcumsumexp", lambda t, a: t.logcumsumexp(a), lambda t, a: t.logcumsumexp(a)),
]


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("name,ours,theirs", CUMULATIVE, ids=[c[0] for c in CUMULATIVE])
def test_cumulative(name, ours, theirs, axis):
  x = distinct(3, 5) * 0.5 if name != "cumprod" else make_inputs([(3, 5)], 0.5, 1.5)[0] * np.where(np.arange(15).reshape(3, 5) % 3 == 0, -1, 1)
  check(lambda t: ours(t, axis), [], torch_fn=lambda t: theirs(t, axis), inputs=[x.astype(np.float32)])


@pytest.mark.parametrize("name,ours,theirs", CUMULATIVE, ids=[c[0] for c in CUMULATIVE])
def test_cumulative_long(name, ours, theirs, monkeypatch):
  import tinygrad.frontend.reduce as reduce_mod
  monkeypatch.setattr(reduce_mod, "_SCAN_BLOCK", 4)  # several chained blocks, on a small tensor
  x = distinct(2, 11) * 0.3 if name != "cumprod" else make_inputs([(2, 11)], 0.7, 1.3)[0]
  check(lambda t: ours(t, 1), [], torch_fn=lambda t: theirs(t, 1), inputs=[x])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort(dim, descending):
  x = distinct(3, 5, seed=1)
  check(lambda t: t.sort(dim, descending=descending)[0], [], inputs=[x])
  check(lambda t: t.sort(dim, descending=descending)[1], [], grad=False, inputs=[x])
  check(lambda t: t.argsort(dim, descending=descending), [], grad=False, inputs=[x])


@pytest.mark.parametrize("desc", [False, True])
def test_sort_ties_are_stable(desc):
  x = np.array([[2.0, 1.0, 2.0, 1.0, 0.0, 2.0], [5.0, 5.0, 5.0, 5.0, 5.0, 5.0]], np.float32)
  check(lambda t: t.sort(1, descending=desc)[1], [], torch_fn=lambda t: t.sort(dim=1, descending=desc, stable=True)[1], grad=False, inputs=[x])
  check(lambda t: t.sort(1, descending=desc)[0], [], torch_fn=lambda t: t.sort(dim=1, descending=desc, stable=True)[0], inputs=[x])


@pytest.mark.parametrize("desc", [False, True])
def test_sort_nan_and_ints(desc):
  x = np.array([3.0, np.nan, -1.0, np.inf, -np.inf, 0.5], np.float32)
  check(lambda t: t.sort(descending=desc)[0], [], grad=False, inputs=[x])
  check(lambda t: t.sort(descending=desc)[1], [], grad=False, inputs=[x])
  xi = np.array([[5, -3, 0, 7, -3], [1, 1, 0, -9, 4]], np.int32)
  check(lambda t: t.sort(1)[0], [], grad=False, inputs=[xi])
  check(lambda t: t.argsort(0, descending=True), [], torch_fn=lambda t: t.argsort(dim=0, descending=True, stable=True), grad=False, inputs=[xi])


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k,dim", [(1, -1), (3, 1), (5, 1), (2, 0)])
def test_topk(k, dim, largest):
  x = distinct(3, 5, seed=2)
  check(lambda t: t.topk(k, dim, largest=largest)[0], [], torch_fn=lambda t: t.topk(k, dim, largest=largest)[0], inputs=[x])
  check(lambda t: t.topk(k, dim, largest=largest)[1], [], torch_fn=lambda t: t.topk(k, dim, largest=largest)[1], grad=False, inputs=[x])


def test_composite_losses():
  """Reductions chained the way losses use them."""
  x = distinct(4, 5) * 0.5
  check(lambda t: (t.log_softmax(1) * t.softmax(1)).sum(1).mean(), [], inputs=[x])
  check(lambda t: (t - t.mean(1, keepdim=True)) / (t.std(1, keepdim=True) + 1e-5), [], inputs=[x])
  check(lambda t: t.max(0) - t.logsumexp(0), [], torch_fn=lambda t: t.amax(0) - t.logsumexp(0), inputs=[x])
