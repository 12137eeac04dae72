#!/usr/bin/env python3
"""End to end: the world-model search starts from the task's starting point
when nothing else is given (tests/fixtures/tasks/scale3_start: scale3 with a
starting point that does not wait).

- By default round 1 evaluates the starting point; it passes, is attached to
  the root (the first generate prompt builds on it, `show` puts it there) and
  is the best so far. Killed mid-run and resumed, the run ends as the
  uninterrupted one; replayed, it is reproduced exactly.
- --no-starting-point, a one-round budget and a task without a starting
  point start from the task alone, and the manifest says the seed was not
  used.
- A run folder made before the seed existed (its manifest has no
  start_from_starting_point) replays and resumes as it was made: without it.

The decisions of these runs compare kernels that differ by fixed waits (0,
10 and 100 ms, tests/fixtures/wm_e2e/responder.py), so none depends on load.
"""
import json
import os
import subprocess
import sys

import e2e_common
from e2e_common import events, first_prompt, journal, jsonl, last_tree, lines, run_logged, same_end, setup

args, src, work = setup()
transcript = src / "tests/fixtures/wm_e2e/transcript.jsonl"
task = src / "tests/fixtures/tasks/scale3_start"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
expect = e2e_common.Expectations()


def run_cmd(run_dir, rounds, *extra, task_dir=task):
    return [args.ksearch, "run", "--task", str(task_dir), "--language", "cpp", "--llm", f"replay:{transcript}",
            "--on-divergence", "skip", "--max-rounds", str(rounds), "--wm-stagnation-window", "2",
            "--timing-cap", "0.2", "--quiet", "--run-dir", str(run_dir), *extra]


def finish(cmd, log_name):
    return run_logged(cmd, work / log_name, env, timeout=300)


def config(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())["config"]


start_code = json.loads((task / "task.json").read_text())["starting_points"][0]["sources"][0]["content"]

# 1. By default: round 1 is the starting point, at the root, the best so far.
seeded = work / "seeded"
out = finish(run_cmd(seeded, 3), "seeded.log")
expect("starts from the task's starting point" in out, f"the CLI should say how the run starts:\n{out}")
a = jsonl(seeded / "attempts.jsonl")
expect(a and a[0]["round"] == 1 and a[0]["action"] == "start from the task's starting point"
       and a[0]["status"] == "passed", f"round 1 should evaluate the starting point: {a[:1]}")
seed_id = a[0]["solution_id"] if a else ""
warm = events(seeded, "warm_start")
expect(len(warm) == 1 and warm[0].get("source") == "starting_point" and warm[0].get("attached_to_root")
       and warm[0].get("evaluation") == "measured", f"one warm_start event for the starting point: {warm}")
tree = last_tree(seeded)
root = next(n for n in tree["nodes"] if n["node_id"] == tree["root_id"])
expect(root["solution_ref"]["solution_id"] == seed_id, "the root should hold the starting point")
expect(start_code in first_prompt(seeded, "generate"), "the first generate prompt should build on it")
improved = events(seeded, "best_improved")
expect(improved and (improved[0]["round"], improved[0]["solution_id"]) == (1, seed_id),
       f"the best so far starts at the starting point: {improved[:1]}")
# The two rounds after it wait 100 and 10 ms: it stays the best.
expect(json.loads((seeded / "best.json").read_text())["solution_id"] == seed_id, "the best is the starting point")
show = subprocess.run([args.ksearch, "show", str(seeded)], capture_output=True, text=True, env=env).stdout
expect(any(line.lstrip("-* ").startswith("root ") and seed_id[:12] in line for line in show.splitlines()),
       f"`show` should put the starting point at the root:\n{show}")
expect(config(seeded).get("start_from_starting_point") is True, "the manifest should say the seed was used")

killed = work / "seeded_killed"
e2e_common.run_and_kill(run_cmd(killed, 3), killed, work / "seeded_kill.log",
                        lambda d: lines(d / "attempts.jsonl") >= 2, env)
finish([args.ksearch, "resume", str(killed), "--quiet"], "seeded_resume.log")
same_end(seeded, killed, expect)
out = finish([args.ksearch, "replay", str(seeded), "--run-dir", str(work / "seeded_replay")], "seeded_replay.log")
expect(f"Reproduced {seeded} exactly" in out, f"the replay should reproduce the seeded run:\n{out}")


# 2. Without it: the flag, a one-round budget, a task that has none.
def unseeded(run_dir, why):
    a = jsonl(run_dir / "attempts.jsonl")
    expect(a and a[0]["action"].endswith("[generate 1]"), f"{why}: round 1 should be the model's first kernel: {a[:1]}")
    expect(not events(run_dir, "warm_start"), f"{why}: no warm_start event")
    expect(config(run_dir).get("start_from_starting_point") is False, f"{why}: the manifest should say: not used")


finish(run_cmd(work / "flag", 2, "--no-starting-point"), "flag.log")
unseeded(work / "flag", "--no-starting-point")
finish(run_cmd(work / "one_round", 1), "one_round.log")
unseeded(work / "one_round", "a one-round budget")
finish(run_cmd(work / "no_start", 2, task_dir=src / "tests/fixtures/tasks/scale3"), "no_start.log")
unseeded(work / "no_start", "a task without a starting point")

# 3. A run made before the seed existed: its manifest's configuration has no start_from_starting_point.
old = work / "old_run"
finish(run_cmd(old, 3, "--no-starting-point"), "old_run.log")
m = json.loads((old / "manifest.json").read_text())
for key in ("start_from_starting_point", "remeasure", "continue_from_solution_eval", "continue_from_world_model"):
    del m["config"][key]
(old / "manifest.json").write_text(json.dumps(m, indent=2))
out = finish([args.ksearch, "replay", str(old), "--run-dir", str(work / "old_replay")], "old_replay.log")
expect(f"Reproduced {old} exactly" in out, f"an old run should replay as it was made:\n{out}")
before = journal(old)
finish([args.ksearch, "resume", str(old), "--max-rounds", "4", "--quiet"], "old_resume.log")
after = journal(old)
expect(after[:len(before)] == before and len(after) == 4 and not events(old, "warm_start"),
       f"an old run resumes without the seed: {before} -> {after}")

expect.finish()
print("starting point: round 1 by default, at the root and the best so far (killed and resumed, replayed); "
      "not used with --no-starting-point, one round or none to use; old runs replay and resume without it")
