#!/bin/sh
# Builds tests/install/embed with KS_SUITE_GPUMODE/KERNELBENCH/FLASHINFER and
# KS_WITH_CUDA off (only the library, its worker and embed_host), then runs
# embed_host on the matmul example task: suites and the CUDA backend are
# options, not load-bearing parts. As a unity build with no build type (no -O
# flag): the check is that it builds and runs, and so it compiles in a
# fraction of a Release build's time on CI's two cores.
set -eu
source="$1"; work="$2"; generator="$3"; cc="$4"; cxx="$5"; launcher="${6:-}"
cmake -S "$source/tests/install/embed" -B "$work" -G "$generator" -DCMAKE_BUILD_TYPE= \
  -DKSEARCH_SOURCE_DIR="$source" -DKSEARCH_EMBED_HOST=ON -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DKS_SUITE_GPUMODE=OFF -DKS_SUITE_KERNELBENCH=OFF -DKS_SUITE_FLASHINFER=OFF -DKS_WITH_CUDA=OFF -DCMAKE_UNITY_BUILD=ON \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher -DCMAKE_C_COMPILER_LAUNCHER=$launcher} >/dev/null
cmake --build "$work" --target embed_host ksearch-worker
"$work/embed_host" "$source/examples/tasks/matmul/task.json"
