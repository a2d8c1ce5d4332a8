"""Parity with torch for movement and indexing ops: forward values and gradients (of sum(out * upstream)) w.r.t. every float
input. Run with the system python, where torch is installed:
  cd packages/core/tests && DEV=CPU:LLVM python -m pytest parity/test_parity_movement.py -q"""
import numpy as np
import pytest
from tinygrad import Tensor

from .helpers import check, torch

F = torch.nn.functional


def _ints(*shape, high, low=0, seed=3):
  return np.random.default_rng(seed).integers(low, high, size=shape).astype(np.int64)


def _perm_index(shape, dim, n, seed=4):
  """Index of `shape` whose values along dim are distinct (a permutation prefix of range(n)): no duplicate scatter targets."""
  rng = np.random.default_rng(seed)
  moved = list(shape)
  k = moved.pop(dim)
  rows = [rng.permutation(n)[:k] for _ in range(int(np.prod(moved)))]
  return np.moveaxis(np.array(rows).reshape(*moved, k), -1, dim).astype(np.int64)


# (id, fn, shapes, torch_fn or None)
VIEW_CASES = [
  ("reshape", lambda x: x.reshape(4, -1), [(2, 3, 4)], None),
  ("reshape_scalar", lambda x: x.reshape(()), [(1, 1)], None),
  ("view", lambda x: x.view(6, 4), [(2, 3, 4)], None),
  ("permute", lambda x: x.permute(2, 0, 1), [(2, 3, 4)], None),
  ("permute_neg", lambda x: x.permute(-1, -3, -2), [(2, 3, 4)], None),
  ("transpose", lambda x: x.transpose(0, 2), [(2, 3, 4)], None),
  ("transpose_neg", lambda x: x.transpose(-1, -2), [(2, 3, 4)], None),
  ("T", lambda x: x.T, [(3, 5)], None),
  ("flatten", lambda x: x.flatten(), [(2, 3, 4)], None),
  ("flatten_1", lambda x: x.flatten(1), [(2, 3, 4)], None),
  ("flatten_0_1", lambda x: x.flatten(0, 1), [(2, 3, 4)], None),
  ("unflatten", lambda x: x.unflatten(2, (2, 2)), [(2, 3, 4)], None),
  ("unflatten_neg", lambda x: x.unflatten(-2, (3, 1)), [(2, 3, 4)], None),
  ("squeeze_all", lambda x: x.squeeze(), [(2, 1, 3, 1)], None),
  ("squeeze_dim", lambda x: x.squeeze(-1), [(2, 1, 3, 1)], None),
  ("squeeze_tuple", lambda x: x.squeeze((1, 3)), [(2, 1, 3, 1)], None),
  ("unsqueeze", lambda x: x.unsqueeze(1), [(2, 3)], None),
  ("unsqueeze_neg", lambda x: x.unsqueeze(-1), [(2, 3)], None),
  ("expand", lambda x: x.expand(2, 3, 4), [(3, 1)], None),
  ("expand_minus1", lambda x: x.expand(4, -1, 5), [(2, 1)], None),
  ("repeat", lambda x: x.repeat(2, 1, 3), [(2, 3, 2)], None),
  ("repeat_newdims", lambda x: x.repeat(2, 2, 1), [(3, 2)], None),
  ("repeat_interleave", lambda x: x.repeat_interleave(2), [(2, 3)], None),
  ("repeat_interleave_dim", lambda x: x.repeat_interleave(3, dim=1), [(2, 3)], None),
  ("flip", lambda x: x.flip(0), [(3, 4)], None),
  ("flip_multi", lambda x: x.flip((0, 2)), [(2, 3, 4)], None),
  ("roll", lambda x: x.roll(1, 0), [(3, 4)], None),
  ("roll_neg", lambda x: x.roll(-3, -1), [(3, 4)], None),
  ("roll_multi", lambda x: x.roll((2, 5), (0, 2)), [(2, 3, 4)], None),
  ("roll_flat", lambda x: x.roll(5), [(3, 4)], None),
  ("shrink", lambda x: x.shrink(((1, 3), None, (0, 2))), [(3, 2, 4)], lambda x: x[1:3, :, 0:2]),
  ("rearrange", lambda x: x.rearrange("b c (h w) -> b h w c", h=2), [(2, 3, 4)], lambda x: x.reshape(2, 3, 2, 2).permute(0, 2, 3, 1)),
  ("rearrange_ellipsis", lambda x: x.rearrange("b ... -> (...) b"), [(2, 3, 4)], lambda x: x.reshape(2, 12).T),
  ("tril", lambda x: x.tril(), [(4, 5)], None),
  ("tril_diag", lambda x: x.tril(-1), [(2, 4, 3)], None),
  ("triu", lambda x: x.triu(), [(4, 5)], None),
  ("triu_diag", lambda x: x.triu(2), [(2, 3, 4)], None),
]

PAD_CASES = [
  ("pad_flat", lambda x: x.pad((1, 2)), [(2, 3)], lambda x: F.pad(x, (1, 2))),
  ("pad_flat_2d", lambda x: x.pad((1, 0, 2, 1)), [(2, 3)], lambda x: F.pad(x, (1, 0, 2, 1))),
  ("pad_value", lambda x: x.pad((2, 1), value=-1.5), [(2, 3)], lambda x: F.pad(x, (2, 1), value=-1.5)),
  ("pad_negative", lambda x: x.pad((-1, 2, 1, -1)), [(3, 4)], lambda x: F.pad(x, (-1, 2, 1, -1))),
  ("pad_pairs", lambda x: x.pad(((1, 0), None, (0, 2))), [(2, 3, 4)], lambda x: F.pad(x, (0, 2, 0, 0, 1, 0))),
  ("pad_reflect", lambda x: x.pad((2, 1), mode="reflect"), [(2, 3, 4)], lambda x: F.pad(x, (2, 1), mode="reflect")),
  ("pad_reflect_2d", lambda x: x.pad((1, 3, 2, 1), mode="reflect"), [(2, 3, 4)], lambda x: F.pad(x, (1, 3, 2, 1), mode="reflect")),
  ("pad_replicate", lambda x: x.pad((3, 1), mode="replicate"), [(2, 3, 4)], lambda x: F.pad(x, (3, 1), mode="replicate")),
  ("pad_replicate_2d", lambda x: x.pad((1, 2, 3, 0), mode="replicate"), [(2, 3, 4)], lambda x: F.pad(x, (1, 2, 3, 0), mode="replicate")),
  ("pad_circular", lambda x: x.pad((2, 3), mode="circular"), [(2, 3, 4)], lambda x: F.pad(x, (2, 3), mode="circular")),
  ("pad_circular_2d", lambda x: x.pad((1, 1, 2, 3), mode="circular"), [(2, 3, 4)], lambda x: F.pad(x, (1, 1, 2, 3), mode="circular")),
  ("pad_reflect_negative", lambda x: x.pad((-1, 2), mode="reflect"), [(2, 3, 4)], lambda x: F.pad(x, (0, 2), mode="reflect")[..., 1:]),
]

JOIN_CASES = [
  ("cat0", lambda x, y: x.cat(y), [(2, 3), (1, 3)], lambda x, y: torch.cat([x, y])),
  ("cat1", lambda x, y: x.cat(y, x, dim=1), [(2, 3), (2, 2)], lambda x, y: torch.cat([x, y, x], 1)),
  ("cat_neg", lambda x, y: x.cat(y, dim=-1), [(2, 2, 3), (2, 2, 1)], lambda x, y: torch.cat([x, y], -1)),
  ("stack", lambda x, y: x.stack(y), [(2, 3), (2, 3)], lambda x, y: torch.stack([x, y])),
  ("stack_last", lambda x, y: x.stack(y, x, dim=-1), [(2, 3), (2, 3)], lambda x, y: torch.stack([x, y, x], -1)),
  ("stack_mid", lambda x, y: Tensor.stack(x, y, dim=1), [(2, 3), (2, 3)], lambda x, y: torch.stack([x, y], 1)),
  ("split_int", lambda x: x.split(2)[1] * 2 + x.split(2)[0][..., :1], [(3, 2)], lambda x: x.split(2)[1] * 2 + x.split(2)[0][..., :1]),
  ("split_sizes", lambda x: x.split([1, 3], dim=0)[1], [(4, 2)], None),
  ("split_cat", lambda x: Tensor.cat(*x.split(2, dim=1)[::-1], dim=1), [(2, 5)], lambda x: torch.cat(x.split(2, 1)[::-1], 1)),
  ("chunk", lambda x: x.chunk(2)[0] - x.chunk(2)[1], [(3, 4)], lambda x: x.chunk(2)[0] - x.chunk(2)[1]),
  ("chunk_uneven", lambda x: x.chunk(2, 0)[1], [(3, 4)], None),
  ("meshgrid_ij", lambda x, y: x.meshgrid(y)[0] * x.meshgrid(y)[1], [(3,), (4,)], lambda x, y: torch.meshgrid(x, y, indexing="ij")[0] * torch.meshgrid(x, y, indexing="ij")[1]),
  ("meshgrid_xy", lambda x, y: x.meshgrid(y, indexing="xy")[0] + 2 * x.meshgrid(y, indexing="xy")[1], [(3,), (4,)],
   lambda x, y: torch.meshgrid(x, y, indexing="xy")[0] + 2 * torch.meshgrid(x, y, indexing="xy")[1]),
]

GETITEM_CASES = [
  ("int", lambda x: x[1]), ("int_neg", lambda x: x[-1, 2]), ("slice", lambda x: x[:, 1:3]), ("slice_step", lambda x: x[::2, :, 1::2]),
  ("none", lambda x: x[None, :, None]),
  ("ellipsis", lambda x: x[..., 1]), ("ellipsis_mid", lambda x: x[0, ..., None, 1:]), ("list", lambda x: x[[1, 0, 1]]),
  ("list_neg", lambda x: x[:, [-1, 0, -2]]), ("two_lists", lambda x: x[[0, 1, 1], [2, 0, 2]]), ("lists_broadcast", lambda x: x[[[0], [1]], :, [1, 3, 0]]),
  ("adjacent_lists", lambda x: x[:, [[0, 2]], [[3], [1]]]), ("int_and_list", lambda x: x[1, :, [3, 3, 0]]), ("list_slice_list", lambda x: x[[1, 0], 1:, [0, 2]]),
  ("list_none", lambda x: x[None, [1, 0], ..., ::2]), ("nested_list", lambda x: x[[[0, 1], [1, 1]]]), ("ellipsis_list", lambda x: x[..., [0, 0, 3]]),
]

TENSOR_INDEX_CASES = [
  ("tensor_index", lambda x, i: x[i], [(4, 3), _ints(2, 3, high=4)]),
  ("tensor_index_neg", lambda x, i: x[:, i], [(2, 4), _ints(5, low=-4, high=4)]),
  ("tensor_two", lambda x, i, j: x[i, :, j], [(3, 2, 4), _ints(2, 1, high=3), _ints(3, high=4, seed=5)]),
  ("tensor_scalar", lambda x, i: x[i, 1:], [(3, 4), np.array(2, dtype=np.int64)]),
]

GATHER_CASES = [
  ("gather0", lambda x, i: x.gather(0, i), [(3, 4), _ints(2, 4, high=3)]),
  ("gather1", lambda x, i: x.gather(1, i), [(3, 4), _ints(3, 6, high=4)]),
  ("gather_neg", lambda x, i: x.gather(-1, i), [(2, 3, 4), _ints(2, 2, 3, high=4)]),
  ("gather_small", lambda x, i: x.gather(1, i), [(3, 4), _ints(2, 2, high=4)]),
  ("scatter", lambda x, i, s: x.scatter(0, i, s), [(3, 4), _perm_index((2, 4), 0, 3), (2, 4)]),
  ("scatter_dim1", lambda x, i, s: x.scatter(1, i, s), [(3, 5), _perm_index((3, 2), 1, 5), (3, 2)]),
  ("scatter_value", lambda x, i: x.scatter(1, i, 2.5), [(3, 5), _perm_index((2, 3), 1, 5)]),
  ("masked_fill", lambda x, m: x.masked_fill(m, -2.0), [(3, 4), np.random.default_rng(1).random((3, 4)) < 0.5]),
  ("masked_fill_bcast", lambda x, m: x.masked_fill(m, 3.0), [(2, 3, 4), np.array([True, False, False, True])]),
  ("masked_select", lambda x, m: x.masked_select(m), [(3, 4), np.random.default_rng(2).random((3, 4)) < 0.5]),
  ("masked_select_bcast", lambda x, m: x.masked_select(m), [(2, 3), np.array([False, True, True])]),
]


def _case_params(cases):
  return [pytest.param(*c[1:], id=c[0]) for c in cases]


@pytest.mark.parametrize("fn, shapes, torch_fn", _case_params(VIEW_CASES + PAD_CASES + JOIN_CASES))
def test_views(fn, shapes, torch_fn):
  check(fn, shapes, torch_fn=torch_fn)


@pytest.mark.filterwarnings("ignore:Using a non-tuple sequence")  # torch 2.13 still reads x[[[0, 1], [1, 1]]] as x[[0, 1], [1, 1]], like tinygrad
@pytest.mark.parametrize("fn", _case_params(GETITEM_CASES))
def test_getitem(fn):
  check(fn, [(2, 3, 4)])


# torch has no negative slice steps: compare with flips
NEGSTEP_CASES = [
  ("negstep", lambda x: x[::-1, ::-2], lambda x: x.flip(0, 1)[:, ::2]),
  ("negstep_bounds", lambda x: x[:, 2:0:-1, -1:-4:-2], lambda x: x[:, 1:3].flip(1)[:, :, 1:].flip(2)[:, :, ::2]),
  ("negstep_list", lambda x: x[[1, 0], ::-3], lambda x: x[[1, 0]].flip(1)[:, ::3]),
]


@pytest.mark.parametrize("fn, torch_fn", _case_params(NEGSTEP_CASES))
def test_getitem_negative_step(fn, torch_fn):
  check(fn, [(2, 3, 4)], torch_fn=torch_fn)


@pytest.mark.parametrize("fn, shapes", _case_params(TENSOR_INDEX_CASES + GATHER_CASES))
def test_tensor_indexing(fn, shapes):
  arrays = [s if isinstance(s, np.ndarray) else np.random.default_rng(0).uniform(-2, 2, size=s).astype(np.float32) for s in shapes]
  check(fn, [], inputs=arrays)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
  idx = np.array([[0, 1, 2, 0], [2, 0, 0, 1]], dtype=np.int64)  # repeated targets: the reduction combines them
  x, src = np.random.default_rng(0).uniform(0.5, 2, size=(3, 4)).astype(np.float32), np.random.default_rng(1).uniform(0.5, 2, size=(2, 4)).astype(np.float32)
  check(lambda a, i, s: a.scatter_reduce(0, i, s, reduce, include_self=include_self), [], inputs=[x, idx, src])


@pytest.mark.parametrize("reduce, torch_reduce", [("add", "sum"), ("multiply", "prod")])
def test_scatter_reduce_arg(reduce, torch_reduce):
  idx = np.array([[0, 1, 2, 0], [2, 0, 0, 1]], dtype=np.int64)
  x, src = np.random.default_rng(0).uniform(0.5, 2, size=(3, 4)).astype(np.float32), np.random.default_rng(1).uniform(0.5, 2, size=(2, 4)).astype(np.float32)
  check(lambda a, i, s: a.scatter(0, i, s, reduce=reduce), [], inputs=[x, idx, src],
        torch_fn=lambda a, i, s: a.scatter_reduce(0, i, s, torch_reduce, include_self=True))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.float16])
def test_dtypes_exact(dtype):
  x = (np.random.default_rng(0).integers(-2**15, 2**15, size=(3, 4)) * (1 if dtype != np.int64 else 2**16)).astype(dtype)
  cases = [(lambda t: t[[2, 0], 1::2], None), (lambda t: t[:, [-1, 1]].T, None), (lambda t: t.repeat(2, 1).roll(1, 0), None),
           (lambda t: t.cat(t.flip(0), dim=1), lambda t: torch.cat([t, t.flip(0)], 1)), (lambda t: t.pad((1, 1)), lambda t: F.pad(t, (1, 1))),
           (lambda t: t.gather(1, Tensor([[3, 0], [1, 1], [0, 2]])), lambda t: t.gather(1, torch.tensor([[3, 0], [1, 1], [0, 2]])))]
  for fn, torch_fn in cases: check(fn, [], inputs=[x], grad=False, torch_fn=torch_fn)


@pytest.mark.parametrize("num_classes", [-1, 6])
def test_one_hot(num_classes):
  x = np.array([[0, 3], [2, 1]], dtype=np.int64)
  check(lambda t: t.one_hot(num_classes), [], inputs=[x], grad=False, torch_fn=lambda t: F.one_hot(t, num_classes))


SETITEM_CASES = [
  ("int", lambda: (1,), 5.0), ("slice", lambda: (slice(None), slice(1, 3)), -1.0), ("step", lambda: (Ellipsis, slice(None, None, 2)), [1.0, 2.0]),
  ("bcast", lambda: (slice(None), 0), [[3.0], [4.0]]), ("list", lambda: ([1, 0], slice(None), [3, 1]), [[7.0], [8.0]]),
  ("int_list", lambda: (1, [2, 0]), [1.0, 2.0, 3.0, 4.0]), ("none_ellipsis", lambda: (None, Ellipsis, 1), 0.5),
  ("list_bcast", lambda: (slice(None), [[2], [0]], [1, 3]), 9.0),
]


@pytest.mark.parametrize("idx, v", [pytest.param(*c[1:], id=c[0]) for c in SETITEM_CASES])
def test_setitem(idx, v):
  x = np.random.default_rng(0).uniform(-2, 2, size=(2, 3, 4)).astype(np.float32)
  ours, theirs = Tensor(x.copy()), torch.tensor(x.copy())
  ours[idx()] = Tensor(v) if isinstance(v, list) else v
  theirs[idx()] = torch.tensor(v) if isinstance(v, list) else v
  np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
