#!/bin/sh
# libksearch's FlashInfer-Bench exports run by FlashInfer-Bench's own evaluator (issue 11), on a GPU
# machine, in one go of under four minutes on an H100. Results go to OUT_DIR (harness_check.json, logs).
#
#   benchmarks/flashinfer/harness_check.sh BUILD_DIR OUT_DIR [gqa] [mla_decode] [mla_prefill] [moe]
#
# Needs PyTorch and flashinfer-bench 0.1.2 with its light dependencies (pydantic, pydantic-core,
# annotated-types, typing-inspection, safetensors, docstring-parser, apache-tvm-ffi; NOT flashinfer-python:
# only code paths of flashinfer-bench that never import `flashinfer` are used). When flashinfer_bench is not
# importable, the wheels in $KSEARCH_WHEELS (default: the checkout's .whl/) are installed into OUT_DIR/site.
#
# Per task (GQA decode first; the others while the time budget lasts): a fixture dataset in FlashInfer-Trace
# layout (harness_fixture.py), `ksearch eval` of the starting kernel on it, `ksearch export --format
# flashinfer` of that kernel (the cubin just evaluated) and of a wrong variant, FlashInfer-Bench's Benchmark
# on both, and both latencies side by side. Prints PASS/FAIL lines; exit 0 only when all pass.
set -u
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
build=$(cd "$1" && pwd); out=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
py=${KSEARCH_PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if ! "$py" -c "import flashinfer_bench" 2>/dev/null; then
  wheels=${KSEARCH_WHEELS:-$src/.whl}
  echo "installing flashinfer-bench from $wheels into $out/site"
  "$py" -m pip install -q --no-index --no-deps --target "$out/site" "$wheels"/*.whl > "$out/pip.log" 2>&1 ||
    { echo "FAIL: setup: pip could not install the wheels of $wheels (see $out/pip.log)"; exit 1; }
  PYTHONPATH="$out/site${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi
"$py" -c "import flashinfer_bench" 2>"$out/import.log" ||
  { echo "FAIL: setup: flashinfer_bench does not import:"; tail -5 "$out/import.log"; exit 1; }
# FlashInfer-Bench's build folder for the Solutions' Python packages.
FIB_CACHE_PATH="$out/fib_cache"
export FIB_CACHE_PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
timeout 250 "$py" "$here/harness_check.py" --build "$build" --out "$out" --budget 225 "$@"
rc=$?
[ $rc -eq 124 ] && echo "FAIL: harness_check.py ran past 250 s and was stopped (partial logs in $out)"
exit $rc
