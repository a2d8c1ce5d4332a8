"""A trace as text, for terminals and CI logs: the kernel list, one kernel's rewrite steps, and the profile per device."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from tinygrad.viz.trace import graph_of


def _rate(amount: float, seconds: float) -> float: return amount / seconds * 1e-9 if seconds > 0 else 0.0


def kernel_list(trace: dict[str, Any]) -> list[str]:
  lines = [f"{'#':>3}  {'kernel':34s} {'device':16s} {'steps':>5} {'runs':>5} {'total us':>10} {'GFLOP/s':>8} {'GB/s':>8}"]
  for i, k in enumerate(trace["kernels"]):
    avg = k["time_s"] / k["runs"] if k["runs"] else 0.0
    lines.append(f"{i:>3}  {k['name'][:34]:34s} {k['device'][:16]:16s} {len(k['steps']):>5} {k['runs']:>5} {k['time_s'] * 1e6:>10.1f} "
                 f"{_rate(k['ops'], avg):>8.2f} {_rate(k['mem'], avg):>8.2f}")
  return lines


def kernel_steps(trace: dict[str, Any], n: int) -> list[str]:
  if not 0 <= n < len(trace["kernels"]): return [f"no kernel {n}: the trace has {len(trace['kernels'])} (0..{len(trace['kernels']) - 1})"]
  k, rules, nodes = trace["kernels"][n], trace["rules"], trace["nodes"]
  lines = [f"kernel {n}: {k['name']} on {k['device'] or '-'}  opts: {' '.join(k['opts']) or 'none'}"]
  def size(i: int | None) -> str: return "?" if i is None else str(len(graph_of(trace, i)))
  for s, step in enumerate(k["steps"]):
    lines.append(f"  step {s:>3} {step['kind']:7s} {step['name']:24s} {step['loc']:34s} nodes {size(step['before'])} -> {size(step['after'])}")
    fired = Counter(m[0] for m in step["matches"])
    for rule, count in fired.most_common():
      loc, text, ops = rules[rule]
      lines.append(f"             {count:>4} x {loc:24s} on {ops[:20]:20s} {text[:80]}")
    for m in step["matches"][:3]:  # the first few rewrites, node by node
      if m[1] is not None and m[2] is not None: lines.append(f"             e.g. {nodes[m[1]][0]} -> {nodes[m[2]][0]}  ({rules[m[0]][0]})")
    if step["more_matches"]: lines.append(f"             ... {step['more_matches']} more matches not stored")
  if k["dropped_steps"]: lines.append(f"  ... {k['dropped_steps']} more steps not stored (VIZ_MAX_STEPS)")
  if k["src"]: lines += ["  source:"] + ["    " + line for line in k["src"].splitlines()]
  if k["disasm"]: lines += ["  disassembly:"] + ["    " + line for line in k["disasm"].splitlines()[:200]]
  return lines


def profile(trace: dict[str, Any], top: int = 10) -> list[str]:
  by_dev: dict[str, list[dict]] = defaultdict(list)
  for e in trace["events"]: by_dev[e["dev"]].append(e)
  lines = []
  for dev, events in by_dev.items():
    busy = sum(e["dur"] for e in events)
    span = max(e["st"] + e["dur"] for e in events) - min(e["st"] for e in events)
    lines.append(f"{dev}: {len(events)} runs, busy {busy:.1f} us of {span:.1f} us")
    per_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0, 0])
    for e in events:
      acc = per_name[e["name"]]
      acc[0], acc[1], acc[2], acc[3] = acc[0] + 1, acc[1] + e["dur"], acc[2] + e["ops"], acc[3] + e["mem"]
    for name, (count, us, ops, mem) in sorted(per_name.items(), key=lambda kv: -kv[1][1])[:top]:
      lines.append(f"  {name[:40]:40s} {int(count):>6} x {us / count:>9.2f} us  {_rate(ops, us * 1e-6):>8.2f} GFLOP/s {_rate(mem, us * 1e-6):>8.2f} GB/s")
  return lines or ["no runs recorded"]


def schedules(trace: dict[str, Any], top: int = 10) -> list[str]:
  """Each distinct schedule that ran (kernels and copies in order), most frequent first."""
  names = [k["name"] for k in trace["kernels"]]
  seen = Counter(tuple(s) for s in trace["schedules"])
  lines = [f"{len(trace['schedules'])} schedules run, {len(seen)} distinct"]
  for items, count in seen.most_common(top):
    shown = ", ".join("copy" if i < 0 else f"{i}:{names[i]}" for i in items[:12]) + (f", ... {len(items) - 12} more" if len(items) > 12 else "")
    lines.append(f"  {count:>5} x {len(items):>3} items: {shown}")
  return lines


def report(trace: dict[str, Any], kernel: int | None = None) -> str:
  meta = trace["meta"]
  dropped = {k: v for k, v in meta["dropped"].items() if v}
  lines = [f"VIZ trace v{trace['version']}: {' '.join(meta['argv'])}",
           f"limits: {', '.join(f'{k}={v}' for k, v in meta['limits'].items())}" + (f"; dropped: {dropped}" if dropped else ""), "",
           "kernels:", *kernel_list(trace), ""]
  if kernel is not None: lines += ["rewrites:", *kernel_steps(trace, kernel), ""]
  lines += ["schedules:", *schedules(trace), "", "profile:", *profile(trace)]
  return "\n".join(lines)
