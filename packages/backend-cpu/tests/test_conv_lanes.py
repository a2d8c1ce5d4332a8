"""Output channels as a CPU convolution's vector lanes (core schedule/conv_lanes.py): a conv whose output rows don't
vectorize (stride 2, rows not a multiple of 16) runs in the blocked layout (N, C/w, H, W, w) over a copy of its weight with
the output channel innermost; other convs and matmuls are left alone; results equal a float64 numpy reference with both
CPU renderers, for odd shapes, batch 1, channel counts that aren't multiples of 16, and through the backward pass."""
import numpy as np
import pytest
from tinygrad import Context, Tensor, dtypes
from tinygrad.codegen.heuristics import _index_stride, hand_coded_opts
from tinygrad.codegen.opt import Opt, OptOps, range_size, ranges_of
from tinygrad.codegen.program import stable_key
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_cpu.clang import clang_available


def _kernels(t: Tensor) -> list[UOp]: return [si.ast for si in t.schedule() if si.ast.op is Ops.SINK]


def _keys(kernels: list[UOp]) -> list[str]: return [stable_key(list(k.toposort())) for k in kernels]


def _conv(ast_list: list[UOp]) -> UOp: return next(k for k in ast_list if any(n.op is Ops.REDUCE for n in k.toposort()))


def _out_ranges(ast: UOp) -> list[UOp]: return sorted((r for r in ranges_of(ast).values() if r.arg[1] == "global"), key=lambda r: r.arg[0])


def _reference(x: np.ndarray, w: np.ndarray, pad: int, stride: int) -> np.ndarray:
  kh, kw = w.shape[2:]
  xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).astype(np.float64)
  oh, ow = (xp.shape[2] - kh) // stride + 1, (xp.shape[3] - kw) // stride + 1
  out = np.zeros((x.shape[0], w.shape[0], oh, ow))
  for ky in range(kh):
    for kx in range(kw):
      out += np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride], w[:, :, ky, kx].astype(np.float64))
  return out


def test_stride2_conv_runs_with_channel_lanes():
  """ResNet's 3x3 stride-2 conv (128 -> 256 channels, 28x28 -> 14x14): the conv kernel's innermost output loop is 32 output
  channels, whose weights are neighbours (the packed copy) and whose input pixel is one and the same; the register block
  vectorizes that loop."""
  with Context(DEV="CPU"):
    kernels = _kernels(Tensor.empty(8, 128, 28, 28).conv2d(Tensor.empty(256, 128, 3, 3), padding=1, stride=2))
  conv = _conv(kernels)
  outs = _out_ranges(conv)
  assert [range_size(r) for r in outs] == [8, 8, 14, 14, 32]  # (N, C/32, H, W, 32)
  lanes = outs[-1]
  strides = sorted(_index_stride(ld, lanes) for ld in conv.toposort() if ld.op is Ops.LOAD and ld.src[0].op is Ops.INDEX)
  assert strides == [0, 1]  # the input pixel is shared by the lanes, the weights are contiguous
  assert hand_coded_opts(conv, threads=2, accumulators=96)[0] == Opt(OptOps.UPCAST, lanes.arg[0], 32)
  # the padded input's copy, the weight's copy, the conv, and the copy back to NCHW
  assert len(kernels) == 4
  with Context(DEV="CPU", CONV_LANES=0):
    assert len(_kernels(Tensor.empty(8, 128, 28, 28).conv2d(Tensor.empty(256, 128, 3, 3), padding=1, stride=2))) == 2


@pytest.mark.parametrize("cout,width", [(64, 32), (48, 16), (24, 8)])
def test_lane_width_is_the_widest_that_divides(cout, width):
  with Context(DEV="CPU"): conv = _conv(_kernels(Tensor.empty(2, 16, 14, 14).conv2d(Tensor.empty(cout, 16, 3, 3), padding=1)))
  assert range_size(_out_ranges(conv)[-1]) == width


def test_lanes_block_for_a_single_channel_block():
  """32 output channels are one lanes block (no channel-block loop beside the lanes, as in a batched matmul): a convolution,
  which reduces over its taps too, still takes the lanes block (32 lanes x 8 pixels of a 24-wide row), not the matmul's 16 x 8
  (bench/programs/cnn.py's 5x5 input gradient: 74 -> 57 ms a step on one thread); the values are numpy's."""
  with Context(DEV="CPU"):
    conv = _conv(_kernels(Tensor.empty(4, 32, 28, 28).conv2d(Tensor.empty(32, 32, 5, 5))))
  ox, lanes = _out_ranges(conv)[-2], _out_ranges(conv)[-1]
  assert range_size(lanes) == 32 and range_size(ox) == 24
  assert hand_coded_opts(conv, threads=1, accumulators=448)[:2] == [Opt(OptOps.UPCAST, lanes.arg[0], 32), Opt(OptOps.UPCAST, ox.arg[0], 8)]
  rng = np.random.default_rng(5)
  x, w = rng.standard_normal((2, 32, 12, 12), np.float32), rng.standard_normal((32, 32, 5, 5), np.float32)
  with Context(DEV="CPU"): got = Tensor(x).conv2d(Tensor(w)).numpy()
  np.testing.assert_allclose(got, _reference(x, w, 0, 1), rtol=1e-3, atol=1e-3)


def test_lanes_block_takes_a_row_of_pixels():
  """The register block (codegen/heuristics.py's _lanes_block): the 32 lanes whole, then pixels along the row (7 of a 7- or
  14-wide row, 8 of a 56-wide one), as many as the accumulators allow: AVX-512's 448 take up to 32 x 9, AVX2's 96 take 32 x 3
  (a 7-wide row has no divisor up to 3: two images instead)."""
  with Context(DEV="CPU"):
    seven = _conv(_kernels(Tensor.empty(8, 512, 7, 7).conv2d(Tensor.empty(512, 512, 3, 3), padding=1)))
    wide = _conv(_kernels(Tensor.empty(8, 64, 56, 56).conv2d(Tensor.empty(64, 64, 3, 3), padding=1)))
  n, ox, lanes = _out_ranges(seven)[0], _out_ranges(seven)[-2], _out_ranges(seven)[-1]
  # (and 4 images per channel block: _lanes_image_block, test_big_weight_runs_several_images_per_channel_block)
  assert hand_coded_opts(seven, threads=2, accumulators=448) == [Opt(OptOps.UPCAST, lanes.arg[0], 32), Opt(OptOps.UPCAST, ox.arg[0], 7),
                                                                 Opt(OptOps.BLOCK, n.arg[0], 4), Opt(OptOps.THREAD, 0, 2)]
  assert hand_coded_opts(seven, threads=2, accumulators=96) == [Opt(OptOps.UPCAST, lanes.arg[0], 32), Opt(OptOps.UPCAST, n.arg[0], 2),
                                                                Opt(OptOps.BLOCK, n.arg[0], 2), Opt(OptOps.THREAD, 0, 2)]
  blocks, ox, lanes = _out_ranges(wide)[1], _out_ranges(wide)[-2], _out_ranges(wide)[-1]
  assert hand_coded_opts(wide, threads=2, accumulators=448) == [Opt(OptOps.UPCAST, lanes.arg[0], 32), Opt(OptOps.UPCAST, ox.arg[0], 8),
                                                                Opt(OptOps.BLOCK, blocks.arg[0], 2), Opt(OptOps.THREAD, 0, 2)]


@pytest.mark.parametrize("xs,ws,pad,stride", [((8, 64, 56, 56), (64, 64, 3, 3), 1, 1), ((8, 256, 56, 56), (64, 256, 1, 1), 0, 1),
                                              ((1, 128, 14, 14), (256, 128, 1, 1), 0, 1)])
def test_rows_not_a_multiple_of_16_take_lanes(xs, ws, pad, stride):
  """56- and 14-wide rows (ResNet's) vectorize 8 at a time at best: the channels become the lanes instead."""
  with Context(DEV="CPU"): conv = _conv(_kernels(Tensor.empty(*xs).conv2d(Tensor.empty(*ws), padding=pad, stride=stride)))
  assert range_size(_out_ranges(conv)[-1]) == 32


@pytest.mark.parametrize("xs,ws,pad,stride", [((8, 64, 32, 32), (64, 64, 3, 3), 1, 1),  # 32-wide rows vectorize as they are
                                              ((8, 128, 32, 32), (128, 128, 1, 1), 0, 1),  # a 1x1 conv on 32-wide rows
                                              ((2, 16, 14, 14), (12, 16, 3, 3), 1, 1)])  # 12 channels: no lanes of 8
def test_left_alone(xs, ws, pad, stride):
  with Context(DEV="CPU"):
    a = _kernels(Tensor.empty(*xs).conv2d(Tensor.empty(*ws), padding=pad, stride=stride))
  with Context(DEV="CPU", CONV_LANES=0):
    b = _kernels(Tensor.empty(*xs).conv2d(Tensor.empty(*ws), padding=pad, stride=stride))
  assert _keys(a) == _keys(b)


def test_matmul_left_alone():
  with Context(DEV="CPU"):
    a = _kernels(Tensor.empty(64, 100) @ Tensor.empty(100, 10))  # 10 columns: not a multiple of 8, but one reduce axis
  with Context(DEV="CPU", CONV_LANES=0): b = _kernels(Tensor.empty(64, 100) @ Tensor.empty(100, 10))
  assert _keys(a) == _keys(b)


SHAPES = [((1, 8, 7, 9), (16, 8, 3, 3), 1, 1),      # batch 1, 9-wide rows
          ((2, 3, 13, 9), (24, 3, 3, 3), 1, 2),     # stride 2, 3 input channels, 24 = 8-wide lanes
          ((1, 16, 7, 7), (32, 16, 1, 1), 0, 1),    # a 1x1 conv on a 7x7 map
          ((2, 16, 15, 15), (32, 16, 1, 1), 0, 2),  # a 1x1 stride-2 conv (ResNet's downsample)
          ((1, 5, 11, 13), (16, 5, 5, 3), 2, 1),    # a 5x3 kernel, odd everything
          ((3, 8, 14, 14), (48, 8, 3, 3), 1, 1),    # 48 channels: 3 blocks of 16
          ((2, 8, 13, 13), (64, 8, 3, 3), 1, 2),    # 64 channels: 2 blocks of 32, stride 2 on odd sizes
          ((1, 1, 10, 10), (32, 1, 3, 3), 1, 1),    # 1 input channel
          ((1, 3, 64, 64), (32, 3, 7, 7), 3, 2)]    # a ResNet stem: 32-wide output rows, read at stride 2


@pytest.mark.parametrize("dev", ["CPU:LLVM", "CPU:CLANG"])
@pytest.mark.parametrize("xs,ws,pad,stride", SHAPES)
def test_matches_numpy(dev, xs, ws, pad, stride):
  if dev == "CPU:CLANG" and clang_available() is not None: pytest.skip(str(clang_available()))
  rng = np.random.default_rng(sum(xs) + sum(ws))
  x, w = rng.standard_normal(xs, np.float32), rng.standard_normal(ws, np.float32)
  with Context(DEV=dev):
    kernels = _kernels(Tensor(x).realize().conv2d(Tensor(w).realize(), padding=pad, stride=stride))
    assert range_size(_out_ranges(_conv(kernels))[-1]) in (8, 16, 32)  # the rewrite applied
    got = Tensor(x).conv2d(Tensor(w), padding=pad, stride=stride).numpy()
  np.testing.assert_allclose(got, _reference(x, w, pad, stride), rtol=1e-4, atol=1e-4 * np.sqrt(ws[1] * ws[2] * ws[3]))


def test_fused_consumer_and_gradients_equal_plain():
  """A bias and relu after the conv (consumers that read the blocked result back as NCHW) and the backward pass (its own
  convs over transposed views) give what they give without the rewrite."""
  rng = np.random.default_rng(3)
  x, w, b = rng.standard_normal((2, 16, 14, 14), np.float32), rng.standard_normal((32, 16, 3, 3), np.float32), rng.standard_normal(32, np.float32)
  res = []
  for lanes in (1, 0):
    with Context(DEV="CPU", CONV_LANES=lanes):
      tx, tw, tb = (Tensor(v, requires_grad=True) for v in (x, w, b))
      y = tx.conv2d(tw, tb, padding=1, stride=2).relu()
      (y * y).sum().backward()
      res.append([y.numpy(), *(t.grad.numpy() for t in (tx, tw, tb))])
  for g1, g0 in zip(*res): np.testing.assert_allclose(g1, g0, rtol=1e-4, atol=1e-3)


def test_small_weight_runs_every_channel_block_per_pixel_block():
  """_lanes_cache_block: ResNet's 1x1 stride-2 downsample (a 512 KiB weight over a 25 MB input) nests its 16 channel blocks
  inside the pixel loops (BLOCK), so each input block is read once from memory; the 3x3 256x14 layer (a 2.4 MB weight) keeps
  its order."""
  with Context(DEV="CPU"):
    down = _conv(_kernels(Tensor.empty(8, 256, 56, 56).conv2d(Tensor.empty(512, 256, 1, 1), stride=2)))
    big = _conv(_kernels(Tensor.empty(8, 256, 14, 14).conv2d(Tensor.empty(256, 256, 3, 3), padding=1)))
  blocks = _out_ranges(down)[1]
  assert range_size(blocks) == 16 and Opt(OptOps.BLOCK, blocks.arg[0], 16) in hand_coded_opts(down, threads=2, accumulators=448)
  assert not any(o.op is OptOps.BLOCK for o in hand_coded_opts(big, threads=2, accumulators=448))


def test_weight_gradient_blocks_the_taps():
  """A 3x3 conv's weight gradient in the lanes layout (output channels as lanes, the reduction over the images' pixels): the
  block is the 32 lanes x the 9 taps, each tap's input pixel broadcast."""
  x, w = Tensor.empty(8, 64, 56, 56), Tensor.empty(64, 64, 3, 3)
  with Context(DEV="CPU"):
    dw = _conv([si.ast for si in x.conv2d(w, padding=1).gradient(w, gradient=Tensor.empty(8, 64, 56, 56))[0].schedule()
                if si.ast.op is Ops.SINK])
  outs = _out_ranges(dw)
  assert [range_size(r) for r in outs] == [2, 64, 3, 3, 32]
  assert hand_coded_opts(dw, threads=2, accumulators=448)[:3] == [Opt(OptOps.UPCAST, outs[4].arg[0], 32), Opt(OptOps.UPCAST, outs[3].arg[0], 3),
                                                                  Opt(OptOps.UPCAST, outs[2].arg[0], 3)]


def test_batched_matmul_keeps_the_matmul_block():
  """A batched matmul whose columns are 32 (attention's probabilities times V with 32-wide heads) looks like a lanes kernel
  (loads at stride 0 and 1 along the columns) but has no channel-block loop: it keeps _register_block's 16-wide block (32 wide
  from 256 rows only, for the compile time of the unrolled body)."""
  with Context(DEV="CPU"):
    (si,) = [si for si in (Tensor.empty(4, 9, 64, 128) @ Tensor.empty(4, 9, 128, 32)).schedule() if si.ast.op is Ops.SINK]
  outs = _out_ranges(si.ast)
  assert hand_coded_opts(si.ast, threads=2, accumulators=448)[0] == Opt(OptOps.UPCAST, outs[-1].arg[0], 16)


@pytest.mark.parametrize("xs,ws,pad,stride,groups", [((2, 64, 14, 14), (64, 32, 3, 3), 1, 1, 2),   # 2 groups of 32 channels
                                                     ((1, 64, 13, 13), (64, 1, 3, 3), 1, 2, 64),   # depthwise, stride 2, odd
                                                     ((2, 32, 9, 9), (128, 8, 1, 1), 0, 1, 4)])    # grouped 1x1
def test_groups_match_numpy(xs, ws, pad, stride, groups):
  rng = np.random.default_rng(sum(xs) + groups)
  x, w = rng.standard_normal(xs, np.float32), rng.standard_normal(ws, np.float32)
  cin, cout = xs[1] // groups, ws[0] // groups
  want = np.concatenate([_reference(x[:, g * cin:(g + 1) * cin], w[g * cout:(g + 1) * cout], pad, stride) for g in range(groups)], axis=1)
  with Context(DEV="CPU"): got = Tensor(x).conv2d(Tensor(w), padding=pad, stride=stride, groups=groups).numpy()
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(ws[1] * ws[2] * ws[3]))


def test_big_weight_gradient_runs_in_slices_of_images():
  """conv_lanes._sliced_sum: the 3x3 64x56 layer's weight gradient (batch 8, a 6.4 MB output gradient as the lanes operand)
  sums 2 images per kernel (4 kernels, each adding the sum so far), and so does its 1x1 256x56 layer's; the stride-2 layer's
  (1.6 MB) stays one kernel; the sums equal numpy's."""
  def dw_kernels(xs, ws, pad, stride) -> list[UOp]:
    x, w = Tensor.empty(*xs), Tensor.empty(*ws)
    g = Tensor.empty(*x.conv2d(w, padding=pad, stride=stride).shape)
    return [si.ast for si in x.conv2d(w, padding=pad, stride=stride).gradient(w, gradient=g)[0].schedule()
            if si.ast.op is Ops.SINK and any(n.op is Ops.REDUCE for n in si.ast.toposort())]
  with Context(DEV="CPU"):
    assert [range_size(_out_ranges(k)[0]) for k in dw_kernels((8, 64, 56, 56), (64, 64, 3, 3), 1, 1)] == [2] * 4
    assert len(dw_kernels((8, 128, 28, 28), (256, 128, 3, 3), 1, 2)) == 1
    assert [range_size(_out_ranges(k)[0]) for k in dw_kernels((8, 256, 56, 56), (64, 256, 1, 1), 0, 1)] == [2] * 4
  # a small one that slices (2.4 MB of output gradient: 2 kernels of 4 images), against numpy
  rng = np.random.default_rng(7)
  x, w, g = (rng.standard_normal(s, np.float32) for s in ((8, 32, 48, 48), (32, 32, 3, 3), (8, 32, 48, 48)))
  with Context(DEV="CPU"):
    assert len(dw_kernels(x.shape, w.shape, 1, 1)) == 2
    tx, tw = Tensor(x), Tensor(w)
    got = tx.conv2d(tw, padding=1).gradient(tw, gradient=Tensor(g))[0].numpy()
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
  want = np.stack([np.stack([np.einsum("nohw,nchw->oc", g, xp[:, :, ky:ky + 48, kx:kx + 48]) for kx in range(3)], -1) for ky in range(3)], -2)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-2)
  # a 1x1 conv's (6 MiB of output gradient: 3 kernels of 8 images)
  x, g = rng.standard_normal((24, 16, 32, 32), np.float32), rng.standard_normal((24, 64, 32, 32), np.float32)
  w = rng.standard_normal((64, 16, 1, 1), np.float32)
  with Context(DEV="CPU"):
    assert len(dw_kernels(x.shape, w.shape, 0, 1)) == 3
    tx, tw = Tensor(x), Tensor(w)
    got = tx.conv2d(tw).gradient(tw, gradient=Tensor(g))[0].numpy()
  np.testing.assert_allclose(got[:, :, 0, 0], np.einsum("nohw,nchw->oc", g.astype(np.float64), x), rtol=1e-4, atol=1e-2)


def test_input_gradient_runs_the_forward_kernel():
  """A stride-1 conv's input gradient is a conv of the output's gradient with the flipped, transposed weight (core
  frontend/conv.py's _input_gradient): with 64 channels each way it is the forward's own lanes kernel, the flip read
  through the weight's lanes copy (pack._axis_strides follows FLIP)."""
  x, w = Tensor.empty(8, 64, 56, 56), Tensor.empty(64, 64, 3, 3)
  with Context(DEV="CPU"):
    fwd = _conv(_kernels(x.conv2d(w, padding=1)))
    dx = _conv([si.ast for si in x.conv2d(w, padding=1).gradient(x, gradient=Tensor.empty(8, 64, 56, 56))[0].schedule() if si.ast.op is Ops.SINK])
  assert _keys([dx]) == _keys([fwd])


def test_batch_one_with_a_big_input_puts_the_rows_outside():
  """conv_lanes._loop_order: at batch 1 the channel blocks would be the outermost loop (the threads'); with an input
  ROWS_FIRST_INPUT times the weight or more (ResNet's 3x3 stride-2 128x56 layer: 1.7 MB over 590 KB) the output rows go
  outside them, so each input row is read once for all channel blocks. A smaller input (3x3 128x28: 460 KB), batch 8 and an
  odd number of rows (which the threads can't split evenly) keep the channel blocks outside."""
  def loops(xs, ws, pad, stride) -> list[int | None]:
    with Context(DEV="CPU"): return [range_size(r) for r in _out_ranges(_conv(_kernels(Tensor.empty(*xs).conv2d(Tensor.empty(*ws), padding=pad, stride=stride))))]
  assert loops((1, 128, 56, 56), (128, 128, 3, 3), 1, 2) == [28, 4, 28, 32]
  assert loops((1, 256, 56, 56), (64, 256, 1, 1), 0, 1) == [56, 2, 56, 32]
  assert loops((1, 128, 28, 28), (128, 128, 3, 3), 1, 1) == [4, 28, 28, 32]
  assert loops((8, 128, 56, 56), (128, 128, 3, 3), 1, 2) == [8, 4, 28, 28, 32]
  assert loops((1, 128, 58, 58), (128, 128, 3, 3), 1, 2) == [4, 29, 29, 32]


@pytest.mark.parametrize("dev", ["CPU:LLVM", "CPU:CLANG"])
@pytest.mark.parametrize("xs,ws,pad,stride", [((1, 8, 32, 32), (32, 8, 3, 3), 1, 2), ((1, 32, 14, 14), (64, 32, 1, 1), 0, 1),
                                              ((1, 5, 46, 38), (48, 5, 3, 5), 2, 2)])
def test_rows_outside_matches_numpy(dev, xs, ws, pad, stride):
  if dev == "CPU:CLANG" and clang_available() is not None: pytest.skip(str(clang_available()))
  rng = np.random.default_rng(sum(xs) + sum(ws))
  x, w = rng.standard_normal(xs, np.float32), rng.standard_normal(ws, np.float32)
  with Context(DEV=dev):
    outs = _out_ranges(_conv(_kernels(Tensor(x).realize().conv2d(Tensor(w).realize(), padding=pad, stride=stride))))
    assert range_size(outs[0]) != ws[0] // range_size(outs[-1])  # the rows are outside the channel blocks
    got = Tensor(x).conv2d(Tensor(w), padding=pad, stride=stride).numpy()
  np.testing.assert_allclose(got, _reference(x, w, pad, stride), rtol=1e-4, atol=1e-4 * np.sqrt(ws[1] * ws[2] * ws[3]))


def test_big_weight_runs_several_images_per_channel_block():
  """heuristics._lanes_image_block: ResNet's 3x3 512x7 layer, batch 8 (a 9.4 MB weight over 166 KB padded images) runs 4
  images per channel block on 2 threads (each thread one block of images), none on 8 threads (the images are the threads'
  loop); the 256x14 layer (2.4 MB over 262 KB) keeps its order."""
  with Context(DEV="CPU"):
    seven = _conv(_kernels(Tensor.empty(8, 512, 7, 7).conv2d(Tensor.empty(512, 512, 3, 3), padding=1)))
    fourteen = _conv(_kernels(Tensor.empty(8, 256, 14, 14).conv2d(Tensor.empty(256, 256, 3, 3), padding=1)))
  images = _out_ranges(seven)[0]
  assert hand_coded_opts(seven, threads=2, accumulators=448)[-2:] == [Opt(OptOps.BLOCK, images.arg[0], 4), Opt(OptOps.THREAD, 0, 2)]
  assert not any(o.op is OptOps.BLOCK for o in hand_coded_opts(seven, threads=8, accumulators=448))
  assert not any(o.op is OptOps.BLOCK for o in hand_coded_opts(fourteen, threads=2, accumulators=448))


def test_strided_input_gradient_pads_the_gradient_once():
  """A stride-2 conv's input gradient is one conv per phase (2x2, 2x1, 1x2 and 1x1 taps for a 3x3 kernel): they read one
  padded copy of the output's gradient (ResNet's 3x3 stride-2 128x28 layer: a (8, 256, 16, 16) copy), not one copy each,
  and each phase's lanes copy of the weight reads the weight itself through the phase's slice of taps (no copy of the slice)."""
  x, w = Tensor.empty(8, 128, 28, 28), Tensor.empty(256, 128, 3, 3)
  with Context(DEV="CPU"):
    items = x.conv2d(w, padding=1, stride=2).gradient(x, gradient=Tensor.empty(8, 256, 14, 14))[0].schedule()
  reads_gradient = [si for si in items if si.ast.op is Ops.SINK and not any(n.op is Ops.REDUCE for n in si.ast.toposort())
                    and any(b.size == 8 * 256 * 14 * 14 for b in si.bufs[1:])]
  assert [si.bufs[0].size for si in reads_gradient] == [8 * 256 * 16 * 16]
  reads_weight = [si.bufs[0].size for si in items if si.ast.op is Ops.SINK and any(b.size == 256 * 128 * 9 for b in si.bufs[1:])]
  assert sorted(reads_weight) == [256 * 128 * t for t in (1, 2, 2, 4)]


def test_stem_reads_its_columns_at_stride_2():
  """ResNet's stem (3 -> 64 channels, 7x7 stride 2, 224 -> 112): 112-wide output rows are a multiple of 16, but the input
  is read at stride 2 along them (a stride the windows' view hides under a SHRINK: conv_lanes reads it through the slices),
  so the conv runs in the lanes layout (24 GFLOP/s with its columns as 16 strided lanes, 310 with 32 channels)."""
  with Context(DEV="CPU"):
    conv = _conv(_kernels(Tensor.empty(8, 3, 224, 224).conv2d(Tensor.empty(64, 3, 7, 7), padding=3, stride=2)))
  assert [range_size(r) for r in _out_ranges(conv)] == [8, 2, 112, 112, 32]


def _decoded_matmul(x: Tensor, q: Tensor) -> Tensor:
  """x (rows, k) times a matrix decoded per element from bytes q (out, k): (q - 8) * 0.125, summed over blocks of 32 (two
  reduce axes, as tinygrad.llm's CPU prefill multiplies by a quantized weight dequantized in the kernel)."""
  w = (q.cast(dtypes.float32) - 8) * 0.125
  n, k = x.shape
  return (x.reshape(n, 1, k // 32, 32) * w.reshape(1, q.shape[0], k // 32, 32)).sum((-1, -2))


@pytest.mark.parametrize("rows,width", [(64, 64), (128, 64), (32, 32), (16, 0)])
def test_decoded_matrix_takes_the_rows_as_64_lanes(rows, width):
  """A few rows of x times a matrix decoded per element from bytes: the rows are the lanes, up to 64 of them (DECODED_LANE_WIDTHS:
  each decoded element is broadcast to every lane), and the register block is the 64 lanes by 4 outputs; DECODED_LANES=0 keeps
  32 lanes. Fewer than 32 rows (DECODED_MIN_LANES) keep their layout: one kernel, vectorized along the reduction (UNROLL). The
  values equal numpy's."""
  rng = np.random.default_rng(5)
  x_np, q_np = rng.standard_normal((rows, 128)).astype(np.float32), rng.integers(0, 16, (96, 128)).astype(np.uint8)
  with Context(DEV="CPU"):
    x, q = Tensor(x_np).realize(), Tensor(q_np).realize()
    kernels = _kernels(_decoded_matmul(x, q))
    mm, outs = _conv(kernels), _out_ranges(_conv(kernels))
    opts = hand_coded_opts(mm, threads=2, accumulators=448)
    if width:
      assert range_size(outs[-1]) == width and len(kernels) == 3  # x's copy with the rows innermost, the matmul, the copy back
      if width == 64: assert opts[:2] == [Opt(OptOps.UPCAST, outs[-1].arg[0], 64), Opt(OptOps.UPCAST, outs[-2].arg[0], 4)]
    else: assert len(kernels) == 1 and any(o.op is OptOps.UNROLL for o in opts)
    got = _decoded_matmul(x, q).numpy()
    with Context(DECODED_LANES=0): assert range_size(_out_ranges(_conv(_kernels(_decoded_matmul(x, q))))[-1]) == min(rows, 32)
  np.testing.assert_allclose(got, x_np.astype(np.float64) @ ((q_np.astype(np.float64) - 8) * 0.125).T, rtol=1e-5, atol=1e-4)


def test_weight_gradient_of_a_computed_gradient_takes_lanes():
  """A conv's weight gradient whose upstream gradient is computed, not a buffer (through a ReLU's and a scale's backward, as
  after a norm and a pool): the lanes' copy of the gradient computes it once, and the kernel runs with its output channels
  as the lanes (32); it was recomputed in the kernel for every (input channel, tap), without lanes (CNN's 5x5 32 -> 32 layer:
  117 -> 23 ms). Equal to numpy's."""
  rng = np.random.default_rng(0)
  x, w = rng.standard_normal((4, 32, 12, 12)).astype(np.float32), rng.standard_normal((32, 32, 5, 5)).astype(np.float32)
  up, scale = rng.standard_normal((4, 32, 8, 8)).astype(np.float32), rng.standard_normal((32, 1, 1)).astype(np.float32)
  with Context(DEV="CPU"):
    tx, tw = Tensor(x), Tensor(w, requires_grad=True)
    out = tx.conv2d(tw)
    loss = (out.relu() * Tensor(scale) * Tensor(up)).sum()
    (dw,) = loss.gradient(tw)
    kernel = [k for k in _kernels(dw) if any(n.op is Ops.REDUCE for n in k.toposort())][-1]  # after the forward conv
    assert [range_size(r) for r in _out_ranges(kernel)] == [32, 5, 5, 32]  # (input channel, taps, 32 output channels)
    got = dw.numpy()
  o = _reference(x, w, 0, 1)
  g = np.where(o > 0, scale * up, 0.0)  # the upstream gradient
  ref = np.zeros(w.shape)
  for ky in range(5):
    for kx in range(5): ref[:, :, ky, kx] = np.einsum("nohw,nchw->oc", g, x[:, :, ky:ky + 8, kx:kx + 8].astype(np.float64))
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
