#!/usr/bin/env python3
"""End to end: bad input to the ksearch CLI gets a clear error that names the
problem and a non-zero exit, never a crash, and never damage to a run folder.
Each case is one regression found by a bad-input sweep.
"""
import json
import os
import shutil
import subprocess
import sys

from e2e_common import setup

args, src, work = setup()
task = src / "tests/fixtures/tasks/scale3"
transcript = src / "tests/fixtures/wm_e2e/transcript.jsonl"
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))
failures = []


def ksearch(*argv):
    p = subprocess.run([args.ksearch, *map(str, argv)], capture_output=True, text=True, env=env, timeout=300)
    return p.returncode, p.stdout + p.stderr


def expect_error(name, argv, *needles, rc=None):
    code, out = ksearch(*argv)
    bad = code == 0 or code < 0 or (rc is not None and code != rc)
    bad = bad or "internal error" in out or "terminate called" in out
    missing = [n for n in needles if n not in out]
    if bad or missing:
        failures.append(f"{name}: exit {code}, missing {missing}:\n{out}")
    else:
        print(f"ok: {name}")
    return out


def run_cmd(run_dir, rounds):
    return ["run", "--task", task, "--language", "cpp", "--llm", f"replay:{transcript}", "--max-rounds", rounds,
            "--wm-stagnation-window", "2", "--timing-cap", "0.05", "--quiet", "--run-dir", run_dir]


# A resume that stops at a journal mismatch records the failure in the
# manifest and leaves best/ as it was.
run = work / "diverged"
code, out = ksearch(*run_cmd(run, 6))
assert code == 0, out
best_before = json.loads((run / "best.json").read_text())
lines = (run / "transcript.jsonl").read_text().splitlines(keepends=True)
entry = json.loads(lines[2])
entry["kind"] = "wm_init"
lines[2] = json.dumps(entry) + "\n"
(run / "transcript.jsonl").write_text("".join(lines))
# The resume says why it cannot go on; having recorded nothing new, it leaves the folder as it
# found it (its budget of 8 is not written), so the next resume meets the same folder.
recorded = {name: (run / name).read_bytes() for name in ("manifest.json", "events.jsonl", "state.json")}
expect_error("resume of a diverged journal", ["resume", run, "--max-rounds", "8", "--quiet"],
             "LLM call 2 was \"wm_init\" in the journal", rc=1)
for name, before in recorded.items():
    if (run / name).read_bytes() != before:
        failures.append(f"diverged resume: {name} changed")
if json.loads((run / "best.json").read_text()) != best_before:
    failures.append("diverged resume: best.json changed")
code, out = ksearch("show", run)
if code != 0 or "status finished (max_rounds)" not in out or "rounds 6 / 6" not in out:
    failures.append(f"show after a failed resume does not show the run as it was:\n{out}")

# Replay options that cannot work are named as such, and nothing is written.
expect_error("run --on-divergence without a replay transcript",
             ["run", "--task", task, "--language", "cpp", "--llm", "offline", "--on-divergence", "skip",
              "--run-dir", work / "r4"], "--on-divergence applies to --llm replay:TRANSCRIPT only", rc=2)
expect_error("run --llm replay: --on-divergence live", [*run_cmd(work / "r5", 2), "--on-divergence", "live"],
             "--on-divergence must be stop or skip", rc=2)
expect_error("replay --on-divergence live without a model", ["replay", run, "--on-divergence", "live",
                                                             "--run-dir", work / "r6"],
             "needs a model to continue with", rc=2)
expect_error("replay of a folder without a run", ["replay", work / "nothing", "--run-dir", work / "r7"],
             "holds no run", rc=1)
expect_error("replay into a folder that holds a run", ["replay", run, "--run-dir", run], "already holds a run", rc=2)
expect_error("replay with a setting out of range", ["replay", run, "--wm-stagnation-window", "0",
                                                    "--run-dir", work / "r8"],
             "wm_stagnation_window must be >= 1", rc=2)
for r in ("r4", "r5", "r6", "r7", "r8"):
    if (work / r).exists():
        failures.append(f"a refused command left {r}/ behind")

# A run folder of a later format is not resumed, and is left as it was.
later = work / "later"
shutil.copytree(run, later)
manifest = json.loads((later / "manifest.json").read_text())
manifest["format_version"] = 2
(later / "manifest.json").write_text(json.dumps(manifest))
expect_error("resume of a later run format", ["resume", later, "--quiet"],
             "manifest.json has run format_version 2", rc=2)
if json.loads((later / "manifest.json").read_text()) != manifest:
    failures.append("resume of a later run format changed its manifest")

# Numbers on the command line: a GPU ordinal that is not an integer, and the
# non-finite values strtod accepts, are usage errors (exit 2) naming the option.
solution = work / "solution.md"
solution.write_text("```cpp kernel.cpp\n#include <cstdint>\nvoid scale3(const float* x, float* y, std::int64_t n) "
                    "{ for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i]; }\n```\n```json launch_plan\n"
                    '{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}\n```\n')
offline = ["run", "--task", task, "--language", "cpp", "--llm", "offline", "--max-rounds", "1"]
expect_error("run --device abc", [*offline, "--device", "abc", "--run-dir", work / "r1"],
             '--device needs an integer, got "abc"', rc=2)
expect_error("eval --device 1abc", ["eval", "--task", task, "--solution", solution, "--device", "1abc"],
             '--device needs an integer, got "1abc"', rc=2)
expect_error("run --timing-cap inf", [*offline, "--timing-cap", "inf", "--run-dir", work / "r2"],
             '--timing-cap needs a number, got "inf"', rc=2)
expect_error("eval --max-time nan", ["eval", "--task", task, "--solution", solution, "--max-time", "nan"],
             '--max-time needs a number, got "nan"', rc=2)

# A closed set's flag with a name outside it: a usage error naming the value
# and the names it may take, before anything runs or is written.
expect_error("run --backend gpu", [*offline, "--backend", "gpu", "--run-dir", work / "r9"],
             'unknown --backend "gpu" (known: auto, cuda, host)', rc=2)
expect_error("run --sandbox yes", [*offline, "--sandbox", "yes", "--run-dir", work / "r10"],
             'unknown --sandbox "yes" (known: auto, on, off)', rc=2)
expect_error("eval --timing gpumode", ["eval", "--task", task, "--solution", solution, "--timing", "gpumode"],
             'unknown --timing "gpumode" (known: default, upstream)', rc=2)
expect_error("eval --backend quantum", ["eval", "--task", task, "--solution", solution, "--backend", "quantum"],
             'unknown --backend "quantum" (known: auto, cuda, host)', rc=2)
for r in ("r9", "r10"):
    if (work / r).exists():
        failures.append(f"a refused command left {r}/ behind")

# A folder where a file belongs is named as such.
expect_error("eval --solution FOLDER", ["eval", "--task", task, "--solution", work],
             f"{work} is a folder, not a file")
expect_error("run --llm replay:FOLDER", ["run", "--task", task, "--language", "cpp", "--llm", f"replay:{work}",
                                         "--max-rounds", "1", "--run-dir", work / "r3"],
             f"{work} is a folder, not a file")

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("all bad-input cases pass")
