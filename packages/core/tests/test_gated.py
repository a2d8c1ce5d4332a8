"""codegen/gated.py: indices and guarded values simplified with what their gate guarantees, each rule on small graphs and
end to end (pads, strided windows, transposed convolutions) against numpy."""
import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.codegen.gated import clauses, gate_bounds, simplify_gate, simplify_given
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops, UOp


def _rng(n: int, i: int) -> UOp: return UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, n),), (i, "loop"))


def _ge(x: UOp, c: int) -> UOp: return (x < c).ne(True)  # the form a pad's lower bound takes


@pytest.mark.compile_only
def test_gate_bounds_reads_both_clause_forms_and_intersects():
  a, b = _rng(8, 0), _rng(4, 1)
  x = a + b - 1
  gate = _ge(x, 0) & (x < 6) & (b < 9)  # b < 9 says nothing b's range doesn't
  assert clauses(gate) == [_ge(x, 0), x < 6, b < 9]
  assert gate_bounds(gate) == {x: (0, 5)}


@pytest.mark.compile_only
def test_index_loses_its_divisions_where_the_gate_holds():
  a, b, r = _rng(2, 0), _rng(8, 1), _rng(16, 2)
  x = a + b - 1  # in [-1, 8]; the gate keeps [0, 7]
  idx = (r * 64 + x * 8) // 1024 * 7 + (r * 64 + x * 8) % 1024
  got = simplify_given(idx, _ge(x, 0) & (x < 8))
  assert got is not None and not any(n.op in (Ops.IDIV, Ops.MOD) for n in got.toposort())
  for av in range(2):
    for bv in range(8):
      for rv in range(16):
        xv = av + bv - 1
        if not 0 <= xv < 8: continue
        want = (rv * 64 + xv * 8) // 1024 * 7 + (rv * 64 + xv * 8) % 1024
        assert got.substitute({a: UOp.const(dtypes.int32, av), b: UOp.const(dtypes.int32, bv), r: UOp.const(dtypes.int32, rv)}).simplify().arg == want


@pytest.mark.compile_only
def test_nothing_to_gain_gives_none():
  a = _rng(8, 0)
  assert simplify_given(a * 3 + 1, a < 4) is None  # no division
  assert simplify_given((a + 5) // 4, a < 9) is None  # the gate narrows nothing


@pytest.mark.compile_only
def test_gate_clause_simplified_under_the_others():
  a, b = _rng(2, 0), _rng(8, 1)
  x = a + b - 1
  piece = (x * 4 + 3) // 4  # x where x >= 0; floor division of a negative x would differ
  gate = _ge(x, 0) & (piece < 5)
  new = simplify_gate(gate)
  assert new is not None and not any(n.op in (Ops.IDIV, Ops.MOD) for n in new.toposort())


@pytest.mark.compile_only
def test_where_leaves_loads_alone():
  """where(c, a, b) evaluates a's loads where c is false too: their addresses must not take c's narrowing."""
  buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(64), (), 0)
  a = _rng(16, 0)
  x = a - 8
  ld = UOp(Ops.INDEX, dtypes.float32.ptr(64), (buf, (x + 64) // 2)).load()
  value = ld * x.cast(dtypes.float32) + (x // 16).cast(dtypes.float32)  # x // 16 is 0 where x >= 0
  got = simplify_given(value, _ge(x, 0))
  assert got is not None
  (new_ld,) = [n for n in got.toposort() if n.op is Ops.LOAD]
  for av in range(16):  # the address is the same for every a, also where the gate is false
    at = {a: UOp.const(dtypes.int32, av)}
    assert new_ld.src[0].src[1].substitute(at).simplify().arg == ld.src[0].src[1].substitute(at).simplify().arg == (av + 56) // 2
  assert sum(n.op is Ops.IDIV for n in got.toposort()) == 1  # only the address's


def _conv_transpose_grad() -> tuple[Tensor, Tensor, Tensor]:
  rng = np.random.default_rng(0)
  x = Tensor(rng.standard_normal((2, 3, 5, 5)).astype(np.float32), requires_grad=True)
  w = Tensor(rng.standard_normal((3, 4, 4, 4)).astype(np.float32), requires_grad=True)
  out = x.conv_transpose2d(w, stride=2, padding=1)
  (out.relu() * out).sum().backward()
  return out, x.grad, w.grad


def _numpy_conv_transpose(xn: np.ndarray, wn: np.ndarray, s: int, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """out, d/dx and d/dw of sum(relu(out) * out) (whose gradient by out is 2*relu(out)), by the definition's loops."""
  n, c, h, w = xn.shape
  k = wn.shape[2]
  full = np.zeros((n, wn.shape[1], (h - 1) * s + k, (w - 1) * s + k), np.float64)
  for i in range(h):
    for j in range(w): full[:, :, i * s:i * s + k, j * s:j * s + k] += np.einsum("nc,cokl->nokl", xn[:, :, i, j], wn)
  out = full[:, :, p:full.shape[2] - p, p:full.shape[3] - p]
  g = np.zeros_like(full)
  g[:, :, p:full.shape[2] - p, p:full.shape[3] - p] = 2 * np.maximum(out, 0)
  gx, gw = np.zeros(xn.shape), np.zeros(wn.shape)
  for i in range(h):
    for j in range(w):
      win = g[:, :, i * s:i * s + k, j * s:j * s + k]
      gx[:, :, i, j] = np.einsum("nokl,cokl->nc", win, wn)
      gw += np.einsum("nc,nokl->cokl", xn[:, :, i, j], win)
  return out, gx, gw


@pytest.mark.parametrize("on", [1, 0])
def test_conv_transpose_and_its_gradients_match_numpy(on):
  rng = np.random.default_rng(0)
  xn, wn = rng.standard_normal((2, 3, 5, 5)).astype(np.float32), rng.standard_normal((3, 4, 4, 4)).astype(np.float32)
  want = _numpy_conv_transpose(xn, wn, 2, 1)
  with Context(GATE_SIMPLIFY=on):
    for got, ref in zip(_conv_transpose_grad(), want): np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.compile_only
def test_conv_transpose_kernels_have_fewer_divisions():
  """A transposed convolution (stride 2) and its weight gradient: the windows' gates make most of the reshapes' divisions
  redundant (on CPU, 5 + 7 -> 2 + 5 and 25 + 28 -> 7 + 11 in session 27)."""
  def divisions(on: int) -> tuple[int, int]:
    with Context(GATE_SIMPLIFY=on):
      out, _, gw = _conv_transpose_grad()
      return tuple(sum(_ops(src, "IDIV", "MOD") for src in _kernel_uops(t)) for t in (out, gw))
  on, off = divisions(1), divisions(0)
  assert on[0] < off[0] and on[1] < off[1], (on, off)


def _kernel_uops(t: Tensor) -> list[list[UOp]]:
  from tinygrad.codegen.program import lower_kernel_with_dims
  items, _ = create_schedule([t.uop])
  return [lower_kernel_with_dims(it.ast, Device.renderer(str(t.device)))[0] for it in items if it.ast.op is Ops.SINK]


def _ops(uops: list[UOp], *names: str) -> int: return sum(u.op.name in names for u in uops)
