"""Reliability (issue 20): files are written only when asked, index math doesn't overflow, shifts and literal values are
defined like torch's, empty reductions and bad shapes raise."""
import math

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.frontend.disk import disk_view

# ---- R1: DISK tensors never write a file unless assigned to

KNOWN = bytes(range(256)) * 2


@pytest.fixture
def known_file(tmp_path):
  p = tmp_path / "known.bin"
  p.write_bytes(KNOWN)
  return p


def test_disk_creation_and_reads_leave_file_unchanged(known_file):
  dev = f"DISK:{known_file}"
  t = Tensor.empty(len(KNOWN), dtype=dtypes.uint8, device=dev)
  data = Tensor([1, 2, 3], dtype=dtypes.uint8, device=dev)  # not realized: nothing may be written
  Tensor(np.arange(8, dtype=np.int32), device=dev)
  Tensor(b"\xff" * 16, device=dev)
  Tensor.zeros(16, dtype=dtypes.uint8, device=dev)
  Tensor.ones(4, 4, dtype=dtypes.uint8, device=dev)
  assert t.to(None).tolist() == list(KNOWN)
  assert t[4:8].to(None).tolist() == [4, 5, 6, 7]  # a slice is a byte range of the file, read directly
  assert t.reshape(32, 16)[3].tolist() == list(range(48, 64))
  assert t.reshape(32, 16)[2:4].numpy().tobytes() == KNOWN[32:64]
  assert disk_view(t, 256, dtypes.uint32, (2,)).tolist() == np.frombuffer(KNOWN[256:264], np.uint32).tolist()
  del data
  assert known_file.read_bytes() == KNOWN


def test_disk_data_tensor_writes_when_realized(tmp_path):
  p = tmp_path / "new.bin"
  t = Tensor([1, 2, 3], dtype=dtypes.uint8, device=f"DISK:{p}")
  assert not p.exists()
  assert t.tolist() == [1, 2, 3]
  assert p.read_bytes() == b"\x01\x02\x03"


@pytest.mark.parametrize("view,start", [(lambda t: t[4:8], 4), (lambda t: t.reshape(128, 4)[100], 400),
                                        (lambda t: disk_view(t, 300, dtypes.uint8, (4,)), 300)])
def test_disk_assign_writes_exactly_its_range(known_file, view, start):
  t = Tensor.empty(len(KNOWN), dtype=dtypes.uint8, device=f"DISK:{known_file}")
  view(t).assign(Tensor([9, 8, 7, 6], dtype=dtypes.uint8)).realize()
  want = bytearray(KNOWN)
  want[start:start + 4] = b"\x09\x08\x07\x06"
  assert known_file.read_bytes() == bytes(want)
  assert view(t).tolist() == [9, 8, 7, 6]


def test_disk_assign_typed_and_whole(known_file):
  t = Tensor.empty(len(KNOWN) // 4, dtype=dtypes.int32, device=f"DISK:{known_file}")
  t[1:3].assign(Tensor([-1, 5], dtype=dtypes.int32))
  want = bytearray(KNOWN)
  want[4:12] = np.array([-1, 5], np.int32).tobytes()
  assert known_file.read_bytes() == bytes(want)
  t.assign(Tensor.arange(len(KNOWN) // 4, dtype=dtypes.int32))
  assert known_file.read_bytes() == np.arange(len(KNOWN) // 4, dtype=np.int32).tobytes()


def test_disk_assign_to_scattered_view_raises(known_file):
  t = Tensor.empty(16, 32, dtype=dtypes.uint8, device=f"DISK:{known_file}")
  with pytest.raises(ValueError, match="contiguous"): t[:, 0:4].assign(Tensor.zeros(16, 4, dtype=dtypes.uint8))
  assert known_file.read_bytes() == KNOWN


# ---- R3: shifts by any amount are defined as torch defines them (2.13: computed there, the values below)

def test_shift_past_width_by_constant():
  a = Tensor([1, 2, 3, 4], dtype=dtypes.uint32)
  assert (a << 32).tolist() == [0, 0, 0, 0]
  assert (a << 31).tolist() == [2147483648, 0, 2147483648, 0]
  assert (a >> 40).tolist() == [0, 0, 0, 0]
  assert (Tensor([5, -7], dtype=dtypes.int64) >> 64).tolist() == [0, -1]


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64])
def test_shift_by_tensor_signed(dt):
  bits = dt.itemsize * 8
  x = Tensor([1, -2, 3, -100, 5, -6], dtype=dt)
  s = Tensor([bits - 1, bits, bits + 1, -1, min(127, 4 * bits), -bits], dtype=dt)
  assert (x << s).tolist() == [-(1 << (bits - 1)), 0, 0, 0, 0, 0]
  assert (x >> s).tolist() == [0, -1, 0, -1, 0, -1]


@pytest.mark.parametrize("dt", [dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64])
def test_shift_by_tensor_unsigned(dt):
  bits = dt.itemsize * 8
  x = Tensor([1, 2, 3, 200], dtype=dt)
  s = Tensor([bits - 1, bits, 255, 1], dtype=dt)
  assert (x << s).tolist() == [1 << (bits - 1), 0, 0, (200 << 1) & ((1 << bits) - 1)]
  assert (x >> s).tolist() == [0, 0, 0, 100]


@pytest.mark.compile_only
def test_shift_in_range_stays_plain():
  """A shift by an amount known to be in range compiles to the bare shift (no select); others get one."""
  from tinygrad.codegen.program import lower_kernel
  from tinygrad.device.registry import Device
  from tinygrad.uop.ops import Ops
  def lowered(t):
    (si,) = t.schedule()
    return lower_kernel(si.ast, Device.renderer(Device.DEFAULT))
  x = Tensor.empty(16, dtype=dtypes.uint32)
  plain = lowered(x << 3)
  assert not any(u.op is Ops.WHERE for u in plain) and any(u.op is Ops.SHL for u in plain)
  guarded = lowered(x << Tensor.empty(16, dtype=dtypes.uint32))
  assert any(u.op is Ops.WHERE for u in guarded)


# ---- R4: Python ints get a dtype that holds them; an explicit dtype that can't is an error (torch's message)

@pytest.mark.parametrize("v,dt", [(2**31, dtypes.int64), (2**40, dtypes.int64), (-2**31 - 1, dtypes.int64), (2**31 - 1, dtypes.int32),
                                  (2**63 - 1, dtypes.int64), (2**63, dtypes.uint64), (2**64 - 1, dtypes.uint64)])
def test_int_literal_dtype_holds_value(v, dt):
  assert Tensor([v]).dtype == dt and Tensor(v).dtype == dt and Tensor.full((2,), v).dtype == dt
  assert Tensor([v]).tolist() == [v]
  assert Tensor(v).item() == v
  assert Tensor([1, v]).tolist() == [1, v]


def test_int_literal_too_big_raises():
  with pytest.raises(OverflowError): Tensor([2**64])
  with pytest.raises(OverflowError): Tensor([-1, 2**63])


@pytest.mark.parametrize("v,dt", [(2**31, dtypes.int32), (300, dtypes.uint8), (200, dtypes.int8), (1e10, dtypes.int32), (-2**15 - 1, dtypes.int16)])
def test_explicit_dtype_overflow_raises(v, dt):
  with pytest.raises(RuntimeError, match="cannot be converted to type .* without overflow"): Tensor([v], dtype=dt)
  with pytest.raises(RuntimeError, match="without overflow"): Tensor.full((2,), v, dtype=dt)


def test_explicit_dtype_in_range_like_torch():
  assert Tensor([-1], dtype=dtypes.uint8).tolist() == [255]  # torch wraps negatives into unsigned types
  assert Tensor([3.7, -3.7], dtype=dtypes.int32).tolist() == [3, -3]
  assert Tensor([2**40], dtype=dtypes.float32).tolist() == [2.0**40]
  assert (Tensor([1, 2], dtype=dtypes.int32) + 2**31).tolist() == [-2147483647, -2147483646]  # a scalar next to a tensor wraps, as in torch


# ---- Python scalars outside an int tensor's range: exact comparisons and clamps, where raises (not a wrapped scalar)

_INT_DTYPES = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64]


def _edge_values(dt) -> list[int]:
  lo, hi = dtypes.min(dt), dtypes.max(dt)
  return sorted({lo, lo + 1, 0, 1, hi - 1, hi})


@pytest.mark.parametrize("dt", _INT_DTYPES, ids=lambda d: d.name)
def test_compare_with_out_of_range_int_scalar_is_exact(dt):
  """`x < 2**40` on int32 compared with the scalar wrapped into int32 (0): now every comparison is the exact one, as in
  numpy 2 (torch wraps the scalar here: that silent wrong answer is not copied, see docs/differences.md)."""
  import operator
  vals = _edge_values(dt)
  t = Tensor(vals, dtype=dt)
  lo, hi = dtypes.min(dt), dtypes.max(dt)
  for s in (lo - 1, hi + 1, hi + 2**8, lo - 2**40, 2**40, -1, 2**70):
    for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
      assert op(t, s).tolist() == [op(v, s) for v in vals], (op.__name__, s)
      assert op(s, t).tolist() == [op(s, v) for v in vals], (op.__name__, "reversed", s)


@pytest.mark.parametrize("dt", _INT_DTYPES, ids=lambda d: d.name)
def test_clamp_bounds_outside_the_dtype_saturate(dt):
  """`int8.clip(-1000, 1000)` clamped to the wrapped bounds (-24 everywhere): a bound beyond the dtype's range now
  saturates to it (the exact answer, as numpy 2's clip; torch raises), and a bound that would make every result
  unrepresentable raises instead of wrapping."""
  vals = _edge_values(dt)
  t = Tensor(vals, dtype=dt)
  lo, hi = dtypes.min(dt), dtypes.max(dt)
  for a, b in ((lo - 1000, hi + 1000), (lo - 2**40, 3), (-5, hi + 1), (1, 2**70), (None, hi + 1), (lo - 1, None)):
    exact = [min(max(v, a) if a is not None else v, b) if b is not None else max(v, a) for v in vals]  # type: ignore[type-var]
    assert t.clip(a, b).tolist() == exact, (a, b)
    assert t.clip(a, b).dtype == dt
  assert t.maximum(lo - 300).tolist() == vals and t.minimum(hi + 300).tolist() == vals
  assert t.maximum(2**70 * -1).tolist() == vals
  for bad in (lambda: t.clip(hi + 1, hi + 5), lambda: t.clip(None, lo - 1), lambda: t.maximum(hi + 1), lambda: t.minimum(lo - 1)):
    with pytest.raises(ValueError, match=f"{dt.name}"): bad()


@pytest.mark.parametrize("dt", _INT_DTYPES, ids=lambda d: d.name)
def test_where_with_out_of_range_scalar_raises_like_torch(dt):
  """`uint8.where(x, 300)` put 44 (300 wrapped) in the result: a scalar outside what the dtype holds raises like torch
  ("value cannot be converted ... without overflow"); in range (and negatives down to -max for unsigned, as in torch) it
  is the value."""
  vals = _edge_values(dt)
  t = Tensor(vals, dtype=dt)
  cond = Tensor([i % 2 == 0 for i in range(len(vals))])
  lo, hi = dtypes.min(dt), dtypes.max(dt)
  assert cond.where(t, hi).tolist() == [v if i % 2 == 0 else hi for i, v in enumerate(vals)]
  assert cond.where(lo, t).tolist() == [lo if i % 2 == 0 else v for i, v in enumerate(vals)]
  if dtypes.is_unsigned(dt): assert cond.where(t, -1).tolist() == [v if i % 2 == 0 else hi for i, v in enumerate(vals)]
  for s in (hi + 1, -hi - 1 if dtypes.is_unsigned(dt) else lo - 1, 2**70):
    with pytest.raises(RuntimeError, match="without overflow"): cond.where(t, s)
    with pytest.raises(RuntimeError, match="without overflow"): cond.where(s, t)
    with pytest.raises(RuntimeError, match="without overflow"): t.where(t, s)


def test_where_of_two_scalars_ignores_the_condition_dtype():
  # int8 condition, two scalars: they were made int8 and raised (torch: int64, the scalars' own dtype)
  c = Tensor([1, 0, -3], dtype=dtypes.int8)
  assert c.where(1000, 2000).tolist() == [1000, 2000, 1000]


# ---- minor: bad shapes, empty max/min, sound folding of comparisons

@pytest.mark.parametrize("make", [lambda: Tensor.empty(-1), lambda: Tensor.empty(2, -3), lambda: Tensor.rand(-1)])
def test_negative_size_raises(make):
  with pytest.raises(RuntimeError, match="negative dimension"): make()


def test_max_min_of_empty_raise():
  with pytest.raises(RuntimeError, match="no identity"): Tensor.zeros(0).max()
  with pytest.raises(RuntimeError, match="no identity"): Tensor.zeros(0).min()
  with pytest.raises(RuntimeError, match="no identity"): Tensor.zeros(3, 0).max(1)
  assert Tensor.zeros(0, 3).max(1).shape == (0,)
  assert Tensor.zeros(0).any().item() is False and Tensor.zeros(0).all().item() is True


def test_compare_fold_respects_wraparound():
  from tinygrad.uop.ops import Ops, UOp
  from tinygrad.uop.rewrite import graph_rewrite
  from tinygrad.uop.symbolic import symbolic
  big = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("q", 0, 2**31 - 1))
  assert graph_rewrite((big + big) < 0, symbolic).op is not Ops.CONST  # 2**30 + 2**30 wraps to -2**31 in int32
  small = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("q", 0, 1000))
  assert graph_rewrite((small + small) < 0, symbolic).arg is False
  assert graph_rewrite((small * 2 + 4) < 9, symbolic) is (small < 3)


# ---- R2: 64-bit index math where a buffer or loop has 2**31 elements or more; int32 elsewhere

BIG = 2**31 + 3


def _programs(dev: str, build):
  from tinygrad import Context, Device
  from tinygrad.codegen.program import get_program
  with Context(DEV=dev):
    try: renderer = Device.renderer(Device.DEFAULT)
    except Exception as e:  # noqa: BLE001  that backend isn't installed here
      pytest.skip(f"{dev}: {e}")
    return [get_program(si.ast, renderer) for si in build().schedule() if si.ast.op.name == "SINK"]


@pytest.mark.compile_only
@pytest.mark.parametrize("dev", ["NULL:CLANG", "NULL:LLVM", "NULL:CUDA:sm_90", "NULL:PTX:sm_80", "PYTHON"])
@pytest.mark.parametrize("build", [lambda: Tensor.empty(BIG, dtype=dtypes.int8) + 1, lambda: Tensor.empty(BIG, dtype=dtypes.int8).sum(dtype=dtypes.int64),
                                   lambda: Tensor.empty(BIG, dtype=dtypes.int8)[-1].contiguous(), lambda: Tensor.ones(2**32 + 3).sum(),
                                   lambda: Tensor.empty(3, 2**30, dtype=dtypes.int8).permute(1, 0).contiguous()])
def test_big_kernels_index_in_int64(dev, build):
  from tinygrad.uop.ops import Ops
  big_programs = 0
  for p in _programs(dev, build):
    loops = [u for u in p.uops if u.op is Ops.RANGE]
    # a big sum is split: the kernels over its partials are small, and keep int32
    dims = [u.src[0].arg for u in loops if u.src[0].op is Ops.CONST] + [u.arg[1] for u in p.uops if u.op is Ops.SPECIAL]  # and thread ids
    dims += [u.arg[2] + 1 for u in p.uops if u.op is Ops.DEFINE_VAR and u.arg[0] == "core_id"]  # and the CPU's threads (as many as cores)
    sizes = [u.dtype.size for u in p.uops if u.op is Ops.DEFINE_GLOBAL] + [math.prod(d for d in dims if isinstance(d, int))]
    if max(sizes) < 2**31: continue
    big_programs += 1
    idxs = [u.src[1] for u in p.uops if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL]
    assert idxs and all(u.dtype == dtypes.int64 for u in idxs), [(u.op, u.dtype) for u in idxs]
    # the big loops count in int64 (a GPU's last step over a block's shared memory may stay int32)
    assert all(u.dtype == dtypes.int64 or 0 < u.src[0].arg < 2**16 for u in loops), [(u.dtype, u.src[0].arg) for u in loops]
    # no loop bound or index constant was cut to 32 bits on the way
    assert not any(u.op is Ops.CONST and u.dtype == dtypes.int32 and u.arg < 0 for u in p.uops)
    assert "-214748" not in p.src
  assert big_programs, "no kernel of this program is big"


@pytest.mark.compile_only
@pytest.mark.parametrize("dev", ["NULL:CLANG", "NULL:LLVM", "NULL:CUDA:sm_90", "NULL:PTX:sm_80"])
def test_normal_kernels_keep_int32_indices(dev):
  from tinygrad.uop.ops import Ops
  for p in _programs(dev, lambda: (Tensor.empty(2**30, dtype=dtypes.int8) + 1).sum() + Tensor.empty(64, 64).sum(1).max()):
    assert not any(u.dtype == dtypes.int64 for u in p.uops if u.op in (Ops.RANGE, Ops.SPECIAL, Ops.INDEX))


@pytest.mark.compile_only
@pytest.mark.parametrize("dev", ["NULL:CUDA:sm_90", "NULL:CUDA:sm_80", "NULL:PTX:sm_80", "PYTHON::sm_80"])
def test_big_tensor_core_matmul_indexes_in_int64(dev):
  """A half matmul on tensor cores whose A has more than 2**31 elements (its last rows start past 2**31): the global loads
  and stores of the tensor-core lowering index in int64 (they were int32 and wrapped). A small one keeps int32."""
  from tinygrad.uop.ops import Ops
  M, K, N = 2**17 + 128, 2**14, 128
  for shape, wide in (((M, K, N), True), ((256, 256, 256), False)):
    progs = _programs(dev, lambda s=shape: Tensor.empty(s[0], s[1], dtype=dtypes.half) @ Tensor.empty(s[1], s[2], dtype=dtypes.half))
    tc = [p for p in progs if any(u.op is Ops.WMMA for u in p.uops)]
    assert len(tc) == 1, "the matmul didn't take the tensor-core path"
    idxs = [u.src[1] for u in tc[0].uops if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL]
    assert idxs and all(u.dtype == (dtypes.int64 if wide else dtypes.int32) for u in idxs), [u.dtype for u in idxs]
    # no row offset was cut to 32 bits on the way (small negative offsets of the tile math are fine)
    if wide: assert "-214748" not in tc[0].src and not any(u.op is Ops.CONST and u.dtype == dtypes.int32 and u.arg < -2**24 for u in tc[0].uops)


def test_big_buffer_runs_correctly(null_device):
  """2**31 + 3 int8s (2 GiB) filled, summed and read at the end, on the CPU (the interpreter would take hours)."""
  from tinygrad import Device
  if null_device or not Device.DEFAULT.startswith("CPU"): pytest.skip("runs 2**31-element kernels: CPU only")
  assert Tensor.ones(BIG, dtype=dtypes.int8).sum(dtype=dtypes.int64).item() == BIG
  t = Tensor.full((BIG,), 1, dtype=dtypes.int8).contiguous().realize()
  assert t[-1].item() == 1 and t[BIG - 3:].tolist() == [1, 1, 1]
  assert (t[BIG - 2:] * 3).tolist() == [3, 3]
  assert t.sum(dtype=dtypes.int64).item() == BIG
  del t


def test_arange_past_int32():
  assert Tensor.arange(2**31 + 5)[-3:].tolist() == [2**31 + 2, 2**31 + 3, 2**31 + 4]
  assert Tensor.arange(2**31 + 5, dtype=dtypes.float64)[2**31 + 1].item() == 2**31 + 1


def test_long_sum_splits_even_when_its_length_doesnt_divide():
  """A sum past 2**24 elements of odd length was one running float32 total (2**32 + 3 ones gave 2**24): now it is split
  into partial sums, the reduced elements padded with zeros (ADD's identity) to whole chunks."""
  from tinygrad import Device
  if Device[Device.DEFAULT].renderer.has_local: pytest.skip("GPU renderers split reductions their own way (strided partials)")
  n = 2**24 + 3
  assert len(Tensor.empty(n).sum().schedule()) == 2  # partials, then their total
  assert len(Tensor.empty(n).max().schedule()) == 1  # MAX has no zero identity: an odd length stays whole


def test_long_float_sums_are_accurate(null_device):
  from tinygrad import Device
  if null_device or not Device.DEFAULT.startswith("CPU"): pytest.skip("sums 2**32 elements: CPU only")
  assert Tensor.ones(2**32 + 3).sum().item() == 4294967296.0  # the example (float32 of 2**32 + 3)
  x = np.random.default_rng(0).random(2**24 + 3, dtype=np.float32)
  assert abs(Tensor(x).sum().item() - x.astype(np.float64).sum()) < 1e-6 * x.size
