#!/bin/sh
# What an agent that calls `ksearch eval` once per candidate waits for: the
# wall time of fresh `ksearch eval` processes on one cache folder, side by
# side in one run, without and with the evaluation server (--server,
# docs/evaluation.md). A GPU task's reference outputs too large for the file
# cache are recomputed by every fresh process of its own; the server keeps
# them in GPU memory between processes.
#
#   benchmarks/eval/fresh_eval.sh BUILD_DIR [TASK [SOLUTION]]
#
# Default: gpumode/trimul with the shipped v4 candidate. Order: one cold
# evaluation (fills the cache folder), two fresh processes without a server,
# four with --server (the first starts it), a new candidate (an unused kernel
# appended, so its module is new) through the server, that candidate again;
# then the server is stopped. Prints each wall time and the phases of each
# evaluation. It never fails on a time.
set -u
build=$1
task=${2:-gpumode/trimul}
here=$(cd "$(dirname "$0")/../.." && pwd)
solution=${3:-$here/examples/trimul/candidates/v4_pipelined_fp16.md}
ks="$build/examples/cli/ksearch"
cache=$(mktemp -d "${TMPDIR:-/tmp}/fresh_eval.XXXXXX")
trap 'rm -rf "$cache"' EXIT
py=${KSEARCH_PYTHON:-python3}
fresh="$cache/new_candidate.md"
"$py" - "$solution" "$fresh" <<'PY'
import sys
t = open(sys.argv[1]).read()
# A CUDA answer gets an unused kernel in its first source block; another is evaluated as it is.
i = t.find("```cuda")
if i >= 0:
    j = t.index("\n```", i + 7)
    t = t[:j] + '\nextern "C" __global__ void fresh_eval_new_kernel(int* p) { if (p) *p = 1; }' + t[j:]
else:
    t += "\n"
open(sys.argv[2], "w").write(t)
PY
ev() { # label, extra arguments
  label=$1; shift
  t0=$("$py" -c "import time; print(time.time())")
  "$ks" eval --task "$task" --cache-dir "$cache/c" --json "$@" > "$cache/e.json" 2> "$cache/e.err"; rc=$?
  "$py" - "$label" "$rc" "$t0" "$cache/e.json" "$cache/e.err" <<'PY'
import json, sys, time
label, rc, t0, path, err = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
wall = time.time() - t0
try:
    r = json.load(open(path)); m = r.get("metrics", {}); p = m.get("phases", {})
    phases = " ".join("%s %.3f" % (k[:-2], v) for k, v in p.items() if v > 0.002 and k != "wall_s")
    print("%-40s exit %s, wall %6.2f s, %s; server %s\n    %s" % (label, rc, wall, r.get("status"), m.get("evaluation_server_pid"), phases))
except Exception:
    print("%-40s exit %s, wall %6.2f s: %s" % (label, rc, wall, open(err).read()[-300:]))
PY
}
echo "fresh ksearch eval of $solution on $task, cache $cache/c"
ev "cold (fills the cache folder)" --solution "$solution"
for i in 1 2; do ev "fresh, own evaluator #$i" --solution "$solution"; done
for i in 1 2 3 4; do ev "fresh, --server #$i" --solution "$solution" --server --server-idle 120; done
ev "new candidate, --server" --solution "$fresh" --server --server-idle 120
ev "new candidate again, --server" --solution "$fresh" --server --server-idle 120
"$ks" eval --stop-server --cache-dir "$cache/c"
