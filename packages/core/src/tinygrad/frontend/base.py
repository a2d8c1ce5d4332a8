"""TensorBase: what every Tensor mixin builds on, so that no mixin imports `tinygrad.tensor`.

A tensor is a UOp graph (`uop`) plus autograd state; the base owns those and the properties read from the graph. The
mixins stack on it in the order they use each other: elementwise -> movement -> reduce -> indexing, conv, functional -> linalg;
multi needs only movement. `Tensor` (tensor.py) is the base plus the mixins plus creation and realization. A mixin builds
its results with `type(self)(uop, ...)` and `type(self).arange(...)`, so they are Tensors without naming the class.

Under TYPE_CHECKING the base also declares, with their signatures, what mixins call but something above them defines:
Tensor's constructor, creation classmethods and realization, and the few ops of a later mixin an earlier one uses. These
declarations exist for the type checker only: at run time the one definition is Tensor's (or the later mixin's), and
mypy checks that definition against the declaration as an override, so the two can't drift apart."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self

from tinygrad.dtype import ConstType, DType
from tinygrad.helpers import prod
from tinygrad.uop.ops import UOp
from tinygrad.uop.symbolic import sint_simplify

DeviceArg = str | tuple[str, ...]  # a device name, or the devices of a sharded tensor (frontend/multi.py)


class TensorBase:
  __slots__ = ("_uop", "requires_grad", "grad")
  _uop: UOp
  requires_grad: bool | None
  grad: Self | None

  # ---- the graph behind the tensor
  @property
  def uop(self) -> UOp: return self._uop

  @uop.setter
  def uop(self, value: UOp) -> None: self._uop = value

  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return self.uop.device  # type: ignore[return-value]  # a tuple for sharded tensors
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int:
    n = prod(self.shape)
    return n if isinstance(n, int) else sint_simplify(n)  # a symbolic shape: the count as one simplified expression
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.element_size()

  if TYPE_CHECKING:
    # ---- defined by Tensor (tensor.py): construction, creation, realization
    training: ClassVar[bool]
    def __init__(self, data: Any, device: DeviceArg | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None) -> None: ...
    @classmethod
    def empty(cls, *shape: int, device: str | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Self: ...
    @classmethod
    def full(cls, shape: tuple[int, ...] | int, fill_value: ConstType, device: str | None = None,
             dtype: DType | str | None = None, **kwargs: Any) -> Self: ...
    @classmethod
    def zeros(cls, *shape: int, **kwargs: Any) -> Self: ...
    @classmethod
    def ones(cls, *shape: int, **kwargs: Any) -> Self: ...
    @classmethod
    def arange(cls, start: int | float, stop: int | float | None = None, step: int | float = 1,
               **kwargs: Any) -> Self: ...
    @classmethod
    def eye(cls, n: int, m: int | None = None, **kwargs: Any) -> Self: ...
    @classmethod
    def rand(cls, *shape: int, device: str | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Self: ...
    def realize(self, *others: Self) -> Self: ...
    def contiguous(self) -> Self: ...
    def detach(self) -> Self: ...
    def to(self, device: DeviceArg | None) -> Self: ...
    def item(self) -> ConstType: ...
    def data(self) -> memoryview: ...
    def assign(self, x: Self | ConstType) -> Self: ...
    def replace(self, x: Self) -> Self: ...
    def full_like(self, fill_value: ConstType, **kwargs: Any) -> Self: ...
    def zeros_like(self, **kwargs: Any) -> Self: ...
    def ones_like(self, **kwargs: Any) -> Self: ...

    # ---- defined by a later mixin and used by an earlier one
    def reshape(self, shape: int | Sequence[int], *args: int) -> Self: ...  # movement, used by elementwise
    def expand(self, shape: int | Sequence[int], *args: int) -> Self: ...  # movement, used by elementwise
    def pad(self, padding: Sequence[tuple[int, int] | None] | Sequence[int], mode: str = "constant",
            value: float = 0.0) -> Self: ...  # movement, used by elementwise
    def shrink(self, arg: Sequence[tuple[int | UOp, int | UOp] | None]) -> Self: ...  # movement, used by elementwise
    def unsqueeze(self, dim: int) -> Self: ...  # movement, used by elementwise
    def __getitem__(self, index: Any) -> Self: ...  # indexing, used by movement
    def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self: ...  # reduce, used by elementwise
    def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Self: ...  # reduce, used by elementwise
    def matmul(self, x: Self, reverse: bool = False, dtype: DType | str | None = None) -> Self: ...  # functional, used by elementwise's @
