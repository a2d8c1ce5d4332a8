"""The UOp IR. `from tinygrad.uop import Ops, UOp` as in tinygrad 0.14 (the definitions are in uop/ops.py)."""
from tinygrad.uop.ops import GroupOp, Ops, UOp  # noqa: F401

__all__ = ["GroupOp", "Ops", "UOp"]
