"""Kernel counts: what the fusion rules in schedule/kernelize.py promise.

  - elementwise ops and views fuse into whatever consumes them;
  - a reduction fuses with its elementwise inputs and the elementwise chain after it, unless that chain broadcasts
    the reduced value or feeds another reduction, or the reduction has more than one consumer; except a row kernel (a
    reduction over the last axis broadcast back along it, schedule/rows.py; test_row_kernels.py);
  - CONTIGUOUS, COPY and ASSIGN always get a buffer; a realized tensor needs no kernel.

`schedule()` runs nothing, so all of this holds on every device, NULL included.
"""
import math

import numpy as np
import pytest
from tinygrad import GlobalCounters, Tensor
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops

pytestmark = pytest.mark.compile_only


def n_kernels(t: Tensor, *others: Tensor) -> int: return len(t.schedule(*others))


def inputs(*shapes: tuple[int, ...]) -> list[Tensor]:
  """Realized float32 inputs (buffers with data): their schedules are empty."""
  return [Tensor(np.random.uniform(-1, 1, size=s).astype(np.float32)) for s in shapes]


def test_realized_input_needs_no_kernel():
  (a,) = inputs((4, 4))
  assert a.schedule() == []
  assert n_kernels(Tensor.empty(3, 3)) == 0


@pytest.mark.parametrize("view", [
  lambda a: a.reshape(16), lambda a: a.reshape(2, 8).permute(1, 0), lambda a: a[1:3], lambda a: a.T,
], ids=["reshape", "reshape_permute", "shrink", "T"])
def test_views_of_realized_input_need_no_kernel(view):
  (a,) = inputs((4, 4))
  # movement ops over a realized buffer are a realized tensor: nothing to compute until something consumes them
  assert n_kernels(view(a)) == 0


def test_realized_contiguous_is_not_recomputed():
  (a,) = inputs((4, 4))
  b = (a * 2).contiguous()
  later = b[1:3] + 1  # built before b is realized: its graph holds b's CONTIGUOUS node, not b's buffer
  assert n_kernels(later) == 2
  b.realize()
  assert n_kernels(later) == 1  # only the + 1: b's kernel already ran, its buffer is read


def test_add_mul_sum_is_one_kernel():
  a, b, c = inputs((4, 4), (4, 4), (4, 4))
  assert n_kernels(((a + b) * c).sum()) == 1
  assert n_kernels(((a + b) * c).sum(1)) == 1
  assert n_kernels(((a + b) * c).sum() * 2 + 1) == 1  # the elementwise chain after a reduction fuses too


def test_linear_relu_is_one_kernel():
  x, w, b = inputs((4, 8), (8, 3), (3,))
  assert n_kernels((x @ w + b).relu()) == 1
  assert n_kernels(x.linear(w, b).relu()) == 1


def test_elementwise_chain_of_10_is_one_kernel():
  (a,) = inputs((16,))
  t = a
  for i in range(10): t = t * 1.01 + 0.5 if i % 3 == 0 else t.exp2() if i % 3 == 1 else t.maximum(0.1).sqrt()
  assert n_kernels(t) == 1


def test_elementwise_with_many_inputs_and_broadcasts_is_one_kernel():
  a, b, c, d = inputs((4, 5), (5,), (4, 1), ())
  assert n_kernels((a + b) * c - d + a.T.T + 1) == 1


def test_views_fuse_into_consumer():
  a, b = inputs((4, 6), (6, 5))
  t = a.T.flip(0).pad(((1, 0), (0, 1))).shrink(((0, 6), (0, 5))) + b
  assert n_kernels(t) == 1
  assert n_kernels(a[::2, 1::-1].reshape(-1).sum()) == 1


def test_shared_elementwise_is_recomputed_not_realized():
  (a,) = inputs((4, 4))
  e = a.exp()
  assert n_kernels(e + 1, e * 2) == 2


def test_softmax_kernels():
  (a,) = inputs((4, 7))
  assert n_kernels(a.softmax()) <= 3  # max, sum of exp, the elementwise division
  assert n_kernels(a.log_softmax()) <= 3


def test_view_then_contiguous_is_one_kernel():
  (a,) = inputs((4, 6))
  assert n_kernels(a.T.contiguous()) == 1
  assert n_kernels(a[1:3, ::2].contiguous()) == 1
  assert n_kernels(a.reshape(2, 12).permute(1, 0).contiguous()) == 1


def test_contiguous_gets_its_own_kernel():
  (a,) = inputs((4, 4))
  assert n_kernels((a + 1).contiguous()) == 1
  assert n_kernels((a + 1).contiguous() * 2) == 2


def test_reduce_feeding_reduce_is_two_kernels():
  (a,) = inputs((2, 3, 4))
  assert n_kernels(a.sum(0).sum(0)) == 2
  assert n_kernels(a.sum(2).max()) == 2
  assert n_kernels(a.sum((0, 1))) == 1  # one reduction over two axes


def test_reduce_broadcast_back_is_two_kernels():
  (a,) = inputs((4, 5))
  assert n_kernels(a - a.max(0, keepdim=True)) == 2  # over an inner axis: no row kernel (test_row_kernels.py)
  assert n_kernels((a - a.max()).sum()) == 2
  with Context(ROW_FUSE_MAX=0): assert n_kernels(a - a.max(1, keepdim=True)) == 2
  assert n_kernels(a - a.max(1, keepdim=True)) == 1  # a row kernel


def test_reduce_reshaped_without_broadcast_fuses():
  a, b = inputs((4, 5), (2, 2))
  assert n_kernels(a.sum(1).reshape(2, 2) + b) == 1
  assert n_kernels(a.sum(1, keepdim=True).reshape(-1) * 3) == 1


def test_reduce_with_two_consumers_is_realized():
  (a,) = inputs((4, 4))
  s = a.sum()
  assert n_kernels(s + 1, s * 2) == 3


def test_mean_var():
  (a,) = inputs((4, 6))
  assert n_kernels(a.mean()) == 1
  assert n_kernels(a.mean(1)) == 1
  assert n_kernels(a.var()) == 2  # the mean is broadcast back over a


def test_matmul_chain():
  x, w1, w2 = inputs((4, 8), (8, 6), (6, 3))
  assert n_kernels(x @ w1) == 1
  assert n_kernels((x @ w1).relu() @ w2) == 2


def test_two_outputs_one_schedule():
  a, b = inputs((4,), (4,))
  assert n_kernels(a + 1, b + 2) == 2


def test_creation_ops():
  assert n_kernels(Tensor.arange(10)) == 1
  assert n_kernels(Tensor.eye(4)) == 1
  assert n_kernels(Tensor.rand(8)) == 1
  assert n_kernels(Tensor.full((3, 3), 2.0)) == 1


def test_schedule_runs_nothing():
  (a,) = inputs((4, 4))
  t = ((a + 1) * 2).sum()
  GlobalCounters.reset()
  n = n_kernels(t)
  assert GlobalCounters.kernel_count == 0
  assert n_kernels(t) == n  # and it doesn't realize: asking twice gives the same schedule


def test_realize_runs_the_schedule_once():
  a, b = inputs((4, 4), (4, 4))
  t = (a @ b).relu().sum(0)
  expected = n_kernels(t)
  GlobalCounters.reset()
  t.realize()
  assert GlobalCounters.kernel_count == expected == 2
  GlobalCounters.reset()
  t.realize()
  assert GlobalCounters.kernel_count == 0
  assert t.schedule() == []


def test_realized_intermediate_is_reused():
  (a,) = inputs((4, 4))
  b = (a + 1).exp()
  c = b.sum()
  b.realize()
  GlobalCounters.reset()
  c.realize()
  assert GlobalCounters.kernel_count == 1
  assert n_kernels(b * 2) == 1


def test_realize_all_many_tensors():
  (a,) = inputs((4, 4))
  ts = [a + i for i in range(4)]
  GlobalCounters.reset()
  Tensor.realize_all(*ts)
  assert GlobalCounters.kernel_count == 4
  GlobalCounters.reset()
  Tensor.realize_all(*ts)
  assert GlobalCounters.kernel_count == 0


def test_assign_is_one_kernel():
  (w,) = inputs((4, 4))
  g = Tensor(np.ones((4, 4), np.float32))
  w.assign(w - 0.1 * g)
  assert n_kernels(w) == 1
  GlobalCounters.reset()
  w.realize()
  assert GlobalCounters.kernel_count == 1
  GlobalCounters.reset()
  w.realize()
  assert GlobalCounters.kernel_count == 0


def test_reductions_padded_into_a_cat_get_buffers():
  """Tensor.cat of two matmuls: each product is a kernel of its own and the cat copies them; fused into the cat's kernel,
  every output ran both products' loops under a gate (13.8 ms against 0.18 for one 256^3 product on 2 cores)."""
  a, b, c, d = inputs((64, 32), (32, 48), (64, 32), (32, 48))
  kernels = [si.ast for si in Tensor.cat(a @ b, c @ d).schedule()]
  assert all(sum(1 for n in k.toposort() if n.op is Ops.REDUCE) <= 1 for k in kernels)
  with Context(PAD_REALIZES=0): assert n_kernels(Tensor.cat(a @ b, c @ d)) == 1


def test_kernel_count_matches_work_on_training_step_graph():
  x, w = inputs((4, 3), (3, 2))
  w.requires_grad_()
  loss = (x @ w).relu().sum()
  (gw,) = loss.gradient(w)
  n = n_kernels(gw)
  assert 1 <= n <= 3
  GlobalCounters.reset()
  gw.realize()
  assert GlobalCounters.kernel_count == n


def test_layernorm_kernels():
  (a,) = inputs((4, 8))
  ln = (a - a.mean(-1, keepdim=True)) / (a.var(-1, keepdim=True) + 1e-5).sqrt()
  assert n_kernels(ln) <= 3
  assert n_kernels((a * math.pi).sin().sum(-1).sqrt()) == 1


def test_same_kernel_over_other_buffers_reuses_the_ast():
  """The layers of a model build the same kernel over different buffers: one AST (built once), each item with its own buffers,
  in the same parameter order; a different computation or a different size gets its own AST."""
  a, b, c, d = inputs((8, 16), (16,), (8, 16), (16,))
  (s1,), (s2,) = ((a * b).sum(1).schedule(), (c * d).sum(1).schedule())
  assert s1.ast is s2.ast
  assert s1.bufs[1:] == [a.uop.base, b.uop.base] and s2.bufs[1:] == [c.uop.base, d.uop.base]
  assert s1.bufs[0] is not s2.bufs[0]
  (e,) = inputs((8, 32))
  assert (e.shrink(((0, 8), (0, 16))) * b).sum(1).schedule()[0].ast is not s1.ast
  assert (a * b).max(1).schedule()[0].ast is not s1.ast


def test_reused_ast_computes_each_kernels_own_result():
  from tinygrad import Device
  if Device.DEFAULT.startswith("NULL"): pytest.skip("runs kernels")
  a, b, c, d = inputs((8, 16), (16,), (8, 16), (16,))
  x, y = (a * b).sum(1).numpy(), (c * d).sum(1).numpy()
  np.testing.assert_allclose(x, (a.numpy() * b.numpy()).sum(1), rtol=1e-5)
  np.testing.assert_allclose(y, (c.numpy() * d.numpy()).sum(1), rtol=1e-5)


def test_new_kernels_compile_on_a_worker_thread(monkeypatch: pytest.MonkeyPatch):
  """lower_schedule lowers a schedule's new kernels and compiles them on one worker thread (overlapping the next lowering); every
  kernel gets its runner, compiled once, and a compile error still reaches the caller."""
  import threading

  from tinygrad import Device
  from tinygrad.engine import realize
  (a,) = inputs((8, 8))
  items = (a - a.sum(0, keepdim=True)).exp().sum(0).schedule()
  assert len(items) >= 2
  compiler = Device.renderer(Device.DEFAULT).compiler
  threads: list[str] = []
  orig = type(compiler).compile_cached
  def spy(self, src: str) -> bytes:
    threads.append(threading.current_thread().name)
    return orig(self, src)
  monkeypatch.setattr(type(compiler), "compile_cached", spy)
  monkeypatch.setattr(realize, "_runner_cache", {})
  lowered = realize.lower_schedule(items)
  assert len(lowered) == len(items) and len(threads) == len(items) and all(t.startswith("tinygrad-compile") for t in threads)
  assert len(realize._runner_cache) == len(items)
  realize.lower_schedule(items)  # cached: nothing compiles again
  assert len(threads) == len(items)

  def broken(self, src: str) -> bytes: raise RuntimeError("compile failed")
  monkeypatch.setattr(type(compiler), "compile_cached", broken)
  monkeypatch.setattr(realize, "_runner_cache", {})
  with pytest.raises(RuntimeError, match="compile failed"): realize.lower_schedule(items)



@pytest.mark.parametrize("pick", [
  lambda t, i: t[i], lambda t, i: t.gather(0, i.reshape(-1, 1).expand(-1, 6)), lambda t, i: t[:, 2][i],
], ids=["getitem", "gather", "getitem_of_view"])
def test_one_hot_gather_becomes_a_direct_load(pick):
  """A gather is a sum over the indexed axis of `idx == r ? x[r] : 0`; the kernel builder folds it to `x[idx]` (0 where idx is
  out of range), so no kernel loops over the indexed axis: an embedding lookup reads one row, not the table. (The values are
  checked by the indexing tests, which run on real devices.)"""
  from tinygrad import dtypes
  from tinygrad.uop.ops import Ops
  (table,) = inputs((4096, 6))
  out = pick(table, Tensor([7, 4095, 0, -3], dtype=dtypes.int32))
  asts = [item.ast for item in out.schedule()]
  assert asts and not any(n.op is Ops.REDUCE for ast in asts for n in ast.toposort())


def test_gathers_are_direct_loads_at_any_size():
  """table[idx] and nn.Embedding run as one load per element, not a masked sum over the table's rows: also where the one-hot
  mask's view passes 2**31 elements (int64 loop math compares the index with a cast of the loop) and where the sum is big
  enough for the CPU's reduce rewrites (a 4096 x 2048 x 2048 mask ran as a packed matmul, 0.6 s instead of 1.5 ms)."""
  from tinygrad import nn
  from tinygrad.uop.ops import Ops
  for vocab, dim, n in ((64, 32, 16), (2048, 2048, 4096)):
    table, idx = Tensor.empty(vocab, dim), Tensor.empty(n, dtype="int32")
    for out in (table[idx], nn.Embedding(vocab, dim)(idx)):
      asts = [si.ast for si in out.schedule() if si.ast.op is Ops.SINK]
      assert not any(u.op is Ops.REDUCE for a in asts for u in a.toposort()), (vocab, dim, n)


def test_embedding_lookup_values():
  from tinygrad import Device, nn
  if Device.DEFAULT.startswith("NULL"): pytest.skip("runs kernels")
  emb = nn.Embedding(10, 3)
  w = emb.weight.numpy()
  w[7] = np.inf  # another row's inf must not reach a lookup (0 * inf)
  emb.weight = Tensor(w)
  ids = np.array([[1, 7], [0, 9]], dtype=np.int32)
  np.testing.assert_array_equal(emb(Tensor(ids)).numpy(), w[ids])


def test_per_channel_loads_under_a_pad_are_ungated_where_a_reduce_loop_is_padded():
  # conv weight gradient after a batchnorm: the input is (x - mean[c]) * scale[c], padded; the per-channel loads stay in
  # bounds whatever the pad tests, so they carry no gate and leave the pixel loops (they were computed once a tap and pixel)
  x, g = Tensor.rand(2, 4, 8, 8).realize(), Tensor.rand(2, 6, 8, 8).realize()
  mean, scale = Tensor.rand(4).realize(), Tensor.rand(4).realize()
  w = Tensor.rand(6, 4, 3, 3).realize().requires_grad_(True)
  xn = ((x - mean.reshape(1, 4, 1, 1)) * scale.reshape(1, 4, 1, 1)).relu()
  (dw,) = (xn.conv2d(w, padding=1) * g).sum().gradient(w)
  (si,) = [si for si in dw.schedule() if si.bufs[0].size == w.numel()]
  per_channel = {i for i, b in enumerate(si.bufs) if b is mean.uop.base or b is scale.uop.base}
  loads = [u for u in si.ast.toposort() if u.op is Ops.LOAD and u.src[0].src[0].arg in per_channel]
  pixels = [u for u in si.ast.toposort() if u.op is Ops.LOAD and u.src[0].src[0].arg == next(i for i, b in enumerate(si.bufs) if b is x.uop.base)]
  assert loads and all(len(u.src) == 1 for u in loads)  # ungated
  assert pixels and all(len(u.src) == 3 for u in pixels)  # the padded input itself keeps its gate
