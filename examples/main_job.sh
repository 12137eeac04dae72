#!/bin/sh
# The main job: builds libksearch and runs a real kernel search that needs no
# LLM and no API key (the model-guided tuner, --strategy tune). With a GPU it
# tunes the shipped TriMul starting kernel (gpumode/trimul); without one it
# tunes the host matrix-multiply example. Live status lines, then a summary:
# best latency per workload, speedup over the reference, the run folder.
#
#   examples/main_job.sh [extra ksearch run options, e.g. --max-rounds 40]
set -eu
cd "$(dirname "$0")/.."
cmake/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)" --target ksearch_cli ksearch-worker
ksearch=build/examples/cli/ksearch
stamp=$(date -u +%Y%m%d-%H%M%S)
if "$ksearch" devices; then
  exec "$ksearch" run --task gpumode/trimul --llm offline --strategy tune --max-rounds 24 \
    --run-dir "runs/main-trimul-$stamp" "$@"
else
  echo "main job: no GPU here, so the host example is tuned instead"
  exec "$ksearch" run --task examples/matmul --language cpp --llm offline --strategy tune \
    --max-rounds 12 --timing-cap 0.5 --run-dir "runs/main-matmul-$stamp" "$@"
fi
