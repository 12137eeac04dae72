#!/usr/bin/env python3
"""End to end: exact reproduction of an evolve run through the ksearch CLI.

1. A run: the scripted model (tests/fixtures/evolve/model.py) drives 12
   rounds of the evolve strategy, two samples at a time on three islands,
   on a host task (its candidates measured here; the fixture's kernels are
   far apart by fixed waits, so the population's order holds on a loaded
   machine).
2. `ksearch replay A`: the same attempts, transcript, best and state.json
   (the population) byte for byte and the same strategy events (decisions,
   generations, migrations), with nothing asked or measured.
3. `ksearch replay A --evolve-inspirations 1`: the first prompt that showed
   two inspirations now shows one, so the run leaves its recording there
   (a prompt divergence) and stops with exit status 5, saying where.
4. A reproduction with a smaller budget, resumed with the full one, ends
   identical to A.
"""
import filecmp
import json
import os
import subprocess
import sys

from e2e_common import logged_ksearch, jsonl, setup

args, src, work = setup()
task = src / "tests/fixtures/tasks/scale3"
model = src / "tests/fixtures/evolve/model.py"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
failures = []


ksearch = logged_ksearch(args.ksearch, work, env)


def expect(cond, what):
    if not cond:
        failures.append(what)


def manifest(run):
    return json.loads((run / "manifest.json").read_text())


def strategy_events(run):
    """The journaled events without their log position and time."""
    return [{k: v for k, v in e.items() if k not in ("seq", "time")} for e in jsonl(run / "events.jsonl")
            if "journal_seq" in e]


def same_files(a, b, label):
    for name in ("attempts.jsonl", "transcript.jsonl", "best.json", "state.json"):
        expect(filecmp.cmp(a / name, b / name, shallow=False), f"{label}: {name} differs")
    fa = sorted(p.relative_to(a) for p in (a / "attempts").rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in (b / "attempts").rglob("*") if p.is_file())
    expect(fa == fb, f"{label}: attempts/ holds other files")
    for f in set(fa) & set(fb):
        expect(filecmp.cmp(a / f, b / f, shallow=False), f"{label}: {f} differs")
    expect(strategy_events(a) == strategy_events(b), f"{label}: the strategy events differ")


# 1. The recorded run.
A = work / "A"
ksearch("A", "run", "--task", task, "--language", "cpp", "--strategy", "evolve", "--llm",
        f"command:{sys.executable} {model}", "--max-concurrency", 2, "--parallel", 2, "--evolve-islands", 3,
        "--evolve-migration-interval", 2, "--seed", 3, "--max-rounds", 12, "--timing-cap", 0.2, "--quiet",
        "--run-dir", A)
ev = strategy_events(A)
# Generation 6 spends the budget: its migration is in state.json, and its events are refused (the run stops).
expect(sum(e["type"] == "evolve_migration" for e in ev) == 2, "A should have logged migrations after generations 2, 4")
expect(json.loads((A / "state.json").read_text())["migrations"] == 3, "A's state.json should count 3 migrations")
expect(sum(e["type"] == "decision" and e["decision"] == "evolve_sample" for e in ev) == 12,
       "A should have made one decision per sample")

# 2. Its exact reproduction.
B = work / "B"
out, _ = ksearch("B", "replay", A, "--run-dir", B)
same_files(A, B, "exact reproduction")
expect(f"Reproduced {A} exactly" in out, f"replay does not report the exact reproduction:\n{out}")
mb = manifest(B)
expect(mb["status"] == "finished" and mb["totals"]["rounds"] == 12, f"B: {mb['status']} after {mb['totals']['rounds']}")
expect(mb["config"]["strategy"] == "evolve" and mb["config"]["evolve_islands"] == 3,
       f"B's configuration: {mb['config']}")

# 3. Another number of inspirations changes a prompt: the replay stops there and says so.
C = work / "C"
out, err = ksearch("C", "replay", A, "--run-dir", C, "--evolve-inspirations", 1, rc=5)
div = manifest(C).get("replay_divergence") or {}
expect(div.get("what") == "prompt", f"C: divergence {div}")
expect("left its recording" in out + err, f"C does not say where it left the recording:\n{out}\n{err}")
prompts = [t for t in jsonl(A / "transcript.jsonl") if "### Inspiration 2" in t["request"]["prompt"]]
expect(prompts and div.get("llm_call") == prompts[0]["seq"],
       f"C diverged at LLM call {div.get('llm_call')}, not at the first prompt with two inspirations")

# 4. A smaller budget, resumed with the full one.
D = work / "D"
ksearch("D6", "replay", A, "--run-dir", D, "--max-rounds", 6)
ksearch("D12", "resume", D, "--max-rounds", 12, "--quiet")
same_files(A, D, "reproduction 6 -> 12 rounds")

if failures:
    sys.exit("\n".join(failures))
print("evolve replay: exact reproduction of 12 rounds (population, attempts, events), a prompt divergence with "
      "--evolve-inspirations 1 reported where it happens, and 6 -> 12 rounds identical")
