#!/usr/bin/env python3
"""GPUMode's own harness on an exported submission, and the side-by-side table.

  upstream_harness.py prepare TRIMUL_DIR SUBMISSION HARNESS_DIR
      copies eval.py, reference.py, utils.py and task.py of a reference-kernels
      checkout (problems/bioml/trimul; read, never copied into libksearch) next
      to the submission, and writes tests.txt and benchmarks.txt from its
      task.yml the way kernelbot's runner writes them ("key: value; ..." with
      Python's str(), so `nomask: False` arrives as the string "False").
  upstream_harness.py run HARNESS_DIR MODE PYTHON
      runs `eval.py MODE` (test or benchmark) with POPCORN_FD, as kernelbot
      does, and prints its log as JSON.
  upstream_harness.py overhead SUBMISSION
      the host time of one custom_kernel call (what eval.py's window holds
      besides the kernels): inputs of benchmark 0 (B=2, N=256, C=128), 200
      calls, each timed on the CPU with the GPU idle before it.
  upstream_harness.py table DEFAULT_JSON UPSTREAM_JSON HARNESS_BENCH_JSON [CARD]
      prints libksearch's default timing, its upstream-style timing and the
      upstream harness per benchmark and as geometric means, with the ratio.
"""
import ast
import json
import math
import os
import shutil
import subprocess
import sys


def cases_of(task_yml):
    """The tests and benchmarks of task.yml (PyYAML when present, else the one-dict-per-line form it uses)."""
    text = open(task_yml).read()
    try:
        import yaml
        doc = yaml.safe_load(text)
        return doc["tests"], doc["benchmarks"]
    except ImportError:
        pass
    out = {"tests": [], "benchmarks": []}
    section = None
    for line in text.splitlines():
        if line.rstrip() in ("tests:", "benchmarks:"):
            section = line.rstrip()[:-1]
        elif line and not line.startswith(" ") and not line.startswith("#"):
            section = None
        elif section and line.strip().startswith("- {"):
            out[section].append(ast.literal_eval(line.strip()[2:]))
    return out["tests"], out["benchmarks"]


def spec_line(case):
    return "; ".join("%s: %s" % (k, v) for k, v in case.items())


def prepare(trimul_dir, submission, harness):
    os.makedirs(harness, exist_ok=True)
    for f in ("eval.py", "reference.py", "utils.py", "task.py"):
        shutil.copy(os.path.join(trimul_dir, f), os.path.join(harness, f))
    shutil.copy(submission, os.path.join(harness, "submission.py"))
    tests, benchmarks = cases_of(os.path.join(trimul_dir, "task.yml"))
    for name, cases in (("tests.txt", tests), ("benchmarks.txt", benchmarks)):
        with open(os.path.join(harness, name), "w") as f:
            f.write("\n".join(spec_line(c) for c in cases) + "\n")
    print(json.dumps({"tests": len(tests), "benchmarks": len(benchmarks)}))


def run(harness, mode, python):
    log = os.path.join(harness, mode + ".log")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    cases = "tests.txt" if mode == "test" else "benchmarks.txt"
    env = dict(os.environ, POPCORN_FD=str(fd))
    p = subprocess.run([python, "eval.py", mode, cases], cwd=harness, env=env, pass_fds=(fd,), capture_output=True,
                       text=True)
    os.close(fd)
    result = {"returncode": p.returncode, "stderr": p.stderr[-3000:], "log": {}}
    for line in open(log):
        if ": " in line:
            k, v = line.rstrip("\n").split(": ", 1)
            result["log"][k] = v
    print(json.dumps(result, indent=1))


def overhead(submission):
    import importlib.util
    import time
    import torch
    spec = importlib.util.spec_from_file_location("submission", submission)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    B, N, C, H = 2, 256, 128, 128
    w = {k: torch.randn(H, C, device="cuda") / math.sqrt(H) for k in
         ("left_proj.weight", "right_proj.weight", "left_gate.weight", "right_gate.weight", "out_gate.weight")}
    w.update({"norm.weight": torch.randn(C, device="cuda"), "norm.bias": torch.randn(C, device="cuda"),
              "to_out_norm.weight": torch.randn(H, device="cuda"), "to_out_norm.bias": torch.randn(H, device="cuda"),
              "to_out.weight": torch.randn(C, H, device="cuda") / math.sqrt(C)})
    data = (torch.randn(B, N, N, C, device="cuda"), torch.ones(B, N, N, device="cuda"), w, {"dim": C, "hidden_dim": H})
    for _ in range(10):
        m.custom_kernel(data)
    samples = []
    for _ in range(200):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        m.custom_kernel(data)
        samples.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    samples.sort()
    print(json.dumps({"host_us_median": 1e6 * samples[len(samples) // 2], "host_us_min": 1e6 * samples[0],
                      "host_us_p90": 1e6 * samples[int(0.9 * len(samples))]}))


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def table(default_json, upstream_json, harness_json, card=""):
    def ks(path):
        text = open(path).read()
        r = json.loads(text[text.index("{"):])
        return r, [w["timing"]["mean_ms"] for w in r["workloads"] if w["benchmark"]]

    d, dms = ks(default_json)
    u, ums = ks(upstream_json)
    h = json.load(open(harness_json))
    n = int(h["log"].get("benchmark-count", 0))
    hms = [float(h["log"]["benchmark.%d.mean" % i]) / 1e6 for i in range(n) if "benchmark.%d.mean" % i in h["log"]]
    names = [w["name"] for w in d["workloads"] if w["benchmark"]]
    print("card: %s" % (card or d.get("device", "")))
    print("%-38s %14s %16s %16s %9s" % ("benchmark", "ksearch (ms)", "ks upstream (ms)", "eval.py (ms)",
                                         "eval/ups"))
    for i, name in enumerate(names):
        a = dms[i] if i < len(dms) else float("nan")
        b = ums[i] if i < len(ums) else float("nan")
        c = hms[i] if i < len(hms) else float("nan")
        print("%-38s %14.4f %16.4f %16.4f %9.3f" % (name, a, b, c, c / b))
    gd, gu, gh = geomean(dms), geomean(ums), geomean(hms)
    print("%-38s %14.4f %16.4f %16.4f %9.3f" % ("geometric mean", gd, gu, gh, gh / gu))
    within = abs(gh / gu - 1) <= 0.05
    print("upstream harness vs libksearch upstream-style: %+.1f %% (%s the 5 %% target); libksearch default "
          "(L2 flushed) vs upstream-style: %+.1f %%" % (100 * (gh / gu - 1), "within" if within else "OUTSIDE",
                                                         100 * (gd / gu - 1)))
    print(json.dumps({"card": card or d.get("device", ""), "ksearch_default_ms": gd, "ksearch_upstream_ms": gu,
                      "eval_py_ms": gh, "eval_py_over_upstream": gh / gu, "within_5_percent": within,
                      "status": [d["status"], u["status"], h["log"].get("check")]}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "prepare":
        prepare(*sys.argv[2:5])
    elif cmd == "run":
        run(*sys.argv[2:5])
    elif cmd == "overhead":
        overhead(sys.argv[2])
    elif cmd == "table":
        table(*sys.argv[2:6])
    else:
        sys.exit(__doc__)
