"""Run every benchmark script (one process each, one after another) and print a summary table.

  uv run python bench/run_all.py                     # all of them
  uv run python bench/run_all.py matmul sum          # some
  uv run python bench/run_all.py --json out.json     # also keep every JSON object

Each script's JSON object is printed as it finishes (one line each), then the table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

BENCH = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = ["matmul", "elementwise_add", "sum", "softmax", "conv2d", "mlp_step", "mlp_cold", "jit_overhead"]
SIDES = [("ours", "ours"), ("ours_beam2", "ours BEAM=2"), ("numpy", "numpy"), ("torch", "torch"), ("tinygrad_0.14", "tinygrad 0.14")]


def fmt(x: Any) -> str:
  if not isinstance(x, (int, float)): return "-"
  return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def table(results: list[dict[str, Any]]) -> str:
  head = ["benchmark", "unit", *(label for _, label in SIDES), "ours vs numpy", "ours vs tinygrad 0.14"]
  rows = [head, ["---"] * len(head)]
  for r in results:
    for case, figs in r.get("figures", {}).items():
      ratios = r.get("ratios", {}).get(case, {})
      best = {p: max((v for k, v in ratios.items() if k.endswith(f"_vs_{p}")), default=None) for p in ("numpy", "tinygrad_0.14")}
      rows.append([case, r["units"][case], *(fmt(figs.get(side)) for side, _ in SIDES),
                   f"{fmt(best['numpy'])}x" if best["numpy"] else "-", f"{fmt(best['tinygrad_0.14'])}x" if best["tinygrad_0.14"] else "-"])
  return "\n".join("| " + " | ".join(row) + " |" for row in rows) + \
    "\n\nratios > 1: ours is better (faster, or more GFLOP/s or GB/s); with BEAM=2 where that is better"


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("scripts", nargs="*", default=SCRIPTS, help=f"which ({', '.join(SCRIPTS)})")
  ap.add_argument("--json", help="write the list of JSON objects here")
  args = ap.parse_args()
  results: list[dict[str, Any]] = []
  for name in args.scripts:
    st = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.join(BENCH, f"{name}.py")], capture_output=True, text=True)
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), None)
    res = json.loads(line) if line else {"benchmark": name, "error": (p.stderr or p.stdout)[-2000:]}
    res["wall_s"] = round(time.perf_counter() - st, 1)
    print(json.dumps(res), flush=True)
    results.append(res)
  if args.json:
    with open(args.json, "w") as f: json.dump(results, f, indent=1)
  print()
  print(table(results))
  errors = [r for r in results if "error" in r]
  for r in errors: print(f"{r['benchmark']} failed: {r['error']}", file=sys.stderr)
  sys.exit(1 if errors else 0)


if __name__ == "__main__": main()
