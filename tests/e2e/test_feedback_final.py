#!/usr/bin/env python3
"""End to end through the CLI on a host task that names feedback workloads:
the search evaluates only those, the run ends with the best kernel evaluated
on every workload (final_eval.json, best/final_eval.json, `ksearch show`),
a resumed run keeps that final evaluation, and `ksearch eval --workloads
feedback|all` evaluates either set. Then the same on a definition of the
FlashInfer-Trace dataset fixture (scalar and safetensors inputs, a reference
given as a solution file), after `ksearch tasks --dataset` lists it.
"""
import json
import os
import subprocess
import sys

from e2e_common import setup

args, src, work = setup()
task = src / "tests/fixtures/tasks/scale3_feedback"
responder = src / "tests/e2e/feedback_responder.py"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
FEEDBACK = ["fb_small", "fb_large"]
ALL = ["edge_1", "fb_small", "mid", "fb_large", "odd"]


def run(cmd, expect=0):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(map(str, cmd))} exited {p.returncode}, expected {expect}\n"
                 f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p.stdout


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:", what)


run_dir = work / "run"
out = run([args.ksearch, "run", "--task", str(task), "--language", "cpp", "--strategy", "greedy",
           "--llm", f"command:{sys.executable} {responder} {work / 'state.json'}", "--max-rounds", "3",
           "--timing-cap", "0.2", "--cache-dir", str(work / "cache"), "--run-dir", str(run_dir)])
check("Final evaluation of the best kernel on every workload" in out, "the run's summary shows the final evaluation")

attempts = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
check(len(attempts) == 3, "three rounds were evaluated")
for d in sorted((run_dir / "attempts").iterdir()):
    ev = json.loads((d / "eval.json").read_text())
    check([w["name"] for w in ev["workloads"]] == FEEDBACK, f"{d.name} was evaluated on the feedback workloads only")

final = json.loads((run_dir / "final_eval.json").read_text())
best = json.loads((run_dir / "best.json").read_text())
check(final["status"] == "passed", "the best kernel passes every workload")
check([w["name"] for w in final["workloads"]] == ALL, "the final evaluation covers all five workloads")
check(final["solution_id"] == best["solution_id"], "the final evaluation is of the best kernel")
check((run_dir / "best" / "final_eval.json").read_text() == (run_dir / "final_eval.json").read_text(),
      "best/final_eval.json holds the same result")
events = [json.loads(line)["type"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
check(events.count("final_evaluation") == 1, "one final evaluation was recorded")

show = run([args.ksearch, "show", str(run_dir)])
check("Final evaluation on every workload" in show and "odd" in show, "ksearch show prints the final evaluation")
show_json = json.loads(run([args.ksearch, "show", str(run_dir), "--json"]))
check(len(show_json["final_eval"]["workloads"]) == 5, "ksearch show --json includes it")

# Resuming a finished run replays its journal and keeps the final evaluation.
run([args.ksearch, "resume", str(run_dir), "--quiet"])
events = [json.loads(line)["type"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
check(events.count("final_evaluation") == 1, "a resume does not evaluate the same best kernel again")
check((run_dir / "best" / "final_eval.json").exists(), "best/final_eval.json is there after the resume")

# ksearch eval on either set (the best kernel's solution file, as best/ shows it).
sol = run_dir / "best" / "solution.json"
fb = json.loads(run([args.ksearch, "eval", "--task", str(task), "--solution", str(sol), "--workloads", "feedback",
                     "--max-time", "0.1", "--json", "--cache-dir", str(work / "cache")]))
check([w["name"] for w in fb["workloads"]] == FEEDBACK, "eval --workloads feedback evaluates the feedback set")
al = json.loads(run([args.ksearch, "eval", "--task", str(task), "--solution", str(sol), "--workloads", "all",
                     "--max-time", "0.1", "--json", "--cache-dir", str(work / "cache")]))
check([w["name"] for w in al["workloads"]] == ALL, "eval --workloads all evaluates every workload")
run([args.ksearch, "eval", "--task", str(task), "--solution", str(sol), "--workloads", "some"], expect=2)

# A FlashInfer-Trace dataset checkout: list it, then search a definition of it.
dataset = src / "tests/fixtures/flashinfer_trace"
listing = run([args.ksearch, "tasks", "--dataset", str(dataset)])
check("flashinfer/gather_scale_d64" in listing and "native reference: solution file" in listing
      and "native reference: built-in" in listing, "ksearch tasks --dataset lists the fixture's definitions")
missing = subprocess.run([args.ksearch, "run", "--task", str(dataset / "definitions/rmsnorm/rmsnorm_h128.json"),
                          "--language", "cpp", "--llm", "offline"], env=env, capture_output=True, text=True)
check(missing.returncode != 0 and "has no native reference" in missing.stderr,
      "a definition without a reference is refused with a clear message")
gather = dataset / "definitions/gather/gather_scale_d64.json"
gdir = work / "gather_run"
out = run([args.ksearch, "run", "--task", str(gather), "--language", "cpp", "--strategy", "greedy",
           "--llm", f"command:{sys.executable} {responder} {work / 'gather_state.json'} gather", "--max-rounds", "3",
           "--timing-cap", "0.2", "--cache-dir", str(work / "cache"), "--run-dir", str(gdir)])
gfinal = json.loads((gdir / "final_eval.json").read_text())
check(gfinal["status"] == "passed" and len(gfinal["workloads"]) == 8,
      "the dataset definition's best kernel passes all eight workloads in the final evaluation")
for d in sorted((gdir / "attempts").iterdir()):
    ev = json.loads((d / "eval.json").read_text())
    check(len(ev["workloads"]) == 6, f"{d.name} was evaluated on the six feedback workloads")

# The dataset's options through the CLI (tests/fixtures/flashinfer_trace_baselines): a definition by
# name in --dataset, pinned --feedback-workloads for --workloads feedback, an unknown UUID, and a card
# its traces do not cover (this CPU) with the way out.
fixture = src / "tests/fixtures/flashinfer_trace_baselines"
u = "0a1b2c3d-0000-4000-8000-00000000000"
scale_sol = work / "scale_rows.md"
scale_sol.write_text("```cpp kernel.cpp\n#include <cstdint>\nvoid scale_rows(const float* x, float scale, float* y, "
                     "std::int64_t batch) {\n  for (std::int64_t i = 0; i < batch * 64; ++i) y[i] = scale * x[i];\n}\n"
                     "```\n```json launch_plan\n{\"calls\": [{\"fn\": \"scale_rows\", \"args\": [\"x\", \"scale\", "
                     "\"y\", \"batch_size\"]}]}\n```\n")
ds = ["--dataset", str(fixture), "--task", "flashinfer/scale_d64", "--solution", str(scale_sol), "--max-time", "0.05",
      "--cache-dir", str(work / "cache")]
pinned = json.loads(run([args.ksearch, "eval", *ds, "--workloads", "feedback", "--feedback-workloads", f"{u}3,{u}1",
                         "--baseline-solution", "none", "--json"]))
check([w["name"] for w in pinned["workloads"]] == [f"{u}1", f"{u}3"], "eval --feedback-workloads pins the feedback set")
first = [json.loads(run([args.ksearch, "eval", *ds, "--workloads", "feedback", flag, "first", "--feedback-count", "2",
                         "--baseline-solution", "none", "--json"]))["workloads"] for flag in ("--feedback-policy",
                                                                                         "--feedback-trace-policy")]
check([w["name"] for w in first[0]] == [w["name"] for w in first[1]] and len(first[0]) == 2,
      "--feedback-trace-policy (K-Search's name) picks as --feedback-policy does")
bad = subprocess.run([args.ksearch, "eval", *ds, "--workloads", "feedback", "--feedback-workloads", "nope"], env=env,
                     capture_output=True, text=True)
check(bad.returncode == 2 and 'has no workload "nope"' in bad.stderr and f"{u}8" in bad.stderr,
      "an unknown feedback workload is named, with the valid ones")
uncovered = subprocess.run([args.ksearch, "eval", *ds, "--workload", f"{u}1"], env=env, capture_output=True, text=True)
check(uncovered.returncode != 0 and "cover NVIDIA_B200, NVIDIA_H100, not this card" in uncovered.stderr
      and "--measure-baseline" in uncovered.stderr, "a card the traces do not cover is named, with the way out")
print("PASS")
