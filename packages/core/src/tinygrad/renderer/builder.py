"""Linearized programs written by hand, for renderer tests (ours and third-party plugins'): each uop is appended when it
is created, sources first, so `builder.uops` is already in the order docs/linear-ir.md describes.

  p = ProgramBuilder()
  out, inp = p.glob(0, dtypes.float32), p.glob(1, dtypes.float32)
  r = p.loop(p.const(dtypes.int32, 16))
  p.end(r, p.store(out, r, p.alu(Ops.ADD, p.load(inp, r), p.const(dtypes.float32, 1.0))))
  src = renderer.render("add_one", p.uops)
"""
from __future__ import annotations

from tinygrad.dtype import DType, dtypes
from tinygrad.uop.ops import GroupOp, Ops, UOp


class ProgramBuilder:
  """UOps appended in creation order (sources first): a linearized program as docs/linear-ir.md describes."""

  def __init__(self) -> None: self.uops: list[UOp] = []

  def __call__(self, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: object = None) -> UOp:
    u = UOp(op, dtype, src, arg)
    if not any(u is x for x in self.uops): self.uops.append(u)
    return u

  def const(self, dt: DType, v: object) -> UOp: return self(Ops.CONST, dt, (), v)
  def glob(self, i: int, dt: DType) -> UOp: return self(Ops.DEFINE_GLOBAL, dt.ptr(), (), i)
  def index(self, buf: UOp, idx: UOp) -> UOp: return self(Ops.INDEX, buf.dtype, (buf, idx))
  def load(self, buf: UOp, idx: UOp, *gate_alt: UOp) -> UOp:
    return self(Ops.LOAD, buf.dtype.base, (self.index(buf, idx), *gate_alt))  # type: ignore[attr-defined]
  def store(self, buf: UOp, idx: UOp, val: UOp, *gate: UOp) -> UOp: return self(Ops.STORE, dtypes.void, (self.index(buf, idx), val, *gate))
  def alu(self, op: Ops, *src: UOp) -> UOp: return self(op, dtypes.bool if op in GroupOp.Comparison else src[-1].dtype, src)
  def loop(self, end: UOp, rid: int = 0) -> UOp: return self(Ops.RANGE, dtypes.int32, (end,), (rid, "loop"))
  def end(self, rng: UOp, *deps: UOp) -> UOp: return self(Ops.END, dtypes.void, (rng, *deps))
  def special(self, name: str, size: int) -> UOp: return self(Ops.SPECIAL, dtypes.int32, (), (name, size))
