#!/bin/sh
# FlashInfer-Bench CUDA Solutions with a PyTorch binding imported by `ksearch eval` (issue 26, item 5), on a GPU
# machine, in under five minutes on an H100 (most of it two nvcc builds of the extension).
#
#   benchmarks/flashinfer/import_check.sh BUILD_DIR OUT_DIR [SOLUTION.json TASK]
#
# Without SOLUTION: writes two Solutions of solutions/gqa_decode_cuda/ (a plain warp-per-head GQA decode kernel
# written for this check) for flashinfer/gqa_paged_decode_h32_kv4_d128_ps1: gqa_cuda_torch.json (binding torch,
# destination-passing) and gqa_cuda_old_schema.json (K-Search's schema: kernel.h, kernel.cu, main.cpp with a
# PYBIND11_MODULE whose run returns the outputs; no binding field). Each is evaluated on the task's feedback
# workloads with `ksearch eval --json`; the first again, which must find its build (extension_build_s small);
# `ksearch export --format flashinfer` of each must give the Solution back with binding and style written out.
# With SOLUTION and TASK: that Solution (e.g. one of K-Search's published results) on that task, all workloads.
# Needs $KSEARCH_PYTHON (default python3) with a CUDA build of PyTorch, nvcc and ninja. Prints PASS/FAIL lines
# and, per evaluation, status, mean latency, score and build time; exit 0 only when all pass.
set -u
[ $# -ge 2 ] || { sed -n '2,17p' "$0"; exit 2; }
build=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")" && pwd)
ks="$build/examples/cli/ksearch"
py=${KSEARCH_PYTHON:-python3}
KSEARCH_PYTHON=$py; export KSEARCH_PYTHON
mkdir -p "$out"; out=$(cd "$out" && pwd)
cache="$out/cache"
fails=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
command -v nvcc >/dev/null || echo "note: no nvcc in PATH; PyTorch looks in \$CUDA_HOME (${CUDA_HOME:-unset}) and /usr/local/cuda"

verdict() {  # verdict OK TEXT
  if [ "$1" = 1 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi
}

# eval NAME SOLUTION TASK WORKLOADS: runs ksearch eval, prints the summary, sets $status and $build_s.
evaluate() {
  timeout 280 "$ks" eval --task "$3" --solution "$2" --workloads "$4" --json --cache-dir "$cache" \
    > "$out/$1.eval.json" 2> "$out/$1.log"
  rc=$?
  summary=$("$py" - "$out/$1.eval.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("unreadable 0"); print("  unreadable result:", e); sys.exit()
m = r.get("metrics", {})
timed = [w for w in r.get("workloads", []) if w.get("benchmark") and w.get("timing", {}).get("count")]
mean = sum(w["timing"]["mean_ms"] for w in timed) / len(timed) if timed else 0
msg = next((w.get("message", "") for w in r.get("workloads", []) if w.get("status") != "passed"), "")
print(r.get("status"), m.get("extension_build_s", 0))
print("  %s: mean latency %.4f ms over %d timed workloads, score %.4f (vs_baseline %.4f), extension build %.1f s, "
      "compile_s %.1f, process_start_s %.2f %s" % (r.get("status"), mean, len(timed), r.get("score", 0),
      r.get("vs_baseline", 0), m.get("extension_build_s", 0), m.get("compile_s", 0), m.get("process_start_s", 0),
      msg[:600]))
PY
)
  status=$(echo "$summary" | sed -n '1s/ .*//p'); build_s=$(echo "$summary" | sed -n '1s/.* //p')
  echo "$summary" | sed -n '2,$p'
  [ $rc -eq 124 ] && echo "  (ksearch eval ran past 280 s and was stopped)"
}

if [ $# -ge 4 ]; then
  evaluate given "$3" "$4" all
  verdict "$([ "$status" = passed ] && echo 1)" "ksearch eval of $3 on $4 (log: $out/given.log)"
  exit $((fails > 0))
fi

task=flashinfer/gqa_paged_decode_h32_kv4_d128_ps1
"$py" - "$here/solutions/gqa_decode_cuda" "$out" <<'PY'
import json, sys
from pathlib import Path
src, out = Path(sys.argv[1]), Path(sys.argv[2])
def files(main):
    return [{"path": "kernel.h", "content": (src / "kernel.h").read_text()},
            {"path": "kernel.cu", "content": (src / "kernel.cu").read_text()},
            {"path": "main.cpp", "content": (src / main).read_text()}]
base = {"definition": "gqa_paged_decode_h32_kv4_d128_ps1", "author": "libksearch import_check"}
new = dict(base, name="gqa_cuda_torch", description="warp per (request, q head); binding torch, destination-passing",
           spec={"language": "cuda", "target_hardware": ["NVIDIA_H100"], "entry_point": "main.cpp::run",
                 "dependencies": [], "destination_passing_style": True, "binding": "torch"},
           sources=files("main_dps.cpp"))
old = dict(base, name="gqa_cuda_old_schema", description="the same kernel in K-Search's schema: run returns",
           spec={"language": "cuda", "target_hardware": ["NVIDIA_H100"], "entry_point": "main.cpp::run",
                 "dependencies": []},
           sources=files("main_returning.cpp"))
for s in (new, old):
    (out / (s["name"] + ".json")).write_text(json.dumps(s, indent=2) + "\n")
PY
rm -rf "$cache"
for name in gqa_cuda_torch gqa_cuda_old_schema; do
  echo "$name:"
  evaluate "$name" "$out/$name.json" "$task" feedback
  verdict "$([ "$status" = passed ] && echo 1)" "$name: ksearch eval on the feedback workloads (log: $out/$name.log)"
  [ "$name" = gqa_cuda_torch ] && first_build=$build_s
  "$ks" export --format flashinfer --task "$task" --solution "$out/$name.json" -o "$out/$name.export.json" \
    > "$out/$name.export.log" 2>&1
  same=$("$py" - "$out/$name.json" "$out/$name.export.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
a["spec"].setdefault("binding", "torch")  # the older schema: written out by the export
a["spec"].setdefault("destination_passing_style", False)
print(1 if a == b else 0)
PY
)
  verdict "$same" "$name: ksearch export --format flashinfer gives the Solution back (binding, style written out)"
done
echo "gqa_cuda_torch again (its build in the cache):"
evaluate again "$out/gqa_cuda_torch.json" "$task" feedback
verdict "$([ "$status" = passed ] && "$py" -c "import sys; sys.exit(0 if float('$build_s') < max(5.0, float('$first_build') / 4) else 1)" && echo 1)" \
  "the second evaluation reused the build (${build_s} s against ${first_build} s)"
exit $((fails > 0))
