#!/usr/bin/env bash
# One pass on an H200 machine (no uv, no installs), from the repo root: backend-nv's GPU tests (CUDA graphs), the
# reduction/JIT-overhead bench with a sweep of split sizes, gpu_elementwise, then the core suite with DEV=CUDA and
# DEV=CUDA:PTX side by side (all tests, no -x). Logs and JSON go to $OUT; a summary is printed last.
#   bash packages/backend-nv/tests/gpu_graph_reduce_run.sh
set -u
# BASELINE=DIR first times bench/gpu_reduce.py (no sweep) against the packages of another checkout at DIR.
# STAGES picks stages: tests bench core (default all). The core suite's doc tests start subprocesses with their own
# PYTHONPATH, so the source packages also go into site-packages through a .pth file (the machine is a scratch one).
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
STAGES=${STAGES:-tests bench core}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -2
python3 -c "import cuda.bindings, torch, xdist; print('cuda-bindings', cuda.bindings.__version__, 'torch', torch.__version__)"
export PYTHONUNBUFFERED=1
if [ -n "${BASELINE:-}" ]; then
  el "baseline bench from $BASELINE"
  PYTHONPATH=$BASELINE/packages/core/src:$BASELINE/packages/backend-nv/src TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin DEV=CUDA \
    timeout 90 python3 bench/gpu_reduce.py > "$OUT/baseline_reduce.json" 2> "$OUT/baseline_reduce.log"
  grep -v Warning "$OUT/baseline_reduce.log" | tail -8
fi
SITE=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
printf '%s\n' "$PWD/packages/core/src" "$PWD/packages/backend-nv/src" "$PWD/packages/backend-cpu/src" > "$SITE/tinygrad_src.pth"
export TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin,tinygrad_backend_cpu.plugin

case " $STAGES " in *" tests "*)
el "backend-nv tests"
DEV=CUDA timeout ${T_TESTS:-60} python3 -m pytest -q -p no:cacheprovider -rfEs packages/backend-nv/tests/test_nv_graph.py \
  packages/backend-nv/tests/test_nv_gpu.py > "$OUT/nv_tests.log" 2>&1
tail -15 "$OUT/nv_tests.log";;
esac

case " $STAGES " in *" bench "*)
el "bench gpu_reduce"
DEV=CUDA SWEEP=${SWEEP:-1} timeout ${T_BENCH:-100} python3 bench/gpu_reduce.py > "$OUT/gpu_reduce.json" 2> "$OUT/gpu_reduce.log"
cat "$OUT/gpu_reduce.log" | grep -v Warning | tail -25
el "bench gpu_elementwise"
DEV=CUDA timeout 60 python3 bench/gpu_elementwise.py > "$OUT/gpu_elementwise.json" 2>&1
tail -c 1500 "$OUT/gpu_elementwise.json"; echo;;
esac

case " $STAGES " in *" core "*)
el "core suites"
N=${NPROC:-7}
DEV=CUDA timeout ${T_CORE:-200} python3 -m pytest -q -p no:cacheprovider -n $N -rfEs packages/core/tests > "$OUT/core_cuda.log" 2>&1 &
DEV=CUDA:PTX timeout ${T_CORE:-200} python3 -m pytest -q -p no:cacheprovider -n $N -rfEs packages/core/tests > "$OUT/core_ptx.log" 2>&1 &
wait
el "done"
for f in core_cuda core_ptx; do
  echo "== $f: $(grep -E '(passed|failed|error)' "$OUT/$f.log" | tail -1)"
  grep -E '^(FAILED|ERROR)' "$OUT/$f.log" | head -25
done
echo "== skip reasons (CUDA)"; grep -E '^SKIPPED' "$OUT/core_cuda.log" | sed -E 's/^SKIPPED \[[0-9]+\] [^ ]+ //' | sort | uniq -c | sort -rn | head -12;;
esac
el "all done"
