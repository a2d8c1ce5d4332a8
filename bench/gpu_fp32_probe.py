"""Registers, spills and source of the float32 matmul kernel our codegen makes (issue 18: the fma tensor-core spec).

  DEV=CUDA python3 bench/gpu_fp32_probe.py 4096 [OUTDIR]

Prints one JSON line: kernel name, opts, launch dims, and (on a real CUDA device) cuFuncGetAttribute's NUM_REGS and
LOCAL_SIZE_BYTES (spills) of the loaded cubin. With OUTDIR the CUDA source is written there too.
"""
from __future__ import annotations

import json
import os
import sys

from tinygrad import Device, Tensor
from tinygrad.codegen.program import get_program


def main() -> None:
  n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
  a, b = Tensor.empty(n, n), Tensor.empty(n, n)
  item = (a @ b).schedule()[-1]
  r = Device.renderer(Device.DEFAULT)
  prog = get_program(item.ast, r)
  res = {"n": n, "name": prog.name, "opts": [str(o) for o in prog.opts], "global": list(prog.global_size), "local": list(prog.local_size)}
  lib = r.compiler.compile(prog.src)
  if len(sys.argv) > 2:
    tag = os.environ.get("PROBE_TAG", "")
    with open(os.path.join(sys.argv[2], f"fp32_{n}{tag}.cu"), "w") as f: f.write(prog.src)
    with open(os.path.join(sys.argv[2], f"fp32_{n}{tag}.cubin"), "wb") as f: f.write(lib)
  dev = Device[Device.DEFAULT]
  if hasattr(dev, "ctx"):
    from cuda.bindings import driver as cu
    p = dev.runtime(prog.name, lib)
    attr = cu.CUfunction_attribute
    res["regs"] = int(cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, p.fn)[1])
    res["local_bytes"] = int(cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, p.fn)[1])
    res["static_smem"] = int(cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, p.fn)[1])
  print(json.dumps(res), flush=True)


if __name__ == "__main__":
  main()
