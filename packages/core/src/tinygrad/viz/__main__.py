"""python -m tinygrad.viz TRACE [--cli [--kernel N]] [--port P]: serve a recorded trace again, or print it as text."""
from __future__ import annotations

import argparse
import sys

from tinygrad.viz.trace import load


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.viz", description="Show a trace written by VIZ=1 / VIZ=2.")
  ap.add_argument("trace", help="the trace file (VIZ prints its path at exit)")
  ap.add_argument("--cli", action="store_true", help="print the kernels, rewrites and profile as text instead of serving")
  ap.add_argument("--kernel", type=int, default=None, help="with --cli: the rewrite steps of kernel N (its number in the list)")
  ap.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: any free one)")
  args = ap.parse_args(argv)
  try: trace = load(args.trace)
  except (OSError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  if args.cli:
    from tinygrad.viz.cli import report
    print(report(trace, args.kernel))
    return 0
  from tinygrad.viz.server import serve
  serve(args.trace, args.port)
  return 0


if __name__ == "__main__": sys.exit(main())
