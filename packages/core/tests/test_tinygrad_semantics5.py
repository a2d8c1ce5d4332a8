"""Round 5 of behaviour a tinygrad 0.14 program relies on, found by running the same small programs against tinygrad
0.14.0: circular padding with negative pads, bool cumprod and pow, copysign of ints, int products summed into a wider
int (matmul/einsum/conv), nll_loss's mean with out-of-range labels, integer-only class labels and embedding indices,
pad_to's check, the optimizers' argument checks, dtypes.ints/all order and finfo's error, and the exception classes
tinygrad raises (RuntimeError) for bad data, operands and shapes. References are numpy or written by hand."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, nn


# ---- pad(mode="circular") with negative pads: shrink first, then wrap what is left (tinygrad and torch)
def test_pad_circular_negative():
  x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
  out = Tensor(x).pad((-1, 2, 0, 0), mode="circular").numpy()
  np.testing.assert_array_equal(out, np.pad(x[..., 1:], ((0, 0), (0, 0), (0, 0), (0, 2)), mode="wrap"))
  out = Tensor(x).pad((2, -1, -1, 0), mode="circular").numpy()
  np.testing.assert_array_equal(out, np.pad(x[..., 1:, :3], ((0, 0), (0, 0), (0, 0), (2, 0)), mode="wrap"))
  with pytest.raises(ValueError):  # 3 > the 2 elements left after the shrink
    Tensor(x).pad((-2, 3, 0, 0), mode="circular")


# ---- bools: cumprod stays bool (as prod), bool ** int is an int (as bool * 2), bool ** bool stays bool
def test_bool_cumprod_and_pow():
  b = Tensor([True, False, True])
  r = b.cumprod(0)
  assert r.dtype == dtypes.bool and r.tolist() == [True, False, False]
  r = Tensor([[True, True], [False, True]]).cumprod(1)
  assert r.dtype == dtypes.bool and r.tolist() == [[True, True], [False, False]]
  r = b ** 2
  assert r.dtype == dtypes.int32 and r.tolist() == [1, 0, 1]
  r = b ** 0
  assert r.dtype == dtypes.int32 and r.tolist() == [1, 1, 1]
  r = b ** Tensor([True, True, False])
  assert r.dtype == dtypes.bool and r.tolist() == [True, False, True]  # x ** False is 1


# ---- copysign of ints stays int (torch gives floats); a negative scalar makes a uint8 wrap like C
def test_copysign_ints():
  r = Tensor([1, -2, 3]).copysign(Tensor([-1, 1, 0]))
  assert r.dtype == dtypes.int32 and r.tolist() == [-1, 2, 3]
  r = Tensor([1, 2], dtype=dtypes.uint8).copysign(-1)
  assert r.dtype == dtypes.uint8 and r.tolist() == [255, 254]
  r = Tensor([True, False]).copysign(-1)
  assert r.dtype == dtypes.int32 and r.tolist() == [-1, 0]
  r = Tensor([1, -2, 3]).copysign(Tensor([-1.0, 1.0, -0.0]))
  assert r.dtype == dtypes.float32 and r.tolist() == [-1.0, 2.0, -3.0]


# ---- int8 products summed as int32 (or a wider dtype=) don't wrap in int8
def test_int_products_widen():
  a, b = np.array([[1, 2]], np.int8), np.array([[100], [100]], np.int8)
  want = a.astype(np.int64) @ b.astype(np.int64)  # 300, not 300 - 256
  r = Tensor(a).matmul(Tensor(b), dtype=dtypes.int32)
  assert r.dtype == dtypes.int32 and r.tolist() == want.tolist()
  r = Tensor(a).dot(Tensor(b), dtype=dtypes.int16)
  assert r.dtype == dtypes.int16 and r.tolist() == want.tolist()
  assert (Tensor(a) @ Tensor(b)).tolist() == want.astype(np.int8).tolist()  # no dtype=: int8, wrapped
  r = Tensor.einsum("i,i->", Tensor([100, 100], dtype=dtypes.int8), Tensor([2, 2], dtype=dtypes.int8))
  assert r.dtype == dtypes.int32 and r.item() == 400
  r = Tensor.einsum("i,i->", Tensor([200, 200], dtype=dtypes.uint8), Tensor([2, 2], dtype=dtypes.uint8))
  assert r.dtype == dtypes.uint32 and r.item() == 800
  r = Tensor.einsum("i,i->", Tensor([100, 100], dtype=dtypes.int8), Tensor([2, 2], dtype=dtypes.int8), dtype=dtypes.int8)
  assert r.item() == np.int8(400 - 512)
  # a bool factor widens too (api_fuzz einsum/774, seed 454545): 1 * 100 * 10 is 1000, not 1000 - 3 * 256
  r = Tensor.einsum("i,i,i->", Tensor([True, True]), Tensor([100, 5], dtype=dtypes.uint8), Tensor([10, 2], dtype=dtypes.uint8))
  assert r.dtype == dtypes.uint32 and r.item() == 1010
  x, w = Tensor.full((1, 1, 2, 2), 100, dtype=dtypes.int8), Tensor.full((1, 1, 2, 2), 2, dtype=dtypes.int8)
  r = x.conv2d(w)
  assert r.dtype == dtypes.int32 and r.tolist() == [[[[800]]]]
  # a float dtype= multiplies in it (numpy's dtype= casts the operands first): int32 products of 1e10 don't wrap to 1410065408
  big = Tensor([[100000, 0]], dtype=dtypes.int32)
  r = big.matmul(Tensor([[100000], [1]], dtype=dtypes.int32), dtype=dtypes.float32)
  assert r.dtype == dtypes.float32 and r.item() == 1e10
  r = Tensor.full((1, 1, 1, 1), 100000, dtype=dtypes.int32).conv2d(Tensor.full((1, 1, 1, 1), 100000, dtype=dtypes.int32), dtype=dtypes.float32)
  assert r.dtype == dtypes.float32 and r.item() == 1e10
  assert x.conv_transpose2d(w).tolist() == [[[[200, 400, 200], [400, 800, 400], [200, 400, 200]]]]
  # half operands of an int dtype= multiply in float32 (api_fuzz einsum/474, seed 4747): 300 * 300 in float16 is inf, cast to 0
  h, g = Tensor([300.0, 2.0], dtype=dtypes.float16), Tensor([300.0, 3.0], dtype=dtypes.float16)
  assert Tensor.einsum("i,i->", h, g, dtype=dtypes.int32).item() == 90006
  assert Tensor.einsum("i,i->i", h, g, dtype=dtypes.int32).tolist() == [90000, 6]
  assert h.dot(g, dtype=dtypes.int32).item() == 90006
  r = Tensor.full((1, 1, 2, 2), 300.0, dtype=dtypes.float16).conv2d(Tensor.full((1, 1, 2, 2), 300.0, dtype=dtypes.float16), dtype=dtypes.int32)
  assert r.dtype == dtypes.int32 and r.tolist() == [[[[360000]]]]


# ---- losses: labels must be ints; nll_loss's mean without weight/ignore_index divides by the number of labels
def test_loss_labels_and_nll_mean():
  p = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.5, 0.1, 0.2, 0.2]], np.float32)
  logp = Tensor(np.log(p))
  # an out-of-range label (-100, torch's ignore value, but tinygrad's default is no ignore_index) counts as 0 loss
  np.testing.assert_allclose(logp.nll_loss(Tensor([1, -100, 0])).item(), -(np.log(0.2) + np.log(0.5)) / 3, rtol=1e-6)
  np.testing.assert_allclose(logp.nll_loss(Tensor([1, -100, 0]), ignore_index=-100).item(), -(np.log(0.2) + np.log(0.5)) / 2, rtol=1e-6)
  w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
  np.testing.assert_allclose(logp.nll_loss(Tensor([1, 2, 0]), weight=Tensor(w)).item(),
                             -(2 * np.log(0.2) + 3 * np.log(0.25) + np.log(0.5)) / 6, rtol=1e-6)
  logits = Tensor.ones(3, 4)
  for bad in (Tensor([1.0, 2.0, 0.0]), Tensor([True, False, True])):
    for f in (lambda y: logits.cross_entropy(y), lambda y: logits.sparse_categorical_crossentropy(y), lambda y: logits.nll_loss(y)):
      with pytest.raises(RuntimeError): f(bad)
      with pytest.raises(TypeError): f(bad)
  assert logits.cross_entropy(Tensor([1, 2, 3], dtype=dtypes.uint8)).item() == pytest.approx(np.log(4), rel=1e-6)


def test_embedding_needs_int_indices():
  e = nn.Embedding(5, 3)
  for bad in (Tensor([1.0]), Tensor([True])):
    with pytest.raises(TypeError): e(bad)
  np.testing.assert_array_equal(e(Tensor([4], dtype=dtypes.uint8)).numpy(), e.weight.numpy()[[4]])


# ---- pad_to can't shrink (tinygrad: ValueError); eye of a negative size raises
def test_pad_to_and_eye_checks():
  with pytest.raises(ValueError): Tensor([[1, 2]]).pad_to(1, 1)
  assert Tensor([[1, 2]]).pad_to(1, 2).tolist() == [[1, 2]]
  with pytest.raises(ValueError): Tensor.eye(-1)
  with pytest.raises(RuntimeError): Tensor.eye(2, -1)
  assert Tensor.eye(0).shape == (0, 0)


# ---- optimizers check their arguments as tinygrad (and torch): ValueError with tinygrad's message
@pytest.mark.parametrize("make,msg", [
  (lambda p: nn.optim.SGD(p, lr=-0.1), "Invalid learning rate"),
  (lambda p: nn.optim.Adam(p, lr=-0.1), "Invalid learning rate"),
  (lambda p: nn.optim.LAMB(p, lr=-1.0), "Invalid learning rate"),
  (lambda p: nn.optim.SGD(p, momentum=-0.1), "Invalid momentum value"),
  (lambda p: nn.optim.Muon(p, momentum=-0.1), "Invalid momentum value"),
  (lambda p: nn.optim.AdamW(p, weight_decay=-1.0), "Invalid weight_decay value"),
  (lambda p: nn.optim.LAMB(p, weight_decay=-1.0), "Invalid weight_decay value"),
])
def test_optimizer_argument_checks(make, msg):
  with pytest.raises(ValueError, match=msg): make([Tensor.ones(2, 2, requires_grad=True)])


def test_optimizer_arguments_tinygrad_accepts():
  for make in (lambda p: nn.optim.SGD(p, lr=0.0, weight_decay=-0.1), lambda p: nn.optim.LARS(p, weight_decay=-0.1)):
    assert len(make([Tensor.ones(2, requires_grad=True)]).params) == 1


# ---- dtypes: tinygrad's order of dtypes.ints (uints first) and dtypes.all (floats, ints, bool); finfo of an int
def test_dtype_groups_order_and_finfo():
  assert dtypes.ints == (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
  assert dtypes.all[-1] == dtypes.bool and dtypes.all[-9:-1] == dtypes.ints and dtypes.all[:-9] == dtypes.floats
  assert dtypes.finfo(dtypes.float16) == (5, 10)
  with pytest.raises(ValueError, match="not a floating point"): dtypes.finfo(dtypes.int32)


# ---- exception classes: tinygrad raises RuntimeError for these; ours are also TypeError/ValueError (as torch/Python)
@pytest.mark.parametrize("f,also", [
  (lambda: Tensor(np.float32(2.5)), TypeError),  # a numpy scalar
  (lambda: Tensor(range(3)), TypeError),
  (lambda: Tensor([np.float32(1.5)]), TypeError),  # a list of them
  (lambda: Tensor([Tensor(1), Tensor(2)]), TypeError),
  (lambda: Tensor.ones(2) + "a", TypeError),
  (lambda: Tensor.ones(2) == None, TypeError),  # noqa: E711
  (lambda: Tensor.ones(2) * np.array([1.0, 2.0]), TypeError),
  (lambda: Tensor.zeros(2.5), ValueError),
  (lambda: Tensor.full((2, -1), 1.0), ValueError),
  (lambda: Tensor.ones(6).reshape(2.0, 3), TypeError),
])
def test_runtime_error_classes(f, also):
  with pytest.raises(RuntimeError): f()
  with pytest.raises(also): f()
