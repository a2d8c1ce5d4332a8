"""codegen/dot.py on kernel ASTs (no backend: a DotProduct spec made here): an int32 sum of products whose factors fit the
instruction's element types becomes chained WMMAs whose lanes codegen/lanes.py keeps through the sum over blocks; sums that
don't fit are left alone."""
from tinygrad import Tensor, dtypes
from tinygrad.codegen.dot import byte_dots
from tinygrad.codegen.heuristics import hand_coded_opts
from tinygrad.codegen.lanes import keep_lanes
from tinygrad.codegen.opt import apply_opts
from tinygrad.helpers import Context
from tinygrad.renderer import DotProduct
from tinygrad.uop.ops import Ops, UOp

BUSD = DotProduct(8, "busd256")
WSSD = DotProduct(8, "wssd256", 2, dtypes.int16, dtypes.int16)


def _ast(x_dtype=dtypes.int8, nibbles=True, kb=5, b=32) -> UOp:
  """The kernel of sum over blocks of d * dot(x, q) + m * (block sums of x): x int, q uint8 nibbles (or whole bytes)."""
  with Context(DEV="PYTHON"):
    x, q = Tensor.empty(1, kb, b, dtype=x_dtype), Tensor.empty(7, kb, b, dtype=dtypes.uint8)
    d, m = Tensor.empty(7, kb), Tensor.empty(7, kb)
    if nibbles: q = q & 15
    dots = (x.cast(dtypes.int32) * q.cast(dtypes.int32)).sum(-1).cast(dtypes.float32)
    out = (dots * d + x.cast(dtypes.float32).sum(-1).contiguous() * m).sum(-1)
    (ast,) = [si.ast for si in out.schedule() if si.ast.op is Ops.SINK and any(n.op is Ops.LOAD and n.dtype == dtypes.uint8 for n in si.ast.toposort())]
  return apply_opts(ast, hand_coded_opts(ast, threads=1))


def _wmmas(ast: UOp) -> list[UOp]: return [n for n in ast.toposort() if n.op is Ops.WMMA]


def test_bytes_become_chained_instructions():
  ast = byte_dots(_ast(kb=5, b=64), (BUSD,))
  (first, second) = sorted(_wmmas(ast), key=lambda w: len(w.toposort()))  # 64 products: two of 32, the second adds to the first
  assert second.src[2] is first and first.src[0].dtype == dtypes.uint8.vec(32) and first.src[1].dtype == dtypes.int8.vec(32)
  assert first.arg[0] == "busd256" and not any(n.op is Ops.REDUCE and n.dtype == dtypes.int32 for n in ast.toposort())
  # the products go in in order, so each lane takes 4 neighbouring elements: x's bytes are loads of consecutive addresses
  idx = [ld.src[0].src[1] for ld in first.src[1].src]
  assert all(ld.op is Ops.LOAD for ld in first.src[1].src)
  assert [(i - idx[0]).simplify().arg for i in idx] == list(range(32))
  kept = keep_lanes(ast)
  outer = [n for n in kept.toposort() if n.op is Ops.REDUCE]
  assert len(outer) == 8 + 1  # one float sum per lane, one for the offsets' term


def test_int16_x_takes_pairs():
  ast = byte_dots(_ast(dtypes.int16), (BUSD, WSSD))
  ws = _wmmas(ast)
  assert len(ws) == 2 and {w.arg[0] for w in ws} == {"wssd256"}  # 32 products, 16 an instruction
  assert all(w.src[0].dtype == dtypes.int16.vec(16) for w in ws)


def test_sums_that_do_not_fit_stay():
  assert byte_dots(_ast(dtypes.int16), (BUSD,)) is not None and not _wmmas(byte_dots(_ast(dtypes.int16), (BUSD,)))  # int16 x: no bytes
  # whole bytes times int16 x: a lane of 4 such products may pass 2^24, not exact in float32
  assert not _wmmas(byte_dots(_ast(dtypes.int16, nibbles=False), (WSSD,)))
  assert not _wmmas(byte_dots(_ast(kb=3, b=16), (BUSD,)))  # 16 products: no multiple of 32
  assert not _wmmas(byte_dots(_ast(kb=2, b=512), (BUSD,)))  # 512: a long sum stays a loop (MAX_PRODUCTS)
  ast = _ast()
  assert byte_dots(ast, ()) is ast
  with Context(DOT=0): assert byte_dots(ast, (BUSD,)) is ast
