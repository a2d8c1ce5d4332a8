"""Small utilities shared by every layer: env/context variables, counters, a disk cache."""
from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import math
import operator
import os
import pickle
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")
OSX, WIN = sys.platform == "darwin", sys.platform == "win32"  # as tinygrad's helpers name them


class JitError(RuntimeError):
  """A TinyJit misuse (inputs that changed shape, data read while capturing, ...); tinygrad.jit exports it."""


class InvalidArgumentError(ValueError, RuntimeError):
  """An invalid argument where torch and tinygrad raise RuntimeError (a bad reshape or permute, mismatched matmul shapes):
  a ValueError for our callers and a RuntimeError for code written against them."""


class FormulaError(InvalidArgumentError, AssertionError):
  """A malformed rearrange formula: an InvalidArgumentError (ValueError, RuntimeError), and the AssertionError that tinygrad's
  formula checks raise."""


class OutOfRangeError(ValueError, IndexError):
  """A dim or index out of range: an IndexError as in torch and tinygrad, and a ValueError for our callers."""


class InvalidDTypeError(TypeError, RuntimeError):
  """A dtype an op can't take where torch raises RuntimeError: a TypeError for our callers, a RuntimeError for theirs."""


class UnknownDTypeError(ValueError, AttributeError):
  """A dtype name that names none (`dtype="typo"`): a ValueError for our callers, an AttributeError as tinygrad's (it looks the
  name up on `dtypes`)."""


def prod(xs: Iterable[Any], start: Any = 1) -> Any: return functools.reduce(operator.mul, xs, start)
def all_same(xs: Sequence[Any]) -> bool: return all(x == xs[0] for x in xs)
def all_int(xs: Iterable[Any]) -> bool: return all(isinstance(x, int) for x in xs)
def dedup(xs: Iterable[T]) -> list[T]: return list(dict.fromkeys(xs))
def flatten(xss: Iterable[Iterable[T]]) -> list[T]: return [x for xs in xss for x in xs]
def argsort(xs: Sequence[Any]) -> list[int]: return sorted(range(len(xs)), key=xs.__getitem__)
def argfix(*x: Any) -> tuple[Any, ...]:
  """Accept f(1, 2) and f((1, 2)) alike."""
  if x and isinstance(x[0], (tuple, list)):
    if len(x) != 1: raise ValueError(f"pass either a sequence or separate ints, not both: {x}")
    return tuple(x[0])
  return x
def make_tuple(x: int | Sequence[int], cnt: int) -> tuple[int, ...]: return (x,) * cnt if isinstance(x, int) else tuple(x)
def round_up(x: int, multiple: int) -> int: return (x + multiple - 1) // multiple * multiple
def ceildiv(a: Any, b: Any) -> Any: return -(-a // b)
def strip_parens(s: str) -> str: return s[1:-1] if s.startswith("(") and s.endswith(")") and _balanced(s[1:-1]) else s
def _balanced(s: str) -> bool:
  depth = 0
  for c in s:
    depth += {"(": 1, ")": -1}.get(c, 0)
    if depth < 0: return False
  return depth == 0
def colored(s: str, color: str | None) -> str:
  codes = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
  return s if color is None or not sys.stdout.isatty() else f"\u001b[{codes[color]}m{s}\u001b[0m"
def is_nan(x: Any) -> bool: return isinstance(x, float) and math.isnan(x)


@functools.cache
def getenv(key: str, default: Any = 0) -> Any:
  """Read an environment variable, converted to the type of `default` (cached: read once)."""
  return type(default)(os.environ.get(key, default))


class ContextVar:
  """A named setting read from the environment once and overridable with `Context(NAME=value)`."""
  _registry: dict[str, ContextVar] = {}

  def __init__(self, key: str, default: Any):
    self.key, self.value, self.default = key, getenv(key, default), default
    self.initial = self.value  # what the environment gave: a worker process starts from the same (Context overrides: `overridden`)
    ContextVar._registry[key] = self

  def __bool__(self) -> bool: return bool(self.value)
  def __ge__(self, x: Any) -> bool: return self.value >= x
  def __gt__(self, x: Any) -> bool: return self.value > x
  def __lt__(self, x: Any) -> bool: return self.value < x
  def __le__(self, x: Any) -> bool: return self.value <= x
  def __eq__(self, x: object) -> bool: return self.value == x
  def __hash__(self) -> int: return hash(self.key)
  def __repr__(self) -> str: return f"{self.key}={self.value!r}"
  def tolist(self, obj: Any = None) -> list[Any]:
    """A comma-separated string setting as a list; with `obj`, its attributes by those names (`EMULATED_DTYPES.tolist(dtypes)`)."""
    if not isinstance(self.value, str): raise TypeError(f"{self.key} is not a string setting: {self.value!r}")
    return [getattr(obj, x) if obj is not None else x for x in self.value.split(",") if x]


def overridden() -> dict[str, Any]:
  """The settings a `Context` changed from what the environment gave: a worker process applies them to its own."""
  return {k: v.value for k, v in ContextVar._registry.items() if v.value != v.initial}


class Context(contextlib.ContextDecorator):
  """Temporarily override ContextVars: `with Context(DEBUG=2, DEV="CPU:LLVM"): ...`."""

  def __init__(self, **kwargs: Any): self.kwargs = kwargs

  def __enter__(self) -> None:
    unknown = [k for k in self.kwargs if k not in ContextVar._registry]
    if unknown: raise KeyError(f"unknown Context variable(s) {unknown}; known: {sorted(ContextVar._registry)}")
    self.old = {k: ContextVar._registry[k].value for k in self.kwargs}
    for k, v in self.kwargs.items(): ContextVar._registry[k].value = v

  def __exit__(self, *exc: object) -> None:
    for k, v in self.old.items(): ContextVar._registry[k].value = v


DEBUG = ContextVar("DEBUG", 0)
class _DEV(ContextVar):
  """The DEV setting. `.value` is the DEV string; `.device`, `.renderer`, `.arch`, `.interface` read its first parsed target and
  `.target(device)` the target that configures a device kind, the way tinygrad's helpers.DEV reads them."""

  # the DEV grammar belongs to the devices (device/devstring.py): that module installs its parser here when it is imported
  # (tinygrad/__init__ imports it), so this layer reads parsed targets without importing a higher one
  parse: Any = None

  def targets(self) -> tuple[Any, ...]:
    if self.parse is None: raise RuntimeError("DEV's parser is not installed: import tinygrad (tinygrad.device.devstring) first")
    return self.parse(self.value) if self.value else ()

  def target(self, dev: str, **defaults: Any) -> Any:
    """The parsed target for device kind `dev` (fields not set in DEV filled from `defaults`), as tinygrad's DEV.target."""
    import dataclasses
    t = next((t for t in self.targets() if t.device == dev.upper()), None) or self.parse(dev.upper())[0]
    return dataclasses.replace(t, **{k: v for k, v in defaults.items() if not getattr(t, k)})

  def __getattr__(self, k: str) -> Any:
    # only the Target fields: anything else is a real AttributeError
    if k in ("device", "renderer", "arch", "interface", "opts", "indices", "index"):
      ts = self.targets()
      if ts: return getattr(ts[0], k)
      return "" if k in ("device", "renderer", "arch", "interface") else None if k == "index" else ()
    raise AttributeError(k)


DEV = _DEV("DEV", "")                        # the DEV string: which device, renderer and arch run tensors
VERIFY = ContextVar("VERIFY", 0)             # check UOp graphs after every pipeline stage
CACHELEVEL = ContextVar("CACHELEVEL", 2)     # 0 disables the on-disk compile cache
NOOPT = ContextVar("NOOPT", 0)               # skip kernel optimizations
BEAM = ContextVar("BEAM", 0)                 # BEAM search width for every kernel (engine/search.py); 0: heuristics
JITBEAM = ContextVar("JITBEAM", 0)           # BEAM search width for kernels captured by a TinyJit only
TRACK_MATCH_STATS = ContextVar("TRACK_MATCH_STATS", 0)
IMAGE = ContextVar("IMAGE", 0)               # renderers with images (QCOMCL on CL): 1 reduce kernels' inputs, 2 all kernels' buffers
DEFAULT_FLOAT = ContextVar("DEFAULT_FLOAT", "float32")  # dtypes.default_float, by name (HALF, bfloat16, ...), as in tinygrad
DEFAULT_INT = ContextVar("DEFAULT_INT", "int32")        # dtypes.default_int
TRAINING = ContextVar("TRAINING", 0)         # training mode (dropout, BatchNorm's batch statistics, Optimizer.step); Tensor.training is it
CAPTURING = ContextVar("CAPTURING", 1)       # 0: kernels run inside a capturing TinyJit are not captured (one-time work), as in tinygrad

# settings tinygrad programs set with Context(...) or read that have no effect here (our compiler has no such knob, or
# decides it another way): accepted so that such programs run unchanged, instead of a KeyError. docs/differences.md lists them.
TINYGRAD_NOOP_SETTINGS: dict[str, Any] = {
  "FLOAT16": 0, "OPENPILOT_HACKS": 0, "JIT_BATCH_SIZE": 32, "WINO": 0, "TRACEMETA": 1, "NO_COLOR": 0,
  "TC_SELECT": -1, "TC_OPT": 0, "TRANSCENDENTAL": 1, "NOLOCALS": 0, "SPLIT_REDUCEOP": 1, "NO_MEMORY_PLANNER": 0,
  "LRU": 1, "ALL2ALL": 0, "ALLREDUCE_CAST": 1, "IGNORE_BEAM_CACHE": 0, "VALIDATE_WITH_CPU": 0, "DISABLE_FAST_IDIV": 1,
  "FUSE_OPTIM": 0, "ALLOW_DEVICE_USAGE": 1, "MAX_BUFFER_SIZE": 0, "MAX_KERNEL_BUFFERS": 0, "EMULATED_DTYPES": "",
  "CAPTURE_PROCESS_REPLAY": 0, "NUM_CPU_THREADS": 0, "NULL_ALLOW_COPYOUT": 0,
  "VIZ": 0, "PROFILE": 0, "SPEC": 1, "CHECK_OOB": 0, "PCONTIG": 0, "DEBUG_RANGEIFY": 0, "TUPLE_ORDER": 1, "CCACHE": 1,
  "SCACHE": 1, "USE_ATOMICS": 0, "DISALLOW_BROADCAST": 0, "REWRITE_STACK_LIMIT": 250000, "HCQ_RUNTIME_DEV": "CPU", "SQTT": 0,
  "PMC": 0, "PMA": 0,
}
for _k, _v in TINYGRAD_NOOP_SETTINGS.items():
  if _k not in ContextVar._registry: ContextVar(_k, _v)


class GlobalCounters:
  """Totals since the last reset: kernels run, ops, memory traffic and time."""
  global_ops: int = 0
  global_mem: int = 0
  time_sum_s: float = 0.0
  kernel_count: int = 0
  mem_used: int = 0
  mem_used_per_device: ClassVar[collections.defaultdict[str, int]] = collections.defaultdict(int)  # as mem_used: not reset

  @staticmethod
  def reset() -> None:
    GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s, GlobalCounters.kernel_count = 0, 0, 0.0, 0


class Timing(contextlib.ContextDecorator):
  def __init__(self, prefix: str = "", enabled: bool = True): self.prefix, self.enabled = prefix, enabled
  def __enter__(self) -> Timing:
    self.st = time.perf_counter_ns()
    return self
  def __exit__(self, *exc: object) -> None:
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et * 1e-6:6.2f} ms")


# ---- on-disk cache (compiled binaries, BEAM choices): one sqlite file, keyed by table and key

def cache_dir() -> str:
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "tinygrad")


CACHEDB: str = os.environ.get("CACHEDB", os.path.join(cache_dir(), "cache.db"))
_db_conn: sqlite3.Connection | None = None
# one connection for the process, used by more than one thread (the compile thread stores binaries while this one stores
# lowered programs): sqlite3's connection objects are not safe to use from two threads at once
_db_lock = threading.RLock()


def _db() -> sqlite3.Connection:
  global _db_conn
  if _db_conn is None:
    os.makedirs(os.path.dirname(CACHEDB), exist_ok=True)
    _db_conn = sqlite3.connect(CACHEDB, timeout=30, isolation_level=None, check_same_thread=False)
  return _db_conn


def _table(table: str) -> str: return "cache_" + hashlib.sha256(table.encode()).hexdigest()[:16]


def diskcache_get(table: str, key: str) -> Any:
  if CACHELEVEL.value == 0: return None
  try:
    with _db_lock: row = _db().execute(f"SELECT val FROM {_table(table)} WHERE key=?", (key,)).fetchone()
  except sqlite3.OperationalError: return None  # table not created yet
  return pickle.loads(row[0]) if row else None


def diskcache_put(table: str, key: str, value: Any) -> Any:
  if CACHELEVEL.value == 0: return value
  data = pickle.dumps(value)
  with _db_lock:
    db = _db()
    db.execute(f"CREATE TABLE IF NOT EXISTS {_table(table)} (key TEXT PRIMARY KEY, val BLOB)")
    db.execute(f"INSERT OR REPLACE INTO {_table(table)} (key, val) VALUES (?, ?)", (key, data))
  return value


def temp_path(name: str) -> str: return os.path.join(tempfile.gettempdir(), name)


def unwrap(x: T | None) -> T:
  assert x is not None
  return x


def partition(xs: Iterable[T], pred: Any) -> tuple[list[T], list[T]]:
  yes: list[T] = []
  no: list[T] = []
  for x in xs: (yes if pred(x) else no).append(x)
  return yes, no


def pairwise(xs: Sequence[T]) -> Iterator[tuple[T, T]]: return zip(xs, xs[1:])


# ---- small helpers that tinygrad programs import from tinygrad.helpers (same names and behaviour)

def fully_flatten(x: Any) -> list[Any]:
  """Every leaf of nested lists/tuples (and numpy arrays), in order: fully_flatten([[1, (2,)], 3]) == [1, 2, 3]."""
  if hasattr(x, "__len__") and hasattr(x, "__getitem__") and not isinstance(x, (str, bytes)):
    if getattr(x, "shape", None) == (): return [x[()]]  # a 0-d numpy array
    return [y for v in x for y in fully_flatten(v)]
  return [x]


def get_child(obj: Any, key: str) -> Any:
  """Walk a dotted path as state-dict keys spell it: digits index lists/tuples, dict keys and attributes otherwise
  (get_child(model, "layers.0.weight"))."""
  for k in key.split("."):
    if k.isnumeric() and isinstance(obj, (list, tuple)): obj = obj[int(k)]
    elif isinstance(obj, dict): obj = obj[k]
    else: obj = getattr(obj, k)
  return obj


def merge_dicts(ds: Iterable[dict[Any, Any]]) -> dict[Any, Any]:
  """One dict from several; a key given two different values is an error."""
  out: dict[Any, Any] = {}
  for d in ds:
    for k, v in d.items():
      if k in out and out[k] != v: raise InvalidArgumentError(f"merge_dicts: key {k!r} has two values, {out[k]!r} and {v!r}")
      out[k] = v
  return out


def get_single_element(x: Sequence[T]) -> T:
  if len(x) != 1: raise ValueError(f"expected one element, got {len(x)}: {x!r}")
  return x[0]


def get_shape(x: Any) -> tuple[int, ...]:
  """The shape of nested lists/tuples (all rows of one length): get_shape([[1, 2], [3, 4]]) == (2, 2)."""
  if not isinstance(x, (list, tuple)): return ()
  subs = [get_shape(v) for v in x]
  if not all_same(subs): raise ValueError(f"inhomogeneous shape: {subs}")
  return (len(subs),) + (subs[0] if subs else ())


def cdiv(x: int, y: int) -> int:
  """C's integer division (rounds toward zero); 0 for y == 0."""
  return abs(x) // abs(y) * (1, -1)[(x < 0) ^ (y < 0)] if y != 0 else 0
def cmod(x: int, y: int) -> int: return x - cdiv(x, y) * y
def round_down(num: int, amt: int) -> int: return num - num % amt
def next_power2(x: int) -> int: return 1 if x == 0 else 1 << (x - 1).bit_length()
def polyN(x: Any, p: Sequence[Any]) -> Any:
  """p[0] * x**(n-1) + ... + p[-1] (coefficients from the highest power), by Horner's rule; x may be a Tensor."""
  return functools.reduce(lambda acc, c: acc * x + c, p, 0.0)
def i2u(bits: int, value: int) -> int: return value if value >= 0 else (1 << bits) + value
def getbits(value: int, start: int, end: int) -> int: return (value >> start) & ((1 << (end - start + 1)) - 1)
def lo32(x: int) -> int: return x & 0xFFFFFFFF
def hi32(x: int) -> int: return x >> 32
def data64(data: int) -> tuple[int, int]: return (data >> 32, data & 0xFFFFFFFF)
def data64_le(data: int) -> tuple[int, int]: return (data & 0xFFFFFFFF, data >> 32)
def pluralize(st: str, cnt: int) -> str: return f"{cnt} {st}" + ("" if cnt == 1 else "s")


_ANSI = __import__("re").compile(r"\x1b\[[0-9;]*m")
def ansistrip(s: str) -> str: return _ANSI.sub("", s)
def ansilen(s: str) -> int: return len(ansistrip(s))
def to_function_name(s: str) -> str: return "".join(c if c.isalnum() or c == "_" else f"{ord(c):02X}" for c in ansistrip(s))
def colorize_float(x: float) -> str:
  return colored(f"{x:7.2f}x", "green" if x < 0.75 else "red" if x > 1.15 else "yellow")
def time_to_str(t: float, w: int = 8) -> str:
  """Seconds as a string in s, ms or us, the number `w` characters wide."""
  return next((f"{t * d:{w}.2f}{pr}" for d, pr in ((1, "s "), (1e3, "ms")) if t > 10 / d), f"{t * 1e6:{w}.2f}us")
def word_wrap(x: str, wrap: int = 80) -> str:
  """Break each line of x into lines of at most `wrap` visible characters (ANSI color codes don't count)."""
  out = []
  for line in x.split("\n"):
    while ansilen(line) > wrap:
      i, n = 0, 0
      while n < wrap:  # advance over `wrap` visible characters, skipping escape codes
        m = _ANSI.match(line, i)
        if m: i = m.end()
        else: i, n = i + 1, n + 1
      out.append(line[:i])
      line = line[i:]
    out.append(line)
  return "\n".join(out)


def temp(x: str, append_user: bool = False) -> str:
  """A path in the system's temp directory (with the user name appended, for a per-user file)."""
  return os.path.join(tempfile.gettempdir(), f"{x}.{os.environ.get('USER', 'user')}" if append_user else x)


def diskcache(func: Any) -> Any:
  """Cache a function's results on disk (the CACHEDB sqlite file), keyed by its pickled arguments."""
  table, key_prefix = f"diskcache_{func.__module__}.{func.__qualname__}", ""
  @functools.wraps(func)
  def wrapper(*args: Any, **kwargs: Any) -> Any:
    key = key_prefix + hashlib.sha256(pickle.dumps((args, sorted(kwargs.items())))).hexdigest()
    if (ret := diskcache_get(table, key)) is not None: return ret
    return diskcache_put(table, key, func(*args, **kwargs))
  return wrapper


class Profiling(contextlib.ContextDecorator):
  """cProfile the block and print the top `frac` of functions by `sort` ("cumtime" or "tottime")."""
  def __init__(self, enabled: bool = True, sort: str = "cumtime", frac: float = 0.2, fn: str | None = None, ts: int = 1):
    self.enabled, self.sort, self.frac, self.fn, self.time_scale = enabled, sort, frac, fn, 1e3 / ts
  def __enter__(self) -> Profiling:
    import cProfile
    self.pr = cProfile.Profile()
    if self.enabled: self.pr.enable()
    return self
  def __exit__(self, *exc: object) -> None:
    if not self.enabled: return
    self.pr.disable()
    if self.fn: self.pr.dump_stats(self.fn)
    import pstats
    stats = pstats.Stats(self.pr).strip_dirs().sort_stats(self.sort)
    stats.print_stats(max(1, int(len(stats.stats) * self.frac)))  # type: ignore[attr-defined]


# memoryviews and ctypes pointers (tinygrad's runtime helpers; used to hand raw bytes around)
def flat_mv(mv: memoryview) -> memoryview: return mv if len(mv) == 0 else mv.cast("B", shape=(mv.nbytes,))
def to_mv(ptr: int, sz: int) -> memoryview:
  import ctypes
  return memoryview((ctypes.c_uint8 * sz).from_address(ptr)).cast("B")
def mv_address(mv: memoryview) -> int:
  import ctypes
  return ctypes.addressof(ctypes.c_char.from_buffer(mv))
def from_mv(mv: memoryview, to_type: Any = None) -> Any:
  import ctypes
  return ctypes.cast(ctypes.addressof((to_type or ctypes.c_char).from_buffer(mv)), ctypes.POINTER((to_type or ctypes.c_char) * len(mv))).contents


def __getattr__(name: str) -> Any:
  """Every setting (ContextVar) by name, as tinygrad's helpers export them: `from tinygrad.helpers import JIT, WINO`; and
  tqdm / trange, fetch.
  Settings of other modules (JIT in tinygrad.jit, TC in codegen) are registered when tinygrad is imported."""
  if name in ("tqdm", "trange"):  # the tqdm library's (a dependency), imported on first use: not at every `import tinygrad`
    import tqdm as tqdm_lib
    return getattr(tqdm_lib, name)
  if name == "fetch":  # tinygrad/download.py (which imports this module)
    from tinygrad.download import fetch
    return fetch
  if name == "USE_TC": name = "TC"
  if name in ContextVar._registry: return ContextVar._registry[name]
  raise AttributeError(f"module 'tinygrad.helpers' has no attribute {name!r}")
