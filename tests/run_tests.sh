#!/bin/sh
# Builds libksearch and runs its tests: installs missing Debian packages,
# configures a Release build in build/, builds everything, runs ctest.
# GPU tests (label `gpu`) skip themselves where no GPU is present.
set -eu
cd "$(dirname "$0")/.."
cmake/install-deps.sh
# The W&B bridge's tests need the wandb package from PyPI; they skip without it.
python3 -c "import wandb" 2>/dev/null || python3 -m pip install --quiet wandb ||
  echo "run_tests: could not pip install wandb; the W&B bridge tests will skip"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKS_WERROR=ON
cmake --build build -j"$(nproc)"
# Where the tests run: the host, whether candidates can be sandboxed, CUDA.
build/examples/cli/ksearch devices || true
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
