#!/bin/sh
# KernelBench on a GPU, in one script (issue 12). Results go to OUT_DIR.
#
#   benchmarks/kernelbench/gpu_check.sh BUILD_DIR OUT_DIR KERNELBENCH_DIR [native|oracle|triton|bench|demo|all]...
#
# native  the native level-1 tasks with no Python: their CUDA reference, the
#         straightforward starting kernel (correct) and a wrong variant (half
#         the grid) get libksearch's verdict on libksearch's own inputs.
# oracle  the same three solutions as candidates of the oracle tasks of the
#         same names: KernelBench's inputs and PyTorch's outputs (trial
#         seeds 0-2, KernelBench's tolerance; the oracle keeps every trial in
#         GPU memory, 12.8 GB per trial for the [4096, 393216] problems, so
#         not KernelBench's 5). The native reference passing there is the
#         check that it agrees with the PyTorch module on the same inputs; the
#         conv problem is checked again with TF32 off, since PyTorch runs it in
#         TF32 by default. Reports which handover ran (CUDA IPC or files).
#         Then KernelBench's own eval_kernel_against_ref on each correct and
#         wrong candidate, exported as a ModelNew that runs the cubin the
#         evaluation above built (ksearch export --format kernelbench), and
#         whether its verdict agrees with libksearch's.
# triton  Triton ModelNew files (solutions/) evaluated as they are on the
#         native and oracle tasks, exported, and checked by KernelBench's
#         own eval_kernel_against_ref with backend="triton".
# bench   evaluation time per candidate of 19_ReLU through the oracle
#         (reference cached) beside KernelBench's own evaluation of the same
#         kernel (eval_kernel_against_ref on a load_inline ModelNew).
# demo    records a scripted greedy search on kernelbench/level1/19_ReLU
#         (no Python model, no API key), then replays it.
#
# PROBLEMS (environment) overrides the 20 problems checked; the oracle section
# takes about a minute per problem (PyTorch makes KernelBench's inputs on the
# CPU), so run it in halves within a 10-minute limit.
set -u
build=$1; out=$2; kb=$3; shift 3
[ $# -eq 0 ] && set -- all
sections="$*"
want() { for a in $sections; do [ "$a" = all ] || [ "$a" = "$1" ] && return 0; done; return 1; }
ks="$build/examples/cli/ksearch"
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
export KSEARCH_CACHE_DIR="${KSEARCH_CACHE_DIR:-/tmp/ksearch-kernelbench-cache}"
export KSEARCH_PYTHON="${KSEARCH_PYTHON:-python3}"
PROBLEMS=${PROBLEMS:-"1_Square_matrix_multiplication_ 2_Standard_matrix_multiplication_ 3_Batched_matrix_multiplication
4_Matrix_vector_multiplication_ 5_Matrix_scalar_multiplication 8_Matmul_with_irregular_shapes_
9_Tall_skinny_matrix_multiplication_ 12_Matmul_with_diagonal_matrices_ 19_ReLU 21_Sigmoid 22_Tanh 23_Softmax
24_LogSoftmax 26_GELU_ 36_RMSNorm_ 40_LayerNorm 47_Sum_reduction_over_a_dimension 49_Max_reduction_over_a_dimension
63_conv_standard_2D__square_input__square_kernel 89_cumsum"}

# KernelBench's eval.py imports pydantic; where it is missing, the wheels of $KSEARCH_WHEELS (default: the
# checkout's .whl/, as benchmarks/flashinfer/harness_check.sh uses) go into OUT_DIR/site.
if ! "$KSEARCH_PYTHON" -c "import pydantic" 2>/dev/null; then
  wheels=${KSEARCH_WHEELS:-$src/.whl}
  "$KSEARCH_PYTHON" -m pip install -q --no-index --no-deps --target "$out/site" "$wheels"/pydantic*.whl \
    "$wheels"/annotated_types*.whl "$wheels"/typing_inspection*.whl "$wheels"/typing_extensions*.whl \
    > "$out/pip.log" 2>&1 || echo "gpu_check: pydantic is missing and $wheels has no wheels for it (see $out/pip.log)"
  PYTHONPATH="$out/site${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi
"$ks" devices || { echo "gpu_check: no usable GPU"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
"$KSEARCH_PYTHON" -c "import torch; print('PyTorch', torch.__version__, 'CUDA', torch.version.cuda)"
( cd "$kb" && git rev-parse --short HEAD 2>/dev/null | sed 's/^/KernelBench /' )

tasks=""
for p in $PROBLEMS; do tasks="$tasks kernelbench/level1/$p"; done
python3 "$here/make_candidates.py" "$ks" "$out/candidates" $tasks > /dev/null || exit 1
list() {  # the --problems list of one kind of candidate, or all
  for p in $PROBLEMS; do
    for c in ${1:-reference correct wrong unwritten}; do echo "kernelbench/level1/$p $out/candidates/$p/$c.json"; done
  done
}

summary() {  # JSON of ksearch eval --problems -> one line per problem and candidate
  python3 - "$1" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
r = json.loads(text[text.index("{"):])
for row in r["problems"]:
    cand = row["solution_file"].split("/")[-1].replace(".json", "")
    m = row.get("metrics", {})
    path = {1: "cuda_ipc", 0: "file"}.get(m.get("oracle_cuda_ipc"), "-")
    why = "" if row["status"] == "passed" else (row["workloads"][-1]["message"] if row["workloads"] else row["log"])[:160]
    print(f"{row['task'].split('/')[-1]:52s} {cand:10s} {row['status']:12s} {row['latency_ms']:9.4f} ms "
          f"max_rel {max([w.get('max_rel_error', 0) for w in row['workloads']] or [0]):.2e} handover {path:8s} {why}")
s = r["summary"]
print(f"{s['n_correct']}/{s['n_total']} correct")
PY
}

if want native; then
  echo "== native level-1 tasks (no Python): reference, correct, wrong"
  list > "$out/native.list"
  timeout 3000 "$ks" eval --problems "$out/native.list" --json --max-time 0.5 --no-reference-timing \
    > "$out/native.json" 2> "$out/native.err"
  summary "$out/native.json" | tee "$out/native.txt"
fi

if want oracle; then
  echo "== the same solutions on the oracle tasks (KernelBench's inputs, PyTorch's outputs, trials 0-2)"
  list > "$out/oracle.list"
  # ORACLE_ONLY=1 / KB_OWN_ONLY=1 split this section over two calls of a
  # time-limited machine (the second reuses oracle.json).
  if [ -z "${KB_OWN_ONLY:-}" ]; then
  timeout 3000 "$ks" eval --kernelbench "$kb" --problems "$out/oracle.list" --json --seeds 2 --max-time 0.5 \
    --no-reference-timing > "$out/oracle.json" 2> "$out/oracle.err"
  summary "$out/oracle.json" | tee "$out/oracle.txt"
  grep -h "note:" "$out/oracle.err" | sort -u
  fi
  [ -n "${ORACLE_ONLY:-}" ] && exit 0
  case " $PROBLEMS " in *" 63_conv_standard_2D__square_input__square_kernel "*)
  echo "== conv 63 with TF32 off in PyTorch (true FP32 on both sides)"
  echo "kernelbench/level1/63_conv_standard_2D__square_input__square_kernel $out/candidates/63_conv_standard_2D__square_input__square_kernel/reference.json" > "$out/conv.list"
  KSEARCH_KERNELBENCH_ALLOW_TF32=0 KSEARCH_CACHE_DIR="$KSEARCH_CACHE_DIR/notf32" timeout 900 "$ks" eval \
    --kernelbench "$kb" --problems "$out/conv.list" --json --seeds 2 --max-time 0.5 --no-reference-timing \
    > "$out/oracle_conv_notf32.json" 2>&1
  summary "$out/oracle_conv_notf32.json";;
  esac
  echo "== KernelBench's own eval_kernel_against_ref on the exported ModelNew (the cubin libksearch evaluated)"
  # ksearch export --format kernelbench embeds the cubins the oracle evaluation above built (same cache) and the
  # problem file's Model for the module's parameters; kb_own_eval.py runs KernelBench's own check on it.
  [ -n "${KB_KEEP_VERDICTS:-}" ] || rm -f "$out/kernelbench_own_verdicts.jsonl"
  rm -f "$out/export.err"
  for p in $PROBLEMS; do for c in ${KB_CANDIDATES:-correct wrong unwritten}; do
    if "$ks" export --format kernelbench --kernelbench "$kb" --task "kernelbench/level1/$p" \
        --solution "$out/candidates/$p/$c.json" -o "$out/candidates/$p/${c}_modelnew.py" > /dev/null 2>> "$out/export.err"; then
      line=$(KB_TRIALS=${KB_TRIALS:-2} KB_PERF=0 timeout 900 "$KSEARCH_PYTHON" "$here/kb_own_eval.py" "$kb" "$kb/KernelBench/level1/$p.py" \
        "$out/candidates/$p/${c}_modelnew.py" 2>> "$out/kb_own_eval.err" | tail -1)
    else
      line='{"export_failed": true}'
    fi
    echo "{\"problem\": \"$p\", \"candidate\": \"$c\", \"kernelbench\": ${line:-null}}" >> "$out/kernelbench_own_verdicts.jsonl"
  done; done
  python3 - "$out/oracle.json" "$out/kernelbench_own_verdicts.jsonl" <<'PY' | tee "$out/verdicts.txt"
import json, sys
text = open(sys.argv[1]).read()
rows = json.loads(text[text.index("{"):])["problems"]
ours = {(r["task"].split("/")[-1], r["solution_file"].split("/")[-1].replace(".json", "")): r["status"] == "passed"
        for r in rows}
agree = n = 0
print(f"{'problem':52s} {'candidate':9s} {'libksearch':10s} {'KernelBench':11s} agree")
for line in open(sys.argv[2]):
    v = json.loads(line)
    kb = v["kernelbench"] or {}
    theirs = None if kb.get("export_failed") or "correct" not in kb else bool(kb["correct"])
    mine = ours.get((v["problem"], v["candidate"]))
    same = mine is not None and theirs is not None and mine == theirs
    n += 1
    agree += same
    print(f"{v['problem']:52s} {v['candidate']:9s} {str(mine):10s} {str(theirs):11s} {'yes' if same else 'NO'}"
          f"{'' if kb.get('runtime_ms', -1) < 0 else '  KernelBench %.4g ms' % kb['runtime_ms']}")
print(f"{agree}/{n} verdicts agree")
PY
fi

if want triton; then
  echo "== Triton ModelNew candidates (issue 22): native and oracle tasks, then KernelBench's own eval (backend triton)"
  # The files of solutions/ are ModelNew modules as a user has them: ksearch eval takes each as it is (a
  # correct one and a wrong one made from it for 19_ReLU; a LayerNorm whose parameters are nn.LayerNorm's), on the native
  # task (libksearch's inputs, the task's parameters copied in) and on the oracle task (KernelBench's inputs,
  # seeded construction); ksearch export --format kernelbench writes the same file, which KernelBench's
  # eval_kernel_against_ref (backend="triton") then checks and times.
  rm -f "$out/triton_verdicts.txt"
  # The negative control: ReLU computed as max(x, 0.001).
  sed 's/tl.maximum(v, 0.0)/tl.maximum(v, 0.001)/' "$here/solutions/relu_triton.py" > "$out/relu_triton_wrong.py"
  for case in "19_ReLU relu_triton" "19_ReLU relu_triton_wrong" "40_LayerNorm layernorm_triton"; do
    set -- $case
    p=$1; c=$2; f="$here/solutions/$c.py"
    [ -f "$f" ] || f="$out/$c.py"
    for kind in native oracle; do
      extra=""; [ $kind = oracle ] && extra="--kernelbench $kb --seeds 2"
      timeout 600 "$ks" eval --task "kernelbench/level1/$p" $extra --solution "$f" --json --max-time 1 \
        --no-reference-timing > "$out/triton_${c}_$kind.json" 2> "$out/triton_${c}_$kind.err"
      python3 - "$out/triton_${c}_$kind.json" "$p" "$c" "$kind" <<'PY' | tee -a "$out/triton_verdicts.txt"
import json, sys
text = open(sys.argv[1]).read()
try:
    r = json.loads(text[text.index("{"):])
except ValueError:
    r = {"status": "no result", "workloads": []}
why = "" if r["status"] == "passed" else (r["workloads"][-1]["message"] if r["workloads"] else r.get("log", ""))[:200]
lat = r.get("latency_ms", 0)
print(f"libksearch  {sys.argv[2]:14s} {sys.argv[3]:18s} {sys.argv[4]:7s} {r['status']:12s} {lat:9.4f} ms {why}")
PY
    done
    if "$ks" export --format kernelbench --kernelbench "$kb" --task "kernelbench/level1/$p" --solution "$f" \
        -o "$out/${c}_export.py" > "$out/${c}_export.log" 2>&1 && cmp -s "$f" "$out/${c}_export.py"; then
      echo "export      $p $c: the file, byte for byte" | tee -a "$out/triton_verdicts.txt"
    else
      echo "export      $p $c: FAILED ($(tail -1 "$out/${c}_export.log"))" | tee -a "$out/triton_verdicts.txt"
    fi
    KB_BACKEND=triton KB_TRIALS=5 timeout 900 "$KSEARCH_PYTHON" "$here/kb_own_eval.py" "$kb" \
      "$kb/KernelBench/level1/$p.py" "$out/${c}_export.py" 2>> "$out/kb_own_triton.err" | tail -1 |
      sed "s/^/KernelBench $p $c (backend triton): /" | tee -a "$out/triton_verdicts.txt"
  done
fi

if want bench; then
  echo "== evaluation time per candidate, kernelbench/level1/19_ReLU: libksearch (oracle, cached) vs KernelBench"
  rm -f "$out/bench.list"
  for i in 1 2 3 4 5 6; do
    python3 - "$out/candidates/19_ReLU/correct.json" "$out/candidates/19_ReLU/variant$i.json" "$i" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["sources"][0]["content"] = f"// variant {sys.argv[3]}: a new source, so no compile cache hit\n" + s["sources"][0]["content"]
s.pop("id", None)
json.dump(s, open(sys.argv[2], "w"))
PY
    echo "kernelbench/level1/19_ReLU $out/candidates/19_ReLU/variant$i.json" >> "$out/bench.list"
  done
  start=$(date +%s.%N)
  timeout 1200 "$ks" eval --kernelbench "$kb" --problems "$out/bench.list" --json --seeds 3 \
    > "$out/bench_libksearch.json" 2> "$out/bench_libksearch.err"
  end=$(date +%s.%N)
  for i in 1 2 3; do
    sed "s/VARIANT/v$i$$/" "$here/relu_modelnew.py" > "$out/relu_modelnew_$i.py"
    timeout 900 "$KSEARCH_PYTHON" "$here/kb_own_eval.py" "$kb" "$kb/KernelBench/level1/19_ReLU.py" \
      "$out/relu_modelnew_$i.py" "$out/kb_build_$i" 2>> "$out/bench_kernelbench.err" | tail -1 >> "$out/bench_kernelbench.jsonl"
  done
  python3 - "$out/bench_libksearch.json" "$out/bench_kernelbench.jsonl" "$start" "$end" <<'PY' | tee "$out/bench.txt"
import json, sys
text = open(sys.argv[1]).read()
rows = json.loads(text[text.index("{"):])["problems"]
total = float(sys.argv[4]) - float(sys.argv[3])
per = [r["metrics"].get("compile_s", 0) + r["metrics"].get("run_s", 0) for r in rows]
kb = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
print(f"libksearch: {len(rows)} candidates, status {[r['status'] for r in rows]}, wall {total:.1f} s for all "
      f"(process start, oracle start and the first reference included)")
print(f"  per candidate (compile + run): first {per[0]:.2f} s, then {[round(x, 2) for x in per[1:]]}; "
      f"handover {'cuda_ipc' if rows[-1]['metrics'].get('oracle_cuda_ipc') else 'file'}; oracle baselines eager "
      f"{rows[-1]['metrics'].get('eager_ms', 0):.3f} ms compile {rows[-1]['metrics'].get('compile_ms', 0):.3f} ms")
print(f"KernelBench eval_kernel_against_ref per candidate (fresh process, load_inline): "
      f"{[round(k['wall_s'], 1) for k in kb]} s, verdicts {[k['correct'] for k in kb]}")
if kb and len(per) > 1:
    lib = sum(per[1:]) / len(per[1:])
    kbt = sum(k["wall_s"] for k in kb) / len(kb)
    print(f"ratio (KernelBench / libksearch, reference cached): {kbt / lib:.1f}x  ({kbt:.2f} s vs {lib:.2f} s)")
PY
fi

if want demo; then
  echo "== demonstration: a scripted greedy search on kernelbench/level1/19_ReLU, recorded then replayed"
  rm -rf "$out/demo" "$out/demo_replay" "$out/demo_state.json"
  timeout 600 "$ks" run --task kernelbench/level1/19_ReLU --strategy greedy \
    --llm "command:python3 $src/examples/kernelbench/demo_responder.py $out/demo_state.json" \
    --max-rounds 4 --timing-cap 0.5 --run-dir "$out/demo" > "$out/demo.log" 2>&1
  tail -12 "$out/demo.log"
  cp "$out/demo/transcript.jsonl" "$out/demo-transcript.jsonl" 2>/dev/null
  timeout 600 "$ks" run --task kernelbench/level1/19_ReLU --strategy greedy --llm "replay:$out/demo-transcript.jsonl" \
    --max-rounds 4 --timing-cap 0.5 --run-dir "$out/demo_replay" > "$out/demo_replay.log" 2>&1
  tail -6 "$out/demo_replay.log"
  echo "(copy $out/demo-transcript.jsonl to examples/kernelbench/demo-transcript.jsonl)"
fi
