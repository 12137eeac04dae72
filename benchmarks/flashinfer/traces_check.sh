#!/bin/sh
# Baselines from FlashInfer-Trace traces against libksearch's own baseline kernels (issue 26): per built-in
# definition, today's score of the starting kernel (libksearch's baseline kernel measured here) beside its score
# against a fixture dataset whose traces are those same baseline latencies, measured here, under this card's name.
# The two should agree within timing noise. Under eight minutes on an H100; results in OUT_DIR.
#
#   benchmarks/flashinfer/traces_check.sh BUILD_DIR OUT_DIR [gqa] [mla_decode] [mla_prefill] [moe]
#
# Per definition (all four by default):
#   1. ksearch eval --task flashinfer/<definition> of the starting kernel on every workload (--json): its
#      vs_baseline and each timed workload's baseline latency (libksearch's baseline kernel, measured here);
#   2. OUT_DIR/dataset: the definition (harness_fixture.py's), a workload per timed built-in workload (same axes,
#      scalars and given offsets; uuid ksearch-<name>), and a PASSED trace per workload of the solution
#      ksearch_baseline_measured with that latency, hardware = the device ksearch eval reported;
#   3. ksearch eval --dataset OUT_DIR/dataset --task flashinfer/<definition> --baseline-solution
#      ksearch_baseline_measured of the same kernel;
#   4. both scores, their ratio, and the candidate's own latency ratio per workload (inputs are drawn from each
#      workload's seed, which differs between the two: random tensors, KV lengths and MoE routing differ).
set -u
[ $# -ge 2 ] || { sed -n '2,20p' "$0"; exit 2; }
build=$(cd "$1" && pwd); out=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
py=${KSEARCH_PYTHON:-python3}
mkdir -p "$out"; out=$(cd "$out" && pwd)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
timeout 470 "$py" "$here/traces_check.py" --ksearch "$build/examples/cli/ksearch" --out "$out" "$@"
rc=$?
[ $rc -eq 124 ] && echo "FAIL: traces_check.py ran past 470 s and was stopped (partial results in $out)"
exit $rc
