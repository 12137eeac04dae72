#!/bin/sh
# Builds libksearch and runs its tests: installs missing Debian packages,
# configures a Release build in build/, builds everything, runs ctest, then
# prints where an evaluation's time goes on the host (bench_phases).
# GPU tests (label `gpu`) skip themselves where no GPU is present.
set -eu
cd "$(dirname "$0")/.."
cmake/install-deps.sh
# The W&B bridge's tests need the wandb package from PyPI; they skip without it.
python3 -c "import wandb" 2>/dev/null || python3 -m pip install --quiet wandb ||
  echo "run_tests: could not pip install wandb; the W&B bridge tests will skip"
# ksearch.ray's tests (a Ray cluster on loopback) need ray from PyPI; they skip without it.
python3 -c "import ray" 2>/dev/null || python3 -m pip install --quiet ray ||
  echo "run_tests: could not pip install ray; the Ray cluster tests will skip"
# A unity build of the library, examples and benchmarks (tests/ opts out): a
# fraction of the compile time on two cores. Builds file by file elsewhere
# (the default, and the GPU machine's runs) still compile each file alone.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKS_WERROR=ON -DCMAKE_UNITY_BUILD=ON
cmake --build build -j"$(nproc)"
# Where the tests run: the host, whether candidates can be sandboxed, CUDA.
build/examples/cli/ksearch devices || true
status=0
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@" || status=$?
# The guard against evaluation slowdowns (issue 24): the phases of host
# evaluations as a table in every log, so a slowdown shows in the log of the
# commit that caused it. It fails on a crash or a missing phase, never on a
# time. Its Python cases use an interpreter with PyTorch, as the tests do.
python=
for p in "${KSEARCH_PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$p" ] && "$p" -c "import torch, numpy" 2>/dev/null; then python=$p; break; fi
done
KSEARCH_PYTHON=${python:-python3} timeout 300 build/benchmarks/eval/bench_phases --host --max-time 0.05 ||
  status=$?
exit $status
