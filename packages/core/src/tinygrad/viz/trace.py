"""The trace file: one JSON object, versioned, written by the recorder and read by the page, the server and the CLI.

  format, version     "tinygrad-viz", 1
  meta                argv, pid, creation time, profile (False: PROFILE=0, no events), the limits in force and what they dropped
  nodes               [op, dtype, arg, [src node indices]]: every UOp any stored graph reaches, each once (UOps are
                      hash-consed, so a node that a pass leaves alone keeps its index: that is how a step shows what changed)
  rules               [location "file.py:line" of the rule's function, its source line, the ops its pattern matches]
  kernels             {name, kind ("kernel" | "group"), device, src, disasm, opts, ops, mem, global_size, local_size,
                       steps: [{name, kind ("rewrite" | "stage"), loc, before, after (node index or null: over the node cap),
                                matches: [[rule index, matched node, result node]], more_matches}],
                       dropped_steps, runs, time_s}
  schedules           [[kernel index, or -1 for a copy, ...]]: the items of each schedule run, in order (capped)
  events              {dev, name, kind ("kernel" | "copy"), kernel, st, dur (microseconds), ops, mem, bytes}
"""
from __future__ import annotations

import gzip
import json
import pathlib
from typing import Any

FORMAT, VERSION = "tinygrad-viz", 1


def save(trace: dict[str, Any], path: str | pathlib.Path) -> None:
  pathlib.Path(path).write_text(json.dumps(trace, separators=(",", ":")))


def load(path: str | pathlib.Path) -> dict[str, Any]:
  """The trace at `path` (gzipped or not); a clear error for a file that is not one, or of a version we can't read."""
  raw = pathlib.Path(path).read_bytes()
  try: trace = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)  # traces compress ~10x: keep them as .json.gz
  except (json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError) as e: raise ValueError(f"{path}: not a VIZ trace ({type(e).__name__}: {e})") from None
  if not isinstance(trace, dict) or trace.get("format") != FORMAT: raise ValueError(f"{path}: not a VIZ trace (no format {FORMAT!r})")
  if trace.get("version") != VERSION: raise ValueError(f"{path}: VIZ trace version {trace.get('version')}, this tinygrad reads {VERSION}")
  return trace


def empty(meta: dict[str, Any]) -> dict[str, Any]:
  return {"format": FORMAT, "version": VERSION, "meta": meta, "nodes": [], "rules": [], "kernels": [], "schedules": [], "events": []}


def graph_of(trace: dict[str, Any], root: int) -> list[int]:
  """The node indices reachable from `root`, sources before users."""
  nodes, order, seen, stack = trace["nodes"], [], set(), [(root, False)]
  while stack:
    i, done = stack.pop()
    if done: order.append(i)
    elif i not in seen:
      seen.add(i)
      stack.append((i, True))
      stack.extend((s, False) for s in reversed(nodes[i][3]) if s not in seen)
  return order
