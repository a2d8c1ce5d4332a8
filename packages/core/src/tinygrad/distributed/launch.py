"""`python -m tinygrad.distributed.launch -n N script.py [args]`: N local processes with the variables torchrun sets
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). `-m module` runs a module instead of a
script. If one process fails, the others are stopped; the exit code is the first failure's. Each rank's output is
forwarded a whole line at a time, so lines of different ranks never mix within a line."""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import BinaryIO, TextIO


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def worker_env(rank: int, world: int, port: int, base: dict[str, str] | None = None) -> dict[str, str]:
  env = dict(os.environ if base is None else base)
  env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
             MASTER_ADDR=env.get("MASTER_ADDR", "127.0.0.1"), MASTER_PORT=str(port))
  env.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast: it can wedge GPUs that others share
  return env


def _forward_lines(src: BinaryIO, dst: TextIO, lock: threading.Lock) -> None:
  # one write per line under a lock: ranks that write a line in pieces (unbuffered stdout) still print it whole
  for line in iter(src.readline, b""):
    with lock:
      dst.write(line.decode(errors="replace"))
      dst.flush()
  src.close()


def launch(n: int, argv: list[str], port: int | None = None, timeout: float | None = None) -> int:
  """Run `argv` (a python command line after `python`) n times; the exit code of the first process that failed, else 0."""
  port = port or int(os.environ.get("MASTER_PORT", 0)) or free_port()
  procs = [subprocess.Popen([sys.executable, *argv], env=worker_env(r, n, port), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
           for r in range(n)]
  locks = {"out": threading.Lock(), "err": threading.Lock()}
  forwarders = [threading.Thread(target=_forward_lines, args=(src, dst, locks[name]), daemon=True)
                for p in procs for name, src, dst in (("out", p.stdout, sys.stdout), ("err", p.stderr, sys.stderr))]
  for t in forwarders: t.start()
  deadline = None if timeout is None else time.monotonic() + timeout
  code = 0
  try:
    while [p.poll() for p in procs].count(None):  # poll every process: each one's returncode must be fresh
      failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
      if failed or (deadline is not None and time.monotonic() > deadline):
        code = failed[0] if failed else 124
        if not failed: print(f"tinygrad.distributed.launch: timed out after {timeout}s, stopping the ranks", file=sys.stderr)
        break
      time.sleep(0.05)
  finally:
    for p in procs:
      if p.poll() is None: p.send_signal(signal.SIGTERM)
    for p in procs:
      try: p.wait(timeout=10)
      except subprocess.TimeoutExpired: p.kill()
    for t in forwarders: t.join(timeout=10)
  if code == 0: code = next((p.returncode for p in procs if p.returncode), 0)
  if code: print(f"tinygrad.distributed.launch: exit codes by rank {[p.returncode for p in procs]}", file=sys.stderr)
  return code


def main(args: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.distributed.launch", description=__doc__)
  ap.add_argument("-n", "--nproc", type=int, required=True, help="number of processes (one per GPU for NCCL)")
  ap.add_argument("--port", type=int, default=None, help="MASTER_PORT (default: $MASTER_PORT or a free port)")
  ap.add_argument("--timeout", type=float, default=None, help="stop every rank after this many seconds (exit code 124)")
  ap.add_argument("-m", dest="module", default=None, help="run a module (python -m) instead of a script")
  ap.add_argument("script", nargs="?", help="the script to run")
  ap.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
  ns = ap.parse_args(args)
  if ns.nproc < 1: ap.error("-n must be at least 1")
  if ns.module: argv = ["-m", ns.module, *([ns.script] if ns.script else []), *ns.args]
  elif ns.script: argv = [ns.script, *ns.args]
  else: ap.error("give a script (or -m module) to run")
  return launch(ns.nproc, argv, ns.port, ns.timeout)


if __name__ == "__main__": sys.exit(main())
