# image operations on odd sizes, each against a numpy reference written here: interpolate (linear in 1 / 2 / 3 dims with
# align_corners both ways, nearest, nearest-exact; up and down, to size 1), avg / max pooling with padding and ceil_mode on
# 7x9 maps, reflect / replicate / circular padding with asymmetric and negative pads, a bilinear grid sample by gathers
# (a rotation by an affine grid, zeros outside), a separable Gaussian blur by a depthwise conv2d, Sobel edges, a uint8
# resize + center crop + normalize pipeline (rounding back to uint8), a Laplacian pyramid; the pipeline under TinyJit
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import chk, finish, peer, report

rng = np.random.default_rng(21)
img_np = rng.random((2, 3, 7, 9)).astype(np.float32)
img = Tensor(img_np).realize()

def lin_w(n_in, n_out, align):  # (n_out, n_in) interpolation matrix, torch's linear semantics
  m = np.zeros((n_out, n_in))
  for o in range(n_out):
    s = (o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0) if align else max((o + 0.5) * n_in / n_out - 0.5, 0.0)
    i0 = min(int(np.floor(s)), n_in - 1); i1 = min(i0 + 1, n_in - 1); w = s - i0
    m[o, i0] += 1 - w; m[o, i1] += w
  return m
def near_idx(n_in, n_out, exact): return np.minimum(np.floor((np.arange(n_out) + (0.5 if exact else 0)) * n_in / n_out).astype(int), n_in - 1)
def interp_np(x, size, mode, align=False):
  for ax, n in zip(range(x.ndim - len(size), x.ndim), size):
    if mode == "linear": x = np.moveaxis(np.tensordot(x, lin_w(x.shape[ax], n, align), axes=([ax], [1])), -1, ax)
    else: x = np.take(x, near_idx(x.shape[ax], n, mode == "nearest-exact"), axis=ax)
  return x
for size in [(12, 5), (5, 13), (1, 4), (7, 9), (14, 18)]:
  for align in (False, True):
    if align and size[0] == 1 and peer(): print("tinygrad 0.14: align_corners=True to a size of 1 divides by 0 (nan; torch: the first row), skipped"); continue
    chk(f"bilinear {size} align={align}", img.interpolate(size, mode="linear", align_corners=align), interp_np(img_np, size, "linear", align), 1e-5)
  for mode in ("nearest", "nearest-exact"):
    chk(f"{mode} {size}", img.interpolate(size, mode=mode), interp_np(img_np, size, mode), exact=True)
sig = img_np[:, :, 3]  # (2, 3, 9): 1-d
chk("linear 1-d 9->20", Tensor(sig).interpolate((20,)), interp_np(sig, (20,), "linear"), 1e-5)
chk("linear 1-d 9->4 align", Tensor(sig).interpolate((4,), align_corners=True), interp_np(sig, (4,), "linear", True), 1e-5)
vol = rng.random((1, 2, 3, 4, 5)).astype(np.float32)
chk("trilinear 3-d", Tensor(vol).interpolate((5, 3, 7)), interp_np(vol, (5, 3, 7), "linear"), 1e-5)
chk("interpolate of a uint8 image (nearest)", Tensor((img_np * 255).astype(np.uint8)).interpolate((10, 4), mode="nearest"),
    interp_np((img_np * 255).astype(np.uint8), (10, 4), "nearest"), exact=True)

# pooling on 7x9
def pool_np(x, k, s, p, op, ceil=False, include_pad=True):
  H, W = x.shape[-2:]
  def osz(n, kk, ss, pp): return (-(-(n + 2 * pp - kk) // ss) if ceil else (n + 2 * pp - kk) // ss) + 1
  oh, ow = osz(H, k[0], s[0], p[0]), osz(W, k[1], s[1], p[1])
  if ceil: oh, ow = oh - ((oh - 1) * s[0] >= H + p[0]), ow - ((ow - 1) * s[1] >= W + p[1])
  out = np.zeros(x.shape[:-2] + (oh, ow), np.float64)
  for i in range(oh):
    for j in range(ow):
      h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
      hs, ws = slice(max(h0, 0), min(h0 + k[0], H)), slice(max(w0, 0), min(w0 + k[1], W))
      win = x[..., hs, ws]
      if op == "max": out[..., i, j] = win.max((-2, -1))
      else:
        n = (min(h0 + k[0], H + p[0]) - h0) * (min(w0 + k[1], W + p[1]) - w0) if include_pad else win.shape[-2] * win.shape[-1]
        out[..., i, j] = win.sum((-2, -1)) / n
  return out
for k, s, p, ceil in [((3, 3), (2, 2), (1, 1), False), ((3, 3), (2, 2), (1, 1), True), ((2, 3), (2, 2), (0, 1), True), ((3, 2), (3, 2), (0, 0), True)]:
  chk(f"max_pool2d k={k} s={s} p={p} ceil={ceil}", img.max_pool2d(k, s, padding=p, ceil_mode=ceil), pool_np(img_np, k, s, p, "max", ceil), exact=True)
  for inc in (True, False):
    chk(f"avg_pool2d k={k} s={s} p={p} ceil={ceil} include_pad={inc}", img.avg_pool2d(k, s, padding=p, ceil_mode=ceil, count_include_pad=inc),
        pool_np(img_np, k, s, p, "avg", ceil, inc), 1e-5)

# padding modes, asymmetric (left, right, top, bottom) and negative (a crop)
for mode, npmode in [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap"), ("constant", "constant")]:
  chk(f"pad {mode} (2, 1, 3, 0)", img.pad((2, 1, 3, 0), mode=mode), np.pad(img_np, ((0, 0), (0, 0), (3, 0), (2, 1)), mode=npmode), exact=True)
chk("pad reflect (4, 4) on width 9 twice", img.pad((4, 4, 0, 0), mode="reflect").pad((3, 0, 0, 0), mode="reflect"),
    np.pad(np.pad(img_np, ((0, 0),) * 3 + ((4, 4),), mode="reflect"), ((0, 0),) * 3 + ((3, 0),), mode="reflect"), exact=True)
chk("pad constant negative (crop)", img.pad((-1, 2, 1, -2), value=-1.0), np.pad(img_np[..., :-2, 1:], ((0, 0), (0, 0), (1, 0), (0, 2)), constant_values=-1), exact=True)

# a bilinear grid sample by gathers: rotate each image by an angle about its centre, zeros outside
def grid_sample(x, gx, gy):  # x (N, C, H, W); gx, gy (N, Ho, Wo) pixel coordinates
  N, C, H, W = x.shape
  x0, y0 = gx.floor(), gy.floor()
  out = 0
  for dx in (0, 1):
    for dy in (0, 1):
      xi, yi = x0 + dx, y0 + dy
      w = (1 - (gx - xi).abs()) * (1 - (gy - yi).abs())
      inside = (xi >= 0) & (xi <= W - 1) & (yi >= 0) & (yi <= H - 1)
      idx = (yi.clip(0, H - 1) * W + xi.clip(0, W - 1)).cast(dtypes.int32).reshape(N, 1, -1).expand(N, C, -1)
      v = x.reshape(N, C, H * W).gather(2, idx).reshape(N, C, *gx.shape[1:])
      out = out + (inside * w).unsqueeze(1) * v
  return out
def grid_sample_np(x, gx, gy):
  N, C, H, W = x.shape; out = np.zeros(x.shape[:2] + gx.shape[1:])
  for n in range(N):
    for dx in (0, 1):
      for dy in (0, 1):
        xi, yi = np.floor(gx[n]) + dx, np.floor(gy[n]) + dy
        w = (1 - np.abs(gx[n] - xi)) * (1 - np.abs(gy[n] - yi)) * ((xi >= 0) & (xi <= W - 1) & (yi >= 0) & (yi <= H - 1))
        out[n] += w * x[n][:, np.clip(yi, 0, H - 1).astype(int), np.clip(xi, 0, W - 1).astype(int)]
  return out
ang = np.array([0.3, -1.1], np.float32)
yy, xx = np.meshgrid(np.arange(7, dtype=np.float32) - 3, np.arange(9, dtype=np.float32) - 4, indexing="ij")
c, s = np.cos(ang)[:, None, None], np.sin(ang)[:, None, None]
gx_np, gy_np = (c * xx - s * yy + 4).astype(np.float32), (s * xx + c * yy + 3).astype(np.float32)
rot = grid_sample(img, Tensor(gx_np), Tensor(gy_np))
chk("grid sample rotation", rot, grid_sample_np(img_np, gx_np, gy_np), 1e-5)
chk("grid sample identity", grid_sample(img, Tensor(xx + 4).expand(2, 7, 9), Tensor(yy + 3).expand(2, 7, 9)), img_np, 1e-6)

# a separable Gaussian blur (depthwise conv2d, reflect padding) and Sobel edges on the grey image
g1 = np.exp(-0.5 * (np.arange(5) - 2) ** 2 / 1.2 ** 2); g1 = (g1 / g1.sum()).astype(np.float32)
def blur(x):
  C = x.shape[1]
  x = x.pad((2, 2, 2, 2), mode="reflect")
  x = x.conv2d(Tensor(g1).reshape(1, 1, 1, 5).expand(C, 1, 1, 5).contiguous(), groups=C)
  return x.conv2d(Tensor(g1).reshape(1, 1, 5, 1).expand(C, 1, 5, 1).contiguous(), groups=C)
def blur_np(x):
  x = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)), mode="reflect").astype(np.float64)
  x = sum(g1[i] * x[..., :, i:i + x.shape[-1] - 4] for i in range(5))
  return sum(g1[i] * x[..., i:i + x.shape[-2] - 4, :] for i in range(5))
chk("gaussian blur", blur(img), blur_np(img_np), 1e-5)
grey_w = np.array([0.299, 0.587, 0.114], np.float32)
grey = (img * Tensor(grey_w).reshape(1, 3, 1, 1)).sum(1, keepdim=True); grey_np = (img_np * grey_w.reshape(1, 3, 1, 1)).sum(1, keepdims=True)
sob = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], np.float32)
ex = grey.pad((1, 1, 1, 1), mode="replicate").conv2d(Tensor(np.stack([sob, sob.T])[:, None]))
gp = np.pad(grey_np, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="edge")
ex_np = np.stack([sum(k[i, j] * gp[:, 0, i:i + 7, j:j + 9] for i in range(3) for j in range(3)) for k in (sob, sob.T)], 1)
chk("sobel", ex, ex_np, 1e-5)
chk("edge magnitude", (ex ** 2).sum(1).sqrt(), np.sqrt((ex_np ** 2).sum(1)), 1e-5)

# a uint8 pipeline: resize (bilinear) to 12x15, center crop 8x8, normalize per channel, and back to uint8 with rounding
u8_np = (rng.random((4, 3, 10, 11)) * 256).astype(np.uint8)
mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
def pipeline(u8):
  x = u8.cast(dtypes.float32).interpolate((12, 15), mode="linear") / 255
  x = x[:, :, 2:10, 3:11]
  norm = (x - Tensor(mean).reshape(1, 3, 1, 1)) / Tensor(std).reshape(1, 3, 1, 1)
  back = (x * 255).round().clip(0, 255).cast(dtypes.uint8)
  return norm, back
def pipeline_np(u8):
  x = interp_np(u8.astype(np.float64), (12, 15), "linear") / 255
  x = x[:, :, 2:10, 3:11]
  return (x - mean.reshape(1, 3, 1, 1)) / std.reshape(1, 3, 1, 1), np.clip(np.round(x * 255), 0, 255).astype(np.uint8)
n_t, b_t = pipeline(Tensor(u8_np)); n_np, b_np = pipeline_np(u8_np)
chk("pipeline normalized", n_t, n_np, 1e-4)
chk("pipeline uint8 back (off by one at most)", (b_t.cast(dtypes.int32) - Tensor(b_np.astype(np.int32))).abs().max(), np.int32(0), tol=1.01)

# a Laplacian pyramid: blur + 2x average down, bilinear up, residuals; the reconstruction is exact
def pyramid(x, levels=2):
  res = []
  for _ in range(levels):
    down = blur(x).avg_pool2d(2, ceil_mode=True, count_include_pad=False) if x.shape[-1] % 2 else blur(x).avg_pool2d(2)
    up = down.interpolate(tuple(x.shape[-2:]), mode="linear")
    res.append(x - up); x = down
  return res, x
big = Tensor(rng.random((1, 3, 16, 20)).astype(np.float32))
res, low = pyramid(big)
rec = low
for r in reversed(res): rec = rec.interpolate(tuple(r.shape[-2:]), mode="linear") + r
chk("laplacian pyramid reconstruction", rec, big.numpy(), 1e-5)
chk("pyramid shapes", [tuple(r.shape) for r in res] + [tuple(low.shape)], [(1, 3, 16, 20), (1, 3, 8, 10), (1, 3, 4, 5)], exact=True)

@TinyJit
def augment(u8, gx, gy):
  norm, _ = pipeline(u8)
  return grid_sample(blur(norm), gx, gy).max_pool2d((3, 3), 2, padding=1).realize()
gxs, gys = Tensor(np.repeat(gx_np[:1], 4, 0)).realize(), Tensor(np.repeat(gy_np[:1], 4, 0)).realize()
ts, outs = [], []
for i in range(3):
  u = Tensor(np.roll(u8_np, i, 0)).realize()
  st = time.perf_counter(); outs.append(augment(u, gxs[:, :8, :8].contiguous().realize(), gys[:, :8, :8].contiguous().realize()).numpy()); ts.append(time.perf_counter() - st)
ref = pool_np(grid_sample_np(blur_np(pipeline_np(np.roll(u8_np, 2, 0))[0]), gx_np[:1, :8, :8].repeat(4, 0), gy_np[:1, :8, :8].repeat(4, 0)), (3, 3), (2, 2), (1, 1), "max")
chk("jitted augment", outs[2], ref, 1e-4)
finish()
c = float(outs[2].sum()) + float(rot.sum().item()) + float(ex.abs().sum().item()) + float(n_t.abs().sum().item())
report("imageops", ts[0], ts[1] + ts[2], augment, (Tensor(u8_np), gxs[:, :8, :8].contiguous().realize(), gys[:, :8, :8].contiguous().realize()), c, chk=lambda r: r.sum().item())
