# Sourced by run_on_gpu.sh (backend-nv) and packages/core/tests/distributed/run_on_gpus.sh: the shared set-up for running
# from a source checkout on a GPU machine without uv or installs. Expects the repository root as the working directory
# and LOGDIR_DEFAULT set; sets PY, LOGDIR, the source paths and plugin modules, and defines note / print_environment / summary.
PY=${PYTHON:-python3}
LOGDIR=${LOGDIR:-${OUT:-$LOGDIR_DEFAULT}}
mkdir -p "$LOGDIR"
export PYTHONPATH=$PWD/packages/core/src:$PWD/packages/backend-nv/src:$PWD/packages/backend-cpu/src:$PWD/packages/llm/src${PYTHONPATH:+:$PYTHONPATH}
export TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin,tinygrad_backend_cpu.plugin
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # no NVLink multicast, ever
export PYTHONUNBUFFERED=1
SUMMARY=()
FAILED=0

note() { SUMMARY+=("$1"); echo "=== $1"; }
fail_if() { if [ "$1" != 0 ]; then FAILED=1; fi; }

print_environment() {  # the GPUs, python and the versions of what the stages import
  echo "=== environment"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1 | head -8
  $PY - <<'PYEOF'
import importlib, platform
print("python", platform.python_version())
for m in ("numpy", "pluggy", "pytest", "torch", "cuda.bindings"):
  try: print(m, getattr(importlib.import_module(m), "__version__", "?"))
  except Exception as e: print(m, "MISSING:", e)
from tinygrad_backend_nv.compiler import nvrtc_version, nvjitlink_version
from tinygrad_backend_nv.runtime import driver_status, device_arch
print("nvrtc", nvrtc_version(), "| nvjitlink", nvjitlink_version(), "| driver", driver_status(), "| arch", device_arch(0))
PYEOF
}

summary() {  # every stage's line, then exit with whether one failed
  echo
  echo "================ summary ================"
  for line in "${SUMMARY[@]}"; do echo "$line"; done
  echo "(logs in $LOGDIR)"
  [ "$FAILED" = 0 ] && echo "ALL STAGES PASSED" || echo "SOME STAGE FAILED"
  exit "$FAILED"
}
