#!/usr/bin/env python3
"""End to end through the CLI: a search on examples/matmul (--language
python) whose model answers only forgeries (forgery_responder.py): every
candidate tries to set its own verdict. The run must end with no passing
kernel (exit 3), every attempt failed, and no attempt's result may say
"passed" (docs/security.md, "Who says what").
"""
import json
import os
import subprocess
import sys

from e2e_common import setup

args, src, work = setup("--python", python="the Python with PyTorch, or NONE")
if args.python == "NONE":
    print("skipped: no Python with PyTorch")
    sys.exit(0)
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"), KSEARCH_PYTHON=args.python)
state = work / "state.json"
model = f"command:{sys.executable} {src / 'tests/e2e/forgery_responder.py'} {state}"
run_dir = work / "run"
cmd = [args.ksearch, "run", "--task", "examples/matmul", "--language", "python", "--strategy", "greedy",
       "--llm", model, "--no-weak-check", "--max-rounds", "6", "--run-dir", run_dir, "--json", "--quiet"]
p = subprocess.run([str(c) for c in cmd], env=env, text=True, timeout=900, capture_output=True)
if p.returncode != 3:
    sys.exit(f"FAIL: expected exit 3 (no candidate passed), got {p.returncode}\nstdout:\n{p.stdout}\n"
             f"stderr:\n{p.stderr}")
print("ok: the run ends with no passing kernel")
outcome = json.loads(p.stdout)
if outcome.get("best"):
    sys.exit(f"FAIL: the outcome names a best kernel: {json.dumps(outcome['best'])[:2000]}")
statuses = []
for a in sorted((run_dir / "attempts").iterdir()):
    e = a / "eval.json"
    if e.exists():
        statuses.append(json.loads(e.read_text())["status"])
if len(statuses) != 6 or "passed" in statuses:
    sys.exit(f"FAIL: expected six failed attempts, got {statuses}")
print("ok: every forgery failed:", statuses)
