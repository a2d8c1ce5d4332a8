"""Round 6 of behaviour a tinygrad 0.14 program relies on, found by bench/api_fuzz.py (a differential fuzzer of the Tensor API
against tinygrad 0.14.0): softmax and friends of bools and ints, int-overflowing activations, logaddexp/lerp of ints, true
division and isclose of an int tensor by an int beyond its dtype, float16 normalize, an exact float remainder, losses picking
their target with where(), fully masked attention rows, copysign of bools, floor division by zero, shifts by bools,
masked_fill's mask dtype, pooling with ceil_mode and large padding, linspace of bools. Expected values come from numpy
(float64, rounded to the result dtype), torch 2.13 or tinygrad 0.14.0 itself where it is right; each test says which."""
import math

import numpy as np
import pytest
from tinygrad import Tensor, dtypes


def close(t: Tensor, want: list, rtol: float = 1e-6) -> None:
  np.testing.assert_allclose(np.array(t.tolist(), dtype=np.float64), np.array(want, dtype=np.float64), rtol=rtol, atol=1e-7)


# ---- softmax, log_softmax, softmin and logsumexp of bools and ints compute in float (x - max was a XOR for bools, wrapped
# for uint8): references from numpy in float64 (tinygrad 0.14 agrees on the bool softmax, gives NaN for uint8 softmin)
def test_softmax_family_of_bools_and_ints():
  b = Tensor([True, True, False, False])
  close(b.softmax(), [0.36552928931500245, 0.36552928931500245, 0.13447071068499755, 0.13447071068499755])
  close(b.softmin(), [0.13447071068499755, 0.13447071068499755, 0.36552928931500245, 0.36552928931500245])
  close(b.log_softmax(), [-1.0064088680781682, -1.0064088680781682, -2.006408868078168, -2.006408868078168])
  close(b.logsumexp(), [2.006408868078168])
  u = Tensor(np.array([0, 3, 255], np.uint8))
  close(u.softmin(), [0.9525741268224334, 0.04742587317756679, 0.0])
  close(u.softmin(dtype=dtypes.float32), [0.9525741268224334, 0.04742587317756679, 0.0])
  assert u.softmax().dtype == dtypes.float32 and u.logsumexp().dtype == dtypes.float32
  close(Tensor([-2**31, 2**31 - 1]).softmax(), [0.0, 1.0])  # int32 extremes: max - min overflowed int32


# ---- float-valued activations of ints compute in float: int8 127 + 3 wrapped in hardswish, |int8 -128| in softsign,
# -uint8 in logsigmoid (numpy references; torch has no int kernels for them, tinygrad 0.14 wraps)
def test_activations_of_ints_compute_in_float():
  i8 = Tensor(np.array([-128, 127, 5], np.int8))
  close(i8.hardswish(), [-0.0, 127.0, 5.0])
  close(i8.softsign(), [-0.9922480620155039, 0.9921875, 0.8333333333333334])
  close(Tensor(np.array([0, 3, 238], np.uint8)).logsigmoid(), [-0.6931471805599453, -0.04858735157374206, 0.0])


# ---- logaddexp and lerp of ints: a scalar no longer wraps into a uint8 (-1 was 255), end - start no longer wraps
def test_logaddexp_and_lerp_of_ints():
  r = Tensor(np.array([0, 3, 255], np.uint8)).logaddexp(-1)
  assert r.dtype == dtypes.float32
  close(r, [0.31326168751822286, 3.01814992791781, 255.0])  # numpy
  assert Tensor([1.0, 2.0], dtype=dtypes.float16).logaddexp(Tensor([1, 2])).dtype == dtypes.float16  # promotion as before (tinygrad 0.14)
  u = Tensor(np.array([17, 1], np.uint8))
  close(u.lerp(Tensor(np.array([1, 17], np.uint8)), 0.25), [13.0, 5.0])  # tinygrad 0.14 and numpy: 17 + (1 - 17) / 4
  close(u.lerp(1, 0.25), [13.0, 1.0])


# ---- true division, isclose and normalize: a Python int beyond an int tensor's dtype no longer wraps into it before a
# float result (int8 / 65536 divided by 0), and float16 norms compute in float32 (60000 ** 2 overflowed, 1e-6 ** 2 and eps
# underflowed to 0). References: tinygrad 0.14 and numpy agree on the divisions; normalize by hand (torch agrees)
def test_int_division_isclose_normalize():
  x = Tensor(np.array([5, -3], np.int8))
  close(x / 65536, [7.62939453125e-05, -4.57763671875e-05])
  close(65536 / x, [13107.2001953125, -21845.333984375])
  assert (x / 2).dtype == dtypes.float32 and (x / 2).tolist() == [2.5, -1.5]
  assert x.div(2, rounding_mode="floor").tolist() == [2, -2]  # ints stay ints
  z = Tensor(np.array([0, 5], np.int8))
  assert z.isclose(65536).tolist() == [False, False] and z.isclose(256, rtol=1.0).tolist() == [True, True]  # 256 wrapped to 0
  h = Tensor([[60000.0], [1e-6]], dtype=dtypes.float16)
  r = h.normalize(dim=1)
  assert r.dtype == dtypes.float16 and r.tolist() == [[1.0], [1.0]]  # were 0 (inf norm) and inf (0 norm, eps 0 in float16)
  assert h.normalize(dim=0).tolist() == [[1.0], [0.0]]


# ---- float % and fmod are exact, as C's fmod (numpy references): a - trunc(a/b)*b rounded the product
def test_float_remainder_is_exact():
  close(65536 % Tensor([2.122]), [0.15264797], rtol=1e-6)  # was 0.15234375
  assert (1e10 % Tensor([-6.0, 7.0])).tolist() == [-2.0, 4.0]  # was 250 off
  assert Tensor([-1e30]).fmod(1e10).tolist() == [-6688855040.0]
  assert Tensor([12345.678], dtype=dtypes.float16).fmod(0.1).tolist() == [np.fmod(np.float16(12345.678), np.float16(0.1)).item()]
  assert Tensor([5.5, -5.5], dtype=dtypes.float64).fmod(2.0).tolist() == [1.5, -1.5]
  # x % +-inf: fmod gives x; Python's % gives x, or inf with the divisor's sign when the signs differ (numpy, torch)
  assert Tensor([3.0, -3.0]).fmod(math.inf).tolist() == [3.0, -3.0]
  assert (Tensor([-5.0, 5.0]) % math.inf).tolist() == [math.inf, 5.0]
  assert Tensor([3.0]).fmod(Tensor([float("inf")], dtype=dtypes.float16)).tolist() == [3.0]  # 1e10 as a half is inf
  r = Tensor([-4.0, 4.0, 3.0]).fmod(2.0).tolist()
  assert r[:2] == [0.0, 0.0] and math.copysign(1, r[0]) == -1 and math.copysign(1, r[1]) == 1  # a zero keeps a's sign (C)
  assert math.isnan(Tensor([3.0]).fmod(0.0).item()) and math.isnan(Tensor([math.inf]).fmod(2.0).item())
  a, b = Tensor([7.5, -7.5, 100.25], requires_grad=True), Tensor([2.0, 2.0, 3.0], requires_grad=True)
  (a % b).sum().backward()
  assert a.grad.tolist() == [1.0, 1.0, 1.0] and b.grad.tolist() == [-3.0, 4.0, -33.0]  # torch: -floor(a / b)


# ---- losses pick the target's log-probability with where(): another class at -inf made 0 * -inf = NaN (torch and
# tinygrad 0.14 give the finite loss; values written by hand)
def test_losses_pick_with_where():
  logp = Tensor([[-math.inf, -0.5], [-1.0, -2.0]])
  assert logp.nll_loss(Tensor([1, 0])).item() == 0.75
  assert logp.nll_loss(Tensor([1, 0]), reduction="none").tolist() == [0.5, 1.0]
  assert logp.nll_loss(Tensor([1, 0]), weight=Tensor([1.0, 3.0])).item() == (1.5 + 1.0) / 4
  logits = Tensor([[-math.inf, 0.0, 0.0], [0.0, 0.0, 0.0]])
  close(logits.cross_entropy(Tensor([1, 2]), reduction="none"), [math.log(2), math.log(3)])
  close(logits.sparse_categorical_crossentropy(Tensor([1, 2]), reduction="none"), [math.log(2), math.log(3)])
  # an ignored row with a NaN logit doesn't make the mean NaN
  bad = Tensor([[math.nan, 0.0], [0.0, 0.0]])
  close(bad.sparse_categorical_crossentropy(Tensor([0, 1]), ignore_index=0), [math.log(2)])
  close(bad.cross_entropy(Tensor([-100, 1])), [math.log(2)])


# ---- a fully masked attention row attends to nothing: 0, not NaN, and a finite gradient (torch 2.13, whose safe softmax
# gives these values; tinygrad 0.14 gives NaN)
def test_sdpa_fully_masked_row_is_zero():
  q = Tensor(np.arange(6, dtype=np.float32).reshape(1, 2, 3) / 5, requires_grad=True)
  out = q.scaled_dot_product_attention(q, q, attn_mask=Tensor([[False, False], [True, True]]))
  close(out, [[[0.0, 0.0, 0.0], [0.4179885685443878, 0.6179885864257812, 0.8179885745048523]]])
  out.sum().backward()
  close(q.grad, [[[0.1715802550315857, 0.12765619158744812, 0.08373212814331055], [0.9601919054985046, 1.0041159391403198, 1.0480400323867798]]],
        rtol=1e-5)
  close(q.scaled_dot_product_attention(q, q, attn_mask=Tensor([[-math.inf, -math.inf], [0.0, 0.0]])), out.tolist())


# ---- small dtype rules: copysign of bools stays bool (tinygrad 0.14), int // 0 is 0 as int % 0 (it was -1 for x < 0;
# torch raises, tinygrad 0.14 crashes with SIGFPE), a bool shift amount is 0/1 (tinygrad 0.14), bool >> bool raises (both)
def test_copysign_floordiv_shift_rules():
  r = Tensor([True, False]).copysign(Tensor([True, True]))
  assert r.dtype == dtypes.bool and r.tolist() == [True, False]
  assert (Tensor([-7, 7, 0]) // Tensor([0, 0, 0])).tolist() == [0, 0, 0] and (Tensor([-7, 7]) // 0).tolist() == [0, 0]
  assert (Tensor([-7, 7]) % 0).tolist() == [0, 0]
  assert (Tensor([-7, 7]) // Tensor([2, -2])).tolist() == [-4, -4]  # floor, as before
  assert (Tensor([1, 2]) << True).tolist() == [2, 4] and (Tensor([3]) >> False).tolist() == [3]
  assert (Tensor([True]) << 1).tolist() == [2]
  with pytest.raises(RuntimeError, match="int"):
    Tensor([True]) >> False
  with pytest.raises(RuntimeError, match="cast to an int dtype"):
    Tensor([True]) % Tensor([True])


# ---- masked_fill needs a bool mask (torch and tinygrad 0.14 raise; it was read as mask != 0)
def test_masked_fill_needs_bool_mask():
  x = Tensor([1.0, 2.0])
  assert x.masked_fill(Tensor([True, False]), 0.0).tolist() == [0.0, 2.0]
  with pytest.raises(TypeError, match="bool mask"):
    x.masked_fill(Tensor([1, 0]), 0.0)
  with pytest.raises(RuntimeError):  # also a RuntimeError, as tinygrad's
    x.masked_fill(Tensor([1, 0]), 0.0)


# ---- ceil_mode with padding beyond half the kernel (torch rejects that; tinygrad 0.14 accepts): a last window that
# would start in the right padding is dropped, also when the padding already covered it. Shapes and values: tinygrad 0.14
def test_pool_ceil_mode_large_padding():
  x = Tensor.arange(12).reshape(1, 1, 4, 3).float()
  r = x.max_pool2d((2, 1), padding=1, ceil_mode=True)  # was (1, 1, 3, 5)
  assert r.tolist() == [[[[-math.inf, 0.0, 1.0, 2.0], [-math.inf, 6.0, 7.0, 8.0], [-math.inf, 9.0, 10.0, 11.0]]]]
  y = Tensor.arange(12).reshape(1, 1, 3, 4).float()
  r = y.avg_pool2d((2, 1), stride=1, padding=1, ceil_mode=True, count_include_pad=False)  # was (1, 1, 4, 6)
  assert r.shape == (1, 1, 4, 5) and r[0, 0, :, 1:].tolist() == [[0.0, 1.0, 2.0, 3.0], [2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0], [8.0, 9.0, 10.0, 11.0]]
  assert all(math.isnan(v) for v in r[0, 0, :, 0].tolist())  # windows wholly in the padding: 0 / 0
  # valid padding is unchanged: 5 wide, kernel 2, stride 2, padding 1 gives 3
  assert Tensor.ones(1, 1, 5, 5).max_pool2d(2, stride=2, padding=1, ceil_mode=True).shape == (1, 1, 3, 3)


# ---- linspace of bools raises (torch and tinygrad 0.14 too)
def test_linspace_bool_raises():
  with pytest.raises(TypeError, match="bool"):
    Tensor.linspace(0, 1, 3, dtype=dtypes.bool)
  assert Tensor.linspace(0, 1, 3, dtype=dtypes.int32).tolist() == [0, 0, 1]


# ---- contiguous() of a tensor that already is a whole buffer is that buffer (torch and tinygrad 0.14: no copy, an assign
# through either shows in both); clone() copies. Values from tinygrad 0.14 (CPU)
def test_contiguous_of_a_buffer_aliases_and_clone_copies():
  from tinygrad import GlobalCounters
  x = Tensor([1.0, 2.0, 3.0]).realize()
  GlobalCounters.reset()
  y = x.contiguous().realize()
  assert GlobalCounters.kernel_count == 0
  y.assign(Tensor([4.0, 5.0, 6.0])).realize()
  assert x.tolist() == [4.0, 5.0, 6.0] and y.tolist() == [4.0, 5.0, 6.0]
  c = x.clone().realize()
  c.assign(Tensor([7.0, 8.0, 9.0])).realize()
  assert x.tolist() == [4.0, 5.0, 6.0] and c.tolist() == [7.0, 8.0, 9.0]
  # a reshaped buffer too; a view that is not row-major (a transpose, a slice) is still copied
  m = Tensor([[1.0, 2.0], [3.0, 4.0]]).realize()
  r = m.reshape(4).contiguous()
  t = m.T.contiguous().realize()
  r.assign(Tensor([0.0, 0.0, 0.0, 1.0])).realize()
  assert m.tolist() == [[0.0, 0.0], [0.0, 1.0]] and t.tolist() == [[1.0, 3.0], [2.0, 4.0]]
  # gradients flow through it as through the identity
  w = Tensor([2.0, 3.0], requires_grad=True).realize()
  (w.contiguous() * w).sum().backward()
  assert w.grad.tolist() == [4.0, 6.0]


# ---- a 0-d tensor holding NaN is a NaN like any other (numpy/torch); tinygrad 0.14 folds it as a constant: isnan() False,
# int() raises (api_fuzz seed 4949, isnan/11 and int/6)
@pytest.mark.parametrize("x", [np.array(np.nan, np.float16), np.array(np.nan, np.float32), math.nan])
def test_scalar_nan(x):
  t = Tensor(x)
  assert t.shape == () and t.isnan().item() is True and t.isfinite().item() is False and t.isinf().item() is False
  assert (t != t).item() is True and t.int().item() == 0  # a NaN cast to an int is 0 (docs/differences.md)
