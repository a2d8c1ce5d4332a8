"""Behaviour that tinygrad's own test suite expects and tinygrad 0.14 has (round 2: test_symbolic_jit.py, test/null/test_tensor.py,
unit/test_jit.py, unit/test_multitensor.py, ...), found by running that suite against this package: each case failed here before
its fix. References are numpy."""
import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Tensor, TinyJit, Variable

pytestmark = pytest.mark.skipif(is_null_device(), reason="reads values back")


def test_jit_input_with_a_symbolic_shape_replays_with_its_bound_value():
  """x[:, :v.bind(n)] is the same input to a TinyJit for every n (tinygrad compares the unbound shape): the replay runs the
  captured kernels with the value bound in the input's shape, not a JitError about a 'changed' shape (3, i) -> (3, i)."""
  def f(a: Tensor, b: Tensor) -> Tensor: return (a @ b + 1).realize()
  jf = TinyJit(f)
  a, b = Tensor.rand(3, 10).realize(), Tensor.rand(10, 5).realize()
  for i in range(1, 6):
    v = Variable("i", 1, 10).bind(i)
    got = jf(a[:, :v], b[:v, :]).numpy()
    np.testing.assert_allclose(got, a.numpy()[:, :i] @ b.numpy()[:i, :] + 1, rtol=1e-5, atol=1e-6)
  assert len(jf.captured) == 1
  with pytest.raises(Exception, match="changed from shape"): jf(a[:, :Variable("j", 1, 10).bind(2)], b[:2, :])


def test_function_module_and_tinygrad_keywords():
  """tinygrad 0.14 programs import `function` from tinygrad.function and pass its keywords allow_implicit and
  precompile_backward; both were an ImportError / TypeError here."""
  import tinygrad
  from tinygrad.function import function
  assert function is tinygrad.function

  class Model:
    def __init__(self): self.w = Tensor([10.0, 20.0, 30.0]).realize()
    @function(allow_implicit=True, precompile_backward=True)
    def __call__(self, x: Tensor) -> Tensor: return x * self.w

  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  out = Model()(x)
  np.testing.assert_equal(out.numpy(), [10, 40, 90])
  out.sum().backward()
  np.testing.assert_equal(x.grad.numpy(), [10, 20, 30])
  np.testing.assert_equal(function(lambda a: a + 1, allow_implicit=True)(Tensor([1, 2])).numpy(), [2, 3])
  with pytest.raises(NotImplementedError, match="grad_fxn"): function(grad_fxn=lambda *a: a)


@pytest.mark.devices(2)
def test_index_or_src_on_another_device_is_a_runtime_error():
  """gather/scatter/tensor indexing with an index (or src) on another device raise, as in tinygrad and torch, instead of
  copying it over silently; a device mismatch in elementwise ops and where() is a RuntimeError too (it is also a ValueError)."""
  from tinygrad import Device, dtypes
  here, other = Device.DEFAULT, f"{Device.DEFAULT.split(':')[0]}:1"  # instance 1 of the session's device kind
  x = Tensor.zeros(3, 4).contiguous().realize()
  idx = Tensor.zeros(3, 4, dtype=dtypes.int32, device=other).contiguous().realize()
  for f in (lambda: x.gather(0, idx), lambda: x.scatter(0, idx, Tensor.ones(3, 4)), lambda: x.scatter(0, idx.to(here), Tensor.ones(3, 4, device=other).contiguous().realize()),
            lambda: x[Tensor([0, 1], device=other)], lambda: x.sparse_categorical_crossentropy(Tensor([0, 1, 2], device=other)),
            lambda: x + idx, lambda: Tensor([True], device=other).where(x, 0)):
    with pytest.raises(RuntimeError, match="on"): f()
    with pytest.raises(ValueError): f()
  np.testing.assert_equal(x.gather(0, idx.to(here)).numpy(), np.zeros((3, 4)))


def test_a_tensor_computed_from_constants_goes_to_the_other_device():
  """An index or operand computed from constants alone (arange, full: no buffer holds its data; tinygrad's are device-less)
  is made on the other tensor's device, as in tinygrad, instead of a device-mismatch error; one made on a device asked for
  (not the default) stays there, so a mismatch with it raises."""
  idx = ((Tensor.arange(8) + 0.5) / 4 - 0.5).clip(0, 1).sub(0.5).ceil().int()
  np.testing.assert_equal(Tensor([0, 1], device="CPU:1")[idx].numpy(), [0, 0, 0, 0, 1, 1, 1, 1])
  assert (Tensor([1, 2, 3], device="CPU:1") + Tensor.arange(3)).device == "CPU:1"
  np.testing.assert_equal((Tensor.arange(3) * Tensor([1, 2, 3], device="CPU:1")).numpy(), [0, 2, 6])
  np.testing.assert_equal((Tensor.arange(3) < 1).where(Tensor([1.0, 2, 3], device="CPU:1"), 0).numpy(), [1, 0, 0])
  np.testing.assert_equal(Tensor([[1.0, 2], [3, 4]], device="CPU:1").gather(1, Tensor.zeros(2, 1, dtype="int32")).numpy(), [[1], [3]])
  with pytest.raises(RuntimeError): Tensor([[1.0, 2], [3, 4]]).gather(1, Tensor.zeros(2, 1, dtype="int32", device="CPU:1"))
  with pytest.raises(RuntimeError): Tensor([1.0, 2]) + Tensor.ones(2, device="CPU:1")


def test_a_tuple_of_one_device_is_that_device():
  """device=("CPU",) (as code generic over device counts passes) is a plain tensor on CPU, as in tinygrad, so it combines with
  other tensors there; it was a sharded tensor of one part that an add with a CPU tensor refused."""
  from tinygrad import Device
  dev = Device.canonicalize(None)
  for t in (Tensor([1.0], device=(dev,)), Tensor.empty(1, device=(dev,)), Tensor.ones(1).to((dev,)), Tensor.ones(1).shard((dev,), axis=0)):
    assert t.device == dev
  np.testing.assert_equal((Tensor([1.0], device=(dev,)) + Tensor([2.0])).numpy(), [3.0])


def test_non_int_shape_message():
  """tinygrad's message (its tests match 'shape must be int'), still a RuntimeError and ValueError."""
  for dim in (2.0, 2.5, -1):
    with pytest.raises(RuntimeError, match="shape must be int"): Tensor.ones(dim)


@pytest.mark.devices(3)  # instances 1 and 2 of the device
def test_assign_into_a_view_of_a_sharded_tensor_writes_its_buffers():
  """out[:, 2:3].assign(v) on a tensor sharded on axis 0 writes each device's part of the column (it silently wrote nothing:
  the view 'had no buffer' and just took the value), also at a Variable's offset; a view across the shards raises."""
  from tinygrad import Device
  devs = tuple(f"{Device.canonicalize(None)}:{i}" for i in (1, 2))
  want = [[0, 0, 1, 0]] * 4
  out = Tensor.zeros(4, 4).shard(devs, 0).contiguous().realize()
  out[:, 2:3].assign(Tensor.ones(4, 1).shard(devs, 0).contiguous().realize())
  assert out.tolist() == want
  out = Tensor.zeros(4, 4).contiguous().realize().shard(devs, 0).realize()
  v = Variable("i", 0, 3).bind(2)
  out[:, v:v + 1].assign(Tensor.ones(4, 1).shard(devs, 0)).realize()
  assert out.tolist() == want
  out = Tensor.zeros(4, 4).shard(devs, 1).contiguous().realize()
  out[1:3].assign(Tensor.ones(2, 4).shard(devs, 1))
  assert out.tolist() == [[0] * 4, [1] * 4, [1] * 4, [0] * 4]
  with pytest.raises(NotImplementedError, match="setitem"): out.shard(devs, 0).contiguous().realize()[1:3].assign(Tensor.ones(2, 4).shard(devs, 0))


def test_jit_returning_an_input_returns_this_calls_input():
  """A jitted function that returns one of its inputs (`return b.assign(a + 1)` into a fresh Tensor.empty_like each call)
  returns this call's tensor in a replay, which the replay wrote; it returned the capturing call's tensor (stale values)."""
  @TinyJit
  def f(a: Tensor, b: Tensor) -> Tensor: return b.assign(a + 1)
  for i in range(5):
    b = Tensor.empty_like(a := Tensor([i]))
    c = f(a, b)
    assert c is b and c.item() == i + 1


def test_tensorio_seek_clamps_to_the_file():
  """tinygrad's TensorIO.seek stays within [0, len]: a seek past the end is at the end (it went past it here)."""
  from tinygrad.nn.state import TensorIO
  f = TensorIO(t := Tensor(b"Hello World!"))
  assert (f.seek(1), f.seek(-2, 2), f.seek(1, 1), f.seek(10, 1), f.seek(10, 2), f.seek(-10, 0)) == (1, len(t) - 2, len(t) - 1, len(t), len(t), 0)
  f.seek(100)
  assert f.read() == b"" and f.tell() == len(t)


def test_conv_with_overlapping_windows_over_a_symbolic_length():
  """conv1d over x[:, :, :v] with kernel 12 > stride 6: the window view's repeat counts were symbolic quotients that the shape
  had to branch on (NotImplementedError); known from the bounds, they are plain ints."""
  v = Variable("v", 11, 100)
  x, w = Tensor.randn(1, 8, 100).realize(), Tensor.randn(16, 8, 12).realize()
  for n in (11, 79, 100):
    got = x[:, :, :v.bind(n)].conv2d(w, stride=6, padding=(3, 3))
    want = x[:, :, :n].conv2d(w, stride=6, padding=(3, 3)).numpy()
    np.testing.assert_allclose(got[:, :, :want.shape[-1]].numpy(), want, rtol=1e-5, atol=1e-5)


def test_jit_does_not_capture_what_runs_under_capturing_0():
  """Context(CAPTURING=0) inside a jitted function keeps those kernels out of the capture (tinygrad's one-time work); the
  setting was accepted and ignored here, so they were replayed every call."""
  from tinygrad import Context
  @TinyJit
  def add(a: Tensor, b: Tensor) -> Tensor:
    with Context(CAPTURING=0): Tensor.zeros(4, 4).contiguous().realize()
    return (a + b).realize()
  for i in range(4): assert add(Tensor([i]), Tensor([i])).item() == 2 * i
  assert len(add.captured) == 1


def test_linear_dtype_is_the_result_dtype():
  """linear(w, b, dtype=) computes the product in dtype and casts the bias to it, for a 1-D weight too (its dtype was
  ignored there, and a float bias made an int product float)."""
  from tinygrad import dtypes
  x, w, b = Tensor([1, 2], dtype=dtypes.int8), Tensor([100, 100], dtype=dtypes.int8), Tensor([-0.5, 1.5])
  r = x.linear(w, b, dtype=dtypes.int32)
  assert r.dtype == dtypes.int32 and r.tolist() == [100, 201]  # 2*100 in int32, not int8; the bias cast to int first
  r = x.linear(Tensor([[100], [100]], dtype=dtypes.int8), b[:1], dtype=dtypes.int32)
  assert r.dtype == dtypes.int32 and r.tolist() == [300]
  t = Tensor([0, 1], dtype=dtypes.bool)
  assert t.linear(t, t, dtype=dtypes.int8).dtype == dtypes.int8 and t.linear(t).dtype == dtypes.bool


def test_rearrange_formula_errors_are_assertion_errors_too():
  """A malformed rearrange formula raises what tinygrad's checks raise (AssertionError) as well as ValueError/RuntimeError;
  axis names follow einops (no leading or trailing underscore)."""
  x = Tensor.zeros(1, 1, 1, 1, 1)
  for bad in ("a b c d (...) -> a b c ... d", "a b (c d ... -> a b c ... d", "a b* c d ... -> a b c ... d", "a b c d e -> f b c d e"):
    with pytest.raises(AssertionError): x.rearrange(bad)
    with pytest.raises(ValueError): x.rearrange(bad)
  for name in ("2b", "_x", "x_", "_"):
    with pytest.raises(AssertionError): Tensor.ones(1).rearrange(f"{name} -> {name}")
  assert Tensor.ones(1).rearrange("u_n_d -> u_n_d").shape == (1,)
  with pytest.raises(AssertionError): Tensor.zeros(8, 1).rearrange("(a1 a2 a3) b -> b a3 a2 a1", a1=2, a2=2, b=2)


def test_unknown_device_or_renderer_errors_catch_as_tinygrads():
  """Device["TYPO"] is a ModuleNotFoundError in tinygrad (it imports the runtime module) and an unknown renderer a RuntimeError;
  ours (DeviceNotFound, a KeyError) is both of those too."""
  from tinygrad import Context, Device
  with pytest.raises(ModuleNotFoundError, match="TYPO"): Device["TYPO"]
  with pytest.raises(KeyError): Device["TYPO"]
  with pytest.raises(RuntimeError, match="CLANG"), Context(DEV="CPU:CLANGJIT"): _ = Device[Device.DEFAULT].renderer


def test_a_variable_bound_to_two_values_in_one_kernel_is_a_runtime_error():
  """tinygrad raises RuntimeError ('bind mismatch'); ours was a ValueError only (now both)."""
  a = Tensor.arange(100 * 10).reshape(100, 10).contiguous()
  v = Variable("i", 0, 99)
  assert a[v.bind(12)].tolist() == a[12].tolist()
  with pytest.raises(RuntimeError, match="bind mismatch"): a[v.bind(12)].cat(a[v.bind(76)]).tolist()


@pytest.mark.devices(3)  # instances 1 and 2 of the device
def test_precompiled_function_of_a_sharded_tensor():
  """@function(precompile=True) on a sharded input compiled the traced graph without splitting it per device
  (NotImplementedError: can't index into MULTI); its placeholder is now sharded as the input, and a different split traces anew."""
  from tinygrad import Device, function
  devs = tuple(f"{Device.canonicalize(None)}:{i}" for i in (1, 2))
  @function(precompile=True)
  def f(x: Tensor) -> tuple[Tensor, Tensor]: return x + 1, x.sum(0)
  ref = np.arange(8, dtype=np.float32).reshape(4, 2)
  for axis in (0, 1, None):
    a, s = f(Tensor(ref).shard(devs, axis=axis))
    np.testing.assert_equal((a + 2).numpy(), ref + 3)
    np.testing.assert_equal(s.numpy(), ref.sum(0))
  assert len(f.traces) == 3


def test_arange_with_a_symbolic_step():
  """Tensor.arange(0, 10, v) and arange(b, e, s) with all three bound Variables (a NotImplementedError before), as tinygrad."""
  v = Variable("step", 1, 3)
  assert Tensor.arange(0, 10, v.bind(2))[:5].tolist() == [0, 2, 4, 6, 8]
  assert Tensor.arange(0, 10, v.bind(3)).sum().item() == sum(range(0, 10, 3))
  b, e, s = Variable("b", 0, 5), Variable("e", 10, 20), Variable("s", 1, 3)
  assert Tensor.arange(b.bind(2), e.bind(14), s.bind(3))[:4].tolist() == [2, 5, 8, 11]
  with pytest.raises(NotImplementedError): Tensor.arange(0, 10, Variable("z", 0, 3).bind(1))  # a step that may be 0


@pytest.mark.devices(3)  # instances 1 and 2 of the device
def test_sharding_an_unrealized_tensor_frees_its_source_at_once():
  """Tensor.zeros(n, n).contiguous().shard(devs).realize() kept the unsharded source buffer allocated until several garbage
  collections ran (the lowering cache referenced each unchanged node from itself, a cycle per node); tinygrad's
  test_multitensor checks GlobalCounters.mem_used right after."""
  from tinygrad import Device, GlobalCounters
  dev = Device.canonicalize(None)
  devs = (f"{dev}:1", f"{dev}:2")
  before, before_dev = GlobalCounters.mem_used, GlobalCounters.mem_used_per_device[dev]
  t = Tensor.zeros(100, 100).contiguous().shard(devs, axis=0).realize()
  assert GlobalCounters.mem_used_per_device[dev] <= before_dev and GlobalCounters.mem_used - before <= 100 * 100 * 4
  assert t.sum().item() == 0


def test_variable_spellings_of_tinygrad():
  """UOp.variable (tinygrad's Variable is UOp.variable), Variable.expr (its name, the key in var_vals) and sym_infer from
  tinygrad.uop.ops (shapes' ints pass through), which tinygrad programs use to size symbolic results."""
  from tinygrad.uop.ops import UOp, sym_infer
  v = UOp.variable("v", 11, 100)
  assert v is Variable("v", 11, 100) and v.expr == "v" and v.bind(13).expr == "v"
  x = Tensor.ones(1, 8, 100)[:, :, :v.bind(79)].conv2d(Tensor.ones(16, 8, 12), stride=6, padding=(3, 3))
  assert tuple(sym_infer(s, {v.expr: 79}) for s in x.shape) == (1, 16, 13)
  with pytest.raises(AttributeError): _ = Tensor.ones(2).uop.expr


def test_tensor_of_a_graph_or_tensor_with_dtype_or_device_converts():
  """Tensor(t.uop, dtype=...) casts and device=... moves, as tinygrad (and torch.tensor(t, dtype=)); both were ignored."""
  from tinygrad import dtypes
  t = Tensor([1, 2])
  a = Tensor(t.uop, dtype=dtypes.float)
  assert a.dtype == dtypes.float and a.tolist() == [1.0, 2.0]
  b = Tensor(t, dtype="float16", device="CPU:1")
  assert b.dtype == dtypes.float16 and b.device == "CPU:1" and b.tolist() == [1.0, 2.0]
  assert Tensor(t.uop, dtype=t.dtype, device=t.device).uop is t.uop
