#!/bin/sh
# The Python package as a user gets it: a fresh virtual environment,
# `pip install ./bindings/python` (the library and worker built into the
# package), then test_package.py on the installed package with no KSEARCH_*
# variable set.
#
#   check_package.sh PYTHON SOURCE_DIR WORK_DIR LAYOUT_PROGRAM [COMPILER_LAUNCHER]
#
# WORK_DIR/build keeps the package's CMake build between runs (incremental);
# COMPILER_LAUNCHER (ccache) is passed on when the outer build has one.
set -eu
python="$1"; source="$2"; work="$3"; layout="$4"; launcher="${5:-}"
for v in $(env | sed -n 's/^\(KSEARCH_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
venv="$work/venv"
rm -rf "$venv"
mkdir -p "$work"
"$python" -m venv "$venv"
set -- --config-settings=build-dir="$work/build"
if [ -n "$launcher" ]; then
  set -- "$@" --config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER="$launcher" \
              --config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER="$launcher"
fi
start=$(date +%s)
"$venv/bin/pip" install --quiet --disable-pip-version-check "$@" "$source/bindings/python"
echo "check_package: pip install took $(( $(date +%s) - start )) s"
# Run from a folder without the source package, so `import ksearch` is the installed one.
cd "$work"
exec "$venv/bin/python" "$source/tests/python/test_package.py" --layout "$layout" -v
