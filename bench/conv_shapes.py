"""Benchmark: CPU convolutions of ResNet shapes (3x3, 1x1, 3x3 stride 2; batch 8) and a 2048 matmul for calibration, ours
(TinyJit, warm, hand-coded heuristics) against torch in the same process; GFLOP/s, the best of 7 rounds that alternate ours and torch's
(each timed call after an untimed one). One JSON line.
`python bench/conv_shapes.py [label] [--more] [--b32]` (the H200 host's CPU figures in the issue 19 note came from this script);
--more adds ResNet's later layers (14x14 and 7x7 maps), a 1x1 stride-2 downsample, batch 1 and the stem (7x7 stride 2); --b32 the 3x3 and 1x1 convs at
batch 32 (forward and backward). The backward of the default shapes is timed too, each gradient alone ("dx ...", "dw ..."): ours
is x.conv2d(w).gradient(x or w, gradient=g) under TinyJit (only the gradient's kernels: a conv is linear), torch's is
aten.convolution_backward with that one output asked for (what autograd runs); the FLOP count is the forward's. The load
average at the start and the end is in `loadavg`."""
import json
import os
import sys
import time

import torch
from tinygrad import Tensor, TinyJit

SHAPES = [("3x3 b8 64x56", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1), ("1x1 b8 256x56", (8, 256, 56, 56), (64, 256, 1, 1), 0, 1),
          ("3x3 s2 b8 128x28", (8, 128, 28, 28), (256, 128, 3, 3), 1, 2)]
MORE = [("3x3 b8 256x14", (8, 256, 14, 14), (256, 256, 3, 3), 1, 1), ("3x3 b8 512x7", (8, 512, 7, 7), (512, 512, 3, 3), 1, 1),
        ("1x1 b8 1024x14", (8, 1024, 14, 14), (256, 1024, 1, 1), 0, 1), ("1x1 s2 b8 256x56", (8, 256, 56, 56), (512, 256, 1, 1), 0, 2),
        ("3x3 s2 b1 128x56", (1, 128, 56, 56), (128, 128, 3, 3), 1, 2), ("3x3 b1 64x56", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
        ("7x7 s2 b8 3x224", (8, 3, 224, 224), (64, 3, 7, 7), 3, 2)]  # the stem
B32 = [("3x3 b32 64x56", (32, 64, 56, 56), (64, 64, 3, 3), 1, 1), ("1x1 b32 256x56", (32, 256, 56, 56), (64, 256, 1, 1), 0, 1)]


def _timed(f) -> float:
  t = time.perf_counter()
  f()
  return time.perf_counter() - t


SETTLE_S = float(os.getenv("SETTLE_S", "0.2"))  # idle between the sides: torch's OpenMP workers spin on after a call


def best_pair(ours_f, theirs_f, n: int = 7) -> tuple[float, float]:
  """Best time of each side over n rounds that alternate ours and torch's, so a burst of load on this shared 2-core machine
  falls on both sides rather than on whichever happened to run during it."""
  ours_t, theirs_t = [], []
  for _ in range(n):
    # each timed call right after an untimed one of the same side: after the pause the first call of either side ran at half
    # speed or less on this VM (torch's 1x1 256x56 conv 53-147 GFLOP/s that way, 250 back to back; ours 130 vs 260)
    ours_f()
    ours_t.append(_timed(ours_f))
    time.sleep(SETTLE_S)
    theirs_f()
    theirs_t.append(_timed(theirs_f))
    time.sleep(SETTLE_S)
  return min(ours_t), min(theirs_t)


def one_conv(xs: tuple, ws: tuple, pad: int, stride: int) -> dict:
  x, w = Tensor.rand(*xs).realize(), Tensor.rand(*ws).realize()
  conv = TinyJit(lambda x, w: x.conv2d(w, padding=pad, stride=stride).realize())
  for _ in range(3): conv(x, w)
  flops = 2 * conv(x, w).numel() * ws[1] * ws[2] * ws[3]
  tx, tw = torch.rand(*xs), torch.rand(*ws)
  def theirs_f() -> None: torch.nn.functional.conv2d(tx, tw, padding=pad, stride=stride)
  for _ in range(3): theirs_f()
  ours_t, theirs_t = best_pair(lambda: conv(x, w), theirs_f)
  ours, theirs = flops / ours_t / 1e9, flops / theirs_t / 1e9
  return {"ours_gflops": round(ours, 1), "torch_gflops": round(theirs, 1), "ratio": round(ours / theirs, 3)}


def one_grad(xs: tuple, ws: tuple, pad: int, stride: int, wrt: str) -> dict:
  """One gradient of a conv, dx (wrt "x") or dw (wrt "w"), given the output's gradient g."""
  x, w = Tensor.rand(*xs).realize(), Tensor.rand(*ws).realize()
  os_ = x.conv2d(w, padding=pad, stride=stride).shape
  g = Tensor.rand(*os_).realize()
  def grad(x: Tensor, w: Tensor, g: Tensor) -> Tensor:
    y = x.conv2d(w, padding=pad, stride=stride)
    return y.gradient(x if wrt == "x" else w, gradient=g)[0].realize()
  ours_f = TinyJit(grad)
  for _ in range(3): ours_f(x, w, g)
  flops = 2 * g.numel() * ws[1] * ws[2] * ws[3]
  tx, tw, tg = torch.rand(*xs), torch.rand(*ws), torch.rand(*os_)
  mask = [wrt == "x", wrt == "w", False]
  def theirs_f() -> None: torch.ops.aten.convolution_backward(tg, tx, tw, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1, mask)
  for _ in range(3): theirs_f()
  ours_t, theirs_t = best_pair(lambda: ours_f(x, w, g), theirs_f)
  ours, theirs = flops / ours_t / 1e9, flops / theirs_t / 1e9
  return {"ours_gflops": round(ours, 1), "torch_gflops": round(theirs, 1), "ratio": round(ours / theirs, 3)}


def main() -> None:
  args = [a for a in sys.argv[1:] if not a.startswith("--")]
  out: dict = {"label": args[0] if args else "", "threads": torch.get_num_threads(), "cpus": os.cpu_count(), "loadavg": os.getloadavg()}
  for name, xs, ws, pad, stride in SHAPES + (MORE if "--more" in sys.argv else []) + (B32 if "--b32" in sys.argv else []):
    out[name] = one_conv(xs, ws, pad, stride)
  for name, xs, ws, pad, stride in SHAPES + (B32 if "--b32" in sys.argv else []):
    for wrt in ("x", "w"): out[f"d{wrt} {name}"] = one_grad(xs, ws, pad, stride, wrt)
  a, b = Tensor.rand(2048, 2048).realize(), Tensor.rand(2048, 2048).realize()
  mm = TinyJit(lambda a, b: (a @ b).realize())
  for _ in range(3): mm(a, b)
  ta, tb = torch.rand(2048, 2048), torch.rand(2048, 2048)
  ours_t, theirs_t = best_pair(lambda: mm(a, b), lambda: ta @ tb)
  out["matmul 2048"] = {"ours_gflops": round(2 * 2048**3 / ours_t / 1e9, 1), "torch_gflops": round(2 * 2048**3 / theirs_t / 1e9, 1)}
  out["loadavg_end"] = os.getloadavg()
  print(json.dumps(out))


if __name__ == "__main__": main()
