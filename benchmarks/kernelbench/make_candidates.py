#!/usr/bin/env python3
"""Writes, for each native KernelBench level-1 task, four solution files:
reference.json (the native CUDA reference), correct.json (the straightforward
starting kernel), wrong.json (the same kernel, then a second kernel that
changes every output element: wrong values everywhere) and unwritten.json
(the starting kernel launched with half the grid in x, so part of the output
is never written: a harness that does not poison outputs may find the right
values left there by an earlier run).

  make_candidates.py KSEARCH OUT_DIR TASK...
"""
import json
import subprocess
import sys
from pathlib import Path

ks, out = sys.argv[1], Path(sys.argv[2])
for task in sys.argv[3:]:
    spec = json.loads(subprocess.run([ks, "tasks", "--spec", task], check=True, capture_output=True, text=True).stdout)
    d = out / task.split("/")[-1]
    d.mkdir(parents=True, exist_ok=True)
    ref = spec["references"]["cuda"]
    start = spec["starting_points"][0]
    unwritten = json.loads(json.dumps(start))
    k0 = unwritten["launch_plan"]["kernels"][0]
    k0["grid"][0] = f"max(1, ({k0['grid'][0]}) / 2)"
    unwritten["name"] = "unwritten: half the grid"
    unwritten.pop("id", None)
    out_spec = next(t for t in spec["tensors"] if t.get("role") == "output" or t.get("is_output"))
    count = "*".join(f"({e})" for e in out_spec["shape"]) or "1"
    wrong = json.loads(json.dumps(start))
    wrong["sources"][0]["content"] += (
        '\nextern "C" __global__ void ks_check_perturb(float* out, long long n) {\n'
        "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;"
        " i += (long long)gridDim.x * blockDim.x) out[i] = out[i] * 1.5f + 1.0f;\n}\n")
    wrong["launch_plan"].setdefault("kernels", []).append(
        {"name": "ks_check_perturb", "grid": [f"min(4096, cdiv({count}, 256))"], "block": [256],
         "args": [out_spec["name"], {"i64": count}]})
    for v in wrong["launch_plan"].get("variants", []):
        v.setdefault("kernels", []).append(wrong["launch_plan"]["kernels"][-1])
    wrong["name"] = "wrong: every output changed"
    wrong.pop("id", None)
    for name, sol in (("reference", ref), ("correct", start), ("wrong", wrong), ("unwritten", unwritten)):
        (d / f"{name}.json").write_text(json.dumps(sol))
    print(d)
