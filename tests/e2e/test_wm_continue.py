#!/usr/bin/env python3
"""End to end: K-Search's --continue-from-solution. A first world-model run
(the recorded transcript of test_wm_resume.py, 6 rounds) leaves a best
kernel; later runs continue from that run's folder.

- Same task, same device: the evaluation the folder recorded is adopted
  (an attempt that is not a round, marked with where it was recorded), the
  world model's root holds the kernel, the first generate prompt shows its
  code, `show` puts it at the root, and the best so far starts there. Killed
  mid-run and resumed, it ends as the uninterrupted run; replayed, it is
  reproduced exactly.
- Another device (a copy of the folder whose manifest names another CPU):
  round 1 measures the kernel again and the warm_start event says why; also
  killed and resumed. Another task (a copy with another fingerprint): the same.
- A forged evaluation in a folder that claims this task and device is what
  the trust model says it is: adopted, and said so on stderr; --remeasure
  measures it instead.
- A kernel that does not pass is evaluated, reported, and not attached; a
  budget of one round and a strategy that does not read the flag are refused.

Every decision of these runs compares kernels that differ by fixed waits
(tests/fixtures/wm_e2e/responder.py), so none depends on the machine's load.
"""
import json
import os
import subprocess
import sys

import e2e_common
from e2e_common import events, first_prompt, jsonl, last_tree, lines, run_logged, same_end, setup

args, src, work = setup()
transcript = src / "tests/fixtures/wm_e2e/transcript.jsonl"
task = src / "tests/fixtures/tasks/scale3"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
expect = e2e_common.Expectations()


def run_cmd(run_dir, rounds, *extra):
    return [args.ksearch, "run", "--task", str(task), "--language", "cpp", "--llm", f"replay:{transcript}",
            "--on-divergence", "skip", "--max-rounds", str(rounds), "--wm-stagnation-window", "2",
            "--timing-cap", "0.2", "--quiet", "--run-dir", str(run_dir), *extra]


def resume_cmd(run_dir):
    return [args.ksearch, "resume", str(run_dir), "--quiet"]


def finish(cmd, log_name, want=0):
    return run_logged(cmd, work / log_name, env, want, timeout=300)


def attempts(run_dir):
    return jsonl(run_dir / "attempts.jsonl")


def attempt_eval(run_dir, seq):
    folder = next((run_dir / "attempts").glob(f"{seq:04d}-*"))
    return json.loads((folder / "eval.json").read_text())


def root_solution(run_dir):
    tree = last_tree(run_dir)
    root = next(n for n in tree["nodes"] if n["node_id"] == tree["root_id"])
    return (root.get("solution_ref") or {}).get("solution_id"), tree


def sources(folder):
    """A solution folder's sources as (path, content): solution.json names its files."""
    sol = json.loads((folder / "solution.json").read_text())
    return sorted((s["path"], s["content"] if "content" in s else (folder / s["file"]).read_text())
                  for s in sol["sources"])


def check_continued(run_dir, adopted, seed, seed_folder):
    """What a run continued from `seed` shows, the recorded evaluation adopted or not."""
    name = run_dir.name
    a = attempts(run_dir)
    first = a[0]
    expect(first["solution_id"] == seed["id"], f"{name}: the first attempt should be the given kernel: {first}")
    recorded_from = attempt_eval(run_dir, 0).get("metrics", {}).get("recorded_from")
    if adopted:
        expect(first["round"] == 0, f"{name}: the adopted evaluation is not a round: {first}")
        expect(recorded_from and str(seed_folder) in recorded_from,
               f"{name}: the adopted evaluation should say where it was recorded: {recorded_from}")
        expect(attempt_eval(run_dir, 0)["latency_ms"] ==
               json.loads((seed_folder / "best.json").read_text())["eval"]["latency_ms"],
               f"{name}: the adopted evaluation should be the recorded one, not a new measurement")
    else:
        expect(first["round"] == 1 and recorded_from is None, f"{name}: round 1 should measure the kernel: {first}")
    root_id, tree = root_solution(run_dir)
    expect(root_id == seed["id"], f"{name}: the world model's root should hold the given kernel, holds {root_id}")
    under_root = [n for n in tree["nodes"] if n.get("parent_id") == tree["root_id"] and n.get("action")
                  and not (n.get("solution_ref") or {}).get("solution_id")]
    expect(under_root and all((n.get("solution_ref") or {}).get("parent_solution_id") == root_id
                              for n in under_root), f"{name}: the open actions under the root should build on it")
    warm = events(run_dir, "warm_start")
    expect(len(warm) == 1 and warm[0].get("attached_to_root") and
           warm[0].get("evaluation") == ("recorded" if adopted else "measured"),
           f"{name}: one warm_start event, attached, {'recorded' if adopted else 'measured'}: {warm}")
    improved = events(run_dir, "best_improved")
    expect(improved and improved[0]["solution_id"] == seed["id"] and improved[0]["round"] == (0 if adopted else 1),
           f"{name}: the best so far should start at the given kernel: {improved[:1]}")
    prompt = first_prompt(run_dir, "generate")
    expect(all(content in prompt for _, content in sources(seed_folder / "best")),
           f"{name}: the first generate prompt should hold the given kernel's code")
    show = subprocess.run([args.ksearch, "show", str(run_dir)], capture_output=True, text=True, env=env).stdout
    root_line = next((line for line in show.splitlines() if line.lstrip("-* ").startswith("root ")), "")
    expect(seed["id"][:12] in root_line, f"{name}: `show` should put the kernel at the root: {root_line!r}")


source = work / "source"
finish(run_cmd(source, 6), "source.log")
seed = json.loads((source / "best/solution.json").read_text())

# 1. The same task on the same device: the recorded evaluation is adopted. Uninterrupted, then
#    killed after two rounds and resumed; then reproduced from its folder.
adopted = work / "adopted"
out = finish(run_cmd(adopted, 5, "--continue-from-solution", str(source)), "adopted.log")
expect("is used, not measured again" in out and "--remeasure" in out,
       f"the CLI should say that a recorded evaluation is used:\n{out}")
# The given kernel is the run's first passing one and stays its best: no improvement over round 1's.
expect("Best: " + seed["id"] + " (round 0)" in out and "Improvement" not in out,
       f"the summary should name the given kernel as the best, improved on by nothing:\n{out}")
check_continued(adopted, True, seed, source)
adopted_killed = work / "adopted_killed"
e2e_common.run_and_kill(run_cmd(adopted_killed, 5, "--continue-from-solution", str(source)), adopted_killed,
                        work / "adopted_kill.log", lambda d: lines(d / "attempts.jsonl") >= 3, env)
finish(resume_cmd(adopted_killed), "adopted_resume.log")
check_continued(adopted_killed, True, seed, source)
same_end(adopted, adopted_killed, expect)
manifest = json.loads((adopted / "manifest.json").read_text())
rec = manifest["config"].get("continue_from_solution_eval") or {}
expect(manifest["config"].get("continue_from_solution", {}).get("id") == seed["id"] and rec.get("adopted") is True,
       "the manifest's configuration should hold the kernel and the decision to adopt its evaluation")
out = finish([args.ksearch, "replay", str(adopted), "--run-dir", str(work / "adopted_replay")], "adopted_replay.log")
expect(f"Reproduced {adopted} exactly" in out, f"the replay of the continued run should reproduce it:\n{out}")

# 2. Another device: a copy of the source whose manifest names another CPU (also how a folder
#    someone else edited looks). Round 1 measures the kernel; killed and resumed.
other_device = e2e_common.edited_copy(source, work / "source_other_device",
                                      lambda m: m["device"].update(name="Another CPU 9000"))
measured = work / "measured"
finish(run_cmd(measured, 6, "--continue-from-solution", str(other_device)), "measured.log")
check_continued(measured, False, seed, other_device)
why = events(measured, "warm_start")[0].get("evaluation_why", "")
expect("device differs: recorded on Another CPU 9000" in why, f"the warm_start event should say why: {why}")
measured_killed = work / "measured_killed"
e2e_common.run_and_kill(run_cmd(measured_killed, 6, "--continue-from-solution", str(other_device)),
                        measured_killed, work / "measured_kill.log", lambda d: lines(d / "attempts.jsonl") >= 2, env)
finish(resume_cmd(measured_killed), "measured_resume.log")
same_end(measured, measured_killed, expect)

# 3. Another task: a copy whose manifest names another task fingerprint.
other_task = e2e_common.edited_copy(source, work / "source_other_task",
                                    lambda m: m["task"].update(fingerprint="0000000000000000"))
finish(run_cmd(work / "other_task", 2, "--continue-from-solution", str(other_task)), "other_task.log")
a = attempts(work / "other_task")
why = events(work / "other_task", "warm_start")[0].get("evaluation_why", "")
expect(a[0]["round"] == 1 and "task differs" in why, f"another task's evaluation is measured again: {a[0]}, {why}")

# 4. A forged evaluation in a folder that claims this task and device: it cannot be told from a
#    real one, so it is adopted, and the run says so (docs/security.md); --remeasure measures it.
forged = e2e_common.edited_copy(source, work / "source_forged",
                                lambda b: b["eval"].update(latency_ms=1e-6, score=1e6), "best.json")
out = finish(run_cmd(work / "forged", 2, "--continue-from-solution", str(forged)), "forged.log")
expect(attempts(work / "forged")[0]["round"] == 0 and f"evaluation recorded in {forged}/best.json is used" in out,
       f"a forged folder's evaluation is adopted, and said so:\n{out}")
finish(run_cmd(work / "remeasured", 2, "--continue-from-solution", str(forged), "--remeasure"), "remeasured.log")
a = attempts(work / "remeasured")
best = json.loads((work / "remeasured" / "best.json").read_text())
expect(a[0]["round"] == 1 and best["eval"]["latency_ms"] > 1e-3,
       f"--remeasure measures the kernel again, and the forged number is nowhere: {a[0]}, {best['eval']}")

# 5. A kernel that does not pass (the source's incorrect attempt): its recorded status is no
#    reason to adopt it; it is evaluated, reported, and not attached.
failing = next(d for d in sorted((source / "attempts").iterdir())
               if json.loads((d / "eval.json").read_text())["status"] == "incorrect")
cold = work / "failing_seed"
finish(run_cmd(cold, 2, "--continue-from-solution", str(failing)), "failing_seed.log")
a = attempts(cold)
warm = events(cold, "warm_start")
expect(a[0]["status"] == "incorrect" and a[0]["round"] == 1, f"round 1 should be the given (incorrect) kernel: {a[0]}")
expect(len(warm) == 1 and warm[0].get("attached_to_root") is False and
       "recorded as incorrect" in warm[0].get("evaluation_why", ""),
       f"a warm_start event with attached_to_root false and why it was measured: {warm}")
expect(not root_solution(cold)[0], "a kernel that did not pass must not be attached to the root")

# 6. One round is refused (round 1 may be the kernel's); greedy does not read the flag: refused
#    before anything runs, not ignored.
finish(run_cmd(work / "one_round", 1, "--continue-from-solution", str(source)), "one_round.log", want=2)
finish(run_cmd(work / "greedy", 2, "--continue-from-solution", str(source)) + ["--strategy", "greedy"],
       "greedy.log", want=2)
expect(not (work / "greedy" / "attempts.jsonl").exists(), "the refused greedy run should not have evaluated anything")

expect.finish()
print("continue-from-solution: the recorded evaluation adopted for the same task and device (killed and resumed, "
      "replayed), measured again for another device or task (killed and resumed), forged and --remeasure, "
      "a failing kernel not attached, refusals")
