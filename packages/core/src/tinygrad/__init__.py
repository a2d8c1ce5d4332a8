"""tinygrad: a plugin-based rebuild of tinygrad's API and compiler design."""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)  # tinygrad.llm and other add-ons live in their own distributions

from tinygrad.device.registry import Device  # noqa: E402
from tinygrad.download import fetch  # noqa: E402
from tinygrad.dtype import dtypes  # noqa: E402
from tinygrad.frontend.function import function  # noqa: E402
from tinygrad.helpers import Context, GlobalCounters, getenv  # noqa: E402
from tinygrad.jit import TinyJit  # noqa: E402
from tinygrad.tensor import Tensor  # noqa: E402
from tinygrad.uop.ops import UOp, Variable  # noqa: E402

if getenv("VIZ"):  # record for the VIZ page (tinygrad/viz): hooks installed only now, so without VIZ nothing is recorded
  from tinygrad.viz import enable_from_env
  enable_from_env()

__all__ = ["Tensor", "TinyJit", "function", "Variable", "Device", "dtypes", "Context", "GlobalCounters", "getenv", "UOp", "fetch"]
