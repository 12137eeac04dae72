#!/bin/sh
# Runs tests while busy loops keep the cores occupied, to show that they do
# not depend on the machine's speed (CI runs the suite on 2 shared cores).
#
#   tests/stress/run_under_load.sh [-n LOOPS] [-r RUNS] [-b BUILD_DIR] CTEST_ARGS...
#   tests/stress/run_under_load.sh [-n LOOPS] [-r RUNS] -c COMMAND [ARGS...]
#
# -n: busy loops (`while :; do :; done`), default one per core; -r: how many
# times to run the selection (each run must pass), default 1; -b: the build
# folder, default build; -c: run COMMAND instead of ctest. The loops are
# killed, by their PIDs, however the script ends. Examples:
#
#   tests/stress/run_under_load.sh -n 2 -r 3 -R 'test_python_tracking|e2e_report'
#   tests/stress/run_under_load.sh -n 2 -r 10 -c sh -c 'cd tests/python && python3 -m unittest ...'
set -eu
cd "$(dirname "$0")/../.."
loops=$(nproc)
runs=1
build=build
command=0
# Its own options first; everything after them goes to ctest (or is the command).
while [ $# -gt 0 ]; do
  case $1 in
    -n) loops=$2; shift 2 ;;
    -r) runs=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    -c) command=1; shift; break ;;
    --) shift; break ;;
    *) break ;;
  esac
done

pids=""
stop_loops() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
}
trap stop_loops EXIT
trap 'exit 130' INT TERM
i=0
while [ "$i" -lt "$loops" ]; do
  sh -c 'while :; do :; done' &
  pids="$pids $!"
  i=$((i + 1))
done
echo "run_under_load: $loops busy loop(s) (PIDs$pids) on $(nproc) core(s)"

passed=0
run=1
while [ "$run" -le "$runs" ]; do
  start=$(date +%s)
  if [ "$command" = 1 ]; then
    if "$@"; then ok=1; else ok=0; fi
  else
    if ctest --test-dir "$build" --output-on-failure "$@"; then ok=1; else ok=0; fi
  fi
  passed=$((passed + ok))
  echo "run_under_load: run $run of $runs: $([ "$ok" = 1 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
  run=$((run + 1))
done
echo "run_under_load: $passed of $runs run(s) passed under $loops busy loop(s)"
[ "$passed" -eq "$runs" ]
