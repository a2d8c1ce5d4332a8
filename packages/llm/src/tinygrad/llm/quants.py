"""Dequantization of GGML block formats as Tensor ops on the raw bytes (uint8 tensors): shifts, masks, casts and bitcasts.

Each function takes the blocks as a `(n_blocks, type_size)` uint8 Tensor and returns `(n_blocks, block_size)` float32 values.
Nothing runs here: the result is a lazy expression, so when a matmul consumes it the scheduler fuses the dequantization into
the matmul's kernel and the weights stay quantized in memory.

Block layouts (after ggml's `ggml-common.h`; d, m, dmin are float16 scales):
  Q4_0  d | qs[16]                      x = (nibble - 8) * d            elements 0..15 low nibbles, 16..31 high
  Q4_1  d m | qs[16]                    x = nibble * d + m
  Q5_0  d | qh u32 | qs[16]             x = (nibble | bit(qh, i) << 4) - 16) * d
  Q5_1  d m | qh u32 | qs[16]           x = (nibble | bit(qh, i) << 4) * d + m
  Q8_0  d | qs int8[32]                 x = q * d
  Q4_K  d dmin | scales[12] | qs[128]   8 sub-blocks of 32 with 6-bit scale and min: x = q * d*sc - dmin*mn
  Q5_K  d dmin | scales[12] | qh[32] | qs[128]
  Q6_K  ql[128] | qh[64] | scales int8[16] | d   16 sub-blocks of 16: x = (q6 - 32) * d * sc
"""
from __future__ import annotations

from collections.abc import Callable

from tinygrad import Tensor, dtypes

# ---- small helpers built from existing Tensor ops (candidates for core)

def _cat(tensors: list[Tensor], dim: int = -1) -> Tensor:
  """Concatenate along `dim` by padding each piece to the full size and adding (fuses into one kernel)."""
  dim = dim % tensors[0].ndim
  total = sum(t.shape[dim] for t in tensors)
  out, at = None, 0
  for t in tensors:
    pads = [(0, 0)] * t.ndim
    pads[dim] = (at, total - at - t.shape[dim])
    piece = t.pad(pads)
    out = piece if out is None else out + piece
    at += t.shape[dim]
  assert out is not None
  return out


def _bytes_to(b: Tensor, dtype) -> Tensor:
  """Little-endian bytes (..., itemsize) uint8 -> (...) of a 2- or 4-byte dtype, by shifts, ors and a same-size bitcast."""
  n = b.shape[-1]
  wide = {2: dtypes.uint16, 4: dtypes.uint32}[n]
  acc = None
  for i in range(n):
    part = b[..., i].cast(wide)
    if i: part = part << (8 * i)
    acc = part if acc is None else acc | part
  assert acc is not None
  return acc if dtype == wide else acc.bitcast(dtype)


def _f16(b: Tensor) -> Tensor:
  """(..., 2) uint8 -> (...) float32 through float16."""
  return _bytes_to(b, dtypes.float16).cast(dtypes.float32)


def _shifts(step: int, n: int, shape: tuple[int, ...], device: str) -> Tensor:
  """Shift amounts 0, step, ..., (n-1)*step as uint8, reshaped for broadcasting. Computed from the loop index (an arange), not
  loaded from a buffer: the kernel then knows each shift is below 8, so it shifts without guarding against a too-wide shift
  (a Q4_1 matrix-vector product on the CPU: 147 -> 117 us)."""
  return (Tensor.arange(n, dtype=dtypes.int32, device=device) * step).cast(dtypes.uint8).reshape(shape)


def _arange_u8(n: int, device: str) -> Tensor: return Tensor.arange(n, dtype=dtypes.int32, device=device).cast(dtypes.uint8)


# ---- the formats

def dq_f32(blocks: Tensor) -> Tensor: return _bytes_to(blocks.reshape(-1, 4), dtypes.float32).reshape(-1, 1)
def dq_f16(blocks: Tensor) -> Tensor: return _f16(blocks.reshape(-1, 2)).reshape(-1, 1)


def dq_bf16(blocks: Tensor) -> Tensor:
  b = blocks.reshape(-1, 2)
  return ((b[:, 1].cast(dtypes.uint32) << 24) | (b[:, 0].cast(dtypes.uint32) << 16)).bitcast(dtypes.float32).reshape(-1, 1)


def _nibbles(qs: Tensor) -> Tensor:
  """(n, 16) packed bytes -> (n, 32): the 16 low nibbles, then the 16 high nibbles."""
  n = qs.shape[0]
  return (qs.reshape(n, 1, 16).expand(n, 2, 16) >> _shifts(4, 2, (1, 2, 1), qs.device)).reshape(n, 32) & 0xF


def _qh_bits(qh: Tensor) -> Tensor:
  """(n, 4) bytes of a little-endian u32 -> (n, 32) its bits, bit i at element i."""
  n = qh.shape[0]
  return (qh.reshape(n, 4, 1).expand(n, 4, 8) >> _arange_u8(8, qh.device).reshape(1, 1, 8)).reshape(n, 32) & 1


def dq_q8_0(blocks: Tensor) -> Tensor:
  d = _f16(blocks[:, 0:2]).unsqueeze(1)
  return blocks[:, 2:34].bitcast(dtypes.int8).cast(dtypes.float32) * d


def dq_q4_0(blocks: Tensor) -> Tensor:
  d = _f16(blocks[:, 0:2]).unsqueeze(1)
  return (_nibbles(blocks[:, 2:18]).cast(dtypes.float32) - 8) * d


def dq_q4_1(blocks: Tensor) -> Tensor:
  d, m = _f16(blocks[:, 0:2]).unsqueeze(1), _f16(blocks[:, 2:4]).unsqueeze(1)
  return _nibbles(blocks[:, 4:20]).cast(dtypes.float32) * d + m


def dq_q5_0(blocks: Tensor) -> Tensor:
  d = _f16(blocks[:, 0:2]).unsqueeze(1)
  q = _nibbles(blocks[:, 6:22]) | (_qh_bits(blocks[:, 2:6]) << 4)
  return (q.cast(dtypes.float32) - 16) * d


def dq_q5_1(blocks: Tensor) -> Tensor:
  d, m = _f16(blocks[:, 0:2]).unsqueeze(1), _f16(blocks[:, 2:4]).unsqueeze(1)
  q = _nibbles(blocks[:, 8:24]) | (_qh_bits(blocks[:, 4:8]) << 4)
  return q.cast(dtypes.float32) * d + m


def _k_scales(s: Tensor) -> tuple[Tensor, Tensor]:
  """The 12 scale bytes of Q4_K/Q5_K -> (n, 8) 6-bit scales and (n, 8) 6-bit mins."""
  a, b, c = s[:, 0:4], s[:, 4:8], s[:, 8:12]
  sc = _cat([a & 63, (c & 0xF) | ((a >> 6) << 4)], 1)
  mn = _cat([b & 63, (c >> 4) | ((b >> 6) << 4)], 1)
  return sc.cast(dtypes.float32), mn.cast(dtypes.float32)


def _k_nibbles(qs_bytes: Tensor) -> Tensor:
  """(n, 128) bytes -> (n, 4, 2, 32): 4 chunks of 64 elements, 32 low nibbles (sub-block 2j) then 32 high nibbles (2j+1)."""
  n = qs_bytes.shape[0]
  qs = qs_bytes.reshape(n, 4, 1, 32).expand(n, 4, 2, 32)
  return (qs >> _shifts(4, 2, (1, 1, 2, 1), qs_bytes.device)) & 0xF


def _k_scale_min(blocks: Tensor, q: Tensor) -> Tensor:
  """Q4_K/Q5_K: (n, 256) float32 = q * d * scale - dmin * min per 32-element sub-block; header d, dmin, 12 bytes of scales."""
  n = blocks.shape[0]
  d, dmin = _f16(blocks[:, 0:2]).reshape(n, 1, 1), _f16(blocks[:, 2:4]).reshape(n, 1, 1)
  sc, mn = _k_scales(blocks[:, 4:16])
  return (q.reshape(n, 8, 32).cast(dtypes.float32) * (d * sc.reshape(n, 8, 1)) - dmin * mn.reshape(n, 8, 1)).reshape(n, 256)


def dq_q4_k(blocks: Tensor) -> Tensor: return _k_scale_min(blocks, _k_nibbles(blocks[:, 16:144]))


def dq_q5_k(blocks: Tensor) -> Tensor:
  n = blocks.shape[0]
  low = _k_nibbles(blocks[:, 48:176])
  # the fifth bit of element l of sub-block k is bit k of qh[l]
  qh = blocks[:, 16:48].reshape(n, 1, 1, 32).expand(n, 4, 2, 32)
  high = (qh >> _arange_u8(8, blocks.device).reshape(1, 4, 2, 1)) & 1
  return _k_scale_min(blocks, low | (high << 4))



def dq_q6_k(blocks: Tensor) -> Tensor:
  n = blocks.shape[0]
  dev = blocks.device
  # element (half h, quarter k, l) of 2x4x32: low 4 bits from ql[64h + 32(k&1) + l] >> 4(k>>1), high 2 bits from qh[32h + l] >> 2k
  ql = blocks[:, 0:128].reshape(n, 2, 1, 2, 32).expand(n, 2, 2, 2, 32)
  low = ((ql >> _shifts(4, 2, (1, 1, 2, 1, 1), dev)) & 0xF).reshape(n, 2, 4, 32)
  qh = blocks[:, 128:192].reshape(n, 2, 1, 32).expand(n, 2, 4, 32)
  high = (qh >> _shifts(2, 4, (1, 1, 4, 1), dev)) & 3
  q = (low | (high << 4)).cast(dtypes.float32) - 32
  # scale of element (h, k, l) is scales[8h + 2k + l // 16]
  sc = blocks[:, 192:208].bitcast(dtypes.int8).cast(dtypes.float32).reshape(n, 2, 4, 2, 1).expand(n, 2, 4, 2, 16).reshape(n, 2, 4, 32)
  d = _f16(blocks[:, 208:210]).reshape(n, 1, 1, 1)
  return (q * (sc * d)).reshape(n, 256)


# ---- the same formats as (q, d, m): w = q * d + m per block (m None: 0), q the block's integers (n, 32) as stored (uint8 nibbles,
# int8), d and m float32 (n, 1). A matrix-vector product then scales each block's dot product sum(q * x) once (llm's block_dot)
# instead of every weight

def parts_q8_0(blocks: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
  return blocks[:, 2:34].bitcast(dtypes.int8), _f16(blocks[:, 0:2]).unsqueeze(1), None


def parts_q4_0(blocks: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
  d = _f16(blocks[:, 0:2]).unsqueeze(1)
  return _nibbles(blocks[:, 2:18]), d, d * -8  # (q - 8) * d = q * d - 8 * d


def parts_q4_1(blocks: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
  return _nibbles(blocks[:, 4:20]), _f16(blocks[:, 0:2]).unsqueeze(1), _f16(blocks[:, 2:4]).unsqueeze(1)


BLOCK_PARTS: dict[str, Callable[[Tensor], tuple[Tensor, Tensor, Tensor | None]]] = {"Q8_0": parts_q8_0, "Q4_0": parts_q4_0, "Q4_1": parts_q4_1}


DEQUANTIZERS: dict[str, Callable[[Tensor], Tensor]] = {
  "F32": dq_f32, "F16": dq_f16, "BF16": dq_bf16, "Q8_0": dq_q8_0, "Q4_0": dq_q4_0, "Q4_1": dq_q4_1, "Q5_0": dq_q5_0, "Q5_1": dq_q5_1,
  "Q4_K": dq_q4_k, "Q5_K": dq_q5_k, "Q6_K": dq_q6_k,
}
# (elements per block, bytes per block)
BLOCK_SIZES: dict[str, tuple[int, int]] = {
  "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24),
  "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210),
}


# float formats a weight is kept in natively: read from the file as that dtype (no kernel at load), then the matmuls read plain
# halves/floats (vector loads on a GPU) instead of reassembling every element from its bytes
NATIVE_DTYPES = {"F16": dtypes.float16, "F32": dtypes.float32}


class UnsupportedQuantization(ValueError):
  pass


def check_size(raw: Tensor, type_name: str, shape: tuple[int, ...]) -> None:
  """Raises unless `raw` (1-D uint8) holds exactly a `type_name` tensor of `shape`."""
  if type_name not in DEQUANTIZERS:
    raise UnsupportedQuantization(f"ggml type {type_name} is not supported (supported: {', '.join(DEQUANTIZERS)})")
  block_size, type_size = BLOCK_SIZES[type_name]
  numel = 1
  for s in shape: numel *= s
  if numel % block_size or raw.shape[0] != numel // block_size * type_size:
    raise ValueError(f"{type_name} data of {raw.shape[0]} bytes doesn't hold a tensor of shape {shape}")


def dequantize(raw: Tensor, type_name: str, shape: tuple[int, ...]) -> Tensor:
  """Raw bytes (1-D uint8 Tensor) of a tensor stored as `type_name` -> float32 Tensor of `shape` (lazy)."""
  check_size(raw, type_name, shape)
  return DEQUANTIZERS[type_name](raw.reshape(-1, BLOCK_SIZES[type_name][1])).reshape(shape)
