"""Image buffers for QCOMCL (IMAGE=1/2, as tinygrad's texture path for Adreno): which buffers of a kernel become images.

A buffer of n floats (or halves), n a multiple of 4, is an image of n/4 RGBA texels, shape (height, width, 4) with
width the largest divisor of n/4 within the device's limit: element i is lane i%4 of texel i//4, at
(x, y) = ((i//4) % width, (i//4) // width). The rewrite (`pm_images`, run by the codegen as the renderer's
extra_matcher) only retypes the buffer's DEFINE_GLOBAL to dtypes.imagef/imageh; the renderer turns each INDEX into it
into that texel coordinate, a float4 load (made by codegen/vectorize.py from 4 consecutive elements) into one
read_imagef, a scalar load into a read_imagef and a lane, and a float4 store into write_imagef.

Which buffers (anything else stays a plain buffer, so no layout gives a wrong result):
  IMAGE=1  the inputs (only read) of kernels with a reduction (convs, matmuls: their weights and activations)
  IMAGE=2  also the inputs of every other kernel, and outputs whose every store is 4 consecutive floats (write_imagef)
A buffer both read and written by one kernel, one used by an async copy, or one that is too big, stays a buffer. Stores
of half are never images (the codegen makes no half vectors here), nor is a scalar store (an image has no
read-modify-write of one lane).
"""
from __future__ import annotations

from tinygrad.device.plugin import IMAGE, ImageDType, Ops, PatternMatcher, PtrDType, UOp, UPat, dtypes

IMAGE_MAX = (16384, 16384)  # texels (width, height): Adreno 6xx/7xx's CL_DEVICE_IMAGE2D_MAX_WIDTH/HEIGHT (a CL device: its own)


def image_level() -> int: return int(IMAGE.value)


def image_shape(size: int, max_wh: tuple[int, int] = IMAGE_MAX) -> tuple[int, int, int] | None:
  """(height, width, 4) for a buffer of `size` elements, or None when it is no whole number of texels or doesn't fit."""
  if size <= 0 or size % 4: return None
  texels = size // 4
  width = next(w for w in range(min(texels, max_wh[0]), 0, -1) if texels % w == 0)
  return (texels // width, width, 4) if texels // width <= max_wh[1] else None


def _access(buf: UOp, users: dict[UOp, list[UOp]]) -> str | None:
  """'r' when the kernel only loads from buf, 'w' when it only stores float4s to it, else None (stays a buffer)."""
  assert isinstance(buf.dtype, PtrDType)  # a DEFINE_GLOBAL (choose_images)
  loads = stores = 0
  for idx in users.get(buf, []):
    if idx.op is not Ops.INDEX or idx.src[0] is not buf: return None
    lanes = idx.dtype.base.count if isinstance(idx.dtype, PtrDType) else 1
    for u in users.get(idx, []):
      if u.op is Ops.LOAD and u.src[0] is idx and u.arg is None and lanes in (1, 4): loads += 1
      elif u.op is Ops.STORE and u.src[0] is idx and u.arg is None and lanes == 4 and buf.dtype.base == dtypes.float32: stores += 1
      else: return None
  if loads and not stores: return "r"
  return "w" if stores and not loads else None


def choose_images(sink: UOp, level: int, max_wh: tuple[int, int] = IMAGE_MAX) -> dict[UOp, ImageDType]:
  """The kernel's buffers that become images at IMAGE=level, with their image dtypes (at most max_wh texels a side)."""
  nodes = sink.toposort()
  users: dict[UOp, list[UOp]] = {}
  for u in nodes:
    for s in u.src: users.setdefault(s, []).append(u)
  reduces = any(u.op is Ops.DEFINE_REG for u in nodes)
  out: dict[UOp, ImageDType] = {}
  for buf in nodes:
    if buf.op is not Ops.DEFINE_GLOBAL or isinstance(buf.dtype, ImageDType) or not isinstance(buf.dtype, PtrDType): continue
    if buf.dtype.base not in (dtypes.float32, dtypes.float16) or (shape := image_shape(buf.dtype.size, max_wh)) is None: continue
    access = _access(buf, users)
    if access == "r" and (reduces or level >= 2) or access == "w" and level >= 2:
      out[buf] = dtypes.imagef(shape) if buf.dtype.base == dtypes.float32 else dtypes.imageh(shape)
  return out


def _to_images(ctx, x: UOp) -> UOp | None:
  if not getattr(ctx, "supports_images", False) or (level := image_level()) < 1: return None
  if not (chosen := choose_images(x, level, getattr(ctx, "image_max", IMAGE_MAX))): return None
  return x.substitute({buf: UOp(Ops.DEFINE_GLOBAL, dt, buf.src, buf.arg) for buf, dt in chosen.items()})


pm_images = PatternMatcher([(UPat(Ops.SINK, name="x"), _to_images)])
