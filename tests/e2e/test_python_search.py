#!/usr/bin/env python3
"""End to end through the CLI: a search whose candidates are Python modules
(--language python, PyTorch on the CPU), answered by a scripted model
(python_responder.py): the prompt asks for a `python` block with run(A, B),
the candidates are evaluated by the real worker, the best is a python
solution, and `ksearch eval` evaluates it again from the run folder. Without
a Python that has PyTorch, the run must stop before the first LLM request
and say how to fix it.
"""
import json
import os
import subprocess
import sys

from e2e_common import setup

args, src, work = setup("--python", python="the Python with PyTorch, or NONE")
env = dict(os.environ, KSEARCH_CACHE_DIR=str(work / "cache"))


def run(cmd, expect=0):
    p = subprocess.run([str(c) for c in cmd], env=env, text=True, timeout=900, capture_output=True)
    if p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(map(str, cmd))} exited {p.returncode}, expected {expect}\n"
                 f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p.stdout, p.stderr


def check(cond, what, detail=""):
    if not cond:
        sys.exit(f"FAIL: {what}\n{detail}")
    print("ok:", what)


state = work / "state.json"
model = f"command:{sys.executable} {src / 'tests/e2e/python_responder.py'} {state}"
base = [args.ksearch, "run", "--task", "examples/matmul", "--language", "python", "--strategy", "greedy",
        "--llm", model, "--no-weak-check", "--json", "--quiet"]

if args.python == "NONE":
    env["KSEARCH_PYTHON"] = str(work / "no-python-here")
    out, err = run(base + ["--max-rounds", "2", "--run-dir", work / "run-none"], expect=1)
    check("KSEARCH_PYTHON" in err and "Nothing was sent to the LLM" in err and not state.exists(),
          "without a Python the run stops before the first LLM request, naming the fix", err)
    sys.exit(0)

env["KSEARCH_PYTHON"] = args.python
out, err = run(base + ["--max-rounds", "3", "--run-dir", work / "run"])
outcome = json.loads(out)
prompt = (work / "first_prompt.txt").read_text()
check("```python" not in prompt or "fenced block tagged `python`" in prompt, "the prompt asks for a python block", prompt)
check("run(A, B) returning (C)" in prompt and "No hexadecimal float literals" in prompt,
      "the prompt names the entry point and the original's Python rules", prompt)
check("candidates run with Python 3." in prompt and "PyTorch " in prompt,
      "the prompt's device line names the Python and PyTorch versions", prompt)
check(outcome["best"]["solution"]["language"] == "python", "the best solution is a python one", out)
check(outcome["best"]["eval"]["status"] == "passed", "it passed", out)
manifest = json.loads((work / "run" / "manifest.json").read_text())
check(manifest["config"]["language"] == "python", "the manifest records the language", json.dumps(manifest)[:2000])
attempts = sorted((work / "run" / "attempts").iterdir())
results = [json.loads((a / "eval.json").read_text())["status"] for a in attempts if (a / "eval.json").exists()]
check(results.count("passed") == 2 and results.count("incorrect") == 1,
      "two right candidates passed and the wrong one failed", str(results))
out, err = run([args.ksearch, "eval", "--task", "examples/matmul", "--solution", work / "run", "--json"])
check(json.loads(out)["status"] == "passed", "ksearch eval evaluates the run's best again", out)
