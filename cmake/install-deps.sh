#!/bin/sh
# Installs the Debian packages libksearch needs, only those missing.
# The CUDA Toolkit (headers and NVRTC) is expected at /usr/local/cuda or in
# $CUDA_HOME; it is not a Debian package here.
set -eu
# python3-venv: the Python package test installs bindings/python into a fresh venv.
# python3-torch: PyTorch on the CPU for the KernelBench oracle's tests (Debian's
# build; the oracle itself uses whatever $KSEARCH_PYTHON or python3 imports).
packages="cmake ninja-build g++ pkg-config python3 python3-venv libeigen3-dev libfmt-dev libsimdjson-dev libcurl4-openssl-dev doctest-dev bubblewrap python3-torch"
missing=""
for p in $packages; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -n "$missing" ]; then
  echo "install-deps: installing$missing"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
if [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ] && ! command -v nvcc >/dev/null 2>&1; then
  echo "install-deps: warning: no CUDA Toolkit found (set CUDA_HOME); it provides cuda.h and NVRTC" >&2
fi
