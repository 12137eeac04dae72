#!/bin/sh
# The TriMul export on a GPU, checked by GPUMode's own harness (issue 14), in
# one script. Results go to OUT_DIR.
#
#   benchmarks/export/gpu_check.sh BUILD_DIR OUT_DIR REFERENCE_KERNELS_DIR [eval|harness|gpu-test|all]...
#
# REFERENCE_KERNELS_DIR is a checkout of gpu-mode/reference-kernels (never
# committed here); its problems/bioml/trimul holds eval.py and task.yml.
#
# eval      evaluates the shipped v4 candidate with libksearch twice, with a
#           fresh cache: default timing (L2 flushed between calls) and
#           --timing upstream (eval.py's rules).
# harness   exports v4 as a GPUMode submission from the same cache (so the
#           embedded cubin is the one the evaluations just ran: the export
#           says "the evaluator's cached cubin"), then runs upstream
#           `eval.py test` (18 cases) and `eval.py benchmark` (7 cases) on it,
#           and prints the three figures side by side: libksearch default,
#           libksearch upstream-style, upstream harness (target: within 5 % of
#           the upstream-style figure).
# gpu-test  the ctest `gpu` test of the exports (test_export_gpu).
set -u
build=$1; out=$2; refk=$3; shift 3
[ $# -eq 0 ] && set -- all
sections="$*"
want() { for a in $sections; do [ "$a" = all ] || [ "$a" = "$1" ] && return 0; done; return 1; }
ks="$build/examples/cli/ksearch"
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
trimul="$refk/problems/bioml/trimul"
v4="$src/examples/trimul/candidates/v4_pipelined_fp16.md"
py=${KSEARCH_PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cache="$out/cache"

"$ks" devices || { echo "gpu_check: no usable GPU"; exit 1; }
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
"$py" -c "import torch; print('PyTorch', torch.__version__, 'CUDA', torch.version.cuda)"
( cd "$refk" && git rev-parse --short HEAD 2>/dev/null | sed 's/^/reference-kernels /' )
[ -f "$trimul/eval.py" ] || { echo "gpu_check: $trimul/eval.py not found"; exit 1; }

if want eval; then
  echo "== libksearch: v4, default timing and --timing upstream (same cache, same cubin)"
  rm -rf "$cache"
  timeout 900 "$ks" eval --task gpumode/trimul --solution "$v4" --cache-dir "$cache" --no-reference-timing --json \
    > "$out/ksearch_default.json" 2> "$out/ksearch_default.err"
  echo "default: exit $? $(grep -o '"latency_ms": [0-9.]*' "$out/ksearch_default.json" | head -1)"
  timeout 900 "$ks" eval --task gpumode/trimul --solution "$v4" --cache-dir "$cache" --no-reference-timing --json \
    --timing upstream > "$out/ksearch_upstream.json" 2> "$out/ksearch_upstream.err"
  echo "upstream-style: exit $? $(grep -o '"latency_ms": [0-9.]*' "$out/ksearch_upstream.json" | head -1)"
fi

if want harness; then
  echo "== export v4 from the evaluator's cache, then GPUMode's eval.py test and benchmark"
  rm -rf "$out/harness"
  "$ks" export --format gpumode --task gpumode/trimul --solution "$v4" --cache-dir "$cache" \
    -o "$out/submission.py" | tee "$out/export.txt"
  grep -q "the evaluator's cached cubin" "$out/export.txt" ||
    echo "NOTE: the cubin was not in the evaluator's cache (run the eval section first with the same OUT_DIR)"
  "$py" "$here/upstream_harness.py" prepare "$trimul" "$out/submission.py" "$out/harness"
  echo "host time of one custom_kernel call (GPU idle before it):"
  "$py" "$here/upstream_harness.py" overhead "$out/submission.py" | tee "$out/overhead.json"
  timeout 1200 "$py" "$here/upstream_harness.py" run "$out/harness" test "$py" > "$out/harness_test.json"
  "$py" - "$out/harness_test.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
log = r["log"]
n = int(log.get("test-count", 0))
passed = sum(log.get("test.%d.status" % i) == "pass" for i in range(n))
print("eval.py test: %s, %d of %d cases pass (exit %d)" % (log.get("check"), passed, n, r["returncode"]))
for i in range(n):
    if log.get("test.%d.status" % i) != "pass":
        print("  case %d %s: %s" % (i, log.get("test.%d.spec" % i), log.get("test.%d.error" % i, "")[:300]))
if r["returncode"] not in (0,) and r["stderr"]:
    print(r["stderr"][-1500:])
PY
  timeout 1200 "$py" "$here/upstream_harness.py" run "$out/harness" benchmark "$py" > "$out/harness_benchmark.json"
  "$py" -c "import json,sys; r=json.load(open(sys.argv[1])); print('eval.py benchmark:', r['log'].get('check'), 'exit', r['returncode']); print(r['stderr'][-1500:] if r['returncode'] else '')" "$out/harness_benchmark.json"
  if [ -f "$out/ksearch_default.json" ] && [ -f "$out/ksearch_upstream.json" ]; then
    echo "== side by side ($card)"
    "$py" "$here/upstream_harness.py" table "$out/ksearch_default.json" "$out/ksearch_upstream.json" \
      "$out/harness_benchmark.json" "$card" | tee "$out/side_by_side.txt"
  fi
fi

if want gpu-test; then
  echo "== ctest: test_export_gpu"
  ctest --test-dir "$build" -R test_export_gpu -V > "$out/test_export_gpu.log" 2>&1
  echo "test_export_gpu: exit $?"
  grep -E "^(ok|FAIL|skipped)" "$out/test_export_gpu.log" | tail -60
fi
