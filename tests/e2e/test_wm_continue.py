#!/usr/bin/env python3
"""End to end: K-Search's --continue-from-solution. A first world-model run
(the recorded transcript of test_wm_resume.py, 4 rounds) leaves a best kernel;
a second run continues from that run's folder. Its round 1 evaluates that
kernel again, the world model's root holds it (so the actions under the root
build on it), and it is the best so far from round 1. The second run is
killed after its warm start and resumed: the root keeps the kernel, and no
round is measured twice. A strategy that does not read the flag refuses it
before anything runs."""
import json
import os
import signal
import subprocess
import sys
import time

from e2e_common import setup

args, src, work = setup()
transcript = src / "tests/fixtures/wm_e2e/transcript.jsonl"
task = src / "tests/fixtures/tasks/scale3"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))


def run_cmd(run_dir, rounds, *extra):
    return [args.ksearch, "run", "--task", str(task), "--language", "cpp", "--llm", f"replay:{transcript}",
            "--on-divergence", "skip", "--max-rounds", str(rounds), "--wm-stagnation-window", "2",
            "--timing-cap", "0.2", "--quiet", "--run-dir", str(run_dir), *extra]


def finish(cmd, log_name, want=0):
    with open(work / log_name, "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=600).returncode
    if rc != want:
        sys.exit(f"{log_name}: exit status {rc}, not {want}; log:\n" + (work / log_name).read_text())


def attempts(run_dir):
    return [json.loads(line) for line in open(run_dir / "attempts.jsonl")]


def root_solution(run_dir):
    snaps = sorted((run_dir / "world_model").glob("v*.json"), key=lambda p: int(p.stem[1:]))
    wm = json.loads(snaps[-1].read_text())
    tree = wm["decision_tree"]
    root = next(n for n in tree["nodes"] if n["node_id"] == tree["root_id"])
    return (root.get("solution_ref") or {}).get("solution_id"), tree


def sources(solution_json):
    return sorted((s["path"], s.get("content")) for s in json.loads(solution_json.read_text())["sources"])


first = work / "first"
finish(run_cmd(first, 4), "first.log")
seed = json.loads((first / "best/solution.json").read_text())

# Continue from the first run's folder (its best kernel).
cont = work / "continued"
with open(work / "continued.log", "w") as log:
    p = subprocess.Popen(run_cmd(cont, 5, "--continue-from-solution", str(first)), stdout=log,
                         stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        try:
            if sum(1 for _ in open(cont / "attempts.jsonl")) >= 2:
                break
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    if p.poll() is not None:
        sys.exit(f"the continued run ended (rc {p.returncode}) before its second round; see continued.log")
    p.send_signal(signal.SIGKILL)
    p.wait()

a = attempts(cont)
if a[0]["round"] != 1 or a[0]["status"] != "passed":
    sys.exit(f"round 1 of the continued run should be the given kernel, passing: {a[0]}")
first_attempt = sorted((cont / "attempts").glob("0001-*"))[0]
if sources(first_attempt / "solution.json") != sorted((s["path"], s.get("content")) for s in seed["sources"]):
    sys.exit("round 1 of the continued run did not evaluate the first run's best kernel")
root_id, tree = root_solution(cont)
if root_id != a[0]["solution_id"]:
    sys.exit(f"the world model's root should hold the given kernel {a[0]['solution_id']}, holds {root_id}")
under_root = [n for n in tree["nodes"] if n.get("parent_id") == tree["root_id"] and n.get("action")]
if under_root and not all((n.get("solution_ref") or {}).get("parent_solution_id") == root_id
                          or (n.get("solution_ref") or {}).get("solution_id") for n in under_root):
    sys.exit("the open actions under the root should build on the given kernel")
events = [json.loads(line) for line in open(cont / "events.jsonl")]
warm = [e for e in events if e.get("type") == "warm_start"]
if len(warm) != 1 or not warm[0].get("attached_to_root"):
    sys.exit(f"one warm_start event, attached to the root, was expected: {warm}")

# Resumed after the kill: the kernel stays at the root, and round 1 is not measured again.
finish([args.ksearch, "resume", str(cont), "--quiet"], "resume.log")
a = attempts(cont)
if len(a) != 5 or len({x["round"] for x in a}) != 5:
    sys.exit(f"the resumed run should end with rounds 1-5, each once: {[(x['round'], x['status']) for x in a]}")
if root_solution(cont)[0] != a[0]["solution_id"]:
    sys.exit("after the resume the world model's root should still hold the given kernel")
best = json.loads((cont / "best.json").read_text()) if (cont / "best.json").exists() else None
if best is None:
    sys.exit("the continued run has no best kernel")
manifest = json.loads((cont / "manifest.json").read_text())
if not manifest["config"].get("continue_from_solution"):
    sys.exit("the manifest's configuration should hold the given kernel (for resume and replay)")

# Greedy does not read it: refused before anything runs, not ignored.
finish(run_cmd(work / "greedy", 2, "--continue-from-solution", str(first)) + ["--strategy", "greedy"],
       "greedy.log", want=2)
if (work / "greedy" / "attempts.jsonl").exists():
    sys.exit("the refused greedy run should not have evaluated anything")
print("continue-from-solution: round 1 re-evaluated the given kernel, the root holds it, resume kept it")
