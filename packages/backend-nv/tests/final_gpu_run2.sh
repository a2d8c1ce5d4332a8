#!/usr/bin/env bash
# Second short pass on a 2-GPU H200 machine: peer copies for all-reduce, float4 reductions, data-parallel step.
set -u
export PYTHONPATH=packages/core/src:packages/backend-nv/src:packages/backend-cpu/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
DEV=CUDA timeout 60 python3 -m pytest -q -p no:cacheprovider packages/core/tests/test_data_parallel.py -k "not three" 2>&1 | tail -2
DEV=CUDA timeout 60 python3 bench/gpu_elementwise.py > "$OUT/gpu_elementwise.json" 2> "$OUT/gpu_elementwise.log"
DEV=CUDA timeout 60 python3 bench/allreduce.py --devices CUDA:0,CUDA:1 > "$OUT/allreduce.json" 2> "$OUT/allreduce.log"
BENCH_SIZES=8192 BENCH_DTYPES=float32 DEV=CUDA:PTX timeout 60 python3 bench/gpu_matmul.py > "$OUT/gpu_matmul_ptx.json" 2> "$OUT/gpu_matmul_ptx.log"
for f in "$OUT"/*.json; do echo "== $f"; cat "$f"; echo; done
