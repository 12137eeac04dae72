#!/usr/bin/env python3
"""End to end: exact reproduction of a world_model run through the ksearch CLI.

1. A run: the recorded transcript drives 12 rounds on a host task (its
   candidates measured here; the fixture's kernels are far apart by a fixed
   wait, so the decisions hold on a loaded machine). The CLI must say up front
   that the candidates are measured again.
2. `ksearch replay A`: the same tree, attempts, best (the files compared byte
   for byte), nothing measured.
   `ksearch replay A --wm-lenient-edits` stops at the first edit prompt (the
   edit rules say what happens to a slip in that mode); with
   --allow-prompt-changes it reproduces A (no edit needs a repair), and says
   the mode; `ksearch run --wm-lenient-edits` records it.
3. `ksearch replay A --wm-stagnation-window 3 --allow-prompt-changes` (the
   prompts state the window): stops where it diverges, and says where (after
   round 4, LLM call 6, improve asked, wm_refine recorded) and why (decision
   4: the stagnation check, window 3 against 2, with the latencies it
   compared); `ksearch resume` with a model then goes on live.
4. A reproduction with a smaller budget (which the prompts state too),
   resumed with the full one, ends identical to A but for the prompts.
5. `ksearch run --llm replay:A/transcript.jsonl --wm-stagnation-window 3`
   (measured again) stops with the same report, both runs' decisions shown;
   with --on-divergence skip it goes on with the answers that still match.
"""
import filecmp
import json
import os
import subprocess
import sys

from e2e_common import logged_ksearch, setup

args, src, work = setup()
transcript = src / "tests/fixtures/wm_e2e/transcript.jsonl"
responder = src / "tests/fixtures/wm_e2e/responder.py"
task = src / "tests/fixtures/tasks/scale3"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
failures = []


ksearch = logged_ksearch(args.ksearch, work, env)


def expect(cond, what):
    if not cond:
        failures.append(what)


def jsonl(path):
    return [json.loads(line) for line in open(path)]


def manifest(run):
    return json.loads((run / "manifest.json").read_text())


def strategy_events(run):
    """The journaled events without their log position and time."""
    out = []
    for e in jsonl(run / "events.jsonl"):
        if "journal_seq" in e:
            out.append({k: v for k, v in e.items() if k not in ("seq", "time")})
    return out


def without_prompts(run):
    """The transcript's answers, without the prompts they answered."""
    return [{k: v for k, v in e.items() if k not in ("request", "prompt_sha256")} for e in jsonl(run / "transcript.jsonl")]


def same_files(a, b, label, prompts_differ=False):
    """Everything the run produced, byte for byte (manifest and event log aside). With prompts_differ (a
    setting the prompts state was changed, so the replay asked other prompts: --allow-prompt-changes),
    the transcripts hold the same answers."""
    for name in ("attempts.jsonl", "transcript.jsonl", "best.json", "state.json"):
        if name == "transcript.jsonl" and prompts_differ:
            expect(without_prompts(a) == without_prompts(b), f"{label}: the transcripts' answers differ")
            continue
        expect(filecmp.cmp(a / name, b / name, shallow=False), f"{label}: {name} differs")
    for sub in ("world_model", "attempts", "best"):
        fa = sorted(p.relative_to(a) for p in (a / sub).rglob("*") if p.is_file())
        fb = sorted(p.relative_to(b) for p in (b / sub).rglob("*") if p.is_file())
        expect(fa == fb, f"{label}: {sub}/ holds other files: {fa} vs {fb}")
        for f in set(fa) & set(fb):
            expect(filecmp.cmp(a / f, b / f, shallow=False), f"{label}: {f} differs")
    expect(strategy_events(a) == strategy_events(b), f"{label}: the strategy events differ")


def run_a(run_dir, *extra, window=2, rc=0, name=None):
    return ksearch(name or run_dir.name, "run", "--task", task, "--language", "cpp", "--max-rounds", 12,
                   "--wm-stagnation-window", window, "--timing-cap", 0.2, "--quiet", "--run-dir", run_dir, *extra,
                   rc=rc)


# 1. The recorded run, its candidates measured here.
A = work / "A"
out, err = run_a(A, "--llm", f"replay:{transcript}")
expect("measured again" in err, "run --llm replay: does not say up front that the candidates are measured again")
started = [e for e in jsonl(A / "events.jsonl") if e["type"] == "replay_started"]
expect(len(started) == 1 and started[0]["evaluations"] == "measured_again",
       f"the run's events do not say the candidates are measured again: {started}")
expect(manifest(A)["totals"]["rounds"] == 12 and manifest(A)["stop_reason"] == "max_rounds",
       f"A: {manifest(A)['stop_reason']} after {manifest(A)['totals']['rounds']} rounds")
expect(len(jsonl(A / "transcript.jsonl")) == 19, "A did not use the 19 recorded answers")
# A review of the frontier after every closed cycle: three in 12 rounds, none before the first refine.
kinds = [c["kind"] for c in jsonl(A / "transcript.jsonl")]
expect(kinds.count("wm_propose") == 3 and kinds.index("wm_propose") > kinds.index("wm_refine"),
       f"A's proposals: {kinds}")
# The run stopped inside its last cycle: that cycle's best kernel is in the final tree.
final_tree = json.loads(sorted((A / "world_model").glob("v*.json"))[-1].read_text())
attached = {n.get("solution_ref", {}).get("solution_id") for n in final_tree["decision_tree"]["nodes"]}
last_attempt = jsonl(A / "attempts.jsonl")[-1]
at_stop = [e for e in jsonl(A / "events.jsonl") if e["type"] == "world_model_attached_at_stop"]
expect(len(at_stop) == 1 and "journal_seq" not in at_stop[0] and at_stop[0]["solution_id"] in attached,
       f"A's last cycle's best is not attached in the final tree: {at_stop}")
# The too-hard prompt shows the cycle's last attempt, as the original's does.
calls = jsonl(A / "transcript.jsonl")
too_hard = [i for i, c in enumerate(calls) if c["kind"] == "wm_too_hard"]
expect(len(too_hard) == 1 and "[KERNEL_CODE]" in calls[too_hard[0]]["request"]["prompt"],
       "the too-hard prompt does not show the cycle's last kernel")
# Refine's evidence speaks the prediction's unit: the factor over the base kernel, and over the reference.
refines = [c["request"]["prompt"] for c in calls if c["kind"] == "wm_refine"]
expect(refines and all("predicted speedup over the action's base kernel" in p and "over the reference" in p
                       and ("x over the base kernel (" in p or "no base kernel" in p) for p in refines),
       "a refine prompt does not state the predicted and observed factors over the base kernel")
expect(any("x over the base kernel (" in p for p in refines), "no refine prompt observed a factor over a base kernel")
# The run's totals count the world-model edits, rejections and fallbacks, and show says them.
events_a = jsonl(A / "events.jsonl")
counts = {k: sum(1 for e in events_a if e["type"] in t) for k, t in
          (("edits", ("world_model_edited",)), ("rejected", ("world_model_edit_rejected", "world_model_edit_failed")),
           ("fallbacks", ("world_model_fallback",)))}
edited = [e for e in events_a if e["type"] == "world_model_edited"]
counts["repairs"] = sum(len(e.get("repairs", [])) for e in edited)
counts["repaired_edits"] = sum(1 for e in edited if e.get("repairs"))
expect(manifest(A)["totals"].get("world_model") == counts and counts["edits"] > 0,
       f"A's totals.world_model {manifest(A)['totals'].get('world_model')} are not its events' {counts}")
expect(counts["repairs"] == 0, "a run with strict edits (the default) recorded repairs")
out, _ = ksearch("show-A", "show", A)
expect(f"world model: {counts['edits']} edits committed, {counts['rejected']} answers rejected, "
       f"{counts['fallbacks']} fallbacks; strict edits" in out,
       "ksearch show does not count the world-model edits")
page, _ = ksearch("report-A", "report", A, "-o", "-")
expect(f"{counts['edits']} edits committed, {counts['rejected']} answers rejected" in page,
       "the HTML report does not count the world-model edits")
decisions_a = [e for e in jsonl(A / "events.jsonl")
               if e["type"] == "decision" and e["decision"] != "noise_check"]  # the session's, not the strategy's
# One per round but the last: the budget stops the run before its check.
expect(len(decisions_a) == 11, f"A recorded {len(decisions_a)} stagnation decisions, expected 11")

# 2. Its exact reproduction into a new folder: nothing asked or measured.
B = work / "B"
out, err = ksearch("B", "replay", A, "--run-dir", B)
same_files(A, B, "exact reproduction")
mb = manifest(B)
expect(mb["stop_reason"] == manifest(A)["stop_reason"] and mb["status"] == "finished",
       f"B: {mb['status']} / {mb['stop_reason']}")
expect(mb["replay"]["source"] == str(A.resolve()), f"B's manifest does not name its recording: {mb.get('replay')}")
expect(mb["totals"]["rounds"] == 12, "B did not reproduce 12 rounds")
expect(f"Reproduced {A} exactly" in out, f"replay does not report the exact reproduction:\n{out}")
expect("(12 replayed" not in out and "12 taken from the recording" in out, f"replay summary:\n{out}")

# 2b. With lenient edits (--wm-lenient-edits): the edit prompts say what happens to a slip in that
# mode, so the replay leaves its recording at the first edit prompt...
L0 = work / "L0"
out, err = ksearch("L0", "replay", A, "--run-dir", L0, "--wm-lenient-edits", rc=5)
expect("the prompt differs from the recorded one" in err and "out-of-range values are clamped" in err,
       f"a replay with lenient edits does not stop at the changed edit rules:\n{err}")
# ...and with --allow-prompt-changes the recorded edits all pass as they are, so the reproduction is
# the same run, with nothing repaired, and show says which mode counted.
L = work / "L"
ksearch("L", "replay", A, "--run-dir", L, "--wm-lenient-edits", "--allow-prompt-changes")
same_files(A, L, "reproduction with lenient edits", prompts_differ=True)
ml = manifest(L)
expect(ml["config"]["wm_lenient_edits"] is True and ml["replay"]["config_changes"] == {"wm_lenient_edits": True},
       f"L's manifest: config {ml['config'].get('wm_lenient_edits')}, changes {ml['replay'].get('config_changes')}")
expect(ml["totals"].get("world_model") == counts, f"L's totals.world_model {ml['totals'].get('world_model')}")
out, _ = ksearch("show-L", "show", L)
expect(f"{counts['fallbacks']} fallbacks; lenient edits, 0 repairs in 0 edits" in out,
       f"ksearch show does not say the lenient mode:\n{out}")
# And from `ksearch run`.
R = work / "R"
ksearch("R", "run", "--task", task, "--language", "cpp", "--max-rounds", 2, "--timing-cap", 0.2, "--quiet",
        "--run-dir", R, "--llm", f"replay:{transcript}", "--wm-lenient-edits")
expect(manifest(R)["config"]["wm_lenient_edits"] is True, "ksearch run --wm-lenient-edits is not in the config")

# 3. Another stagnation window: where and why it diverges.
# The prompts state the window, so the replay follows the recording's answers for the prompts that
# changed (--allow-prompt-changes) until a decision goes another way.
C = work / "C"
out, err = ksearch("C", "replay", A, "--run-dir", C, "--wm-stagnation-window", 3, "--allow-prompt-changes", rc=5)
mc = manifest(C)
d = mc.get("replay_divergence", {})
expect(mc["status"] == "stopped" and mc["stop_reason"] == "replay_diverged", f"C: {mc['status']} / {mc['stop_reason']}")
expect((d.get("what"), d.get("after_round"), d.get("llm_call"), d.get("asked"), d.get("recorded")) ==
       ("kind", 4, 5, "improve", "wm_refine"), f"C's divergence: {json.dumps(d)[:600]}")
dec = d.get("decision", {})
expect(dec.get("index") == 3 and dec.get("now", {}).get("decision") == "cycle_goes_on"
       and dec.get("recorded", {}).get("decision") == "cycle_ends"
       and dec["now"].get("window") == 3 and dec["recorded"].get("window") == 2,
       f"C's decision: {json.dumps(dec)[:600]}")
for needle in ("After round 4, at LLM call 6", "kind improve", "kind wm_refine", "Decision 4 changed",
               "cycle 1 goes on after round 4", "cycle 1 ends after round 4", "window of 2", " ms)"):
    expect(needle in err, f"the divergence report on stderr lacks {needle!r}:\n{err}")
expect(jsonl(C / "attempts.jsonl") == jsonl(A / "attempts.jsonl")[:4], "C's 4 attempts are not A's first 4")
expect(without_prompts(C)[:5] == without_prompts(A)[:5] and len(jsonl(C / "transcript.jsonl")) == 5,
       "C's 5 answers are not A's first 5")
expect(any(e["type"] == "replay_diverged" for e in jsonl(C / "events.jsonl")), "C's events lack replay_diverged")
# Given a model, the reproduction goes on live where it stopped.
out, err = ksearch("C_live", "resume", C, "--llm", f"command:python3 {responder} {work / 'responder_state.json'}",
                   "--quiet")
mc = manifest(C)
expect(mc["status"] == "finished" and mc["totals"]["rounds"] == 12, f"C resumed live: {mc['status']}, "
       f"{mc['totals']['rounds']} rounds")
expect(mc["replay"]["on_divergence"] == "live", "C's manifest does not record that it went live")
expect(any(e["type"] == "replay_went_live" for e in jsonl(C / "events.jsonl")), "C's events lack replay_went_live")
expect(jsonl(C / "attempts.jsonl")[:4] == jsonl(A / "attempts.jsonl")[:4], "C's first 4 attempts changed")

# 4. A reproduction with a smaller budget (the prompts state it: --allow-prompt-changes), resumed
# with the full one: the cycle the stop cut short and attached goes on, and the run ends as A.
D = work / "D"
ksearch("D5", "replay", A, "--run-dir", D, "--max-rounds", 5, "--allow-prompt-changes")
expect(manifest(D)["totals"]["rounds"] == 5 and manifest(D)["stop_reason"] == "max_rounds", "D: not 5 rounds")
expect(any(e["type"] == "world_model_attached_at_stop" for e in jsonl(D / "events.jsonl")),
       "D stopped inside a cycle without attaching its best kernel")
ksearch("D12", "resume", D, "--max-rounds", 12, "--quiet")
same_files(A, D, "reproduction resumed 5 -> 12", prompts_differ=True)

# 5. The transcript alone (measured again), with the other window.
E = work / "E"
out, err = run_a(E, "--llm", f"replay:{A / 'transcript.jsonl'}", window=3, rc=5)
de = manifest(E).get("replay_divergence", {})
expect((de.get("after_round"), de.get("asked"), de.get("recorded"), de.get("evaluations")) ==
       (4, "improve", "wm_refine", "measured_again"), f"E's divergence: {json.dumps(de)[:600]}")
for needle in ("measured again", "After round 4, at LLM call 6", "Decision 4 changed", "window of 2",
               "--on-divergence skip"):
    expect(needle in err, f"E's stderr lacks {needle!r}:\n{err}")
F = work / "F"
out, err = run_a(F, "--llm", f"replay:{A / 'transcript.jsonl'}", "--on-divergence", "skip", window=3)
skips = [e for e in jsonl(F / "events.jsonl") if e["type"] == "replay_skipped"]
expect(skips and skips[0]["asked"] == "improve" and skips[0]["skipped"][0]["kind"] == "wm_refine",
       f"F did not skip the recorded wm_refine for the improve asked: {skips[:1]}")
expect(manifest(F)["stop_reason"] in ("max_rounds", "recording_ended"), f"F: {manifest(F)['stop_reason']}")

if failures:
    sys.exit("\n".join(failures))
print(f"A: 12 rounds from the transcript, measured here; B = replay A: the same files (tree "
      f"v{sorted((A / 'world_model').glob('v*.json'))[-1].stem[1:]}, 12 attempts, best "
      f"{json.loads((A / 'best.json').read_text())['solution_id']}); C = replay A with window 3: stopped after "
      f"round 4 (improve asked, wm_refine recorded, decision 4), then live to 12 rounds; D = replay 5 + resume 12 = A; "
      f"E/F = transcript replay with window 3: stopped with the report / went on skipping {len(skips)} time(s)")
