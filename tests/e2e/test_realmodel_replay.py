#!/usr/bin/env python3
"""The real-model transcripts (tests/fixtures/realmodel/*/run): searches on
examples/matmul in which a language model answered every prompt, through
tests/realmodel/file_model.py. Each is replayed exactly (`ksearch replay`:
the recorded answers and evaluations) and must reproduce its run: the same
prompts (transcript.jsonl byte for byte, so any change to what a model is
shown is a visible diff here), attempts, best and world-model snapshots.
Each fixture's expect.json says what its run must show of the method: the
prompt kinds that occurred, proposals, a refine per finished cycle, the
best kernel attached to a node of the final tree, no fallback.
docs/world-model.md ("What real models taught") says what each run taught.
"""
import filecmp
import json
import os
import sys

from e2e_common import logged_ksearch, setup

args, src, work = setup()
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
ksearch = logged_ksearch(args.ksearch, work, env)
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def jsonl(path):
    return [json.loads(line) for line in open(path)]


def strategy_events(run):
    return [{k: v for k, v in e.items() if k not in ("seq", "time")}
            for e in jsonl(run / "events.jsonl") if "journal_seq" in e]


def same_run(a, b, label):
    for name in ("attempts.jsonl", "transcript.jsonl", "best.json", "state.json"):
        if (a / name).exists() or (b / name).exists():
            expect(filecmp.cmp(a / name, b / name, shallow=False), f"{label}: {name} differs")
    for sub in ("world_model", "attempts", "best"):
        fa = sorted(p.relative_to(a) for p in (a / sub).rglob("*") if p.is_file())
        fb = sorted(p.relative_to(b) for p in (b / sub).rglob("*") if p.is_file())
        expect(fa == fb, f"{label}: {sub}/ holds other files")
        for f in set(fa) & set(fb):
            expect(filecmp.cmp(a / f, b / f, shallow=False), f"{label}: {f} differs")
    expect(strategy_events(a) == strategy_events(b), f"{label}: the strategy events differ")


def check_method(run, want, label):
    """What the run shows of the method, as its expect.json asks."""
    calls = jsonl(run / "transcript.jsonl")
    kinds = [c["kind"] for c in calls]
    for k in want.get("kinds", []):
        expect(k in kinds, f"{label}: no {k} prompt in {kinds}")
    if "min_proposals" in want:
        expect(kinds.count("wm_propose") >= want["min_proposals"], f"{label}: proposals {kinds.count('wm_propose')}")
    events = jsonl(run / "events.jsonl")
    expect(not any(e["type"] == "world_model_fallback" for e in events), f"{label}: a world-model fallback")
    if want.get("refine_per_cycle"):
        ended = sum(1 for e in events if e["type"] == "cycle_finished")
        expect(ended == 0 or kinds.count("wm_refine") >= ended,
               f"{label}: {ended} cycles ended, {kinds.count('wm_refine')} refines")
    if want.get("best_attached"):
        best = json.loads((run / "best.json").read_text())
        best_id = best.get("solution_id") or best.get("solution", {}).get("id")
        tree = json.loads(sorted((run / "world_model").glob("v*.json"))[-1].read_text())
        attached = {n.get("solution_ref", {}).get("solution_id") for n in tree["decision_tree"]["nodes"]}
        expect(best_id in attached, f"{label}: the best kernel {best_id} is not attached in the final tree")


fixtures = sorted((src / "tests/fixtures/realmodel").glob("*/run"))
expect(len(fixtures) >= 3, f"expected the three real-model fixtures, found {[str(f) for f in fixtures]}")
for fixture in fixtures:
    name = fixture.parent.name
    replayed = work / name
    ksearch(f"replay-{name}", "replay", fixture, "--run-dir", replayed, "--quiet")
    same_run(fixture, replayed, name)
    check_method(fixture, json.loads((fixture.parent / "expect.json").read_text()), name)
    print(f"ok: {name} replays exactly")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("all real-model fixtures replay exactly")
