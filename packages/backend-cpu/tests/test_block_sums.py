"""Sums of per-block sums on a CPU (llm's quantized matrix-vector product: each block's dot product scaled once): one kernel with
the inner loop nested in the outer (schedule/kernelize.py _nests), only the inner sum unrolled (heuristics._unroll_each_reduce),
and its lanes kept through the outer sum (codegen/lanes.py); values equal numpy's for odd shapes with both CPU renderers."""
import numpy as np
import pytest
from tinygrad import Context, Tensor, dtypes
from tinygrad.codegen.heuristics import hand_coded_opts
from tinygrad.codegen.lanes import keep_lanes
from tinygrad.codegen.opt import OptOps, apply_opts
from tinygrad.uop.ops import Ops, UOp
from tinygrad_backend_cpu.clang import clang_available


def _block_dot(x: Tensor, q: Tensor, d: Tensor, m: Tensor | None = None) -> Tensor:
  """x (1, kb, b) with q (n, kb, b): sum over blocks of d * dot(x, q) (+ m * the block's sum of x)."""
  out = (x * q).sum(-1) * d
  if m is not None: out = out + x.sum(-1).contiguous() * m
  return out.sum(-1)


def _kernels(t: Tensor) -> list[UOp]: return [si.ast for si in t.schedule() if si.ast.op is Ops.SINK]


def _holds_reduce(r: UOp) -> bool: return any(x.op is Ops.REDUCE for x in r.src[0].toposort())


def _nested(ast: UOp) -> list[UOp]:
  """The REDUCEs that hold another REDUCE."""
  return [r for r in ast.toposort() if r.op is Ops.REDUCE and _holds_reduce(r)]


def _empty(n=64, kb=18, b=32):
  return Tensor.empty(1, kb, b), Tensor.empty(n, kb, b, dtype=dtypes.uint8).cast(dtypes.float32), Tensor.empty(n, kb), Tensor.empty(n, kb)


def test_sum_of_sums_is_one_kernel():
  with Context(DEV="CPU"):
    x, q, d, m = _empty()
    (ast,) = [a for a in _kernels(_block_dot(x, q, d, m)) if _nested(a)]  # and the block sums of x, a kernel of their own
    assert len(_nested(ast)) == 1
    with Context(NESTED_SUMS=0): assert not any(_nested(a) for a in _kernels(_block_dot(x, q, d)))  # the switch: two kernels
    assert not any(_nested(a) for a in _kernels(((x * q).sum(-1) * d).max(-1)))  # a max of sums keeps its buffer
    assert not any(_nested(a) for a in _kernels((x * q).sum(-1).sum(-1)))  # a plain sum of sums: nothing scaled per block
    assert not any(_nested(a) for a in _kernels(((x * q).sum(-1).relu() * d).sum(-1)))  # not linear in the inner sum
    x, q, d, _ = _empty(kb=4, b=512)
    assert not any(_nested(a) for a in _kernels(_block_dot(x, q, d)))  # an inner sum longer than a quantization block


def test_only_the_inner_sum_unrolls():
  with Context(DEV="CPU"):
    x, q, d, _ = _empty(kb=48)  # 48 blocks: the outer loop would unroll by 16 too
    (ast,) = _kernels(_block_dot(x, q, d))
  (outer,) = _nested(ast)
  inner = [r for r in ast.toposort() if r.op is Ops.REDUCE and r is not outer]
  unrolls = [o for o in hand_coded_opts(ast, threads=1) if o.op is OptOps.UNROLL]
  assert [o.axis for o in unrolls] == [inner[0].src[1].arg[0]] and unrolls[0].amount == 16


def test_lanes_get_their_own_outer_sums():
  with Context(DEV="CPU"):
    x, q, d, m = _empty()
    (ast,) = [a for a in _kernels(_block_dot(x, q, d, m)) if _nested(a)]
  ast = apply_opts(ast, hand_coded_opts(ast, threads=1))
  assert len(_nested(ast)) == 1  # unrolled: one outer sum over 16 inner partial sums, added per block
  kept = keep_lanes(ast)
  # one outer sum per lane (each times the block's scale), and one for m times the block sums of x
  assert len(_nested(kept)) == 16 and sum(1 for r in kept.toposort() if r.op is Ops.REDUCE and not _holds_reduce(r)) == 16 + 1
  assert keep_lanes(kept) is kept  # nothing left to distribute


def test_plain_reductions_are_left_alone():
  with Context(DEV="CPU"):
    (ast,) = _kernels(Tensor.empty(64, 576).sum(-1))
  ast = apply_opts(ast, hand_coded_opts(ast, threads=1))
  assert keep_lanes(ast) is ast


@pytest.mark.parametrize("dev", ["CPU:LLVM", "CPU:CLANG"])
@pytest.mark.parametrize("n,kb,b", [(7, 5, 32), (3, 9, 16), (13, 3, 48), (5, 7, 20), (1, 1, 32)])
def test_block_dot_matches_numpy(dev, n, kb, b):
  if dev == "CPU:CLANG" and clang_available() is not None: pytest.skip(str(clang_available()))
  rng = np.random.default_rng(n * 100 + kb * 10 + b)
  x, q = rng.standard_normal((1, kb, b)).astype(np.float32), rng.integers(0, 16, (n, kb, b)).astype(np.uint8)
  d, m = rng.standard_normal((n, kb)).astype(np.float32), rng.standard_normal((n, kb)).astype(np.float32)
  ref = ((x * q).sum(-1) * d + x.sum(-1) * m).sum(-1)
  with Context(DEV=dev):
    got = _block_dot(Tensor(x), Tensor(q).cast(dtypes.float32), Tensor(d), Tensor(m)).numpy()
    # the integer form: int16 x, int32 dot products, a float scale per block
    xi = rng.integers(-32767, 32768, (1, kb, b)).astype(np.int16)
    got_int = ((Tensor(xi).cast(dtypes.int32) * Tensor(q).cast(dtypes.int32)).sum(-1).cast(dtypes.float32) * Tensor(d)).sum(-1).numpy()
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
  ref_int = ((xi.astype(np.int64) * q).sum(-1) * d.astype(np.float64)).sum(-1)
  np.testing.assert_allclose(got_int, ref_int, rtol=1e-5, atol=1e-5 * np.abs(ref_int).max())
