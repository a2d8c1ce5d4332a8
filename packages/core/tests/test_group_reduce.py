"""OptOps.GROUP: the threads of a block share each reduction (codegen/group.py). Run on the PYTHON device told it is a GPU
(has_local, as in test_gpu_reduce.py: its interpreter runs a block's threads in lockstep through the BARRIER; a missing
barrier reads unwritten partials) or on a real GPU (DEV=CUDA), each kernel given GROUP by the test, against numpy;
compiled for the CUDA C and PTX renderers on NULL (-m compile_only)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tinygrad.codegen.gpudims as gpudims
import tinygrad.engine.search as search
import tinygrad.engine.timing as timing
from tinygrad import Device, Tensor, Variable, dtypes
from tinygrad.codegen.heuristics import hand_coded_opts
from tinygrad.codegen.opt import KernelOptError, Opt, OptOps, apply_opts, range_size, ranges_of
from tinygrad.codegen.program import default_opts, get_program
from tinygrad.engine import realize
from tinygrad.helpers import Context, prod
from tinygrad.uop.ops import Ops, UOp


def _runs_grouped() -> bool:
  """PYTHON (told it is a GPU) or a real GPU device; not NULL, which doesn't run kernels."""
  return Device.DEFAULT.startswith("PYTHON") or (not Device.DEFAULT.startswith("NULL") and Device.renderer(Device.DEFAULT).has_local)


runs_grouped = pytest.mark.skipif(not _runs_grouped(), reason="runs grouped kernels: on the PYTHON device told it is a GPU, or on a GPU")


def reduce_ranges(ast: UOp) -> list[UOp]:
  return sorted((r for r in ranges_of(ast).values() if r.arg[1] == "reduce"), key=lambda r: r.arg[0])


def group_each(g: int, before: Callable[[UOp], list[Opt]] = lambda ast: [], after: Callable[[UOp], list[Opt]] = lambda ast: []):
  """choose_opts that GROUPs every reduce loop of at least g iterations by g where it can (not a second loop of an already
  grouped reduce); kernels with nothing to group: no opts."""
  def choose(ast: UOp, renderer) -> list[Opt]:
    opts = before(ast)
    cur = apply_opts(ast, opts)
    groups = []
    for r in reversed(reduce_ranges(cur)):  # innermost first
      if (range_size(r) or g) < g: continue
      try: cur = apply_opts(cur, [o := Opt(OptOps.GROUP, r.arg[0], g)])
      except KernelOptError: continue
      groups.append(o)
    if not groups: return []
    opts = opts + groups
    return opts + after(cur)
  return choose


def recording(choose, seen: list[list[Opt]]):
  def rec(ast: UOp, renderer, beam: int = 0) -> list[Opt]:  # stands in for engine/search.py's choose_opts
    seen.append(opts := choose(ast, renderer))
    return opts
  return rec


def run(monkeypatch, choose, f: Callable[..., Tensor], *xs: np.ndarray) -> np.ndarray:
  """f on the inputs, every kernel compiled with choose's opts; at least one of them grouped."""
  seen: list[list[Opt]] = []
  monkeypatch.setattr(search, "choose_opts", recording(choose, seen))
  monkeypatch.setattr(realize, "_runner_cache", {})
  out = f(*[Tensor(x) for x in xs]).numpy()
  assert any(o.op is OptOps.GROUP for opts in seen for o in opts), seen
  return out


def grouped_programs(f: Callable[..., Tensor], *xs: np.ndarray, choose) -> list:
  r = Device.renderer(Device.DEFAULT)
  return [get_program(si.ast, r, choose(si.ast, r)) for si in f(*[Tensor(x) for x in xs]).schedule() if si.ast.op is Ops.SINK]


F32 = np.float32


@runs_grouped
@pytest.mark.parametrize("n", [256, 250, 67])  # divides by G, doesn't, and fewer than 2 steps per thread
@pytest.mark.parametrize("g", [4, 16, 32])
def test_sum_max_prod_rows(gpu, monkeypatch, n: int, g: int):
  a = np.random.uniform(0.5, 1.5, (5, n)).astype(F32)
  np.testing.assert_allclose(run(monkeypatch, group_each(g), lambda x: x.sum(1), a), a.astype(np.float64).sum(1), rtol=1e-5)
  np.testing.assert_array_equal(run(monkeypatch, group_each(g), lambda x: x.max(1), -a), (-a).max(1))
  b = np.random.uniform(0.97, 1.03, (3, n)).astype(F32)
  np.testing.assert_allclose(run(monkeypatch, group_each(g), lambda x: x.prod(1), b), b.astype(np.float64).prod(1), rtol=1e-4)


@runs_grouped
def test_outputs_that_dont_fill_the_last_block(gpu, monkeypatch):
  a = np.random.randn(300, 40).astype(F32)  # 64 outputs a block (4 lanes each): the 5th block has 20 threads past the end
  (si,) = Tensor.empty(300, 40).sum(1).schedule()
  assert get_program(si.ast, gpu, group_each(4)(si.ast, gpu)).local_size == (4, 64, 1)
  np.testing.assert_allclose(run(monkeypatch, group_each(4), lambda x: x.sum(1), a), a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


@runs_grouped
def test_int_sum_and_full_reduction(gpu, monkeypatch):
  a = np.random.randint(-50, 50, size=(7, 300)).astype(np.int32)
  np.testing.assert_array_equal(run(monkeypatch, group_each(16), lambda x: x.sum(1), a), a.sum(1))
  v = np.random.randn(1000).astype(F32)  # no output loop: one block, the group is the whole block
  np.testing.assert_allclose(run(monkeypatch, group_each(64), lambda x: x.sum(), v), v.astype(np.float64).sum(), rtol=1e-4, atol=1e-4)


@runs_grouped
def test_grouped_kernel_layout(gpu, monkeypatch):
  import tinygrad.codegen.gpudims as gpudims
  (si,) = Tensor.empty(6, 100).sum(1).schedule()
  p = get_program(si.ast, gpu, [Opt(OptOps.GROUP, reduce_ranges(si.ast)[0].arg[0], 8)])
  assert p.local_size == (8, 6, 1) and p.global_size == (1, 1, 1)  # 8 lanes x 6 outputs, one block
  ops = [u.op for u in p.uops]
  assert Ops.DEFINE_LOCAL in ops and ops.count(Ops.BARRIER) == 1
  store = next(u for u in p.uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL)
  assert len(store.src) == 3, "only lane 0 stores the output"
  monkeypatch.setattr(gpudims, "GROUP_MIN_BLOCKS", 128)  # the default: fewer outputs per block until there are 128 blocks
  assert get_program(si.ast, gpu, [Opt(OptOps.GROUP, reduce_ranges(si.ast)[0].arg[0], 8)]).local_size == (8, 1, 1)
  (si,) = Tensor.empty(2048, 16).sum(1).schedule()
  p = get_program(si.ast, gpu, [Opt(OptOps.GROUP, reduce_ranges(si.ast)[0].arg[0], 8)])
  assert (p.global_size, p.local_size) == ((128, 1, 1), (8, 16, 1))


@runs_grouped
@pytest.mark.parametrize("g", [8, 32])
def test_softmax_and_rmsnorm_epilogues(gpu, monkeypatch, g: int):
  a = (np.random.randn(6, 200) * 3).astype(F32)
  e = np.exp(a.astype(np.float64) - a.max(1, keepdims=True))
  np.testing.assert_allclose(run(monkeypatch, group_each(g), lambda x: x.softmax(1), a), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
  w = np.random.randn(200).astype(F32)
  def rmsnorm(x: Tensor, w: Tensor) -> Tensor: return x * (x.square().mean(1, keepdim=True) + 1e-5).rsqrt() * w
  ref = a * (np.square(a.astype(np.float64)).mean(1, keepdims=True) + 1e-5) ** -0.5 * w
  np.testing.assert_allclose(run(monkeypatch, group_each(g), rmsnorm, a, w), ref, rtol=1e-5, atol=1e-5)


@runs_grouped
def test_two_reductions_in_one_kernel(gpu, monkeypatch):
  # an LLM's gated MLP: two matrix-vector products in one kernel, each REDUCE grouped, each with its own shared array
  w1, w2, xv = (np.random.randn(*s).astype(F32) for s in ((8, 96), (8, 96), (96,)))
  f = lambda w1, w2, x: (w1 @ x).silu() * (w2 @ x)  # noqa: E731
  (si,) = f(Tensor.empty(8, 96), Tensor.empty(8, 96), Tensor.empty(96)).schedule()
  assert sum(1 for n in si.ast.toposort() if n.op is Ops.REDUCE) == 2
  h1, h2 = w1.astype(np.float64) @ xv, w2.astype(np.float64) @ xv
  np.testing.assert_allclose(run(monkeypatch, group_each(16), f, w1, w2, xv), h1 / (1 + np.exp(-h1)) * h2, rtol=1e-4, atol=1e-5)
  p = get_program(si.ast, gpu, group_each(16)(si.ast, gpu))
  # 16 lanes, 2 outputs a block: one warp, so with shuffles no shared array at all
  assert sum(1 for u in p.uops if u.op is Ops.DEFINE_LOCAL) == (0 if gpu.shuffle_lanes else 2)


@runs_grouped
def test_a_grouped_reduce_inside_another(gpu, monkeypatch):
  # the sum's body uses the max: with both grouped, every lane needs the max (every lane computes the final value). The
  # scheduler puts both in one kernel (the max fuses into the sum that reads it back along its row, schedule/rows.py)
  a = np.random.randn(4, 96).astype(F32)
  x = Tensor(a).realize()
  (k_sum,) = (si.ast for si in (x - x.max(1, keepdim=True)).exp().sum(1).schedule())
  assert sum(1 for n in k_sum.toposort() if n.op is Ops.REDUCE) == 2
  seen: list[list[Opt]] = []
  monkeypatch.setattr(search, "choose_opts", recording(group_each(16), seen))
  got = (x - x.max(1, keepdim=True)).exp().sum(1).numpy()
  assert [o.amount for o in seen[-1] if o.op is OptOps.GROUP] == [16, 16], seen  # the fused kernel: both reduces grouped
  np.testing.assert_allclose(got, np.exp(a.astype(np.float64) - a.max(1, keepdims=True)).sum(1), rtol=1e-5)


@runs_grouped
def test_two_reduce_loops_one_grouped(gpu, monkeypatch):
  a = np.random.randn(3, 12, 40).astype(F32)
  np.testing.assert_allclose(run(monkeypatch, group_each(8), lambda x: x.sum((1, 2)), a), a.astype(np.float64).sum((1, 2)), rtol=1e-5, atol=1e-5)
  (si,) = Tensor.empty(3, 12, 40).sum((1, 2)).schedule()
  r1, r2 = reduce_ranges(si.ast)
  with pytest.raises(KernelOptError, match="already grouped"): apply_opts(si.ast, [Opt(OptOps.GROUP, r2.arg[0], 8), Opt(OptOps.GROUP, r1.arg[0], 8)])


def _q4_1(rows: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """A Q4_1-like matrix: 4-bit values in 32-element blocks (16 bytes, low nibbles then high), a scale and a min per block."""
  q = np.random.randint(0, 16, (rows, k // 32, 32)).astype(np.uint8)
  packed = (q[..., :16] | (q[..., 16:] << 4)).astype(np.uint8)
  d, m = np.random.uniform(0.01, 0.1, (rows, k // 32)).astype(F32), np.random.uniform(-0.5, 0.5, (rows, k // 32)).astype(F32)
  return packed, d, m, (q * d[..., None] + m[..., None]).reshape(rows, k)


def _dequant_matvec(packed: Tensor, d: Tensor, m: Tensor, x: Tensor) -> Tensor:
  q = packed.cast(dtypes.int32)
  w = (q.bitwise_and(15).cat(q.rshift(4), dim=2).cast(dtypes.float32) * d.unsqueeze(2) + m.unsqueeze(2)).reshape(packed.shape[0], -1)
  return w @ x


@runs_grouped
@pytest.mark.parametrize("g", [16, 32])
def test_matrix_vector_float_and_q4_1(gpu, monkeypatch, g: int):
  wv, xv = np.random.randn(24, 576).astype(F32), np.random.randn(576).astype(F32)
  with Context(GPU_SPLIT_PARTIALS=1):
    np.testing.assert_allclose(run(monkeypatch, group_each(g), lambda w, x: w @ x, wv, xv), wv.astype(np.float64) @ xv, rtol=1e-4, atol=1e-4)
    packed, d, m, w = _q4_1(12, 576)
    out = run(monkeypatch, group_each(g), _dequant_matvec, packed, d, m, xv)
  np.testing.assert_allclose(out, w.astype(np.float64) @ xv, rtol=1e-4, atol=1e-3)


@runs_grouped
@pytest.mark.parametrize("combo", ["upcast_after", "unroll_after", "unroll_before"])
def test_with_upcast_and_unroll(gpu, monkeypatch, combo: str):
  wv, xv = np.random.randn(16, 512).astype(F32), np.random.randn(512).astype(F32)
  outs = lambda ast: [r for r in ranges_of(ast).values() if r.arg[1] == "global"]  # noqa: E731
  if combo == "upcast_after": choose = group_each(8, after=lambda ast: [Opt(OptOps.UPCAST, outs(ast)[-1].arg[0], 4)])
  elif combo == "unroll_after": choose = group_each(16, after=lambda ast: [Opt(OptOps.UNROLL, reduce_ranges(ast)[-1].arg[0], 4)])
  else: choose = group_each(16, before=lambda ast: [Opt(OptOps.UNROLL, reduce_ranges(ast)[-1].arg[0], 4)])
  with Context(GPU_SPLIT_PARTIALS=1):
    got = run(monkeypatch, choose, lambda w, x: w @ x, wv, xv)
  np.testing.assert_allclose(got, wv.astype(np.float64) @ xv, rtol=1e-4, atol=1e-4)


def grouped_by_16(monkeypatch) -> list[list[Opt]]:
  """Every kernel compiled from now on groups its reduce loops by 16; returns the opts of each, as they are chosen."""
  seen: list[list[Opt]] = []
  monkeypatch.setattr(search, "choose_opts", recording(group_each(16), seen))
  return seen


@runs_grouped
def test_symbolic_output_count(gpu, monkeypatch):
  # n rows, each a grouped sum; then a second grouped kernel reduces the n row sums (squared, so each row's value counts)
  a = np.random.randn(10, 64).astype(F32)
  n = Variable("n", 1, 10)
  seen = grouped_by_16(monkeypatch)
  for k in (3, 10):
    rows = Tensor(a).shrink(((0, n.bind(k)), (0, 64))).sum(1, keepdim=True).contiguous()
    np.testing.assert_allclose(rows.square().sum().item(), np.square(a[:k].astype(np.float64).sum(1)).sum(), rtol=1e-5)
  assert sum(1 for opts in seen if any(o.op is OptOps.GROUP for o in opts)) >= 2  # both kernels grouped


@runs_grouped
def test_symbolic_reduce_size(gpu, monkeypatch):
  a = np.random.randn(4, 100).astype(F32)
  n = Variable("n", 1, 100)
  seen = grouped_by_16(monkeypatch)
  for k in (5, 37, 100):
    got = Tensor(a).shrink(((0, 4), (0, n.bind(k)))).sum(1).numpy()
    np.testing.assert_allclose(got, a[:, :k].astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
  assert any(o.op is OptOps.GROUP for opts in seen for o in opts)


def test_invalid_groups_are_kernel_opt_errors():
  (si,) = Tensor.empty(6, 100).sum(1).schedule()
  red = reduce_ranges(si.ast)[0].arg[0]
  out = next(r.arg[0] for r in ranges_of(si.ast).values() if r.arg[1] == "global")
  for bad in ([Opt(OptOps.GROUP, out, 8)], [Opt(OptOps.GROUP, red, 1)], [Opt(OptOps.GROUP, red, 128)], [Opt(OptOps.GROUP, red, 2), Opt(OptOps.GROUP, red, 4)]):
    with pytest.raises(KernelOptError): apply_opts(si.ast, bad)
  cpu_like = Device.renderer(Device.DEFAULT)
  if not cpu_like.has_local:
    with pytest.raises(KernelOptError, match="has_local"): get_program(si.ast, cpu_like, [Opt(OptOps.GROUP, red, 8)])


def test_group_reduce_heuristic_choices():
  (si,) = (Tensor.empty(576, 576) @ Tensor.empty(576)).schedule()
  red = reduce_ranges(si.ast)[0].arg[0]
  with Context(GROUP_REDUCE=0):
    assert not any(o.op is OptOps.GROUP for o in hand_coded_opts(si.ast, gpu=True, wide_loads=True))
  # on by default. Rows read contiguously: 4 floats a lane (one 16-byte load), 16 lanes (576 = 4 * 16 * 9), the 9 steps left
  # are not unrolled (9 has no divisor of 4 or 2)
  assert hand_coded_opts(si.ast, gpu=True, wide_loads=True) == [Opt(OptOps.UNROLL, red, 4), Opt(OptOps.GROUP, red, 16)]
  assert hand_coded_opts(si.ast, gpu=True, wide_loads=False) == [Opt(OptOps.GROUP, red, 32)]
  assert not any(o.op is OptOps.GROUP for o in hand_coded_opts(si.ast, gpu=False))
  # half weights: 8 a lane (16 bytes of the narrowest input), more lanes while the threads are few; the rest of a matrix-vector
  # product's loop is not unrolled, a row sum's is (by 4)
  (h,) = (Tensor.empty(2048, 2048, dtype=dtypes.float16).cast(dtypes.float32) @ Tensor.empty(2048)).schedule()
  hr = reduce_ranges(h.ast)[0].arg[0]
  assert hand_coded_opts(h.ast, gpu=True, wide_loads=True) == [Opt(OptOps.UNROLL, hr, 8), Opt(OptOps.GROUP, hr, 64)]
  (rs,) = Tensor.empty(2048, 2048, dtype=dtypes.float16).sum(1, dtype=dtypes.float32).schedule()
  rr = reduce_ranges(rs.ast)[0].arg[0]
  assert hand_coded_opts(rs.ast, gpu=True, wide_loads=True) == [Opt(OptOps.UNROLL, rr, 8), Opt(OptOps.GROUP, rr, 64), Opt(OptOps.UNROLL, rr, 4)]
  # a norm's weight fused into the vector (4 bytes of vector per 2 of weight, twice): 2 rows a lane share the vector's loads,
  # and take the place of the unroll; off with GROUP_ROWS=0
  (n,) = ((Tensor.empty(2048) * Tensor.empty(2048)) @ Tensor.empty(4096, 2048, dtype=dtypes.float16).cast(dtypes.float32).T).schedule()
  nr, no = reduce_ranges(n.ast)[0].arg[0], next(r.arg[0] for r in ranges_of(n.ast).values() if r.arg[1] == "global")
  assert hand_coded_opts(n.ast, gpu=True, wide_loads=True) == [Opt(OptOps.UPCAST, no, 2), Opt(OptOps.UNROLL, nr, 8), Opt(OptOps.GROUP, nr, 32)]
  with Context(GROUP_ROWS=0):
    assert hand_coded_opts(n.ast, gpu=True, wide_loads=True)[0] == Opt(OptOps.UNROLL, nr, 8)
  # a matrix-vector product groups up to GROUP_MAX_MATVEC_OUTPUTS rows (a vocabulary); a matmul only below GROUP_MAX_OUTPUTS
  (vocab,) = (Tensor.empty(1 << 15, 576) @ Tensor.empty(576)).schedule()
  assert any(o.op is OptOps.GROUP for o in hand_coded_opts(vocab.ast, gpu=True))
  with Context(PACK_PANELS=0): (mm,) = (Tensor.empty(256, 576) @ Tensor.empty(576, 256)).schedule()  # one kernel, as on a GPU (a CPU packs B)
  assert not any(o.op is OptOps.GROUP for o in hand_coded_opts(mm.ast, gpu=True))


def test_uneven_rows_get_more_lanes():
  """A row the lanes can't split evenly (masked lanes) and few outputs: more lanes while each keeps at least 4 elements, instead
  of 32 lanes with a long loop each (a greedy sample over 128256 = 256 * 501 logits: partials of 501, strided); GROUP_WIDE=0: 32."""
  (si,) = Tensor.empty(501, 256).max(0).schedule()  # 256 outputs, each over 501 elements 256 apart
  red = reduce_ranges(si.ast)[0].arg[0]
  assert hand_coded_opts(si.ast, gpu=True, wide_loads=True) == [Opt(OptOps.GROUP, red, 128)]
  with Context(GROUP_WIDE=0):
    assert hand_coded_opts(si.ast, gpu=True, wide_loads=True) == [Opt(OptOps.GROUP, red, 32)]
  (even,) = Tensor.empty(512, 256).max(0).schedule()  # an even row keeps what it had
  assert [o.amount for o in hand_coded_opts(even.ast, gpu=True, wide_loads=True) if o.op is OptOps.GROUP] == [32]


def test_narrow_lanes_for_many_rows_are_an_ab_switch():
  """GROUP_NARROW=n (off by default): a matrix-vector product of at least n rows gets 16 lanes a row instead of 32 (a 1B model's
  8192-row gate/up: 512 blocks, one wave of 4 blocks an SM on an H100, not 1024 in two; measured within 0.3% of the default)."""
  (h,) = (Tensor.empty(8192, 2048, dtype=dtypes.float16).cast(dtypes.float32) @ Tensor.empty(2048)).schedule()
  hr = reduce_ranges(h.ast)[0].arg[0]
  assert hand_coded_opts(h.ast, gpu=True, wide_loads=True) == [Opt(OptOps.UNROLL, hr, 8), Opt(OptOps.GROUP, hr, 32)]
  with Context(GROUP_NARROW=8192):
    assert hand_coded_opts(h.ast, gpu=True, wide_loads=True) == [Opt(OptOps.UNROLL, hr, 8), Opt(OptOps.GROUP, hr, 16)]
  with Context(GROUP_NARROW=16384):
    assert hand_coded_opts(h.ast, gpu=True, wide_loads=True) == [Opt(OptOps.UNROLL, hr, 8), Opt(OptOps.GROUP, hr, 32)]


@runs_grouped
def test_argmax_over_an_uneven_vocabulary(gpu, monkeypatch):
  """A greedy sample over 64 * 501 logits (Llama 3's 128256 is 256 * 501): split into partials of 501 logits that wide groups of
  lanes reduce (masked), then the partials; the same index as numpy's, ties (the first index) included."""
  seen: list[list[Opt]] = []
  monkeypatch.setattr(search, "choose_opts", recording(default_opts, seen))
  monkeypatch.setattr(realize, "_runner_cache", {})
  x = np.random.randn(1, 64 * 501).astype(F32)
  x[0, [7, 30001]] = 9.0  # a tie: the first one wins
  assert Tensor(x).argmax(-1).item() == 7
  x[0, 7] = -9.0
  assert Tensor(x).argmax(-1).item() == int(np.argmax(x)) == 30001
  assert Opt(OptOps.GROUP, 1, 128) in [o for opts in seen for o in opts], seen  # the partials' kernels: 128 lanes over 501


def _blockwise_matvec(packed: Tensor, d: Tensor, m: Tensor, x: Tensor) -> Tensor:
  """As tinygrad.llm's quantized linear: two reduce loops, the blocks of a row and the elements of a block."""
  q = packed.cast(dtypes.int32)
  w = q.bitwise_and(15).cat(q.rshift(4), dim=2).cast(dtypes.float32) * d.unsqueeze(2) + m.unsqueeze(2)  # (rows, blocks, 32)
  return (x.reshape(1, -1, 32) * w).sum((-1, -2))


@runs_grouped
@pytest.mark.parametrize("blocks", [18, 48])
def test_heuristic_lanes_over_quantized_blocks(gpu, monkeypatch, blocks: int):
  """Lanes over a quantized row's blocks (GROUP_QUANT=blocks): as many lanes as blocks (18, 48: not powers of two), each
  lane a whole block unrolled; and the other choice, lanes over a block's elements."""
  packed, d, m, wq = _q4_1(12, 32 * blocks)
  xv = np.random.randn(32 * blocks).astype(F32)
  for quant in ("blocks", "elements"):
    seen: list[list[Opt]] = []
    with Context(GPU_SPLIT_PARTIALS=1, GROUP_QUANT=quant):
      out = run(monkeypatch, recording(default_opts, seen), _blockwise_matvec, packed, d, m, xv)
    np.testing.assert_allclose(out, wq.astype(np.float64) @ xv, rtol=1e-4, atol=1e-3)
    groups = [o.amount for opts in seen for o in opts if o.op is OptOps.GROUP]
    assert groups == [blocks] if quant == "blocks" else groups and groups[0] in (16, 32), (quant, seen)


@runs_grouped
def test_group_reduce_heuristic_runs(gpu, monkeypatch):
  import tinygrad.codegen.program as program
  monkeypatch.setattr(gpu, "supports_float4", True)  # the heuristics choose wide loads ...
  monkeypatch.setattr(program, "vectorize_memory", lambda sink, allowed: sink)  # ... which stay scalar on PYTHON
  import tinygrad.codegen.heuristics as heuristics
  monkeypatch.setattr(heuristics, "GROUP_MIN_ROW_GROUPS", 4)  # rows a lane (a norm fused into the vector) in a small test
  wv, xv, nv = np.random.randn(40, 576).astype(F32), np.random.randn(576).astype(F32), np.random.randn(576).astype(F32)
  packed, d, m, wq = _q4_1(24, 576)
  def rmsnorm(x: Tensor) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + 1e-5).rsqrt()
  for f, args, ref in ((lambda w, x: w @ x, (wv, xv), wv.astype(np.float64) @ xv), (_dequant_matvec, (packed, d, m, xv), wq.astype(np.float64) @ xv),
                       (rmsnorm, (xv,), xv / np.sqrt(np.square(xv.astype(np.float64)).mean() + 1e-5)),
                       (lambda w, x, n: w.cast(dtypes.float32) @ (x * n), (wv.astype(np.float16), xv, nv), wv.astype(np.float16).astype(np.float64) @ (xv * nv))):
    seen: list[list[Opt]] = []
    with Context(GROUP_REDUCE=1, GPU_SPLIT_PARTIALS=1):
      np.testing.assert_allclose(run(monkeypatch, recording(default_opts, seen), f, *args), ref, rtol=1e-4, atol=1e-3)
  assert any(o.op is OptOps.UPCAST for o in seen[-1])  # the float16 rows times x * n: two rows a lane


def test_beam_offers_group_on_gpus_only():
  (si,) = Tensor.empty(16, 512).sum(1).schedule()
  acts = search.actions(si.ast, [], 1, has_local=True)
  assert Opt(OptOps.GROUP, reduce_ranges(si.ast)[0].arg[0], 256) in acts
  for a in (a for a in acts if a.op is OptOps.GROUP): apply_opts(si.ast, [a])
  g16 = [Opt(OptOps.GROUP, reduce_ranges(si.ast)[0].arg[0], 16)]
  assert not any(a.op is OptOps.GROUP and a.amount != 16 for a in search.actions(apply_opts(si.ast, g16), g16, 1, has_local=True)), "one group size per kernel"


@runs_grouped
def test_beam_candidates_with_group_compile(gpu):
  (si,) = Tensor.empty(16, 512).sum(1).schedule()
  cands = [c for c in search.extend([search.Candidate([], si.ast)], 1, set(), 64, has_local=True) if c.opts[0].op is OptOps.GROUP]
  assert cands
  for c in cands: assert timing.compile_candidate(gpu, si.ast, c.opts).spec is not None, c.opts
  assert not any(a.op is OptOps.GROUP for a in search.actions(si.ast, [], 1, has_local=False))


@pytest.mark.compile_only
@pytest.mark.parametrize("name", ["sum", "softmax", "matvec", "q4_1", "heuristics"])
def test_grouped_kernels_compile_for_nvidia(name: str):
  r = Device.renderer(Device.DEFAULT)
  if not r.has_local or r.name not in ("CUDA", "PTX"): pytest.skip("checks NVIDIA's output (DEV=NULL:CUDA:sm_90, NULL:PTX:sm_80)")
  a, x = np.random.randn(8, 576).astype(F32), np.random.randn(576).astype(F32)
  unroll2 = group_each(32, after=lambda ast: [Opt(OptOps.UNROLL, reduce_ranges(ast)[-1].arg[0], 2)])
  builds = {"sum": lambda: grouped_programs(lambda t: t.sum(1), a, choose=group_each(32)),
            "softmax": lambda: grouped_programs(lambda t: t.softmax(1), a, choose=group_each(32)),
            "matvec": lambda: grouped_programs(lambda w, v: w @ v, a, x, choose=unroll2),
            "q4_1": lambda: grouped_programs(_dequant_matvec, *_q4_1(8, 576)[:3], x, choose=group_each(32)),
            # GROUP_REDUCE=1's choice: UNROLL then GROUP, each lane one 16-byte load
            "heuristics": lambda: grouped_programs(lambda w, v: w @ v, a, x, choose=lambda ast, r: hand_coded_opts(ast, wide_loads=True, gpu=True))}
  with Context(GPU_SPLIT_PARTIALS=1, GROUP_REDUCE=1): progs = builds[name]()
  grouped = [p for p in progs if any(o.op is OptOps.GROUP for o in p.opts)]
  assert grouped
  for p in grouped:
    assert r.compiler.compile(p.src)[:4] == b"\x7fELF"  # a cubin (NVRTC for CUDA C, nvJitLink for PTX), or an AMD code object
    # blocks of whole warps combine by shuffles, and through shared memory where a group is more than a warp (or the
    # block less than one: no shuffles then)
    warps = prod(p.local_size) % 32 == 0
    through_smem = not warps or max(o.amount for o in p.opts if o.op is OptOps.GROUP) > 32
    if r.name == "PTX":
      assert ("shfl.sync.bfly.b32" in p.src) == warps and (".shared" in p.src and "bar.sync" in p.src) == through_smem
    elif r.name == "CUDA":
      assert ("__shfl_xor_sync" in p.src) == warps and ("__shared__" in p.src and "__syncthreads()" in p.src) == through_smem
      assert name != "heuristics" or "float4" in p.src


# ---- the combine through warp shuffles (Renderer.shuffle_lanes): a butterfly in registers, shared memory only between warps

def _count(p, op: Ops) -> int: return sum(1 for u in p.uops if u.op is op)


@runs_grouped
@pytest.mark.parametrize("g,warp,shuffles,smem", [(32, 32, 5, 0), (16, 32, 4, 0), (64, 32, 5, 2), (32, 8, 3, 4), (128, 32, 5, 4)])
def test_butterfly_then_shared_memory_between_warps(gpu_shuffles, monkeypatch, g: int, warp: int, shuffles: int, smem: int):
  # log2(min(G, warp)) exchanges per reduction; a group of several warps meets in shared memory, G/warp values per output
  monkeypatch.setattr(gpu_shuffles, "shuffle_lanes", warp)
  a = np.random.randn(16, 700).astype(F32)
  (si,) = Tensor.empty(16, 700).sum(1).schedule()
  p = get_program(si.ast, gpu_shuffles, group_each(g)(si.ast, gpu_shuffles))
  assert prod(p.local_size) % warp == 0 and _count(p, Ops.SHUFFLE) == shuffles
  locals_ = [u for u in p.uops if u.op is Ops.DEFINE_LOCAL]
  assert [u.dtype.size for u in locals_] == ([smem * p.local_size[1]] if smem else []) and _count(p, Ops.BARRIER) == (1 if smem else 0)
  np.testing.assert_allclose(run(monkeypatch, group_each(g), lambda x: x.sum(1), a), a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(run(monkeypatch, group_each(g), lambda x: x.max(1), a), a.max(1))
  b = np.random.randint(-50, 50, size=(16, 700)).astype(np.int32)
  np.testing.assert_array_equal(run(monkeypatch, group_each(g), lambda x: x.sum(1), b), b.sum(1))


@runs_grouped
def test_softmax_and_upcast_rows_through_shuffles(gpu_shuffles, monkeypatch):
  # a grouped reduce inside another (every lane needs the max), and two rows a thread: one butterfly per copy
  a = (np.random.randn(8, 512) * 3).astype(F32)
  e = np.exp(a.astype(np.float64) - a.max(1, keepdims=True))
  np.testing.assert_allclose(run(monkeypatch, group_each(32), lambda x: x.softmax(1), a), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
  w, x = np.random.randn(64, 256).astype(F32), np.random.randn(256).astype(F32)
  upcast = group_each(32, before=lambda ast: [Opt(OptOps.UPCAST, 0, 2)])
  (si,) = (Tensor.empty(64, 256) @ Tensor.empty(256)).schedule()
  p = get_program(si.ast, gpu_shuffles, upcast(si.ast, gpu_shuffles))
  assert _count(p, Ops.SHUFFLE) == 2 * 5 and _count(p, Ops.DEFINE_LOCAL) == 0
  np.testing.assert_allclose(run(monkeypatch, upcast, lambda w, x: w @ x, w, x), w.astype(np.float64) @ x, rtol=1e-4, atol=1e-4)


@runs_grouped
def test_partials_shuffles_cant_move_go_through_shared_memory(gpu_shuffles, monkeypatch):
  # shfl moves 32-bit registers, and needs the warp whole: int64 partials, or a block of 16 threads, use the shared array
  a = np.random.randint(-2**40, 2**40, size=(6, 300)).astype(np.int64)
  (si,) = Tensor.empty(6, 300, dtype=dtypes.int64).sum(1).schedule()
  p = get_program(si.ast, gpu_shuffles, group_each(32)(si.ast, gpu_shuffles))
  assert _count(p, Ops.SHUFFLE) == 0 and _count(p, Ops.DEFINE_LOCAL) == 1
  np.testing.assert_array_equal(run(monkeypatch, group_each(32), lambda x: x.sum(1), a), a.sum(1))
  monkeypatch.setattr(gpudims, "GROUP_MIN_BLOCKS", 64)  # one output a block: 16 threads
  (si,) = Tensor.empty(4, 300).sum(1).schedule()
  p = get_program(si.ast, gpu_shuffles, group_each(16)(si.ast, gpu_shuffles))
  assert p.local_size[0] * p.local_size[1] == 16 and _count(p, Ops.SHUFFLE) == 0 and _count(p, Ops.BARRIER) == 1


def test_interpreter_shuffle_exchanges_within_the_block():
  from tinygrad.runtime.python import _shuffle_emulator
  assert _shuffle_emulator("k", 2)(list(range(8)), None) == [2, 3, 0, 1, 6, 7, 4, 5]
  assert _shuffle_emulator("k", 1)([1.5, -2.0], None) == [-2.0, 1.5]
  with pytest.raises(RuntimeError, match="SHUFFLE with lane mask 4 in a block of 6 threads"): _shuffle_emulator("k", 4)(list(range(6)), None)


def test_verify_rejects_a_64bit_shuffle():
  from tinygrad.uop.verify import VerifyError, verify_kernel
  x = UOp.const(dtypes.float32, 1.0)
  verify_kernel(UOp(Ops.SINK, dtypes.void, (UOp(Ops.SHUFFLE, dtypes.float32, (x,), 16),)))
  for bad in (UOp(Ops.SHUFFLE, dtypes.float64, (UOp.const(dtypes.float64, 1.0),), 16), UOp(Ops.SHUFFLE, dtypes.float32, (x,), 0)):
    with pytest.raises(VerifyError, match="SHUFFLE"): verify_kernel(UOp(Ops.SINK, dtypes.void, (bad,)))
