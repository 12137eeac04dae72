#!/usr/bin/env python3
"""Writes, for each native KernelBench level-1 task, three solution files:
reference.json (the native CUDA reference), correct.json (the straightforward
starting kernel) and wrong.json (the same kernel launched with half the grid
in x, so part of the output is never written).

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
    wrong = json.loads(json.dumps(start))
    k0 = wrong["launch_plan"]["kernels"][0]
    k0["grid"][0] = f"max(1, ({k0['grid'][0]}) / 2)"
    wrong["name"] = "wrong: half the grid"
    wrong.pop("id", None)
    for name, sol in (("reference", ref), ("correct", start), ("wrong", wrong)):
        (d / f"{name}.json").write_text(json.dumps(sol))
    print(d)
