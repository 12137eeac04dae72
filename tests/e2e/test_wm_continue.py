#!/usr/bin/env python3
"""End to end: K-Search's --continue-from-solution. A first world-model run
(the recorded transcript of test_wm_resume.py, 4 rounds) leaves a best kernel;
a second run continues from that run's folder. Its round 1 evaluates that
kernel again, the world model's root holds it (so the actions under the root
build on it), and it is the best so far from round 1. The second run stops
after two rounds and is resumed to five: the root keeps the kernel, and the
first rounds come from the journal. A kernel that fails is reported and not
attached. A budget of one round and a strategy that does not read the flag are
refused before anything runs."""
import json
import os
import subprocess
import sys

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
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=240).returncode
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

# Continue from the first run's folder (its best kernel): 2 rounds, then resumed to 5.
cont = work / "continued"
finish(run_cmd(cont, 2, "--continue-from-solution", str(first)), "continued.log")
a = attempts(cont)
if len(a) != 2 or a[0]["round"] != 1 or a[0]["status"] != "passed":
    sys.exit(f"round 1 of the continued run should be the given kernel, passing: {a[:1]}")
first_attempt = sorted((cont / "attempts").glob("0001-*"))[0]
if sources(first_attempt / "solution.json") != sorted((s["path"], s.get("content")) for s in seed["sources"]):
    sys.exit("round 1 of the continued run did not evaluate the first run's best kernel")
if a[0]["solution_id"] != seed["id"]:
    sys.exit("the given kernel should keep its id (a hash of its content)")
root_id, tree = root_solution(cont)
if root_id != a[0]["solution_id"]:
    sys.exit(f"the world model's root should hold the given kernel {a[0]['solution_id']}, holds {root_id}")
open_under_root = [n for n in tree["nodes"] if n.get("parent_id") == tree["root_id"] and n.get("action")
                   and not (n.get("solution_ref") or {}).get("solution_id")]
if not open_under_root or any((n.get("solution_ref") or {}).get("parent_solution_id") != root_id
                              for n in open_under_root):
    sys.exit(f"the open actions under the root should build on the given kernel: {open_under_root}")
events = [json.loads(line) for line in open(cont / "events.jsonl")]
warm = [e for e in events if e.get("type") == "warm_start"]
if len(warm) != 1 or not warm[0].get("attached_to_root"):
    sys.exit(f"one warm_start event, attached to the root, was expected: {warm}")
best_round1 = json.loads((cont / "best.json").read_text())
if best_round1["round"] not in (1, 2):
    sys.exit(f"after two rounds the best is the given kernel or the round-2 kernel that beat it: {best_round1}")
stamp = a[0]["time"] if "time" in a[0] else json.dumps(a[0], sort_keys=True)

# Resumed to 5 rounds: round 1 is taken from the journal, the kernel stays at the root.
with open(work / "resume.log", "w") as log:
    out = subprocess.run([args.ksearch, "resume", str(cont), "--max-rounds", "5", "--json"], stdout=subprocess.PIPE,
                         stderr=log, env=env, timeout=240, text=True)
if out.returncode != 0:
    sys.exit(f"resume: exit status {out.returncode}; see resume.log")
resumed = json.loads(out.stdout)
if resumed.get("replayed_rounds") != 2:
    sys.exit(f"the resume should replay rounds 1-2 from the journal, not measure them again: {resumed}")
a = attempts(cont)
if [x["round"] for x in a] != [1, 2, 3, 4, 5]:
    sys.exit(f"the resumed run should end with rounds 1-5, each once: {[(x['round'], x['status']) for x in a]}")
if (a[0]["time"] if "time" in a[0] else json.dumps(a[0], sort_keys=True)) != stamp:
    sys.exit("round 1's record changed on resume")
if root_solution(cont)[0] != a[0]["solution_id"]:
    sys.exit("after the resume the world model's root should still hold the given kernel")
best = json.loads((cont / "best.json").read_text())
if best["eval"]["latency_ms"] > json.loads((first / "best.json").read_text())["eval"]["latency_ms"] * 1.5:
    sys.exit("the continued run's best should be the given kernel or better")
manifest = json.loads((cont / "manifest.json").read_text())
if (manifest["config"].get("continue_from_solution") or {}).get("id") != seed["id"]:
    sys.exit("the manifest's configuration should hold the given kernel (for resume and replay)")

# A kernel that does not pass (the first run's incorrect attempt) is evaluated, reported, and not
# attached: the search starts from the task.
failing = next(d for d in sorted((first / "attempts").iterdir())
               if json.loads((d / "eval.json").read_text())["status"] == "incorrect")
cold = work / "failing_seed"
finish(run_cmd(cold, 2, "--continue-from-solution", str(failing)), "failing_seed.log")
a = attempts(cold)
if a[0]["status"] != "incorrect":
    sys.exit(f"round 1 should be the given (incorrect) kernel: {a[0]}")
warm = [json.loads(line) for line in open(cold / "events.jsonl") if '"warm_start"' in line]
if len(warm) != 1 or warm[0].get("attached_to_root") is not False:
    sys.exit(f"a warm_start event with attached_to_root false was expected: {warm}")
if root_solution(cold)[0]:
    sys.exit("a kernel that did not pass must not be attached to the root")

# One round is refused: round 1 is the kernel's.
finish(run_cmd(work / "one_round", 1, "--continue-from-solution", str(first)), "one_round.log", want=2)
# Greedy does not read it: refused before anything runs, not ignored.
finish(run_cmd(work / "greedy", 2, "--continue-from-solution", str(first)) + ["--strategy", "greedy"],
       "greedy.log", want=2)
if (work / "greedy" / "attempts.jsonl").exists():
    sys.exit("the refused greedy run should not have evaluated anything")
print("continue-from-solution: round 1 re-evaluated the given kernel, the root holds it, resume kept it")
