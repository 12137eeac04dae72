#!/bin/sh
# Everything that needs a GPU, in one place, for a GPU machine: the GPU tests,
# the evaluation and TriMul benchmarks, the TriMul candidates, the TriMul
# demonstration (recorded, replayed, then reproduced exactly), offline tuning
# of the TriMul starting kernel, and a found kernel launched in a host
# program's own context (examples/kernels). Logs and run folders go to OUT_DIR.
#
#   benchmarks/run_gpu_suite.sh BUILD_DIR OUT_DIR [tests|bench|candidates|demo|tune|kernels|all]...
set -u
build=$1; out=$2; shift 2
[ $# -eq 0 ] && set -- all
ks="$build/examples/cli/ksearch"
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
want() { for s in "$@"; do :; done; for a in $sections; do [ "$a" = all ] || [ "$a" = "$1" ] && return 0; done; return 1; }
sections="$*"
export KSEARCH_CACHE_DIR="${KSEARCH_CACHE_DIR:-/tmp/ksearch-gpu-suite-cache}"

"$ks" devices || { echo "run_gpu_suite: no usable GPU"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>/dev/null

if want tests; then
  echo "== GPU tests"
  ctest --test-dir "$build" -L gpu --output-on-failure --timeout 600 > "$out/gpu_tests.log" 2>&1
  grep -E "tests passed|Passed|Failed|\\*\\*\\*" "$out/gpu_tests.log"
fi
if want bench; then
  echo "== bench_eval"
  timeout 300 "$build/benchmarks/eval/bench_eval" > "$out/bench_eval.log" 2>&1
  tail -32 "$out/bench_eval.log"
  echo "== bench_phases (where an evaluation's time goes)"
  timeout 580 "$build/benchmarks/eval/bench_phases" --gpu --json "$out/bench_phases.json" > "$out/bench_phases.log" 2>&1
  cat "$out/bench_phases.log"
  echo "== bench_sandbox"
  timeout 300 "$build/benchmarks/eval/bench_sandbox" > "$out/bench_sandbox.log" 2>&1
  cat "$out/bench_sandbox.log"
  echo "== bench_trimul"
  timeout 400 "$build/benchmarks/trimul/bench_trimul" --json "$out/bench_trimul.json" > "$out/bench_trimul.log" 2>&1
  tail -30 "$out/bench_trimul.log"
fi
if want candidates; then
  echo "== TriMul candidates (ksearch eval)"
  for c in ${CANDIDATES:-"$src"/examples/trimul/candidates/v*.md}; do
    name=$(basename "$c" .md)
    timeout 300 "$ks" eval --task gpumode/trimul --solution "$c" --json > "$out/eval_$name.json" 2> "$out/eval_$name.err"
    python3 - "$out/eval_$name.json" "$name" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"{sys.argv[2]:28s} no result ({e})"); sys.exit(0)
bad = [w for w in r["workloads"] if w["status"] != "passed"]
print(f"{sys.argv[2]:28s} {r['status']:14s} geomean {r['latency_ms']:.4f} ms  ref {r['reference_latency_ms']:.4f} ms  "
      f"speedup {r['speedup']:.2f}x  compile {r['metrics'].get('compile_s', 0):.2f}s  run {r['metrics'].get('run_s', 0):.2f}s")
for w in bad[:3]:
    print(f"    {w['name']}: {w['status']}: {w.get('message', '')[:300]}")
PY
  done
fi
if want demo; then
  echo "== TriMul demonstration: record with the scripted responder, then replay"
  rm -rf "$out/demo" "$out/demo_replay" "$out/demo_repro" "$out/demo_state.json"
  timeout 500 "$ks" run --task gpumode/trimul --llm "command:python3 $src/examples/trimul/demo_responder.py $out/demo_state.json" \
    --max-rounds 5 --wm-stagnation-window 1 --no-starting-point --run-dir "$out/demo" > "$out/demo.log" 2>&1
  tail -22 "$out/demo.log"
  cp "$out/demo/transcript.jsonl" "$out/demo-transcript.jsonl" 2>/dev/null
  timeout 500 "$ks" run --task gpumode/trimul --llm "replay:$out/demo-transcript.jsonl" \
    --max-rounds 5 --wm-stagnation-window 1 --no-starting-point --run-dir "$out/demo_replay" > "$out/demo_replay.log" 2>&1
  tail -14 "$out/demo_replay.log"
  # The exact reproduction: recorded answers and recorded evaluations, compared file by file.
  timeout 300 "$ks" replay "$out/demo" --run-dir "$out/demo_repro" > "$out/demo_repro.log" 2>&1
  tail -5 "$out/demo_repro.log"
fi
if want tune; then
  echo "== TriMul offline tuning of the starting kernel"
  rm -rf "$out/tune"
  timeout 560 "$ks" run --task gpumode/trimul --llm offline --strategy tune --max-rounds "${TUNE_ROUNDS:-30}" \
    --run-dir "$out/tune" > "$out/tune.log" 2>&1
  tail -40 "$out/tune.log"
fi
if want kernels; then
  echo "== a found kernel in the host program's own context (examples/kernels/launch_found_kernel)"
  rm -rf "$out/kernel_run"
  timeout 600 "$build/examples/kernels/launch_found_kernel" --self-test --rounds 6 --run-dir "$out/kernel_run" \
    --solution "$src/tests/fixtures/kernels/softmax_variants.json" > "$out/launch_found_kernel.log" 2>&1
  echo "exit status $?"
  tail -32 "$out/launch_found_kernel.log"
fi
