#!/usr/bin/env python3
"""A scripted stand-in for an LLM in the greedy strategy's code prompts for
examples/matmul in --language python: PyTorch answers, one per call, in the
candidate format of Python candidates. Not a model.

Usage: python_responder.py STATE_FILE
It saves the first prompt beside STATE_FILE (first_prompt.txt), so the test
can read what a Python candidate is asked for.
"""
import json
import os
import sys

state_file = sys.argv[1]
prompt = sys.stdin.read()
kind = os.environ.get("KSEARCH_PROMPT_KIND", "")
if kind not in ("generate", "improve", "debug"):
    sys.stderr.write(f"python_responder: unexpected prompt kind {kind!r}\n")
    sys.exit(1)
try:
    with open(state_file) as f:
        state = json.load(f)
except FileNotFoundError:
    state = {"answers": 0}
    with open(os.path.join(os.path.dirname(state_file), "first_prompt.txt"), "w") as f:
        f.write(prompt)
answers = [
    # Returns the output.
    "A plain matmul.\n\n```python\nimport torch\n\n\ndef run(A, B):\n    return A @ B\n```\n",
    # Writes into the output it is given; a hex float literal becomes its value.
    "Into the given output.\n\n```python\nimport torch\n\n\ndef run(A, B, C):\n"
    "    torch.matmul(A, B, out=C)\n    C.mul_(0x1p0)\n```\n",
    # Wrong: drops the last column of the reduction.
    "Skips a term.\n\n```python\nimport torch\n\n\ndef run(A, B):\n    return A[:, :-1] @ B[:-1, :]\n```\n",
]
print(answers[state["answers"] % len(answers)])
state["answers"] += 1
with open(state_file, "w") as f:
    json.dump(state, f)
