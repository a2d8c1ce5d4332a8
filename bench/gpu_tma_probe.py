"""Registers, spills and shared memory of the kernels one fp16/bf16 matmul compiles to, with the cubins (for cuobjdump/nvdisasm):
whatever TC_TMA / TC_STAGES / ... say. Prints one JSON line per kernel.

  PYTHONPATH=packages/core/src:packages/backend-nv/src DEV=CUDA::sm_90a python3 bench/gpu_tma_probe.py [N] [float16] [OUTDIR]
"""
from __future__ import annotations

import json
import os
import sys


def main() -> None:
  n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
  dtname = sys.argv[2] if len(sys.argv) > 2 else "float16"
  outdir = sys.argv[3] if len(sys.argv) > 3 else None
  from cuda.bindings import driver as cu
  from tinygrad import Tensor, dtypes
  from tinygrad_backend_nv import runtime
  init = runtime.CUDAProgram.__init__

  def probed(self, ctx, name: str, lib: bytes) -> None:
    init(self, ctx, name, lib)
    attr = cu.CUfunction_attribute
    got = {k: int(cu.cuFuncGetAttribute(getattr(attr, f"CU_FUNC_ATTRIBUTE_{k}"), self.fn)[1])
           for k in ("NUM_REGS", "LOCAL_SIZE_BYTES", "SHARED_SIZE_BYTES", "MAX_THREADS_PER_BLOCK")}
    print(json.dumps({"kernel": name, "dynamic_shared": self.shared_bytes, "tensor_maps": len(self.tensor_maps), **got}), flush=True)
    if outdir:
      with open(os.path.join(outdir, f"{name}.cubin"), "wb") as f: f.write(lib)

  runtime.CUDAProgram.__init__ = probed  # type: ignore[method-assign]
  dt = getattr(dtypes, dtname)
  a, b = Tensor.empty(n, n, dtype=dt), Tensor.empty(n, n, dtype=dt)
  (a @ b).realize()


if __name__ == "__main__":
  main()
