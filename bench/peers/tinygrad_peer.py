"""Runs one workload of bench/workloads.py with whatever tinygrad is importable, and prints its figures as JSON.

Meant for tinygrad 0.14.0 in an isolated environment (bench/common.py runs it like this):
  CC=clang-19 uv run --isolated --no-project --with tinygrad==0.14.0 python bench/peers/tinygrad_peer.py matmul_1024
tinygrad 0.14's CPU device compiles C with `$CC` (default `clang`): where only a versioned clang is installed
(`clang-19`), CC must name it, or the device reports "no usable devices".
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
  import tinygrad
  from tinygrad import Device
  from workloads import WORKLOADS
  which = sys.argv[1]
  res = WORKLOADS[which]()
  version = getattr(tinygrad, "__version__", None)
  if version is None:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version
    try: version = dist_version("tinygrad")
    except PackageNotFoundError: version = "?"
  print(json.dumps({**res, "version": version, "device": Device.DEFAULT, "cc": os.environ.get("CC", "clang")}))


if __name__ == "__main__": main()
