#!/usr/bin/env bash
# One short pass on a 2-GPU H200 machine: correctness subset on both renderers, multi-GPU tests, benches.
# Run from the repo root: bash packages/backend-nv/tests/final_gpu_run.sh   (results also under $OUT)
set -u
export PYTHONPATH=packages/core/src:packages/backend-nv/src:packages/backend-cpu/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
nvidia-smi -L
X=""; python3 -c "import xdist" 2>/dev/null && X="-n 8"
for dev in CUDA CUDA:PTX; do
  DEV=$dev timeout 110 python3 -m pytest -q -p no:cacheprovider $X packages/core/tests/test_programs.py packages/core/tests/test_schedule.py \
    packages/core/tests/test_elementwise_api.py packages/core/tests/test_reduce_api.py 2>&1 | tail -2 | tee "$OUT/tests_$dev.txt"
done
DEV=CUDA timeout 90 python3 -m pytest -q -p no:cacheprovider packages/core/tests/test_data_parallel.py 2>&1 | tail -2 | tee "$OUT/data_parallel.txt"
DEV=CUDA timeout 60 python3 bench/gpu_elementwise.py > "$OUT/gpu_elementwise.json" 2> "$OUT/gpu_elementwise.log"
DEV=CUDA timeout 120 python3 bench/gpu_matmul.py > "$OUT/gpu_matmul.json" 2> "$OUT/gpu_matmul.log"
DEV=CUDA timeout 60 python3 bench/allreduce.py --devices CUDA:0,CUDA:1 > "$OUT/allreduce.json" 2> "$OUT/allreduce.log"
for f in "$OUT"/*.json; do echo "== $f"; cat "$f"; echo; done
for f in "$OUT"/*.log; do echo "== $f"; tail -3 "$f"; done
