#!/bin/sh
# FlashInfer-Bench CUDA Solutions with a PyTorch binding imported by `ksearch eval` (issue 26, item 5), on a GPU
# machine, in under five minutes on an H100 (most of it two nvcc builds of the extension).
#
#   benchmarks/flashinfer/import_check.sh BUILD_DIR OUT_DIR [SOLUTION.json TASK]
#
# Without SOLUTION: writes three Solutions of solutions/gqa_decode_cuda/ (a plain warp-per-head GQA decode kernel
# written for this check) for flashinfer/gqa_paged_decode_h32_kv4_d128_ps1: gqa_cuda_torch.json (binding torch,
# destination-passing), gqa_cuda_old_schema.json (K-Search's schema: kernel.h, kernel.cu, main.cpp with a
# PYBIND11_MODULE whose run returns the outputs; no binding field) and gqa_cuda_tvm_ffi.json (no binding field:
# FlashInfer-Bench's default, tvm-ffi, with TVM_FFI_DLL_EXPORT_TYPED_FUNC in main.cu: tvm-ffi compiles a .cpp with
# the C++ compiler, without CUDA's headers; needs the apache-tvm-ffi package, else it is reported as SKIP). Each is evaluated on the task's feedback workloads with `ksearch eval --json`; the
# torch and tvm-ffi ones again, which must find their builds (the extension library not linked again);
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
def files(main, name="main.cpp"):
    return [{"path": "kernel.h", "content": (src / "kernel.h").read_text()},
            {"path": "kernel.cu", "content": (src / "kernel.cu").read_text()},
            {"path": name, "content": (src / main).read_text()}]
base = {"definition": "gqa_paged_decode_h32_kv4_d128_ps1", "author": "libksearch import_check"}
new = dict(base, name="gqa_cuda_torch", description="warp per (request, q head); binding torch, destination-passing",
           spec={"language": "cuda", "target_hardware": ["NVIDIA_H100"], "entry_point": "main.cpp::run",
                 "dependencies": [], "destination_passing_style": True, "binding": "torch"},
           sources=files("main_dps.cpp"))
old = dict(base, name="gqa_cuda_old_schema", description="the same kernel in K-Search's schema: run returns",
           spec={"language": "cuda", "target_hardware": ["NVIDIA_H100"], "entry_point": "main.cpp::run",
                 "dependencies": []},
           sources=files("main_returning.cpp"))
tvm = dict(base, name="gqa_cuda_tvm_ffi", description="the same kernel bound with tvm-ffi (the default binding)",
           spec={"language": "cuda", "target_hardware": ["NVIDIA_H100"], "entry_point": "main.cu::run",
                 "dependencies": []},
           sources=files("main_tvm_ffi.cu", "main.cu"))
for s in (new, old, tvm):
    (out / (s["name"] + ".json")).write_text(json.dumps(s, indent=2) + "\n")
PY
rm -rf "$cache"
names="gqa_cuda_torch gqa_cuda_old_schema"
if "$py" -c "import tvm_ffi.cpp" 2>/dev/null; then
  names="$names gqa_cuda_tvm_ffi"
else
  echo "SKIP: gqa_cuda_tvm_ffi ($py cannot import tvm_ffi: pip install apache-tvm-ffi)"
fi
# The extension libraries built in the cache, with their modification times.
libraries() { find "$cache" -name 'fib_*.so' -printf '%p %T@\n' 2>/dev/null | sort; }
for name in $names; do
  echo "$name:"
  evaluate "$name" "$out/$name.json" "$task" feedback
  verdict "$([ "$status" = passed ] && echo 1)" "$name: ksearch eval on the feedback workloads (log: $out/$name.log)"
  "$ks" export --format flashinfer --task "$task" --solution "$out/$name.json" -o "$out/$name.export.json" \
    > "$out/$name.export.log" 2>&1
  same=$("$py" - "$out/$name.json" "$out/$name.export.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
# Written out by the export: the binding and the style. Without a binding, a PYBIND11_MODULE means the older
# schema (torch, run returns the outputs); else FlashInfer-Bench's defaults (tvm-ffi, destination-passing).
pybind = "PYBIND11_MODULE" in a["sources"][-1]["content"]
a["spec"].setdefault("binding", "torch" if pybind else "tvm-ffi")
a["spec"].setdefault("destination_passing_style", not pybind)
print(1 if a == b else 0)
PY
)
  verdict "$same" "$name: ksearch export --format flashinfer gives the Solution back (binding, style written out)"
done
for name in $names; do
  [ "$name" = gqa_cuda_old_schema ] && continue
  echo "$name again (its build in the cache):"
  before=$(libraries)
  evaluate "$name.again" "$out/$name.json" "$task" feedback
  verdict "$([ "$status" = passed ] && [ "$(libraries)" = "$before" ] && echo 1)" \
    "$name: the second evaluation reused the build (no library linked again; reported build time ${build_s} s)"
done
exit $((fails > 0))
