"""Bad input gives clear errors (raised while building the graph, so they hold on NULL too); and data goes in and comes
back out unchanged: lists, nested lists, numpy arrays of every dtype, Python scalars, float16 and bfloat16."""
import math

import numpy as np
import pytest
from tinygrad import Tensor, dtypes

# ---- errors: nothing here runs a kernel


@pytest.mark.compile_only
def test_broadcast_mismatch_names_both_shapes():
  with pytest.raises(ValueError) as e:
    Tensor.ones(2, 3) + Tensor.ones(4, 3)
  assert "(2, 3)" in str(e.value) and "(4, 3)" in str(e.value)
  with pytest.raises(ValueError, match=r"\(3,\)"):
    Tensor.ones(2, 3).where(Tensor.ones(3), Tensor.ones(2, 1, 4))


@pytest.mark.compile_only
def test_reshape_wrong_size():
  with pytest.raises(ValueError) as e:
    Tensor.ones(2, 3).reshape(4, 2)
  assert "(2, 3)" in str(e.value) and "(4, 2)" in str(e.value)
  with pytest.raises(ValueError):
    Tensor.ones(2, 3).reshape(-1, 4)
  with pytest.raises(ValueError):
    Tensor.ones(2, 3).reshape(-1, -1)


@pytest.mark.compile_only
def test_matmul_shape_mismatch():
  with pytest.raises(ValueError) as e:
    Tensor.ones(2, 3) @ Tensor.ones(2, 3)
  assert "(2, 3)" in str(e.value)
  with pytest.raises(ValueError):
    Tensor.ones(4).dot(Tensor.ones(5))
  with pytest.raises((ValueError, RuntimeError)):
    Tensor.ones(()) @ Tensor.ones(3)


@pytest.mark.compile_only
def test_permute_bad_axes():
  with pytest.raises(ValueError, match="permute"):
    Tensor.ones(2, 3).permute(0, 0)
  with pytest.raises((ValueError, IndexError)):
    Tensor.ones(2, 3).permute(0, 5)
  with pytest.raises((ValueError, IndexError)):
    Tensor.ones(2, 3, 4).permute(0, 1)


@pytest.mark.compile_only
def test_getitem_out_of_range():
  t = Tensor.ones(2, 3)
  with pytest.raises(IndexError, match="2"):
    t[2]
  with pytest.raises(IndexError):
    t[0, -4]
  with pytest.raises(IndexError):
    t[0, 0, 0]
  with pytest.raises(IndexError):
    t[..., ...]


@pytest.mark.compile_only
def test_other_view_errors():
  with pytest.raises(ValueError):
    Tensor.ones(2).expand(3)
  with pytest.raises(ValueError):
    Tensor.ones(2, 2).pad(((1, 1),))
  with pytest.raises(ValueError):
    Tensor.ones(2, 2).shrink(((0, 3), (0, 1)))
  with pytest.raises(IndexError):
    Tensor.ones(3).sum(2)
  with pytest.raises(IndexError):
    Tensor.ones(3).transpose(0, 3)


@pytest.mark.compile_only
def test_item_on_many_elements():
  with pytest.raises(ValueError, match=r"\(2, 3\)"):
    Tensor.ones(2, 3).item()


@pytest.mark.compile_only
def test_bitcast_size_mismatch():
  with pytest.raises((ValueError, RuntimeError)):  # 3 bytes can't hold whole int32s
    Tensor.ones(3, dtype=dtypes.uint8).bitcast(dtypes.int32)
  with pytest.raises((ValueError, RuntimeError)):
    Tensor.ones(3, dtype=dtypes.float32).bitcast(dtypes.float64)


def test_bitcast_to_other_size_changes_last_dim():
  # tinygrad: a bitcast between sizes reinterprets the last axis when its bytes divide evenly
  a = np.array([1.0, -2.5, 3.25], dtype=np.float32)
  t = Tensor(a).bitcast(dtypes.uint16)
  assert t.shape == (6,) and t.dtype == dtypes.uint16
  np.testing.assert_array_equal(t.numpy(), a.view(np.uint16))
  b = np.arange(8, dtype=np.uint8).reshape(2, 4)
  np.testing.assert_array_equal(Tensor(b).bitcast(dtypes.int32).numpy(), b.view(np.int32))


@pytest.mark.compile_only
def test_unknown_dtype_suggests_close_name():
  with pytest.raises((ValueError, AttributeError, KeyError)) as e:
    Tensor([1], dtype="flaot32")
  assert "float32" in str(e.value)
  with pytest.raises((ValueError, AttributeError, KeyError)) as e:
    Tensor.ones(2).cast("int23")
  assert "int32" in str(e.value)


@pytest.mark.compile_only
def test_bool_of_tensor_raises():
  with pytest.raises(TypeError):
    bool(Tensor(1))
  with pytest.raises(TypeError):
    if Tensor([1.0, 2.0]) > 0: pass
  with pytest.raises(TypeError):
    Tensor([1, 2]) and Tensor([3])


@pytest.mark.compile_only
def test_bad_data_types():
  with pytest.raises(ValueError, match="ragged"):
    Tensor([[1, 2], [3]])
  with pytest.raises(TypeError):
    Tensor("abc")
  with pytest.raises(TypeError):
    Tensor(np.array(["a", "b"]))
  with pytest.raises(TypeError):
    Tensor.ones(2) + "a"
  with pytest.raises(TypeError):
    len(Tensor(1.0))


# ---- data conversion: these read values back


def test_from_list():
  t = Tensor([1, 2, 3])
  assert t.dtype == dtypes.int32 and t.shape == (3,)
  assert t.tolist() == [1, 2, 3]
  f = Tensor([1.5, 2, -3])
  assert f.dtype == dtypes.float32
  assert f.tolist() == [1.5, 2.0, -3.0]
  b = Tensor([True, False, True])
  assert b.dtype == dtypes.bool
  assert b.tolist() == [True, False, True] and all(type(x) is bool for x in b.tolist())
  assert Tensor((4, 5)).tolist() == [4, 5]
  assert Tensor([1, 2], dtype=dtypes.float32).tolist() == [1.0, 2.0]
  assert Tensor([1.9, -1.9], dtype="int32").tolist() == [1, -1]


def test_from_list_packs_like_a_cast():
  """Lists of plain ints or floats are packed at once (a 512-token prompt's ids took 10 ms element by element); the values must
  be those a cast gives: ints wrap into unsigned dtypes, floats round to float32 (inf past its range), out of range raises."""
  ids = list(range(-3, 509))
  assert Tensor([ids], dtype=dtypes.int32).tolist() == [ids]
  assert Tensor([0, 127, -128], dtype=dtypes.int8).tolist() == [0, 127, -128]
  assert Tensor([-1, 255, 0], dtype=dtypes.uint8).tolist() == [255, 255, 0]  # as torch: -1 wraps
  assert Tensor([2**63 - 1, -2**63], dtype=dtypes.int64).tolist() == [2**63 - 1, -2**63]
  assert Tensor([2**64 - 1], dtype=dtypes.uint64).tolist() == [2**64 - 1]
  with pytest.raises(RuntimeError, match="overflow"):
    Tensor([1, 300], dtype=dtypes.int8)
  assert Tensor([0.1, 2, -1e39, 1e39]).tolist() == [float(np.float32(0.1)), 2.0, -math.inf, math.inf]
  assert Tensor([0.1, 1e300], dtype=dtypes.float64).tolist() == [0.1, 1e300]
  assert math.isnan(Tensor([math.nan]).tolist()[0])
  assert Tensor([True, 2], dtype=dtypes.int32).tolist() == [1, 2]
  assert Tensor([1.5, -2.5], dtype=dtypes.float16).tolist() == [1.5, -2.5]


def test_from_nested_lists():
  data = [[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]]]
  t = Tensor(data)
  assert t.shape == (2, 3, 2) and t.dtype == dtypes.float32
  assert t.tolist() == data
  np.testing.assert_array_equal(t.numpy(), np.array(data, dtype=np.float32))
  assert Tensor([[1, 2], [3, 4]]).T.tolist() == [[1, 3], [2, 4]]
  assert Tensor([[True], [False]]).tolist() == [[True], [False]]


def test_empty_list():
  t = Tensor([])
  assert t.shape == (0,) and t.dtype == dtypes.float32
  assert t.tolist() == []
  assert t.numpy().shape == (0,)


NUMPY_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
                np.float64]


@pytest.mark.parametrize("npdt", NUMPY_DTYPES, ids=[np.dtype(d).name for d in NUMPY_DTYPES])
def test_numpy_roundtrip_every_dtype(npdt):
  dt = np.dtype(npdt)
  if dt == np.bool_: a = np.array([[True, False, True], [False, False, True]])
  elif dt.kind in "iu":
    info = np.iinfo(dt)
    a = np.array([[info.min, info.max, 0], [1, info.max - 1, info.min + 1]], dtype=dt)
  else: a = np.array([[0.5, -1.25, 3.0], [np.finfo(dt).max, np.finfo(dt).tiny, -0.0]], dtype=dt)
  t = Tensor(a)
  assert t.shape == (2, 3)
  assert t.dtype.itemsize == dt.itemsize
  out = t.numpy()
  assert out.dtype == dt
  np.testing.assert_array_equal(out, a)
  assert t.tolist() == a.tolist()
  # and through a kernel
  np.testing.assert_array_equal(t.flip(1).contiguous().numpy(), a[:, ::-1])


def test_numpy_non_contiguous_and_0d():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  np.testing.assert_array_equal(Tensor(a.T).numpy(), a.T)
  np.testing.assert_array_equal(Tensor(a[::2, 1::2]).numpy(), a[::2, 1::2])
  s = Tensor(np.array(2.5, dtype=np.float32))
  assert s.shape == () and s.item() == 2.5
  assert Tensor(np.array([1, 2], dtype=np.int64), dtype=dtypes.float32).tolist() == [1.0, 2.0]


def test_scalars():
  for value, dt, pytype in [(3, dtypes.int32, int), (2.5, dtypes.float32, float), (True, dtypes.bool, bool), (False, dtypes.bool, bool)]:
    t = Tensor(value)
    assert t.shape == () and t.dtype == dt
    item = t.item()
    assert type(item) is pytype and item == value
    assert t.tolist() == value
  assert Tensor(7, dtype=dtypes.float32).item() == 7.0
  assert Tensor([[4.5]]).item() == 4.5
  assert Tensor.ones(2, 3).sum().item() == 6.0


def test_int64_roundtrip():
  vals = [2 ** 40, -(2 ** 62), 2 ** 63 - 1, -1]
  t = Tensor(vals, dtype=dtypes.int64)
  assert t.tolist() == vals
  assert t[0].item() == 2 ** 40
  np.testing.assert_array_equal(t.numpy(), np.array(vals, dtype=np.int64))
  assert (t + 1)[0].item() == 2 ** 40 + 1
  big = Tensor(np.array([2 ** 63 + 5], dtype=np.uint64))
  assert big.item() == 2 ** 63 + 5


def test_float16_roundtrip():
  vals = [1.5, -2.0, 65504.0, 0.0009765625]
  t = Tensor(vals, dtype=dtypes.float16)
  assert t.dtype == dtypes.float16
  out = t.numpy()
  assert out.dtype == np.float16
  np.testing.assert_array_equal(out, np.array(vals, dtype=np.float16))
  assert t.tolist() == vals
  assert Tensor([1.0001], dtype="half").item() == 1.0  # rounds to the nearest half
  assert (t * 2).numpy().tolist()[2] == math.inf  # 65504 * 2 overflows half


def test_bfloat16_numpy_is_float32():
  vals = [1.5, -2.25, 3.0, 256.0]
  t = Tensor(vals, dtype=dtypes.bfloat16)
  assert t.dtype == dtypes.bfloat16
  out = t.numpy()
  assert out.dtype == np.float32
  np.testing.assert_array_equal(out, np.array(vals, dtype=np.float32))
  assert t.tolist() == vals
  # 1 + 2**-8 is halfway between two bfloat16 values: round to even, 1.0
  assert Tensor([1.00390625, 1.01171875], dtype=dtypes.bfloat16).tolist() == [1.0, 1.015625]
  from_np = Tensor(np.array([0.1, 100.3], dtype=np.float32), dtype=dtypes.bfloat16)
  np.testing.assert_allclose(from_np.numpy(), [0.1, 100.3], rtol=2 ** -8)
  np.testing.assert_array_equal((t * 2).float().numpy(), np.array(vals, dtype=np.float32) * 2)


def test_bytes_input():
  t = Tensor(b"\x01\x02\xff")
  assert t.dtype == dtypes.uint8
  assert t.tolist() == [1, 2, 255]
