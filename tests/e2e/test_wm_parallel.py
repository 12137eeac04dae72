#!/usr/bin/env python3
"""End to end: the world-model strategy with --parallel 2 through the ksearch
CLI, on a host task, driven by a scripted model (tests/fixtures/wm_parallel/
model.py) whose answers rest on the prompt alone, two programs at a time.

One run goes uninterrupted. Its first two cycles run at once on the two best
actions, its decisions name their slot, and the two cycles' refine edits go
out in the same step. Another run is killed with SIGKILL twice (inside a
step's pair of evaluations, then between a step's answers and their
evaluation) and resumed each time: it must end with the same attempts, the
same tree and the same decisions as the uninterrupted one, and no worker may
outlive a kill. The kernels' speeds are fixed waits, so decisions do not
depend on the machine's load (the model's docstring says how).
"""
import json
import os
import subprocess
import sys

import e2e_common
from e2e_common import lines, run_logged, setup

args, src, work = setup()
task = src / "tests/fixtures/tasks/scale3"
model = src / "tests/fixtures/wm_parallel/model.py"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
ROUNDS = 14


def run_cmd(run_dir):
    return [args.ksearch, "run", "--task", str(task), "--language", "cpp", "--llm",
            f"command:{sys.executable} {model}", "--max-concurrency", "2", "--parallel", "2",
            "--max-rounds", str(ROUNDS), "--wm-stagnation-window", "2", "--timing-cap", "0.2", "--quiet",
            "--run-dir", str(run_dir)]


def finish(cmd, log_name):
    run_logged(cmd, work / log_name, env)


def events(run_dir):
    return [json.loads(line) for line in open(run_dir / "events.jsonl")]


def attempts(run_dir):
    return [(a["seq"], a["round"], a["solution_id"], a["status"], a["action"])
            for a in map(json.loads, open(run_dir / "attempts.jsonl"))]


def decisions(run_dir):
    """What each stagnation decision chose (its text holds measured times); the session's
    noise checks (no cycle) are not the strategy's."""
    return [(e["decision"], e["next"], e["cycle"], e.get("slot"), e["round"])
            for e in events(run_dir) if e["type"] == "decision" and e["decision"] != "noise_check"]


def tree_shape(run_dir):
    snaps = sorted((run_dir / "world_model").glob("v*.json"), key=lambda p: int(p.stem[1:]))
    wm = json.loads(snaps[-1].read_text())
    return sorted((n["node_id"], n.get("parent_id"), (n.get("action") or {}).get("score_0_to_1"),
                   (n.get("solution_ref") or {}).get("solution_id")) for n in wm["decision_tree"]["nodes"])


full = work / "full"
finish(run_cmd(full), "full.log")
ev = events(full)
started = [e for e in ev if e["type"] == "cycle_started"]
first_finish = next(i for i, e in enumerate(ev) if e["type"] == "cycle_finished")
if [e["node_id"] for e in started[:2]] != ["a1", "a2"] or ev.index(started[1]) > first_finish:
    sys.exit(f"the first two cycles did not run at once on a1 and a2: {[e['node_id'] for e in started]}")
slots = {d[3] for d in decisions(full)}
if slots != {0, 1}:
    sys.exit(f"decisions name slots {slots}, not 0 and 1")
# Each slot's cycle ended in the same step, so the two refine edits were asked together: two wm_refine
# answers in a row in the transcript.
kinds = [json.loads(line)["kind"] for line in open(full / "transcript.jsonl")]
if "wm_refine,wm_refine" not in ",".join(kinds):
    sys.exit(f"no step sent two refine edits together: {kinds}")
if len(attempts(full)) != ROUNDS:
    sys.exit(f"{len(attempts(full))} attempts, not {ROUNDS}")

killed = work / "killed"
e2e_common.run_and_kill(run_cmd(killed), killed, work / "kill1.log", lambda d: lines(d / "attempts.jsonl") >= 5, env)
e2e_common.run_and_kill([args.ksearch, "resume", str(killed), "--quiet"], killed, work / "kill2.log",
                        lambda d: lines(d / "transcript.jsonl") >= 12, env)
finish([args.ksearch, "resume", str(killed), "--quiet"], "resume.log")

for what, get in (("attempts", attempts), ("decisions", decisions), ("tree", tree_shape)):
    a, b = get(full), get(killed)
    if a != b:
        sys.exit(f"the killed and resumed run's {what} differ from the uninterrupted run's:\n{a}\n{b}")
print(f"parallel 2: {len(attempts(full))} attempts, {len(started)} cycles; killed twice, resumed to the same "
      f"attempts, decisions and tree")
