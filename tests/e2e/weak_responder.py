#!/usr/bin/env python3
"""A scripted stand-in for an LLM in the greedy strategy's code prompts for
tests/fixtures/tasks/relu_bias_weak: every answer is the kernel the weak-check
detection warns about, one that writes zeros and computes nothing. Not a model.

Usage: weak_responder.py STATE_FILE STDERR_FILE
At its first call it records whether ksearch's stderr (redirected to
STDERR_FILE by the test) already holds the weak-check warning, i.e. whether
the warning came before the first LLM request.
"""
import json
import os
import sys

state_file, stderr_file = sys.argv[1], sys.argv[2]
sys.stdin.read()
kind = os.environ.get("KSEARCH_PROMPT_KIND", "")
if kind not in ("generate", "improve", "debug"):
    sys.stderr.write(f"weak_responder: unexpected prompt kind {kind!r}\n")
    sys.exit(1)
try:
    with open(state_file) as f:
        state = json.load(f)
except FileNotFoundError:
    with open(stderr_file) as f:
        state = {"answers": 0, "warned_before_first_request": "is weak" in f.read()}
state["answers"] += 1
with open(state_file, "w") as f:
    json.dump(state, f)
print("""A kernel that writes zeros.

```cpp kernel.cpp
#include <cstdint>
#include <cstring>
void linear_relu(const float* x, const float* w, const float* b, float* y, std::int64_t B, std::int64_t K,
                 std::int64_t N) {
  std::memset(y, 0, sizeof(float) * B * N);
}
```

```json launch_plan
{"calls": [{"fn": "linear_relu", "args": ["x", "w", "b", "y", "B", "K", "N"]}]}
```
""")
