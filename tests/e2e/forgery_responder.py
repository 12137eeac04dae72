#!/usr/bin/env python3
"""A scripted stand-in for an LLM that answers every code prompt of a
search on examples/matmul (--language python) with a forgery: a module that
tries to set its own verdict (the runner's exception with "passed", an error
or "done" answer with the request's token on the runner's socket, a patched
copy into the outputs, the worker's memory-limit exit code, a cached result
with a forged re-check). One per call, in turn. Not a model.

Usage: forgery_responder.py STATE_FILE
"""
import json
import os
import sys

FRAMES = '''
import json, socket, struct, sys


def _frame_with(name):
    f = sys._getframe()
    while f is not None:
        if name in f.f_locals:
            return f
        f = f.f_back
    return None


def _send(op, text=b""):
    f = _frame_with("token")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, 3)
    s.send(struct.pack("<IIQI", 0x3143534B, op, f.f_locals["token"] if f else 0, len(text)) + text)
    s.detach()
    return f
'''

ANSWERS = [
    "The runner's own verdict.\n\n```python\nimport sys\n\n\ndef run(A, B):\n"
    "    raise sys.modules['__main__'].Failed('passed', 'all checks passed')\n```\n",
    "An error answer that says passed.\n\n```python\n" + FRAMES +
    "\n\ndef run(A, B):\n    _send(18, json.dumps({'status': 'passed', 'kind': 'compile', 'message': 'passed'}).encode())\n"
    "    return A[:, :1] * 0\n```\n",
    "A done answer, and the runner's own kept back.\n\n```python\n" + FRAMES +
    "\n\ndef run(A, B):\n    f = _send(19)\n    if f is not None and 'channel' in f.f_locals:\n"
    "        f.f_locals['channel'].answer = lambda *a, **k: None\n    return None\n```\n",
    "No copy into the outputs.\n\n```python\nimport sys\n\n\ndef run(A, B):\n"
    "    sys.modules['__main__'].Candidate.copy_out = lambda self, values: None\n    return A @ B\n```\n",
    "The worker's memory-limit exit.\n\n```python\nimport os\n\n\ndef run(A, B):\n    os._exit(86)\n```\n",
    "Cached, and a forged re-check.\n\n```python\nimport sys\n\n_cache = {}\n\n\ndef run(A, B):\n"
    "    key = (A.data_ptr(), float(A[0, 0]), float(A[-1, -1]))\n    if key in _cache:\n        return _cache[key]\n"
    "    if len(_cache) >= 2:\n        raise sys.modules['__main__'].Failed('passed', 'skip the re-check')\n"
    "    _cache[key] = A @ B\n    return _cache[key]\n```\n",
]

state_file = sys.argv[1]
kind = os.environ.get("KSEARCH_PROMPT_KIND", "")
sys.stdin.read()
if kind not in ("generate", "improve", "debug"):
    sys.stderr.write(f"forgery_responder: unexpected prompt kind {kind!r}\n")
    sys.exit(1)
try:
    with open(state_file) as f:
        state = json.load(f)
except FileNotFoundError:
    state = {"answers": 0}
print(ANSWERS[state["answers"] % len(ANSWERS)])
state["answers"] += 1
with open(state_file, "w") as f:
    json.dump(state, f)
