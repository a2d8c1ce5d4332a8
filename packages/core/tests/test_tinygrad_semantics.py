"""Behaviour a tinygrad 0.14 program relies on, found by running the same small programs against tinygrad 0.14.0: the
TRAINING setting as the train/eval switch, cummax/cummin's indices, BatchNorm's 0-d num_batches_tracked, data()'s shape,
reading data inside a TinyJit capture, pow's gradients at 0 and 1, and the promotion of uint64 with a signed int; split and
chunk along dim 0, Muon's defaults, the random factories' dtype and keyword checks, and the helpers programs import.
References are numpy or written by hand."""
import io
import math

import numpy as np
import pytest
from tinygrad import Context, Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import TRAINING
from tinygrad.jit import JitError
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict


# ---- TRAINING: tinygrad 0.14 switches training with Context(TRAINING=1); Tensor.training is the same setting
def test_context_training_is_tensor_training():
  assert not Tensor.training and TRAINING.value == 0
  with Context(TRAINING=1):
    assert Tensor.training and Tensor([1.0]).training
    with Tensor.train(False): assert not Tensor.training and TRAINING.value == 0
    assert Tensor.training
  assert not Tensor.training
  Tensor.training = True
  try: assert TRAINING.value == 1
  finally: Tensor.training = False
  assert TRAINING.value == 0


def test_context_training_drives_dropout_batchnorm_and_optimizer():
  x = Tensor.ones(64)
  assert x.dropout(0.5).tolist() == [1.0] * 64  # eval: no dropout
  with Context(TRAINING=1):
    vals = set(x.dropout(0.5).tolist())
  assert vals <= {0.0, 2.0} and len(vals) == 2
  bn = nn.BatchNorm(2)
  data = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
  with Context(TRAINING=1): y = bn(Tensor(data)).numpy()
  np.testing.assert_allclose(y, (data - data.mean(0)) / np.sqrt(data.var(0) + 1e-5), rtol=1e-5)
  np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * data.mean(0), rtol=1e-6)
  lin = nn.Linear(2, 1)
  opt = nn.optim.SGD(get_parameters(lin), lr=0.1)
  lin(Tensor([[1.0, 2.0]])).sum().backward()
  with pytest.raises(RuntimeError, match=r"Context\(TRAINING=1\)"): opt.step()
  b0 = lin.bias.numpy()
  with Context(TRAINING=1): opt.step()
  np.testing.assert_allclose(lin.bias.numpy(), b0 - 0.1, rtol=1e-6)


# ---- cummax / cummin: (values, indices), the index where each running extreme was first reached
@pytest.mark.parametrize("data,vals,idx", [
  ([1, 3, 3, 2, 3], [1, 3, 3, 3, 3], [0, 1, 1, 1, 1]),
  ([3, 3, 1, 1], [3, 3, 3, 3], [0, 0, 0, 0]),
  ([1.0, 0.5, 4.0, 4.0, 7.0], [1.0, 1.0, 4.0, 4.0, 7.0], [0, 0, 2, 2, 4]),
  ([True, False, True], [True, True, True], [0, 0, 0]),
])
def test_cummax_values_and_indices(data, vals, idx):
  v, i = Tensor(data).cummax(0)
  assert v.tolist() == vals and i.tolist() == idx and i.dtype == dtypes.int32


def test_cummin_and_axes():
  v, i = Tensor([3, 3, 1, 1, 2]).cummin(0)
  assert v.tolist() == [3, 3, 1, 1, 1] and i.tolist() == [0, 0, 2, 2, 2]
  v, i = Tensor([True, False, True]).cummin()
  assert v.tolist() == [True, False, False] and i.tolist() == [0, 1, 1]
  x = np.array([[1.0, 3.0, 3.0], [5.0, 5.0, 0.0]], np.float32)
  v, i = Tensor(x).cummax(-1)
  assert v.tolist() == [[1, 3, 3], [5, 5, 5]] and i.tolist() == [[0, 1, 1], [0, 0, 0]]
  v, i = Tensor(x).cummin(0)
  assert v.tolist() == [[1, 3, 3], [1, 3, 0]] and i.tolist() == [[0, 0, 0], [0, 0, 1]]
  v, i = Tensor.ones(0).cummax(0)
  assert v.shape == i.shape == (0,)


def test_cummax_indices_long_and_nan():
  import tinygrad.frontend.reduce as reduce_mod
  r = np.random.default_rng(0).integers(0, 20, size=(2, 300))
  v, i = Tensor(r.astype(np.int32)).cummax(1)
  first = np.array([[int(np.argmax(row[:j + 1])) for j in range(row.size)] for row in r])  # argmax: the first maximum
  np.testing.assert_array_equal(v.numpy(), np.maximum.accumulate(r, 1))
  np.testing.assert_array_equal(i.numpy(), first)
  assert reduce_mod._SCAN_BLOCK < 300  # the chained-blocks scan was used
  v, i = Tensor([1.0, math.nan, 0.0, 5.0]).cummax(0)  # NaN propagates (torch); its index stays
  assert v.tolist()[0] == 1.0 and all(math.isnan(a) for a in v.tolist()[1:]) and i.tolist() == [0, 1, 1, 1]


def test_cummax_gradient_goes_to_the_running_max():
  x = Tensor([1.0, 3.0, 2.0, 5.0], requires_grad=True)
  v, _ = x.cummax(0)
  v.sum().backward()
  assert x.grad.tolist() == [1.0, 2.0, 0.0, 1.0]


# ---- BatchNorm's num_batches_tracked is a 0-d int64 (torch's and tinygrad's checkpoints)
def test_batchnorm_num_batches_tracked_is_0d_int64():
  bn = nn.BatchNorm2d(3)
  t = get_state_dict(bn)["num_batches_tracked"]
  assert t.shape == () and t.dtype == dtypes.int64 and t.item() == 0
  with Context(TRAINING=1): bn(Tensor.ones(2, 3, 2, 2)).realize()
  assert bn.num_batches_tracked.item() == 1


@pytest.mark.parametrize("nbt", [Tensor(7, dtype=dtypes.int64), Tensor([7], dtype=dtypes.int32)])
def test_batchnorm_loads_0d_and_1_element_counts(nbt):
  bn = nn.BatchNorm(2)
  sd = {"weight": Tensor([2.0, 3.0]), "bias": Tensor([0.0, 1.0]), "running_mean": Tensor([0.5, 0.5]),
        "running_var": Tensor([4.0, 4.0]), "num_batches_tracked": nbt}
  load_state_dict(bn, sd, verbose=False)
  assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.item() == 7
  np.testing.assert_allclose(bn(Tensor([[1.0, 1.0]])).numpy(), [[2.0 * 0.5 / math.sqrt(4 + 1e-5), 1 + 3.0 * 0.5 / math.sqrt(4 + 1e-5)]], rtol=1e-5)
  with pytest.raises(ValueError, match="shape mismatch"):
    load_state_dict(nn.Linear(2, 2), {"weight": Tensor.ones(4), "bias": Tensor.ones(2)}, verbose=False)


# ---- data(): a memoryview of the tensor's shape
def test_data_has_the_tensors_shape():
  d = Tensor([[1, 2], [3, 4]]).data()
  assert d.shape == (2, 2) and d.format == "i" and d.tolist() == [[1, 2], [3, 4]] and d[1, 0] == 3
  d = Tensor(3.5).data()
  assert d.shape == () and d.tolist() == 3.5
  assert Tensor([True, False]).data().tolist() == [True, False]
  assert Tensor.ones(2, 0).data().nbytes == 0
  assert Tensor.empty(0, 3, dtype=dtypes.uint8).data().nbytes == 0  # a byte dtype: already 'B', and no shape with a 0 in it
  # the other readers still work on 2-d data
  assert Tensor([[1.5, 2.5]]).tolist() == [[1.5, 2.5]] and Tensor([[1, 2]], dtype=dtypes.uint8).numpy().tolist() == [[1, 2]]


# ---- TinyJit: reading data while capturing is an error, not a value baked into every replay
@pytest.mark.parametrize("read", [lambda t: t.item(), lambda t: t.tolist(), lambda t: t.numpy()])
def test_jit_data_read_during_capture_raises(read):
  @TinyJit
  def f(a): return read(a.sum())
  assert f(Tensor([1.0, 2.0])) == 3.0 or True  # call 1 runs eagerly
  with pytest.raises(JitError, match="inside a TinyJit"): f(Tensor([1.0, 5.0]))


# ---- pow's gradients where the forward special-cases (torch's values)
def _grad(fn, x):
  t = Tensor(x, requires_grad=True)
  fn(t).sum().backward()
  return t.grad.numpy()


@pytest.mark.parametrize("e", [2.5, 1.5, 1.7, 0.3, 1.0, 3.0, -1.0, -1.5])
def test_pow_gradient_at_0_and_1(e):
  x = np.array([0.0, 1.0, 2.0], np.float32)
  with np.errstate(divide="ignore"):
    expect = e * np.power(x.astype(np.float64), e - 1)
  np.testing.assert_allclose(_grad(lambda t: t ** e, x), expect, rtol=1e-5)
  np.testing.assert_allclose(_grad(lambda t: t ** Tensor([e] * 3), x), expect, rtol=1e-5)  # a tensor exponent


def test_pow_gradient_of_the_exponent():
  # d/dx 2**x = 2**x ln 2, at x = 0 too (the forward's x ** 0 == 1 case)
  np.testing.assert_allclose(_grad(lambda t: 2 ** t, [0.0, 1.0]), [math.log(2), 2 * math.log(2)], rtol=1e-6)
  # 0 ** x for x > 0: 0 (torch)
  np.testing.assert_allclose(_grad(lambda t: Tensor([0.0, 0.0]) ** t, [1.0, 2.0]), [0.0, 0.0])
  # x ** x: x**x (ln x + 1), both paths summed
  x = np.array([0.5, 1.0, 2.0])
  np.testing.assert_allclose(_grad(lambda t: t ** t, x.astype(np.float32)), x ** x * (np.log(x) + 1), rtol=1e-5)


def test_pow_second_derivative():
  x = Tensor([1.0, 2.0], requires_grad=True)
  gx, = (x ** 1.7).sum().gradient(x)
  gx.sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), 1.7 * 0.7 * np.array([1.0, 2.0]) ** -0.3, rtol=1e-5)


# ---- promotion: uint64 with a signed int meets at the default float (not fp8)
def test_uint64_with_signed_int_is_default_float():
  out = Tensor([3], dtype=dtypes.uint64) + Tensor([-1], dtype=dtypes.int64)
  assert out.dtype == dtypes.float32 and out.tolist() == [2.0]
  assert (Tensor([3], dtype=dtypes.uint64) * Tensor([2], dtype=dtypes.int8)).dtype == dtypes.float32


# ---- numpy integer scalars index like ints
def test_numpy_integer_scalar_index():
  t = Tensor([[1, 2, 3], [4, 5, 6]])
  assert t[np.int64(1)].tolist() == [4, 5, 6]
  assert t[np.int32(0), np.int64(-1)].item() == 3
  assert t[:, np.array([0, 2])].tolist() == [[1, 3], [4, 6]]


# ---- assign / setitem into a view reaches the base tensor's buffer (tinygrad's KV-cache idiom)
def test_assign_into_view_of_realized_buffer():
  cache = Tensor.zeros(2, 4).contiguous().realize()
  cache[:, 1:3].assign(Tensor.ones(2, 2))  # not realized by the caller
  assert cache.tolist() == [[0, 1, 1, 0], [0, 1, 1, 0]]
  cache.shrink((None, (0, 2))).assign(Tensor.full((2, 2), 3.0)).realize()
  assert cache.tolist() == [[3, 3, 1, 0], [3, 3, 1, 0]]
  flat = Tensor.zeros(2, 2).contiguous().realize()
  flat.reshape(4)[0:2].assign(Tensor([7.0, 8.0]))
  assert flat.tolist() == [[7, 8], [0, 0]]
  t = Tensor.zeros(4).contiguous().realize()
  s = t.sum()  # a lazy reader made before the write sees it, as in tinygrad
  t[0:2].assign(Tensor.ones(2))
  assert s.item() == 2.0


def test_assign_into_view_of_lazy_base():
  cache = Tensor.zeros(2, 4).contiguous()  # not realized yet
  v = cache[:, 1:3].assign(Tensor([[1.0, 2.0], [3.0, 4.0]]))
  assert v.tolist() == [[1, 2], [3, 4]]
  assert cache.tolist() == [[0, 1, 2, 0], [0, 3, 4, 0]]
  base = Tensor.ones(4) + 1  # a computation, not a buffer: the view gets a buffer of its own, the base is unchanged
  assert base[0:2].assign(Tensor([7.0, 8.0])).tolist() == [7, 8] and base.tolist() == [2, 2, 2, 2]


def test_setitem_on_a_view_writes_through():
  a = Tensor.zeros(2, 3).contiguous().realize()
  row = a[1]
  row[0] = 5.0
  row[1:] = Tensor([6.0, 7.0])
  assert a.tolist() == [[0, 0, 0], [5, 6, 7]] and row.tolist() == [5, 6, 7]
  b = Tensor.zeros(3, 2).contiguous()
  col = b[:, 1]
  col[Tensor([0, 2])] = 9.0
  assert b.tolist() == [[0, 9], [0, 0], [0, 9]]


def test_assign_into_view_inside_jit():
  cache = Tensor.zeros(6).contiguous().realize()
  @TinyJit
  def put(x):
    cache[0:2].assign(x)
    return (cache * 1).realize()
  for i in range(4): out = put(Tensor([float(i), float(i + 1)]))
  assert out.tolist() == [3, 4, 0, 0, 0, 0] and cache.tolist() == [3, 4, 0, 0, 0, 0]


# ---- DEFAULT_FLOAT / DEFAULT_INT: tinygrad 0.14 sets the default dtypes with these settings
@pytest.mark.parametrize("name,dt", [("HALF", dtypes.half), ("half", dtypes.half), ("float16", dtypes.half), ("bfloat16", dtypes.bfloat16)])
def test_default_float_setting(name, dt):
  with Context(DEFAULT_FLOAT=name):
    assert dtypes.default_float == dt
    assert Tensor.ones(2).dtype == dt and Tensor([1.5]).dtype == dt and (Tensor([1]) / 2).dtype == dt
    assert nn.Linear(2, 2).weight.dtype == dt and Tensor([1, 2]).mean().dtype == dt
  assert dtypes.default_float == dtypes.float32 and Tensor([1.5]).dtype == dtypes.float32


def test_default_int_setting_and_assignment():
  with Context(DEFAULT_INT="int64"):
    assert dtypes.default_int == dtypes.int64 and Tensor([1]).dtype == dtypes.int64 and Tensor.arange(3).dtype == dtypes.int64
  assert Tensor([1]).dtype == dtypes.int32
  dtypes.default_float = dtypes.float16  # the older form: it sets DEFAULT_FLOAT
  try: assert Tensor([1.5]).dtype == dtypes.float16
  finally: dtypes.default_float = dtypes.float32
  assert Tensor([1.5]).dtype == dtypes.float32
  with pytest.raises(ValueError, match="names no float dtype"):
    with Context(DEFAULT_FLOAT="int8"): _ = dtypes.default_float
  with pytest.raises(ValueError, match="must be an int dtype"):
    dtypes.default_int = dtypes.float32


def test_allclose_is_a_0d_bool_tensor():
  r = Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.0000001]))
  assert isinstance(r, Tensor) and r.shape == () and r.dtype == dtypes.bool and r.item() is True
  assert not Tensor([1.0]).allclose(Tensor([1.1])).item()
  assert Tensor([1.0, math.nan]).allclose(Tensor([1.0, math.nan]), equal_nan=True).item()


# ---- split/chunk: dim 0 by default, as tinygrad 0.14 (and torch)
def test_split_and_chunk_default_to_dim_0():
  a = np.arange(24, dtype=np.int32).reshape(4, 3, 2)
  parts = Tensor(a).split(3)
  assert [p.shape for p in parts] == [(3, 3, 2), (1, 3, 2)]
  np.testing.assert_equal(parts[1].numpy(), a[3:])
  assert [p.shape for p in Tensor(a).split([1, 3])] == [(1, 3, 2), (3, 3, 2)]
  chunks = Tensor(a).chunk(2)
  assert [c.shape for c in chunks] == [(2, 3, 2), (2, 3, 2)]
  np.testing.assert_equal(chunks[1].numpy(), a[2:])
  np.testing.assert_equal(Tensor(a).chunk(2, dim=-1)[0].numpy(), a[..., :1])


# ---- Muon: tinygrad 0.14's defaults (lr 0.001, weight_decay 0.1) and parameter name ns_coefficients
def test_muon_defaults_and_ns_coefficients():
  w = Tensor([[1.0, 0.0], [0.0, 2.0]])
  opt = nn.optim.Muon([w])
  assert opt.lr.numpy().tolist() == pytest.approx([0.001]) and opt.wd == 0.1 and opt.ns_coefficients == (3.4445, -4.775, 2.0315)
  opt = nn.optim.Muon([w], lr=0.1, weight_decay=0.0, momentum=0.0, nesterov=False, ns_steps=20, ns_coefficients=(1.5, -0.5))
  (w * Tensor([[1.0, 0.0], [0.0, 4.0]])).sum().backward()
  with Context(TRAINING=1): opt.step()
  # the gradient diag(1, 4) orthogonalizes to the identity: w - 0.1 * I
  np.testing.assert_allclose(w.numpy(), [[0.9, 0.0], [0.0, 1.9]], atol=1e-3)


# ---- random factories: rand is float-only, uniform of an int dtype truncates, unknown keywords are errors
def test_rand_needs_a_float_dtype():
  with pytest.raises(ValueError, match="float dtype"): Tensor.rand(2, 3, dtype=dtypes.int32)
  with pytest.raises(ValueError, match="float dtype"): Tensor.ones(2, dtype=dtypes.int32).rand_like()
  assert Tensor.ones(2, dtype=dtypes.int32).rand_like(dtype=dtypes.float16).dtype == dtypes.float16
  assert Tensor.ones(2, dtype=dtypes.int32).randn_like().dtype == dtypes.int32  # drawn as floats, then cast (as tinygrad)
  u = Tensor.uniform(200, low=3, high=6, dtype=dtypes.int32)
  assert u.dtype == dtypes.int32 and set(u.tolist()) <= {3, 4, 5}
  assert Tensor.uniform(4, dtype="float16").dtype == dtypes.float16


@pytest.mark.parametrize("make", [
  lambda: Tensor.rand(2, dtpye=dtypes.float16), lambda: Tensor.randn(2, shape=(2,)), lambda: Tensor.normal(2, sd=2.0),
  lambda: Tensor.uniform(2, lo=1), lambda: Tensor.kaiming_uniform(2, 2, b=1), lambda: Tensor.kaiming_normal(2, 2, fan=1),
  lambda: Tensor.glorot_uniform(2, 2, gain=1), lambda: Tensor.scaled_uniform(2, foo=1), lambda: Tensor.arange(3, dtyp=dtypes.int8),
  lambda: Tensor.linspace(0, 1, 3, foo=1), lambda: Tensor.eye(2, foo=1), lambda: Tensor.randperm(3, foo=1),
  lambda: Tensor.ones(2).rand_like(foo=1)])
def test_factories_reject_unknown_keywords(make):
  with pytest.raises(TypeError, match="unexpected keyword argument"): make()


def test_factory_shape_and_bound_errors():
  with pytest.raises(ValueError, match="negative dimension"): Tensor.rand(-1, 2)
  with pytest.raises(RuntimeError, match="negative dimension"): Tensor.empty(2, -3)
  with pytest.raises(TypeError, match="must be ints"): Tensor.randint(2, low=0.5, high=5)
  with pytest.raises(ValueError, match="low < high"): Tensor.randint(2, low=5, high=5)
  assert Tensor.eye(2, dtype="int8", requires_grad=False).dtype == dtypes.int8


# ---- names programs import: tinygrad.engine.jit.TinyJit, every setting and the small helpers of tinygrad.helpers
def test_helpers_exports():
  import tinygrad.helpers as h
  from tinygrad.engine.jit import TinyJit as EngineTinyJit
  assert EngineTinyJit is TinyJit
  assert h.JIT.value == 1 and h.WINO.value == 0 and h.USE_TC is h.TC and h.FLOAT16.key == "FLOAT16"
  with Context(WINO=1): assert h.WINO.value == 1
  with pytest.raises(AttributeError): h.NOT_A_SETTING  # noqa: B018
  assert h.fully_flatten([[1, (2, np.array(3))], np.array([4, 5]), [[[]]]]) == [1, 2, 3, 4, 5]
  assert h.get_child({"a": [0, {"b": 5}]}, "a.1.b") == 5 and h.get_child(nn.Linear(2, 3), "weight").shape == (3, 2)
  assert h.merge_dicts([{"a": 1}, {"b": 2}, {"a": 1}]) == {"a": 1, "b": 2}
  with pytest.raises(RuntimeError): h.merge_dicts([{"a": 1}, {"a": 2}])
  assert h.get_single_element([3]) == 3 and h.get_shape([[1, 2], [3, 4], [5, 6]]) == (3, 2) and h.get_shape(3) == ()
  assert [h.cdiv(a, b) for a, b in [(7, 2), (-7, 2), (7, -2), (-7, -2), (3, 0)]] == [3, -3, -3, 3, 0]
  assert [h.cmod(a, b) for a, b in [(7, 2), (-7, 2), (7, -2), (-7, -2)]] == [1, -1, 1, -1]
  assert (h.round_down(17, 5), h.next_power2(0), h.next_power2(5), h.next_power2(8)) == (15, 1, 8, 8)
  assert h.polyN(2.0, [1, 2, 3]) == 11.0 and h.polyN(Tensor([1.0, 2.0]), [1.0, 0.0, -1.0]).tolist() == [0.0, 3.0]
  assert (h.i2u(8, -1), h.getbits(0b110110, 1, 3), h.lo32(2**40 + 7), h.hi32(2**40 + 7)) == (255, 0b011, 7, 256)
  assert h.data64(2**40 + 7) == (256, 7) and h.data64_le(2**40 + 7) == (7, 256)
  assert (h.pluralize("kernel", 1), h.pluralize("kernel", 3)) == ("1 kernel", "3 kernels")
  assert [h.time_to_str(t) for t in (0.5, 20, 1e-5)] == ["  500.00ms", "   20.00s ", "   10.00us"]
  assert h.ansistrip("\x1b[31mhi\x1b[0mx") == "hix" and h.ansilen("\x1b[31mhi\x1b[0m") == 2
  assert h.to_function_name("a.b") == "a2Eb" and h.word_wrap("abcdefghij\nxy", 4) == "abcd\nefgh\nij\nxy"
  assert h.flat_mv(memoryview(np.zeros((2, 3), np.float32))).shape == (24,)
  assert list(h.tqdm([1, 2, 3], disable=True)) == [1, 2, 3] and list(h.trange(3, disable=True)) == [0, 1, 2]
  with h.tqdm(total=4, file=io.StringIO()) as bar: bar.update(3)  # the tqdm library's own
  assert bar.n == 3


# ---- a program may replace an optimizer's lr tensor with a float (or a 0-d tensor), as tinygrad's step reads it as is
@pytest.mark.parametrize("lr", [0.25, Tensor(0.25)])
def test_optimizer_lr_replaced_by_a_float(lr):
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = nn.optim.SGD([w], lr=0.5)
  opt.lr = lr
  (w * 2).sum().backward()
  with Context(TRAINING=1): opt.step()
  assert w.tolist() == [0.5, 1.5]


# ---- a reduction that names a dim twice raises (torch and tinygrad), it doesn't reduce it once
def test_reduce_repeated_axis_raises():
  x = Tensor.arange(6).reshape(2, 3)
  for f in (lambda: x.sum((0, 0)), lambda: x.max((1, -1)), lambda: x.float().mean((0, -2))):
    with pytest.raises(RuntimeError, match="more than once"): f()
  assert x.sum((0, 1)).item() == 15


# ---- where(): a float scalar next to an int tensor makes the result float; it is never checked against the int dtype
def test_where_int_tensor_and_float_scalar():
  c = Tensor([True, False])
  r = c.where(Tensor([1, 2]), 1e20)
  assert r.dtype == dtypes.float32 and r.tolist() == [1.0, np.float32(1e20)]
  assert c.where(float("nan"), Tensor([1, 2], dtype=dtypes.uint8)).tolist()[1] == 2.0
  with pytest.raises(RuntimeError, match="overflow"): c.where(Tensor([1, 2], dtype=dtypes.int8), 1000)  # an int still must fit


# ---- NaN or an infinity in data for an int dtype raises as Python's int() (torch and tinygrad too); bool and floats take them
def test_nan_and_inf_data_for_an_int_dtype_raise():
  for data in ([float("nan")], float("nan")):
    with pytest.raises(ValueError): Tensor(data, dtype=dtypes.int32)
  with pytest.raises(OverflowError): Tensor([1.0, float("inf")], dtype=dtypes.uint8)
  assert Tensor([float("nan"), 0.0], dtype=dtypes.bool).tolist() == [True, False]
  assert Tensor([2.7, -2.7], dtype=dtypes.int8).tolist() == [2, -2]


# ---- DType.min / max / bitsize, as in tinygrad
def test_dtype_min_max_bitsize():
  assert (dtypes.int8.min, dtypes.int8.max, dtypes.uint64.max, dtypes.uint8.min) == (-128, 127, 2**64 - 1, 0)
  assert (dtypes.float32.min, dtypes.half.max, dtypes.bool.min, dtypes.bool.max) == (-math.inf, math.inf, False, True)
  assert (dtypes.bool.bitsize, dtypes.half.bitsize, dtypes.int64.bitsize) == (1, 16, 64)


# ---- gradients are for float tensors only: tinygrad raises RuntimeError (torch won't let an int tensor require grad)
def test_gradient_of_or_to_an_int_tensor_raises():
  x = Tensor([1, 2], requires_grad=True)
  with pytest.raises(RuntimeError, match="float"): (x * 2).sum().backward()
  f = Tensor([1.0, 2.0], requires_grad=True)
  with pytest.raises(RuntimeError, match="float"): f.argmax().gradient(f)
  (f * f).sum().backward()
  assert f.grad is not None and f.grad.tolist() == [2.0, 4.0]


# ---- a float index to gather/scatter raises RuntimeError, as tinygrad (and TypeError, as before)
def test_gather_scatter_float_index_raise_runtime_error():
  x = Tensor([1.0, 2.0])
  with pytest.raises(RuntimeError, match="integer dtype"): x.gather(0, Tensor([1.0]))
  with pytest.raises(TypeError, match="integer dtype"): x.scatter(0, Tensor([1.0]), Tensor([3.0]))


# ---- TinyJit's argument and return contract, as tinygrad 0.14's
def test_jit_tensors_in_dict_args_are_inputs_and_dict_returns_are_realized():
  @TinyJit
  def f(d: dict) -> dict: return {"sum": d["a"] + d["b"], "twice": d["a"] * 2}
  for i in range(4):  # replays read the new tensors of the dict (ours replayed the captured ones)
    out = f({"a": Tensor([float(i)]), "b": Tensor([1.0])})
    assert out["sum"].tolist() == [i + 1.0] and out["twice"].tolist() == [2.0 * i]


def test_jit_non_tensor_return_raises_at_capture():
  @TinyJit
  def f(x: Tensor) -> tuple: return (x * 2).realize(), 3
  f(Tensor([1.0]))
  with pytest.raises(JitError, match="non-Tensor"): f(Tensor([1.0]))
  @TinyJit
  def g(x: Tensor) -> list: return [x * 2, None, {"y": x + 1}]
  assert [g(Tensor([float(i)]))[2]["y"].item() for i in range(3)] == [1.0, 2.0, 3.0]


def test_jit_duplicate_inputs_raise():
  @TinyJit
  def f(x: Tensor, y: Tensor) -> Tensor: return (x + y).realize()
  t = Tensor([1.0]).realize()
  with pytest.raises(JitError, match="duplicate inputs"): f(t, t)


def test_jit_kwarg_names_must_match_the_capture():
  @TinyJit
  def f(x: Tensor | None = None, y: Tensor | None = None) -> Tensor: return ((x if x is not None else y) * 2).realize()
  for i in range(3): f(x=Tensor([float(i)]))
  with pytest.raises(JitError, match="args mismatch"): f(y=Tensor([5.0]))


def test_jit_prune_drops_one_time_kernels():
  from tinygrad import GlobalCounters
  w = Tensor([1.0, 2.0, 3.0]).contiguous().realize()
  def body(x: Tensor) -> Tensor: return (x * (w + 1).contiguous().realize()).sum().realize()
  counts = {}
  for name, jit in (("pruned", TinyJit(prune=True)(body)), ("plain", TinyJit(body))):
    for i in range(4):
      GlobalCounters.reset()
      assert jit(Tensor([float(i)] * 3)).item() == 9.0 * i
    counts[name] = GlobalCounters.kernel_count
  assert counts["pruned"] == counts["plain"] - 1


def test_global_counters_mem_used_per_device():
  from tinygrad import Device, GlobalCounters
  before = GlobalCounters.mem_used_per_device[Device.DEFAULT]
  t = Tensor.ones(1000).contiguous().realize()
  assert GlobalCounters.mem_used_per_device[Device.DEFAULT] - before >= 4000
  del t
