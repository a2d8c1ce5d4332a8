#!/bin/bash
# Issue 18's decode measurements in one GPU call, most important first, within LIMIT seconds:
#   LIMIT=540 bash bench/gpu_decode_run.sh            (results as JSON files in $OUT, default ./gpu_out)
# 1. generation over 64 tokens with pp64 / pp512 (bench/llm_decode.py, ours);
# 2. llama-bench on the same file (bench/llm_peer_llamacpp.py), built in the background meanwhile from PEER_SRC (written by
#    `python3 bench/llm_peer_llamacpp.py prepare --out .peer/llama.cpp`), run only if the build finished in time;
# 3. a baseline tree's generation over 64 tokens, where OLD_TREE holds one (e.g. `git archive REV packages/core/src
#    packages/backend-nv/src packages/backend-cpu/src packages/llm/src | tar -x -C .probe/old`);
# 4. the decode calls' host time split (llm_host_gaps.py --split); 5. the group rule against GQA_GROUP_BLOCKS=1; 6. 128 tokens.
# The sources run from this tree (PYTHONPATH and TINYGRAD_PLUGIN_MODULES: no install needed); wheels in WHEELS (gguf, where
# the machine lacks it) are installed into /tmp/site first. NEED_GPU=H200 exits at once on any other card, after the pytest
# files in TESTS (if set) ran.
LIMIT=${LIMIT:-540}; T0=$SECONDS; OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
PEER_SRC=${PEER_SRC:-.peer/llama.cpp}; OLD_TREE=${OLD_TREE:-.probe/old}; WHEELS=${WHEELS:-.whl}
left() { echo $((LIMIT - (SECONDS - T0))); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
R=$PWD
tree() { echo "$1/packages/core/src:$1/packages/backend-nv/src:$1/packages/backend-cpu/src:$1/packages/llm/src:/tmp/site"; }
export PYTHONPATH=$(tree "$R") TINYGRAD_PLUGIN_MODULES=tinygrad_backend_nv.plugin,tinygrad_backend_cpu.plugin PYTHONUNBUFFERED=1 DEV=CUDA
if [ -n "${TESTS:-}" ]; then  # GPU tests (paths relative to the repo) before the card check: any GPU can run them
  echo "== tests: $TESTS"; timeout 120 python3 -m pytest -q -p no:cacheprovider -x $TESTS 2>&1 | tail -15 | tee "$OUT/tests.log"
fi
if [ -n "${NEED_GPU:-}" ] && ! grep -q "$NEED_GPU" "$OUT/gpu.txt"; then echo "not an $NEED_GPU: exiting"; exit 3; fi
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || exit 4; fi
BUILD=
if [ -d "$PEER_SRC" ]; then  # CPU only, niced: it runs beside our measurements
  (cd bench && nice -n 19 python3 -c "import llm_peer_llamacpp as p; p.build('$R/$PEER_SRC', '$R/$PEER_SRC/build', 12)" > "$OUT/peer_build.log" 2>&1) &
  BUILD=$!
fi
run() { local name=$1; shift; local t=$(( $(left) - ${RESERVE:-20} )); [ $t -lt 30 ] && { echo "skip $name ($t s left)"; return 1; }
  echo "== $name ($(left) s left)"; timeout $t "$@" > "$OUT/$name.json" 2> "$OUT/$name.err"; echo "rc=$? $name"; tail -c 1500 "$OUT/$name.json"; echo; }
run new_t64 python3 bench/llm_decode.py --synthetic llama1b --no-peer --tokens 64 --pp 64,512
if [ -n "$BUILD" ]; then
  while kill -0 $BUILD 2>/dev/null && [ $(left) -ge 120 ]; do sleep 2; done
  if [ -x "$PEER_SRC/build/bin/llama-bench" ] && ! kill -0 $BUILD 2>/dev/null; then
    RESERVE=10 run peer python3 bench/llm_peer_llamacpp.py run --src "$PEER_SRC" --synthetic llama1b --pp 64,512 --tg 128 --reps 3
  else echo "llama-bench's build did not finish in time"; tail -3 "$OUT/peer_build.log"; fi
fi
[ -d "$OLD_TREE/packages" ] && PYTHONPATH=$(tree "$R/$OLD_TREE") run old_t64 python3 bench/llm_decode.py --synthetic llama1b --no-peer --tokens 64
run gaps_split python3 bench/llm_host_gaps.py --synthetic llama1b --tokens 64 --split
run ab_p72 python3 bench/llm_ab.py --synthetic llama1b '{}' '{"GQA_GROUP_BLOCKS":1}' --rounds 3 --tokens 32
run new_t128 python3 bench/llm_decode.py --synthetic llama1b --no-peer --tokens 128
echo "done, $(left) s left"
