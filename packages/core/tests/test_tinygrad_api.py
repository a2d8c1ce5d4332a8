"""Programs written for tinygrad run unchanged: the names, aliases, settings and device attributes they use exist and mean
what they mean in tinygrad 0.14.0 (and, where tinygrad has none, in torch). Values are checked against numpy."""
import contextlib

import numpy as np
import pytest
from tinygrad import Context, Device, Tensor, dtypes, helpers


def test_dtype_aliases():
  assert dtypes.int is dtypes.int32 and dtypes.uint is dtypes.uint32
  assert (dtypes.long, dtypes.short, dtypes.double, dtypes.half, dtypes.float) == (dtypes.int64, dtypes.int16, dtypes.float64,
                                                                                  dtypes.float16, dtypes.float32)
  assert Tensor([1, 2], dtype="int").dtype == dtypes.int32
  assert dtypes.finfo(dtypes.float32) == (8, 23)


@pytest.mark.parametrize("name,dt", [("bfloat16", dtypes.bfloat16), ("double", dtypes.float64), ("long", dtypes.int64),
                                     ("short", dtypes.int16), ("half", dtypes.float16), ("int", dtypes.int32)])
def test_cast_methods(name, dt):
  t = getattr(Tensor([1.0, -2.0, 3.0]), name)()
  assert t.dtype == dt
  np.testing.assert_array_equal(t.float().numpy(), [1, -2, 3])


def test_diag_diagonal():
  x = np.arange(24).reshape(2, 3, 4)
  for args in [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 1, 2), (0, 2, 0), (5, 1, 2), (-2, -1, -2)]:
    np.testing.assert_array_equal(Tensor(x).diagonal(*args).numpy(), np.diagonal(x, *args), err_msg=str(args))
  for k in (0, 1, -2):
    np.testing.assert_array_equal(Tensor([1, 2, 3]).diag(k).numpy(), np.diag([1, 2, 3], k))
    np.testing.assert_array_equal(Tensor(np.arange(12).reshape(3, 4)).diag(k).numpy(), np.diag(np.arange(12).reshape(3, 4), k))
  with pytest.raises(RuntimeError): Tensor.ones(2, 2).diagonal(0, 1, 1)
  with pytest.raises(IndexError): Tensor.ones(2, 2).diagonal(0, 0, 2)


def test_normalize_softmin():
  x = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, -1.0]], dtype=np.float32)
  want = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
  np.testing.assert_allclose(Tensor(x).normalize().numpy(), want, rtol=1e-6)
  np.testing.assert_allclose(Tensor(x).normalize(p=1, dim=0).numpy(), x / np.abs(x).sum(0, keepdims=True), rtol=1e-6)
  e = np.exp(-x - (-x).max(-1, keepdims=True))
  np.testing.assert_allclose(Tensor(x).softmin().numpy(), e / e.sum(-1, keepdims=True), rtol=1e-6)


def test_nonzero():
  x = np.array([[0, 1, 0], [2, 0, 3]])
  np.testing.assert_array_equal(Tensor(x).nonzero().numpy(), np.argwhere(x))
  assert Tensor(x).nonzero().dtype == dtypes.int32
  np.testing.assert_array_equal(Tensor([0, 1, 2]).nonzero(size=4, fill_value=-1).numpy(), [[1], [2], [-1], [-1]])
  np.testing.assert_array_equal(Tensor([0.0, 1.5, 0.0, 2.0]).nonzero(size=1).numpy(), [[1]])
  assert Tensor(3).nonzero().shape == (1, 0) and Tensor(0).nonzero().shape == (0, 0)


def test_masked_select_size():
  x, m = Tensor([1.0, 2.0, 3.0]), Tensor([True, False, True])
  np.testing.assert_array_equal(x.masked_select(m).numpy(), [1, 3])
  np.testing.assert_array_equal(x.masked_select(m, size=4, fill_value=9).numpy(), [1, 3, 9, 9])
  np.testing.assert_array_equal(x.masked_select(m, size=1).numpy(), [1])


def test_sequential_gelu_stack_cat_tuple():
  np.testing.assert_allclose(Tensor([1.0, 2.0]).sequential([lambda t: t * 2, lambda t: t + 1]).numpy(), [3, 5])
  x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0], dtype=np.float32)
  from math import erf
  np.testing.assert_allclose(Tensor(x).gelu(approximate="none").numpy(), [0.5 * v * (1 + erf(v / 2 ** 0.5)) for v in x], atol=1e-6)
  np.testing.assert_allclose(Tensor(x).gelu(approximate="tanh").numpy(), Tensor(x).gelu().numpy())
  with pytest.raises(ValueError): Tensor(x).gelu(approximate="exact")
  a, b = Tensor([1, 2]), Tensor([3, 4])
  np.testing.assert_array_equal(Tensor.stack((a, b)).numpy(), [[1, 2], [3, 4]])
  np.testing.assert_array_equal(Tensor.stack([a, b], dim=1).numpy(), [[1, 3], [2, 4]])
  np.testing.assert_array_equal(Tensor.cat((a, b)).numpy(), [1, 2, 3, 4])


def test_train_test_context():
  assert not Tensor.training
  with Tensor.train():
    assert Tensor.training
    with Tensor.test(): assert not Tensor.training
    assert Tensor.training
  assert not Tensor.training

  @Tensor.train()
  def step() -> bool: return Tensor.training
  assert step() and not Tensor.training


def test_param_and_graph_helpers():
  t = Tensor([1.0, 2.0])
  assert t.is_param_() is t and t.requires_grad and t.is_param
  assert not t.is_param_(False).is_param
  assert t.kernelize() is t
  w = Tensor([1.0, 2.0], requires_grad=True)
  (w.contiguous_backward() * 3).sum().backward()
  np.testing.assert_array_equal(w.grad.numpy(), [3, 3])


def test_randperm():
  p = Tensor.randperm(50)
  assert p.dtype == dtypes.int32 and sorted(p.numpy().tolist()) == list(range(50))
  assert Tensor.randperm(8, dtype=dtypes.int64).dtype == dtypes.int64 and Tensor.randperm(0).shape == (0,)


@pytest.mark.devices(2)
def test_shard_like():
  devs = (Device.DEFAULT, f"{Device.DEFAULT.split(':')[0]}:1")
  a = Tensor.arange(8).reshape(4, 2).float().shard(devs, axis=0)
  b = Tensor.ones(4, 2).shard_like(a * 2)
  assert b.device == a.device
  np.testing.assert_array_equal((a + b).numpy(), np.arange(8).reshape(4, 2) + 1)
  assert Tensor.ones(2).shard_like(Tensor.ones(2)).device == Tensor.ones(2).device


def test_dev_reads_like_tinygrad():
  with Context(DEV="CPU:LLVM;PCI+AMD::gfx950"):
    assert helpers.DEV.value == "CPU:LLVM;PCI+AMD::gfx950"
    assert (helpers.DEV.device, helpers.DEV.renderer, helpers.DEV.interface) == ("CPU", "LLVM", "")
    t = helpers.DEV.target("AMD")
    assert (t.device, t.interface, t.arch) == ("AMD", "PCI", "gfx950")
    assert helpers.DEV.target("CUDA", renderer="PTX").renderer == "PTX"
    assert helpers.DEV.target("CPU", renderer="CLANG").renderer == "LLVM"  # set in DEV: the default doesn't replace it
  with pytest.raises(AttributeError): helpers.DEV.no_such_field  # noqa: B018
  assert isinstance(helpers.OSX, bool) and isinstance(helpers.WIN, bool)


def test_device_renderer_supported_dtypes():
  r = Device[Device.DEFAULT].renderer
  assert r is Device.renderer(Device.DEFAULT)
  sd = r.supported_dtypes()
  assert dtypes.float32 in sd and sd == r.supported_dtypes


@pytest.mark.parametrize("name", ["IGNORE_BEAM_CACHE", "TRANSCENDENTAL", "SPLIT_REDUCEOP", "DEFAULT_FLOAT", "VIZ", "IMAGE", "PROFILE"])
def test_tinygrad_context_vars_accepted(name):
  with Context(**{name: helpers.ContextVar._registry[name].value}): pass
  with pytest.raises(KeyError), contextlib.ExitStack() as s: s.enter_context(Context(NO_SUCH_SETTING_XYZ=1))


# ---- error types: torch's and tinygrad's (RuntimeError / IndexError) for invalid arguments, and still ValueError for our callers
_x = Tensor.ones(2, 3)
ERRORS = {
  "reshape_two_neg": (RuntimeError, lambda: _x.reshape(-1, -1)), "reshape_size": (RuntimeError, lambda: _x.reshape(4, 2)),
  "permute_dup": (RuntimeError, lambda: _x.permute(0, 0)), "permute_len": (RuntimeError, lambda: _x.permute(0)),
  "sum_dim": (IndexError, lambda: _x.sum(5)), "index": (IndexError, lambda: _x[5]), "too_many_indices": (IndexError, lambda: _x[0, 0, 0]),
  "matmul": (RuntimeError, lambda: _x @ Tensor.ones(2, 3)), "matmul_0d": (RuntimeError, lambda: Tensor(1.0) @ _x),
  "broadcast": (RuntimeError, lambda: _x + Tensor.ones(4, 3)), "one_hot_classes": (RuntimeError, lambda: Tensor([1, 2]).one_hot(-3)),
  "linspace": (RuntimeError, lambda: Tensor.linspace(0, 1, -1)), "meshgrid": (RuntimeError, lambda: _x.meshgrid(_x, indexing="zz")),
  "expand": (RuntimeError, lambda: _x.expand(4, 3)), "cat": (RuntimeError, lambda: _x.cat(Tensor.ones(2, 4))),
  "stack": (RuntimeError, lambda: _x.stack(Tensor.ones(3, 2))), "split": (RuntimeError, lambda: _x.split([1, 1], dim=1)),
  "flip_dup": (RuntimeError, lambda: _x.flip(0, 0)), "tril_1d": (RuntimeError, lambda: Tensor.ones(3).tril()),
  "unsqueeze": (IndexError, lambda: _x.unsqueeze(5)), "transpose": (IndexError, lambda: _x.transpose(0, 4)),
  "gather_ndim": (RuntimeError, lambda: _x.gather(0, Tensor([0, 0]))), "topk": (RuntimeError, lambda: _x.topk(5)),
  "argmax_empty": (IndexError, lambda: Tensor.ones(0).argmax()), "item": (RuntimeError, lambda: _x.item()),
  "chunk": (RuntimeError, lambda: _x.chunk(0)), "repeat": (RuntimeError, lambda: _x.repeat(2)),
  "roll": (RuntimeError, lambda: _x.roll((1, 2), (0,))), "diag_3d": (RuntimeError, lambda: Tensor.ones(2, 2, 2).diag()),
  "conv_channels": (RuntimeError, lambda: Tensor.ones(1, 1, 3, 3).conv2d(Tensor.ones(1, 2, 2, 2))),
  "randint": (RuntimeError, lambda: Tensor.randint(2, low=3, high=1)), "einsum": (RuntimeError, lambda: Tensor.einsum("ij,jk->ik", _x, _x)),
}


@pytest.mark.compile_only
@pytest.mark.parametrize("name", list(ERRORS))
def test_error_types_match_torch(name):
  kind, fn = ERRORS[name]
  with pytest.raises(kind) as e: fn()
  assert isinstance(e.value, ValueError), f"{type(e.value).__name__} is not a ValueError: our own callers catch that"


def test_one_hot_float_is_type_and_runtime_error():
  with pytest.raises(RuntimeError) as e: Tensor([1.0]).one_hot(3)
  assert isinstance(e.value, TypeError)


# ---- more of tinygrad's Tensor surface (bench/api_diff.py)
def test_unfold():
  x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  for d, s, st in [(1, 2, 1), (2, 3, 1), (-1, 2, 2), (0, 1, 1), (2, 4, 1), (2, 0, 1)]:
    want = np.lib.stride_tricks.sliding_window_view(np.moveaxis(x, d, -1), s, axis=-1)[..., ::st, :]
    want = np.moveaxis(want, -2, d % x.ndim)
    np.testing.assert_array_equal(Tensor(x).unfold(d, s, st).numpy(), want, err_msg=str((d, s, st)))


def test_small_helpers():
  assert Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.0000001])).item() and not Tensor([1.0]).allclose(Tensor([1.1])).item()
  assert Tensor([1.0]).is_floating_point() and not Tensor([1]).is_floating_point()
  e = Tensor.ones(2, 3, dtype=dtypes.int16).empty_like()
  assert e.shape == (2, 3) and e.dtype == dtypes.int16
  np.testing.assert_array_equal(Tensor.ones(2).const_like(3).numpy(), [3, 3])
  np.testing.assert_array_equal(Tensor([1.0]).pad_to(3, value=-1).numpy(), [1, -1, -1])
  t = Tensor([1.0, 2.0])
  assert t.to_(t.device) is t and t.clone(t.device).tolist() == [1.0, 2.0]
  assert Tensor([0.0]).logaddexp(other=Tensor([0.0])).item() == pytest.approx(np.log(2))
  assert dtypes.finfo(dtype=dtypes.float16) == (5, 10)
  assert dtypes.int32 in dtypes.ints and dtypes.uint8 in dtypes.uints and dtypes.int8 in dtypes.sints and dtypes.half in dtypes.floats
  assert dtypes.bool in dtypes.all


def test_multinomial_without_replacement_draws_distinct_categories():
  # tinygrad 0.14 draws several without replacement (a beam search's sampling); a zero weight comes last, and more draws
  # than categories is an error (torch's too)
  Tensor.manual_seed(0)
  w = Tensor([0.7, 0.2, 0.1, 0.0])
  draws = np.stack([w.multinomial(3, replacement=False).numpy() for _ in range(200)])
  assert draws.dtype == np.int32 and all(len(set(d)) == 3 for d in draws) and not (draws == 3).any()
  assert 0.55 < (draws[:, 0] == 0).mean() < 0.85  # the first draw follows the weights
  assert Tensor([[1.0, 1, 1, 1, 1, 1, 0, 0]]).multinomial(5, replacement=False).shape == (1, 5)
  with pytest.raises(ValueError): w.multinomial(5, replacement=False)


def test_initializers_and_multinomial():
  assert abs(float(Tensor.kaiming_normal(64, 32).numpy().std()) - (2 / 1.0001) ** 0.5 / 32 ** 0.5) < 0.02
  g = Tensor.glorot_uniform(30, 40).numpy()
  assert np.abs(g).max() <= (6 / 70) ** 0.5
  counts = np.bincount(Tensor([0.1, 0.0, 0.9]).multinomial(1000, replacement=True).numpy(), minlength=3)
  assert counts[1] == 0 and 800 < counts[2] < 980
  assert Tensor([[0.0, 1.0], [1.0, 0.0]]).multinomial().tolist() == [[1], [0]]


# ---- symbolic: a bound Variable in a slice, and reductions over the symbolic length
def test_symbolic_slice_and_reductions():
  from tinygrad import Variable
  v = Variable("v", 2, 10).bind(3)
  x = Tensor.arange(10).float()
  assert x[:v].sum().item() == 3 and x[v:].sum().item() == 42 and x[:v].mean().item() == 1
  assert x[:v].var().item() == 1 and x[:v].std().item() == 1
  y = Tensor.ones(10, 4)[:v]
  np.testing.assert_array_equal(y.sum(0).numpy(), [3, 3, 3, 3])
  np.testing.assert_array_equal(y.max(0).numpy(), [1, 1, 1, 1])
  assert y.sum().item() == 12
  assert Tensor.ones(10, 4)[:v, 0].sum().item() == 3  # next to an int index (more in test_symbolic_shapes.py)
