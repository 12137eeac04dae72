#!/usr/bin/env python3
"""A scripted stand-in for an LLM in the greedy strategy's code prompts
(generate, improve, debug): host kernels from a fixed schedule, each
repeating the work fewer times (8x, 2x, 1x), for y = 3 x (tests/scale3_feedback)
or y = scale * x[index] (the dataset fixture's gather_scale_d64). Not a
model. The state file counts answers; the prompt arrives on stdin, its kind
in $KSEARCH_PROMPT_KIND.

Usage: feedback_responder.py STATE_FILE [scale3|gather]
"""
import json
import os
import sys

STATE = sys.argv[1]
sys.stdin.read()
kind = os.environ.get("KSEARCH_PROMPT_KIND", "")
if kind not in ("generate", "improve", "debug"):
    sys.stderr.write(f"feedback_responder: unexpected prompt kind {kind!r}\n")
    sys.exit(1)
try:
    with open(STATE) as f:
        n = json.load(f)["answers"]
except FileNotFoundError:
    n = 0
reps = [8, 2, 1][min(n, 2)]
if len(sys.argv) > 2 and sys.argv[2] == "gather":
    print(f"""Gather repeating the work {reps} time(s).

```cpp kernel.cpp
#include <cstdint>
void gather(const float* x, const std::int32_t* index, float scale, float* y, std::int64_t batch) {{
  for (int r = 0; r < {reps}; ++r) {{
    for (std::int64_t b = 0; b < batch; ++b)
      for (int k = 0; k < 64; ++k) y[b * 64 + k] = scale * x[static_cast<std::int64_t>(index[b]) * 64 + k];
    asm volatile("" ::: "memory");
  }}
}}
```

```json launch_plan
{{"calls": [{{"fn": "gather", "args": ["x", "index", "scale", "y", "batch_size"]}}]}}
```
""")
    with open(STATE, "w") as f:
        json.dump({"answers": n + 1}, f)
    sys.exit(0)
print(f"""Kernel repeating the work {reps} time(s).

```cpp kernel.cpp
#include <cstdint>
void scale3(const float* x, float* y, std::int64_t n) {{
  for (int r = 0; r < {reps}; ++r) {{
    for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];
    asm volatile("" ::: "memory");
  }}
}}
```

```json launch_plan
{{"calls": [{{"fn": "scale3", "args": ["x", "y", "N"]}}]}}
```
""")
with open(STATE, "w") as f:
    json.dump({"answers": n + 1}, f)
