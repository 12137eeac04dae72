#!/usr/bin/env python3
"""End to end: the tune strategy's batches through the ksearch CLI, on the
host matrix-multiply example (the main job without a GPU), with no LLM.

1. An uninterrupted run of 11 rounds: the starting point, then batches of 4
   (the automatic size), 4 and 1 (the run's last round is decided alone),
   every configuration once, each a round with its own attempt and
   tune_round event.
2. `ksearch replay A`: the same attempts, best, state.json and strategy events
   byte for byte, nothing measured; with `--tune-batch 1` the sequential
   tuner's choices part from the batched ones after the seed design (which
   both propose in the same order), and the replay stops there (exit status
   5) naming the attempt.
3. A run killed with SIGKILL while its second batch is being compiled and
   measured, resumed, killed again while its third is, and resumed to the
   end: its journal is whole (rounds 1..11, each event once, the same
   batches), no worker outlives a kill, and a replay of it reproduces it
   exactly, so the resumed run is in the very state its journal leads to.
   (Its measurements are new, so its choices after the kill may differ from
   run A's; tests/tune/test_tune_session.cpp compares a stopped and resumed
   run with an uninterrupted one on deterministic results.)
4. Another run killed in its second batch, a stale temporary file planted:
   `resume --max-rounds` below the rounds done or above the 11 the tuner
   planned is refused (exit 2) with manifest.json unchanged byte for byte and
   the temporary file gone; a budget between them replays and stops there; the
   planned 11 then ends the run.
"""
import filecmp
import json
import os

import e2e_common
from e2e_common import Expectations, events, jsonl, lines, logged_ksearch, setup

args, src, work = setup()
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
ksearch = logged_ksearch(args.ksearch, work, env)
expect = Expectations()
ROUNDS = 11


def run_cmd(run_dir):
    return [args.ksearch, "run", "--task", "examples/matmul", "--language", "cpp", "--llm", "offline",
            "--strategy", "tune", "--max-rounds", str(ROUNDS), "--timing-cap", "0.05", "--seed", "3", "--quiet",
            "--run-dir", str(run_dir)]


def rounds(run_dir):
    """Each tune_round's configuration and batch: (batch, batch_size, pending, config)."""
    return [(e["batch"], e["batch_size"], e["pending"], e["config"]) for e in events(run_dir, "tune_round")]


def batches_done(run_dir, k):
    """Kill point: the k-th batch's last tune_round is written (the next batch is in flight)."""
    try:
        return any(b == k and p == s - 1 for b, s, p, _ in rounds(run_dir))
    except (OSError, ValueError, KeyError):
        return False


def strategy_events(run_dir):
    return [{k: v for k, v in e.items() if k not in ("seq", "time")} for e in jsonl(run_dir / "events.jsonl")
            if "journal_seq" in e]


def same_run(a, b, label):
    for name in ("attempts.jsonl", "best.json", "state.json"):
        expect(filecmp.cmp(a / name, b / name, shallow=False), f"{label}: {name} differs")
    expect(strategy_events(a) == strategy_events(b), f"{label}: the strategy events differ")


def whole_journal(run_dir, label):
    att = jsonl(run_dir / "attempts.jsonl")
    expect([a["seq"] for a in att] == list(range(ROUNDS)) and [a["round"] for a in att] == list(range(1, ROUNDS + 1)),
           f"{label}: attempts are not rounds 1..{ROUNDS}: {[(a['seq'], a['round']) for a in att]}")
    seqs = [e["journal_seq"] for e in jsonl(run_dir / "events.jsonl") if "journal_seq" in e]
    expect(seqs == list(range(len(seqs))), f"{label}: strategy events duplicated or missing: {seqs}")
    r = rounds(run_dir)
    expect([(b, s, p) for b, s, p, _ in r][:9] == [(1, 4, 0), (1, 4, 1), (1, 4, 2), (1, 4, 3), (2, 4, 0), (2, 4, 1),
                                                   (2, 4, 2), (2, 4, 3), (3, 1, 0)],
           f"{label}: batches are not 4, 4, 1: {r}")
    configs = [c for _, _, _, c in r]
    expect(len(configs) == len(set(configs)), f"{label}: a configuration was evaluated twice: {configs}")
    ids = [e["solution"] for e in events(run_dir, "tune_round")]
    expect(ids == [a["solution_id"] for a in att[1:1 + len(ids)]], f"{label}: tune_round events and attempts disagree")
    m = json.loads((run_dir / "manifest.json").read_text())
    expect(m["status"] == "finished" and m["totals"]["rounds"] == ROUNDS,
           f"{label}: manifest says {m['status']} after {m['totals']['rounds']} rounds")


# 1. The uninterrupted run.
A = work / "A"
e2e_common.run_logged(run_cmd(A), work / "A.log", env)
whole_journal(A, "A")
expect(events(A, "tune_start")[0]["batch"] == 4, "A: the automatic batch is not 4")
expect(json.loads((A / "manifest.json").read_text())["config"]["tune_batch"] == 0,
       "A: the manifest should record the automatic batch (0)")
state = json.loads((A / "state.json").read_text())
expect(state["batch"] == 4 and state["batches"] >= 3, f"A: state.json: {state}")

# 2. Its exact reproduction, and the sequential tuner's departure from it.
B = work / "B"
out, _ = ksearch("B", "replay", A, "--run-dir", B)
same_run(A, B, "replay")
expect(f"Reproduced {A} exactly" in out, f"replay does not report the exact reproduction:\n{out}")
C = work / "C"
out, err = ksearch("C", "replay", A, "--run-dir", C, "--tune-batch", 1, rc=5)
div = json.loads((C / "manifest.json").read_text()).get("replay_divergence") or {}
seeds = sum(1 for e in events(A, "tune_round") if e["phase"] == "seed")
expect(div.get("what") == "evaluation" and div.get("attempt", 0) > seeds,
       f"C: should diverge at an evaluation after the {seeds} seeds, not {div}")
expect("left its recording" in out + err, f"C does not say where it left the recording:\n{out}\n{err}")
expect([e["config"] for e in events(C, "tune_round")][:seeds] == [e["config"] for e in events(A, "tune_round")][:seeds],
       "C: the seed design differs between one at a time and batches")

# 3. Killed inside batches, resumed.
K = work / "K"
e2e_common.run_and_kill(run_cmd(K), K, work / "kill1.log", lambda d: batches_done(d, 1), env)
expect(lines(K / "attempts.jsonl") == 5, f"K: the first kill should land in batch 2 (5 attempts), not at "
                                         f"{lines(K / 'attempts.jsonl')}")
resume = [args.ksearch, "resume", str(K), "--quiet"]
e2e_common.run_and_kill(resume, K, work / "kill2.log", lambda d: batches_done(d, 2), env)
expect(lines(K / "attempts.jsonl") == 9, f"K: the second kill should land in batch 3 (9 attempts), not at "
                                         f"{lines(K / 'attempts.jsonl')}")
e2e_common.run_logged(resume, work / "K_final.log", env)
whole_journal(K, "K")
expect(json.loads((K / "manifest.json").read_text()).get("resumed", 0) == 2, "K: the manifest should count 2 resumes")
R = work / "R"
out, _ = ksearch("R", "replay", K, "--run-dir", R)
same_run(K, R, "replay of the resumed run")

# 4. Killed inside batch 2, with a temporary file of an atomic write left behind: a resume that
#    cannot follow its --max-rounds is refused and changes nothing (the temporary file is gone, as
#    on every open); a lower budget replays the tuner's plan and stops; the planned one ends it.
L = work / "L"
e2e_common.run_and_kill(run_cmd(L), L, work / "kill3.log", lambda d: batches_done(d, 1), env)
done = lines(L / "attempts.jsonl")
(L / "state.json.tmp.4242.4243.0").write_text("{")
manifest = (L / "manifest.json").read_bytes()
for n, why in ((done - 1, f"below the {done} rounds this run has already done"),
               (ROUNDS + 5, f"above the {ROUNDS} rounds this tune run planned")):
    _, err = ksearch(f"L_refused_{n}", "resume", L, "--max-rounds", n, "--quiet", rc=2)
    expect(why in err and f"between {done} and {ROUNDS}" in err, f"L: --max-rounds {n} not refused as expected:\n{err}")
    expect((L / "manifest.json").read_bytes() == manifest, f"L: a refused --max-rounds {n} changed manifest.json")
expect(not (L / "state.json.tmp.4242.4243.0").exists(), "L: the stale temporary file is still there after an open")
ksearch("L_lower", "resume", L, "--max-rounds", done + 2, "--quiet")
att = jsonl(L / "attempts.jsonl")
m = json.loads((L / "manifest.json").read_text())
expect([a["round"] for a in att] == list(range(1, done + 3)) and m["status"] == "finished"
       and m["stop_reason"] == "max_rounds" and m["config"]["max_rounds"] == done + 2,
       f"L: resume --max-rounds {done + 2} after {done} rounds: {[a['round'] for a in att]}, {m['status']}, "
       f"{m.get('stop_reason')}")
ksearch("L_planned", "resume", L, "--max-rounds", ROUNDS, "--quiet")
att = jsonl(L / "attempts.jsonl")
configs = [e["config"] for e in events(L, "tune_round")]
expect([a["round"] for a in att] == list(range(1, ROUNDS + 1)) and len(configs) == len(set(configs)),
       f"L: resumed with its planned {ROUNDS} rounds: rounds {[a['round'] for a in att]}, configurations {configs}")

expect.finish()
print(f"tune batches: {ROUNDS} rounds in batches of 4, 4, 1; replayed exactly; --tune-batch 1 leaves the recording "
      f"at attempt {div.get('attempt')} after {seeds} shared seeds; killed in batches 2 and 3, resumed whole; "
      f"a resume below the rounds done or above the plan refused without a change, one between them stops there")
