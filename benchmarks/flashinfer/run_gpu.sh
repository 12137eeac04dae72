#!/bin/sh
# Everything of the flashinfer suite that needs a GPU, for a GPU machine, in
# one go; logs and results go to OUT_DIR:
#
#   tests  the GPU tests of the suite (ctest -L gpu -R flashinfer)
#   bench  bench_flashinfer: full evaluations on the feedback workloads (starting
#          kernels and baselines), cold and with references cached
#   torch  compare_torch.py: each CUDA reference against an independent PyTorch
#          implementation on large workloads (needs torch)
#   demo   the GQA decode demonstration: recorded with the scripted responder,
#          then replayed from the recorded transcript (OUT_DIR/demo-transcript.jsonl
#          is the file to commit as examples/flashinfer/demo-transcript.jsonl)
#
#   benchmarks/flashinfer/run_gpu.sh BUILD_DIR OUT_DIR [tests|bench|torch|demo|all]...
set -u
build=$1; out=$2; shift 2
[ $# -eq 0 ] && set -- all
sections="$*"
ks="$build/examples/cli/ksearch"
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
want() { for a in $sections; do [ "$a" = all ] || [ "$a" = "$1" ] && return 0; done; return 1; }
export KSEARCH_CACHE_DIR="${KSEARCH_CACHE_DIR:-/tmp/ksearch-flashinfer-cache}"
gqa=flashinfer/gqa_paged_decode_h32_kv4_d128_ps1

"$ks" devices || { echo "run_gpu: no usable GPU"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>/dev/null

if want tests; then
  echo "== GPU tests (flashinfer)"
  ctest --test-dir "$build" -L gpu -R flashinfer --output-on-failure --timeout 1800 -V > "$out/gpu_tests.log" 2>&1
  grep -E "MESSAGE|tests passed|Passed|Failed|ERROR" "$out/gpu_tests.log" | grep -v "^$" | tail -60
fi
if want bench; then
  echo "== bench_flashinfer (starting kernels)"
  timeout 900 "$build/benchmarks/flashinfer/bench_flashinfer" --kernel start --json "$out/bench_start.json" \
    > "$out/bench_start.log" 2>&1
  cat "$out/bench_start.log"
  echo "== bench_flashinfer (baselines)"
  timeout 900 "$build/benchmarks/flashinfer/bench_flashinfer" --kernel baseline --json "$out/bench_baseline.json" \
    > "$out/bench_baseline.log" 2>&1
  tail -12 "$out/bench_baseline.log"
fi
if want torch; then
  echo "== CUDA references against PyTorch"
  timeout 1500 python3 "$src/benchmarks/flashinfer/compare_torch.py" "$build" "$out" > "$out/compare_torch.log" 2>&1
  cat "$out/compare_torch.log"
fi
if want demo; then
  echo "== GQA decode demonstration: record with the scripted responder, then replay"
  rm -rf "$out/demo" "$out/demo_replay" "$out/demo_state.json"
  timeout 600 "$ks" run --task $gqa --llm "command:python3 $src/examples/flashinfer/demo_responder.py $out/demo_state.json" \
    --max-rounds 5 --wm-stagnation-window 1 --no-starting-point --run-dir "$out/demo" > "$out/demo.log" 2>&1
  tail -40 "$out/demo.log"
  cp "$out/demo/transcript.jsonl" "$out/demo-transcript.jsonl" 2>/dev/null
  timeout 600 "$ks" run --task $gqa --llm "replay:$out/demo-transcript.jsonl" \
    --max-rounds 5 --wm-stagnation-window 1 --no-starting-point --run-dir "$out/demo_replay" > "$out/demo_replay.log" 2>&1
  tail -30 "$out/demo_replay.log"
  "$ks" show "$out/demo_replay" --no-tree > "$out/demo_replay_show.txt" 2>&1
fi
