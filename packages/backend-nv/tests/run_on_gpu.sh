#!/usr/bin/env bash
# backend-nv on a machine with an NVIDIA GPU, from a source checkout, without uv or installs:
#   bash packages/backend-nv/tests/run_on_gpu.sh            # everything: GPU tests, core suite on CUDA and CUDA:PTX, benches
#   bash packages/backend-nv/tests/run_on_gpu.sh tests core  # only some stages (tests, core, bench, llm, decode, target, ttft, nvk)
# `target` (not in the default stages): issue 18's Llama-1B decode figure alone, in about two minutes on a warm machine (the
# default step, bench/llm_ab.py --rounds 3, against the 714 us a step of 1,400 tok/s), then bench/llm_decode.py with pp64/pp512.
# `decode` (not in the default stages): bench/llm_ab.py's A/B of the Llama-1B decode step's switches (and of its attention at a
# 2,048-position span) and bench/gpu_timeline.py. DECODE_DEPTH_MODELS (e.g. "hd128 smollm2-1.7b") adds each model's step at a
# 2,048-position span, 256 positions a block against 128 (each model's file written first: minutes for 1.7B).
# `ttft` (not in the default stages): bench/llm_ttft.py's phases of the time to the first token (cold, then warm on disk).
# `nvk` (not in the default stages) is NVK+NV, the driver's ioctls without libcuda: the bring-up probe, the core suite on
# DEV=NVK+NV, and the JIT replay overhead on NVK+NV next to CUDA.
# The core suites of both renderers run side by side (NPROC workers each). `llm` times tinygrad.llm decode on synthetic
# models (bench/llm_decode.py --synthetic; needs the gguf package, e.g. carried as a wheel: see the device README), and
# llama.cpp's llama-bench on the same files when its source tree is there (bench/llm_peer_llamacpp.py; LLAMACPP_SRC).
# Needs python3 with numpy, pluggy, pytest, torch (CUDA), cuda-bindings and the nvidia-cuda-nvrtc wheel (nvidia-nvjitlink
# too for PTX -> cubin; without it PTX goes to the driver's JIT). Logs and bench JSON go to $LOGDIR ($OUT if set).
# A summary of every stage is printed last.
set -u
cd "$(dirname "$0")/../../.."
LOGDIR_DEFAULT=./nv_gpu_logs
source packages/backend-nv/tests/gpu_common.sh
# the doc tests start subprocesses with their own environment: a .pth puts the source packages on every python's path
# (only where site-packages is writable, as on the scratch GPU machines)
SITE=$($PY -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [ -w "$SITE" ]; then printf '%s\n' "$PWD"/packages/{core,backend-nv,backend-cpu,llm}/src > "$SITE/tinygrad_src.pth"; fi
# bytecode compiled once, as installing a package does: a fresh source tree otherwise compiles every module in every process
# (the cold TTFT measured ~0.6 s of it in the main process alone, more in the compile workers)
$PY -m compileall -q -j 0 packages/{core,backend-nv,backend-cpu,llm}/src bench > /dev/null 2>&1 || true
STAGES=${*:-tests core bench}

print_environment
$PY -m tinygrad.device | tee "$LOGDIR/device_report.txt" | head -12

XDIST=""
if $PY -c "import xdist" 2>/dev/null; then XDIST="-n ${NPROC:-8}"; fi

pytest_stage() {  # name, DEV, args...
  local name=$1 dev=$2; shift 2
  echo "=== $name (DEV=$dev)"
  DEV=$dev timeout ${STAGE_TIMEOUT:-1500} $PY -m pytest -q -p no:cacheprovider "$@" 2>&1 | tee "$LOGDIR/$name.log" | tail -40
  note "$name (DEV=$dev): $(grep -E '^(=+ )?[0-9]+ (passed|failed)|no tests ran|[0-9]+ error' "$LOGDIR/$name.log" | tail -1)"
}

for stage in $STAGES; do
  case $stage in
    tests)
      pytest_stage backend_nv_tests CUDA packages/backend-nv/tests -rs ;;
    core)
      echo "=== core suite, DEV=CUDA and DEV=CUDA:PTX side by side"
      for dev in CUDA CUDA:PTX; do
        DEV=$dev timeout ${STAGE_TIMEOUT:-1500} $PY -m pytest -q -p no:cacheprovider -rfEs packages/core/tests --ignore packages/core/tests/distributed $XDIST > "$LOGDIR/core_${dev/:/_}.log" 2>&1 &
      done
      wait
      for dev in CUDA CUDA:PTX; do
        grep -E '^(FAILED|ERROR)' "$LOGDIR/core_${dev/:/_}.log" | head -20
        note "core suite (DEV=$dev): $(grep -E '[0-9]+ (passed|failed)' "$LOGDIR/core_${dev/:/_}.log" | tail -1)"
      done ;;
    llm)
      for m in ${LLM_MODELS:-llama1b smollm2}; do
        echo "=== bench llm_decode --synthetic $m (DEV=${BENCH_DEV:-CUDA})"
        DEV=${BENCH_DEV:-CUDA} timeout ${BENCH_TIMEOUT:-600} $PY bench/llm_decode.py --synthetic $m --no-peer --tokens ${LLM_TOKENS:-64} \
          > "$LOGDIR/llm_$m.json" 2> "$LOGDIR/llm_$m.log"
        tail -5 "$LOGDIR/llm_$m.log"
        note "bench llm_decode $m: $(cat "$LOGDIR/llm_$m.json")"
      done
      # the peer on the same files: llama.cpp's llama-bench, from the tree `bench/llm_peer_llamacpp.py prepare` wrote (carried)
      if [ -d "${LLAMACPP_SRC:-.peer/llama.cpp}" ]; then
        timeout ${BENCH_TIMEOUT:-600} $PY bench/llm_peer_llamacpp.py run --src "${LLAMACPP_SRC:-.peer/llama.cpp}" --build /tmp/llamacpp-build --depth "${PEER_DEPTH:-0,2048}" \
          --synthetic "$(echo ${LLM_MODELS:-llama1b smollm2} | tr ' ' ,)" > "$LOGDIR/llm_peer_llamacpp.json" 2> "$LOGDIR/llm_peer_llamacpp.log"
        note "llama.cpp peer: $(tr -d '\n' < "$LOGDIR/llm_peer_llamacpp.json")"
      fi ;;
    decode)
      # issue 18's Llama-1B decode step: the defaults against the switches of sessions 33-39 (one process, interleaved), and where
      # the step's time goes between its kernels (block timelines)
      echo "=== llm_ab llama1b (DEV=${BENCH_DEV:-CUDA})"
      DEV=${BENCH_DEV:-CUDA} timeout ${BENCH_TIMEOUT:-600} $PY bench/llm_ab.py --synthetic llama1b '{}' '{"EARLY_LOADS":0}' \
        '{"EARLY_LOADS":0,"STREAM_LOADS":0,"FFN_HALF":0}' '{"MV_BALANCE":0}' '{"HEAD_BEST":0}' '{"HEAD_SCREEN":0}' --rounds ${AB_ROUNDS:-3} \
        > "$LOGDIR/llm_ab_decode.json" 2> "$LOGDIR/llm_ab_decode.log"
      tail -4 "$LOGDIR/llm_ab_decode.log"
      note "llm_ab decode: $(grep -E 'us/step' "$LOGDIR/llm_ab_decode.log" | tr -s ' ' | tr '\n' ';')"
      # at depth (a 2,048-position span): the grouped-query attention kernel (the default) against the forms before it
      echo "=== llm_ab llama1b at position 1900 (DEV=${BENCH_DEV:-CUDA})"
      DEV=${BENCH_DEV:-CUDA} timeout ${BENCH_TIMEOUT:-600} $PY bench/llm_ab.py --synthetic llama1b --position 1900 --max-context 4096 \
        --tokens 8 '{}' '{"DECODE_GQA":0}' '{"GQA_BLOCK_POSITIONS":128}' --rounds ${AB_ROUNDS:-3} > "$LOGDIR/llm_ab_depth.json" 2> "$LOGDIR/llm_ab_depth.log"
      tail -2 "$LOGDIR/llm_ab_depth.log"
      note "llm_ab at depth: $(grep -E 'us/step' "$LOGDIR/llm_ab_depth.log" | tr -s ' ' | tr '\n' ';')"
      for m in ${DECODE_DEPTH_MODELS:-}; do
        DEV=${BENCH_DEV:-CUDA} timeout ${BENCH_TIMEOUT:-600} $PY bench/llm_ab.py --synthetic $m --position 1900 --max-context 4096 \
          --tokens 8 '{}' '{"GQA_BLOCK_POSITIONS":128}' '{"GQA_BLOCK_POSITIONS":256}' --rounds ${AB_ROUNDS:-3} > "$LOGDIR/llm_ab_depth_$m.json" 2> "$LOGDIR/llm_ab_depth_$m.log"
        note "llm_ab $m at depth: $(grep -E 'us/step' "$LOGDIR/llm_ab_depth_$m.log" | tr -s ' ' | tr '\n' ';')"
      done
      echo "=== gpu_timeline llama1b (DEV=${BENCH_DEV:-CUDA})"
      DEV=${BENCH_DEV:-CUDA} timeout ${BENCH_TIMEOUT:-600} $PY bench/gpu_timeline.py --synthetic llama1b > "$LOGDIR/gpu_timeline.json" 2> "$LOGDIR/gpu_timeline.log"
      head -9 "$LOGDIR/gpu_timeline.log"
      note "gpu_timeline: $(head -1 "$LOGDIR/gpu_timeline.log"); $(tail -1 "$LOGDIR/gpu_timeline.log")" ;;
    target)
      # the one figure issue 18 still asks for, with as little device time as it takes (no A/B, no timeline, no peer)
      echo "=== llm_ab llama1b, the default step (DEV=${BENCH_DEV:-CUDA})"
      DEV=${BENCH_DEV:-CUDA} timeout ${BENCH_TIMEOUT:-600} $PY bench/llm_ab.py --synthetic llama1b '{}' --rounds ${AB_ROUNDS:-3} --tokens 32 \
        > "$LOGDIR/llm_ab_target.json" 2> "$LOGDIR/llm_ab_target.log"
      fail_if $?
      note "llm_ab target: $(grep -E 'us/step' "$LOGDIR/llm_ab_target.log" | tr -s ' ') (issue 18: 714 us a step or less)"
      DEV=${BENCH_DEV:-CUDA} timeout ${BENCH_TIMEOUT:-600} $PY bench/llm_decode.py --synthetic llama1b --no-peer --tokens 64 --pp 64,512 \
        > "$LOGDIR/llm_decode_target.json" 2> "$LOGDIR/llm_decode_target.log"
      fail_if $?
      note "llm_decode target: $($PY -c "import json, sys; d = json.load(open(sys.argv[1]))['details']['ours']; print({k: d.get(k) for k in ('decode_tok_s', 'decode_t07_tok_s', 'pp_tok_s', 'ttft_s')})" "$LOGDIR/llm_decode_target.json")" ;;
    bench)
      for b in ${BENCHES:-gpu_matmul gpu_elementwise gpu_reduce}; do
        echo "=== bench $b (DEV=${BENCH_DEV:-CUDA})"
        DEV=${BENCH_DEV:-CUDA} timeout ${BENCH_TIMEOUT:-1500} $PY bench/$b.py > "$LOGDIR/$b.json" 2> "$LOGDIR/$b.log"
        tail -20 "$LOGDIR/$b.log"
        note "bench $b: $(cat "$LOGDIR/$b.json")"
      done ;;
    ttft)
      # where the time to the first token goes on this machine (cold: an empty compile cache; then warm on disk), by phase
      for m in ${LLM_MODELS:-llama1b smollm2}; do
        echo "=== llm_ttft $m (DEV=${BENCH_DEV:-CUDA})"
        DEV=${BENCH_DEV:-CUDA} timeout ${BENCH_TIMEOUT:-600} $PY bench/llm_ttft.py --synthetic $m > "$LOGDIR/llm_ttft_$m.json" 2> "$LOGDIR/llm_ttft_$m.log"
        note "llm_ttft $m: $($PY -c "import json, sys; d = json.load(open(sys.argv[1])); print({c: v['phases_s'] for c, v in d.items() if isinstance(v, dict) and 'phases_s' in v})" "$LOGDIR/llm_ttft_$m.json" 2>&1 | tail -1)"
      done ;;
    nvk)
      echo "=== NVK+NV bring-up probe"
      timeout ${STAGE_TIMEOUT:-600} $PY packages/backend-nv/tests/nv_bringup.py 2>&1 | tee "$LOGDIR/nv_bringup.log" | tail -60
      note "nv_bringup: $(tail -1 "$LOGDIR/nv_bringup.log")"
      if grep -q "ALL STEPS PASSED" "$LOGDIR/nv_bringup.log"; then
        DEV=NVK+NV $PY -m tinygrad.device | grep "DEV opens"
        DEV=NVK+NV NV_WAIT_TIMEOUT=10 timeout ${STAGE_TIMEOUT:-1500} $PY -m pytest -q -p no:cacheprovider -rfEs packages/core/tests --ignore packages/core/tests/distributed $XDIST --maxfail=20 \
          > "$LOGDIR/core_NVK.log" 2>&1
        grep -E '^(FAILED|ERROR)' "$LOGDIR/core_NVK.log" | head -20
        note "core suite (DEV=NVK+NV): $(grep -E '[0-9]+ (passed|failed)' "$LOGDIR/core_NVK.log" | tail -1)"
        for dev in NVK+NV CUDA; do
          DEV=$dev timeout ${BENCH_TIMEOUT:-600} $PY bench/jit_overhead.py > "$LOGDIR/jit_overhead_${dev/+/_}.json" 2> "$LOGDIR/jit_overhead_${dev/+/_}.log"
          note "bench jit_overhead (DEV=$dev): $(cat "$LOGDIR/jit_overhead_${dev/+/_}.json")"
        done
      fi ;;
    *) echo "unknown stage $stage (tests, core, bench, llm, nvk)"; exit 2 ;;
  esac
done

summary
