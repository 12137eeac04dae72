#!/bin/sh
# Plants a violation of each folder rule in a copy of the tree and shows that
# tests/check_layering.sh fails on it and names the rule: a check that cannot
# fail proves nothing.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/docs" "$work/tests"
cp -R "$src/lib" "$src/capi" "$src/include" "$src/benchmarks" "$src/examples" "$src/cmake" "$work/"
cp "$src/docs/architecture.md" "$work/docs/"
cp "$src/tests/check_layering.sh" "$work/tests/"

check() { sh "$work/tests/check_layering.sh" "$work" 2>&1; }

if ! out=$(check); then
  echo "the unplanted copy already fails:"; echo "$out"; exit 1
fi

failures=0
# plant RULE FILE LINE: appends LINE to FILE, expects the check to fail naming
# RULE (and the planted file), then puts FILE back.
plant() {
  rule=$1 file=$2 line=$3
  cp "$work/$file" "$work/$file.orig"
  printf '%s\n' "$line" >>"$work/$file"
  if out=$(check); then
    echo "FAIL [$rule]: planting '$line' in $file did not fail the check"; failures=$((failures + 1))
  elif ! printf '%s\n' "$out" | grep -q "^\[$rule\] .*${4:-$file}"; then
    echo "FAIL [$rule]: the check failed, but not naming rule $rule for ${4:-$file}:"; echo "$out"
    failures=$((failures + 1))
  else
    echo "ok [$rule]: $(printf '%s\n' "$out" | grep "^\[$rule\]" | head -n 1)"
  fi
  mv "$work/$file.orig" "$work/$file"
}

plant components lib/core/types.cpp '#include "engine/wandb_logger.hpp"'
plant components lib/llm/http.cpp '#include "eval/stats.hpp"'
plant search lib/eval/stats.cpp '#include "search/session.hpp"'
plant search lib/export/bundle.cpp '#include "search/tune/tuner.hpp"'
plant search lib/tasks/task_file.cpp '#include "ksearch/strategy.hpp"'
plant components lib/core/types.cpp '#include "search/session.hpp"'
plant owners lib/eval/stats.cpp '#include "ksearch/report.hpp"'
plant owners lib/core/types.cpp '#include "ksearch/eval.hpp"'
plant owners lib/util/fs.cpp '#include "ksearch/unlisted.hpp"'
plant relative lib/tasks/task_file.cpp '#include "../eval/stats.hpp"'
plant relative lib/core/types.cpp '#include "../../tests/doctest.h"'
plant cmake lib/core/CMakeLists.txt 'include(${PROJECT_SOURCE_DIR}/lib/tasks/gpumode/CMakeLists.txt)'
plant cmake lib/export/CMakeLists.txt 'include(${PROJECT_SOURCE_DIR}/lib/tasks/gpumode/embed_files.cmake)'
plant cmake lib/export/CMakeLists.txt 'include(${_ks_embed})'
plant benchmarks benchmarks/trimul/bench_trimul.cpp '#include "eval/stats.hpp"'
plant benchmarks benchmarks/trimul/bench_trimul.cpp '#include "../../lib/eval/stats.hpp"'
plant benchmarks benchmarks/internal_includes.txt 'benchmarks/trimul/bench_trimul.cpp util/fs.hpp  stale' benchmarks/trimul/bench_trimul.cpp
plant examples examples/cli/args.cpp '#include "util/fs.hpp"'
plant sys include/ksearch/eval.hpp '#include "ksearch/sys/evaluator.hpp"'
plant headers include/ksearch/run_store.hpp '#include "ksearch/strategy.hpp"'
plant headers include/ksearch/error.hpp '#include "ksearch/status.h"'
plant table docs/architecture.md '| `ksearch/types.hpp` | core | `lib/core/types.cpp` |' ksearch/types.hpp
plant table docs/architecture.md '| `ksearch/gone.hpp` | core | `lib/core/gone.cpp` |' ksearch/gone.hpp
# A public header without a row.
: >"$work/include/ksearch/new_header.hpp"
if out=$(check) || ! printf '%s\n' "$out" | grep -q '^\[table\] ksearch/new_header.hpp has 0 rows'; then
  echo "FAIL [table]: a header without a row in the owner table passed"; failures=$((failures + 1))
else
  echo "ok [table]: a header without a row fails"
fi
rm "$work/include/ksearch/new_header.hpp"
# A header whose row names no room of its name.
: >"$work/include/ksearch/roomless.hpp"
plant room docs/architecture.md '| `ksearch/roomless.hpp` | core | `lib/core/io.cpp` |' ksearch/roomless.hpp
rm "$work/include/ksearch/roomless.hpp"

[ "$failures" = 0 ] || { echo "$failures planted violations went unnoticed"; exit 1; }
echo "every planted violation fails the check, naming its rule"
