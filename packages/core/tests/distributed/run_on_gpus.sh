#!/usr/bin/env bash
# tinygrad.distributed on a machine with 2+ NVIDIA GPUs, from a source checkout, without uv or installs:
#   bash packages/core/tests/distributed/run_on_gpus.sh              # every stage
#   bash packages/core/tests/distributed/run_on_gpus.sh bench        # only some (unit, collectives, dp, bench, inprocess)
# Needs python3 with numpy, pluggy, pytest, cuda-bindings, nvidia-cuda-nvrtc and a libnccl.so.2 (torch's nvidia/nccl/lib
# or the nvidia-nccl-cu13 wheel; TINYGRAD_NCCL_LIB=/path overrides); torch for the bench's comparison.
# Each stage is time-bound (STAGE_TIMEOUT, default 600 s); logs and JSON go to $LOGDIR ($OUT if set). A summary is last.
set -u
cd "$(dirname "$0")/../../../.."
NGPU=${NGPU:-2}
LOGDIR_DEFAULT=./dist_gpu_logs
source packages/backend-nv/tests/gpu_common.sh
export DEV=${DEV:-CUDA}
T=${STAGE_TIMEOUT:-600}
LAUNCH="$PY -m tinygrad.distributed.launch -n $NGPU --timeout $T"
STAGES=${*:-unit collectives dp bench inprocess}
print_environment
$PY - <<'PYEOF' 2>&1 | tee "$LOGDIR/environment.txt"
from tinygrad_backend_nv import nccl
print("libnccl candidates:", nccl.candidates()[:3])
try: print("NCCL", nccl.version(), "from", nccl.load_nccl()._name)
except Exception as e: print("NCCL NOT USABLE:", e)
PYEOF
NG=$($PY -c "from tinygrad_backend_nv.runtime import driver_status; print(driver_status()[0])" 2>/dev/null || echo 0)
if [ "$NG" -lt "$NGPU" ]; then echo "ERROR: this machine has $NG GPU(s); the stages need NGPU=$NGPU"; exit 2; fi

for stage in $STAGES; do
  case $stage in
    unit)
      echo "=== unit: NCCL ctypes layer and the store/launcher tests"
      timeout $T $PY -m pytest -q -p no:cacheprovider -rs packages/backend-nv/tests/test_nccl.py packages/core/tests/distributed/test_store.py \
        > "$LOGDIR/unit.log" 2>&1
      rc=$?; fail_if $rc
      tail -5 "$LOGDIR/unit.log"
      note "unit (exit $rc): $(grep -E '[0-9]+ (passed|failed)' "$LOGDIR/unit.log" | tail -1)" ;;
    collectives)
      echo "=== collectives on NCCL, $NGPU processes (every collective vs numpy, eager and TinyJit)"
      timeout $T $LAUNCH packages/core/tests/distributed/collectives_worker.py nccl > "$LOGDIR/collectives.log" 2>&1
      rc=$?; fail_if $rc
      tail -8 "$LOGDIR/collectives.log"
      note "collectives nccl x$NGPU: exit $rc, $(grep -c 'checks passed' "$LOGDIR/collectives.log")/$NGPU ranks passed" ;;
    dp)
      echo "=== examples/data_parallel_mlp.py: $NGPU GPUs (NCCL) vs 1 GPU, same seed and global batch"
      ARGS="--steps 20 --batch 64 --hidden 256"
      timeout $T $PY examples/data_parallel_mlp.py $ARGS --out "$LOGDIR/dp_w1.npz" > "$LOGDIR/dp_1gpu.log" 2>&1
      rc1=$?; fail_if $rc1
      timeout $T $LAUNCH examples/data_parallel_mlp.py $ARGS --out "$LOGDIR/dp_w$NGPU.npz" > "$LOGDIR/dp_${NGPU}gpu.log" 2>&1
      rc2=$?; fail_if $rc2
      tail -n 3 "$LOGDIR/dp_1gpu.log" "$LOGDIR/dp_${NGPU}gpu.log"
      cmp=$($PY - "$LOGDIR/dp_w1.npz" "$LOGDIR/dp_w$NGPU.npz" <<'PYEOF' 2>&1
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
diff = max(float(np.abs(a[k] - b[k]).max()) for k in a.files)
ok = all(np.allclose(a[k], b[k], rtol=1e-4, atol=1e-5) for k in a.files)
print(f"{'EQUAL' if ok else 'DIFFERENT'} weights (max abs diff {diff:.3g})")
PYEOF
)
      case $cmp in EQUAL*) ;; *) FAILED=1 ;; esac
      note "dp example 1 GPU (exit $rc1) vs $NGPU GPUs (exit $rc2): $cmp" ;;
    bench)
      echo "=== bench/allreduce_nccl.py: 256 MiB, ours vs torch.distributed NCCL"
      timeout $T $PY bench/allreduce_nccl.py -n $NGPU --json "$LOGDIR/allreduce_nccl.json" > "$LOGDIR/allreduce_nccl.out" 2> "$LOGDIR/allreduce_nccl.log"
      rc=$?; fail_if $rc
      tail -5 "$LOGDIR/allreduce_nccl.log"
      note "bench allreduce_nccl (exit $rc): $(cat "$LOGDIR/allreduce_nccl.out")" ;;
    inprocess)
      echo "=== bench/allreduce.py: in one process over CUDA:0..$((NGPU - 1)), our ring vs NCCL (ncclCommInitAll), 256 MiB"
      DEVS=$(seq -s, -f "CUDA:%g" 0 $((NGPU - 1)))
      timeout $T $PY bench/allreduce.py --devices $DEVS --modes ring,nccl --runs 10 --no-torch > "$LOGDIR/allreduce_inprocess.json" 2> "$LOGDIR/allreduce_inprocess.log"
      rc=$?; fail_if $rc
      tail -5 "$LOGDIR/allreduce_inprocess.log"
      note "bench allreduce in-process ring vs nccl (exit $rc): $($PY -c "import json,sys; r=json.load(open(sys.argv[1]))['ours']; print({m: (round(v['busbw_gbs'], 1), v['correct']) for m, v in r.items()})" "$LOGDIR/allreduce_inprocess.json" 2>&1)" ;;
    *) echo "unknown stage $stage (unit, collectives, dp, bench, inprocess)"; exit 2 ;;
  esac
done

summary
