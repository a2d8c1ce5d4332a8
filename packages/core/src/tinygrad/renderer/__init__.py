"""Base classes for turning a linearized program (a list of UOps) into source, and source into a binary."""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import diskcache_get, diskcache_put
from tinygrad.uop.ops import Ops, UOp
from tinygrad.uop.rewrite import PatternMatcher

if TYPE_CHECKING:
  from tinygrad.device.plugin import TensorCore


class CompileError(RuntimeError):
  """A compiler rejected generated source. The message carries the source (numbered) and the compiler's words."""

  def __init__(self, compiler: str, src: str, message: str):
    numbered = "\n".join(f"{i + 1:4d} | {line}" for i, line in enumerate(src.splitlines()))
    super().__init__(f"{compiler} failed to compile a generated kernel:\n{message.strip()}\n--- source ---\n{numbered}")
    self.src, self.message = src, message


class UnsupportedDTypeError(TypeError):
  def __init__(self, renderer: str, dtype: DType, hint: str = ""):
    super().__init__(f"renderer {renderer} can't express dtype {dtype!r}" + (f": {hint}" if hint else ""))


class DTypeSet(frozenset):
  """The dtypes a renderer can express. Calling it returns itself, so tinygrad's `renderer.supported_dtypes()` reads it too."""
  def __call__(self) -> DTypeSet: return self


# bump when what a compiler emits changes in a way its cachekey doesn't capture (e.g. code model, ABI)
CACHE_VERSION = 1


class Compiler:
  """Source -> binary. `compile_cached` keeps binaries in the on-disk cache keyed by `cachekey` and source."""
  cachekey: str | None = None

  def compile(self, src: str) -> bytes: return src.encode()

  def compile_cached(self, src: str) -> bytes:
    if self.cachekey is None: return self.compile(src)
    table, key = f"{self.cachekey}_v{CACHE_VERSION}", hashlib.sha256(src.encode()).hexdigest()
    if (lib := diskcache_get(table, key)) is not None: return lib
    from tinygrad.engine.offload import offload  # COMPILE_WORKER=1: in a worker process
    return diskcache_put(table, key, offload(self.compile, src))

  def disassemble(self, lib: bytes) -> str: return f"<{len(lib)} bytes>"


class Renderer:
  """Renders a linearized program for one device/arch. Subclasses set their capabilities and `render`."""
  device: str = ""
  name: str = ""
  arch: str = ""
  compiler: Compiler = Compiler()
  has_local: bool = False       # GPU-style: outer loops become thread indices (SPECIAL)
  has_shared: bool = False
  reg_vectors: bool = True      # DEFINE_REG of packed 16-bit vectors (tensor-core fragments carried across loop iterations)
  shared_max: int = 48 * 1024   # shared memory bytes one block may use (above 48 KB the device needs it as dynamic smem)
  global_max: tuple[int, ...] | None = None
  local_max: tuple[int, ...] | None = None
  supports_float4: bool = False
  vector_dtypes: tuple[DType, ...] = (dtypes.float32,)  # with supports_float4: element types of the 16-byte accesses
  threads: int = 1              # CPU threads a kernel may be split across (see codegen/threads.py)
  tensor_cores: tuple[TensorCore, ...] = ()
  # rules this target needs before rendering (decompositions, dtype emulation); see codegen
  extra_matcher: PatternMatcher | None = None
  # dtypes it can express (a subclass's frozenset, or property returning one, becomes a DTypeSet: see __init_subclass__)
  supported_dtypes: DTypeSet = DTypeSet(dtypes.fields().values())
  # elementwise ops it renders natively; others are decomposed into these (see codegen/decompose.py)
  native_ops: frozenset[Ops] = frozenset()

  def __init_subclass__(cls, **kwargs: Any) -> None:
    super().__init_subclass__(**kwargs)
    sd = cls.__dict__.get("supported_dtypes")
    if isinstance(sd, frozenset) and not isinstance(sd, DTypeSet): cls.supported_dtypes = DTypeSet(sd)
    elif isinstance(sd, property) and sd.fget is not None:
      get = sd.fget
      cls.supported_dtypes = property(lambda self: DTypeSet(get(self)))  # type: ignore[assignment]

  def render(self, name: str, uops: list[UOp]) -> str: raise NotImplementedError(f"{type(self).__name__}.render")

  def __repr__(self) -> str: return f"<{type(self).__name__} {self.device}:{self.name}:{self.arch}>"

  def params(self) -> dict[str, Any]: return {"device": self.device, "name": self.name, "arch": self.arch}
