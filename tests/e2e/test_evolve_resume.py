#!/usr/bin/env python3
"""End to end: the evolve strategy through the ksearch CLI on a host task,
driven by a scripted model (tests/fixtures/evolve/model.py) whose answers
rest on the prompt alone, two samples at a time (--parallel 2) on three
islands that migrate every two generations.

1. An uninterrupted run: samples go to the islands in turn, an empty island
   asks for a new kernel and a failing one for a fix, migrations move
   island elites along the ring, the archive keeps one elite per cell, and
   state.json holds the population.
2. The same run killed with SIGKILL three times (inside a generation's pair
   of evaluations, between a generation's answers and their evaluation, and
   later) and resumed each time, and the same run with a smaller budget (a
   whole number of generations) resumed with the full one: each must end with exactly the uninterrupted
   run's attempts, decisions, migrations and population (the measured
   numbers aside, which differ between runs), and no worker may outlive a kill.
3. state.json is untrusted: a resume of a folder whose state.json was
   changed (a field out of range, or a valid state that is not the one the
   journal replays to) fails with an error naming the problem.

The kernels' speeds are fixed waits, so no decision depends on the machine's
load (the model's docstring says how).
"""
import json
import os
import shutil
import subprocess
import sys

import e2e_common
from e2e_common import lines, setup

args, src, work = setup()
task = src / "tests/fixtures/tasks/scale3"
model = src / "tests/fixtures/evolve/model.py"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
ROUNDS = 14
failures = []


def run_cmd(run_dir, rounds=ROUNDS):
    return [args.ksearch, "run", "--task", str(task), "--language", "cpp", "--strategy", "evolve",
            "--llm", f"command:{sys.executable} {model}", "--max-concurrency", "2", "--parallel", "2",
            "--evolve-islands", "3", "--evolve-migration-interval", "2", "--evolve-inspirations", "2",
            "--seed", "7", "--max-rounds", str(rounds), "--timing-cap", "0.2", "--quiet", "--run-dir", str(run_dir)]


def resume_cmd(run_dir, *extra):
    return [args.ksearch, "resume", str(run_dir), "--quiet", *extra]


def run(cmd, log_name, rc=0):
    with open(work / log_name, "w") as log:
        got = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=600).returncode
    if got != rc:
        sys.exit(f"{log_name}: exit status {got}, expected {rc}; log:\n" + (work / log_name).read_text())
    return (work / log_name).read_text()


def expect(cond, what):
    if not cond:
        failures.append(what)


def events(run_dir, kind=None):
    return [e for e in e2e_common.jsonl(run_dir / "events.jsonl") if kind is None or e["type"] == kind]


def attempts(run_dir):
    return [(a["seq"], a["round"], a["solution_id"], a["status"], a["action"])
            for a in e2e_common.jsonl(run_dir / "attempts.jsonl")]


def decisions(run_dir):
    return [(e["generation"], e["sample"], e["island"], e["mode"], e["next"], e["parent"], tuple(e["inspirations"]))
            for e in events(run_dir, "decision")]


def migrations(run_dir):
    return [(e["generation"], [(m["from"], m["to"], m["solution_id"]) for m in e["moves"]])
            for e in events(run_dir, "evolve_migration")]


def population(run_dir):
    """state.json without the measured numbers."""
    s = json.loads((run_dir / "state.json").read_text())
    pop = s["population"]
    return (s["generation"], s["next_island"], s["migrations"], s["rounds_used"],
            [[(m["solution_id"], m["born"], m["origin"], m["cell"]) for m in i["members"]] for i in pop["islands"]],
            [(m["solution_id"], m["cell"]) for m in pop["archive"]])


def best_id(run_dir):
    return json.loads((run_dir / "best/solution.json").read_text())["id"]


# 1. The uninterrupted run.
full = work / "full"
run(run_cmd(full), "full.log")
dec = decisions(full)
expect([d[2] for d in dec] == [i % 3 for i in range(ROUNDS)],
       f"samples do not go to the islands in turn: {[d[2] for d in dec]}")
expect(dec[0][3] == "new" and dec[0][4] == "generate", f"the first sample is not a new kernel: {dec[0]}")
expect(any(d[3] == "fix" and d[4] == "debug" for d in dec), "no failing island was asked for a fix")
expect(any(d[3] == "exploit" for d in dec) and any(d[3] == "explore" for d in dec),
       f"parents were not both exploited and explored: {[d[3] for d in dec]}")
expect(any(len(d[6]) == 2 for d in dec), "no prompt had two inspirations")
migs = migrations(full)
expect([m[0] for m in migs] == [2, 4, 6], f"migrations after generations {[m[0] for m in migs]}, not 2, 4, 6")
expect(any(moves for _, moves in migs), "no migration moved a kernel")
expect(all(to == (frm + 1) % 3 for _, moves in migs for frm, to, _ in moves), "a migration left the ring")
pop = population(full)
expect(pop[0] == 7 and pop[3] == ROUNDS, f"state.json holds generation {pop[0]} after {pop[3]} rounds")
cells = [c for _, c in pop[5]]
expect(len(cells) == len(set(cells)) and len(cells) >= 3, f"the archive should hold one elite per cell: {cells}")
# The first prompt with inspirations shows their code and scores beside the parent.
transcript = e2e_common.jsonl(full / "transcript.jsonl")
improve = next(t for t in transcript if t["kind"] == "improve" and "### Inspiration 1" in t["request"]["prompt"])
prompt = improve["request"]["prompt"]
expect("## Parent kernel" in prompt and "Geometric-mean latency" in prompt and "```cpp kernel.cpp" in prompt,
       "an improve prompt lacks the parent's code or evaluation")
debug = next(t for t in transcript if t["kind"] == "debug")["request"]["prompt"]
expect("Last attempt on this island (failing)" in debug and "error" in debug, "a fix prompt lacks the failure")

# 2. Killed and resumed; a smaller budget raised.
killed = work / "killed"
e2e_common.run_and_kill(run_cmd(killed), killed, work / "kill1.log", lambda d: lines(d / "attempts.jsonl") >= 3, env)
e2e_common.run_and_kill(resume_cmd(killed), killed, work / "kill2.log",
                        lambda d: lines(d / "transcript.jsonl") >= 8, env)
e2e_common.run_and_kill(resume_cmd(killed), killed, work / "kill3.log",
                        lambda d: lines(d / "attempts.jsonl") >= 11, env)
run(resume_cmd(killed), "resume_final.log")
budget = work / "budget"
# 6 rounds, a whole number of generations: a budget that cuts a generation short (5 rounds of --parallel 2)
# gives that generation one sample, and a resume with more rounds gives it two (docs/search.md, "Evolve").
run(run_cmd(budget, rounds=6), "budget6.log")
run(resume_cmd(budget, "--max-rounds", str(ROUNDS)), "budget14.log")

for other in (killed, budget):
    name = other.name
    expect(attempts(full) == attempts(other), f"{name}: attempts differ:\n  {attempts(full)}\n  {attempts(other)}")
    expect(decisions(full) == decisions(other), f"{name}: decisions differ:\n  {decisions(full)}\n  {decisions(other)}")
    expect(migrations(full) == migrations(other), f"{name}: migrations differ")
    expect(population(full) == population(other),
           f"{name}: final population differs:\n  {population(full)}\n  {population(other)}")
    expect(best_id(full) == best_id(other), f"{name}: best differs")
    m = json.loads((other / "manifest.json").read_text())
    expect(m["status"] == "finished" and m["totals"]["rounds"] == ROUNDS,
           f"{name}: manifest says {m['status']} after {m['totals']['rounds']} rounds")
    seqs = [e["journal_seq"] for e in events(other) if "journal_seq" in e]
    expect(seqs == sorted(set(seqs)), f"{name}: strategy events duplicated or out of order")
    expect(lines(other / "transcript.jsonl") == ROUNDS, f"{name}: the transcript should hold each answer once")

# 3. A changed state.json is refused, naming the problem.
def tampered(name, edit):
    d = work / name
    shutil.copytree(killed, d)
    s = json.loads((d / "state.json").read_text())
    edit(s)
    (d / "state.json").write_text(json.dumps(s, indent=2) + "\n")
    return run(resume_cmd(d, "--max-rounds", str(ROUNDS + 2)), f"{name}.log", rc=1)


out = tampered("bad_score", lambda s: s["population"]["islands"][0]["members"][0].update(score=-1))
expect("state.json: population: islands[0].members[0]: score must be a number > 0, is -1" in out,
       f"a negative score is not named:\n{out}")
out = tampered("bad_island", lambda s: s.update(next_island=5))
expect("next_island must be an island between 0 and 2, is 5" in out, f"an island out of range is not named:\n{out}")
out = tampered("other_state", lambda s: s.update(next_island=(s["next_island"] + 1) % 3))
expect("state.json records generation 7 after 14 rounds" in out and "next_island" in out,
       f"a state the journal does not replay to is not refused:\n{out}")

if failures:
    sys.exit("\n".join(failures))
print(f"evolve: {ROUNDS} rounds, {len(migs)} migrations, archive of {len(cells)} cells; the same attempts, decisions, "
      f"migrations and population after 3 kills and after raising the budget 6 -> {ROUNDS}; changed state.json refused")
