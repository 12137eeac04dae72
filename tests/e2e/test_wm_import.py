#!/usr/bin/env python3
"""End to end: K-Search's --continue-from-world-model.

- From K-Search's own files (tests/fixtures/ksearch_wm: a world_model.json
  written by hand in its format, with the solution_db.jsonl beside it): no
  wm_init is asked; the tree is the normalised one, every repair in the
  world_model_imported event; the kernel found in the database is known by
  its code under this library's id (its K-Search evaluation is not adopted:
  nothing says which device measured it), and the first generate prompt
  builds on it. Killed mid-run and resumed after the source files were
  deleted, the run ends as the uninterrupted one; replayed, it is reproduced.
- From a libksearch run folder of the same task on the same device: its
  latest tree, its attached kernel with the evaluation it recorded (adopted:
  the best so far starts there); killed and resumed too. A snapshot file of
  a run imports that version. With --continue-from-solution too, the kernel
  is attached to the imported tree's root. The same run as if made on
  another device brings its kernel as code only.
- `auto`: the latest run of the same task beside the new run's folder.
- Bad sources and another strategy are refused before anything runs.

The decisions of these runs compare kernels that differ by fixed waits (0,
10 and 100 ms, tests/fixtures/wm_e2e/responder.py), so none depends on load.
"""
import json
import os
import shutil
import subprocess
import sys

import e2e_common
from e2e_common import events, first_prompt, jsonl, lines, run_logged, same_end, setup, snapshots, tree_shape

args, src, work = setup()
transcript = src / "tests/fixtures/wm_e2e/transcript.jsonl"
task = src / "tests/fixtures/tasks/scale3"
fixture = src / "tests/fixtures/ksearch_wm"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
expect = e2e_common.Expectations()


def run_cmd(run_dir, rounds, *extra, answers=transcript, task_dir=task):
    return [args.ksearch, "run", "--task", str(task_dir), "--language", "cpp", "--llm", f"replay:{answers}",
            "--on-divergence", "skip", "--max-rounds", str(rounds), "--wm-stagnation-window", "2",
            "--timing-cap", "0.2", "--quiet", "--run-dir", str(run_dir), *extra]


def finish(cmd, log_name, want=0):
    return run_logged(cmd, work / log_name, env, want, timeout=300)


def refused(cmd, log_name, words):
    with open(work / log_name, "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=300).returncode
    text = (work / log_name).read_text()
    expect(rc != 0 and words in text, f"{log_name}: should be refused saying \"{words}\" (exit {rc}):\n{text}")


def kinds(run_dir):
    return [e["kind"] for e in jsonl(run_dir / "transcript.jsonl")]


def node(tree, node_id):
    return next((n for n in tree["nodes"] if n["node_id"] == node_id), None)


def first_tree(run_dir):
    return json.loads(snapshots(run_dir)[0].read_text())["decision_tree"]


def answer_kernel(marker, wait_ms=0, broken=False, wrong=False):
    """A host kernel in the answer format, as tests/fixtures/wm_e2e/responder.py writes them."""
    wait = f"  std::this_thread::sleep_for(std::chrono::milliseconds({wait_ms}));\n" if wait_ms else ""
    body = ("#include <chrono>\n#include <cstdint>\n#include <thread>\n"
            f"// {marker}\n"
            f"void scale3(const float* x, float* y, std::int64_t n{'' if broken else ')'} {{\n"
            f"  for (std::int64_t i = 0; i < n; ++i) y[i] = {'2.0f' if wrong else '3.0f'} * x[i];\n{wait}}}\n")
    return (f"```cpp kernel.cpp\n{body}```\n\n```json launch_plan\n"
            '{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n')


# ---------------------------------------------------------------------------
# 1. K-Search's files. The run reads a copy, which is deleted before the resume.
ks_full = work / "ksearch_import"
copy_full = work / "artifacts_full" / "world_model"
shutil.copytree(fixture, copy_full)
out = finish(run_cmd(ks_full, 7, "--continue-from-world-model", str(copy_full / "world_model.json")),
             "ksearch_import.log")
expect("world model from" in out and "(k-search)" in out, f"the CLI should say what it imported:\n{out}")
expect("wm_init" not in kinds(ks_full), f"no wm_init may be asked: {kinds(ks_full)}")
imported = events(ks_full, "world_model_imported")
expect(len(imported) == 1, f"one world_model_imported event: {imported}")
ev = imported[0] if imported else {}
expect(ev.get("format") == "k-search" and ev.get("nodes") == 8, f"format and nodes: {ev}")
sols = ev.get("solutions", [])
expect(len(sols) == 1 and sols[0].get("original_id") == "ksh-7f3a01" and sols[0]["solution_id"] != "ksh-7f3a01"
       and sols[0].get("evaluation") == "none (code only)",
       f"the kernel found in the database, under this library's id, its K-Search evaluation not adopted: {sols}")
repairs = "\n".join(ev.get("repairs", []))
for words in ['"k_blocked": overall_rating_0_to_10 12 clamped to 10', "difficulty_0_to_3 1 read as difficulty_1_to_5 2",
              '"k_threads" has no parent: re-parented to the root', 'parent_id "k_gone" does not exist',
              "unknown field(s) dropped: priority", "solution_db.jsonl line 3", "ksh-0bad99 is not in solution_db",
              "expected_vs_baseline_factor -2"]:
    expect(words in repairs, f"the repairs should say \"{words}\":\n{repairs}")
tree = first_tree(ks_full)
new_id = sols[0]["solution_id"] if sols else ""
expect((node(tree, "k_loop") or {}).get("solution_ref", {}).get("solution_id") == new_id,
       "k_loop's K-Search id should be remapped to this library's in the tree")
expect((node(tree, "a1") or {}).get("solution_ref", {}).get("parent_solution_id") == new_id,
       "the open action under k_loop should build on the remapped kernel")
expect((node(tree, "k_simd") or {}).get("solution_ref", {}).get("solution_id") == "ksh-0bad99",
       "a kernel not found keeps its K-Search id (a closed node without code)")
expect((node(tree, "k_threads") or {}).get("parent_id") == "root", "the orphan should be under the root")
prompt = first_prompt(ks_full, "generate")
expect("K-Search r3: single pass, 10 ms floor" in prompt and "Drop the wait" in prompt,
       "the first generate prompt should show the imported kernel's code as the base of action a1")
a = jsonl(ks_full / "attempts.jsonl")
expect(a and a[0]["round"] == 1, f"K-Search's evaluations are no attempts of this run: {a[:1]}")
expect(json.loads((ks_full / "best.json").read_text())["round"] >= 1, "the best is a kernel measured here")
cfg = json.loads((ks_full / "manifest.json").read_text())["config"].get("continue_from_world_model") or {}
expect(cfg.get("format") == "k-search" and cfg.get("solutions"), "the manifest should hold the imported tree")

ks_killed = work / "ksearch_import_killed"
copy_killed = work / "artifacts_killed" / "world_model"
shutil.copytree(fixture, copy_killed)
e2e_common.run_and_kill(run_cmd(ks_killed, 7, "--continue-from-world-model", str(copy_killed / "world_model.json")),
                        ks_killed, work / "ksearch_kill.log", lambda d: lines(d / "attempts.jsonl") >= 3, env)
shutil.rmtree(work / "artifacts_killed")  # the resume needs only the run folder
finish([args.ksearch, "resume", str(ks_killed), "--quiet"], "ksearch_resume.log")
same_end(ks_full, ks_killed, expect)
shutil.rmtree(work / "artifacts_full")
out = finish([args.ksearch, "replay", str(ks_full), "--run-dir", str(work / "ksearch_replay")],
             "ksearch_replay.log")
expect(f"Reproduced {ks_full} exactly" in out, f"the replay should reproduce the run without its source:\n{out}")

# ---------------------------------------------------------------------------
# 2. A libksearch run of the same task on the same device: 4 rounds end a1's cycle on the budget,
#    which attaches its best, the 10 ms kernel, to a1 (the run stopped inside the cycle: no refine).
source = work / "source"
finish(run_cmd(source, 4), "source.log")
src_tree = json.loads(snapshots(source)[-1].read_text())["decision_tree"]
a1_kernel = node(src_tree, "a1")["solution_ref"]["solution_id"]
# The answers of the importing run, by kind: a0 beats the imported 10 ms kernel, the rest do not.
script = work / "import_answers.jsonl"
refine = {"ops": [{"op": "update_node", "node_id": "a1_next", "patch": {"notes": "CURRENT: no wait\n"
                                                                                  "FOLLOW_THROUGH: yes"}},
                  {"op": "insert_node", "parent_id": "a1_next",
                   "node": {"node_id": "a1_next_next", "parent_id": "a1_next", "node_type": "decision",
                            "notes": "SELF_CHECK: refines its parent",
                            "action": {"title": "Unroll the plain pass", "difficulty_1_to_5": 2,
                                       "score_0_to_1": 0.85}}}]}
# The imported frontier holds two actions: the run first asks for proposals, and gets a1_next under a1.
propose = {"ops": [{"op": "insert_node", "parent_id": "a1",
                    "node": {"node_id": "a1_next", "node_type": "decision", "notes": "SELF_CHECK: refines a1",
                             "action": {"title": "Drop the wait", "difficulty_1_to_5": 2, "score_0_to_1": 0.85}}}]}
answers = [("wm_propose", json.dumps(propose)),
           ("generate", answer_kernel("import run: one plain pass")),
           ("improve", answer_kernel("import run: a 100 ms floor", wait_ms=100)),
           ("improve", answer_kernel("import run: broken", broken=True)),
           ("wm_refine", json.dumps(refine)),
           # The frontier's review after the cycle (--wm-propose-every 1): a1_next_next stays the best bet.
           ("wm_propose", json.dumps({"ops": [{"op": "update_node", "node_id": "a1_next_next",
                                               "patch": {"notes": "UPDATE_BELIEF: still the best bet"}}]})),
           ("generate", answer_kernel("import run: a 100 ms floor", wait_ms=100)),
           ("improve", answer_kernel("import run: wrong", wrong=True))]
script.write_text("".join(json.dumps({"seq": i, "kind": k, "text": t}) + "\n" for i, (k, t) in enumerate(answers)))

run_full = work / "run_import"
finish(run_cmd(run_full, 5, "--continue-from-world-model", str(source), answers=script), "run_import.log")
expect("wm_init" not in kinds(run_full), "no wm_init may be asked")
ev = (events(run_full, "world_model_imported") or [{}])[0]
sols = ev.get("solutions", [])
expect(ev.get("format") == "ksearch-run" and ev.get("source") == str(source) and not ev.get("repairs"),
       f"the run folder's tree, without repairs: {ev}")
expect(len(sols) == 1 and sols[0]["solution_id"] == a1_kernel and sols[0].get("evaluation") == "recorded",
       f"a1's kernel, with the evaluation its run recorded here: {sols}")
expect(tree_shape(first_tree(run_full))[0] == tree_shape(src_tree)[0], "the imported tree is the source's last one")
a = jsonl(run_full / "attempts.jsonl")
expect(a and (a[0]["round"], a[0]["solution_id"]) == (0, a1_kernel), f"the adopted kernel is attempt 0: {a[:1]}")
improved = events(run_full, "best_improved")
expect(improved and (improved[0]["round"], improved[0]["solution_id"]) == (0, a1_kernel),
       f"the best so far starts at the imported kernel: {improved[:1]}")
expect(len(improved) >= 2 and improved[1]["round"] == 1, "round 1 (no wait) beats it")
expect("wm_refine" in kinds(run_full) and len(a) == 6, f"two cycles, five rounds: {kinds(run_full)}, {len(a)}")

run_killed = work / "run_import_killed"
e2e_common.run_and_kill(run_cmd(run_killed, 5, "--continue-from-world-model", str(source), answers=script),
                        run_killed, work / "run_import_kill.log", lambda d: lines(d / "attempts.jsonl") >= 3, env)
finish([args.ksearch, "resume", str(run_killed), "--quiet"], "run_import_resume.log")
same_end(run_full, run_killed, expect)

# The same run, as if made on another device (a copy whose manifest names another CPU): its kernel
# is known by its code only, never the best so far nor an attempt of this run.
other_device = e2e_common.edited_copy(source, work / "source_other_device",
                                      lambda m: m["device"].update(name="Another CPU 9000"))
finish(run_cmd(work / "other_device_import", 2, "--continue-from-world-model", str(other_device), answers=script),
       "other_device_import.log")
sols = (events(work / "other_device_import", "world_model_imported") or [{}])[0].get("solutions", [])
expect(len(sols) == 1 and sols[0].get("evaluation") == "none (code only)" and
       "device differs: recorded on Another CPU 9000" in sols[0].get("why", ""),
       f"a kernel recorded on another device is code only, and the event says why: {sols}")
a = jsonl(work / "other_device_import" / "attempts.jsonl")
improved = events(work / "other_device_import", "best_improved")
expect(a and a[0]["round"] == 1 and improved and improved[0]["round"] == 1,
       f"its evaluation is no attempt and not the best so far: {a[:1]}, {improved[:1]}")
a1_code = (next((source / "attempts").glob(f"*-{a1_kernel}")) / "kernel.cpp").read_text()
expect(a1_code in first_prompt(work / "other_device_import", "generate"),
       "its code is still the base of the first generate prompt")

# A snapshot of that run: that version, with the run's kernels.
first_snapshot = snapshots(source)[0]
finish(run_cmd(work / "snapshot_import", 1, "--continue-from-world-model", str(first_snapshot)),
       "snapshot_import.log")
ev = (events(work / "snapshot_import", "world_model_imported") or [{}])[0]
expect(ev.get("source") == str(first_snapshot) and ev.get("nodes") == 4 and ev.get("solutions") == [],
       f"the first snapshot (wm_init's tree: a root and three actions): {ev}")

# Both flags, as K-Search allows: the tree is imported, then the kernel is attached to its root
# (which holds none here), its recorded evaluation adopted.
both = work / "both"
finish(run_cmd(both, 2, "--continue-from-world-model", str(source), "--continue-from-solution", str(source)),
       "both.log")
warm = events(both, "warm_start")
seed_id = json.loads((source / "best.json").read_text())["solution_id"]
root = next(n for n in first_tree(both)["nodes"] if n["node_id"] == "root")
expect(events(both, "world_model_imported") and "wm_init" not in kinds(both), "both: the tree is imported")
expect(len(warm) == 1 and warm[0]["attached_to_root"] and warm[0]["evaluation"] == "recorded",
       f"both: the kernel is attached to the imported tree's root, its evaluation adopted: {warm}")
last_root = next(n for n in e2e_common.last_tree(both)["nodes"] if n["node_id"] == "root")
expect(last_root["solution_ref"]["solution_id"] == seed_id and not root["solution_ref"]["solution_id"],
       "both: the imported root had no kernel; it holds the given one after the warm start")

# ---------------------------------------------------------------------------
# 3. auto: the latest run of the same task in the folder the new run is made in.
runs = work / "runs"
finish(run_cmd(runs / "older", 2), "auto_older.log")
finish(run_cmd(runs / "newer", 2), "auto_newer.log")
finish(run_cmd(runs / "other_task", 2, task_dir=src / "tests/fixtures/tasks/scale3_start"), "auto_other.log")
finish(run_cmd(runs / "continued", 1, "--continue-from-world-model", "auto"), "auto.log")
ev = (events(runs / "continued", "world_model_imported") or [{}])[0]
expect(ev.get("source") == str(runs / "newer"), f"auto should take {runs / 'newer'}: {ev.get('source')}")
refused(run_cmd(work / "lonely" / "run", 1, "--continue-from-world-model", "auto"), "auto_none.log",
        "no run of task \"tests/scale3\" with a world model")

# ---------------------------------------------------------------------------
# 4. Refused before anything runs, with the problem named.
(work / "not_json.json").write_text("{ this is not json")
refused(run_cmd(work / "bad1", 2, "--continue-from-world-model", str(work / "not_json.json")), "bad_json.log",
        "not_json.json is not JSON")
refused(run_cmd(work / "bad2", 2, "--continue-from-world-model", str(work)), "bad_folder.log",
        "is a folder without a run")
refused(run_cmd(work / "bad3", 2, "--continue-from-world-model", str(source), "--strategy", "greedy"),
        "bad_strategy.log", "continue_from_world_model is read by the world_model strategy")
for d in ("bad1", "bad2", "bad3"):
    expect(not (work / d).exists(), f"a refused run should leave no folder ({d})")

expect.finish()
print("continue-from-world-model: K-Search's files (normalised, kernel remapped, killed and resumed without them, "
      "replayed), a libksearch run (its kernel's evaluation adopted, killed and resumed), a snapshot, auto, "
      "refusals")
