#!/usr/bin/env python3
"""End to end through the CLI: the weak-check detection (docs/evaluation.md,
"Weak checks"). `ksearch tasks --check` on a task whose outputs are almost all
zeros (tests/fixtures/tasks/relu_bias_weak, like KernelBench level 2 problem
9) warns, names the workloads, prints the share of zeros and a fix; on a task
whose weakened reference passes (linear_small_bias) it says so; on the matmul
example it finds nothing; a CUDA task without a GPU is skipped with a note.
`ksearch run` on the weak task warns before the first LLM request and records
the report in manifest.json; `--no-weak-check` skips it; a normal task gets no
warning.
"""
import json
import os
import subprocess
import sys

from e2e_common import setup

args, src, work = setup()
fixtures = src / "tests/fixtures/tasks"
weak_task = fixtures / "relu_bias_weak"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))


def run(cmd, expect=0, stderr_file=None):
    p = subprocess.run([str(c) for c in cmd], env=env, text=True, timeout=600, stdout=subprocess.PIPE,
                       stderr=open(stderr_file, "w") if stderr_file else subprocess.PIPE)
    err = open(stderr_file).read() if stderr_file else p.stderr
    if p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(map(str, cmd))} exited {p.returncode}, expected {expect}\n"
                 f"stdout:\n{p.stdout}\nstderr:\n{err}")
    return p.stdout, err


def check(cond, what, detail=""):
    if not cond:
        sys.exit(f"FAIL: {what}\n{detail}")
    print("ok:", what)


# ksearch tasks --check: the weak task (exit 6), in words and as JSON.
out, _ = run([args.ksearch, "tasks", "--check", weak_task], expect=6)
check("is weak" in out and "zeros (writes 0 to every output element) passes on small, big" in out,
      "tasks --check: the zeros candidate passes on both workloads", out)
check('workload "small": the reference\'s outputs are 99.9' in out and '% zeros' in out
      and 'workload "big"' in out, "tasks --check names each workload with its share of zeros", out)
check('Suggested fix: draw input "b" from {"kind":"normal","mean":0,"std":0.001} (centred at 0)' in out
      and '"name":"big_weak_fix"' in out, "tasks --check prints a concrete fix", out)
check('told apart everywhere: ones, echo, weakened reference "no_bias"' in out,
      "the task's weakened reference is evaluated and told apart", out)
out, _ = run([args.ksearch, "tasks", "--check", weak_task, "--json", "--no-fix"], expect=6)
reports = json.loads(out)
check(len(reports) == 1 and reports[0]["status"] == "weak" and reports[0]["language"] == "cpp",
      "tasks --check --json: one report, weak", out)
stats = {s["workload"]: s for s in reports[0]["stats"]}
check(stats["big"]["zero_fraction"] > 0.999 and stats["big"]["most_common_fraction"] == stats["big"]["zero_fraction"],
      "the report holds the share of zeros and of the most common value", out)
check("fix" not in reports[0], "--no-fix tries no other distribution", out)

# A weakened reference that passes: the bias is far below the tolerance.
out, _ = run([args.ksearch, "tasks", "--check", fixtures / "linear_small_bias"], expect=6)
check('weakened reference "no_bias" (the reference without the bias b) passes on small, big' in out
      and '(100x wider)' in out, "a declared weakened reference passes and a wider bias is suggested", out)

# Normal tasks: nothing passes. A CUDA task without a GPU is skipped with a note, and
# as nothing was checked the exit status is 1 (an error, as for a CUDA run without a GPU),
# never 0, which says the check tells every candidate apart.
out, _ = run([args.ksearch, "tasks", "--check", "examples/matmul"])
check("ok: none of 3 candidates (zeros, ones, echo) passes" in out, "tasks --check examples/matmul: ok", out)
p = subprocess.run([str(args.ksearch), "tasks", "--check", "examples/softmax"], env=env, text=True, timeout=600,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out = p.stdout
has_gpu = "skipped" not in out
check(has_gpu or "needs a GPU" in out, "tasks --check on a CUDA task without a GPU: skipped with a note", out)
check(p.returncode == (0 if has_gpu else 1) and (has_gpu or "could be checked" in p.stderr),
      f"tasks --check exit status: 0 when checked, 1 when every version was skipped (got {p.returncode})", p.stderr)
help_text, _ = run([args.ksearch, "tasks", "--help"])
check("--check NAME" in help_text and "weakened_references" in help_text and "6 a candidate passes" in help_text,
      "tasks --help documents --check", help_text)

# ksearch run: the warning comes before the first LLM request, and the manifest records it.
responder = src / "tests/e2e/weak_responder.py"


def weak_run(name, *extra):
    state, err_file = work / f"{name}.state.json", work / f"{name}.stderr"
    out, err = run([args.ksearch, "run", "--task", weak_task, "--strategy", "greedy",
                    "--llm", f"command:{sys.executable} {responder} {state} {err_file}", "--max-rounds", "1",
                    "--timing-cap", "0.1", "--run-dir", work / name, *extra], stderr_file=err_file)
    return out, err, json.loads(state.read_text()), json.loads((work / name / "manifest.json").read_text())


out, err, state, manifest = weak_run("weak_run")
check(state["warned_before_first_request"], "the warning is on stderr before the first LLM request", err)
check("ksearch: warning: the correctness check of task \"tests/relu_bias_weak\" (cpp) is weak" in err
      and "--no-weak-check skips this check" in err, "ksearch run warns", err)
wc = manifest["weak_check"]
zeros = next(c for c in wc["candidates"] if c["name"] == "zeros")
check(wc["status"] == "weak" and zeros["passed"] == ["small", "big"] and wc["workloads"] == ["small", "big"],
      "manifest.json records which candidate passed on which workloads", json.dumps(wc, indent=1))
check(all(s["zero_fraction"] > 0.999 for s in wc["stats"]) and wc["fix"]["tensor"] == "b"
      and wc["suggestions"][0].startswith("Suggested fix"), "manifest.json records the statistics and the fix",
      json.dumps(wc, indent=1))
check("passed" in out, "the kernel that writes zeros passes, as the warning said", out)

out, err, state, manifest = weak_run("weak_run_off", "--no-weak-check", "--json")
check(not state["warned_before_first_request"] and "warning" not in err and "is weak" not in err,
      "--no-weak-check: no warning", err)
check(manifest["weak_check"]["status"] == "skipped" and "--no-weak-check" in manifest["weak_check"]["reason"],
      "--no-weak-check: the manifest says the check was skipped and why", json.dumps(manifest["weak_check"]))
check(json.loads(out)["weak_check"]["status"] == "skipped", "run --json carries the record", out)

# A normal task: no warning, and the record says ok.
out, err = run([args.ksearch, "run", "--task", "examples/matmul", "--llm", "offline", "--strategy", "tune",
                "--max-rounds", "1", "--timing-cap", "0.1", "--run-dir", work / "matmul_run", "--quiet"])
manifest = json.loads((work / "matmul_run" / "manifest.json").read_text())
check("warning" not in err and "is weak" not in err and "note:" not in err, "examples/matmul: no weak-check warning",
      err)
check(manifest["weak_check"]["status"] == "ok" and manifest["weak_check"]["evaluations"] >= 1,
      "examples/matmul: the manifest records an ok check", json.dumps(manifest["weak_check"]))
print("all weak-check end-to-end checks passed")
