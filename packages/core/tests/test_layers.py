"""The import graph holds the layers of STYLE.md: each layer imports only those below it, no import cycle spans two folders,
and backends reach core only through its plugin surface. Read from the source with ast; imports inside functions and
under TYPE_CHECKING count like any other (a late import that dodges a cycle is still an arrow)."""
from __future__ import annotations

import ast
import pathlib
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
CORE = ROOT / "packages/core/src/tinygrad"

# bottom-up: a module may import its own layer and the ones before it. A folder of tinygrad/ or a top-level module is
# one unit; units of one layer (schedule, codegen, renderer) may import each other as long as no cycle forms.
LAYERS: list[set[str]] = [
  {"dtype", "helpers", "workers", "download"},  # workers: generic worker processes (compiling, BEAM); download: fetch
  {"uop", "gradient"},                   # the IR; gradient.py is a UOp graph transform
  {"schedule", "codegen", "renderer"},   # renderer: the base classes (a backend's renderers live in its package)
  {"device", "runtime"},
  {"engine"},                            # realize, memory planning, BEAM search
  {"tensor", "frontend", "jit", "reuse"},  # Tensor, its mixins, TinyJit and KernelReuse (which capture Tensor functions)
  {"nn", "distributed", "viz"},            # distributed: process groups over Tensors; viz: records the pipeline when VIZ is set
  {"__init__"},                          # the package's public names
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
# a backend (the in-tree ones and the out-of-tree example) imports only core's plugin surface
BACKEND_SOURCES = [*sorted((ROOT / "packages").glob("backend-*/src")), ROOT / "examples/plugin-example/src"]
PLUGIN_SURFACE = "tinygrad.device.plugin"
# cycles between folders that are tolerated for now (none: keep it that way)
KNOWN_CYCLES: list[set[str]] = []


def module_name(path: pathlib.Path, root: pathlib.Path) -> str:
  parts = list(path.relative_to(root).with_suffix("").parts)
  if parts[-1] == "__init__": parts = parts[:-1]
  return ".".join(parts)


def imports(path: pathlib.Path, name: str) -> list[tuple[str, int]]:
  """(imported module or module.attribute, line) for every import in the file, at any depth."""
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  out = []
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import): out.extend((a.name, node.lineno) for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        pkg = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join([*pkg, *([node.module] if node.module else [])])
      out.extend((f"{base}.{a.name}", node.lineno) for a in node.names)
  return out


def core_graph() -> dict[str, set[tuple[str, int]]]:
  """Core module -> the core modules it imports (with line numbers)."""
  mods = {module_name(p, CORE.parent): p for p in CORE.rglob("*.py")}
  graph: dict[str, set[tuple[str, int]]] = {}
  for mod, path in mods.items():
    graph[mod] = set()
    for target, line in imports(path, mod):
      while target and target not in mods: target = target.rpartition(".")[0]  # `from pkg.mod import name` -> pkg.mod
      if target and target != mod: graph[mod].add((target, line))
  return graph


def unit(mod: str) -> str:
  """The folder (or top-level module) of tinygrad a module belongs to: tinygrad.codegen.opt -> codegen, tinygrad -> __init__."""
  parts = mod.split(".")
  return parts[1] if len(parts) > 1 else "__init__"


def cycles(graph: dict[str, set[tuple[str, int]]]) -> list[list[str]]:
  """Strongly connected components with more than one module (Tarjan, iterative)."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  on_stack: set[str] = set()
  out: list[list[str]] = []
  for start in sorted(graph):
    if start in index: continue
    work = [(start, iter(sorted(t for t, _ in graph[start])))]
    index[start] = low[start] = len(index)
    stack.append(start)
    on_stack.add(start)
    while work:
      node, children = work[-1]
      child = next(children, None)
      if child is not None:
        if child not in index:
          index[child] = low[child] = len(index)
          stack.append(child)
          on_stack.add(child)
          work.append((child, iter(sorted(t for t, _ in graph[child]))))
        elif child in on_stack: low[node] = min(low[node], index[child])
        continue
      work.pop()
      if work: low[work[-1][0]] = min(low[work[-1][0]], low[node])
      if low[node] == index[node]:
        comp = []
        while True:
          m = stack.pop()
          on_stack.discard(m)
          comp.append(m)
          if m == node: break
        if len(comp) > 1: out.append(sorted(comp))
  return out


def test_every_folder_has_a_layer():
  assert not sorted({unit(m) for m in core_graph()} - set(RANK)), "a new folder or top-level module: give it a layer in LAYERS"


def test_no_import_reaches_up():
  bad = [f"{mod}:{line} imports {target} ({unit(mod)} is below {unit(target)})" for mod, targets in sorted(core_graph().items())
         for target, line in sorted(targets) if RANK[unit(target)] > RANK[unit(mod)]]
  assert not bad, "\n".join(bad)


def test_no_cycle_across_folders():
  across = [comp for comp in cycles(core_graph()) if len({unit(m) for m in comp}) > 1]
  bad = [comp for comp in across if {unit(m) for m in comp} not in KNOWN_CYCLES]
  assert not bad, "\n".join(" <-> ".join(c) for c in bad)
  assert len(across) == len(KNOWN_CYCLES), "a known cycle is gone: remove it from KNOWN_CYCLES"


def test_mypy_checks_the_frontend():
  """The Tensor mixins are typed (frontend/base.py): no mypy override switches error codes off for them or for Tensor."""
  overrides = tomllib.loads((ROOT / "pyproject.toml").read_text()).get("tool", {}).get("mypy", {}).get("overrides", [])
  bad = [o for o in overrides if o.get("disable_error_code") or o.get("ignore_errors")
         if any(m.startswith(("tinygrad.frontend", "tinygrad.tensor")) for m in ([o["module"]] if isinstance(o["module"], str) else o["module"]))]
  assert not bad, f"pyproject.toml turns mypy checks off for the Tensor frontend: {bad}"


def test_the_checks_see_what_they_look_for(tmp_path: pathlib.Path):
  """The walker finds lazy, TYPE_CHECKING and relative imports; the cycle finder finds a cycle."""
  (pkg := tmp_path / "tinygrad/codegen").mkdir(parents=True)
  src = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n  from ..tensor import Tensor\ndef f():\n  from . import opt\n  import tinygrad.engine.realize\n"
  (pkg / "x.py").write_text(src)
  assert imports(pkg / "x.py", "tinygrad.codegen.x") == [("typing.TYPE_CHECKING", 1), ("tinygrad.tensor.Tensor", 3), ("tinygrad.codegen.opt", 5),
                                                          ("tinygrad.engine.realize", 6)]
  assert cycles({"a.x": {("b.y", 1)}, "b.y": {("c", 2)}, "c": {("a.x", 3)}, "d": {("a.x", 4)}}) == [["a.x", "b.y", "c"]]
  assert cycles({"a": {("b", 1)}, "b": set()}) == []


@pytest.mark.parametrize("src", BACKEND_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_backends_import_only_the_plugin_surface(src: pathlib.Path):
  files = sorted(src.rglob("*.py"))
  assert files
  bad = [f"{p.relative_to(ROOT)}:{line} imports {target}" for p in files for target, line in imports(p, module_name(p, src))
         if (target == "tinygrad" or target.startswith("tinygrad.")) and not target.startswith(PLUGIN_SURFACE + ".")]
  assert not bad, "\n".join(bad)
