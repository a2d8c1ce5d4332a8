"""The public API surface of tinygrad, dumped and compared: every public name and `inspect.signature` of Tensor, dtypes,
nn (layers, optim, state), Device, TinyJit, Variable, Context and the settings in helpers.

  # tinygrad 0.14.0's side, in a venv that has it (never imported next to ours):
  /tmp/tgvenv/bin/python bench/api_diff.py dump /tmp/api_tinygrad.json
  # ours, and the diff (names they have that we lack, and signatures whose parameters differ):
  uv run python bench/api_diff.py dump /tmp/api_ours.json
  uv run python bench/api_diff.py diff /tmp/api_tinygrad.json /tmp/api_ours.json

A signature differs when a parameter of theirs is missing here, or when their parameter order (the positional part) is not a
prefix of ours; extra keyword parameters of ours, defaults and annotations are not compared. Lines in docs/differences.md
of the form `- \\`Scope.name\\`` mark a difference as documented: `diff --undocumented-only` omits those.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import sys
from typing import Any

os.environ.setdefault("DEV", "PYTHON")  # importing must not need a compiler


def _sig(obj: Any) -> list[list[str]] | None:
  """[[name, kind], ...] of a callable's parameters, or None when it has no inspectable signature."""
  fn = obj.fget if isinstance(obj, property) else obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
  if not callable(fn): return None
  try: params = inspect.signature(fn).parameters.values()
  except (TypeError, ValueError): return None
  return [[p.name, p.kind.name] for p in params if p.name not in ("self", "cls")]


def _members(obj: Any) -> dict[str, Any]:
  """Public attributes of a class or module, with their signature (None for plain values)."""
  out: dict[str, Any] = {}
  for name in dir(obj):
    if name.startswith("_"): continue
    try: raw = inspect.getattr_static(obj, name)
    except AttributeError: continue
    if inspect.ismodule(raw): continue
    out[name] = {"kind": type(raw).__name__, "sig": _sig(raw)}
  return out


def dump() -> dict[str, Any]:
  import tinygrad
  from tinygrad import Context, Device, Tensor, TinyJit, Variable, dtypes
  nn = importlib.import_module("tinygrad.nn")
  optim = importlib.import_module("tinygrad.nn.optim")
  state = importlib.import_module("tinygrad.nn.state")
  helpers = importlib.import_module("tinygrad.helpers")
  surface: dict[str, Any] = {
    "tinygrad": {n: {"kind": type(getattr(tinygrad, n)).__name__, "sig": None} for n in dir(tinygrad) if not n.startswith("_")
                 and not inspect.ismodule(getattr(tinygrad, n))},
    "Tensor": _members(Tensor), "dtypes": _members(dtypes), "Device": _members(type(Device)), "TinyJit": _members(TinyJit),
    "Variable": _members(Variable), "Context": _members(Context),
  }
  surface["Tensor.__init__"] = {"__init__": {"kind": "function", "sig": _sig(Tensor.__init__)}}
  surface["TinyJit.__init__"] = {"__init__": {"kind": "function", "sig": _sig(TinyJit.__init__)}}
  for modname, mod in (("nn", nn), ("nn.optim", optim), ("nn.state", state)):
    surface[modname] = {}
    for n, v in vars(mod).items():
      # what the module defines or lists in __all__ (not what it merely imports), plus the layers nn re-exports from submodules
      exported = getattr(v, "__module__", "").startswith(mod.__name__) or n in getattr(mod, "__all__", ())
      if n.startswith("_") or inspect.ismodule(v) or not exported: continue
      if not (inspect.isclass(v) or inspect.isfunction(v)): continue
      surface[modname][n] = {"kind": type(v).__name__, "sig": _sig(v.__init__ if inspect.isclass(v) else v)}
      if inspect.isclass(v):
        surface[f"{modname}.{n}"] = {m: d for m, d in _members(v).items()}
  settings = {n: v for n, v in ContextVars(helpers).items()}
  surface["helpers.settings"] = {n: {"kind": "ContextVar", "sig": None} for n in settings}
  surface["helpers"] = {n: {"kind": type(v).__name__, "sig": None} for n, v in vars(helpers).items()
                        if re.fullmatch(r"[A-Z][A-Z0-9_]*", n) and not isinstance(v, type) and n not in settings}
  return surface


def ContextVars(helpers: Any) -> dict[str, Any]:  # noqa: N802  the name reads like the class it collects
  reg = getattr(helpers.ContextVar, "_registry", None) or getattr(helpers.ContextVar, "_cache", {})
  return dict(reg)


def _documented(path: str) -> set[str]:
  if not os.path.exists(path): return set()
  return set(re.findall(r"^- `([^`]+)`", open(path).read(), re.M))


def diff(theirs: dict[str, Any], ours: dict[str, Any], documented: set[str], undocumented_only: bool) -> list[str]:
  lines = []
  for scope, members in sorted(theirs.items()):
    mine = ours.get(scope, {})
    for name, info in sorted(members.items()):
      key = f"{scope}.{name}"
      if undocumented_only and (key in documented or scope in documented): continue
      if name not in mine:
        lines.append(f"missing    {key}")
        continue
      a, b = info["sig"], mine[name]["sig"]
      if a is None or b is None: continue
      bnames = [p[0] for p in b]
      has_var_kw = any(p[1] == "VAR_KEYWORD" for p in b)
      missing = [p[0] for p in a if p[0] not in bnames and p[1] not in ("VAR_POSITIONAL", "VAR_KEYWORD") and not has_var_kw]
      pos_a = [p[0] for p in a if p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
      pos_b = [p[0] for p in b if p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
      reordered = pos_b[:len(pos_a)] != pos_a and not missing and len(pos_b) >= len(pos_a)
      if missing: lines.append(f"signature  {key}: lacks {', '.join(missing)} (theirs: {', '.join(p[0] for p in a)})")
      elif reordered: lines.append(f"signature  {key}: positional order {pos_b} vs theirs {pos_a}")
  return lines


def main(argv: list[str]) -> int:
  if len(argv) >= 2 and argv[0] == "dump":
    with open(argv[1], "w") as f: json.dump(dump(), f, indent=1, sort_keys=True)
    return 0
  if len(argv) >= 3 and argv[0] == "diff":
    theirs, ours = (json.load(open(p)) for p in argv[1:3])
    doc = os.path.join(os.path.dirname(__file__), "..", "docs", "differences.md")
    lines = diff(theirs, ours, _documented(doc), "--undocumented-only" in argv)
    print("\n".join(lines) if lines else "no differences")
    print(f"{len(lines)} line(s)", file=sys.stderr)
    return 0
  print(__doc__)
  return 2


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
