#!/bin/sh
# Builds libksearch and runs its tests: installs missing Debian packages,
# configures a Release build in build/, builds everything, runs ctest.
# GPU tests (label `gpu`) skip themselves where no GPU is present.
set -eu
cd "$(dirname "$0")/.."
cmake/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKS_WERROR=ON
cmake --build build -j"$(nproc)"
# Where the tests run: the host, whether candidates can be sandboxed, CUDA.
build/examples/cli/ksearch devices || true
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
