"""Movement and indexing ops against numpy: views (reshape, permute, expand, pad in every mode, shrink, flip), their
compositions (cat, stack, split, chunk, repeat, roll, meshgrid, tril/triu), indexing (__getitem__ with basic and tensor
indices, __setitem__), gather/scatter, one_hot and masks; plus the errors for bad arguments. Tensors stay tiny: the suite
runs on DEV=PYTHON too."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
B = np.arange(20, dtype=np.int32).reshape(4, 5) * 3 - 20


def same(t: Tensor, expected, dtype=None) -> None:
  expected = np.asarray(expected)
  if dtype is not None: assert t.dtype == dtype, f"dtype {t.dtype} != {dtype}"
  # empty results: shape only (realizing a 0-element view of a buffer runs an out-of-bounds kernel, a scheduler issue)
  if expected.size == 0:
    assert t.shape == expected.shape, f"shape {t.shape} != {expected.shape}"
    return
  got = t.numpy()
  assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
  np.testing.assert_array_equal(got, expected.astype(got.dtype) if expected.dtype != got.dtype else expected)


# ---- views and shape ops

def test_reshape_view_infer():
  t = Tensor(A)
  same(t.reshape(4, -1), A.reshape(4, -1))
  same(t.view(-1), A.reshape(-1))
  same(t.view((3, 8)), A.reshape(3, 8))
  same(t.reshape(None, 12), A.reshape(2, 12))
  assert t.reshape(2, 3, 4) is t


def test_permute_transpose_flatten_unflatten():
  t = Tensor(A)
  same(t.permute(2, 0, 1), A.transpose(2, 0, 1))
  same(t.permute((1, -1, 0)), A.transpose(1, 2, 0))
  same(t.transpose(), A.swapaxes(0, 1))
  same(t.transpose(-1, 0), A.swapaxes(-1, 0))
  same(t.T, A.T)
  same(t.flatten(), A.reshape(-1))
  same(t.flatten(1), A.reshape(2, 12))
  same(t.flatten(0, 1), A.reshape(6, 4))
  same(t.flatten(-2, -1), A.reshape(2, 12))
  same(Tensor(3.0).flatten(), np.array([3.0]))
  same(t.unflatten(2, (2, 2)), A.reshape(2, 3, 2, 2))
  same(t.unflatten(-1, (-1, 1)), A.reshape(2, 3, 4, 1))


def test_squeeze_unsqueeze():
  a = A.reshape(2, 1, 3, 1, 4)
  t = Tensor(a)
  same(t.squeeze(), a.squeeze())
  same(t.squeeze(1), a.squeeze(1))
  same(t.squeeze(-2), a.squeeze(-2))
  same(t.squeeze(0), a)  # not size 1: unchanged
  same(t.squeeze((1, 3)), a.squeeze((1, 3)))
  same(t.squeeze((0, 1)), a.squeeze(1))
  same(Tensor(A).unsqueeze(0), A[None])
  same(Tensor(A).unsqueeze(-1), A[..., None])
  same(Tensor(A).unsqueeze(3), A[..., None])
  same(Tensor(A).unsqueeze(-4), A[None])
  assert Tensor(2.0).squeeze().shape == () and Tensor(2.0).squeeze(0).shape == () and Tensor(2.0).unsqueeze(0).shape == (1,)
  with pytest.raises(IndexError):
    Tensor(A).unsqueeze(4)
  with pytest.raises(IndexError):
    Tensor(A).squeeze(3)


def test_expand_repeat_interleave():
  a = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
  same(Tensor(a).expand(3, 4), np.broadcast_to(a, (3, 4)))
  same(Tensor(a).expand(2, -1, 5), np.broadcast_to(a, (2, 3, 5)))
  same(Tensor(A).repeat(2, 1, 3), np.tile(A, (2, 1, 3)))
  same(Tensor(A).repeat((2, 1, 1, 2)), np.tile(A, (2, 1, 1, 2)))
  same(Tensor(B).repeat(1, 0), np.tile(B, (1, 0)))
  same(Tensor(A).repeat_interleave(2), np.repeat(A, 2))
  same(Tensor(A).repeat_interleave(3, dim=1), np.repeat(A, 3, axis=1))
  same(Tensor(B).repeat_interleave(2, -1), np.repeat(B, 2, axis=-1))
  with pytest.raises(ValueError):
    Tensor(A).repeat(2, 2)


@pytest.mark.parametrize("padding, np_pad", [
  (((1, 1), (0, 2), (2, 0)), ((1, 1), (0, 2), (2, 0))),
  ((1, 2), ((0, 0), (0, 0), (1, 2))),
  ((1, 0, 2, 1), ((0, 0), (2, 1), (1, 0))),
  ((None, (1, 1), None), ((0, 0), (1, 1), (0, 0))),
])
@pytest.mark.parametrize("mode, np_mode", [("constant", "constant"), ("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes(padding, np_pad, mode, np_mode):
  same(Tensor(A).pad(padding, mode=mode), np.pad(A, np_pad, mode=np_mode))


def test_pad_constant_values_and_negative():
  same(Tensor(A).pad(((1, 1), (0, 0), (0, 2)), value=-3.5), np.pad(A, ((1, 1), (0, 0), (0, 2)), constant_values=-3.5))
  same(Tensor(A).pad((1, -2, -1, 1)), np.pad(A[:, 1:, :-2], ((0, 0), (0, 1), (1, 0))))
  same(Tensor(A).pad(((0, 0), (-1, -1), (2, -3)), value=1.0), np.pad(A[:, 1:-1, :-3], ((0, 0), (0, 0), (2, 0)), constant_values=1.0))
  t = Tensor(B).pad((1, 1), value=7)
  assert t.dtype == dtypes.int32
  same(t, np.pad(B, ((0, 0), (1, 1)), constant_values=7))
  assert Tensor(B).pad((1, 1), value=0.5).dtype == dtypes.float32


@pytest.mark.parametrize("padding", [(-1, -1), (0, 0), (-1, 1)])
def test_pad_constant_dtype_without_fill(padding):
  # the result's dtype is the fill's (float for an int tensor and 0.5) whether or not any element is filled in (tinygrad 0.14)
  b, a = padding
  expected = np.pad(B[:, max(-b, 0):B.shape[1] - max(-a, 0)].astype(np.float32), ((0, 0), (max(b, 0), max(a, 0))), constant_values=0.5)
  same(Tensor(B).pad(padding, value=0.5), expected, dtypes.float32)
  assert Tensor(B).pad(padding, value=7).dtype == dtypes.int32


def test_pad_negative_reflect_replicate():
  x = np.arange(5, dtype=np.float32)
  same(Tensor(x).pad((-1, 2), mode="reflect"), np.pad(x, (0, 2), mode="reflect")[1:])
  same(Tensor(x).pad((2, -2), mode="replicate"), np.pad(x, (2, 0), mode="edge")[:-2])


def test_pad_errors():
  with pytest.raises(NotImplementedError, match="wrap"):
    Tensor(A).pad((1, 1), mode="wrap")
  with pytest.raises(ValueError, match="reflect"):
    Tensor(A).pad((4, 0), mode="reflect")
  with pytest.raises(ValueError, match="circular"):
    Tensor(A).pad((5, 0), mode="circular")
  same(Tensor(A).pad((-1, 0), mode="circular"), A[..., 1:])  # negative circular pads shrink (tinygrad, torch)
  with pytest.raises(ValueError):
    Tensor(A).pad((1, 1, 1))
  with pytest.raises(ValueError):
    Tensor(A).pad((1, 1) * 4)
  with pytest.raises(ValueError):
    Tensor(A).pad(((1, 1), (1, 1)))


def test_shrink_pad_to_shrink_to_flip():
  same(Tensor(A).shrink(((1, 2), None, (1, 3))), A[1:2, :, 1:3])
  same(Tensor(A).pad_to(3, None, 6), np.pad(A, ((0, 1), (0, 0), (0, 2))))
  same(Tensor(A).shrink_to(1, 2, None), A[:1, :2])
  same(Tensor(A).flip(0), A[::-1])
  same(Tensor(A).flip(-1, 1), A[:, ::-1, ::-1])
  same(Tensor(A).flip((0, 2)), A[::-1, :, ::-1])
  with pytest.raises(ValueError):
    Tensor(A).shrink(((0, 3), None, None))


@pytest.mark.parametrize("shifts, dims", [(1, 0), (-2, 2), ((1, 2), (0, 1)), ((5, -1), (2, -3)), (3, None), (0, 1), (-7, None)])
def test_roll(shifts, dims):
  same(Tensor(A).roll(shifts, dims), np.roll(A, shifts, dims))


def test_roll_errors():
  with pytest.raises(ValueError):
    Tensor(A).roll((1, 2), 0)
  with pytest.raises(IndexError):
    Tensor(A).roll(1, 3)


@pytest.mark.parametrize("formula, sizes, ref", [
  ("b c w -> b w c", {}, lambda a: a.transpose(0, 2, 1)),
  ("b c (h w) -> b h w c", {"h": 2}, lambda a: a.reshape(2, 3, 2, 2).transpose(0, 2, 3, 1)),
  ("b c (h w) -> (b h) (w c)", {"w": 1}, lambda a: a.reshape(2, 3, 4, 1).transpose(0, 2, 3, 1).reshape(8, 3)),
  ("b ... -> (b ...)", {}, lambda a: a.reshape(-1)),
  ("... w -> w ...", {}, lambda a: a.transpose(2, 0, 1)),
  ("b ... -> b (...)", {}, lambda a: a.reshape(2, 12)),
  ("b c w -> b 1 (c w) ()", {}, lambda a: a.reshape(2, 1, 12, 1)),
])
def test_rearrange(formula, sizes, ref):
  same(Tensor(A).rearrange(formula, **sizes), ref(A))


@pytest.mark.parametrize("formula, sizes", [("a b -> a b", {}), ("a b c -> a b", {}), ("a b c -> a b b", {}), ("a (b c) d -> a b c d", {}),
                                            ("a b c -> a b c", {"x": 1}), ("a (b c) d -> a b c d", {"b": 5}), ("a b c -> a (b c", {}),
                                            ("a b c", {}), ("a b 2c -> a b 2c", {}), ("a (... b) -> a ... b", {})])
def test_rearrange_errors(formula, sizes):
  with pytest.raises(ValueError):
    Tensor(A).rearrange(formula, **sizes)


# ---- joining and splitting

def test_cat_stack():
  a, b = A, A[:, :2] * 2
  same(Tensor(a).cat(Tensor(b), dim=1), np.concatenate([a, b], 1))
  same(Tensor(a).cat(Tensor(a), Tensor(a), dim=-1), np.concatenate([a, a, a], -1))
  same(Tensor.cat(Tensor(a), Tensor(a)), np.concatenate([a, a]))
  same(Tensor(a).stack(Tensor(a + 1)), np.stack([a, a + 1]))
  same(Tensor(a).stack(Tensor(a + 1), dim=-1), np.stack([a, a + 1], -1))
  same(Tensor.stack(Tensor(a), Tensor(a), Tensor(a), dim=2), np.stack([a, a, a], 2))
  same(Tensor(a).cat(dim=1), a)
  same(Tensor(np.zeros((2, 0), np.float32)).cat(Tensor(B[:2]), dim=1), B[:2])


def test_cat_dtypes():
  t = Tensor(B).cat(Tensor(B.astype(np.float32) / 2))
  assert t.dtype == dtypes.float32
  same(t, np.concatenate([B, B / 2]).astype(np.float32))
  m = np.array([[True, False], [False, False]])
  c = Tensor(m).cat(Tensor(~m), dim=1)
  assert c.dtype == dtypes.bool
  same(c, np.concatenate([m, ~m], 1))
  big = np.array([2**31 - 1, -2**31, 123456789], dtype=np.int32)
  same(Tensor(big).cat(Tensor(big[::-1].copy())), np.concatenate([big, big[::-1]]), dtypes.int32)


def test_cat_stack_errors():
  with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
    Tensor(A).cat(Tensor.ones(2, 2, 2), dim=1)
  with pytest.raises(ValueError):
    Tensor(A).cat(Tensor.ones(2, 3))
  with pytest.raises(IndexError):
    Tensor(A).cat(Tensor(A), dim=3)
  with pytest.raises(ValueError):
    Tensor(1.0).cat(Tensor(2.0))
  with pytest.raises(ValueError, match="stack"):
    Tensor(A).stack(Tensor(A[:, :1]))
  with pytest.raises(IndexError):
    Tensor(A).stack(Tensor(A), dim=4)


def test_split_chunk():
  parts = Tensor(A).split(1)  # tinygrad 0.14 and torch: along dim 0 by default
  assert isinstance(parts, tuple) and len(parts) == 2
  for p, e in zip(parts, np.split(A, 2, 0)): same(p, e)
  assert [p.shape for p in Tensor(A).split([1, 1])] == [(1, 3, 4), (1, 3, 4)]
  parts = Tensor(A).split(2, dim=-1)
  for p, e in zip(parts, np.split(A, 2, -1)): same(p, e)
  parts = Tensor(A).split(2, dim=1)
  assert [p.shape for p in parts] == [(2, 2, 4), (2, 1, 4)]
  same(parts[1], A[:, 2:])
  parts = Tensor(A).split([1, 0, 3], dim=-1)
  assert [p.shape for p in parts] == [(2, 3, 1), (2, 3, 0), (2, 3, 3)]
  same(parts[2], A[..., 1:])
  chunks = Tensor(A).chunk(2, dim=1)
  assert isinstance(chunks, list) and [c.shape for c in chunks] == [(2, 2, 4), (2, 1, 4)]
  assert [c.shape for c in Tensor(A).chunk(3, -1)] == [(2, 3, 2), (2, 3, 2)]
  assert [c.shape for c in Tensor(A).chunk(2)] == [(1, 3, 4), (1, 3, 4)]  # dim 0 by default
  assert [c.shape for c in Tensor(A).chunk(5, 0)] == [(1, 3, 4), (1, 3, 4)]
  same(Tensor(A).chunk(4, dim=-1)[3], A[..., 3:])
  with pytest.raises(ValueError):
    Tensor(A).split([1, 1], dim=1)
  with pytest.raises(ValueError):
    Tensor(A).chunk(0)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
  x, y, z = np.array([1, 2, 3]), np.array([4, 5]), np.array([6, 7, 8, 9])
  for got, exp in zip(Tensor(x).meshgrid(Tensor(y), Tensor(z), indexing=indexing), np.meshgrid(x, y, z, indexing=indexing)):
    same(got, exp)
  with pytest.raises(ValueError):
    Tensor(x).meshgrid(Tensor(y), indexing="yx")


@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
def test_tril_triu(diagonal):
  same(Tensor(A).triu(diagonal), np.triu(A, diagonal))
  same(Tensor(B).tril(diagonal), np.tril(B, diagonal), dtypes.int32)


# ---- indexing

class _Idx:
  def __getitem__(self, i): return i


I = _Idx()
GETITEM_CASES = [
  I[1], I[-1], I[0, 2], I[1, -1, -4], I[:], I[...], I[:, 1:], I[:, ::2], I[..., ::-1], I[::-1, ::-2, 1::3], I[:, 2:0:-1],
  I[:, -1:-4:-2], I[None], I[:, None, ..., None], I[1, None, :, None, 2], I[..., 0], I[0, ...], I[..., 1, :], I[5:], I[:, 3:1],
  I[[1, 0]], I[[0, 0, 1]], I[:, [2, 0, 2]], I[..., [-1, 0]], I[[1, 0], [2, 0]], I[[[0, 1], [1, 1]]], I[:, [[0], [2]], [1, 3]],
  I[[1, 0], :, [3, 2]], I[:, :, [1]], I[1, [2, 0], ::2], I[[0, 1], 1:, [[1], [0]]], I[None, [1], ..., 2],
]


def _np_getitem(a, idx):
  """numpy's result, with torch's rule that ints index before tensor indices (numpy counts them as advanced)."""
  if isinstance(idx, list) and not all(isinstance(i, int) for i in idx): idx = tuple(idx)  # torch/tinygrad: a list of lists is a tuple
  parts = list(idx) if isinstance(idx, tuple) else [idx]
  if any(isinstance(p, list) for p in parts) and any(isinstance(p, int) for p in parts): return _int_first(a, parts)
  return a[idx]


def _int_first(a, parts):
  # walk the dims: replace each int by its selection, then apply the remaining index to the reduced array
  full = []
  n_real = sum(1 for p in parts if p is not None and p is not Ellipsis)
  for p in parts:
    if p is Ellipsis: full.extend([slice(None)] * (a.ndim - n_real))
    else: full.append(p)
  full.extend([slice(None)] * (a.ndim - sum(1 for p in full if p is not None)))
  sel = tuple(p if isinstance(p, int) else slice(None) for p in full if p is not None)
  reduced = a[sel]
  rest = tuple(p for p in full if not isinstance(p, int))
  return reduced[rest]


@pytest.mark.parametrize("idx", GETITEM_CASES, ids=[str(i) for i in GETITEM_CASES])
def test_getitem(idx):
  same(Tensor(A)[idx], _np_getitem(A, idx))


def test_getitem_tensor_indices():
  idx = np.array([[2, -1], [0, -3]])
  same(Tensor(A)[:, Tensor(idx)], A[:, idx])
  same(Tensor(A)[Tensor([1, 0]), Tensor([[0], [2]])], A[np.array([1, 0]), np.array([[0], [2]])])
  same(Tensor(A)[Tensor(1)], A[1])
  same(Tensor(A)[0, Tensor(np.array([0, 2], dtype=np.uint8))], A[0, [0, 2]])
  same(Tensor(B)[np.array([3, 1])], B[[3, 1]])
  same(Tensor(A)[:, []], A[:, []])


def test_getitem_exact_dtypes():
  big = np.array([[2**31 - 1, -2**31, 7], [123456789, -987654321, 0]], dtype=np.int32)
  same(Tensor(big)[[1, 0, 1], [0, 1, 1]], big[[1, 0, 1], [0, 1, 1]], dtypes.int32)
  same(Tensor(big)[:, [2, 0]], big[:, [2, 0]], dtypes.int32)
  m = np.array([[True, False, True], [False, False, True]])
  same(Tensor(m)[[1, 0], [2, 1]], m[[1, 0], [2, 1]], dtypes.bool)
  h = np.array([1.5, -2.25, 65504.0, 1e-3], dtype=np.float16)
  same(Tensor(h)[[2, 0, 3]], h[[2, 0, 3]], dtypes.float16)
  u = np.array([255, 0, 128], dtype=np.uint8)
  same(Tensor(u)[[2, 0]], u[[2, 0]], dtypes.uint8)


def test_getitem_errors():
  t = Tensor(A)
  with pytest.raises(IndexError):
    t[2]
  with pytest.raises(IndexError):
    t[0, -4]
  with pytest.raises(IndexError):
    t[0, 0, 0, 0]
  with pytest.raises(IndexError):
    t[..., 0, ...]
  with pytest.raises(IndexError):
    t[1.5]
  with pytest.raises(IndexError):
    t[Tensor([0.0, 1.0])]
  with pytest.raises(IndexError):
    t[[0, 1], [[0, 1, 2]]]
  with pytest.raises(ValueError):
    t[::0]


def test_getitem_gradients():
  a = Tensor(A, requires_grad=True)
  a[[0, 1, 0], 1, ::2].sum().backward()
  g = np.zeros_like(A)
  np.add.at(g, ([0, 1, 0], 1, slice(None, None, 2)), 1.0)
  same(a.grad, g)
  b = Tensor(B.astype(np.float32), requires_grad=True)
  (b[:, [4, -1, 0]] * Tensor([1.0, 2.0, 3.0])).sum().backward()
  g = np.zeros((4, 5), np.float32)
  g[:, 4] = 3.0
  g[:, 0] = 3.0
  same(b.grad, g)


SETITEM_CASES = [
  (I[1], 5.0), (I[:, 1:3], -1.0), (I[..., ::2], np.arange(2, dtype=np.float32)), (I[::-1, 0], np.array([[1.0], [2.0]], np.float32)),
  (I[0, ::-2, 1:], np.arange(6, dtype=np.float32).reshape(2, 3)), (I[None, 1], 3.0), (I[[1, 0]], np.ones((1, 3, 4), np.float32)),
  (I[:, [2, 0], [1, 3]], np.array([10.0, 20.0], np.float32)), (I[[0, 1], 1:, [[1], [0]]], 9.0), (I[[1], :, [0, 2]], np.arange(6, dtype=np.float32).reshape(2, 3)),
]


@pytest.mark.parametrize("idx, v", SETITEM_CASES, ids=[str(i) for i, _ in SETITEM_CASES])
def test_setitem(idx, v):
  t = Tensor(A.copy())
  t[idx] = Tensor(v) if isinstance(v, np.ndarray) else v
  ref = A.copy()
  ref[idx] = v
  same(t, ref)


def test_setitem_sequences_and_self_reads():
  t = Tensor.zeros(3, 4)  # lazy: the first write realizes it
  t[0] = 1.0
  t[1, 1:] = Tensor([2.0, 3.0, 4.0])
  t[2] = t[1] * 2  # reads a pending write
  ref = np.zeros((3, 4), np.float32)
  ref[0] = 1.0
  ref[1, 1:] = [2.0, 3.0, 4.0]
  ref[2] = ref[1] * 2
  same(t, ref)
  t[1:] = t[:-1]  # the value overlaps the written region
  ref[1:] = ref[:-1].copy()
  same(t, ref)
  t[:, [0, 3]] = t[:, [3, 0]]
  ref[:, [0, 3]] = ref[:, [3, 0]].copy()
  same(t, ref)
  t[t[0, 1:3].cast(dtypes.int32)] = -1.0  # the index reads the tensor being written
  ref[ref[0, 1:3].astype(np.int32)] = -1.0
  same(t, ref)
  t[[], 1] = 5.0  # these write nothing
  t[2:2] = 5.0
  same(t, ref)
  x = Tensor(np.arange(4, dtype=np.int32))
  x[0] = x[0] + 1
  x[0] = x[0] + 1
  same(x, [2, 1, 2, 3], dtypes.int32)


def test_setitem_casts_value_and_repeated_index_last_wins():
  t = Tensor(B.copy())
  t[0] = 2.7  # cast to the tensor's dtype
  t[[1, 1, 1], [0, 0, 0]] = Tensor([7, 8, 9])
  ref = B.copy()
  ref[0] = 2
  ref[1, 0] = 9
  same(t, ref, dtypes.int32)


def test_setitem_errors():
  t = Tensor(A.copy()).realize()
  # a view of t is written through (tinygrad and torch): t[0][1] = 3.0 sets t[0, 1]
  t[0][1] = 3.0
  v = t.T
  v[0] = 1.0
  expect = A.copy()
  expect[0, 1] = 3.0
  expect.T[0] = 1.0
  same(t, expect)
  same(v, expect.T)
  w = t[:, ::2]  # a strided view is written through too (torch; tinygrad 0.14 for 1-d ones)
  w[0] = 1.0
  expect[:, ::2][0] = 1.0
  same(t, expect)
  t[:, ::2].assign(Tensor.zeros(2, 2, 4))
  expect[:, ::2] = 0
  same(t, expect)
  t[:, :, ::2].assign(Tensor.zeros(2, 3, 2))  # a stride that divides the dim is a reshape and a shrink: written through
  expect[:, :, ::2] = 0
  same(t, expect)
  t = Tensor(A.copy()).realize()
  with pytest.raises(NotImplementedError):
    Tensor(A, requires_grad=True)[0] = 1.0
  with pytest.raises(ValueError, match="broadcast"):
    t[0] = Tensor.ones(2, 2)
  with pytest.raises(IndexError):
    t[3] = 1.0


def test_assign():
  t = Tensor(np.zeros(3, np.float32))
  t.assign(Tensor([1.0, 2.0, 3.0]))
  same(t, [1.0, 2.0, 3.0])
  t += 1
  same(t, [2.0, 3.0, 4.0])
  with pytest.raises(ValueError):
    t.assign(Tensor([1.0, 2.0]))


# ---- gather / scatter / masks

def _np_gather(a, dim, idx):
  out = np.empty(idx.shape, a.dtype)
  for pos in np.ndindex(idx.shape):
    src = list(pos)
    src[dim] = idx[pos]
    out[pos] = a[tuple(src)]
  return out


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
  rng = np.random.default_rng(0)
  idx = rng.integers(0, A.shape[dim], size=[3 if i == dim % 3 else min(s, 2) for i, s in enumerate(A.shape)])
  same(Tensor(A).gather(dim, Tensor(idx)), _np_gather(A, dim % 3, idx))
  same(Tensor(B).gather(0, Tensor([[3, 0, 1, 2, 2]])), _np_gather(B, 0, np.array([[3, 0, 1, 2, 2]])), dtypes.int32)


def test_gather_errors():
  with pytest.raises(ValueError):
    Tensor(A).gather(0, Tensor([0, 1]))
  with pytest.raises(ValueError):
    Tensor(B).gather(0, Tensor([[0] * 6]))
  with pytest.raises(IndexError):
    Tensor(B).gather(2, Tensor([[0]]))


def _np_scatter(a, dim, idx, src, op=None, include_self=True):
  out = a.copy().astype(np.float64)
  groups: dict = {}
  for pos in np.ndindex(idx.shape):
    dst = list(pos)
    dst[dim] = idx[pos]
    groups.setdefault(tuple(dst), []).append(src[pos] if np.ndim(src) else src)
  for dst, vals in groups.items():
    if op is None: out[dst] = vals[-1]
    else:
      vals = ([a[dst]] if include_self else []) + vals
      out[dst] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[op](vals)
  return out


def test_scatter():
  idx = np.array([[0, 1, 2, 0], [2, 0, 0, 1]])
  src = np.arange(1, 13, dtype=np.float32).reshape(2, 6)
  base = np.zeros((3, 5), np.float32)
  same(Tensor(base).scatter(0, Tensor(idx), Tensor(src)), _np_scatter(base, 0, idx, src))
  same(Tensor(base).scatter(1, Tensor(np.array([[4, 0], [1, 1]])), Tensor(src)), _np_scatter(base, 1, np.array([[4, 0], [1, 1]]), src))
  same(Tensor(base).scatter(0, Tensor(idx), 2.5), _np_scatter(base, 0, idx, 2.5))
  same(Tensor(base + 1).scatter(0, Tensor(idx), Tensor(src), reduce="add"), _np_scatter(base + 1, 0, idx, src, "sum"))
  same(Tensor(base + 2).scatter(0, Tensor(idx), Tensor(src), reduce="multiply"), _np_scatter(base + 2, 0, idx, src, "prod"))
  ib = np.array([[1, 0, 1]], dtype=np.int32)
  same(Tensor(B[:2]).scatter(0, Tensor(ib), Tensor(np.array([[5, 6, 7]], np.int32))), _np_scatter(B[:2], 0, ib, np.array([[5, 6, 7]])),
       dtypes.int32)
  with pytest.raises(TypeError):
    Tensor(base).scatter(0, Tensor(idx), Tensor(src), reduce="max")
  with pytest.raises(RuntimeError):
    Tensor(base).scatter(0, Tensor(idx), Tensor(src.astype(np.int32)))
  with pytest.raises(ValueError):
    Tensor(base).scatter(0, Tensor(idx), Tensor(src[:1]))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
  idx = np.array([[0, 1, 2, 0], [2, 0, 0, 1]])
  src = (np.arange(1, 9, dtype=np.float32).reshape(2, 4) - 4) / 2
  base = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)
  got = Tensor(base).scatter_reduce(0, Tensor(idx), Tensor(src), reduce, include_self=include_self)
  np.testing.assert_allclose(got.numpy(), _np_scatter(base, 0, idx, src, reduce, include_self), rtol=1e-6, atol=1e-6)


def test_scatter_reduce_bad_mode():
  with pytest.raises(RuntimeError):
    Tensor.zeros(2, 2).scatter_reduce(0, Tensor([[0, 1]]), Tensor.ones(1, 2), "max")


def test_one_hot():
  x = np.array([[0, 2], [3, 1]])
  t = Tensor(x).one_hot()
  assert t.dtype == dtypes.int32
  same(t, np.eye(4, dtype=np.int32)[x])
  same(Tensor([1, 0]).one_hot(3), np.eye(3, dtype=np.int32)[[1, 0]])
  with pytest.raises(TypeError):
    Tensor([0.0, 1.0]).one_hot(2)


def test_masked_fill_select():
  m = A > 0
  same(Tensor(A).masked_fill(Tensor(m), -1.0), np.where(m, -1.0, A))
  same(Tensor(A).masked_fill(Tensor(m[0, 0]), Tensor(2.0)), np.where(m[0, 0], 2.0, A))
  same(Tensor(A).masked_select(Tensor(m)), A[m])
  same(Tensor(B).masked_select(Tensor(B % 2 == 0)), B[B % 2 == 0], dtypes.int32)
  same(Tensor(A).masked_select(Tensor(np.array([True, False, False, True]))), A[:, :, [True, False, False, True]].reshape(-1))
  same(Tensor(A).masked_select(Tensor(np.zeros_like(m))), np.zeros(0, np.float32))
  with pytest.raises(TypeError):
    Tensor(A).masked_select(Tensor(A))


def test_gradients_flow():
  x = Tensor(A, requires_grad=True)
  y = Tensor(A[:, :1], requires_grad=True)
  out = x.cat(y, dim=1).pad((1, 1), mode="reflect").roll(1, 2).gather(2, Tensor(np.zeros((2, 4, 1), np.int64)))
  out.sum().backward()
  assert x.grad is not None and y.grad is not None and x.grad.shape == A.shape
  # column 0 of the rolled tensor is the last padded column, which reflects column 2 of the cat
  g = np.zeros_like(A)
  g[:, :, 2] = 1.0
  same(x.grad, g)
  same(y.grad, np.zeros((2, 1, 4), np.float32) + np.array([0, 0, 1, 0], np.float32))


def test_assign_into_an_empty_view_writes_nothing():
  """An empty view (t[1:-1:-2, :2], t[-1:10:-2]) has nothing to write: its store kernel dropped the zero-sized dim and wrote
  t[0, :2] (or past the buffer's end: a segfault). Found by api_fuzz seed 79 (assign/3, augmented/17)."""
  t = Tensor(B.copy()).realize()
  t[1:-1:-2, :2].assign(Tensor.zeros(0, 2, dtype=dtypes.int32))
  v = t[-1:10:-2]
  v *= Tensor.zeros(0, 5, dtype=dtypes.int32)
  t[3:1] = 7
  same(t, B)
  # the scheduler skips such an ASSIGN too, however it was built (not only through Tensor.assign)
  from tinygrad.uop.ops import Ops, UOp
  view = t[1:-1:-2, :2]
  Tensor(UOp(Ops.ASSIGN, view.dtype, (view.uop, Tensor.zeros(0, 2, dtype=dtypes.int32).uop))).realize()
  same(t, B)


def test_strided_views_are_written_through():
  """v = t[::2] (a stride that doesn't divide the dim, or a negative step) is a view of t's buffer: assign, += and setitem
  on it write t's elements, as torch (tinygrad 0.14 for 1-d views); they raised here. Found by api_fuzz seed 79 (augmented/3)."""
  t = Tensor(B.copy()).realize()
  row = t[1]
  v = t[::3, 1::2]
  v += 100
  w = t[3:0:-2, ::-3]
  w.assign(Tensor([[-1, -2], [-3, -4]], dtype=dtypes.int32))
  s = t[0, ::2]
  s[1] = 50
  s[[0, 2]] = Tensor([-7, -9], dtype=dtypes.int32)
  ref = B.copy()
  ref[::3, 1::2] += 100
  ref[3:0:-2, ::-3] = [[-1, -2], [-3, -4]]
  ref[0, ::2][1] = 50
  ref[0, ::2][[0, 2]] = [-7, -9]
  same(t, ref)
  same(row, ref[1])
  same(v, ref[::3, 1::2])
  f = Tensor([1.0, 2.0, 3.0, 4.0]).contiguous().realize()
  h = f[1:0:-2]
  h //= 3
  same(f, np.array([1.0, 0.0, 3.0, 4.0], dtype=np.float32))
