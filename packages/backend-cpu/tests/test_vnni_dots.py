"""Integer dot-product instructions on the CPU (codegen/dot.py; x86 AVX-512 VNNI's vpdpbusd and vpdpwssd, rendered by the LLVM
renderer where its target has them): an int32 sum of products of small ints per block, scaled per block (llm's block_dot with
int8 or int16 x), becomes chained instructions whose lanes are kept through the sum over blocks; the values equal numpy's for
odd shapes, with the instruction and without it (a target without the feature, DOT=0, the C renderer)."""
import numpy as np
import pytest
from tinygrad import Context, Device, Tensor, dtypes
from tinygrad.codegen.program import get_program
from tinygrad.uop.ops import Ops
from tinygrad_backend_cpu.clang import clang_available
from tinygrad_backend_cpu.llvmir import LLVMRenderer, dot_products, host_info

HOST_VNNI = bool(dot_products(host_info().features))  # feature_names lists the off features too
NO_VNNI = "CPU:LLVM:x86_64,-avx512vnni,-avxvnni"


def _int_block_dot(xq: Tensor, q: Tensor, d: Tensor, m: Tensor) -> Tensor:
  """xq (1, kb, b) int, q (n, kb, b) int: the sum over blocks of d * dot(xq, q) in int32, plus m times the block sums of xq.
  Unsigned q are nibbles (& 15, as llm's are): each lane's sum must provably stay below 2^24 (exact in float32)."""
  if q.dtype == dtypes.uint8: q = q & 15
  dots = (xq.cast(dtypes.int32) * q.cast(dtypes.int32)).sum(-1).cast(dtypes.float32)
  return (dots * d + xq.cast(dtypes.float32).sum(-1).contiguous() * m).sum(-1)


def _data(n: int, kb: int, b: int, x_dtype, q_dtype, seed: int = 0):
  rng = np.random.default_rng(seed)
  xi = np.iinfo(x_dtype)
  xq = rng.integers(-xi.max, xi.max + 1, (1, kb, b)).astype(x_dtype)
  q = rng.integers(0, 16, (n, kb, b)).astype(q_dtype) if q_dtype == np.uint8 else rng.integers(-128, 128, (n, kb, b)).astype(q_dtype)
  d, m = rng.standard_normal((n, kb)).astype(np.float32), rng.standard_normal((n, kb)).astype(np.float32)
  ref = ((xq.astype(np.int64) * q).sum(-1) * d.astype(np.float64) + xq.sum(-1) * m.astype(np.float64)).sum(-1)
  return (Tensor(xq), Tensor(q), Tensor(d), Tensor(m)), ref


def _sources(dev: str, t: Tensor) -> list[str]:
  return [get_program(si.ast, Device.renderer(dev)).src for si in t.schedule() if si.ast.op is Ops.SINK]


def test_instructions_follow_the_features():
  wide = dot_products("+avx2,+avx512f,+avx512vl,+avx512vnni", wide=True)
  assert [(d.name, d.lanes, d.group) for d in wide] == [("llvm.x86.avx512.vpdpbusd.512", 16, 4), ("llvm.x86.avx512.vpdpbusd.256", 8, 4),
                                                        ("llvm.x86.avx512.vpdpwssd.512", 16, 2), ("llvm.x86.avx512.vpdpwssd.256", 8, 2)]
  assert [d.lanes for d in dot_products("+avx2,+avx512f,+avx512vl,+avx512vnni")] == [8, 8]  # ymm kernels: 256-bit ones only
  assert dot_products("+avx2,+avx512f,+avx512vl,+avx512vnni,-avx512vnni") == ()
  assert [d.name for d in dot_products("+avx2,+avxvnni")] == ["llvm.x86.avxvnni.vpdpbusd.256", "llvm.x86.avxvnni.vpdpwssd.256"]
  assert dot_products("+avx2,+fma") == ()


@pytest.mark.skipif(not HOST_VNNI, reason="the host has no VNNI")
@pytest.mark.parametrize("x_dtype,q_dtype,insn", [(np.int8, np.uint8, "vpdpbusd"), (np.int16, np.uint8, "vpdpwssd"), (np.int8, np.int8, "vpdpwssd")])
@pytest.mark.parametrize("n,kb,b", [(7, 5, 32), (3, 9, 16), (13, 3, 48), (1, 1, 64)])
def test_dot_products_match_numpy(x_dtype, q_dtype, insn, n, kb, b):
  args, ref = _data(n, kb, b, x_dtype, q_dtype, seed=n * 100 + kb * 10 + b)
  with Context(DEV="CPU:LLVM"):
    srcs = _sources("CPU", _int_block_dot(*args))
    got = _int_block_dot(*args).numpy()
  # 16 or 48 products a block: no multiple of vpdpbusd's 32, so vpdpwssd takes them (any int8 fits an int16)
  want = "vpdpwssd" if b % 32 else insn
  assert any(f"{want}." in s for s in srcs), want
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("dev", [NO_VNNI, "CPU:CLANG"])
def test_without_the_instruction(dev):
  """A target without VNNI, or the C renderer: no dot-product instruction, the same values."""
  if dev == "CPU:CLANG" and clang_available() is not None: pytest.skip(str(clang_available()))
  if not host_info().triple.startswith("x86_64"): pytest.skip("x86 feature names")
  args, ref = _data(7, 5, 32, np.int8, np.uint8)
  with Context(DEV=dev):
    assert not Device.renderer("CPU").dot_products
    assert not any("vpdp" in s for s in _sources("CPU", _int_block_dot(*args)))
    got = _int_block_dot(*args).numpy()
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("features,insn", [("+avx2,+avx512f,+avx512vl,+avx512vnni", "avx512.vpdpbusd"), ("+avx2,+avxvnni,-avx512f", "avxvnni.vpdpbusd")])
def test_rendered_for_a_vnni_target_on_any_host(features, insn):
  """The instruction follows the DEV target, not the host: rendered (not run) for a VNNI target on a host without it too. The
  host's features come first (resolve_cpu_features): on an AVX-512 VNNI host only '-avx512f' leaves AVX-VNNI's form."""
  if not host_info().triple.startswith("x86_64"): pytest.skip("x86 feature names")
  args, _ = _data(7, 5, 32, np.int8, np.uint8)
  with Context(DEV=f"CPU:LLVM:x86_64,{features}"):
    assert Device.renderer("CPU").dot_products
    assert any(insn in s for s in _sources("CPU", _int_block_dot(*args))), insn


@pytest.mark.skipif(not HOST_VNNI, reason="the host has no VNNI")
def test_dot_off_and_lanes_kept():
  """DOT=0 keeps the plain sums; with the instruction each of its lanes gets an outer sum of its own (no horizontal sum per block:
  one extractelement per lane, after the loop)."""
  args, _ = _data(7, 5, 32, np.int8, np.uint8)
  with Context(DEV="CPU:LLVM"):
    r = Device.renderer("CPU")
    assert isinstance(r, LLVMRenderer) and r.dot_products
    (src,) = [s for s in _sources("CPU", _int_block_dot(*args)) if "vpdp" in s]
    with Context(DOT=0): assert not any("vpdp" in s for s in _sources("CPU", _int_block_dot(*args)))
  lanes = r.dot_products[0].lanes if len(src.split("vpdpbusd.512")) > 1 else 8
  assert src.count("extractelement") == lanes and src.count("call <") == 1
