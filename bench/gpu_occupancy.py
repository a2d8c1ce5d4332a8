"""Occupancy of each kernel of a tinygrad.llm decode step on CUDA: registers a thread, shared memory, resident blocks an SM, waves.

  DEV=CUDA python3 bench/gpu_occupancy.py --synthetic llama1b        # settings (DECODE_FFN, ...) from the environment

Loads the model, captures the engine's greedy decode step, and for each distinct kernel asks the driver
(cuFuncGetAttribute NUM_REGS / SHARED_SIZE_BYTES, cuOccupancyMaxActiveBlocksPerMultiprocessor) how many of its blocks fit on an
SM and how many waves its grid takes on this GPU. Prints JSON, one entry a kernel, in launch order.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  from llm_decode import add_model_args
  add_model_args(ap)
  args = ap.parse_args()
  args.tokens = 0
  from cuda.bindings import driver as cu
  from llm_decode import resolve
  from tinygrad import Device, dtypes
  from tinygrad.llm.engine import LLM
  llm = LLM.load(resolve(args), max_context=1024, cache_dtype=dtypes.float16)
  ids = llm.chat_ids([{"role": "user", "content": "Write a short story about a robot who learns to paint."}])
  llm.prefill(ids)
  pos = len(ids)
  jit = llm._step_for(llm.model.attn_len(pos + 1), "greedy")
  for _ in range(3): jit(llm._v_start.bind(pos), [])
  sms = cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0)[1]
  seen, out = set(), []
  for ei, vals in jit.captured:
    if ei.runner is None or ei.runner.spec.name in seen: continue
    seen.add(ei.runner.spec.name)
    prg = ei.runner.program
    attr = cu.CUfunction_attribute
    regs = cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, prg.fn)[1]
    smem = cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, prg.fn)[1] + prg.shared_bytes
    launch = ei.runner.launch(ei.bufs, {**vals, llm._v_start.arg[0]: pos})
    threads = launch.local_size[0] * launch.local_size[1] * launch.local_size[2]
    blocks = launch.global_size[0] * launch.global_size[1] * launch.global_size[2]
    per_sm = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(prg.fn, threads, prg.shared_bytes)[1]
    out.append({"name": ei.runner.spec.name, "regs": regs, "smem": smem, "threads": threads, "blocks": blocks, "per_sm": per_sm,
                "waves": round(blocks / (per_sm * sms), 3) if per_sm else None})
    print(out[-1], file=sys.stderr)
  print(json.dumps({"benchmark": "gpu_occupancy", "device": Device.DEFAULT, "sms": sms, "kernels": out}))


if __name__ == "__main__": main()
