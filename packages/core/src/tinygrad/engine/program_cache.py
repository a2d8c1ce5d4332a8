"""Lowered programs on disk: a kernel AST's ProgramSpec (its opts, rendered source, launch sizes; not its linearized UOps) kept in the on-disk cache,
so a later process skips choosing opts, lowering, linearizing and rendering a kernel it has seen (the compiled binary is cached
apart, by source: Compiler.compile_cached). A model's first token in a fresh process is mostly this host work, not compiling.

The key is the AST's structure (stable across processes: UOps are hashed by identity within one), the renderer and its target,
the settings that change what a kernel becomes, and a digest of the code that lowers and renders, so an edit to codegen
never serves a program its old code made. Off with CACHELEVEL=0 or PCACHE=0, and wherever the lowering itself is being
watched or checked (DEBUG >= 4 prints it, VIZ records it, VERIFY checks each stage), searched (BEAM has its own cache) or not a plain AST."""
from __future__ import annotations

import hashlib
import inspect
import os
import pickle
import sys
from collections.abc import Callable
from typing import Any

from tinygrad.codegen.custom import is_hand_written
from tinygrad.codegen.program import ProgramSpec, stable_key
from tinygrad.helpers import CACHELEVEL, DEBUG, TINYGRAD_NOOP_SETTINGS, VERIFY, ContextVar, diskcache_get, diskcache_put
from tinygrad.renderer import Renderer
from tinygrad.uop.ops import Ops, UOp

PCACHE = ContextVar("PCACHE", 1)  # PCACHE=0: lower every kernel anew in each process (the compiled binaries stay cached)
TABLE = "lowered_program_v2"  # v2: without the linearized UOps
# packages whose code decides what a kernel AST lowers to, besides the renderer's own package (a backend's, all of it: its tensor
# cores and rewrite rules may live beside the renderer class)
_LOWERING_PACKAGES = ("tinygrad.codegen", "tinygrad.renderer", "tinygrad.uop")
_LOWERING_MODULES = ("tinygrad.dtype",)
_code_digests: dict[type, str] = {}
# settings that never change a program (they change what is printed, cached or where work runs; the beam width is in the key
# apart, as the engine resolves it: a compile worker runs with BEAM=JITBEAM=0 and is handed the width)
# (TRAINING and the default dtypes shape the graph, which is in the key; a kernel's AST lowers the same in train and eval mode)
_NOT_LOWERING = {"DEBUG", "CACHELEVEL", "PCACHE", "CCACHE", "PARALLEL_COMPILE", "COMPILE_WORKER", "VIZ", "PROFILE", "JIT", "GRAPH", "BEAM",
                 "JITBEAM", "TRAINING", "DEFAULT_FLOAT", "DEFAULT_INT"}
stats = {"hits": 0, "misses": 0}  # this process's lookups (bench/llm_ttft.py reports them)


def _files_of(package: str, recursive: bool = False) -> list[str]:
  mod = sys.modules.get(package) or __import__(package, fromlist=["_"])
  folder = os.path.dirname(inspect.getfile(mod))
  walk = os.walk(folder) if recursive else [(folder, [], os.listdir(folder))]
  return sorted(os.path.join(d, f) for d, _, names in walk for f in names if f.endswith(".py"))


def _renderer_files(renderer: Renderer) -> list[str]:
  """The renderer's module, and with it every module of its package when that is not core (a backend's)."""
  top = type(renderer).__module__.split(".")[0]
  return [inspect.getfile(type(renderer))] + ([] if top == "tinygrad" else _files_of(top, recursive=True))


def code_digest(renderer: Renderer) -> str:
  """A digest of the source of core's lowering and rendering code and of the renderer's (read once per renderer type)."""
  if (d := _code_digests.get(type(renderer))) is None:
    h = hashlib.sha256()
    files = [f for p in _LOWERING_PACKAGES for f in _files_of(p)] + [inspect.getfile(sys.modules[m]) for m in _LOWERING_MODULES]
    files += _renderer_files(renderer)
    for f in files:
      with open(f, "rb") as fh: h.update(fh.read())
    d = _code_digests[type(renderer)] = h.hexdigest()
  return d


def renderer_key(renderer: Renderer) -> str:
  """What of a renderer decides the programs it gets: its class, target and capabilities."""
  caps = (renderer.has_local, renderer.has_shared, renderer.runs_blocks, renderer.reg_vectors, renderer.shared_max, renderer.global_max,
          renderer.local_max, renderer.supports_float4, renderer.vector_dtypes, renderer.supports_images, renderer.threads, renderer.accumulators,
          renderer.compute_units, renderer.prefetch_ahead, tuple(d.name for d in renderer.dot_products),
          tuple((tc.name, tc.dims, tc.dtype_in, tc.dtype_out) for tc in renderer.tensor_cores), getattr(renderer.compiler, "cachekey", None))
  return f"{type(renderer).__module__}.{type(renderer).__qualname__}|{sorted(renderer.params().items())!r}|{caps!r}"


def lowering_settings() -> str:
  """Every setting away from its default (from the environment or a Context), not only those the opts depend on: a miss costs a
  lowering, a program served under a setting it wasn't made with would be wrong. (Defaults are left out: a compile worker,
  which imports less, has fewer settings registered, and must find what this process stored.)"""
  return repr(sorted((k, repr(v.value)) for k, v in ContextVar._registry.items()
                     if v.value != v.default and k not in _NOT_LOWERING and k not in TINYGRAD_NOOP_SETTINGS))


def program_key(ast: UOp, renderer: Renderer, setting: tuple) -> str:
  parts = (stable_key(ast.toposort()), renderer_key(renderer), repr(setting), lowering_settings(), code_digest(renderer))
  return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cacheable(ast: UOp, beam: int, watched: bool = False) -> bool:
  # watched: VIZ records each lowering step (a program served from disk would show none). A hand-written kernel's arg may
  # carry objects whose repr doesn't say all they do: not keyed by structure
  return (bool(PCACHE.value) and CACHELEVEL.value > 0 and not beam and not watched and DEBUG < 4 and not VERIFY.value and ast.op is Ops.SINK
          and not is_hand_written(ast))


def cached_program(ast: UOp, renderer: Renderer, setting: tuple, beam: int, lower: Callable[[], ProgramSpec], watched: bool = False) -> ProgramSpec:
  """`lower()`'s program for this AST, from the disk cache when an earlier process lowered it under the same key."""
  if not cacheable(ast, beam, watched): return lower()
  key = program_key(ast, renderer, setting)
  if isinstance(hit := _get(key), ProgramSpec):
    stats["hits"] += 1
    return hit
  stats["misses"] += 1
  spec = lower()
  try: diskcache_put(TABLE, key, spec.runnable())  # (a hit serves a runner: the UOps would be unpickled for nothing)
  except (pickle.PicklingError, RecursionError, TypeError, AttributeError): pass  # a program that doesn't pickle: lowered anew next time
  return spec


def _get(key: str) -> Any:
  try: return diskcache_get(TABLE, key)
  except Exception:  # noqa: BLE001  an entry that no longer unpickles (a class renamed since): lowered anew and replaced
    return None
