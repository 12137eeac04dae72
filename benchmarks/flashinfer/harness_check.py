#!/usr/bin/env python3
"""libksearch's FlashInfer-Bench exports checked by FlashInfer-Bench's own evaluator, on a GPU
(issue 11: "the exported Solution of one task passes FlashInfer-Bench's own harness on your fixture, and
its timing there is reported beside libksearch's"). Run by harness_check.sh; one process per harness.

For each task (gqa first; then mla_decode, mla_prefill, moe while the time budget lasts):
  1. a fixture dataset in FlashInfer-Trace layout (harness_fixture.py): the definition with a PyTorch
     reference, workloads with page tables and offsets in .safetensors files and scalar inputs;
  2. `ksearch eval` of the task's starting kernel on that dataset (libksearch's native reference, its
     timing), with a fresh cache;
  3. `ksearch export --format flashinfer` of the same kernel from that cache (so the Solution embeds the
     very cubin just evaluated), and of a deliberately wrong variant (a negative control: pages read in
     order instead of through the page table; MoE: the expert offset ignored); for GQA also a Triton
     Solution (solutions/gqa_decode_triton.py) and its wrong variant, as FlashInfer-Bench JSON files that
     `ksearch eval` takes as they are and `ksearch export` writes back;
  4. FlashInfer-Bench's Benchmark (TraceSet from the dataset, its persistent runner, its default or
     low-bit evaluator, its do_bench timing) on both Solutions; then, in the same process, the host time of
     one call of the exported entry point (FlashInfer-Bench's events enclose it);
  6. PASS/FAIL lines, a per-workload table of both latencies, OUT/harness_check.json.

    harness_check.py --build BUILD --out OUT [--budget S] [TASK ...]
    harness_check.py fib DATASET DEFINITION OUT_JSON LOG_DIR SOLUTION...     (the FlashInfer-Bench step)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent

TASKS = {
    "gqa": ("gqa_paged_decode_h32_kv4_d128_ps1", "gqa_paged",
            [("(long long)kv_indices[j] * KV_HEADS", "(long long)j * KV_HEADS")], "pages read in order", 45),
    "mla_decode": ("mla_paged_decode_h16_ckv512_kpe64_ps1", "mla_paged",
                   [("const long long row = kv_indices[j]", "const long long row = j")], "pages read in order", 35),
    "mla_prefill": ("mla_paged_prefill_causal_h16_ckv512_kpe64_ps1", "mla_paged",
                    [("const long long row = kv_indices[kv_begin + j]", "const long long row = kv_begin + j")],
                    "pages read in order", 35),
    "moe": ("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", "moe",
            [("const int le = topk_ids[pair] - local_expert_offset",
              "const int le = topk_ids[pair] - 0 * local_expert_offset"),
             ("const int le = topk_ids[t * TOPK + k] - local_expert_offset",
              "const int le = topk_ids[t * TOPK + k] - 0 * local_expert_offset")], "local_expert_offset ignored",
            75),
}


# Triton Solutions (issue 22), written for this check: the file, and the negative control's edit.
PYTHON = {
    "gqa": ("solutions/gqa_decode_triton.py",
            [("page = tl.load(kv_indices + n, mask=inside, other=0)", "page = n")], "pages read in order"),
}


# ---------------------------------------------------------------------------
# The FlashInfer-Bench step (its own process: the harness spawns workers and owns the GPU state).

def fib_step(dataset, definition, out_json, log_dir, solutions):
    import torch
    from flashinfer_bench import Benchmark, BenchmarkConfig, TraceSet
    ts = TraceSet.from_path(dataset)
    # FlashInfer-Bench's defaults (warmup 10, 50 iterations, 3 input sets); the PyTorch reference is run for
    # the expected outputs but not timed (its latency is not compared here).
    cfg = BenchmarkConfig(definitions=[definition], solutions=solutions, log_dir=log_dir, profile_baseline=False,
                          timeout_seconds=120)
    t0 = time.time()
    bench = Benchmark(ts, cfg)
    try:
        result = bench.run_all(dump_traces=False)
    finally:
        bench.close()
    seconds = time.time() - t0
    host = {}
    try:  # the host time of the first Solution's entry point, in this process (PyTorch already loaded)
        sol = next(x for x in ts.solutions.get(definition, []) if x.name == solutions[0])
        host = host_time(ts, definition, sol.model_dump(mode="json"), Path(out_json).parent)
    except Exception as e:  # reported, not fatal: the verdicts above do not depend on it
        host = {"error": "%s: %s" % (type(e).__name__, e)}
    rows = []
    for tr in result.traces.get(definition, []):
        ev = tr.evaluation
        rows.append({"workload": tr.workload.uuid, "solution": tr.solution, "status": ev.status.value,
                     "latency_ms": ev.performance.latency_ms if ev.performance else None,
                     "max_abs_error": ev.correctness.max_absolute_error if ev.correctness else None,
                     "max_rel_error": ev.correctness.max_relative_error if ev.correctness else None,
                     "hardware": ev.environment.hardware if ev.environment else None,
                     "log_tail": (ev.log or "")[-1500:] if ev.status.value != "PASSED" else ""})
    json.dump({"traces": rows, "seconds": seconds, "torch": torch.__version__, "host_ms": host,
               "workloads": [t.workload.uuid for t in ts.workloads.get(definition, [])]},
              open(out_json, "w"), indent=1)


def host_time(ts, definition, sol, folder):
    """Host time of one call of the exported run() (the GPU idle before it), per workload: FlashInfer-Bench's
    do_bench records its start event before the call enters Python, so its latency includes this."""
    import importlib.util
    import torch
    from flashinfer_bench.bench.utils import gen_inputs, load_safetensors
    from flashinfer_bench.bench.evaluators.utils import allocate_outputs
    d = ts.definitions[definition]
    folder = Path(folder) / "host_time"
    shutil.rmtree(folder, ignore_errors=True)
    for s in sol["sources"]:
        p = folder / s["path"]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(s["content"])
    spec = importlib.util.spec_from_file_location("ks_exported_main", folder / "main.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    torch.cuda.set_device(0)
    out = {}
    for tr in ts.workloads[definition]:
        w = tr.workload
        inputs = gen_inputs(d, w, "cuda:0", load_safetensors(d, w, ts.root))
        outputs = allocate_outputs(d, inputs, "cuda:0")
        for _ in range(5):
            m.run(*inputs, *outputs)
        torch.cuda.synchronize()
        host = []
        for _ in range(50):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            m.run(*inputs, *outputs)
            host.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
        out[w.uuid] = {"host_ms_median": statistics.median(host), "host_ms_min": min(host)}
        del inputs, outputs
    return out


# ---------------------------------------------------------------------------
# The driver.

def run(cmd, timeout, log):
    """(returncode or 'timeout', stdout, stdout and stderr) of a command, its output kept in `log`."""
    t0 = time.time()

    def text_of(x):
        return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")

    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(timeout, 5))
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, stdout, stderr = "timeout", text_of(e.stdout), text_of(e.stderr)
    Path(log).write_text("$ %s\n%s\n%s\n(exit %s, %.1f s)\n" % (" ".join(map(str, cmd)), stdout, stderr, rc,
                                                               time.time() - t0))
    return rc, stdout, stdout + stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=225, help="seconds for everything (default 225)")
    ap.add_argument("tasks", nargs="*", default=list(TASKS))
    a = ap.parse_args()
    start = time.time()
    deadline = start + a.budget
    ks = str(Path(a.build) / "examples/cli/ksearch")
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    dataset = out / "dataset"
    cache = out / "cache"
    shutil.rmtree(dataset, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    py = sys.executable
    lines = []
    summary = {"card": None, "tasks": {}, "pass": True}

    def say(s):
        print(s, flush=True)
        lines.append(s)

    def verdict(ok, what):
        say("%s: %s" % ("PASS" if ok else "FAIL", what))
        summary["pass"] = summary["pass"] and ok
        return ok

    try:
        import torch
        summary["card"] = torch.cuda.get_device_name(0)
        summary["torch"] = torch.__version__
        import flashinfer_bench  # noqa: F401
        from importlib.metadata import version
        summary["flashinfer_bench"] = version("flashinfer-bench")
    except Exception as e:  # no GPU, no PyTorch or no flashinfer_bench: nothing can run
        verdict(False, "setup: %s" % e)
        json.dump(summary, open(out / "harness_check.json", "w"), indent=1)
        return 1
    say("card %s, PyTorch %s, flashinfer-bench %s" % (summary["card"], summary["torch"], summary["flashinfer_bench"]))
    for key in a.tasks:
        if key not in TASKS:
            verdict(False, "unknown task %r (one of %s)" % (key, ", ".join(TASKS)))
    keys = [k for k in a.tasks if k in TASKS]
    rc, _, text = run([py, str(HERE / "harness_fixture.py"), str(dataset)] + keys, 60, out / "fixture.log")
    if rc != 0:
        verdict(False, "fixture: %s" % text[-500:])
        return 1

    for key in keys:
        definition, op_type, edits, wrong_what, need = TASKS[key]
        task = {"definition": definition}
        summary["tasks"][key] = task
        left = deadline - time.time()
        if left < need:
            say("SKIPPED: %s: %.0f s of the budget left, it needs about %d s (rerun with this task alone)" % (
                definition, left, need))
            task["skipped"] = True
            continue
        say("== %s" % definition)
        logs = out / key
        logs.mkdir(exist_ok=True)
        defn = dataset / "definitions" / op_type / (definition + ".json")
        tspec = json.loads(subprocess.run([ks, "tasks", "--spec", "flashinfer/" + definition], check=True,
                                          capture_output=True, text=True).stdout)
        start_sol = tspec["starting_points"][0]
        wrong = json.loads(json.dumps(start_sol))
        wrong["name"] = start_sol["name"] + " (wrong: %s)" % wrong_what
        applied = 0
        for src in wrong["sources"]:
            for old, new in edits:
                if old in src["content"]:
                    src["content"] = src["content"].replace(old, new)
                    applied += 1
        if applied == 0:
            verdict(False, "%s: the negative control's edit no longer applies to the starting kernel" % definition)
        (logs / "start.json").write_text(json.dumps(start_sol))
        (logs / "wrong.json").write_text(json.dumps(wrong))

        # libksearch: the starting kernel on the fixture's workloads, native reference, fresh cache.
        rc, stdout, _ = run([ks, "eval", "--task", str(defn), "--solution", str(logs / "start.json"), "--cache-dir",
                             str(cache), "--json", "--no-reference-timing", "--max-time", "1"],
                            min(150, deadline - time.time()), logs / "ksearch_eval.log")
        ks_result = None
        try:
            ks_result = json.loads(stdout[stdout.index("{"):stdout.rindex("}") + 1])
        except ValueError:
            pass
        task["ksearch"] = ks_result
        verdict(rc == 0 and ks_result is not None and ks_result.get("status") == "passed",
                "%s: ksearch eval of the starting kernel (exit %s, %s)" % (
                    definition, rc, ks_result.get("status") if ks_result else "no result"))

        # The exports: the cubins the evaluation just built, from its cache.
        sols = {}
        for which, path in (("start", logs / "start.json"), ("wrong", logs / "wrong.json")):
            name = "%s_ksearch_%s" % (definition, which)
            dest = dataset / "solutions" / op_type / (name + ".json")
            dest.parent.mkdir(parents=True, exist_ok=True)
            rc, _, text = run([ks, "export", "--format", "flashinfer", "--task", str(defn), "--solution", str(path),
                            "--cache-dir", str(cache), "--name", name, "-o", str(dest)], 120,
                           logs / ("export_%s.log" % which))
            if which == "start":
                verdict(rc == 0, "%s: ksearch export --format flashinfer (exit %s)" % (definition, rc))
                verdict("the evaluator's cached cubin" in text,
                        "%s: the Solution embeds the cubin ksearch eval built and timed (same cache)" % definition)
            if rc == 0:
                sols[which] = name

        # A Triton Solution (FlashInfer-Bench's JSON, as a user has it): ksearch eval of that file as it is,
        # then ksearch export of it, which FlashInfer-Bench runs below beside the CUDA ones.
        if key in PYTHON:
            file, py_edits, py_wrong = PYTHON[key]
            code = (HERE / file).read_text()
            for which, text in (("triton", code), ("triton_wrong", code)):
                if which == "triton_wrong":
                    for old, new in py_edits:
                        text = text.replace(old, new)
                    verdict(text != code, "%s: the Triton negative control's edit applies" % definition)
                fib_sol = {"name": "%s_%s_input" % (definition, which), "definition": definition, "author": "libksearch",
                           "spec": {"language": "triton", "target_hardware": ["NVIDIA_H100"],
                                    "entry_point": "main.py::run", "dependencies": [],
                                    "destination_passing_style": True},
                           "sources": [{"path": "main.py", "content": text}]}
                (logs / (which + ".json")).write_text(json.dumps(fib_sol))
                rc, stdout, _ = run([ks, "eval", "--task", str(defn), "--solution", str(logs / (which + ".json")),
                                     "--cache-dir", str(cache), "--json", "--no-reference-timing", "--max-time", "1"],
                                    min(150, deadline - time.time()), logs / ("ksearch_eval_%s.log" % which))
                try:
                    r = json.loads(stdout[stdout.index("{"):stdout.rindex("}") + 1])
                except ValueError:
                    r = None
                task["ksearch_" + which] = r
                status = r.get("status") if r else "no result"
                if which == "triton":
                    verdict(rc == 0 and status == "passed",
                            "%s: ksearch eval of the Triton FlashInfer-Bench Solution (exit %s, %s)" % (definition, rc, status))
                else:
                    verdict(status not in ("passed", "no result"),
                            "%s: ksearch eval refuses the Triton negative control (%s): %s" % (definition, py_wrong, status))
                name = "%s_ksearch_%s" % (definition, which)
                dest = dataset / "solutions" / op_type / (name + ".json")
                rc, _, text = run([ks, "export", "--format", "flashinfer", "--task", str(defn), "--solution",
                                   str(logs / (which + ".json")), "--name", name, "-o", str(dest)], 60,
                                  logs / ("export_%s.log" % which))
                if which == "triton":
                    exported = json.loads(dest.read_text()) if rc == 0 else {}
                    verdict(rc == 0 and exported.get("sources") == fib_sol["sources"] and
                            exported.get("spec", {}).get("language") == "triton" and
                            exported.get("spec", {}).get("entry_point") == "main.py::run",
                            "%s: ksearch export of the Triton Solution: its sources unchanged, triton, main.py::run"
                            % definition)
                if rc == 0:
                    sols[which] = name

        # FlashInfer-Bench's own harness on both Solutions.
        if sols:
            rc, _, text = run([py, __file__, "fib", str(dataset), definition, str(logs / "fib.json"),
                            str(logs / "fib_logs"), *sols.values()], max(30, deadline - time.time() - 10),
                           logs / "fib.log")
            fib = json.loads((logs / "fib.json").read_text()) if rc == 0 and (logs / "fib.json").exists() else None
            task["flashinfer_bench"] = fib
            if fib is None:
                verdict(False, "%s: FlashInfer-Bench's Benchmark did not finish (exit %s): %s" % (
                    definition, rc, text[-800:]))
            else:
                workloads = fib["workloads"]
                by = {(r["solution"], r["workload"]): r for r in fib["traces"]}
                good = [by.get((sols.get("start"), w)) for w in workloads]
                passed = [r for r in good if r and r["status"] == "PASSED"]
                verdict(len(passed) == len(workloads) > 0,
                        "%s: FlashInfer-Bench's evaluator passes the exported Solution on %d of %d workloads (%.0f s)"
                        % (definition, len(passed), len(workloads), fib["seconds"]))
                for r in good:
                    if r and r["status"] != "PASSED":
                        say("  %s: %s %s" % (r["workload"], r["status"], r["log_tail"][-600:].replace("\n", " | ")))
                bad = [by.get((sols.get("wrong"), w)) for w in workloads]
                refused = [r for r in bad if r and r["status"] != "PASSED"]
                verdict(len(refused) > 0, "%s: negative control (%s): FlashInfer-Bench refuses it on %d of %d "
                        "workloads (%s)" % (definition, wrong_what, len(refused), len(workloads),
                                            ", ".join(sorted(set(r["status"] for r in refused))) or "none"))

                for which in ("triton", "triton_wrong"):
                    if which not in sols:
                        continue
                    rows_ = [by.get((sols[which], w)) for w in workloads]
                    ok_ = [r for r in rows_ if r and r["status"] == "PASSED"]
                    if which == "triton":
                        verdict(len(ok_) == len(workloads) > 0, "%s: FlashInfer-Bench's evaluator passes the exported "
                                "Triton Solution on %d of %d workloads" % (definition, len(ok_), len(workloads)))
                        ks_t = {w["name"]: w.get("timing", {}).get("mean_ms")
                                for w in (task.get("ksearch_triton") or {}).get("workloads", [])}
                        for w, r in zip(workloads, rows_):
                            f = r["latency_ms"] if r and r["status"] == "PASSED" else None
                            k = ks_t.get(w)
                            say("  triton %-26s FIB %s ms, ksearch %s ms%s" % (
                                w, "%.4f" % f if f else "-", "%.4f" % k if k else "-",
                                ", FIB/ks %.3f" % (f / k) if f and k else ""))
                            if r and r["status"] != "PASSED":
                                say("    %s %s" % (r["status"], r["log_tail"][-600:].replace("\n", " | ")))
                    else:
                        verdict(len(ok_) < len(workloads), "%s: FlashInfer-Bench refuses the Triton negative control on "
                                "%d of %d workloads" % (definition, len(workloads) - len(ok_), len(workloads)))

                over = fib.get("host_ms", {})
                if "error" in over:
                    say("  (host time not measured: %s)" % over["error"])

                # Both latencies, side by side.
                ks_ms = {w["name"]: w.get("timing", {}).get("mean_ms") for w in (ks_result or {}).get("workloads", [])}
                say("  %-26s %-10s %12s %14s %9s %12s" % ("workload", "FIB", "FIB ms", "ksearch ms", "FIB/ks",
                                                         "host ms"))
                ratios = []
                for w, r in zip(workloads, good):
                    f = r["latency_ms"] if r and r["status"] == "PASSED" else None
                    k = ks_ms.get(w)
                    ratio = f / k if f and k else None
                    if ratio:
                        ratios.append(ratio)
                    h = over.get(w, {}).get("host_ms_median")
                    say("  %-26s %-10s %12s %14s %9s %12s" % (
                        w, r["status"] if r else "-", "%.4f" % f if f else "-", "%.4f" % k if k else "-",
                        "%.3f" % ratio if ratio else "-", "%.4f" % h if h else "-"))
                if ratios:
                    g = statistics.geometric_mean(ratios)
                    task["fib_over_ksearch_geomean"] = g
                    say("  latency, FlashInfer-Bench / libksearch: geometric mean %.3f over %d workloads (FIB: CUDA "
                        "events around the Python call, 256 MB cache cleared before each, mean of 50 calls, mean of 3 "
                        "input sets; libksearch: the launches between events, L2 flushed, mean until 0.1%% SE)"
                        % (g, len(ratios)))
    say("total %.0f s" % (time.time() - start))
    summary["lines"] = lines
    json.dump(summary, open(out / "harness_check.json", "w"), indent=1)
    return 0 if summary["pass"] else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "fib":
        fib_step(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    else:
        sys.exit(main())
