"""Panel packing of a CPU matmul's B (core schedule/pack.py): a big matmul runs as a copy of B into panel order plus the
matmul reading the panels contiguously; small, transposed or computed operands are read in place; results equal numpy with
both CPU renderers, packed or not, for odd shapes and widths that aren't multiples of the register block."""
import numpy as np
import pytest
from tinygrad import Context, Tensor
from tinygrad.codegen.heuristics import _index_stride, hand_coded_opts
from tinygrad.codegen.opt import Opt, OptOps, ranges_of
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_cpu.clang import clang_available


def _kernels(t: Tensor) -> list[UOp]: return [si.ast for si in t.schedule() if si.ast.op is Ops.SINK]


def _loads(ast: UOp) -> list[UOp]: return [n for n in ast.toposort() if n.op is Ops.LOAD and n.src[0].op is Ops.INDEX]


def test_big_matmul_reads_b_from_panels():
  with Context(DEV="CPU"):
    pack, mm = _kernels(Tensor.empty(2048, 2048) @ Tensor.empty(2048, 2048))
  assert not any(n.op is Ops.REDUCE for n in pack.toposort())  # a plain copy
  red = next(r for r in ranges_of(mm).values() if r.arg[1] == "reduce")
  # A's rows are contiguous along k; B, from the packed copy, moves by the panel's width (16) per k instead of by 2048
  assert sorted(_index_stride(ld, red) for ld in _loads(mm)) == [1, 16]


def test_big_matmul_opts_on_avx2():
  """The matmul kernel after packing still gets the 4x16 register block (AVX2's 96 accumulators), the row cache block and
  the threads."""
  with Context(DEV="CPU"):
    mm = _kernels(Tensor.empty(2048, 2048) @ Tensor.empty(2048, 2048))[-1]
  rows, cols = sorted(r.arg[0] for r in ranges_of(mm).values() if r.arg[1] == "global")
  assert hand_coded_opts(mm, threads=2, accumulators=96) == [Opt(OptOps.UPCAST, cols, 16), Opt(OptOps.UPCAST, rows, 4),
                                                             Opt(OptOps.BLOCK, rows, 8), Opt(OptOps.THREAD, 0, 2)]


def test_big_matmul_opts_with_zmm_registers():
  """With AVX-512's zmm registers (448 accumulators) the block is 8 rows x 32 columns: two vectors of B per row of A; where
  32 doesn't divide the columns, or the rows are fewer than 256, it stays 16 wide. AVX-512 filled with ymm registers (224) keeps 8 x 16."""
  with Context(DEV="CPU"):
    mm = _kernels(Tensor.empty(2048, 2048) @ Tensor.empty(2048, 2048))[-1]
    narrow = _kernels(Tensor.empty(512, 512) @ Tensor.empty(512, 528))[-1]
  rows, cols = sorted(r.arg[0] for r in ranges_of(mm).values() if r.arg[1] == "global")
  block = [Opt(OptOps.BLOCK, rows, 8), Opt(OptOps.THREAD, 0, 2)]
  assert hand_coded_opts(mm, threads=2, accumulators=448) == [Opt(OptOps.UPCAST, cols, 32), Opt(OptOps.UPCAST, rows, 8), *block]
  assert hand_coded_opts(mm, threads=2, accumulators=224) == [Opt(OptOps.UPCAST, cols, 16), Opt(OptOps.UPCAST, rows, 8), *block]
  rows, cols = sorted(r.arg[0] for r in ranges_of(narrow).values() if r.arg[1] == "global")
  assert hand_coded_opts(narrow, threads=1, accumulators=448)[:2] == [Opt(OptOps.UPCAST, cols, 16), Opt(OptOps.UPCAST, rows, 8)]
  # fewer than 256 rows (a prefill chunk): 16 wide, half the unrolled body to lower and compile
  with Context(DEV="CPU"): short = _kernels(Tensor.empty(128, 2048) @ Tensor.empty(2048, 2048))[-1]
  rows, cols = sorted(r.arg[0] for r in ranges_of(short).values() if r.arg[1] == "global")
  assert hand_coded_opts(short, threads=1, accumulators=448)[:2] == [Opt(OptOps.UPCAST, cols, 16), Opt(OptOps.UPCAST, rows, 8)]


@pytest.mark.parametrize("a,b", [((32, 512), (512, 512)),    # too few rows to repay the copy
                                 ((256, 128), (128, 512)),   # a short reduction
                                 ((256, 512), (512, 100)),   # B's rows are close together (and 100 isn't a block's width)
                                 ((256, 512), (512, 1008)),  # rows 4032 bytes apart: a panel's lines spread over the cache's sets
                                 ((256, 512), (512, 1032))])  # 16 doesn't divide 1032 (and its rows aren't 512-byte aligned)
def test_small_or_unsuitable_matmuls_read_b_in_place(a, b):
  with Context(DEV="CPU"): assert len(_kernels(Tensor.empty(*a) @ Tensor.empty(*b))) == 1


def test_transposed_b_is_packed_for_many_rows_and_computed_b_is_not():
  """x @ W.T (nn.Linear): W's rows are B's columns, 16 of them per k in the register block; packed from PACK_MIN_ROWS_T rows of
  x (below, the few-vectors form reads W's rows in place); a computed B fuses into the matmul."""
  with Context(DEV="CPU"):
    assert len(_kernels(Tensor.empty(256, 512) @ Tensor.empty(512, 512).T)) == 2
    assert len(_kernels(Tensor.empty(64, 512) @ Tensor.empty(512, 512).T)) == 1
    assert len(_kernels(Tensor.empty(256, 512) @ (Tensor.empty(512, 512) + 1))) == 1  # fused into the matmul, not a buffer
    assert len(_kernels(Tensor.empty(256, 512) @ Tensor.empty(512, 512))) == 2
  with Context(DEV="CPU", PACK_PANELS=0): assert len(_kernels(Tensor.empty(256, 512) @ Tensor.empty(512, 512))) == 1


# 32-wide blocks (AVX-512 hosts, 256+ rows): (264, 300, 544) takes them; (520, 33, 32) packs nothing, a short reduction
SHAPES = [(1, 1, 1), (7, 9, 13), (64, 256, 256), (65, 300, 384), (96, 257, 640), (130, 512, 40), (70, 260, 264), (40, 512, 96),
          (264, 300, 544), (520, 33, 32)]


@pytest.mark.parametrize("m,k,n", [(256, 512, 512), (300, 256, 48), (512, 260, 64)])
def test_linear_with_packed_w_matches_numpy(m, k, n):
  """x @ W.T with W packed (transposed B), incl. a K not a multiple of the unroll and N of 3 panels."""
  rng = np.random.default_rng(m + k + n)
  x, w = rng.standard_normal((m, k), np.float32), rng.standard_normal((n, k), np.float32)
  t = Tensor(x) @ Tensor(w).T
  assert len(_kernels(t)) == (2 if n % 16 == 0 else 1)
  np.testing.assert_allclose(t.numpy(), x @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dev", ["CPU:LLVM", "CPU:CLANG"])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_matches_numpy(dev, m, k, n):
  if dev == "CPU:CLANG" and clang_available() is not None: pytest.skip(str(clang_available()))
  rng = np.random.default_rng(m * k * n)
  a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
  want = a.astype(np.float64) @ b.astype(np.float64)
  for pack in (1, 0):
    with Context(DEV=dev, PACK_PANELS=pack): got = (Tensor(a) @ Tensor(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * np.sqrt(k))


@pytest.mark.parametrize("m,k,n,slices", [(64, 4096, 512, 2), (128, 6144, 256, 3), (64, 4100, 512, 4), (64, 2048, 512, 1)])
def test_long_reduction_runs_in_k_slices(m, k, n, slices):
  """A packed matmul with K > K_SLICE (2048) runs as equal slices of at most that, a kernel each adding the sum so far; equal to
  numpy, and K_SLICE=0 keeps one kernel."""
  rng = np.random.default_rng(k)
  a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
  with Context(DEV="CPU"):
    ta, tb = Tensor(a).realize(), Tensor(b).realize()
    kernels = _kernels((ta @ tb).relu())
    assert len(kernels) == 1 + slices  # the packing copy, then the slices
    reds = [next(r for r in ranges_of(kn).values() if r.arg[1] == "reduce") for kn in kernels[1:]]
    assert [r.src[0].arg for r in reds] == [k // slices] * slices
    got = (ta @ tb).relu().numpy()
    with Context(K_SLICE=0): assert len(_kernels(ta @ tb)) == 2
  np.testing.assert_allclose(got, np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0), rtol=1e-4, atol=1e-3 * np.sqrt(k))


def test_batched_matmul_packs_each_batch_and_matches_numpy():
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((3, 64, 256), np.float32), rng.standard_normal((3, 256, 384), np.float32)
  with Context(DEV="CPU"):
    assert len(_kernels(Tensor(a).realize() @ Tensor(b).realize())) == 2
    got = (Tensor(a) @ Tensor(b)).numpy()
  np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-2)


# ---- padded inputs (schedule/pack.py's pad_inputs)

def test_big_padded_conv_reads_a_padded_copy():
  with Context(DEV="CPU", CONV_LANES=0):  # the padded copy alone (conv_lanes.py adds the weight's copy and the output's)
    pad, conv = _kernels(Tensor.empty(8, 64, 56, 56).conv2d(Tensor.empty(64, 64, 3, 3), padding=1))
    assert not any(n.op is Ops.REDUCE for n in pad.toposort())
    assert not any(n.op is Ops.WHERE for n in conv.toposort())  # no border mask left in the convolution
    assert len(_kernels(Tensor.empty(2, 8, 16, 16).conv2d(Tensor.empty(16, 8, 3, 3), padding=1))) == 1  # small: masked in place
    assert len(_kernels(Tensor.empty(8, 64, 56, 56).conv2d(Tensor.empty(4, 64, 3, 3), padding=1))) == 1  # 4 outputs per pixel
  with Context(DEV="CPU", PACK_PANELS=0, CONV_LANES=0):
    assert len(_kernels(Tensor.empty(8, 64, 56, 56).conv2d(Tensor.empty(64, 64, 3, 3), padding=1))) == 1


def test_padded_computed_input_is_computed_into_the_copy():
  """A padded conv input that is computed (relu(x + b): a conv's upstream gradient through a norm's backward is one) gets a
  padded copy too, the value computed into it once, where in place every tap computed it again behind a border mask
  (bench/programs: unet 50 -> 28 ms a step, cnn 57.5 -> 47.7 on one thread); same values as numpy."""
  rng = np.random.default_rng(9)
  xs, bs, ws = rng.standard_normal((2, 16, 64, 64), np.float32), rng.standard_normal((16, 1, 1), np.float32), rng.standard_normal((16, 16, 3, 3), np.float32)
  with Context(DEV="CPU", CONV_LANES=0):
    x, b, w = Tensor(xs).realize(), Tensor(bs).realize(), Tensor(ws).realize()
    pad, conv = _kernels((x + b).relu().conv2d(w, padding=1))
    assert not any(n.op is Ops.REDUCE for n in pad.toposort()) and not any(n.op is Ops.WHERE for n in conv.toposort())
    got = (x + b).relu().conv2d(w, padding=1).numpy()
  xp = np.pad(np.maximum(xs + bs, 0), ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
  want = sum(np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + 64, kx:kx + 64], ws[:, :, ky, kx]) for ky in range(3) for kx in range(3))
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape,cout,pad,stride", [((1, 16, 64, 64), 16, 1, 1), ((2, 8, 67, 61), 24, 2, 2), ((1, 32, 48, 50), 16, 1, 1)])
def test_padded_conv_matches_numpy(shape, cout, pad, stride):
  rng = np.random.default_rng(sum(shape))
  x, w = rng.standard_normal(shape, np.float32), rng.standard_normal((cout, shape[1], 3, 3), np.float32)
  xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).astype(np.float64)
  oh, ow = (xp.shape[2] - 3) // stride + 1, (xp.shape[3] - 3) // stride + 1
  want = np.zeros((shape[0], cout, oh, ow))
  for ky in range(3):
    for kx in range(3):
      want += np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride], w[:, :, ky, kx])
  with Context(DEV="CPU", CONV_LANES=0):  # the padded copy alone (conv_lanes.py adds the weight's copy and the output's)
    assert len(_kernels(Tensor(x).realize().conv2d(Tensor(w).realize(), padding=pad, stride=stride))) == 2
  for lanes in (0, 1):
    with Context(DEV="CPU", CONV_LANES=lanes): got = Tensor(x).conv2d(Tensor(w), padding=pad, stride=stride).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_gradients_equal_unpacked():
  """The backward passes of a big matmul and a padded conv (their own matmuls and convs over transposed or padded views)
  give the same gradients with the copies as without."""
  rng = np.random.default_rng(1)
  a, b = rng.standard_normal((128, 512), np.float32), rng.standard_normal((512, 512), np.float32)
  x, w = rng.standard_normal((1, 16, 64, 64), np.float32), rng.standard_normal((16, 16, 3, 3), np.float32)
  grads = []
  for pack in (1, 0):
    with Context(DEV="CPU", PACK_PANELS=pack):
      ta, tb, tx, tw = (Tensor(v, requires_grad=True) for v in (a, b, x, w))
      ((ta @ tb).relu().sum() + tx.conv2d(tw, padding=1).square().mean()).backward()
      grads.append([t.grad.numpy() for t in (ta, tb, tx, tw)])
  for g1, g0 in zip(*grads): np.testing.assert_allclose(g1, g0, rtol=1e-4, atol=1e-3)


def test_transposed_a_is_copied_with_the_reduction_innermost():
  """A.T @ B (a weight gradient's x.T @ g): A's elements along the reduction are a row apart, so its un-broadcast view is
  copied k-contiguous (one more kernel) next to B's panels; A @ B reads A in place. Results match numpy."""
  a, b = Tensor.empty(512, 512), Tensor.empty(512, 512)
  plain, trans = _kernels(a @ b), _kernels(a.T @ b)
  assert len(trans) == len(plain) + 1
  rng = np.random.default_rng(3)
  an, bn = rng.standard_normal((384, 512)).astype(np.float32), rng.standard_normal((384, 256)).astype(np.float32)
  np.testing.assert_allclose((Tensor(an).T @ Tensor(bn)).numpy(), an.T @ bn, rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(((Tensor(an) * 2).T @ Tensor(bn)).numpy(), (an * 2).T @ bn, rtol=1e-4, atol=1e-3)
