"""python -m tinygrad.viz TRACE [--cli [--kernel N]] [--screenshot OUT.png] [--port P]: serve a recorded trace again, print it as
text, or render its page to a PNG in headless Chromium."""
from __future__ import annotations

import argparse
import sys

from tinygrad.viz.trace import load


def screenshot(trace_path: str, out: str) -> int:
  import threading

  from tinygrad.viz.browser import DevTools, Page, find_chromium
  from tinygrad.viz.server import make_server
  if (chromium := find_chromium()) is None:
    print("error: --screenshot needs Chromium (apt-get install chromium)", file=sys.stderr)
    return 1
  srv = make_server(trace_path, 0)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  try:
    with DevTools(chromium) as dt:
      page = Page(dt, f"http://127.0.0.1:{srv.server_address[1]}/")
      page.wait("window.vizState && window.vizState.trace !== null && window.vizState.drawn > 0", state="window.vizState")
      if page.js("document.querySelector('.krow')") is not None: page.js("document.querySelector('.krow').click()")
      page.wait("window.vizState.drawn > 0", state="window.vizState")
      print(page.screenshot(out))
  finally:
    srv.shutdown()
    srv.server_close()
  return 0


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.viz", description="Show a trace written by VIZ=1 / VIZ=2.")
  ap.add_argument("trace", help="the trace file (VIZ prints its path at exit)")
  ap.add_argument("--cli", action="store_true", help="print the kernels, rewrites and profile as text instead of serving")
  ap.add_argument("--kernel", type=int, default=None, help="with --cli: the rewrite steps of kernel N (its number in the list)")
  ap.add_argument("--screenshot", metavar="PNG", default=None, help="render the page (the kernel list and first kernel) to a PNG")
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
  if args.screenshot: return screenshot(args.trace, args.screenshot)
  from tinygrad.viz.server import serve
  serve(args.trace, args.port)
  return 0


if __name__ == "__main__": sys.exit(main())
