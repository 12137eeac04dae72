#!/usr/bin/env python3
"""End to end: a recorded transcript drives the world_model strategy for 12
rounds on a host task through the ksearch CLI. One run goes uninterrupted;
another is killed with SIGKILL at several points (mid-cycle, mid-evaluation,
between an LLM answer and its evaluation) and resumed each time. Both must
end with the same world-model tree, the same attempts and the same best
solution, and no worker process may outlive a killed run.

The runs measure their candidates (that is what a kill mid-evaluation needs),
so their decisions must not depend on the machine's speed: the fixture's
passing kernels differ by fixed waits of 100, 10 and 0 ms, and every decision
compares two of them (tests/fixtures/wm_e2e/responder.py says why load cannot
swap them).
"""
import json
import os
import signal
import subprocess
import sys
import time

import e2e_common
from e2e_common import lines, run_logged, setup

args, src, work = setup()
transcript = src / "tests/fixtures/wm_e2e/transcript.jsonl"
task = src / "tests/fixtures/tasks/scale3"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))


def run_cmd(run_dir, rounds=12):
    return [args.ksearch, "run", "--task", str(task), "--language", "cpp", "--llm", f"replay:{transcript}",
            "--max-rounds", str(rounds), "--wm-stagnation-window", "2", "--timing-cap", "0.2", "--quiet",
            "--run-dir", str(run_dir)]


def resume_cmd(run_dir, *extra):
    return [args.ksearch, "resume", str(run_dir), "--quiet", *extra]


def run_and_kill(cmd, run_dir, log_name, until):
    e2e_common.run_and_kill(cmd, run_dir, work / log_name, until, env)


def finish(cmd, log_name):
    run_logged(cmd, work / log_name, env)


def tree_shape(run_dir):
    """The final tree without measured numbers (timings differ between runs)."""
    snaps = sorted((run_dir / "world_model").glob("v*.json"))
    wm = json.loads(snaps[-1].read_text())
    nodes = []
    for n in wm["decision_tree"]["nodes"]:
        a = n.get("action") or {}
        ref = n.get("solution_ref") or {}
        nodes.append((n["node_id"], n.get("parent_id"), a.get("title"), a.get("score_0_to_1"),
                      a.get("difficulty_1_to_5"), ref.get("solution_id")))
    return sorted(nodes, key=str), wm["decision_tree"].get("active_leaf_id"), snaps[-1].name


def attempts(run_dir):
    out = []
    for line in open(run_dir / "attempts.jsonl"):
        a = json.loads(line)
        out.append((a["seq"], a["round"], a["solution_id"], a["status"]))
    return out


def best_id(run_dir):
    return json.loads((run_dir / "best/solution.json").read_text())["id"]


full = work / "full"
finish(run_cmd(full), "full.log")

killed = work / "killed"
run_and_kill(run_cmd(killed), killed, "kill1.log", lambda d: lines(d / "attempts.jsonl") >= 3)
run_and_kill(resume_cmd(killed), killed, "kill2.log", lambda d: lines(d / "attempts.jsonl") >= 6)
# Between an LLM answer and its evaluation: 13 answers hold attempt 8's code.
run_and_kill(resume_cmd(killed), killed, "kill3.log", lambda d: lines(d / "transcript.jsonl") >= 13)
run_and_kill(resume_cmd(killed), killed, "kill4.log", lambda d: lines(d / "attempts.jsonl") >= 10)
finish(resume_cmd(killed), "resume_final.log")

# A graceful stop (Ctrl-C: the run stops after the current round) and a run
# with a smaller budget, each resumed with the full budget, must also end
# where the uninterrupted run ends: a stop leaves no half-done edit behind.
stopped = work / "stopped"
with open(work / "sigint.log", "w") as log:
    p = subprocess.Popen(run_cmd(stopped), stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + 300
    while lines(stopped / "attempts.jsonl") < 2 and time.time() < deadline and p.poll() is None:
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=300)
if rc != 130:
    sys.exit(f"a run stopped with Ctrl-C should exit 130, got {rc}; see sigint.log")
finish(resume_cmd(stopped), "sigint_resume.log")
budget = work / "budget"
finish(run_cmd(budget, rounds=5), "budget5.log")
finish(resume_cmd(budget, "--max-rounds", "12"), "budget12.log")

failures = []
for other in (stopped, budget):
    if tree_shape(full) != tree_shape(other):
        failures.append(f"{other.name}: final tree differs:\n  full: {tree_shape(full)}\n  {other.name}: {tree_shape(other)}")
    if attempts(full) != attempts(other):
        failures.append(f"{other.name}: attempts differ")
if tree_shape(full) != tree_shape(killed):
    failures.append(f"final trees differ:\n  full:   {tree_shape(full)}\n  killed: {tree_shape(killed)}")
if attempts(full) != attempts(killed):
    failures.append(f"attempts differ:\n  full:   {attempts(full)}\n  killed: {attempts(killed)}")
if best_id(full) != best_id(killed):
    failures.append(f"best solutions differ: {best_id(full)} vs {best_id(killed)}")
for d in (full, killed):
    m = json.loads((d / "manifest.json").read_text())
    if m["status"] != "finished" or m["totals"]["rounds"] != 12:
        failures.append(f"{d.name}: manifest says {m['status']} after {m['totals']['rounds']} rounds")
    seqs = [json.loads(l)["journal_seq"] for l in open(d / "events.jsonl") if "journal_seq" in l]
    if len(seqs) != len(set(seqs)) or seqs != sorted(seqs):
        failures.append(f"{d.name}: strategy events duplicated or out of order")
if lines(full / "transcript.jsonl") != 19 or lines(killed / "transcript.jsonl") != 19:
    failures.append("the transcript of each run should hold the 19 recorded answers exactly once")
if failures:
    sys.exit("\n".join(failures))
print(f"same final tree ({len(tree_shape(full)[0])} nodes), same {len(attempts(full))} attempts, "
      f"same best solution {best_id(full)} after 4 kills, after a Ctrl-C and after raising the budget 5 -> 12")
